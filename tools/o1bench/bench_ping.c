/* o1bench ping: round-trip latency of PING through the shared-memory rings
 * on the spin path (client and daemon both busy-polling) and on the sleep
 * path (both asleep: futex wake-ups each way), and of a 128-byte
 * request/response over a plain Unix stream socket as the baseline (served
 * by a thread, and by a child process as a daemon would: "-proc"), all in
 * one run. --serve runs the front loop in-process on a thread instead of
 * pinging the daemon at --socket; --inproc does both in one run: the
 * daemon's paths, then the same shared-memory paths against an in-process
 * front loop on SOCKET.inproc (lines "inproc-..."), the floor of what the
 * daemon adds. --clients N adds the spin path with N clients pinging at
 * once (their samples pooled), and the serving process's CPU use while
 * idle is reported beside. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "o1/client.h"
#include "o1bench.h"
#include "shm/wire.h"

struct ping_args {
	const char *socket;
	const char *prefix; /* of the shm lines' labels ("inproc-" or "") */
	int serve, inproc;
	int count;
	int sleep_count;
	int gap_us;
	int clients;
	uint32_t spin_us;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int parse(int argc, char **argv, struct ping_args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--serve") || !strcmp(argv[i], "--inproc")) {
			*(argv[i][2] == 's' ? &a->serve : &a->inproc) = 1;
			continue;
		}
		if (!v)
			return -1;
		if (!strcmp(argv[i], "--socket"))
			a->socket = v;
		else if (!strcmp(argv[i], "--count"))
			a->count = atoi(v);
		else if (!strcmp(argv[i], "--sleep-count"))
			a->sleep_count = atoi(v);
		else if (!strcmp(argv[i], "--gap-us"))
			a->gap_us = atoi(v);
		else if (!strcmp(argv[i], "--clients"))
			a->clients = atoi(v);
		else if (!strcmp(argv[i], "--spin-us"))
			a->spin_us = (uint32_t)atoi(v);
		else
			return -1;
		i++;
	}
	if (!a->socket)
		a->socket = o1bench_socket;
	return a->socket && a->count > 0 && a->sleep_count > 0 &&
		       !(a->serve && a->inproc)
		   ? 0
		   : -1;
}

static void *serve_main(void *arg)
{
	o1_ipc_server_run(arg);
	return NULL;
}

static int start_server(const struct ping_args *a, struct o1_ipc_server **srv,
			pthread_t *t)
{
	struct o1_ipc_opts o = {.sz = sizeof(o),
				.socket_path = a->socket,
				.spin_us = a->spin_us,
				.max_clients = 4};
	int ret = o1_ipc_server_create(&o, NULL, srv);

	if (ret) {
		fprintf(stderr, "o1bench: cannot serve on %s: %s\n", a->socket,
			o1_client_strerror(ret));
		return ret;
	}
	return pthread_create(t, NULL, serve_main, *srv) ? -EAGAIN : 0;
}

static void stop_server(struct o1_ipc_server *srv, pthread_t t)
{
	o1_ipc_server_stop(srv);
	pthread_join(t, NULL);
	o1_ipc_server_destroy(srv);
}

/* Against an in-process front loop the sleep paths' gap must outlast its
 * spin window (else they measure the spin path). */
static void gap_past_spin(struct ping_args *a)
{
	if (a->gap_us <= (int)a->spin_us)
		a->gap_us = (int)a->spin_us + 1000;
}

/* A shared-memory path's line, its label after the run's prefix. */
static void print_shm(const struct ping_args *a, const char *label,
		      uint64_t *ns, size_t n)
{
	char l[64];

	snprintf(l, sizeof(l), "%s%s", a->prefix, label);
	o1bench_print_latency(l, ns, n);
}

static int shm_path(const struct ping_args *a, const char *label,
		    uint32_t client_spin_us, int n, int gap_us, uint64_t *ns)
{
	struct o1_client_opts o = {.sz = sizeof(o),
				   .socket_path = a->socket,
				   .name = "o1bench",
				   .spin_us = client_spin_us};
	struct o1_client *c;
	struct timespec gap = {.tv_nsec = gap_us * 1000l};
	int ret = o1_client_connect(&o, &c);

	if (ret) {
		fprintf(stderr, "o1bench: %s\n", o1_last_error());
		return ret;
	}
	for (int i = 0; i < 100 && !ret; i++) /* warm-up */
		ret = o1_client_ping(c, NULL);
	for (int i = 0; i < n && !ret; i++) {
		if (gap_us)
			nanosleep(&gap, NULL);
		ret = o1_client_ping(c, &ns[i]);
	}
	if (ret)
		fprintf(stderr, "o1bench: ping: %s\n", o1_last_error());
	else
		print_shm(a, label, ns, (size_t)n);
	o1_client_close(c);
	return ret;
}

struct spin_client {
	const struct ping_args *a;
	int n;
	uint64_t *ns;
	int ret;
	pthread_barrier_t *start;
};

static void *spin_client_main(void *arg)
{
	struct spin_client *s = arg;
	struct o1_client_opts o = {.sz = sizeof(o),
				   .socket_path = s->a->socket,
				   .name = "o1bench",
				   .spin_us = 1000000};
	struct o1_client *c;

	s->ret = o1_client_connect(&o, &c);
	pthread_barrier_wait(s->start);
	if (s->ret)
		return NULL;
	for (int i = 0; i < 100 && !s->ret; i++)
		s->ret = o1_client_ping(c, NULL);
	for (int i = 0; i < s->n && !s->ret; i++)
		s->ret = o1_client_ping(c, &s->ns[i]);
	o1_client_close(c);
	return NULL;
}

/* N clients on the spin path at once, each its own connection and thread;
 * one line over all their samples. */
static int shm_clients(const struct ping_args *a, int n_clients, uint64_t *ns)
{
	struct spin_client s[64];
	pthread_t t[64];
	pthread_barrier_t start;
	int per = a->count / n_clients, ret = 0, started = 0;
	char label[48];

	if (n_clients > 64 || per < 1)
		return -EINVAL;
	pthread_barrier_init(&start, NULL, (unsigned)n_clients + 1);
	for (int i = 0; i < n_clients; i++) {
		s[i] = (struct spin_client){a, per, ns + (size_t)i * per, 0,
					    &start};
		if (pthread_create(&t[i], NULL, spin_client_main, &s[i]))
			break;
		started++;
	}
	if (started < n_clients) { /* the barrier can never open: give up */
		fprintf(stderr, "o1bench: cannot start %d client threads\n",
			n_clients);
		exit(1);
	}
	pthread_barrier_wait(&start);
	for (int i = 0; i < n_clients; i++) {
		pthread_join(t[i], NULL);
		if (s[i].ret && !ret)
			ret = s[i].ret;
	}
	pthread_barrier_destroy(&start);
	if (ret) {
		fprintf(stderr, "o1bench: ping: %s\n", o1_client_strerror(ret));
		return ret;
	}
	snprintf(label, sizeof(label), "shm-spin-%dclients", n_clients);
	print_shm(a, label, ns, (size_t)per * n_clients);
	return 0;
}

/* The serving process's pid: the daemon's from its control socket's peer
 * credentials (a bare connect, closed at once), or our own with --serve. */
static pid_t server_pid(const struct ping_args *a)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ucred cr = {0};
	socklen_t len = sizeof(cr);
	int fd;

	if (a->serve)
		return getpid();
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->socket);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		cr.pid = 0;
	if (fd >= 0)
		close(fd);
	return cr.pid;
}

/* utime + stime of PID in clock ticks, or -1. */
static long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	long long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
				"%*u %lld %lld", &ut, &st) != 2)
		return -1;
	return ut + st;
}

/* CPU share of the serving process over 2 s with no client traffic
 * (with --serve this process's, whose only busy thread is the loop). */
static void idle_cpu(const struct ping_args *a)
{
	pid_t pid = server_pid(a);
	struct timespec two = {.tv_sec = 2};
	long long t0, t1;

	if (!pid || (t0 = cpu_ticks(pid)) < 0) {
		printf("idle-cpu unknown (no pid for %s)\n", a->socket);
		return;
	}
	nanosleep(&two, NULL);
	t1 = cpu_ticks(pid);
	printf("idle-cpu pid=%d percent=%.1f over_s=2\n", (int)pid,
	       t1 < t0 ? -1.0 : 100.0 * (double)(t1 - t0) /
				    (2.0 * (double)sysconf(_SC_CLK_TCK)));
}

static void *echo_main(void *arg)
{
	int fd = *(int *)arg;
	char buf[O1_WIRE_ENTRY_BYTES];

	while (recv(fd, buf, sizeof(buf), MSG_WAITALL) == sizeof(buf))
		if (send(fd, buf, sizeof(buf), 0) != sizeof(buf))
			break;
	return NULL;
}

/* The baseline: a 128-byte request and its echo over a Unix stream
 * socket, served by a thread of this process, or with PROC by a child
 * process (as a daemon would serve it: the switch between address spaces
 * paid, as through o1d). With a gap, both sides are asleep in recv() when
 * the request comes, as both sides of shm-sleep are. */
static int unix_path(const char *label, int n, int gap_us, bool proc,
		     uint64_t *ns)
{
	char buf[O1_WIRE_ENTRY_BYTES] = {1};
	struct timespec gap = {.tv_nsec = gap_us * 1000l};
	pthread_t t;
	pid_t child = -1;
	int sv[2], ret = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	if (proc) {
		fflush(stdout); /* not written twice by the child */
		child = fork();
		if (child < 0) {
			ret = -errno;
			close(sv[0]), close(sv[1]);
			return ret;
		}
		if (!child) {
			close(sv[0]);
			echo_main(&sv[1]);
			_exit(0);
		}
	} else if (pthread_create(&t, NULL, echo_main, &sv[1])) {
		close(sv[0]), close(sv[1]);
		return -EAGAIN;
	}
	for (int i = -100; i < n && !ret; i++) {
		uint64_t t0;

		if (gap_us && i >= 0)
			nanosleep(&gap, NULL);
		t0 = now_ns();

		if (send(sv[0], buf, sizeof(buf), 0) != sizeof(buf) ||
		    recv(sv[0], buf, sizeof(buf), MSG_WAITALL) != sizeof(buf))
			ret = -EIO;
		if (i >= 0)
			ns[i] = now_ns() - t0;
	}
	shutdown(sv[0], SHUT_RDWR);
	if (proc)
		waitpid(child, NULL, 0);
	else
		pthread_join(t, NULL);
	close(sv[0]);
	close(sv[1]);
	if (!ret)
		o1bench_print_latency(label, ns, (size_t)n);
	return ret;
}

/* The shared-memory paths against the front loop at a->socket. */
static int shm_paths(const struct ping_args *a, uint64_t *ns)
{
	/* Spin: back-to-back pings keep the daemon inside its spin window;
	 * the client busy-polls for the reply. */
	int ret = shm_path(a, "shm-spin", 1000000, a->count, 0, ns);

	if (!ret && a->clients > 1)
		ret = shm_clients(a, a->clients, ns);
	/* Sleep: a pause longer than the daemon's spin window before each
	 * ping, and a client that sleeps after 1 us. */
	if (!ret)
		ret =
		    shm_path(a, "shm-sleep", 1, a->sleep_count, a->gap_us, ns);
	/* The daemon asleep, the client waiting with libo1client's default
	 * spin (20 us): an application calling every few milliseconds. */
	if (!ret)
		ret = shm_path(a, "shm-sleep-daemon", 0, a->sleep_count,
			       a->gap_us, ns);
	return ret;
}

static int run(const struct ping_args *a, uint64_t *ns)
{
	int ret;

	printf("# o1bench ping: count=%d sleep_count=%d gap_us=%d clients=%d "
	       "serve=%s",
	       a->count, a->sleep_count, a->gap_us, a->clients,
	       a->serve ? "yes" : a->inproc ? "both" : "no");
	if (a->serve || a->inproc)
		printf(" daemon_spin_us=%u", a->spin_us);
	printf("\n");
	ret = shm_paths(a, ns);
	if (!ret)
		ret = unix_path("unix-socket", a->count, 0, false, ns);
	if (!ret)
		ret = unix_path("unix-socket-sleep", a->sleep_count, a->gap_us,
				false, ns);
	/* the same served by another process, as o1d serves the shm lines */
	if (!ret)
		ret = unix_path("unix-socket-proc", a->count, 0, true, ns);
	if (!ret)
		ret = unix_path("unix-socket-proc-sleep", a->sleep_count,
				a->gap_us, true, ns);
	if (!ret)
		idle_cpu(a);
	return ret;
}

/* --inproc: the shared-memory paths again against a front loop of this
 * process on SOCKET.inproc. */
static int run_inproc(const struct ping_args *a, uint64_t *ns)
{
	struct ping_args b = *a;
	struct o1_ipc_server *srv = NULL;
	char path[256];
	pthread_t t;
	int ret;

	snprintf(path, sizeof(path), "%s.inproc", a->socket);
	b.socket = path;
	b.prefix = "inproc-";
	b.serve = 1;
	gap_past_spin(&b);
	unlink(path);
	ret = start_server(&b, &srv, &t);
	if (ret)
		return ret;
	ret = shm_paths(&b, ns);
	stop_server(srv, t);
	unlink(path);
	return ret;
}

int o1bench_cmd_ping(int argc, char **argv)
{
	struct ping_args a = {.prefix = "",
			      .count = 100000,
			      .sleep_count = 2000,
			      .gap_us = 2000,
			      .clients = 1,
			      .spin_us = 200};
	struct o1_ipc_server *srv = NULL;
	pthread_t t;
	uint64_t *ns;
	int ret;

	bool help = argc == 2 && (!strcmp(argv[1], "--help") ||
				  !strcmp(argv[1], "-h"));

	if (help || parse(argc, argv, &a) || a.clients < 1 ||
	    a.clients > 64 || a.count < a.clients || a.sleep_count < 1 ||
	    a.gap_us < 0) {
		fprintf(help ? stdout : stderr,
			"usage: o1bench ping --socket PATH [--count N] "
			"[--sleep-count N] [--gap-us US] [--clients N "
			"(1-64)] [--serve | --inproc] [--spin-us US]\n");
		return help ? 0 : 2;
	}
	if (a.serve)
		gap_past_spin(&a);
	ns = calloc((size_t)(a.count > a.sleep_count ? a.count : a.sleep_count),
		    sizeof(*ns));
	if (!ns || (a.serve && start_server(&a, &srv, &t)))
		return 1;
	ret = run(&a, ns);
	if (!ret && a.inproc)
		ret = run_inproc(&a, ns);
	if (srv)
		stop_server(srv, t);
	free(ns);
	return ret ? 1 : 0;
}

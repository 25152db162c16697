/* o1bench ping: round-trip latency of PING through the shared-memory rings
 * on the spin path (client and daemon both busy-polling) and on the sleep
 * path (both asleep: futex wake-ups each way), and of a 128-byte
 * request/response over a plain Unix stream socket as the baseline, all in
 * one run. --serve runs the front loop in-process on a thread. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "o1/client.h"
#include "o1bench.h"
#include "shm/wire.h"

struct ping_args {
	const char *socket;
	int serve;
	int count;
	int sleep_count;
	int gap_us;
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

		if (!strcmp(argv[i], "--serve")) {
			a->serve = 1;
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
		else if (!strcmp(argv[i], "--spin-us"))
			a->spin_us = (uint32_t)atoi(v);
		else
			return -1;
		i++;
	}
	return a->socket && a->count > 0 && a->sleep_count > 0 ? 0 : -1;
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
		o1bench_print_latency(label, ns, (size_t)n);
	o1_client_close(c);
	return ret;
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

static int unix_path(int n, uint64_t *ns)
{
	char buf[O1_WIRE_ENTRY_BYTES] = {1};
	pthread_t t;
	int sv[2], ret = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	if (pthread_create(&t, NULL, echo_main, &sv[1]))
		return -EAGAIN;
	for (int i = -100; i < n && !ret; i++) {
		uint64_t t0 = now_ns();

		if (send(sv[0], buf, sizeof(buf), 0) != sizeof(buf) ||
		    recv(sv[0], buf, sizeof(buf), MSG_WAITALL) != sizeof(buf))
			ret = -EIO;
		if (i >= 0)
			ns[i] = now_ns() - t0;
	}
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(t, NULL);
	close(sv[0]);
	close(sv[1]);
	if (!ret)
		o1bench_print_latency("unix-socket", ns, (size_t)n);
	return ret;
}

static int run(const struct ping_args *a, uint64_t *ns)
{
	int ret;

	printf("# o1bench ping: count=%d sleep_count=%d gap_us=%d serve=%s",
	       a->count, a->sleep_count, a->gap_us, a->serve ? "yes" : "no");
	if (a->serve)
		printf(" daemon_spin_us=%u", a->spin_us);
	printf("\n");
	/* Spin: back-to-back pings keep the daemon inside its spin window;
	 * the client busy-polls for the reply. */
	ret = shm_path(a, "shm-spin", 1000000, a->count, 0, ns);
	/* Sleep: a pause longer than the daemon's spin window before each
	 * ping, and a client that sleeps after 1 us. */
	if (!ret)
		ret =
		    shm_path(a, "shm-sleep", 1, a->sleep_count, a->gap_us, ns);
	if (!ret)
		ret = unix_path(a->count, ns);
	return ret;
}

int o1bench_cmd_ping(int argc, char **argv)
{
	struct ping_args a = {.count = 100000,
			      .sleep_count = 2000,
			      .gap_us = 2000,
			      .spin_us = 200};
	struct o1_ipc_server *srv = NULL;
	pthread_t t;
	uint64_t *ns;
	int ret;

	if (parse(argc, argv, &a)) {
		fprintf(stderr, "usage: o1bench ping --socket PATH [--count N] "
				"[--sleep-count N] [--gap-us US] [--serve "
				"[--spin-us US]]\n");
		return 2;
	}
	if (a.gap_us <= (int)a.spin_us && a.serve)
		a.gap_us = (int)a.spin_us + 1000;
	ns = calloc((size_t)(a.count > a.sleep_count ? a.count : a.sleep_count),
		    sizeof(*ns));
	if (!ns || (a.serve && start_server(&a, &srv, &t)))
		return 1;
	ret = run(&a, ns);
	if (srv) {
		o1_ipc_server_stop(srv);
		pthread_join(t, NULL);
		o1_ipc_server_destroy(srv);
	}
	free(ns);
	return ret ? 1 : 0;
}

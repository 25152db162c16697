/* bench_wake: how fast one process wakes another that sleeps, and gets
 * woken back, through each kernel primitive a sleeping client and o1d's
 * front thread could use: the floor under issue 19's sleep path (PING
 * through o1d when both sides sleep), measured without o1d.
 *
 *   bench_wake [--count N] [--gap-us G] [--modes futex,pipe,...]
 *              [--cpus C,S]
 *
 * Two processes (fork). Each round trip: the client notes the time, wakes
 * the server and blocks until the server wakes it back; the server blocks
 * again at once. Nobody spins. Between round trips the client sleeps G
 * microseconds (default 2,000: the pace of o1bench's sleep pings, long
 * enough for idle CPUs to halt), so every wake-up finds its peer asleep.
 * Modes:
 *   futex    a word each way in shared memory, FUTEX_WAIT / FUTEX_WAKE
 *            (what shm/doorbell.c does when a side sleeps);
 *   eventfd  an eventfd each way, blocking read / write;
 *   pipe     a pipe each way, one byte;
 *   socket   a Unix stream socket pair, one byte each way (the socket
 *            o1bench compares against);
 *   epoll    pipes, the server waiting in epoll_wait before its read (a
 *            server that watches many clients' fds).
 * Pipes and Unix sockets wake their reader "synchronously" (the waker
 * tells the scheduler it is about to block, so the reader may run on the
 * waker's CPU); futexes and eventfds do not. --cpus C,S pins the client to
 * CPU C and the server to S (default: unpinned, the scheduler's choice).
 * Prints, per mode, the round trip's p50 / p99 / p999 / max in
 * microseconds and a RESULT line. Nothing here is a pass or fail on time. */
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum mode { M_FUTEX, M_EVENTFD, M_PIPE, M_SOCKET, M_EPOLL, M_N };
static const char *const mode_name[M_N] = {"futex", "eventfd", "pipe",
					   "socket", "epoll"};

/* The two directions' channels: futex words (shared memory) or fds. */
struct chan {
	uint32_t *word[2]; /* [0] to the server, [1] back */
	int rd[2], wr[2];  /* fds: read and write ends, each direction */
	int ep;		   /* the server's epoll set (M_EPOLL) */
};

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pin(int cpu)
{
	cpu_set_t s;

	if (cpu < 0)
		return;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s))
		perror("bench_wake: sched_setaffinity");
}

static long futex(uint32_t *w, int op, uint32_t v)
{
	return syscall(SYS_futex, w, op, v, NULL, NULL, 0);
}

/* Sends message V (non-zero) in direction D. */
static int post(const struct chan *c, enum mode m, int d, uint32_t v)
{
	uint64_t one = 1;
	char b = 1;

	switch (m) {
	case M_FUTEX:
		__atomic_store_n(c->word[d], v, __ATOMIC_RELEASE);
		return futex(c->word[d], FUTEX_WAKE, 1) < 0 ? -1 : 0;
	case M_EVENTFD:
		return write(c->wr[d], &one, 8) == 8 ? 0 : -1;
	default:
		return write(c->wr[d], &b, 1) == 1 ? 0 : -1;
	}
}

/* Blocks until message V arrives in direction D (SERVER: epoll first in
 * M_EPOLL). */
static int await(const struct chan *c, enum mode m, int d, uint32_t v,
		 int server)
{
	struct epoll_event ev;
	uint64_t n;
	char b;

	switch (m) {
	case M_FUTEX:
		while (__atomic_load_n(c->word[d], __ATOMIC_ACQUIRE) != v)
			if (futex(c->word[d], FUTEX_WAIT, v - 1) < 0 &&
			    errno != EAGAIN && errno != EINTR)
				return -1;
		return 0;
	case M_EVENTFD:
		return read(c->rd[d], &n, 8) == 8 ? 0 : -1;
	case M_EPOLL:
		if (server)
			while (epoll_wait(c->ep, &ev, 1, -1) != 1)
				if (errno != EINTR)
					return -1;
		return read(c->rd[d], &b, 1) == 1 ? 0 : -1;
	default:
		return read(c->rd[d], &b, 1) == 1 ? 0 : -1;
	}
}

static int open_chan(struct chan *c, enum mode m)
{
	int fd[2];

	memset(c, 0, sizeof(*c));
	c->ep = -1;
	if (m == M_FUTEX) {
		uint32_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

		if (w == MAP_FAILED)
			return -1;
		c->word[0] = w, c->word[1] = w + 16; /* apart: own lines */
		return 0;
	}
	for (int d = 0; d < 2; d++) {
		if (m == M_EVENTFD) {
			fd[0] = fd[1] = eventfd(0, 0);
			if (fd[0] < 0)
				return -1;
		} else if (m == M_SOCKET) {
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, fd))
				return -1;
		} else if (pipe(fd)) {
			return -1;
		}
		c->rd[d] = fd[0], c->wr[d] = fd[1];
	}
	if (m == M_EPOLL) {
		struct epoll_event ev = {.events = EPOLLIN};

		c->ep = epoll_create1(0);
		if (c->ep < 0 || epoll_ctl(c->ep, EPOLL_CTL_ADD, c->rd[0], &ev))
			return -1;
	}
	return 0;
}

static void close_chan(struct chan *c, enum mode m)
{
	if (m == M_FUTEX) {
		munmap(c->word[0], 4096);
		return;
	}
	for (int d = 0; d < 2; d++) {
		close(c->rd[d]);
		if (c->wr[d] != c->rd[d])
			close(c->wr[d]);
	}
	if (c->ep >= 0)
		close(c->ep);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double pct(const double *v, uint32_t n, double p)
{
	uint32_t i = (uint32_t)(p * (n - 1) + 0.5);

	return v[i < n ? i : n - 1];
}

/* COUNT round trips of mode M; 0, or -1 with the failure printed. */
static int run(enum mode m, uint32_t count, uint32_t gap_us,
	       const int cpus[2])
{
	struct timespec gap = {gap_us / 1000000, (long)(gap_us % 1000000) * 1000};
	double *rt = malloc(sizeof(double) * count);
	struct chan c;
	int status, err = 0;
	pid_t pid;

	if (!rt || open_chan(&c, m)) {
		fprintf(stderr, "bench_wake: %s: cannot set up: %s\n",
			mode_name[m], strerror(errno));
		free(rt);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		perror("bench_wake: fork");
		close_chan(&c, m);
		free(rt);
		return -1;
	}
	if (pid == 0) {
		pin(cpus[1]);
		for (uint32_t i = 1; i <= count; i++)
			if (await(&c, m, 0, i, 1) || post(&c, m, 1, i))
				_exit(1);
		_exit(0);
	}
	pin(cpus[0]);
	for (uint32_t i = 1; !err && i <= count; i++) {
		double t0;

		if (gap_us)
			nanosleep(&gap, NULL);
		t0 = now_us();
		err = post(&c, m, 0, i) || await(&c, m, 1, i, 0);
		rt[i - 1] = now_us() - t0;
	}
	if (err)
		kill(pid, SIGKILL);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		err = 1;
	close_chan(&c, m);
	if (err) {
		fprintf(stderr, "bench_wake: %s: a round trip failed\n",
			mode_name[m]);
		free(rt);
		return -1;
	}
	qsort(rt, count, sizeof(double), cmp_double);
	printf("%-8s p50 %8.1f  p99 %8.1f  p999 %8.1f  max %8.1f us\n",
	       mode_name[m], pct(rt, count, 0.5), pct(rt, count, 0.99),
	       pct(rt, count, 0.999), rt[count - 1]);
	printf("RESULT wake mode=%s count=%u gap_us=%u p50=%.2f p99=%.2f "
	       "p999=%.2f max=%.2f\n",
	       mode_name[m], count, gap_us, pct(rt, count, 0.5),
	       pct(rt, count, 0.99), pct(rt, count, 0.999), rt[count - 1]);
	free(rt);
	return 0;
}

/* Whether M is named in the comma-separated MODES. */
static int wanted(const char *modes, enum mode m)
{
	size_t n = strlen(mode_name[m]);

	for (const char *p = modes; (p = strstr(p, mode_name[m])); p += n)
		if ((p == modes || p[-1] == ',') && (!p[n] || p[n] == ','))
			return 1;
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: bench_wake [--count N] [--gap-us G] "
			"[--modes futex,eventfd,pipe,socket,epoll] "
			"[--cpus CLIENT,SERVER]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"count", required_argument, NULL, 'n'},
	    {"gap-us", required_argument, NULL, 'g'},
	    {"modes", required_argument, NULL, 'm'},
	    {"cpus", required_argument, NULL, 'c'},
	    {0, 0, 0, 0}};
	const char *modes = "futex,eventfd,pipe,socket,epoll";
	uint32_t count = 2000, gap_us = 2000;
	int cpus[2] = {-1, -1}, opt, rc = 0, any = 0;
	char *end;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			count = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || !count || count > 10000000)
				return usage();
			break;
		case 'g':
			gap_us = (uint32_t)strtoul(optarg, &end, 10);
			if (*end || gap_us > 1000000)
				return usage();
			break;
		case 'm':
			modes = optarg;
			break;
		case 'c':
			if (sscanf(optarg, "%d,%d", &cpus[0], &cpus[1]) != 2 ||
			    cpus[0] < 0 || cpus[1] < 0)
				return usage();
			break;
		default:
			return usage();
		}
	}
	for (int m = 0; m < M_N; m++)
		any |= wanted(modes, (enum mode)m);
	if (optind != argc || !any)
		return usage();
	printf("bench_wake: %u round trips a mode, %u us apart, client on "
	       "CPU %d, server on %d (-1: unpinned), %ld CPUs online\n",
	       count, gap_us, cpus[0], cpus[1], sysconf(_SC_NPROCESSORS_ONLN));
	fflush(stdout);
	for (int m = 0; m < M_N; m++) {
		if (!wanted(modes, (enum mode)m))
			continue;
		rc |= run((enum mode)m, count, gap_us, cpus) ? 1 : 0;
		fflush(stdout);
	}
	return rc;
}

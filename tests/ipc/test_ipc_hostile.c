/* Hostile clients against the front loop's guards (daemon/ipc/guard.c,
 * in the test server), each beside well-behaved ones that must still be
 * served:
 *   silent flood  a process holds 64 connections that never say hello and
 *                 reopens each one o1d closes;
 *   uid cap       one uid past ipc.max_clients_per_uid;
 *   wake storm    a client rings its doorbell in a loop, never publishing;
 *   decay         violations leak away, abuse that goes on is still cut;
 *   log flood     thousands of refusals from one uid.
 * Short by default (ctest); --long runs each ten times longer, by hand.
 * --eventfd uses the POLL_ADD doorbells; --only NAME runs one test. */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "ipc_harness.h"
#include "o1/client.h"
#include "shm/ring.h"

static int eventfd_mode, scale = 1;

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Starts the server with args (NULL-terminated), its log in a file. */
static void start(struct test_server *s, const char *const *args)
{
	const char *all[16] = {0};
	int n = 0;

	memset(s, 0, sizeof(*s));
	snprintf(s->log, sizeof(s->log), "/tmp/o1ipchostile.%d.log", (int)getpid());
	if (eventfd_mode)
		all[n++] = "--eventfd";
	for (int i = 0; args && args[i] && n < 15; i++)
		all[n++] = args[i];
	assert_int_equal(server_start(s, O1_TEST_SERVER, all), 0);
}

static void stop(struct test_server *s)
{
	assert_int_equal(server_stop(s), 0);
	if (!getenv("O1_KEEP_LOG"))
		unlink(s->log);
}

/* The server's log so far (malloc'd). */
static char *server_log(struct test_server *s)
{
	FILE *f = fopen(s->log, "r");
	char *buf = NULL;
	size_t cap = 0, len = 0, n;

	assert_non_null(f);
	do {
		if (len + 4096 + 1 > cap) {
			cap = 2 * cap + 8192;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		n = fread(buf + len, 1, 4096, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = 0;
	return buf;
}

static int lines_with(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)); p++)
		n++;
	return n;
}

static struct o1_client *connect_good(struct test_server *s, const char *name,
				      int *ret)
{
	struct o1_client_opts o = {
	    .sz = sizeof(o), .socket_path = s->path, .name = name};
	struct o1_client *c = NULL;

	*ret = o1_client_connect(&o, &c);
	return c;
}

/* A good client beside the silent flood: one whose hello the front loop
 * has not read before ipc.max_half_open newer silent connections came is
 * evicted as the oldest silent one (-O1_E_QUOTA, the budget's rule), which
 * a process the machine runs late meets now and then (a fresh clone's
 * ASan run on a 2-core machine: check_serving's one try refused); it
 * connects again, up to QUOTA_TRIES times, as a client told "quota
 * exceeded" would. */
#define QUOTA_TRIES 20

static struct o1_client *connect_beside_flood(struct test_server *s,
					      const char *name, int *ret)
{
	struct o1_client *c = connect_good(s, name, ret);

	for (int i = 1; *ret == -O1_E_QUOTA && i < QUOTA_TRIES; i++) {
		usleep(1000);
		c = connect_good(s, name, ret);
	}
	return c;
}

/* A good client gets a PONG and a full scripted stream. */
static void check_serving(struct test_server *s)
{
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 77,
				    .text = "abc",
				    .text_len = 3,
				    .max_tokens = 5};
	struct o1_event fin;
	struct o1_client *c;
	int ret;

	c = connect_beside_flood(s, "good", &ret);
	if (ret)
		fail_msg("connect: %d %s", ret, o1_last_error());
	assert_int_equal(o1_client_ping(c, NULL), 0);
	assert_int_equal(o1_client_generate(c, &so, NULL, NULL, &fin), 0);
	assert_int_equal(fin.generated_tokens, 5);
	o1_client_close(c);
}

static int raw_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Child: n silent connections, each reopened as soon as o1d closes it;
 * says 'r' on ready_fd once all are open, runs until killed. */
static void silent_flood(const char *path, int n, int ready_fd)
{
	struct pollfd p[64];

	for (int i = 0; i < n; i++) {
		p[i].fd = raw_socket(path);
		p[i].events = POLLIN;
		if (p[i].fd < 0)
			_exit(1);
	}
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	for (;;) {
		if (poll(p, (nfds_t)n, -1) < 0)
			_exit(1);
		for (int i = 0; i < n; i++) {
			if (!p[i].revents)
				continue;
			close(p[i].fd);
			while ((p[i].fd = raw_socket(path)) < 0)
				usleep(1000);
		}
	}
}

static pid_t fork_child(void (*fn)(const char *, int, int), const char *path,
			int arg)
{
	int fds[2];
	pid_t pid;
	char b;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with a failed test */
		close(fds[0]);
		fn(path, arg, fds[1]);
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &b, 1), 1);
	close(fds[0]);
	return pid;
}

static void end_child(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
}

/* Silent connections have their own budget: the flood evicts its own
 * oldest ones, six good clients connect beside it (another try is
 * allowed where one met a full burst: connect_beside_flood), stay and
 * are served;
 * each eviction's log line names the flooder's pid and uid. */
static void test_silent_flood(void **state)
{
	const char *args[] = {"--max-clients", "8", NULL};
	struct o1_client *good[6];
	struct server_stats st;
	struct test_server s;
	char *log, want[96];
	pid_t flooder;
	int ret;

	(void)state;
	start(&s, args);
	flooder = fork_child(silent_flood, s.path, 64);
	for (int round = 0; round < scale; round++) {
		for (int i = 0; i < 6; i++) {
			good[i] = connect_beside_flood(&s, "good", &ret);
			if (ret)
				fail_msg("client %d: %d %s", i, ret,
					 o1_last_error());
		}
		for (int i = 0; i < 6; i++) {
			assert_int_equal(o1_client_ping(good[i], NULL), 0);
			o1_client_close(good[i]);
		}
	}
	check_serving(&s);
	assert_int_equal(server_stats(&s, &st), 0);
	assert_true(st.evicted >= 64 - 16);
	end_child(flooder);
	log = server_log(&s);
	snprintf(want, sizeof(want), "of pid %d uid %u: no hello yet",
		 (int)flooder, (unsigned)getuid());
	assert_non_null(strstr(log, want));
	free(log);
	stop(&s);
}

static int connected_at_most(const struct server_stats *st, void *arg)
{
	return st->connected <= (unsigned long long)(uintptr_t)arg;
}

/* A uid may hold max_clients_per_uid connections, hello or not: the next
 * one is refused with -O1_E_QUOTA, logged with its pid and uid, and a
 * connection closed makes room again. */
static void test_uid_cap(void **state)
{
	const char *args[] = {"--per-uid", "3", NULL};
	struct o1_client *a, *b, *c;
	struct server_stats st;
	struct test_server s;
	char *log, want[96];
	int silent, ret;

	(void)state;
	start(&s, args);
	silent = raw_socket(s.path);
	assert_true(silent >= 0);
	a = connect_good(&s, "a", &ret);
	assert_int_equal(ret, 0);
	b = connect_good(&s, "b", &ret);
	assert_int_equal(ret, 0);
	c = connect_good(&s, "c", &ret);
	assert_int_equal(ret, -O1_E_QUOTA);
	assert_null(c);
	assert_non_null(strstr(o1_last_error(), "quota"));
	close(silent);
	/* the hang-up reaches the loop in its own time: retry until then */
	for (int i = 0; i < 500 && ret; i++) {
		c = connect_good(&s, "c", &ret);
		if (ret)
			usleep(10000);
	}
	assert_int_equal(ret, 0);
	assert_int_equal(o1_client_ping(c, NULL), 0);
	assert_int_equal(server_stats(&s, &st), 0);
	assert_true(st.uid_refused >= 1);
	o1_client_close(a);
	o1_client_close(b);
	o1_client_close(c);
	assert_int_equal(server_wait(&s, connected_at_most, (void *)0, &st), 0);
	log = server_log(&s);
	snprintf(want, sizeof(want), "of pid %d uid %u: it has 3",
		 (int)getpid(), (unsigned)getuid());
	assert_non_null(strstr(log, want));
	free(log);
	stop(&s);
}

/* Child: a connected client that rings its doorbell in a loop and never
 * publishes anything. */
static void wake_storm(const char *path, int unused, int ready_fd)
{
	struct o1_wire_hello h;
	struct raw_client r;

	(void)unused;
	raw_hello(&h);
	if (raw_connect(&r, path, &h, NULL, 0))
		_exit(1);
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	for (;;)
		raw_ring(&r);
}

/* utime + stime of pid, in clock ticks. */
static unsigned long long cpu_ticks(pid_t pid)
{
	unsigned long long ut = 0, st = 0;
	char path[64], buf[1024], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	p = strrchr(buf, ')'); /* the name may hold spaces */
	assert_non_null(p);
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
				       "%*u %*u %llu %llu",
				&ut, &st),
			 2);
	return ut + st;
}

static int stormed(const struct server_stats *st, void *arg)
{
	(void)arg;
	return st->storms >= 1 && st->violations >= 1;
}

/* A storm of empty wake-ups is counted, is a violation, and throttles
 * its client: meanwhile the loop stays far from a busy core and serves
 * the others; storms that go on cut the client off. */
static void test_wake_storm(void **state)
{
	const char *args[] = {"--max-violations", "3", NULL};
	unsigned long long t0, used, hz = (unsigned long long)sysconf(_SC_CLK_TCK);
	uint64_t wall0, wall;
	struct server_stats st;
	struct test_server s;
	pid_t stormer;

	(void)state;
	start(&s, args);
	stormer = fork_child(wake_storm, s.path, 0);
	/* the storm goes on; a throttled client's wake-ups wake nobody, so
	 * the loop mostly sleeps (without the throttle: a whole core) */
	t0 = cpu_ticks(s.pid);
	wall0 = ms_now();
	usleep(1000000u * (unsigned)scale);
	used = (cpu_ticks(s.pid) - t0) * 1000 / hz;
	wall = ms_now() - wall0;
	print_message("the loop used %llu ms of CPU in %llu ms of storm\n",
		      used, (unsigned long long)wall);
	if (used * 2 > wall)
		fail_msg("the loop used %llu ms of CPU in %llu ms of storm",
			 used, (unsigned long long)wall);
	assert_int_equal(server_wait(&s, stormed, NULL, &st), 0);
	assert_true(st.wake_empty >= 100);
	check_serving(&s);
	for (int i = 0; i < 1000 && st.kicked < 1; i++) {
		usleep(10000);
		assert_int_equal(server_stats(&s, &st), 0);
	}
	assert_int_equal(st.kicked, 1);
	assert_true(st.storms >= 3);
	check_serving(&s);
	end_child(stormer);
	stop(&s);
}

static int admin_violations(int fd)
{
	char reply[64];
	ssize_t n;
	int v;

	assert_int_equal(send(fd, "violations", 10, 0), 10);
	n = recv(fd, reply, sizeof(reply) - 1, 0);
	assert_true(n > 0);
	reply[n] = 0;
	assert_int_equal(sscanf(reply, "violations=%d", &v), 1);
	return v;
}

/* A raw client with its own views of its rings. */
struct raw_rings {
	struct raw_client r;
	struct o1_ring sq, cq;
};

/* Publishes one entry and reads the one event it gets (5 s limit). */
static void exchange(struct raw_rings *rr, const union o1_wire_entry *e,
		     union o1_wire_entry *out)
{
	const void *cslot;
	void *slot;

	assert_int_equal(o1_ring_claim(&rr->sq, &slot), 0);
	memcpy(slot, e, sizeof(*e));
	o1_ring_commit(&rr->sq);
	raw_ring(&rr->r);
	for (int i = 0; i < 5000; i++) {
		if (o1_ring_peek(&rr->cq, &cslot) == 0) {
			memcpy(out, cslot, sizeof(*out));
			o1_ring_advance(&rr->cq);
			o1_ring_release(&rr->cq);
			return;
		}
		usleep(1000);
	}
	fail_msg("no event from the daemon");
}

/* An entry with an unknown op: protocol abuse, an ERROR event. */
static void abuse(struct raw_rings *rr)
{
	union o1_wire_entry e, ev;

	memset(&e, 0, sizeof(e));
	e.op = 0x55;
	exchange(rr, &e, &ev);
	assert_int_equal(ev.op, O1_EV_ERROR);
	assert_int_equal(ev.error.error, -O1_E_PROTOCOL);
}

/* Violations leak (one per --decay-ms): two, forgotten, then two more
 * leave the connection up at a limit of three (four in all); a third in
 * a row cuts it. */
static void test_violation_decay(void **state)
{
	const char *args[] = {"--max-violations", "3", "--decay-ms", "200",
			      NULL};
	union o1_wire_entry e, ev;
	struct o1_wire_hello h;
	struct raw_client admin;
	struct raw_rings r;
	struct server_stats st;
	struct test_server s;
	int v = -1;

	(void)state;
	start(&s, args);
	raw_hello(&h);
	assert_int_equal(raw_connect(&r.r, s.path, &h, NULL, 0), 0);
	o1_region_rings(r.r.base, &r.r.l, &r.sq, &r.cq);
	h.flags = O1_HELLO_ADMIN;
	assert_int_equal(raw_connect(&admin, s.path, &h, NULL, 0), 1);
	for (int round = 0; round < scale; round++) {
		abuse(&r);
		abuse(&r);
		assert_true(admin_violations(admin.sock) >= 1);
		for (int i = 0; i < 1000 && v; i++) {
			v = admin_violations(admin.sock);
			if (v)
				usleep(10000);
		}
		assert_int_equal(v, 0);
		v = -1;
	}
	abuse(&r);
	abuse(&r);
	memset(&e, 0, sizeof(e));
	e.ping.op = O1_OP_PING;
	e.ping.cookie = 99;
	e.ping.sent_ns = ms_now() * 1000000;
	exchange(&r, &e, &ev);
	assert_int_equal(ev.op, O1_EV_PONG);
	abuse(&r); /* the third at once: its ERROR still comes, then the end */
	assert_true(raw_hung_up(&r.r, 5000));
	raw_close(&r.r);
	raw_close(&admin);
	assert_int_equal(server_stats(&s, &st), 0);
	assert_int_equal(st.kicked, 1);
	assert_int_equal(st.violations, 2u * (unsigned)scale + 3);
	check_serving(&s);
	stop(&s);
}

/* Sum of N over "N more like this suppressed ..., the last: <what>". */
static int suppressed(const char *text, const char *what)
{
	int sum = 0;

	for (const char *p = text; (p = strstr(p, " more like this")); p++) {
		const char *q = p, *eol = strchr(p, '\n'), *last;

		last = strstr(p, what);
		if (!last || (eol && last > eol))
			continue;
		while (q > text && q[-1] >= '0' && q[-1] <= '9')
			q--;
		sum += atoi(q);
	}
	return sum;
}

/* Refusals of one uid: each is either printed (a burst a second) or
 * counted in a "more like this suppressed" line, none lost, and the log
 * stays small. */
static void test_log_flood(void **state)
{
	const char *args[] = {"--allow-uid", NULL, NULL};
	const char *what = "ipc: refusing client";
	int n = 2000 * scale, printed = 0, counted = 0;
	struct o1_wire_hello h;
	struct raw_client r;
	struct test_server s;
	uint64_t t0 = ms_now(), secs;
	char uid[16], *log = NULL;

	(void)state;
	snprintf(uid, sizeof(uid), "%u", getuid() + 1);
	args[1] = uid;
	start(&s, args);
	raw_hello(&h);
	for (int i = 0; i < n; i++) {
		assert_int_equal(raw_connect(&r, s.path, &h, NULL, 0), -EACCES);
		raw_close(&r);
	}
	secs = (ms_now() - t0) / 1000;
	/* the count of the last window comes out on the loop's tick */
	for (int i = 0; i < 1000; i++) {
		free(log);
		log = server_log(&s);
		printed = lines_with(log, what) - lines_with(log, "the last: ipc");
		counted = suppressed(log, what);
		if (printed + counted == n)
			break;
		usleep(10000);
	}
	secs = (ms_now() - t0) / 1000 > secs ? (ms_now() - t0) / 1000 : secs;
	assert_int_equal(printed + counted, n);
	if ((uint64_t)printed > 10 * (secs + 2))
		fail_msg("%d refusal lines in %llu s", printed,
			 (unsigned long long)secs);
	free(log);
	stop(&s);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_silent_flood),
	    cmocka_unit_test(test_uid_cap),
	    cmocka_unit_test(test_wake_storm),
	    cmocka_unit_test(test_violation_decay),
	    cmocka_unit_test(test_log_flood),
	};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--eventfd"))
			eventfd_mode = 1;
		else if (!strcmp(argv[i], "--long"))
			scale = 10;
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			cmocka_set_test_filter(argv[++i]);
	}
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Several front threads (daemon/ipc/shards.c), through the test server
 * with --fronts: clients spread over the fronts and each is served; a
 * client that hangs up, on any front, frees its slot for the next one;
 * draining reaches every front's clients before the switch returns, with
 * requests in flight on all of them, which are still cancelled and ended;
 * the server stops cleanly with requests in flight on several fronts; and
 * admin connections still answer, listing clients of every front.
 *
 * Clients connect one after another, so the lead hands each to the front
 * with the fewest (the lead on a tie): with FRONTS clients, one a front;
 * the script's "fronts" admin message counts the requests each front took,
 * which says where they went. Everything is counted or waited for (10 s
 * deadlines), never timed. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "ipc_harness.h"
#include "o1/client.h"

#define FRONTS	   4
#define PER_FRONT  2
#define WAIT_NS	   10000000000ll

static int eventfd_mode;

static void start(struct test_server *s, const char *a0, const char *a1)
{
	const char *args[8] = {"--fronts", "4"};
	int n = 2;

	memset(s, 0, sizeof(*s));
	if (eventfd_mode)
		args[n++] = "--eventfd";
	args[n++] = a0;
	if (a0)
		args[n++] = a1;
	assert_int_equal(server_start(s, O1_TEST_SERVER, args), 0);
}

static struct o1_client *connect_client(struct test_server *s,
					const char *name)
{
	struct o1_client_opts o = {
	    .sz = sizeof(o), .socket_path = s->path, .name = name};
	struct o1_client *c = NULL;
	int ret = o1_client_connect(&o, &c);

	if (ret)
		fail_msg("connect: %d %s", ret, o1_last_error());
	return c;
}

/* A ping, then a scripted stream of 5 tokens to its FINAL. */
static void serve_one(struct o1_client *c, uint64_t req_id)
{
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = req_id,
				    .text = "abc",
				    .text_len = 3,
				    .max_tokens = 5};
	struct o1_event fin;

	assert_int_equal(o1_client_ping(c, NULL), 0);
	assert_int_equal(o1_client_generate(c, &so, NULL, NULL, &fin), 0);
	assert_int_equal(fin.finish, O1_FINISH_REASON_LENGTH);
	assert_int_equal(fin.generated_tokens, 5);
}

/* A request the script holds until it is cancelled. */
static void submit_hold(struct o1_client *c, uint64_t req_id)
{
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = req_id,
				    .text = "hold",
				    .text_len = 4,
				    .max_tokens = 8};

	assert_int_equal(o1_client_submit(c, &so), 0);
}

/* The next FINAL on c (tokens before it skipped). */
static void wait_final(struct o1_client *c, struct o1_event *ev)
{
	int ret;

	do {
		ret = o1_client_wait(c, ev, WAIT_NS);
		if (ret <= 0)
			fail_msg("wait: %d %s", ret, o1_last_error());
	} while (ev->type != O1_EVENT_FINAL);
}

static int admin_connect(const char *path)
{
	struct o1_wire_hello h;
	struct raw_client r;

	raw_hello(&h);
	h.flags = O1_HELLO_ADMIN;
	assert_int_equal(raw_connect(&r, path, &h, NULL, 0), 1);
	return r.sock;
}

/* One admin message and its reply, as a string. */
static void admin_ask(int fd, const char *msg, char *reply, size_t cap)
{
	ssize_t n;

	assert_int_equal(send(fd, msg, strlen(msg), 0), (ssize_t)strlen(msg));
	n = recv(fd, reply, cap - 1, 0);
	assert_true(n > 0);
	reply[n] = 0;
}

static int connected_is(const struct server_stats *st, void *arg)
{
	return st->connected == (unsigned long long)(uintptr_t)arg;
}

static int requests_are(const struct server_stats *st, void *arg)
{
	return st->requests == (unsigned long long)(uintptr_t)arg;
}

static int deaths_are(const struct server_stats *st, void *arg)
{
	return st->deaths == (unsigned long long)(uintptr_t)arg;
}

/* PER_FRONT clients a front, each served; the requests went one a client
 * to every front, and the admin listing names clients of all of them. */
static void test_spread_and_served(void **state)
{
	struct o1_client *c[FRONTS * PER_FRONT];
	struct server_stats st;
	struct test_server s;
	char reply[128];
	int fd;

	(void)state;
	start(&s, NULL, NULL);
	for (int i = 0; i < FRONTS * PER_FRONT; i++)
		c[i] = connect_client(&s, "spread");
	for (int i = 0; i < FRONTS * PER_FRONT; i++)
		serve_one(c[i], (uint64_t)i);
	fd = admin_connect(s.path);
	admin_ask(fd, "fronts", reply, sizeof(reply));
	assert_string_equal(reply, "fronts=4 served=2,2,2,2");
	admin_ask(fd, "clients", reply, sizeof(reply));
	assert_string_equal(reply, "clients=8 first=spread");
	close(fd);
	assert_int_equal(server_wait(&s, connected_is,
				     (void *)(uintptr_t)(FRONTS * PER_FRONT),
				     &st),
			 0);
	for (int i = 0; i < FRONTS * PER_FRONT; i++)
		o1_client_close(c[i]);
	assert_int_equal(server_wait(&s, connected_is, (void *)0, &st), 0);
	assert_int_equal(st.deaths, 0);
	assert_int_equal(server_stop(&s), 0);
}

/* A client on every front hangs up with a request in flight: each is a
 * death, each slot comes back (max_clients is FRONTS, so the next FRONTS
 * clients fit only if every front gave its slot back), and the new ones
 * are served on every front again (admin asked last: it takes a slot). */
static void test_hang_up_on_every_front(void **state)
{
	struct o1_client *c[FRONTS];
	struct server_stats st;
	struct test_server s;
	char reply[128];
	int fd;

	(void)state;
	start(&s, "--max-clients", "4");
	for (int round = 1; round <= 2; round++) {
		for (int i = 0; i < FRONTS; i++) {
			c[i] = connect_client(&s, "leaver");
			submit_hold(c[i], (uint64_t)i);
		}
		/* taken (a hang-up seen first would leave nothing held) */
		assert_int_equal(server_wait(&s, requests_are,
					     (void *)(uintptr_t)(FRONTS * round),
					     &st),
				 0);
		for (int i = 0; i < FRONTS; i++)
			o1_client_close(c[i]);
		assert_int_equal(server_wait(&s, deaths_are,
					     (void *)(uintptr_t)(FRONTS * round),
					     &st),
				 0);
		assert_int_equal(
		    server_wait(&s, connected_is, (void *)0, &st), 0);
	}
	for (int i = 0; i < FRONTS; i++)
		c[i] = connect_client(&s, "after");
	for (int i = 0; i < FRONTS; i++)
		serve_one(c[i], 100 + (uint64_t)i);
	for (int i = 0; i < FRONTS; i++)
		o1_client_close(c[i]);
	assert_int_equal(server_wait(&s, connected_is, (void *)0, &st), 0);
	fd = admin_connect(s.path);
	admin_ask(fd, "fronts", reply, sizeof(reply));
	assert_string_equal(reply, "fronts=4 served=3,3,3,3");
	close(fd);
	assert_int_equal(server_stop(&s), 0);
}

/* Counts of every front reach the lead's stats at once, with no tick or
 * sleep of theirs: the fronts spin for 10 s (--spin-us) after their last
 * work, and the stats are read once, right after each client's FINAL,
 * which its front posted a pass after counting the ping and the request
 * (shards.c's head). Before, a front's counts came at its next 100 ms
 * tick or sleep, so this read missed the last front's. */
static void test_counted_at_once(void **state)
{
	struct o1_client *c[FRONTS];
	struct server_stats st;
	struct test_server s;
	char reply[128];
	int fd;

	(void)state;
	start(&s, "--spin-us", "10000000");
	for (int i = 0; i < FRONTS; i++)
		c[i] = connect_client(&s, "counted");
	for (int i = 0; i < FRONTS; i++)
		serve_one(c[i], (uint64_t)i);
	assert_int_equal(server_stats(&s, &st), 0);
	assert_int_equal(st.pings, FRONTS);
	assert_int_equal(st.requests, FRONTS);
	fd = admin_connect(s.path);
	admin_ask(fd, "fronts", reply, sizeof(reply));
	assert_string_equal(reply, "fronts=4 served=1,1,1,1");
	close(fd);
	for (int i = 0; i < FRONTS; i++)
		o1_client_close(c[i]);
	assert_int_equal(server_wait(&s, connected_is, (void *)0, &st), 0);
	assert_int_equal(st.pings, FRONTS);
	assert_int_equal(st.requests, FRONTS);
	assert_int_equal(st.deaths, 0);
	assert_int_equal(server_stop(&s), 0);
}

/* Toggles draining through the server's SIGINT and reads its answer. */
static void toggle_draining(struct test_server *s, const char *want)
{
	char line[64];

	kill(s->pid, SIGINT);
	assert_non_null(fgets(line, sizeof(line), s->out));
	assert_string_equal(line, want);
}

/* Draining with a request in flight on every front: once the switch is
 * on, every client's new request is refused with DRAINING at once (no
 * front lags behind), the held ones are still cancelled and ended by
 * their own front, pings still work; off again, all are served. */
static void test_drain_in_flight(void **state)
{
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .text = "abc",
				    .text_len = 3,
				    .max_tokens = 2};
	struct o1_client *c[FRONTS];
	struct server_stats st;
	struct test_server s;
	struct o1_event ev;

	(void)state;
	start(&s, NULL, NULL);
	for (int i = 0; i < FRONTS; i++) {
		c[i] = connect_client(&s, "drain");
		submit_hold(c[i], 1);
	}
	/* taken before the switch (one racing it would be refused) */
	assert_int_equal(
	    server_wait(&s, requests_are, (void *)(uintptr_t)FRONTS, &st), 0);
	toggle_draining(&s, "draining=1\n");
	for (int i = 0; i < FRONTS; i++) {
		so.req_id = 2;
		assert_int_equal(o1_client_submit(c[i], &so), 0);
		wait_final(c[i], &ev);
		assert_int_equal(ev.req_id, 2);
		assert_int_equal(ev.finish, O1_FINISH_REASON_ERROR);
		assert_int_equal(ev.error, -O1_E_DRAINING);
		assert_int_equal(o1_client_cancel(c[i], 1), 0);
		wait_final(c[i], &ev);
		assert_int_equal(ev.req_id, 1);
		assert_int_equal(ev.finish, O1_FINISH_REASON_CANCELLED);
		assert_int_equal(o1_client_ping(c[i], NULL), 0);
	}
	toggle_draining(&s, "draining=0\n");
	for (int i = 0; i < FRONTS; i++)
		serve_one(c[i], 3);
	for (int i = 0; i < FRONTS; i++)
		o1_client_close(c[i]);
	assert_int_equal(server_stop(&s), 0);
}

/* SIGTERM with requests held on every front (and a second client on
 * some): the fronts stop, every client is torn down on its own front and
 * the server exits 0 (under ASan: nothing leaked or used after free). */
static void test_stop_in_flight(void **state)
{
	struct o1_client *c[FRONTS + 2];
	struct server_stats st;
	struct test_server s;

	(void)state;
	start(&s, NULL, NULL);
	for (int i = 0; i < FRONTS + 2; i++) {
		c[i] = connect_client(&s, "stop");
		submit_hold(c[i], (uint64_t)i);
		submit_hold(c[i], 100 + (uint64_t)i);
	}
	assert_int_equal(server_wait(&s, requests_are,
				     (void *)(uintptr_t)(2 * (FRONTS + 2)),
				     &st),
			 0);
	assert_int_equal(server_stop(&s), 0);
	for (int i = 0; i < FRONTS + 2; i++)
		o1_client_close(c[i]);
}

/* Admin connections live on the lead and keep answering while clients
 * of every front are busy; a client handed away still counts against the
 * caps the lead keeps (max_clients 5: four clients and the admin one). */
static void test_admin_and_caps(void **state)
{
	struct o1_client_opts o = {.sz = sizeof(o), .name = "over"};
	struct o1_client *c[FRONTS], *over = NULL;
	struct test_server s;
	char reply[128];
	int fd;

	(void)state;
	start(&s, "--max-clients", "5");
	for (int i = 0; i < FRONTS; i++)
		c[i] = connect_client(&s, "capped");
	fd = admin_connect(s.path);
	o.socket_path = s.path;
	assert_int_equal(o1_client_connect(&o, &over), -O1_E_QUOTA);
	for (int i = 0; i < FRONTS; i++) {
		serve_one(c[i], (uint64_t)i);
		admin_ask(fd, "hi", reply, sizeof(reply));
		assert_non_null(strstr(reply, "echo:hi from uid"));
	}
	admin_ask(fd, "clients", reply, sizeof(reply));
	assert_string_equal(reply, "clients=4 first=capped");
	close(fd);
	for (int i = 0; i < FRONTS; i++)
		o1_client_close(c[i]);
	assert_int_equal(server_stop(&s), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spread_and_served),
	    cmocka_unit_test(test_hang_up_on_every_front),
	    cmocka_unit_test(test_counted_at_once),
	    cmocka_unit_test(test_drain_in_flight),
	    cmocka_unit_test(test_stop_in_flight),
	    cmocka_unit_test(test_admin_and_caps),
	};

	eventfd_mode = argc > 1 && !strcmp(argv[1], "--eventfd");
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* o1bench stream: token-stream latency, the time from an engine thread
 * publishing a TOKEN to the client holding it, through the real front
 * loop (daemon/ipc, in-process) and libo1client, and over a Unix stream
 * socket as the baseline, in one run.
 *
 * The engine side is o1d's hand-off, reproduced: an engine thread writes
 * each event into a private o1_ring, stamps it, and calls
 * o1_ipc_server_kick() (as engine.c does after every step); the front
 * loop's ->poll posts what the ring holds (engine.c's drain_slot), and the
 * client's o1_client_wait takes it. Token i carries id i, so the client
 * looks its stamp up (one process, one CLOCK_MONOTONIC).
 *
 * Paths: stream-spin (a token every --spin-gap-us, shorter than both spin
 * windows, so nobody sleeps), stream-sleep (every --gap-us, longer than
 * them: the kick wakes the front loop out of io_uring, its doorbell wakes
 * the client's futex), stream-sleep-client-default (the client spins
 * libo1client's default 20 us first); unix-stream and unix-stream-sleep:
 * the engine thread send()s each 128-byte event to a client blocked in
 * recv(), one wake-up instead of the shm path's two (engine to front
 * loop, front loop to client). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "o1/client.h"
#include "o1bench.h"
#include "shm/ring.h"
#include "shm/wire.h"

#define QUEUE_CAP 1024 /* engine-to-front entries (a power of two) */

struct stream_args {
	const char *socket;
	int tokens;	  /* spin path */
	int sleep_tokens; /* sleep paths */
	int gap_us;	  /* sleep paths */
	int spin_gap_us;  /* spin path */
	uint32_t spin_us; /* the front loop's spin window */
};

/* One stream in flight: the engine thread's queue and stamps. */
struct stream {
	struct o1_ipc_server *srv;
	struct o1_ring_ctrl ctrl;
	union o1_wire_entry q[QUEUE_CAP];
	struct o1_ring prod, cons; /* engine thread, front loop */
	uint64_t *stamp;	   /* stamp[i]: token i published */
	int n, gap_us;
	_Atomic uint32_t client_id;
	_Atomic uint64_t req_id;
	atomic_int go, quit;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The engine's pause between tokens: asleep, as an engine waiting on the
 * device; its thread's timer slack is 1 ns (engine_slack), so a short gap
 * stays inside the spin windows and no third thread spins. */
static void gap(int us)
{
	struct timespec ts = {.tv_sec = us / 1000000,
			      .tv_nsec = us % 1000000 * 1000l};

	nanosleep(&ts, NULL);
}

static void engine_slack(void)
{
	prctl(PR_SET_TIMERSLACK, 1ul, 0ul, 0ul, 0ul);
}

static void push(struct stream *s, const union o1_wire_entry *e)
{
	void *slot;

	while (o1_ring_claim(&s->prod, &slot))
		sched_yield(); /* the front loop is behind: wait for room */
	memcpy(slot, e, sizeof(*e));
	o1_ring_commit(&s->prod);
	o1_ipc_server_kick(s->srv);
}

static void *engine_main(void *arg)
{
	struct stream *s = arg;
	union o1_wire_entry e;

	engine_slack();
	while (!atomic_load(&s->go)) {
		if (atomic_load(&s->quit))
			return NULL;
		gap(50);
	}
	for (int i = 0; i < s->n && !atomic_load(&s->quit); i++) {
		gap(s->gap_us);
		memset(&e, 0, sizeof(e));
		e.token.op = O1_EV_TOKEN;
		e.token.n_ids = 1;
		e.token.ids[0] = (uint32_t)i;
		e.token.req_id = atomic_load(&s->req_id);
		s->stamp[i] = now_ns();
		push(s, &e);
	}
	memset(&e, 0, sizeof(e));
	e.final.op = O1_EV_FINAL;
	e.final.reason = O1_FINISH_LENGTH;
	e.final.req_id = atomic_load(&s->req_id);
	e.final.generated_tokens = (uint32_t)s->n;
	push(s, &e);
	return NULL;
}

static int on_submit(void *ctx, struct o1_ipc_server *srv,
		     const struct o1_ipc_request *req)
{
	struct stream *s = ctx;

	(void)srv;
	if (atomic_load(&s->go))
		return -EBUSY; /* one stream at a time */
	atomic_store(&s->client_id, req->client_id);
	atomic_store(&s->req_id, req->params.req_id);
	atomic_store(&s->go, 1);
	return 0;
}

/* engine.c's drain_slot: post what the engine queued, stop on a full
 * completion ring (the loop calls again). */
static void on_poll(void *ctx, struct o1_ipc_server *srv)
{
	struct stream *s = ctx;
	const void *slot;

	while (o1_ring_peek(&s->cons, &slot) == 0) {
		if (o1_ipc_post(srv, atomic_load(&s->client_id), slot) ==
		    -EAGAIN)
			break;
		o1_ring_advance(&s->cons);
		o1_ring_release(&s->cons);
	}
}

static void on_disconnect(void *ctx, struct o1_ipc_server *srv,
			  uint32_t client_id)
{
	struct stream *s = ctx;

	(void)srv;
	if (client_id == atomic_load(&s->client_id))
		atomic_store(&s->quit, 1);
}

static void *serve_main(void *arg)
{
	o1_ipc_server_run(arg);
	return NULL;
}

/* The client: one request, every TOKEN's latency into ns[id]. */
static int client_stream(const struct stream_args *a, struct stream *s,
			 uint32_t client_spin_us, uint64_t *ns)
{
	struct o1_client_opts o = {.sz = sizeof(o),
				   .socket_path = a->socket,
				   .name = "o1bench",
				   .spin_us = client_spin_us};
	struct o1_submit_opts sub = {.sz = sizeof(sub),
				     .req_id = 1,
				     .text = "x",
				     .text_len = 1,
				     .max_tokens = 1}; /* not read here */
	struct o1_client *c;
	struct o1_event ev;
	int ret = o1_client_connect(&o, &c), got = 0;

	if (ret) {
		fprintf(stderr, "o1bench: %s\n", o1_last_error());
		return ret;
	}
	ret = o1_client_submit(c, &sub);
	while (!ret) {
		ret = o1_client_wait(c, &ev, 10000000000ll);
		if (ret < 0)
			break;
		ret = 0;
		if (ev.type == O1_EVENT_TOKEN && ev.n_ids == 1 &&
		    ev.ids[0] < (uint32_t)s->n) {
			ns[ev.ids[0]] = now_ns() - s->stamp[ev.ids[0]];
			got++;
		} else if (ev.type == O1_EVENT_FINAL) {
			break;
		}
	}
	if (ret < 0)
		fprintf(stderr, "o1bench: stream: %s\n", o1_last_error());
	else if (got != s->n)
		ret = -EPROTO;
	o1_client_close(c);
	return ret;
}

static int shm_stream(const struct stream_args *a, const char *label, int n,
		      int gap_us, uint32_t client_spin_us, uint64_t *ns)
{
	struct o1_ipc_consumer cons = {
	    .submit = on_submit, .poll = on_poll, .disconnect = on_disconnect};
	struct o1_ipc_opts o = {.sz = sizeof(o),
				.socket_path = a->socket,
				.spin_us = a->spin_us,
				.max_clients = 4};
	struct stream *s = aligned_alloc(64, sizeof(*s));
	struct o1_ipc_stats st = {0};
	pthread_t ts, te;
	int ret = -ENOMEM;

	if (!s)
		return ret;
	memset(s, 0, sizeof(*s));
	s->n = n;
	s->gap_us = gap_us;
	s->stamp = calloc((size_t)n, sizeof(*s->stamp));
	o1_ring_init(&s->prod, &s->ctrl, s->q, QUEUE_CAP, sizeof(s->q[0]));
	o1_ring_init(&s->cons, &s->ctrl, s->q, QUEUE_CAP, sizeof(s->q[0]));
	cons.ctx = s;
	if (!s->stamp || (ret = o1_ipc_server_create(&o, &cons, &s->srv))) {
		fprintf(stderr, "o1bench: cannot serve on %s\n", a->socket);
		goto out;
	}
	if (pthread_create(&ts, NULL, serve_main, s->srv)) {
		ret = -EAGAIN;
		goto destroy;
	}
	if (!pthread_create(&te, NULL, engine_main, s)) {
		ret = client_stream(a, s, client_spin_us, ns);
		atomic_store(&s->quit, 1);
		pthread_join(te, NULL);
	} else {
		ret = -EAGAIN;
	}
	o1_ipc_server_stop(s->srv);
	pthread_join(ts, NULL);
	o1_ipc_server_stats(s->srv, &st);
destroy:
	o1_ipc_server_destroy(s->srv);
	if (!ret) {
		o1bench_print_latency(label, ns, (size_t)n);
		printf("%s-loop sleeps=%llu wake_spin=%llu handoffs=%llu "
		       "cadence_wakes=%llu cadence_caught=%llu "
		       "cadence_spin_us_per_token=%.1f\n",
		       label, (unsigned long long)st.sleeps,
		       (unsigned long long)st.wakeups_spin,
		       (unsigned long long)st.handoffs,
		       (unsigned long long)st.cadence_wakes,
		       (unsigned long long)st.cadence_caught,
		       (double)st.cadence_spin_ns / 1e3 / n);
	}
out:
	free(s->stamp);
	free(s);
	return ret;
}

struct sock_engine {
	int fd, n, gap_us;
	uint64_t *stamp;
};

static void *sock_engine_main(void *arg)
{
	struct sock_engine *e = arg;
	union o1_wire_entry ev;

	engine_slack();
	for (int i = 0; i < e->n; i++) {
		gap(e->gap_us);
		memset(&ev, 0, sizeof(ev));
		ev.token.op = O1_EV_TOKEN;
		ev.token.ids[0] = (uint32_t)i;
		e->stamp[i] = now_ns();
		if (send(e->fd, &ev, sizeof(ev), MSG_NOSIGNAL) != sizeof(ev))
			break;
	}
	return NULL;
}

/* The baseline: the engine thread writes each event to a Unix stream
 * socket, the client blocks in recv(). */
static int unix_stream(const char *label, int n, int gap_us, uint64_t *ns)
{
	struct sock_engine e = {.n = n, .gap_us = gap_us};
	union o1_wire_entry ev;
	pthread_t t;
	int sv[2], ret = 0;

	e.stamp = calloc((size_t)n, sizeof(*e.stamp));
	if (!e.stamp || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -ENOMEM;
	e.fd = sv[1];
	if (pthread_create(&t, NULL, sock_engine_main, &e)) {
		ret = -EAGAIN;
		goto out;
	}
	for (int i = 0; i < n && !ret; i++) {
		if (recv(sv[0], &ev, sizeof(ev), MSG_WAITALL) != sizeof(ev) ||
		    ev.token.ids[0] != (uint32_t)i)
			ret = -EIO;
		else
			ns[i] = now_ns() - e.stamp[i];
	}
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(t, NULL);
	if (!ret)
		o1bench_print_latency(label, ns, (size_t)n);
out:
	close(sv[0]);
	close(sv[1]);
	free(e.stamp);
	return ret;
}

static int parse(int argc, char **argv, struct stream_args *a)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];

		if (!strcmp(k, "--socket"))
			a->socket = v;
		else if (!strcmp(k, "--tokens"))
			a->tokens = atoi(v);
		else if (!strcmp(k, "--sleep-tokens"))
			a->sleep_tokens = atoi(v);
		else if (!strcmp(k, "--gap-us"))
			a->gap_us = atoi(v);
		else if (!strcmp(k, "--spin-gap-us"))
			a->spin_gap_us = atoi(v);
		else if (!strcmp(k, "--spin-us"))
			a->spin_us = (uint32_t)atoi(v);
		else
			return -1;
	}
	if (argc % 2 == 0)
		return -1; /* an option without its value */
	if (!a->socket)
		a->socket = o1bench_socket;
	return a->socket && a->tokens > 0 && a->sleep_tokens > 0 &&
		       a->gap_us >= 0 && a->spin_gap_us >= 0 &&
		       a->spin_us <= 1000000
		   ? 0
		   : -1;
}

int o1bench_cmd_stream(int argc, char **argv)
{
	struct stream_args a = {.tokens = 20000,
				.sleep_tokens = 1000,
				.gap_us = 2000,
				.spin_gap_us = 20,
				.spin_us = 200};
	uint64_t *ns;
	int ret;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		argc = 0;
	if (argc == 0 || parse(argc, argv, &a)) {
		fprintf(argc ? stderr : stdout,
			"usage: o1bench stream --socket PATH [--tokens N] "
			"[--sleep-tokens N] [--gap-us US] [--spin-gap-us US] "
			"[--spin-us US]\n"
			"  serves PATH in-process (the front loop and an "
			"engine thread)\n");
		return argc ? 2 : 0;
	}
	ns = calloc(
	    (size_t)(a.tokens > a.sleep_tokens ? a.tokens : a.sleep_tokens),
	    sizeof(*ns));
	if (!ns)
		return 1;
	printf("# o1bench stream: tokens=%d spin_gap_us=%d sleep_tokens=%d "
	       "gap_us=%d daemon_spin_us=%u\n",
	       a.tokens, a.spin_gap_us, a.sleep_tokens, a.gap_us, a.spin_us);
	ret =
	    shm_stream(&a, "stream-spin", a.tokens, a.spin_gap_us, 1000000, ns);
	if (!ret)
		ret = shm_stream(&a, "stream-sleep", a.sleep_tokens, a.gap_us,
				 1, ns);
	if (!ret)
		ret = shm_stream(&a, "stream-sleep-client-default",
				 a.sleep_tokens, a.gap_us, 0, ns);
	if (!ret)
		ret = unix_stream("unix-stream", a.tokens, a.spin_gap_us, ns);
	if (!ret)
		ret = unix_stream("unix-stream-sleep", a.sleep_tokens, a.gap_us,
				  ns);
	free(ns);
	return ret ? 1 : 0;
}

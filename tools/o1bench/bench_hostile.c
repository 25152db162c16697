/* o1bench hostile: a careless or hostile client beside a well-behaved one,
 * which must not be hurt (issue 21: "a client can only ever hurt
 * itself").
 *
 *   o1bench hostile nonreader --socket PATH [--connections N]
 *           [--requests R] [--max-tokens M] [--victim-tokens V]
 *           [--max-ratio X] [--slack-ms S] [--settle-s T]
 *   o1bench hostile halfopen --socket PATH [--connections N]
 *           [--seconds T]
 *   o1bench hostile slowloris --http HOST:PORT [--connections N]
 *           [--from ADDR] [--seconds T] [--tick-ms K]
 *
 * nonreader: N connections (4) submit R requests each (their quota, from
 *   the handshake) of M tokens (1000) and never read. The victim's
 *   request (8 ids, V greedy tokens, 32) is timed unloaded (best of 3),
 *   then while the non-readers hold their quota, once they are parked or
 *   T seconds (30) passed (best of 5, stopping at the first within the
 *   bound X x unloaded + S ms; X 2, S 0).
 * halfopen: N connections (64) to o1d's socket that never say hello
 *   (reopened when o1d closes them); a victim connects and runs a short
 *   request every 200 ms for T seconds (5): every one must be served.
 * slowloris: N connections (200) to o1-sidecar from ADDR (127.0.0.2),
 *   each sending a byte of a request head that never ends every K ms
 *   (100), reopened when closed; every 50 ms a GET /health/live from
 *   127.0.0.1 for T seconds (10) must be answered 200.
 * Prints one key=value line; exit 0 when the victim was not hurt, 1 when
 * it was, 2 on bad arguments. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "o1/client.h"
#include "o1bench.h"

#define CMD	   "hostile"
#define MAX_CONNS  4096
#define VICTIM_IDS 8

struct hostile_args {
	const char *kind, *socket, *http, *from;
	long connections, requests, max_tokens, victim_tokens, slack_ms;
	long settle_s, seconds, tick_ms;
	double max_ratio;
};

static void hostile_usage(FILE *f)
{
	fprintf(f,
		"usage: o1bench hostile nonreader --socket PATH "
		"[--connections N] [--requests R]\n"
		"              [--max-tokens M] [--victim-tokens V] "
		"[--max-ratio X] [--slack-ms S]\n"
		"              [--settle-s T]\n"
		"       o1bench hostile halfopen --socket PATH "
		"[--connections N] [--seconds T]\n"
		"       o1bench hostile slowloris --http HOST:PORT "
		"[--connections N] [--from ADDR]\n"
		"              [--seconds T] [--tick-ms K]\n"
		"A hostile client beside a well-behaved one, which must not "
		"be hurt.\nExit 0 not hurt, 1 hurt, 2 bad arguments.\n");
}

static int hostile_value(struct hostile_args *a, const char *opt,
			 const char *v)
{
	static const struct {
		const char *opt;
		size_t off;
		long lo, hi;
	} nums[] = {
#define N(o, f, lo, hi) {o, offsetof(struct hostile_args, f), lo, hi}
	    N("--connections", connections, 1, MAX_CONNS),
	    N("--requests", requests, 1, 65536),
	    N("--max-tokens", max_tokens, 1, 1 << 20),
	    N("--victim-tokens", victim_tokens, 1, 4096),
	    N("--slack-ms", slack_ms, 0, 3600000),
	    N("--settle-s", settle_s, 0, 3600),
	    N("--seconds", seconds, 1, 86400),
	    N("--tick-ms", tick_ms, 1, 60000),
#undef N
	};

	if (!strcmp(opt, "--socket"))
		a->socket = v;
	else if (!strcmp(opt, "--http"))
		a->http = v;
	else if (!strcmp(opt, "--from"))
		a->from = v;
	else if (!strcmp(opt, "--max-ratio"))
		return o1bench_parse_double(CMD, opt, v, 1, 1e6,
					    &a->max_ratio);
	else
		for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
			if (!strcmp(opt, nums[i].opt))
				return o1bench_parse_long(
				    CMD, opt, v, nums[i].lo, nums[i].hi,
				    (long *)((char *)a + nums[i].off));
	if (strcmp(opt, "--socket") && strcmp(opt, "--http") &&
	    strcmp(opt, "--from")) {
		fprintf(stderr, "o1bench hostile: unknown option %s\n", opt);
		return -EINVAL;
	}
	return 0;
}

static int hostile_parse(int argc, char **argv, struct hostile_args *a)
{
	bool slow;

	*a = (struct hostile_args){.max_tokens = 1000,
				   .victim_tokens = 32,
				   .max_ratio = 2.0,
				   .settle_s = 30,
				   .tick_ms = 100,
				   .from = "127.0.0.2"};
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		hostile_usage(stdout);
		exit(0);
	}
	if (argc < 2) {
		hostile_usage(stderr);
		return -EINVAL;
	}
	a->kind = argv[1];
	for (int i = 2; i < argc; i += 2) {
		if (i + 1 == argc) {
			fprintf(stderr, "o1bench hostile: %s needs a value\n",
				argv[i]);
			return -EINVAL;
		}
		if (hostile_value(a, argv[i], argv[i + 1]))
			return -EINVAL;
	}
	slow = !strcmp(a->kind, "slowloris");
	if (!a->socket && !slow)
		a->socket = o1bench_socket;
	if (!a->connections)
		a->connections = slow ? 200 : !strcmp(a->kind, "halfopen") ? 64
									   : 4;
	if (!a->seconds)
		a->seconds = slow ? 10 : 5;
	if ((slow && !a->http) || (!slow && !a->socket)) {
		fprintf(stderr, "o1bench hostile %s: --%s is required\n",
			a->kind, slow ? "http" : "socket");
		return -EINVAL;
	}
	return 0;
}

/* ---- nonreader ---- */

/* The victim's request through a fresh connection: its duration in ns,
 * 0 when it failed. */
static uint64_t victim(const struct hostile_args *a, const uint32_t *ids)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = a->socket, .name = "victim"};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 1,
				    .ids = ids,
				    .n_ids = VICTIM_IDS,
				    .max_tokens = (uint32_t)a->victim_tokens,
				    .flags = O1_FLAG_IGNORE_EOS};
	uint64_t t0 = o1bench_now_ns();
	struct o1_client *c;
	struct o1_event fin;
	int err;

	if (o1_client_connect(&co, &c))
		return 0;
	err = o1_client_generate(c, &so, NULL, NULL, &fin);
	o1_client_close(c);
	if (err || fin.finish == O1_FINISH_REASON_ERROR ||
	    fin.finish == O1_FINISH_REASON_CANCELLED) {
		fprintf(stderr, "o1bench hostile: victim failed: %s\n",
			o1_client_strerror(err ? err : fin.error));
		return 0;
	}
	return o1bench_now_ns() - t0;
}

/* A connection that submits its quota (or R) and will never read. */
static struct o1_client *nonreader(const struct hostile_args *a, uint32_t k,
				   uint32_t vocab, long *submitted)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = a->socket, .name = "nonreader"};
	struct o1_client_limits l = {.sz = sizeof(l)};
	struct o1_client *c;
	uint32_t ids[VICTIM_IDS];
	long n;

	if (o1_client_connect(&co, &c))
		return NULL;
	o1_client_limits(c, &l);
	n = a->requests ? a->requests : (long)l.max_inflight;
	for (long i = 0; i < n; i++) {
		struct o1_submit_opts so = {.sz = sizeof(so),
					    .req_id = (uint64_t)i + 1,
					    .ids = ids,
					    .n_ids = VICTIM_IDS,
					    .max_tokens =
						(uint32_t)a->max_tokens,
					    .flags = O1_FLAG_IGNORE_EOS};

		for (uint32_t j = 0; j < VICTIM_IDS; j++)
			ids[j] = (k * 97 + (uint32_t)i * 31 + j * 7 + 1) % vocab;
		if (o1_client_submit(c, &so))
			break;
		(*submitted)++;
	}
	return c;
}

static uint32_t vocab_of(const struct hostile_args *a)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = a->socket};
	struct o1_client_limits l = {.sz = sizeof(l)};
	struct o1_client *c;

	if (o1_client_connect(&co, &c))
		return 0;
	if (o1_client_limits(c, &l) || !l.vocab_size)
		l.vocab_size = 256;
	o1_client_close(c);
	return l.vocab_size > 1024 ? 1024 : l.vocab_size;
}

/* Waits until the non-readers' SUBMITTED requests are all parked (their
 * rings full) or settle_s passed. */
static void settle(const struct hostile_args *a, long submitted,
		   struct o1bench_status *st)
{
	uint64_t end = o1bench_now_ns() + (uint64_t)a->settle_s * 1000000000ull;

	do {
		if (!o1bench_status(a->socket, st) && st->parked >= submitted)
			return;
		o1bench_sleep_ms(50);
	} while (o1bench_now_ns() < end);
}

static int nonreaders(const struct hostile_args *a)
{
	struct o1_client *nr[MAX_CONNS] = {0};
	struct o1bench_status st = {0};
	uint32_t ids[VICTIM_IDS], vocab = vocab_of(a);
	uint64_t unloaded = UINT64_MAX, loaded = UINT64_MAX, bound, t;
	long submitted = 0;
	bool ok = false;

	if (!vocab) {
		fprintf(stderr, "o1bench hostile: cannot connect to %s: %s\n",
			a->socket, o1_last_error());
		return 1;
	}
	for (uint32_t j = 0; j < VICTIM_IDS; j++)
		ids[j] = (40 + j * 13) % vocab;
	for (int i = 0; i < 3; i++)
		if ((t = victim(a, ids)) && t < unloaded)
			unloaded = t;
	if (unloaded == UINT64_MAX)
		return 1;
	for (long i = 0; i < a->connections; i++)
		nr[i] = nonreader(a, (uint32_t)i, vocab, &submitted);
	settle(a, submitted, &st);
	bound = (uint64_t)(a->max_ratio * (double)unloaded) +
		(uint64_t)a->slack_ms * 1000000ull;
	for (int i = 0; i < 5 && !ok; i++) {
		t = victim(a, ids);
		if (t && t < loaded)
			loaded = t;
		ok = t && t <= bound;
	}
	printf("hostile nonreader %s connections=%ld requests=%ld parked=%lld "
	       "running=%lld unloaded_ms=%.2f loaded_ms=%.2f bound_ms=%.2f\n",
	       ok ? "ok" : "HURT", a->connections, submitted, st.parked,
	       st.running, unloaded / 1e6,
	       loaded == UINT64_MAX ? -1.0 : loaded / 1e6, bound / 1e6);
	for (long i = 0; i < a->connections; i++)
		o1_client_close(nr[i]);
	return ok ? 0 : 1;
}

/* ---- halfopen ---- */

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Reopens the half-open connections o1d closed. */
static void halfopen_refill(const struct hostile_args *a, int *fd)
{
	for (long i = 0; i < a->connections; i++) {
		struct pollfd p = {.fd = fd[i], .events = POLLIN};
		char b[64];

		if (fd[i] >= 0 && poll(&p, 1, 0) > 0 &&
		    recv(fd[i], b, sizeof(b), MSG_DONTWAIT) <= 0) {
			close(fd[i]);
			fd[i] = -1;
		}
		if (fd[i] < 0)
			fd[i] = unix_connect(a->socket);
	}
}

static int halfopen(const struct hostile_args *a)
{
	int fd[MAX_CONNS];
	uint32_t ids[VICTIM_IDS], vocab = vocab_of(a);
	uint64_t end;
	long served = 0, hurt = 0;
	struct hostile_args v = *a;

	if (!vocab)
		return 1;
	for (uint32_t j = 0; j < VICTIM_IDS; j++)
		ids[j] = (40 + j * 13) % vocab;
	v.victim_tokens = 4;
	for (long i = 0; i < a->connections; i++)
		fd[i] = -1;
	end = o1bench_now_ns() + (uint64_t)a->seconds * 1000000000ull;
	while (o1bench_now_ns() < end) {
		halfopen_refill(a, fd);
		if (victim(&v, ids))
			served++;
		else
			hurt++;
		o1bench_sleep_ms(200);
	}
	for (long i = 0; i < a->connections; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	printf("hostile halfopen %s connections=%ld served=%ld refused=%ld\n",
	       hurt ? "HURT" : "ok", a->connections, served, hurt);
	return hurt ? 1 : 0;
}

/* ---- slowloris ---- */

struct loris {
	const struct hostile_args *a;
	struct sockaddr_in to;
	atomic_bool stop;
	uint64_t refused, cut, longest_ms;
};

static int tcp_from(const char *src, const struct sockaddr_in *to)
{
	struct sockaddr_in me = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if ((src && (inet_pton(AF_INET, src, &me.sin_addr) != 1 ||
		     bind(fd, (struct sockaddr *)&me, sizeof(me)))) ||
	    connect(fd, (const struct sockaddr *)to, sizeof(*to))) {
		close(fd);
		return -1;
	}
	return fd;
}

static char head_byte(size_t i)
{
	static const char start[] = "GET /health/live HTTP/1.1\r\nHost: x\r\n";

	if (i < sizeof(start) - 1)
		return start[i];
	return "X-a: b\r\n"[(i - (sizeof(start) - 1)) % 8];
}

/* One slow connection's tick: reopen, or send a byte, or see it closed. */
static void loris_tick(struct loris *l, int *fd, size_t *sent,
		       uint64_t *opened, uint64_t now_ms)
{
	struct pollfd p = {.fd = *fd, .events = POLLIN};
	char b = head_byte(*sent), ans[16] = "";

	if (*fd < 0) {
		*fd = tcp_from(l->a->from, &l->to);
		*sent = 0;
		*opened = now_ms;
		return;
	}
	if (poll(&p, 1, 0) == 0 &&
	    send(*fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
		(*sent)++;
		return;
	}
	if (recv(*fd, ans, sizeof(ans) - 1, MSG_DONTWAIT) > 0 &&
	    !strncmp(ans, "HTTP/1.1 429", 12)) {
		l->refused++;
	} else {
		l->cut++;
		if (now_ms - *opened > l->longest_ms)
			l->longest_ms = now_ms - *opened;
	}
	close(*fd);
	*fd = -1;
}

static void *loris_main(void *arg)
{
	struct loris *l = arg;
	long n = l->a->connections;
	int *fd = malloc((size_t)n * sizeof(int));
	size_t *sent = calloc((size_t)n, sizeof(size_t));
	uint64_t *opened = calloc((size_t)n, sizeof(uint64_t));

	for (long i = 0; fd && i < n; i++)
		fd[i] = -1;
	while (fd && sent && opened && !atomic_load(&l->stop)) {
		uint64_t now = o1bench_now_ns() / 1000000;

		for (long i = 0; i < n; i++)
			loris_tick(l, &fd[i], &sent[i], &opened[i], now);
		o1bench_sleep_ms(l->a->tick_ms);
	}
	for (long i = 0; fd && i < n; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	free(fd);
	free(sent);
	free(opened);
	return NULL;
}

/* One GET /health/live from the default source: whether it got 200. */
static bool probe(const struct sockaddr_in *to)
{
	static const char req[] =
	    "GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	struct pollfd p;
	char ans[16] = "";
	int fd = tcp_from(NULL, to);
	bool ok;

	if (fd < 0)
		return false;
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	ok = send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) ==
		 (ssize_t)sizeof(req) - 1 &&
	     poll(&p, 1, 30000) > 0 &&
	     recv(fd, ans, sizeof(ans) - 1, 0) > 0 &&
	     !strncmp(ans, "HTTP/1.1 200", 12);
	close(fd);
	return ok;
}

static int parse_http(const char *s, struct sockaddr_in *to)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	long port;

	if (!colon || (size_t)(colon - s) >= sizeof(host) ||
	    o1bench_parse_long(CMD, "--http", colon + 1, 1, 65535, &port))
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	*to = (struct sockaddr_in){.sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &to->sin_addr) != 1) {
		fprintf(stderr, "o1bench hostile: --http %s: not IPv4:PORT\n",
			s);
		return -EINVAL;
	}
	return 0;
}

static int slowloris(const struct hostile_args *a)
{
	struct loris l = {.a = a};
	pthread_t t;
	uint64_t end;
	long served = 0, hurt = 0;

	if (parse_http(a->http, &l.to))
		return 2;
	if (pthread_create(&t, NULL, loris_main, &l))
		return 1;
	o1bench_sleep_ms(500);
	end = o1bench_now_ns() + (uint64_t)a->seconds * 1000000000ull;
	while (o1bench_now_ns() < end) {
		if (probe(&l.to))
			served++;
		else
			hurt++;
		o1bench_sleep_ms(50);
	}
	atomic_store(&l.stop, true);
	pthread_join(t, NULL);
	printf("hostile slowloris %s connections=%ld served=%ld failed=%ld "
	       "slow_refused=%llu slow_cut=%llu slow_longest_ms=%llu\n",
	       hurt ? "HURT" : "ok", a->connections, served, hurt,
	       (unsigned long long)l.refused, (unsigned long long)l.cut,
	       (unsigned long long)l.longest_ms);
	return hurt || !served ? 1 : 0;
}

int o1bench_cmd_hostile(int argc, char **argv)
{
	struct hostile_args a;

	if (hostile_parse(argc, argv, &a))
		return 2;
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(a.kind, "nonreader"))
		return nonreaders(&a);
	if (!strcmp(a.kind, "halfopen"))
		return halfopen(&a);
	if (!strcmp(a.kind, "slowloris"))
		return slowloris(&a);
	fprintf(stderr, "o1bench hostile: unknown kind '%s' (nonreader, "
			"halfopen, slowloris)\n",
		a.kind);
	return 2;
}

/* o1-sidecar against careless and hostile HTTP clients (argv: o1d,
 * o1model, o1-sidecar; issue 21 items 2 and 8), o1d serving the demo
 * model on the CPU, raw sockets so the clients can misbehave and pick
 * their loopback source address. Checked:
 * - slowloris: 200 connections from one address sending a byte of their
 *   headers every 100 ms (reopened when closed) beside normal requests
 *   from another address: every normal request is served; one address
 *   holds at most max_connections_per_address (the rest are answered
 *   429), and a connection still trickling its head when read_timeout_ms
 *   passed is closed however often it sent a byte;
 * - a connection that sends nothing gets 408 at the deadline; binary
 *   garbage (and TLS) where a request line belongs gets 400 at once;
 * - a body with a NUL byte, a \u0000 escape or bytes that are not UTF-8
 *   is refused with 400 naming it; an error quoting the client (a model
 *   name cut mid-character, a path of raw bytes) is valid UTF-8 JSON;
 * - the access log of a stream cut by o1d's death counts the tokens it
 *   sent. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/utf8.h"
#include "sidecar_harness.h"
#include "tests/common/test_util.h"
#include "tools/sidecar/sidecar_input.h"

#define SLOW_CONNS   200
#define SLOW_TICK_MS 100
#define READ_MS	     1500 /* the slow sidecar's read_timeout_ms */
#define PER_ADDRESS  16

static struct proc side, slow;

/* A TCP connection from SRC (a loopback address) to the sidecar P; -1
 * when it cannot connect. */
static int connect_from(const char *src, const struct proc *p)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)p->port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, src, &a.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads FD until EOF or TIMEOUT_MS into BUF (NUL-terminated); returns
 * the bytes read. */
static size_t read_all(int fd, char *buf, size_t cap, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	size_t n = 0;

	while (n + 1 < cap && now_ms() < end) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t k;

		if (poll(&p, 1, (int)(end - now_ms())) <= 0)
			break;
		k = recv(fd, buf + n, cap - 1 - n, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	buf[n] = 0;
	return n;
}

static int status_of(const char *answer)
{
	return !strncmp(answer, "HTTP/1.1 ", 9) ? atoi(answer + 9) : -1;
}

/* Sends REQ (LEN bytes) from SRC and reads the whole answer (the request
 * says Connection: close) into BUF; its HTTP status or -1. */
static int exchange(const char *src, const struct proc *p, const char *req,
		    size_t len, char *buf, size_t cap)
{
	int fd = connect_from(src, p), st;

	if (fd < 0)
		return -1;
	if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	read_all(fd, buf, cap, 30000);
	close(fd);
	st = status_of(buf);
	return st;
}

/* POST PATH with BODY (LEN bytes) from 127.0.0.1; the status, the answer
 * in BUF. */
static int post(const struct proc *p, const char *path, const char *body,
		size_t len, char *buf, size_t cap)
{
	char req[16384];
	int n = snprintf(req, sizeof(req),
			 "POST %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
			 "Content-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n",
			 path, len);

	assert_true(n > 0 && (size_t)n + len < sizeof(req));
	memcpy(req + n, body, len);
	return exchange("127.0.0.1", p, req, (size_t)n + len, buf, cap);
}

static int get(const struct proc *p, const char *src, const char *path,
	       char *buf, size_t cap)
{
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
			 "\r\n",
			 path);

	return exchange(src, p, req, (size_t)n, buf, cap);
}

/* The answer's body (after the head), checked to be UTF-8 JSON. */
static cJSON *json_body(const char *answer)
{
	const char *b = strstr(answer, "\r\n\r\n");
	cJSON *j;

	assert_non_null(b);
	b += 4;
	if (!o1_utf8_valid(b, strlen(b), NULL))
		fail_msg("answer not UTF-8: %s", b);
	j = cJSON_Parse(b);
	if (!j)
		fail_msg("answer not JSON: %s", b);
	return j;
}

static void assert_error(const char *answer, int status, const char *code,
			 const char *says)
{
	cJSON *j = json_body(answer);
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");

	assert_int_equal(status_of(answer), status);
	assert_true(cJSON_IsString(c) && cJSON_IsString(m));
	if (strcmp(c->valuestring, code) ||
	    (says && !strstr(m->valuestring, says)))
		fail_msg("want %s saying '%s': %s", code, says ? says : "",
			 answer);
	cJSON_Delete(j);
}

/* ---- slowloris ---- */

struct slow_conn {
	int fd;		   /* -1: closed */
	uint64_t opened;   /* ms */
	uint64_t retry_at; /* ms: reconnect then */
	size_t sent;
};

struct loris {
	const struct proc *p;
	atomic_bool stop;
	struct slow_conn c[SLOW_CONNS];
	uint32_t refused; /* answered 429 */
	uint32_t cut;	  /* closed while trickling, after the deadline */
	uint64_t longest; /* ms a trickling connection lived */
	uint32_t open_max;
};

/* What a slow client sends, a byte a tick: a request head that never
 * ends. */
static char head_byte(size_t i)
{
	static const char start[] = "GET /health/live HTTP/1.1\r\nHost: t\r\n";

	if (i < sizeof(start) - 1)
		return start[i];
	return "X-a: b\r\n"[(i - (sizeof(start) - 1)) % 8];
}

/* C was closed by the sidecar (or refused): counts why, reconnects
 * later. */
static void slow_closed(struct loris *l, struct slow_conn *c, uint64_t now)
{
	char buf[512];

	read_all(c->fd, buf, sizeof(buf), 50);
	if (status_of(buf) == 429)
		l->refused++;
	else if (now - c->opened >= READ_MS - 100)
		l->cut++;
	if (status_of(buf) != 429 && now - c->opened > l->longest)
		l->longest = now - c->opened;
	close(c->fd);
	c->fd = -1;
	c->retry_at = now + 500;
}

static void slow_tick(struct loris *l, struct slow_conn *c, uint64_t now)
{
	struct pollfd p;
	char b;

	if (c->fd < 0) {
		if (now < c->retry_at)
			return;
		c->fd = connect_from("127.0.0.2", l->p);
		c->opened = now;
		c->sent = 0;
		if (c->fd < 0)
			c->retry_at = now + 500;
		return;
	}
	p = (struct pollfd){.fd = c->fd, .events = POLLIN};
	b = head_byte(c->sent);
	if (poll(&p, 1, 0) > 0 ||
	    send(c->fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
		slow_closed(l, c, now);
		return;
	}
	c->sent++;
}

static void *loris_main(void *arg)
{
	struct loris *l = arg;

	for (int i = 0; i < SLOW_CONNS; i++)
		l->c[i].fd = -1;
	while (!atomic_load(&l->stop)) {
		uint64_t now = now_ms();
		uint32_t open = 0;

		for (int i = 0; i < SLOW_CONNS; i++) {
			slow_tick(l, &l->c[i], now);
			open += l->c[i].fd >= 0;
		}
		if (open > l->open_max)
			l->open_max = open;
		sleep_ms(SLOW_TICK_MS);
	}
	for (int i = 0; i < SLOW_CONNS; i++)
		if (l->c[i].fd >= 0)
			close(l->c[i].fd);
	return NULL;
}

/* 200 slowloris connections from 127.0.0.2 beside normal requests from
 * 127.0.0.1 for four read deadlines: every normal request gets its 200
 * (within 30 s each: slow CI), the slow address gets 429s beyond its 16
 * connections, and trickling connections are cut at the deadline (none
 * lives past it by more than the guard's tick and a slow machine's
 * margin). Before the guard, the slow address took every connection
 * slot and the normal requests were refused. */
static void test_slowloris(void **state)
{
	static struct loris l;
	pthread_t t;
	char buf[4096];
	uint32_t probes = 0;
	uint64_t end;

	(void)state;
	memset(&l, 0, sizeof(l));
	l.p = &slow;
	assert_int_equal(pthread_create(&t, NULL, loris_main, &l), 0);
	sleep_ms(500);
	end = now_ms() + 4 * READ_MS;
	while (now_ms() < end) {
		int st = get(&slow, "127.0.0.1", "/health/live", buf,
			     sizeof(buf));

		if (st != 200)
			fail_msg("normal request %u: %d: %s", probes, st, buf);
		probes++;
		sleep_ms(50);
	}
	atomic_store(&l.stop, true);
	pthread_join(t, NULL);
	fprintf(stderr,
		"slowloris: %u normal requests served; slow: %u refused "
		"(429), %u cut at the deadline, longest %llu ms, at most %u "
		"open at once\n",
		probes, l.refused, l.cut, (unsigned long long)l.longest,
		l.open_max);
	assert_true(probes >= 10);
	assert_true(l.refused > 0);
	assert_true(l.cut > 0);
	assert_true(l.longest < READ_MS + 3000);
}

/* Nothing sent: 408 at the deadline. Garbage or TLS where the request
 * line belongs: 400 at once (well before the deadline). */
static void test_first_bytes(void **state)
{
	static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03";
	char buf[2048], garbage[100];
	uint64_t t0;
	int fd;

	(void)state;
	for (int i = 0; i < 100; i++)
		garbage[i] = (char)(0x80 + i);
	t0 = now_ms();
	assert_int_equal(exchange("127.0.0.1", &slow, garbage, sizeof(garbage),
				  buf, sizeof(buf)),
			 400);
	assert_error(buf, 400, "bad_request", "not an HTTP request line");
	assert_int_equal(exchange("127.0.0.1", &slow, tls, sizeof(tls) - 1,
				  buf, sizeof(buf)),
			 400);
	assert_true(now_ms() - t0 < READ_MS);
	fd = connect_from("127.0.0.1", &slow);
	assert_true(fd >= 0);
	t0 = now_ms();
	read_all(fd, buf, sizeof(buf), 30000);
	close(fd);
	assert_error(buf, 408, "request_timeout", NULL);
	assert_true(now_ms() - t0 >= READ_MS - 100);
}

/* Bodies the sidecar must refuse before parsing, and errors that quote
 * the client. */
static void test_body_bytes(void **state)
{
	static const char nul[] =
	    "{\"model\":\"default\",\"prompt\":\"The\0cat\",\"max_tokens\":2}";
	static const char esc[] =
	    "{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
	    "\"content\":\"hi\\u0000 there\"}],\"max_tokens\":2}";
	static const char bad[] =
	    "{\"model\":\"\xff\xfe\",\"prompt\":\"The\",\"max_tokens\":2}";
	char buf[8192], body[256], name[64];

	(void)state;
	assert_int_equal(post(&side, "/v1/completions", nul, sizeof(nul) - 1,
			      buf, sizeof(buf)),
			 400);
	assert_error(buf, 400, "invalid_value", "NUL byte");
	assert_int_equal(post(&side, "/v1/chat/completions", esc,
			      sizeof(esc) - 1, buf, sizeof(buf)),
			 400);
	assert_error(buf, 400, "invalid_value", "\\u0000");
	assert_int_equal(post(&side, "/v1/completions", bad, sizeof(bad) - 1,
			      buf, sizeof(buf)),
			 400);
	assert_error(buf, 400, "invalid_value", "not UTF-8");
	/* a model name cut inside a character by the 404's quote */
	memset(name, 'a', 59);
	memcpy(name + 59, "\xc3\xa9\xc3\xa9", 5);
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"The\",\"max_tokens\":2}",
		 name);
	assert_int_equal(post(&side, "/v1/completions", body, strlen(body),
			      buf, sizeof(buf)),
			 404);
	assert_error(buf, 404, "model_not_found", "does not exist");
	assert_int_equal(get(&side, "127.0.0.1", "/v1/models/%ff%fe%c3", buf,
			     sizeof(buf)),
			 404);
	assert_error(buf, 404, "model_not_found", "\xef\xbf\xbd");
	/* the sidecar still serves */
	assert_int_equal(get(&side, "127.0.0.1", "/health/live", buf,
			     sizeof(buf)),
			 200);
}

/* The completion_tokens of the access-log line of PATH (the last with
 * stream=1), -1 if none. */
static long streamed_tokens(const char *path)
{
	char *s = slurp(path), *line, *save, *k;
	long n = -1;

	for (line = strtok_r(s, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (strstr(line, "stream=1") &&
		    (k = strstr(line, "completion_tokens=")))
			n = atol(k + 18);
	free(s);
	return n;
}

/* A stream cut by o1d's SIGKILL: its access-log line counts the tokens it
 * sent (it used to count the FINAL's, never sent). The client stops
 * reading after the first chunks, so the stream is surely unfinished
 * when o1d dies (its tokens wait on the HTTP connection: backpressure);
 * then it reads to the end. o1d is restarted for whatever follows. */
static void test_stream_cut_by_crash(void **state)
{
	static const char body[] =
	    "{\"model\":\"default\",\"prompt\":\"The\",\"stream\":true,"
	    "\"max_tokens\":2000}";
	char head[512], *buf = malloc(1 << 20), alog[256];
	int fd = connect_from("127.0.0.1", &side), n;
	size_t got;
	long tokens;
	uint32_t chunks = 0;

	(void)state;
	assert_non_null(buf);
	assert_true(fd >= 0);
	buf[0] = 0;
	n = snprintf(head, sizeof(head),
		     "POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
		     "Connection: close\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\n\r\n%s",
		     sizeof(body) - 1, body);
	assert_int_equal(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
	got = 0;
	while (!strstr(buf, "data: ") || got < 600) {
		ssize_t k = recv(fd, buf + got, 4096, 0);

		assert_true(k > 0);
		got += (size_t)k;
		buf[got] = 0;
	}
	assert_null(strstr(buf, "[DONE]"));
	assert_int_equal(kill(daemon_p.pid, SIGKILL), 0);
	assert_int_equal(waitpid(daemon_p.pid, NULL, 0), daemon_p.pid);
	daemon_p.pid = 0;
	read_all(fd, buf + got, (1 << 20) - got, 30000);
	close(fd);
	for (const char *s = buf; (s = strstr(s, "\"text\":\"")); s++)
		chunks++;
	snprintf(alog, sizeof(alog), "%s/hostile.access", dir);
	for (int i = 0; i < 300 && streamed_tokens(alog) < 0; i++)
		sleep_ms(20);
	tokens = streamed_tokens(alog);
	fprintf(stderr,
		"stream cut by o1d's death: %ld tokens logged, %u text "
		"chunks received\n",
		tokens, chunks);
	assert_true(tokens > 0);
	assert_int_equal(tokens, chunks);
	assert_true(log_has(alog, "daemon_unavailable"));
	free(buf);
	start_daemon();
}

static int setup(void **state)
{
	char rt[64], pa[64];
	const char *sets[] = {rt, pa, NULL};

	(void)state;
	if (harness_setup(o1d_bin, o1model_bin, sidecar_bin))
		return -1;
	start_sidecar(&side, "hostile", NULL);
	snprintf(rt, sizeof(rt), "sidecar.read_timeout_ms=%d", READ_MS);
	snprintf(pa, sizeof(pa), "sidecar.max_connections_per_address=%d",
		 PER_ADDRESS);
	start_sidecar(&slow, "slow", sets);
	return 0;
}

static int teardown(void **state)
{
	struct proc *const sidecars[] = {&side, &slow};

	(void)state;
	return harness_teardown(sidecars, 2);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_slowloris),
	    cmocka_unit_test(test_first_bytes),
	    cmocka_unit_test(test_body_bytes),
	    cmocka_unit_test(test_stream_cut_by_crash),
	};

	if (harness_args(argc, argv, 0, 0, NULL))
		return 2;
	return cmocka_run_group_tests(tests, setup, teardown);
}

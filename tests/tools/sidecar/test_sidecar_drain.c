/* o1-sidecar's drain and failover semantics, for a load balancer in front
 * (argv: o1d, o1model, o1-sidecar; docs/DEPLOY.md states them). o1d serves
 * the demo model with fault injection on, and its latency fault (every
 * engine step sleeps) keeps streams in flight long enough to act on them;
 * nothing below waits for a fixed time, every wait polls with a generous
 * deadline. Checked:
 * - SIGTERM: /health/ready answers 503 "draining" at once while
 *   /health/live stays 200; during sidecar.drain_delay_ms new requests
 *   are still served, with "Connection: close"; a second SIGTERM stops it
 *   (exit 0) without waiting for the delay;
 * - after the delay the listener is closed (connect refused) while the
 *   stream in flight runs to its last token, usage and [DONE], and the
 *   sidecar exits 0 only then;
 * - sidecar.drain_timeout_ms bounds the wait: a stream longer than it is
 *   cut (no [DONE]) and o1d cancels the request;
 * - o1d killed mid-stream: the stream ends with an OpenAI error event
 *   (code daemon_unavailable, which a client may retry elsewhere) and
 *   [DONE], and readiness turns 503 "daemon_down". */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "o1d/admin.h"
#include "sidecar_harness.h"
#include "tests/common/test_util.h"

#define DEADLINE_MS 60000

/* A stream of N tokens (ignore_eos), with usage at its end. */
static void stream_body(char *buf, size_t cap, int n)
{
	snprintf(buf, cap,
		 "{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"Go on\"}],\"max_tokens\":%d,\"ignore_eos\":"
		 "true,\"stream\":true,\"stream_options\":{\"include_usage\":"
		 "true}}",
		 n);
}

static void admin_ok(const char *req)
{
	char buf[4096];
	int fd;

	assert_int_equal(o1_admin_connect(sock, &fd), 0);
	assert_true(o1_admin_call(fd, req, buf, sizeof(buf)) > 0);
	close(fd);
	if (!strstr(buf, "\"ok\":true"))
		fail_msg("%s: %s", req, buf);
}

/* Every engine step sleeps MS (0: off). */
static void latency(int ms)
{
	char req[160];

	snprintf(req, sizeof(req),
		 "{\"op\":\"inject\",\"fault\":\"latency\",\"on\":%s,"
		 "\"param\":%d}",
		 ms ? "true" : "false", ms);
	admin_ok(req);
}

static int active_now(void)
{
	char buf[65536];
	cJSON *j;
	int fd, n;

	assert_int_equal(o1_admin_connect(sock, &fd), 0);
	assert_true(o1_admin_call(fd, "{\"op\":\"status\"}", buf, sizeof(buf)) >
		    0);
	close(fd);
	j = cJSON_Parse(buf);
	assert_non_null(j);
	n = cJSON_GetObjectItem(j, "active")->valueint;
	cJSON_Delete(j);
	return n;
}

/* A TCP connection to P's port: the fd, or -errno. */
static int try_connect(const struct proc *p)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)p->port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	err = -errno;
	close(fd);
	return err;
}

static void send_all(int fd, const char *s)
{
	size_t n = strlen(s), off = 0;

	while (off < n) {
		ssize_t w = send(fd, s + off, n - off, MSG_NOSIGNAL);

		assert_true(w > 0);
		off += (size_t)w;
	}
}

/* Opens a streaming request to P; returns the fd once its first chunk
 * arrived (the request runs in o1d). */
static int open_stream(const struct proc *p, int tokens)
{
	char body[512], req[1024], buf[8192];
	int fd = try_connect(p);
	size_t len = 0;
	uint64_t until = now_ms() + DEADLINE_MS;

	assert_true(fd >= 0);
	stream_body(body, sizeof(body), tokens);
	snprintf(req, sizeof(req),
		 "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		 "\r\n%s",
		 strlen(body), body);
	send_all(fd, req);
	buf[0] = 0;
	while (!strstr(buf, "data: {") && now_ms() < until &&
	       len < sizeof(buf) - 1) {
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);

		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
	}
	if (!strstr(buf, "data: {"))
		fail_msg("no first chunk: %s", buf);
	return fd;
}

/* The rest of a stream until its last chunk, the peer closing it or
 * DEADLINE_MS (malloc'd). */
static char *read_rest(int fd)
{
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	uint64_t until = now_ms() + DEADLINE_MS;

	assert_non_null(buf);
	buf[0] = 0;
	while (now_ms() < until && len < cap - 1 &&
	       !strstr(buf, "\r\n0\r\n\r\n")) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&pf, 1, 100) != 1)
			continue;
		n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
	}
	close(fd);
	return buf;
}

/* curl to P: the status; the headers and body into OUT (malloc'd). */
static int curl(const struct proc *p, const char *path, const char *body,
		char **out)
{
	char cmd[1024], *res = malloc(1 << 16), *nl;
	int code;

	assert_non_null(res);
	snprintf(cmd, sizeof(cmd),
		 "curl -si --max-time 60 %s%s%s -w '\\n%%{http_code}' "
		 "http://127.0.0.1:%d%s",
		 body ? "-H 'Content-Type: application/json' --data-binary '"
		      : "",
		 body ? body : "", body ? "'" : "", p->port, path);
	assert_int_equal(o1_test_run(cmd, res, 1 << 16), 0);
	nl = strrchr(res, '\n');
	assert_non_null(nl);
	code = atoi(nl + 1);
	*nl = 0;
	*out = res;
	return code;
}

/* Polls P's /health/ready until it answers STATUS; returns the body. */
static char *ready_until(const struct proc *p, int status)
{
	uint64_t until = now_ms() + DEADLINE_MS;
	char *out = NULL;

	while (now_ms() < until) {
		free(out);
		if (curl(p, "/health/ready", NULL, &out) == status)
			return out;
		sleep_ms(10);
	}
	fail_msg("/health/ready not %d: %s", status, out);
	return NULL;
}

/* Waits for P's exit: its status (-1: killed by a signal). */
static int exit_status(struct proc *p)
{
	uint64_t until = now_ms() + DEADLINE_MS;
	int st;

	while (now_ms() < until) {
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			p->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		sleep_ms(10);
	}
	fail_msg("the sidecar did not exit within %d ms:\n%s", DEADLINE_MS,
		 slurp(p->log));
	return -1;
}

static void wait_idle(void)
{
	uint64_t until = now_ms() + DEADLINE_MS;

	while (active_now() && now_ms() < until)
		sleep_ms(10);
	assert_int_equal(active_now(), 0);
}

static void start(struct proc *p, const char *name, const char *delay,
		  const char *timeout)
{
	const char *sets[] = {delay, timeout, NULL};

	start_sidecar(p, name, sets);
}

static void test_sigterm_not_ready_still_serving(void **state)
{
	struct proc p = {0};
	char *out, *rest;
	int fd;

	(void)state;
	start(&p, "delay", "sidecar.drain_delay_ms=600000",
	      "sidecar.drain_timeout_ms=600000");
	free(ready_until(&p, 200));
	latency(20);
	fd = open_stream(&p, 100);
	kill(p.pid, SIGTERM);
	out = ready_until(&p, 503);
	assert_non_null(strstr(out, "\"status\":\"draining\""));
	free(out);
	assert_int_equal(curl(&p, "/health/live", NULL, &out), 200);
	free(out);
	/* the balancer has not noticed yet: its requests are still served,
	 * and their connections are not kept for reuse */
	assert_int_equal(curl(&p, "/v1/completions",
			      "{\"model\":\"default\",\"prompt\":\"The\","
			      "\"max_tokens\":4}",
			      &out),
			 200);
	assert_non_null(strcasestr(out, "\r\nConnection: close\r\n"));
	free(out);
	rest = read_rest(fd);
	assert_non_null(strstr(rest, "\"completion_tokens\":100"));
	assert_non_null(strstr(rest, "data: [DONE]"));
	free(rest);
	latency(0);
	kill(p.pid, SIGTERM); /* a second signal: now, not in 10 minutes */
	assert_int_equal(exit_status(&p), 0);
	assert_true(log_has(p.log, "second signal during drain"));
}

static void test_in_flight_finish_after_listener_closes(void **state)
{
	struct proc p = {0};
	uint64_t until = now_ms() + DEADLINE_MS;
	char *rest;
	int fd, c;

	(void)state;
	start(&p, "nodelay", "sidecar.drain_delay_ms=0",
	      "sidecar.drain_timeout_ms=600000");
	latency(20);
	fd = open_stream(&p, 120);
	kill(p.pid, SIGTERM);
	while ((c = try_connect(&p)) >= 0 && now_ms() < until) {
		close(c);
		sleep_ms(10);
	}
	assert_int_equal(c, -ECONNREFUSED);
	rest = read_rest(fd);
	/* an error event's key, not the word: the demo model can write
	 * "error" as content */
	assert_null(strstr(rest, "\"error\":"));
	assert_non_null(strstr(rest, "\"completion_tokens\":120"));
	assert_non_null(strstr(rest, "data: [DONE]"));
	free(rest);
	assert_int_equal(exit_status(&p), 0);
	assert_false(log_has(p.log, "drain timeout"));
	latency(0);
}

static void test_drain_timeout_cuts(void **state)
{
	struct proc p = {0};
	char *rest;
	int fd;

	(void)state;
	start(&p, "short", "sidecar.drain_delay_ms=0",
	      "sidecar.drain_timeout_ms=200");
	latency(50);
	fd = open_stream(&p, 4000); /* 200 s at 50 ms a step */
	kill(p.pid, SIGTERM);
	assert_int_equal(exit_status(&p), 0);
	assert_true(log_has(p.log, "drain timeout: cutting 1 requests"));
	rest = read_rest(fd);
	assert_null(strstr(rest, "data: [DONE]"));
	free(rest);
	wait_idle(); /* the cut request was cancelled in o1d */
	latency(0);
}

static void test_daemon_killed_mid_stream(void **state)
{
	struct proc p = {0};
	char *rest, *out;
	int fd;

	(void)state;
	start(&p, "kill", "sidecar.drain_delay_ms=0",
	      "sidecar.drain_timeout_ms=30000");
	latency(20);
	fd = open_stream(&p, 4000);
	kill(daemon_p.pid, SIGKILL);
	waitpid(daemon_p.pid, NULL, 0);
	daemon_p.pid = 0;
	rest = read_rest(fd);
	assert_non_null(strstr(rest, "data: {\"error\":"));
	assert_non_null(strstr(rest, "\"code\":\"daemon_unavailable\""));
	assert_true(strstr(rest, "\"code\":\"daemon_unavailable\"") <
		    strstr(rest, "data: [DONE]"));
	free(rest);
	out = ready_until(&p, 503);
	assert_non_null(strstr(out, "daemon_down"));
	free(out);
	start_daemon(); /* for the next tests and the teardown */
	free(ready_until(&p, 200));
	assert_int_equal(stop(&p), 0);
}

static int setup(void **state)
{
	(void)state;
	daemon_sets[0] = "faults.enabled=true";
	return harness_setup(o1d_bin, o1model_bin, sidecar_bin);
}

static int teardown(void **state)
{
	(void)state;
	return harness_teardown(NULL, 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sigterm_not_ready_still_serving),
	    cmocka_unit_test(test_in_flight_finish_after_listener_closes),
	    cmocka_unit_test(test_drain_timeout_cuts),
	    cmocka_unit_test(test_daemon_killed_mid_stream),
	};

	if (harness_args(argc, argv, 0, 0, NULL))
		return 2;
	return cmocka_run_group_tests(tests, setup, teardown);
}

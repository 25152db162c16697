/* o1chat and o1bench run against the IPC test server (argv: the server,
 * o1chat, o1bench binaries), whose scripted stream is known exactly: a
 * request yields min(max_tokens, 1000) tokens, token i has id (sum of
 * the prompt's bytes + i) % 1000 and text "<id> ". Checks:
 * - o1chat prints exactly that stream for its prompt, then a timings line
 *   on stderr with the right token count and finish reason; bad
 *   arguments exit 2, a missing socket exit 1;
 * - o1bench run completes every request: requests, completed, tokens
 *   (requests x max_tokens) and errors=0 as key=value lines, the same
 *   numbers in --json, percentiles ordered 0 <= p50 <= p90 <= p99 and
 *   p99 > 0 (tokens read in one poll are legitimately 0 ms apart), and
 *   the server saw exactly that many requests; a missing socket counts
 *   every request as an error and exits 1; bad arguments exit 2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "tests/ipc/ipc_harness.h"
#include "tests/common/test_util.h"

static const char *server_bin, *o1chat, *o1bench;
static struct test_server srv;

static double kv(const char *out, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\n%s=", key);
	p = strstr(out, pat);
	if (!p && !strncmp(out, pat + 1, strlen(pat + 1)))
		p = out - 1;
	if (!p)
		fail_msg("no %s in:\n%s", key, out);
	return strtod(p + strlen(pat), NULL);
}

static void test_o1chat_stream(void **state)
{
	char cmd[1024], out[4096], want[4096] = "", err[4096];
	const char *prompt = "hello there";
	unsigned sum = 0;
	size_t at = 0;
	FILE *f;

	(void)state;
	for (const char *p = prompt; *p; p++)
		sum += (unsigned char)*p;
	for (unsigned i = 0; i < 12; i++)
		at += snprintf(want + at, sizeof(want) - at, "%u ",
			       (sum + i) % 1000);
	strcat(want, "\n");
	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --max-tokens 12 --temperature 0.5 '%s' "
		 "2>/tmp/o1chat-err.%d",
		 o1chat, srv.path, prompt, getpid());
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	assert_string_equal(out, want);
	snprintf(cmd, sizeof(cmd), "/tmp/o1chat-err.%d", getpid());
	f = fopen(cmd, "r");
	assert_non_null(f);
	err[fread(err, 1, sizeof(err) - 1, f)] = 0;
	fclose(f);
	unlink(cmd);
	assert_non_null(strstr(err, "finish=length"));
	assert_non_null(strstr(err, "tokens=12 "));
	assert_non_null(strstr(err, "ttft_ms="));
	assert_non_null(strstr(err, "decode_tok_s="));
}

static void test_o1chat_errors(void **state)
{
	char cmd[1024], out[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "%s --socket %s 2>/dev/null", o1chat,
		 srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --max-tokens 0 hi 2>/dev/null", o1chat,
		 srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --temperature x hi 2>/dev/null", o1chat,
		 srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
	snprintf(cmd, sizeof(cmd), "%s --socket %s.none hi 2>/dev/null", o1chat,
		 srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 1);
}

static void check_ordered(const char *out, const char *name)
{
	char key[64];
	double p[3];
	static const int qs[] = {50, 90, 99};

	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "%s_p%d", name, qs[i]);
		p[i] = kv(out, key);
	}
	if (!(p[0] >= 0 && p[0] <= p[1] && p[1] <= p[2] && p[2] > 0))
		fail_msg("%s: p50 %g p90 %g p99 %g", name, p[0], p[1], p[2]);
}

static double json_num(const cJSON *root, const char *key)
{
	const cJSON *e = cJSON_GetObjectItem(root, key);

	if (!cJSON_IsNumber(e))
		fail_msg("json: no number %s", key);
	return e->valuedouble;
}

static void test_o1bench_run(void **state)
{
	char cmd[1024], out[4096];
	struct server_stats before, after;
	cJSON *root;

	(void)state;
	assert_int_equal(server_stats(&srv, &before), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 40 --concurrency 4 "
		 "--max-tokens 25 --prompt-tokens 8 --temperature 0.8",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	assert_int_equal(kv(out, "requests"), 40);
	assert_int_equal(kv(out, "completed"), 40);
	assert_int_equal(kv(out, "errors"), 0);
	assert_int_equal(kv(out, "tokens"), 40 * 25);
	assert_int_equal(kv(out, "concurrency"), 4);
	assert_true(kv(out, "wall_s") > 0);
	assert_true(kv(out, "throughput_tok_s") > 0);
	check_ordered(out, "ttft_ms");
	check_ordered(out, "itl_ms");
	check_ordered(out, "e2e_ms");
	assert_true(kv(out, "e2e_ms_p50") >= kv(out, "ttft_ms_p50"));
	/* 1 / the mean interval: at least half the intervals reach p50, so
	 * the mean is at least p50 / 2 (p50 printed to 0.1 us) */
	assert_true(kv(out, "stream_decode_tok_s") > 0);
	assert_true(kv(out, "stream_decode_tok_s") *
			(kv(out, "itl_ms_p50") - 1e-4) <=
		    2000);
	assert_int_equal(server_stats(&srv, &after), 0);
	assert_int_equal(after.requests - before.requests, 40);

	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 7 --concurrency 3 "
		 "--max-tokens 5 --json",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	root = cJSON_Parse(out);
	assert_non_null(root);
	assert_int_equal(json_num(root, "completed"), 7);
	assert_int_equal(json_num(root, "tokens"), 35);
	/* the test server counts a text prompt's bytes: o1bench's 16 words,
	 * "the daemon keeps one model in memory and serves every local
	 * client the daemon keeps one", are 87 */
	assert_true(json_num(root, "prompt_tokens_per_request") == 87);
	assert_int_equal(json_num(root, "errors"), 0);
	assert_true(json_num(root, "itl_ms_p99") >=
		    json_num(root, "itl_ms_p50"));
	cJSON_Delete(root);
}

/* Eight streams over two connections: every request completes, and the
 * peak in flight shows at least one connection's four at once (each
 * submits its whole share before it waits) and never more than eight. */
static void test_o1bench_connections(void **state)
{
	char cmd[1024], out[4096];

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 40 --concurrency 8 "
		 "--connections 2 --cold --max-tokens 25",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	assert_int_equal(kv(out, "completed"), 40);
	assert_int_equal(kv(out, "errors"), 0);
	assert_int_equal(kv(out, "tokens"), 40 * 25);
	assert_int_equal(kv(out, "connections"), 2);
	assert_true(kv(out, "peak_inflight") >= 4);
	assert_true(kv(out, "peak_inflight") <= 8);
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 4 --concurrency 2 "
		 "--connections 3 --max-tokens 4 2>/dev/null",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
}

/* The value of KEY on the line that starts with LABEL and a space. */
static double line_kv(const char *out, const char *label, const char *key)
{
	char head[64], pat[64];
	const char *l = out, *end, *p;

	snprintf(head, sizeof(head), "%s ", label);
	snprintf(pat, sizeof(pat), " %s=", key);
	while (l && strncmp(l, head, strlen(head)))
		l = (l = strchr(l, '\n')) ? l + 1 : NULL;
	if (!l)
		fail_msg("no line '%s' in:\n%s", label, out);
	end = strchr(l, '\n');
	p = strstr(l, pat);
	if (!p || (end && p > end))
		fail_msg("no %s on line '%s' in:\n%s", key, label, out);
	return strtod(p + strlen(pat), NULL);
}

/* Every path o1bench ping claims ran with the samples it claims, four
 * clients at once among them, through the daemon and (--inproc) an
 * in-process front loop in the same run, and the server's idle CPU is
 * reported. */
static void test_o1bench_ping(void **state)
{
	static const char *const lines[] = {"shm-spin",
					    "shm-spin-4clients",
					    "shm-sleep",
					    "shm-sleep-daemon",
					    "unix-socket",
					    "unix-socket-sleep",
					    "unix-socket-proc",
					    "unix-socket-proc-sleep",
					    "inproc-shm-spin",
					    "inproc-shm-spin-4clients",
					    "inproc-shm-sleep",
					    "inproc-shm-sleep-daemon"};
	static const int counts[] = {400, 400, 20, 20, 400, 20,
				     400, 20,  400, 400, 20, 20};
	char cmd[1024], out[8192];

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "%s ping --socket %s --count 400 --sleep-count 20 "
		 "--gap-us 300 --clients 4 --inproc",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		assert_int_equal(line_kv(out, lines[i], "n"), counts[i]);
		assert_true(line_kv(out, lines[i], "p50_us") > 0);
		assert_true(line_kv(out, lines[i], "p50_us") <=
			    line_kv(out, lines[i], "p99_us"));
		assert_true(line_kv(out, lines[i], "p99_us") <=
			    line_kv(out, lines[i], "max_us"));
	}
	assert_int_equal(line_kv(out, "idle-cpu", "pid"), srv.pid);
	assert_true(line_kv(out, "idle-cpu", "percent") >= 0);
	snprintf(cmd, sizeof(cmd),
		 "%s ping --socket %s --clients 65 2>/dev/null", o1bench,
		 srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
	snprintf(cmd, sizeof(cmd),
		 "%s ping --socket %s --serve --inproc 2>/dev/null", o1bench,
		 srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
}

/* o1bench stream serves its own socket (front loop and engine thread in
 * process): every path reports every token, and bad arguments exit 2. */
static void test_o1bench_stream(void **state)
{
	static const char *const lines[] = {
	    "stream-spin", "stream-sleep", "stream-sleep-client-default",
	    "unix-stream", "unix-stream-sleep"};
	static const int counts[] = {300, 20, 20, 300, 20};
	char cmd[1024], out[4096];

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "%s stream --socket %s.stream --tokens 300 --sleep-tokens 20 "
		 "--gap-us 300 --spin-gap-us 5 --spin-us 50 2>/dev/null",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(line_kv(out, lines[i], "n"), counts[i]);
		assert_true(line_kv(out, lines[i], "p50_us") > 0);
		assert_true(line_kv(out, lines[i], "p50_us") <=
			    line_kv(out, lines[i], "p99_us"));
	}
	snprintf(cmd, sizeof(cmd),
		 "%s stream --socket %s.stream --tokens 0 2>/dev/null", o1bench,
		 srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
	snprintf(cmd, sizeof(cmd), "%s stream --tokens 2>/dev/null", o1bench);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
}

static void test_o1bench_errors(void **state)
{
	char cmd[1024], out[4096];

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s.none --requests 6 --concurrency 2 "
		 "--max-tokens 4 2>/dev/null",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 1);
	assert_int_equal(kv(out, "errors"), 6);
	assert_int_equal(kv(out, "completed"), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 0 --concurrency 2 "
		 "--max-tokens 4 2>/dev/null",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 2 --max-tokens 4 2>/dev/null",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 2 --concurrency 1 "
		 "--max-tokens 4 --temperature -1 2>/dev/null",
		 o1bench, srv.path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
}

static int setup(void **state)
{
	(void)state;
	return server_start(&srv, server_bin, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return server_stop(&srv) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_o1chat_stream),
	    cmocka_unit_test(test_o1chat_errors),
	    cmocka_unit_test(test_o1bench_run),
	    cmocka_unit_test(test_o1bench_connections),
	    cmocka_unit_test(test_o1bench_ping),
	    cmocka_unit_test(test_o1bench_stream),
	    cmocka_unit_test(test_o1bench_errors),
	};

	if (argc < 4) {
		fprintf(stderr, "usage: %s SERVER O1CHAT O1BENCH\n", argv[0]);
		return 2;
	}
	server_bin = argv[1];
	o1chat = argv[2];
	o1bench = argv[3];
	return cmocka_run_group_tests(tests, setup, teardown);
}

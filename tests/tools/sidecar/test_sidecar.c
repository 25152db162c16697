/* o1-sidecar end to end (argv: o1d, o1model, o1-sidecar): o1model makes
 * the demo model, o1d serves it on the CPU, the sidecar listens on a free
 * loopback port; requests go through curl (and raw sockets where curl
 * cannot misbehave enough). Checked:
 * - every GET endpoint (health, models, metrics) and 404/405s;
 * - greedy completions and chat equal the same request sent through
 *   libo1client directly; streamed deltas join to the whole answer, with
 *   [DONE] last and usage when asked; stop sequences cut the text where
 *   the unstopped text has them; logprobs are ordered and greedy picks
 *   the best;
 * - bad input is refused with the right status and OpenAI's error shape;
 *   1000 connections opened and dropped in odd states leave it serving;
 * - a client that hangs up mid-stream has its request cancelled in o1d
 *   at once; the concurrency limit answers 429 and the deadline 504;
 *   draining and a stopped daemon are 503, and a restarted daemon is
 *   served again; one access-log line per request with its timings;
 * - response_format: json_schema (strict) answers, whole and streamed,
 *   parse and validate (tests/daemon/validate_json.py: Python's json and
 *   jsonschema), json_object answers are objects, and a schema keyword
 *   outside the subset is a 400 naming it and response_format. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <o1/client.h>

#include "o1d/admin.h"
#include "sidecar_harness.h"
#include "tests/common/test_util.h"

static struct proc side;
static char access_log[192];

static int http(const char *method, const char *path, const char *body,
		char **out)
{
	return http_to(&side, method, path, body, out);
}

static cJSON *parse_json(const char *s)
{
	cJSON *j = cJSON_Parse(s);

	if (!j)
		fail_msg("not JSON: %s", s);
	return j;
}

/* Status and OpenAI's error shape, with CODE when not NULL. */
static void expect_error(const char *method, const char *path, const char *body,
			 int status, const char *code)
{
	char *out;
	int got = http(method, path, body, &out);
	cJSON *j;

	if (got != status)
		fail_msg("%s %s %.200s: %d, not %d: %s", method, path,
			 body ? body : "", got, status, out);
	j = parse_json(out);
	assert_true(strlen(json_str(j, "error.message")) > 0);
	assert_true(strlen(json_str(j, "error.type")) > 0);
	assert_non_null(cJSON_GetObjectItem(json_at(j, "error"), "param"));
	assert_non_null(cJSON_GetObjectItem(json_at(j, "error"), "code"));
	if (code)
		assert_string_equal(json_str(j, "error.code"), code);
	cJSON_Delete(j);
	free(out);
}

static cJSON *admin(const char *req)
{
	char buf[65536];
	int fd;

	assert_int_equal(o1_admin_connect(sock, &fd), 0);
	assert_true(o1_admin_call(fd, req, buf, sizeof(buf)) > 0);
	close(fd);
	return parse_json(buf);
}

static int active_now(void)
{
	cJSON *st = admin("{\"op\":\"status\"}");
	int active = (int)json_num(st, "active");

	cJSON_Delete(st);
	return active;
}

/* Waits up to MS for o1d to hold no request; returns the ms it took. */
static int wait_idle(int ms)
{
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < (uint64_t)ms) {
		cJSON *st = admin("{\"op\":\"status\"}");
		int active = (int)json_num(st, "active");

		cJSON_Delete(st);
		if (active == 0)
			return (int)(now_ms() - t0);
		sleep_ms(5);
	}
	fail_msg("o1d still holds requests after %d ms", ms);
	return -1;
}

/* ---- tests ---- */

static void test_endpoints(void **state)
{
	char *out;
	cJSON *j;

	(void)state;
	assert_int_equal(http("GET", "/health/live", NULL, &out), 200);
	free(out);
	assert_int_equal(http("GET", "/health/ready", NULL, &out), 200);
	j = parse_json(out);
	assert_string_equal(json_str(j, "status"), "ready");
	cJSON_Delete(j);
	free(out);
	assert_int_equal(http("GET", "/v1/models", NULL, &out), 200);
	j = parse_json(out);
	assert_string_equal(json_str(j, "object"), "list");
	assert_string_equal(json_str(j, "data.0.id"), "o1 demo bigram");
	cJSON_Delete(j);
	free(out);
	assert_int_equal(http("GET", "/v1/models/default", NULL, &out), 200);
	free(out);
	expect_error("GET", "/v1/models/gpt-4o", NULL, 404, "model_not_found");
	expect_error("GET", "/v2/nothing", NULL, 404, "not_found");
	expect_error("GET", "/v1/chat/completions", NULL, 405,
		     "method_not_allowed");
	assert_int_equal(http("GET", "/metrics", NULL, &out), 200);
	assert_non_null(strstr(out, "# TYPE o1_"));
	free(out);
}

static char *completion(const char *body, cJSON **j)
{
	char *out;
	int status = http("POST", "/v1/completions", body, &out);

	if (status != 200)
		fail_msg("%d: %s", status, out);
	*j = parse_json(out);
	free(out);
	return (char *)json_str(*j, "choices.0.text");
}

static void test_completion_equals_client(void **state)
{
	struct direct d;
	cJSON *j;
	char *text;

	(void)state;
	text = completion("{\"model\":\"default\",\"prompt\":\"The daemon\","
			  "\"max_tokens\":24,\"temperature\":0}",
			  &j);
	direct("The daemon", 10, O1_FLAG_ADD_BOS, 24, NULL, &d);
	print_message("completion: %s\n", text);
	assert_true(d.len > 0);
	assert_string_equal(text, d.text);
	assert_string_equal(json_str(j, "object"), "text_completion");
	assert_int_equal(json_num(j, "usage.completion_tokens"),
			 d.final.generated_tokens);
	assert_int_equal(json_num(j, "usage.prompt_tokens"),
			 d.final.prompt_tokens);
	assert_string_equal(json_str(j, "choices.0.finish_reason"),
			    d.final.finish == O1_FINISH_REASON_LENGTH ? "length"
								      : "stop");
	cJSON_Delete(j);
}

static const char chat_body[] =
    "{\"model\":\"o1 demo bigram\",\"messages\":[{\"role\":\"system\","
    "\"content\":\"You answer.\"},{\"role\":\"user\",\"content\":"
    "\"What does the daemon do?\"}],\"max_tokens\":40,\"temperature\":0%s}";

static void test_chat_equals_client(void **state)
{
	static const char packed[] =
	    "system\0You answer.\0user\0What does the daemon do?";
	char body[512], *out;
	struct direct d;
	cJSON *j;

	(void)state;
	snprintf(body, sizeof(body), chat_body, "");
	assert_int_equal(http("POST", "/v1/chat/completions", body, &out), 200);
	j = parse_json(out);
	free(out);
	direct(packed, sizeof(packed) - 1, O1_FLAG_CHAT, 40, NULL, &d);
	print_message("chat: %s\n", json_str(j, "choices.0.message.content"));
	assert_true(d.len > 0);
	assert_string_equal(json_str(j, "choices.0.message.content"), d.text);
	assert_string_equal(json_str(j, "choices.0.message.role"), "assistant");
	assert_string_equal(json_str(j, "object"), "chat.completion");
	assert_int_equal(json_num(j, "usage.total_tokens"),
			 d.final.prompt_tokens + d.final.generated_tokens);
	cJSON_Delete(j);
}

/* Joins the deltas of an SSE answer; checks its framing. */
static void join_sse(char *sse, bool chat, char *text, size_t cap,
		     cJSON **usage, const char **finish)
{
	static char fin[32];
	char *line, *save;
	bool done = false;

	*text = 0;
	*usage = NULL;
	*finish = NULL;
	for (line = strtok_r(sse, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		cJSON *j, *c, *u;

		assert_false(done);
		assert_int_equal(strncmp(line, "data: ", 6), 0);
		if (!strcmp(line + 6, "[DONE]")) {
			done = true;
			continue;
		}
		j = parse_json(line + 6);
		c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
		u = cJSON_GetObjectItem(j, "usage");
		if (c) {
			strncat(text,
				json_str(c, chat ? "delta.content" : "text"),
				cap - strlen(text) - 1);
			if (cJSON_IsString(
				cJSON_GetObjectItem(c, "finish_reason"))) {
				snprintf(fin, sizeof(fin), "%s",
					 json_str(c, "finish_reason"));
				*finish = fin;
			}
		}
		if (cJSON_IsObject(u))
			*usage = cJSON_Duplicate(u, 1);
		cJSON_Delete(j);
	}
	assert_true(done);
}

static void test_stream_equals_whole(void **state)
{
	char body[512], *out, text[8192];
	const char *finish;
	cJSON *whole, *usage;

	(void)state;
	snprintf(body, sizeof(body), chat_body, "");
	assert_int_equal(http("POST", "/v1/chat/completions", body, &out), 200);
	whole = parse_json(out);
	free(out);
	snprintf(body, sizeof(body), chat_body,
		 ",\"stream\":true,\"stream_options\":{\"include_usage\":"
		 "true}");
	assert_int_equal(http("POST", "/v1/chat/completions", body, &out), 200);
	assert_non_null(strstr(out, "\"role\":\"assistant\""));
	join_sse(out, true, text, sizeof(text), &usage, &finish);
	free(out);
	assert_string_equal(text, json_str(whole, "choices.0.message.content"));
	assert_non_null(finish);
	assert_string_equal(finish, json_str(whole, "choices.0.finish_reason"));
	assert_non_null(usage);
	assert_int_equal(json_num(usage, "completion_tokens"),
			 json_num(whole, "usage.completion_tokens"));
	cJSON_Delete(usage);
	cJSON_Delete(whole);
}

/* Whether the 4 bytes of S are ASCII text (a window of the completion may
 * cut a UTF-8 character; newlines and tabs are fine). */
static int ascii_text(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x7f ||
		    ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t'))
			return 0;
	return 1;
}

/* ignore_eos: the demo model is the bigrams of the .md files in docs, so
 * its greedy completion changes as the docs do (a run of markdown table
 * rows, "  |\n" again and again, after the thirty-fifth session's): the
 * stop is any 4 bytes of it, from its middle on and then from its start,
 * whose first occurrence is past its third byte, escaped by cJSON. */
static void test_stop_sequence(void **state)
{
	char body[512], stop[8], want[8192], *out, *quoted, text[8192];
	const char *full, *finish, *at = NULL;
	cJSON *j, *usage;
	size_t n;

	(void)state;
	full = completion(
	    "{\"model\":\"default\",\"prompt\":\"The daemon\","
	    "\"max_tokens\":60,\"temperature\":0,\"ignore_eos\":true}",
	    &j);
	n = strlen(full);
	assert_true(n > 20);
	for (size_t i = 0; i + 4 < n; i++) {
		size_t k = (n / 2 + i) % (n - 4);

		memcpy(stop, full + k, 4);
		stop[4] = 0;
		at = strstr(full, stop);
		if (at - full >= 3 && ascii_text(stop))
			break;
	}
	snprintf(want, sizeof(want), "%.*s", (int)(at - full), full);
	cJSON_Delete(j);
	assert_true(at - full >= 3 && ascii_text(stop));
	/* a JSON string, quotes included (cJSON escapes it) */
	j = cJSON_CreateString(stop);
	quoted = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	assert_non_null(quoted);
	snprintf(body, sizeof(body),
		 "{\"model\":\"default\",\"prompt\":\"The daemon\","
		 "\"max_tokens\":60,\"temperature\":0,\"ignore_eos\":true,"
		 "\"stop\":[\"zzqq\","
		 "%s]}",
		 quoted);
	full = completion(body, &j);
	print_message("stop '%s': '%s'\n", stop, full);
	assert_string_equal(full, want);
	assert_string_equal(json_str(j, "choices.0.finish_reason"), "stop");
	cJSON_Delete(j);
	snprintf(body, sizeof(body),
		 "{\"model\":\"default\",\"prompt\":\"The daemon\","
		 "\"max_tokens\":60,\"temperature\":0,\"ignore_eos\":true,"
		 "\"stop\":%s,"
		 "\"stream\":true}",
		 quoted);
	cJSON_free(quoted);
	assert_int_equal(http("POST", "/v1/completions", body, &out), 200);
	join_sse(out, false, text, sizeof(text), &usage, &finish);
	free(out);
	assert_string_equal(text, want);
	assert_string_equal(finish, "stop");
	assert_null(usage);
}

static void test_logprobs(void **state)
{
	char *out;
	const cJSON *content;
	cJSON *j;

	(void)state;
	assert_int_equal(
	    http("POST", "/v1/chat/completions",
		 "{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"Tell me\"}],\"max_tokens\":8,\"temperature\":0,"
		 "\"ignore_eos\":true,\"logprobs\":true,\"top_logprobs\":3}",
		 &out),
	    200);
	j = parse_json(out);
	free(out);
	content = json_at(j, "choices.0.logprobs.content");
	assert_int_equal(cJSON_GetArraySize(content), 8);
	for (int i = 0; i < 8; i++) {
		const cJSON *t = cJSON_GetArrayItem(content, i);
		const cJSON *top = json_at(t, "top_logprobs");
		double lp = json_num(t, "logprob");

		assert_int_equal(cJSON_GetArraySize(top), 3);
		assert_true(lp <= 0);
		assert_true(json_num(top, "0.logprob") >=
			    json_num(top, "1.logprob"));
		assert_true(json_num(top, "1.logprob") >=
			    json_num(top, "2.logprob"));
		assert_true(fabs(json_num(top, "0.logprob") - lp) < 1e-4);
		assert_string_equal(json_str(top, "0.token"),
				    json_str(t, "token"));
		for (int k = 1; k < 3; k++) { /* named by o1d's TOP_TEXT */
			char name[16];
			const char *v;
			size_t n;

			snprintf(name, sizeof(name), "%d.token", k);
			v = json_str(top, name);
			n = strlen(v);
			/* not the "<id>" stand-in */
			assert_false(n > 2 && v[0] == '<' && v[n - 1] == '>' &&
				     strspn(v + 1, "0123456789") == n - 2);
			snprintf(name, sizeof(name), "%d.bytes", k);
			assert_true(cJSON_GetArraySize(json_at(top, name)) > 0);
		}
	}
	cJSON_Delete(j);
}

/* Whole code points in the first N bytes of S (a character cut at N is
 * not counted): a Python str's length of the bytes decoded so far. */
static size_t code_points(const char *s, size_t n)
{
	size_t k = 0, i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

		if (i + len > n)
			break;
		i += len;
		k++;
	}
	return k;
}

/* /v1/completions logprobs.text_offset counts code points (what a
 * Python client indexes the text with), not bytes: each token's offset
 * is the whole code points of the tokens before it. A multi-byte prompt,
 * and an answer held to multi-byte text by a const schema (the demo's
 * byte-level vocabulary writes the emoji a byte at a time, so tokens
 * also split characters). */
static void test_text_offset(void **state)
{
	static const char want[] =
	    "\"\xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xe2\x89\xa4 "
	    "\xf0\x9f\x98\x80\"";
	char joined[4096];
	const cJSON *toks, *offs;
	size_t n = 0;
	int count;
	cJSON *j;
	char *text;

	(void)state;
	text = completion(
	    "{\"model\":\"default\",\"prompt\":\"\u00e9t\u00e9 \u2014\","
	    "\"max_tokens\":64,\"temperature\":0,\"logprobs\":1,"
	    "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
	    "{\"name\":\"t\",\"schema\":{\"const\":\"\u00e9t\u00e9 "
	    "\u65e5\u672c \u2264 \\ud83d\\ude00\"}}}}",
	    &j);
	assert_string_equal(text, want);
	toks = json_at(j, "choices.0.logprobs.tokens");
	offs = json_at(j, "choices.0.logprobs.text_offset");
	count = cJSON_GetArraySize(toks);
	assert_true(count > 0);
	assert_int_equal(cJSON_GetArraySize(offs), count);
	for (int k = 0; k < count; k++) {
		const char *t = cJSON_GetArrayItem(toks, k)->valuestring;

		assert_int_equal(cJSON_GetArrayItem(offs, k)->valuedouble,
				 (double)code_points(joined, n));
		assert_true(n + strlen(t) < sizeof(joined));
		memcpy(joined + n, t, strlen(t));
		n += strlen(t);
	}
	assert_int_equal(n, strlen(want));
	assert_memory_equal(joined, want, n);
	assert_int_equal(code_points(want, n), 12); /* in 23 bytes */
	print_message("text_offset: %d tokens, last at %d\n", count,
		      (int)cJSON_GetArrayItem(offs, count - 1)->valuedouble);
	cJSON_Delete(j);
}

/* Without max_tokens the answer may run to the context: o1d's, as its
 * welcome gave it, here capped by the sidecar's model.max_context_tokens
 * (300, below o1d's own). */
static void test_default_max_tokens(void **state)
{
	cJSON *j;

	(void)state;
	completion("{\"model\":\"default\",\"prompt\":\"The\","
		   "\"temperature\":0,\"ignore_eos\":true}",
		   &j);
	assert_int_equal(json_num(j, "usage.completion_tokens"), 300);
	assert_string_equal(json_str(j, "choices.0.finish_reason"), "length");
	cJSON_Delete(j);
}

static void test_bad_input(void **state)
{
	static const struct {
		const char *body;
		int status;
		const char *code;
	} cases[] = {
	    {"{\"model\":", 400, "invalid_value"},
	    {"not json at all", 400, "invalid_value"},
	    {"{\"model\":\"default\",\"messages\":\"hi\"}", 400, NULL},
	    {"{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
	     "\"content\":\"x\"}],\"max_tokens\":\"ten\"}",
	     400, NULL},
	    {"{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
	     "\"content\":\"x\"}],\"max_tokens\":-5}",
	     400, NULL},
	    {"{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
	     "\"content\":\"x\"}],\"temperature\":NaN}",
	     400, NULL},
	    {"{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
	     "\"content\":\"x\"}],\"temperature\":\"NaN\"}",
	     400, NULL},
	    {"{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
	     "\"content\":\"x\"}],\"max_tokens\":100000}",
	     400, "context_length_exceeded"},
	    {"{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\","
	     "\"content\":\"x\"}]}",
	     404, "model_not_found"},
	};
	size_t big = 2u << 20;
	char *huge = malloc(big + 1), *out;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_error("POST", "/v1/chat/completions", cases[i].body,
			     cases[i].status, cases[i].code);
	assert_non_null(huge);
	memset(huge, ' ', big);
	memcpy(huge, "{\"a\":\"", 6);
	huge[big] = 0;
	expect_error("POST", "/v1/chat/completions", huge, 413,
		     "request_too_large");
	free(huge);
	assert_int_equal(
	    http("POST", "/v1/completions",
		 "{\"model\":\"default\",\"prompt\":\"The\",\"max_tokens\":4}",
		 &out),
	    200);
	free(out);
}

static int connect_side(const struct proc *p)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)p->port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void send_all(int fd, const char *s)
{
	size_t n = strlen(s), off = 0;

	while (off < n) {
		ssize_t w = send(fd, s + off, n - off, MSG_NOSIGNAL);

		if (w <= 0)
			return; /* refused at accept: fine */
		off += (size_t)w;
	}
}

static void post_raw(int fd, const char *path, const char *body)
{
	char req[2048];

	snprintf(req, sizeof(req),
		 "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: "
		 "application/json\r\nContent-Length: %zu\r\n\r\n%s",
		 path, strlen(body), body);
	send_all(fd, req);
}

static const char long_stream[] =
    "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":"
    "\"Go on\"}],\"max_tokens\":3000,\"ignore_eos\":true,\"stream\":true}";

/* Ms until a plain request to the sidecar is answered 200 (curl -f
 * exits 0; a 429 or 503 refusal for connections still counted does not
 * count as serving), polling; fails after MS. */
static int wait_serving(int ms)
{
	uint64_t t0 = now_ms();
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "curl -sf -o /dev/null --max-time 5 "
		 "http://127.0.0.1:%d/health/ready",
		 side.port);
	while (now_ms() - t0 < (uint64_t)ms) {
		if (system(cmd) == 0)
			return (int)(now_ms() - t0);
		sleep_ms(20);
	}
	fail_msg("the sidecar answers nothing %d ms after the drops", ms);
	return -1;
}

static void test_connections_dropped(void **state)
{
	enum { BATCH = 100, TOTAL = 1000 };
	int fds[BATCH];
	char *out;

	(void)state;
	for (int done = 0; done < TOTAL; done += BATCH) {
		for (int i = 0; i < BATCH; i++) {
			fds[i] = connect_side(&side);
			switch ((done + i) % 4) {
			case 1:
				send_all(fds[i], "GET /health/li");
				break;
			case 2:
				send_all(fds[i],
					 "POST /v1/completions HTTP/1.1\r\n"
					 "Content-Length: 100\r\n\r\n{\"mo");
				break;
			case 3:
				post_raw(fds[i], "/v1/chat/completions",
					 long_stream);
				break;
			}
		}
		for (int i = 0; i < BATCH; i++)
			close(fds[i]);
	}
	print_message("idle %d ms after the drops\n", wait_idle(10000));
	/* The dropped connections may still count against the limits for a
	 * moment (a loaded machine is slow to reap them: the guard answers
	 * 429 for the address, or libmicrohttpd closes a connection over its
	 * limit): the sidecar must be back within seconds, not at once. */
	print_message("serving again %d ms after that\n",
		      wait_serving(10000));
	assert_int_equal(http("GET", "/health/ready", NULL, &out), 200);
	free(out);
	assert_int_equal(
	    http("POST", "/v1/completions",
		 "{\"model\":\"default\",\"prompt\":\"The\",\"max_tokens\":4}",
		 &out),
	    200);
	free(out);
}

/* Reads from FD until S arrived (or 10 s passed); BUF keeps the last
 * bytes read. */
static void read_until(int fd, const char *s, char *buf, size_t cap)
{
	uint64_t until = now_ms() + 10000;
	size_t len = 0;

	buf[0] = 0;
	while (!strstr(buf, s) && now_ms() < until) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 100) != 1)
			continue;
		if (len > cap / 2) { /* keep the newest half */
			memmove(buf, buf + len - cap / 4, cap / 4);
			len = cap / 4;
		}
		n = recv(fd, buf + len, cap - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = 0;
	}
	if (!strstr(buf, s))
		fail_msg("no '%s' in: %.300s", s, buf);
}

static void test_client_abort_cancels(void **state)
{
	char buf[8192];
	int fd, ms;

	(void)state;
	fd = connect_side(&side);
	post_raw(fd, "/v1/chat/completions", long_stream);
	read_until(fd, "data: {", buf, sizeof(buf));
	assert_int_equal(active_now(), 1);
	close(fd);
	ms = wait_idle(2000);
	print_message("cancelled in o1d %d ms after the hang-up\n", ms);
	assert_true(ms < 1000); /* "at once", with room for a loaded box */
	sleep_ms(50);
	assert_true(log_has(access_log, "stream=1 finish=client_abort"));
	/* the same for a whole answer, whose thread waits for the FINAL */
	fd = connect_side(&side);
	post_raw(fd, "/v1/completions",
		 "{\"model\":\"default\",\"prompt\":\"Go\",\"max_tokens\":3000,"
		 "\"ignore_eos\":true}");
	sleep_ms(200);
	assert_int_equal(active_now(), 1);
	close(fd);
	ms = wait_idle(2000);
	print_message("whole answer: cancelled %d ms after the hang-up\n", ms);
	assert_true(ms < 1000); /* "at once", with room for a loaded box */
	sleep_ms(50);
	assert_true(log_has(access_log, "status=499 stream=0 "
					"finish=client_abort"));
}

static void test_limits(void **state)
{
	static const char *const sets[] = {"sidecar.max_concurrent=1",
					   "sidecar.request_timeout_ms=1500",
					   "sidecar.idle_timeout_s=1", NULL};
	struct proc lim = {0};
	char buf[65536], *out;
	uint64_t t0;
	int fd, status;

	(void)state;
	start_sidecar(&lim, "limited", sets);
	fd = connect_side(&lim);
	post_raw(fd, "/v1/chat/completions", long_stream);
	read_until(fd, "data: {", buf, sizeof(buf));
	status = http_to(&lim, "POST", "/v1/completions",
			 "{\"model\":\"default\",\"prompt\":\"The\"}", &out);
	assert_int_equal(status, 429);
	assert_non_null(strstr(out, "rate_limit_exceeded"));
	free(out);
	/* the stream passes its deadline: an error event, then [DONE] */
	read_until(fd, "data: [DONE]", buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"code\":\"timeout\""));
	close(fd);
	t0 = now_ms();
	status = http_to(&lim, "POST", "/v1/completions",
			 "{\"model\":\"default\",\"prompt\":\"The\","
			 "\"max_tokens\":3000,\"ignore_eos\":true}",
			 &out);
	print_message("deadline: %d after %llu ms\n", status,
		      (unsigned long long)(now_ms() - t0));
	assert_int_equal(status, 504);
	free(out);
	wait_idle(2000);
	/* an idle connection is closed after idle_timeout_s */
	fd = connect_side(&lim);
	t0 = now_ms();
	while (now_ms() - t0 < 5000 && recv(fd, buf, 1, MSG_DONTWAIT) < 0)
		sleep_ms(20);
	print_message("idle connection closed after %llu ms\n",
		      (unsigned long long)(now_ms() - t0));
	assert_true(now_ms() - t0 >= 900 && now_ms() - t0 < 5000);
	close(fd);
	assert_int_equal(stop(&lim), 0);
}

/* A refusal's error object: CODE, the parameter PARAM and a message
 * holding WHAT (the limit). */
static void expect_refused(const char *path, const char *body,
			   const char *code, const char *param,
			   const char *what)
{
	char *out;
	int got = http("POST", path, body, &out);
	cJSON *j;

	if (got != 400)
		fail_msg("%s: %d, not 400: %s", path, got, out);
	j = parse_json(out);
	assert_string_equal(json_str(j, "error.code"), code);
	assert_string_equal(json_str(j, "error.param"), param);
	if (!strstr(json_str(j, "error.message"), what))
		fail_msg("message lacks \"%s\": %s", what, out);
	cJSON_Delete(j);
	free(out);
}

/* The value of the Prometheus sample LINE starts with in /metrics. */
static double prom(const char *line)
{
	char *out, *at;
	double v;

	assert_int_equal(http("GET", "/metrics", NULL, &out), 200);
	at = strstr(out, line);
	if (!at)
		fail_msg("/metrics lacks %s", line);
	v = strtod(at + strlen(line), NULL);
	free(out);
	return v;
}

/* A client's mistakes are 400s naming the parameter and the limit
 * (libo1client refuses them before they are sent): a 240 KB prompt, ten
 * times (more than ipc.max_violations), max_tokens over the context, top_k
 * over the vocabulary. o1d sees no violation and counts no failure, and
 * the pooled connection keeps serving. */
static void test_client_mistakes(void **state)
{
	static const char head[] = "{\"model\":\"default\",\"messages\":"
				   "[{\"role\":\"user\",\"content\":\"";
	size_t n = 240 * 1024;
	char *body = malloc(sizeof(head) + n + 16), *out;
	double viol = prom("o1_protocol_violations_total "),
	       quota = prom("o1_requests_failed_total{reason=\"quota\"} ");

	(void)state;
	assert_non_null(body);
	strcpy(body, head);
	memset(body + strlen(head), 'a', n);
	strcpy(body + strlen(head) + n, "\"}]}");
	for (int i = 0; i < 10; i++)
		expect_refused("/v1/chat/completions", body,
			       "context_length_exceeded", "messages",
			       "limit of 65536 bytes");
	free(body);
	expect_refused("/v1/completions",
		       "{\"model\":\"default\",\"prompt\":\"The\","
		       "\"max_tokens\":100000}",
		       "context_length_exceeded", "max_tokens", "limit of");
	expect_refused("/v1/completions",
		       "{\"model\":\"default\",\"prompt\":\"The\","
		       "\"top_k\":1000000,\"max_tokens\":2}",
		       "invalid_value", "top_k", "vocabulary");
	assert_int_equal(http("POST", "/v1/completions",
			      "{\"model\":\"default\",\"prompt\":\"The\","
			      "\"max_tokens\":2}",
			      &out),
			 200);
	free(out);
	assert_true(prom("o1_protocol_violations_total ") == viol);
	assert_true(prom("o1_requests_failed_total{reason=\"quota\"} ") ==
		    quota);
	assert_false(log_has(daemon_p.log, "violation"));
}

static void test_draining(void **state)
{
	cJSON *r;
	char *out;

	(void)state;
	r = admin("{\"op\":\"drain\"}");
	cJSON_Delete(r);
	expect_error("POST", "/v1/completions",
		     "{\"model\":\"default\",\"prompt\":\"The\"}", 503,
		     "draining");
	assert_int_equal(http("GET", "/health/ready", NULL, &out), 503);
	assert_non_null(strstr(out, "draining"));
	free(out);
	r = admin("{\"op\":\"resume\"}");
	cJSON_Delete(r);
	assert_int_equal(http("GET", "/health/ready", NULL, &out), 200);
	free(out);
}

static void test_daemon_restart(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(stop(&daemon_p), 0);
	assert_int_equal(http("GET", "/health/ready", NULL, &out), 503);
	assert_non_null(strstr(out, "daemon_down"));
	free(out);
	expect_error("POST", "/v1/completions",
		     "{\"model\":\"default\",\"prompt\":\"The\"}", 503,
		     "daemon_unavailable");
	start_daemon();
	for (int i = 0; i < 3; i++) { /* pooled handles went stale */
		int st = http("POST", "/v1/completions",
			      "{\"model\":\"default\",\"prompt\":\"The\","
			      "\"max_tokens\":4}",
			      &out);

		if (st != 200)
			fail_msg("after the restart: %d %s", st, out);
		free(out);
	}
}

static void test_unix_socket(void **state)
{
	char path[128], cmd[512], out[512];
	char *argv[] = {(char *)sidecar_bin, "--daemon", sock, "--listen", cmd,
			"--access-log",	     "-",	 NULL};
	struct proc u = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/http.sock", dir);
	snprintf(cmd, sizeof(cmd), "unix:%s", path);
	snprintf(u.log, sizeof(u.log), "%s/unix.log", dir);
	spawn(&u, argv, "o1-sidecar: ready listen=unix:");
	snprintf(cmd, sizeof(cmd),
		 "curl -s --max-time 30 --unix-socket %s -w ' %%{http_code}' "
		 "http://localhost/v1/models/default",
		 path);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "\"id\":\"default\""));
	assert_non_null(strstr(out, " 200"));
	assert_int_equal(stop(&u), 0);
	assert_int_equal(access(path, F_OK), -1); /* removed at exit */
}

static void test_access_log(void **state)
{
	char *s = slurp(access_log), *line;
	int n = 0;

	(void)state;
	for (line = strstr(s, "access "); line;
	     line = strstr(line + 1, "access "))
		n++;
	assert_true(n > 20);
	assert_non_null(strstr(s, "method=POST path=/v1/chat/completions "
				  "status=200 stream=0 finish=length"));
	assert_non_null(strstr(s, "status=413"));
	assert_null(strstr(s, "ttft_ms=-1.000 total_ms=-1"));
	free(s);
}

static const char *validator; /* validate_json.py, or NULL */

static const char format_schema[] =
    "{\"type\":\"object\",\"properties\":{\"answer\":{\"enum\":"
    "[\"yes\",\"no\",\"maybe\"]},\"n\":{\"type\":\"integer\","
    "\"minimum\":0,\"maximum\":99},\"why\":{\"type\":\"string\","
    "\"maxLength\":20}},\"required\":[\"answer\",\"n\",\"why\"],"
    "\"additionalProperties\":false}";

/* Appends {"schema": SCHEMA (NULL: json_object), "text": TEXT} to F. */
static void add_doc(FILE *f, const char *schema, const char *text)
{
	cJSON *o = cJSON_CreateObject();
	char *line;

	cJSON_AddItemToObject(o, "schema", schema ? parse_json(schema)
						  : cJSON_CreateNull());
	cJSON_AddStringToObject(o, "text", text);
	line = cJSON_PrintUnformatted(o);
	fprintf(f, "%s\n", line);
	free(line);
	cJSON_Delete(o);
}

static void test_response_format(void **state)
{
	char body[2048], path[160], cmd[400], *out, text[8192];
	const char *finish;
	cJSON *j, *usage;
	FILE *f;
	int ret;

	(void)state;
	snprintf(path, sizeof(path), "%s/docs.jsonl", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	for (int seed = 1; seed <= 6; seed++) {
		snprintf(body, sizeof(body),
			 "{\"model\":\"default\",\"messages\":[{\"role\":"
			 "\"user\",\"content\":\"Is it?\"}],\"max_tokens\":"
			 "200,\"temperature\":0.9,\"seed\":%d,%s"
			 "\"response_format\":{\"type\":\"json_schema\","
			 "\"json_schema\":{\"name\":\"a\",\"strict\":true,"
			 "\"schema\":%s}}}",
			 seed, seed > 3 ? "\"stream\":true," : "",
			 format_schema);
		assert_int_equal(http("POST", "/v1/chat/completions", body,
				      &out),
				 200);
		if (seed > 3) {
			join_sse(out, true, text, sizeof(text), &usage,
				 &finish);
			cJSON_Delete(usage);
		} else {
			j = parse_json(out);
			snprintf(text, sizeof(text), "%s",
				 json_str(j, "choices.0.message.content"));
			assert_string_equal(
			    json_str(j, "choices.0.finish_reason"), "stop");
			finish = "stop";
			cJSON_Delete(j);
		}
		assert_non_null(finish);
		assert_string_equal(finish, "stop");
		print_message("json_schema, seed %d: %s\n", seed, text);
		cJSON_Delete(parse_json(text));
		add_doc(f, format_schema, text);
		free(out);
	}
	assert_int_equal(http("POST", "/v1/completions",
			      "{\"model\":\"default\",\"prompt\":\"The "
			      "daemon\",\"max_tokens\":250,\"temperature\":1,"
			      "\"seed\":2,"
			      "\"response_format\":{\"type\":"
			      "\"json_object\"}}",
			      &out),
		      200);
	j = parse_json(out);
	/* the demo bigrams rarely close a key: a document cut short is
	 * "length", never a "stop" */
	assert_int_equal(json_str(j, "choices.0.text")[0], '{');
	if (!strcmp(json_str(j, "choices.0.finish_reason"), "stop"))
		add_doc(f, NULL, json_str(j, "choices.0.text"));
	else
		assert_string_equal(json_str(j, "choices.0.finish_reason"),
				    "length");
	cJSON_Delete(j);
	free(out);
	fclose(f);
	if (validator) {
		snprintf(cmd, sizeof(cmd), "python3 %s %s", validator, path);
		ret = system(cmd);
		ret = WIFEXITED(ret) ? WEXITSTATUS(ret) : -1;
		assert_true(ret == 0 || ret == 3); /* 3: parsed only */
	}
	/* a keyword outside the subset: 400 naming it */
	snprintf(body, sizeof(body),
		 "{\"model\":\"default\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"x\"}],\"response_format\":{\"type\":"
		 "\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":"
		 "{\"type\":\"object\",\"propertyNames\":{}}}}}");
	assert_int_equal(http("POST", "/v1/chat/completions", body, &out),
			 400);
	j = parse_json(out);
	assert_string_equal(json_str(j, "error.param"), "response_format");
	assert_non_null(strstr(json_str(j, "error.message"), "propertyNames"));
	cJSON_Delete(j);
	free(out);
}

static int setup(void **state)
{
	static char set_model[192];
	static const char *sets[] = {set_model, "model.max_context_tokens=300",
				     NULL};

	(void)state;
	if (harness_setup(o1d_bin, o1model_bin, sidecar_bin))
		return -1;
	snprintf(set_model, sizeof(set_model), "model.path=%s", model);
	snprintf(access_log, sizeof(access_log), "%s/main.access", dir);
	start_sidecar(&side, "main", sets);
	return 0;
}

static int teardown(void **state)
{
	struct proc *const sidecars[] = {&side};

	(void)state;
	return harness_teardown(sidecars, 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_endpoints),
	    cmocka_unit_test(test_completion_equals_client),
	    cmocka_unit_test(test_chat_equals_client),
	    cmocka_unit_test(test_stream_equals_whole),
	    cmocka_unit_test(test_stop_sequence),
	    cmocka_unit_test(test_logprobs),
	    cmocka_unit_test(test_text_offset),
	    cmocka_unit_test(test_default_max_tokens),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_connections_dropped),
	    cmocka_unit_test(test_client_abort_cancels),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_client_mistakes),
	    cmocka_unit_test(test_draining),
	    cmocka_unit_test(test_daemon_restart),
	    cmocka_unit_test(test_unix_socket),
	    cmocka_unit_test(test_access_log),
	    cmocka_unit_test(test_response_format),
	};

	if (harness_args(argc, argv, 0, 1, "[VALIDATE_JSON]"))
		return 2;
	if (argc == 5 && !system("command -v python3 >/dev/null 2>&1"))
		validator = argv[4];
	return cmocka_run_group_tests(tests, setup, teardown);
}

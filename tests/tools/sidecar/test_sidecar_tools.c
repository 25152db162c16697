/* Tool calling through o1-sidecar (argv: o1d, o1model, o1-sidecar): o1d
 * serves the tiny model with a Hermes-style template (data/
 * hermes_tools.jinja, model.chat_template), so its welcome says "hermes".
 * Random weights never call a tool on their own, so calls are forced:
 * - tool_choice "required" and a named function: the answer is one call
 *   (finish_reason "tool_calls", message.tool_calls with an id, type
 *   "function", the name, arguments JSON text that fits the tool's
 *   schema, content null), streamed as one tool_calls delta with the
 *   same call;
 * - tools and a conversation with an assistant tool call and a tool
 *   result reach the template: the answer and prompt_tokens equal what
 *   libo1client gets for the same JSON chat request, and prompt_tokens
 *   grow by the tools (tool_choice "none" renders none); streamed, the
 *   content deltas join to the same answer;
 * - top_logprobs carry the alternatives' text and bytes as o1d sends
 *   them (TOP_TEXT; the sidecar has no vocabulary here), equal to
 *   libo1client's;
 * - malformed tools, tool_choice and tool_calls are a 400 naming the
 *   parameter. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <o1/client.h>

#include "sidecar_harness.h"
#include "tests/common/test_util.h"

#define TEMPLATE O1_SOURCE_DIR "/tests/tools/sidecar/data/hermes_tools.jinja"

static struct proc side;

static const char tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"Current weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Oslo\"]},"
    "\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":"
    "{\"enum\":[\"utc\",\"cet\"]}},\"required\":[\"zone\"],"
    "\"additionalProperties\":false}}}]";

static const char msgs[] =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
    "\"content\":\"Weather in Paris?\"}]";

/* A conversation with a call and its result. */
static const char msgs_called[] =
    "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
    "\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
    "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\","
    "\\\"unit\\\":\\\"c\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":"
    "\"call_1\",\"content\":\"18 C\"}]";

/* A chat request: MESSAGES, then EXTRA members (",..." or ""). */
static char *body(const char *messages, const char *extra)
{
	char *b;

	assert_true(asprintf(&b,
			     "{\"model\":\"default\",\"messages\":%s,"
			     "\"temperature\":0%s}",
			     messages, extra) > 0);
	return b;
}

static cJSON *chat(const char *messages, const char *extra)
{
	char *b = body(messages, extra), *out;
	int code = http_to(&side, "POST", "/v1/chat/completions", b, &out);
	cJSON *j = cJSON_Parse(out);

	if (code != 200 || !j)
		fail_msg("%d: %s", code, out);
	free(out);
	free(b);
	return j;
}

/* The call's arguments fit get_weather's schema (or get_time's); NAME
 * NULL: either tool. */
static void check_call(const cJSON *call, const char *name)
{
	cJSON *args;
	const char *city, *unit;

	assert_true(strlen(json_str(call, "id")) > 0);
	assert_string_equal(json_str(call, "type"), "function");
	if (!name)
		name = json_str(call, "function.name");
	assert_string_equal(json_str(call, "function.name"), name);
	args = cJSON_Parse(json_str(call, "function.arguments"));
	assert_true(cJSON_IsObject(args));
	if (!strcmp(name, "get_time")) {
		city = json_str(args, "zone");
		assert_true(!strcmp(city, "utc") || !strcmp(city, "cet"));
		assert_int_equal(cJSON_GetArraySize(args), 1);
	} else {
		city = json_str(args, "city");
		unit = json_str(args, "unit");
		assert_true(!strcmp(city, "Paris") || !strcmp(city, "Oslo"));
		assert_true(!strcmp(unit, "c") || !strcmp(unit, "f"));
		assert_int_equal(cJSON_GetArraySize(args), 2);
	}
	cJSON_Delete(args);
}

static void forced(const char *choice, const char *name)
{
	char extra[2048], *b, *out, *line, *save = NULL, args[1024] = "";
	const char *finish = NULL;
	cJSON *j, *m;
	int code, deltas = 0;

	snprintf(extra, sizeof(extra),
		 ",\"tools\":%s,\"tool_choice\":%s,\"max_tokens\":300", tools,
		 choice);
	j = chat(msgs, extra);
	if (strcmp(json_str(j, "choices.0.finish_reason"), "tool_calls"))
		fail_msg("no call: %s", cJSON_PrintUnformatted(j));
	m = (cJSON *)json_at(j, "choices.0.message");
	assert_true(cJSON_IsNull(json_at(m, "content")));
	assert_int_equal(cJSON_GetArraySize(json_at(m, "tool_calls")), 1);
	check_call(json_at(m, "tool_calls.0"), name);

	/* streamed: one delta with the same call, then tool_calls */
	snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
		 ",\"stream\":true");
	b = body(msgs, extra);
	code = http_to(&side, "POST", "/v1/chat/completions", b, &out);
	assert_int_equal(code, 200);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		cJSON *c, *d, *calls;

		if (strncmp(line, "data: {", 7))
			continue;
		c = cJSON_Parse(line + 6);
		d = (cJSON *)json_at(c, "choices.0.delta");
		calls = cJSON_GetObjectItem(d, "tool_calls");
		if (calls) {
			assert_int_equal(cJSON_GetArraySize(calls), 1);
			assert_int_equal(
			    (int)json_at(calls, "0.index")->valuedouble, 0);
			check_call(json_at(calls, "0"), name);
			snprintf(args, sizeof(args), "%s",
				 json_str(calls, "0.function.arguments"));
			deltas++;
		}
		if (cJSON_IsString(json_at(c, "choices.0.finish_reason")))
			finish = strcmp(json_str(c, "choices.0.finish_reason"),
					"tool_calls")
				     ? "other"
				     : "tool_calls";
		cJSON_Delete(c);
	}
	assert_int_equal(deltas, 1);
	assert_non_null(finish);
	assert_string_equal(finish, "tool_calls");
	assert_string_equal(args,
			    json_str(m, "tool_calls.0.function.arguments"));
	cJSON_Delete(j);
	free(out);
	free(b);
}

static void test_required(void **state)
{
	(void)state;
	forced("\"required\"", NULL); /* either: greedy picks one */
}

static void test_named(void **state)
{
	(void)state;
	forced("{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}",
	       "get_time");
}

/* The JSON chat request the sidecar sends for MESSAGES and TOOLS. */
static char *chat_json(const char *messages, const char *t, const char *tc)
{
	char *s;

	assert_true(asprintf(&s, "{\"messages\":%s%s%s%s%s}", messages,
			     t ? ",\"tools\":" : "", t ? t : "",
			     tc ? ",\"tool_choice\":" : "", tc ? tc : "") > 0);
	return s;
}

/* The same request streamed: its content deltas join to the answer
 * (text that could start a call is held, then released at the end). */
static void streamed_equals(const cJSON *whole, const char *messages,
			    const char *extra)
{
	char more[2200], *b, *out, *line, *save = NULL, joined[8192] = "";
	int code;

	snprintf(more, sizeof(more), "%s,\"stream\":true", extra);
	b = body(messages, more);
	code = http_to(&side, "POST", "/v1/chat/completions", b, &out);
	assert_int_equal(code, 200);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		cJSON *c, *v;

		if (strncmp(line, "data: {", 7))
			continue;
		c = cJSON_Parse(line + 6);
		v = cJSON_GetObjectItem(
		    cJSON_GetObjectItem(
			cJSON_GetArrayItem(cJSON_GetObjectItem(c, "choices"), 0),
			"delta"),
		    "content");
		if (cJSON_IsString(v))
			strncat(joined, v->valuestring,
				sizeof(joined) - strlen(joined) - 1);
		cJSON_Delete(c);
	}
	if (cJSON_IsString(json_at(whole, "choices.0.message.content")))
		assert_string_equal(
		    joined, json_str(whole, "choices.0.message.content"));
	free(out);
	free(b);
}

/* Tools, a call and its result reach the template: the same answer and
 * prompt as libo1client's JSON chat request; "none" renders no tools. */
static void test_rendered(void **state)
{
	char extra[2048], *req = chat_json(msgs_called, tools, "\"auto\"");
	struct direct d;
	cJSON *j, *plain, *none;
	double pt;

	(void)state;
	snprintf(extra, sizeof(extra),
		 ",\"tools\":%s,\"tool_choice\":\"auto\",\"max_tokens\":60",
		 tools);
	j = chat(msgs_called, extra);
	direct(req, strlen(req), O1_FLAG_CHAT | O1_FLAG_CHAT_JSON, 60, NULL,
	       &d);
	pt = json_at(j, "usage.prompt_tokens")->valuedouble;
	assert_int_equal((uint32_t)pt, d.final.prompt_tokens);
	if (!cJSON_IsNull(json_at(j, "choices.0.message.content")))
		assert_string_equal(json_str(j, "choices.0.message.content"),
				    d.text);
	streamed_equals(j, msgs_called, extra);
	plain = chat(msgs_called, ",\"max_tokens\":8");
	snprintf(extra, sizeof(extra),
		 ",\"tools\":%s,\"tool_choice\":\"none\",\"max_tokens\":8",
		 tools);
	none = chat(msgs_called, extra);
	assert_true(pt >
		    json_at(plain, "usage.prompt_tokens")->valuedouble + 50);
	assert_true(json_at(none, "usage.prompt_tokens")->valuedouble ==
		    json_at(plain, "usage.prompt_tokens")->valuedouble);
	cJSON_Delete(j);
	cJSON_Delete(plain);
	cJSON_Delete(none);
	free(req);
}

/* The alternatives' bytes of each position through libo1client. */
struct tops {
	char text[64][3][32];
	uint32_t len[64][3];
	uint32_t n;
};

static int on_top(void *arg, const struct o1_event *ev)
{
	struct tops *t = arg;

	if (ev->type != O1_EVENT_TOP_TEXT || ev->position >= 64)
		return 0;
	for (uint32_t i = 0; i < ev->n_top && ev->top_first + i < 3; i++) {
		uint32_t k = ev->top_first + i, n = ev->top_len[i];

		n = n < 31 ? n : 31;
		memcpy(t->text[ev->position][k], ev->top_text + ev->top_off[i],
		       n);
		t->len[ev->position][k] = n;
	}
	if (ev->position + 1 > t->n)
		t->n = ev->position + 1;
	return 0;
}

/* The same request streamed: its chunks' logprobs.content entries, in
 * order, equal the whole answer's (alternatives included: a token's
 * LOGPROBS and TOP_TEXT follow its TOKEN, so a chunk sent at the TOKEN
 * had none). */
static void streamed_logprobs_equal(const cJSON *whole, const char *extra)
{
	const cJSON *want = json_at(whole, "choices.0.logprobs.content");
	char more[512], *b, *out, *line, *save = NULL;
	int code, k = 0;

	snprintf(more, sizeof(more), "%s,\"stream\":true", extra);
	b = body(msgs, more);
	code = http_to(&side, "POST", "/v1/chat/completions", b, &out);
	assert_int_equal(code, 200);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		cJSON *c = NULL;
		const cJSON *e;

		if (strncmp(line, "data: {", 7))
			continue;
		c = cJSON_Parse(line + 6);
		cJSON_ArrayForEach(e, json_at(c, "choices.0.logprobs.content"))
		{
			char *got = cJSON_PrintUnformatted(e);
			char *exp = cJSON_PrintUnformatted(
			    cJSON_GetArrayItem(want, k++));

			if (!exp || strcmp(got, exp))
				fail_msg("token %d streamed %s, whole %s",
					 k - 1, got, exp ? exp : "(none)");
			free(got);
			free(exp);
		}
		cJSON_Delete(c);
	}
	assert_int_equal(k, cJSON_GetArraySize(want));
	free(out);
	free(b);
}

static void test_top_logprobs_text(void **state)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = sock};
	struct o1_sampling sp = {.sz = sizeof(sp), .n_logprobs = 3};
	struct o1_submit_opts o = {.sz = sizeof(o),
				   .req_id = 5,
				   .sampling = &sp,
				   .max_tokens = 12,
				   .flags = O1_FLAG_CHAT | O1_FLAG_CHAT_JSON};
	char *req = chat_json(msgs, NULL, NULL);
	struct tops *t = calloc(1, sizeof(*t));
	struct o1_client *c;
	struct o1_event fin;
	const cJSON *content, *e;
	cJSON *j;
	size_t k = 0;

	(void)state;
	o.text = req;
	o.text_len = strlen(req);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, &o), 0);
	do {
		assert_int_equal(o1_client_wait(c, &fin, 60000000000ll), 1);
		on_top(t, &fin);
	} while (fin.type != O1_EVENT_FINAL);
	assert_int_equal(fin.error, 0);
	o1_client_close(c);
	assert_true(t->n > 0);
	j = chat(msgs, ",\"max_tokens\":12,\"logprobs\":true,"
		       "\"top_logprobs\":3");
	content = json_at(j, "choices.0.logprobs.content");
	cJSON_ArrayForEach(e, content)
	{
		for (int i = 0; i < 3 && k < t->n; i++) {
			const cJSON *b;
			char path[32];

			snprintf(path, sizeof(path), "top_logprobs.%d.bytes", i);
			b = json_at(e, path);
			assert_int_equal(cJSON_GetArraySize(b),
					 (int)t->len[k][i]);
			for (uint32_t x = 0; x < t->len[k][i]; x++)
				assert_int_equal(
				    (int)cJSON_GetArrayItem(b, (int)x)
					->valuedouble,
				    (uint8_t)t->text[k][i][x]);
			snprintf(path, sizeof(path), "top_logprobs.%d.token", i);
			assert_true(json_str(e, path)[0] != '<' ||
				    t->text[k][i][0] == '<');
		}
		k++;
	}
	assert_int_equal(k, t->n);
	streamed_logprobs_equal(j, ",\"max_tokens\":12,\"logprobs\":true,"
				   "\"top_logprobs\":3");
	cJSON_Delete(j);
	free(t);
	free(req);
}

static void expect_400(const char *path, const char *b, const char *param,
		       const char *says)
{
	char *out;
	int code = http_to(&side, "POST", path, b, &out);
	cJSON *j = cJSON_Parse(out);

	if (code != 400 || !j || !strstr(out, says))
		fail_msg("%s: %d %s", b, code, out);
	assert_string_equal(json_str(j, "error.param"), param);
	cJSON_Delete(j);
	free(out);
}

static void bad_chat(const char *messages, const char *extra,
		     const char *param, const char *says)
{
	char *b = body(messages, extra);

	expect_400("/v1/chat/completions", b, param, says);
	free(b);
}

static void test_refused(void **state)
{
	char *big = malloc(40000), *extra;
	size_t n = 0;

	(void)state;
	bad_chat(msgs, ",\"tools\":{}", "tools", "list of 1 to 128");
	bad_chat(msgs, ",\"tools\":[]", "tools", "list of 1 to 128");
	bad_chat(msgs, ",\"tools\":[{\"type\":\"function\",\"function\":"
		       "{\"name\":\"has space\"}}]",
		 "tools", "letters, digits");
	bad_chat(msgs, ",\"tools\":[{\"type\":\"function\",\"function\":"
		       "{\"name\":\"f\",\"parameters\":[]}}]",
		 "tools", "'parameters' an object");
	bad_chat(msgs, ",\"tool_choice\":\"auto\"", "tool_choice",
		 "only allowed when 'tools'");
	bad_chat(msgs, ",\"tools\":[{\"type\":\"function\",\"function\":"
		       "{\"name\":\"f\"}}],\"tool_choice\":\"always\"",
		 "tool_choice", "must be");
	bad_chat(msgs, ",\"tools\":[{\"type\":\"function\",\"function\":"
		       "{\"name\":\"f\"}}],\"tool_choice\":{\"type\":"
		       "\"function\",\"function\":{\"name\":\"g\"}}",
		 "tool_choice", "not one of the tools");
	bad_chat(msgs, ",\"tools\":[{\"type\":\"function\",\"function\":"
		       "{\"name\":\"f\"}}],\"tool_choice\":\"required\","
		       "\"response_format\":{\"type\":\"json_object\"}",
		 "tool_choice", "response_format");
	/* parameters o1d's schema compiler refuses: the 400 names tools
	 * (not response_format) and says why, at the member's place */
	bad_chat(msgs, ",\"tools\":[{\"type\":\"function\",\"function\":"
		       "{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
		       "\"properties\":{\"a\":{\"type\":\"bogus\"}}}}}],"
		       "\"tool_choice\":\"required\"",
		 "tools", "'type' must name JSON types");
	/* streamed too: a 400 before any event, not an error event in a
	 * 200 stream (the ERROR came before the FINAL that fails) */
	bad_chat(msgs, ",\"stream\":true,\"tools\":[{\"type\":\"function\","
		       "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":"
		       "\"bogus\"}}}],\"tool_choice\":\"required\"",
		 "tools", "'type' must name JSON types");
	bad_chat("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"x\","
		 "\"type\":\"function\",\"function\":{\"name\":\"f\","
		 "\"arguments\":\"{oops\"}}]}]",
		 "", "messages", "JSON text of an object");
	bad_chat("[{\"role\":\"assistant\",\"tool_calls\":{}}]", "",
		 "messages", "tool_calls");
	bad_chat(msgs, ",\"functions\":[]", "functions", "deprecated");
	expect_400("/v1/completions",
		   "{\"model\":\"default\",\"prompt\":\"x\",\"tools\":[{"
		   "\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
		   "tools", "chat/completions");
	/* over 32 KiB of tools */
	n += (size_t)snprintf(big, 40000, ",\"tools\":[");
	for (int i = 0; i < 120; i++)
		n += (size_t)snprintf(
		    big + n, 40000 - n,
		    "%s{\"type\":\"function\",\"function\":{\"name\":\"f%d\","
		    "\"description\":\"%0250d\"}}",
		    i ? "," : "", i, 0);
	snprintf(big + n, 40000 - n, "]");
	extra = big;
	bad_chat(msgs, extra, "tools", "at most 32768");
	free(big);
}

static int setup(void **state)
{
	(void)state;
	harness_preset = "tiny";
	daemon_sets[0] = "model.chat_template=" TEMPLATE;
	if (harness_setup(o1d_bin, o1model_bin, sidecar_bin))
		return -1;
	start_sidecar(&side, "tools", NULL);
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
	    cmocka_unit_test(test_required),
	    cmocka_unit_test(test_named),
	    cmocka_unit_test(test_rendered),
	    cmocka_unit_test(test_top_logprobs_text),
	    cmocka_unit_test(test_refused),
	};

	if (harness_args(argc, argv, 0, 0, NULL))
		return 2;
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* The OpenAI request parser and response shapes without any server:
 * defaults, every parameter's type and range checks (with the parameter
 * named in the error), the packed chat form the daemon reads, token-id
 * prompts, and the JSON of errors, whole answers and SSE chunks, and a
 * refinement's events rendered as refinement_trace, o1_round and
 * o1_confidence. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "tools/sidecar/sidecar_request.h"
#include "tools/sidecar/sidecar_response.h"

static int parse(const char *body, enum o1_sidecar_kind k,
		 struct o1_sidecar_request *r, struct o1_sidecar_req_error *e)
{
	return o1_sidecar_request_parse(body, strlen(body), k, r, e);
}

static void test_chat_defaults_and_packing(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;
	static const char want[] = "system\0Be brief.\0user\0Hi\0assistant\0"
				   "Hello\0user\0a b";

	(void)state;
	assert_int_equal(
	    parse("{\"model\":\"m\",\"messages\":["
		  "{\"role\":\"developer\",\"content\":\"Be brief.\"},"
		  "{\"role\":\"user\",\"content\":\"Hi\"},"
		  "{\"role\":\"assistant\",\"content\":\"Hello\"},"
		  "{\"role\":\"user\",\"content\":[{\"type\":\"text\","
		  "\"text\":\"a \"},{\"type\":\"text\",\"text\":\"b\"}]}]}",
		  O1_SIDECAR_CHAT, &r, &e),
	    0);
	assert_string_equal(r.model, "m");
	assert_int_equal(r.prompt_len, sizeof(want));
	assert_memory_equal(r.prompt, want, sizeof(want));
	assert_true(r.sampling.temperature == 1.0f);
	assert_int_equal(r.max_tokens, 0);
	assert_false(r.stream);
	assert_int_equal(r.n_stop, 0);
	o1_sidecar_request_fini(&r);
}

static void test_completion_fields(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;

	(void)state;
	assert_int_equal(
	    parse("{\"model\":\"default\",\"prompt\":[\"The daemon\"],"
		  "\"max_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,"
		  "\"top_k\":40,\"min_p\":0.05,\"seed\":-1,\"stop\":[\"\\n\","
		  "\"END\"],\"presence_penalty\":0.5,\"frequency_penalty\":-1,"
		  "\"logprobs\":3,\"stream\":true,\"stream_options\":"
		  "{\"include_usage\":true},\"n\":1,\"echo\":false}",
		  O1_SIDECAR_COMPLETION, &r, &e),
	    0);
	assert_string_equal(r.prompt, "The daemon");
	assert_int_equal(r.max_tokens, 7);
	assert_true(r.sampling.temperature == 0.5f);
	assert_true(r.sampling.top_p == 0.9f);
	assert_int_equal(r.sampling.top_k, 40);
	assert_true(r.sampling.min_p == 0.05f);
	assert_true(r.sampling.seed == UINT64_MAX);
	assert_true(r.sampling.presence_penalty == 0.5f);
	assert_true(r.sampling.frequency_penalty == -1.0f);
	assert_int_equal(r.n_stop, 2);
	assert_string_equal(r.stop[0], "\n");
	assert_string_equal(r.stop[1], "END");
	assert_true(r.logprobs);
	assert_int_equal(r.top_logprobs, 3);
	assert_true(r.stream && r.include_usage);
	o1_sidecar_request_fini(&r);
	/* max_completion_tokens wins over max_tokens; ids as a prompt */
	assert_int_equal(parse("{\"model\":\"m\",\"prompt\":[1,2,300],"
			       "\"max_tokens\":9,\"max_completion_tokens\":4}",
			       O1_SIDECAR_COMPLETION, &r, &e),
			 0);
	assert_null(r.prompt);
	assert_int_equal(r.n_ids, 3);
	assert_int_equal(r.ids[2], 300);
	assert_int_equal(r.max_tokens, 4);
	o1_sidecar_request_fini(&r);
}

struct bad {
	enum o1_sidecar_kind kind;
	const char *body, *param, *says;
};

static const struct bad bads[] = {
    {O1_SIDECAR_CHAT, "{bad", "", "not valid JSON"},
    {O1_SIDECAR_CHAT, "", "", "not valid JSON"},
    {O1_SIDECAR_CHAT, "[1]", "", "JSON object"},
    {O1_SIDECAR_CHAT, "{\"messages\":[]}", "model", "'model'"},
    {O1_SIDECAR_CHAT, "{\"model\":1,\"messages\":[]}", "model", "string"},
    {O1_SIDECAR_CHAT, "{\"model\":\"m\"}", "messages", "non-empty"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"god\","
     "\"content\":\"x\"}]}",
     "messages", "'role'"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":5}]}",
     "messages", "content"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":[{\"type\":\"image_url\"}]}]}",
     "messages", "text"},
    {O1_SIDECAR_COMPLETION, "{\"model\":\"m\",\"prompt\":\"\"}", "prompt",
     "non-empty"},
    {O1_SIDECAR_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}",
     "prompt", "batches"},
    {O1_SIDECAR_COMPLETION, "{\"model\":\"m\",\"prompt\":[1,-2]}", "prompt",
     "item 1"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"max_tokens\":-1}",
     "max_tokens", "-1"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"max_tokens\":0}",
     "max_tokens", "allowed"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"max_tokens\":1.5}",
     "max_tokens", "integer"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"max_tokens\":\"5\"}",
     "max_tokens", "integer"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"temperature\":NaN}",
     "", "not valid JSON"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"temperature\":\"NaN\"}",
     "temperature", "number"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"temperature\":3}",
     "temperature", "0 to 2"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"top_p\":1.5}",
     "top_p", "allowed"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"top_k\":-3}",
     "top_k", "allowed"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"presence_penalty\":9}",
     "presence_penalty", "allowed"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"seed\":0.5}",
     "seed", "integer"},
    {O1_SIDECAR_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":5}",
     "stop", "string"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"stop\":[\"\"]}",
     "stop", "0 bytes"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}",
     "stop", "at most 4"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"stream\":\"yes\"}",
     "stream", "boolean"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"stream_options\":[]}",
     "stream_options", "object"},
    {O1_SIDECAR_COMPLETION, "{\"model\":\"m\",\"prompt\":\"x\",\"n\":2}", "n",
     "allowed"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"echo\":true}",
     "echo", "not supported"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\","
     "\"logprobs\":50}",
     "logprobs", "allowed"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"top_logprobs\":3}",
     "top_logprobs", "needs"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"refine_steps\":17}",
     "refine_steps", "allowed: 0 to 16"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"refine_steps\":-1}",
     "refine_steps", "allowed"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"refine_steps\":1.5}",
     "refine_steps", "integer"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"refine_steps\":\"2\"}",
     "refine_steps", "integer"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\",\"refine_steps\":2}", "refine_steps",
     "chat conversations only"},
    /* tools (sidecar_tools.h; more in test_sidecar_tools) */
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"tools\":[]}",
     "tools", "list of 1 to 128"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"tool_choice\":\"auto\"}",
     "tool_choice", "only allowed when 'tools'"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"function_call\":\"auto\"}",
     "function_call", "deprecated"},
    /* refused, not ignored: a bias that changes nothing would pass
     * unnoticed */
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"logit_bias\":{\"5\":10}}",
     "logit_bias", "'logit_bias' is not supported"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"5\":-100}}",
     "logit_bias", "'logit_bias' is not supported"},
    {O1_SIDECAR_COMPLETION,
     "{\"model\":\"m\",\"prompt\":\"x\",\"best_of\":3}", "best_of",
     "'best_of' other than 1"},
    {O1_SIDECAR_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
     "\"content\":\"x\"}],\"response_format\":{\"type\":"
     "\"json_schema\",\"json_schema\":{\"schema\":{\"not\":{}}}}}",
     "response_format", "keyword 'not'"},
};

static void test_bad_bodies(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;

	(void)state;
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		int ret = parse(bads[i].body, bads[i].kind, &r, &e);

		if (ret != -22 || strcmp(e.param, bads[i].param) ||
		    !strstr(e.message, bads[i].says))
			fail_msg("%s: ret %d param '%s' message '%s'",
				 bads[i].body, ret, e.param, e.message);
		o1_sidecar_request_fini(&r);
	}
}

/* response_format {"type":"text"} (or null) is what o1d does: accepted. */
static void test_text_format_accepted(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;

	(void)state;
	assert_int_equal(parse("{\"model\":\"m\",\"prompt\":\"x\","
			       "\"response_format\":{\"type\":\"text\"},"
			       "\"tools\":null}",
			       O1_SIDECAR_COMPLETION, &r, &e),
			 0);
	o1_sidecar_request_fini(&r);
}

static cJSON *json_of(char *s)
{
	cJSON *j = cJSON_Parse(s);

	assert_non_null(j);
	free(s);
	return j;
}

static const char *path_str(const cJSON *j, const char *a, const char *b)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, a);

	o = b ? cJSON_GetObjectItemCaseSensitive(o, b) : o;
	return cJSON_IsString(o) ? o->valuestring : NULL;
}

static void test_error_shape(void **state)
{
	char *s;
	cJSON *j, *e;

	(void)state;
	assert_int_equal(
	    o1_sidecar_error_json("bad \"x\"\n", "t", "p", NULL, &s), 0);
	j = json_of(s);
	e = cJSON_GetObjectItemCaseSensitive(j, "error");
	assert_string_equal(path_str(j, "error", "message"), "bad \"x\"\n");
	assert_string_equal(path_str(j, "error", "type"), "t");
	assert_string_equal(path_str(j, "error", "param"), "p");
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "code")));
	cJSON_Delete(j);
}

static struct o1_event token(uint32_t id, const char *text, float lp)
{
	struct o1_event ev = {.type = O1_EVENT_TOKEN, .n_ids = 1};

	ev.ids[0] = id;
	ev.has_logprobs = 1;
	ev.logprobs[0] = lp;
	ev.text_len = strlen(text);
	memcpy(ev.text, text, ev.text_len);
	return ev;
}

static void test_whole_and_chunks(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;
	struct o1_sidecar_out out;
	struct o1_event ev, fin = {.type = O1_EVENT_FINAL,
				   .finish = O1_FINISH_REASON_EOS,
				   .prompt_tokens = 5,
				   .generated_tokens = 2};
	const cJSON *c, *lp;
	char *s;
	cJSON *j;

	(void)state;
	assert_int_equal(parse("{\"model\":\"m\",\"messages\":[{\"role\":"
			       "\"user\",\"content\":\"x\"}],\"logprobs\":true,"
			       "\"top_logprobs\":2}",
			       O1_SIDECAR_CHAT, &r, &e),
			 0);
	o1_sidecar_out_init(&out, &r, "served");
	ev = token(7, "h\xc3", -0.5f); /* a split code point */
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_int_equal(o1_sidecar_chunk_sse(&out, true, &s), 0);
	assert_non_null(strstr(s, "\"content\":\"h\""));
	assert_non_null(strstr(s, "\"role\":\"assistant\""));
	assert_int_equal(strncmp(s, "data: {", 7), 0);
	assert_string_equal(s + strlen(s) - 2, "\n\n");
	free(s);
	ev = (struct o1_event){
	    .type = O1_EVENT_LOGPROBS, .position = 0, .n_top = 2};
	ev.top_ids[0] = 7;
	ev.top_logprobs[0] = -0.5f;
	ev.top_ids[1] = 9;
	ev.top_logprobs[1] = -1.5f;
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	ev = token(8, "\xa9!", -0.25f);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_int_equal(o1_sidecar_out_add(&out, &fin), 0);
	assert_int_equal(o1_sidecar_full_json(&out, &s), 0);
	j = json_of(s);
	assert_string_equal(path_str(j, "object", NULL), "chat.completion");
	assert_string_equal(path_str(j, "model", NULL), "served");
	c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	assert_string_equal(path_str(c, "message", "content"), "h\xc3\xa9!");
	assert_string_equal(path_str(c, "finish_reason", NULL), "stop");
	lp = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "logprobs"), "content");
	assert_int_equal(cJSON_GetArraySize(lp), 2);
	assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(lp, 1), "logprob")
			->valuedouble == -0.25);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(
			     cJSON_GetArrayItem(lp, 0), "top_logprobs")),
			 2);
	assert_int_equal(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "total_tokens")
		->valueint,
	    7);
	cJSON_Delete(j);
	/* the last chunk: the rest of the code point and the reason */
	assert_int_equal(o1_sidecar_chunk_sse(&out, false, &s), 0);
	assert_non_null(strstr(s, "\"content\":\"\xc3\xa9!\""));
	assert_non_null(strstr(s, "\"finish_reason\":\"stop\""));
	free(s);
	o1_sidecar_out_fini(&out);
	o1_sidecar_request_fini(&r);
}

/* The text_offset list of a completion's JSON (whole or an SSE chunk's;
 * freed here) into OFFS; returns how many. */
static int offsets_of(char *json, double *offs, int cap)
{
	cJSON *j = cJSON_Parse(strncmp(json, "data: ", 6) ? json : json + 6);
	const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "logprobs"),
					     "text_offset");
	int n = cJSON_GetArraySize(a);

	free(json);
	assert_non_null(j);
	assert_true(n <= cap);
	for (int i = 0; i < n; i++)
		offs[i] = cJSON_GetArrayItem(a, i)->valuedouble;
	cJSON_Delete(j);
	return n;
}

/* /v1/completions logprobs.text_offset counts code points of the answer
 * (Python's str indices: "a\u00e9\u65e5\U0001f600!" is 5 long), not
 * bytes; a character split between tokens is the finishing token's, as
 * the streamed text gives it. Whole and streamed answers agree. */
static void test_text_offset_code_points(void **state)
{
	static const char *const pieces[] = {
	    "a", "\xc3", "\xa9\xe6\x97\xa5", "\xf0\x9f\x98", "\x80!"};
	static const double want[] = {0, 1, 1, 3, 3};
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;
	struct o1_sidecar_out out;
	struct o1_event ev, fin = {.type = O1_EVENT_FINAL,
				   .finish = O1_FINISH_REASON_LENGTH,
				   .generated_tokens = 5};
	double offs[8];
	char *s;

	(void)state;
	assert_int_equal(parse("{\"model\":\"m\",\"prompt\":\"\u00e9t\u00e9 "
			       "\u65e5\",\"logprobs\":2}",
			       O1_SIDECAR_COMPLETION, &r, &e),
			 0);
	o1_sidecar_out_init(&out, &r, "served");
	for (int i = 0; i < 3; i++) {
		ev = token((uint32_t)i, pieces[i], -1.0f);
		assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	}
	assert_int_equal(o1_sidecar_chunk_sse(&out, true, &s), 0);
	assert_int_equal(offsets_of(s, offs, 8), 3);
	assert_memory_equal(offs, want, 3 * sizeof(*offs));
	for (int i = 3; i < 5; i++) {
		ev = token((uint32_t)i, pieces[i], -1.0f);
		assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	}
	assert_int_equal(o1_sidecar_out_add(&out, &fin), 0);
	assert_int_equal(o1_sidecar_full_json(&out, &s), 0);
	assert_int_equal(offsets_of(s, offs, 8), 5);
	assert_memory_equal(offs, want, 5 * sizeof(*offs));
	assert_int_equal(o1_sidecar_chunk_sse(&out, false, &s), 0);
	assert_int_equal(offsets_of(s, offs, 8), 2);
	assert_memory_equal(offs, want + 3, 2 * sizeof(*offs));
	o1_sidecar_out_fini(&out);
	o1_sidecar_request_fini(&r);
}

/* Tools: the JSON chat request o1d renders (tools, tool_choice, the
 * messages' calls and results, "developer" as "system"), the grammar of
 * "required" (every tool) and of a named function (that one); a request
 * without tools keeps the packed form. */
static void test_tools_request(void **state)
{
	static const char t2[] =
	    "[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
	    "{\"type\":\"function\",\"function\":{\"name\":\"b\","
	    "\"parameters\":{\"type\":\"object\"}}}]";
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;
	char body[1024];
	cJSON *p;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\","
		 "\"content\":\"d\"},{\"role\":\"assistant\",\"content\":"
		 "null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
		 "\"function\":{\"name\":\"a\",\"arguments\":\"{}\"}}]},"
		 "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":"
		 "[{\"type\":\"text\",\"text\":\"o\"},{\"type\":\"text\","
		 "\"text\":\"k\"}]}],\"tools\":%s,\"tool_choice\":"
		 "\"required\"}",
		 t2);
	assert_int_equal(parse(body, O1_SIDECAR_CHAT, &r, &e), 0);
	assert_true(r.chat_json);
	assert_int_equal(r.prompt_len, strlen(r.prompt));
	p = cJSON_Parse(r.prompt);
	assert_non_null(p);
	assert_string_equal(
	    cJSON_GetObjectItem(
		cJSON_GetArrayItem(cJSON_GetObjectItem(p, "messages"), 0),
		"role")
		->valuestring,
	    "system");
	assert_string_equal(
	    cJSON_GetObjectItem(
		cJSON_GetArrayItem(cJSON_GetObjectItem(p, "messages"), 2),
		"content")
		->valuestring,
	    "ok");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(p, "tools")),
			 2);
	assert_string_equal(cJSON_GetObjectItem(p, "tool_choice")->valuestring,
			    "required");
	cJSON_Delete(p);
	assert_int_equal(r.grammar_type, O1_GRAMMAR_TYPE_TOOL_CALL);
	p = cJSON_Parse(r.grammar);
	assert_int_equal(cJSON_GetArraySize(p), 2);
	cJSON_Delete(p);
	assert_non_null(r.tools);
	o1_sidecar_request_fini(&r);

	snprintf(body, sizeof(body),
		 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"x\"}],\"tools\":%s,\"tool_choice\":{\"type\":"
		 "\"function\",\"function\":{\"name\":\"b\"}}}",
		 t2);
	assert_int_equal(parse(body, O1_SIDECAR_CHAT, &r, &e), 0);
	p = cJSON_Parse(r.grammar);
	assert_int_equal(cJSON_GetArraySize(p), 1);
	assert_string_equal(
	    cJSON_GetObjectItem(
		cJSON_GetObjectItem(cJSON_GetArrayItem(p, 0), "function"),
		"name")
		->valuestring,
	    "b");
	cJSON_Delete(p);
	o1_sidecar_request_fini(&r);

	snprintf(body, sizeof(body),
		 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"x\"}],\"tools\":%s,\"tool_choice\":\"none\"}",
		 t2);
	assert_int_equal(parse(body, O1_SIDECAR_CHAT, &r, &e), 0);
	assert_true(r.chat_json);
	assert_null(r.grammar);
	assert_null(r.tools); /* no calls read back */
	o1_sidecar_request_fini(&r);

	assert_int_equal(parse("{\"model\":\"m\",\"messages\":[{\"role\":"
			       "\"user\",\"content\":\"x\"}]}",
			       O1_SIDECAR_CHAT, &r, &e),
			 0);
	assert_false(r.chat_json);
	o1_sidecar_request_fini(&r);
}

/* Answers read back as calls: message.tool_calls and "tool_calls" (whole
 * and streamed, the text around a call as content); a malformed call is
 * text and "stop"; TOP_TEXT names the alternatives, bytes raw. */
static void test_tools_response(void **state)
{
	static const char call[] =
	    "Sure.\n<tool_call>\n{\"name\": \"a\", \"arguments\": "
	    "{\"x\": 1}}\n</tool_call>";
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;
	struct o1_sidecar_out out;
	struct o1_event ev, fin = {.type = O1_EVENT_FINAL,
				   .finish = O1_FINISH_REASON_EOS};
	const cJSON *c, *tc;
	char *s;
	cJSON *j;

	(void)state;
	assert_int_equal(
	    parse("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		  "\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":1,"
		  "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
		  "\"a\"}}]}",
		  O1_SIDECAR_CHAT, &r, &e),
	    0);
	o1_sidecar_out_init(&out, &r, "served");
	out.tool_format = O1_TOOLS_HERMES;
	for (size_t k = 0; k < sizeof(call) - 1; k += 40) {
		char piece[41];

		snprintf(piece, sizeof(piece), "%.40s", call + k);
		ev = token((uint32_t)k, piece, -0.5f);
		assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	}
	ev = (struct o1_event){.type = O1_EVENT_LOGPROBS, .n_top = 1};
	ev.top_ids[0] = 3;
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	ev = (struct o1_event){.type = O1_EVENT_TOP_TEXT, .n_top = 1};
	ev.top_len[0] = 2;
	ev.top_off[0] = 1;
	memcpy(ev.top_text, "\002\xc3\xa9", 3);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_int_equal(o1_sidecar_out_add(&out, &fin), 0);
	assert_int_equal(o1_sidecar_full_json(&out, &s), 0);
	j = json_of(s);
	c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	assert_string_equal(path_str(c, "finish_reason", NULL), "tool_calls");
	assert_string_equal(path_str(c, "message", "content"), "Sure.");
	tc = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "tool_calls"),
	    0);
	assert_string_equal(path_str(tc, "type", NULL), "function");
	assert_non_null(strstr(path_str(tc, "id", NULL), "call_"));
	assert_string_equal(path_str(tc, "function", "name"), "a");
	assert_string_equal(path_str(tc, "function", "arguments"), "{\"x\":1}");
	tc = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(
		cJSON_GetArrayItem(
		    cJSON_GetObjectItem(
			cJSON_GetObjectItem(c, "logprobs"), "content"),
		    0),
		"top_logprobs"),
	    0);
	assert_string_equal(path_str(tc, "token", NULL), "\xc3\xa9");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(tc, "bytes")),
			 2);
	cJSON_Delete(j);
	assert_int_equal(o1_sidecar_chunk_sse(&out, true, &s), 0);
	assert_non_null(strstr(s, "\"tool_calls\":[{\"index\":0,"));
	assert_non_null(strstr(s, "\"finish_reason\":\"tool_calls\""));
	free(s);
	o1_sidecar_out_fini(&out);

	/* streamed: the text before a call goes as content, the call (and
	 * what may start one) waits for the FINAL */
	o1_sidecar_out_init(&out, &r, "served");
	out.tool_format = O1_TOOLS_HERMES;
	ev = token(1, "Hello <tool", -0.5f);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_true(o1_sidecar_chunk_due(&out, false));
	assert_int_equal(o1_sidecar_chunk_sse(&out, true, &s), 0);
	/* (its trailing space waits: no content ends in one before a call) */
	assert_non_null(strstr(s, "\"content\":\"Hello\""));
	free(s);
	ev = token(2, "_call>\n{\"name\": \"a\", \"arguments\": {}}", -0.5f);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_false(o1_sidecar_chunk_due(&out, false));
	ev = token(3, "\n</tool_call>", -0.5f);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_int_equal(o1_sidecar_out_add(&out, &fin), 0);
	assert_true(o1_sidecar_chunk_due(&out, false));
	assert_int_equal(o1_sidecar_chunk_sse(&out, false, &s), 0);
	assert_non_null(strstr(s, "\"delta\":{\"tool_calls\":[{"));
	assert_non_null(strstr(s, "\"name\":\"a\",\"arguments\":\"{}\""));
	free(s);
	o1_sidecar_out_fini(&out);
	/* Llama 3: an answer that does not start a call streams at once */
	o1_sidecar_out_init(&out, &r, "served");
	out.tool_format = O1_TOOLS_LLAMA3_JSON;
	ev = token(1, " <|python", -0.5f);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_false(o1_sidecar_chunk_due(&out, false));
	o1_sidecar_out_fini(&out);
	o1_sidecar_out_init(&out, &r, "served");
	out.tool_format = O1_TOOLS_LLAMA3_JSON;
	ev = token(1, "It is", -0.5f);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_true(o1_sidecar_chunk_due(&out, false));
	o1_sidecar_out_fini(&out);

	/* a broken call is text */
	o1_sidecar_out_init(&out, &r, "served");
	out.tool_format = O1_TOOLS_HERMES;
	ev = token(1, "<tool_call>\n{\"name\": ", -0.5f);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_int_equal(o1_sidecar_out_add(&out, &fin), 0);
	assert_int_equal(o1_sidecar_full_json(&out, &s), 0);
	j = json_of(s);
	c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	assert_string_equal(path_str(c, "finish_reason", NULL), "stop");
	assert_string_equal(path_str(c, "message", "content"),
			    "<tool_call>\n{\"name\": ");
	assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"),
					"tool_calls"));
	cJSON_Delete(j);
	o1_sidecar_out_fini(&out);
	o1_sidecar_request_fini(&r);
}

static void test_refine_fields(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;

	(void)state;
	assert_int_equal(parse("{\"model\":\"m\",\"messages\":[{\"role\":"
			       "\"user\",\"content\":\"x\"}],"
			       "\"refine_steps\":16}",
			       O1_SIDECAR_CHAT, &r, &e),
			 0);
	assert_int_equal(r.refine_steps, 16);
	o1_sidecar_request_fini(&r);
	assert_int_equal(parse("{\"model\":\"m\",\"prompt\":\"x\","
			       "\"refine_steps\":0}",
			       O1_SIDECAR_COMPLETION, &r, &e),
			 0);
	assert_int_equal(r.refine_steps, 0);
	o1_sidecar_request_fini(&r);
}

static struct o1_event round_end(uint32_t round, uint32_t gen,
				 enum o1_refine_stop_reason stop)
{
	return (struct o1_event){.type = O1_EVENT_ROUND,
				 .round = round,
				 .prompt_tokens = 10 + round,
				 .cached_tokens = round ? 8 : 0,
				 .generated_tokens = gen,
				 .mean_logprob = -0.5f - (float)round,
				 .min_logprob = -2.0f,
				 .mean_entropy = 0.75f,
				 .latency_ns = 2500000,
				 .finish = O1_FINISH_REASON_EOS,
				 .refine_stop = stop};
}

/* Checks round I of TRACE against what round_end and the texts made. */
static void check_round(const cJSON *trace, int i, const char *text)
{
	const cJSON *r = cJSON_GetArrayItem(trace, i);
	const cJSON *t = cJSON_GetObjectItem(r, "tokens");
	const cJSON *c = cJSON_GetObjectItem(r, "confidence");

	assert_int_equal(cJSON_GetObjectItem(r, "index")->valueint, i);
	assert_string_equal(path_str(r, "text", NULL), text);
	assert_int_equal(cJSON_GetObjectItem(t, "prompt")->valueint, 10 + i);
	assert_int_equal(cJSON_GetObjectItem(t, "cached")->valueint, i ? 8 : 0);
	assert_int_equal(cJSON_GetObjectItem(t, "generated")->valueint, 1);
	assert_true(cJSON_GetObjectItem(c, "mean_logprob")->valuedouble ==
		    -0.5 - i);
	assert_true(cJSON_GetObjectItem(c, "min_logprob")->valuedouble == -2);
	assert_true(cJSON_GetObjectItem(c, "mean_entropy")->valuedouble ==
		    0.75);
	assert_true(cJSON_GetObjectItem(r, "latency_ms")->valuedouble == 2.5);
	assert_string_equal(path_str(r, "finish_reason", NULL), "stop");
}

/* Two rounds, fed as the daemon sends them: the answer is the second's,
 * the trace has both, chunks carry their round, the trace rides on the
 * usage chunk (the last before [DONE]). */
static void test_refine_response(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;
	struct o1_sidecar_out out;
	struct o1_event ev, fin = {.type = O1_EVENT_FINAL,
				   .finish = O1_FINISH_REASON_EOS,
				   .prompt_tokens = 21,
				   .generated_tokens = 2,
				   .cached_tokens = 8,
				   .conf_tokens = 1,
				   .mean_logprob = -1.5f,
				   .min_logprob = -2.0f,
				   .mean_entropy = 0.75f,
				   .rounds = 2,
				   .refine_stop = O1_REFINE_STOP_REPEAT};
	const cJSON *c, *tr, *lp;
	char *s;
	cJSON *j;

	(void)state;
	assert_int_equal(parse("{\"model\":\"m\",\"messages\":[{\"role\":"
			       "\"user\",\"content\":\"x\"}],\"stream\":true,"
			       "\"stream_options\":{\"include_usage\":true},"
			       "\"refine_steps\":3,\"logprobs\":true,"
			       "\"top_logprobs\":1}",
			       O1_SIDECAR_CHAT, &r, &e),
			 0);
	o1_sidecar_out_init(&out, &r, "served");
	ev = token(7, "first", -0.5f);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_int_equal(o1_sidecar_chunk_sse(&out, true, &s), 0);
	assert_non_null(strstr(s, "\"content\":\"first\""));
	assert_non_null(strstr(s, "\"o1_round\":0"));
	free(s);
	ev = round_end(0, 1, O1_REFINE_STOP_NONE);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	ev = token(8, "second", -1.5f);
	ev.round = 1;
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_int_equal(o1_sidecar_chunk_sse(&out, false, &s), 0);
	assert_non_null(strstr(s, "\"content\":\"second\""));
	assert_non_null(strstr(s, "\"o1_round\":1"));
	free(s);
	/* positions count from round 0's first token */
	ev = (struct o1_event){
	    .type = O1_EVENT_LOGPROBS, .position = 1, .n_top = 1, .round = 1};
	ev.top_ids[0] = 8;
	ev.top_logprobs[0] = -1.5f;
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	ev = round_end(1, 1, O1_REFINE_STOP_REPEAT);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	assert_int_equal(o1_sidecar_out_add(&out, &fin), 0);
	/* a round out of order is refused, not rendered */
	ev = round_end(0, 1, O1_REFINE_STOP_NONE);
	assert_int_equal(o1_sidecar_out_add(&out, &ev), -EPROTO);

	assert_int_equal(o1_sidecar_full_json(&out, &s), 0);
	j = json_of(s);
	c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	assert_string_equal(path_str(c, "message", "content"), "second");
	lp = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "logprobs"), "content");
	assert_int_equal(cJSON_GetArraySize(lp), 1);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(
			     cJSON_GetArrayItem(lp, 0), "top_logprobs")),
			 1);
	assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "o1_confidence"),
					"mean_logprob")
			->valuedouble == -1.5);
	assert_int_equal(cJSON_GetObjectItem(
			     cJSON_GetObjectItem(c, "o1_confidence"), "tokens")
			     ->valueint,
			 1);
	tr = cJSON_GetObjectItem(j, "refinement_trace");
	assert_int_equal(cJSON_GetArraySize(tr), 2);
	check_round(tr, 0, "first");
	check_round(tr, 1, "second");
	assert_string_equal(path_str(j, "refinement_stop_reason", NULL),
			    "repeat");
	cJSON_Delete(j);
	assert_int_equal(o1_sidecar_chunk_sse(&out, false, &s), 0);
	assert_null(strstr(s, "refinement_trace")); /* the usage chunk's */
	assert_non_null(strstr(s, "\"o1_confidence\""));
	free(s);
	assert_int_equal(o1_sidecar_usage_sse(&out, &s), 0);
	j = json_of(strndup(s + 6, strlen(s) - 8));
	free(s);
	assert_int_equal(
	    cJSON_GetArraySize(cJSON_GetObjectItem(j, "refinement_trace")), 2);
	assert_int_equal(
	    cJSON_GetObjectItem(
		cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"),
				    "prompt_tokens_details"),
		"cached_tokens")
		->valueint,
	    8);
	cJSON_Delete(j);
	o1_sidecar_out_fini(&out);
	o1_sidecar_request_fini(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chat_defaults_and_packing),
	    cmocka_unit_test(test_completion_fields),
	    cmocka_unit_test(test_bad_bodies),
	    cmocka_unit_test(test_text_format_accepted),
	    cmocka_unit_test(test_error_shape),
	    cmocka_unit_test(test_whole_and_chunks),
	    cmocka_unit_test(test_text_offset_code_points),
	    cmocka_unit_test(test_tools_request),
	    cmocka_unit_test(test_tools_response),
	    cmocka_unit_test(test_refine_fields),
	    cmocka_unit_test(test_refine_response),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* With tools, a streamed answer assembled as an OpenAI client does (the
 * deltas' content joined, tool_calls merged by index, the last
 * finish_reason) equals the non-streamed response for the same output:
 * canned answers in every tool format (text before a call, calls only,
 * text after a call, several calls, malformed calls returned as text,
 * plain answers, a character of several bytes), each fed as TOKEN events
 * cut every 1, 2, 3, 5, 8 and 13 bytes and whole, with chunks taken as
 * the sidecar takes them (o1_sidecar_chunk_due after each token, one
 * chunk after the FINAL). The content is the text before the first call,
 * less trailing whitespace, and null (here: "") without any; text after a
 * call is dropped in both. */
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

struct canned {
	uint32_t format;
	const char *text;
	int n_calls; /* in the non-streamed response */
};

static const struct canned answers[] = {
    {O1_TOOLS_HERMES,
     "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"n\": 1}}\n"
     "</tool_call>",
     1},
    {O1_TOOLS_HERMES,
     "  Let me check \xc3\xa9t\xc3\xa9 \n\n<tool_call>{\"name\": \"f\", "
     "\"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"g\", "
     "\"arguments\": {\"s\": \"x\"}}</tool_call>\nDone, see above.",
     2},
    {O1_TOOLS_HERMES, "\n<tool_call>{\"name\": \"f\", \"arguments\": {}}", 1},
    {O1_TOOLS_HERMES, "Hi <tool_call>{\"name\": \"f\", \"argu", 0},
    {O1_TOOLS_HERMES, "<tools are fine>, and <tool_call is not one", 0},
    {O1_TOOLS_HERMES, "A plain answer.  \n", 0},
    {O1_TOOLS_XML,
     "ok <tool_call>\n<function=f>\n<parameter=n>\n5\n</parameter>\n"
     "</function>\n</tool_call> after",
     1},
    {O1_TOOLS_XML, "<function=f>\n<parameter=n>\n5\n</parameter></function>",
     1},
    {O1_TOOLS_XML, "x <tool_call>\n<function=f", 0},
    {O1_TOOLS_LLAMA3_JSON,
     "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"n\": 2}}; "
     "{\"name\": \"g\", \"parameters\": {}}",
     2},
    {O1_TOOLS_LLAMA3_JSON, " {\"name\": \"f\", \"parameters\": {}}", 1},
    {O1_TOOLS_LLAMA3_JSON, "{\"name\": \"f\", \"parameters\": {}} trailing", 0},
    {O1_TOOLS_LLAMA3_JSON, "The answer is {\"name\": \"f\"}", 0},
    {O1_TOOLS_MISTRAL,
     "x [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"n\": 1}, \"id\": "
     "\"a1\"}] and more",
     1},
    {O1_TOOLS_MISTRAL,
     "[TOOL_CALLS]f[CALL_ID]k9[ARGS]{\"n\": 3}[TOOL_CALLS]g[ARGS]{}", 2},
    {O1_TOOLS_MISTRAL, "Well [TOOL_CALLS]f{\"n\": 3}", 0},
    {O1_TOOLS_MISTRAL, "[TOOL_CALLS][\"f\"]", 0},
};

static const size_t cuts[] = {1, 2, 3, 5, 8, 13, 0 /* whole */};

struct assembled {
	char *content; /* joined; "" when none */
	cJSON *calls;  /* [{"id", "type", "function": {name, arguments}}] */
	char *finish;
};

static const char body[] =
    "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\","
    "\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
    "{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"n\":{\"type\":\"integer\"}}}}},{\"type\":\"function\",\"function\":"
    "{\"name\":\"g\"}}]}";

static char *concat(char *a, const char *b)
{
	size_t n = a ? strlen(a) : 0;
	char *c = realloc(a, n + strlen(b) + 1);

	assert_non_null(c);
	strcpy(c + n, b);
	return c;
}

static const char *str_of(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Merges one tool_calls delta into A->calls, by index (OpenAI's way: the
 * first delta of an index has its id, type and name, arguments are
 * appended). */
static void merge_calls(struct assembled *a, const cJSON *deltas)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, deltas)
	{
		const cJSON *ix = cJSON_GetObjectItem(d, "index");
		const cJSON *fn = cJSON_GetObjectItem(d, "function");
		cJSON *c, *f;

		assert_true(cJSON_IsNumber(ix));
		while (cJSON_GetArraySize(a->calls) <= ix->valueint) {
			c = cJSON_CreateObject();
			f = cJSON_AddObjectToObject(c, "function");
			cJSON_AddStringToObject(f, "name", "");
			cJSON_AddStringToObject(f, "arguments", "");
			cJSON_AddItemToArray(a->calls, c);
		}
		c = cJSON_GetArrayItem(a->calls, ix->valueint);
		f = cJSON_GetObjectItem(c, "function");
		if (str_of(d, "id"))
			cJSON_AddStringToObject(c, "id", str_of(d, "id"));
		if (str_of(d, "type"))
			cJSON_AddStringToObject(c, "type", str_of(d, "type"));
		if (str_of(fn, "name"))
			cJSON_ReplaceItemInObject(
			    f, "name", cJSON_CreateString(str_of(fn, "name")));
		if (str_of(fn, "arguments")) {
			char *s = concat(strdup(str_of(f, "arguments")),
					 str_of(fn, "arguments"));

			cJSON_ReplaceItemInObject(f, "arguments",
						  cJSON_CreateString(s));
			free(s);
		}
	}
}

/* Takes one SSE event ("data: {...}\n\n") into A. */
static void take_chunk(struct assembled *a, char *sse)
{
	cJSON *j, *c, *d;
	const char *fin;

	assert_int_equal(strncmp(sse, "data: ", 6), 0);
	j = cJSON_Parse(sse + 6);
	assert_non_null(j);
	c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	d = cJSON_GetObjectItem(c, "delta");
	assert_non_null(d);
	if (str_of(d, "content"))
		a->content = concat(a->content, str_of(d, "content"));
	if (cJSON_GetObjectItem(d, "tool_calls"))
		merge_calls(a, cJSON_GetObjectItem(d, "tool_calls"));
	fin = str_of(c, "finish_reason");
	if (fin) {
		free(a->finish);
		a->finish = strdup(fin);
	}
	cJSON_Delete(j);
	free(sse);
}

/* Streams C's text cut every CUT bytes (0: whole) and assembles it. */
static void stream(const struct o1_sidecar_request *r, const struct canned *c,
		   size_t cut, struct assembled *a)
{
	struct o1_event fin = {.type = O1_EVENT_FINAL,
			       .finish = O1_FINISH_REASON_EOS};
	struct o1_sidecar_out out;
	size_t n = strlen(c->text);
	bool first = true;
	char *sse;

	memset(a, 0, sizeof(*a));
	a->content = strdup("");
	a->calls = cJSON_CreateArray();
	o1_sidecar_out_init(&out, r, "served");
	snprintf(out.id, sizeof(out.id), "chatcmpl-22"); /* the calls' ids */
	out.tool_format = c->format;
	for (size_t at = 0, id = 0; at < n; id++) {
		struct o1_event ev = {.type = O1_EVENT_TOKEN, .n_ids = 1};
		size_t k = cut && cut < n - at ? cut : n - at;

		/* o1d never cuts a character */
		while (at + k < n && (c->text[at + k] & 0xc0) == 0x80)
			k++;

		ev.ids[0] = (uint32_t)id;
		ev.text_len = k < sizeof(ev.text) - 1 ? k : sizeof(ev.text) - 1;
		memcpy(ev.text, c->text + at, ev.text_len);
		at += ev.text_len;
		assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
		if (!o1_sidecar_chunk_due(&out, first))
			continue;
		assert_int_equal(o1_sidecar_chunk_sse(&out, first, &sse), 0);
		take_chunk(a, sse);
		first = false;
	}
	assert_int_equal(o1_sidecar_out_add(&out, &fin), 0);
	assert_int_equal(o1_sidecar_chunk_sse(&out, first, &sse), 0);
	take_chunk(a, sse);
	o1_sidecar_out_fini(&out);
}

/* The non-streamed response's message as an assembled stream. */
static void whole(const struct o1_sidecar_request *r, const struct canned *c,
		  struct assembled *a)
{
	struct o1_event ev = {.type = O1_EVENT_TOKEN, .n_ids = 1},
			fin = {.type = O1_EVENT_FINAL,
			       .finish = O1_FINISH_REASON_EOS};
	struct o1_sidecar_out out;
	const cJSON *ch, *msg, *calls;
	size_t n = strlen(c->text);
	char *json;
	cJSON *j;

	o1_sidecar_out_init(&out, r, "served");
	snprintf(out.id, sizeof(out.id), "chatcmpl-22"); /* the calls' ids */
	out.tool_format = c->format;
	for (size_t at = 0; at < n; at += ev.text_len) {
		ev.text_len =
		    n - at < sizeof(ev.text) - 1 ? n - at : sizeof(ev.text) - 1;
		memcpy(ev.text, c->text + at, ev.text_len);
		assert_int_equal(o1_sidecar_out_add(&out, &ev), 0);
	}
	assert_int_equal(o1_sidecar_out_add(&out, &fin), 0);
	assert_int_equal(o1_sidecar_full_json(&out, &json), 0);
	o1_sidecar_out_fini(&out);
	j = cJSON_Parse(json);
	free(json);
	ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
	msg = cJSON_GetObjectItem(ch, "message");
	a->content =
	    strdup(str_of(msg, "content") ? str_of(msg, "content") : "");
	calls = cJSON_GetObjectItem(msg, "tool_calls");
	a->calls = calls ? cJSON_Duplicate(calls, 1) : cJSON_CreateArray();
	a->finish = strdup(str_of(ch, "finish_reason"));
	cJSON_Delete(j);
}

static void fini(struct assembled *a)
{
	free(a->content);
	free(a->finish);
	cJSON_Delete(a->calls);
}

static void test_stream_equals_whole(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;

	(void)state;
	assert_int_equal(o1_sidecar_request_parse(body, strlen(body),
						  O1_SIDECAR_CHAT, &r, &e),
			 0);
	for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
		struct assembled w;

		whole(&r, &answers[i], &w);
		assert_int_equal(cJSON_GetArraySize(w.calls),
				 answers[i].n_calls);
		assert_string_equal(w.finish,
				    answers[i].n_calls ? "tool_calls" : "stop");
		if (!answers[i].n_calls) /* a broken call is all text */
			assert_string_equal(w.content, answers[i].text);
		for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
			struct assembled s;

			stream(&r, &answers[i], cuts[k], &s);
			if (strcmp(s.content, w.content) ||
			    !cJSON_Compare(s.calls, w.calls, 1) ||
			    strcmp(s.finish, w.finish)) {
				char *sc = cJSON_PrintUnformatted(s.calls);
				char *wc = cJSON_PrintUnformatted(w.calls);

				fail_msg("answer %zu cut %zu: streamed "
					 "[%s] %s %s, whole [%s] %s %s",
					 i, cuts[k], s.content, sc, s.finish,
					 w.content, wc, w.finish);
			}
			fini(&s);
		}
		fini(&w);
	}
	o1_sidecar_request_fini(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stream_equals_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

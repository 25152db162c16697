/* Chat requests as JSON (chat_request.h): what is refused and why, the
 * arguments of tool calls handed to templates as objects, tool_choice
 * "none" dropping the tools, and then the renderings: every real template
 * of ../shared/testdata/chat/templates.json rendered with tools,
 * assistant tool_calls and tool results must give exactly what jinja2
 * set up as transformers renders (tests/tokenizer/data/
 * tool_renderings.jsonl, made by gen_tool_renderings.py), the request
 * written as an OpenAI client writes it (arguments as JSON text). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "tokenizer/chat_request.h"
#include "tokenizer/chat_template.h"

#define TEMPLATES  O1_SHARED_DIR "/testdata/chat/templates.json"
#define RENDERINGS O1_SOURCE_DIR "/tests/tokenizer/data/tool_renderings.jsonl"

static int parse(const char *s, cJSON **vars, char *msg)
{
	return o1_chat_request_parse(s, strlen(s), vars, msg, 160);
}

static void refused(const char *s, int code, const char *what)
{
	char msg[160];
	cJSON *vars = (cJSON *)1;

	assert_int_equal(parse(s, &vars, msg), code);
	assert_null(vars);
	if (!strstr(msg, what))
		fail_msg("%s: \"%s\" lacks \"%s\"", s, msg, what);
}

static void test_refused(void **state)
{
	char many[8192];
	size_t n;

	(void)state;
	refused("", -O1_E_FORMAT, "not JSON");
	refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]",
		-O1_E_FORMAT, "not JSON");
	refused("[]", -O1_E_FORMAT, "not a JSON object");
	refused("{}", -O1_E_FORMAT, "messages");
	refused("{\"messages\":[]}", -O1_E_FORMAT, "messages");
	refused("{\"messages\":[1]}", -O1_E_FORMAT, "messages[0]");
	refused("{\"messages\":[{\"content\":\"x\"}]}", -O1_E_FORMAT,
		"messages[0].role");
	refused("{\"messages\":[{\"role\":\"user\",\"content\":7}]}",
		-O1_E_FORMAT, "messages[0].content");
	refused("{\"messages\":[{\"role\":\"user\"}]}", -O1_E_FORMAT,
		"no content");
	refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"tool\":[]}",
		-O1_E_FORMAT, "unknown member \"tool\"");
	refused("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{"
		"\"function\":{\"name\":\"f\",\"arguments\":\"{bad\"}}]}]}",
		-O1_E_FORMAT, "messages[0].tool_calls[0].function.arguments");
	refused("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{"
		"\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]}",
		-O1_E_FORMAT, "not a JSON object");
	refused("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{"
		"\"function\":{\"arguments\":\"{}\"}}]}]}",
		-O1_E_FORMAT, "messages[0].tool_calls[0]");
	refused("{\"messages\":[{\"role\":\"tool\",\"content\":\"x\","
		"\"tool_call_id\":3}]}",
		-O1_E_FORMAT, "tool_call_id");
	refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"tools\":[{\"type\":\"function\",\"function\":{}}]}",
		-O1_E_FORMAT, "tools[0]");
	refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"tools\":{}}",
		-O1_E_FORMAT, "tools");
	refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"tool_choice\":\"required\"}",
		-O1_E_FORMAT, "without tools");
	refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
		"\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":"
		"{\"name\":\"g\"}}}",
		-O1_E_FORMAT, "no tool is called \"g\"");
	refused("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		"\"tool_choice\":\"sometimes\"}",
		-O1_E_FORMAT, "tool_choice");
	n = (size_t)snprintf(many, sizeof(many), "{\"messages\":[");
	for (int i = 0; i < 65; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n,
				      "%s{\"role\":\"user\",\"content\":\"x\"}",
				      i ? "," : "");
	snprintf(many + n, sizeof(many) - n, "]}");
	refused(many, -O1_E_BOUNDS, "at most 64");
	/* a message's calls past their count: BOUNDS, like the others */
	n = (size_t)snprintf(many, sizeof(many),
			     "{\"messages\":[{\"role\":\"assistant\","
			     "\"tool_calls\":[");
	for (int i = 0; i < O1_CHAT_REQUEST_MAX_CALLS + 1; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n,
				      "%s{\"function\":{\"name\":\"f\","
				      "\"arguments\":{}}}",
				      i ? "," : "");
	snprintf(many + n, sizeof(many) - n, "]}]}");
	refused(many, -O1_E_BOUNDS, "messages[0].tool_calls");
	refused("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":"
		"{}}]}",
		-O1_E_FORMAT, "messages[0].tool_calls");
}

static void test_vars(void **state)
{
	char msg[160];
	cJSON *vars, *a;
	char *s;

	(void)state;
	assert_int_equal(
	    parse("{\"messages\":[{\"role\":\"assistant\",\"content\":null,"
		  "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
		  "\"function\":{\"name\":\"f\",\"arguments\":"
		  "\"{\\\"a\\\": [1, 2]}\"}}]}],\"tools\":[{\"type\":"
		  "\"function\",\"function\":{\"name\":\"f\"}}],"
		  "\"tool_choice\":\"auto\"}",
		  &vars, msg),
	    0);
	a = cJSON_GetObjectItem(
	    cJSON_GetObjectItem(
		cJSON_GetArrayItem(
		    cJSON_GetObjectItem(
			cJSON_GetArrayItem(cJSON_GetObjectItem(vars, "messages"),
					   0),
			"tool_calls"),
		    0),
		"function"),
	    "arguments");
	s = cJSON_PrintUnformatted(a);
	assert_string_equal(s, "{\"a\":[1,2]}");
	free(s);
	assert_non_null(cJSON_GetObjectItem(vars, "tools"));
	assert_null(cJSON_GetObjectItem(vars, "tool_choice"));
	cJSON_Delete(vars);
	assert_int_equal(
	    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		  "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
		  "\"f\"}}],\"tool_choice\":\"none\"}",
		  &vars, msg),
	    0);
	assert_null(cJSON_GetObjectItem(vars, "tools"));
	cJSON_Delete(vars);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* The template called NAME ("x#2": the second "x") in LIST. */
static const char *template_of(const cJSON *list, const char *name)
{
	char base[128];
	const char *hash = strchr(name, '#');
	int want = hash ? atoi(hash + 1) : 1, seen = 0;
	const cJSON *t;

	snprintf(base, sizeof(base), "%.*s",
		 (int)(hash ? hash - name : (long)strlen(name)), name);
	cJSON_ArrayForEach(t, list) if (!strcmp(
	    cJSON_GetObjectItem(t, "name")->valuestring,
	    base) && ++seen == want) return cJSON_GetObjectItem(t, "template")
	    ->valuestring;
	return NULL;
}

/* The request an OpenAI client sends for REC: arguments as JSON text. */
static char *request_of(const cJSON *rec)
{
	cJSON *req = cJSON_CreateObject();
	cJSON *msgs = cJSON_Duplicate(cJSON_GetObjectItem(rec, "messages"), 1);
	cJSON *m, *tc;
	char *s;

	cJSON_ArrayForEach(m, msgs)
	    cJSON_ArrayForEach(tc, cJSON_GetObjectItem(m, "tool_calls"))
	{
		cJSON *f = cJSON_GetObjectItem(tc, "function");
		char *a = cJSON_Print(cJSON_GetObjectItem(f, "arguments"));

		cJSON_ReplaceItemInObject(f, "arguments", cJSON_CreateString(a));
		free(a);
	}
	cJSON_AddItemToObject(req, "messages", msgs);
	cJSON_AddItemToObject(
	    req, "tools", cJSON_Duplicate(cJSON_GetObjectItem(rec, "tools"), 1));
	s = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	return s;
}

/* One rendering: 1 when it matches, 0 when not (printed). */
static int replay(const cJSON *list, const cJSON *rec)
{
	const char *name = cJSON_GetObjectItem(rec, "template")->valuestring;
	const cJSON *want = cJSON_GetObjectItem(rec, "rendered");
	const cJSON *werr = cJSON_GetObjectItem(rec, "error");
	const char *tmpl = template_of(list, name);
	struct o1_chat_template *ct = NULL;
	struct o1_jinja_error err = {0};
	char msg[160], *req = request_of(rec), *out = NULL;
	cJSON *vars = NULL;
	size_t len = 0;
	int rc, ok;

	assert_non_null(tmpl);
	assert_int_equal(o1_chat_template_create(tmpl, strlen(tmpl), name,
						 "<s>", "</s>", &ct, &err),
			 0);
	assert_int_equal(parse(req, &vars, msg), 0);
	cJSON_AddBoolToObject(
	    vars, "add_generation_prompt",
	    cJSON_IsTrue(cJSON_GetObjectItem(rec, "add_generation_prompt")));
	rc = o1_chat_template_render_vars(ct, vars, &out, &len, &err);
	if (want)
		ok = rc == 0 && len == strlen(want->valuestring) &&
		     !memcmp(out, want->valuestring, len);
	else
		ok = rc != 0 && strstr(werr->valuestring, err.msg) != NULL;
	if (!ok)
		printf("mismatch: %s %s agp=%d: rc %d %s\n", name,
		       cJSON_GetObjectItem(rec, "case")->valuestring,
		       cJSON_IsTrue(
			   cJSON_GetObjectItem(rec, "add_generation_prompt")),
		       rc, rc ? err.msg : "(text differs)");
	free(out);
	free(req);
	cJSON_Delete(vars);
	o1_chat_template_destroy(ct);
	return ok;
}

static void test_renderings(void **state)
{
	char *tj = slurp(TEMPLATES), *rj, *line, *save = NULL;
	cJSON *list;
	int n = 0, pass = 0, tools_read = 0;

	(void)state;
	if (!tj)
		skip();
	rj = slurp(RENDERINGS);
	assert_non_null(rj);
	list = cJSON_Parse(tj);
	assert_non_null(list);
	for (line = strtok_r(rj, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		cJSON *rec = cJSON_Parse(line);
		const char *t;

		assert_non_null(rec);
		t = template_of(list,
				cJSON_GetObjectItem(rec, "template")->valuestring);
		tools_read += t && strstr(t, "tool_calls") != NULL;
		pass += replay(list, rec);
		n++;
		cJSON_Delete(rec);
	}
	printf("tool renderings: %d of %d match (%d by templates that read "
	       "tool_calls)\n",
	       pass, n, tools_read);
	assert_int_equal(n, 148);
	assert_int_equal(pass, n);
	cJSON_Delete(list);
	free(tj);
	free(rj);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_vars),
	    cmocka_unit_test(test_renderings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

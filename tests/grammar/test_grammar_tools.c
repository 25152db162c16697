/* Tool calls as grammars (grammar_tools.h): for each format, calls that
 * o1_tool_calls_parse reads back as the right call are accepted whole,
 * and calls of an unknown tool, without a required argument or with an
 * argument of the wrong type are refused; bad tools lists fail with
 * their place named. The parser is the outside judge here: whatever the
 * grammar lets through must read back as a call. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_tools.h"
#include "tokenizer/tool_call.h"

static const char tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"Weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":"
    "[\"c\",\"f\"]},\"days\":{\"type\":\"integer\"}},\"required\":"
    "[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"tree\",\"parameters\":"
    "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"kids\":"
    "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}}}},"
    "\"type\":\"object\",\"properties\":{\"root\":{\"$ref\":"
    "\"#/$defs/n\"}},\"required\":[\"root\"]}}}]";

static struct o1_grammar *compile(enum o1_tool_format f, const char *t)
{
	struct o1_grammar_error err;
	struct o1_grammar *g = NULL;
	int rc = o1_grammar_compile_tools(f, t, strlen(t), &err, &g);

	if (rc)
		fprintf(stderr, "compile: %d %s\n", rc, err.msg);
	assert_int_equal(rc, 0);
	return g;
}

static bool accepts(const struct o1_grammar *g, const char *s)
{
	struct o1_grammar_matcher *m;
	bool ok;

	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	ok = o1_grammar_matcher_accept_bytes(m, (const uint8_t *)s,
					     strlen(s)) == 0 &&
	     o1_grammar_matcher_is_complete(m);
	o1_grammar_matcher_destroy(m);
	return ok;
}

/* S is accepted and reads back as the call NAME(ARGS), ARGS compact. */
static void call_ok(enum o1_tool_format f, const struct o1_grammar *g,
		    const char *s, const char *name, const char *args)
{
	struct o1_tool_calls tc = {0};
	cJSON *list = cJSON_Parse(tools);

	if (!accepts(g, s))
		fail_msg("refused: %s", s);
	assert_int_equal(o1_tool_calls_parse(f, s, strlen(s), list, &tc), 0);
	assert_int_equal(tc.n, 1);
	assert_string_equal(tc.calls[0].name, name);
	assert_string_equal(tc.calls[0].arguments, args);
	assert_string_equal(tc.content, "");
	o1_tool_calls_fini(&tc);
	cJSON_Delete(list);
}

static void refused(const struct o1_grammar *g, const char *s)
{
	if (accepts(g, s))
		fail_msg("accepted: %s", s);
}

static void test_hermes(void **state)
{
	struct o1_grammar *g = compile(O1_TOOL_HERMES, tools);

	(void)state;
	call_ok(O1_TOOL_HERMES, g,
		"<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
		"{\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>",
		"get_weather", "{\"city\":\"Paris\",\"unit\":\"c\"}");
	call_ok(O1_TOOL_HERMES, g,
		"<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n"
		"</tool_call>",
		"now", "{}");
	call_ok(O1_TOOL_HERMES, g,
		"<tool_call>\n{\"name\":\"tree\",\"arguments\":{\"root\":"
		"{\"kids\":[{\"kids\":[]}]}}}\n</tool_call>",
		"tree", "{\"root\":{\"kids\":[{\"kids\":[]}]}}");
	refused(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":"
		   "{}}\n</tool_call>\n<tool_call>\n{\"name\":"
		   "\"now\",\"arguments\":{}}\n</tool_call>"); /* one call */
	refused(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
		   "{\"unit\":\"c\"}}\n</tool_call>"); /* city required */
	refused(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
		   "{\"city\":\"P\",\"unit\":\"k\"}}\n</tool_call>");
	refused(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
		   "{\"city\":\"P\",\"days\":1.5}}\n</tool_call>");
	refused(g, "<tool_call>\n{\"name\":\"rm\",\"arguments\":{}}\n"
		   "</tool_call>");
	refused(g, "{\"name\":\"now\",\"arguments\":{}}");
	refused(g, "");
	o1_grammar_destroy(g);
}

static void test_llama3(void **state)
{
	struct o1_grammar *g = compile(O1_TOOL_LLAMA3_JSON, tools);

	(void)state;
	call_ok(O1_TOOL_LLAMA3_JSON, g,
		"{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Oslo\","
		"\"days\":3}}",
		"get_weather", "{\"city\":\"Oslo\",\"days\":3}");
	refused(g, "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"O\"}}");
	refused(g, "{\"name\":\"now\",\"parameters\":{},\"x\":1}");
	o1_grammar_destroy(g);
}

static void test_mistral(void **state)
{
	struct o1_grammar *g = compile(O1_TOOL_MISTRAL, tools);

	(void)state;
	call_ok(O1_TOOL_MISTRAL, g,
		"[TOOL_CALLS][{\"name\":\"get_weather\",\"arguments\":"
		"{\"city\":\"Rome\"}}]",
		"get_weather", "{\"city\":\"Rome\"}");
	refused(g, "[TOOL_CALLS][{\"name\":\"now\",\"arguments\":"
		   "{}},{\"name\":\"now\",\"arguments\":{}}]");
	refused(g, "[TOOL_CALLS][]");
	refused(g, "[{\"name\":\"now\",\"arguments\":{}}]");
	o1_grammar_destroy(g);
}

static void test_xml(void **state)
{
	struct o1_grammar *g = compile(O1_TOOL_XML, tools);

	(void)state;
	call_ok(O1_TOOL_XML, g,
		"<tool_call>\n<function=get_weather>\n<parameter=city>\n"
		"New York\n</parameter>\n<parameter=unit>\nf\n</parameter>\n"
		"<parameter=days>\n-2\n</parameter>\n</function>\n"
		"</tool_call>",
		"get_weather", "{\"city\":\"New York\",\"unit\":\"f\",\"days\":-2}");
	call_ok(O1_TOOL_XML, g,
		"<tool_call>\n<function=now>\n</function>\n</tool_call>", "now",
		"{}");
	refused(g, "<tool_call>\n<function=get_weather>\n</function>\n"
		   "</tool_call>"); /* city required */
	refused(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\n"
		   "x\n</parameter>\n<parameter=days>\nmany\n</parameter>\n"
		   "</function>\n</tool_call>");
	refused(g, "<tool_call>\n<function=rm>\n</function>\n</tool_call>");
	o1_grammar_destroy(g);
}

/* Bad lists fail with their place named; no format, no grammar. */
static void test_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "{}",
	    "[]",
	    "[1]",
	    "[{\"type\":\"function\"}]",
	    "[{\"type\":\"retrieval\",\"function\":{\"name\":\"x\"}}]",
	    "[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]",
	    "[{\"type\":\"function\",\"function\":{\"name\":7}}]",
	    "[{\"type\":\"function\",\"function\":{\"name\":\"x\","
	    "\"parameters\":[]}}]",
	    "[{\"function\":{\"name\":\"x\",\"parameters\":{\"type\":"
	    "\"object\",\"properties\":{\"a\":{\"not\":{}}}}}}]",
	};
	struct o1_grammar_error err;
	struct o1_grammar *g;
	char *text;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = o1_grammar_compile_tools(O1_TOOL_HERMES, bad[i],
						  strlen(bad[i]), &err, &g);

		if (rc != -O1_E_FORMAT && rc != -O1_E_UNSUPPORTED)
			fail_msg("%s: %d", bad[i], rc);
		assert_null(g);
		assert_true(err.msg[0] != 0);
	}
	assert_int_equal(o1_grammar_compile_tools(O1_TOOL_HERMES, bad[9],
						  strlen(bad[9]), &err, &g),
			 -O1_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "not"));
	assert_int_equal(o1_grammar_from_tools(O1_TOOL_NONE, tools,
					       strlen(tools), &err, &text, &n),
			 -O1_E_UNSUPPORTED);
	assert_null(text);
}

/* The XML format reads properties and required itself (no schema
 * compiler on its path): a properties member that is not an object is
 * refused, not walked as if it had names. */
static void test_xml_bad(void **state)
{
	static const char *const bad[] = {
	    "[{\"function\":{\"name\":\"x\",\"parameters\":{"
	    "\"properties\":[{\"type\":\"string\"}]}}}]",
	    "[{\"function\":{\"name\":\"x\",\"parameters\":{"
	    "\"properties\":[{}],\"required\":[\"a\"]}}}]",
	    "[{\"function\":{\"name\":\"x\",\"parameters\":{"
	    "\"properties\":\"a\"}}}]",
	};
	struct o1_grammar_error err;
	struct o1_grammar *g;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(o1_grammar_compile_tools(O1_TOOL_XML, bad[i],
							  strlen(bad[i]), &err,
							  &g),
				 -O1_E_FORMAT);
		assert_null(g);
		assert_non_null(strstr(err.msg, "properties"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hermes),  cmocka_unit_test(test_llama3),
	    cmocka_unit_test(test_mistral), cmocka_unit_test(test_xml),
	    cmocka_unit_test(test_bad),	    cmocka_unit_test(test_xml_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

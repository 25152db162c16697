/* Tool-call reading tests: canned model outputs in each format (random
 * weights do not call tools), the format recognised from real templates'
 * markers, the XML format's parameters typed by the tools' schemas, and
 * malformed calls coming back whole as text. */
#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/tool_call.h"

struct want_call {
	const char *name, *arguments, *id;
};

/* Reads TEXT as F and checks the content and the calls (N of them). */
static void expect(enum o1_tool_format f, const char *text,
		   const cJSON *tools, const char *content,
		   const struct want_call *calls, size_t n)
{
	struct o1_tool_calls tc;

	assert_int_equal(o1_tool_calls_parse(f, text, strlen(text), tools, &tc),
			 0);
	assert_string_equal(tc.content, content);
	assert_int_equal(tc.n, n);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(tc.calls[i].name, calls[i].name);
		assert_string_equal(tc.calls[i].arguments, calls[i].arguments);
		if (calls[i].id)
			assert_string_equal(tc.calls[i].id, calls[i].id);
		else
			assert_null(tc.calls[i].id);
	}
	o1_tool_calls_fini(&tc);
}

/* TEXT is not a well-formed call: all of it is content. */
static void expect_text(enum o1_tool_format f, const char *text)
{
	expect(f, text, NULL, text, NULL, 0);
}

static void test_detect(void **state)
{
	(void)state;
	assert_int_equal(o1_tool_format_detect(
			     "{{- '<tool_call>\\n<function=' + name + '>' }}"),
			 O1_TOOL_XML);
	assert_int_equal(o1_tool_format_detect("{{- '\\n<tool_call>\\n{\"name\": "
					       "\"' }}"),
			 O1_TOOL_HERMES);
	assert_int_equal(o1_tool_format_detect("{{ '[TOOL_CALLS][' }}"),
			 O1_TOOL_MISTRAL);
	assert_int_equal(o1_tool_format_detect("<|python_tag|>"),
			 O1_TOOL_LLAMA3_JSON);
	assert_int_equal(o1_tool_format_detect("<|start_header_id|>{% if tools "
					       "is not none %}"),
			 O1_TOOL_LLAMA3_JSON);
	assert_int_equal(o1_tool_format_detect("<|im_start|>"), O1_TOOL_NONE);
	assert_int_equal(o1_tool_format_detect(NULL), O1_TOOL_NONE);
	assert_string_equal(o1_tool_format_name(O1_TOOL_XML), "xml");
	assert_null(o1_tool_format_name(O1_TOOL_N));
}

static void test_hermes(void **state)
{
	static const struct want_call two[] = {
	    {"get_weather", "{\"city\":\"Paris\",\"unit\":\"c\"}", NULL},
	    {"search", "{\"q\":\"news\"}", NULL},
	};

	(void)state;
	expect(O1_TOOL_HERMES,
	       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
	       "\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n"
	       "</tool_call>\n<tool_call>\n{\"name\": \"search\", "
	       "\"arguments\": \"{\\\"q\\\": \\\"news\\\"}\"}\n</tool_call>",
	       NULL, "Let me check.", two, 2);
	/* generation stopped before the closing tag */
	expect(O1_TOOL_HERMES,
	       "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": "
	       "\"news\"}}",
	       NULL, "", two + 1, 1);
	/* the content is the text before the first call, leading space kept,
	 * trailing space gone; text between and after calls is dropped */
	expect(O1_TOOL_HERMES,
	       " Hm,\nok. \n<tool_call>{\"name\": \"get_weather\", "
	       "\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}"
	       "</tool_call> and <tool_call>{\"name\": \"search\", "
	       "\"arguments\": {\"q\": \"news\"}}</tool_call>\nDone.",
	       NULL, " Hm,\nok.", two, 2);
	expect_text(O1_TOOL_HERMES, "No tools needed: 4.");
	expect_text(O1_TOOL_HERMES,
		    "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\""
		    "</tool_call>");
	expect_text(O1_TOOL_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>");
	expect_text(O1_TOOL_HERMES,
		    "<tool_call>{\"name\": \"x\", \"arguments\": [1]}</tool_call>");
	expect_text(O1_TOOL_HERMES,
		    "<tool_call>{\"name\": \"x\"} trailing</tool_call>");
}

static void test_xml(void **state)
{
	static const struct want_call one[] = {
	    {"get_weather",
	     "{\"city\":\"New York\",\"days\":3,\"detail\":true,\"zip\":\"01234\","
	     "\"tags\":[\"a\"],\"note\":\"line1\\nline2\"}",
	     NULL},
	};
	static const struct want_call untyped[] = {
	    {"f", "{\"n\":\"3\"}", NULL},
	};
	cJSON *tools = cJSON_Parse(
	    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
	    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\":"
	    " {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"},"
	    " \"detail\": {\"type\": \"boolean\"}, \"zip\": {\"type\":"
	    " \"string\"}, \"tags\": {\"type\": \"array\"}}}}}]");

	(void)state;
	expect(O1_TOOL_XML,
	       "I'll look.\n<tool_call>\n<function=get_weather>\n"
	       "<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n"
	       "</parameter>\n<parameter=detail>\ntrue\n</parameter>\n"
	       "<parameter=zip>\n01234\n</parameter>\n<parameter=tags>\n"
	       "[\"a\"]\n</parameter>\n<parameter=note>\nline1\nline2\n"
	       "</parameter>\n</function>\n</tool_call>",
	       tools, "I'll look.", one, 1);
	/* without schemas, values stay text */
	expect(O1_TOOL_XML,
	       "<function=f>\n<parameter=n>\n3\n</parameter>\n</function>",
	       NULL, "", untyped, 1);
	expect_text(O1_TOOL_XML, "<tool_call>\n<function=get_weather");
	expect_text(O1_TOOL_XML, "<tool_call>\n<function=>\n</function>");
	expect_text(O1_TOOL_XML, "plain answer");
	cJSON_Delete(tools);
}

static void test_llama3(void **state)
{
	static const struct want_call calls[] = {
	    {"get_weather", "{\"city\":\"Paris\"}", NULL},
	    {"search", "{\"q\":\"x\"}", NULL},
	};

	(void)state;
	expect(O1_TOOL_LLAMA3_JSON,
	       "{\"name\": \"get_weather\", \"parameters\": {\"city\": "
	       "\"Paris\"}}",
	       NULL, "", calls, 1);
	expect(O1_TOOL_LLAMA3_JSON,
	       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": "
	       "{\"city\": \"Paris\"}}; {\"name\": \"search\", \"arguments\": "
	       "{\"q\": \"x\"}}",
	       NULL, "", calls, 2);
	expect_text(O1_TOOL_LLAMA3_JSON, "The weather is fine {really}.");
	expect_text(O1_TOOL_LLAMA3_JSON, "{\"name\": \"get_weather\", ");
	expect_text(O1_TOOL_LLAMA3_JSON, "{\"parameters\": {}}");
}

static void test_mistral(void **state)
{
	static const struct want_call list[] = {
	    {"get_weather", "{\"city\":\"Paris\"}", "abc123def"},
	    {"search", "{}", NULL},
	};
	static const struct want_call v11[] = {
	    {"get_weather", "{\"city\":\"Paris\"}", NULL},
	    {"search", "{\"q\":\"x\"}", "c2"},
	};

	(void)state;
	expect(O1_TOOL_MISTRAL,
	       "Sure. [TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": "
	       "{\"city\": \"Paris\"}, \"id\": \"abc123def\"}, {\"name\": "
	       "\"search\"}]",
	       NULL, "Sure.", list, 2);
	expect(O1_TOOL_MISTRAL,
	       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"
	       "[TOOL_CALLS]search[CALL_ID]c2[ARGS]{\"q\": \"x\"}",
	       NULL, "", v11, 2);
	expect_text(O1_TOOL_MISTRAL, "[TOOL_CALLS][{\"name\": ");
	expect_text(O1_TOOL_MISTRAL, "[TOOL_CALLS]get_weather{\"city\": 1}");
	expect_text(O1_TOOL_MISTRAL, "[TOOL_CALLS]{\"name\": \"x\"}");
	expect_text(O1_TOOL_MISTRAL, "no calls here");
}

/* Without a tool format, everything is text. */
static void test_none(void **state)
{
	(void)state;
	expect_text(O1_TOOL_NONE, "<tool_call>{\"name\": \"x\"}</tool_call>");
	expect_text(O1_TOOL_N, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_detect), cmocka_unit_test(test_hermes),
	    cmocka_unit_test(test_xml),	   cmocka_unit_test(test_llama3),
	    cmocka_unit_test(test_mistral), cmocka_unit_test(test_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

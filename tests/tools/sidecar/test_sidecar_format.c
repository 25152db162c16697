/* response_format in a request body (sidecar_format.c): text gives no
 * grammar, json_object the any-object grammar, json_schema the schema's
 * grammar (checked here by compiling it and matching documents), and
 * every malformed or unsupported form a 400 naming response_format (an
 * unsupported schema keyword named in the message). The request parser
 * carries a JSON format's grammar to the request (o1d enforces it). */
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
#include "tools/sidecar/sidecar_format.h"
#include "tools/sidecar/sidecar_request.h"

static void body_of(const char *format, char *body, size_t cap)
{
	snprintf(body, cap,
		 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		 "\"content\":\"hi\"}]%s%s}",
		 format ? ",\"response_format\":" : "", format ? format : "");
}

/* FORMAT through o1_sidecar_format_parse alone. */
static int parse(const char *format, struct o1_sidecar_request *r,
		 struct o1_sidecar_req_error *e)
{
	char body[2048];
	cJSON *root;
	int ret;

	memset(r, 0, sizeof(*r));
	memset(e, 0, sizeof(*e));
	body_of(format, body, sizeof(body));
	root = cJSON_Parse(body);
	assert_non_null(root);
	ret = o1_sidecar_format_parse(root, r, e);
	cJSON_Delete(root);
	return ret;
}

/* FORMAT through the whole request parser. */
static int parse_request(const char *format, struct o1_sidecar_request *r,
			 struct o1_sidecar_req_error *e)
{
	char body[2048];

	body_of(format, body, sizeof(body));
	return o1_sidecar_request_parse(body, strlen(body), O1_SIDECAR_CHAT,
					r, e);
}

/* R's grammar accepts TEXT as a whole sentence. */
static bool accepts(const struct o1_sidecar_request *r, const char *text)
{
	struct o1_grammar *g;
	struct o1_grammar_matcher *m;
	bool ok;

	assert_int_equal(o1_grammar_compile(r->grammar, r->grammar_len, NULL,
					    &g),
			 0);
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	ok = !o1_grammar_matcher_accept_bytes(m, (const uint8_t *)text,
					      strlen(text)) &&
	     o1_grammar_matcher_is_complete(m);
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
	return ok;
}

static void test_formats(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;

	(void)state;
	assert_int_equal(parse(NULL, &r, &e), 0);
	assert_null(r.grammar);
	o1_sidecar_request_fini(&r);
	assert_int_equal(parse("{\"type\":\"text\"}", &r, &e), 0);
	assert_null(r.grammar);
	o1_sidecar_request_fini(&r);
	assert_int_equal(parse("null", &r, &e), 0);
	assert_null(r.grammar);
	o1_sidecar_request_fini(&r);
	assert_int_equal(parse("{\"type\":\"json_object\"}", &r, &e), 0);
	assert_true(accepts(&r, "{\"a\":[1,{}]}"));
	assert_false(accepts(&r, "[1]"));
	o1_sidecar_request_fini(&r);
	assert_int_equal(
	    parse("{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
		  "\"strict\":true,\"schema\":{\"type\":\"object\","
		  "\"properties\":{\"n\":{\"type\":\"integer\"},"
		  "\"s\":{\"enum\":[\"x\",\"y\"]}},\"required\":[\"n\",\"s\"],"
		  "\"additionalProperties\":false}}}",
		  &r, &e),
	    0);
	assert_true(accepts(&r, "{\"n\":-3,\"s\":\"y\"}"));
	assert_false(accepts(&r, "{\"n\":1}"));
	assert_false(accepts(&r, "{\"n\":1,\"s\":\"z\"}"));
	o1_sidecar_request_fini(&r);
}

static void test_refusals(void **state)
{
	static const struct {
		const char *format, *msg;
	} bads[] = {
	    {"\"json_object\"", "must be an object"},
	    {"{}", "must be an object with a 'type'"},
	    {"{\"type\":\"xml\"}", "'type' must be"},
	    {"{\"type\":\"json_schema\"}", "'json_schema' must be"},
	    {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}",
	     "'json_schema.schema'"},
	    {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
	     "{\"type\":\"object\",\"patternProperties\":{}}}}",
	     "keyword 'patternProperties' is not supported"},
	    {"{\"type\":\"json_schema\",\"json_schema\":{\"strict\":false,"
	     "\"schema\":{\"not\":{}}}}",
	     "keyword 'not'"},
	    {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
	     "{\"$ref\":\"http://x/y.json\"}}}",
	     "only references within the schema"},
	    {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":false}}",
	     "matches nothing"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		struct o1_sidecar_request r;
		struct o1_sidecar_req_error e;

		assert_int_equal(parse(bads[i].format, &r, &e), -EINVAL);
		assert_string_equal(e.param, "response_format");
		if (!strstr(e.message, bads[i].msg))
			fail_msg("%s: '%s'", bads[i].format, e.message);
		o1_sidecar_request_fini(&r);
	}
}

static void test_request_parser(void **state)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;

	(void)state;
	assert_int_equal(parse_request("{\"type\":\"text\"}", &r, &e), 0);
	assert_null(r.grammar);
	o1_sidecar_request_fini(&r);
	assert_int_equal(parse_request("{\"type\":\"json_object\"}", &r, &e),
			 0);
	assert_non_null(r.grammar);
	assert_true(accepts(&r, "{\"a\":1}"));
	o1_sidecar_request_fini(&r);
	/* a schema outside the subset: its keyword is the reason given */
	assert_int_equal(parse_request("{\"type\":\"json_schema\","
				       "\"json_schema\":{\"schema\":"
				       "{\"if\":{}}}}",
				       &r, &e),
			 -EINVAL);
	assert_non_null(strstr(e.message, "keyword 'if'"));
	o1_sidecar_request_fini(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_formats),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_request_parser),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

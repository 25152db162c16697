/* libFuzzer harness for the Jinja interpreter: any bytes either fail to
 * parse with a positioned syntax error, or parse into a template that
 * renders (with a chat's variables, under tight limits) to text or to a
 * positioned error, without crashing, hanging or leaking. A template that
 * renders once renders the same text again (no hidden state). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

static const char vars_json[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"  2+2? \\u00e9\\ud83d\\ude80 \"},"
    " {\"role\": \"assistant\", \"content\": \"4\", \"tool_calls\":"
    " [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\":"
    " \"add\", \"arguments\": {\"a\": 2, \"b\": [2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"content\": \"4\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"add\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\":"
    " {\"type\": \"integer\"}}}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\","
    " \"eos_token\": \"</s>\", \"documents\": null}";

static void check_error(const struct o1_jinja_error *e)
{
	if (e->kind == O1_JINJA_OK || !memchr(e->msg, 0, sizeof(e->msg)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static cJSON *vars;
	const struct o1_jinja_limits limits = {
	    .max_output_bytes = 1 << 20,
	    .max_memory_bytes = 16 << 20,
	    .max_steps = 200000,
	};
	const struct o1_jinja_render_opts opts = {
	    .sz = sizeof(opts), .limits = &limits, .now = 1741356309};
	struct o1_jinja_error err;
	struct o1_jinja *t;
	char *a = NULL, *b = NULL;
	size_t alen, blen;
	int ra, rb;

	if (!vars && !(vars = cJSON_Parse(vars_json)))
		abort();
	if (o1_jinja_parse((const char *)data, size, &t, &err)) {
		check_error(&err);
		return 0;
	}
	ra = o1_jinja_render(t, vars, &opts, &a, &alen, &err);
	if (ra)
		check_error(&err);
	rb = o1_jinja_render(t, vars, &opts, &b, &blen, &err);
	/* out of memory aside, the second render repeats the first */
	if (ra != rb || (!ra && (alen != blen || memcmp(a, b, alen))))
		abort();
	free(a);
	free(b);
	o1_jinja_destroy(t);
	return 0;
}

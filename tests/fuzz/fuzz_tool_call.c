/* libFuzzer harness for reading tool calls back from model output: byte 0
 * picks the format, the rest is the output. Whatever the text, reading
 * succeeds; with no call the content is the whole text; every call found
 * has a name and arguments that are a JSON object. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tool_call.h"

static void check(const struct o1_tool_calls *tc, const char *text,
		  size_t len)
{
	if (!tc->content)
		abort();
	if (!tc->n && (strlen(tc->content) != strnlen(text, len) ||
		       memcmp(tc->content, text, strlen(tc->content))))
		abort();
	for (size_t i = 0; i < tc->n; i++) {
		cJSON *a = cJSON_Parse(tc->calls[i].arguments);

		if (!tc->calls[i].name[0] || !cJSON_IsObject(a))
			abort();
		cJSON_Delete(a);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static cJSON *tools;
	struct o1_tool_calls tc;
	const char *text = (const char *)data + 1;

	if (!tools)
		tools = cJSON_Parse(
		    "[{\"function\": {\"name\": \"f\", \"parameters\": "
		    "{\"properties\": {\"n\": {\"type\": \"integer\"}, \"s\": "
		    "{\"type\": \"string\"}, \"o\": {\"type\": \"object\"}}}}}]");
	if (!size)
		return 0;
	if (o1_tool_calls_parse((enum o1_tool_format)(data[0] % O1_TOOL_N),
				text, size - 1, tools, &tc))
		return 0;
	check(&tc, text, size - 1);
	o1_tool_calls_fini(&tc);
	return 0;
}

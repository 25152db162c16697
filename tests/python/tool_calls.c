/* Reads an answer on stdin and prints what o1d's own tool-call reader
 * (tokenizer/tool_call.h) makes of it, as JSON {"content": str, "calls":
 * [[name, arguments, id or null]]}: the reference test_tools.py holds
 * the Python client's reader against. usage: o1_py_tool_calls FORMAT
 * [TOOLS.json] (FORMAT: the wire's number, 0..4). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "tokenizer/tool_call.h"

int main(int argc, char **argv)
{
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof(text), stdin);
	struct o1_tool_calls tc;
	cJSON *tools = NULL, *out, *calls;
	char *s;

	if (argc < 2 || argc > 3)
		return 2;
	if (argc == 3) {
		FILE *f = fopen(argv[2], "rb");
		static char buf[1 << 16];
		size_t m = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[m] = 0;
		tools = cJSON_Parse(buf);
	}
	if (o1_tool_calls_parse((enum o1_tool_format)atoi(argv[1]), text, n,
				tools, &tc))
		return 1;
	out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "content", tc.content);
	calls = cJSON_AddArrayToObject(out, "calls");
	for (size_t i = 0; i < tc.n; i++) {
		cJSON *c = cJSON_CreateArray();

		cJSON_AddItemToArray(c, cJSON_CreateString(tc.calls[i].name));
		cJSON_AddItemToArray(c,
				     cJSON_CreateString(tc.calls[i].arguments));
		cJSON_AddItemToArray(c, tc.calls[i].id
					    ? cJSON_CreateString(tc.calls[i].id)
					    : cJSON_CreateNull());
		cJSON_AddItemToArray(calls, c);
	}
	s = cJSON_PrintUnformatted(out);
	puts(s ? s : "null");
	free(s);
	cJSON_Delete(out);
	cJSON_Delete(tools);
	o1_tool_calls_fini(&tc);
	return 0;
}

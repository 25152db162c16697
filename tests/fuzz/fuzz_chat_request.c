/* libFuzzer harness for chat requests as JSON (tokenizer/chat_request.h)
 * and tool-call grammars (grammar/grammar_tools.h): byte 0 picks the
 * tool-call format, the rest is both a chat request and a tools list.
 * Whatever the text: a request is refused with a message or becomes an
 * object holding messages; a tools list is refused with a message or
 * compiles. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_tools.h"
#include "tokenizer/chat_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct o1_grammar_error err;
	struct o1_grammar *g;
	const char *text = (const char *)data + 1;
	cJSON *vars;
	char msg[160];
	int rc;

	if (!size)
		return 0;
	rc = o1_chat_request_parse(text, size - 1, &vars, msg, sizeof(msg));
	if (rc ? (vars || !msg[0])
	       : !cJSON_IsArray(cJSON_GetObjectItem(vars, "messages")))
		abort();
	cJSON_Delete(vars);
	rc = o1_grammar_compile_tools((enum o1_tool_format)(data[0] % O1_TOOL_N),
				      text, size - 1, &err, &g);
	if (rc ? (g || !err.msg[0]) : !g)
		abort();
	o1_grammar_destroy(g);
	return 0;
}

/* Tool calls in a model's output, read back in the format its chat
 * template taught it, as OpenAI tool_calls (a function name and its
 * arguments as a JSON object's text).
 *
 * Formats (recognised from the template's text, o1_tool_format_detect):
 * - Hermes / Qwen 2.5 / Qwen 3: <tool_call>{"name": ..., "arguments":
 *   {...}}</tool_call>, one block per call.
 * - XML functions (Qwen3-Coder and newer templates): <tool_call>
 *   <function=NAME><parameter=P>value</parameter>...</function>
 *   </tool_call>; values are text, typed by the tool's JSON schema.
 * - Llama 3.x JSON: {"name": ..., "parameters": {...}}, the whole answer
 *   (after an optional <|python_tag|>), calls separated by ";".
 * - Mistral: [TOOL_CALLS] then a JSON list of {"name", "arguments",
 *   "id"?}, or (v11 and later) [TOOL_CALLS]NAME[ARGS]{...} per call.
 *
 * A call that does not parse is not guessed at: the whole output comes
 * back as text with no calls, never an error.
 */
#ifndef O1_TOOL_CALL_H
#define O1_TOOL_CALL_H

#include <stddef.h>

struct cJSON;

enum o1_tool_format {
	O1_TOOL_NONE, /* the template knows no tools: plain text */
	O1_TOOL_HERMES,
	O1_TOOL_XML,
	O1_TOOL_LLAMA3_JSON,
	O1_TOOL_MISTRAL,
	O1_TOOL_N,
};

struct o1_tool_call {
	char *id;	 /* the model's own id (Mistral), or NULL */
	char *name;	 /* never empty */
	char *arguments; /* a JSON object, compact */
};

struct o1_tool_calls {
	/* the text before the first call, less trailing whitespace ("" if
	 * none): text after a call is dropped, as OpenAI's API and vLLM do,
	 * so a stream can send the content as it comes (tools/sidecar) */
	char *content;
	struct o1_tool_call *calls;
	size_t n;
};

/* The format a chat template TMPL (NUL-terminated; NULL: none) writes
 * tool calls in. */
enum o1_tool_format o1_tool_format_detect(const char *tmpl);
/* The marker texts the formats' readers look for (NULL-terminated list):
 * where a vocabulary has one as a control token (Mistral's [TOOL_CALLS],
 * Llama 3's <|python_tag|>), the detokenizer keeps its text for requests
 * with tools (O1_DECODE_KEEP_TOOL_MARKERS), or no call could be read. */
const char *const *o1_tool_format_markers(void);
/* "none", "hermes", "xml", "llama3_json", "mistral"; NULL out of range. */
const char *o1_tool_format_name(enum o1_tool_format f);

/* Reads LEN bytes of TEXT (a model's answer) in format F into *OUT, which
 * the caller frees with o1_tool_calls_fini. TOOLS (the request's OpenAI
 * tools list, may be NULL) types the XML format's parameters. Returns 0
 * or -ENOMEM; text without a well-formed call is all content. */
int o1_tool_calls_parse(enum o1_tool_format f, const char *text, size_t len,
			const struct cJSON *tools, struct o1_tool_calls *out);

/* Frees what parse allocated; accepts a zeroed struct. */
void o1_tool_calls_fini(struct o1_tool_calls *tc);

#endif

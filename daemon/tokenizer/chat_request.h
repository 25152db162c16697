/* A chat request as JSON (wire protocol 6, O1_SUBMIT_CHAT_JSON): the
 * object {"messages": [...], "tools": [...], "tool_choice": ...} that
 * OpenAI's chat API takes, checked and turned into the variables a chat
 * template renders with (chat_template.h's o1_chat_template_render_vars),
 * as transformers and vLLM hand them over:
 *
 * - messages: 1 to O1_CHAT_REQUEST_MAX_MESSAGES objects, each with a
 *   role (a string of 1 to 64 bytes) and content (a string, null, or a
 *   list of parts); an assistant message may carry tool_calls instead of
 *   content: at most O1_CHAT_REQUEST_MAX_CALLS [{"id"?, "type"?:
 *   "function", "function": {"name", "arguments"}}], whose arguments
 *   (JSON text, as OpenAI sends them) are given to the template as the
 *   object they encode (templates write them with tojson); a tool
 *   message may carry tool_call_id and name.
 *   Other members are passed through untouched.
 * - tools: 1 to O1_CHAT_REQUEST_MAX_TOOLS OpenAI function tools, passed
 *   as they are (the template reads their name, description and
 *   parameters); tool_choice "none" leaves them out of the rendering.
 * - tool_choice: "none", "auto", "required" or {"type": "function",
 *   "function": {"name": N}} naming one of the tools. It is checked
 *   here but not given to the template: no template reads it, and
 *   transformers passes none (constraining the output to a call is the
 *   grammar's job, grammar_tools.h).
 * Any other top-level member is refused (a misspelt "tool" must not be
 * silently ignored).
 */
#ifndef O1_CHAT_REQUEST_H
#define O1_CHAT_REQUEST_H

#include <stddef.h>

struct cJSON;

#define O1_CHAT_REQUEST_MAX_MESSAGES 64
#define O1_CHAT_REQUEST_MAX_CALLS    64 /* tool_calls of one message */
#define O1_CHAT_REQUEST_MAX_TOOLS    128

/* Parses LEN bytes of TEXT into *VARS (a new cJSON object holding
 * messages and, unless tool_choice is "none", tools; the caller deletes
 * it). Returns 0, -O1_E_FORMAT with MSG (CAP bytes, may be NULL) naming
 * the member at fault ("messages[2].tool_calls[0].function.arguments:
 * not a JSON object"), -O1_E_BOUNDS past the counts above, or -ENOMEM. */
int o1_chat_request_parse(const char *text, size_t len, struct cJSON **vars,
			  char *msg, size_t cap);

#endif

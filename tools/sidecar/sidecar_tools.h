/* OpenAI tool calling in a chat request: `tools`, `tool_choice`,
 * `parallel_tool_calls`, and messages that carry tool calls (assistant
 * `tool_calls`) or their results (role "tool", `tool_call_id`).
 *
 * Such a request goes to o1d as a chat request in JSON (wire protocol 6,
 * O1_FLAG_CHAT_JSON): {"messages", "tools", "tool_choice"}, which the
 * model's own template renders. tool_choice "required" or a named
 * function also sends a tool-call grammar (O1_GRAMMAR_TYPE_TOOL_CALL: the
 * tools the call may use), so the output is a call with valid arguments;
 * "none" keeps the tools out of the prompt and reads no calls back.
 *
 * Checked here (400 naming the parameter): tools is a list of 1 to 128
 * {"type": "function", "function": {"name", "description"?,
 * "parameters"?, "strict"?}}, names of 1 to 64 letters, digits, '_' or
 * '-' (OpenAI's rule), all tools together at most
 * O1_SIDECAR_MAX_TOOLS_BYTES of JSON; tool_choice one of "none", "auto",
 * "required" or {"type": "function", "function": {"name"}} naming a
 * tool, and only with tools; messages' tool_calls a list of {"id",
 * "type": "function", "function": {"name", "arguments"}} whose arguments
 * are JSON text of an object; tool_choice with response_format is
 * refused (two grammars). The deprecated `functions`/`function_call` are
 * refused by name.
 */
#ifndef O1_SIDECAR_TOOLS_H
#define O1_SIDECAR_TOOLS_H

#include <cjson/cJSON.h>

#include "sidecar_request.h"

#define O1_SIDECAR_MAX_TOOLS	   128
#define O1_SIDECAR_MAX_TOOLS_BYTES 32768

/* Reads ROOT's tools and tool_choice and, when the request uses tools or
 * its messages carry tool calls or results, replaces R's packed chat
 * prompt with the JSON form (R->chat_json). Returns 0, -EINVAL (ERR says
 * why) or -ENOMEM. */
int o1_sidecar_tools_parse(const cJSON *root, struct o1_sidecar_request *r,
			   struct o1_sidecar_req_error *err);

#endif

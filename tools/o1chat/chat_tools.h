/* o1chat's tools: --tools FILE (a JSON list of OpenAI function tools) and
 * --tool-choice (auto, none, required or a tool's name) made into the chat
 * request o1d renders with the model's template (libo1client's
 * O1_FLAG_CHAT_JSON: {"messages", "tools", "tool_choice"}) and, for
 * required or a named tool, the tool-call grammar that makes the answer a
 * valid call (O1_GRAMMAR_TYPE_TOOL_CALL). The answer is read back in the
 * format o1d names (o1_client_limits' tool_format) with o1d's own reader
 * (tokenizer/tool_call.h) and printed: the content, then one line per call,
 * "tool_call: NAME ARGUMENTS" (ARGUMENTS a compact JSON object).
 *
 * Checked here, each failure one "o1chat: ..." line: the file is at most
 * 1 MiB of JSON, a list of 1 to 128 {"type": "function", "function":
 * {"name", ...}} with non-empty names; the choice names one of them.
 */
#ifndef O1_CHAT_TOOLS_H
#define O1_CHAT_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct chat_tools {
	char *request; /* the chat request as JSON, NUL-terminated */
	char *grammar; /* the tools a call may use (JSON list), or NULL */
	char *tools;   /* the whole list, compact JSON (for the reader) */
	int read_back; /* the answer is read back as calls (not "none") */
};

/* Loads PATH and CHOICE (NULL: "auto") for PROMPT, a user message.
 * 0, or -EINVAL / -ENOMEM with the reason on stderr. */
int chat_tools_make(const char *path, const char *choice, const char *prompt,
		    struct chat_tools *t);
void chat_tools_fini(struct chat_tools *t);
/* Prints the answer TEXT (LEN bytes) read back in tool FORMAT (enum
 * o1_tool_format_type) to OUT; returns the number of calls, or -ENOMEM. */
int chat_tools_print(const struct chat_tools *t, uint32_t format,
		     const char *text, size_t len, FILE *out);

#endif

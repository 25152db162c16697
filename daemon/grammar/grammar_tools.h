/* Tool calls as a grammar (tool_choice "required" or a named function):
 * every text the grammar accepts is a call, in the model's tool-call
 * format (tokenizer/tool_call.h), of one of the given tools with
 * arguments that the tool's `parameters` JSON Schema validates, and
 * o1_tool_calls_parse reads it back as that call.
 *
 * The grammar takes exactly one call (so a model cannot run on with call
 * after call until max_tokens cuts one short); then only the end of the
 * output is allowed. Formats:
 *   HERMES       <tool_call>\n{"name":"N","arguments":{...}}\n</tool_call>
 *   LLAMA3_JSON  {"name":"N","parameters":{...}}
 *   MISTRAL      [TOOL_CALLS][{"name":"N","arguments":{...}}]
 *   XML          <tool_call>\n<function=N>\n(<parameter=P>\nVALUE\n
 *                </parameter>\n)*</function>\n</tool_call>: the schema's
 *                properties in order, the required ones always; a value
 *                is an enum's member, else text without '<' (the format
 *                carries values as text, so only their presence and
 *                enums are enforced)
 * The JSON formats take the arguments' grammar from the schema compiler
 * (grammar_schema.h), so its keyword subset and refusals apply: a tool
 * whose parameters use a keyword outside it is refused, naming it.
 * `$ref`s inside parameters ("#/...") are read relative to the
 * parameters, as a tool's author wrote them.
 *
 * The markers ([TOOL_CALLS], <tool_call>, </tool_call>) are text, or,
 * given a vocabulary that holds one as a control token (Mistral v3 and
 * later: [TOOL_CALLS]; grammar_tokenizer.h), that single token and never
 * its text spelled out.
 *
 * The tools list is OpenAI's: [{"type": "function", "function": {"name",
 * "description"?, "parameters"?}}, ...], 1 to O1_GRAMMAR_TOOLS_MAX tools,
 * names non-empty and at most 256 bytes; parameters absent means any
 * object.
 */
#ifndef O1_GRAMMAR_TOOLS_H
#define O1_GRAMMAR_TOOLS_H

#include <stddef.h>

#include "grammar/grammar.h"
#include "tokenizer/tool_call.h"

#define O1_GRAMMAR_TOOLS_MAX 128

/* Grammar text for calls of TOOLS (LEN bytes of JSON) in format F into
 * *TEXT (malloc'd, NUL-terminated, *TEXT_LEN bytes). -O1_E_FORMAT for
 * text that is not a tools list (ERR names the tool and field),
 * -O1_E_UNSUPPORTED for O1_TOOL_NONE or a schema keyword outside the
 * subset, the schema compiler's other errors, -ENOMEM. */
int o1_grammar_from_tools(enum o1_tool_format f, const char *tools,
			  size_t len, struct o1_grammar_error *err,
			  char **text, size_t *text_len);

/* The same, compiled. */
int o1_grammar_compile_tools(enum o1_tool_format f, const char *tools,
			     size_t len, struct o1_grammar_error *err,
			     struct o1_grammar **out);

/* Both for vocabulary V (NULL: markers as text, as above): a marker V
 * holds as a control token is that token. V is only read during the
 * call; the grammar is for V alone. */
int o1_grammar_from_tools_for(enum o1_tool_format f, const char *tools,
			      size_t len, const struct o1_grammar_vocab *v,
			      struct o1_grammar_error *err, char **text,
			      size_t *text_len);
int o1_grammar_compile_tools_for(enum o1_tool_format f, const char *tools,
				 size_t len, const struct o1_grammar_vocab *v,
				 struct o1_grammar_error *err,
				 struct o1_grammar **out);

#endif

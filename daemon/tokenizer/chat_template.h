/* Chat templates: the model's own Jinja template (GGUF
 * tokenizer.chat_template, tokenizer_config.json's chat_template or a
 * chat_template.jinja file), or the file model.chat_template names,
 * rendered by the Jinja interpreter (template/jinja.h) as transformers
 * renders it: variables messages, tools, documents, add_generation_prompt,
 * bos_token and eos_token.
 *
 * The rendered prompt holds the special tokens the template writes (BOS
 * included where the template adds it): encode it with
 * O1_ENCODE_PARSE_SPECIAL and without O1_ENCODE_ADD_SPECIAL, as
 * transformers encodes a rendered chat (add_special_tokens=False).
 *
 * The family (chatml, llama3, ...) is recognised from marker strings for
 * what needs to know the format beyond rendering it (tool-call parsing,
 * o1model info); rendering never depends on it.
 */
#ifndef O1_CHAT_TEMPLATE_H
#define O1_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "template/jinja.h"
#include "tokenizer/tool_call.h"

struct cJSON;
struct o1_vocab;
struct o1_chat_template;

enum o1_chat_family {
	O1_CHAT_OTHER,	  /* a template of no family we recognise */
	O1_CHAT_CHATML,	  /* <|im_start|>role\n...<|im_end|> (Qwen) */
	O1_CHAT_LLAMA3,	  /* <|start_header_id|>role<|end_header_id|> */
	O1_CHAT_LLAMA2,	  /* [INST] <<SYS>>...<</SYS>> ... [/INST] */
	O1_CHAT_MISTRAL,  /* [INST] ... [/INST] without <<SYS>> */
	O1_CHAT_GEMMA,	  /* <start_of_turn>role */
	O1_CHAT_PHI3,	  /* <|user|> ... <|end|> */
	O1_CHAT_ZEPHYR,	  /* <|user|> ... </s> */
	O1_CHAT_COMMAND_R, /* <|START_OF_TURN_TOKEN|> */
	O1_CHAT_HARMONY,  /* gpt-oss: <|start|>role<|message|> */
	O1_CHAT_DEEPSEEK, /* <｜User｜> ... <｜Assistant｜> */
	O1_CHAT_N,
};

struct o1_chat_message {
	const char *role;    /* "system", "user", "assistant", ...; borrowed */
	const char *content; /* UTF-8, borrowed */
};

/* The family of template text TMPL (NULL: O1_CHAT_OTHER). */
enum o1_chat_family o1_chat_family_detect(const char *tmpl);
/* "chatml", "llama3", ... "other"; NULL when out of range. */
const char *o1_chat_family_name(enum o1_chat_family f);

/* Parses LEN bytes of Jinja TEXT into *OUT. SOURCE names where the text
 * came from in messages (copied). BOS and EOS are the special tokens' texts
 * the template sees as bos_token and eos_token (copied; NULL: ""). A
 * template that does not parse fails with -O1_E_FORMAT, and ERR (may be
 * NULL) says where and why; -ENOMEM. Nothing is logged. */
int o1_chat_template_create(const char *text, size_t len, const char *source,
			    const char *bos, const char *eos,
			    struct o1_chat_template **out,
			    struct o1_jinja_error *err);

/* The template o1d renders chats with: the file OVERRIDE
 * (model.chat_template) when not NULL or "", else V's own. MODEL_PATH
 * names the model in messages. Returns 0, -O1_E_MISSING when there is no
 * template, -O1_E_FORMAT when it does not parse, or -errno reading
 * OVERRIDE; each failure logged once, naming the file, the line and
 * column, and the config key that overrides it. */
int o1_chat_template_load(const struct o1_vocab *v, const char *model_path,
			  const char *override, struct o1_chat_template **out);

void o1_chat_template_destroy(struct o1_chat_template *ct);

enum o1_chat_family o1_chat_template_family(const struct o1_chat_template *ct);
/* The format the template writes tool calls in (tool_call.h), for reading
 * them back from answers. */
enum o1_tool_format
o1_chat_template_tool_format(const struct o1_chat_template *ct);
/* Where the template came from, as given to create. */
const char *o1_chat_template_source(const struct o1_chat_template *ct);

/* Renders N messages (then the assistant's header when
 * ADD_GENERATION_PROMPT) into OUT, NUL-terminated when CAP > 0. Returns
 * the prompt length (snprintf-style: truncated when >= CAP), -EINVAL for a
 * template error (a message without role or content, a role the template
 * refuses with raise_exception, ...), -O1_E_BOUNDS for a render limit,
 * -ENOMEM; ERR (may be NULL) gets the template's message. */
int o1_chat_template_render(const struct o1_chat_template *ct,
			    const struct o1_chat_message *msgs, size_t n,
			    bool add_generation_prompt, char *out, size_t cap,
			    struct o1_jinja_error *err);

/* Renders with VARS, a JSON object holding messages and optionally tools,
 * documents, add_generation_prompt and any extra variable
 * (enable_thinking, ...); bos_token, eos_token, and tools and documents as
 * none, are added where VARS lacks them. VARS is borrowed. *OUT is
 * malloc'd (the caller frees it). Returns as o1_jinja_render. */
int o1_chat_template_render_vars(const struct o1_chat_template *ct,
				 const struct cJSON *vars, char **out,
				 size_t *len, struct o1_jinja_error *err);

#endif

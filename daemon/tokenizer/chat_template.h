/* Chat templates: the common families built in, chosen by recognising the
 * model's own (Jinja) template text, never by running it.
 *
 * The rendered prompt does not start with BOS: encode it with
 * O1_ENCODE_ADD_SPECIAL (BOS when the vocabulary wants one) and
 * O1_ENCODE_PARSE_SPECIAL (the template's markers are control tokens).
 * Later BOS/EOS inside the prompt (Llama 2, Mistral turns) are written as
 * text and become tokens through PARSE_SPECIAL.
 */
#ifndef O1_CHAT_TEMPLATE_H
#define O1_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

enum o1_chat_family {
	O1_CHAT_CHATML,	 /* <|im_start|>role\n...<|im_end|> (Qwen) */
	O1_CHAT_LLAMA3,	 /* <|start_header_id|>role<|end_header_id|> */
	O1_CHAT_LLAMA2,	 /* <s>[INST] <<SYS>>...<</SYS>> ... [/INST] */
	O1_CHAT_MISTRAL, /* [INST] ... [/INST]...</s>, no <<SYS>> (v0.1/v0.2:
			  * a space before [/INST]) */
	O1_CHAT_N,
};

struct o1_chat_template {
	enum o1_chat_family family;
	/* system prompt the template inserts when the messages have none
	 * (Qwen); static storage, NULL when none */
	const char *default_system;
	/* Llama 3.1+: text that opens a system turn present in every prompt
	 * (knowledge and today's date, the template's fixed fallback date);
	 * static storage, NULL when none */
	const char *system_preamble;
};

struct o1_chat_message {
	const char *role;    /* "system", "user", "assistant"; borrowed */
	const char *content; /* UTF-8, borrowed */
};

/* Picks the family: FAMILY (a name, see o1_chat_template_family_name) when
 * not NULL, else recognised from MODEL_TEMPLATE. Mistral templates without
 * the space before [/INST] (v0.3, Tekken, [SYSTEM_PROMPT]) format turns
 * differently and are not recognised. Fails with
 * -O1_E_UNSUPPORTED for a template it does not recognise or an unknown
 * family name, -O1_E_MISSING when both are NULL; each logged. */
int o1_chat_template_init(struct o1_chat_template *ct,
			  const char *model_template, const char *family);

/* "chatml", "llama3", "llama2", "mistral"; NULL when out of range. */
const char *o1_chat_template_family_name(enum o1_chat_family f);

/* Renders N messages, then the assistant header when
 * ADD_GENERATION_PROMPT, into OUT (NUL-terminated when CAP > 0). Returns
 * the prompt length (snprintf-style: truncated when >= CAP), -EINVAL for a
 * role the family has no place for (logged). */
int o1_chat_template_render(const struct o1_chat_template *ct,
			    const struct o1_chat_message *msgs, size_t n,
			    bool add_generation_prompt, char *out, size_t cap);

#endif

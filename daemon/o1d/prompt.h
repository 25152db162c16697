/* Prompt rendering: a request's prompt as the tokens a sequence starts
 * from, for the scheduler (engine thread only).
 *
 * An id prompt is copied (after a BOS when the request asks for one and
 * the model has one) and every id checked against the vocabulary. A text
 * prompt is encoded; a chat prompt ("role\0content\0role\0content...", or
 * text without a NUL as one user message; with O1_SUBMIT_CHAT_JSON a chat
 * request as JSON, tokenizer/chat_request.h) is rendered with the chat
 * template first (which writes BOS where the model wants one), then
 * encoded with its special tokens parsed and nothing added. A
 * refinement round's chat prompt adds the previous answer (assistant) and
 * the review instruction (user) after the conversation.
 *
 * Every prompt leaves at least one position free: a prompt of max_context
 * tokens or more is -O1_E_CONTEXT. All memory (the rendering buffer, the
 * review text) is allocated at create.
 */
#ifndef O1_PROMPT_H
#define O1_PROMPT_H

#include <stdint.h>

#include "request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#define O1_PROMPT_MAX_MESSAGES 64

struct o1_prompt_opts {
	const struct o1_tokenizer *tok;	     /* borrowed; NULL: ids only */
	const struct o1_chat_template *chat; /* borrowed; NULL: no chat */
	const char *review; /* the review instruction; copied; NULL: ours */
	uint32_t vocab_size;
	uint32_t max_context;	   /* tokens per sequence */
	uint32_t max_prompt_bytes; /* a request's prompt, at most */
	int32_t bos_id;		   /* -1: none */
};

struct o1_prompt;

int o1_prompt_create(const struct o1_prompt_opts *o, struct o1_prompt **out);
/* Accepts NULL. */
void o1_prompt_destroy(struct o1_prompt *p);
/* R's prompt as tokens: writes TOKENS (max_context entries of room) and
 * sets *N on success. PREV: NULL for a request's first round; for a
 * refinement round, the previous answer (NUL-terminated, borrowed for the
 * call). -O1_E_CONTEXT (prompt too long), -O1_E_BOUNDS (an id outside the
 * vocabulary, more than 64 messages, a rendered chat over the buffer),
 * -O1_E_FORMAT (a role without content), -O1_E_UNSUPPORTED (text without
 * a tokenizer, chat without a template), -EINVAL (the chat template
 * failed, raise_exception included; logged with its message),
 * -O1_E_TOKENIZER (no tokens), or the tokenizer's error. */
int o1_prompt_tokenize(struct o1_prompt *p, const struct o1_req *r,
		       const char *prev, int32_t *tokens, uint32_t *n);
/* Why the last o1_prompt_tokenize failed, in words for the client (the
 * chat request's fault, the template's message, no template), or "" when
 * the error code says it all. Valid until the next call. */
const char *o1_prompt_why(const struct o1_prompt *p);

#endif

/* OpenAI response shapes: error bodies, the non-streaming chat.completion
 * and text_completion objects, and streaming chunks (SSE "data: ...\n\n").
 *
 * A struct o1_sidecar_out collects one request's output as events arrive:
 * the text, one entry per generated token when logprobs are asked, the
 * finish reason and the token counts. Every renderer returns a malloc'd
 * NUL-terminated string through an out-parameter (caller frees). */
#ifndef O1_SIDECAR_RESPONSE_H
#define O1_SIDECAR_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <o1/client.h>

#include "sidecar_request.h"

struct o1_sidecar_token {
	char *text; /* owned; the event text that came with the id */
	size_t len;
	uint32_t id;
	float logprob;
	uint32_t n_top;
	uint32_t top_ids[O1_SIDECAR_MAX_TOP_LOGPROBS];
	float top_logprobs[O1_SIDECAR_MAX_TOP_LOGPROBS];
};

struct o1_sidecar_out {
	enum o1_sidecar_kind kind;
	char id[48];
	long long created; /* unix seconds */
	const char *model; /* borrowed for the request */
	bool logprobs;	   /* collect tokens */
	uint32_t n_top;	   /* alternatives kept per token */
	char *text;	   /* owned */
	size_t len, cap;
	struct o1_sidecar_token *tok; /* owned */
	size_t n_tok, cap_tok;
	size_t sent_len, sent_tok; /* what chunks carried so far */
	const char *finish;	   /* static; NULL until the FINAL */
	/* names top_logprobs alternatives (o1_sidecar_vocab_text); NULL:
	 * "<id>" unless it is the sampled token */
	int (*name)(const void *ctx, uint32_t id, char *buf, size_t cap);
	const void *name_ctx;
	uint32_t prompt_tokens, completion_tokens;
};

/* Prepares OUT for a request of REQ's kind served as MODEL (borrowed). */
void o1_sidecar_out_init(struct o1_sidecar_out *out,
			 const struct o1_sidecar_request *req,
			 const char *model);
void o1_sidecar_out_fini(struct o1_sidecar_out *out);
/* Adds a TOKEN, LOGPROBS or FINAL event. Returns 0 or -ENOMEM. */
int o1_sidecar_out_add(struct o1_sidecar_out *out, const struct o1_event *ev);
/* OpenAI's finish_reason for a daemon finish code. */
const char *o1_sidecar_finish_name(enum o1_finish f);

/* {"error":{"message","type","param","code"}}; PARAM and CODE may be NULL
 * (JSON null). */
int o1_sidecar_error_json(const char *message, const char *type,
			  const char *param, const char *code, char **json);
/* The whole non-streaming response. */
int o1_sidecar_full_json(const struct o1_sidecar_out *out, char **json);
/* One SSE event with what arrived since the last chunk (first: the
 * assistant role for chat; with the finish reason once finished), and
 * marks it sent. */
int o1_sidecar_chunk_sse(struct o1_sidecar_out *out, bool first, char **sse);
/* The final usage-only chunk (stream_options.include_usage). */
int o1_sidecar_usage_sse(const struct o1_sidecar_out *out, char **sse);

#endif

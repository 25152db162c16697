/* OpenAI response shapes: error bodies, the non-streaming chat.completion
 * and text_completion objects, and streaming chunks (SSE "data: ...\n\n").
 *
 * A struct o1_sidecar_out collects one request's output as events arrive:
 * the text, one entry per generated token when logprobs are asked, the
 * finish reason and the token counts. A refinement request (refine_steps)
 * also feeds its events to a struct o1_trace: the text and tokens are
 * then those of the current round (reset when a round other than the
 * last ends), so the final answer is the last round's, and the trace
 * (one entry per round, and why the loop stopped) is rendered as
 * "refinement_trace" / "refinement_stop_reason". Every renderer returns a
 * malloc'd NUL-terminated string through an out-parameter (caller frees). */
#ifndef O1_SIDECAR_RESPONSE_H
#define O1_SIDECAR_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <o1/client.h>

#include "sidecar_request.h"
#include "tokenizer/tool_call.h"

struct o1_sidecar_token {
	char *text; /* owned; the event text that came with the id */
	size_t len;
	/* code points of the answer before it, as Python's str counts them
	 * (a character split between tokens is the finishing token's):
	 * /v1/completions' logprobs.text_offset, which clients slice the
	 * text with */
	size_t text_offset;
	uint32_t id;
	float logprob;
	uint32_t n_top;
	uint32_t top_ids[O1_SIDECAR_MAX_TOP_LOGPROBS];
	float top_logprobs[O1_SIDECAR_MAX_TOP_LOGPROBS];
	/* the alternatives' bytes from o1d (TOP_TEXT), owned; NULL until
	 * they came */
	char *top_text[O1_SIDECAR_MAX_TOP_LOGPROBS];
	uint8_t top_len[O1_SIDECAR_MAX_TOP_LOGPROBS];
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
	size_t begun; /* code points begun in text (its lead bytes) */
	struct o1_sidecar_token *tok; /* owned */
	size_t n_tok, cap_tok;
	size_t sent_len, sent_tok; /* what chunks carried so far */
	const char *finish;	   /* static; NULL until the FINAL */
	/* names top_logprobs alternatives o1d sent no text for (a stream
	 * without text); NULL: "<id>" unless it is the sampled token */
	int (*name)(const void *ctx, uint32_t id, char *buf, size_t cap);
	const void *name_ctx;
	uint32_t prompt_tokens, completion_tokens;
	/* from the FINAL: prompt tokens served by the prefix cache, and the
	 * confidence summary of the (last round's) answer */
	uint32_t cached_tokens, conf_tokens;
	float mean_logprob, min_logprob, mean_entropy;
	bool refine;	     /* refine_steps > 0: trace kept */
	bool include_usage;  /* streaming: the usage chunk comes last */
	uint32_t round;	     /* of the text held now */
	uint32_t round_base; /* tokens generated before it (LOGPROBS
			      * positions count from the first round) */
	struct o1_trace trace;
	/* tool calling: with tools (borrowed JSON, NULL: none) the answer
	 * is read back at the FINAL in tool_format's format (the daemon's,
	 * enum o1_tool_format_type); calls found make the message's
	 * tool_calls and finish_reason "tool_calls". Streamed, text streams
	 * as content up to where a call may start, the rest is held */
	const char *tools;
	uint32_t tool_format;
	struct o1_tool_calls calls;
};

/* Prepares OUT for a request of REQ's kind served as MODEL (borrowed). */
void o1_sidecar_out_init(struct o1_sidecar_out *out,
			 const struct o1_sidecar_request *req,
			 const char *model);
void o1_sidecar_out_fini(struct o1_sidecar_out *out);
/* Adds a TOKEN, LOGPROBS, TOP_TEXT, ROUND or FINAL event (a FINAL reads
 * tool calls back when tools are set). Returns 0, -ENOMEM or -EPROTO
 * (refinement events out of order). */
int o1_sidecar_out_add(struct o1_sidecar_out *out, const struct o1_event *ev);
/* OpenAI's finish_reason for a daemon finish code. */
const char *o1_sidecar_finish_name(enum o1_finish f);
/* "refinement_stop_reason" of a daemon stop code: "none", "steps",
 * "confident", "repeat", "limit", "cancelled" or "error". */
const char *o1_sidecar_refine_stop_name(enum o1_refine_stop_reason r);

/* {"error":{"message","type","param","code"}}; PARAM and CODE may be NULL
 * (JSON null). */
int o1_sidecar_error_json(const char *message, const char *type,
			  const char *param, const char *code, char **json);
/* The whole non-streaming response. */
int o1_sidecar_full_json(const struct o1_sidecar_out *out, char **json);
/* Whether a chunk has anything to carry now: with tools, text that may
 * start a call is held until the FINAL reads it back (FIRST: the role
 * chunk is always due). */
bool o1_sidecar_chunk_due(const struct o1_sidecar_out *out, bool first);
/* One SSE event with what arrived since the last chunk (first: the
 * assistant role for chat; with the finish reason and "o1_confidence" once
 * finished), and marks it sent. Refinement chunks carry "o1_round"; the
 * finishing one carries the trace unless a usage chunk follows. */
int o1_sidecar_chunk_sse(struct o1_sidecar_out *out, bool first, char **sse);
/* The final usage-only chunk (stream_options.include_usage), with the
 * trace of a refinement request. */
int o1_sidecar_usage_sse(const struct o1_sidecar_out *out, char **sse);

#endif

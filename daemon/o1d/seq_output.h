/* The output stream of one sequence: every event the scheduler produces
 * into its request's out ring (TOKEN, LOGPROBS, ROUND, FINAL), and the
 * state behind them. Engine thread only; the caller's storage, one per
 * request slot; nothing is allocated.
 *
 * Text: each token's text (incremental detokenizer, whole UTF-8
 * characters) joins the held text; what can no longer be the start of a
 * stop string goes out, cut only at character boundaries, in TOKEN events
 * of at most O1_SEQ_TEXT_PER_EV bytes (the first one carries the token id,
 * its logprob and confidence terms), then the token's alternatives in
 * LOGPROBS events. A stop string ends the stream: its text and what
 * follows are never sent. At the end of the stream everything held goes
 * out, with the detokenizer's leftovers. Control tokens give no text,
 * except the tool-call markers ([TOOL_CALLS], <|python_tag|> ...) in a
 * chat request in JSON (O1_SUBMIT_CHAT_JSON, the form tools come in), so
 * the client can read the calls back.
 *
 * The stream never calls into the scheduler: o1_seq_output_token returns
 * a verdict, GO or ENDED with the wire's finish reason. The sampler's end
 * (enum o1_sampler_end) becomes a finish reason here and nowhere else.
 *
 * Rounds: the stream also keeps what the ROUND and FINAL events report:
 * the confidence summary of the current round (mean and minimum logprob,
 * mean entropy of its tokens), its prompt and cached tokens and start
 * time, the totals over the rounds, the ROUND events sent and the
 * refinement's stop. A refining request's stream keeps the text it sent
 * in the current round (the answer, which refine.c compares and quotes).
 *
 * Invariants: hold[0, n_hold) is decoded text not yet sent;
 * answer[0, n_answer) is the text sent this round (answer_cut: some did
 * not fit); after o1_seq_output_final the stream never touches the
 * request again (req is NULL).
 */
#ifndef O1_SEQ_OUTPUT_H
#define O1_SEQ_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "request.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

#define O1_SEQ_HOLD_BYTES  2048
#define O1_SEQ_TEXT_PER_EV 44 /* text bytes per event, room for a cut */
/* Out ring entries one token may need: its TOKEN events (a full hold
 * released), LOGPROBS, a ROUND and the FINAL's reserve; a request with
 * logprobs and text also its TOP_TEXT (one per alternative at worst). */
#define O1_SEQ_OUT_NEED                                                        \
	(1 + O1_SEQ_HOLD_BYTES / O1_SEQ_TEXT_PER_EV + 1 + 2 +                  \
	 O1_REQ_FINAL_RESERVE)
#define O1_SEQ_OUT_NEED_TOP_TEXT (O1_SEQ_OUT_NEED + O1_WIRE_LOGPROBS_MAX)

enum o1_seq_verdict {
	O1_SEQ_GO,    /* the sequence goes on */
	O1_SEQ_ENDED, /* the stream (or the round) ended: see the reason */
};

/* One sampled token, as the stream takes it. */
struct o1_seq_token {
	const struct o1_sampler_out *smp; /* borrowed for the call */
	uint32_t pos;	  /* its index among the request's tokens */
	bool full;	  /* the context is full after it: ends (LENGTH) */
	bool dev;	  /* its logits row went to a device output area */
	uint32_t dev_seq; /* at this sequence number */
};

struct o1_seq_output {
	struct o1_req *req;		/* borrowed until the FINAL */
	const struct o1_tokenizer *tok; /* borrowed; NULL: no text */
	struct o1_detok detok;
	char hold[O1_SEQ_HOLD_BYTES];
	uint32_t n_hold;
	/* the current round */
	uint32_t round;
	uint32_t n_prompt;     /* its prompt tokens */
	uint32_t cached_round; /* of those, the prefix cache served (the
				* caller sets it at admission) */
	uint64_t round_start_ns;
	double sum_lp, sum_ent; /* over its n_conf tokens */
	float min_lp;
	uint32_t n_conf;
	bool round_sent; /* its ROUND went out */
	/* refining: the text sent this round (answer_cap + 1 bytes, the
	 * caller's; NULL when the scheduler does not refine) */
	char *answer;
	uint32_t n_answer, answer_cap;
	bool keep_answer, answer_cut;
	/* totals over the rounds, for the FINAL */
	uint32_t prompt_total, cached_total, rounds_sent;
	enum o1_refine_stop refine_stop;
};

/* Once per slot: ANSWER (ANSWER_CAP + 1 bytes, NULL when no request may
 * refine) stays the caller's to free; see o1_seq_output_swap_answer. */
void o1_seq_output_init(struct o1_seq_output *o, char *answer,
			uint32_t answer_cap);
/* Starts the stream of request R (round 0, nothing held). TOK: NULL when
 * there is no tokenizer; the request's NO_TEXT flag is honoured here. */
void o1_seq_output_start(struct o1_seq_output *o, struct o1_req *r,
			 const struct o1_tokenizer *tok, uint64_t start_ns);
/* The first round's prompt: N tokens. */
void o1_seq_output_prompt(struct o1_seq_output *o, uint32_t n);
/* Whether the out ring has room for one token's events; a sequence
 * without it is not scheduled (backpressure). */
bool o1_seq_output_room(const struct o1_seq_output *o);
/* Streams T (see the head of this file). Returns GO, or ENDED with
 * *REASON: EOS, a stop id or a stop string (STOP), max_tokens or a full
 * context (LENGTH). An EOS or stop id token's own text is not sent. */
enum o1_seq_verdict o1_seq_output_token(struct o1_seq_output *o,
					const struct o1_seq_token *t,
					enum o1_finish_reason *reason);
/* The confidence summary of the current round (zeros before a token). */
void o1_seq_output_conf(const struct o1_seq_output *o, float *mean_lp,
			float *min_lp, float *mean_ent);
/* The ROUND event of the current round, ended with REASON; its stop is
 * filled by o1_seq_output_push_round. */
void o1_seq_output_round(const struct o1_seq_output *o,
			 enum o1_finish_reason reason, uint64_t now_ns,
			 union o1_wire_entry *ev);
/* Produces EV with STOP (NONE: another round follows). Returns the
 * round's cached prompt tokens when it is a refinement round (> 0), else
 * 0. */
uint32_t o1_seq_output_push_round(struct o1_seq_output *o,
				  union o1_wire_entry *ev,
				  enum o1_refine_stop stop);
/* Hands over the current round's answer (*N bytes, NUL-terminated) and
 * takes EMPTY, a buffer of the same capacity, for the next round. */
char *o1_seq_output_swap_answer(struct o1_seq_output *o, char *empty,
				uint32_t *n);
/* Starts the next round: N prompt tokens, nothing held, a fresh
 * detokenizer and summary. */
void o1_seq_output_next_round(struct o1_seq_output *o, uint32_t n,
			      uint64_t now_ns);
/* Produces the FINAL (the last event; the caller published everything
 * else about the slot before): REASON, ERROR (0 or a negative error). */
/* An ERROR event carrying MSG (cut to the wire's inline message; nothing
 * when MSG is empty) for ERROR, before the FINAL that ends the stream. */
void o1_seq_output_error(struct o1_seq_output *o, int error, const char *msg);
void o1_seq_output_final(struct o1_seq_output *o, enum o1_finish_reason reason,
			 int error);

#endif

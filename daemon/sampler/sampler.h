/* Token sampling for one request: logits processing, a reproducible draw,
 * logprobs, entropy and the stop conditions.
 *
 * Order of processing (each step off at its neutral value):
 *   1. penalties, as vLLM applies them, on a copy of the logits:
 *      repetition (HF and vLLM definition: every token seen in the prompt
 *      or generated so far: l > 0 ? l / r : l * r), then frequency
 *      (l -= f * count of the token among generated tokens), then presence
 *      (l -= p if the token was generated at least once). Frequency and
 *      presence count generated tokens only (vLLM, OpenAI);
 *   2. temperature 0 (or top_k 1): greedy, the highest logit, the lowest
 *      id among ties; otherwise l / T;
 *   3. top-k: the k highest (ties broken by lower id);
 *   4. top-p: in descending order, keep tokens while the mass before them
 *      is < top_p (so the token that crosses top_p stays; at least one);
 *   5. min-p: keep tokens with p >= min_p * p_max;
 *   6. draw one token with probability proportional to exp(l - l_max)
 *      among those kept, with the request's own PRNG (xoshiro256**
 *      seeded through splitmix64 from the seed): same seed, same logits,
 *      same tokens.
 * This is transformers' warper order (temperature, top-k, top-p, min-p).
 * Over the whole vocabulary exp is computed in float (within 2 ulp) and
 * summed in a fixed order, so every machine draws the same tokens; top-k
 * candidates use exp in double.
 *
 * Logprobs and entropy describe the model's own distribution, the
 * log-softmax of the raw logits (before penalties and temperature), like
 * vLLM's default and the OpenAI API: the sampled token's logprob, the
 * entropy in nats, and the n_logprobs most likely tokens. They come from
 * the same passes over the logits as the draw.
 *
 * Stops: EOS (unless ignore_eos), any of stop_ids, or max_tokens generated
 * (the token that triggers the stop is returned with its end).
 *
 * The arithmetic of steps 1-6 and the logprobs lives in kernels/sample.c
 * (o1_sample_rows, sample.h), which a backend may also run where the
 * logits are: the sampler keeps the per-request state (PRNG, generated
 * counts, prompt flags, the distinct tokens seen, stops). A token is
 *   o1_sampler_row     the row: parameters, the uniform U drawn from the
 *                      PRNG (greedy draws none), the penalty list;
 *   o1_sample_rows     here (o1_sampler_sample) or in a backend;
 *   o1_sampler_accept  records the token and says whether it finishes.
 * Every non-greedy token draws exactly one uniform, so a token sampled in
 * a backend's copy of o1_sample_rows leaves the PRNG where
 * o1_sampler_sample would.
 *
 * The sampler allocates at create only (scratch sized for its parameters:
 * a greedy sampler holds no vocabulary-sized candidate array; a grammar
 * constraint brings its mask and a row at o1_sampler_constrain); it is
 * used by one thread at a time, and samplers are independent of each
 * other.
 *
 * Structured output: o1_sampler_constrain gives the sampler the request's
 * grammar matcher (daemon/grammar). Each token is then drawn from the
 * logits with every token the grammar refuses at -inf (the mask, computed
 * by o1_sampler_prepare ahead of time or when the logits arrive), and the
 * drawn token advances the matcher. The row is a masked row of
 * kernels/sample.h, sampled by o1_sampler_sample on the host or, through
 * o1_sampler_row_masked (which hands out the mask with the row), in a
 * backend: the same draws either way (the backend's copy of the
 * arithmetic and the same U). o1_sampler_row refuses a constrained
 * sampler (a caller with no room for the mask samples it on the host).
 * Its logprobs, entropy and alternatives are those of the masked row
 * (over the allowed tokens). An end token the grammar allows (EOS,
 * <|eot_id|> ...) ends the request as EOS does.
 */
#ifndef O1_SAMPLER_H
#define O1_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/sample.h"

#define O1_SAMPLER_MAX_LOGPROBS 20
#define O1_SAMPLER_MAX_STOP_IDS 16

struct o1_sampler_params {
	float temperature;	  /* 0 = greedy */
	uint32_t top_k;		  /* 0 = off */
	float top_p;		  /* 1 (or 0) = off */
	float min_p;		  /* 0 = off */
	float repetition_penalty; /* 1 (or 0) = off */
	float presence_penalty;	  /* 0 = off */
	float frequency_penalty;  /* 0 = off */
	uint64_t seed;
	uint32_t n_logprobs; /* alternatives, <= O1_SAMPLER_MAX_LOGPROBS */
	uint32_t max_tokens; /* 0 = no limit */
	int32_t eos_id;	     /* -1 = none */
	bool ignore_eos;
	uint32_t n_stop_ids;
	int32_t stop_ids[O1_SAMPLER_MAX_STOP_IDS];
};

/* Whether the request goes on after a token. The sampler's own enum:
 * the wire's finish reasons (shm/wire.h, O1_FINISH_*) are another thing,
 * mapped from this one in one place (the scheduler's output stream). */
enum o1_sampler_end {
	O1_SAMPLER_CONTINUE,
	O1_SAMPLER_END_EOS,	/* the model's end of sequence */
	O1_SAMPLER_END_STOP_ID, /* one of stop_ids */
	O1_SAMPLER_END_LENGTH,	/* max_tokens generated */
};

struct o1_sampler_logprob {
	int32_t id;
	float logprob;
};

struct o1_sampler_out {
	int32_t id;
	float logprob;	/* of id, raw distribution */
	float entropy;	/* nats, raw distribution */
	uint32_t n_top; /* = n_logprobs */
	struct o1_sampler_logprob top[O1_SAMPLER_MAX_LOGPROBS]; /* best first */
	enum o1_sampler_end end;
};

struct o1_sampler;
struct o1_grammar_matcher;

/* Fills P with the neutral values (greedy, no penalties, eos -1). */
void o1_sampler_params_init(struct o1_sampler_params *p);
/* -O1_E_CONFIG (logged) for out-of-range parameters: temperature < 0,
 * top_p or min_p outside [0, 1], repetition_penalty < 0, n_logprobs or
 * n_stop_ids too large, vocab 0. */
int o1_sampler_create(const struct o1_sampler_params *p, uint32_t vocab_size,
		      struct o1_sampler **out);
void o1_sampler_destroy(struct o1_sampler *s);
/* Records prompt tokens for the repetition penalty; -O1_E_BOUNDS for an id
 * outside the vocabulary. */
int o1_sampler_add_prompt(struct o1_sampler *s, const int32_t *ids, uint32_t n);
/* Picks the next token from LOGITS (vocab_size floats, not modified),
 * records it as generated and says whether the request is finished:
 * o1_sampler_row, o1_sample_rows, o1_sampler_accept. */
int o1_sampler_sample(struct o1_sampler *s, const float *logits,
		      struct o1_sampler_out *out);
/* The row for the next token, for o1_sample_rows: ROW's pen_off is 0 (the
 * caller sets it to where PENS sits in its array) and its n_pen is
 * *N_PENS, the penalty entries written to PENS (CAP entries of room; none
 * unless a penalty is on; one per distinct token seen, so at most the
 * vocabulary). Draws the row's uniform from the PRNG unless greedy.
 * -ENOSPC when CAP is too small; nothing changes then (no draw). */
int o1_sampler_row(struct o1_sampler *s, struct o1_sample_row *row,
		   struct o1_sample_penalty *pens, uint32_t cap,
		   uint32_t *n_pens);
/* o1_sampler_row for any sampler: a constrained one also writes its next
 * token's mask (computed now unless prepared) to MASK
 * (o1_sample_mask_words(vocab) words) and sets ROW's mask to 1 (the
 * caller sets it to the mask's place in its step); unconstrained, MASK is
 * not touched and ROW's mask is 0. -O1_E_GRAMMAR when the grammar allows
 * no token, -EOPNOTSUPP for a constrained sampler without MASK, -ENOSPC
 * as o1_sampler_row: nothing drawn then. */
int o1_sampler_row_masked(struct o1_sampler *s, struct o1_sample_row *row,
			  struct o1_sample_penalty *pens, uint32_t cap,
			  uint32_t *n_pens, uint32_t *mask);
/* Records R, the sampled result of the last o1_sampler_row, as generated
 * and fills OUT (id, logprob, entropy, top-n, end). -O1_E_BOUNDS
 * (logged) for an id outside the vocabulary or too many alternatives; the
 * token is not recorded then. */
int o1_sampler_accept(struct o1_sampler *s, const struct o1_sample_result *r,
		      struct o1_sampler_out *out);
uint32_t o1_sampler_generated(const struct o1_sampler *s);

/* Constrains the tokens to a grammar: M is the request's matcher at the
 * grammar's start, made with the model's token classes
 * (o1_grammar_tokens); the sampler owns it from here on, also when this
 * fails. From then on o1_sampler_row returns -EOPNOTSUPP (sample on the
 * host), o1_sampler_sample and o1_sampler_accept return -O1_E_GRAMMAR when
 * the grammar allows no token or refuses the one given (nothing recorded
 * then). -EINVAL for a matcher without a vocabulary, -EBUSY when already
 * constrained, -ENOMEM. */
int o1_sampler_constrain(struct o1_sampler *s, struct o1_grammar_matcher *m);
/* Computes the next token's mask now (any thread, e.g. while the device
 * runs the step that makes the logits), so o1_sampler_sample only applies
 * it. 0 when unconstrained or already prepared. */
int o1_sampler_prepare(struct o1_sampler *s);
/* Whether o1_sampler_constrain gave the sampler a grammar. */
bool o1_sampler_constrained(const struct o1_sampler *s);

#endif

/* Token sampling over rows of logits: the contract shared by the CPU
 * reference (sample.c) and its CUDA twin (sample.cu, o1_sample_rows_cuda in
 * kernels_cuda.h), so a backend can sample where the logits are and hand
 * back only ids and logprobs.
 *
 * The arithmetic is daemon/sampler/sampler.h's, steps 1-6 and its
 * logprobs, with two things the sampler keeps per request passed in per
 * row instead: the uniform draw U (the sampler draws it from the request's
 * PRNG, so the PRNG and the seed stay on the host) and the penalty list
 * (every distinct token of the prompt and output, with its generated count
 * and whether it is in the prompt). Per row:
 *   1. penalties on the row's tokens of the penalty list (repetition, then
 *      frequency, then presence, as sampler.h says);
 *   2. greedy when temperature is 0 or top_k is 1: the highest penalised
 *      logit, the lowest id among ties, NaN never wins (all NaN: id 0);
 *      otherwise l / T;
 *   3-5. top-k (ties by lower id), top-p, min-p, as sampler.h says;
 *   6. the draw: with any of top-k, top-p, min-p on, the kept tokens are
 *      walked in descending order (ties by lower id), otherwise every
 *      token in id order; the first token whose running sum of exp(l -
 *      max) exceeds U * (the kept sum) is drawn (the last kept token if
 *      rounding runs past the end).
 * logprob, entropy and the top-n describe the raw row (before penalties
 * and temperature).
 *
 * Token masks (structured output, daemon/grammar): a row whose mask is k
 * >= 1 may draw only the tokens whose bit is set in bitmask k - 1 of the
 * call's MASKS (o1_sample_mask_words(vocab) words each, token t at bit
 * t % 32 of word t / 32, bits past the vocabulary ignored). Such a row is
 * sampled as if its raw logits had every refused token at -inf, before
 * step 1: the penalties, every mode, and the logprob, entropy and top-n,
 * which are then those of the masked row (the distribution over the
 * allowed tokens; a refused token in the top-n has logprob -inf), as the
 * sampler's host path has always reported them. A masked row never
 * answers a refused token: when every allowed logit is -inf or NaN, or a
 * draw's rounding runs past the last allowed token onto weight-0 ones,
 * the answer is the lowest allowed id instead. A mask that allows no
 * token answers id O1_SAMPLE_NO_TOKEN (-1), logprob -inf, entropy 0, no
 * top-n: the caller's typed error (the sampler's -O1_E_GRAMMAR), never a
 * token. Rows with mask 0 read no mask and cost nothing more.
 *
 * The CPU reference is bitwise the sampler's arithmetic (o1_sampler_sample
 * is o1_sample_rows over one row plus the per-request bookkeeping). The
 * CUDA twin sums in another order, so its draw can differ from the
 * reference only where U * kept falls within rounding of a boundary
 * between two tokens; greedy ids and the top-n ids match exactly, logprob
 * and entropy within float rounding.
 */
#ifndef O1_SAMPLE_H
#define O1_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define O1_SAMPLE_MAX_TOP  20
#define O1_SAMPLE_NO_TOKEN (-1) /* a masked row that allows no token */

/* 32-bit words of one token bitmask over VOCAB tokens. */
static inline uint32_t o1_sample_mask_words(uint32_t vocab)
{
	return (vocab + 31) / 32;
}

/* One row's parameters; the same layout on the host and the device. */
struct o1_sample_row {
	double u;		  /* [0, 1), the request's next draw; unused
				   * when greedy */
	float temperature;	  /* 0 = greedy */
	float top_p;		  /* 1 (or 0) = off */
	float min_p;		  /* 0 = off */
	float repetition_penalty; /* 1 (or 0) = off */
	float presence_penalty;	  /* 0 = off */
	float frequency_penalty;  /* 0 = off */
	uint32_t top_k;		  /* 0 = off */
	uint32_t n_logprobs;	  /* <= O1_SAMPLE_MAX_TOP */
	uint32_t pen_off;	  /* first entry in the penalty array */
	uint32_t n_pen;		  /* entries: distinct ids, 0 = none */
	uint32_t mask;		  /* 0 = every token; k: bitmask k - 1 */
	uint32_t reserved;	  /* 0 */
};

/* A token seen by the request, for the penalties. */
struct o1_sample_penalty {
	int32_t id;	    /* in [0, vocab) */
	uint32_t count;	    /* occurrences among generated tokens */
	uint32_t in_prompt; /* 1 if in the prompt */
};

struct o1_sample_result {
	int32_t id;
	float logprob;	/* of id, log-softmax of the raw row */
	float entropy;	/* nats, of the raw row */
	uint32_t n_top; /* = the row's n_logprobs */
	int32_t top_id[O1_SAMPLE_MAX_TOP]; /* best first, lower id on ties */
	float top_logprob[O1_SAMPLE_MAX_TOP];
};

#ifndef __cplusplus
_Static_assert(sizeof(struct o1_sample_row) == 56, "o1_sample_row layout");
_Static_assert(sizeof(struct o1_sample_penalty) == 12,
	       "o1_sample_penalty layout");
_Static_assert(sizeof(struct o1_sample_result) == 176,
	       "o1_sample_result layout");
#endif

/* e^x for x <= 0 exactly as the reference computes it (within 2 ulp of
 * e^x, 0 below -87): for tests that recompute the reference's sums. */
float o1_sample_exp_neg(float x);

/* Bytes of scratch o1_sample_rows needs for rows of VOCAB logits (rows are
 * sampled one after another, the scratch reused). */
size_t o1_sample_scratch_bytes(uint32_t vocab);
/* CPU only: bytes enough for rows with ROW's parameters (u, pen_off and
 * n_pen may differ), at most o1_sample_scratch_bytes(vocab); 0 for a
 * greedy row without penalties. A request's sampler sizes its scratch
 * with it. */
size_t o1_sample_row_scratch_bytes(const struct o1_sample_row *row,
				   uint32_t vocab);

/* OUT (n_rows) from LOGITS (n_rows, vocab) f32, not modified, ROWS
 * (n_rows) and PENS (indexed by each row's pen_off, n_pen). SCRATCH holds
 * o1_sample_scratch_bytes(vocab) bytes (or, when every row has the
 * parameters of one row, its o1_sample_row_scratch_bytes), 64-byte
 * aligned. -EINVAL for
 * parameters sampler.h refuses (temperature < 0, top_p or min_p outside
 * [0, 1], repetition_penalty < 0, n_logprobs too large) or a penalty id
 * outside the vocabulary; nothing is written then. */
int o1_sample_rows(struct o1_sample_result *out, const float *logits,
		   uint32_t n_rows, uint32_t vocab,
		   const struct o1_sample_row *rows,
		   const struct o1_sample_penalty *pens, void *scratch);
/* o1_sample_rows with token masks: MASKS holds N_MASKS bitmasks of
 * o1_sample_mask_words(vocab) words (NULL when N_MASKS is 0); -EINVAL
 * also for a row whose mask is above N_MASKS. o1_sample_rows is this with
 * no masks. */
int o1_sample_rows_masked(struct o1_sample_result *out, const float *logits,
			  uint32_t n_rows, uint32_t vocab,
			  const struct o1_sample_row *rows,
			  const struct o1_sample_penalty *pens,
			  const uint32_t *masks, uint32_t n_masks,
			  void *scratch);

#ifdef __cplusplus
}
#endif

#endif

/* A thin layer over sampler.h for the scheduler: sampler.h and wire.h
 * both name their finish reasons O1_FINISH_*, so no file includes both;
 * this header includes neither. */
#ifndef O1_SAMPLING_H
#define O1_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/sample.h"

#define O1_SAMPLING_TOP_MAX 20

struct o1_sampler;

struct o1_sampling_req {
	float temperature, top_p, min_p;
	float repeat_penalty, presence_penalty, frequency_penalty;
	uint32_t top_k, n_logprobs, max_tokens;
	uint64_t seed;
	int32_t eos_id;
	bool ignore_eos;
	const uint32_t *stop_ids;
	uint32_t n_stop_ids;
};

enum o1_sampling_end {
	O1_SAMPLING_GO,
	O1_SAMPLING_EOS,
	O1_SAMPLING_STOP_ID,
	O1_SAMPLING_LENGTH,
};

struct o1_sampling_out {
	int32_t id;
	float logprob;
	float entropy; /* nats, of the raw distribution */
	uint32_t n_top;
	int32_t top_id[O1_SAMPLING_TOP_MAX];
	float top_lp[O1_SAMPLING_TOP_MAX];
	enum o1_sampling_end end;
};

/* A sampler for one request, with its prompt recorded (penalties). */
int o1_sampling_create(const struct o1_sampling_req *p, uint32_t vocab,
		       const int32_t *prompt, uint32_t n,
		       struct o1_sampler **out);
int o1_sampling_next(struct o1_sampler *s, const float *logits,
		     struct o1_sampling_out *out);
/* Sampling in the backend: the next token's row and penalty entries
 * (o1_sampler_row: -ENOSPC, no draw, when CAP is short), then the
 * backend's result recorded (o1_sampler_accept: -O1_E_BOUNDS for ids
 * outside the vocabulary). */
int o1_sampling_row(struct o1_sampler *s, struct o1_sample_row *row,
		    struct o1_sample_penalty *pens, uint32_t cap, uint32_t *n);
int o1_sampling_accept(struct o1_sampler *s, const struct o1_sample_result *r,
		       struct o1_sampling_out *out);
void o1_sampling_destroy(struct o1_sampler *s);

#endif

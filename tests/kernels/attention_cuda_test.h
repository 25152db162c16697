/* Paged K/V shapes and attention batches shared by the CUDA tests of the
 * kernels that read or write the pool (test_rope_cuda, test_attention_cuda,
 * test_attention_prefill_cuda, test_decode_chain_cuda): the pool's page
 * stride (one more layer follows each page), random bf16-exact K/V in
 * permuted pages, and a launch of either attention kernel on a poisoned
 * output. Failures are cmocka assertions (kernel_cuda_test.h). */
#ifndef O1_ATTENTION_CUDA_TEST_H
#define O1_ATTENTION_CUDA_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/attention.h"

struct kct_kv_shape {
	uint32_t hq, hkv, d, p, n_pages;
	bool aligned; /* page stride a multiple of 8 (the tiled kernel's) */
};

uint64_t kct_page_stride(const struct kct_kv_shape *k);
struct o1_attn_dims kct_kv_dims(const struct kct_kv_shape *k);

/* A batch for attention: per sequence its context length and new rows. */
#define ATT_MAX_SEQS 8

struct kct_att_case {
	struct kct_kv_shape k;
	uint32_t n_seqs, len[ATT_MAX_SEQS], n_new[ATT_MAX_SEQS];
};

struct kct_att_host {
	uint32_t q_off[ATT_MAX_SEQS + 1], start[ATT_MAX_SEQS], *tables;
	uint32_t max_blocks, rows, max_len;
	uint32_t tiled_splits; /* ATT_TILED's splits (0, as filled: its pick) */
	uint32_t tc_splits;    /* ATT_DECODE_TC(2)'s, the same way */
	uint32_t tiled_variant; /* ATT_TILED's (0, as filled: the default) */
	size_t cache;
	float *kc, *vc, *q;
};

/* Which launcher kct_att_gpu calls. */
enum att_path { ATT_AUTO, ATT_ROWS, ATT_TILED, ATT_DECODE_TC, ATT_DECODE_TC2 };

/* Random K/V (bf16-exact) in randomly permuted pages, random q. */
void kct_att_fill(const struct kct_att_case *c, struct kct_att_host *h);

/* Runs PATH (ATT_TILED: o1_attention_tiled_cuda for the sequences with at
 * least MIN_NEW new tokens, in H's tiled_splits and tiled_variant;
 * ATT_DECODE_TC: o1_attention_decode_tc_cuda in H's tc_splits, leaving
 * alone the rows of sequences with at least MIN_NEW new tokens, 0 for
 * none; ATT_DECODE_TC2 the same with 2 tiles in flight) on poisoned
 * output, with SCRATCH_FLOATS of scratch, the row kernel and its merge
 * (and the tensor-core decode kernel and its merge) with PDL when PDL is
 * set; returns the output. */
float *kct_att_gpu(const struct kct_att_case *c, const struct kct_att_host *h,
		   uint64_t scratch_floats, enum att_path path,
		   uint32_t min_new, bool pdl);

#endif

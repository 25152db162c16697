/* attention.cu: the row kernel with its sequence splits, merged by the
 * last block of each (row, kv head) through the ticket counters, and
 * o1_attention_cuda's dispatch, on fresh random inputs (O1_TEST_SEED or
 * the time), output poisoned with NaN. Exit 77 without a CUDA device;
 * tools/gpu/emu/run_decode.sh runs it on the CPU emulation, where the
 * blocks of a launch run one at a time in a shuffled order (so any block
 * may be the last).
 *
 * Every launch is checked against attention.c (o1_attention_cpu) within
 * |gpu - cpu| <= 8e-3 |cpu| + 1e-3 x the row's largest |cpu| (one bf16
 * rounding of the output, 2^-8 relative, plus the f32 reduction order;
 * outputs are averages of V, near-cancelling ones have no relative
 * accuracy).
 * - test_splits: the same launch repeated gives the same bits (a ticket
 *   left non-zero by a launch would make the next one merge early, from
 *   missing partials), and so does a replay of it captured into a graph;
 *   launches of other split counts and row counts in between (sharing the
 *   tickets) stay right too.
 * - test_attention: o1_attention_cuda in one pass (no scratch) and split
 *   along the sequence (32 splits, launched with PDL) against the CPU,
 *   decode rows and short chunks, grouped and ungrouped heads; each
 *   dispatch also asked for its output quantized (attention_cuda_test.c's
 *   dispatch_q: never where the tiled kernel takes rows, else gemv_q8.c's
 *   bits of the output).
 * - test_attention_errors: bad shapes are refused with -EINVAL.
 * The tiled prefill kernel (attention_prefill.cu) has its own test,
 * test_attention_prefill_cuda.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "attention_cuda_test.h"
#include "kernel_cuda_test.h"
#include "kernels/attention.h"
#include "kernels/kernels_cuda.h"

#define MAX_SEQS    4
#define MAX_LEN_PAD 300 /* launches say MAX_LEN = the longest + this */

/* Heads, kv heads, head dim, page tokens; sequences, their lengths and
 * new rows. */
struct att_case {
	uint32_t hq, hkv, d, p;
	uint32_t n_seqs, len[MAX_SEQS], n_new[MAX_SEQS];
};

/* A case on the host and the device. */
struct att_run {
	struct o1_attn_dims dm;
	struct o1_attn_batch hb, db; /* host and device arrays */
	uint32_t q_off[MAX_SEQS + 1], start[MAX_SEQS], *tables;
	uint32_t rows, max_len, n_pages;
	size_t cache;
	float *kc, *vc, *q, *ref; /* host */
	void *dkc, *dvc, *dq;
};

/* Pages of every sequence, scattered over the pool; random K, V (bf16
 * values) and q; the CPU's output. */
static void run_open(const struct att_case *c, struct att_run *r)
{
	uint32_t used = 0, nb = 0;
	float *scratch;

	r->rows = r->max_len = 0;
	for (uint32_t s = 0; s < c->n_seqs; s++) {
		uint32_t b = (c->len[s] + c->p - 1) / c->p;

		nb = b > nb ? b : nb;
		r->max_len = c->len[s] > r->max_len ? c->len[s] : r->max_len;
		r->q_off[s] = r->rows, r->start[s] = c->len[s] - c->n_new[s];
		r->rows += c->n_new[s];
		used += b;
	}
	r->q_off[c->n_seqs] = r->rows;
	/* tables wide enough for launch()'s longer MAX_LEN */
	nb = (r->max_len + MAX_LEN_PAD + c->p - 1) / c->p;
	r->n_pages = used + 3;
	r->tables = calloc((size_t)c->n_seqs * nb, 4);
	used = 0;
	for (uint32_t s = 0; s < c->n_seqs; s++)
		for (uint32_t b = 0; b * c->p < c->len[s]; b++, used++)
			r->tables[s * nb + b] = (used * 5 + 2) % r->n_pages;
	r->dm = (struct o1_attn_dims){c->hq,
				      c->hkv,
				      c->d,
				      c->p,
				      (uint64_t)c->hkv * c->p * c->d,
				      (float)(1.0 / sqrt(c->d))};
	r->hb = (struct o1_attn_batch){c->n_seqs, r->q_off, r->start, r->tables,
				       nb};
	r->db = (struct o1_attn_batch){
	    c->n_seqs, kct_dev_copy(r->q_off, (c->n_seqs + 1) * 4),
	    kct_dev_copy(r->start, c->n_seqs * 4),
	    kct_dev_copy(r->tables, (size_t)c->n_seqs * nb * 4), nb};
	r->cache = (size_t)r->n_pages * r->dm.page_stride;
	r->kc = kct_randv(r->cache, 2), r->vc = kct_randv(r->cache, 2);
	kct_round_bf16(r->kc, r->cache), kct_round_bf16(r->vc, r->cache);
	r->q = kct_randv((size_t)r->rows * c->hq * c->d, 2);
	r->dkc = kct_dev_bf16(r->kc, r->cache);
	r->dvc = kct_dev_bf16(r->vc, r->cache);
	r->dq = kct_dev_copy(r->q, (size_t)r->rows * c->hq * c->d * 4);
	r->ref = malloc((size_t)r->rows * c->hq * c->d * 4);
	scratch = malloc(o1_attention_scratch_floats(1, r->max_len) * 4);
	assert_int_equal(o1_attention_cpu(NULL, r->ref, r->q, r->kc, r->vc,
					  &r->dm, &r->hb, scratch, r->max_len),
			 0);
	free(scratch);
}

static void run_close(struct att_run *r)
{
	cudaFree((void *)r->db.q_offsets), cudaFree((void *)r->db.start_pos);
	cudaFree((void *)r->db.block_tables);
	cudaFree(r->dkc), cudaFree(r->dvc), cudaFree(r->dq);
	free(r->tables), free(r->kc), free(r->vc), free(r->q), free(r->ref);
}

/* The row kernel over the case with scratch for SPLITS splits and
 * MAX_LEN (>= the longest context: a larger one spreads the splits
 * further), captured into a graph and replayed when GRAPH; the output. */
static uint16_t *launch(const struct att_run *r, uint32_t splits,
			uint32_t max_len, bool graph)
{
	size_t n = (size_t)r->rows * r->dm.n_heads * r->dm.head_dim;
	uint64_t sf = o1_attention_cuda_scratch_floats(r->rows, r->dm.n_heads,
						       r->dm.head_dim, splits);
	float *sc = kct_dev(sf * 4 + 4);
	void *out = kct_dev(n * 2);
	cudaStream_t st = NULL;
	cudaGraph_t g;
	cudaGraphExec_t ge;
	uint16_t *h;

	if (!graph) {
		assert_int_equal(o1_attention_rows_cuda(
				     out, r->dq, r->dkc, r->dvc, &r->dm, &r->db,
				     r->rows, max_len, sc, sf, false, 0),
				 0);
	} else {
		assert_int_equal(cudaStreamCreate(&st), cudaSuccess);
		assert_int_equal(cudaStreamBeginCapture(
				     st, cudaStreamCaptureModeThreadLocal),
				 cudaSuccess);
		assert_int_equal(o1_attention_rows_cuda(
				     out, r->dq, r->dkc, r->dvc, &r->dm, &r->db,
				     r->rows, max_len, sc, sf, false, st),
				 0);
		assert_int_equal(cudaStreamEndCapture(st, &g), cudaSuccess);
		assert_int_equal(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
		for (int i = 0; i < 2; i++)
			assert_int_equal(cudaGraphLaunch(ge, st), cudaSuccess);
		assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
		cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
		cudaStreamDestroy(st);
	}
	h = kct_host_copy(out, n * 2);
	cudaFree(sc), cudaFree(out);
	return h;
}

static void check_cpu(const struct att_run *r, const uint16_t *got)
{
	size_t row_n = (size_t)r->dm.n_heads * r->dm.head_dim;
	float *g = malloc(row_n * 4);

	for (uint32_t t = 0; t < r->rows; t++) {
		const float *ref = r->ref + t * row_n;
		float big = 0;

		for (size_t i = 0; i < row_n; i++) {
			g[i] = kct_f32_of(got[t * row_n + i]);
			big = fabsf(ref[i]) > big ? fabsf(ref[i]) : big;
		}
		kct_check_close("attention", g, ref, row_n, 8e-3, 1e-3 * big);
	}
	free(g);
}

static void check_case(const struct att_case *c)
{
	struct att_run r;
	const uint32_t splits[] = {32, 1, 3, 7};
	uint16_t *first = NULL;
	size_t bytes;

	run_open(c, &r);
	bytes = (size_t)r.rows * c->hq * c->d * 2;
	for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
		for (int rep = 0; rep < 3; rep++) {
			uint16_t *got = launch(
			    &r, splits[i], r.max_len + MAX_LEN_PAD, rep == 2);

			check_cpu(&r, got);
			if (rep)
				assert_memory_equal(got, first, bytes);
			free(first);
			first = got;
		}
	}
	free(first);
	run_close(&r);
}

static void test_splits(void **state)
{
	const struct att_case cases[] = {
	    {14, 2, 64, 16, 1, {200}, {1}},
	    {14, 2, 64, 16, 3, {37, 300, 1}, {1, 1, 1}},
	    {4, 1, 24, 7, 2, {19, 90}, {3, 1}},
	    {32, 8, 128, 16, 1, {700}, {1}},
	    {8, 8, 32, 16, 2, {64, 65}, {1, 2}},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);
}

static void check_attention(const struct kct_att_case *c, uint32_t splits)
{
	struct kct_att_host h;
	struct o1_attn_dims dm = kct_kv_dims(&c->k);
	struct o1_attn_batch b;
	float *ref, *got, *scratch;
	size_t out_n, row_n = (size_t)c->k.hq * c->k.d;

	kct_att_fill(c, &h);
	b = (struct o1_attn_batch){c->n_seqs, h.q_off, h.start, h.tables,
				   h.max_blocks};
	out_n = h.rows * row_n;
	ref = malloc(out_n * 4);
	scratch = malloc(h.max_len * 4);
	assert_int_equal(o1_attention_cpu(NULL, ref, h.q, h.kc, h.vc, &dm, &b,
					  scratch, h.max_len),
			 0);
	got = kct_att_gpu(
	    c, &h,
	    o1_attention_cuda_scratch_floats(h.rows, c->k.hq, c->k.d, splits),
	    ATT_AUTO, 0, splits > 1);
	for (uint32_t r = 0; r < h.rows; r++)
		kct_check_close("attention", got + r * row_n, ref + r * row_n,
				row_n, 8e-3,
				1e-3 * kct_max_abs(ref + r * row_n, row_n));
	free(ref), free(got), free(scratch), free(h.tables), free(h.kc);
	free(h.vc), free(h.q);
}

static void test_attention(void **state)
{
	const struct kct_att_case cases[] = {
	    {{14, 2, 64, 16, 101, false}, 1, {1}, {1}},
	    {{14, 2, 64, 16, 101, false}, 2, {37, 300}, {1, 1}},
	    {{4, 1, 24, 7, 101, false}, 3, {19, 5, 40}, {14, 5, 1}},
	    {{32, 8, 128, 16, 211, false}, 2, {1500, 1800}, {1, 2}},
	    {{8, 8, 32, 3, 799, false}, 1, {700}, {33}},
	    {{32, 1, 256, 16, 71, false}, 1, {600}, {2}},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_attention(&cases[i], 1);	/* one pass, no scratch */
		check_attention(&cases[i], 32); /* split along the sequence */
	}
}

static void test_attention_errors(void **state)
{
	struct o1_attn_dims dm = {6, 4, 64, 16, 4096, 0.125f};
	uint32_t dummy[4] = {0};
	struct o1_attn_batch b = {1, dummy, dummy, dummy, 1};
	void *p = kct_dev(64);

	(void)state;
	/* Hq not a multiple of Hkv; odd head_dim; context past the table */
	assert_int_equal(o1_attention_cuda(p, p, p, p, &dm, &b, 1, 1, NULL, 0,
					   NULL, NULL, false, 0),
			 -EINVAL);
	dm.n_kv_heads = 2, dm.head_dim = 63;
	assert_int_equal(o1_attention_cuda(p, p, p, p, &dm, &b, 1, 1, NULL, 0,
					   NULL, NULL, false, 0),
			 -EINVAL);
	dm.head_dim = 64;
	assert_int_equal(o1_attention_cuda(p, p, p, p, &dm, &b, 1, 17, NULL, 0,
					   NULL, NULL, false, 0),
			 -EINVAL);
	cudaFree(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_splits),
	    cmocka_unit_test(test_attention),
	    cmocka_unit_test(test_attention_errors),
	};

	return kct_main("test_attention_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

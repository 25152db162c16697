/* attention_decode.cu: the decode attention kernel (16-byte K/V loads,
 * D/8 lanes a position, per-row split counts decided on the device) on
 * fresh random inputs (O1_TEST_SEED or the time), output poisoned with
 * NaN, against attention.c (o1_attention_cpu) within
 * |gpu - cpu| <= 8e-3 |cpu| + 1e-3 x the row's largest |cpu| (as
 * test_attention_cuda: one bf16 rounding of the output plus the f32
 * reduction order). Exit 77 without a CUDA device;
 * tools/gpu/emu/run_decode.sh runs it on the CPU emulation, where the
 * blocks of a launch run one at a time in a shuffled order (any block may
 * be the last of a split merge).
 * - test_contexts: contexts 1, 31, 33, 130, 400, 1000 and 8192 at batch 1,
 *   head dims 64 and 128, groups 1, 4 and 7 (qwen2.5-0.5b's 14/2), each
 *   launched as a CUDA graph would be (MAX_LEN far past the context, so
 *   most of the launch's splits have nothing to do) and at MAX_LEN = the
 *   context, with the default tuning and the benchmark's extremes. At
 *   the default a lone row of up to two rounds is one split (130 at head
 *   dim 64: dec_solo), of up to four where a split has under 32 blocks
 *   or the head dim is 64 (400 at head dim 64: two rounds loaded before
 *   the wait, two after), longer ones split; the new position is loaded
 *   after the PDL wait, apart from the earlier ones (a lost reload leaves
 *   its K/V zero: the output is off).
 * - test_batches: 256 sequences of mixed lengths (1 to 300) with the
 *   tensor-core kernel turned off, the same through o1_attention_cuda's
 *   dispatch (which sends its 512 blocks to attention_decode_tc.cu: the same
 *   bits as its direct launch), and a batch with some sequences bringing
 *   several new rows (this kernel; launched for its own longest context,
 *   as a step with prompt rows is: it never replays a graph).
 * - test_spans: the launch shaped by its MAX_LEN's context span
 *   (kernels_cuda.h's O1_ATTN_DECODE_SPAN_*): 4 rows of llama3-8b's heads
 *   (contexts 17-300) through o1_attention_cuda's dispatch, in the first
 *   span (1,024: one head a block), the second (4,096: the rows read 4 x
 *   1,024 x 2 kv heads x 128 x 4 bytes, 4 MiB, at its shortest context:
 *   two heads) and the third (8,192: 16 MiB, two heads) within the row
 *   kernel's bound of the CPU, in the fourth (32,768: 64 MiB) the
 *   tensor-core kernel's bits as its direct launch; then spans given by a
 *   tuning (the backend's): one span runs 32,768 with one head a block,
 *   an end of 16,384 the tensor-core kernel, ends 2,048 and 6,144 two
 *   heads at 8,192 and one at 2,048 (bit for bit those launches tuned).
 * - test_replay: a split launch repeated, and captured into a graph and
 *   replayed, gives the same bits (a ticket left non-zero would merge
 *   early), with launches of other split counts in between; groups wider
 *   than a block's 8 heads (16, 32) and head dims 32 and 256.
 * - test_decode_errors: shapes the kernel does not take are refused with
 *   -EINVAL (o1_attention_cuda sends them to the old row kernel:
 *   test_attention_cuda's unaligned pages), as is a quantized output off
 *   its 16-byte alignment.
 * Every launch but the tensor-core kernel's direct one also asks for the
 * output quantized as the O product's input (o1_attn_out_q): where the
 * row kernel ran (always with the tensor cores off) it is gemv_q8.c's
 * o1_q8_input_cpu of the bf16 output bit for bit, and where it did not
 * (the dispatch's tensor-core batches) the buffer is untouched
 * (check_out_q).
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

#include "kernel_cuda_test.h"
#include "kernels/attention.h"
#include "kernels/gemv_q8.h"
#include "kernels/kernels_cuda.h"

#define PAGE	   16
#define GRAPH_LEN  32768 /* a graph's MAX_LEN: the longest context served */
#define MAX_SPLITS 32	 /* the CUDA backend's scratch (ATT_SPLITS_MAX) */

/* Heads, kv heads, head dim; per sequence its context and new rows. */
struct dec_case {
	uint32_t hq, hkv, d, n_seqs;
	const uint32_t *len, *n_new;
};

struct dec_run {
	struct o1_attn_dims dm;
	struct o1_attn_batch db; /* device arrays */
	uint32_t rows, max_len, max_blocks;
	size_t cache, out_n;
	float *ref;
	void *dkc, *dvc, *dq;
};

/* Random bf16 K/V in pages scattered over the pool (8 more elements
 * between pages: rows stay 16-byte aligned, pages are not contiguous),
 * random q, the CPU's output. */
static void run_open(const struct dec_case *c, struct dec_run *r)
{
	uint32_t *q_off = calloc(c->n_seqs + 1, 4),
		 *start = calloc(c->n_seqs, 4);
	uint32_t *tables, used = 0, pages = 0, nb;
	struct o1_attn_batch hb;
	float *kc, *vc, *q, *scratch;

	r->rows = r->max_len = 0;
	for (uint32_t s = 0; s < c->n_seqs; s++) {
		q_off[s] = r->rows, start[s] = c->len[s] - c->n_new[s];
		r->rows += c->n_new[s];
		r->max_len = c->len[s] > r->max_len ? c->len[s] : r->max_len;
		pages += (c->len[s] + PAGE - 1) / PAGE;
	}
	q_off[c->n_seqs] = r->rows;
	/* tables wide enough for a graph's MAX_LEN */
	nb = r->max_blocks = GRAPH_LEN / PAGE;
	tables = calloc((size_t)c->n_seqs * nb, 4);
	pages += 3;
	pages += pages % 5 == 0; /* (used * 5 + 2) % pages: a permutation */
	for (uint32_t s = 0; s < c->n_seqs; s++)
		for (uint32_t b = 0; b * PAGE < c->len[s]; b++, used++)
			tables[(size_t)s * nb + b] = (used * 5 + 2) % pages;
	r->dm = (struct o1_attn_dims){c->hq,
				      c->hkv,
				      c->d,
				      PAGE,
				      (uint64_t)c->hkv * PAGE * c->d + 8,
				      (float)(1.0 / sqrt(c->d))};
	r->cache = (size_t)pages * r->dm.page_stride;
	kc = kct_randv(r->cache, 2), vc = kct_randv(r->cache, 2);
	kct_round_bf16(kc, r->cache), kct_round_bf16(vc, r->cache);
	r->out_n = (size_t)r->rows * c->hq * c->d;
	q = kct_randv(r->out_n, 2);
	hb = (struct o1_attn_batch){c->n_seqs, q_off, start, tables, nb};
	r->ref = malloc(r->out_n * 4);
	scratch = malloc(o1_attention_scratch_floats(1, r->max_len) * 4);
	assert_int_equal(o1_attention_cpu(NULL, r->ref, q, kc, vc, &r->dm, &hb,
					  scratch, r->max_len),
			 0);
	r->db = (struct o1_attn_batch){
	    c->n_seqs, kct_dev_copy(q_off, (c->n_seqs + 1) * 4),
	    kct_dev_copy(start, c->n_seqs * 4),
	    kct_dev_copy(tables, (size_t)c->n_seqs * nb * 4), nb};
	r->dkc = kct_dev_bf16(kc, r->cache),
	r->dvc = kct_dev_bf16(vc, r->cache);
	r->dq = kct_dev_copy(q, r->out_n * 4);
	free(scratch), free(q_off), free(start), free(tables);
	free(kc), free(vc), free(q);
}

static void run_close(struct dec_run *r)
{
	cudaFree((void *)r->db.q_offsets), cudaFree((void *)r->db.start_pos);
	cudaFree((void *)r->db.block_tables);
	cudaFree(r->dkc), cudaFree(r->dvc), cudaFree(r->dq);
	free(r->ref);
}

enum dec_path { DECODE, DISPATCH, GRAPH, TENSOR_CORES };

/* The quantized output OQ (o1_attn_out_q's Q, poisoned with 0xff before
 * the launch) against OUT's rows (bf16) quantized by gemv_q8.c: where
 * WRITTEN bitwise o1_q8_input_cpu's, but for the pieces of units past a
 * row's last (pad: never written), else untouched. */
static void check_out_q(const struct dec_run *r, const uint16_t *out,
			const void *oq, bool written)
{
	uint32_t k = r->dm.n_heads * r->dm.head_dim, units = k / 32;
	uint32_t pad = (units + 31) / 32 * 32;
	size_t bytes = o1_q8_input_bytes(r->rows, k);
	uint8_t *got = kct_host_copy(oq, bytes), *want = malloc(bytes);

	if (written) {
		assert_int_equal(o1_q8_input_cpu(want, out, r->rows, k), 0);
		for (uint32_t i = 0; i < r->rows; i++)
			for (uint32_t u = units; u < pad; u++)
				for (int h = 0; h < 2; h++)
					memset(want + ((size_t)i * pad * 2 +
						       u / 32 * 64 + h * 32 +
						       u % 32) *
							  16,
					       0xff, 16);
	} else {
		memset(want, 0xff, bytes);
	}
	assert_memory_equal(got, want, bytes);
	free(got), free(want);
}

/* One launch over the case (PATH: the kernel alone, o1_attention_cuda, or
 * the kernel captured into a graph and replayed twice) with scratch for
 * MAX_SPLITS splits, asked for the quantized output too (check_out_q:
 * written by the row kernel wherever it runs, so whenever the tensor
 * cores are off); the output (bf16 bits). */
static uint16_t *launch(const struct dec_run *r, uint32_t max_len,
			const struct o1_attn_decode_tune *tune,
			enum dec_path path)
{
	uint64_t sf = o1_attention_cuda_scratch_floats(
	    r->rows, r->dm.n_heads, r->dm.head_dim, MAX_SPLITS);
	float *sc = kct_dev(sf * 4);
	void *out = kct_dev(r->out_n * 2);
	size_t qb = o1_q8_input_bytes(r->rows, r->dm.n_heads * r->dm.head_dim);
	struct o1_attn_out_q oq = {kct_dev(qb), true};
	cudaStream_t st = NULL;
	cudaGraph_t g;
	cudaGraphExec_t ge;
	uint16_t *h;

	assert_int_equal(cudaMemset(oq.q, 0xff, qb), cudaSuccess);
	if (path == DISPATCH) {
		assert_int_equal(o1_attention_cuda(out, r->dq, r->dkc, r->dvc,
						   &r->dm, &r->db, r->rows,
						   max_len, sc, sf, tune, &oq,
						   true, kct_stream(true)),
				 0);
	} else if (path == TENSOR_CORES) {
		assert_int_equal(o1_attention_decode_tc_cuda(
				     out, r->dq, r->dkc, r->dvc, &r->dm, &r->db,
				     r->rows, max_len, 0, sc, sf, UINT32_MAX, 0,
				     false, 0),
				 0);
		oq.written = false;
	} else if (path == DECODE) {
		assert_int_equal(
		    o1_attention_decode_cuda(out, r->dq, r->dkc, r->dvc, &r->dm,
					     &r->db, r->rows, max_len, sc, sf,
					     UINT32_MAX, tune, &oq, false, 0),
		    0);
	} else {
		assert_int_equal(cudaStreamCreate(&st), cudaSuccess);
		assert_int_equal(cudaStreamBeginCapture(
				     st, cudaStreamCaptureModeThreadLocal),
				 cudaSuccess);
		assert_int_equal(
		    o1_attention_decode_cuda(out, r->dq, r->dkc, r->dvc, &r->dm,
					     &r->db, r->rows, max_len, sc, sf,
					     UINT32_MAX, tune, &oq, false, st),
		    0);
		assert_int_equal(cudaStreamEndCapture(st, &g), cudaSuccess);
		assert_int_equal(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
		for (int i = 0; i < 2; i++)
			assert_int_equal(cudaGraphLaunch(ge, st), cudaSuccess);
		assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
		cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
		cudaStreamDestroy(st);
	}
	h = kct_host_copy(out, r->out_n * 2);
	if (tune && tune->tc == O1_ATTN_TC_OFF)
		assert_true(oq.written);
	check_out_q(r, h, oq.q, oq.written);
	cudaFree(sc), cudaFree(out), cudaFree(oq.q);
	return h;
}

static void check_cpu(const struct dec_run *r, const uint16_t *got)
{
	size_t row_n = (size_t)r->dm.n_heads * r->dm.head_dim;
	float *g = malloc(row_n * 4);

	for (uint32_t t = 0; t < r->rows; t++) {
		const float *ref = r->ref + t * row_n;

		for (size_t i = 0; i < row_n; i++)
			g[i] = kct_f32_of(got[t * row_n + i]);
		kct_check_close("attention (decode)", g, ref, row_n, 8e-3,
				1e-3 * kct_max_abs(ref, row_n));
	}
	free(g);
}

/* The case with each tuning of TUNES at MAX_LEN = its longest context and
 * at a graph's; every output against the CPU. */
static void check_case(const struct dec_case *c,
		       const struct o1_attn_decode_tune *tunes, size_t n_tunes)
{
	struct dec_run r;

	run_open(c, &r);
	for (size_t i = 0; i < n_tunes; i++) {
		uint16_t *a = launch(&r, r.max_len, &tunes[i], DECODE);
		uint16_t *b = launch(&r, GRAPH_LEN, &tunes[i], DECODE);

		check_cpu(&r, a), check_cpu(&r, b);
		free(a), free(b);
	}
	run_close(&r);
}

static void test_contexts(void **state)
{
	static const uint32_t lens[] = {1, 31, 33, 130, 400, 1000, 8192};
	static const uint32_t shapes[][3] = {
	    {14, 2, 64}, {32, 8, 128}, {8, 8, 64}, {8, 2, 128}, {7, 1, 128}};
	const struct o1_attn_decode_tune tunes[] = {
	    {.tc = O1_ATTN_TC_OFF},
	    {.warps = 1,
	     .split_rounds = 1,
	     .target_blocks = 8,
	     .heads = 2,
	     .tc = O1_ATTN_TC_OFF},
	    {.warps = 8, .split_rounds = 4, .flat = true, .tc = O1_ATTN_TC_OFF},
	    {.warps = 2,
	     .split_rounds = 2,
	     .target_blocks = 100000,
	     .heads = 4,
	     .flat = true,
	     .tc = O1_ATTN_TC_OFF},
	    {.few_blocks = 264, .tc = O1_ATTN_TC_OFF}};
	const uint32_t one = 1;

	(void)state;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]);
		     k++) {
			struct dec_case c = {shapes[k][0], shapes[k][1],
					     shapes[k][2], 1,
					     &lens[i],	   &one};

			/* the longest contexts with the default tuning only */
			check_case(&c, tunes, lens[i] > 1000 ? 1 : 5);
		}
}

static void test_batches(void **state)
{
	uint32_t len[256], n_new[256];
	const struct o1_attn_decode_tune tunes[] = {{.tc = O1_ATTN_TC_OFF},
						    {.warps = 4,
						     .split_rounds = 1,
						     .target_blocks = 4096,
						     .heads = 4,
						     .flat = true,
						     .tc = O1_ATTN_TC_OFF}};
	struct dec_case c = {14, 2, 64, 256, len, n_new};
	struct dec_run r;
	uint16_t *got, *tc;

	(void)state;
	for (uint32_t s = 0; s < 256; s++)
		len[s] = 1 + (s * 37) % 300, n_new[s] = 1;
	check_case(&c, tunes, 2);
	c = (struct dec_case){8, 2, 128, 256, len, n_new};
	check_case(&c, tunes, 1);
	/* 512 (row, kv head) blocks: the default sends them to the
	 * tensor-core kernel (test_attention_prefill_cuda checks its
	 * output against its own bound) */
	run_open(&c, &r);
	got = launch(&r, GRAPH_LEN, NULL, DISPATCH);
	tc = launch(&r, GRAPH_LEN, NULL, TENSOR_CORES);
	assert_memory_equal(got, tc, r.out_n * 2);
	free(got), free(tc);
	run_close(&r);
	/* prompt chunks the tiled kernel would not take: several rows */
	for (uint32_t s = 0; s < 5; s++)
		len[s] = 20 + 50 * s, n_new[s] = 1 + 3 * s;
	c = (struct dec_case){14, 2, 64, 5, len, n_new};
	run_open(&c, &r);
	got = launch(&r, r.max_len, NULL, DISPATCH);
	check_cpu(&r, got);
	free(got);
	run_close(&r);
}

static void test_spans(void **state)
{
	static const uint32_t spans[] = {1024, 4096, 8192};
	uint32_t len[4] = {300, 17, 129, 256}, n_new[4] = {1, 1, 1, 1};
	struct dec_case c = {8, 2, 128, 4, len, n_new};
	const struct o1_attn_decode_tune one = {.spans_set = true};
	const struct o1_attn_decode_tune long_end = {
	    .spans_set = true, .n_span_ends = 1, .span_ends = {16384}};
	const struct o1_attn_decode_tune ends = {
	    .spans_set = true, .n_span_ends = 2, .span_ends = {2048, 6144}};
	const struct o1_attn_decode_tune one_head = {.heads = 1,
						     .tc = O1_ATTN_TC_OFF};
	const struct o1_attn_decode_tune two_heads = {.heads = 2,
						      .tc = O1_ATTN_TC_OFF};
	struct dec_run r;
	uint16_t *got, *tc, *want;

	(void)state;
	run_open(&c, &r);
	for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
		got = launch(&r, spans[i], NULL, DISPATCH);
		check_cpu(&r, got);
		free(got);
	}
	got = launch(&r, GRAPH_LEN, NULL, DISPATCH);
	tc = launch(&r, GRAPH_LEN, NULL, TENSOR_CORES);
	assert_memory_equal(got, tc, r.out_n * 2);
	free(got);
	/* spans of a tuning (the backend's graph spans): one span, no end
	 * below GRAPH_LEN, takes the first span's launch (one head a block,
	 * no tensor cores) whatever MAX_LEN; an end of 16,384 below it the
	 * tensor-core kernel again; ends 2,048 and 6,144 make 8,192's span
	 * start at 6,144 (24 MiB: two heads) and 2,048's the first */
	got = launch(&r, GRAPH_LEN, &one, DISPATCH);
	want = launch(&r, GRAPH_LEN, &one_head, DECODE);
	assert_memory_equal(got, want, r.out_n * 2);
	check_cpu(&r, got);
	free(got), free(want);
	got = launch(&r, GRAPH_LEN, &long_end, DISPATCH);
	assert_memory_equal(got, tc, r.out_n * 2);
	free(got);
	got = launch(&r, 8192, &ends, DISPATCH);
	want = launch(&r, 8192, &two_heads, DECODE);
	assert_memory_equal(got, want, r.out_n * 2);
	free(got), free(want);
	got = launch(&r, 2048, &ends, DISPATCH);
	want = launch(&r, 2048, &one_head, DECODE);
	assert_memory_equal(got, want, r.out_n * 2);
	free(got), free(want), free(tc);
	run_close(&r);
}

/* Repeated launches (and graph replays) of one case give the same bits,
 * launches of other split counts in between. */
static void check_replay(const struct dec_case *c)
{
	const struct o1_attn_decode_tune tunes[] = {{.tc = O1_ATTN_TC_OFF},
						    {.warps = 2,
						     .split_rounds = 1,
						     .target_blocks = 4096,
						     .heads = 1,
						     .tc = O1_ATTN_TC_OFF},
						    {.warps = 1,
						     .split_rounds = 3,
						     .target_blocks = 1,
						     .flat = true,
						     .tc = O1_ATTN_TC_OFF},
						    {.warps = 4,
						     .split_rounds = 1,
						     .target_blocks = 64,
						     .heads = 2,
						     .tc = O1_ATTN_TC_OFF},
						    {.warps = 2,
						     .split_rounds = 1,
						     .heads = 4,
						     .flat = true,
						     .tc = O1_ATTN_TC_OFF}};
	struct dec_run r;

	run_open(c, &r);
	for (size_t i = 0; i < sizeof(tunes) / sizeof(tunes[0]); i++) {
		uint16_t *a = launch(&r, GRAPH_LEN, &tunes[i], DECODE);
		uint16_t *b = launch(&r, GRAPH_LEN, &tunes[i], GRAPH);
		uint16_t *d = launch(&r, GRAPH_LEN, &tunes[i], DECODE);

		check_cpu(&r, a);
		assert_memory_equal(a, b, r.out_n * 2);
		assert_memory_equal(a, d, r.out_n * 2);
		free(a), free(b), free(d);
	}
	run_close(&r);
}

static void test_replay(void **state)
{
	static const uint32_t len[] = {700, 37, 1, 300}, n_new[] = {1, 1, 1, 2};
	const struct dec_case cases[] = {
	    {14, 2, 64, 4, len, n_new},	 {32, 2, 128, 2, len, n_new},
	    {32, 1, 64, 1, len, n_new},	 {8, 4, 32, 4, len, n_new},
	    {16, 2, 256, 3, len, n_new},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_replay(&cases[i]);
}

static void test_decode_errors(void **state)
{
	struct o1_attn_dims dm = {8, 2, 96, 16, 2 * 16 * 96, 0.1f};
	uint32_t dummy[4] = {0, 1};
	struct o1_attn_batch b = {1, dummy, dummy, dummy, 1};
	const struct o1_attn_decode_tune nine = {.warps = 9,
						 .tc = O1_ATTN_TC_OFF};
	const struct o1_attn_decode_tune three = {.heads = 3,
						  .tc = O1_ATTN_TC_OFF};
	uint16_t *p = kct_dev(1 << 16);
	float *fq = (float *)p;
	struct o1_attn_out_q odd = {p + 4, true};

	(void)state;
	assert_false(o1_attention_decode_fits(&dm, p, fq, p, p)); /* D 96 */
	assert_int_equal(o1_attention_decode_cuda(p, fq, p, p, &dm, &b, 1, 1,
						  NULL, 0, UINT32_MAX, NULL,
						  NULL, false, 0),
			 -EINVAL);
	dm.head_dim = 64, dm.page_stride = 2 * 16 * 64;
	assert_true(o1_attention_decode_fits(&dm, p, fq, p, p));
	assert_false(o1_attention_decode_fits(&dm, p, fq, p + 4, p));
	assert_false(o1_attention_decode_fits(&dm, p, fq + 2, p, p));
	assert_int_equal(o1_attention_decode_cuda(p, fq, p, p, &dm, &b, 1, 1,
						  NULL, 0, UINT32_MAX, &nine,
						  NULL, false, 0),
			 -EINVAL); /* more warps than a block takes */
	assert_int_equal(o1_attention_decode_cuda(p, fq, p, p, &dm, &b, 1, 1,
						  NULL, 0, UINT32_MAX, &three,
						  NULL, false, 0),
			 -EINVAL); /* heads a block: a power of two */
	assert_int_equal(o1_attention_decode_cuda(p, fq, p, p, &dm, &b, 1, 17,
						  NULL, 0, UINT32_MAX, NULL,
						  NULL, false, 0),
			 -EINVAL); /* context past the table */
	assert_int_equal(o1_attention_decode_cuda(p, fq, p, p, &dm, &b, 1, 1,
						  NULL, 0, UINT32_MAX, NULL,
						  &odd, false, 0),
			 -EINVAL); /* a quantized output off 16 bytes */
	dm.page_stride += 2;	   /* rows no longer 16-byte aligned */
	assert_false(o1_attention_decode_fits(&dm, p, fq, p, p));
	cudaFree(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_contexts),
	    cmocka_unit_test(test_batches),
	    cmocka_unit_test(test_spans),
	    cmocka_unit_test(test_replay),
	    cmocka_unit_test(test_decode_errors),
	};

	return kct_main("test_attention_decode_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

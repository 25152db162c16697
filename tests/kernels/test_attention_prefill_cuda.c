/* attention_prefill.cu, the tiled prefill kernel, alone (unsplit and
 * split along the positions) and behind o1_attention_cuda's dispatch, and
 * attention_decode_tc.cu, the decode rows on tensor cores, unsplit and
 * split (the same
 * rounding, so the same bound; tools/gpu/emu/run_decode.sh emulates both
 * with O1_TEST_QUICK, on the smaller shapes),
 * against attention.c (o1_attention_cpu) on
 * fresh random inputs (O1_TEST_SEED or the time, printed), output
 * poisoned with NaN, K/V slots past each sequence's end poisoned too.
 * Exit 77 without a CUDA device. The tolerance is computed per element
 * from the data (the comment above check_prefill); the references run on
 * a pool of CPU workers.
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
#include <unistd.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "attention_cuda_test.h"
#include "kernel_cuda_test.h"
#include "kernels/attention.h"
#include "kernels/cuda_util.h"
#include "kernels/kernels_cuda.h"
#include "kernels/threads.h"

/* Prefill attention: the tiled kernel (attention_prefill.cu) alone and
 * behind o1_attention_cuda, against o1_attention_cpu. Its rounding: q and
 * the softmax weights are bf16 in the tensor-core products (f32 sums). The
 * tolerance of each element d of (row, head) is computed from the data:
 * o' is attention.h's formula over the bf16-rounded q in double (weights
 * w_j over the row's n positions), u = 2^-8 (bf16's unit roundoff), and
 *   tol_d = |o'_d - ref_d|                              q's rounding
 *         + 1.1 u (|o'_d| + sum_j w_j |v_jd - o'_d|)    weights, output
 *         + 2^-22 (n + D) sum_j w_j |v_jd|              f32 sums
 * The first term is the exact effect of rounding q (what attention.h would
 * give for bf16 q, minus what it gives for f32 q). Rounding each weight by
 * a relative e (|e| <= u) and normalizing by the rounded weights' sum
 * moves the output by sum_j w_j e_j (v_jd - o'_d) / (1 - u) at most
 * (the weights sum to 1 and sum_j w_j (v_jd - o'_d) = 0), hence the
 * second term with the final bf16 rounding of the output; 1.1 covers the
 * f32 scores' own error (D terms, ~1e-5 relative). The last term bounds
 * f32 accumulation over n + D terms (both in the kernel and in the
 * reference). Rows the row kernel serves (o1_attention_cuda's decode rows)
 * meet the same bound with room to spare. */
static struct o1_threads *pool; /* the references' workers */

struct pf_bound {
	const struct kct_att_case *c;
	const struct kct_att_host *h;
	const float *ref;
	float *tol;
};

/* Position J's row of kv head G of sequence S in a host cache. */
static const float *host_kv(const struct kct_att_case *c,
			    const struct kct_att_host *h, const float *cache,
			    uint32_t s, uint32_t g, uint32_t j)
{
	uint32_t page = h->tables[s * h->max_blocks + j / c->k.p];

	return cache + page * kct_page_stride(&c->k) +
	       ((size_t)g * c->k.p + j % c->k.p) * c->k.d;
}

static uint32_t host_seq_of_row(const struct kct_att_host *h, uint32_t n_seqs,
				uint32_t row)
{
	uint32_t s = 0;

	while (s + 1 < n_seqs && h->q_off[s + 1] <= row)
		s++;
	return s;
}

/* o' and the weights w of (row, head) TASK in double (see above). */
static void pf_reference(const struct pf_bound *a, uint32_t row, uint32_t hd,
			 double *w, double *od)
{
	const struct kct_att_case *c = a->c;
	const struct kct_att_host *h = a->h;
	uint32_t d = c->k.d, g = hd / (c->k.hq / c->k.hkv);
	uint32_t s = host_seq_of_row(h, c->n_seqs, row);
	uint32_t n = h->start[s] + row - h->q_off[s] + 1;
	const float *q = h->q + ((size_t)row * c->k.hq + hd) * d;
	double m = -INFINITY, z = 0, scale = 1.0f / sqrtf((float)d);

	for (uint32_t j = 0; j < n; j++) {
		const float *k = host_kv(c, h, h->kc, s, g, j);

		w[j] = 0;
		for (uint32_t i = 0; i < d; i++)
			w[j] += (double)kct_f32_of(kct_bf16_of(q[i])) * k[i];
		w[j] *= scale;
		m = w[j] > m ? w[j] : m;
	}
	for (uint32_t j = 0; j < n; j++)
		w[j] = exp(w[j] - m), z += w[j];
	for (uint32_t i = 0; i < d; i++)
		od[i] = 0;
	for (uint32_t j = 0; j < n; j++) {
		const float *v = host_kv(c, h, h->vc, s, g, j);

		w[j] /= z;
		for (uint32_t i = 0; i < d; i++)
			od[i] += w[j] * v[i];
	}
}

static void pf_bound_task(void *arg, uint32_t task, uint32_t worker)
{
	const struct pf_bound *a = arg;
	const struct kct_att_case *c = a->c;
	uint32_t d = c->k.d, row = task / c->k.hq, hd = task % c->k.hq;
	uint32_t g = hd / (c->k.hq / c->k.hkv);
	uint32_t s = host_seq_of_row(a->h, c->n_seqs, row);
	uint32_t n = a->h->start[s] + row - a->h->q_off[s] + 1;
	double *w = malloc(n * sizeof(double)), *od = malloc(3 * d * 8);
	double *dev = od + d, *mag = od + 2 * d;
	size_t o = (size_t)task * d;

	(void)worker;
	if (!w || !od)
		abort(); /* a worker thread: no cmocka assert here */
	pf_reference(a, row, hd, w, od);
	for (uint32_t i = 0; i < d; i++)
		dev[i] = mag[i] = 0;
	for (uint32_t j = 0; j < n; j++) {
		const float *v = host_kv(c, a->h, a->h->vc, s, g, j);

		for (uint32_t i = 0; i < d; i++) {
			dev[i] += w[j] * fabs(v[i] - od[i]);
			mag[i] += w[j] * fabs(v[i]);
		}
	}
	for (uint32_t i = 0; i < d; i++)
		a->tol[o + i] =
		    (float)(fabs(od[i] - a->ref[o + i]) +
			    1.1 * ldexp(fabs(od[i]) + dev[i], -8) +
			    ldexp((double)n + d, -22) * mag[i] + 1e-30);
	free(w), free(od);
}

/* |got - ref| <= tol over rows [R0, R1) of ROW_N elements. */
static void check_tol(const char *what, const float *got, const float *ref,
		      const float *tol, size_t r0, size_t r1, size_t row_n)
{
	double worst = 0;
	size_t at = r0 * row_n;

	for (size_t i = r0 * row_n; i < r1 * row_n; i++) {
		double e = fabs((double)got[i] - ref[i]) / tol[i];

		if (isnan(e) || e > worst) {
			worst = e, at = i;
			if (isnan(e))
				break;
		}
	}
	if (!(worst <= 1.0))
		fprintf(stderr,
			"%s: row %zu element %zu: gpu %g cpu %g tol %g (%.2f x "
			"tol)\n",
			what, at / row_n, at % row_n, got[at], ref[at], tol[at],
			worst);
	assert_true(worst <= 1.0);
}

/* Slots past each sequence's end in its last page hold NaN: no kernel may
 * read them (the reference does not). */
static void poison_tails(const struct kct_att_case *c, struct kct_att_host *h)
{
	for (uint32_t s = 0; s < c->n_seqs; s++)
		for (uint32_t j = c->len[s]; j % c->k.p; j++)
			for (uint32_t g = 0; g < c->k.hkv; g++)
				for (uint32_t i = 0; i < c->k.d; i++) {
					size_t o = (size_t)(host_kv(c, h, h->kc,
								    s, g, j) -
							    h->kc) +
						   i;

					h->kc[o] = h->vc[o] = NAN;
				}
}

/* The CPU's output *REF (o1_attention_cpu) and each element's tolerance
 * *TOL (the bound above) for case C (malloc'd). */
static void pf_expect(const struct kct_att_case *c,
		      const struct kct_att_host *h, float **ref, float **tol)
{
	struct o1_attn_dims dm = kct_kv_dims(&c->k);
	struct o1_attn_batch b = {c->n_seqs, h->q_off, h->start, h->tables,
				  h->max_blocks};
	size_t out_n = (size_t)h->rows * c->k.hq * c->k.d;
	float *scratch = malloc(
	    o1_attention_scratch_floats(o1_threads_count(pool), h->max_len) *
	    4);

	*ref = malloc(out_n * 4), *tol = malloc(out_n * 4);
	assert_non_null(scratch);
	assert_int_equal(o1_attention_cpu(pool, *ref, h->q, h->kc, h->vc, &dm,
					  &b, scratch, h->max_len),
			 0);
	o1_threads_run(pool, h->rows * c->k.hq, pf_bound_task,
		       &(struct pf_bound){c, h, *ref, *tol});
	free(scratch);
}

/* A case's banner (KIND and its sequences), its host side filled with
 * poisoned tails, and the reference with its per-element tolerance. */
static void pf_case_open(const char *kind, const struct kct_att_case *c,
			 struct kct_att_host *h, float **ref, float **tol)
{
	fprintf(stderr, "%s: Hq %u Hkv %u D %u P %u, new/start:", kind, c->k.hq,
		c->k.hkv, c->k.d, c->k.p);
	for (uint32_t s = 0; s < c->n_seqs; s++)
		fprintf(stderr, " %u/%u", c->n_new[s], c->len[s] - c->n_new[s]);
	fprintf(stderr, "\n");
	kct_att_fill(c, h);
	poison_tails(c, h);
	pf_expect(c, h, ref, tol);
}

static void pf_case_close(struct kct_att_host *h, float *ref, float *tol)
{
	free(ref), free(tol), free(h->tables);
	free(h->kc), free(h->vc), free(h->q);
}

/* A launch that takes only some sequences' rows: those with at least
 * MIN_NEW new tokens (LONG) or with fewer (!LONG) are checked against the
 * bound, the others must still hold the poison. */
static void check_some(const char *what, const struct kct_att_case *c,
		       const struct kct_att_host *h, const float *got,
		       const float *ref, const float *tol, uint32_t min_new,
		       bool long_ones)
{
	size_t row_n = (size_t)c->k.hq * c->k.d;

	for (uint32_t s = 0; s < c->n_seqs; s++) {
		if ((c->n_new[s] >= min_new) == long_ones) {
			check_tol(what, got, ref, tol, h->q_off[s],
				  h->q_off[s + 1], row_n);
			continue;
		}
		for (size_t i = h->q_off[s] * row_n;
		     i < h->q_off[s + 1] * row_n; i++)
			assert_true(isnan(got[i])); /* not written */
	}
}

/* The tiled kernel for every sequence, then for those with at least
 * O1_ATTN_TILED_MIN_NEW new tokens (the other rows stay poisoned), then
 * o1_attention_cuda (the row kernel takes the short ones). */
static void check_prefill(const struct kct_att_case *c)
{
	struct kct_att_host h;
	size_t row_n = (size_t)c->k.hq * c->k.d;
	float *ref, *tol, *got;

	pf_case_open("prefill", c, &h, &ref, &tol);
	got = kct_att_gpu(c, &h, 0, ATT_TILED, 1, false);
	check_tol("attention tiled", got, ref, tol, 0, h.rows, row_n);
	free(got);
	got = kct_att_gpu(c, &h, 0, ATT_TILED, O1_ATTN_TILED_MIN_NEW, false);
	check_some("attention tiled, long sequences", c, &h, got, ref, tol,
		   O1_ATTN_TILED_MIN_NEW, true);
	free(got);
	got = kct_att_gpu(
	    c, &h,
	    o1_attention_cuda_scratch_floats(h.rows, c->k.hq, c->k.d, 32),
	    ATT_AUTO, 0, false);
	check_tol("attention (dispatch)", got, ref, tol, 0, h.rows, row_n);
	free(got);
	pf_case_close(&h, ref, tol);
}

/* The tensor-core decode kernel (attention_decode_tc.cu: the tiled
 * kernel's rounding, so its bound) over every row, with and without PDL
 * and with 2 tiles in flight instead of 3 (the same bits), then leaving
 * the rows of sequences with at least 2 new tokens alone (they stay
 * poisoned). */
static void check_decode_tc(const struct kct_att_case *c)
{
	struct kct_att_host h;
	size_t row_n = (size_t)c->k.hq * c->k.d;
	float *ref, *tol, *got, *pdl;
	uint64_t sf;

	pf_case_open("decode (tensor cores)", c, &h, &ref, &tol);
	sf = o1_attention_cuda_scratch_floats(h.rows, c->k.hq, c->k.d, 32);
	got = kct_att_gpu(c, &h, sf, ATT_DECODE_TC, 0, false);
	check_tol("attention (decode, tensor cores)", got, ref, tol, 0, h.rows,
		  row_n);
	pdl = kct_att_gpu(c, &h, sf, ATT_DECODE_TC, 0, true);
	assert_memory_equal(got, pdl, h.rows * row_n * 4);
	free(pdl);
	pdl = kct_att_gpu(c, &h, sf, ATT_DECODE_TC2, 0, false);
	assert_memory_equal(got, pdl, h.rows * row_n * 4);
	free(got), free(pdl);
	got = kct_att_gpu(c, &h, sf, ATT_DECODE_TC, 2, false);
	check_some("attention (decode, tensor cores), skip 2", c, &h, got, ref,
		   tol, 2, false);
	free(got);
	pf_case_close(&h, ref, tol);
}

/* The tensor-core decode kernel split along the positions: unsplit (1),
 * in SPLITS[] (forced: each row still takes at most one split a
 * O1_ATTN_DECODE_TC_SPLIT_MIN positions; 32 leaves blocks past every
 * row's splits) and its own pick, against the bound; rows of at most
 * O1_ATTN_DECODE_TC_SPLIT_MIN positions (one split) the same bits as
 * unsplit; with PDL the same bits, and with 2 tiles in flight in forced
 * splits (the pick counts the blocks shared memory lets in); then
 * leaving the rows of sequences with at least 2 new tokens alone. */
static void check_decode_tc_splits(const struct kct_att_case *c)
{
	static const uint32_t splits[] = {2, 3, 5, 32, 0};
	struct kct_att_host h;
	size_t row_n = (size_t)c->k.hq * c->k.d;
	float *ref, *tol, *one, *got, *again;
	uint64_t sf;

	pf_case_open("decode (tensor cores), split", c, &h, &ref, &tol);
	sf = o1_attention_cuda_scratch_floats(h.rows, c->k.hq, c->k.d, 32);
	h.tc_splits = 1;
	one = kct_att_gpu(c, &h, 0, ATT_DECODE_TC, 0, false);
	check_tol("attention (decode, tensor cores), 1 split", one, ref, tol, 0,
		  h.rows, row_n);
	for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
		char what[80];

		snprintf(what, sizeof(what),
			 "attention (decode, tensor cores), %u splits",
			 splits[i]);
		h.tc_splits = splits[i];
		got = kct_att_gpu(c, &h, sf, ATT_DECODE_TC, 0, false);
		check_tol(what, got, ref, tol, 0, h.rows, row_n);
		for (uint32_t s = 0; s < c->n_seqs; s++)
			for (uint32_t r = h.q_off[s]; r < h.q_off[s + 1]; r++)
				if (h.start[s] + r - h.q_off[s] + 1 <=
				    O1_ATTN_DECODE_TC_SPLIT_MIN)
					assert_memory_equal(got + r * row_n,
							    one + r * row_n,
							    row_n * 4);
		again = kct_att_gpu(c, &h, sf, ATT_DECODE_TC, 0, true);
		assert_memory_equal(got, again, h.rows * row_n * 4);
		free(again);
		if (splits[i]) { /* (the pick depends on the stages) */
			again =
			    kct_att_gpu(c, &h, sf, ATT_DECODE_TC2, 0, false);
			assert_memory_equal(got, again, h.rows * row_n * 4);
			free(again);
		}
		free(got);
	}
	h.tc_splits = 3;
	got = kct_att_gpu(c, &h, sf, ATT_DECODE_TC, 2, false);
	check_some("attention (decode, tensor cores), split, skip 2", c, &h,
		   got, ref, tol, 2, false);
	free(got), free(one);
	pf_case_close(&h, ref, tol);
}

/* A case of SHAPE with the given new tokens and earlier context per
 * sequence; the pool gets an odd page count prime to 7 (the page
 * permutation of kct_att_fill). */
static struct kct_att_case prefill_case(struct kct_kv_shape shape,
					uint32_t n_seqs, const uint32_t *n_new,
					const uint32_t *start)
{
	struct kct_att_case c = {.k = shape, .n_seqs = n_seqs};
	uint32_t pages = 2;

	for (uint32_t s = 0; s < n_seqs; s++) {
		c.n_new[s] = n_new[s];
		c.len[s] = start[s] + n_new[s];
		pages += (c.len[s] + shape.p - 1) / shape.p;
	}
	while (pages % 2 == 0 || pages % 7 == 0)
		pages++;
	c.k.n_pages = pages;
	c.k.aligned = true;
	return c;
}

/* Chunk lengths 1..300 (tile edges for every G: 64 pairs a block, 64
 * positions a K/V tile), 8 sequences a batch, without and with earlier
 * context, page sizes 16, 7 and 5, G = 7, 1, 4 and head_dim 64 and 128. */
static void test_attention_prefill_sweep(void **state)
{
	static const uint32_t lens[] = {1,   2,	  3,   5,   7,	 8,  9,	 15,
					16,  17,  31,  33,  63,	 64, 65, 100,
					127, 129, 200, 255, 257, 300};
	const struct kct_kv_shape shapes[] = {
	    {14, 2, 64, 16, 0, true},
	    {8, 8, 64, 7, 0, true},
	    {32, 8, 128, 16, 0, true},
	    {28, 4, 128, 5, 0, true},
	};
	uint32_t n = sizeof(lens) / sizeof(lens[0]);

	(void)state;
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
		for (uint32_t i = 0; i < n; i += ATT_MAX_SEQS) {
			uint32_t m =
			    n - i < ATT_MAX_SEQS ? n - i : ATT_MAX_SEQS;
			uint32_t zero[ATT_MAX_SEQS] = {0}, ctx[ATT_MAX_SEQS];
			struct kct_att_case c;

			for (uint32_t s = 0; s < m; s++)
				ctx[s] = ((i + s) * 53 + 11) % 400 + 1;
			c = prefill_case(shapes[k], m, lens + i, zero);
			check_prefill(&c);
			c = prefill_case(shapes[k], m, lens + i, ctx);
			check_prefill(&c);
		}
}

/* 512- and 2048-token chunks in the presets' shapes (qwen2.5-0.5b 14/2
 * heads of 64, llama3.2-1b 32/8 of 64, llama3-8b 32/8 of 128), from
 * position 0 and after earlier context; then one step mixing a chunk,
 * decode rows and short chunks. */
static void test_attention_prefill_long(void **state)
{
	const struct kct_kv_shape qwen = {14, 2, 64, 16, 0, true},
				  l1b = {32, 8, 64, 16, 0, true},
				  l8b = {32, 8, 128, 16, 0, true};
	const struct {
		struct kct_kv_shape k;
		uint32_t n_new, start;
	} one[] = {
	    {qwen, 512, 0},  {l1b, 512, 300},  {l8b, 512, 0},  {l8b, 512, 129},
	    {qwen, 2048, 0}, {qwen, 2048, 77}, {l1b, 2048, 0}, {l8b, 2048, 300},
	};
	const uint32_t mix_new[] = {512, 1, 1, 20, 15, 16, 1, 1};
	const uint32_t mix_start[] = {40, 700, 3, 0, 33, 1, 0, 64};
	struct kct_att_case c;

	(void)state;
	for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++) {
		c = prefill_case(one[i].k, 1, &one[i].n_new, &one[i].start);
		check_prefill(&c);
	}
	c = prefill_case(qwen, 8, mix_new, mix_start);
	check_prefill(&c);
}

/* The tiled kernel split along the positions (partials merged by its
 * second launch), against the same bound, in SPLITS[] splits (past the
 * K/V tile count some splits are empty; a split past a row's position
 * holds none of its positions), each other variant unsplit and in 3,
 * then through the dispatch (its pick, with a scratch for 32). */
static void check_splits(const struct kct_att_case *c)
{
	static const uint32_t splits[] = {1, 2, 3, 7, 32};
	static const uint32_t some[] = {1, 3};
	struct kct_att_host h;
	size_t row_n = (size_t)c->k.hq * c->k.d;
	float *ref, *tol, *got;
	uint64_t sf;

	pf_case_open("prefill, split", c, &h, &ref, &tol);
	sf = o1_attention_cuda_scratch_floats(h.rows, c->k.hq, c->k.d, 32);
	for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
		char what[64];

		snprintf(what, sizeof(what), "attention tiled, %u splits",
			 splits[i]);
		h.tiled_splits = splits[i];
		got = kct_att_gpu(c, &h, sf, ATT_TILED, 1, false);
		check_tol(what, got, ref, tol, 0, h.rows, row_n);
		free(got);
	}
	for (uint32_t v = 1; v < O1_ATTN_PF_VARIANTS; v++)
		for (size_t i = 0; i < sizeof(some) / sizeof(some[0]); i++) {
			char what[64];

			snprintf(what, sizeof(what),
				 "attention tiled, variant %u, %u splits", v,
				 some[i]);
			h.tiled_variant = v, h.tiled_splits = some[i];
			got = kct_att_gpu(c, &h, sf, ATT_TILED, 1, false);
			check_tol(what, got, ref, tol, 0, h.rows, row_n);
			free(got);
		}
	h.tiled_splits = 0, h.tiled_variant = 0;
	got = kct_att_gpu(c, &h, sf, ATT_AUTO, 0, false);
	check_tol("attention (dispatch), split", got, ref, tol, 0, h.rows,
		  row_n);
	free(got);
	pf_case_close(&h, ref, tol);
}

/* Short chunks over long contexts (issue 17's stall case: a few tiles of
 * pairs walking many K/V tiles), where the kernel splits: one 16-row
 * chunk of llama3-8b's shape at 700 positions, chunks beside decode rows
 * and short chunks, G = 7 over 5-token pages; the larger ones on the
 * device only (O1_TEST_QUICK: the CPU emulation's time). */
static void test_attention_prefill_splits(void **state)
{
	const struct kct_kv_shape qwen = {14, 2, 64, 16, 0, true},
				  l8b = {32, 8, 128, 16, 0, true},
				  g7 = {28, 4, 128, 5, 0, true};
	const struct {
		struct kct_kv_shape k;
		uint32_t n_seqs, n_new[3], start[3];
		bool big;
	} cases[] = {
	    {l8b, 1, {16}, {700}, false},
	    {qwen, 3, {40, 1, 17}, {300, 90, 250}, false},
	    {g7, 1, {20}, {130}, false},
	    {l8b, 3, {64, 1, 3}, {2000, 50, 900}, true},
	    {qwen, 2, {40, 17}, {1500, 3000}, true},
	    {g7, 2, {20, 9}, {1000, 333}, true},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kct_att_case c;

		if (cases[i].big && kct_quick())
			continue;
		c = prefill_case(cases[i].k, cases[i].n_seqs, cases[i].n_new,
				 cases[i].start);
		check_splits(&c);
	}
}

/* The tensor-core decode kernel: contexts at the tile edges (64
 * positions a tile, 16 a warp) and past three tiles in flight, sequences
 * bringing 1 to 3 new rows, groups of 1, 4, 7 and 16 query heads, head
 * dims 64 and 128, page sizes 16, 7 and 5. */
static void test_attention_decode_tc(void **state)
{
	static const uint32_t starts[][ATT_MAX_SEQS] = {
	    {0, 14, 15, 16, 47, 63, 64, 65},
	    {127, 128, 191, 192, 193, 255, 400, 1000},
	};
	static const uint32_t n_new[ATT_MAX_SEQS] = {1, 1, 2, 1, 3, 1, 1, 2};
	const struct kct_kv_shape shapes[] = {
	    {14, 2, 64, 16, 0, true}, {32, 8, 128, 16, 0, true},
	    {8, 8, 64, 7, 0, true},   {28, 4, 128, 5, 0, true},
	    {32, 2, 64, 16, 0, true},
	};

	(void)state;
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
		for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]);
		     i++) {
			struct kct_att_case c = prefill_case(
			    shapes[k], ATT_MAX_SEQS, n_new, starts[i]);

			check_decode_tc(&c);
		}
}

/* The tensor-core decode kernel over long contexts (1,500-5,000
 * positions) beside short ones: rows at and just past a split's 1,024
 * positions, a sequence whose two new rows take 2 and 3 splits, 79 tiles
 * in 5 splits (the last one shorter); groups of 7, 4 and 16, head dims
 * 64 and 128, pages of 5. The larger ones on the device only
 * (O1_TEST_QUICK: the CPU emulation's time). */
static void test_attention_decode_tc_splits(void **state)
{
	const struct kct_kv_shape qwen = {14, 2, 64, 16, 0, true},
				  l8b = {32, 8, 128, 16, 0, true},
				  g7 = {28, 4, 128, 5, 0, true},
				  g16 = {32, 2, 64, 16, 0, true};
	const struct {
		struct kct_kv_shape k;
		uint32_t n_seqs, n_new[ATT_MAX_SEQS], start[ATT_MAX_SEQS];
		bool big;
	} cases[] = {
	    {qwen,
	     8,
	     {1, 1, 1, 3, 2, 1, 2, 1},
	     {4999, 1023, 1024, 1500, 2047, 3, 64, 700},
	     false},
	    {l8b, 4, {1, 1, 2, 1}, {3000, 1, 1100, 63}, false},
	    {g7, 4, {1, 2, 1, 1}, {4095, 1600, 10, 2100}, true},
	    {g16, 5, {1, 1, 1, 1, 3}, {5000, 2500, 1024, 1, 1300}, true},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kct_att_case c;

		if (cases[i].big && kct_quick())
			continue;
		c = prefill_case(cases[i].k, cases[i].n_seqs, cases[i].n_new,
				 cases[i].start);
		check_decode_tc_splits(&c);
	}
}

/* A decode batch (one row per sequence) through o1_attention_cuda is the
 * row kernel's launch, bit for bit (the captured decode graphs depend on
 * it); shapes the tiled kernel does not take are refused by it. */
static void test_attention_prefill_edges(void **state)
{
	struct kct_att_case c = {
	    {14, 2, 64, 16, 101, true}, 3, {1, 40, 300}, {1, 1, 1}};
	struct kct_att_host h;
	uint64_t sf = o1_attention_cuda_scratch_floats(3, 14, 64, 32);
	float *a, *b;
	struct o1_attn_dims dm = {8, 2, 96, 16, 2 * 16 * 96, 0.1f};
	uint32_t dummy[4] = {0, 1};
	struct o1_attn_batch bt = {1, dummy, dummy, dummy, 1};
	uint16_t *p = kct_dev(1 << 16);
	float *fq = (float *)p;

	(void)state;
	kct_att_fill(&c, &h);
	a = kct_att_gpu(&c, &h, sf, ATT_AUTO, 0, true); /* PDL: same bits */
	b = kct_att_gpu(&c, &h, sf, ATT_ROWS, 0, false);
	assert_memory_equal(a, b, (size_t)h.rows * 14 * 64 * 4);
	free(a), free(b), free(h.tables), free(h.kc), free(h.vc), free(h.q);
	assert_false(o1_attention_tiled_fits(&dm, p, fq, p, p)); /* D 96 */
	assert_int_equal(o1_attention_tiled_cuda(p, fq, p, p, &dm, &bt, 1, 1, 1,
						 0, NULL, 0, 0),
			 -EINVAL);
	dm.head_dim = 64, dm.page_stride = 2 * 16 * 64;
	assert_true(o1_attention_tiled_fits(&dm, p, fq, p, p));
	dm.scale = 0.0f; /* the lean softmax orders unscaled scores */
	assert_false(o1_attention_tiled_fits(&dm, p, fq, p, p));
	dm.scale = 0.1f;
	assert_int_equal(o1_attention_tiled_variant_cuda(
			     p, fq, p, p, &dm, &bt, 1, 1, 64, 1, NULL, 0,
			     O1_ATTN_PF_VARIANTS, 0),
			 -EINVAL);
	/* more splits than 32, or than the scratch holds */
	assert_int_equal(o1_attention_tiled_cuda(p, fq, p, p, &dm, &bt, 1, 1,
						 64, 33, fq, 1 << 14, 0),
			 -EINVAL);
	assert_int_equal(o1_attention_tiled_cuda(p, fq, p, p, &dm, &bt, 1, 1,
						 64, 2, NULL, 0, 0),
			 -EINVAL);
	assert_int_equal(o1_attention_tiled_cuda(
			     p, fq, p, p, &dm, &bt, 1, 1, 64, 2, fq,
			     o1_attention_cuda_scratch_floats(1, 8, 64, 2) - 1,
			     0),
			 -EINVAL);
	assert_int_equal(o1_attention_tiled_cuda(p, fq, p, p, &dm, &bt, 1, 1,
						 64, 2, fq + 1, 1 << 14, 0),
			 -EINVAL); /* the partials not 8-byte aligned */
	/* the same for the tensor-core decode kernel's splits */
	assert_int_equal(o1_attention_decode_tc_cuda(p, fq, p, p, &dm, &bt, 1,
						     64, 33, fq, 1 << 14,
						     UINT32_MAX, 0, false, 0),
			 -EINVAL);
	assert_int_equal(o1_attention_decode_tc_cuda(p, fq, p, p, &dm, &bt, 1,
						     64, 2, NULL, 0, UINT32_MAX,
						     0, false, 0),
			 -EINVAL);
	assert_int_equal(o1_attention_decode_tc_cuda(
			     p, fq, p, p, &dm, &bt, 1, 64, 2, fq,
			     o1_attention_cuda_scratch_floats(1, 8, 64, 2) - 1,
			     UINT32_MAX, 0, false, 0),
			 -EINVAL);
	assert_int_equal(o1_attention_decode_tc_cuda(p, fq, p, p, &dm, &bt, 1,
						     64, 2, fq + 1, 1 << 14,
						     UINT32_MAX, 0, false, 0),
			 -EINVAL);
	assert_false(o1_attention_tiled_fits(&dm, p, fq, p + 4, p));
	dm.page_stride += 2; /* rows no longer 16-byte aligned */
	assert_false(o1_attention_tiled_fits(&dm, p, fq, p, p));
	assert_int_equal(o1_attention_tiled_cuda(p, fq, p, p, &dm, &bt, 1, 1, 1,
						 0, NULL, 0, 0),
			 -EINVAL);
	cudaFree(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_attention_decode_tc),
	    cmocka_unit_test(test_attention_decode_tc_splits),
	    cmocka_unit_test(test_attention_prefill_edges),
	    cmocka_unit_test(test_attention_prefill_sweep),
	    cmocka_unit_test(test_attention_prefill_long),
	    cmocka_unit_test(test_attention_prefill_splits),
	};
	const struct CMUnitTest quick[] = {
	    cmocka_unit_test(test_attention_decode_tc),
	    cmocka_unit_test(test_attention_decode_tc_splits),
	    cmocka_unit_test(test_attention_prefill_edges),
	    cmocka_unit_test(test_attention_prefill_splits),
	};
	long ncpu;
	int rc;

	if (o1_cuda_probe()) {
		printf(
		    "test_attention_prefill_cuda: no CUDA device, skipped\n");
		return 77;
	}
	kct_seed();
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (o1_threads_create(ncpu < 1	  ? 1
			      : ncpu > 64 ? 64
					  : (uint32_t)ncpu,
			      &pool) != 0)
		return 1;
	/* O1_TEST_QUICK (tools/gpu/emu/run_decode.sh): the tensor-core
	 * kernels at the shapes the CPU emulation runs in minutes */
	rc = kct_quick() ? cmocka_run_group_tests(quick, NULL, NULL)
			 : cmocka_run_group_tests(tests, NULL, NULL);
	o1_threads_destroy(pool);
	return rc;
}

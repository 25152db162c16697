/* Each CUDA kernel against its CPU reference (kernels/<op>.c) on fresh
 * random inputs (the seed is the time unless O1_TEST_SEED is set, and is
 * printed), odd and aligned shapes, every output poisoned with NaN before
 * the launch. Exit 77 without a CUDA device.
 *
 * Tolerances. Exact where the arithmetic is the same: bf16 conversion
 * (round to nearest even, checked bit for bit against a host rounding),
 * embedding gather, argmax, the residual add. Outputs rounded to bf16
 * (rmsnorm, swiglu, attention, the K/V written to the pool) may differ by
 * one bf16 rounding (relative 2^-8 = 3.9e-3 when the f32 values straddle
 * a rounding boundary) plus the f32 reduction-order difference (~1e-6):
 * |gpu - cpu| <= 8e-3 |cpu| + abs, abs = 1e-3 x the row's max |cpu| for
 * attention (outputs are averages of V, near-cancelling ones have no
 * relative accuracy) and 1e-6 elsewhere. f32 outputs computed with the
 * same formula but possibly FMA-contracted by nvcc (RoPE q): 1e-5
 * relative to the row's max. gemv (f32 accumulation of bf16 products):
 * 1e-5 of the sum of |products| against a double-precision product.
 *
 * PDL (programmatic dependent launch) changes when kernels start, never
 * what they compute: launches with it are compared bit for bit with the
 * same launches without it (attention's splits and their merge, and a
 * chain of a decode layer's kernels, eagerly and captured into a graph).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "kernels/attention.h"
#include "kernels/cuda_util.h"
#include "kernels/embedding.h"
#include "common/error.h"
#include "kernels/kernels_cuda.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

static uint64_t rng;
static cudaStream_t blocking; /* a stream that the legacy stream waits for */

/* The stream of a launch with PDL or not: PDL launches go to a stream of
 * their own, ordered with the legacy stream (cudaStreamCreate's default),
 * which the other launches and the copies use. */
static cudaStream_t test_stream(bool pdl)
{
	return pdl ? blocking : 0;
}

static float frand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static float *randv(size_t n, float scale)
{
	float *v = malloc(n * sizeof(float) + 1);

	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = frand() * scale;
	return v;
}

static uint16_t bf16_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return 0x7fc0;
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static float f32_of(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* Rounds V to bf16 in place (the values the device holds). */
static void round_bf16(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = f32_of(bf16_of(v[i]));
}

static void *dev(size_t bytes)
{
	void *p = NULL;

	assert_int_equal(cudaMalloc(&p, bytes ? bytes : 1), cudaSuccess);
	assert_int_equal(cudaMemset(p, 0xff, bytes), cudaSuccess); /* NaN */
	return p;
}

static void *dev_copy(const void *h, size_t bytes)
{
	void *p = dev(bytes);

	assert_int_equal(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice),
			 cudaSuccess);
	return p;
}

static void *dev_bf16(const float *h, size_t n)
{
	uint16_t *b = malloc(n * 2 + 1);
	void *p;

	for (size_t i = 0; i < n; i++)
		b[i] = bf16_of(h[i]);
	p = dev_copy(b, n * 2);
	free(b);
	return p;
}

static void *host_copy(const void *d, size_t bytes)
{
	void *h = malloc(bytes + 1);

	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost),
			 cudaSuccess);
	return h;
}

static float *host_bf16(const void *d, size_t n)
{
	uint16_t *b = host_copy(d, n * 2);
	float *f = malloc(n * sizeof(float) + 1);

	for (size_t i = 0; i < n; i++)
		f[i] = f32_of(b[i]);
	free(b);
	return f;
}

/* |g - c| <= rel |c| + abs for every element; reports the worst. */
static void check_close(const char *what, const float *g, const float *c,
			size_t n, double rel, double abs)
{
	double worst = 0;
	size_t at = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)g[i] - c[i]) / (rel * fabs(c[i]) + abs);

		if (isnan(e) || e > worst) {
			worst = e, at = i;
			if (isnan(e))
				break;
		}
	}
	if (!(worst <= 1.0))
		fprintf(stderr, "%s: element %zu: gpu %g cpu %g (%.2f x tol)\n",
			what, at, g[at], c[at], worst);
	assert_true(worst <= 1.0);
}

static float max_abs(const float *v, size_t n)
{
	float m = 0;

	for (size_t i = 0; i < n; i++)
		m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
	return m;
}

static void test_convert(void **state)
{
	size_t n = 100003;
	float *src = randv(n, 1000), *back;
	float *ds = dev_copy(src, n * 4), *df = dev(n * 4);
	uint16_t *db = dev(n * 2), *hb;

	(void)state;
	src[0] = 0, src[1] = -0.0f, src[2] = INFINITY, src[3] = 1e-40f;
	assert_int_equal(cudaMemcpy(ds, src, 64, cudaMemcpyHostToDevice), 0);
	assert_int_equal(o1_convert_bf16_from_f32_cuda(db, ds, n, 0), 0);
	assert_int_equal(o1_convert_f32_from_bf16_cuda(df, db, n, 0), 0);
	hb = host_copy(db, n * 2);
	back = host_copy(df, n * 4);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(hb[i], bf16_of(src[i]));
		assert_true(back[i] == f32_of(hb[i]));
	}
	assert_int_equal(o1_convert_bf16_from_f32_cuda(NULL, ds, n, 0),
			 -EINVAL);
	free(src), free(back), free(hb);
	cudaFree(ds), cudaFree(df), cudaFree(db);
}

static void check_embedding(uint32_t vocab, uint32_t dim, uint32_t t)
{
	float *table = randv((size_t)vocab * dim, 3), *ref, *got;
	int32_t *ids = malloc(t * 4);
	void *dt, *di, *dout;

	round_bf16(table, (size_t)vocab * dim);
	for (uint32_t i = 0; i < t; i++)
		ids[i] = (int32_t)((frand() + 1) / 2 * (vocab - 1));
	ref = malloc((size_t)t * dim * 4);
	assert_int_equal(o1_embedding_cpu(NULL, ref, table, ids, t, dim, vocab),
			 0);
	dt = dev_bf16(table, (size_t)vocab * dim);
	di = dev_copy(ids, t * 4);
	dout = dev((size_t)t * dim * 4);
	assert_int_equal(o1_embedding_cuda(dout, dt, di, t, dim, vocab, 0), 0);
	got = host_copy(dout, (size_t)t * dim * 4);
	assert_memory_equal(got, ref, (size_t)t * dim * 4);
	free(got);
	ids[0] = (int32_t)vocab; /* out of range: a zero row, no wild read */
	assert_int_equal(cudaMemcpy(di, ids, 4, cudaMemcpyHostToDevice), 0);
	assert_int_equal(o1_embedding_cuda(dout, dt, di, t, dim, vocab, 0), 0);
	got = host_copy(dout, (size_t)dim * 4);
	assert_true(max_abs(got, dim) == 0);
	free(table), free(ids), free(ref), free(got);
	cudaFree(dt), cudaFree(di), cudaFree(dout);
}

static void test_embedding(void **state)
{
	(void)state;
	check_embedding(517, 96, 13);
	check_embedding(4096, 896, 64);
}

/* rmsnorm over the rows ROWS (or all), with a residual added. */
static void check_rmsnorm(uint32_t n, uint32_t dim, bool residual, bool subset)
{
	size_t sz = (size_t)n * dim;
	float *x = randv(sz, 4), *res = randv(sz, 2), *w = randv(dim, 1.5f);
	float *xs = malloc(sz * 4), *ref = malloc(sz * 4), *got, *gx;
	uint32_t *rows = malloc(n * 4), m = subset ? (n + 1) / 2 : n;
	float *dx = dev_copy(x, sz * 4), *dr = dev_copy(res, sz * 4);
	float *dw = dev_copy(w, dim * 4);
	uint32_t *drows;
	void *dout = dev(sz * 2);

	for (uint32_t i = 0; i < n; i++)
		rows[i] =
		    subset ? (i * 7 + 3) % n : i; /* n odd: a permutation */
	drows = dev_copy(rows, n * 4);
	for (size_t i = 0; i < sz; i++)
		x[i] = residual ? x[i] + res[i] : x[i];
	for (uint32_t i = 0; i < m; i++)
		memcpy(xs + (size_t)i * dim, x + (size_t)rows[i] * dim,
		       dim * 4);
	assert_int_equal(o1_rmsnorm_cpu(NULL, ref, xs, w, m, dim, 1e-5f), 0);
	assert_int_equal(o1_rmsnorm_cuda(dout, dx, residual ? dr : NULL, dw,
					 subset ? drows : NULL, m, dim, 1e-5f,
					 false, 0),
			 0);
	got = host_bf16(dout, (size_t)m * dim);
	check_close("rmsnorm", got, ref, (size_t)m * dim, 8e-3, 1e-6);
	gx = host_copy(dx, sz * 4);
	for (uint32_t i = 0; i < m; i++)
		assert_memory_equal(gx + (size_t)rows[i] * dim,
				    x + (size_t)rows[i] * dim, dim * 4);
	free(x), free(res), free(w), free(xs), free(ref), free(got), free(gx);
	free(rows);
	cudaFree(dx), cudaFree(dr), cudaFree(dw), cudaFree(drows);
	cudaFree(dout);
}

static void test_rmsnorm(void **state)
{
	(void)state;
	check_rmsnorm(1, 896, false, false);
	check_rmsnorm(7, 333, true, false);
	check_rmsnorm(33, 4096, true, true);
	check_rmsnorm(5, 64, true, true);
}

static void check_swiglu(uint32_t t, uint32_t f)
{
	size_t sz = (size_t)t * 2 * f;
	float *gu = randv(sz, 6), *ref = malloc((size_t)t * f * 4), *got;
	float *g = malloc((size_t)t * f * 4), *u = malloc((size_t)t * f * 4);
	float *dgu = dev_copy(gu, sz * 4);
	void *dout = dev((size_t)t * f * 2);

	for (uint32_t r = 0; r < t; r++) {
		memcpy(g + (size_t)r * f, gu + (size_t)r * 2 * f, f * 4);
		memcpy(u + (size_t)r * f, gu + (size_t)r * 2 * f + f, f * 4);
	}
	assert_int_equal(o1_swiglu_cpu(NULL, ref, g, u, t, f), 0);
	assert_int_equal(
	    o1_swiglu_cuda(dout, dgu, dgu + f, 2 * f, t, f, false, 0), 0);
	got = host_bf16(dout, (size_t)t * f);
	check_close("swiglu", got, ref, (size_t)t * f, 8e-3, 1e-6);
	assert_int_equal(
	    o1_swiglu_cuda(dout, dgu, dgu + f, f - 1, t, f, false, 0), -EINVAL);
	free(gu), free(ref), free(got), free(g), free(u);
	cudaFree(dgu), cudaFree(dout);
}

static void test_swiglu(void **state)
{
	(void)state;
	check_swiglu(1, 4864);
	check_swiglu(9, 131);
}

static void test_argmax(void **state)
{
	uint32_t rows = 6, vocab = 151936;
	float *l = randv((size_t)rows * vocab, 10);
	int32_t *got;
	float *dl;
	int32_t *di = dev(rows * 4);

	(void)state;
	l[5 * (size_t)vocab + 77] = 50, l[5 * (size_t)vocab + 9] = 50; /* tie */
	l[4 * (size_t)vocab + 3] = NAN;
	dl = dev_copy(l, (size_t)rows * vocab * 4);
	assert_int_equal(o1_argmax_cuda(di, dl, rows, vocab, 0), 0);
	got = host_copy(di, rows * 4);
	for (uint32_t r = 0; r < rows; r++) {
		int32_t best = 0;

		for (uint32_t i = 1; i < vocab; i++)
			if (l[(size_t)r * vocab + i] >
			    l[(size_t)r * vocab + best])
				best = (int32_t)i;
		assert_int_equal(got[r], best);
	}
	assert_int_equal(got[5], 9);
	free(l), free(got);
	cudaFree(dl), cudaFree(di);
}

/* RoPE alone: x (T,H,D) in place. */
static void check_rope(uint32_t t, uint32_t h, uint32_t d, uint32_t r,
		       float scale)
{
	size_t sz = (size_t)t * h * d;
	float *x = randv(sz, 3), *ref = malloc(sz * 4), *inv = malloc(r * 2),
	      *got;
	int32_t *pos = malloc(t * 4);
	struct o1_rope rp = {.theta = 10000, .dim = r};
	float sc, *dx, *dinv;
	int32_t *dpos;

	for (uint32_t i = 0; i < t; i++)
		pos[i] = (int32_t)(i * 37 % 5000);
	assert_int_equal(o1_rope_inv_freq(&rp, NULL, inv, &sc), 0);
	memcpy(ref, x, sz * 4);
	assert_int_equal(o1_rope_cpu(NULL, ref, pos, t, h, d, r, inv, scale),
			 0);
	dx = dev_copy(x, sz * 4), dinv = dev_copy(inv, r / 2 * 4);
	dpos = dev_copy(pos, t * 4);
	assert_int_equal(o1_rope_cuda(dx, dpos, t, h, d, r, dinv, scale, 0), 0);
	got = host_copy(dx, sz * 4);
	check_close("rope", got, ref, sz, 0, 1e-5 * max_abs(ref, sz));
	assert_int_equal(o1_rope_cuda(dx, dpos, t, h, d, r + 1, dinv, 1, 0),
			 -EINVAL);
	free(x), free(ref), free(inv), free(got), free(pos);
	cudaFree(dx), cudaFree(dinv), cudaFree(dpos);
}

static void test_rope(void **state)
{
	(void)state;
	check_rope(1, 14, 64, 64, 1);
	check_rope(11, 3, 24, 16, 1.25f);
	check_rope(40, 32, 128, 128, 1);
}

struct kv_shape {
	uint32_t hq, hkv, d, p, n_pages;
	bool aligned; /* page stride a multiple of 8 (the tiled kernel's) */
};

static uint64_t page_stride(const struct kv_shape *k)
{
	/* another layer follows */
	return (uint64_t)k->hkv * k->p * k->d + (k->aligned ? 8 : 6);
}

static struct o1_attn_dims kv_dims(const struct kv_shape *k)
{
	return (struct o1_attn_dims){k->hq, k->hkv,	    k->d,
				     k->p,  page_stride(k), 1.0f / sqrtf(k->d)};
}

/* Fused QKV epilogue: rope(q + bq); rope(k + bk), v + bv into the pages. */
static void check_rope_kv(const struct kv_shape *k, uint32_t t, bool bias)
{
	struct o1_attn_dims dm = kv_dims(k);
	uint32_t w = (k->hq + 2 * k->hkv) * k->d, qd = k->hq * k->d,
		 kvd = k->hkv * k->d;
	size_t cache = (size_t)k->n_pages * page_stride(k);
	float *qkv = randv((size_t)t * w, 2), *b = randv(w, 1);
	float *q = malloc((size_t)t * qd * 4),
	      *kk = malloc((size_t)t * kvd * 4);
	float *v = malloc((size_t)t * kvd * 4), *inv = malloc(k->d * 2);
	float *kc = malloc(cache * 4), *vc = malloc(cache * 4), *gq, *gk, *gv;
	int32_t *pos = malloc(t * 4);
	uint32_t *slots = malloc(t * 4);
	struct o1_rope rp = {.theta = 1e6f, .dim = k->d};
	float sc;

	for (size_t i = 0; i < cache; i++)
		kc[i] = vc[i] = NAN;
	for (uint32_t i = 0; i < t; i++) {
		pos[i] = (int32_t)(100 + i);
		slots[i] = (i * 5 + 2) % (k->n_pages * k->p);
		for (uint32_t j = 0; j < w; j++) {
			float x = qkv[(size_t)i * w + j] + (bias ? b[j] : 0);

			if (j < qd)
				q[(size_t)i * qd + j] = x;
			else if (j < qd + kvd)
				kk[(size_t)i * kvd + j - qd] = x;
			else
				v[(size_t)i * kvd + j - qd - kvd] = x;
		}
	}
	assert_int_equal(o1_rope_inv_freq(&rp, NULL, inv, &sc), 0);
	o1_rope_cpu(NULL, q, pos, t, k->hq, k->d, k->d, inv, 1);
	o1_rope_cpu(NULL, kk, pos, t, k->hkv, k->d, k->d, inv, 1);
	assert_int_equal(o1_kv_write_cpu(NULL, kc, vc, kk, v, slots, t, &dm),
			 0);
	{
		struct o1_rope_kv_args a = {dev((size_t)t * qd * 4),
					    dev(cache * 2),
					    dev(cache * 2),
					    dev_copy(qkv, (size_t)t * w * 4),
					    bias ? dev_copy(b, w * 4) : NULL,
					    dev_copy(pos, t * 4),
					    dev_copy(slots, t * 4),
					    dev_copy(inv, k->d * 2),
					    1,
					    t,
					    k->d};

		assert_int_equal(o1_rope_kv_write_cuda(&a, &dm, false, 0), 0);
		gq = host_copy(a.q, (size_t)t * qd * 4);
		gk = host_bf16(a.k_cache, cache);
		gv = host_bf16(a.v_cache, cache);
		a.rot_dim = k->d + 2;
		assert_int_equal(o1_rope_kv_write_cuda(&a, &dm, false, 0),
				 -EINVAL);
		cudaFree(a.q), cudaFree(a.k_cache), cudaFree(a.v_cache);
		cudaFree((void *)a.qkv), cudaFree((void *)a.bias);
		cudaFree((void *)a.pos), cudaFree((void *)a.slots);
		cudaFree((void *)a.inv_freq);
	}
	check_close("rope_kv q", gq, q, (size_t)t * qd, 0,
		    1e-5 * max_abs(q, (size_t)t * qd));
	for (size_t i = 0; i < cache; i++) {
		assert_true(isnan(kc[i]) == isnan(gk[i])); /* no stray write */
		assert_true(isnan(vc[i]) == isnan(gv[i]));
		if (!isnan(kc[i])) {
			check_close("rope_kv k", gk + i, kc + i, 1, 8e-3, 1e-5);
			check_close("rope_kv v", gv + i, vc + i, 1, 4e-3,
				    1e-30);
		}
	}
	free(qkv), free(b), free(q), free(kk), free(v), free(inv), free(kc);
	free(vc), free(gq), free(gk), free(gv), free(pos), free(slots);
}

static void test_rope_kv(void **state)
{
	struct kv_shape a = {14, 2, 64, 16, 3, false},
			b = {4, 1, 24, 7, 6, false},
			c = {32, 8, 128, 16, 2, false};

	(void)state;
	check_rope_kv(&a, 9, true);
	check_rope_kv(&b, 13, false);
	check_rope_kv(&c, 1, true);
}

/* A batch for attention: per sequence its context length and new rows. */
#define ATT_MAX_SEQS 8

struct att_case {
	struct kv_shape k;
	uint32_t n_seqs, len[ATT_MAX_SEQS], n_new[ATT_MAX_SEQS];
};

struct att_host {
	uint32_t q_off[ATT_MAX_SEQS + 1], start[ATT_MAX_SEQS], *tables;
	uint32_t max_blocks, rows, max_len;
	size_t cache;
	float *kc, *vc, *q;
};

/* Which launcher gpu_attention calls. */
enum att_path { ATT_AUTO, ATT_ROWS, ATT_TILED };

/* Random K/V (bf16-exact) in randomly permuted pages, random q. */
static void fill_attention(const struct att_case *c, struct att_host *h)
{
	uint32_t used = 0;

	h->max_blocks = 0, h->rows = 0, h->max_len = 0;
	for (uint32_t s = 0; s < c->n_seqs; s++) {
		uint32_t nb = (c->len[s] + c->k.p - 1) / c->k.p;

		h->max_blocks = nb > h->max_blocks ? nb : h->max_blocks;
		h->max_len = c->len[s] > h->max_len ? c->len[s] : h->max_len;
		h->q_off[s] = h->rows;
		h->start[s] = c->len[s] - c->n_new[s];
		h->rows += c->n_new[s];
	}
	h->q_off[c->n_seqs] = h->rows;
	h->tables = calloc((size_t)c->n_seqs * h->max_blocks, 4);
	for (uint32_t s = 0; s < c->n_seqs; s++)
		for (uint32_t b = 0; b * c->k.p < c->len[s]; b++, used++)
			h->tables[s * h->max_blocks + b] =
			    (used * 7 + 1) % c->k.n_pages;
	assert_true(used <= c->k.n_pages && c->k.n_pages % 7 != 0);
	h->cache = (size_t)c->k.n_pages * page_stride(&c->k);
	h->kc = randv(h->cache, 2), h->vc = randv(h->cache, 2);
	round_bf16(h->kc, h->cache), round_bf16(h->vc, h->cache);
	h->q = randv((size_t)h->rows * c->k.hq * c->k.d, 2);
}

/* Runs PATH (ATT_TILED: o1_attention_tiled_cuda for the sequences with at
 * least MIN_NEW new tokens) on poisoned output, the row kernel and its
 * merge with PDL when PDL is set; returns the output. */
static float *gpu_attention(const struct att_case *c, const struct att_host *h,
			    uint64_t scratch_floats, enum att_path path,
			    uint32_t min_new, bool pdl)
{
	struct o1_attn_dims dm = kv_dims(&c->k);
	size_t out_n = (size_t)h->rows * c->k.hq * c->k.d;
	struct o1_attn_batch b = {
	    c->n_seqs, dev_copy(h->q_off, (c->n_seqs + 1) * 4),
	    dev_copy(h->start, c->n_seqs * 4),
	    dev_copy(h->tables, (size_t)c->n_seqs * h->max_blocks * 4),
	    h->max_blocks};
	void *kc = dev_bf16(h->kc, h->cache), *vc = dev_bf16(h->vc, h->cache);
	float *q = dev_copy(h->q, out_n * 4), *sc = dev(scratch_floats * 4);
	void *out = dev(out_n * 2);
	float *got;

	if (path == ATT_TILED)
		assert_int_equal(o1_attention_tiled_cuda(out, q, kc, vc, &dm,
							 &b, h->rows, min_new,
							 0),
				 0);
	else
		assert_int_equal((path == ATT_ROWS ? o1_attention_rows_cuda
						   : o1_attention_cuda)(
				     out, q, kc, vc, &dm, &b, h->rows,
				     h->max_len, sc, scratch_floats, pdl,
				     test_stream(pdl)),
				 0);
	got = host_bf16(out, out_n);
	cudaFree((void *)b.q_offsets), cudaFree((void *)b.start_pos);
	cudaFree((void *)b.block_tables), cudaFree(kc), cudaFree(vc);
	cudaFree(q), cudaFree(sc), cudaFree(out);
	return got;
}

static void check_attention(const struct att_case *c, uint32_t splits)
{
	struct att_host h;
	struct o1_attn_dims dm = kv_dims(&c->k);
	struct o1_attn_batch b;
	float *ref, *got, *scratch;
	size_t out_n, row_n = (size_t)c->k.hq * c->k.d;

	fill_attention(c, &h);
	b = (struct o1_attn_batch){c->n_seqs, h.q_off, h.start, h.tables,
				   h.max_blocks};
	out_n = h.rows * row_n;
	ref = malloc(out_n * 4);
	scratch = malloc(h.max_len * 4);
	assert_int_equal(o1_attention_cpu(NULL, ref, h.q, h.kc, h.vc, &dm, &b,
					  scratch, h.max_len),
			 0);
	got = gpu_attention(
	    c, &h,
	    o1_attention_cuda_scratch_floats(h.rows, c->k.hq, c->k.d, splits),
	    ATT_AUTO, 0, splits > 1);
	for (uint32_t r = 0; r < h.rows; r++)
		check_close("attention", got + r * row_n, ref + r * row_n,
			    row_n, 8e-3,
			    1e-3 * max_abs(ref + r * row_n, row_n));
	free(ref), free(got), free(scratch), free(h.tables), free(h.kc);
	free(h.vc), free(h.q);
}

static void test_attention(void **state)
{
	const struct att_case cases[] = {
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
	void *p = dev(64);

	(void)state;
	/* Hq not a multiple of Hkv; odd head_dim; context past the table */
	assert_int_equal(
	    o1_attention_cuda(p, p, p, p, &dm, &b, 1, 1, NULL, 0, false, 0),
	    -EINVAL);
	dm.n_kv_heads = 2, dm.head_dim = 63;
	assert_int_equal(
	    o1_attention_cuda(p, p, p, p, &dm, &b, 1, 1, NULL, 0, false, 0),
	    -EINVAL);
	dm.head_dim = 64;
	assert_int_equal(
	    o1_attention_cuda(p, p, p, p, &dm, &b, 1, 17, NULL, 0, false, 0),
	    -EINVAL);
	cudaFree(p);
}

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
	const struct att_case *c;
	const struct att_host *h;
	const float *ref;
	float *tol;
};

/* Position J's row of kv head G of sequence S in a host cache. */
static const float *host_kv(const struct att_case *c, const struct att_host *h,
			    const float *cache, uint32_t s, uint32_t g,
			    uint32_t j)
{
	uint32_t page = h->tables[s * h->max_blocks + j / c->k.p];

	return cache + page * page_stride(&c->k) +
	       ((size_t)g * c->k.p + j % c->k.p) * c->k.d;
}

static uint32_t host_seq_of_row(const struct att_host *h, uint32_t n_seqs,
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
	const struct att_case *c = a->c;
	const struct att_host *h = a->h;
	uint32_t d = c->k.d, g = hd / (c->k.hq / c->k.hkv);
	uint32_t s = host_seq_of_row(h, c->n_seqs, row);
	uint32_t n = h->start[s] + row - h->q_off[s] + 1;
	const float *q = h->q + ((size_t)row * c->k.hq + hd) * d;
	double m = -INFINITY, z = 0, scale = 1.0f / sqrtf((float)d);

	for (uint32_t j = 0; j < n; j++) {
		const float *k = host_kv(c, h, h->kc, s, g, j);

		w[j] = 0;
		for (uint32_t i = 0; i < d; i++)
			w[j] += (double)f32_of(bf16_of(q[i])) * k[i];
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
	const struct att_case *c = a->c;
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
static void poison_tails(const struct att_case *c, struct att_host *h)
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

/* The tiled kernel for every sequence, then for those with at least
 * O1_ATTN_TILED_MIN_NEW new tokens (the other rows stay poisoned), then
 * o1_attention_cuda (the row kernel takes the short ones). */
static void check_prefill(const struct att_case *c)
{
	struct att_host h;
	struct o1_attn_dims dm = kv_dims(&c->k);
	struct o1_attn_batch b;
	size_t row_n = (size_t)c->k.hq * c->k.d, out_n;
	float *ref, *tol, *scratch, *got;

	fprintf(stderr, "prefill: Hq %u Hkv %u D %u P %u, new/start:", c->k.hq,
		c->k.hkv, c->k.d, c->k.p);
	for (uint32_t s = 0; s < c->n_seqs; s++)
		fprintf(stderr, " %u/%u", c->n_new[s], c->len[s] - c->n_new[s]);
	fprintf(stderr, "\n");
	fill_attention(c, &h);
	poison_tails(c, &h);
	b = (struct o1_attn_batch){c->n_seqs, h.q_off, h.start, h.tables,
				   h.max_blocks};
	out_n = h.rows * row_n;
	ref = malloc(out_n * 4), tol = malloc(out_n * 4);
	scratch = malloc(
	    o1_attention_scratch_floats(o1_threads_count(pool), h.max_len) * 4);
	assert_int_equal(o1_attention_cpu(pool, ref, h.q, h.kc, h.vc, &dm, &b,
					  scratch, h.max_len),
			 0);
	o1_threads_run(pool, h.rows * c->k.hq, pf_bound_task,
		       &(struct pf_bound){c, &h, ref, tol});
	got = gpu_attention(c, &h, 0, ATT_TILED, 1, false);
	check_tol("attention tiled", got, ref, tol, 0, h.rows, row_n);
	free(got);
	got = gpu_attention(c, &h, 0, ATT_TILED, O1_ATTN_TILED_MIN_NEW, false);
	for (uint32_t s = 0; s < c->n_seqs; s++) {
		if (c->n_new[s] >= O1_ATTN_TILED_MIN_NEW) {
			check_tol("attention tiled, long sequences", got, ref,
				  tol, h.q_off[s], h.q_off[s + 1], row_n);
			continue;
		}
		for (size_t i = h.q_off[s] * row_n; i < h.q_off[s + 1] * row_n;
		     i++)
			assert_true(isnan(got[i])); /* not written */
	}
	free(got);
	got = gpu_attention(
	    c, &h,
	    o1_attention_cuda_scratch_floats(h.rows, c->k.hq, c->k.d, 32),
	    ATT_AUTO, 0, false);
	check_tol("attention (dispatch)", got, ref, tol, 0, h.rows, row_n);
	free(got), free(ref), free(tol), free(scratch), free(h.tables);
	free(h.kc), free(h.vc), free(h.q);
}

/* A case of SHAPE with the given new tokens and earlier context per
 * sequence; the pool gets an odd page count prime to 7 (the page
 * permutation of fill_attention). */
static struct att_case prefill_case(struct kv_shape shape, uint32_t n_seqs,
				    const uint32_t *n_new,
				    const uint32_t *start)
{
	struct att_case c = {.k = shape, .n_seqs = n_seqs};
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
	const struct kv_shape shapes[] = {
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
			struct att_case c;

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
	const struct kv_shape qwen = {14, 2, 64, 16, 0, true},
			      l1b = {32, 8, 64, 16, 0, true},
			      l8b = {32, 8, 128, 16, 0, true};
	const struct {
		struct kv_shape k;
		uint32_t n_new, start;
	} one[] = {
	    {qwen, 512, 0},  {l1b, 512, 300},  {l8b, 512, 0},  {l8b, 512, 129},
	    {qwen, 2048, 0}, {qwen, 2048, 77}, {l1b, 2048, 0}, {l8b, 2048, 300},
	};
	const uint32_t mix_new[] = {512, 1, 1, 20, 15, 16, 1, 1};
	const uint32_t mix_start[] = {40, 700, 3, 0, 33, 1, 0, 64};
	struct att_case c;

	(void)state;
	for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++) {
		c = prefill_case(one[i].k, 1, &one[i].n_new, &one[i].start);
		check_prefill(&c);
	}
	c = prefill_case(qwen, 8, mix_new, mix_start);
	check_prefill(&c);
}

/* A decode batch (one row per sequence) through o1_attention_cuda is the
 * row kernel's launch, bit for bit (the captured decode graphs depend on
 * it); shapes the tiled kernel does not take are refused by it. */
static void test_attention_prefill_edges(void **state)
{
	struct att_case c = {
	    {14, 2, 64, 16, 101, true}, 3, {1, 40, 300}, {1, 1, 1}};
	struct att_host h;
	uint64_t sf = o1_attention_cuda_scratch_floats(3, 14, 64, 32);
	float *a, *b;
	struct o1_attn_dims dm = {8, 2, 96, 16, 2 * 16 * 96, 0.1f};
	uint32_t dummy[4] = {0, 1};
	struct o1_attn_batch bt = {1, dummy, dummy, dummy, 1};
	uint16_t *p = dev(1 << 16);
	float *fq = (float *)p;

	(void)state;
	fill_attention(&c, &h);
	a = gpu_attention(&c, &h, sf, ATT_AUTO, 0, true); /* PDL: same bits */
	b = gpu_attention(&c, &h, sf, ATT_ROWS, 0, false);
	assert_memory_equal(a, b, (size_t)h.rows * 14 * 64 * 4);
	free(a), free(b), free(h.tables), free(h.kc), free(h.vc), free(h.q);
	assert_false(o1_attention_tiled_fits(&dm, p, fq, p, p)); /* D 96 */
	assert_int_equal(
	    o1_attention_tiled_cuda(p, fq, p, p, &dm, &bt, 1, 1, 0), -EINVAL);
	dm.head_dim = 64, dm.page_stride = 2 * 16 * 64;
	assert_true(o1_attention_tiled_fits(&dm, p, fq, p, p));
	assert_false(o1_attention_tiled_fits(&dm, p, fq, p + 4, p));
	dm.page_stride += 2; /* rows no longer 16-byte aligned */
	assert_false(o1_attention_tiled_fits(&dm, p, fq, p, p));
	assert_int_equal(
	    o1_attention_tiled_cuda(p, fq, p, p, &dm, &bt, 1, 1, 0), -EINVAL);
	cudaFree(p);
}

/* gemv against a double-precision product of the same bf16 values:
 * |gpu - ref| <= 1e-5 x sum |x w| + 1e-30 per element (f32 accumulation
 * over K terms in a different order; the bound is far above its error and
 * far below one wrong term). Odd N, M 1 to 4, K from 8 to 4864. */
static void check_gemv(uint32_t m, uint32_t n, uint32_t k)
{
	float *x = randv((size_t)m * k, 1.0f), *w = randv((size_t)n * k, 0.1f);
	void *dx, *dw;
	float *dy = dev((size_t)m * n * 4), *y;

	round_bf16(x, (size_t)m * k), round_bf16(w, (size_t)n * k);
	dx = dev_bf16(x, (size_t)m * k), dw = dev_bf16(w, (size_t)n * k);
	assert_int_equal(o1_gemv_bf16_cuda(dy, dx, dw, m, n, k, false, 0), 0);
	y = host_copy(dy, (size_t)m * n * 4);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			double r = 0, a = 0, g = y[(size_t)i * n + j];

			for (uint32_t c = 0; c < k; c++) {
				double p = (double)x[(size_t)i * k + c] *
					   w[(size_t)j * k + c];

				r += p, a += fabs(p);
			}
			if (!(fabs(g - r) <= 1e-5 * a + 1e-30))
				fprintf(stderr,
					"gemv m %u n %u k %u: [%u][%u] gpu %g "
					"ref %g\n",
					m, n, k, i, j, g, r);
			assert_true(fabs(g - r) <= 1e-5 * a + 1e-30);
		}
	free(x), free(w), free(y);
	cudaFree(dx), cudaFree(dw), cudaFree(dy);
}

static void test_gemv(void **state)
{
	float *p = dev(64);

	(void)state;
	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		check_gemv(m, 1, 8);
		check_gemv(m, 37, 896);
		check_gemv(m, 1153, 4864);
	}
	check_gemv(1, 4099, 264);
	assert_int_equal(o1_gemv_bf16_cuda(p, (uint16_t *)p, (uint16_t *)p,
					   O1_GEMV_MAX_ROWS + 1, 1, 8, false,
					   0),
			 -EINVAL);
	assert_int_equal(o1_gemv_bf16_cuda(p, (uint16_t *)p, (uint16_t *)p, 1,
					   1, 12, false, 0),
			 -EINVAL);
	assert_int_equal(o1_gemv_bf16_cuda(p, (uint16_t *)p + 1, (uint16_t *)p,
					   1, 1, 8, false, 0),
			 -EINVAL);
	cudaFree(p);
}

/* The fused products (gemv.cu) against the unfused kernels on the device,
 * bit for bit, and against the CPU references' composition. With h the
 * CPU's bf16 RMSNorm rows (rmsnorm.h, rounded) and h' the device's
 * (o1_rmsnorm_cuda, each element within rmsnorm's tolerance of h), a
 * product element over h' is within 1e-5 sum |w h| (gemv's bound) +
 * sum |w| |h' - h| of the double-precision product over h; SwiGLU's
 * output (swiglu.h over those products) within 8e-3 |ref| (one bf16
 * rounding) + 1.1 |u| e_g + |silu(g)| e_u, e_g and e_u the bounds of
 * its two products (|silu'| <= 1.1); the residual add within 1e-5 sum
 * |x w| + 2^-23 |ref|. PDL and the launch shape change no bit. */
#define NORM_EPS 1e-5f

struct norm_case {
	float *x, *nw, *h, *hd; /* host: rows, weight, CPU h, device h */
	void *dx, *dnw, *dh;	/* device: rows, weight, o1_rmsnorm_cuda's h */
};

/* M random rows of K and a norm weight; h by the CPU and by the device. */
static void norm_open(struct norm_case *n, uint32_t m, uint32_t k)
{
	size_t sz = (size_t)m * k;

	n->x = randv(sz, 3), n->nw = randv(k, 1.5f), n->h = malloc(sz * 4);
	assert_int_equal(
	    o1_rmsnorm_cpu(NULL, n->h, n->x, n->nw, m, k, NORM_EPS), 0);
	round_bf16(n->h, sz);
	n->dx = dev_copy(n->x, sz * 4), n->dnw = dev_copy(n->nw, k * 4);
	n->dh = dev(sz * 2);
	assert_int_equal(o1_rmsnorm_cuda(n->dh, n->dx, NULL, n->dnw, NULL, m, k,
					 NORM_EPS, false, 0),
			 0);
	n->hd = host_bf16(n->dh, sz);
	check_close("rmsnorm (fused input)", n->hd, n->h, sz, 8e-3, 1e-6);
}

static void norm_close(struct norm_case *n)
{
	free(n->x), free(n->nw), free(n->h), free(n->hd);
	cudaFree(n->dx), cudaFree(n->dnw), cudaFree(n->dh);
}

/* Row I of w (N,K) . h row and its bound (see above) into *REF, *TOL. */
static void norm_ref(const struct norm_case *n, const float *w, uint32_t k,
		     uint32_t i, uint32_t j, double *ref, double *tol)
{
	const float *h = n->h + (size_t)i * k, *hd = n->hd + (size_t)i * k;
	double r = 0, a = 0, d = 0;

	for (uint32_t c = 0; c < k; c++) {
		double wc = w[(size_t)j * k + c];

		r += wc * h[c], a += fabs(wc * h[c]);
		d += fabs(wc) * fabs((double)hd[c] - h[c]);
	}
	*ref = r, *tol = 1e-5 * a + d + 1e-30;
}

static void check_gemv_norm(uint32_t m, uint32_t n, uint32_t k, bool pdl)
{
	struct norm_case nc;
	float *w = randv((size_t)n * k, 0.1f), *y, *u;
	void *dw;
	float *dy = dev((size_t)m * n * 4), *du = dev((size_t)m * n * 4);

	norm_open(&nc, m, k);
	round_bf16(w, (size_t)n * k);
	dw = dev_bf16(w, (size_t)n * k);
	assert_int_equal(o1_gemv_norm_bf16_cuda(dy, nc.dx, nc.dnw, NORM_EPS, dw,
						m, n, k, pdl, test_stream(pdl)),
			 0);
	assert_int_equal(o1_gemv_bf16_cuda(du, nc.dh, dw, m, n, k, false, 0),
			 0);
	y = host_copy(dy, (size_t)m * n * 4),
	u = host_copy(du, (size_t)m * n * 4);
	assert_memory_equal(y, u, (size_t)m * n * 4);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			double r, tol, g = y[(size_t)i * n + j];

			norm_ref(&nc, w, k, i, j, &r, &tol);
			if (!(fabs(g - r) <= tol))
				fprintf(
				    stderr,
				    "gemv_norm m %u n %u k %u: [%u][%u] gpu "
				    "%g ref %g tol %g\n",
				    m, n, k, i, j, g, r, tol);
			assert_true(fabs(g - r) <= tol);
		}
	norm_close(&nc);
	free(w), free(y), free(u);
	cudaFree(dw), cudaFree(dy), cudaFree(du);
}

/* act (M,F) against the unfused product and swiglu.cu, then the CPU. */
static void check_gemv_swiglu(uint32_t m, uint32_t f, uint32_t k, bool pdl)
{
	struct norm_case nc;
	float *w = randv((size_t)2 * f * k, 0.1f), *got, *un;
	float *g = malloc((size_t)m * f * 4), *u = malloc((size_t)m * f * 4);
	float *ref = malloc((size_t)m * f * 4), *eg = malloc((size_t)m * f * 8);
	void *dw, *dact = dev((size_t)m * f * 2), *dun = dev((size_t)m * f * 2);
	float *dgu = dev((size_t)m * 2 * f * 4);

	norm_open(&nc, m, k);
	round_bf16(w, (size_t)2 * f * k);
	dw = dev_bf16(w, (size_t)2 * f * k);
	assert_int_equal(o1_gemv_norm_swiglu_bf16_cuda(dact, nc.dx, nc.dnw,
						       NORM_EPS, dw, m, f, k,
						       pdl, test_stream(pdl)),
			 0);
	assert_int_equal(o1_gemv_norm_bf16_cuda(dgu, nc.dx, nc.dnw, NORM_EPS,
						dw, m, 2 * f, k, false, 0),
			 0);
	assert_int_equal(
	    o1_swiglu_cuda(dun, dgu, dgu + f, 2 * f, m, f, false, 0), 0);
	got = host_bf16(dact, (size_t)m * f),
	un = host_bf16(dun, (size_t)m * f);
	assert_memory_equal(got, un, (size_t)m * f * 4);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < f; j++) {
			double r, t;
			size_t o = (size_t)i * f + j;

			norm_ref(&nc, w, k, i, j, &r, &t);
			g[o] = (float)r, eg[2 * o] = t;
			norm_ref(&nc, w, k, i, f + j, &r, &t);
			u[o] = (float)r, eg[2 * o + 1] = t;
		}
	assert_int_equal(o1_swiglu_cpu(NULL, ref, g, u, m, f), 0);
	for (size_t o = 0; o < (size_t)m * f; o++) {
		double s = g[o] / (1.0 + exp(-g[o]));
		double tol = 8e-3 * fabs(ref[o]) +
			     1.1 * fabs(u[o]) * eg[2 * o] +
			     fabs(s) * eg[2 * o + 1] + 1e-6;

		if (!(fabs((double)got[o] - ref[o]) <= tol))
			fprintf(stderr,
				"gemv_norm_swiglu m %u f %u k %u: %zu gpu %g "
				"ref %g tol %g\n",
				m, f, k, o, got[o], ref[o], tol);
		assert_true(fabs((double)got[o] - ref[o]) <= tol);
	}
	norm_close(&nc);
	free(w), free(got), free(un), free(g), free(u), free(ref), free(eg);
	cudaFree(dw), cudaFree(dact), cudaFree(dun), cudaFree(dgu);
}

/* y0 + x . w^T against the product plus residual.h's add, then double. */
static void check_gemv_add(uint32_t m, uint32_t n, uint32_t k, bool pdl)
{
	float *x = randv((size_t)m * k, 1), *w = randv((size_t)n * k, 0.1f);
	float *y0 = randv((size_t)m * n, 4), *y, *o;
	void *dx, *dw;
	float *dy, *dout = dev((size_t)m * n * 4);

	round_bf16(x, (size_t)m * k), round_bf16(w, (size_t)n * k);
	dx = dev_bf16(x, (size_t)m * k), dw = dev_bf16(w, (size_t)n * k);
	dy = dev_copy(y0, (size_t)m * n * 4);
	assert_int_equal(
	    o1_gemv_add_bf16_cuda(dy, dx, dw, m, n, k, pdl, test_stream(pdl)),
	    0);
	assert_int_equal(o1_gemv_bf16_cuda(dout, dx, dw, m, n, k, false, 0), 0);
	y = host_copy(dy, (size_t)m * n * 4);
	o = host_copy(dout, (size_t)m * n * 4);
	assert_int_equal(o1_residual_add_cpu(NULL, o, y0, m, n), 0);
	assert_memory_equal(y, o, (size_t)m * n * 4);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			double r = y0[(size_t)i * n + j], a = 0;

			for (uint32_t c = 0; c < k; c++) {
				double p = (double)x[(size_t)i * k + c] *
					   w[(size_t)j * k + c];

				r += p, a += fabs(p);
			}
			assert_true(fabs(y[(size_t)i * n + j] - r) <=
				    1e-5 * a + ldexp(fabs(r), -23) + 1e-30);
		}
	free(x), free(w), free(y0), free(y), free(o);
	cudaFree(dx), cudaFree(dw), cudaFree(dy), cudaFree(dout);
}

static void test_gemv_fused(void **state)
{
	float *p = dev(1 << 20);
	uint16_t *b = (uint16_t *)p;

	(void)state;
	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		check_gemv_norm(m, 37, 896, m % 2);
		check_gemv_norm(m, 1153, 2048, m % 2 == 0);
		check_gemv_swiglu(m, 37, 896, m % 2);
		check_gemv_add(m, 37, 896, m % 2);
		check_gemv_add(m, 1153, 4864, m % 2 == 0);
	}
	check_gemv_norm(3, 5, 8, true);	    /* K below one piece per thread */
	check_gemv_norm(4, 64, 8192, true); /* 64 KiB of staged rows */
	check_gemv_norm(4, 9, O1_GEMV_NORM_MAX_K, false);
	check_gemv_swiglu(2, 4864, 896, true); /* qwen2.5-0.5b's MLP */
	check_gemv_swiglu(1, 131, 8, false);
	assert_int_equal(o1_gemv_norm_bf16_cuda(p, p, p, 1e-5f, b, 1, 1,
						O1_GEMV_NORM_MAX_K + 8, false,
						0),
			 -EINVAL);
	assert_int_equal(
	    o1_gemv_norm_bf16_cuda(p, p, p + 1, 1e-5f, b, 1, 1, 8, false, 0),
	    -EINVAL); /* weight not 16-byte aligned */
	assert_int_equal(o1_gemv_norm_swiglu_bf16_cuda(b, p, p, 1e-5f, b,
						       O1_GEMV_MAX_ROWS + 1, 1,
						       8, false, 0),
			 -EINVAL);
	assert_int_equal(o1_gemv_add_bf16_cuda(p, b + 4, b, 1, 1, 8, false, 0),
			 -EINVAL);
	cudaFree(p);
}

/* PDL (kernels_cuda.h) and the fused products: one decode layer's kernels
 * over M rows (M sequences of CHAIN_CTX cached positions, each bringing one
 * token), repeated CHAIN_LAYERS times with the same weights, on a stream of
 * its own, with and without PDL, unfused and fused, must give the same
 * bits every way: a kernel that read its predecessor's output before its
 * wait would see the previous layer's values or the NaN poison. The layer
 * is the CUDA backend's: RMSNorm (adding the residual), QKV product, RoPE
 * with the KV write at position CHAIN_CTX, attention in two splits
 * (merged by its last block), O product, RMSNorm, gate/up product, SwiGLU,
 * down product; then a final RMSNorm. Captured into a graph, a PDL chain must show
 * programmatic edges (stream capture keeps PDL) and replay to the same
 * bits. */
#define CHAIN_LAYERS 8
#define CHAIN_CTX    40
#define CHAIN_PAGES  3 /* per sequence: CHAIN_CTX + 1 positions, pages of 16 */
#define CHAIN_DIM    896
#define CHAIN_FFN    4864

struct chain {
	uint32_t m;
	struct kv_shape k;
	struct o1_rope_kv_args ra;
	struct o1_attn_batch b;
	uint64_t scratch_floats;
	float *x0; /* host: the first layer's input */
	float *x, *o, *gu, *nw, *nw2, *scratch;
	uint16_t *h, *att, *act, *wqkv, *wo, *wgu, *wd;
};

static void *dev_rand_bf16(size_t n, float scale)
{
	float *h = randv(n, scale);
	void *d;

	round_bf16(h, n);
	d = dev_bf16(h, n);
	free(h);
	return d;
}

static void *dev_rand_f32(size_t n, float scale)
{
	float *h = randv(n, scale);
	void *d = dev_copy(h, n * 4);

	free(h);
	return d;
}

/* Step inputs of M one-token sequences at position CHAIN_CTX, sequence s
 * in pages [CHAIN_PAGES s, CHAIN_PAGES (s + 1)). */
static void chain_inputs(struct chain *c, float *inv)
{
	uint32_t m = c->m, slots[O1_GEMV_MAX_ROWS], start[O1_GEMV_MAX_ROWS];
	uint32_t q_off[O1_GEMV_MAX_ROWS + 1],
	    tables[O1_GEMV_MAX_ROWS * CHAIN_PAGES];
	int32_t pos[O1_GEMV_MAX_ROWS];

	for (uint32_t s = 0; s < m; s++) {
		pos[s] = CHAIN_CTX, start[s] = CHAIN_CTX, q_off[s] = s;
		for (uint32_t p = 0; p < CHAIN_PAGES; p++)
			tables[s * CHAIN_PAGES + p] = s * CHAIN_PAGES + p;
		slots[s] =
		    tables[s * CHAIN_PAGES + CHAIN_CTX / c->k.p] * c->k.p +
		    CHAIN_CTX % c->k.p;
	}
	q_off[m] = m;
	c->ra.pos = dev_copy(pos, m * 4);
	c->ra.slots = dev_copy(slots, m * 4);
	c->ra.inv_freq = dev_copy(inv, c->k.d / 2 * 4);
	c->b = (struct o1_attn_batch){
	    m, dev_copy(q_off, (m + 1) * 4), dev_copy(start, m * 4),
	    dev_copy(tables, m * CHAIN_PAGES * 4), CHAIN_PAGES};
}

static void chain_open(struct chain *c, uint32_t m)
{
	struct kv_shape k = {14, 2, 64, 16, CHAIN_PAGES * m, false};
	uint32_t qd = k.hq * k.d, w = (k.hq + 2 * k.hkv) * k.d;
	size_t cache = (size_t)k.n_pages * page_stride(&k);
	struct o1_rope rp = {.theta = 1e6f, .dim = k.d};
	float inv[32], sc;

	*c = (struct chain){.m = m, .k = k};
	c->x0 = randv((size_t)m * CHAIN_DIM, 1);
	c->x = dev((size_t)m * CHAIN_DIM * 4);
	c->o = dev((size_t)m * CHAIN_DIM * 4);
	c->gu = dev((size_t)m * 2 * CHAIN_FFN * 4);
	c->h = dev((size_t)m * CHAIN_DIM * 2);
	c->att = dev((size_t)m * qd * 2);
	c->act = dev((size_t)m * CHAIN_FFN * 2);
	c->nw = dev_rand_f32(CHAIN_DIM, 1), c->nw2 = dev_rand_f32(CHAIN_DIM, 1);
	c->wqkv = dev_rand_bf16((size_t)w * CHAIN_DIM, 0.05f);
	c->wo = dev_rand_bf16((size_t)CHAIN_DIM * qd, 0.05f);
	c->wgu = dev_rand_bf16((size_t)2 * CHAIN_FFN * CHAIN_DIM, 0.05f);
	c->wd = dev_rand_bf16((size_t)CHAIN_DIM * CHAIN_FFN, 0.02f);
	c->scratch_floats = o1_attention_cuda_scratch_floats(m, k.hq, k.d, 32);
	c->scratch = dev(c->scratch_floats * 4);
	c->ra = (struct o1_rope_kv_args){.q = dev((size_t)m * qd * 4),
					 .k_cache = dev_rand_bf16(cache, 2),
					 .v_cache = dev_rand_bf16(cache, 2),
					 .qkv = dev((size_t)m * w * 4),
					 .scale = 1,
					 .n_tokens = m,
					 .rot_dim = k.d};
	assert_int_equal(o1_rope_inv_freq(&rp, NULL, inv, &sc), 0);
	chain_inputs(c, inv);
	/* dev()'s poison is a memset on the legacy stream, which the
	 * chain's stream does not wait for */
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

static void chain_close(struct chain *c)
{
	void *p[] = {c->x,
		     c->o,
		     c->gu,
		     c->nw,
		     c->nw2,
		     c->scratch,
		     c->h,
		     c->att,
		     c->act,
		     c->wqkv,
		     c->wo,
		     c->wgu,
		     c->wd,
		     c->ra.q,
		     c->ra.k_cache,
		     c->ra.v_cache,
		     (void *)c->ra.qkv,
		     (void *)c->ra.pos,
		     (void *)c->ra.slots,
		     (void *)c->ra.inv_freq,
		     (void *)c->b.q_offsets,
		     (void *)c->b.start_pos,
		     (void *)c->b.block_tables};

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		cudaFree(p[i]);
	free(c->x0);
}

static int chain_layer(struct chain *c, bool first, bool pdl, cudaStream_t st)
{
	struct o1_attn_dims dm = kv_dims(&c->k);
	uint32_t m = c->m, d = CHAIN_DIM, f = CHAIN_FFN, qd = c->k.hq * c->k.d;
	uint32_t w = qd + 2 * c->k.hkv * c->k.d;
	int err = o1_rmsnorm_cuda(c->h, c->x, first ? NULL : c->o, c->nw, NULL,
				  m, d, 1e-6f, pdl, st);

	err = err ? err
		  : o1_gemv_bf16_cuda((float *)c->ra.qkv, c->h, c->wqkv, m, w,
				      d, pdl, st);
	err = err ? err : o1_rope_kv_write_cuda(&c->ra, &dm, pdl, st);
	err =
	    err ? err
		: o1_attention_cuda(c->att, c->ra.q, c->ra.k_cache,
				    c->ra.v_cache, &dm, &c->b, m, CHAIN_CTX + 1,
				    c->scratch, c->scratch_floats, pdl, st);
	err = err ? err
		  : o1_gemv_bf16_cuda(c->o, c->att, c->wo, m, d, qd, pdl, st);
	err = err ? err
		  : o1_rmsnorm_cuda(c->h, c->x, c->o, c->nw2, NULL, m, d, 1e-6f,
				    pdl, st);
	err =
	    err ? err
		: o1_gemv_bf16_cuda(c->gu, c->h, c->wgu, m, 2 * f, d, pdl, st);
	err = err ? err
		  : o1_swiglu_cuda(c->act, c->gu, c->gu + f, 2 * f, m, f, pdl,
				   st);
	return err ? err
		   : o1_gemv_bf16_cuda(c->o, c->act, c->wd, m, d, f, pdl, st);
}

/* The layer with gemv.cu's fused variants, as the CUDA backend runs it:
 * the residual adds in the O and down products, the RMSNorms in the QKV
 * and gate/up products, RoPE and the KV write in the former's epilogue,
 * SwiGLU in the latter's. */
static int chain_layer_fused(struct chain *c, bool pdl, cudaStream_t st)
{
	struct o1_attn_dims dm = kv_dims(&c->k);
	uint32_t m = c->m, d = CHAIN_DIM, f = CHAIN_FFN, qd = c->k.hq * c->k.d;
	int err = o1_gemv_norm_rope_kv_cuda(&c->ra, &dm, c->x, c->nw, 1e-6f,
					    c->wqkv, m, d, pdl, st);

	err =
	    err ? err
		: o1_attention_cuda(c->att, c->ra.q, c->ra.k_cache,
				    c->ra.v_cache, &dm, &c->b, m, CHAIN_CTX + 1,
				    c->scratch, c->scratch_floats, pdl, st);
	err =
	    err ? err
		: o1_gemv_add_bf16_cuda(c->x, c->att, c->wo, m, d, qd, pdl, st);
	err = err ? err
		  : o1_gemv_norm_swiglu_bf16_cuda(c->act, c->x, c->nw2, 1e-6f,
						  c->wgu, m, f, d, pdl, st);
	return err ? err
		   : o1_gemv_add_bf16_cuda(c->x, c->act, c->wd, m, d, f, pdl,
					   st);
}

/* Every layer (FUSED: chain_layer_fused), then the final RMSNorm (adding
 * the last down product, which the fused layers added already). */
static int chain_run(struct chain *c, bool fused, bool pdl, cudaStream_t st)
{
	int err = 0;

	for (uint32_t l = 0; !err && l < CHAIN_LAYERS; l++)
		err = fused ? chain_layer_fused(c, pdl, st)
			    : chain_layer(c, l == 0, pdl, st);
	return err ? err
		   : o1_rmsnorm_cuda(c->h, c->x, fused ? NULL : c->o, c->nw,
				     NULL, c->m, CHAIN_DIM, 1e-6f, pdl, st);
}

/* Kernel nodes and programmatic (PDL) edges of G. */
static void graph_counts(cudaGraph_t g, size_t *kernels, size_t *prog)
{
	size_t n = 0, e = 0;
	cudaGraphNode_t *nodes, *from, *to;
	cudaGraphEdgeData *data;
	enum cudaGraphNodeType type;

	assert_int_equal(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
	assert_int_equal(cudaGraphGetEdges(g, NULL, NULL, NULL, &e),
			 cudaSuccess);
	nodes = malloc((n + 1) * sizeof(*nodes));
	from = malloc((e + 1) * sizeof(*from));
	to = malloc((e + 1) * sizeof(*to));
	data = calloc(e + 1, sizeof(*data));
	assert_int_equal(cudaGraphGetNodes(g, nodes, &n), cudaSuccess);
	assert_int_equal(cudaGraphGetEdges(g, from, to, data, &e), cudaSuccess);
	*kernels = *prog = 0;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(cudaGraphNodeGetType(nodes[i], &type),
				 cudaSuccess);
		*kernels += type == cudaGraphNodeTypeKernel;
	}
	for (size_t i = 0; i < e; i++)
		*prog += data[i].type == cudaGraphDependencyTypeProgrammatic;
	free(nodes), free(from), free(to), free(data);
}

/* Poisons every activation, loads x, runs the chain (eagerly, or
 * captured then replayed when COUNTS is not NULL: the graph's kernels and
 * programmatic edges go there); returns x then h. */
static void *chain_result(struct chain *c, bool fused, bool pdl,
			  cudaStream_t st, size_t *counts)
{
	size_t xd = (size_t)c->m * CHAIN_DIM;
	void *act[] = {c->o,   c->gu,	   c->h,    c->att,
		       c->act, c->scratch, c->ra.q, (void *)c->ra.qkv};
	size_t bytes[] = {xd * 4,
			  (size_t)c->m * 2 * CHAIN_FFN * 4,
			  xd * 2,
			  (size_t)c->m * c->k.hq * c->k.d * 2,
			  (size_t)c->m * CHAIN_FFN * 2,
			  c->scratch_floats * 4,
			  (size_t)c->m * c->k.hq * c->k.d * 4,
			  (size_t)c->m * (c->k.hq + 2 * c->k.hkv) * c->k.d * 4};
	uint8_t *out = malloc(xd * 6);
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;

	for (size_t i = 0; i < sizeof(act) / sizeof(act[0]); i++)
		assert_int_equal(cudaMemsetAsync(act[i], 0xff, bytes[i], st),
				 cudaSuccess);
	assert_int_equal(
	    cudaMemcpyAsync(c->x, c->x0, xd * 4, cudaMemcpyHostToDevice, st),
	    cudaSuccess);
	assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
	if (!counts) {
		assert_int_equal(chain_run(c, fused, pdl, st), 0);
	} else {
		assert_int_equal(cudaStreamBeginCapture(
				     st, cudaStreamCaptureModeThreadLocal),
				 cudaSuccess);
		assert_int_equal(chain_run(c, fused, pdl, st), 0);
		assert_int_equal(cudaStreamEndCapture(st, &g), cudaSuccess);
		graph_counts(g, &counts[0], &counts[1]);
		assert_int_equal(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
		assert_int_equal(cudaGraphLaunch(ge, st), cudaSuccess);
	}
	assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
	if (ge)
		cudaGraphExecDestroy(ge), cudaGraphDestroy(g);
	assert_int_equal(cudaMemcpy(out, c->x, xd * 4, cudaMemcpyDeviceToHost),
			 0);
	assert_int_equal(
	    cudaMemcpy(out + xd * 4, c->h, xd * 2, cudaMemcpyDeviceToHost), 0);
	return out;
}

/* The chain FUSED or not, with PDL or not, three times eagerly, then
 * captured: the same bits as REF every time; returns the graph's kernel
 * count. */
static size_t chain_check(struct chain *c, bool fused, bool pdl,
			  cudaStream_t st, const uint8_t *ref)
{
	size_t n[2], bytes = (size_t)c->m * CHAIN_DIM * 6;
	uint8_t *got;

	for (int rep = 0; rep < 3; rep++) {
		got = chain_result(c, fused, pdl, st, NULL);
		assert_memory_equal(got, ref, bytes);
		free(got);
	}
	got = chain_result(c, fused, pdl, st, n);
	printf("chain m %u, %s, PDL %s: graph of %zu kernels, %zu "
	       "programmatic edges\n",
	       c->m, fused ? "fused" : "unfused", pdl ? "on" : "off", n[0],
	       n[1]);
	assert_memory_equal(got, ref, bytes);
	free(got);
	if (pdl)
		assert_true(n[1] > 0); /* stream capture kept PDL */
	else
		assert_int_equal(n[1], 0);
	return n[0];
}

/* The unfused chain without PDL is the reference; the fused chain drops
 * four kernels a layer (two RMSNorms, RoPE/KV and SwiGLU). */
static void test_pdl_chain(void **state)
{
	cudaStream_t st;
	struct chain c;
	size_t unfused, fused;
	uint8_t *ref;

	(void)state;
	assert_int_equal(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking),
			 cudaSuccess);
	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		chain_open(&c, m);
		ref = chain_result(&c, false, false, st, NULL);
		for (size_t i = 0; i < (size_t)m * CHAIN_DIM; i++)
			assert_true(isfinite(((float *)ref)[i]));
		unfused = chain_check(&c, false, false, st, ref);
		assert_int_equal(chain_check(&c, false, true, st, ref),
				 unfused);
		fused = chain_check(&c, true, false, st, ref);
		assert_int_equal(chain_check(&c, true, true, st, ref), fused);
		assert_int_equal(unfused - fused, 4 * CHAIN_LAYERS);
		free(ref);
		chain_close(&c);
	}
	cudaStreamDestroy(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_convert),
	    cmocka_unit_test(test_embedding),
	    cmocka_unit_test(test_rmsnorm),
	    cmocka_unit_test(test_swiglu),
	    cmocka_unit_test(test_argmax),
	    cmocka_unit_test(test_rope),
	    cmocka_unit_test(test_rope_kv),
	    cmocka_unit_test(test_attention),
	    cmocka_unit_test(test_attention_errors),
	    cmocka_unit_test(test_attention_prefill_edges),
	    cmocka_unit_test(test_attention_prefill_sweep),
	    cmocka_unit_test(test_attention_prefill_long),
	    cmocka_unit_test(test_gemv),
	    cmocka_unit_test(test_gemv_fused),
	    cmocka_unit_test(test_pdl_chain),
	};
	const char *seed = getenv("O1_TEST_SEED");
	long ncpu;
	int rc;

	if (o1_cuda_probe() != 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return 77;
	}
	if (cudaStreamCreate(&blocking) != cudaSuccess)
		return 1;
	rng = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL);
	fprintf(stderr, "test_gpu_kernels: seed %llu (O1_TEST_SEED)\n",
		(unsigned long long)rng);
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (o1_threads_create(ncpu < 1	  ? 1
			      : ncpu > 64 ? 64
					  : (uint32_t)ncpu,
			      &pool) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	o1_threads_destroy(pool);
	cudaStreamDestroy(blocking);
	return rc;
}

/* gemv.cu, the decode products, on fresh random inputs (O1_TEST_SEED or
 * the time), every output poisoned with NaN first. Exit 77 without a CUDA
 * device; tools/gpu/emu/run_decode.sh runs it on the CPU emulation.
 *
 * Tolerances and what each test proves:
 * - test_products: o1_gemv_bf16_cuda for M = 1 .. 4 against a double
 *   product of the same bf16 values, within 1e-5 of the sum of |products|
 *   (f32 accumulation of up to 16384 terms); shapes with a partial batch
 *   of pieces (K = 896, 264, 4864, 14336), whole batches (2048, 8192),
 *   more columns than the grid has warps (the warps stride), and input rows
 *   staged in shared memory or not (K = 14336 from M = 3). Row 0 of every M
 *   equals the M = 1 result bit for bit (a row ignores the others), and
 *   o1_gemv_add_bf16_cuda gives y + the product, the f32 sum of the two.
 * - test_norm_rows: o1_gemv_norm_rows_bf16_cuda over a row list is
 *   o1_rmsnorm_cuda (same rows, no residual) then o1_gemv_bf16_cuda, bit
 *   for bit; x is not written.
 * - test_swiglu: o1_gemv_norm_swiglu_bf16_cuda is o1_gemv_norm_bf16_cuda
 *   then o1_swiglu_cuda, bit for bit.
 * - test_rope_kv: o1_gemv_norm_rope_kv_cuda is o1_gemv_norm_bf16_cuda
 *   then o1_rope_kv_write_cuda, bit for bit (q, and the whole K and V
 *   caches: nothing else is written); and, against the CPU's RoPE
 *   (rope.c) of the device's QKV rows, q within 1e-5 of the row's largest
 *   |q| (cos/sin: the host's double cos/sin against the device's) and k,
 *   v within one bf16 rounding (8e-3 relative).
 * - test_errors: bad operands are refused with -EINVAL.
 * - test_setups (and test_rope_kv): every launch setup (struct
 *   o1_gemv_setup: 1 .. O1_GEMV_BPS_MAX blocks a multiprocessor, each of
 *   o1_gemv_pieces's) of every variant gives the default setup's bits,
 *   for M = 1 .. 4; setups outside those are refused with -EINVAL. With
 *   more columns than the grid's warps and rows of one half batch, the
 *   default is gemv2 (two batches in flight a warp) and the halves gemv;
 *   with rows of 4864 (19 pieces a lane) and one unit a warp, the one-row
 *   default is gemv with batches of 20 pieces (whole_row).
 * - test_gemv: o1_gemv_bf16_cuda for odd N, M 1 to 4, K from 8 to 4864
 *   against a double product (the bound of test_products), and its
 *   refusals.
 * - test_gemv_fused: the fused products (norm, norm + SwiGLU, residual
 *   add) against the unfused kernels bit for bit, with PDL and without,
 *   and against the CPU references' composition (the comment above
 *   NORM_EPS gives the bounds); and their refusals.
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
#include "kernels/kernels_cuda.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

#define EPS 1e-5f

/* The double product of row I of x (M,K) and row J of w (N,K), and the
 * sum of |products|. */
static void ref_dot(const float *x, const float *w, uint32_t k, uint32_t i,
		    uint32_t j, double *dot, double *mag)
{
	double s = 0, a = 0;

	for (uint32_t c = 0; c < k; c++) {
		double p = (double)x[(size_t)i * k + c] * w[(size_t)j * k + c];

		s += p, a += fabs(p);
	}
	*dot = s, *mag = a;
}

/* o1_gemv_bf16_cuda of M rows into a fresh poisoned buffer; the result. */
static float *run_gemv(const void *dx, const void *dw, uint32_t m, uint32_t n,
		       uint32_t k)
{
	float *dy = kct_dev((size_t)m * n * 4), *y;

	assert_int_equal(
	    o1_gemv_bf16_cuda(dy, dx, dw, m, n, k, O1_GEMV_DEFAULT, false, 0),
	    0);
	y = kct_host_copy(dy, (size_t)m * n * 4);
	cudaFree(dy);
	return y;
}

/* The setups of VARIANT over M rows other than the default, into OUT
 * (room for O1_GEMV_BPS_MAX x 3); returns how many. */
static uint32_t other_setups(enum o1_gemv_variant v, uint32_t m,
			     struct o1_gemv_setup *out)
{
	uint8_t p[3];
	uint32_t np = o1_gemv_pieces(v, m, p), n = 0;

	assert_true(np >= 1);
	for (uint32_t b = 1; b <= O1_GEMV_BPS_MAX; b++)
		for (uint32_t j = 0; j < np; j++)
			if (b != O1_GEMV_BPS_DEFAULT || j)
				out[n++] = (struct o1_gemv_setup){b, p[j]};
	return n;
}

static void check_add(const void *dx, const void *dw, const float *prod,
		      uint32_t m, uint32_t n, uint32_t k)
{
	float *y0 = kct_randv((size_t)m * n, 4), *y;
	float *dy = kct_dev_copy(y0, (size_t)m * n * 4);

	assert_int_equal(o1_gemv_add_bf16_cuda(dy, dx, dw, m, n, k,
					       O1_GEMV_DEFAULT, false, 0),
			 0);
	y = kct_host_copy(dy, (size_t)m * n * 4);
	for (size_t i = 0; i < (size_t)m * n; i++) {
		float want = y0[i] + prod[i];

		assert_memory_equal(&y[i], &want, 4);
	}
	free(y0), free(y), cudaFree(dy);
}

static void check_products(uint32_t n, uint32_t k)
{
	float *x = kct_randv((size_t)4 * k, 1),
	      *w = kct_randv((size_t)n * k, 1);
	void *dx, *dw;
	float *y1;

	kct_round_bf16(x, (size_t)4 * k), kct_round_bf16(w, (size_t)n * k);
	dx = kct_dev_bf16(x, (size_t)4 * k),
	dw = kct_dev_bf16(w, (size_t)n * k);
	y1 = run_gemv(dx, dw, 1, n, k);
	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		float *y = run_gemv(dx, dw, m, n, k);

		for (uint32_t i = 0; i < m; i++)
			for (uint32_t j = 0; j < n; j++) {
				double r, a, g = y[(size_t)i * n + j];

				ref_dot(x, w, k, i, j, &r, &a);
				if (!(fabs(g - r) <= 1e-5 * a + 1e-30))
					fail_msg(
					    "gemv m %u n %u k %u [%u][%u]: "
					    "%g, want %g (|.| sum %g)",
					    m, n, k, i, j, g, r, a);
			}
		assert_memory_equal(y, y1, (size_t)n * 4);
		check_add(dx, dw, y, m, n, k);
		free(y);
	}
	free(x), free(w), free(y1), cudaFree(dx), cudaFree(dw);
}

static void test_products(void **state)
{
	(void)state;
	check_products(1, 8);
	check_products(37, 896);
	check_products(300, 2048);
	check_products(129, 4864);
	check_products(40, 8192);
	check_products(5000, 264);
	check_products(24, 14336); /* input rows staged up to M = 2 */
}

/* M rows of K f32 (of ROWS_IN rows on the device), a norm weight and a
 * bf16 matrix of N rows. */
struct norm_in {
	float *dx, *dnw;
	void *dw;
};

static struct norm_in norm_in(uint32_t rows_in, uint32_t n, uint32_t k)
{
	float *x = kct_randv((size_t)rows_in * k, 3), *nw = kct_randv(k, 1.5f);
	float *w = kct_randv((size_t)n * k, 0.1f);
	struct norm_in in = {kct_dev_copy(x, (size_t)rows_in * k * 4),
			     kct_dev_copy(nw, k * 4),
			     kct_dev_bf16(w, (size_t)n * k)};

	free(x), free(nw), free(w);
	return in;
}

static void norm_free(struct norm_in *in)
{
	cudaFree(in->dx), cudaFree(in->dnw), cudaFree(in->dw);
}

static void check_norm_rows(uint32_t n, uint32_t k)
{
	const uint32_t rows[] = {2, 0, 3, 2};
	struct norm_in in = norm_in(4, n, k);
	uint32_t *drows = kct_dev_copy(rows, sizeof(rows));
	float *x0 = kct_host_copy(in.dx, (size_t)4 * k * 4), *x1;

	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		float *dy = kct_dev((size_t)m * n * 4);
		void *dh = kct_dev((size_t)m * k * 2);
		float *y, *u;

		assert_int_equal(o1_gemv_norm_rows_bf16_cuda(
				     dy, in.dx, drows, in.dnw, EPS, in.dw, m, n,
				     k, O1_GEMV_DEFAULT, false, 0),
				 0);
		y = kct_host_copy(dy, (size_t)m * n * 4);
		assert_int_equal(o1_rmsnorm_cuda(dh, in.dx, NULL, in.dnw, drows,
						 m, k, EPS, false, 0),
				 0);
		u = run_gemv(dh, in.dw, m, n, k);
		assert_memory_equal(y, u, (size_t)m * n * 4);
		free(y), free(u), cudaFree(dy), cudaFree(dh);
	}
	x1 = kct_host_copy(in.dx, (size_t)4 * k * 4);
	assert_memory_equal(x0, x1, (size_t)4 * k * 4);
	free(x0), free(x1), cudaFree(drows), norm_free(&in);
}

static void test_norm_rows(void **state)
{
	(void)state;
	check_norm_rows(37, 896);
	check_norm_rows(300, 2048);
	check_norm_rows(9, 8);
}

static void check_swiglu(uint32_t f, uint32_t k)
{
	struct norm_in in = norm_in(4, 2 * f, k);

	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		void *da = kct_dev((size_t)m * f * 2), *db;
		float *dgu = kct_dev((size_t)m * 2 * f * 4);
		uint16_t *a, *b;

		assert_int_equal(o1_gemv_norm_swiglu_bf16_cuda(
				     da, in.dx, in.dnw, EPS, in.dw, m, f, k,
				     O1_GEMV_DEFAULT, false, 0),
				 0);
		assert_int_equal(
		    o1_gemv_norm_bf16_cuda(dgu, in.dx, in.dnw, EPS, in.dw, m,
					   2 * f, k, O1_GEMV_DEFAULT, false, 0),
		    0);
		db = kct_dev((size_t)m * f * 2);
		assert_int_equal(
		    o1_swiglu_cuda(db, dgu, dgu + f, 2 * f, m, f, false, 0), 0);
		a = kct_host_copy(da, (size_t)m * f * 2);
		b = kct_host_copy(db, (size_t)m * f * 2);
		assert_memory_equal(a, b, (size_t)m * f * 2);
		free(a), free(b), cudaFree(da), cudaFree(db), cudaFree(dgu);
	}
	norm_free(&in);
}

static void test_swiglu(void **state)
{
	(void)state;
	check_swiglu(37, 896);
	check_swiglu(300, 2048);
}

/* A QKV shape: heads, kv heads, head dim, rotated dims, page tokens, the
 * input width, whether there is a bias. */
struct qkv_shape {
	uint32_t hq, hkv, d, rot, p, k;
	bool bias;
};

/* The device side of one QKV case: a launch's operands and outputs. */
struct qkv_out {
	struct o1_rope_kv_args ra;
	size_t cache;
};

static struct o1_attn_dims qkv_dims(const struct qkv_shape *s)
{
	return (struct o1_attn_dims){
	    s->hq, s->hkv, s->d, s->p, (uint64_t)s->hkv * s->p * s->d, 1.0f};
}

/* Fresh poisoned outputs (q, caches of PAGES pages) over shared inputs. */
static struct qkv_out qkv_out(const struct qkv_shape *s, uint32_t m,
			      uint32_t pages, const struct o1_rope_kv_args *in)
{
	struct qkv_out o = {*in, (size_t)pages * s->hkv * s->p * s->d};

	o.ra.q = kct_dev((size_t)m * s->hq * s->d * 4);
	o.ra.k_cache = kct_dev(o.cache * 2);
	o.ra.v_cache = kct_dev(o.cache * 2);
	return o;
}

static void qkv_free(struct qkv_out *o)
{
	cudaFree(o->ra.q), cudaFree(o->ra.k_cache), cudaFree(o->ra.v_cache);
}

/* The two launches' outputs are the same bits. */
static void same_outputs(const struct qkv_out *a, const struct qkv_out *b,
			 size_t q_bytes)
{
	void *ha = kct_host_copy(a->ra.q, q_bytes);
	void *hb = kct_host_copy(b->ra.q, q_bytes);

	assert_memory_equal(ha, hb, q_bytes);
	free(ha), free(hb);
	ha = kct_host_copy(a->ra.k_cache, a->cache * 2);
	hb = kct_host_copy(b->ra.k_cache, a->cache * 2);
	assert_memory_equal(ha, hb, a->cache * 2);
	free(ha), free(hb);
	ha = kct_host_copy(a->ra.v_cache, a->cache * 2);
	hb = kct_host_copy(b->ra.v_cache, a->cache * 2);
	assert_memory_equal(ha, hb, a->cache * 2);
	free(ha), free(hb);
}

/* q, k and v of the fused launch O against the CPU's RoPE of the device's
 * QKV rows (DQKV, M rows of W floats) plus the bias. */
static void check_rope_cpu(const struct qkv_shape *s, uint32_t m,
			   const float *dqkv, const float *bias,
			   const int32_t *pos, const uint32_t *slots,
			   const float *inv, float scale,
			   const struct qkv_out *o)
{
	uint32_t w = (s->hq + 2 * s->hkv) * s->d, qd = s->hq * s->d;
	uint32_t kvd = s->hkv * s->d;
	float *qkv = kct_host_copy(dqkv, (size_t)m * w * 4);
	float *q = kct_host_copy(o->ra.q, (size_t)m * qd * 4);
	float *kc = kct_host_bf16(o->ra.k_cache, o->cache);
	float *vc = kct_host_bf16(o->ra.v_cache, o->cache);
	float *k = malloc((size_t)m * kvd * 4);

	for (size_t i = 0; bias && i < (size_t)m * w; i++)
		qkv[i] += bias[i % w];
	for (uint32_t t = 0; t < m; t++)
		memcpy(k + (size_t)t * kvd, qkv + (size_t)t * w + qd, kvd * 4);
	for (uint32_t t = 0; t < m; t++)
		assert_int_equal(o1_rope_cpu(NULL, qkv + (size_t)t * w, pos + t,
					     1, s->hq, s->d, s->rot, inv,
					     scale),
				 0);
	assert_int_equal(
	    o1_rope_cpu(NULL, k, pos, m, s->hkv, s->d, s->rot, inv, scale), 0);
	for (uint32_t t = 0; t < m; t++) {
		const float *ref = qkv + (size_t)t * w, *v = ref + qd + kvd;
		float big = 0;

		for (uint32_t i = 0; i < qd; i++)
			big = fabsf(ref[i]) > big ? fabsf(ref[i]) : big;
		kct_check_close("rope_kv q", q + (size_t)t * qd, ref, qd, 0,
				1e-5 * big + 1e-30);
		for (uint32_t h = 0; h < s->hkv; h++) {
			size_t at = (size_t)(slots[t] / s->p) * kvd * s->p +
				    ((size_t)h * s->p + slots[t] % s->p) * s->d;

			kct_check_close("rope_kv k", kc + at,
					k + (size_t)t * kvd + h * s->d, s->d,
					8e-3, 1e-6);
			kct_check_close("rope_kv v", vc + at, v + h * s->d,
					s->d, 8e-3, 1e-6);
		}
	}
	free(qkv), free(q), free(kc), free(vc), free(k);
}

/* Positions and slots of M rows: row t at a random position of page
 * 2 t + 1 (the pages between stay untouched). */
static void qkv_inputs(const struct qkv_shape *s, uint32_t m, int32_t *pos,
		       uint32_t *slots)
{
	for (uint32_t t = 0; t < m; t++) {
		uint32_t in_page = (uint32_t)((kct_frand() + 1) * 0.5f * s->p);

		in_page = in_page < s->p ? in_page : s->p - 1;
		pos[t] = (int32_t)((kct_frand() + 1) * 2000);
		slots[t] = (2 * t + 1) * s->p + in_page;
	}
}

/* Every other setup of the fused QKV launch gives REF's bits. */
static void check_rope_setups(const struct qkv_shape *s, uint32_t m,
			      uint32_t pages,
			      const struct o1_rope_kv_args *base,
			      const struct norm_in *in,
			      const struct qkv_out *ref)
{
	struct o1_gemv_setup su[O1_GEMV_BPS_MAX * 3];
	uint32_t n = other_setups(O1_GEMV_ROPE, m, su);
	struct o1_attn_dims dm = qkv_dims(s);

	for (uint32_t i = 0; i < n; i++) {
		struct qkv_out alt = qkv_out(s, m, pages, base);

		assert_int_equal(o1_gemv_norm_rope_kv_cuda(
				     &alt.ra, &dm, in->dx, in->dnw, EPS, in->dw,
				     m, s->k, su[i], true, kct_stream(true)),
				 0);
		assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
		same_outputs(ref, &alt, (size_t)m * s->hq * s->d * 4);
		qkv_free(&alt);
	}
}

static void check_rope_kv(const struct qkv_shape *s)
{
	uint32_t w = (s->hq + 2 * s->hkv) * s->d, pages = 2 * 4 + 1;
	struct o1_rope r = {.theta = 1e4f, .dim = s->rot};
	struct norm_in in = norm_in(4, w, s->k);
	struct o1_attn_dims dm = qkv_dims(s);
	float inv[128], scale, *bias = s->bias ? kct_randv(w, 0.5f) : NULL;
	int32_t pos[4];
	uint32_t slots[4];

	assert_int_equal(o1_rope_inv_freq(&r, NULL, inv, &scale), 0);
	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		struct o1_rope_kv_args base = {
		    .scale = scale, .n_tokens = m, .rot_dim = s->rot};
		struct qkv_out fused, plain;
		float *dqkv = kct_dev((size_t)m * w * 4);

		qkv_inputs(s, m, pos, slots);
		base.pos = kct_dev_copy(pos, m * 4);
		base.slots = kct_dev_copy(slots, m * 4);
		base.inv_freq = kct_dev_copy(inv, s->rot / 2 * 4);
		base.bias = bias ? kct_dev_copy(bias, w * 4) : NULL;
		fused = qkv_out(s, m, pages, &base);
		plain = qkv_out(s, m, pages, &base);
		plain.ra.qkv = dqkv;
		assert_int_equal(o1_gemv_norm_rope_kv_cuda(
				     &fused.ra, &dm, in.dx, in.dnw, EPS, in.dw,
				     m, s->k, O1_GEMV_DEFAULT, false, 0),
				 0);
		assert_int_equal(
		    o1_gemv_norm_bf16_cuda(dqkv, in.dx, in.dnw, EPS, in.dw, m,
					   w, s->k, O1_GEMV_DEFAULT, false, 0),
		    0);
		assert_int_equal(
		    o1_rope_kv_write_cuda(&plain.ra, &dm, false, 0), 0);
		same_outputs(&fused, &plain, (size_t)m * s->hq * s->d * 4);
		check_rope_cpu(s, m, dqkv, bias, pos, slots, inv, scale,
			       &fused);
		check_rope_setups(s, m, pages, &base, &in, &fused);
		qkv_free(&fused), qkv_free(&plain), cudaFree(dqkv);
		cudaFree((void *)base.pos), cudaFree((void *)base.slots);
		cudaFree((void *)base.inv_freq), cudaFree((void *)base.bias);
	}
	free(bias), norm_free(&in);
}

static void test_rope_kv(void **state)
{
	const struct qkv_shape shapes[] = {
	    {14, 2, 64, 64, 16, 896, true},	/* qwen2.5-0.5b */
	    {4, 1, 24, 16, 7, 128, false},	/* unrotated dims, odd pages */
	    {32, 8, 128, 128, 16, 1024, false}, /* llama3-8b's heads */
	    {2, 2, 8, 4, 5, 8, true},		/* one piece a row */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		check_rope_kv(&shapes[i]);
}

static void test_errors(void **state)
{
	struct qkv_shape s = {4, 1, 24, 16, 7, 128, false};
	struct o1_attn_dims dm = qkv_dims(&s);
	float *p = kct_dev(4096);
	uint16_t *b = (uint16_t *)p;
	struct o1_rope_kv_args ra = {
	    p, b, b, NULL, NULL, (int32_t *)p, (uint32_t *)p, p, 1, 1, 16};

	(void)state;
	assert_int_equal(o1_gemv_norm_rows_bf16_cuda(p, p, NULL, p, EPS, b, 5,
						     1, 8, O1_GEMV_DEFAULT,
						     false, 0),
			 -EINVAL); /* M above O1_GEMV_MAX_ROWS */
	assert_int_equal(o1_gemv_norm_rows_bf16_cuda(p, p, NULL, p, EPS, b, 1,
						     1, 12, O1_GEMV_DEFAULT,
						     false, 0),
			 -EINVAL); /* K not a multiple of 8 */
	assert_int_equal(o1_gemv_norm_rope_kv_cuda(&ra, &dm, p, p, EPS, b, 2, 8,
						   O1_GEMV_DEFAULT, false, 0),
			 -EINVAL); /* n_tokens is not M */
	ra.rot_dim = 15;
	assert_int_equal(o1_gemv_norm_rope_kv_cuda(&ra, &dm, p, p, EPS, b, 1, 8,
						   O1_GEMV_DEFAULT, false, 0),
			 -EINVAL); /* odd rot_dim */
	ra.rot_dim = 26;
	assert_int_equal(o1_gemv_norm_rope_kv_cuda(&ra, &dm, p, p, EPS, b, 1, 8,
						   O1_GEMV_DEFAULT, false, 0),
			 -EINVAL); /* rot_dim above head_dim */
	ra.rot_dim = 16, ra.q = NULL;
	assert_int_equal(o1_gemv_norm_rope_kv_cuda(&ra, &dm, p, p, EPS, b, 1, 8,
						   O1_GEMV_DEFAULT, false, 0),
			 -EINVAL);
	ra.q = p;
	assert_int_equal(o1_gemv_norm_rope_kv_cuda(&ra, &dm, p, p + 1, EPS, b,
						   1, 8, O1_GEMV_DEFAULT, false,
						   0),
			 -EINVAL); /* norm weight not 16-byte aligned */
	cudaFree(p);
}

/* gemv against a double-precision product of the same bf16 values:
 * |gpu - ref| <= 1e-5 x sum |x w| + 1e-30 per element (f32 accumulation
 * over K terms in a different order; the bound is far above its error and
 * far below one wrong term). Odd N, M 1 to 4, K from 8 to 4864. */
static void check_gemv(uint32_t m, uint32_t n, uint32_t k)
{
	float *x = kct_randv((size_t)m * k, 1.0f),
	      *w = kct_randv((size_t)n * k, 0.1f);
	void *dx, *dw;
	float *dy = kct_dev((size_t)m * n * 4), *y;

	kct_round_bf16(x, (size_t)m * k), kct_round_bf16(w, (size_t)n * k);
	dx = kct_dev_bf16(x, (size_t)m * k),
	dw = kct_dev_bf16(w, (size_t)n * k);
	assert_int_equal(
	    o1_gemv_bf16_cuda(dy, dx, dw, m, n, k, O1_GEMV_DEFAULT, false, 0),
	    0);
	y = kct_host_copy(dy, (size_t)m * n * 4);
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
	float *p = kct_dev(64);

	(void)state;
	for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
		check_gemv(m, 1, 8);
		check_gemv(m, 37, 896);
		check_gemv(m, 1153, 4864);
	}
	check_gemv(1, 4099, 264);
	assert_int_equal(o1_gemv_bf16_cuda(p, (uint16_t *)p, (uint16_t *)p,
					   O1_GEMV_MAX_ROWS + 1, 1, 8,
					   O1_GEMV_DEFAULT, false, 0),
			 -EINVAL);
	assert_int_equal(o1_gemv_bf16_cuda(p, (uint16_t *)p, (uint16_t *)p, 1,
					   1, 12, O1_GEMV_DEFAULT, false, 0),
			 -EINVAL);
	assert_int_equal(o1_gemv_bf16_cuda(p, (uint16_t *)p + 1, (uint16_t *)p,
					   1, 1, 8, O1_GEMV_DEFAULT, false, 0),
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

	n->x = kct_randv(sz, 3), n->nw = kct_randv(k, 1.5f),
	n->h = malloc(sz * 4);
	assert_int_equal(
	    o1_rmsnorm_cpu(NULL, n->h, n->x, n->nw, m, k, NORM_EPS), 0);
	kct_round_bf16(n->h, sz);
	n->dx = kct_dev_copy(n->x, sz * 4), n->dnw = kct_dev_copy(n->nw, k * 4);
	n->dh = kct_dev(sz * 2);
	assert_int_equal(o1_rmsnorm_cuda(n->dh, n->dx, NULL, n->dnw, NULL, m, k,
					 NORM_EPS, false, 0),
			 0);
	n->hd = kct_host_bf16(n->dh, sz);
	kct_check_close("rmsnorm (fused input)", n->hd, n->h, sz, 8e-3, 1e-6);
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
	float *w = kct_randv((size_t)n * k, 0.1f), *y, *u;
	void *dw;
	float *dy = kct_dev((size_t)m * n * 4),
	      *du = kct_dev((size_t)m * n * 4);

	norm_open(&nc, m, k);
	kct_round_bf16(w, (size_t)n * k);
	dw = kct_dev_bf16(w, (size_t)n * k);
	assert_int_equal(o1_gemv_norm_bf16_cuda(dy, nc.dx, nc.dnw, NORM_EPS, dw,
						m, n, k, O1_GEMV_DEFAULT, pdl,
						kct_stream(pdl)),
			 0);
	assert_int_equal(o1_gemv_bf16_cuda(du, nc.dh, dw, m, n, k,
					   O1_GEMV_DEFAULT, false, 0),
			 0);
	y = kct_host_copy(dy, (size_t)m * n * 4),
	u = kct_host_copy(du, (size_t)m * n * 4);
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
	float *w = kct_randv((size_t)2 * f * k, 0.1f), *got, *un;
	float *g = malloc((size_t)m * f * 4), *u = malloc((size_t)m * f * 4);
	float *ref = malloc((size_t)m * f * 4), *eg = malloc((size_t)m * f * 8);
	void *dw, *dact = kct_dev((size_t)m * f * 2),
		  *dun = kct_dev((size_t)m * f * 2);
	float *dgu = kct_dev((size_t)m * 2 * f * 4);

	norm_open(&nc, m, k);
	kct_round_bf16(w, (size_t)2 * f * k);
	dw = kct_dev_bf16(w, (size_t)2 * f * k);
	assert_int_equal(o1_gemv_norm_swiglu_bf16_cuda(
			     dact, nc.dx, nc.dnw, NORM_EPS, dw, m, f, k,
			     O1_GEMV_DEFAULT, pdl, kct_stream(pdl)),
			 0);
	assert_int_equal(o1_gemv_norm_bf16_cuda(dgu, nc.dx, nc.dnw, NORM_EPS,
						dw, m, 2 * f, k,
						O1_GEMV_DEFAULT, false, 0),
			 0);
	assert_int_equal(
	    o1_swiglu_cuda(dun, dgu, dgu + f, 2 * f, m, f, false, 0), 0);
	got = kct_host_bf16(dact, (size_t)m * f),
	un = kct_host_bf16(dun, (size_t)m * f);
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
	float *x = kct_randv((size_t)m * k, 1),
	      *w = kct_randv((size_t)n * k, 0.1f);
	float *y0 = kct_randv((size_t)m * n, 4), *y, *o;
	void *dx, *dw;
	float *dy, *dout = kct_dev((size_t)m * n * 4);

	kct_round_bf16(x, (size_t)m * k), kct_round_bf16(w, (size_t)n * k);
	dx = kct_dev_bf16(x, (size_t)m * k),
	dw = kct_dev_bf16(w, (size_t)n * k);
	dy = kct_dev_copy(y0, (size_t)m * n * 4);
	assert_int_equal(o1_gemv_add_bf16_cuda(dy, dx, dw, m, n, k,
					       O1_GEMV_DEFAULT, pdl,
					       kct_stream(pdl)),
			 0);
	assert_int_equal(
	    o1_gemv_bf16_cuda(dout, dx, dw, m, n, k, O1_GEMV_DEFAULT, false, 0),
	    0);
	y = kct_host_copy(dy, (size_t)m * n * 4);
	o = kct_host_copy(dout, (size_t)m * n * 4);
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
	float *p = kct_dev(1 << 20);
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
						O1_GEMV_NORM_MAX_K + 8,
						O1_GEMV_DEFAULT, false, 0),
			 -EINVAL);
	assert_int_equal(o1_gemv_norm_bf16_cuda(p, p, p + 1, 1e-5f, b, 1, 1, 8,
						O1_GEMV_DEFAULT, false, 0),
			 -EINVAL); /* weight not 16-byte aligned */
	assert_int_equal(o1_gemv_norm_swiglu_bf16_cuda(
			     b, p, p, 1e-5f, b, O1_GEMV_MAX_ROWS + 1, 1, 8,
			     O1_GEMV_DEFAULT, false, 0),
			 -EINVAL);
	assert_int_equal(o1_gemv_add_bf16_cuda(p, b + 4, b, 1, 1, 8,
					       O1_GEMV_DEFAULT, false, 0),
			 -EINVAL);
	cudaFree(p);
}

/* Launches VARIANT (plain, add, norm rows, swiglu) of M rows with setup
 * U into fresh outputs over shared inputs; the output bytes. */
struct setup_case {
	void *dx;	   /* bf16 (4,K) */
	struct norm_in in; /* f32 rows, norm weight, (2N,K) weights */
	float *y0;	   /* the add variant's starting y (4,N) */
	uint32_t *drows;
	uint32_t n, k;
};

static void *run_setup(const struct setup_case *c, enum o1_gemv_variant v,
		       uint32_t m, struct o1_gemv_setup u, size_t *bytes)
{
	size_t out = (size_t)m * c->n * (v == O1_GEMV_SWIGLU ? 2 : 4);
	void *dy = v == O1_GEMV_ADD ? kct_dev_copy(c->y0, out) : kct_dev(out);
	void *h;
	int err;

	if (v == O1_GEMV_PLAIN)
		err = o1_gemv_bf16_cuda(dy, c->dx, c->in.dw, m, c->n, c->k, u,
					false, 0);
	else if (v == O1_GEMV_ADD)
		err = o1_gemv_add_bf16_cuda(dy, c->dx, c->in.dw, m, c->n, c->k,
					    u, true, kct_stream(true));
	else if (v == O1_GEMV_NORM)
		err = o1_gemv_norm_rows_bf16_cuda(dy, c->in.dx, c->drows,
						  c->in.dnw, EPS, c->in.dw, m,
						  c->n, c->k, u, false, 0);
	else
		err = o1_gemv_norm_swiglu_bf16_cuda(dy, c->in.dx, c->in.dnw,
						    EPS, c->in.dw, m, c->n,
						    c->k, u, false, 0);
	assert_int_equal(err, 0);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	h = kct_host_copy(dy, out);
	cudaFree(dy);
	*bytes = out;
	return h;
}

static void check_setups(uint32_t n, uint32_t k)
{
	static const enum o1_gemv_variant vs[] = {O1_GEMV_PLAIN, O1_GEMV_ADD,
						  O1_GEMV_NORM, O1_GEMV_SWIGLU};
	const uint32_t rows[] = {3, 1, 0, 2};
	float *x = kct_randv((size_t)4 * k, 1);
	struct setup_case c = {kct_dev_bf16(x, (size_t)4 * k),
			       norm_in(4, 2 * n, k),
			       kct_randv((size_t)4 * n, 4),
			       kct_dev_copy(rows, sizeof(rows)),
			       n,
			       k};

	for (size_t v = 0; v < sizeof(vs) / sizeof(vs[0]); v++)
		for (uint32_t m = 1; m <= O1_GEMV_MAX_ROWS; m++) {
			struct o1_gemv_setup su[O1_GEMV_BPS_MAX * 3];
			uint32_t ns = other_setups(vs[v], m, su);
			size_t b0, b1;
			void *ref =
			    run_setup(&c, vs[v], m, O1_GEMV_DEFAULT, &b0);

			for (uint32_t i = 0; i < ns; i++) {
				void *got = run_setup(&c, vs[v], m, su[i], &b1);

				if (memcmp(ref, got, b0))
					fail_msg("variant %d m %u n %u k %u: "
						 "setup %u/%u differs",
						 (int)vs[v], m, n, k, su[i].bps,
						 su[i].pieces);
				free(got);
			}
			free(ref);
		}
	free(x), free(c.y0), cudaFree(c.dx), cudaFree(c.drows);
	norm_free(&c.in);
}

/* Columns past the widest grid's warps: 8 a block, O1_GEMV_BPS_MAX
 * blocks a multiprocessor. */
static uint32_t setups_wide_n(void)
{
	int sms = 0;

	assert_int_equal(cudaDeviceGetAttribute(
			     &sms, cudaDevAttrMultiProcessorCount, 0),
			 cudaSuccess);
	return (uint32_t)sms * 8 * O1_GEMV_BPS_MAX + 37;
}

static void test_setups(void **state)
{
	float *dy = kct_dev(4 * 64 * 4);
	uint16_t *dx = kct_dev(4 * 64 * 2);
	uint8_t p[3];

	(void)state;
	check_setups(37, 896);
	check_setups(300, 2048);
	check_setups(24, 14336); /* input rows not staged from M = 3 */
	/* more units than any grid has warps (8 a block), rows one half
	 * batch covers: the default setup runs gemv2, two batches in flight
	 * a warp (qwen2.5-0.5b's gate/up and head), its halves gemv */
	check_setups(setups_wide_n(), 896);
	/* a row just over one batch, one unit a warp: the default takes the
	 * row in one batch of 20 pieces a lane at one input row (whole_row) */
	check_setups(40, 4864);
	/* refused: too many blocks, pieces not offered, M = 3's half */
	assert_int_equal(o1_gemv_pieces(O1_GEMV_PLAIN, 3, p), 1);
	assert_int_equal(o1_gemv_pieces(O1_GEMV_PLAIN, 0, p), 0);
	assert_int_equal(o1_gemv_pieces(O1_GEMV_VARIANTS, 1, p), 0);
	assert_int_equal(
	    o1_gemv_bf16_cuda(dy, dx, dx, 1, 8, 64,
			      (struct o1_gemv_setup){O1_GEMV_BPS_MAX + 1, 0},
			      false, 0),
	    -EINVAL);
	assert_int_equal(o1_gemv_bf16_cuda(dy, dx, dx, 1, 8, 64,
					   (struct o1_gemv_setup){1, 3}, false,
					   0),
			 -EINVAL);
	o1_gemv_pieces(O1_GEMV_PLAIN, 4, p);
	assert_int_equal(o1_gemv_bf16_cuda(dy, dx, dx, 3, 8, 64,
					   (struct o1_gemv_setup){1, p[1]},
					   false, 0),
			 -EINVAL);
	cudaFree(dy), cudaFree(dx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_products),   cmocka_unit_test(test_norm_rows),
	    cmocka_unit_test(test_swiglu),     cmocka_unit_test(test_rope_kv),
	    cmocka_unit_test(test_errors),     cmocka_unit_test(test_gemv),
	    cmocka_unit_test(test_gemv_fused), cmocka_unit_test(test_setups),
	};

	return kct_main("test_gemv_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

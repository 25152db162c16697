/* rope.cu against its CPU reference (rope.c), alone and fused with the KV
 * write (o1_rope_kv_write_cuda: bias, RoPE of q and k, k and v into the
 * pages) on fresh random inputs (O1_TEST_SEED or the time, printed), every
 * output poisoned with NaN before the launch. Exit 77 without a CUDA device.
 *
 * q and RoPE alone are f32 with the same formula, possibly FMA-contracted
 * by nvcc: within 1e-5 of the row's largest |value|. K and V in the pool
 * are bf16: within one bf16 rounding (8e-3 and 4e-3 relative); no slot
 * but the written ones changes (the rest stay NaN). Bad shapes are
 * refused. QKV rows given as bf16 (o1_rope_kv_write_bf16_cuda) give the
 * bits of f32 rows holding the same values.
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
#include "kernels/rope.h"

/* RoPE alone: x (T,H,D) in place. */
static void check_rope(uint32_t t, uint32_t h, uint32_t d, uint32_t r,
		       float scale)
{
	size_t sz = (size_t)t * h * d;
	float *x = kct_randv(sz, 3), *ref = malloc(sz * 4),
	      *inv = malloc(r * 2), *got;
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
	dx = kct_dev_copy(x, sz * 4), dinv = kct_dev_copy(inv, r / 2 * 4);
	dpos = kct_dev_copy(pos, t * 4);
	assert_int_equal(o1_rope_cuda(dx, dpos, t, h, d, r, dinv, scale, 0), 0);
	got = kct_host_copy(dx, sz * 4);
	kct_check_close("rope", got, ref, sz, 0, 1e-5 * kct_max_abs(ref, sz));
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

/* Fused QKV epilogue: rope(q + bq); rope(k + bk), v + bv into the pages.
 * BF16_IN: the rows rounded to bf16, then also read as bf16. */
static void check_rope_kv(const struct kct_kv_shape *k, uint32_t t, bool bias,
			  bool bf16_in)
{
	struct o1_attn_dims dm = kct_kv_dims(k);
	uint32_t w = (k->hq + 2 * k->hkv) * k->d, qd = k->hq * k->d,
		 kvd = k->hkv * k->d;
	size_t cache = (size_t)k->n_pages * kct_page_stride(k);
	float *qkv = kct_randv((size_t)t * w, 2), *b = kct_randv(w, 1);
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
	if (bf16_in)
		kct_round_bf16(qkv, (size_t)t * w);
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
		struct o1_rope_kv_args a = {
		    kct_dev((size_t)t * qd * 4),
		    kct_dev(cache * 2),
		    kct_dev(cache * 2),
		    kct_dev_copy(qkv, (size_t)t * w * 4),
		    bias ? kct_dev_copy(b, w * 4) : NULL,
		    kct_dev_copy(pos, t * 4),
		    kct_dev_copy(slots, t * 4),
		    kct_dev_copy(inv, k->d * 2),
		    1,
		    t,
		    k->d};

		assert_int_equal(o1_rope_kv_write_cuda(&a, &dm, false, 0), 0);
		gq = kct_host_copy(a.q, (size_t)t * qd * 4);
		gk = kct_host_bf16(a.k_cache, cache);
		gv = kct_host_bf16(a.v_cache, cache);
		if (bf16_in) { /* the same bits from the bf16 rows */
			uint16_t *h = kct_dev_bf16(qkv, (size_t)t * w);
			float *q2, *k2, *v2;

			assert_int_equal(cudaMemset(a.q, 0xff, (size_t)t * qd * 4),
					 cudaSuccess);
			assert_int_equal(
			    o1_rope_kv_write_bf16_cuda(&a, h, &dm, false, 0), 0);
			q2 = kct_host_copy(a.q, (size_t)t * qd * 4);
			k2 = kct_host_bf16(a.k_cache, cache);
			v2 = kct_host_bf16(a.v_cache, cache);
			assert_memory_equal(q2, gq, (size_t)t * qd * 4);
			assert_memory_equal(k2, gk, cache * 4);
			assert_memory_equal(v2, gv, cache * 4);
			free(q2), free(k2), free(v2);
			assert_int_equal(o1_rope_kv_write_bf16_cuda(
					     &a, NULL, &dm, false, 0),
					 -EINVAL);
			cudaFree(h);
		}
		a.rot_dim = k->d + 2;
		assert_int_equal(o1_rope_kv_write_cuda(&a, &dm, false, 0),
				 -EINVAL);
		cudaFree(a.q), cudaFree(a.k_cache), cudaFree(a.v_cache);
		cudaFree((void *)a.qkv), cudaFree((void *)a.bias);
		cudaFree((void *)a.pos), cudaFree((void *)a.slots);
		cudaFree((void *)a.inv_freq);
	}
	kct_check_close("rope_kv q", gq, q, (size_t)t * qd, 0,
			1e-5 * kct_max_abs(q, (size_t)t * qd));
	for (size_t i = 0; i < cache; i++) {
		assert_true(isnan(kc[i]) == isnan(gk[i])); /* no stray write */
		assert_true(isnan(vc[i]) == isnan(gv[i]));
		if (!isnan(kc[i])) {
			kct_check_close("rope_kv k", gk + i, kc + i, 1, 8e-3,
					1e-5);
			kct_check_close("rope_kv v", gv + i, vc + i, 1, 4e-3,
					1e-30);
		}
	}
	free(qkv), free(b), free(q), free(kk), free(v), free(inv), free(kc);
	free(vc), free(gq), free(gk), free(gv), free(pos), free(slots);
}

static void test_rope_kv(void **state)
{
	struct kct_kv_shape a = {14, 2, 64, 16, 3, false},
			    b = {4, 1, 24, 7, 6, false},
			    c = {32, 8, 128, 16, 2, false},
			    /* pages for every row's own slot (5 prime to
			     * the slot count) */
			    d = {32, 8, 128, 16, 13, false},
			    e = {14, 2, 64, 16, 71, false},
			    f = {16, 4, 24, 7, 87, false};

	(void)state;
	check_rope_kv(&a, 9, true, false);
	check_rope_kv(&b, 13, false, false);
	check_rope_kv(&c, 1, true, false);
	check_rope_kv(&a, 9, true, true);
	check_rope_kv(&c, 5, false, true);
	/* rows enough that a row gets fewer blocks than its 256-element
	 * slices (6 of 24), and a block a row (1,100 rows of 1,152) */
	check_rope_kv(&d, 200, true, true);
	check_rope_kv(&e, 1100, false, false);
	/* a head dim that does not divide the block: a round's step crosses
	 * heads (2 blocks a row of 576: 512 = 21 heads of 24 and 8) */
	check_rope_kv(&f, 600, true, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rope),
	    cmocka_unit_test(test_rope_kv),
	};

	return kct_main("test_rope_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

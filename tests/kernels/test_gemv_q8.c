/* gemv_q8: the int8 path's CPU specification (gemv_q8.h) against the f32
 * product on the same block weights (gemv_q.h): within the stated bound
 * for every block type, shapes with K of 32-blocks only (Q8_0, Q4_0,
 * Q5_0: 896, qwen2.5-0.5b's width) and of super-blocks, inputs with
 * outliers; the bound is not slack (a weight unit decoded wrong, e.g. a
 * fifth bit misplaced, exceeds it); bad operands are refused. The device
 * kernels are held bitwise to this specification by test_quant_cuda.
 * The quantized input's layout in device memory (o1_q8_input_cpu) is
 * checked unit by unit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "kernels/gemv_q.h"
#include "kernels/gemv_q8.h"
#include "kernels/quant.h"

static const enum o1_quant_type types[] = {
    O1_QUANT_Q8_0, O1_QUANT_Q4_0, O1_QUANT_Q5_0, O1_QUANT_Q4_K, O1_QUANT_Q6_K};

static uint64_t rng = 11;

static float frand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static uint16_t bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* N rows of K random weights (every 53rd an outlier) in TYPE. */
static uint8_t *weights(enum o1_quant_type type, uint32_t n, uint32_t k)
{
	float *w = malloc((size_t)n * k * sizeof(float));
	uint64_t rb;
	uint8_t *q;

	assert_non_null(w);
	for (size_t i = 0; i < (size_t)n * k; i++)
		w[i] = (i % 53 ? 0.05f : 1.5f) * frand();
	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	q = malloc(rb * n);
	assert_non_null(q);
	assert_int_equal(o1_quant_quantize(type, w, q, (uint64_t)n * k), 0);
	free(w);
	return q;
}

/* Worst |y8 - y| / bound over the outputs; fails past 1. */
static double check(enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k)
{
	uint16_t *x = malloc((size_t)m * k * 2);
	uint8_t *w = weights(type, n, k);
	float *y = malloc((size_t)m * n * 4), *y8 = malloc((size_t)m * n * 4);
	float *b = malloc((size_t)m * n * 4);
	double worst = 0;

	for (size_t i = 0; i < (size_t)m * k; i++)
		x[i] = bf16(i % 29 ? frand() : 8 * frand());
	assert_int_equal(o1_gemv_q_cpu(y, x, w, type, m, n, k, n), 0);
	assert_int_equal(o1_gemv_q8_cpu(y8, x, w, type, m, n, k, n), 0);
	assert_int_equal(o1_gemv_q8_bound_cpu(b, x, w, type, m, n, k), 0);
	for (size_t i = 0; i < (size_t)m * n; i++) {
		double r = fabs((double)y8[i] - y[i]) / b[i];

		if (!(r <= 1))
			fail_msg("%s m %u n %u k %u: output %zu %.9g against "
				 "%.9g, bound %.3g",
				 o1_quant_name(type), m, n, k, i, y8[i], y[i],
				 b[i]);
		worst = r > worst ? r : worst;
	}
	free(x), free(w), free(y), free(y8), free(b);
	return worst;
}

static void test_within_bound(void **state)
{
	(void)state;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		double w = check(types[t], 3, 9, 512);

		w = fmax(w, check(types[t], 1, 4, 2304));
		if (o1_quant_block_elements(types[t]) == 32)
			w = fmax(w, check(types[t], 2, 5, 896));
		printf("%s: worst error %.3f of the bound\n",
		       o1_quant_name(types[t]), w);
	}
}

/* The bound is tight enough to see a wrong decode: Q5_0 with its fifth
 * bits cleared (read as Q4_0's levels around 16) is far outside it. */
static void test_bound_sees_decode_errors(void **state)
{
	enum { M = 2, N = 6, K = 256 };
	uint16_t x[M * K];
	uint8_t *w = weights(O1_QUANT_Q5_0, N, K);
	float y[M * N], y8[M * N], b[M * N];
	int over = 0;

	(void)state;
	for (int i = 0; i < M * K; i++)
		x[i] = bf16(frand());
	assert_int_equal(o1_gemv_q_cpu(y, x, w, O1_QUANT_Q5_0, M, N, K, N), 0);
	for (int blk = 0; blk < N * K / 32; blk++)
		memset(w + 22 * blk + 2, 0, 4);
	assert_int_equal(o1_gemv_q8_cpu(y8, x, w, O1_QUANT_Q5_0, M, N, K, N),
			 0);
	assert_int_equal(o1_gemv_q8_bound_cpu(b, x, w, O1_QUANT_Q5_0, M, N, K),
			 0);
	for (int i = 0; i < M * N; i++)
		over += fabs((double)y8[i] - y[i]) > b[i];
	assert_true(over >= M * N - 1);
	free(w);
}

/* o1_q8_input_cpu's layout (q8_input_dev.h): 2 rows of 40 units (pad 64:
 * a second group of 32 with 8 units), each unit's quants recomputed here
 * from the specification at the top of gemv_q8.h, found at their place
 * (elements 0..15 in the unit's low piece, 16..31 in the piece 32 on),
 * its (d, sum) after the pieces, the units past 40 zero; an all-zero unit
 * has d 0, one with a NaN d NaN. */
static void test_input_layout(void **state)
{
	enum { M = 2, UNITS = 40, PAD = 64, K = 32 * UNITS };
	uint16_t x[M * K];
	size_t bytes = o1_q8_input_bytes(M, K);
	uint8_t *out = malloc(bytes);
	const float *ds = (const float *)(out + (size_t)M * PAD * 2 * 16);

	(void)state;
	assert_int_equal(bytes,
			 (size_t)M * PAD * 2 * 16 + (size_t)M * UNITS * 8);
	for (uint32_t i = 0; i < M * K; i++)
		x[i] = bf16((float)((int)(i * 7 % 33) - 16) / 16);
	for (uint32_t e = 0; e < 32; e++)
		x[K + 3 * 32 + e] = 0; /* row 1, unit 3: zero */
	x[K + 39 * 32 + 5] = 0x7fc0;   /* row 1, unit 39: a NaN */
	memset(out, 0xee, bytes);
	assert_int_equal(o1_q8_input_cpu(out, x, M, K), 0);
	for (uint32_t i = 0; i < M; i++) {
		for (uint32_t u = 0; u < PAD; u++) {
			const uint8_t *lo =
			    out +
			    ((size_t)i * PAD * 2 + u / 32 * 64 + u % 32) * 16;
			float v[32], amax = 0, inv, d;
			int32_t qsum = 0;
			bool nan = false;

			if (u >= UNITS) {
				for (int e = 0; e < 16; e++)
					assert_int_equal(
					    lo[e] | lo[32 * 16 + e], 0);
				continue;
			}
			for (int e = 0; e < 32; e++) {
				uint32_t b =
				    (uint32_t)x[(size_t)i * K + 32 * u + e]
				    << 16;

				memcpy(&v[e], &b, 4);
				amax = fmaxf(amax, fabsf(v[e]));
				nan = nan || v[e] != v[e];
			}
			d = nan ? NAN : amax / 127.0f;
			inv = amax > 0 ? 127.0f / amax : 0.0f;
			for (int e = 0; e < 32; e++) {
				float p = v[e] * inv;
				int32_t q = p != p ? 0 : (int32_t)nearbyintf(p);

				qsum += q;
				assert_int_equal(
				    (int8_t)lo[e < 16 ? e : 32 * 16 + e - 16],
				    q);
			}
			if (nan) {
				assert_true(isnan(ds[2 * (i * UNITS + u)]));
				continue;
			}
			assert_true(ds[2 * (i * UNITS + u)] == d);
			assert_true(ds[2 * (i * UNITS + u) + 1] ==
				    d * (float)qsum);
			if (i == 1 && u == 3)
				assert_true(d == 0.0f && qsum == 0);
		}
	}
	assert_true(isnan(ds[2 * (UNITS + 39)]));
	assert_int_equal(o1_q8_input_cpu(out, x, 1, 48), -EINVAL);
	free(out);
}

static void test_bad_operands(void **state)
{
	uint16_t x[64] = {0};
	uint8_t w[64] = {0};
	float y[4];

	(void)state;
	/* K not whole blocks of Q4_K; not a block type; no rows */
	assert_int_equal(o1_gemv_q8_cpu(y, x, w, O1_QUANT_Q4_K, 1, 1, 64, 1),
			 -EINVAL);
	assert_int_equal(
	    o1_gemv_q8_cpu(y, x, w, (enum o1_quant_type)1, 1, 1, 32, 1),
	    -EINVAL);
	assert_int_equal(o1_gemv_q8_cpu(y, x, w, O1_QUANT_Q5_0, 0, 1, 32, 1),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_within_bound),
	    cmocka_unit_test(test_bound_sees_decode_errors),
	    cmocka_unit_test(test_bad_operands),
	    cmocka_unit_test(test_input_layout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

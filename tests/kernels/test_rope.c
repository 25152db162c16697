/* RoPE: inverse frequencies of every scaling type against constants
 * derived in Python by transformers' formulas evaluated step by step in
 * float32 (struct.pack('f') rounding after each operation); the rotation
 * against a naive double-precision rotation; partial rotary dims. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "common/error.h"
#include "kernels/rope.h"

static void assert_rel(float got, double want, double tol)
{
	if (!(fabs(got - want) <= tol * fabs(want))) {
		print_error("got %.9g want %.9g\n", got, want);
		fail();
	}
}

static void test_default(void **state)
{
	/* theta 1e4, R 8: 1/1e4^(2i/8) = 1, 0.1, 0.01, 0.001 */
	struct o1_rope r = {.theta = 10000, .dim = 8};
	float inv[4], scale;

	(void)state;
	assert_int_equal(o1_rope_inv_freq(&r, NULL, inv, &scale), 0);
	assert_rel(inv[0], 1.0, 0);
	assert_rel(inv[1], 0.1, 1e-6);
	assert_rel(inv[2], 0.01, 1e-6);
	assert_rel(inv[3], 0.001, 1e-6);
	assert_rel(scale, 1.0, 0);
}

static void test_linear(void **state)
{
	struct o1_rope r = {.theta = 1e6f,
			    .dim = 16,
			    .scaling = O1_ROPE_SCALING_LINEAR,
			    .factor = 4};
	/* 1e6^(-2i/16) / 4 */
	static const double want[8] = {1.0,
				       0.17782793939113617,
				       0.03162277862429619,
				       0.005623413249850273,
				       0.0010000000474974513,
				       1.7782794e-4,
				       3.162277425872162e-05,
				       5.62341347176698e-06};
	float inv[8], scale;

	(void)state;
	assert_int_equal(o1_rope_inv_freq(&r, NULL, inv, &scale), 0);
	for (int i = 0; i < 8; i++)
		assert_rel(inv[i], want[i] / 4, 1e-6);
}

/* Llama 3.1's own parameters: theta 5e5, R 128, factor 8, low 1, high 4,
 * original 8192. Indices 29..34 are in the blended band. */
static void test_llama3(void **state)
{
	struct o1_rope r = {.theta = 500000,
			    .dim = 128,
			    .scaling = O1_ROPE_SCALING_LLAMA3,
			    .factor = 8,
			    .low_freq_factor = 1,
			    .high_freq_factor = 4,
			    .original_max_positions = 8192};
	static const int idx[8] = {0, 20, 28, 29, 31, 34, 35, 63};
	static const double want[8] = {1.0,
				       0.016560440883040428,
				       0.0032114461064338684,
				       0.0021665706299245358,
				       0.0008567514596506953,
				       0.0001785077911335975,
				       9.556212171446532e-05,
				       3.068925877869333e-07};
	float inv[64], scale;

	(void)state;
	assert_int_equal(o1_rope_inv_freq(&r, NULL, inv, &scale), 0);
	for (int i = 0; i < 8; i++)
		assert_rel(inv[idx[i]], want[i], 2e-6);
	assert_rel(scale, 1.0, 0);
}

/* YaRN: theta 1e4, R 64, factor 4, original 2048, beta 32/1: correction
 * range [8, 21]; scale 0.1 ln 4 + 1. */
static void test_yarn(void **state)
{
	struct o1_rope r = {.theta = 10000,
			    .dim = 64,
			    .scaling = O1_ROPE_SCALING_YARN,
			    .factor = 4,
			    .original_max_positions = 2048};
	static const int idx[8] = {0, 5, 10, 12, 15, 20, 25, 31};
	static const double want[8] = {1.0,
				       0.23713736236095428,
				       0.049745574593544006,
				       0.024325214326381683,
				       0.00794983934611082,
				       0.0009730085730552673,
				       0.00018747354624792933,
				       3.333803761051968e-05};
	float inv[32], scale;

	(void)state;
	assert_int_equal(o1_rope_inv_freq(&r, NULL, inv, &scale), 0);
	for (int i = 0; i < 8; i++)
		assert_rel(inv[idx[i]], want[i], 2e-6);
	assert_rel(scale, 1.138629436111989, 1e-6);
	r.attn_factor = 0.5f;
	assert_int_equal(o1_rope_inv_freq(&r, NULL, inv, &scale), 0);
	assert_rel(scale, 0.5, 0);
}

static void test_freq_divisors(void **state)
{
	struct o1_rope r = {.theta = 10000,
			    .dim = 8,
			    .scaling = O1_ROPE_SCALING_LLAMA3,
			    .factor = 8};
	const float div[4] = {1, 2, 4, 8};
	float inv[4], scale;

	(void)state;
	assert_int_equal(o1_rope_inv_freq(&r, div, inv, &scale), 0);
	assert_rel(inv[1], 0.05, 1e-6);
	assert_rel(inv[3], 0.000125, 1e-6);
}

static void test_bad_params(void **state)
{
	struct o1_rope r = {.theta = 10000, .dim = 7};
	float inv[4], scale;

	(void)state;
	assert_int_equal(o1_rope_inv_freq(&r, NULL, inv, &scale), -O1_E_CONFIG);
	r.dim = 8, r.scaling = O1_ROPE_SCALING_LLAMA3, r.factor = 8;
	r.low_freq_factor = 4, r.high_freq_factor = 1;
	r.original_max_positions = 8192;
	assert_int_equal(o1_rope_inv_freq(&r, NULL, inv, &scale), -O1_E_CONFIG);
	assert_int_equal(o1_rope_cpu(NULL, inv, NULL, 1, 1, 4, 6, inv, 1),
			 -EINVAL);
}

/* 3 rows, 2 heads, D 10, R 6 (dims 6..9 untouched), scale 1.25. */
static void test_rotation(void **state)
{
	const uint32_t t = 3, h = 2, d = 10, r = 6;
	const int32_t pos[3] = {0, 7, 1000};
	const float inv[3] = {1.0f, 0.1f, 0.003f};
	float x[60], x0[60];

	(void)state;
	for (int i = 0; i < 60; i++)
		x0[i] = x[i] = sinf(i * 0.37f) * 2;
	assert_int_equal(o1_rope_cpu(NULL, x, pos, t, h, d, r, inv, 1.25f), 0);
	for (uint32_t row = 0; row < t; row++)
		for (uint32_t hd = 0; hd < h; hd++) {
			const float *a = x0 + (row * h + hd) * d;
			const float *b = x + (row * h + hd) * d;

			for (uint32_t i = 0; i < r / 2; i++) {
				double ang = (double)((float)pos[row] * inv[i]);
				double c = cos(ang) * 1.25, s = sin(ang) * 1.25;

				assert_true(fabs(b[i] - (a[i] * c -
							 a[i + 3] * s)) < 1e-5);
				assert_true(fabs(b[i + 3] - (a[i + 3] * c +
							     a[i] * s)) < 1e-5);
			}
			for (uint32_t i = r; i < d; i++)
				assert_true(b[i] == a[i]);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default),
	    cmocka_unit_test(test_linear),
	    cmocka_unit_test(test_llama3),
	    cmocka_unit_test(test_yarn),
	    cmocka_unit_test(test_freq_divisors),
	    cmocka_unit_test(test_bad_params),
	    cmocka_unit_test(test_rotation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

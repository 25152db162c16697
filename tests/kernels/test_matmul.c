/* matmul: against a naive double-precision product on odd and aligned
 * shapes; each row bitwise independent of M, of its neighbours and of the
 * thread count (the determinism contract of matmul.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "kernels/matmul.h"

static uint64_t rng = 42;

static float frand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static float *randv(size_t n)
{
	float *v = malloc(n * sizeof(float));

	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = frand();
	return v;
}

/* Tolerance: |y - ref| <= 1e-5 * sum|x w| (f32 accumulation error). */
static void check_shape(struct o1_threads *tp, uint32_t m, uint32_t n,
			uint32_t k, int with_bias)
{
	float *x = randv((size_t)m * k), *w = randv((size_t)n * k);
	float *b = with_bias ? randv(n) : NULL;
	float *y = malloc((size_t)m * n * sizeof(float));

	assert_int_equal(o1_matmul_cpu(tp, y, x, w, b, m, n, k), 0);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			double ref = b ? b[j] : 0, mag = b ? fabs(b[j]) : 0;

			for (uint32_t p = 0; p < k; p++) {
				ref += (double)x[i * k + p] * w[j * k + p];
				mag +=
				    fabs((double)x[i * k + p] * w[j * k + p]);
			}
			assert_true(fabs(y[i * n + j] - ref) <=
				    1e-5 * mag + 1e-30);
		}
	free(x), free(w), free(b), free(y);
}

static void test_against_naive(void **state)
{
	static const uint32_t ks[] = {1, 7, 16, 17, 33, 64, 100, 257};
	static const uint32_t ns[] = {1, 3, 4, 5, 16, 17, 37};
	static const uint32_t ms[] = {1, 2, 4, 5, 9};
	struct o1_threads *tp;

	(void)state;
	assert_int_equal(o1_threads_create(2, &tp), 0);
	for (size_t a = 0; a < sizeof(ks) / sizeof(ks[0]); a++)
		for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++)
			for (size_t c = 0; c < sizeof(ms) / sizeof(ms[0]); c++)
				check_shape(tp, ms[c], ns[b], ks[a],
					    (a + b) & 1);
	o1_threads_destroy(tp);
}

/* Row r of a 13-row product equals the same row computed alone, in any
 * sub-batch, with 1, 2 or 3 threads. */
static void test_rows_independent(void **state)
{
	const uint32_t m = 13, n = 67, k = 131;
	float *x = randv(m * k), *w = randv(n * k), *b = randv(n);
	float *full = malloc(m * n * sizeof(float));
	float *part = malloc(m * n * sizeof(float));
	struct o1_threads *tp[3];

	(void)state;
	for (int t = 0; t < 3; t++)
		assert_int_equal(o1_threads_create(t + 1, &tp[t]), 0);
	assert_int_equal(o1_matmul_cpu(tp[0], full, x, w, b, m, n, k), 0);
	for (uint32_t r0 = 0; r0 < m; r0++)
		for (uint32_t len = 1; r0 + len <= m; len += 3) {
			struct o1_threads *t = tp[(r0 + len) % 3];

			assert_int_equal(
			    o1_matmul_cpu(t, part, x + r0 * k, w, b, len, n, k),
			    0);
			assert_memory_equal(part, full + r0 * n,
					    len * n * sizeof(float));
		}
	for (int t = 0; t < 3; t++)
		o1_threads_destroy(tp[t]);
	free(x), free(w), free(b), free(full), free(part);
}

static void test_bad_args(void **state)
{
	float v = 0;

	(void)state;
	assert_int_equal(o1_matmul_cpu(NULL, &v, &v, &v, NULL, 0, 1, 1),
			 -EINVAL);
	assert_int_equal(o1_matmul_cpu(NULL, &v, NULL, &v, NULL, 1, 1, 1),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_against_naive),
	    cmocka_unit_test(test_rows_independent),
	    cmocka_unit_test(test_bad_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

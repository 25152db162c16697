/* Embedding (f32 and block-quantized tables), RMSNorm, SwiGLU, residual add and the thread pool, against
 * naive formulas in double. Tolerances: 1e-6 relative (one or two f32
 * roundings per element). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "common/error.h"
#include "kernels/embedding.h"
#include "kernels/quant.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"
#include "kernels/threads.h"

static float val(uint32_t i)
{
	return sinf(i * 0.731f + 0.2f) * 3;
}

static void test_embedding(void **state)
{
	float table[5 * 3], out[4 * 3];
	int32_t ids[4] = {4, 0, 4, 2}, bad[2] = {1, 5}, neg[1] = {-1};

	(void)state;
	for (int i = 0; i < 15; i++)
		table[i] = val(i);
	assert_int_equal(o1_embedding_cpu(NULL, out, table, ids, 4, 3, 5), 0);
	for (int t = 0; t < 4; t++)
		assert_memory_equal(out + t * 3, table + ids[t] * 3, 12);
	assert_int_equal(o1_embedding_cpu(NULL, out, table, bad, 2, 3, 5),
			 -O1_E_BOUNDS);
	assert_int_equal(o1_embedding_cpu(NULL, out, table, neg, 1, 3, 5),
			 -O1_E_BOUNDS);
}

/* A Q6_K table: each gathered row is the row's dequantization. */
static void test_embedding_q(void **state)
{
	enum { DIM = 512, VOCAB = 3 };
	static float table[VOCAB * DIM], want[VOCAB * DIM], out[4 * DIM];
	static uint8_t q[VOCAB * 420];
	int32_t ids[4] = {2, 0, 2, 1}, bad[1] = {3};

	(void)state;
	for (int i = 0; i < VOCAB * DIM; i++)
		table[i] = val(i);
	assert_int_equal(
	    o1_quant_quantize(O1_QUANT_Q6_K, table, q, VOCAB * DIM), 0);
	o1_quant_dequantize(O1_QUANT_Q6_K, q, want, VOCAB * DIM);
	assert_int_equal(o1_embedding_q_cpu(NULL, out, q, O1_QUANT_Q6_K, ids,
					    4, DIM, VOCAB),
			 0);
	for (int t = 0; t < 4; t++)
		assert_memory_equal(out + t * DIM, want + ids[t] * DIM,
				    DIM * sizeof(float));
	assert_int_equal(o1_embedding_q_cpu(NULL, out, q, O1_QUANT_Q6_K, bad,
					    1, DIM, VOCAB),
			 -O1_E_BOUNDS);
	assert_int_equal(o1_embedding_q_cpu(NULL, out, q, O1_QUANT_Q6_K, ids,
					    1, 128, VOCAB),
			 -EINVAL);
}

static void test_rmsnorm(void **state)
{
	const uint32_t t = 3, d = 37;
	float x[3 * 37], w[37], out[3 * 37];
	struct o1_threads *tp;

	(void)state;
	for (uint32_t i = 0; i < t * d; i++)
		x[i] = val(i) * (1 + i / d);
	for (uint32_t i = 0; i < d; i++)
		w[i] = 0.5f + val(i + 1000) / 6;
	assert_int_equal(o1_threads_create(2, &tp), 0);
	assert_int_equal(o1_rmsnorm_cpu(tp, out, x, w, t, d, 1e-5f), 0);
	for (uint32_t r = 0; r < t; r++) {
		double ss = 0;

		for (uint32_t i = 0; i < d; i++)
			ss += (double)x[r * d + i] * x[r * d + i];
		for (uint32_t i = 0; i < d; i++) {
			double want = w[i] * x[r * d + i] / sqrt(ss / d + 1e-5);

			assert_true(fabs(out[r * d + i] - want) <=
				    1e-6 * fabs(want) + 1e-7);
		}
	}
	assert_int_equal(o1_rmsnorm_cpu(tp, x, x, w, t, d, 1e-5f), 0);
	assert_memory_equal(x, out, sizeof(out));
	o1_threads_destroy(tp);
}

static void test_swiglu(void **state)
{
	float g[2 * 9], u[2 * 9], out[2 * 9];

	(void)state;
	for (int i = 0; i < 18; i++)
		g[i] = val(i) * 4, u[i] = val(i + 50);
	assert_int_equal(o1_swiglu_cpu(NULL, out, g, u, 2, 9), 0);
	for (int i = 0; i < 18; i++) {
		double want = g[i] / (1 + exp(-(double)g[i])) * u[i];

		assert_true(fabs(out[i] - want) <= 1e-6 * fabs(want) + 1e-7);
	}
}

static void test_residual(void **state)
{
	float x[2 * 5], y[2 * 5], x0[2 * 5];

	(void)state;
	for (int i = 0; i < 10; i++)
		x0[i] = x[i] = val(i), y[i] = val(i + 9);
	assert_int_equal(o1_residual_add_cpu(NULL, x, y, 2, 5), 0);
	for (int i = 0; i < 10; i++)
		assert_true(x[i] == x0[i] + y[i]);
}

static void count_task(void *arg, uint32_t task, uint32_t worker)
{
	(void)worker;
	__atomic_fetch_add((uint32_t *)arg + task, 1, __ATOMIC_RELAXED);
}

static void test_threads(void **state)
{
	uint32_t hits[1000];
	struct o1_threads *tp;

	(void)state;
	assert_int_equal(o1_threads_create(0, &tp), -EINVAL);
	assert_int_equal(o1_threads_create(3, &tp), 0);
	assert_int_equal(o1_threads_count(tp), 3);
	for (int round = 0; round < 50; round++) {
		memset(hits, 0, sizeof(hits));
		o1_threads_run(tp, 1000, count_task, hits);
		for (int i = 0; i < 1000; i++)
			assert_int_equal(hits[i], 1);
	}
	o1_threads_destroy(tp);
	o1_threads_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_embedding),
	    cmocka_unit_test(test_embedding_q),
	    cmocka_unit_test(test_rmsnorm),
	    cmocka_unit_test(test_swiglu),
	    cmocka_unit_test(test_residual),
	    cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

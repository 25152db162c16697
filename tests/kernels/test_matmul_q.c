/* matmul_q: products on block-quantized weights are bitwise the f32
 * product (matmul.h) on the weights' dequantization, for every block type,
 * odd and aligned shapes (K not a multiple of the 256-column chunk, N not
 * of the 4-row group, M across the 64-row pass), with and without bias and
 * with 1 to 3 threads; bad operands are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "kernels/matmul.h"
#include "kernels/matmul_q.h"
#include "kernels/quant.h"

static const enum o1_quant_type types[] = {O1_QUANT_Q8_0, O1_QUANT_Q4_0,
					   O1_QUANT_Q5_0, O1_QUANT_Q4_K,
					   O1_QUANT_Q6_K};

static uint64_t rng = 7;

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

/* Quantized W (N x K of TYPE) and its dequantization into *DEQ. */
static uint8_t *quantized(enum o1_quant_type type, uint32_t n, uint32_t k,
			  float **deq)
{
	float *w = randv((size_t)n * k);
	uint64_t rb;
	uint8_t *q;

	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	q = malloc(rb * n);
	assert_non_null(q);
	assert_int_equal(o1_quant_quantize(type, w, q, (uint64_t)n * k), 0);
	o1_quant_dequantize(type, q, w, (uint64_t)n * k);
	*deq = w;
	return q;
}

static void check(struct o1_threads *tp, enum o1_quant_type type, uint32_t m,
		  uint32_t n, uint32_t k, bool with_bias)
{
	float *deq, *x = randv((size_t)m * k), *b = with_bias ? randv(n) : NULL;
	uint8_t *q = quantized(type, n, k, &deq);
	float *want = malloc((size_t)m * n * sizeof(float));
	float *got = malloc((size_t)m * n * sizeof(float));

	assert_int_equal(o1_matmul_cpu(tp, want, x, deq, b, m, n, k), 0);
	assert_int_equal(o1_matmul_q_cpu(tp, got, x, q, type, b, m, n, k), 0);
	if (memcmp(want, got, (size_t)m * n * sizeof(float)) != 0)
		fail_msg("%s m %u n %u k %u bias %d: not bitwise the f32 "
			 "product",
			 o1_quant_name(type), m, n, k, with_bias);
	free(deq), free(x), free(b), free(q), free(want), free(got);
}

static void test_bitwise_f32_product(void **state)
{
	static const uint32_t ks[] = {256, 512, 768, 1280};
	static const uint32_t ns[] = {1, 3, 4, 7, 16, 37};
	static const uint32_t ms[] = {1, 2, 5, 9, 70};
	struct o1_threads *tp[3];

	(void)state;
	for (int t = 0; t < 3; t++)
		assert_int_equal(o1_threads_create(t + 1, &tp[t]), 0);
	for (size_t ty = 0; ty < sizeof(types) / sizeof(types[0]); ty++)
		for (size_t a = 0; a < sizeof(ks) / sizeof(ks[0]); a++)
			for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++)
				for (size_t c = 0;
				     c < sizeof(ms) / sizeof(ms[0]); c++)
					check(tp[(a + b + c) % 3], types[ty],
					      ms[c], ns[b], ks[a], (b + c) & 1);
	/* K in 32-blocks but not 256-chunks: a short last chunk */
	check(tp[1], O1_QUANT_Q8_0, 3, 5, 288, true);
	check(tp[2], O1_QUANT_Q4_0, 66, 9, 96, false);
	check(tp[0], O1_QUANT_Q5_0, 4, 7, 416, true);
	for (int t = 0; t < 3; t++)
		o1_threads_destroy(tp[t]);
}

static void test_bad_args(void **state)
{
	uint8_t w[210] = {0};
	float v[256] = {0}, y[4];

	(void)state;
	assert_int_equal(
	    o1_matmul_q_cpu(NULL, y, v, w, O1_QUANT_Q8_0, NULL, 0, 1, 32),
	    -EINVAL);
	assert_int_equal(
	    o1_matmul_q_cpu(NULL, y, v, NULL, O1_QUANT_Q8_0, NULL, 1, 1, 32),
	    -EINVAL);
	/* K not a whole number of blocks */
	assert_int_equal(
	    o1_matmul_q_cpu(NULL, y, v, w, O1_QUANT_Q6_K, NULL, 1, 1, 128),
	    -EINVAL);
	/* not a block type (F16) */
	assert_int_equal(o1_matmul_q_cpu(NULL, y, v, w, (enum o1_quant_type)1,
					 NULL, 1, 1, 32),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bitwise_f32_product),
	    cmocka_unit_test(test_bad_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

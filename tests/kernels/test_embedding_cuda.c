/* embedding.cu against its CPU reference (embedding.c) on fresh random
 * inputs (O1_TEST_SEED or the time, printed), every output poisoned with NaN
 * before the launch. Exit 77 without a CUDA device.
 *
 * Exact: the gather copies bf16 rows to f32; an id out of range gives a
 * zero row (no wild read).
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
#include "kernels/embedding.h"
#include "kernels/kernels_cuda.h"

static void check_embedding(uint32_t vocab, uint32_t dim, uint32_t t)
{
	float *table = kct_randv((size_t)vocab * dim, 3), *ref, *got;
	int32_t *ids = malloc(t * 4);
	void *dt, *di, *dout;

	kct_round_bf16(table, (size_t)vocab * dim);
	for (uint32_t i = 0; i < t; i++)
		ids[i] = (int32_t)((kct_frand() + 1) / 2 * (vocab - 1));
	ref = malloc((size_t)t * dim * 4);
	assert_int_equal(o1_embedding_cpu(NULL, ref, table, ids, t, dim, vocab),
			 0);
	dt = kct_dev_bf16(table, (size_t)vocab * dim);
	di = kct_dev_copy(ids, t * 4);
	dout = kct_dev((size_t)t * dim * 4);
	assert_int_equal(o1_embedding_cuda(dout, dt, di, t, dim, vocab, 0), 0);
	got = kct_host_copy(dout, (size_t)t * dim * 4);
	assert_memory_equal(got, ref, (size_t)t * dim * 4);
	free(got);
	ids[0] = (int32_t)vocab; /* out of range: a zero row, no wild read */
	assert_int_equal(cudaMemcpy(di, ids, 4, cudaMemcpyHostToDevice), 0);
	assert_int_equal(o1_embedding_cuda(dout, dt, di, t, dim, vocab, 0), 0);
	got = kct_host_copy(dout, (size_t)dim * 4);
	assert_true(kct_max_abs(got, dim) == 0);
	free(table), free(ids), free(ref), free(got);
	cudaFree(dt), cudaFree(di), cudaFree(dout);
}

static void test_embedding(void **state)
{
	(void)state;
	check_embedding(517, 96, 13);
	check_embedding(4096, 896, 64);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_embedding),
	};

	return kct_main("test_embedding_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

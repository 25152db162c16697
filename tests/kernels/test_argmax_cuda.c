/* argmax.cu against a host scan on fresh random inputs (O1_TEST_SEED or the
 * time, printed), every output poisoned with NaN before the launch. Exit 77
 * without a CUDA device.
 *
 * Exact: the highest value, the lowest id on a tie, a NaN never wins.
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
#include "kernels/kernels_cuda.h"

static void test_argmax(void **state)
{
	uint32_t rows = 6, vocab = 151936;
	float *l = kct_randv((size_t)rows * vocab, 10);
	int32_t *got;
	float *dl;
	int32_t *di = kct_dev(rows * 4);

	(void)state;
	l[5 * (size_t)vocab + 77] = 50, l[5 * (size_t)vocab + 9] = 50; /* tie */
	l[4 * (size_t)vocab + 3] = NAN;
	dl = kct_dev_copy(l, (size_t)rows * vocab * 4);
	assert_int_equal(o1_argmax_cuda(di, dl, rows, vocab, 0), 0);
	got = kct_host_copy(di, rows * 4);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_argmax),
	};

	return kct_main("test_argmax_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

/* convert.cu (the bf16 <-> f32 conversions) against a host rounding on fresh
 * random inputs (O1_TEST_SEED or the time, printed), every output poisoned
 * with NaN before the launch. Exit 77 without a CUDA device.
 *
 * Exact: round to nearest even, checked bit for bit (zeros, an infinity, a
 * denormal among the values), and back to f32 without loss.
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

static void test_convert(void **state)
{
	size_t n = 100003;
	float *src = kct_randv(n, 1000), *back;
	float *ds = kct_dev_copy(src, n * 4), *df = kct_dev(n * 4);
	uint16_t *db = kct_dev(n * 2), *hb;

	(void)state;
	src[0] = 0, src[1] = -0.0f, src[2] = INFINITY, src[3] = 1e-40f;
	assert_int_equal(cudaMemcpy(ds, src, 64, cudaMemcpyHostToDevice), 0);
	assert_int_equal(o1_convert_bf16_from_f32_cuda(db, ds, n, 0), 0);
	assert_int_equal(o1_convert_f32_from_bf16_cuda(df, db, n, 0), 0);
	hb = kct_host_copy(db, n * 2);
	back = kct_host_copy(df, n * 4);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(hb[i], kct_bf16_of(src[i]));
		assert_true(back[i] == kct_f32_of(hb[i]));
	}
	assert_int_equal(o1_convert_bf16_from_f32_cuda(NULL, ds, n, 0),
			 -EINVAL);
	free(src), free(back), free(hb);
	cudaFree(ds), cudaFree(df), cudaFree(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_convert),
	};

	return kct_main("test_convert_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

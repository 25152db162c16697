/* swiglu.cu against its CPU reference (swiglu.c) on fresh random inputs
 * (O1_TEST_SEED or the time, printed), every output poisoned with NaN before
 * the launch. Exit 77 without a CUDA device.
 *
 * The output is rounded to bf16: |gpu - cpu| <= 8e-3 |cpu| + 1e-6 (one
 * bf16 rounding, 2^-8 relative, plus the f32 difference). A row stride
 * too short is refused. The bf16-input kernel (o1_swiglu_bf16_cuda) is
 * held to the same bound against the reference over the same bf16 inputs,
 * on its 16-byte path (F and the stride multiples of 8) and its one
 * element a thread path (odd F, or an input off 16-byte alignment).
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
#include "kernels/swiglu.h"

static void check_swiglu(uint32_t t, uint32_t f)
{
	size_t sz = (size_t)t * 2 * f;
	float *gu = kct_randv(sz, 6), *ref = malloc((size_t)t * f * 4), *got;
	float *g = malloc((size_t)t * f * 4), *u = malloc((size_t)t * f * 4);
	float *dgu = kct_dev_copy(gu, sz * 4);
	void *dout = kct_dev((size_t)t * f * 2);

	for (uint32_t r = 0; r < t; r++) {
		memcpy(g + (size_t)r * f, gu + (size_t)r * 2 * f, f * 4);
		memcpy(u + (size_t)r * f, gu + (size_t)r * 2 * f + f, f * 4);
	}
	assert_int_equal(o1_swiglu_cpu(NULL, ref, g, u, t, f), 0);
	assert_int_equal(
	    o1_swiglu_cuda(dout, dgu, dgu + f, 2 * f, t, f, false, 0), 0);
	got = kct_host_bf16(dout, (size_t)t * f);
	kct_check_close("swiglu", got, ref, (size_t)t * f, 8e-3, 1e-6);
	assert_int_equal(
	    o1_swiglu_cuda(dout, dgu, dgu + f, f - 1, t, f, false, 0), -EINVAL);
	free(gu), free(ref), free(got), free(g), free(u);
	cudaFree(dgu), cudaFree(dout);
}

/* o1_swiglu_bf16_cuda over T rows of [gate | up] bf16 (2F + PAD a row),
 * the device buffer offset by SHIFT elements. */
static void check_swiglu_bf16(uint32_t t, uint32_t f, uint32_t pad,
			      uint32_t shift)
{
	uint32_t ld = 2 * f + pad;
	size_t sz = (size_t)t * ld;
	float *gu = kct_randv(sz, 6), *ref = malloc((size_t)t * f * 4), *got;
	float *g = malloc((size_t)t * f * 4), *u = malloc((size_t)t * f * 4);
	uint16_t *hb = malloc((sz + shift) * 2), *dgu;
	void *dout = kct_dev((size_t)t * f * 2);

	kct_round_bf16(gu, sz);
	for (size_t i = 0; i < sz; i++)
		hb[shift + i] = kct_bf16_of(gu[i]);
	dgu = (uint16_t *)kct_dev_copy(hb, (sz + shift) * 2) + shift;
	for (uint32_t r = 0; r < t; r++) {
		memcpy(g + (size_t)r * f, gu + (size_t)r * ld, f * 4);
		memcpy(u + (size_t)r * f, gu + (size_t)r * ld + f, f * 4);
	}
	assert_int_equal(o1_swiglu_cpu(NULL, ref, g, u, t, f), 0);
	assert_int_equal(
	    o1_swiglu_bf16_cuda(dout, dgu, dgu + f, ld, t, f, false, 0), 0);
	got = kct_host_bf16(dout, (size_t)t * f);
	kct_check_close("swiglu_bf16", got, ref, (size_t)t * f, 8e-3, 1e-6);
	assert_int_equal(o1_swiglu_bf16_cuda(dout, dgu, dgu + f, f - 1, t, f,
					     false, 0),
			 -EINVAL);
	free(gu), free(ref), free(got), free(g), free(u), free(hb);
	cudaFree(dgu - shift), cudaFree(dout);
}

static void test_swiglu(void **state)
{
	(void)state;
	check_swiglu(1, 4864);
	check_swiglu(9, 131);
}

static void test_swiglu_bf16(void **state)
{
	(void)state;
	check_swiglu_bf16(1, 4864, 0, 0);
	check_swiglu_bf16(37, 1024, 8, 0);
	check_swiglu_bf16(9, 131, 0, 0);
	check_swiglu_bf16(5, 512, 0, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_swiglu),
	    cmocka_unit_test(test_swiglu_bf16),
	};

	return kct_main("test_swiglu_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

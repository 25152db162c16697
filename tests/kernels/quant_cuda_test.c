/* Block-format weights for the CUDA tests (quant_cuda_test.h). */
#include "quant_cuda_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "kernel_cuda_test.h"

uint8_t *qct_random_blocks(enum o1_quant_type type, uint64_t n)
{
	float *x = malloc(n * sizeof(float) + 1);
	uint64_t bytes;
	uint8_t *q;

	assert_int_equal(o1_quant_row_bytes(type, n, &bytes), 0);
	q = malloc(bytes + 1);
	assert_non_null(x);
	assert_non_null(q);
	for (uint64_t i = 0; i < n; i++)
		x[i] = kct_frand() * (i / 256 % 3 == 0 ? 0.02f : 3.0f);
	assert_int_equal(o1_quant_quantize(type, x, q, n), 0);
	free(x);
	return q;
}

/* CPU reference of gemv_q.cu (gemv_q.h): each bf16 input row widened to
 * f32, then matmul_q.h's product into a row buffer, copied to its place in
 * the LDY-strided output. */
#include "gemv_q.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "matmul_q.h"

int o1_gemv_q_cpu(float *y, const uint16_t *x, const void *w,
		  enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		  uint32_t ldy)
{
	float *xf, *row;
	uint64_t rb;
	int err = 0;

	if (!y || !x || !w || !m || !n || ldy < n ||
	    o1_quant_row_bytes(type, k, &rb)) {
		o1_err("gemv_q: bad operands: type %u m %u n %u k %u ldy %u",
		       (unsigned)type, m, n, k, ldy);
		return -EINVAL;
	}
	xf = malloc((size_t)k * sizeof(float));
	row = malloc((size_t)n * sizeof(float));
	if (!xf || !row)
		err = -ENOMEM;
	for (uint32_t i = 0; !err && i < m; i++) {
		for (uint32_t c = 0; c < k; c++) {
			uint32_t bits = (uint32_t)x[(size_t)i * k + c] << 16;

			memcpy(&xf[c], &bits, sizeof(float));
		}
		err = o1_matmul_q_cpu(NULL, row, xf, w, type, NULL, 1, n, k);
		if (!err)
			memcpy(y + (size_t)i * ldy, row, n * sizeof(float));
	}
	free(xf);
	free(row);
	return err;
}

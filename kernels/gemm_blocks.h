/* What the tensor-core products over GGUF block weights (gemm_qp.cu,
 * gemm_qi8.cu) share, for the .cu files:
 *
 *   qb_raw<TYPE>   a weight row's bytes for 256 elements of K as those
 *                  kernels copy them with cp.async: BYTES (8 blocks of
 *                  Q8_0 / Q4_0, a super-block of Q4_K / Q6_K), covered
 *                  at any even offset by PIECES of 16 bytes, an odd
 *                  number so that rows 8 apart do not share banks; LD the
 *                  pitch of a row in shared memory;
 *   qb_zero_launch y's M x N outputs (row stride LDY) zeroed, for the two
 *                  halves of a split K to add into atomically.
 */
#ifndef O1_GEMM_BLOCKS_H
#define O1_GEMM_BLOCKS_H

#include <stdint.h>

#include "cuda_launch.h"
#include "quant.h"

template <int TYPE> struct qb_raw {
	static constexpr uint32_t bytes =
	    TYPE == O1_QUANT_Q8_0   ? 8 * O1_QUANT_Q8_0_BYTES
	    : TYPE == O1_QUANT_Q4_0 ? 8 * O1_QUANT_Q4_0_BYTES
	    : TYPE == O1_QUANT_Q4_K ? O1_QUANT_Q4_K_BYTES
				    : O1_QUANT_Q6_K_BYTES;
	static constexpr uint32_t pieces = ((bytes + 15) / 16 + 1) | 1;
	static constexpr uint32_t ld = 16 * pieces;
};

static __global__ void __launch_bounds__(256)
    qb_zero(float *y, uint32_t m, uint32_t n, uint32_t ldy)
{
	uint64_t total = (uint64_t)m * n;

	o1_pdl_wait();
	o1_pdl_trigger();
	for (uint64_t i = (uint64_t)blockIdx.x * 256 + threadIdx.x; i < total;
	     i += (uint64_t)gridDim.x * 256)
		y[i / n * ldy + i % n] = 0.0f;
}

/* NAME: the launch's name in errors. */
static inline int qb_zero_launch(const char *name, float *y, uint32_t m,
				 uint32_t n, uint32_t ldy, bool pdl,
				 cudaStream_t stream)
{
	uint64_t total = (uint64_t)m * n;
	unsigned blocks =
	    (unsigned)((total + 255) / 256 < 1024 ? (total + 255) / 256 : 1024);

	return O1_CUDA_LAUNCH(name, qb_zero, dim3(blocks), dim3(256), 0,
			      stream, pdl, y, m, n, ldy);
}

#endif

/* What the tensor-core products over GGUF block weights (gemm_qp.cu,
 * gemm_qi8.cu, gemm_qw.cu) share, for the .cu files:
 *
 *   qb_raw<TYPE>   a weight row's bytes for 256 elements of K as those
 *                  kernels copy them with cp.async: BYTES (8 blocks of
 *                  Q8_0 / Q4_0 / Q5_0, a super-block of Q4_K / Q6_K;
 *                  any other type does not compile), covered
 *                  at any even offset by PIECES of 16 bytes, an odd
 *                  number so that rows 8 apart do not share banks; LD the
 *                  pitch of a row in shared memory;
 *   qb_issue_rows  those copies for a tile of weight rows (gemm_qi8.cu),
 *                  qb_row where a row's bytes then sit;
 *   qb_zero_launch y's M x N outputs (row stride LDY) zeroed, for the two
 *                  halves of a split K to add into atomically.
 */
#ifndef O1_GEMM_BLOCKS_H
#define O1_GEMM_BLOCKS_H

#include <stdint.h>

#include "cuda_launch.h"
#include "mma_dev.h"
#include "quant.h"

template <int TYPE> struct qb_raw {
	static constexpr uint32_t bytes =
	    TYPE == O1_QUANT_Q8_0   ? 8 * O1_QUANT_Q8_0_BYTES
	    : TYPE == O1_QUANT_Q4_0 ? 8 * O1_QUANT_Q4_0_BYTES
	    : TYPE == O1_QUANT_Q5_0 ? 8 * O1_QUANT_Q5_0_BYTES
	    : TYPE == O1_QUANT_Q4_K ? O1_QUANT_Q4_K_BYTES
	    : TYPE == O1_QUANT_Q6_K ? O1_QUANT_Q6_K_BYTES
				    : 0;
	static_assert(bytes, "no raw tile for this block type");
	static constexpr uint32_t pieces = ((bytes + 15) / 16 + 1) | 1;
	static constexpr uint32_t ld = 16 * pieces;
};

/* cp.async copies of step J's bytes (256 elements of K) of weight rows R0
 * .. R0 + BM of W (N rows of RB bytes; rows past N left alone) into DST,
 * a row every qb_raw<TYPE>::ld bytes: the 16-byte pieces that cover the
 * row's bytes, so that they sit at the row's offset within its first
 * piece (qb_row); a piece past the matrix's last byte is cut there. By
 * THREADS threads (all of the block's). */
template <int TYPE, int BM, int THREADS>
static __device__ __forceinline__ void qb_issue_rows(uint8_t *dst,
						     const uint8_t *w,
						     uint64_t rb, uint32_t n,
						     uint32_t r0, uint32_t j)
{
	constexpr uint32_t P = qb_raw<TYPE>::pieces, SB = qb_raw<TYPE>::bytes;
	uint64_t at = (uint64_t)j * SB;
	const uint8_t *end = w + (uint64_t)n * rb;

#pragma unroll 4
	for (uint32_t p = threadIdx.x; p < BM * P; p += THREADS) {
		uint32_t r = p / P, c = p % P;
		const uint8_t *s = w + (uint64_t)(r0 + r) * rb + at;
		const uint8_t *s0 =
		    (const uint8_t *)((uintptr_t)s & ~(uintptr_t)15) + 16 * c;

		if (r0 + r < n && s0 < s + SB)
			mma_cp16(dst + r * qb_raw<TYPE>::ld + 16 * c, s0,
				 end - s0 < 16 ? (uint32_t)(end - s0) : 16);
	}
}

/* Weight row R0 + R's bytes of step J in the copy at ST (qb_issue_rows). */
template <int TYPE>
static __device__ __forceinline__ const uint8_t *
qb_row(const uint8_t *st, const uint8_t *w, uint64_t rb, uint32_t r0,
       uint32_t r, uint32_t j)
{
	return st + r * qb_raw<TYPE>::ld +
	       ((uintptr_t)(w + (uint64_t)(r0 + r) * rb +
			    (uint64_t)j * qb_raw<TYPE>::bytes) &
		15);
}

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

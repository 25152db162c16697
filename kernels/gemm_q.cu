/* The tensor-core product over weights kept in a GGUF block format, for
 * more rows than the decode product takes (prefill, batched decode):
 *
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . bf16(dequant(w)) (N,K)^T
 *
 * A block computes a tile of GQ_BN rows of x (tokens) by GQ_BM rows of w
 * (outputs), GQ_BK elements of K at a time: its threads decode the tile's
 * weight units (quant_dev.h's qd_unit: quant.h's values, each rounded to
 * bf16 to nearest even, the values o1_quant_dequantize_bf16_cuda writes)
 * into shared memory, copy the x tile there in 16-byte pieces, and four
 * warps multiply them with mma.sync m16n8k16 (mma_dev.h), each a 32x32
 * piece of the tile, accumulating in f32 registers across all of K. A
 * weight tile is decoded once per token tile, so the weights are read
 * from memory once per ceil(M / GQ_BN) (from L2 after the first: the
 * blocks of one weight tile are consecutive in the launch order).
 *
 * Rows past M and past N, and units past K (K a multiple of 32 but not of
 * GQ_BK), are zeros in shared memory and never written out. Accumulation
 * in f32 over K in steps of 16 products: the difference from an exact
 * sum of the same bf16 products is bounded by the tests
 * (tests/kernels/test_gemm_q_cuda.c).
 * Invariants: x 16-byte aligned, K a multiple of 32 (256 for the K
 * types), w aligned as quant.cu's SRC, LDY >= N; fewer than 2^16 weight
 * tiles (N < 4M).
 */
#include <errno.h>
#include <stdint.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "mma_dev.h"
#include "quant_dev.h"

extern "C" {
#include "common/log.h"
}

#define GQ_BM	   64 /* weight rows (outputs) a block */
#define GQ_BN	   64 /* x rows (tokens) a block */
#define GQ_BK	   64 /* elements of K a step: two units */
#define GQ_THREADS 128
/* shared rows padded by 16 bytes: ldmatrix's 8 rows of a phase, 144
 * bytes apart, fall on distinct banks */
#define GQ_LD (GQ_BK + 8)

/* The weight tile's step KB: thread T decodes unit 2 KB + T % 2 of row
 * T / 2 of the tile (the two units of a row are adjacent threads, so a
 * warp reads 16 rows' consecutive bytes), bf16 into WS. */
template <int TYPE>
static __device__ __forceinline__ void
gq_load_w(uint16_t (*ws)[GQ_LD], const uint8_t *w, uint64_t row_bytes,
	  uint32_t r0, uint32_t n, uint32_t units, uint32_t kb)
{
	uint32_t t = threadIdx.x, r = t / 2, u = 2 * kb + t % 2;
	uint4 *dst = (uint4 *)&ws[r][32 * (t % 2)];
	float v[32];

	if (r0 + r >= n || u >= units) {
#pragma unroll
		for (int c = 0; c < 4; c++)
			dst[c] = make_uint4(0, 0, 0, 0);
		return;
	}
	qd_unit<TYPE>(w + (size_t)(r0 + r) * row_bytes, u, v);
#pragma unroll
	for (int c = 0; c < 4; c++) {
		uint32_t p[4];

#pragma unroll
		for (int e = 0; e < 4; e++)
			p[e] = qd_to_bf16(v[8 * c + 2 * e]) |
			       (uint32_t)qd_to_bf16(v[8 * c + 2 * e + 1]) << 16;
		dst[c] = make_uint4(p[0], p[1], p[2], p[3]);
	}
}

/* The x tile's step KB (GQ_BN rows of GQ_BK elements, 8 pieces of 16
 * bytes a row) into XS; zeros past M and K. */
static __device__ __forceinline__ void gq_load_x(uint16_t (*xs)[GQ_LD],
						 const uint16_t *x, uint32_t m0,
						 uint32_t m, uint32_t k,
						 uint32_t kb)
{
#pragma unroll
	for (int i = 0; i < GQ_BN * GQ_BK / 8 / GQ_THREADS; i++) {
		uint32_t p = threadIdx.x + GQ_THREADS * i, r = p / 8,
			 c = kb * GQ_BK + 8 * (p % 8);
		uint4 v = make_uint4(0, 0, 0, 0);

		if (m0 + r < m && c < k)
			v = *(const uint4 *)(x + (size_t)(m0 + r) * k + c);
		*(uint4 *)&xs[r][8 * (p % 8)] = v;
	}
}

/* Grid: (token tiles, weight tiles); GQ_THREADS threads. Warp q computes
 * weight rows 32 (q % 2) .. + 32 by tokens 32 (q / 2) .. + 32 of the tile:
 * two 16-row A fragments by four 8-token B fragments. */
template <int TYPE>
static __global__ void __launch_bounds__(GQ_THREADS)
    gemm_q(float *y, const uint16_t *x, const uint8_t *w, uint32_t m,
	   uint32_t n, uint32_t k, uint32_t ldy, uint64_t row_bytes)
{
	__shared__ uint4 ws4[GQ_BM * GQ_LD * 2 / 16];
	__shared__ uint4 xs4[GQ_BN * GQ_LD * 2 / 16];
	uint16_t (*ws)[GQ_LD] = (uint16_t (*)[GQ_LD])ws4;
	uint16_t (*xs)[GQ_LD] = (uint16_t (*)[GQ_LD])xs4;
	uint32_t m0 = blockIdx.x * GQ_BN, r0 = blockIdx.y * GQ_BM;
	uint32_t lane = threadIdx.x % 32, q = threadIdx.x / 32;
	uint32_t wr = 32 * (q % 2), wn = 32 * (q / 2);
	uint32_t units = k / 32, steps = (k + GQ_BK - 1) / GQ_BK;
	float acc[2][4][4] = {};

	o1_pdl_wait();
	o1_pdl_trigger();
	for (uint32_t kb = 0; kb < steps; kb++) {
		__syncthreads(); /* the previous step's reads are done */
		gq_load_w<TYPE>(ws, w, row_bytes, r0, n, units, kb);
		gq_load_x(xs, x, m0, m, k, kb);
		__syncthreads();
#pragma unroll
		for (int k16 = 0; k16 < GQ_BK; k16 += 16) {
			uint32_t a[2][4], b[4][2];

			/* A: matrices (rows 0-7, 8-15) x (k 0-7, 8-15) */
#pragma unroll
			for (int i = 0; i < 2; i++)
				mma_ldsm_x4(&ws[wr + 16 * i + lane % 16]
					       [k16 + 8 * (lane / 16)],
					    a[i]);
			/* B: tokens 0-7 (k 0-7, 8-15), tokens 8-15 (...) */
#pragma unroll
			for (int j = 0; j < 2; j++) {
				uint32_t r[4];

				mma_ldsm_x4(&xs[wn + 16 * j + lane % 8 +
						8 * (lane / 16)]
					       [k16 + 8 * (lane / 8 % 2)],
					    r);
				b[2 * j][0] = r[0], b[2 * j][1] = r[1];
				b[2 * j + 1][0] = r[2], b[2 * j + 1][1] = r[3];
			}
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					mma_bf16(acc[i][j], a[i], b[j]);
		}
	}
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				uint32_t row = r0 + wr + 16 * i + lane / 4 +
					       8 * (e / 2),
					 tok = m0 + wn + 8 * j +
					       2 * (lane % 4) + e % 2;

				if (row < n && tok < m)
					y[(size_t)tok * ldy + row] =
					    acc[i][j][e];
			}
}

template <int TYPE>
static int launch(float *y, const uint16_t *x, const void *w, uint32_t m,
		  uint32_t n, uint32_t k, uint32_t ldy, bool pdl,
		  cudaStream_t stream)
{
	uint64_t rb = 0;
	dim3 grid((m + GQ_BN - 1) / GQ_BN, (n + GQ_BM - 1) / GQ_BM);

	o1_quant_row_bytes(TYPE, k, &rb);
	return O1_CUDA_LAUNCH("gemm_q", gemm_q<TYPE>, grid, dim3(GQ_THREADS),
			      0, stream, pdl, y, x, (const uint8_t *)w, m, n, k,
			      ldy, rb);
}

extern "C" bool o1_gemm_q_fits(enum o1_quant_type type, uint32_t n,
			       uint32_t k)
{
	uint32_t per = o1_quant_block_elements(type);

	return per && k && k % per == 0 && k % 32 == 0 &&
	       (n + GQ_BM - 1) / GQ_BM <= 65535;
}

extern "C" int o1_gemm_q_cuda(float *y, const uint16_t *x, const void *w,
			      enum o1_quant_type type, uint32_t m, uint32_t n,
			      uint32_t k, uint32_t ldy, bool pdl,
			      cudaStream_t stream)
{
	if (!y || !x || !w || !n || ldy < n || !o1_gemm_q_fits(type, n, k) ||
	    (uintptr_t)x % 16 || !o1_quant_dev_aligned(type, w)) {
		o1_err("gemm_q: bad operands: type %u m %u n %u k %u ldy %u",
		       (unsigned)type, m, n, k, ldy);
		return -EINVAL;
	}
	if (!m)
		return 0;
	switch (type) {
	case O1_QUANT_Q8_0:
		return launch<O1_QUANT_Q8_0>(y, x, w, m, n, k, ldy, pdl,
					     stream);
	case O1_QUANT_Q4_0:
		return launch<O1_QUANT_Q4_0>(y, x, w, m, n, k, ldy, pdl,
					     stream);
	case O1_QUANT_Q4_K:
		return launch<O1_QUANT_Q4_K>(y, x, w, m, n, k, ldy, pdl,
					     stream);
	default:
		return launch<O1_QUANT_Q6_K>(y, x, w, m, n, k, ldy, pdl,
					     stream);
	}
}

/* The tensor-core product over weights kept in a GGUF block format, for
 * more rows than the decode product takes (prefill, batched decode):
 *
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . bf16(dequant(w)) (N,K)^T
 *
 * A block computes a tile of BN rows of x (tokens: 128, or 64 where 128
 * would leave the GPU too few blocks) by GQ_BM rows of w (outputs), one
 * 32-element unit of K a step: its threads decode the tile's weight units
 * (quant_dev.h's qd_head/qd_octet: quant.h's values, each rounded to bf16
 * to nearest even, the values o1_quant_dequantize_bf16_cuda writes) into
 * shared memory, copy the x tile there in 16-byte pieces, and four warps
 * multiply them with mma.sync m16n8k16 (mma_dev.h), each a 32 x BN/2
 * piece of the tile, accumulating in f32 registers across all of K; two
 * stages of shared tiles, so that a step's loads overlap the previous
 * step's products. A weight tile is decoded once per token tile, so the
 * weights are read from memory once per ceil(M / BN) (from L2 after the
 * first: the blocks of one weight tile are consecutive in the launch
 * order).
 *
 * Rows past M and past N are zeros in shared memory and never written
 * out. Accumulation in f32 over K in steps of 16 products: the difference
 * from an exact sum of the same bf16 products is bounded by the tests
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
#define GQ_BK	   32 /* elements of K a step: one unit */
#define GQ_THREADS 128
/* shared rows padded by 16 bytes: ldmatrix's 8 rows of a phase, 80 bytes
 * apart, fall on distinct banks */
#define GQ_LD (GQ_BK + 8)
/* a launch of token tiles of 128 when it still makes this many blocks
 * (two waves or more of 4 warps a multiprocessor on an H200's 132), of
 * 64 otherwise */
#define GQ_WIDE_BLOCKS 256

/* Half the weight tile's unit KB: thread T decodes octets 2 (T % 2) and
 * 2 (T % 2) + 1 of unit KB of row T / 2 (quant_dev.h's qd_octet: no
 * integer conversions; each value times its scale is qd_unit's, exactly)
 * to bf16 in WS. */
template <int TYPE>
static __device__ __forceinline__ void gq_load_w(uint16_t (*ws)[GQ_LD],
						 const uint8_t *w,
						 uint64_t row_bytes,
						 uint32_t r0, uint32_t n,
						 uint32_t kb)
{
	uint32_t t = threadIdx.x, r = t / 2;

	if (r0 + r >= n) {
		*(uint4 *)&ws[r][16 * (t % 2)] = make_uint4(0, 0, 0, 0);
		*(uint4 *)&ws[r][16 * (t % 2) + 8] = make_uint4(0, 0, 0, 0);
		return;
	}
	qd_unit_head h = qd_head<TYPE>(w + (size_t)(r0 + r) * row_bytes, kb);
#pragma unroll
	for (int i = 0; i < 2; i++) {
		int o = 2 * (t % 2) + i;
		float v[8], sc = qd_scale<TYPE>(h, o);
		uint32_t p[4];

		qd_octet<TYPE>(h, o, v);
#pragma unroll
		for (int e = 0; e < 4; e++)
			p[e] = mma_pack_bf16(__fmul_rn(v[2 * e], sc),
					     __fmul_rn(v[2 * e + 1], sc));
		*(uint4 *)&ws[r][8 * o] = make_uint4(p[0], p[1], p[2], p[3]);
	}
}

/* The x tile's step KB (BN rows of GQ_BK elements, 4 pieces of 16 bytes a
 * row) into registers V; zeros past M. */
template <int BN>
static __device__ __forceinline__ void gq_fetch_x(uint4 (&v)[BN / 32],
						  const uint16_t *x, uint32_t m0,
						  uint32_t m, uint32_t k,
						  uint32_t kb)
{
#pragma unroll
	for (int i = 0; i < BN / 32; i++) {
		uint32_t p = threadIdx.x + GQ_THREADS * i, r = p / 4;

		v[i] = make_uint4(0, 0, 0, 0);
		if (m0 + r < m)
			v[i] = *(const uint4 *)(x + (size_t)(m0 + r) * k +
						kb * GQ_BK + 8 * (p % 4));
	}
}

template <int BN>
static __device__ __forceinline__ void gq_store_x(uint16_t (*xs)[GQ_LD],
						  const uint4 (&v)[BN / 32])
{
#pragma unroll
	for (int i = 0; i < BN / 32; i++) {
		uint32_t p = threadIdx.x + GQ_THREADS * i;

		*(uint4 *)&xs[p / 4][8 * (p % 4)] = v[i];
	}
}

/* Grid: (token tiles of BN, weight tiles); GQ_THREADS threads. Warp q
 * computes weight rows 32 (q % 2) .. + 32 by tokens BN/2 (q / 2) .. +
 * BN/2 of the tile: two 16-row A fragments by BN/16 8-token B fragments.
 * Two stages of shared tiles: while the warps multiply step KB's, they
 * fetch step KB + 1's into the other (x first into registers, its loads
 * in flight during the products), one barrier a step. */
template <int TYPE, int BN>
static __global__ void __launch_bounds__(GQ_THREADS)
    gemm_q(float *y, const uint16_t *x, const uint8_t *w, uint32_t m,
	   uint32_t n, uint32_t k, uint32_t ldy, uint64_t row_bytes)
{
	constexpr int NJ = BN / 16; /* 8-token fragments a warp */
	__shared__ uint4 ws4[2 * GQ_BM * GQ_LD * 2 / 16];
	__shared__ uint4 xs4[2 * BN * GQ_LD * 2 / 16];
	uint16_t (*ws)[GQ_BM][GQ_LD] = (uint16_t (*)[GQ_BM][GQ_LD])ws4;
	uint16_t (*xs)[BN][GQ_LD] = (uint16_t (*)[BN][GQ_LD])xs4;
	uint32_t m0 = blockIdx.x * BN, r0 = blockIdx.y * GQ_BM;
	uint32_t lane = threadIdx.x % 32, q = threadIdx.x / 32;
	uint32_t wr = 32 * (q % 2), wn = (BN / 2) * (q / 2);
	uint32_t steps = k / GQ_BK;
	float acc[2][NJ][4] = {};
	uint4 xv[BN / 32];

	o1_pdl_wait();
	o1_pdl_trigger();
	gq_fetch_x<BN>(xv, x, m0, m, k, 0);
	gq_load_w<TYPE>(ws[0], w, row_bytes, r0, n, 0);
	gq_store_x<BN>(xs[0], xv);
	__syncthreads();
	for (uint32_t kb = 0; kb < steps; kb++) {
		uint32_t s = kb % 2;

		if (kb + 1 < steps)
			gq_fetch_x<BN>(xv, x, m0, m, k, kb + 1);
#pragma unroll
		for (int k16 = 0; k16 < GQ_BK; k16 += 16) {
			uint32_t a[2][4], b[NJ][2];

			/* A: matrices (rows 0-7, 8-15) x (k 0-7, 8-15) */
#pragma unroll
			for (int i = 0; i < 2; i++)
				mma_ldsm_x4(&ws[s][wr + 16 * i + lane % 16]
					       [k16 + 8 * (lane / 16)],
					    a[i]);
			/* B: tokens 0-7 (k 0-7, 8-15), tokens 8-15 (...) */
#pragma unroll
			for (int j = 0; j < NJ / 2; j++) {
				uint32_t r[4];

				mma_ldsm_x4(&xs[s][wn + 16 * j + lane % 8 +
						   8 * (lane / 16)]
					       [k16 + 8 * (lane / 8 % 2)],
					    r);
				b[2 * j][0] = r[0], b[2 * j][1] = r[1];
				b[2 * j + 1][0] = r[2], b[2 * j + 1][1] = r[3];
			}
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < NJ; j++)
					mma_bf16(acc[i][j], a[i], b[j]);
		}
		/* stage s ^ 1 was last read before the previous barrier */
		if (kb + 1 < steps) {
			gq_load_w<TYPE>(ws[s ^ 1], w, row_bytes, r0, n, kb + 1);
			gq_store_x<BN>(xs[s ^ 1], xv);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
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

/* The token tile width for M rows over N weight rows. */
static int gq_width(uint32_t m, uint32_t n)
{
	uint64_t rt = (n + GQ_BM - 1) / GQ_BM, wide = (m + 127) / 128;

	return m > 64 && wide * rt >= GQ_WIDE_BLOCKS ? 128 : 64;
}

template <int TYPE, int BN>
static int launch(float *y, const uint16_t *x, const void *w, uint32_t m,
		  uint32_t n, uint32_t k, uint32_t ldy, bool pdl,
		  cudaStream_t stream)
{
	uint64_t rb = 0;
	dim3 grid((m + BN - 1) / BN, (n + GQ_BM - 1) / GQ_BM);

	o1_quant_row_bytes(TYPE, k, &rb);
	return O1_CUDA_LAUNCH("gemm_q", gemm_q<TYPE, BN>, grid,
			      dim3(GQ_THREADS), 0, stream, pdl, y, x,
			      (const uint8_t *)w, m, n, k, ldy, rb);
}

template <int TYPE>
static int launch_w(int bn, float *y, const uint16_t *x, const void *w,
		    uint32_t m, uint32_t n, uint32_t k, uint32_t ldy, bool pdl,
		    cudaStream_t stream)
{
	return (bn == 128 ? launch<TYPE, 128> : launch<TYPE, 64>)(
	    y, x, w, m, n, k, ldy, pdl, stream);
}

/* o1_gemm_q_cuda's launch with token tiles of BN (64 or 128; tools/gpu/
 * bench_gemm_q.cu times both). Operands checked by the caller. */
static int gq_dispatch(int bn, float *y, const uint16_t *x, const void *w,
		       enum o1_quant_type type, uint32_t m, uint32_t n,
		       uint32_t k, uint32_t ldy, bool pdl, cudaStream_t stream)
{
	switch (type) {
	case O1_QUANT_Q8_0:
		return launch_w<O1_QUANT_Q8_0>(bn, y, x, w, m, n, k, ldy, pdl,
					       stream);
	case O1_QUANT_Q4_0:
		return launch_w<O1_QUANT_Q4_0>(bn, y, x, w, m, n, k, ldy, pdl,
					       stream);
	case O1_QUANT_Q5_0:
		return launch_w<O1_QUANT_Q5_0>(bn, y, x, w, m, n, k, ldy, pdl,
					       stream);
	case O1_QUANT_Q4_K:
		return launch_w<O1_QUANT_Q4_K>(bn, y, x, w, m, n, k, ldy, pdl,
					       stream);
	case O1_QUANT_Q6_K:
		return launch_w<O1_QUANT_Q6_K>(bn, y, x, w, m, n, k, ldy, pdl,
					       stream);
	}
	return -EINVAL; /* not reached: o1_gemm_q_fits takes these */
}

extern "C" bool o1_gemm_q_fits(enum o1_quant_type type, uint32_t n,
			       uint32_t k)
{
	uint32_t per = o1_quant_block_elements(type);

	/* every block type: quant_dev.h decodes them all */
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
	return gq_dispatch(gq_width(m, n), y, x, w, type, m, n, k, ldy, pdl,
			   stream);
}

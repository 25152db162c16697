/* The pipelined tensor-core product over weights kept in a GGUF block
 * format, for more rows than the decode product takes (prefill, batched
 * decode); the same result as gemm_q.cu's (o1_gemm_q_cuda), built to run
 * at the speed of cuBLAS on the dequantized matrix:
 *
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . bf16(dequant(w)) (N,K)^T
 *
 * A block of 8 warps computes BM rows of w (outputs: 128, or 64 where 128
 * would leave multiprocessors idle) by BN rows of x (tokens: 32, 64 or
 * 128 by M; 256 by 128 rows of w over 128 tokens where the grid is
 * large; 64 x 256 for bench_gemm_q's sweep). Three kinds of shared tiles,
 * each a pipeline of its own:
 *   raw  the tile's weight bytes of 256 elements of K a row (8 blocks of
 *        Q8_0/Q4_0/Q5_0, a super-block of Q4_K/Q6_K), copied as they are with
 *        cp.async in the 16-byte pieces that cover them (a row's bytes
 *        sit at any 2-byte offset; w itself is 16-byte aligned), two
 *        stages: stage j + 2 lands while stage j is decoded;
 *   x    BN rows of 64 elements of K, cp.async, 4 stages (three steps
 *        in flight ahead of the products; 3 at 128 x 256);
 *   w    the weights of one 64-element step decoded to bf16 (quant_dev.h's
 *        qd_head/qd_octet, each value times its scale rounded to bf16 to
 *        nearest even: o1_quant_dequantize_bf16_cuda's values), two
 *        stages: the warps decode step t + 1 while they multiply step t.
 * One barrier a step; each thread's share of step t + 1's decode sits
 * between the 16-element slices of step t's products. Each warp
 * multiplies a piece of the tile (gp_warps: 32 x 64 where the tile
 * allows) with ldmatrix.x4 and mma.sync m16n8k16 (mma_dev.h) from rows
 * padded to 144 bytes (the 8 rows of an ldmatrix phase on distinct
 * banks), accumulating in f32 registers. A weight tile is decoded once
 * per token tile; the blocks of one weight tile are consecutive in the
 * launch order, so its bytes come from DRAM once. Where the grid still has
 * fewer blocks than the GPU has multiprocessors, K is split in two halves
 * (whole raw stages): y is zeroed by a kernel of its own first and each
 * half adds its sum with atomicAdd; 0 + a + b and 0 + b + a are the same
 * float, so the result does not depend on the order.
 *
 * Rows past M and N, elements past K: zeros in shared memory, never
 * written out. Accumulation in f32 over K in steps of 16 products (and
 * one addition of the halves): tests/kernels/test_gemm_q_cuda.c bounds
 * the difference from the exact sum of the same bf16 products.
 * Invariants: x 16-byte aligned, w 16-byte aligned, K a multiple of 32
 * (256 for the K types), LDY >= N; fewer than 2^16 weight tiles of 64
 * (o1_gemm_qp_fits). Pieces of a row read past the matrix's last byte
 * are cut at it (cp.async's source size), so no byte outside w is read.
 */
#include <errno.h>
#include <stdint.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "gemm_blocks.h"
#include "kernels_cuda.h"
#include "mma_dev.h"
#include "quant_dev.h"

extern "C" {
#include "common/log.h"
}

#define GP_THREADS 256
#define GP_BK	   64		/* elements of K a step */
#define GP_LD	   (GP_BK + 8) /* bf16 pitch of the x and w tiles */

/* Stages of the x tile: 4 (three steps in flight ahead of the products),
 * 3 for 128 x 256 (whose 4 would not fit in shared memory). */
template <int BM, int BN> struct gp_xs {
	static constexpr int n = BM == 128 && BN == 256 ? 3 : 4;
};

/* Dynamic shared memory of a block: raw [2][BM][ld], x [XS][BN][GP_LD]
 * bf16, w [2][BM][GP_LD] bf16 (at most 225,280 bytes: Q8_0 at 128 x
 * 256). */
template <int TYPE, int BM, int BN> struct gp_smem {
	static constexpr uint32_t raw = BM * qb_raw<TYPE>::ld;
	static constexpr uint32_t xs = BN * GP_LD * 2;
	static constexpr uint32_t ws = BM * GP_LD * 2;
	static constexpr uint32_t total =
	    2 * raw + gp_xs<BM, BN>::n * xs + 2 * ws;
};

/* The warps of a BM x BN tile: WM along w's rows by 8 / WM along the
 * tokens, each MI 16-row A fragments by NJ 8-token B fragments. Pieces of
 * 64 x 64 at 128 x 256 (8 ldmatrix.x4 for 32 mma), 32 x 64 where the tile
 * allows (6 for 16): shared memory's bandwidth, not the tensor cores,
 * bounds mma.sync at smaller pieces. */
template <int BM, int BN> struct gp_warps {
	static constexpr int wm = BN == 256 ? BM / 64
				  : BM == 64 && BN >= 128 ? 2
							  : 4;
	static constexpr int mi = BM / wm / 16;
	static constexpr int nj = BN / (8 / wm) / 8;
};

struct gp_args {
	float *y;
	const uint16_t *x;
	const uint8_t *w;
	uint64_t rb; /* bytes of a row of w */
	uint32_t m, n, k, ldy;
	uint32_t splits; /* 1 or 2 parts of K */
};

/* Raw stage J (elements [256 J, 256 J + 256) of K) of weight rows R0 ..
 * R0 + BM into RAW: each row's bytes from the 16-byte piece holding its
 * first byte, cut at the end of the matrix; rows past N left alone (never
 * decoded). */
template <int TYPE, int BM>
static __device__ __forceinline__ void gp_load_raw(uint8_t *raw,
						   const gp_args &a,
						   uint32_t r0, uint32_t j)
{
	constexpr uint32_t P = qb_raw<TYPE>::pieces, SB = qb_raw<TYPE>::bytes;
	uint64_t at = (uint64_t)j * SB;
	uint32_t len = (uint32_t)(a.rb - at < SB ? a.rb - at : SB);
	const uint8_t *end = a.w + (uint64_t)a.n * a.rb;

#pragma unroll 4
	for (uint32_t p = threadIdx.x; p < BM * P; p += GP_THREADS) {
		uint32_t r = p / P, c = p % P;
		const uint8_t *s = a.w + (uint64_t)(r0 + r) * a.rb + at;
		const uint8_t *s0 =
		    (const uint8_t *)((uintptr_t)s & ~(uintptr_t)15) + 16 * c;

		if (r0 + r < a.n && s0 < s + len)
			mma_cp16(raw + r * qb_raw<TYPE>::ld + 16 * c, s0,
				 end - s0 < 16 ? (uint32_t)(end - s0) : 16);
	}
}

/* Step KB's x tile (BN rows of GP_BK elements, 8 pieces a row) into XS;
 * zeros past M and past K. */
template <int BN>
static __device__ __forceinline__ void gp_load_x(uint16_t (*xs)[GP_LD],
						 const gp_args &a, uint32_t m0,
						 uint32_t kb)
{
#pragma unroll
	for (int i = 0; i < BN / 32; i++) {
		uint32_t p = threadIdx.x + GP_THREADS * i, r = p / 8;
		uint32_t c = GP_BK * kb + 8 * (p % 8);
		bool in = m0 + r < a.m && c < a.k;

		mma_cp16(&xs[r][8 * (p % 8)],
			 in ? a.x + (size_t)(m0 + r) * a.k + c : a.x,
			 in ? 16 : 0);
	}
}

/* A thread's share of decoding quarter Q of raw stage J (units 2Q, 2Q + 1
 * of its 8) to bf16: BM / 32 consecutive octets (8 elements) of one unit
 * of one row, from octet O0; zeros for rows past N and units past K. */
struct gp_dec {
	qd_unit_head h;
	uint16_t *dst; /* the unit's 32 elements in the w tile */
	uint32_t o0;
	bool zero;
};

template <int TYPE, int BM>
static __device__ __forceinline__ gp_dec gp_dec_head(uint16_t (*ws)[GP_LD],
						     const uint8_t *raw,
						     const gp_args &a,
						     uint32_t r0, uint32_t j,
						     uint32_t q)
{
	constexpr int OPT = BM / 32;
	uint32_t i0 = threadIdx.x * OPT, r = i0 / 8, us = i0 / 4 % 2;
	uint32_t ul = 2 * q + us;
	gp_dec d = {};

	d.dst = &ws[r][32 * us];
	d.o0 = i0 % 4;
	d.zero = r0 + r >= a.n || 8 * j + ul >= a.k / 32;
	if (!d.zero)
		d.h = qd_head<TYPE>(
		    raw + r * qb_raw<TYPE>::ld +
			((uintptr_t)(a.w + (uint64_t)(r0 + r) * a.rb +
				     (uint64_t)j * qb_raw<TYPE>::bytes) &
			 15),
		    ul);
	return d;
}

/* quant_dev.h's qd_octet, the same values, in fewer instructions for Q8_0,
 * Q4_K and Q6_K: one byte permutation makes each element's magic float
 * (qd_magic: 0x4b0000 and the byte) from a word whose bytes were prepared
 * four at a time (Q8_0's sign flip, Q4_K's nibble, Q6_K's nibble and high
 * bits). */
template <int TYPE>
static __device__ __forceinline__ void gp_octet(const qd_unit_head &h, int o,
						float (&v)[8])
{
	if constexpr (TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q4_K) {
		uint32_t b[2];

		qd_load8(h.q + 8 * o, b);
#pragma unroll
		for (int w = 0; w < 2; w++) {
			uint32_t x = b[w] ^ 0x80808080u;

			if (TYPE == O1_QUANT_Q4_K)
				x = (h.sel ? b[w] >> 4 : b[w]) & 0x0f0f0f0fu;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				/* bytes: x's byte e, 0, 0, 0x4b */
				float f = __uint_as_float(
				    __byte_perm(x, 0x4b000000u, 0x7440u + e));
				/* 2^23 + 128 (Q8_0's flipped sign), 2^23 */
				float q = __fsub_rn(f, TYPE == O1_QUANT_Q8_0
							   ? 8388736.0f
							   : 8388608.0f);

				if (TYPE == O1_QUANT_Q4_K)
					q = __fsub_rn(__fmul_rn(h.d, q), h.m);
				v[4 * w + e] = q;
			}
		}
	} else if constexpr (TYPE == O1_QUANT_Q6_K) {
		uint32_t b[2], hb[2];

		qd_load8(h.q + 8 * o, b);
		qd_load8(h.qh + 8 * o, hb);
#pragma unroll
		for (int w = 0; w < 2; w++) {
			/* each byte: its nibble, then bits 4-5 from qh */
			uint32_t lo = h.sel < 2 ? b[w] : b[w] >> 4;
			uint32_t hi = hb[w] >> (2 * h.sel);
			uint32_t x = (lo & 0x0f0f0f0fu) |
				     (hi & 0x03030303u) << 4;

#pragma unroll
			for (int e = 0; e < 4; e++)
				v[4 * w + e] = __fsub_rn(
				    __uint_as_float(__byte_perm(
					x, 0x4b000000u, 0x7440u + e)),
				    8388640.0f); /* 2^23 + 32 */
		}
	} else {
		/* Q4_0, Q5_0 (qd_octet refuses any other type) */
		qd_octet<TYPE>(h, o, v);
	}
}

/* Octet O (0 .. BM / 32 - 1) of the thread's share D. */
template <int TYPE>
static __device__ __forceinline__ void gp_dec_octet(const gp_dec &d, int o)
{
	int oc = (int)d.o0 + o;
	float v[8], sc;
	uint32_t p[4];

	if (d.zero) {
		*(uint4 *)(d.dst + 8 * oc) = make_uint4(0, 0, 0, 0);
		return;
	}
	sc = qd_scale<TYPE>(d.h, oc);
	gp_octet<TYPE>(d.h, oc, v);
#pragma unroll
	for (int e = 0; e < 4; e++)
		p[e] = mma_pack_bf16(__fmul_rn(v[2 * e], sc),
				     __fmul_rn(v[2 * e + 1], sc));
	*(uint4 *)(d.dst + 8 * oc) = make_uint4(p[0], p[1], p[2], p[3]);
}

/* Local copy group G of a block: x step G (of T) and, where G = 4 L - 1,
 * raw stage L (of LJ; stage 0 is copied before the loop). */
template <int TYPE, int BM, int BN>
static __device__ __forceinline__ void
gp_issue(uint8_t *raw, uint16_t (*xs)[BN][GP_LD], const gp_args &a,
	 uint32_t r0, uint32_t m0, uint32_t kb0, uint32_t js, uint32_t t_n,
	 uint32_t lj_n, uint32_t g)
{
	if (g < t_n)
		gp_load_x<BN>(xs[g % gp_xs<BM, BN>::n], a, m0, kb0 + g);
	if (g % 4 == 3 && (g + 1) / 4 < lj_n)
		gp_load_raw<TYPE, BM>(raw + gp_smem<TYPE, BM, BN>::raw *
						((g + 1) / 4 % 2),
				      a, r0, js + (g + 1) / 4);
	mma_cp_commit();
}

/* The products of slice K16 (16 elements of K) of a step: the warp's
 * MI 16-row A fragments from weight row WR by NJ 8-token B fragments from
 * token WN. */
template <int MI, int NJ>
static __device__ __forceinline__ void
gp_mma(float (&acc)[MI][NJ][4], uint16_t (*w)[GP_LD], uint16_t (*x)[GP_LD],
       uint32_t wr, uint32_t wn, uint32_t lane, int k16)
{
	uint32_t af[MI][4], bf[NJ][2];

	/* A: matrices (rows 0-7, 8-15) x (k 0-7, 8-15) */
#pragma unroll
	for (int i = 0; i < MI; i++)
		mma_ldsm_x4(&w[wr + 16 * i + lane % 16][k16 + 8 * (lane / 16)],
			    af[i]);
	/* B: tokens 0-7 (k 0-7, 8-15), tokens 8-15 (...) */
#pragma unroll
	for (int j = 0; j < NJ / 2; j++) {
		uint32_t r[4];

		mma_ldsm_x4(&x[wn + 16 * j + lane % 8 + 8 * (lane / 16)]
			      [k16 + 8 * (lane / 8 % 2)],
			    r);
		bf[2 * j][0] = r[0], bf[2 * j][1] = r[1];
		bf[2 * j + 1][0] = r[2], bf[2 * j + 1][1] = r[3];
	}
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
			mma_bf16(acc[i][j], af[i], bf[j]);
}

/* Grid: (token tiles of BN, weight tiles of BM, parts of K). Step t of
 * the block's T: wait for copy group t + 1 (x step t + 1, and the raw
 * stage of step t + 1), barrier (everyone is past step t - 1's products
 * and decode, so their stages are free), issue group t + XS - 1,
 * multiply step t, decode step t + 1. */
template <int TYPE, int BM, int BN>
static __global__ void __launch_bounds__(GP_THREADS, 1) gemm_qp(gp_args a)
{
	using sm = gp_smem<TYPE, BM, BN>;
	constexpr int WM = gp_warps<BM, BN>::wm, MI = gp_warps<BM, BN>::mi;
	constexpr int NJ = gp_warps<BM, BN>::nj, XS = gp_xs<BM, BN>::n;
	extern __shared__ __align__(16) uint4 gp_shared[];
	uint8_t *raw = (uint8_t *)gp_shared;
	uint16_t (*xs)[BN][GP_LD] =
	    (uint16_t (*)[BN][GP_LD])(raw + 2 * sm::raw);
	uint16_t (*ws)[BM][GP_LD] =
	    (uint16_t (*)[BM][GP_LD])(raw + 2 * sm::raw + XS * sm::xs);
	uint32_t m0 = blockIdx.x * BN, r0 = blockIdx.y * BM;
	uint32_t lane = threadIdx.x % 32, q = threadIdx.x / 32;
	uint32_t wr = (BM / WM) * (q % WM), wn = (BN * WM / 8) * (q / WM);
	uint32_t stages = (a.k + 255) / 256;
	uint32_t js = stages * blockIdx.z / a.splits;
	uint32_t je = stages * (blockIdx.z + 1) / a.splits;
	uint32_t kb0 = 4 * js, steps = (a.k + GP_BK - 1) / GP_BK;
	uint32_t t_n = min(4 * je, steps) - kb0, lj_n = je - js;
	float acc[MI][NJ][4] = {};

	/* the weights: no kernel writes them, so before the wait */
	if (t_n)
		gp_load_raw<TYPE, BM>(raw, a, r0, js);
	o1_pdl_wait();
	o1_pdl_trigger();
	for (uint32_t g = 0; g < XS - 1; g++)
		gp_issue<TYPE, BM, BN>(raw, xs, a, r0, m0, kb0, js, t_n, lj_n,
				       g);
	mma_cp_wait<XS - 2>();
	__syncthreads();
	if (t_n) {
		gp_dec d = gp_dec_head<TYPE, BM>(ws[0], raw, a, r0, js, 0);

#pragma unroll
		for (int o = 0; o < BM / 32; o++)
			gp_dec_octet<TYPE>(d, o);
	}
	for (uint32_t t = 0; t < t_n; t++) {
		bool next = t + 1 < t_n;
		gp_dec d = {};

		mma_cp_wait<XS - 3>();
		__syncthreads();
		gp_issue<TYPE, BM, BN>(raw, xs, a, r0, m0, kb0, js, t_n, lj_n,
				       t + XS - 1);
		if (next)
			d = gp_dec_head<TYPE, BM>(
			    ws[(t + 1) % 2], raw + sm::raw * ((t + 1) / 4 % 2),
			    a, r0, js + (t + 1) / 4, (t + 1) % 4);
		/* step t + 1's decode between the slices of step t's
		 * products, so that each warp's stream mixes the tensor
		 * cores' work with the decode's (the warps reach this
		 * together after the barrier) */
#pragma unroll
		for (int k16 = 0; k16 < GP_BK / 16; k16++) {
			gp_mma<MI, NJ>(acc, ws[t % 2], xs[t % XS], wr, wn,
				       lane, 16 * k16);
			if (next && k16 % (128 / BM) == 0)
				gp_dec_octet<TYPE>(d, k16 / (128 / BM));
		}
	}
	mma_cp_wait<0>();
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				uint32_t row = r0 + wr + 16 * i + lane / 4 +
					       8 * (e / 2),
					 tok = m0 + wn + 8 * j +
					       2 * (lane % 4) + e % 2;
				float *p = &a.y[(size_t)tok * a.ldy + row];

				if (row >= a.n || tok >= a.m)
					continue;
				if (a.splits > 1)
					atomicAdd(p, acc[i][j][e]);
				else
					*p = acc[i][j][e];
			}
}

/* A launch's tiles: over 128 rows 128 x 256 where that fills every
 * multiprocessor (half the decode per token of 128 x 128, warps of 64 x
 * 64, fewer bytes from L2 a product); else BN by M (the fewest rows past
 * M), BM 128 while that fills every multiprocessor, else 64; K in two
 * where the grid still leaves multiprocessors idle and K has two raw
 * stages. bench_gemm_q --sweep times the others. */
struct gp_plan {
	int bm, bn;
	uint32_t splits;
};

static gp_plan gp_pick(uint32_t m, uint32_t n, uint32_t k)
{
	gp_plan p;
	uint64_t tt, sms = (uint64_t)o1_cuda_sm_count();

	if (m > 128 && (n + 127) / 128 * ((m + 255) / 256) >= sms) {
		p.bm = 128, p.bn = 256, p.splits = 1;
		return p;
	}
	p.bn = m <= 32 ? 32 : m <= 64 ? 64 : 128;
	tt = (m + p.bn - 1) / p.bn;
	p.bm = (n + 127) / 128 * tt >= sms ? 128 : 64;
	p.splits = (n + p.bm - 1) / p.bm * tt < sms && k > 256 ? 2 : 1;
	return p;
}

template <int TYPE, int BM, int BN>
static int gp_launch(const gp_args &a, bool pdl, cudaStream_t stream)
{
	constexpr uint32_t smem = gp_smem<TYPE, BM, BN>::total;
	dim3 grid((a.m + BN - 1) / BN, (a.n + BM - 1) / BM, a.splits);
	/* every launch, as the other kernels do (no state to share between
	 * threads; allowed while a stream captures) */
	int err = O1_CUDA_CHECK(cudaFuncSetAttribute(
	    gemm_qp<TYPE, BM, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
	    (int)smem));

	if (err)
		return err;
	if (a.splits > 1) {
		err = qb_zero_launch("gemm_qp zero", a.y, a.m, a.n, a.ldy, pdl,
				     stream);
		if (err)
			return err;
	}
	return O1_CUDA_LAUNCH("gemm_qp", gemm_qp<TYPE, BM, BN>, grid,
			      dim3(GP_THREADS), smem, stream, pdl, a);
}

template <int TYPE>
static int gp_launch_t(const gp_args &a, int bm, int bn, bool pdl,
		       cudaStream_t stream)
{
	if (bm == 128 && bn == 256)
		return gp_launch<TYPE, 128, 256>(a, pdl, stream);
	if (bm == 128)
		return (bn == 128  ? gp_launch<TYPE, 128, 128>
			: bn == 64 ? gp_launch<TYPE, 128, 64>
				   : gp_launch<TYPE, 128, 32>)(a, pdl, stream);
	if (bn == 256)
		return gp_launch<TYPE, 64, 256>(a, pdl, stream);
	return (bn == 128  ? gp_launch<TYPE, 64, 128>
		: bn == 64 ? gp_launch<TYPE, 64, 64>
			   : gp_launch<TYPE, 64, 32>)(a, pdl, stream);
}

/* o1_gemm_qp_cuda's launch with the tiles and split of PLAN (BM 64 or
 * 128, BN 32, 64, 128 or 256; splits 1 or 2; bench_gemm_q times
 * them all). Operands checked by the caller. */
static int gp_dispatch(gp_plan plan, float *y, const uint16_t *x,
		       const void *w, enum o1_quant_type type, uint32_t m,
		       uint32_t n, uint32_t k, uint32_t ldy, bool pdl,
		       cudaStream_t stream)
{
	gp_args a = {y, x, (const uint8_t *)w, 0, m, n, k, ldy, plan.splits};

	o1_quant_row_bytes(type, k, &a.rb);
	if (a.splits > 1 && (k + 255) / 256 < 2)
		a.splits = 1;
	switch (type) {
	case O1_QUANT_Q8_0:
		return gp_launch_t<O1_QUANT_Q8_0>(a, plan.bm, plan.bn, pdl,
						  stream);
	case O1_QUANT_Q4_0:
		return gp_launch_t<O1_QUANT_Q4_0>(a, plan.bm, plan.bn, pdl,
						  stream);
	case O1_QUANT_Q5_0:
		return gp_launch_t<O1_QUANT_Q5_0>(a, plan.bm, plan.bn, pdl,
						  stream);
	case O1_QUANT_Q4_K:
		return gp_launch_t<O1_QUANT_Q4_K>(a, plan.bm, plan.bn, pdl,
						  stream);
	case O1_QUANT_Q6_K:
		return gp_launch_t<O1_QUANT_Q6_K>(a, plan.bm, plan.bn, pdl,
						  stream);
	}
	return -EINVAL; /* not reached: o1_gemm_qp_fits takes these */
}

extern "C" bool o1_gemm_qp_fits(enum o1_quant_type type, uint32_t n,
				uint32_t k, const void *w)
{
	uint32_t per = o1_quant_block_elements(type);

	/* every block type: qb_raw and quant_dev.h take them all */
	return per && k && k % per == 0 && k % 32 == 0 &&
	       (uintptr_t)w % 16 == 0 && (n + 63) / 64 <= 65535;
}

extern "C" int o1_gemm_qp_cuda(float *y, const uint16_t *x, const void *w,
			       enum o1_quant_type type, uint32_t m, uint32_t n,
			       uint32_t k, uint32_t ldy, bool pdl,
			       cudaStream_t stream)
{
	if (!y || !x || !w || !n || ldy < n ||
	    !o1_gemm_qp_fits(type, n, k, w) || (uintptr_t)x % 16) {
		o1_err("gemm_qp: bad operands: type %u m %u n %u k %u ldy %u",
		       (unsigned)type, m, n, k, ldy);
		return -EINVAL;
	}
	if (!m)
		return 0;
	return gp_dispatch(gp_pick(m, n, k), y, x, w, type, m, n, k, ldy, pdl,
			   stream);
}

/* The int8 tensor-core product over weights kept in a GGUF block format,
 * for more rows than the decode product takes (prefill, batched decode):
 * gemv_q8.h's arithmetic (the decode products' int8 path) on the tensor
 * cores, reading the blocks as they are:
 *
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . dequant(w) (N,K)^T
 *
 * Two launches. o1_gemm_qi8_quantize_cuda quantizes x per 32-element unit
 * exactly as gemv_q8.h specifies (q = rint(v 127 / amax), d = amax / 127,
 * s = d times the sum of the q: q8_input_dev.h's q8_unit, the bits of
 * gemv_q.cu's input)
 * into a scratch: the quants (M, K) int8, then the (d, s) of each unit
 * transposed, (K / 32, MP) float2 with MP = M rounded up to even, so that a
 * tile's tokens of one unit are consecutive. o1_gemm_qi8_cuda multiplies:
 * a unit of a weight row is 32 small integers (Q8_0's quants, Q4_0's and
 * Q4_K's nibbles, Q5_0's 5-bit values, Q6_K's 6-bit values less 32) and
 * its scales, so one mma.sync m16n8k32 (s8 by s8, s32 sums) gives the
 * exact integer sums S of 16 weight rows by 8 tokens over one unit (Q6_K,
 * a scale per 16 elements: two m16n8k16, S0 and S1), and each is scaled
 * in f32 as gemv_q8.h's unit product:
 *   Q8_0 (d dx) S    Q4_0 (d dx) S - (8 d) s    Q4_K (D dx) S - M s
 *   Q5_0 (d dx) S - (16 d) s                    Q6_K (D0 dx) S0 + (D1 dx) S1
 * each product rounded, the sums by fused multiply-adds into the f32
 * accumulator in increasing unit order (the mma's accumulator starts at
 * 0x4b400000, so its s32 result is the float 1.5 x 2^23 + S: one
 * subtraction converts it, |S| < 2^22). So a result differs from
 * gemv_q8.h's (o1_gemv_q8_cpu) by f32 rounding only: the order of the
 * units' sum and the fused adds (tests/kernels/test_gemm_q_cuda.c), and
 * gemv_q8.h's bound on the distance to the f32 product holds.
 *
 * Schedule (gemm_qp.cu's shape). A block of 8 warps computes BM rows of w
 * (128, or 64 where 128 would leave multiprocessors idle) by BN tokens
 * (32, 64 or 128 by M); warps 4 along w's rows by 2 along the tokens, each
 * BM / 64 A fragments of 16 rows by BN / 16 B fragments of 8 tokens. A
 * step is 256 elements of K (8 units: a super-block of Q4_K and Q6_K, 8
 * blocks of Q8_0, Q4_0 and Q5_0), and its copy group, STAGES deep
 * (cp.async), brings the tile's raw weight bytes (16-byte pieces covering
 * each row's bytes, at the row's offset within the first piece), the
 * tokens' quants (rows padded to 272 bytes: ldmatrix.x4 reads B fragments
 * of 8 tokens on distinct banks) and their (d, s). Each step: wait for
 * its group, barrier, issue the group STAGES - 1 ahead, the threads
 * decode the tile's unit scales (qd_head) into shared memory, barrier,
 * then each warp, unit by unit, builds its A fragments from the raw bytes
 * in registers (4 bytes of a row a register: a mask or shift of Q4's
 * nibbles, Q5_0's with their fifth bits above, Q6_K's nibbles and high
 * bits less 32) and multiplies them with every B fragment, then scales.
 * Where the grid has fewer blocks than the GPU has multiprocessors, K is
 * split in two halves: y is zeroed first and each half adds its sum with
 * atomicAdd (0 + a + b and 0 + b + a are the same float: the result does
 * not depend on the order).
 *
 * Rows past N are never written (their shared bytes are stale: their
 * products are discarded), tokens past M are zeros. Invariants: K a
 * multiple of 256; w 16-byte aligned; LDY >= N; the scratch 16-byte
 * aligned (o1_gemm_qi8_fits, o1_gemm_qi8_scratch_bytes).
 */
#include <errno.h>
#include <stdint.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "gemm_blocks.h"
#include "kernels_cuda.h"
#include "mma_dev.h"
#include "q8_input_dev.h"
#include "quant_dev.h"

extern "C" {
#include "common/log.h"
}

#define GI_THREADS 256
#define GI_XLD	   272 /* bytes of a token's 256 quants in shared memory */
#define GI_SMEM	   (220u << 10) /* at most a multiprocessor (227 KB) */

/* Shared memory: STAGES copy groups (raw BM rows, x BN rows of GI_XLD,
 * ds 8 units x BN float2), then the step's unit scales (8 x BM float2).
 * OCC blocks a multiprocessor: two for tiles of 64 tokens or fewer where
 * two stages of each fit (16 warps hide the chains of loads, products
 * and scaling that 8 leave exposed), else one; four stages where they
 * fit, else three, else two. */
template <int TYPE, int BM, int BN> struct gi_smem {
	static constexpr uint32_t raw = BM * qb_raw<TYPE>::ld;
	static constexpr uint32_t xs = BN * GI_XLD;
	static constexpr uint32_t ds = 8 * BN * 8;
	static constexpr uint32_t stage = raw + xs + ds;
	static constexpr uint32_t sc = 8 * BM * 8;
	static constexpr int occ = BN <= 64 && 2 * stage + sc <= GI_SMEM / 2
				       ? 2
				       : 1;
	static constexpr uint32_t most = GI_SMEM / occ;
	static constexpr int stages = 4 * stage + sc <= most   ? 4
				      : 3 * stage + sc <= most ? 3
							       : 2;
	static constexpr uint32_t total = stages * stage + sc;
};

struct gi_args {
	float *y;
	const int8_t *xq;   /* (M, K) */
	const float2 *ds;   /* (K / 32, mp) */
	const uint8_t *w;
	uint64_t rb; /* bytes of a row of w */
	uint32_t m, n, k, ldy, mp;
	uint32_t splits; /* 1 or 2 parts of K */
};

/* Copy group of step J (of K) into stage ST: the raw bytes of weight rows
 * R0 .. R0 + BM (rows past N left alone), the quants and (d, s) of
 * tokens M0 .. M0 + BN (zeros past M). */
template <int TYPE, int BM, int BN>
static __device__ __forceinline__ void gi_issue(uint8_t *st, const gi_args &a,
						uint32_t r0, uint32_t m0,
						uint32_t j, bool weights)
{
	using sm = gi_smem<TYPE, BM, BN>;

	if (weights) {
		qb_issue_rows<TYPE, BM, GI_THREADS>(st, a.w, a.rb, a.n, r0, j);
		return;
	}
	uint8_t *xs = st + sm::raw;
	uint8_t *ds = xs + sm::xs;

	/* quants: 16 pieces a token */
#pragma unroll
	for (int i = 0; i < BN * 16 / GI_THREADS; i++) {
		uint32_t p = threadIdx.x + GI_THREADS * i, t = p / 16;
		bool in = m0 + t < a.m;

		mma_cp16(xs + t * GI_XLD + 16 * (p % 16),
			 in ? a.xq + (size_t)(m0 + t) * a.k + 256 * j +
				  16 * (p % 16)
			    : a.xq,
			 in ? 16 : 0);
	}
	/* (d, s): 8 units of BN tokens, 2 tokens a piece */
	for (uint32_t p = threadIdx.x; p < 4 * BN; p += GI_THREADS) {
		uint32_t u = p / (BN / 2), t = 2 * (p % (BN / 2));
		uint32_t left = m0 + t < a.m ? a.m - (m0 + t) : 0;

		mma_cp16(ds + (u * BN + t) * 8,
			 left ? a.ds + (size_t)(8 * j + u) * a.mp + m0 + t
			      : a.ds,
			 left >= 2 ? 16 : 8 * left);
	}
}

/* Weight row R0 + R's bytes of step J in the stage at ST (gi_issue). */
template <int TYPE>
static __device__ __forceinline__ const uint8_t *
gi_row(const uint8_t *st, const gi_args &a, uint32_t r0, uint32_t r,
       uint32_t j)
{
	return qb_row<TYPE>(st, a.w, a.rb, r0, r, j);
}

/* The block types this product decodes (o1_gemm_qi8_fits' list). */
template <int TYPE> static __host__ __device__ constexpr bool gi_takes()
{
	return TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q4_0 ||
	       TYPE == O1_QUANT_Q5_0 || TYPE == O1_QUANT_Q4_K ||
	       TYPE == O1_QUANT_Q6_K;
}

/* 4 bytes of shared memory at P (2-byte aligned). */
static __device__ __forceinline__ uint32_t gi_word(const uint8_t *p)
{
	return qd_u16(p) | (qd_u16(p + 2) << 16);
}

/* The A-fragment registers of unit U of the raw row at R (the step's
 * bytes of one weight row): bytes k0 .. k0 + 3 (K0 = 4 t) in LO and
 * k0 + 16 .. k0 + 19 in HI, as int8 (element order of the unit). */
template <int TYPE>
static __device__ __forceinline__ void gi_a(const uint8_t *r, uint32_t u,
					    uint32_t k0, uint32_t &lo,
					    uint32_t &hi)
{
	static_assert(gi_takes<TYPE>(), "no int8 tiles for this block type");
	if constexpr (TYPE == O1_QUANT_Q8_0) {
		const uint8_t *q = r + u * O1_QUANT_Q8_0_BYTES + 2 + k0;

		lo = gi_word(q), hi = gi_word(q + 16);
	} else if constexpr (TYPE == O1_QUANT_Q4_0) {
		/* elements < 16: low nibbles of bytes 0..15, then high */
		uint32_t w = gi_word(r + u * O1_QUANT_Q4_0_BYTES + 2 + k0);

		lo = w & 0x0f0f0f0fu, hi = (w >> 4) & 0x0f0f0f0fu;
	} else if constexpr (TYPE == O1_QUANT_Q5_0) {
		/* Q4_0's nibbles, elements k0 .. k0 + 3's fifth bits (qh's
		 * bits k0 ..) and k0 + 16 .. k0 + 19's (bits k0 + 16 ..)
		 * above: 0..31, the offset 16 in the scales */
		const uint8_t *b = r + u * O1_QUANT_Q5_0_BYTES;
		uint32_t w = gi_word(b + 6 + k0), qh = qd_q5_high(b);

		lo = (w & 0x0f0f0f0fu) | qd_spread_fifth((qh >> k0) & 0xf);
		hi = ((w >> 4) & 0x0f0f0f0fu) |
		     qd_spread_fifth((qh >> (16 + k0)) & 0xf);
	} else if constexpr (TYPE == O1_QUANT_Q4_K) {
		/* 4-byte aligned: the rows are whole super-blocks from a
		 * 16-byte aligned w */
		const uint32_t *q =
		    (const uint32_t *)(r + 16 + 32 * (u / 2) + k0);
		uint32_t sh = 4 * (u % 2);

		lo = (q[0] >> sh) & 0x0f0f0f0fu;
		hi = (q[4] >> sh) & 0x0f0f0f0fu;
	} else if constexpr (TYPE == O1_QUANT_Q6_K) {
		uint32_t h = u / 4, g = u % 4;
		const uint8_t *ql = r + 64 * h + 32 * (g % 2) + k0;
		const uint8_t *qh = r + 128 + 32 * h + k0;
		uint32_t v[2];

#pragma unroll
		for (int i = 0; i < 2; i++) {
			uint32_t l = gi_word(ql + 16 * i),
				 hb = gi_word(qh + 16 * i);
			/* 6-bit values, then less 32: flip bit 5 (the 6-bit
			 * two's complement) and copy it to bits 6 and 7 */
			uint32_t x = (((g < 2 ? l : l >> 4) & 0x0f0f0f0fu) |
				      ((hb >> (2 * g)) & 0x03030303u) << 4) ^
				     0x20202020u;

			v[i] = x | (x & 0x20202020u) * 6;
		}
		lo = v[0], hi = v[1];
	}
}

/* The scales of unit U of the raw row at R, as the epilogue multiplies
 * them: Q8_0 (d, 0), Q4_0 (d, -8 d), Q5_0 (d, -16 d), Q4_K (D, -M), Q6_K
 * (D0, D1). */
template <int TYPE>
static __device__ __forceinline__ float2 gi_scales(const uint8_t *r,
						   uint32_t u)
{
	static_assert(gi_takes<TYPE>(), "no int8 tiles for this block type");
	qd_unit_head h = qd_head<TYPE>(r, u);

	if constexpr (TYPE == O1_QUANT_Q8_0)
		return make_float2(h.d, 0.0f);
	else if constexpr (TYPE == O1_QUANT_Q4_0)
		return make_float2(h.d, __fmul_rn(-8.0f, h.d));
	else if constexpr (TYPE == O1_QUANT_Q5_0)
		return make_float2(h.d, __fmul_rn(-16.0f, h.d));
	else if constexpr (TYPE == O1_QUANT_Q4_K)
		return make_float2(h.d, -h.m);
	else /* Q6_K */
		return make_float2(h.d, h.d1);
}

/* 1.5 x 2^23 + S as the bits of an s32 accumulator, back to S. */
static __device__ __forceinline__ float gi_sum(int32_t c)
{
	return __fsub_rn(__int_as_float(c), 12582912.0f);
}

#define GI_MAGIC 0x4b400000

/* Token tiles [J0, J0 + CH) of one unit: their B fragments (ldmatrix.x4
 * from the step's quants XB, the unit's column: two tiles a load), every
 * mma of them by the A fragments AF first (independent: the tensor cores'
 * latency overlaps, where the scaling after each one waited for it with
 * only two warps a scheduler), then the scaling into ACC: rows g and
 * g + 8 of each A fragment (WSC), tokens 2t and 2t + 1 of each B
 * fragment (their (d, s) pairs from DS). */
template <int TYPE, int MI, int NJ, int CH>
static __device__ __forceinline__ void
gi_chunk(float (&acc)[MI][NJ][4], const uint32_t (&af)[MI][4],
	 const float2 (&wsc)[MI][2], const uint8_t *xb, const float2 *ds,
	 uint32_t lane, int j0)
{
	constexpr int H = TYPE == O1_QUANT_Q6_K ? 2 : 1;
	uint32_t bf[CH][2];
	int32_t c[MI][CH][H][4];

#pragma unroll
	for (int j = 0; j < CH / 2; j++) {
		uint32_t b[4];

		/* B of tokens 0-7 (k 0-15, 16-31), then of tokens 8-15 */
		mma_ldsm_x4(xb + (8 * (j0 + 2 * j) + lane % 8 + 8 * (lane / 16)) *
				     GI_XLD +
				 16 * (lane / 8 % 2),
			    b);
		bf[2 * j][0] = b[0], bf[2 * j][1] = b[1];
		bf[2 * j + 1][0] = b[2], bf[2 * j + 1][1] = b[3];
	}
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < CH; j++) {
#pragma unroll
			for (int h = 0; h < H; h++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					c[i][j][h][e] = GI_MAGIC;
			if constexpr (TYPE == O1_QUANT_Q6_K) {
				mma_s8_k16(c[i][j][0], af[i][0], af[i][1],
					   bf[j][0]);
				mma_s8_k16(c[i][j][H - 1], af[i][2], af[i][3],
					   bf[j][1]);
			} else {
				mma_s8_k32(c[i][j][0], af[i], bf[j]);
			}
		}
#pragma unroll
	for (int j = 0; j < CH; j++) {
		float4 xd = *(const float4 *)&ds[8 * (j0 + j) + 2 * (lane % 4)];
		float dx[2] = {xd.x, xd.z}, xsum[2] = {xd.y, xd.w};

#pragma unroll
		for (int i = 0; i < MI; i++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				float2 w = wsc[i][e / 2];
				float f = acc[i][j0 + j][e];

				f = __fmaf_rn(__fmul_rn(w.x, dx[e % 2]),
					      gi_sum(c[i][j][0][e]), f);
				if constexpr (TYPE == O1_QUANT_Q6_K)
					f = __fmaf_rn(__fmul_rn(w.y, dx[e % 2]),
						      gi_sum(c[i][j][H - 1][e]),
						      f);
				else if constexpr (TYPE != O1_QUANT_Q8_0)
					f = __fmaf_rn(w.y, xsum[e % 2], f);
				acc[i][j0 + j][e] = f;
			}
	}
}

/* Grid: (token tiles of BN, weight tiles of BM, parts of K). */
template <int TYPE, int BM, int BN>
static __global__ void
__launch_bounds__(GI_THREADS, (gi_smem<TYPE, BM, BN>::occ)) gemm_qi8(gi_args a)
{
	using sm = gi_smem<TYPE, BM, BN>;
	constexpr int S = sm::stages, MI = BM / 64, NJ = BN / 16;
	extern __shared__ __align__(16) uint4 gi_shared[];
	uint8_t *base = (uint8_t *)gi_shared;
	float2 *sc = (float2 *)(base + S * sm::stage); /* [8][BM] */
	uint32_t m0 = blockIdx.x * BN, r0 = blockIdx.y * BM;
	uint32_t lane = threadIdx.x % 32, wq = threadIdx.x / 32;
	uint32_t g = lane / 4, t = lane % 4;
	uint32_t wr = (BM / 4) * (wq % 4), wn = (BN / 2) * (wq / 4);
	uint32_t steps = a.k / 256;
	uint32_t js = steps * blockIdx.z / a.splits;
	uint32_t n_t = steps * (blockIdx.z + 1) / a.splits - js;
	float acc[MI][NJ][4] = {};

	/* the weights: no kernel writes them, so before the wait */
	for (uint32_t i = 0; i + 1 < S; i++)
		if (i < n_t)
			gi_issue<TYPE, BM, BN>(base + i * sm::stage, a, r0, m0,
					       js + i, true);
	o1_pdl_wait();
	o1_pdl_trigger();
	for (uint32_t i = 0; i + 1 < S; i++) {
		if (i < n_t)
			gi_issue<TYPE, BM, BN>(base + i * sm::stage, a, r0, m0,
					       js + i, false);
		mma_cp_commit();
	}
	for (uint32_t st = 0; st < n_t; st++) {
		uint8_t *cur = base + (st % S) * sm::stage;
		const uint8_t *xs = cur + sm::raw;
		const float2 *ds = (const float2 *)(xs + sm::xs); /* [8][BN] */

		mma_cp_wait<S - 2>();
		__syncthreads();
		if (st + S - 1 < n_t) {
			uint8_t *nx = base + ((st + S - 1) % S) * sm::stage;

			gi_issue<TYPE, BM, BN>(nx, a, r0, m0, js + st + S - 1,
					       true);
			gi_issue<TYPE, BM, BN>(nx, a, r0, m0, js + st + S - 1,
					       false);
		}
		mma_cp_commit();
		/* the step's unit scales, BM x 8 */
		for (uint32_t p = threadIdx.x; p < 8 * BM; p += GI_THREADS) {
			uint32_t r = p % BM, u = p / BM;
			if (r0 + r < a.n)
				sc[u * BM + r] = gi_scales<TYPE>(
				    gi_row<TYPE>(cur, a, r0, r, js + st), u);
		}
		__syncthreads();

		const uint8_t *ra[MI][2];

#pragma unroll
		for (int i = 0; i < MI; i++)
#pragma unroll
			for (int h = 0; h < 2; h++) {
				uint32_t r = wr + 16 * i + g + 8 * h;

				ra[i][h] = gi_row<TYPE>(cur, a, r0, r, js + st);
			}
#pragma unroll 1
		for (uint32_t u = 0; u < 8; u++) {
			uint32_t af[MI][4];
			float2 wsc[MI][2];

#pragma unroll
			for (int i = 0; i < MI; i++) {
				gi_a<TYPE>(ra[i][0], u, 4 * t, af[i][0],
					   af[i][2]);
				gi_a<TYPE>(ra[i][1], u, 4 * t, af[i][1],
					   af[i][3]);
				/* rows g and g + 8 of the fragment */
				wsc[i][0] = sc[u * BM + wr + 16 * i + g];
				wsc[i][1] = sc[u * BM + wr + 16 * i + g + 8];
			}
			/* Q6_K's two sums a tile: half the tiles at a time */
			constexpr int CH =
			    TYPE == O1_QUANT_Q6_K && NJ > 4 ? 4 : NJ;

#pragma unroll
			for (int j0 = 0; j0 < NJ; j0 += CH)
				gi_chunk<TYPE, MI, NJ, CH>(
				    acc, af, wsc, xs + wn * GI_XLD + 32 * u,
				    ds + u * BN + wn, lane, j0);
		}
	}
	mma_cp_wait<0>();
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				uint32_t row = r0 + wr + 16 * i + g + 8 * (e / 2),
					 tok = m0 + wn + 8 * j + 2 * t + e % 2;
				float *p = &a.y[(size_t)tok * a.ldy + row];

				if (row >= a.n || tok >= a.m)
					continue;
				if (a.splits > 1)
					atomicAdd(p, acc[i][j][e]);
				else
					*p = acc[i][j][e];
			}
}

/* Each thread one unit (32 elements) of x: q8_input_dev.h's q8_unit, the
 * bits of gemv_q.cu's input. */
static __global__ void __launch_bounds__(256)
    gi_quantize(int8_t *xq, float2 *ds, const uint16_t *x, uint32_t m,
		uint32_t k, uint32_t mp)
{
	uint32_t units = k / 32;
	uint64_t id = (uint64_t)blockIdx.x * 256 + threadIdx.x;
	uint32_t tok = (uint32_t)(id / units), u = (uint32_t)(id % units);
	float v[32];
	uint32_t w[8];

	o1_pdl_wait();
	o1_pdl_trigger();
	if (id >= (uint64_t)m * units)
		return;
	const uint4 *src = (const uint4 *)(x + (size_t)tok * k + 32 * u);

#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint4 b = src[i];
		uint32_t p[4] = {b.x, b.y, b.z, b.w};

#pragma unroll
		for (int h = 0; h < 4; h++) {
			v[8 * i + 2 * h] = qd_bf16(p[h] & 0xffffu);
			v[8 * i + 2 * h + 1] = qd_bf16(p[h] >> 16);
		}
	}
	float2 r = q8_unit<1>(v, w);
	uint4 *dst = (uint4 *)(xq + (size_t)tok * k + 32 * u);

	dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
	dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
	ds[(size_t)u * mp + tok] = r;
}

/* A launch's tiles: BN by M (the fewest tokens past M), BM 128 while that
 * fills every multiprocessor, else 64; K in two where the grid still
 * leaves multiprocessors idle and K has two steps. */
struct gi_plan {
	int bm, bn;
	uint32_t splits;
};

static gi_plan gi_pick(uint32_t m, uint32_t n, uint32_t k)
{
	gi_plan p;
	uint64_t tt, sms = (uint64_t)o1_cuda_sm_count();

	p.bn = m <= 32 ? 32 : m <= 64 ? 64 : 128;
	tt = (m + p.bn - 1) / p.bn;
	p.bm = (n + 127) / 128 * tt >= sms ? 128 : 64;
	p.splits = (n + p.bm - 1) / p.bm * tt < sms && k >= 512 ? 2 : 1;
	return p;
}

template <int TYPE, int BM, int BN>
static int gi_launch(const gi_args &a, bool pdl, cudaStream_t stream)
{
	constexpr uint32_t smem = gi_smem<TYPE, BM, BN>::total;
	dim3 grid((a.m + BN - 1) / BN, (a.n + BM - 1) / BM, a.splits);
	int err = O1_CUDA_CHECK(cudaFuncSetAttribute(
	    gemm_qi8<TYPE, BM, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
	    (int)smem));

	if (err)
		return err;
	if (a.splits > 1) {
		err = qb_zero_launch("gemm_qi8 zero", a.y, a.m, a.n, a.ldy, pdl,
				     stream);
		if (err)
			return err;
	}
	return O1_CUDA_LAUNCH("gemm_qi8", gemm_qi8<TYPE, BM, BN>, grid,
			      dim3(GI_THREADS), smem, stream, pdl, a);
}

template <int TYPE>
static int gi_launch_t(const gi_args &a, int bm, int bn, bool pdl,
		       cudaStream_t stream)
{
	if (bm == 128)
		return (bn == 128  ? gi_launch<TYPE, 128, 128>
			: bn == 64 ? gi_launch<TYPE, 128, 64>
				   : gi_launch<TYPE, 128, 32>)(a, pdl, stream);
	return (bn == 128  ? gi_launch<TYPE, 64, 128>
		: bn == 64 ? gi_launch<TYPE, 64, 64>
			   : gi_launch<TYPE, 64, 32>)(a, pdl, stream);
}

/* The scratch's rows of (d, s): M rounded up to even. */
static uint32_t gi_mp(uint32_t m)
{
	return (m + 1) & ~1u;
}

static uint64_t gi_xq_bytes(uint32_t m, uint32_t k)
{
	return ((uint64_t)m * k + 15) & ~(uint64_t)15;
}

/* o1_gemm_qi8_cuda's launch with the tiles and split of PLAN (BM 64 or
 * 128, BN 32, 64 or 128; splits 1 or 2). Operands checked by the caller. */
static int gi_dispatch(gi_plan plan, float *y, const void *scratch,
		       const void *w, enum o1_quant_type type, uint32_t m,
		       uint32_t n, uint32_t k, uint32_t ldy, bool pdl,
		       cudaStream_t stream)
{
	gi_args a = {};

	a.y = y;
	a.xq = (const int8_t *)scratch;
	a.ds = (const float2 *)((const uint8_t *)scratch + gi_xq_bytes(m, k));
	a.w = (const uint8_t *)w;
	a.m = m, a.n = n, a.k = k, a.ldy = ldy, a.mp = gi_mp(m);
	a.splits = plan.splits > 1 && k >= 512 ? 2 : 1;
	o1_quant_row_bytes(type, k, &a.rb);
	switch (type) {
	case O1_QUANT_Q8_0:
		return gi_launch_t<O1_QUANT_Q8_0>(a, plan.bm, plan.bn, pdl,
						  stream);
	case O1_QUANT_Q4_0:
		return gi_launch_t<O1_QUANT_Q4_0>(a, plan.bm, plan.bn, pdl,
						  stream);
	case O1_QUANT_Q5_0:
		return gi_launch_t<O1_QUANT_Q5_0>(a, plan.bm, plan.bn, pdl,
						  stream);
	case O1_QUANT_Q4_K:
		return gi_launch_t<O1_QUANT_Q4_K>(a, plan.bm, plan.bn, pdl,
						  stream);
	case O1_QUANT_Q6_K:
		return gi_launch_t<O1_QUANT_Q6_K>(a, plan.bm, plan.bn, pdl,
						  stream);
	default: /* not reached: o1_gemm_qi8_fits refuses the others */
		return -EINVAL;
	}
}

extern "C" uint64_t o1_gemm_qi8_scratch_bytes(uint32_t m, uint32_t k)
{
	return gi_xq_bytes(m, k) + (uint64_t)(k / 32) * gi_mp(m) * 8;
}

extern "C" bool o1_gemm_qi8_fits(enum o1_quant_type type, uint32_t n,
				 uint32_t k, const void *w)
{
	return (type == O1_QUANT_Q8_0 || type == O1_QUANT_Q4_0 ||
		type == O1_QUANT_Q5_0 || type == O1_QUANT_Q4_K ||
		type == O1_QUANT_Q6_K) &&
	       k && k % 256 == 0 && (uintptr_t)w % 16 == 0 &&
	       (n + 63) / 64 <= 65535;
}

extern "C" int o1_gemm_qi8_quantize_cuda(void *scratch, const uint16_t *x,
					 uint32_t m, uint32_t k, bool pdl,
					 cudaStream_t stream)
{
	uint64_t units = (uint64_t)m * (k / 32);

	if (!scratch || !x || !k || k % 256 || (uintptr_t)scratch % 16 ||
	    (uintptr_t)x % 16) {
		o1_err("gemm_qi8: bad quantize operands: m %u k %u", m, k);
		return -EINVAL;
	}
	if (!m)
		return 0;
	return O1_CUDA_LAUNCH(
	    "gemm_qi8 quantize", gi_quantize, dim3((unsigned)((units + 255) / 256)),
	    dim3(256), 0, stream, pdl, (int8_t *)scratch,
	    (float2 *)((uint8_t *)scratch + gi_xq_bytes(m, k)), x, m, k,
	    gi_mp(m));
}

extern "C" int o1_gemm_qi8_cuda(float *y, const void *scratch, const void *w,
				enum o1_quant_type type, uint32_t m,
				uint32_t n, uint32_t k, uint32_t ldy, bool pdl,
				cudaStream_t stream)
{
	if (!y || !scratch || !w || !n || ldy < n ||
	    !o1_gemm_qi8_fits(type, n, k, w) || (uintptr_t)scratch % 16) {
		o1_err("gemm_qi8: bad operands: type %u m %u n %u k %u ldy %u",
		       (unsigned)type, m, n, k, ldy);
		return -EINVAL;
	}
	if (!m)
		return 0;
	return gi_dispatch(gi_pick(m, n, k), y, scratch, w, type, m, n, k, ldy,
			   pdl, stream);
}

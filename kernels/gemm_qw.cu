/* The Hopper tensor-core product over weights kept in a GGUF block format,
 * for the steps of many rows (prefill, wide decode steps), built to run at
 * the speed of cuBLAS on the bf16 matrix without writing one:
 *
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . W (N,K)^T
 *
 * W's values are decoded in registers straight into the A operand of
 * wgmma.mma_async (m64nNk16, bf16 in, f32 sums) by bf16x2 arithmetic, a
 * few instructions a pair of elements: the quants put into the mantissa of
 * 128 by one logic operation, that bias subtracted (exact), then one
 * multiply or fused multiply-add by the unit's scales. The values, each
 * bf16 operation rounding to nearest even the exact real result (D, S:
 * quant.h's f32 scales rounded to bf16):
 *   Q8_0  q D                    Q4_0  (q - 8) D
 *   Q5_0  (q - 16) D (q: the nibble and its fifth bit above)
 *   Q6_K  (q - 32) S (S = d sc, per 16 elements)
 *   Q4_K  (q Dh - Mh) + (q Dl - Ml), each of the three rounded: D = d sc
 *         and M = dmin m in f32 (quant.h's), Dh = bf16(D), Dl = bf16(D -
 *         Dh), the same for M (with M rounded once as D is, the two
 *         roundings would not cancel where q D is near M: twice the
 *         tiles' error in a model's logits, 0.025 against 0.012 on the
 *         H200)
 * (tests/kernels/test_gemm_q_cuda.c computes the same on the CPU; they
 * differ from the tiles' values, quant.h's rounded once, by ~2^-9). The
 * tokens' rows are the B operand, read by the tensor cores from shared
 * memory.
 *
 * A block of two warpgroups computes 128 weight rows (64 a warpgroup) by
 * BN tokens: 256 where M > 128 (each decoded value then serves twice the
 * products), else 128. A stage is 128 elements of K. Both operands arrive
 * by the tensor memory accelerator (cp.async.bulk.tensor, two tensor maps
 * made on the host each call): the tokens as two 64-element boxes in the
 * 128-byte swizzle wgmma reads, the weight rows as one box of bytes per
 * stage from a 16-byte boundary (qw_type), rows and bytes past the matrix
 * filled with zeros. S buffers (2 to 4, as shared memory allows), each
 * with two mbarriers: full (its copies landed) and empty (each of the 8
 * warps arrives once its products read the buffer; thread 0 waits for
 * that before refilling it: no block barrier a stage, which held the
 * warpgroup whose products finished first: 9-13% at 256 tokens a block).
 * With 3 or more buffers stages are issued S - 2 ahead and a stage's last
 * group of products runs on while the next stage starts (QW_OVERLAP),
 * with 2 every stage drains. With QW_CLUSTER 2 (off until measured)
 * two blocks of the same tokens share each stage's token boxes by
 * multicast, a buffer refilled once both released it. A stage: wait for
 * its copies, each warp decodes its 16 rows' unit scales into its own
 * shared slots, then each
 * warpgroup runs 8 k16 products in two groups of four, the A fragments of
 * a group decoded while the tensor cores run the previous one. A thread's
 * fragment: rows g and g + 8 of its warp's 16, elements 2t, 2t + 1, 2t +
 * 8, 2t + 9 of the 16 (mma.sync's A layout, which wgmma keeps for A in
 * registers).
 *
 * K split (o1_gemm_qw_split_cuda, where the caller gives scratch): where
 * the grid of tiles leaves multiprocessors idle (O, down and QKV below
 * ~512 tokens: 32 to 96 tiles on 132 multiprocessors), each tile's K is
 * cut in S parts of whole stages, a block each (grid.z). Each part writes
 * its sums to the scratch (a thread's own float4s, coalesced), then
 * counts itself on the tile's counter; the part that counts last adds
 * the S sums in the order of K (part 0 first: the same bits whichever
 * part finishes last), writes y and puts the counter back to zero for
 * the next product. No part waits for another (no spinning on blocks
 * that may not be resident yet).
 *
 * GLU (o1_gemm_qw_swiglu_cuda, the gate/up product): a block's first 64
 * weight rows are gate rows, its last 64 the up rows F below them (two
 * weight boxes a stage), so each warpgroup holds the other's partner sums
 * at the same places of its accumulators; at the end they trade half
 * their tokens' sums through shared memory and write SwiGLU's bf16 (no
 * f32 gate/up written and read back; K never split).
 *
 * Invariants (o1_gemm_qw_fits): K a multiple of 256 and W's row pitch a
 * multiple of 16 bytes (the tensor map's stride; Q6_K: K a multiple of
 * 2,048); w and x 16-byte aligned; LDY >= N.
 * wgmma and the tensor maps need sm_90a: a build for another target
 * compiles the kernel body out and o1_gemm_qw_available says so. The
 * Hopper operations are hopper_dev.h's, which the CPU emulation runs
 * (tools/gpu/emu/run_gemm_q.sh: a change here is checked there first).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <cuda.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "gemm_blocks.h"
#include "hopper_dev.h"
#include "kernels_cuda.h"
#include "mma_dev.h"
#include "quant_dev.h"

extern "C" {
#include "common/log.h"
}

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL) || \
    defined(O1_EMU_H)
#define QW_WGMMA 1
#else
#define QW_WGMMA 0
#endif

#ifdef O1_EMU_H
#define QW_GRID_CONSTANT
#else
#define QW_GRID_CONSTANT __grid_constant__
#endif

#define QW_THREADS  256
#define QW_BM	    128 /* weight rows a block (64 a warpgroup) */
#define QW_SK	    128 /* elements of K a stage */
#define QW_SPLITS   8	/* parts of K at most */
#define QW_PART_MIN 8	/* stages a part at least (its pipeline's fill) */
#define QW_SMEM_MAX (227 * 1024)
/* 1: with 3 or more buffers, a stage's last group of products runs on
 * while the next stage's first group is decoded (stages issued S - 2
 * ahead); 0: every stage drains the tensor cores (S - 1 ahead) */
#ifndef QW_OVERLAP
#define QW_OVERLAP 1
#endif
/* A probe for one measurement, never a build to use (its sums are wrong):
 * 1 copies the tokens into each buffer once, at the prologue, and every
 * refill brings the weights only, so the kernel moves a fraction of its
 * bytes into shared memory with the same decode and products. Whether
 * that is faster says whether the copies' L2 -> SM traffic bounds it
 * (docs/STATUS.md, issue 18 (i)). An A/B in one call:
 *   QP_CTEST=0 QP_AB='kernels/gemm_qw.cu:s/ONCE 0$/ONCE 1/' \
 *     tools/gpu/quant_products.sh */
#ifndef QW_PROBE_TOKENS_ONCE
#define QW_PROBE_TOKENS_ONCE 0
#endif
/* 2: pairs of weight tiles (blockIdx.y 2 i and 2 i + 1, the same tokens)
 * run as thread block clusters, and each block copies one of a stage's
 * two token boxes into both (TMA multicast): each block-stage reads
 * half the token bytes from L2 (32 of its 82 KB at 256 tokens). A
 * buffer is refilled once both blocks' warps released it (the lead, its
 * own 8 warps' release seen, arrives on the other block's peer barrier,
 * then waits on its own). 1: no clusters. Not yet measured (issue 18
 * (i): the probe above first); grids of an odd tile count run without. */
#ifndef QW_CLUSTER
#define QW_CLUSTER 1
#endif

/* A stage's copy of the weights: the bytes of stage j (of the row's K /
 * 128) start at byte AT(j) of the row; the tensor memory accelerator
 * reads from 16-byte boundaries only (another start is an illegal
 * instruction), so the copy is BOX bytes a row from AT(j) rounded down to
 * 16, the stage's bytes OFF(j) into it (at most 8 for Q8_0, Q4_0 and
 * Q5_0, 14 for Q6_K, 0 for Q4_K). BLOCK: the bytes of K's 256 elements. */
template <int TYPE> struct qw_type {
	static constexpr uint32_t box =
	    TYPE == O1_QUANT_Q8_0   ? 144 /* 8 + 136 */
	    : TYPE == O1_QUANT_Q4_0 ? 80  /* 8 + 72 */
	    : TYPE == O1_QUANT_Q5_0 ? 96  /* 8 + 88 */
	    : TYPE == O1_QUANT_Q4_K ? 144
	    : TYPE == O1_QUANT_Q6_K ? 224 /* 14 + 210 */
				    : 0;
	static_assert(box, "no wgmma tiles for this block type");
	static constexpr uint32_t block = qb_raw<TYPE>::bytes;
	static __host__ __device__ uint32_t at(uint32_t j)
	{
		return TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q4_0 ||
			       TYPE == O1_QUANT_Q5_0
			   ? j * (block / 2)
			   : (j / 2) * block;
	}
	static __host__ __device__ uint32_t off(uint32_t j)
	{
		return at(j) % 16;
	}
};

/* Shared memory for BN tokens a block in clusters of CL, from a
 * 1024-byte boundary (the swizzle's): STAGES copies of (tokens: two boxes
 * of 64 elements, XBOX bytes each; weights: QW_BM rows of box bytes),
 * then each warp's unit scales (4 units x 16 rows, uint4), then the
 * mbarriers (full, empty and, in clusters, peer: 3 a buffer). */
template <int TYPE, int BN, int CL = 1> struct qw_smem {
	static constexpr uint32_t xbox = BN * 128;
	static constexpr uint32_t xs = 2 * xbox;
	static constexpr uint32_t stage =
	    (xs + QW_BM * qw_type<TYPE>::box + 1023) / 1024 * 1024;
	static constexpr uint32_t sc = 8 * 4 * 16 * 16;
	static constexpr uint32_t extra =
	    1024 + sc + 8 * (CL > 1 ? 12 : 8); /* barriers */
	static constexpr uint32_t stages = (QW_SMEM_MAX - extra) / stage < 4
					       ? (QW_SMEM_MAX - extra) / stage
					       : 4;
	static constexpr uint32_t total = extra + stages * stage;
	static constexpr uint32_t tx = xs + QW_BM * qw_type<TYPE>::box;
};

struct qw_args {
	hop_map xmap; /* x: (M, K) bf16, boxes of 64 x BN, 128B swizzle */
	hop_map wmap; /* w: (N, row bytes) uint8, boxes of box x QW_BM (GLU:
			x QW_BM / 2) */
	float *y;
	uint16_t *act;	 /* GLU: (M, GLU) bf16, rows LDY apart */
	float *part;	 /* splits > 1: each part's sums, a tile's together */
	uint32_t *count; /* splits > 1: parts done, a counter a tile */
	uint32_t m, n, k, ldy;
	uint32_t splits; /* parts of K */
	uint32_t glu;	 /* 0, or F: SwiGLU of rows j and F + j into act */
};

/* Whether this device's copy of the module has the wgmma kernel. */
static __device__ int qw_compiled = QW_WGMMA;

#if QW_WGMMA
/* A warp's arrival on BAR (lane 0's). */
static __device__ __forceinline__ void qw_arrive(uint64_t *bar, uint32_t lane)
{
	if (!lane)
		hop_bar_arrive(bar);
}

/* Stage J's copies (tokens M0.., weight rows R0..) into ST, on BAR; in
 * clusters (CL 2) token box RANK only, into both blocks. */
template <int TYPE, int BN, int CL>
static __device__ __forceinline__ void
qw_issue(uint8_t *st, uint64_t *bar, const qw_args &a, uint32_t r0, uint32_t m0,
	 uint32_t j, bool weights, bool tokens, uint32_t rank)
{
	int32_t c0 = (int32_t)(qw_type<TYPE>::at(j) - qw_type<TYPE>::off(j));

	/* GLU: gate rows R0.. in the first half, up rows F + R0.. after */
	if (weights)
		hop_tma_2d(st + qw_smem<TYPE, BN>::xs, &a.wmap, c0, (int32_t)r0,
		       bar);
	if (weights && a.glu)
		hop_tma_2d(st + qw_smem<TYPE, BN>::xs +
			   QW_BM / 2 * qw_type<TYPE>::box,
		       &a.wmap, c0, (int32_t)(a.glu + r0), bar);
	if (tokens && CL > 1)
		hop_tma_2d_multicast(st + rank * qw_smem<TYPE, BN>::xbox,
				     &a.xmap, (int32_t)(QW_SK * j + 64 * rank),
				     (int32_t)m0, bar, (1u << CL) - 1);
	else if (tokens)
		for (int b = 0; b < 2; b++)
			hop_tma_2d(st + b * qw_smem<TYPE, BN>::xbox, &a.xmap,
			       (int32_t)(QW_SK * j + 64 * b), (int32_t)m0, bar);
}

/* F as a bf16 pair, and F less that (exact in f32) as a second. */
static __device__ __forceinline__ void qw_split(float f, uint32_t &hi,
						uint32_t &lo)
{
	float r;

	hi = mma_pack_bf16(f, f);
	r = __fsub_rn(f, __uint_as_float(hi << 16));
	lo = mma_pack_bf16(r, r);
}

/* f16 bits H as f32 by the conversion instruction (exact; quant_dev.h's
 * qd_f16 takes ~8 integer operations and a branch), Inf and NaN as
 * quant.h keeps them (the instruction may quiet a NaN). */
static __device__ __forceinline__ float qw_f16(uint32_t h)
{
	float f = hop_f16_f32(h);

	return (h & 0x7c00u) == 0x7c00u
		   ? __uint_as_float((h & 0x8000u) << 16 | 0x7f800000u |
				     (h & 0x3ffu) << 13)
		   : f;
}

/* Q4_K's scale and min of sub-block S (0-7) from the 12 bytes at X, times
 * D and DM (the block's d and dmin), as qw_pair takes them: (D, -M, and
 * what rounding them to bf16 left off: D - D', -M + M'), each a bf16
 * pair; quant.h's values (the 6-bit integers exact as f32 by
 * qd_float_less). */
static __device__ __forceinline__ uint4 qw_k_scales(const uint8_t *x,
						    uint32_t s, float d,
						    float dm)
{
	uint32_t sc, mn;
	uint4 v;

	qd_k4_scale_min(x, s, sc, mn);
	qw_split(__fmul_rn(d, qd_float_less(sc, 0)), v.x, v.z);
	qw_split(-__fmul_rn(dm, qd_float_less(mn, 0)), v.y, v.w);
	return v;
}

/* The scales of local units L and L + 2 (of the stage's 4; HALF: which
 * half of the super-block the stage is) of the row at R into A and B, as
 * qw_pair takes them: Q8_0, Q4_0 and Q5_0 (D, -, -, -), Q4_K
 * (qw_k_scales), Q6_K (S of elements < 16, S of the others, -, -); each
 * value a bf16 pair: qd_head's values, the K types' block scale converted
 * once for both (a quarter of a stage's work was these scales, c25 call
 * 4's profile). */
template <int TYPE>
static __device__ __forceinline__ void qw_scales(const uint8_t *r, uint32_t l,
						 uint32_t half, uint4 &a,
						 uint4 &b)
{
	static_assert(qw_type<TYPE>::box, "no wgmma tiles for this block type");
	a = b = make_uint4(0, 0, 0, 0);
	if constexpr (TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q4_0 ||
		      TYPE == O1_QUANT_Q5_0) {
		constexpr uint32_t BYTES =
		    TYPE == O1_QUANT_Q8_0   ? O1_QUANT_Q8_0_BYTES
		    : TYPE == O1_QUANT_Q4_0 ? O1_QUANT_Q4_0_BYTES
					    : O1_QUANT_Q5_0_BYTES;
		float d0 = qw_f16(qd_u16(r + l * BYTES)),
		      d1 = qw_f16(qd_u16(r + (l + 2) * BYTES));

		a.x = mma_pack_bf16(d0, d0);
		b.x = mma_pack_bf16(d1, d1);
	} else if constexpr (TYPE == O1_QUANT_Q4_K) {
		uint32_t dd = *(const uint32_t *)r;
		float d = qw_f16(dd & 0xffff), dm = qw_f16(dd >> 16);

		a = qw_k_scales(r + 4, 4 * half + l, d, dm);
		b = qw_k_scales(r + 4, 4 * half + l + 2, d, dm);
	} else if constexpr (TYPE == O1_QUANT_Q6_K) {
		/* units g = L and L + 2 of half HALF: int8 scales 2 g and
		 * 2 g + 1 of the 8 at 192 + 8 HALF */
		const int8_t *sc = (const int8_t *)(r + 192) + 8 * half + 2 * l;
		float d = qw_f16(qd_u16(r + 208));
		float s0 = __fmul_rn(d, qd_float_less(sc[0] + 128, 128)),
		      s1 = __fmul_rn(d, qd_float_less(sc[1] + 128, 128)),
		      s4 = __fmul_rn(d, qd_float_less(sc[4] + 128, 128)),
		      s5 = __fmul_rn(d, qd_float_less(sc[5] + 128, 128));

		a.x = mma_pack_bf16(s0, s0), a.y = mma_pack_bf16(s1, s1);
		b.x = mma_pack_bf16(s4, s4), b.y = mma_pack_bf16(s5, s5);
	}
}

/* The 16-bit word at P (2-byte aligned) with its bytes in the two halves
 * of a word (byte 0 in bits 0-7, byte 1 in bits 16-23). */
static __device__ __forceinline__ uint32_t qw_spread(const uint8_t *p)
{
	return __byte_perm(qd_u16(p), 0, 0x4140);
}

/* Elements E and E + 1 (E even) of local unit L of the stage's row at R
 * (HALF as qw_scales), scaled by S (qw_scales'), as a bf16 pair (E in the
 * low half): the values of the header comment. */
template <int TYPE>
static __device__ __forceinline__ uint32_t qw_pair(const uint8_t *r, uint32_t l,
						   uint32_t half, uint32_t e,
						   uint4 s)
{
	static_assert(qw_type<TYPE>::box, "no wgmma tiles for this block type");
	if constexpr (TYPE == O1_QUANT_Q8_0) {
		uint32_t w =
		    qd_u16(r + l * O1_QUANT_Q8_0_BYTES + 2 + e) ^ 0x8080;
		/* |q| <= 128: exact as f32 and as bf16 */
		float lo = __fsub_rn(qd_magic(w & 0xff), 8388736.0f),
		      hi = __fsub_rn(qd_magic(w >> 8), 8388736.0f);

		return hop_mul2(mma_pack_bf16(lo, hi), s.x);
	} else if constexpr (TYPE == O1_QUANT_Q4_0) {
		/* elements < 16: low nibbles of bytes 0..15, then high */
		uint32_t w =
		    qw_spread(r + l * O1_QUANT_Q4_0_BYTES + 2 + e % 16);

		w = (e < 16 ? w : w >> 4) & 0x000f000fu;
		return hop_mul2(hop_add2(w | 0x43004300u, 0xc308c308u) /* -136 */,
			       s.x);
	} else if constexpr (TYPE == O1_QUANT_Q5_0) {
		/* Q4_0's nibbles; the fifth bits of E and E + 1 (bits E % 16
		 * and E % 16 + 1 of qh's half E / 16) to bits 4 and 20 */
		const uint8_t *b = r + l * O1_QUANT_Q5_0_BYTES;
		uint32_t w = qw_spread(b + 6 + e % 16);
		uint32_t h = qd_u16(b + 2 + 2 * (e / 16)) >> (e % 16);

		w = (e < 16 ? w : w >> 4) & 0x000f000fu;
		w |= (h & 1) << 4 | (h & 2) << 19;
		/* 128 + q less 144: q - 16, exact */
		return hop_mul2(hop_add2(w | 0x43004300u, 0xc310c310u), s.x);
	} else if constexpr (TYPE == O1_QUANT_Q4_K) {
		uint32_t u = 4 * half + l;
		uint32_t w = qw_spread(r + 16 + 32 * (u / 2) + e);

		/* even units: low nibbles, odd: high; 128 + q less 128 */
		w = ((u % 2 ? w >> 4 : w) & 0x000f000fu) | 0x43004300u;
		w = hop_add2(w, 0xc300c300u);
		/* q D - M with D and M in two bf16 parts each: the min's
		 * rounding would not cancel where q D is near M */
		return hop_add2(hop_fma2(w, s.x, s.y), hop_fma2(w, s.z, s.w));
	} else if constexpr (TYPE == O1_QUANT_Q6_K) {
		uint32_t u = 4 * half + l, h = u / 4, g = u % 4;
		uint32_t lo = qw_spread(r + 64 * h + 32 * (g % 2) + e);
		uint32_t hb = qw_spread(r + 128 + 32 * h + e);
		uint32_t q = ((g < 2 ? lo : lo >> 4) & 0x000f000fu) |
			     ((hb >> (2 * g)) & 0x00030003u) << 4;

		/* 128 + q less 160: q - 32 */
		return hop_mul2(hop_add2(q | 0x43004300u, 0xc320c320u),
			       e < 16 ? s.x : s.y);
	}
}

/* Group GI's A fragments (k16 steps 4 GI .. 4 GI + 3) of a stage whose
 * rows g and g + 8 of the warp's 16 are at RA (HALF as qw_scales), by the
 * warp's unit scales SC (qw_scales', [4][16]). */
template <int TYPE>
static __device__ __forceinline__ void
qw_frags(uint32_t (&af)[4][4], const uint8_t *const (&ra)[2], const uint4 *sc,
	 uint32_t half, int gi, uint32_t g, uint32_t t)
{
#pragma unroll
	for (int s = 0; s < 4; s++) {
		uint32_t kk = 4 * gi + s, l = kk / 2, e = 16 * (kk % 2) + 2 * t;
		uint4 s0 = sc[16 * l + g], s1 = sc[16 * l + g + 8];

		af[s][0] = qw_pair<TYPE>(ra[0], l, half, e, s0);
		af[s][1] = qw_pair<TYPE>(ra[1], l, half, e, s1);
		af[s][2] = qw_pair<TYPE>(ra[0], l, half, e + 8, s0);
		af[s][3] = qw_pair<TYPE>(ra[1], l, half, e + 8, s1);
	}
}

/* This warp's 16 rows' unit scales of the stage whose bytes of the
 * block's first row are at WST (HALF as qw_scales) into its slots SC:
 * 64 (unit, row) pairs, units lane / 16 and lane / 16 + 2 of row
 * lane % 16 a lane. */
template <int TYPE>
static __device__ __forceinline__ void
qw_warp_scales(const uint8_t *wst, uint4 *sc, uint32_t half)
{
	constexpr uint32_t BOX = qw_type<TYPE>::box;
	uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;

	__syncwarp(); /* every lane read the last stage's scales */
	qw_scales<TYPE>(wst + (16 * warp + lane % 16) * BOX, lane / 16, half,
			sc[lane], sc[lane + 32]);
	__syncwarp();
}

/* SwiGLU's silu(g) u in f32, as swiglu.cu computes it. */
static __device__ __forceinline__ float qw_silu_mul(float g, float u)
{
	return g / (1.0f + expf(-g)) * u;
}

/* The GLU epilogue: the first warpgroup holds the gate rows' sums, the
 * second the up rows' at the same places of acc; each gives the other its
 * sums of half the tokens through shared memory EX (every buffer free
 * once every warp's products are done), then writes SwiGLU's bf16 for its
 * half: the first warpgroup acc[0 .. BN / 4), the second the rest. */
template <int BN>
static __device__ __forceinline__ void qw_glu_store(const float (&acc)[BN / 2],
						    float *ex, const qw_args &a,
						    uint32_t r0, uint32_t m0)
{
	uint32_t wg = threadIdx.x / 128, i0 = threadIdx.x % 128, warp = i0 / 32,
		 g = i0 % 32 / 4, t = i0 % 4;

	__syncthreads();
#pragma unroll
	for (int i = 0; i < BN / 2; i++)
		if ((i < BN / 4) == (wg == 1))
			ex[i * 128 + i0] = acc[i];
	__syncthreads();
#pragma unroll
	for (int jj = 0; jj < BN / 8; jj++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			int i = 4 * jj + e;
			uint32_t row = r0 + 16 * warp + g + 8 * (e / 2),
				 tok = m0 + 8 * jj + 2 * t + e % 2;
			float o;

			if ((i < BN / 4) != (wg == 0) || row >= a.glu ||
			    tok >= a.m)
				continue;
			o = wg == 0 ? qw_silu_mul(acc[i], ex[i * 128 + i0])
				    : qw_silu_mul(ex[i * 128 + i0], acc[i]);
			a.act[(size_t)tok * a.ldy + row] =
			    (uint16_t)mma_pack_bf16(o, o);
		}
}

/* The block's sums V of its float4 J (acc[4 J + e]: row g + 8 (e / 2) of
 * the warp's 16, token 8 J + 2 t + e % 2) into y. */
static __device__ __forceinline__ void
qw_store4(const qw_args &a, uint32_t r0, uint32_t m0, uint32_t j, float4 v)
{
	uint32_t lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	uint32_t row = r0 + 16 * (threadIdx.x / 32) + g,
		 tok = m0 + 8 * j + 2 * t;
	float e[4] = {v.x, v.y, v.z, v.w};

#pragma unroll
	for (int i = 0; i < 4; i++)
		if (row + 8 * (i / 2) < a.n && tok + i % 2 < a.m)
			a.y[(size_t)(tok + i % 2) * a.ldy + row + 8 * (i / 2)] =
			    e[i];
}

/* K split: this part's sums ACC into the scratch, counted on the tile's
 * counter; the part that counts last adds every part's sums in the order
 * of K (part 0's first) into y and puts the counter back to zero. A
 * thread's sums are BN / 8 float4s, the block's i-th ones together
 * (coalesced); the last part reads its own back too (ACC's registers
 * free: no spills at 256 tokens a block). */
template <int BN>
static __device__ __forceinline__ void qw_sum_parts(const float (&acc)[BN / 2],
						    const qw_args &a,
						    uint32_t r0, uint32_t m0)
{
	constexpr uint32_t PART = QW_BM * BN / 4; /* float4s */
	uint32_t tile = blockIdx.y * gridDim.x + blockIdx.x;
	const float4 *parts = (const float4 *)a.part +
			      (size_t)tile * a.splits * PART + threadIdx.x;
	float4 *mine = (float4 *)parts + (size_t)blockIdx.z * PART;

#pragma unroll
	for (int i = 0; i < BN / 8; i++)
		__stcg(&mine[i * QW_THREADS],
		       make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2],
				   acc[4 * i + 3]));
	__threadfence(); /* the sums before the count (the last reads them) */
	__syncthreads();
	if (!__syncthreads_or(threadIdx.x == 0 &&
			      atomicAdd(&a.count[tile], 1) == a.splits - 1))
		return;	 /* another part adds this one's sums */
	__threadfence(); /* the other parts' sums after their counts */
	/* C float4s at once, their loads in flight together (one at a
	 * time, each waiting its L2 latency, the whole Q4_K_M ran 16,715
	 * tok/s at 256 streams on the H200 against 18,865) */
	constexpr int C = BN / 8 < 16 ? BN / 8 : 16;
	for (int c0 = 0; c0 < BN / 8; c0 += C) {
		float4 s[C];

#pragma unroll
		for (int i = 0; i < C; i++)
			s[i] = __ldcg(&parts[(c0 + i) * QW_THREADS]);
		for (uint32_t z = 1; z < a.splits; z++) {
			float4 v[C];

#pragma unroll
			for (int i = 0; i < C; i++)
				v[i] = __ldcg(&parts[(size_t)z * PART +
						     (c0 + i) * QW_THREADS]);
#pragma unroll
			for (int i = 0; i < C; i++)
				s[i] = make_float4(
				    s[i].x + v[i].x, s[i].y + v[i].y,
				    s[i].z + v[i].z, s[i].w + v[i].w);
		}
#pragma unroll
		for (int i = 0; i < C; i++)
			qw_store4(a, r0, m0, c0 + i, s[i]);
	}
	if (threadIdx.x == 0)
		a.count[tile] = 0; /* for the next product (stream order) */
}
#endif

/* Grid: (token tiles of BN, weight tiles, parts of K); CL: clusters of
 * weight tiles (1 or 2, QW_CLUSTER). */
template <int TYPE, int BN, int CL>
static __global__ void __launch_bounds__(QW_THREADS, 1)
    gemm_qw(const QW_GRID_CONSTANT qw_args a)
{
#if QW_WGMMA
	static_assert(CL == 1 || CL == 2, "a token box a block");
	using sm = qw_smem<TYPE, BN, CL>;
	constexpr uint32_t S = sm::stages, BOX = qw_type<TYPE>::box;
	/* overlap needs a third buffer */
	constexpr bool OV = QW_OVERLAP && S >= 3;
	constexpr uint32_t D = OV ? S - 2 : S - 1; /* issued ahead */
	extern __shared__ uint8_t qw_shared[];
	/* from the shared array itself, so that the compiler knows the
	 * address space (shared loads, not generic ones) */
	uint8_t *base =
	    qw_shared + ((1024 - (hop_saddr(qw_shared) & 1023)) & 1023);
	uint4 *sc = (uint4 *)(base + S * sm::stage) +
		    (threadIdx.x / 32) * 64; /* this warp's [4][16] */
	uint64_t *bar = (uint64_t *)(base + S * sm::stage + sm::sc);
	uint64_t *empty = bar + S; /* every warp done with the buffer */
	uint64_t *peer = empty + S; /* CL 2: the other block's done too */
	/* GLU: 64 gate rows (the first warpgroup's) and their up rows */
	uint32_t m0 = blockIdx.x * BN,
		 r0 = blockIdx.y * (a.glu ? QW_BM / 2 : QW_BM);
	uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4,
		 t = lane % 4;
	uint32_t steps = a.k / QW_SK;
	uint32_t js = steps * blockIdx.z / a.splits;
	uint32_t n_t = steps * (blockIdx.z + 1) / a.splits - js;
	bool lead = threadIdx.x == 0;
	uint32_t rank = CL > 1 ? hop_cluster_rank() : 0;
	/* first written by the block's first product (ADD 0: zeros in
	 * registers before it would serialize the products); every part of
	 * K has a stage (qw_parts) */
	float acc[BN / 2];
	uint32_t af[2][4][4]; /* two groups' A fragments */

	if (lead) {
		for (uint32_t s = 0; s < S; s++) {
			hop_bar_init(&bar[s], 1);
			hop_bar_init(&empty[s], QW_THREADS / 32);
			if (CL > 1)
				hop_bar_init(&peer[s], 1);
		}
		hop_fence_bar_init();
		hop_fence_async_smem();
		/* the weights: no kernel writes them, so before the wait */
		for (uint32_t s = 0; s < D && s < n_t; s++) {
			hop_bar_expect_tx(&bar[s], sm::tx);
			qw_issue<TYPE, BN, CL>(base + s * sm::stage, &bar[s], a,
					       r0, m0, js + s, true, false,
					       rank);
		}
	}
	/* both blocks' barriers initialized before either's multicast */
	if (CL > 1)
		hop_cluster_sync();
	o1_pdl_wait();
	o1_pdl_trigger();
	if (lead)
		for (uint32_t s = 0; s < D && s < n_t; s++)
			qw_issue<TYPE, BN, CL>(base + s * sm::stage, &bar[s], a,
					       r0, m0, js + s, false, true,
					       rank);
	__syncthreads();
	for (uint32_t st = 0; st < n_t; st++) {
		uint32_t b = st % S, j = js + st, half = j % 2;
		const uint8_t *cur = base + b * sm::stage;
		/* the stage's bytes of this block's first row */
		const uint8_t *wst = cur + sm::xs + qw_type<TYPE>::off(j);

		hop_bar_wait(&bar[b], (st / S) % 2);
		/* the copies of stage st + D go into the buffer of stage st +
		 * D - S once every warp released that: with overlap the
		 * warps release stage st - 1 during stage st, so this waits
		 * for stage st - 2, rarely at all; no block barrier a stage
		 * (one held the warpgroup whose products finished first) */
		if (lead && st + D < n_t) {
			uint32_t nb = (st + D) % S, use = (st + D) / S;

			if (use)
				hop_bar_wait(&empty[nb], (use - 1) % 2);
			/* CL 2: the other block's token box lands here too */
			if (use && CL > 1) {
				hop_bar_arrive_remote(&peer[nb], rank ^ 1);
				hop_bar_wait(&peer[nb], (use - 1) % 2);
			}
			hop_fence_async_smem();
			hop_bar_expect_tx(&bar[nb], QW_PROBE_TOKENS_ONCE
							? sm::tx - sm::xs
							: sm::tx);
			qw_issue<TYPE, BN, CL>(base + nb * sm::stage, &bar[nb],
					       a, r0, m0, j + D, true,
					       !QW_PROBE_TOKENS_ONCE, rank);
		}
		qw_warp_scales<TYPE>(wst, sc, half);

		const uint8_t *ra[2];

#pragma unroll
		for (int h = 0; h < 2; h++)
			ra[h] = wst + (16 * warp + g + 8 * h) * BOX;

#pragma unroll
		for (int gi = 0; gi < 2; gi++) {
			qw_frags<TYPE>(af[gi], ra, sc, half, gi, g, t);
			hop_wgmma_fence();
			hop_pin(acc);
#pragma unroll
			for (int s = 0; s < 4; s++) {
				uint32_t kk = 4 * gi + s;

				/* box kk / 4, 32 bytes a k16 within it */
				hop_wgmma(acc, af[gi][s],
				       hop_desc_sw128(cur + (kk / 4) * sm::xbox +
					       32 * (kk % 4)),
				       st || kk);
			}
			hop_wgmma_commit();
			hop_pin(acc);
			/* QW_OVERLAP: the group before done, so its
			 * registers (the other set) are free; else every
			 * product of the stage done at its end */
			if (OV) {
				hop_wgmma_wait<1>();
				/* stage st - 1 done: its buffer free (where
				 * a copy will wait for it) */
				if (gi == 0 && st && st - 1 + S < n_t)
					qw_arrive(&empty[(st - 1) % S], lane);
			} else if (gi == 1) {
				hop_wgmma_wait<0>();
				if (st + S < n_t)
					qw_arrive(&empty[b], lane);
			}
		}
	}
	hop_wgmma_wait<0>();
	/* every copy and arrival into this block's shared memory came
	 * before the other block passes this: neither ends before */
	if (CL > 1)
		hop_cluster_sync();
	if (a.glu) {
		qw_glu_store<BN>(acc, (float *)base, a, r0, m0);
		return;
	}
	if (a.splits > 1) {
		qw_sum_parts<BN>(acc, a, r0, m0);
		return;
	}
#pragma unroll
	for (int j = 0; j < BN / 8; j++)
		qw_store4(a, r0, m0, j,
			  make_float4(acc[4 * j], acc[4 * j + 1],
				      acc[4 * j + 2], acc[4 * j + 3]));
#endif
}

typedef CUresult (*qw_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t,
				 void *, const cuuint64_t *, const cuuint64_t *,
				 const cuuint32_t *, const cuuint32_t *,
				 CUtensorMapInterleave, CUtensorMapSwizzle,
				 CUtensorMapL2promotion,
				 CUtensorMapFloatOOBfill);

/* The driver's cuTensorMapEncodeTiled (through the runtime: no libcuda
 * link), NULL where it has none. */
static qw_encode_fn qw_find_encoder(void)
{
	void *p = NULL;
	cudaDriverEntryPointQueryResult q;

	if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p,
					     12000, cudaEnableDefault,
					     &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		return (qw_encode_fn)p;
	return NULL;
}

/* qw_find_encoder's answer, asked once (a function's static: its first
 * use is thread-safe, several backends may ask at once). */
static qw_encode_fn qw_encoder(void)
{
	static const qw_encode_fn fn = qw_find_encoder();

	return fn;
}

/* A 2-D tensor map over MAP's matrix: ROWS x COLS elements of TYPE, rows
 * PITCH bytes apart, boxes of BC x BR; 0 or -EINVAL. */
static int qw_encode(hop_map *map, CUtensorMapDataType type, const void *p,
		     uint64_t cols, uint64_t rows, uint64_t pitch, uint32_t bc,
		     uint32_t br, CUtensorMapSwizzle swizzle)
{
	static_assert(sizeof(hop_map) == sizeof(CUtensorMap), "tensor map");
	qw_encode_fn enc = qw_encoder();
	cuuint64_t dim[2] = {cols, rows}, stride[1] = {pitch};
	cuuint32_t box[2] = {bc, br}, one[2] = {1, 1};
	CUresult r;

	if (!enc)
		return -ENOTSUP;
	r = enc((CUtensorMap *)map, type, 2, (void *)p, dim, stride, box, one,
		CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
		CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
		CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		o1_err("gemm_qw: cuTensorMapEncodeTiled: error %d", (int)r);
		return -EINVAL;
	}
	return 0;
}

/* gemm_qw<TYPE, BN, CL> over GRID, its maps encoded. */
template <int TYPE, int BN, int CL>
static int qw_launch_cl(qw_args &a, dim3 grid, bool pdl, cudaStream_t stream)
{
	constexpr uint32_t smem = qw_smem<TYPE, BN, CL>::total;
	int err = O1_CUDA_CHECK(cudaFuncSetAttribute(
	    gemm_qw<TYPE, BN, CL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
	    (int)smem));

	if (err)
		return err;
	return O1_CUDA_LAUNCH_CL("gemm_qw", gemm_qw<TYPE, BN, CL>, grid,
				 dim3(QW_THREADS), dim3(1, CL, 1), smem, stream,
				 pdl, a);
}

template <int TYPE, int BN>
static int qw_launch(qw_args &a, const void *x, const void *w, uint64_t rb,
		     bool pdl, cudaStream_t stream)
{
	uint32_t tiles = a.glu ? (a.glu + QW_BM / 2 - 1) / (QW_BM / 2)
			       : (a.n + QW_BM - 1) / QW_BM;
	dim3 grid((a.m + BN - 1) / BN, tiles, a.splits);
	int err;

	err = qw_encode(&a.xmap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x, a.k, a.m,
			(uint64_t)a.k * 2, 64, BN, CU_TENSOR_MAP_SWIZZLE_128B);
	if (!err)
		err = qw_encode(&a.wmap, CU_TENSOR_MAP_DATA_TYPE_UINT8, w, rb,
				a.n, rb, qw_type<TYPE>::box,
				a.glu ? QW_BM / 2 : QW_BM,
				CU_TENSOR_MAP_SWIZZLE_NONE);
	if (err)
		return err;
	if constexpr (QW_CLUSTER > 1)
		if (tiles % QW_CLUSTER == 0)
			return qw_launch_cl<TYPE, BN, QW_CLUSTER>(a, grid, pdl,
								  stream);
	return qw_launch_cl<TYPE, BN, 1>(a, grid, pdl, stream);
}

/* Tiles of BN tokens by QW_BM weight rows over M x N. */
static uint32_t qw_tiles(uint32_t m, uint32_t n, uint32_t bn)
{
	return (m + bn - 1) / bn * ((n + QW_BM - 1) / QW_BM);
}

/* Parts of K for TILES tiles of K's STEPS stages, with the scratch SP
 * (NULL: 1): SP's splits where it asks (at most the stages), else as
 * many as keep the tiles' blocks within a wave (at most QW_SPLITS, each
 * at least QW_PART_MIN stages), 1 where that is fewer than 2; at most
 * what SP's scratch holds for tiles of BN tokens. */
static uint32_t qw_parts(uint32_t tiles, uint32_t steps, uint32_t bn,
			 const struct o1_gemm_qw_split *sp)
{
	uint64_t tile_bytes = (uint64_t)QW_BM * bn * 4, s, fit;

	if (!sp || !sp->part || !sp->count || !tiles ||
	    tiles > O1_GEMM_QW_COUNTS)
		return 1;
	if (sp->splits) {
		s = sp->splits < steps ? sp->splits : steps;
	} else {
		s = o1_cuda_sm_count() / tiles;
		s = s < QW_SPLITS ? s : QW_SPLITS;
		s = s < steps / QW_PART_MIN ? s : steps / QW_PART_MIN;
	}
	fit = sp->part_bytes / (tiles * tile_bytes);
	s = s < fit ? s : fit;
	return s >= 2 ? (uint32_t)s : 1;
}

/* Tokens a block: 256 above 128 rows (each decoded value then serves
 * twice the products) where those tiles' grid, K in parts, still fills
 * 70% of the multiprocessors, else 128. With qw_parts' count, on the
 * H200 (bench_gemm_q --wg-sweep: 128 or 256 tokens by 1-8 parts) the
 * fastest plan or within 2% of it at every llama3-8b shape of 16 to 2,048
 * rows, Q4_K and Q6_K; e.g. (Q4_K, us) O at 128 rows 128x4 21.2 (K whole
 * 45.4), down 128x4 48.3 (147.5); at 256 rows down 256x4 70.2 (128x2
 * 83.0), QKV 256x2 41.4 (128x1 46.9). */
static uint32_t qw_bn(uint32_t m, uint32_t n, uint32_t k,
		      const struct o1_gemm_qw_split *sp)
{
	uint32_t tiles = qw_tiles(m, n, 256);
	uint64_t b = (uint64_t)tiles * qw_parts(tiles, k / QW_SK, 256, sp);

	return m > 128 && 10 * b >= 7 * (uint64_t)o1_cuda_sm_count() ? 256
								     : 128;
}

template <int TYPE>
static int qw_launch_m(qw_args &a, const void *x, const void *w, uint64_t rb,
		       const struct o1_gemm_qw_split *sp, bool pdl,
		       cudaStream_t stream)
{
	/* SwiGLU is not linear: K whole */
	const struct o1_gemm_qw_split *s = a.glu ? NULL : sp;
	uint32_t bn = qw_bn(a.m, a.n, a.k, s);

	a.splits = qw_parts(qw_tiles(a.m, a.n, bn), a.k / QW_SK, bn, s);
	if (a.splits > 1)
		a.part = sp->part, a.count = sp->count;
	return bn == 256 ? qw_launch<TYPE, 256>(a, x, w, rb, pdl, stream)
			 : qw_launch<TYPE, 128>(a, x, w, rb, pdl, stream);
}

extern "C" bool o1_gemm_qw_available(void)
{
	/* asked once (a thread-safe static), on the first caller's device */
	static const bool have = [] {
		int v = 0;

		return cudaMemcpyFromSymbol(&v, qw_compiled, sizeof v) ==
			   cudaSuccess &&
		       v && qw_encoder();
	}();

	return have;
}

extern "C" bool o1_gemm_qw_fits(enum o1_quant_type type, uint32_t n, uint32_t k,
				const void *w)
{
	uint64_t rb = 0;

	return (type == O1_QUANT_Q8_0 || type == O1_QUANT_Q4_0 ||
		type == O1_QUANT_Q5_0 || type == O1_QUANT_Q4_K ||
		type == O1_QUANT_Q6_K) &&
	       k && k % 256 == 0 && (uintptr_t)w % 16 == 0 &&
	       o1_quant_row_bytes(type, k, &rb) == 0 && rb % 16 == 0 &&
	       (n + QW_BM - 1) / QW_BM <= 65535;
}

/* The checks and launch of o1_gemm_qw_cuda and o1_gemm_qw_swiglu_cuda,
 * A's pointers and sizes set. */
static int qw_run(qw_args &a, const uint16_t *x, const void *w,
		  enum o1_quant_type type, const struct o1_gemm_qw_split *sp,
		  bool pdl, cudaStream_t stream)
{
	uint64_t rb = 0;

	if (!(a.glu ? (void *)a.act : (void *)a.y) || !x || !w || !a.n ||
	    a.ldy < (a.glu ? a.glu : a.n) || (uintptr_t)x % 16 ||
	    (sp && (uintptr_t)sp->part % 16) ||
	    !o1_gemm_qw_fits(type, a.n, a.k, w)) {
		o1_err("gemm_qw: bad operands: type %u m %u n %u k %u ldy %u "
		       "glu %u",
		       (unsigned)type, a.m, a.n, a.k, a.ldy, a.glu);
		return -EINVAL;
	}
	if (!o1_gemm_qw_available()) {
		o1_err("gemm_qw: not in this build (wgmma needs sm_90a)");
		return -ENOTSUP;
	}
	if (!a.m)
		return 0;
	o1_quant_row_bytes(type, a.k, &rb);
	switch (type) {
	case O1_QUANT_Q8_0:
		return qw_launch_m<O1_QUANT_Q8_0>(a, x, w, rb, sp, pdl, stream);
	case O1_QUANT_Q4_0:
		return qw_launch_m<O1_QUANT_Q4_0>(a, x, w, rb, sp, pdl, stream);
	case O1_QUANT_Q5_0:
		return qw_launch_m<O1_QUANT_Q5_0>(a, x, w, rb, sp, pdl, stream);
	case O1_QUANT_Q4_K:
		return qw_launch_m<O1_QUANT_Q4_K>(a, x, w, rb, sp, pdl, stream);
	case O1_QUANT_Q6_K:
		return qw_launch_m<O1_QUANT_Q6_K>(a, x, w, rb, sp, pdl, stream);
	default: /* not reached: o1_gemm_qw_fits refuses the others */
		return -EINVAL;
	}
}

extern "C" int o1_gemm_qw_split_cuda(float *y, const uint16_t *x, const void *w,
				     enum o1_quant_type type, uint32_t m,
				     uint32_t n, uint32_t k, uint32_t ldy,
				     const struct o1_gemm_qw_split *split,
				     bool pdl, cudaStream_t stream)
{
	qw_args a;

	memset(&a, 0, sizeof a);
	a.y = y;
	a.m = m, a.n = n, a.k = k, a.ldy = ldy;
	return qw_run(a, x, w, type, split, pdl, stream);
}

extern "C" int o1_gemm_qw_cuda(float *y, const uint16_t *x, const void *w,
			       enum o1_quant_type type, uint32_t m, uint32_t n,
			       uint32_t k, uint32_t ldy, bool pdl,
			       cudaStream_t stream)
{
	return o1_gemm_qw_split_cuda(y, x, w, type, m, n, k, ldy, NULL, pdl,
				     stream);
}

extern "C" int o1_gemm_qw_swiglu_cuda(uint16_t *act, const uint16_t *x,
				      const void *w, enum o1_quant_type type,
				      uint32_t m, uint32_t f, uint32_t k,
				      uint32_t ld, bool pdl,
				      cudaStream_t stream)
{
	qw_args a;

	memset(&a, 0, sizeof a);
	a.act = act;
	a.m = m, a.n = f <= UINT32_MAX / 2 ? 2 * f : 0, a.k = k, a.ldy = ld;
	a.glu = f;
	return qw_run(a, x, w, type, NULL, pdl, stream);
}

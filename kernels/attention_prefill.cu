/* Tiled causal prefill attention on tensor cores: the rows of the
 * sequences that bring many new tokens (a prompt chunk), with the contract
 * of attention.h up to the rounding stated below. attention.cu's
 * o1_attention_cuda sends them here and keeps the other rows (decode).
 *
 * Grid: one block per (tile, kv head), 8 warps (head dim 128; 64: see
 * below). A tile is BM = 128 (row, query head) pairs of ONE sequence: the
 * G = Hq/Hkv heads of the kv head's group side by side, row-major
 * (attention_tiles.h numbers the tiles of a batch), 16 pairs per warp. The
 * block walks positions 0 .. its last row's position in tiles of BN = 64;
 * each K/V tile is copied once from the pages (through the block table,
 * cp.async, 3 buffers: tiles j + 1 and j + 2 load while tile j is
 * computed) into shared memory for all 128 pairs. S = Q K^T and O += P V
 * run on bf16 mma.sync m16n8k16 (mma_dev.h) with f32 accumulation, the K
 * and V fragments read by ldmatrix; Q stays in registers as bf16 fragments
 * for the whole walk; the softmax is online in f32 per pair (running max
 * and sum, base 2, the scale folded into the exponent's FMA). At head dim
 * 128 that is 195 registers and 104 KB of shared memory, one block a
 * multiprocessor: its 8 warps hide each other's mma and exponent latencies
 * (a block of 4 warps waits on its own instruction chain), and a K/V tile
 * copied once feeds twice the pairs. On the H200 (bench_prefill_attn,
 * llama3-8b, a layer) a 2,048-token prompt takes 210 us against the 4-warp
 * kernel's 275, and the 4-warp kernel with these loads and 3 blocks a
 * multiprocessor (LEAN3) 206; short chunks over long contexts are 6-14%
 * faster with 8 warps than with LEAN3 (docs/PERFORMANCE.md, fifteenth
 * session). At head dim 64 the default is LEAN3 (4 warps, 2 buffers, 128
 * registers): 8 warps there ran faster only with ptxas's 128 registers and
 * a spill, which the build refuses (with the 151 registers one block a
 * multiprocessor allows, llama3.2-1b's 2,048-token prompt took 130 us a
 * layer against LEAN3's 102). Both stay selectable at either head dim
 * for A/B timing (enum o1_attn_pf_variant, pf_cfg); the variants that lost
 * (K through 32-bit loads, exp2f's softmax: PERFORMANCE's fifteenth
 * session) were removed in the thirty-first.
 * Tiles entirely above the diagonal are never loaded (the walk stops at
 * the block's last row); tiles that cross it mask the positions past each
 * pair's own row (causal). Blocks start in reverse order: the last tiles
 * of a sequence, which walk the most positions, are scheduled first.
 *
 * Splits. A few tiles over a long context (a prompt chunk of 16-64
 * tokens at 8k positions: 16-40 blocks of llama3-8b on 132 SMs) would
 * walk it one tile after another, a chain of latencies: ~4 ms a step on
 * the whole model, what made issue 17's stall case (8 prompts of 8,192
 * tokens entering beside 64 streams) triple the streams' intervals. So a
 * grid too small to fill the GPU is split along the positions (grid y):
 * split k walks its share of the block's K/V tiles and leaves its
 * unnormalized O, running max and sum in scratch; pf_merge combines a
 * tile's splits (a second launch). A split may hold no position of a row
 * (or none at all): its max stays -inf, its O 0, and the merge weighs it
 * 0; split 0 holds position 0, so every row has a finite max.
 *
 * Rounding against attention.h (f32 arithmetic over the bf16 K/V): q is
 * rounded to bf16 for Q K^T (round to nearest even, relative error at most
 * u = 2^-8 per element), and each weight e^(s - m) is rounded to bf16 once
 * and used for both P V and the sum Z (so the weights still sum to 1);
 * products accumulate in f32 in the tensor cores' order; the exponent's
 * argument is one f32 FMA (s scale log2(e) - m) and 2^x the hardware's
 * ex2.approx (exp2f's own instruction; weights under 2^-126 flush to 0),
 * f32-level differences far inside the bound below. A score then
 * moves by at most u scale sum_d |q_d k_d|, and the weights' rounding
 * moves an output by at most u sum_j w_j |v_j - out| / (1 - u) (w the
 * exact weights): an average of V, off by a few u of V's spread around
 * it, before the output's own bf16 rounding.
 * tests/kernels/test_attention_prefill_cuda.c turns this into a
 * per-element tolerance.
 *
 * Supported (o1_attention_tiled_fits): head_dim 64 or 128, scale > 0
 * (the lean softmax takes the maximum of the unscaled scores), page_stride a
 * multiple of 8 and the caches 16-byte aligned (rows are copied in 16-byte
 * pieces), q 8-byte and out 4-byte aligned. Needs sm_80 or newer.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>

#include "attention_dev.h"
#include "attention_tiles.h"
#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "mma_dev.h"

extern "C" {
#include "common/log.h"
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attention_prefill.cu needs sm_80 (bf16 mma.sync, cp.async)"
#endif

#define PF_BN	 64 /* positions per K/V tile */
#define PF_PAD	 8  /* bf16 after each shared row: no bank conflicts */
/* Splits: at most as many as the scratch's rows are sized for
 * (o1_attention_cuda_scratch_floats at ATT_SPLITS_MAX); each walks at
 * least PF_SPLIT_TILES K/V tiles (a split's partials, (D + 2) floats a
 * pair written and read back, cost about a tile's compute). */
#define PF_MAX_SPLITS  32
#define PF_SPLIT_TILES 8
/* The smallest tile of pairs of any variant (check_tiled's grid bound). */
#define PF_BM_MIN 64

typedef __nv_bfloat16 bf16;

struct pf_dev {
	const uint32_t *q_off, *start, *tables;
	uint64_t page_stride;
	float scale_log2; /* scale * log2(e): scores in base 2 */
	uint32_t hq, hkv, g, p, n_seqs, max_blocks, min_new;
	uint32_t n_splits; /* > 1: partials in part (pf_part) */
	float *part;
};

/* A variant of the kernel (enum o1_attn_pf_variant): WARPS warps of 16
 * pairs (a tile of BM = 16 WARPS pairs), STAGES K/V tiles in flight. No
 * register cap: a minimum of blocks in __launch_bounds__
 * made ptxas take more registers (2 blocks at head dim 128: 215 against
 * 170) or spill (3 blocks). Shared memory: STAGES K tiles, then as many V
 * tiles, each BN rows of D + PAD bf16 (the padding keeps rows 16-byte
 * aligned and shifts each row by 4 banks). */
template <int D, int WARPS, int STAGES> struct pf_cfg {
	static constexpr int d = D, warps = WARPS, bm = 16 * WARPS;
	static constexpr int stages = STAGES;
	static constexpr int ld = D + PF_PAD;
	static constexpr int tile = PF_BN * ld;
	static constexpr size_t bytes =
	    2 * STAGES * (size_t)tile * sizeof(bf16);
};

/* Copies positions [T0, T0 + BN) of kv head KVH into ks and vs (BN rows of
 * ld bf16) through the block table. Rows at or past END (beyond the
 * block's causal reach, possibly past the sequence's pages) are zeroed
 * instead: their weight is 0, and 0 x garbage could be NaN. */
template <class C>
static __device__ void pf_load(bf16 *ks, bf16 *vs, const bf16 *kc,
			       const bf16 *vc, const uint32_t *table,
			       const pf_dev &a, uint32_t kvh, uint32_t t0,
			       uint32_t end)
{
	constexpr int D = C::d, pieces = D / 8, ld = C::ld;

	for (int e = threadIdx.x; e < PF_BN * pieces; e += C::warps * 32) {
		int r = e / pieces, c = e % pieces;
		uint32_t pos = t0 + r;
		bf16 *kd = ks + r * ld + c * 8, *vd = vs + r * ld + c * 8;

		if (pos < end) {
			size_t src = table[pos / a.p] * a.page_stride +
				     ((size_t)kvh * a.p + pos % a.p) * D +
				     c * 8;

			mma_cp16(kd, kc + src, 16);
			mma_cp16(vd, vc + src, 16);
		} else {
			*(uint4 *)kd = make_uint4(0, 0, 0, 0);
			*(uint4 *)vd = make_uint4(0, 0, 0, 0);
		}
	}
}

/* A lane's share of the online softmax: rows A (lane / 4) and B (+ 8) of
 * the warp's 16 pairs, output columns 8 n + 2 (lane % 4) + {0, 1}. The
 * sums L are this lane's partial sums (quad-reduced at the end). */
template <int D> struct pf_state {
	float o[D / 8][4];
	float ma, mb, la, lb;
	uint32_t pos_a, pos_b; /* the rows' positions: the causal limit */
};

/* 2^x: the bare ex2.approx.ftz (exp2f's own instruction without its
 * rescaling of results under 2^-126, flushed to 0 here: such a weight is
 * below bf16's normal range, beside a largest weight of 1); exp2f on the
 * CPU emulation. */
static __device__ __forceinline__ float pf_exp2(float x)
{
#ifndef O1_EMU_H
	float y;

	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
#else
	return exp2f(x);
#endif
}

/* S (16 x BN) = Q K^T for the warp; with MASK, positions past a row's
 * own get -inf. Returns the rows' tile maxima. The scores stay unscaled:
 * pf_tile folds the scale into the exponent's FMA, and since scale > 0
 * the scaled tile maximum is the unscaled one times scale_log2 (rounding
 * keeps the order). K's B fragments: one ldmatrix x4 gives two k-steps'
 * (matrices of 8 positions by 8 dims, lane l at position l % 8, dims 8
 * (l / 8) on). */
template <class C>
static __device__ void
pf_scores(float sc[PF_BN / 8][4], const uint32_t qf[C::d / 16][4],
	  const bf16 *ks, const pf_state<C::d> &st, const pf_dev &a,
	  uint32_t t0, bool mask, float *max_a, float *max_b)
{
	int lane = threadIdx.x % 32, tig = lane % 4;
	constexpr int D = C::d, ld = C::ld;
	float xa = -INFINITY, xb = -INFINITY;

#pragma unroll
	for (int n = 0; n < PF_BN / 8; n++) {
		const bf16 *kr = ks + (n * 8 + lane % 8) * ld + 8 * (lane / 8);

		sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
		for (int k = 0; k < D / 16; k += 2) {
			uint32_t kb[4];

			mma_ldsm_x4(kr + 16 * k, kb);
			{
				const uint32_t lo[2] = {kb[0], kb[1]},
					       hi[2] = {kb[2], kb[3]};

				mma_bf16(sc[n], qf[k], lo);
				mma_bf16(sc[n], qf[k + 1], hi);
			}
		}
#pragma unroll
		for (int e = 0; e < 4; e++) {
			uint32_t pos = t0 + n * 8 + 2 * tig + (e & 1);
			float x = sc[n][e];

			if (mask && pos > (e < 2 ? st.pos_a : st.pos_b))
				x = -INFINITY;
			sc[n][e] = x;
		}
		xa = fmaxf(xa, fmaxf(sc[n][0], sc[n][1]));
		xb = fmaxf(xb, fmaxf(sc[n][2], sc[n][3]));
	}
	*max_a = mma_quad_max(xa), *max_b = mma_quad_max(xb);
}

/* The weights of k-step KK of the tile (unscaled scores in SC, bases XA
 * and XB in base 2) as the mma's A fragment, each rounded to bf16 once
 * (by packing: cvt.rn.bf16x2, one instruction for two); adds the packed
 * halves to the lane's sums. */
template <class C>
static __device__ __forceinline__ void
pf_weights(uint32_t pa[4], pf_state<C::d> &st, const float sc[PF_BN / 8][4],
	   int kk, float xa, float xb, float scale_log2)
{
	float p[8];

#pragma unroll
	for (int e = 0; e < 8; e++)
		p[e] = pf_exp2(fmaf(sc[2 * kk + e / 4][e % 4], scale_log2,
				    -(e % 4 < 2 ? xa : xb)));
#pragma unroll
	for (int i = 0; i < 4; i++) {
		pa[i] = mma_pack_bf16(p[2 * i], p[2 * i + 1]);
		p[2 * i] = __uint_as_float(pa[i] << 16);
		p[2 * i + 1] = __uint_as_float(pa[i] & 0xffff0000u);
	}
	st.la += p[0] + p[1] + p[4] + p[5];
	st.lb += p[2] + p[3] + p[6] + p[7];
}

/* One K/V tile for the warp: scores, online softmax rescale, O += P V. A
 * row whose positions so far were all masked (a split's tiles past it)
 * keeps max -inf, and its exponentials take base 0 instead (no -inf -
 * -inf): its weights, sum and O stay 0. Unsplit, the first tile holds
 * position 0, which no row masks, so the bases are the maxima. The
 * rescale of O is skipped when no row's maximum moved (factors all
 * exactly 1, the common case past the first tiles). */
template <class C>
static __device__ void
pf_tile(pf_state<C::d> &st, const uint32_t qf[C::d / 16][4], const bf16 *ks,
	const bf16 *vs, const pf_dev &a, uint32_t t0, bool mask)
{
	constexpr int D = C::d, ld = C::ld;
	int lane = threadIdx.x % 32, mi = lane / 8, r = lane % 8;
	float sc[PF_BN / 8][4], xa, xb;

	pf_scores<C>(sc, qf, ks, st, a, t0, mask, &xa, &xb);
	xa *= a.scale_log2, xb *= a.scale_log2;
	xa = fmaxf(st.ma, xa), xb = fmaxf(st.mb, xb);
	{
		float ba = xa == -INFINITY ? 0.0f : xa,
		      bb = xb == -INFINITY ? 0.0f : xb;
		float ca = pf_exp2(st.ma - ba), cb = pf_exp2(st.mb - bb);

		st.la *= ca, st.lb *= cb, st.ma = xa, st.mb = xb;
		xa = ba, xb = bb; /* the bases from here on */
		if (!__all_sync(0xffffffffu, ca == 1.0f && cb == 1.0f)) {
#pragma unroll
			for (int d = 0; d < D / 8; d++) {
				st.o[d][0] *= ca, st.o[d][1] *= ca;
				st.o[d][2] *= cb, st.o[d][3] *= cb;
			}
		}
	}
#pragma unroll
	for (int kk = 0; kk < PF_BN / 16; kk++) {
		uint32_t pa[4];

		pf_weights<C>(pa, st, sc, kk, xa, xb, a.scale_log2);
#pragma unroll
		for (int dp = 0; dp < D / 16; dp++) {
			uint32_t vb[4];

			mma_ldsm_x4_trans(
			    vs + (16 * kk + (mi & 1) * 8 + r) * ld + 16 * dp +
				(mi >> 1) * 8,
			    vb);
			{
				const uint32_t lo[2] = {vb[0], vb[1]},
					       hi[2] = {vb[2], vb[3]};

				mma_bf16(st.o[2 * dp], pa, lo);
				mma_bf16(st.o[2 * dp + 1], pa, hi);
			}
		}
	}
}

/* out rows of pair M (clamped rows are not written): O / L as bf16. */
template <int D>
static __device__ void pf_store(bf16 *out, const pf_state<D> &st,
				const pf_dev &a, uint32_t row0, uint32_t kvh,
				uint32_t ma, uint32_t mb, bool ok_a, bool ok_b)
{
	int c = 2 * (threadIdx.x % 4);
	float ia = 1.0f / mma_quad_sum(st.la), ib = 1.0f / mma_quad_sum(st.lb);
	bf16 *oa =
	    out +
	    (((size_t)row0 + ma / a.g) * a.hq + kvh * a.g + ma % a.g) * D + c;
	bf16 *ob =
	    out +
	    (((size_t)row0 + mb / a.g) * a.hq + kvh * a.g + mb % a.g) * D + c;

#pragma unroll
	for (int d = 0; d < D / 8; d++) {
		if (ok_a)
			*(__nv_bfloat162 *)(oa + 8 * d) = __floats2bfloat162_rn(
			    st.o[d][0] * ia, st.o[d][1] * ia);
		if (ok_b)
			*(__nv_bfloat162 *)(ob + 8 * d) = __floats2bfloat162_rn(
			    st.o[d][2] * ib, st.o[d][3] * ib);
	}
}

/* Split K's partial of (ROW, HEAD) in scratch: D floats of unnormalized
 * O, then the running max (base 2) and the sum. */
template <int D>
static __device__ float *pf_part(const pf_dev &a, uint32_t row, uint32_t head,
				 uint32_t k)
{
	return a.part +
	       (((size_t)row * a.hq + head) * a.n_splits + k) * (D + 2);
}

/* The split's partials of pairs MA and MB (clamped rows are not
 * written). */
template <int D>
static __device__ void pf_store_part(const pf_state<D> &st, const pf_dev &a,
				     uint32_t row0, uint32_t kvh, uint32_t ma,
				     uint32_t mb, bool ok_a, bool ok_b)
{
	int c = 2 * (threadIdx.x % 4);
	float la = mma_quad_sum(st.la), lb = mma_quad_sum(st.lb);
	float *pa =
	    pf_part<D>(a, row0 + ma / a.g, kvh * a.g + ma % a.g, blockIdx.y);
	float *pb =
	    pf_part<D>(a, row0 + mb / a.g, kvh * a.g + mb % a.g, blockIdx.y);

#pragma unroll
	for (int d = 0; d < D / 8; d++) {
		if (ok_a)
			*(float2 *)(pa + 8 * d + c) =
			    make_float2(st.o[d][0], st.o[d][1]);
		if (ok_b)
			*(float2 *)(pb + 8 * d + c) =
			    make_float2(st.o[d][2], st.o[d][3]);
	}
	if (c == 0 && ok_a)
		pa[D] = st.ma, pa[D + 1] = la;
	if (c == 0 && ok_b)
		pb[D] = st.mb, pb[D + 1] = lb;
}

/* What one block does (attention_tiles.h): sequence, first pair M0 and
 * last pair M_LAST of its tile; false when the block has no work (a gap
 * in the numbering, or a sequence below min_new). */
struct pf_work {
	uint32_t s, m0, m_last, kvh;
};

template <int BM> static __device__ bool pf_find(const pf_dev &a, pf_work &w)
{
	uint64_t b = (gridDim.x - 1 - blockIdx.x) / a.hkv, tile;
	uint32_t n_new, pairs;

	w.kvh = (gridDim.x - 1 - blockIdx.x) % a.hkv;
	w.s = o1_attn_tile_seq(a.q_off, a.n_seqs, a.g, BM, b);
	n_new = a.q_off[w.s + 1] - a.q_off[w.s];
	pairs = n_new * a.g;
	tile = b - o1_attn_tile_base(a.q_off, w.s, a.g, BM);
	if (n_new < a.min_new || tile * BM >= pairs)
		return false;
	w.m0 = (uint32_t)tile * BM;
	w.m_last = min(w.m0 + BM, pairs) - 1;
	return true;
}

/* out (T,Hq,D) bf16; q (T,Hq,D) f32; k/v caches (pages,Hkv,P,D) bf16.
 * Block = one tile of (row, head) pairs for one kv head; shared memory as
 * pf_cfg. The kernels below wrap it. */
template <class C>
static __device__ __forceinline__ void
attend_tile(bf16 *out, const float *q, const bf16 *kc, const bf16 *vc,
	    const pf_dev &a)
{
	constexpr int D = C::d, S = C::stages;
	extern __shared__ __align__(16) unsigned char pf_raw[];
	bf16 *ks = (bf16 *)pf_raw, *vs = ks + S * C::tile;
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	pf_work w;
	pf_state<D> st = {};
	uint32_t qf[D / 16][4], ma, mb, start, end, diag, row0, n_tiles, j0, j1;
	const uint32_t *table;

	if (!pf_find<C::bm>(a, w))
		return;
	ma = w.m0 + warp * 16 + lane / 4, mb = ma + 8;
	start = a.start[w.s], row0 = a.q_off[w.s];
	table = a.tables + (size_t)w.s * a.max_blocks;
	end = start + w.m_last / a.g + 1; /* positions [0, end) */
	diag = start + w.m0 / a.g;	  /* tiles past it need the mask */
	st.ma = st.mb = -INFINITY;
	st.pos_a = start + min(ma, w.m_last) / a.g;
	st.pos_b = start + min(mb, w.m_last) / a.g;
	mma_load_a_f32<D>(qf,
			  q + (((size_t)row0 + min(ma, w.m_last) / a.g) * a.hq +
			       w.kvh * a.g + min(ma, w.m_last) % a.g) *
				  D,
			  q + (((size_t)row0 + min(mb, w.m_last) / a.g) * a.hq +
			       w.kvh * a.g + min(mb, w.m_last) % a.g) *
				  D);
	n_tiles = (end + PF_BN - 1) / PF_BN;
	j0 = 0, j1 = n_tiles;
	if (a.n_splits > 1) { /* this split's share of the tiles */
		uint32_t per = (n_tiles + a.n_splits - 1) / a.n_splits;

		j0 = min(blockIdx.y * per, n_tiles);
		j1 = min(j0 + per, n_tiles);
	}
	/* tiles j0 .. j0 + STAGES - 2 in flight, a commit group each (maybe
	 * empty: the waits stay uniform) */
	for (uint32_t i = 0; i + 1 < S; i++) {
		if (j0 + i < j1)
			pf_load<C>(ks + i * C::tile, vs + i * C::tile, kc, vc,
				   table, a, w.kvh, (j0 + i) * PF_BN, end);
		mma_cp_commit();
	}
	for (uint32_t j = j0; j < j1; j++) {
		uint32_t ahead = j + S - 1;
		int cur = (int)((j - j0) % S) * C::tile,
		    nxt = (int)((ahead - j0) % S) * C::tile;

		/* buffer nxt held tile j - 1, done since the barrier below */
		if (ahead < j1)
			pf_load<C>(ks + nxt, vs + nxt, kc, vc, table, a, w.kvh,
				   ahead * PF_BN, end);
		mma_cp_commit();
		mma_cp_wait<S - 1>(); /* tile j has landed */
		__syncthreads();
		pf_tile<C>(st, qf, ks + cur, vs + cur, a, j * PF_BN,
			   j * PF_BN + PF_BN - 1 > diag);
		__syncthreads(); /* before a later load overwrites it */
	}
	if (a.n_splits > 1)
		pf_store_part<D>(st, a, row0, w.kvh, min(ma, w.m_last),
				 min(mb, w.m_last), ma <= w.m_last,
				 mb <= w.m_last);
	else
		pf_store<D>(out, st, a, row0, w.kvh, min(ma, w.m_last),
			    min(mb, w.m_last), ma <= w.m_last, mb <= w.m_last);
}

/* The 4-warp variants leave the registers to ptxas (any minimum of
 * blocks changed its choice, see pf_cfg); the 8-warp ones ask for one
 * block a multiprocessor, without which ptxas held head dim 64 to 128
 * registers and spilled (151 with it; head dim 128: 195 either way). */
template <class C>
static __global__ void __launch_bounds__(C::warps * 32)
    attend_tiled(bf16 *out, const float *q, const bf16 *kc, const bf16 *vc,
		 pf_dev a)
{
	attend_tile<C>(out, q, kc, vc, a);
}

template <class C>
static __global__ void __launch_bounds__(C::warps * 32, 1)
    attend_tiled_wide(bf16 *out, const float *q, const bf16 *kc,
		      const bf16 *vc, pf_dev a)
{
	attend_tile<C>(out, q, kc, vc, a);
}

template <class C> static constexpr auto pf_kernel()
{
	if constexpr (C::warps > 4)
		return attend_tiled_wide<C>;
	else
		return attend_tiled<C>;
}

/* The output of a split launch: grid (the same tiles of BM pairs, BM /
 * PF_MERGE_WARPS), a warp a pair merging its splits (attention_dev.h's
 * attn_merge_splits; a warp walking its tile's 64 pairs, each split's
 * row one dependent load, took 150 us of a 16-row chunk at 8k
 * positions). Every split writes every pair of its tile (zeros and max
 * -inf where it holds no position), so no row read is garbage. out as
 * attend_tiled's. */
#define PF_MERGE_WARPS 8

template <int D, int BM>
static __global__ void __launch_bounds__(PF_MERGE_WARPS * 32)
    pf_merge(bf16 *out, pf_dev a)
{
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	uint32_t m, row, head;
	pf_work w;

	if (!pf_find<BM>(a, w))
		return;
	m = w.m0 + blockIdx.y * PF_MERGE_WARPS + warp;
	if (m > w.m_last)
		return;
	row = a.q_off[w.s] + m / a.g, head = w.kvh * a.g + m % a.g;
	attn_merge_splits<D>(out + ((size_t)row * a.hq + head) * D,
			     pf_part<D>(a, row, head, 0), a.n_splits,
			     (uint32_t)lane);
}

static bool aligned(const void *p, uintptr_t n)
{
	return (uintptr_t)p % n == 0;
}

extern "C" bool o1_attention_tiled_fits(const struct o1_attn_dims *d,
					const uint16_t *out, const float *q,
					const uint16_t *k_cache,
					const uint16_t *v_cache)
{
	return (d->head_dim == 64 || d->head_dim == 128) && d->scale > 0 &&
	       d->n_kv_heads && d->n_heads && d->n_heads % d->n_kv_heads == 0 &&
	       d->page_stride % 8 == 0 && aligned(k_cache, 16) &&
	       aligned(v_cache, 16) && aligned(q, 8) && aligned(out, 4);
}

static int check_tiled(const struct o1_attn_dims *d,
		       const struct o1_attn_batch *b, uint32_t n_rows,
		       const uint16_t *out, const float *q, const uint16_t *kc,
		       const uint16_t *vc)
{
	uint32_t g = d->n_kv_heads ? d->n_heads / d->n_kv_heads : 0;

	if (!o1_attention_tiled_fits(d, out, q, kc, vc) || !out || !q || !kc ||
	    !vc || !d->page_tokens ||
	    d->page_stride <
		(uint64_t)d->n_kv_heads * d->page_tokens * d->head_dim ||
	    !b->n_seqs || !b->q_offsets || !b->start_pos || !b->block_tables ||
	    !b->max_blocks || (uint64_t)n_rows * g > INT32_MAX ||
	    o1_attn_tile_grid(n_rows, b->n_seqs, g, PF_BM_MIN) * d->n_kv_heads >
		INT32_MAX) {
		o1_err("attention tiled: unsupported shape: heads %u/%u of "
		       "%u, page %u tokens stride %llu, %u seqs, %u blocks, "
		       "%u rows, or misaligned operands",
		       d->n_heads, d->n_kv_heads, d->head_dim, d->page_tokens,
		       (unsigned long long)d->page_stride, b->n_seqs,
		       b->max_blocks, n_rows);
		return -EINVAL;
	}
	return 0;
}

/* Splits for BLOCKS blocks with work (o1_attn_tile_busy: a mixed step's
 * decode sequences add an idle block each, which once made a 16-row
 * chunk beside 45 decode rows look like 49 tiles, split in 2-3 instead
 * of 16) of variant C walking up to MAX_LEN positions:
 * the count with the fewest waves x tiles a block walks, the fewest
 * splits among equals (PF_MAX_SPLITS, PF_SPLIT_TILES above; within
 * SCRATCH_FLOATS). A wave is the blocks the SMs hold at once (the
 * runtime's occupancy: shared memory's and the registers' bound; shared
 * memory's alone if it cannot say), and a block's time
 * its tiles (each waits on its copies much as alone). A grid of one wave
 * or more is never split: its blocks walk a causal prompt's tiles, most
 * of them far fewer than MAX_LEN's, which the count above does not see
 * (a 2,048-token prompt of llama3-8b in 3 splits at 3 blocks a
 * multiprocessor: 306 us against 206 unsplit on the H200). A 16-row
 * chunk over 8k positions is split (16 blocks: 457 us unsplit, 45 us in
 * 16), and a grid of a little over a wave is not split into two waves'
 * worth of a slightly shorter walk. */
template <class C> static int pf_blocks_per_sm(void)
{
	int n = 0;

	if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		&n, pf_kernel<C>(), C::warps * 32, C::bytes) != cudaSuccess ||
	    n < 1) {
		cudaGetLastError();
		n = (int)(228 * 1024 / (C::bytes + 1024));
	}
	return n;
}

template <class C>
static uint32_t pf_pick_splits(uint64_t blocks, uint32_t max_len, uint32_t rows,
			       uint32_t hq, uint64_t scratch_floats)
{
	/* asked once: a mixed step launches this per layer */
	static const int per_sm = pf_blocks_per_sm<C>();
	uint64_t wave = (uint64_t)o1_cuda_sm_count() * (uint64_t)per_sm;
	uint32_t tiles = (max_len + PF_BN - 1) / PF_BN;
	uint32_t most = tiles / PF_SPLIT_TILES, best = 1;
	uint64_t best_cost = UINT64_MAX;

	if (blocks >= wave)
		return 1;
	most = most > PF_MAX_SPLITS ? PF_MAX_SPLITS : most;
	for (uint32_t s = 1; s <= most || s == 1; s++) {
		uint64_t waves = (blocks * s + wave - 1) / (wave ? wave : 1);
		uint64_t cost = waves * ((tiles + s - 1) / s);

		if (s > 1 && o1_attention_cuda_scratch_floats(
				 rows, hq, C::d, s) > scratch_floats)
			break;
		if (cost < best_cost)
			best_cost = cost, best = s;
	}
	return best;
}

template <class C>
static int launch_tiled(uint16_t *out, const float *q, const uint16_t *kc,
			const uint16_t *vc, pf_dev a, uint32_t n_rows,
			uint32_t max_len, uint32_t splits, float *scratch,
			uint64_t scratch_floats, cudaStream_t stream)
{
	constexpr int D = C::d;
	size_t smem = C::bytes;
	uint64_t blocks =
	    o1_attn_tile_grid(n_rows, a.n_seqs, a.g, C::bm) * a.hkv;
	uint64_t busy = o1_attn_tile_busy(n_rows, a.n_seqs, a.g, C::bm,
					  a.min_new) *
			a.hkv;
	int err = 0;

	/* before the occupancy query of pf_pick_splits */
	if (smem > 48 * 1024)
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    pf_kernel<C>(),
		    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	if (err)
		return err;
	if (!splits)
		splits = pf_pick_splits<C>(busy, max_len, n_rows, a.hq,
					   scratch ? scratch_floats : 0);
	err = o1_attention_cuda_check_splits("attention tiled", splits,
					     PF_MAX_SPLITS, n_rows, a.hq, D,
					     scratch, scratch_floats);
	if (err)
		return err;
	a.n_splits = splits, a.part = scratch;
	err = O1_CUDA_LAUNCH(
	    "attention tiled", pf_kernel<C>(), dim3((unsigned)blocks, splits),
	    dim3(C::warps * 32), smem, stream, false, (bf16 *)out, q,
	    (const bf16 *)kc, (const bf16 *)vc, a);
	if (!err && splits > 1)
		err = O1_CUDA_LAUNCH(
		    "attention tiled merge", pf_merge<D, C::bm>,
		    dim3((unsigned)blocks, C::bm / PF_MERGE_WARPS),
		    dim3(PF_MERGE_WARPS * 32), 0, stream, false, (bf16 *)out,
		    a);
	return err;
}

/* The variants (enum o1_attn_pf_variant). */
template <int D>
static int launch_variant(uint32_t variant, uint16_t *out, const float *q,
			  const uint16_t *kc, const uint16_t *vc, pf_dev a,
			  uint32_t n_rows, uint32_t max_len, uint32_t splits,
			  float *scratch, uint64_t scratch_floats,
			  cudaStream_t stream)
{
	bool wide = variant == O1_ATTN_PF_WIDE ||
		    (variant == O1_ATTN_PF_DEFAULT && D != 64);

	/* O1_ATTN_PF_DEFAULT: WIDE at head dim 128, LEAN3 at 64 */
	if (wide)
		return launch_tiled<pf_cfg<D, 8, 3>>(out, q, kc, vc, a, n_rows,
						     max_len, splits, scratch,
						     scratch_floats, stream);
	return launch_tiled<pf_cfg<D, 4, 2>>(out, q, kc, vc, a, n_rows,
					     max_len, splits, scratch,
					     scratch_floats, stream);
}

extern "C" int o1_attention_tiled_variant_cuda(
    uint16_t *out, const float *q, const uint16_t *k_cache,
    const uint16_t *v_cache, const struct o1_attn_dims *d,
    const struct o1_attn_batch *b, uint32_t n_rows, uint32_t min_new,
    uint32_t max_len, uint32_t splits, float *scratch, uint64_t scratch_floats,
    uint32_t variant, cudaStream_t stream)
{
	pf_dev a;
	int err = check_tiled(d, b, n_rows, out, q, k_cache, v_cache);

	if (!err && variant >= O1_ATTN_PF_VARIANTS) {
		o1_err("attention tiled: no variant %u", variant);
		err = -EINVAL;
	}
	if (err || !n_rows)
		return err;
	a = pf_dev{b->q_offsets,
		   b->start_pos,
		   b->block_tables,
		   d->page_stride,
		   d->scale * 1.4426950408889634f,
		   d->n_heads,
		   d->n_kv_heads,
		   d->n_heads / d->n_kv_heads,
		   d->page_tokens,
		   b->n_seqs,
		   b->max_blocks,
		   min_new ? min_new : 1,
		   1,
		   NULL};
	if (d->head_dim == 64)
		return launch_variant<64>(variant, out, q, k_cache, v_cache, a,
					  n_rows, max_len, splits, scratch,
					  scratch_floats, stream);
	return launch_variant<128>(variant, out, q, k_cache, v_cache, a, n_rows,
				   max_len, splits, scratch, scratch_floats,
				   stream);
}

extern "C" int
o1_attention_tiled_cuda(uint16_t *out, const float *q, const uint16_t *k_cache,
			const uint16_t *v_cache, const struct o1_attn_dims *d,
			const struct o1_attn_batch *b, uint32_t n_rows,
			uint32_t min_new, uint32_t max_len, uint32_t splits,
			float *scratch, uint64_t scratch_floats,
			cudaStream_t stream)
{
	return o1_attention_tiled_variant_cuda(
	    out, q, k_cache, v_cache, d, b, n_rows, min_new, max_len, splits,
	    scratch, scratch_floats, O1_ATTN_PF_DEFAULT, stream);
}

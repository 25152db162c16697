/* Decode attention on tensor cores, for batches of many rows
 * (attention_decode.cu's dispatch sends them here:
 * o1_attention_decode_cuda). The row kernel pays a position's
 * FMAs, shuffles and softmax update once per query head, in blocks whose
 * registers leave few warps a multiprocessor: at 256 rows it moved
 * 1.6-2.0 TB/s of K/V (llama3-8b, 128-640 positions). Here a GQA group's
 * query heads are the rows of one mma tile, so a position costs a few
 * tensor-core instructions for every head at once.
 *
 * Work layout. One block per (row, kv head, split), 4 warps. The block
 * walks its share of the row's causal positions in tiles of TC_BN = 64,
 * each K/V tile copied once through the block table into shared memory
 * (cp.async, 2 or 3 tiles in flight: TC_TWO_STAGE_BLOCKS) for all the
 * group's heads. Warp w takes positions 16 w .. 16 w + 15 of every tile:
 * S (16 x 16) = Q K^T over the
 * group's heads (the mma's 16 rows: heads g .. 15 repeat the last one and
 * are never written), an online softmax of its own (f32, base 2), O += P
 * V; the four warps' states are merged through shared memory at the end.
 *
 * Splits. A block walks its tiles one after another (~2.5 us a tile on
 * the H200), so a row of 8k positions (128 tiles) held a whole launch of
 * short rows for hundreds of microseconds, and a few rows over long
 * contexts left most multiprocessors idle. So the grid has a third
 * dimension of S splits (host: tc_pick_splits, from rows x kv heads,
 * MAX_LEN, the multiprocessors and the scratch; never per-step values,
 * so a graph replays it), and each row decides on the device how many it
 * uses (tc_used): one a TC_SPLIT_TILES tiles, at most S, every used split
 * at least one tile (so its maximum is finite). A row of one split
 * writes its output as before (the same bits); a row of several leaves
 * each split's unnormalized O, max (base 2) and sum in scratch, and
 * tc_merge, a second launch, combines them. Blocks past a row's used
 * splits exit after the PDL wait.
 *
 * Rounding, as attention_prefill.cu's tiled kernel (its comment states the
 * bound; tests/kernels/test_attention_prefill_cuda.c checks both kernels
 * with it): q is rounded to bf16 for Q K^T, each softmax weight is rounded
 * to bf16 once and used for both P V and the sum, products accumulate in
 * f32.
 *
 * PDL (cuda_launch.h): before the wait a block reads its row's step inputs
 * and issues the copies of its first tiles' positions before the
 * sequence's first new token (written by earlier steps); the new positions
 * (the previous kernel wrote them), q and scratch only after it. The
 * merge waits in every block before it reads scratch.
 *
 * Invariants (o1_attention_decode_tc_fits): head_dim 64 or 128, at most 16
 * query heads a kv head, page_stride a multiple of 8, caches and q 16-byte
 * aligned; split launches: scratch 8-byte aligned (launch_tc).
 */
#include <errno.h>
#include <math.h>

#include <cuda_bf16.h>

#include "attention_dev.h"
#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "mma_dev.h"

extern "C" {
#include "common/log.h"
}

#define TC_BN	  64 /* positions a K/V tile */
#define TC_WARPS  4  /* 16 positions of each tile a warp */
#define TC_STAGES 3  /* tiles in flight, by default (tc_stages: 2 or 3) */
/* launches of at least this many blocks keep 2 tiles in flight: 3 blocks
 * a multiprocessor at head dim 128 (104 KB of shared memory a block with
 * 3 stages, 70 KB with 2) beat a deeper pipeline in 2 of them: on the
 * H200 (bench_decode_attn, llama3-8b, 256 rows = 2,048 blocks) 62 against
 * 84 us at 128 positions, 81 against 102 at 192, 210 against 247 at 640;
 * at 512 blocks (64 rows, 640 positions) 3 stages won, 70 against 77 */
#define TC_TWO_STAGE_BLOCKS 1024
#define TC_PAD	  8  /* bf16 after each shared row: no bank conflicts */
#define TC_GMAX	  16 /* query heads a kv head: the mma's rows */
/* Splits: at most a lane each in the merge (and what the backend's scratch
 * holds: ATT_SPLITS_MAX); a row takes one a TC_SPLIT_TILES tiles
 * (O1_ATTN_DECODE_TC_SPLIT_MIN positions: shorter rows write their output
 * directly), and a launch at most TC_SPLIT_WAVES waves of blocks (blocks
 * past a row's splits still cost a launch and a few loads each: a graph's
 * MAX_LEN splits short rows' launches too) */
#define TC_MAX_SPLITS  32
#define TC_SPLIT_TILES (O1_ATTN_DECODE_TC_SPLIT_MIN / TC_BN)
#define TC_SPLIT_WAVES 8
#define TC_MERGE_WARPS 8 /* a (row, head) each */

typedef __nv_bfloat16 bf16;

struct tc_dev {
	const uint32_t *q_off, *start, *tables;
	uint64_t page_stride;
	float scale_log2; /* scale * log2(e): scores in base 2 */
	uint32_t hq, hkv, g, p, n_seqs, max_blocks, skip_new;
	uint32_t n_splits; /* > 1: partials in part (tc_part) */
	float *part;
};

/* Splits a row of TILES K/V tiles uses, and the tiles each walks (*PER):
 * one a TC_SPLIT_TILES at most N_SPLITS, none empty. */
static __device__ uint32_t tc_used(uint32_t n_splits, uint32_t tiles,
				   uint32_t *per)
{
	uint32_t n = (tiles + TC_SPLIT_TILES - 1) / TC_SPLIT_TILES;

	n = n < n_splits ? n : n_splits;
	*per = (tiles + n - 1) / n;
	return (tiles + *per - 1) / *per;
}

/* Split K's partial of (ROW, HEAD) in scratch: D floats of unnormalized
 * O, then the max (base 2) and the sum (attention_prefill.cu's layout:
 * o1_attention_cuda_scratch_floats). */
template <int D>
static __device__ float *tc_part(const tc_dev &a, uint32_t row, uint32_t head,
				 uint32_t k)
{
	return a.part +
	       (((size_t)row * a.hq + head) * a.n_splits + k) * (D + 2);
}

/* Shared memory: S stages of a K tile then a V tile (TC_BN rows of D + PAD
 * bf16: rows stay 16-byte aligned, each shifted by 4 banks); at the end
 * the same bytes hold the warps' states for the merge. */
template <int D, int S = TC_STAGES> struct tc_smem {
	static constexpr int ld = D + TC_PAD;
	static constexpr int tile = TC_BN * ld; /* bf16 of K (or V) a stage */
	static constexpr size_t stages = (size_t)S * 2 * tile * 2;
	static constexpr size_t merge =
	    (size_t)TC_WARPS * TC_GMAX * (D + 2) * 4;
	static constexpr size_t bytes = stages > merge ? stages : merge;
};

/* Copies the positions in [LO, HI) of the tile at T0 (kv head KVH) into
 * ks and vs through the block table, and zeroes its rows at or past ZERO
 * (past the row's causal reach, perhaps past its pages: their weight is
 * 0, and 0 x garbage could be NaN). A thread takes one 16-byte piece of
 * PER rows; their page numbers are read first, all in flight at once,
 * rather than one between two copies (the same time on the H200 at 256
 * rows: 84 against 86 us). */
template <int D>
static __device__ void tc_load(bf16 *ks, bf16 *vs, const bf16 *kc,
			       const bf16 *vc, const uint32_t *table,
			       const tc_dev &a, uint32_t kvh, uint32_t t0,
			       uint32_t lo, uint32_t hi, uint32_t zero)
{
	constexpr int pieces = D / 8, ld = tc_smem<D>::ld;
	constexpr int step = TC_WARPS * 32 / pieces, per = TC_BN / step;
	int c = threadIdx.x % pieces, r0 = threadIdx.x / pieces;
	uint32_t page[per];

#pragma unroll
	for (int i = 0; i < per; i++) {
		uint32_t pos = t0 + r0 + i * step;

		page[i] = pos >= lo && pos < hi ? table[pos / a.p] : 0;
	}
#pragma unroll
	for (int i = 0; i < per; i++) {
		int r = r0 + i * step;
		uint32_t pos = t0 + r;
		bf16 *kd = ks + r * ld + c * 8, *vd = vs + r * ld + c * 8;

		if (pos >= lo && pos < hi) {
			size_t src = (size_t)page[i] * a.page_stride +
				     ((size_t)kvh * a.p + pos % a.p) * D +
				     c * 8;

			mma_cp16(kd, kc + src, 16);
			mma_cp16(vd, vc + src, 16);
		} else if (pos >= zero) {
			*(uint4 *)kd = make_uint4(0, 0, 0, 0);
			*(uint4 *)vd = make_uint4(0, 0, 0, 0);
		}
	}
}

/* A lane's share of its warp's online softmax (mma_dev.h's fragment
 * layout, g = lane / 4, t = lane % 4): heads A = g and B = g + 8 of the
 * tile's rows, output dims 8 n + 2 t + {0, 1}. L: this lane's partial
 * sums (quad-reduced at the end). */
template <int D> struct tc_state {
	float o[D / 8][4];
	float ma, mb, la, lb;
};

/* The warp's 16 positions P0 .. P0 + 15 of a tile (shared rows R0 ..):
 * scores, rescale, O += P V. Positions at or past LEN weigh 0; a warp
 * that has seen none keeps max -inf, sums and O at 0. */
template <int D>
static __device__ void tc_tile(tc_state<D> &st, const uint32_t (&qf)[D / 16][4],
			       const bf16 *ks, const bf16 *vs, float scale,
			       uint32_t r0, uint32_t p0, uint32_t len)
{
	constexpr int ld = tc_smem<D>::ld;
	uint32_t lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
	uint32_t mi = lane / 8, r = lane % 8;
	float sc[2][4], xa = -INFINITY, xb = -INFINITY, ba, bb, ca, cb, p[8];
	uint32_t pa[4];

#pragma unroll
	for (int n = 0; n < 2; n++) {
		const bf16 *kr = ks + (r0 + n * 8 + grp) * ld + 2 * tig;

		sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
		for (int k = 0; k < D / 16; k++) {
			const uint32_t b[2] = {
			    *(const uint32_t *)(kr + 16 * k),
			    *(const uint32_t *)(kr + 16 * k + 8)};

			mma_bf16(sc[n], qf[k], b);
		}
#pragma unroll
		for (int e = 0; e < 4; e++) {
			uint32_t pos = p0 + n * 8 + 2 * tig + (e & 1);

			sc[n][e] = pos < len ? sc[n][e] * scale : -INFINITY;
		}
		xa = fmaxf(xa, fmaxf(sc[n][0], sc[n][1]));
		xb = fmaxf(xb, fmaxf(sc[n][2], sc[n][3]));
	}
	xa = fmaxf(st.ma, mma_quad_max(xa));
	xb = fmaxf(st.mb, mma_quad_max(xb));
	/* the exponents' base: 0 while nothing is seen (-inf - -inf) */
	ba = xa == -INFINITY ? 0.0f : xa, bb = xb == -INFINITY ? 0.0f : xb;
	ca = exp2f(st.ma - ba), cb = exp2f(st.mb - bb);
	st.la *= ca, st.lb *= cb, st.ma = xa, st.mb = xb;
#pragma unroll
	for (int d = 0; d < D / 8; d++) {
		st.o[d][0] *= ca, st.o[d][1] *= ca;
		st.o[d][2] *= cb, st.o[d][3] *= cb;
	}
#pragma unroll
	for (int e = 0; e < 8; e++)
		p[e] = __bfloat162float(__float2bfloat16_rn(
		    exp2f(sc[e / 4][e % 4] - (e % 4 < 2 ? ba : bb))));
	st.la += p[0] + p[1] + p[4] + p[5];
	st.lb += p[2] + p[3] + p[6] + p[7];
	pa[0] = mma_pack_bf16(p[0], p[1]), pa[1] = mma_pack_bf16(p[2], p[3]);
	pa[2] = mma_pack_bf16(p[4], p[5]), pa[3] = mma_pack_bf16(p[6], p[7]);
#pragma unroll
	for (int dp = 0; dp < D / 16; dp++) {
		uint32_t vb[4];

		mma_ldsm_x4_trans(vs + (r0 + (mi & 1) * 8 + r) * ld + 16 * dp +
				      (mi >> 1) * 8,
				  vb);
		{
			const uint32_t b0[2] = {vb[0], vb[1]},
				       b1[2] = {vb[2], vb[3]};

			mma_bf16(st.o[2 * dp], pa, b0);
			mma_bf16(st.o[2 * dp + 1], pa, b1);
		}
	}
}

/* out (T,Hq,D) bf16 or the partials (tc_part); q (T,Hq,D) f32; k/v caches
 * (pages,Hkv,P,D) bf16. Block (row, kv head, split) of TC_WARPS warps, S
 * stages; shared memory as tc_smem. */
template <int D, int S>
static __global__ void __launch_bounds__(TC_WARPS * 32)
    attend_dec_tc(bf16 *out, const float *q, const bf16 *kc, const bf16 *vc,
		  tc_dev a)
{
	constexpr int tile = tc_smem<D, S>::tile;
	extern __shared__ __align__(16) unsigned char tc_raw[];
	bf16 *sm = (bf16 *)tc_raw; /* stage i: K at 2 i tile, V after it */
	uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	uint32_t grp = lane / 4, tig = lane % 4;
	uint32_t row = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
	uint32_t g = a.g, s = attn_seq_of_row(a.q_off, a.n_seqs, row);
	uint32_t start = a.start[s], len = start + row - a.q_off[s] + 1;
	uint32_t tiles = (len + TC_BN - 1) / TC_BN, per;
	uint32_t used = tc_used(a.n_splits, tiles, &per);
	/* this split's tiles: j0 .. j0 + n_tiles - 1 */
	uint32_t j0 = split * per, head = kvh * g, n_tiles;
	bool idle = a.q_off[s + 1] - a.q_off[s] >= a.skip_new || split >= used;
	const uint32_t *table = a.tables + (size_t)s * a.max_blocks;
	uint32_t qf[D / 16][4];
	tc_state<D> st;
	float *ms = (float *)tc_raw;

	n_tiles = idle ? 0 : min(per, tiles - j0);
	/* before the wait: the earlier steps' positions of the first tiles
	 * (one commit group a stage, empty or not: the waits below count) */
#pragma unroll
	for (uint32_t j = 0; j < S - 1; j++) {
		if (j < n_tiles)
			tc_load<D>(sm + 2 * j * tile, sm + (2 * j + 1) * tile,
				   kc, vc, table, a, kvh, (j0 + j) * TC_BN, 0,
				   start, len);
		mma_cp_commit();
	}
	o1_pdl_wait();
	o1_pdl_trigger();
	if (idle)
		return; /* the tiled kernel's row, or past the row's splits */
	/* this step's new positions in those tiles: the previous kernel
	 * wrote them */
	for (uint32_t j = 0; j < S - 1 && j < n_tiles; j++)
		tc_load<D>(sm + 2 * j * tile, sm + (2 * j + 1) * tile, kc, vc,
			   table, a, kvh, (j0 + j) * TC_BN, start, len,
			   UINT32_MAX);
	mma_cp_commit();
	{
		uint32_t ha = head + (grp < g ? grp : g - 1),
			 hb = head + (grp + 8 < g ? grp + 8 : g - 1);

		mma_load_a_f32<D>(qf, q + ((size_t)row * a.hq + ha) * D,
				  q + ((size_t)row * a.hq + hb) * D);
	}
	st.ma = st.mb = -INFINITY, st.la = st.lb = 0.0f;
#pragma unroll
	for (int d = 0; d < D / 8; d++)
		st.o[d][0] = st.o[d][1] = st.o[d][2] = st.o[d][3] = 0.0f;
	for (uint32_t j = 0, cur = 0; j < n_tiles; j++) {
		uint32_t nt = j + S - 1, ns = cur ? cur - 1 : S - 1;

		if (j)
			__syncthreads(); /* tile j - 1's stage is free */
		if (nt < n_tiles)
			tc_load<D>(sm + 2 * ns * tile, sm + (2 * ns + 1) * tile,
				   kc, vc, table, a, kvh, (j0 + nt) * TC_BN, 0,
				   len, len);
		mma_cp_commit();
		/* tile j landed: at j = 0 everything but the newest group
		 * (the prologue and its reloads), later all but the
		 * S - 1 tiles after j */
		if (j == 0)
			mma_cp_wait<1>();
		else
			mma_cp_wait<S - 1>();
		__syncthreads();
		tc_tile<D>(st, qf, sm + 2 * cur * tile,
			   sm + (2 * cur + 1) * tile, a.scale_log2, 16 * warp,
			   (j0 + j) * TC_BN + 16 * warp, len);
		cur = cur + 1 == S ? 0 : cur + 1;
	}
	/* the warps' states into shared memory (the stages are free once
	 * every warp is past its last tile: no copy is in flight) */
	st.la = mma_quad_sum(st.la), st.lb = mma_quad_sum(st.lb);
	__syncthreads();
#pragma unroll
	for (int hx = 0; hx < 2; hx++) {
		uint32_t h = grp + 8 * hx;
		float *w = ms + (warp * TC_GMAX + h) * (D + 2);

		if (h >= g)
			continue;
#pragma unroll
		for (int d = 0; d < D / 8; d++) {
			w[8 * d + 2 * tig] = st.o[d][2 * hx];
			w[8 * d + 2 * tig + 1] = st.o[d][2 * hx + 1];
		}
		if (tig == 0)
			w[D] = hx ? st.mb : st.ma,
			w[D + 1] = hx ? st.lb : st.la;
	}
	__syncthreads();
	for (uint32_t o = threadIdx.x; o < g * D; o += TC_WARPS * 32) {
		uint32_t h = o / D, d = o % D;
		float top = -INFINITY, l = 0, acc = 0;

		for (uint32_t w = 0; w < TC_WARPS; w++)
			top = fmaxf(top, ms[(w * TC_GMAX + h) * (D + 2) + D]);
		for (uint32_t w = 0; w < TC_WARPS; w++) {
			const float *ws = ms + (w * TC_GMAX + h) * (D + 2);
			float wt =
			    ws[D] == -INFINITY ? 0.0f : exp2f(ws[D] - top);

			l += ws[D + 1] * wt, acc += ws[d] * wt;
		}
		if (used == 1) {
			out[((size_t)row * a.hq + head + h) * D + d] =
			    __float2bfloat16_rn(acc / l);
		} else {
			float *p = tc_part<D>(a, row, head + h, split);

			p[d] = acc;
			if (d == 0)
				p[D] = top, p[D + 1] = l;
		}
	}
}

/* The rows of several splits: grid (rows, heads / TC_MERGE_WARPS), a warp
 * a (row, head) merging its splits (attention_dev.h's attn_merge_splits,
 * as attention_prefill.cu's pf_merge). Only the row's used splits are
 * read (each wrote all of its partial, every max finite); rows of one
 * split were written by attend_dec_tc. */
template <int D>
static __global__ void __launch_bounds__(TC_MERGE_WARPS * 32)
    tc_merge(bf16 *out, tc_dev a)
{
	uint32_t lane = threadIdx.x % 32, row = blockIdx.x;
	uint32_t head = blockIdx.y * TC_MERGE_WARPS + threadIdx.x / 32;
	uint32_t s = attn_seq_of_row(a.q_off, a.n_seqs, row);
	uint32_t len = a.start[s] + row - a.q_off[s] + 1, chunk;
	uint32_t used = tc_used(a.n_splits, (len + TC_BN - 1) / TC_BN, &chunk);
	bool idle = a.q_off[s + 1] - a.q_off[s] >= a.skip_new;

	o1_pdl_wait(); /* attend_dec_tc's partials */
	o1_pdl_trigger();
	if (idle || used < 2 || head >= a.hq)
		return;
	attn_merge_splits<D>(out + ((size_t)row * a.hq + head) * D,
			     tc_part<D>(a, row, head, 0), used, lane);
}

extern "C" bool o1_attention_decode_tc_fits(const struct o1_attn_dims *d,
					    const uint16_t *out, const float *q,
					    const uint16_t *k_cache,
					    const uint16_t *v_cache)
{
	(void)out;
	return (d->head_dim == 64 || d->head_dim == 128) && d->n_kv_heads &&
	       d->n_heads % d->n_kv_heads == 0 &&
	       d->n_heads / d->n_kv_heads <= TC_GMAX &&
	       d->page_stride % 8 == 0 && (uintptr_t)q % 16 == 0 &&
	       (uintptr_t)k_cache % 16 == 0 && (uintptr_t)v_cache % 16 == 0;
}

/* Splits for BLOCKS (row, kv head) blocks walking up to MAX_LEN positions,
 * SMEM bytes of shared memory a block: the count with the fewest waves x
 * (tiles a split walks + 1) for rows of MAX_LEN (attention_prefill.cu's
 * pf_pick_splits; the 1 is a split's partial and merge, about a tile, and
 * keeps a wave's rounding from buying many splits), the fewest among
 * equals, within TC_SPLIT_WAVES waves of blocks, one a TC_SPLIT_TILES of
 * MAX_LEN, TC_MAX_SPLITS and SCRATCH_FLOATS. A wave: the blocks shared
 * memory lets the SMs hold. So a full batch is not split (256 rows x 8
 * kv heads), 72 rows of llama3-8b over 8k positions are split in 3 (576
 * blocks, 2 a multiprocessor of the H200), 16 rows over 4k in 2. Not yet
 * measured: the constants are the model's. */
static uint32_t tc_pick_splits(uint64_t blocks, uint32_t max_len, size_t smem,
			       uint32_t rows, uint32_t hq, uint32_t d,
			       uint64_t scratch_floats)
{
	uint64_t wave =
	    (uint64_t)o1_cuda_sm_count() * (228 * 1024 / (smem + 1024));
	uint32_t tiles = (max_len + TC_BN - 1) / TC_BN;
	uint32_t most = (tiles + TC_SPLIT_TILES - 1) / TC_SPLIT_TILES, best = 1;
	uint64_t best_cost = UINT64_MAX;

	wave = wave ? wave : 1;
	most = most > TC_MAX_SPLITS ? TC_MAX_SPLITS : most;
	for (uint32_t s = 1; s <= most || s == 1; s++) {
		uint64_t cost =
		    (blocks * s + wave - 1) / wave * ((tiles + s - 1) / s + 1);

		if (s > 1 && (blocks * s > TC_SPLIT_WAVES * wave ||
			      o1_attention_cuda_scratch_floats(rows, hq, d, s) >
				  scratch_floats))
			break;
		if (cost < best_cost)
			best_cost = cost, best = s;
	}
	return best;
}

template <int D, int S>
static int launch_tc(uint16_t *out, const float *q, const uint16_t *kc,
		     const uint16_t *vc, tc_dev a, uint32_t n_rows,
		     uint32_t max_len, uint32_t splits, float *scratch,
		     uint64_t scratch_floats, bool pdl, cudaStream_t stream)
{
	size_t smem = tc_smem<D, S>::bytes;
	int err = 0;

	if (!splits)
		splits = tc_pick_splits((uint64_t)n_rows * a.hkv, max_len, smem,
					n_rows, a.hq, D,
					scratch ? scratch_floats : 0);
	err = o1_attention_cuda_check_splits("attention (decode, tensor cores)",
					     splits, TC_MAX_SPLITS, n_rows,
					     a.hq, D, scratch, scratch_floats);
	if (err)
		return err;
	a.n_splits = splits, a.part = scratch;
	if (smem > 48 * 1024)
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    attend_dec_tc<D, S>,
		    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	if (!err)
		err = O1_CUDA_LAUNCH(
		    "attention (decode, tensor cores)", attend_dec_tc<D, S>,
		    dim3(n_rows, a.hkv, splits), dim3(TC_WARPS * 32), smem,
		    stream, pdl, (bf16 *)out, q, (const bf16 *)kc,
		    (const bf16 *)vc, a);
	if (!err && splits > 1)
		err = O1_CUDA_LAUNCH(
		    "attention (decode, tensor cores) merge", tc_merge<D>,
		    dim3(n_rows, (a.hq + TC_MERGE_WARPS - 1) / TC_MERGE_WARPS),
		    dim3(TC_MERGE_WARPS * 32), 0, stream, pdl, (bf16 *)out, a);
	return err;
}

extern "C" int o1_attention_decode_tc_cuda(
    uint16_t *out, const float *q, const uint16_t *k_cache,
    const uint16_t *v_cache, const struct o1_attn_dims *d,
    const struct o1_attn_batch *b, uint32_t n_rows, uint32_t max_len,
    uint32_t splits, float *scratch, uint64_t scratch_floats, uint32_t skip_new,
    uint32_t stages, bool pdl, cudaStream_t stream)
{
	tc_dev a;

	if (!stages)
		stages = (uint64_t)n_rows * d->n_kv_heads >= TC_TWO_STAGE_BLOCKS
			     ? 2
			     : TC_STAGES;
	if (!o1_attention_decode_tc_fits(d, out, q, k_cache, v_cache) || !out ||
	    !d->page_tokens || !b->n_seqs || n_rows > INT32_MAX || !max_len ||
	    (stages != 2 && stages != 3)) {
		o1_err("attention (decode, tensor cores): bad shape: heads "
		       "%u/%u of %u, page %u tokens stride %llu, %u stages, "
		       "max_len %u",
		       d->n_heads, d->n_kv_heads, d->head_dim, d->page_tokens,
		       (unsigned long long)d->page_stride, stages, max_len);
		return -EINVAL;
	}
	if (!n_rows)
		return 0;
	a = tc_dev{b->q_offsets,
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
		   skip_new,
		   1,
		   NULL};
	if (d->head_dim == 64)
		return stages == 2
			   ? launch_tc<64, 2>(out, q, k_cache, v_cache, a,
					      n_rows, max_len, splits, scratch,
					      scratch_floats, pdl, stream)
			   : launch_tc<64, 3>(out, q, k_cache, v_cache, a,
					      n_rows, max_len, splits, scratch,
					      scratch_floats, pdl, stream);
	return stages == 2 ? launch_tc<128, 2>(out, q, k_cache, v_cache, a,
					       n_rows, max_len, splits, scratch,
					       scratch_floats, pdl, stream)
			   : launch_tc<128, 3>(out, q, k_cache, v_cache, a,
					       n_rows, max_len, splits, scratch,
					       scratch_floats, pdl, stream);
}

/* The decode attention kernel (attention.h is the specification): paged
 * causal GQA attention for rows that each read their sequence's cached K/V
 * once, computed with an online softmax in f32 (base 2: q is scaled by
 * scale * log2(e) on load, exp2f after). attention.cu's dispatch sends the
 * row kernel's rows here whenever the shape fits (o1_attention_decode_fits).
 *
 * Work layout. Grid (row, kv head x head chunk, split); a block serves up
 * to HG query heads of one kv head (GQA: each K/V row is read once for all
 * of them; groups wider than HG take several chunks, each reading K/V
 * again). A position is read by L = D/8 lanes, 16 bytes of K and of V a
 * lane (straight from global memory, no shared-memory staging); a warp
 * holds 32/L positions at once, and each lane group takes DEC_UNROLL
 * positions a round, loaded before any is used, so a warp keeps
 * 2 x DEC_UNROLL 16-byte loads a lane in flight; blocks of up to 4
 * heads (PIPE; 8 heads have no registers left for it) issue the next
 * round's loads before this round's arithmetic (twice that in flight
 * while they compute). A lane keeps its 8 dims of
 * q for each head in registers; the dot products are 8 FMAs and a shuffle
 * reduction over the L lanes. Each lane group runs its own online softmax
 * (running max, sum, 8 accumulator dims a head), merged at the end by
 * shuffles across the groups of a warp and through shared memory across
 * the warps of the block.
 *
 * Splits. The launch has N_SPLITS blocks along the sequence (host: enough
 * blocks to fill the GPU at its batch, at most DEC_MAX_SPLITS, within
 * scratch and tickets, and no more than a row of MAX_LEN positions uses:
 * dec_grid_splits); each row decides on the device how many of them it
 * uses: ceil(len / split_min) capped at N_SPLITS, over chunks of whole
 * rounds, len = its causal length, and at up to 8 rows also capped at FEW
 * (about one wave of blocks) until its splits would pass split_max
 * positions (dec_splits); one up to len = solo (2-4 rounds at
 * up to 8 rows, dec_solo: no merge for a short context, where the merge's
 * fence, ticket and dependent loads of partials cost more than a second
 * round of arithmetic on rows loaded before the PDL wait). Blocks past a row's
 * last split exit at once, so a graph captured at MAX_LEN = the longest context
 * costs a short sequence only its own splits. A row with one split writes its
 * output directly; otherwise each split stores its partial (acc, max, sum) in
 * scratch and the last of them to finish, by a ticket counter per (row,
 * block column), merges exactly the used splits and sets the ticket back
 * to zero (one kernel, no merge launch).
 *
 * PDL (cuda_launch.h). Before it waits for the previous kernel a block
 * reads its row's step inputs (offsets, start, block table) and issues
 * the loads of its first rounds (two with PIPE, one without) for the
 * positions before the sequence's first new token: those K/V rows were
 * written by earlier steps, before the step's first kernel, so the
 * block-table, DRAM and L2 latencies of a short context overlap the
 * previous kernel (the QKV product); after the wait it reads q and loads
 * the new positions (the previous kernel wrote them). Where they are
 * loaded changes no bit.
 *
 * Tensor cores. Launches of many rows (rows x kv heads >= DEC_TC_BLOCKS)
 * go to attention_decode_tc.cu, whose mma tiles serve a GQA group's heads
 * at once (o1_attn_decode_tune's tc); it splits long rows itself, in the
 * same scratch (its merge is a second launch, no tickets).
 *
 * Invariants: D in {32, 64, 128, 256}; page_stride, the caches and q
 * 16-byte aligned (fits); tickets zero between launches (device memory
 * starts zeroed; launches on one device never overlap: the CUDA backend
 * has one stream per device); PDL: every thread waits, early exits
 * included, and nothing is written or read from q, scratch or tickets
 * before it; K/V rows of positions >= start[seq] only after it.
 */
#include <errno.h>
#include <math.h>

#include <cuda_bf16.h>

#include "attention_dev.h"
#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "q8_input_dev.h"

extern "C" {
#include "common/log.h"
}

#define DEC_UNROLL	 4 /* positions a lane group loads per round */
#define DEC_HG		 8 /* most query heads a block serves */
#define DEC_MAX_WARPS	 8
#define DEC_MAX_SPLITS	 32
#define DEC_TICKETS	 2048 /* (row, block column) pairs of a split launch */
#define DEC_LOG2E	 1.4426950408889634f
/* defaults (o1_attn_decode_tune); the warps a block: dec_warps */
#define DEC_SPLIT_ROUNDS 1
#define DEC_TARGET	 528 /* blocks: 4 per multiprocessor of an H100/H200 */
#define DEC_TARGET_FEW	 128 /* at up to 8 rows: dec_few */
#define DEC_LONG_ROUNDS	 8   /* at up to 8 rows: dec_few */
#define DEC_HEADS	 4
#define DEC_HEADS_FEW	 1 /* at up to 8 rows: dec_most */
#define DEC_FLAT	 false
/* 1: the launch's splits are only those a row of up to MAX_LEN positions
 * can use (dec_grid_splits); 0: DEC_TARGET's, the blocks past a row's
 * splits exiting at once (the launch before; kept for the A/B,
 * tools/gpu/object_ab.sh). The same bits either way. On the H100
 * (2026-12-06, object_ab, prompts of 200, two rounds) llama3-8b Q4_K_M
 * ran 415.1 / 415.9 tok/s against 414.3 / 414.5, the same greedy digests. */
#ifndef DEC_GRID_USED
#define DEC_GRID_USED 1
#endif
/* launches of at least this many (row, kv head) blocks go to
 * attention_decode_tc.cu (dec_tensor_cores): measured on the H200
 * (bench_decode_attn, docs/PERFORMANCE.md's fourteenth session), at 128
 * blocks it ran 1.25-1.91x the row kernel's speed (16 rows of llama3-8b
 * and llama3.2-1b, 64 of qwen2.5-0.5b, 2,048 and 4,096 positions), and
 * 1.5-1.9x at 16-32 rows of short contexts; at 64 and fewer blocks over
 * long contexts it lost (0.4-0.84x, measured before it split long rows:
 * to measure again) */
#define DEC_TC_BLOCKS 128
/* launches beyond the first context span (dec_floor), by the K/V their
 * rows read at the span's shortest context: from DEC_H2_FLOOR_BYTES blocks
 * of DEC_HEADS_LONG heads at up to 8 rows, from DEC_TC_FLOOR_BYTES the
 * tensor-core kernel */
#define DEC_HEADS_LONG	   2
#define DEC_H2_FLOOR_BYTES (4ull << 20)
#define DEC_TC_FLOOR_BYTES (32ull << 20)

static __device__ uint32_t dec_tickets[DEC_TICKETS];

struct dec_dev {
	const uint32_t *q_off, *start, *tables;
	uint64_t page_stride;
	float qscale; /* scale * log2(e) */
	uint32_t hq, hkv, p, n_seqs, max_blocks, n_splits, chunks;
	uint32_t split_min; /* least positions a split takes (rounds) */
	uint32_t solo;	    /* longest context served by one split */
	uint32_t round;	    /* positions a block covers a round */
	uint32_t skip_new;  /* rows of sequences with >= this many new tokens
			       belong to the tiled kernel: left alone */
	uint32_t few;	    /* splits a row uses while each takes at most */
	uint32_t split_max; /* this many positions (whole rounds): dec_few */
	uint32_t *out_q;    /* the output quantized too (dec_store), or NULL */
};

static __device__ uint32_t dec_min(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static __device__ uint32_t dec_max(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

/* Splits a row of causal length LEN uses, and the positions each takes
 * (*CHUNK, whole rounds): every used split is non-empty. */
static __device__ uint32_t dec_splits(const dec_dev &a, uint32_t len,
				      uint32_t *chunk)
{
	uint32_t n = len <= a.solo ? 1
				   : dec_min(a.n_splits,
					     (len + a.split_min - 1) / a.split_min);
	uint32_t c;

	n = dec_min(n, dec_max(a.few, (len + a.split_max - 1) / a.split_max));
	c = (len + n - 1) / n;

	c = (c + a.round - 1) / a.round * a.round;
	*chunk = c;
	return (len + c - 1) / c;
}

/* bf16 pairs of a 32-bit word as floats (element 2i in the low half). */
static __device__ void dec_unpack(const uint4 &w, float *f)
{
	f[0] = __uint_as_float(w.x << 16),
	f[1] = __uint_as_float(w.x & 0xffff0000u);
	f[2] = __uint_as_float(w.y << 16),
	f[3] = __uint_as_float(w.y & 0xffff0000u);
	f[4] = __uint_as_float(w.z << 16),
	f[5] = __uint_as_float(w.z & 0xffff0000u);
	f[6] = __uint_as_float(w.w << 16),
	f[7] = __uint_as_float(w.w & 0xffff0000u);
}

/* 2^(M - TOP), 0 for an empty state (M = -inf): weights in a merge. */
static __device__ float dec_weight(float m, float top)
{
	return m == -INFINITY ? 0.0f : exp2f(m - top);
}

template <int HG> struct dec_state {
	float m[HG], l[HG], acc[HG][8];
};

/* One round's scores SC (U, HG; -inf past the split) and V rows VF into
 * the lane's online softmax, head by head. */
template <int HG>
static __device__ void dec_update(dec_state<HG> &st,
				  const float (&sc)[DEC_UNROLL][HG],
				  const float (&vf)[DEC_UNROLL][8])
{
#pragma unroll
	for (int h = 0; h < HG; h++) {
		float top = st.m[h], corr;

#pragma unroll
		for (int u = 0; u < DEC_UNROLL; u++)
			top = fmaxf(top, sc[u][h]);
		if (top == -INFINITY)
			continue; /* nothing seen yet by this lane group */
		corr = exp2f(st.m[h] - top);
		st.l[h] *= corr;
#pragma unroll
		for (int i = 0; i < 8; i++)
			st.acc[h][i] *= corr;
#pragma unroll
		for (int u = 0; u < DEC_UNROLL; u++) {
			float e = exp2f(sc[u][h] - top);

			st.l[h] += e;
#pragma unroll
			for (int i = 0; i < 8; i++)
				st.acc[h][i] += e * vf[u][i];
		}
		st.m[h] = top;
	}
}

/* Merges the states of the lane groups of a warp (xor over the group
 * bits), so every lane group ends with the warp's. */
template <int L, int HG>
static __device__ void dec_warp_merge(dec_state<HG> &st)
{
#pragma unroll
	for (int o = L; o < 32; o *= 2) {
#pragma unroll
		for (int h = 0; h < HG; h++) {
			float m2 = __shfl_xor_sync(0xffffffffu, st.m[h], o);
			float l2 = __shfl_xor_sync(0xffffffffu, st.l[h], o);
			float top = fmaxf(st.m[h], m2);
			float w1 = dec_weight(st.m[h], top),
			      w2 = dec_weight(m2, top);

			st.l[h] = st.l[h] * w1 + l2 * w2;
#pragma unroll
			for (int i = 0; i < 8; i++) {
				float a2 = __shfl_xor_sync(0xffffffffu,
							   st.acc[h][i], o);

				st.acc[h][i] = st.acc[h][i] * w1 + a2 * w2;
			}
			st.m[h] = top;
		}
	}
}

/* A lane group's DEC_UNROLL positions POS, POS + STEP, ... of a round:
 * its 16 bytes of each K and V row (KVOFF: the kv head's rows and the
 * lane's dims), zeros at and past END (no load). */
template <uint32_t D>
static __device__ void
dec_load(uint4 (&kr)[DEC_UNROLL], uint4 (&vr)[DEC_UNROLL],
	 const __nv_bfloat16 *kc, const __nv_bfloat16 *vc,
	 const uint32_t *table, const dec_dev &a, uint64_t kvoff, uint32_t pos,
	 uint32_t step, uint32_t end)
{
#pragma unroll
	for (int u = 0; u < DEC_UNROLL; u++, pos += step) {
		kr[u] = vr[u] = uint4{0, 0, 0, 0};
		if (pos < end) {
			uint64_t off = table[pos / a.p] * a.page_stride +
				       (uint64_t)(pos % a.p) * D + kvoff;

			kr[u] = *(const uint4 *)(kc + off);
			vr[u] = *(const uint4 *)(vc + off);
		}
	}
}

/* dec_load's positions in [FROM, END) again (the others keep what they
 * hold): after the PDL wait, the rows the previous kernel wrote. */
template <uint32_t D>
static __device__ void
dec_reload(uint4 (&kr)[DEC_UNROLL], uint4 (&vr)[DEC_UNROLL],
	   const __nv_bfloat16 *kc, const __nv_bfloat16 *vc,
	   const uint32_t *table, const dec_dev &a, uint64_t kvoff,
	   uint32_t pos, uint32_t step, uint32_t from, uint32_t end)
{
#pragma unroll
	for (int u = 0; u < DEC_UNROLL; u++, pos += step) {
		if (pos >= from && pos < end) {
			uint64_t off = table[pos / a.p] * a.page_stride +
				       (uint64_t)(pos % a.p) * D + kvoff;

			kr[u] = *(const uint4 *)(kc + off);
			vr[u] = *(const uint4 *)(vc + off);
		}
	}
}

/* A split launch's scratch (o1_attention_cuda_scratch_floats's count):
 * the partial accumulators (rows, Hq, n_splits, D), rows 16-byte aligned
 * (the scratch is), then their (max (base 2), sum) pairs (rows, Hq,
 * n_splits, 2). RH: row * Hq + head. */
static __device__ float *dec_acc(float *scratch, const dec_dev &a, size_t rh,
				 uint32_t sp, uint32_t d)
{
	return scratch + (rh * a.n_splits + sp) * d;
}

static __device__ float *dec_ml(float *scratch, const dec_dev &a, size_t rh,
				uint32_t sp, uint32_t d)
{
	return scratch + (size_t)gridDim.x * a.hq * a.n_splits * d +
	       (rh * a.n_splits + sp) * 2;
}

/* Outputs [O, O + 4) of head H of ROW (ACC / L, head dim D) stored as
 * bf16 into OUT and, where a.out_q, quantized as the O product's int8
 * input (q8_input_dev.h, the bits gemv_q.cu would quantize from OUT): a
 * 32-output unit by the 8 consecutive lanes that hold it, the first
 * storing its (d, sum). Every lane of the warp calls it (q8_unit's
 * exchanges); ON: whether the lane's outputs exist (a unit's 8 lanes
 * agree: heads are whole units). */
static __device__ void dec_store(__nv_bfloat16 *out, const dec_dev &a,
				 uint32_t row, uint32_t h, uint32_t o,
				 uint32_t d, float4 acc, float l, bool on)
{
	size_t rh = (size_t)row * a.hq + h;
	__nv_bfloat16 b[4] = {
	    __float2bfloat16_rn(acc.x / l), __float2bfloat16_rn(acc.y / l),
	    __float2bfloat16_rn(acc.z / l), __float2bfloat16_rn(acc.w / l)};

	if (on)
		for (int e = 0; e < 4; e++)
			out[rh * d + o + e] = b[e];
	if (!a.out_q)
		return;
	float v[4] = {__bfloat162float(b[0]), __bfloat162float(b[1]),
		      __bfloat162float(b[2]), __bfloat162float(b[3])};
	uint32_t w[1], k = a.hq * d, c = h * d + o, u = c / 32;
	uint32_t pad = q8_pad(k), part = c % 32 / 4;
	float2 ds = q8_unit<8>(v, w);

	if (!on)
		return;
	a.out_q[4 * (q8_piece_at(pad, row, u) + (part < 4 ? 0 : 32)) +
		part % 4] = w[0];
	if (part == 0)
		((float2 *)(a.out_q + 4 * (size_t)gridDim.x * pad *
					  2))[(size_t)row * (k / 32) + u] = ds;
}

/* The last block of a split row: merges the USED splits' partials of the
 * NH heads from H0 of ROW into out. First every split's max and sum per
 * head into shared memory (W and W + NH * DEC_MAX_SPLITS, one parallel
 * round of loads), then each head's weights 2^(max - top) in place of the
 * maxima and its total sum (after the sums), then 4 output dims a thread
 * as the weighted sums of their partials (16-byte loads, every split's
 * issued before the sum needs it: one more round for blocks of at least
 * NH * D / 4 threads). Partials are read around L1 (__ldcg: other blocks
 * wrote them). */
static __device__ void dec_merge(__nv_bfloat16 *out, float *scratch, float *w,
				 const dec_dev &a, uint32_t d, uint32_t row,
				 uint32_t h0, uint32_t nh, uint32_t used)
{
	float *ls = w + nh * DEC_MAX_SPLITS, *sum = ls + nh * DEC_MAX_SPLITS;

	for (uint32_t i = threadIdx.x; i < nh * DEC_MAX_SPLITS;
	     i += blockDim.x) {
		uint32_t h = i / DEC_MAX_SPLITS, sp = i % DEC_MAX_SPLITS;
		const float *ml =
		    dec_ml(scratch, a, (size_t)row * a.hq + h0 + h, sp, d);

		w[i] = sp < used ? __ldcg(ml) : -INFINITY;
		ls[i] = sp < used ? __ldcg(ml + 1) : 0.0f;
	}
	__syncthreads();
	for (uint32_t h = threadIdx.x; h < nh; h += blockDim.x) {
		float top = -INFINITY, l = 0;

		for (uint32_t sp = 0; sp < used; sp++)
			top = fmaxf(top, w[h * DEC_MAX_SPLITS + sp]);
		for (uint32_t sp = 0; sp < used; sp++) {
			float *x = &w[h * DEC_MAX_SPLITS + sp];

			*x = dec_weight(*x, top);
			l += ls[h * DEC_MAX_SPLITS + sp] * *x;
		}
		sum[h] = l;
	}
	__syncthreads();
	/* every lane of a warp takes its rounds (dec_store's exchanges) */
	for (uint32_t o0 = 0; o0 + 128 * (threadIdx.x / 32) < nh * d;
	     o0 += 4 * blockDim.x) {
		uint32_t o = o0 + 4 * threadIdx.x;
		bool on = o < nh * d;
		uint32_t h = on ? o / d : 0;
		size_t rh = (size_t)row * a.hq + h0 + h;
		float4 acc = {0, 0, 0, 0};

#pragma unroll
		for (uint32_t sp = 0; sp < DEC_MAX_SPLITS; sp++) {
			if (sp < used && on) {
				float4 x =
				    __ldcg((const float4 *)(dec_acc(scratch, a,
								    rh, sp, d) +
							    o % d));
				float wt = w[h * DEC_MAX_SPLITS + sp];

				acc.x += wt * x.x, acc.y += wt * x.y;
				acc.z += wt * x.z, acc.w += wt * x.w;
			}
		}
		dec_store(out, a, row, h0 + h, o % d, d, acc, sum[h], on);
	}
}

/* out (T,Hq,D) bf16 or scratch partials (dec_acc, dec_ml); q (T,Hq,D) f32; k/v
 * caches (pages,Hkv,P,D) bf16. D = 8 L. Block (row, kv head x head chunk,
 * split) of 1 to DEC_MAX_WARPS warps. Shared: the warps' states (warps, HG, D +
 * 2) f32 (then the merge's maxima, sums and totals, HG (2 DEC_MAX_SPLITS + 1)),
 * then the merge flag. */
template <int L, int HG, bool PIPE>
static __global__ void __launch_bounds__(DEC_MAX_WARPS * 32)
    attend_dec(__nv_bfloat16 *out, float *scratch, const float *q,
	       const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, dec_dev a)
{
	constexpr uint32_t D = 8 * L, GPW = 32 / L;
	extern __shared__ __align__(16) float dsm[];
	uint32_t lane = threadIdx.x % 32, sub = lane % L,
		 warp = threadIdx.x / 32;
	uint32_t nw = blockDim.x / 32, ng = nw * GPW, gid = threadIdx.x / L;
	uint32_t row = blockIdx.x, split = blockIdx.z;
	uint32_t kvh = blockIdx.y / a.chunks, hc = blockIdx.y % a.chunks;
	uint32_t g = a.hq / a.hkv, h0 = kvh * g + hc * HG;
	uint32_t nh = dec_min(HG, g - hc * HG);
	uint32_t s, len, used, chunk, j0, j1, safe;
	bool idle;
	uint32_t *flag =
	    (uint32_t *)(dsm + dec_max(nw * HG * (D + 2),
				       HG * (2 * DEC_MAX_SPLITS + 1)));
	const uint32_t *table;
	uint64_t kvoff = ((uint64_t)kvh * a.p) * D + 8 * sub;
	uint4 kr[DEC_UNROLL], vr[DEC_UNROLL], kn[DEC_UNROLL], vn[DEC_UNROLL];
	float qv[HG][8];
	dec_state<HG> st;

	/* Before the wait (PDL), only step inputs and the K/V rows of
	 * positions before the sequence's first new token (written by earlier
	 * steps): see the top. */
	s = attn_seq_of_row(a.q_off, a.n_seqs, row);
	len = a.start[s] + row - a.q_off[s] + 1;
	used = dec_splits(a, len, &chunk);
	idle = a.q_off[s + 1] - a.q_off[s] >= a.skip_new || split >= used;
	j0 = split * chunk, j1 = dec_min(j0 + chunk, len);
	safe = dec_min(j1, a.start[s]);
	table = a.tables + (size_t)s * a.max_blocks;
	if (!idle) {
		dec_load<D>(kr, vr, kc, vc, table, a, kvoff, j0 + gid, ng,
			    safe);
		if (PIPE)
			dec_load<D>(kn, vn, kc, vc, table, a, kvoff,
				    j0 + a.round + gid, ng, safe);
	}
	o1_pdl_wait();
	o1_pdl_trigger();
	if (idle)
		return; /* the whole block: the tiled kernel's row, or past
			   this row's splits */
	/* this step's new positions: written by the previous kernel */
	dec_reload<D>(kr, vr, kc, vc, table, a, kvoff, j0 + gid, ng, safe,
		      j1);
	if (PIPE)
		dec_reload<D>(kn, vn, kc, vc, table, a, kvoff,
			      j0 + a.round + gid, ng, safe, j1);
#pragma unroll
	for (int h = 0; h < HG; h++) {
		const float4 *qr = (const float4 *)(q +
						    ((size_t)row * a.hq + h0 +
						     dec_min(h, nh - 1)) *
							D +
						    8 * sub);
		float4 x = qr[0], y = qr[1];

		qv[h][0] = x.x * a.qscale, qv[h][1] = x.y * a.qscale;
		qv[h][2] = x.z * a.qscale, qv[h][3] = x.w * a.qscale;
		qv[h][4] = y.x * a.qscale, qv[h][5] = y.y * a.qscale;
		qv[h][6] = y.z * a.qscale, qv[h][7] = y.w * a.qscale;
		st.m[h] = -INFINITY, st.l[h] = 0;
#pragma unroll
		for (int i = 0; i < 8; i++)
			st.acc[h][i] = 0;
	}
	for (uint32_t base = j0; base < j1; base += a.round) {
		float sc[DEC_UNROLL][HG], vf[DEC_UNROLL][8];

		/* pipelined: the next round's loads fly during this one's
		 * arithmetic (the first two rounds were loaded above) */
		if (PIPE && base != j0)
			dec_load<D>(kn, vn, kc, vc, table, a, kvoff,
				    base + a.round + gid, ng, j1);
		else if (!PIPE && base != j0)
			dec_load<D>(kr, vr, kc, vc, table, a, kvoff, base + gid,
				    ng, j1);
#pragma unroll
		for (int u = 0; u < DEC_UNROLL; u++) {
			float kf[8];
			bool ok = base + u * ng + gid < j1;

			dec_unpack(kr[u], kf);
			dec_unpack(vr[u], vf[u]);
#pragma unroll
			for (int h = 0; h < HG; h++) {
				float x = 0;

#pragma unroll
				for (int i = 0; i < 8; i++)
					x += qv[h][i] * kf[i];
#pragma unroll
				for (int o = 1; o < L; o *= 2)
					x += __shfl_xor_sync(0xffffffffu, x, o);
				sc[u][h] = ok ? x : -INFINITY;
			}
		}
		dec_update<HG>(st, sc, vf);
		if (PIPE) {
#pragma unroll
			for (int u = 0; u < DEC_UNROLL; u++)
				kr[u] = kn[u], vr[u] = vn[u];
		}
	}
	dec_warp_merge<L, HG>(st);
	if (lane < L) {
#pragma unroll
		for (int h = 0; h < HG; h++) {
			float *w = dsm + (warp * HG + h) * (D + 2);

#pragma unroll
			for (int i = 0; i < 8; i++)
				w[8 * sub + i] = st.acc[h][i];
			if (sub == 0)
				w[D] = st.m[h], w[D + 1] = st.l[h];
		}
	}
	__syncthreads();
	/* every lane of a warp takes its rounds (dec_store's exchanges) */
	for (uint32_t o0 = 0; o0 + 128 * warp < nh * D; o0 += 4 * blockDim.x) {
		uint32_t o = o0 + 4 * threadIdx.x;
		bool on = o < nh * D;
		uint32_t h = on ? o / D : 0, d = o % D;
		size_t rh = (size_t)row * a.hq + h0 + h;
		float top = -INFINITY, l = 0;
		float4 acc = {0, 0, 0, 0};

		for (uint32_t w = 0; w < nw; w++)
			top = fmaxf(top, dsm[(w * HG + h) * (D + 2) + D]);
		for (uint32_t w = 0; w < nw; w++) {
			const float *ws = dsm + (w * HG + h) * (D + 2);
			float wt = dec_weight(ws[D], top);

			l += ws[D + 1] * wt;
			acc.x += ws[d] * wt, acc.y += ws[d + 1] * wt;
			acc.z += ws[d + 2] * wt, acc.w += ws[d + 3] * wt;
		}
		if (used == 1) {
			dec_store(out, a, row, h0 + h, d, D, acc, l, on);
		} else if (on) {
			*(float4 *)(dec_acc(scratch, a, rh, split, D) + d) =
			    acc;
			if (d == 0) {
				float *ml = dec_ml(scratch, a, rh, split, D);

				ml[0] = top, ml[1] = l;
			}
		}
	}
	if (used == 1)
		return;
	__threadfence(); /* the partials, before the ticket */
	__syncthreads();
	if (threadIdx.x == 0) {
		uint32_t *ticket =
		    &dec_tickets[(size_t)row * gridDim.y + blockIdx.y];

		*flag = atomicAdd(ticket, 1u) == used - 1;
		if (*flag)
			*ticket = 0;
	}
	__syncthreads();
	if (!*flag)
		return;
	__threadfence(); /* the other blocks' partials, after the ticket */
	dec_merge(out, scratch, dsm, a, D, row, h0, nh, used);
}

typedef void (*dec_kernel)(__nv_bfloat16 *, float *, const float *,
			   const __nv_bfloat16 *, const __nv_bfloat16 *,
			   dec_dev);

/* The instance for head dim D and HG heads a block (1, 2, 4 or 8),
 * loading a round ahead (PIPE) unless FLAT (4 heads: the benchmark's A/B;
 * fewer heads always do, 8 never). */
template <int L> static dec_kernel dec_pick_hg(uint32_t hg, bool flat)
{
	return hg == 1	 ? attend_dec<L, 1, true>
	       : hg == 2 ? attend_dec<L, 2, true>
	       : hg == 4
		   ? (flat ? attend_dec<L, 4, false> : attend_dec<L, 4, true>)
		   : attend_dec<L, 8, false>;
}

static dec_kernel dec_pick(uint32_t d, uint32_t hg, bool flat)
{
	return d == 32	  ? dec_pick_hg<4>(hg, flat)
	       : d == 64  ? dec_pick_hg<8>(hg, flat)
	       : d == 128 ? dec_pick_hg<16>(hg, flat)
			  : dec_pick_hg<32>(hg, flat);
}

extern "C" bool o1_attention_decode_fits(const struct o1_attn_dims *d,
					 const uint16_t *out, const float *q,
					 const uint16_t *k_cache,
					 const uint16_t *v_cache)
{
	(void)out;
	return (d->head_dim == 32 || d->head_dim == 64 || d->head_dim == 128 ||
		d->head_dim == 256) &&
	       d->page_stride % 8 == 0 && (uintptr_t)q % 16 == 0 &&
	       (uintptr_t)k_cache % 16 == 0 && (uintptr_t)v_cache % 16 == 0;
}

/* The end of the span below MAX_LEN's (TUNE's span ends where set, else
 * O1_ATTN_DECODE_SPAN_*), 0 in the first span: a step in MAX_LEN's span
 * has a context longer than that. */
static uint32_t dec_span_floor(const struct o1_attn_decode_tune *tune,
			       uint32_t max_len)
{
	static const uint32_t dflt[] = {O1_ATTN_DECODE_SPAN_SHORT,
					O1_ATTN_DECODE_SPAN_MID,
					O1_ATTN_DECODE_SPAN_LONG};
	bool set = tune && tune->spans_set;
	const uint32_t *ends = set ? tune->span_ends : dflt;
	uint32_t n = set ? tune->n_span_ends : 3, f = 0;

	for (uint32_t i = 0; i < n && i < O1_ATTN_DECODE_SPAN_ENDS_MAX; i++)
		if (ends[i] < max_len && ends[i] > f)
			f = ends[i];
	return f;
}

/* The K/V bytes N_ROWS rows read at the shortest context of MAX_LEN's
 * span (dec_span_floor: the launch serves contexts up to MAX_LEN, a
 * graph's span, and a step in that span has one longer than the span
 * below), 0 in the first span. As they grow, one head a block
 * (DEC_HEADS_FEW, for short contexts, where a step waits on few rounds)
 * loses: its blocks read each K/V row from L2 once a head, and the rounds
 * of resident blocks bound the time; the tensor-core kernel costs ~32-48
 * us whatever the length but then reads at up to 2 TB/s.
 * bench_decode_attn on the H100 (2026-12-06, cold us a layer; one head a
 * block / two / tc; docs/PERFORMANCE.md, thirty-eighth session): llama3-8b,
 * 1 row at 4,096 / 8,192 / 16,384 / 32,768 positions 25.0 / 44.6 / 71.6 /
 * 124.3, 22.8 / 33.4 / 60.7 / 94.3, 47.6 / 48.0 / 52.6 / 73.2; 4 rows at
 * 1,024 / 4,096 / 8,192 30.1 / 77.4 / 137.2, 21.7 / 55.3 / 96.3, 46.6 /
 * 52.6 / 70.9; llama3.2-1b, 1 row at 2,048 / 8,192 / 32,768 14.5 / 25.2 /
 * 73.3, 15.9 / 23.5 / 61.9, 32.3 / 32.9 / 45.3; qwen2.5-0.5b, 1 row at
 * 8,192 18.7 / 19.8 / 32.5, 4 rows at 8,192 / 16,384 39.3 / 70.5, 28.7 /
 * 51.5, 33.3 / 37.0. Two heads a block win from ~4 MiB of K/V at the
 * span's shortest context (DEC_H2_FLOOR_BYTES), the tensor-core kernel
 * from ~32 MiB (DEC_TC_FLOOR_BYTES); at 128-512 positions one head a
 * block still wins by 3-10% at 2-4 rows, hence a first span without. */
static uint64_t dec_floor(const struct o1_attn_dims *d, uint32_t n_rows,
			  uint32_t max_len,
			  const struct o1_attn_decode_tune *tune)
{
	return (uint64_t)n_rows * dec_span_floor(tune, max_len) *
	       d->n_kv_heads * d->head_dim * 4;
}

/* Heads a block serves: the group rounded up to a power of two, at most
 * MOST (a power of two <= DEC_HG; wider groups take several chunks). */
static uint32_t dec_heads(uint32_t g, uint32_t most)
{
	uint32_t hg = 1;

	while (hg < g && hg < most)
		hg *= 2;
	return hg;
}

/* Splits to launch: enough blocks to reach TARGET when the batch has
 * fewer, at most one per split_min of MAX_LEN, within DEC_MAX_SPLITS,
 * the tickets and SCRATCH (16-byte aligned for the partials' rows). */
static uint32_t dec_pick_splits(const dec_dev &a, uint32_t rows,
				uint32_t max_len, uint32_t target,
				const float *scratch, uint64_t scratch_floats,
				uint32_t d)
{
	uint64_t blocks = (uint64_t)rows * a.hkv * a.chunks;
	uint32_t s =
	    blocks >= target ? 1 : (uint32_t)((target + blocks - 1) / blocks);
	uint32_t most = (max_len + a.split_min - 1) / a.split_min;

	s = s > most ? most : s;
	s = s > DEC_MAX_SPLITS ? DEC_MAX_SPLITS : s;
	if (blocks > DEC_TICKETS || (uintptr_t)scratch % 16)
		s = 1;
	while (s > 1 && o1_attention_cuda_scratch_floats(rows, a.hq, d, s) >
			    scratch_floats)
		s--;
	return s ? s : 1;
}

/* Warps a block by the launch's rows, from bench_decode_attn --sweep on the
 * H200 (2026-12-01, three head shapes, contexts 128-4096): a lone row wants
 * the most warps on its few positions (8b, 130 positions: 9.3 against 11.2
 * us with 4), a full batch the fewest (256 rows: 1 warp 67 against 86 us
 * with 4), 64 rows two (22.6 against 41.3 us). With at most 4 heads a block
 * (DEC_HEADS) for the same reason: qwen2.5-0.5b's group of 7 in blocks of 4
 * and 3 took 7.9 us where a block of 7 took 12.5. */
static uint32_t dec_warps(uint32_t n_rows)
{
	return n_rows <= 8 ? 8 : n_rows <= 128 ? 2 : 1;
}

/* Most heads a block serves, by the launch's rows: at up to 8 rows
 * DEC_HEADS_FEW, or DEC_HEADS_LONG where they read DEC_H2_FLOOR_BYTES of
 * K/V at their span's shortest context (dec_floor). A lone row's blocks
 * are few (qwen2.5-0.5b: 2 kv heads),
 * and once its K/V loads are issued before the PDL wait what is left
 * after it is the block's arithmetic, which is per head: blocks of one
 * head (128 registers a thread, so one also fits beside a product's block
 * on a multiprocessor) on more blocks, reading the same K/V rows from L2
 * once a head. bench_decode_attn --sweep on the H200, batch 1, ctx 128 /
 * 256: 1 head a block 6.78-7.97 us against 2 heads' 7.23-8.64 (qwen2.5-0.5b,
 * llama3.2-1b; llama3-8b 7.74 / 10.50 against 8.35 / 11.10). */
static uint32_t dec_most(const struct o1_attn_dims *d, uint32_t n_rows,
			 uint32_t max_len,
			 const struct o1_attn_decode_tune *tune)
{
	if (n_rows > 8)
		return DEC_HEADS;
	return dec_floor(d, n_rows, max_len, tune) >= DEC_H2_FLOOR_BYTES
		   ? DEC_HEADS_LONG
		   : DEC_HEADS_FEW;
}

/* Rounds of the longest context one split serves, by the launch's rows,
 * its blocks a split (BLOCKS: rows x kv heads x head chunks) and the head
 * dimension D: a few rows take two (both loaded before the PDL wait: 256
 * positions of 8 warps at D = 64), four where a split has under 32 blocks
 * or D <= 64, longer contexts split as split_min says; a full batch has
 * blocks enough without. Four where blocks are few: on the H200
 * (2026-12-02, bench_cuda_decode --attn 0,4,0,0, contexts 308-564)
 * qwen2.5-0.5b's 14 blocks a split ran its step 3.3% faster in one split
 * than in up to five with their merge. Four at D <= 64 (a round of 8
 * warps is 128 positions there, 64 at D = 128): on the H100 (2026-12-06,
 * --attn 0,4,132,0 and 0,4,264,0 against the default, prompts of 200 then
 * 128 steps, two calls) llama3.2-1b Q4_K_M ran 1,509-1,517 tok/s against
 * 1,457-1,460 (+3.6%), the H200's earlier +0.1..1.2%; llama3-8b's 32
 * blocks at D = 128 lost 1.4-2.0% with four (longer splits on 128 dims)
 * and keep two. */
static uint32_t dec_solo(uint32_t n_rows, uint32_t blocks, uint32_t d)
{
	return n_rows > 8 ? 1 : blocks < 32 || d <= 64 ? 4 : 2;
}

/* A's cap on the splits a row uses (dec_splits): at up to 8 rows, without
 * a tuned target, the splits of DEC_TARGET_FEW blocks (TUNE's few_blocks
 * where set, for the A/B; DEC_TARGET_FEW: at most one block on each
 * multiprocessor, where the rows' blocks are a power of two: 1 row of
 * llama3-8b or llama3.2-1b, 32 blocks a split, 4 splits) while each split
 * takes at most DEC_LONG_ROUNDS rounds, past that up to N_SPLITS
 * (DEC_TARGET's, as before). The cap was 264 blocks (two a
 * multiprocessor) until bench_decode_attn --tune on the H100 (2026-12-07,
 * cold us a layer, llama3-8b at 1,024 / 2,048 positions) found fewer
 * splits faster at every row count of 1, 2 and 4: 1 row 5 splits (132)
 * 14.6 / 16.3 against 9 (264) 17.3 / 19.8; 2 rows 2 splits 20.3 / 23.5
 * against 5's 22.8 / 26.7 and 3's 24.8 / 30.4; 4 rows 1 split 35.7 /
 * 42.4 against 3's 38.0 / 47.3; whole llama3-8b Q4_K_M at 1 row, prompts
 * of 200 and 2,000 then 128 steps, +3.2% and +3.6% with 5 splits
 * (docs/PERFORMANCE.md, forty-ninth session). A block reads its positions a
 * round after another, and the times fit waves of resident blocks, a partly
 * filled last wave costing a whole one: at 16,384 positions llama3-8b's 5
 * splits took 93 us, 9 took 94, 17 took 71. bench_decode_attn --tune on the
 * H100 (2026-12-06, graph max_len 8,192, cold us a layer), the cap of 264
 * against the launch before it (--tune 0,0,528,0): a lone row of llama3-8b at
 * 1,024 / 2,048 / 4,096 positions 14.46 / 17.89 / 24.77 against 19.14 / 22.30
 * / 29.63, llama3.2-1b at 2,048 / 4,096 / 8,192 14.27 / 17.63 / 25.09 against
 * 19.17 / 22.34 / 29.73, qwen2.5-0.5b at 4,096 / 8,192 / 16,384 15.10 /
 * 18.56 / 24.38 against 20.16 / 22.91 / 29.02; even at 300 positions and
 * for llama3-8b from 8,192 (where the length cap lets it split as before;
 * without that cap 49.1 against 44.5 us). Four rows: llama3-8b at 300
 * 17.38 against 20.70, qwen2.5-0.5b at 1,024 / 2,048 13.15 / 16.42
 * against 17.28 / 19.94, but llama3.2-1b at 1,024 / 2,048 and llama3-8b
 * at 1,024 3-5% slower. Through bench_cuda_decode (llama3.2-1b Q4_K_M,
 * prompts of 2,000 then 128 steps, by turns) 1,299.3 against 1,245.7
 * tok/s (+4.3%). Otherwise no cap. */
static void dec_few(dec_dev *a, uint32_t n_rows, uint32_t max_len,
		    const struct o1_attn_decode_tune *tune,
		    uint64_t scratch_floats, uint32_t d, const float *scratch)
{
	a->few = a->n_splits;
	a->split_max = a->split_min;
	if (n_rows > 8 || (tune && tune->target_blocks))
		return;
	a->few = dec_pick_splits(*a, n_rows, max_len,
				 tune && tune->few_blocks ? tune->few_blocks
							  : DEC_TARGET_FEW,
				 scratch, scratch_floats, d);
	a->split_max = DEC_LONG_ROUNDS * a->round;
}

/* The splits a row of at most MAX_LEN positions uses (dec_splits, which
 * only grows with the length): the launch's grid needs no more. A graph's
 * launch serves its span's contexts (at 1 row of llama3-8b in the first
 * span, 1,024 positions: 4 of DEC_TARGET's 16 splits, DEC_TARGET_FEW's
 * cap), and the blocks past them only exited. N_SPLITS lowered to this
 * gives every row of up to MAX_LEN the same count and chunks (min(N, A(len),
 * max(F, B(len))) with N capped by A(MAX_LEN) and max(F, B(MAX_LEN)),
 * A and B growing), so the same bits; a longer row (outside the contract)
 * still covers its positions, in fewer, longer splits. */
static uint32_t dec_grid_splits(const dec_dev &a, uint32_t max_len)
{
	uint32_t n, by_len, by_cap;

	if (max_len <= a.solo)
		return 1;
	by_len = (max_len + a.split_min - 1) / a.split_min;
	by_cap = (max_len + a.split_max - 1) / a.split_max;
	n = a.n_splits < by_len ? a.n_splits : by_len;
	by_cap = a.few > by_cap ? a.few : by_cap;
	return n < by_cap ? n : by_cap;
}

/* Whether N_ROWS rows go to the tensor-core kernel (TUNE's tc, else
 * AUTO): rows x kv heads of at least DEC_TC_BLOCKS (a block each, and
 * more where it splits long rows: its own choice), or rows that read
 * DEC_TC_FLOOR_BYTES of K/V at their span's shortest context
 * (dec_floor). */
static bool dec_tensor_cores(const struct o1_attn_dims *d, const uint16_t *out,
			     const float *q, const uint16_t *kc,
			     const uint16_t *vc, uint32_t n_rows,
			     uint32_t max_len,
			     const struct o1_attn_decode_tune *tune)
{
	uint32_t tc = tune ? tune->tc : (uint32_t)O1_ATTN_TC_AUTO;

	if (tc == O1_ATTN_TC_OFF ||
	    !o1_attention_decode_tc_fits(d, out, q, kc, vc))
		return false;
	return tc == O1_ATTN_TC_ON ||
	       (uint64_t)n_rows * d->n_kv_heads >= DEC_TC_BLOCKS ||
	       dec_floor(d, n_rows, max_len, tune) >= DEC_TC_FLOOR_BYTES;
}

extern "C" int o1_attention_decode_cuda(
    uint16_t *out, const float *q, const uint16_t *k_cache,
    const uint16_t *v_cache, const struct o1_attn_dims *d,
    const struct o1_attn_batch *b, uint32_t n_rows, uint32_t max_len,
    float *scratch, uint64_t scratch_floats, uint32_t skip_new,
    const struct o1_attn_decode_tune *tune, struct o1_attn_out_q *out_q,
    bool pdl, cudaStream_t stream)
{
	uint32_t warps =
	    tune && tune->warps ? tune->warps : dec_warps(n_rows);
	uint32_t rounds =
	    tune && tune->split_rounds ? tune->split_rounds : DEC_SPLIT_ROUNDS;
	uint32_t target =
	    tune && tune->target_blocks ? tune->target_blocks : DEC_TARGET;
	uint32_t most = tune && tune->heads
			    ? tune->heads
			    : dec_most(d, n_rows, max_len, tune);
	uint32_t g, hg, dd = d->head_dim;
	dec_dev a;
	size_t smem;
	dec_kernel k;
	int err;

	if (!d->n_kv_heads || !d->n_heads || d->n_heads % d->n_kv_heads ||
	    !d->page_tokens || !b->n_seqs || !max_len ||
	    warps > DEC_MAX_WARPS || most > DEC_HG || (most & (most - 1)) ||
	    (uint64_t)b->max_blocks * d->page_tokens < max_len || !out ||
	    !o1_attention_decode_fits(d, out, q, k_cache, v_cache)) {
		o1_err("attention (decode): bad shape: heads %u/%u of %u, "
		       "page %u tokens stride %llu, %u warps, %u heads a "
		       "block, max_len %u",
		       d->n_heads, d->n_kv_heads, dd, d->page_tokens,
		       (unsigned long long)d->page_stride, warps, most,
		       max_len);
		return -EINVAL;
	}
	if (out_q && out_q->q && (uintptr_t)out_q->q % 16) {
		o1_err("attention (decode): quantized output %p not 16-byte "
		       "aligned",
		       out_q->q);
		return -EINVAL;
	}
	if (out_q)
		out_q->written = false;
	if (!n_rows)
		return 0;
	if (dec_tensor_cores(d, out, q, k_cache, v_cache, n_rows, max_len,
			     tune))
		return o1_attention_decode_tc_cuda(
		    out, q, k_cache, v_cache, d, b, n_rows, max_len,
		    tune ? tune->tc_splits : 0, scratch,
		    scratch ? scratch_floats : 0, skip_new,
		    tune ? tune->tc_stages : 0, pdl, stream);
	g = d->n_heads / d->n_kv_heads, hg = dec_heads(g, most);
	a = dec_dev{b->q_offsets,
		    b->start_pos,
		    b->block_tables,
		    d->page_stride,
		    d->scale * DEC_LOG2E,
		    d->n_heads,
		    d->n_kv_heads,
		    d->page_tokens,
		    b->n_seqs,
		    b->max_blocks,
		    1,
		    (g + hg - 1) / hg,
		    0,
		    0,
		    warps * (32 / (dd / 8)) * DEC_UNROLL,
		    skip_new,
		    0,
		    0,	   /* few, split_max: dec_few */
		    NULL}; /* out_q: below */
	a.split_min = rounds * a.round;
	a.solo =
	    tune && tune->split_rounds
		? a.split_min
		: dec_solo(n_rows, n_rows * a.hkv * a.chunks, dd) * a.round;
	a.solo = a.solo > a.split_min ? a.solo : a.split_min;
	a.n_splits = dec_pick_splits(a, n_rows, max_len, target, scratch,
				     scratch ? scratch_floats : 0, dd);
	dec_few(&a, n_rows, max_len, tune, scratch ? scratch_floats : 0, dd,
		scratch);
	if (DEC_GRID_USED)
		a.n_splits = dec_grid_splits(a, max_len);
	if (out_q && out_q->q && skip_new == UINT32_MAX) {
		a.out_q = (uint32_t *)out_q->q;
		out_q->written = true;
	}
	smem = (size_t)warps * hg * (dd + 2);
	smem = smem > hg * (2 * DEC_MAX_SPLITS + 1)
		   ? smem
		   : hg * (2 * DEC_MAX_SPLITS + 1);
	smem = smem * sizeof(float) + 16;
	k = dec_pick(dd, hg, tune ? tune->flat : DEC_FLAT);
	if (smem > 48 * 1024) {
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
		if (err)
			return err;
	}
	return O1_CUDA_LAUNCH(
	    "attention (decode)", k, dim3(n_rows, a.hkv * a.chunks, a.n_splits),
	    dim3(warps * 32), smem, stream, pdl, (__nv_bfloat16 *)out, scratch,
	    q, (const __nv_bfloat16 *)k_cache, (const __nv_bfloat16 *)v_cache,
	    a);
}

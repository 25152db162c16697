/* Paged causal GQA attention on the device (attention.h is the
 * specification; this computes the same softmax with an online,
 * tile-by-tile rescaling in f32): the row kernel, and the dispatch that
 * sends prompt chunks to the tiled kernel (attention_prefill.cu).
 *
 * Dispatch (o1_attention_cuda). Rows of sequences with at least
 * O1_ATTN_TILED_MIN_NEW new tokens go to the tiled kernel when the shape
 * fits it; the row kernel then leaves them alone (its blocks for those
 * rows exit at once, and are not launched at all for a lone sequence).
 * Which sequences qualify is read on the device; the host only knows that
 * none can when the batch has fewer than MIN_NEW - 1 rows beyond one per
 * sequence, and then launches the row kernel alone, as before: a decode
 * batch, one row per sequence, always does (the captured decode graphs
 * are unchanged).
 *
 * The row kernel's rows go to attention_decode.cu's kernel whenever the
 * shape fits it (o1_attention_decode_fits: the presets' head dims, aligned
 * pages); the row kernel below serves the other shapes and
 * o1_attention_rows_legacy_cuda (the benchmark's A/B).
 *
 * Row kernel. Grid (row, kv head, split): a block serves the Hq/Hkv query
 * heads that share one kv head (GQA-aware: each K/V tile is read from the
 * pool once for all of them), one warp per query head. The block walks its
 * split's positions in tiles of ATT_TILE: the tile's K and V rows (bf16) go
 * to shared memory through the block table, lane j scores position j, the
 * warp rescales its running max/sum/accumulator, then each lane accumulates
 * its own head dims. When (row, kv head) pairs are too few to fill the GPU
 * (decode), the sequence is split into up to ATT_MAX_SPLITS ranges whose
 * partial (acc, max, sum) land in scratch; the last block of a (row, kv
 * head) to finish, by a ticket counter, merges them into the output (one
 * kernel, no merge launch); with one split each block writes the output
 * directly. The split
 * count comes from the host (rows, heads, MAX_LEN); each sequence cuts its
 * own length (start_pos + its new tokens, read on the device) into that
 * many ranges of whole tiles, so a launch depends on no per-step host value
 * beyond the row count and can be replayed from a CUDA graph with MAX_LEN =
 * the longest context: splits past a short sequence's end exit at once and
 * merge as empty partials.
 * PDL (cuda_launch.h, the row kernel): every thread first waits for the
 * previous kernel.
 * Invariants: head_dim even and <= ATT_MAX_D, page strides even (bf16
 * pairs are read as 32-bit words), Hq/Hkv <= 32.
 */
#include <errno.h>
#include <math.h>

#include <cuda_bf16.h>

#include "attention_dev.h"
#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "common/log.h"
}

#define ATT_TILE       32
#define ATT_MAX_D      256
#define ATT_MAX_SPLITS 32
#define ATT_BLOCKS     264 /* aim: two blocks per multiprocessor (132) */

/* The split merge's tickets, one per (row, kv head) pair of a launch with
 * splits (fewer than ATT_BLOCKS pairs: pick_splits), zero between
 * launches (device memory starts zeroed; each merge sets its ticket back):
 * launches with splits on one device must not overlap in time. */
static __device__ uint32_t att_tickets[ATT_BLOCKS];

struct att_dev {
	const uint32_t *q_off, *start, *tables;
	uint64_t page_stride;
	float scale;
	uint32_t hq, hkv, d, p, n_seqs, max_blocks, n_splits;
	uint32_t skip_new; /* rows of sequences with >= this many new tokens
			      belong to the tiled kernel: left alone */
};

/* Positions per split of sequence S: its length over the splits, in whole
 * tiles. */
static __device__ uint32_t seq_chunk(const att_dev &a, uint32_t s)
{
	uint32_t len = a.start[s] + a.q_off[s + 1] - a.q_off[s];
	uint32_t c = (len + a.n_splits - 1) / a.n_splits;

	return (c + ATT_TILE - 1) / ATT_TILE * ATT_TILE;
}

static __device__ float warp_max(float v)
{
	for (int o = 16; o; o /= 2)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

static __device__ float warp_sum(float v)
{
	for (int o = 16; o; o /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* Elements (K and V words) of a tile a thread loads before it stores any:
 * ATT_LOADS for blocks of up to ATT_WIDE_THREADS (16 query heads per kv
 * head, every model of the presets), held in 76 registers a thread. A
 * block of 32 warps (Hq/Hkv = 32) cannot have 80 (more than the
 * multiprocessor's 64K registers: the launch fails), so wider groups take
 * ATT_LOADS_WIDE, which fits 64 registers with no spill under its launch
 * bound. */
#define ATT_LOADS	     8
#define ATT_LOADS_WIDE	     6
#define ATT_WIDE_THREADS     512
#define ATT_MAX_THREADS	     1024 /* 32 query heads per kv head */

/* Element offsets of positions [t0, t0 + n) of kv head KVH (one per
 * position, from the block table) into off, by the first N threads; the
 * caller syncs before they are used. */
static __device__ void tile_rows(uint64_t *off, const uint32_t *table,
				 const att_dev &a, uint32_t kvh, uint32_t t0,
				 uint32_t n)
{
	uint32_t pos = t0 + threadIdx.x;

	if (threadIdx.x < n)
		off[threadIdx.x] = table[pos / a.p] * a.page_stride +
				   ((uint64_t)kvh * a.p + pos % a.p) * a.d;
}

/* Copies the tile's K into ks (n, D/2 + 1 words, padded against bank
 * conflicts) and V into vs (n, D/2 words), rows at OFF: each thread issues
 * up to ATT_LOADS K and V loads, then stores them (independent loads in
 * flight, not one position's chain at a time). */
template <int LOADS>
static __device__ void load_tile(__nv_bfloat162 *ks, __nv_bfloat162 *vs,
				 const __nv_bfloat16 *kc,
				 const __nv_bfloat16 *vc, const uint64_t *off,
				 const att_dev &a, uint32_t n)
{
	uint32_t w = a.d / 2, words = n * w;

	for (uint32_t e = threadIdx.x; e < words; e += LOADS * blockDim.x) {
		__nv_bfloat162 kw[LOADS], vw[LOADS];

#pragma unroll
		for (int i = 0; i < LOADS; i++) {
			uint32_t f = e + i * blockDim.x, jj = f / w;

			if (f < words) {
				const __nv_bfloat162 *kr, *vr;

				kr = (const __nv_bfloat162 *)(kc + off[jj]);
				vr = (const __nv_bfloat162 *)(vc + off[jj]);
				kw[i] = kr[f % w], vw[i] = vr[f % w];
			}
		}
#pragma unroll
		for (int i = 0; i < LOADS; i++) {
			uint32_t f = e + i * blockDim.x, jj = f / w;

			if (f < words) {
				ks[jj * (w + 1) + f % w] = kw[i];
				vs[jj * w + f % w] = vw[i];
			}
		}
	}
}

/* q (D) f32 in shared . k (D) bf16 pairs in shared, in f32. */
static __device__ float dot_qk(const float *q, const __nv_bfloat162 *k,
			       uint32_t w)
{
	float s = 0;

	for (uint32_t c = 0; c < w; c++) {
		float2 kf = __bfloat1622float2(k[c]);

		s += q[2 * c] * kf.x + q[2 * c + 1] * kf.y;
	}
	return s;
}

struct att_state {
	float m, l, acc[ATT_MAX_D / 32];
};

/* One tile of N positions for this warp's head: online softmax update. */
static __device__ void attend_tile(att_state &st, const float *qs,
				   const __nv_bfloat162 *ks,
				   const __nv_bfloat16 *vs, const att_dev &a,
				   uint32_t n)
{
	uint32_t lane = threadIdx.x % 32, w = a.d / 2;
	float sc =
	    lane < n ? dot_qk(qs, ks + lane * (w + 1), w) * a.scale : -INFINITY;
	float m_new = fmaxf(st.m, warp_max(sc));
	float p = lane < n ? expf(sc - m_new) : 0.0f;
	float corr = expf(st.m - m_new);

	st.l = st.l * corr + warp_sum(p);
#pragma unroll
	for (int i = 0; i < ATT_MAX_D / 32; i++)
		st.acc[i] *= corr;
	for (uint32_t jj = 0; jj < n; jj++) {
		float pj = __shfl_sync(0xffffffffu, p, jj);

#pragma unroll
		for (int i = 0; i < ATT_MAX_D / 32; i++) {
			uint32_t d = lane + 32 * i;

			if (d < a.d)
				st.acc[i] +=
				    pj * __bfloat162float(vs[jj * a.d + d]);
		}
	}
	st.m = m_new;
}

/* Writes the warp's result: the output row (one split) or its partial. */
static __device__ void attend_store(const att_state &st, __nv_bfloat16 *out,
				    float *scratch, const att_dev &a,
				    uint32_t row, uint32_t h, uint32_t split)
{
	uint32_t lane = threadIdx.x % 32;
	size_t o = ((size_t)row * a.hq + h) * a.d;
	float *part =
	    scratch +
	    (((size_t)row * a.hq + h) * a.n_splits + split) * (a.d + 2);

#pragma unroll
	for (int i = 0; i < ATT_MAX_D / 32; i++) {
		uint32_t d = lane + 32 * i;

		if (d >= a.d)
			continue;
		if (a.n_splits == 1)
			out[o + d] = __float2bfloat16_rn(st.acc[i] / st.l);
		else
			part[d] = st.acc[i];
	}
	if (a.n_splits > 1 && lane == 0)
		part[a.d] = st.m, part[a.d + 1] = st.l;
}

/* Head H of ROW from the partials of every split, by the calling warp:
 * out (T,Hq,D) bf16. The partials were written by other blocks: read
 * around L1 (__ldcg). */
static __device__ void merge_head(__nv_bfloat16 *out, const float *scratch,
				  const att_dev &a, uint32_t row, uint32_t h)
{
	size_t rh = (size_t)row * a.hq + h;
	const float *part = scratch + rh * a.n_splits * (a.d + 2);
	float m = -INFINITY, l = 0;

	for (uint32_t s = 0; s < a.n_splits; s++)
		m = fmaxf(m, __ldcg(part + s * (a.d + 2) + a.d));
	for (uint32_t s = 0; s < a.n_splits; s++)
		l += __ldcg(part + s * (a.d + 2) + a.d + 1) *
		     expf(__ldcg(part + s * (a.d + 2) + a.d) - m);
	for (uint32_t d = threadIdx.x % 32; d < a.d; d += 32) {
		float acc = 0;

		for (uint32_t s = 0; s < a.n_splits; s++)
			acc += __ldcg(part + s * (a.d + 2) + d) *
			       expf(__ldcg(part + s * (a.d + 2) + a.d) - m);
		out[rh * a.d + d] = __float2bfloat16_rn(acc / l);
	}
}

/* After the block stored its partials: the block that finishes (row, kv
 * head) last, by its ticket, merges the group's heads (a warp a head) and
 * sets the ticket back to zero for the next launch. */
static __device__ void merge_if_last(__nv_bfloat16 *out, const float *scratch,
				     const att_dev &a, uint32_t row,
				     uint32_t kvh, uint32_t *last)
{
	uint32_t *ticket = &att_tickets[row * a.hkv + kvh];

	__threadfence(); /* the partials, before the ticket */
	__syncthreads();
	if (threadIdx.x == 0) {
		*last = atomicAdd(ticket, 1u) == a.n_splits - 1;
		if (*last)
			*ticket = 0;
	}
	__syncthreads();
	if (!*last)
		return;
	__threadfence(); /* the other blocks' partials, after the ticket */
	merge_head(out, scratch, a, row,
		   kvh * (a.hq / a.hkv) + threadIdx.x / 32);
}

/* out (T,Hq,D) bf16 or scratch partials; q (T,Hq,D) f32; k/v caches
 * (pages,Hkv,P,D) bf16. Block (row, kv head, split), one warp per query
 * head of the group. Shared: q (G,D) f32, K tile, V tile. */
template <int LOADS, int MAX_THREADS>
static __global__ void __launch_bounds__(MAX_THREADS)
    attend(__nv_bfloat16 *out, float *scratch, const float *q,
	   const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, att_dev a)
{
	extern __shared__ __align__(16) float smem[];
	uint32_t row = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
	uint32_t g = a.hq / a.hkv, warp = threadIdx.x / 32, w = a.d / 2;
	uint32_t s, pos, chunk, j0, j1;
	uint64_t *off = (uint64_t *)smem;
	float *qs = (float *)(off + ATT_TILE);
	__nv_bfloat162 *ks = (__nv_bfloat162 *)(qs + g * a.d);
	__nv_bfloat162 *vs = ks + ATT_TILE * (w + 1);
	uint32_t *last = (uint32_t *)(vs + ATT_TILE * w);
	att_state st = {-INFINITY, 0.0f, {0}};

	o1_pdl_wait();
	o1_pdl_trigger();
	s = attn_seq_of_row(a.q_off, a.n_seqs, row);
	pos = a.start[s] + row - a.q_off[s];
	chunk = seq_chunk(a, s);
	j0 = split * chunk, j1 = min(j0 + chunk, pos + 1);
	if (a.q_off[s + 1] - a.q_off[s] >= a.skip_new)
		return; /* the whole block: the tiled kernel's row */
	for (uint32_t i = threadIdx.x; i < g * a.d; i += blockDim.x)
		qs[i] = q[((size_t)row * a.hq + kvh * g) * a.d + i];
	for (uint32_t t0 = j0; t0 < j1; t0 += ATT_TILE) {
		uint32_t n = min(ATT_TILE, j1 - t0);

		__syncthreads();
		tile_rows(off, a.tables + (size_t)s * a.max_blocks, a, kvh, t0,
			  n);
		__syncthreads();
		load_tile<LOADS>(ks, vs, kc, vc, off, a, n);
		__syncthreads();
		attend_tile(st, qs + warp * a.d, ks, (__nv_bfloat16 *)vs, a, n);
	}
	attend_store(st, out, scratch, a, row, kvh * g + warp, split);
	if (a.n_splits > 1)
		merge_if_last(out, scratch, a, row, kvh, last);
}

extern "C" uint64_t o1_attention_cuda_scratch_floats(uint32_t rows,
						     uint32_t n_heads,
						     uint32_t head_dim,
						     uint32_t splits)
{
	return splits > 1 ? (uint64_t)rows * n_heads * splits * (head_dim + 2)
			  : 0;
}

extern "C" int o1_attention_cuda_check_splits(const char *kernel,
					      uint32_t splits, uint32_t most,
					      uint32_t rows, uint32_t n_heads,
					      uint32_t head_dim,
					      const float *scratch,
					      uint64_t scratch_floats)
{
	uint64_t need =
	    o1_attention_cuda_scratch_floats(rows, n_heads, head_dim, splits);

	if (splits > most) {
		o1_err("%s: %u splits, over %u", kernel, splits, most);
		return -EINVAL;
	}
	if (splits > 1 &&
	    (!scratch || (uintptr_t)scratch % 8 || need > scratch_floats)) {
		o1_err("%s: %u splits of %u rows need %llu floats of 8-byte "
		       "aligned scratch; it has %llu at %p",
		       kernel, splits, rows, (unsigned long long)need,
		       (unsigned long long)scratch_floats,
		       (const void *)scratch);
		return -EINVAL;
	}
	return 0;
}

static int check_attention(const struct o1_attn_dims *d,
			   const struct o1_attn_batch *b, uint32_t max_len)
{
	if (!d->n_heads || !d->n_kv_heads || d->n_heads % d->n_kv_heads ||
	    d->n_heads / d->n_kv_heads > 32 || !d->head_dim ||
	    d->head_dim % 2 || d->head_dim > ATT_MAX_D || !d->page_tokens ||
	    d->page_stride % 2 ||
	    d->page_stride <
		(uint64_t)d->n_kv_heads * d->page_tokens * d->head_dim ||
	    !b->n_seqs || !b->q_offsets || !b->start_pos || !b->block_tables ||
	    !max_len || (uint64_t)b->max_blocks * d->page_tokens < max_len) {
		o1_err("attention: bad shape: heads %u/%u of %u, page %u "
		       "tokens stride %llu, %u seqs, %u blocks, max_len %u",
		       d->n_heads, d->n_kv_heads, d->head_dim, d->page_tokens,
		       (unsigned long long)d->page_stride, b->n_seqs,
		       b->max_blocks, max_len);
		return -EINVAL;
	}
	return 0;
}

/* Splits along the sequence: enough blocks to fill the GPU when there are
 * few (row, kv head) pairs (decode), at least one tile each, within
 * scratch. */
static uint32_t pick_splits(uint32_t rows, uint32_t hkv, uint32_t hq,
			    uint32_t d, uint32_t max_len,
			    uint64_t scratch_floats)
{
	uint64_t pairs = (uint64_t)rows * hkv;
	uint32_t tiles = (max_len + ATT_TILE - 1) / ATT_TILE;
	uint32_t s = pairs >= ATT_BLOCKS
			 ? 1
			 : (uint32_t)((ATT_BLOCKS + pairs - 1) / pairs);

	s = s > tiles ? tiles : s;
	s = s > ATT_MAX_SPLITS ? ATT_MAX_SPLITS : s;
	while (s > 1 && o1_attention_cuda_scratch_floats(rows, hq, d, s) >
			    scratch_floats)
		s--;
	return s ? s : 1;
}

static int launch(__nv_bfloat16 *out, const float *q, const __nv_bfloat16 *kc,
		  const __nv_bfloat16 *vc, const att_dev &a, uint32_t rows,
		  float *scratch, bool pdl, cudaStream_t stream)
{
	uint32_t g = a.hq / a.hkv;
	size_t smem = ATT_TILE * sizeof(uint64_t) + g * a.d * sizeof(float) +
		      ATT_TILE * (a.d + 2 + a.d) * sizeof(__nv_bfloat16) +
		      sizeof(uint32_t);
	void (*kernel)(__nv_bfloat16 *, float *, const float *,
		       const __nv_bfloat16 *, const __nv_bfloat16 *, att_dev) =
	    g * 32 > ATT_WIDE_THREADS
		? attend<ATT_LOADS_WIDE, ATT_MAX_THREADS>
		: attend<ATT_LOADS, ATT_WIDE_THREADS>;
	int err = 0;

	if (smem > 48 * 1024)
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
		    (int)smem));
	if (err)
		return err;
	return O1_CUDA_LAUNCH("attention", kernel,
			      dim3(rows, a.hkv, a.n_splits), dim3(g * 32), smem,
			      stream, pdl, out, scratch, q, kc, vc, a);
}

/* The row kernel for the rows of sequences with fewer than SKIP_NEW new
 * tokens (UINT32_MAX: every row). */
static int attention_rows(uint16_t *out, const float *q, const uint16_t *kc,
			  const uint16_t *vc, const struct o1_attn_dims *d,
			  const struct o1_attn_batch *b, uint32_t n_rows,
			  uint32_t max_len, float *scratch,
			  uint64_t scratch_floats, uint32_t skip_new,
			  const struct o1_attn_decode_tune *tune,
			  struct o1_attn_out_q *out_q, bool legacy, bool pdl,
			  cudaStream_t stream)
{
	att_dev a = {b->q_offsets,   b->start_pos,  b->block_tables,
		     d->page_stride, d->scale,	    d->n_heads,
		     d->n_kv_heads,  d->head_dim,   d->page_tokens,
		     b->n_seqs,	     b->max_blocks, 1,
		     skip_new};
	int err = check_attention(d, b, max_len);

	if (!err && (!out || !q || !kc || !vc)) {
		o1_err("attention: NULL operand");
		err = -EINVAL;
	}
	if (err || !n_rows)
		return err;
	if (!legacy && o1_attention_decode_fits(d, out, q, kc, vc))
		return o1_attention_decode_cuda(
		    out, q, kc, vc, d, b, n_rows, max_len, scratch,
		    scratch_floats, skip_new, tune, out_q, pdl, stream);
	a.n_splits = pick_splits(n_rows, a.hkv, a.hq, a.d, max_len,
				 scratch ? scratch_floats : 0);
	return launch((__nv_bfloat16 *)out, q, (const __nv_bfloat16 *)kc,
		      (const __nv_bfloat16 *)vc, a, n_rows, scratch, pdl,
		      stream);
}

/* The tiled kernel's share of a batch: sequences with at least
 * O1_ATTN_TILED_MIN_NEW new tokens when the shape allows it, else none
 * (UINT32_MAX). Some sequence can reach the threshold only if the rows
 * beyond one per sequence add up to it: a decode batch (one row per
 * sequence) never does, so it launches exactly the row kernel. */
static uint32_t tiled_share(const struct o1_attn_dims *d,
			    const struct o1_attn_batch *b, uint32_t n_rows,
			    const uint16_t *out, const float *q,
			    const uint16_t *kc, const uint16_t *vc)
{
	if (n_rows < b->n_seqs ||
	    n_rows - b->n_seqs + 1 < O1_ATTN_TILED_MIN_NEW ||
	    !o1_attention_tiled_fits(d, out, q, kc, vc))
		return UINT32_MAX;
	return O1_ATTN_TILED_MIN_NEW;
}

extern "C" int
o1_attention_cuda(uint16_t *out, const float *q, const uint16_t *k_cache,
		  const uint16_t *v_cache, const struct o1_attn_dims *d,
		  const struct o1_attn_batch *b, uint32_t n_rows,
		  uint32_t max_len, float *scratch, uint64_t scratch_floats,
		  const struct o1_attn_decode_tune *tune,
		  struct o1_attn_out_q *out_q, bool pdl, cudaStream_t stream)
{
	uint32_t tiled = tiled_share(d, b, n_rows, out, q, k_cache, v_cache);
	int err;

	if (out_q)
		out_q->written = false;

	/* A lone sequence the tiled kernel takes leaves the row kernel
	 * nothing: skip its launch of empty blocks. */
	if (tiled != UINT32_MAX && b->n_seqs == 1)
		err = check_attention(d, b, max_len);
	else
		err = attention_rows(out, q, k_cache, v_cache, d, b, n_rows,
				     max_len, scratch, scratch_floats, tiled,
				     tune, tiled == UINT32_MAX ? out_q : NULL,
				     false, pdl, stream);
	if (err || tiled == UINT32_MAX || !n_rows)
		return err;
	return o1_attention_tiled_cuda(out, q, k_cache, v_cache, d, b, n_rows,
				       tiled, max_len, 0, scratch,
				       scratch ? scratch_floats : 0, stream);
}

extern "C" int
o1_attention_rows_cuda(uint16_t *out, const float *q, const uint16_t *k_cache,
		       const uint16_t *v_cache, const struct o1_attn_dims *d,
		       const struct o1_attn_batch *b, uint32_t n_rows,
		       uint32_t max_len, float *scratch,
		       uint64_t scratch_floats, bool pdl, cudaStream_t stream)
{
	return attention_rows(out, q, k_cache, v_cache, d, b, n_rows, max_len,
			      scratch, scratch_floats, UINT32_MAX, NULL, NULL,
			      false, pdl, stream);
}

extern "C" int o1_attention_rows_legacy_cuda(
    uint16_t *out, const float *q, const uint16_t *k_cache,
    const uint16_t *v_cache, const struct o1_attn_dims *d,
    const struct o1_attn_batch *b, uint32_t n_rows, uint32_t max_len,
    float *scratch, uint64_t scratch_floats, bool pdl, cudaStream_t stream)
{
	return attention_rows(out, q, k_cache, v_cache, d, b, n_rows, max_len,
			      scratch, scratch_floats, UINT32_MAX, NULL, NULL,
			      true, pdl, stream);
}

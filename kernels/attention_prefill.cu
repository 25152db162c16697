/* Tiled causal prefill attention on tensor cores: the rows of the
 * sequences that bring many new tokens (a prompt chunk), with the contract
 * of attention.h up to the rounding stated below. attention.cu's
 * o1_attention_cuda sends them here and keeps the other rows (decode).
 *
 * Grid: one block per (tile, kv head), 4 warps. A tile is BM = 64 (row,
 * query head) pairs of ONE sequence: the G = Hq/Hkv heads of the kv
 * head's group side by side, row-major (attention_tiles.h numbers the
 * tiles of a batch), 16 pairs per warp. The block walks positions 0 .. its
 * last row's position in tiles of BN = 64; each K/V tile is copied once
 * from the pages (through the block table, cp.async, double-buffered:
 * tile j + 1 loads while tile j is computed) into shared memory for all 64
 * pairs. S = Q K^T and O += P V run on bf16 mma.sync m16n8k16 with f32
 * accumulation; Q stays in registers as bf16 fragments for the whole walk;
 * the softmax is online in f32 per pair (running max and sum, base 2).
 * Tiles entirely above the diagonal are never loaded (the walk stops at
 * the block's last row); tiles that cross it mask the positions past each
 * pair's own row (causal). Blocks start in reverse order: the last tiles
 * of a sequence, which walk the most positions, are scheduled first.
 *
 * Rounding against attention.h (f32 arithmetic over the bf16 K/V): q is
 * rounded to bf16 for Q K^T (round to nearest even, relative error at most
 * u = 2^-8 per element), and each weight e^(s - m) is rounded to bf16 once
 * and used for both P V and the sum Z (so the weights still sum to 1);
 * products accumulate in f32 in the tensor cores' order. A score then
 * moves by at most u scale sum_d |q_d k_d|, and the weights' rounding
 * moves an output by at most u sum_j w_j |v_j - out| / (1 - u) (w the
 * exact weights): an average of V, off by a few u of V's spread around
 * it, before the output's own bf16 rounding.
 * tests/kernels/test_attention_prefill_cuda.c turns this into a
 * per-element tolerance.
 *
 * Supported (o1_attention_tiled_fits): head_dim 64 or 128, page_stride a
 * multiple of 8 and the caches 16-byte aligned (rows are copied in 16-byte
 * pieces), q 8-byte and out 4-byte aligned. Needs sm_80 or newer.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>

#include "attention_tiles.h"
#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "common/log.h"
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "attention_prefill.cu needs sm_80 (bf16 mma.sync, cp.async)"
#endif

#define PF_BM	 64 /* (row, head) pairs per block */
#define PF_BN	 64 /* positions per K/V tile */
#define PF_WARPS 4  /* 16 pairs each */
#define PF_PAD	 8  /* bf16 after each shared row: no bank conflicts */

typedef __nv_bfloat16 bf16;

struct pf_dev {
	const uint32_t *q_off, *start, *tables;
	uint64_t page_stride;
	float scale_log2; /* scale * log2(e): scores in base 2 */
	uint32_t hq, hkv, g, p, n_seqs, max_blocks, min_new;
};

/* Shared memory of one block: K tiles 0 and 1, then V tiles 0 and 1, each
 * BN rows of D + PAD bf16 (the padding keeps rows 16-byte aligned and
 * shifts each row by 4 banks). */
template <int D> struct pf_smem {
	static constexpr int ld = D + PF_PAD;
	static constexpr int tile = PF_BN * ld;
	static constexpr size_t bytes = 4 * (size_t)tile * sizeof(bf16);
};

static __device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
	asm volatile(
	    "cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)),
	    "l"(src)
	    : "memory");
}

static __device__ __forceinline__ void cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most one committed group is still in flight. */
static __device__ __forceinline__ void cp_async_wait1(void)
{
	asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

/* Four 8x8 bf16 matrices, transposed: lanes 8i..8i+7 give the row
 * addresses of matrix i; register i gets matrix i's elements (2 (lane % 4)
 * and + 1, lane / 4), i.e. an mma B fragment of a row-major K x N block. */
static __device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4],
						     const bf16 *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
		     "{%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(smem_addr(p))
		     : "memory");
}

/* c (16x8 f32) += a (16x16 bf16, row) . b (16x8 bf16, col). */
static __device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4],
						uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
		     "{%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
		       "r"(b1));
}

/* bf16(lo) in the low half, bf16(hi) in the high half (round to nearest
 * even): the lower column of a fragment pair sits in the low half. */
static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
	uint32_t u;

	memcpy(&u, &v, sizeof(u));
	return u;
}

static __device__ __forceinline__ float quad_max(float v)
{
	v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
	return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

static __device__ __forceinline__ float quad_sum(float v)
{
	v += __shfl_xor_sync(0xffffffffu, v, 1);
	return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* Copies positions [T0, T0 + BN) of kv head KVH into ks and vs (BN rows of
 * ld bf16) through the block table. Rows at or past END (beyond the
 * block's causal reach, possibly past the sequence's pages) are zeroed
 * instead: their weight is 0, and 0 x garbage could be NaN. */
template <int D>
static __device__ void pf_load(bf16 *ks, bf16 *vs, const bf16 *kc,
			       const bf16 *vc, const uint32_t *table,
			       const pf_dev &a, uint32_t kvh, uint32_t t0,
			       uint32_t end)
{
	constexpr int pieces = D / 8, ld = pf_smem<D>::ld;

	for (int e = threadIdx.x; e < PF_BN * pieces; e += PF_WARPS * 32) {
		int r = e / pieces, c = e % pieces;
		uint32_t pos = t0 + r;
		bf16 *kd = ks + r * ld + c * 8, *vd = vs + r * ld + c * 8;

		if (pos < end) {
			size_t src = table[pos / a.p] * a.page_stride +
				     ((size_t)kvh * a.p + pos % a.p) * D +
				     c * 8;

			cp_async16(kd, kc + src);
			cp_async16(vd, vc + src);
		} else {
			*(uint4 *)kd = make_uint4(0, 0, 0, 0);
			*(uint4 *)vd = make_uint4(0, 0, 0, 0);
		}
	}
}

/* The warp's Q as bf16 A fragments, one set of 4 registers per 16 dims:
 * this lane holds pair rows QA (lane / 4) and QB (lane / 4 + 8), columns
 * 2 (lane % 4) + {0, 1} and the same + 8. */
template <int D>
static __device__ void pf_load_q(uint32_t qf[D / 16][4], const float *qa,
				 const float *qb)
{
	int c = 2 * (threadIdx.x % 4);

#pragma unroll
	for (int k = 0; k < D / 16; k++) {
		float2 a0 = *(const float2 *)(qa + 16 * k + c);
		float2 b0 = *(const float2 *)(qb + 16 * k + c);
		float2 a1 = *(const float2 *)(qa + 16 * k + 8 + c);
		float2 b1 = *(const float2 *)(qb + 16 * k + 8 + c);

		qf[k][0] = pack_bf16(a0.x, a0.y);
		qf[k][1] = pack_bf16(b0.x, b0.y);
		qf[k][2] = pack_bf16(a1.x, a1.y);
		qf[k][3] = pack_bf16(b1.x, b1.y);
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

/* S (16 x BN) = Q K^T for the warp, scaled to base 2; with MASK,
 * positions past a row's own get -inf. Returns the rows' tile maxima. */
template <int D>
static __device__ void
pf_scores(float sc[PF_BN / 8][4], const uint32_t qf[D / 16][4], const bf16 *ks,
	  const pf_state<D> &st, const pf_dev &a, uint32_t t0, bool mask,
	  float *max_a, float *max_b)
{
	int lane = threadIdx.x % 32, grp = lane / 4, tig = lane % 4;
	constexpr int ld = pf_smem<D>::ld;
	float xa = -INFINITY, xb = -INFINITY;

#pragma unroll
	for (int n = 0; n < PF_BN / 8; n++) {
		const bf16 *kr = ks + (n * 8 + grp) * ld + 2 * tig;

		sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
		for (int k = 0; k < D / 16; k++)
			mma_bf16(sc[n], qf[k], *(const uint32_t *)(kr + 16 * k),
				 *(const uint32_t *)(kr + 16 * k + 8));
#pragma unroll
		for (int e = 0; e < 4; e++) {
			uint32_t pos = t0 + n * 8 + 2 * tig + (e & 1);
			float x = sc[n][e] * a.scale_log2;

			if (mask && pos > (e < 2 ? st.pos_a : st.pos_b))
				x = -INFINITY;
			sc[n][e] = x;
		}
		xa = fmaxf(xa, fmaxf(sc[n][0], sc[n][1]));
		xb = fmaxf(xb, fmaxf(sc[n][2], sc[n][3]));
	}
	*max_a = quad_max(xa), *max_b = quad_max(xb);
}

/* One K/V tile for the warp: scores, online softmax rescale, O += P V. The
 * first tile holds position 0, which no row masks, so the running maxima
 * are finite from then on (no -inf - -inf). */
template <int D>
static __device__ void pf_tile(pf_state<D> &st, const uint32_t qf[D / 16][4],
			       const bf16 *ks, const bf16 *vs, const pf_dev &a,
			       uint32_t t0, bool mask)
{
	constexpr int ld = pf_smem<D>::ld;
	int lane = threadIdx.x % 32, mi = lane / 8, r = lane % 8;
	float sc[PF_BN / 8][4], xa, xb;

	pf_scores<D>(sc, qf, ks, st, a, t0, mask, &xa, &xb);
	xa = fmaxf(st.ma, xa), xb = fmaxf(st.mb, xb);
	{
		float ca = exp2f(st.ma - xa), cb = exp2f(st.mb - xb);

		st.la *= ca, st.lb *= cb, st.ma = xa, st.mb = xb;
#pragma unroll
		for (int d = 0; d < D / 8; d++) {
			st.o[d][0] *= ca, st.o[d][1] *= ca;
			st.o[d][2] *= cb, st.o[d][3] *= cb;
		}
	}
#pragma unroll
	for (int kk = 0; kk < PF_BN / 16; kk++) {
		float p[8];
		uint32_t pa[4];

#pragma unroll
		for (int e = 0; e < 8; e++) {
			float x = sc[2 * kk + e / 4][e % 4];

			p[e] = __bfloat162float(__float2bfloat16_rn(
			    exp2f(x - (e % 4 < 2 ? xa : xb))));
		}
		st.la += p[0] + p[1] + p[4] + p[5];
		st.lb += p[2] + p[3] + p[6] + p[7];
		pa[0] = pack_bf16(p[0], p[1]), pa[1] = pack_bf16(p[2], p[3]);
		pa[2] = pack_bf16(p[4], p[5]), pa[3] = pack_bf16(p[6], p[7]);
#pragma unroll
		for (int dp = 0; dp < D / 16; dp++) {
			uint32_t vb[4];

			ldsm_x4_trans(vb,
				      vs + (16 * kk + (mi & 1) * 8 + r) * ld +
					  16 * dp + (mi >> 1) * 8);
			mma_bf16(st.o[2 * dp], pa, vb[0], vb[1]);
			mma_bf16(st.o[2 * dp + 1], pa, vb[2], vb[3]);
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
	float ia = 1.0f / quad_sum(st.la), ib = 1.0f / quad_sum(st.lb);
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

/* What one block does (attention_tiles.h): sequence, first pair M0 and
 * last pair M_LAST of its tile; false when the block has no work (a gap
 * in the numbering, or a sequence below min_new). */
struct pf_work {
	uint32_t s, m0, m_last, kvh;
};

static __device__ bool pf_find(const pf_dev &a, pf_work &w)
{
	uint64_t b = (gridDim.x - 1 - blockIdx.x) / a.hkv, tile;
	uint32_t n_new, pairs;

	w.kvh = (gridDim.x - 1 - blockIdx.x) % a.hkv;
	w.s = o1_attn_tile_seq(a.q_off, a.n_seqs, a.g, PF_BM, b);
	n_new = a.q_off[w.s + 1] - a.q_off[w.s];
	pairs = n_new * a.g;
	tile = b - o1_attn_tile_base(a.q_off, w.s, a.g, PF_BM);
	if (n_new < a.min_new || tile * PF_BM >= pairs)
		return false;
	w.m0 = (uint32_t)tile * PF_BM;
	w.m_last = min(w.m0 + PF_BM, pairs) - 1;
	return true;
}

/* out (T,Hq,D) bf16; q (T,Hq,D) f32; k/v caches (pages,Hkv,P,D) bf16.
 * Block = one tile of (row, head) pairs for one kv head; shared memory as
 * pf_smem. */
template <int D>
static __global__ void __launch_bounds__(PF_WARPS * 32)
    attend_tiled(bf16 *out, const float *q, const bf16 *kc, const bf16 *vc,
		 pf_dev a)
{
	extern __shared__ __align__(16) unsigned char pf_raw[];
	bf16 *ks = (bf16 *)pf_raw, *vs = ks + 2 * pf_smem<D>::tile;
	int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	pf_work w;
	pf_state<D> st = {};
	uint32_t qf[D / 16][4], ma, mb, start, end, diag, row0, n_tiles;
	const uint32_t *table;

	if (!pf_find(a, w))
		return;
	ma = w.m0 + warp * 16 + lane / 4, mb = ma + 8;
	start = a.start[w.s], row0 = a.q_off[w.s];
	table = a.tables + (size_t)w.s * a.max_blocks;
	end = start + w.m_last / a.g + 1; /* positions [0, end) */
	diag = start + w.m0 / a.g;	  /* tiles past it need the mask */
	st.ma = st.mb = -INFINITY;
	st.pos_a = start + min(ma, w.m_last) / a.g;
	st.pos_b = start + min(mb, w.m_last) / a.g;
	pf_load_q<D>(qf,
		     q + (((size_t)row0 + min(ma, w.m_last) / a.g) * a.hq +
			  w.kvh * a.g + min(ma, w.m_last) % a.g) *
			     D,
		     q + (((size_t)row0 + min(mb, w.m_last) / a.g) * a.hq +
			  w.kvh * a.g + min(mb, w.m_last) % a.g) *
			     D);
	n_tiles = (end + PF_BN - 1) / PF_BN;
	pf_load<D>(ks, vs, kc, vc, table, a, w.kvh, 0, end);
	cp_async_commit();
	for (uint32_t j = 0; j < n_tiles; j++) {
		int cur = (j & 1) * pf_smem<D>::tile,
		    nxt = pf_smem<D>::tile - cur;

		if (j + 1 < n_tiles)
			pf_load<D>(ks + nxt, vs + nxt, kc, vc, table, a, w.kvh,
				   (j + 1) * PF_BN, end);
		cp_async_commit(); /* maybe empty: the wait stays uniform */
		cp_async_wait1();  /* tile j has landed */
		__syncthreads();
		pf_tile<D>(st, qf, ks + cur, vs + cur, a, j * PF_BN,
			   j * PF_BN + PF_BN - 1 > diag);
		__syncthreads(); /* before tile j + 2 overwrites it */
	}
	pf_store<D>(out, st, a, row0, w.kvh, min(ma, w.m_last),
		    min(mb, w.m_last), ma <= w.m_last, mb <= w.m_last);
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
	return (d->head_dim == 64 || d->head_dim == 128) && d->n_kv_heads &&
	       d->n_heads && d->n_heads % d->n_kv_heads == 0 &&
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
	    o1_attn_tile_grid(n_rows, b->n_seqs, g, PF_BM) * d->n_kv_heads >
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

template <int D>
static int launch_tiled(uint16_t *out, const float *q, const uint16_t *kc,
			const uint16_t *vc, const pf_dev &a, uint32_t n_rows,
			cudaStream_t stream)
{
	size_t smem = pf_smem<D>::bytes;
	uint64_t blocks =
	    o1_attn_tile_grid(n_rows, a.n_seqs, a.g, PF_BM) * a.hkv;
	int err = 0;

	if (smem > 48 * 1024)
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    attend_tiled<D>,
		    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	if (err)
		return err;
	attend_tiled<D><<<(unsigned)blocks, PF_WARPS * 32, smem, stream>>>(
	    (bf16 *)out, q, (const bf16 *)kc, (const bf16 *)vc, a);
	return O1_CUDA_LAUNCHED("attention tiled");
}

extern "C" int
o1_attention_tiled_cuda(uint16_t *out, const float *q, const uint16_t *k_cache,
			const uint16_t *v_cache, const struct o1_attn_dims *d,
			const struct o1_attn_batch *b, uint32_t n_rows,
			uint32_t min_new, cudaStream_t stream)
{
	pf_dev a;
	int err = check_tiled(d, b, n_rows, out, q, k_cache, v_cache);

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
		   min_new ? min_new : 1};
	if (d->head_dim == 64)
		return launch_tiled<64>(out, q, k_cache, v_cache, a, n_rows,
					stream);
	return launch_tiled<128>(out, q, k_cache, v_cache, a, n_rows, stream);
}

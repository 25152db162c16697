/* Matrix products for few rows (decode) on weights in a GGUF block format,
 * dequantized right after the load (gemv_q.h's CUDA twin):
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . dequant(w) (N,K)^T
 * for M <= O1_GEMV_MAX_ROWS.
 *
 * Arithmetic. A warp computes output column j (row j of w): lane l takes
 * the row's 32-element units (quant_dev.h) u = l, l + 32, l + 64, ...,
 * decodes each 8 elements at a time (quant_dev.h's qd_octet: quant.h's
 * values as an integer times the block's scale) and multiplies it into
 * every row of x (so w is read once for all M rows): each octet's 8
 * integer-by-bf16 products (exact) summed in order by fused multiply-adds,
 * octet sums paired and multiplied by their scale, the unit's two pairs
 * added (unit_dots), added to the lane's f32 accumulator in increasing u,
 * then a fixed warp tree sums the lanes.
 * Every y element has one operation order whatever M, N or the launch
 * (bitwise reproducible; a row's result does not depend on the other
 * rows), and differs from the CPU reference (matmul_q.h's 16-lane order)
 * only by f32 rounding: the order of the sums and where the block's
 * scale multiplies (gemv_q.h's bound holds for both).
 *
 * Schedule (the speed; the bf16 twin is gemv.cu). Blocks are not 16-byte
 * aligned (Q8_0 34 bytes, Q4_0 18, Q5_0 22, Q6_K 210), so the warp does
 * not read them unit by unit: a row is walked in batches of groups_of()
 * groups of 32 units, and the batch's bytes are read with 16-byte loads
 * of the aligned pieces covering them, piece c = lane + 32 i (coalesced, up to
 * pieces_of() per lane in flight), stored into the warp's slice of shared
 * memory, then each lane decodes its units from there. The grid is at
 * most GQ_BPS blocks per multiprocessor; each warp walks rows j, j +
 * warps in the grid, ..., and loads the next batch (of this row or the
 * next) into registers before it decodes the current one from shared
 * memory, so it always has loads in flight. Pieces at a batch's ends are
 * shared with the neighbouring batch, row or tensor (read twice, or read
 * and unused: an aligned 16-byte piece holding a byte of w lies in w's
 * allocation).
 *
 * LDY lets a launch fill columns [0, N) of a wider output: the fused QKV
 * and gate/up outputs of the CUDA backend, whose parts may be stored in
 * different block types (one launch per part).
 *
 * OUT_SWIGLU (o1_gemv_q_swiglu_cuda): a warp's work unit is output j of
 * F, the pair of rows j (gate) and F + j (up), walked one after the other
 * as above; lane 0 writes bf16(silu(gate) * up) as swiglu.cu computes it,
 * so the result is o1_gemv_q_cuda then o1_swiglu_cuda bit for bit,
 * without the f32 gate/up rows and the second kernel.
 *
 * OUT_ROPE (o1_gemv_q8_norm_rope_kv_cuda, a part of the fused QKV
 * matrix whose rows are whole heads): a warp's work unit is a pair of
 * rows that rope.cu's o1_rope_kv_write_cuda rotates together (rope_row);
 * lane i writes input row i's pair as that kernel writes it from the f32
 * QKV row (bias, rope_dev.h's rotation, q as f32, k and v as bf16 into
 * their KV page), so the result is o1_gemv_q8_norm_cuda then
 * o1_rope_kv_write_cuda bit for bit, without the f32 QKV rows and the
 * second kernel.
 *
 * The int8 path (DOT_I8, the backend's default) is gemv_q8.h's
 * arithmetic; its lanes take Q4_K's and Q6_K's units by pairs, the two
 * that share a run of quants (pairs_i8), the other types' as above. It
 * runs gemv_qp where its ring of batches fits in shared memory: the same
 * arithmetic and lane order (so the same bits), the bytes brought by
 * cp.async several batches ahead (see there); one input row's SwiGLU
 * product on Q4_K by qp_run2, a batch of both rows a step, and the
 * residual adds (O, down) on Q4_K and Q6_K the same way, outputs j and
 * j + N / 2 a step. A normalized input (IN_NORM: QKV, gate/up, the head)
 * is quantized as bf16(x nw) and each output multiplied by the row's
 * inverse RMS (GQ_NORM_FOLD: the norm folded past the product).
 *
 * PDL (cuda_launch.h): each warp loads its first batch, then every thread
 * waits for the previous kernel and lets the next one launch (no kernel
 * writes the weights). A gemv_qp launch may also prefetch the next
 * product's weights into L2 (o1_gemv_q_prefetch_next): each warp, its
 * rows done, asks for a chunk of them, so the kernel's tail (warps done,
 * DRAM idle) and the kernel between (attention after the QKV product)
 * bring bytes the next product then reads from L2. No bit changes.
 * Invariants: K a multiple of the type's block, x 16-byte aligned, w as
 * quant_dev.h's loads need, LDY >= N.
 */
#include <errno.h>
#include <stdint.h>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "q8_input_dev.h"
#include "quant_dev.h"
#include "rms_reduce.h"
#include "rope_dev.h"

extern "C" {
#include "common/log.h"
}

/* Warps per block: 8, or 16 for the A/B of one block a multiprocessor
 * (each block quantizes the whole input: half the blocks do, each thread
 * half the rounds). The same bits either way: a row's arithmetic is its
 * warp's, and the norm's order does not depend on the block's size
 * (rms_reduce.h). 16 measured +0.2% on llama3-8b Q4_K_M (H100, 42nd
 * session): within the spread. */
#ifndef GQ_WARPS
#define GQ_WARPS 8
#endif
#define GQ_THREADS (GQ_WARPS * 32)
/* Blocks per multiprocessor: at most 128 registers a thread (the launch
 * bounds), so 16 warps fit the register file. */
#define GQ_BPS (16 / GQ_WARPS)
static_assert(GQ_WARPS == 8 || GQ_WARPS == 16, "8 or 16 warps a block");

enum { OUT_STORE, OUT_SWIGLU, OUT_ADD, OUT_ROPE };
enum { DOT_F32, DOT_I8 };
/* DOT_I8's input: bf16 rows, or the RMSNorm of f32 rows (gathered
 * through a row list), normalized by each block as o1_rmsnorm_cuda
 * would (rms_reduce.h), then quantized. */
enum { IN_BF16, IN_NORM };

/* Shared memory a multiprocessor's blocks may take together: the H200's
 * 228 KB less a 1 KB reserve each of up to four blocks. */
#define GQ_SMEM_SM (224u << 10)
/* Shared memory a block may take (GQ_BPS blocks per multiprocessor).
 * DOT_I8 launches whose quantized input would not fit run DOT_F32
 * (gemv_q8_fits). */
#define GQ_SMEM_MAX (GQ_SMEM_SM / GQ_BPS)

struct gq_args {
	float *y;	    /* OUT_STORE (M, ldy), columns [0, n) written */
	__nv_bfloat16 *act; /* OUT_SWIGLU (M, n) */
	const uint16_t *x;  /* IN_BF16 (M, k) bf16 */
	const float *xf;    /* IN_NORM (., k) f32 rows */
	const uint32_t *rows; /* IN_NORM: input row i is xf row rows[i] */
	const float *nw;      /* IN_NORM (k): the norm's weight */
	float eps;	      /* IN_NORM */
	const uint8_t *w;   /* n rows of row_bytes; OUT_SWIGLU 2 n */
	uint64_t row_bytes; /* of w */
	uint32_t n, k, ldy;
	uint32_t units;	 /* k / 32 */
	uint32_t stride; /* warps in the grid */
	uint32_t pad;	 /* DOT_I8: units rounded up to 32 */
	rope_kv_epi r;	 /* OUT_ROPE */
	/* gemv_qp: regions to prefetch into L2 once the warps are done
	 * (o1_gemv_q_prefetch_next; bytes 0: none) */
	const uint8_t *pf[2];
	uint64_t pf_bytes[2];
	/* IN_BF16: x quantized already by the kernel that wrote it
	 * (q8_input_dev.h's layout in device memory; NULL: none), copied
	 * instead of quantized (xq_copy) */
	const uint32_t *xq;
};

/* Weight rows per output (a warp's work unit): SwiGLU's gate and up,
 * RoPE's pair. */
template <int OUT> static __host__ __device__ constexpr int rows_of()
{
	return OUT == OUT_SWIGLU || OUT == OUT_ROPE ? 2 : 1;
}

/* Global row (of the fused QKV matrix) R (0 or 1) of OUT_ROPE's unit U:
 * unit = (head, e), e < D/2 (heads counted from the launch's first row).
 * q and k heads pair (e, e + half) for e < half, then their unrotated
 * dims [2 half, D) two at a time; v heads pair (e, e + D/2). Every row
 * of the launch's heads is in exactly one pair. */
static __device__ __forceinline__ uint32_t rope_row(const rope_kv_epi &g,
						    uint32_t u, uint32_t r)
{
	uint32_t hd2 = g.d / 2, head = g.col0 / g.d + u / hd2, e = u % hd2;
	uint32_t base = head * g.d;

	if (head >= g.hq + g.hkv)
		return base + e + r * hd2;
	if (e < g.half)
		return base + e + r * g.half;
	return base + g.half + e + r * (hd2 - g.half);
}

/* Row (of w) R of output J: the only row, gate (0) or up (1) of SwiGLU,
 * or a RoPE pair's. */
template <int OUT>
static __device__ __forceinline__ uint32_t wrow(const gq_args &a, uint32_t j,
						uint32_t r)
{
	if constexpr (OUT == OUT_ROPE)
		return rope_row(a.r, j, r) - a.r.col0;
	else
		return j + r * a.n;
}

struct __align__(16) gq_piece
{
	uint32_t v[4]; /* 16 bytes */
};

/* Bytes of 32 units of TYPE (in a row, so whole super-blocks for the K
 * types). */
template <int TYPE> static __host__ __device__ constexpr uint32_t group_bytes()
{
	static_assert(qd_known<TYPE>(), "no decode for this block type");
	return TYPE == O1_QUANT_Q8_0   ? 32 * O1_QUANT_Q8_0_BYTES
	       : TYPE == O1_QUANT_Q4_0 ? 32 * O1_QUANT_Q4_0_BYTES
	       : TYPE == O1_QUANT_Q5_0 ? 32 * O1_QUANT_Q5_0_BYTES
	       : TYPE == O1_QUANT_Q4_K ? 4 * O1_QUANT_Q4_K_BYTES
				       : 4 * O1_QUANT_Q6_K_BYTES;
}

/* Groups of 32 units per batch: about 4 KB, 8-9 pieces per lane. */
template <int TYPE> static __host__ __device__ constexpr uint32_t groups_of()
{
	return TYPE == O1_QUANT_Q8_0	 ? 4
	       : TYPE == O1_QUANT_Q6_K ? 5
	       : TYPE == O1_QUANT_Q5_0 ? 6
				       : 7;
}

/* 16-byte pieces per lane that cover a batch at any alignment. */
template <int TYPE> static __host__ __device__ constexpr int pieces_of()
{
	return (int)((groups_of<TYPE>() * group_bytes<TYPE>() / 16 + 1 + 31) /
		     32);
}

/* A weight piece: read once, so not kept in L1. Volatile, so the
 * compiler keeps the loads where they are written: issued before the
 * warp decodes the previous batch, not sunk to their use. */
static __device__ gq_piece ldw(const gq_piece *p)
{
#ifdef __CUDA_ARCH__
	gq_piece v;

	asm volatile(
	    "ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
	    : "=r"(v.v[0]), "=r"(v.v[1]), "=r"(v.v[2]), "=r"(v.v[3])
	    : "l"(p));
	return v;
#else
	return *p;
#endif
}

/* The block's dynamic shared memory: GQ_WARPS slices of 512 P bytes. */
static __device__ gq_piece *dyn_smem(void)
{
	extern __shared__ __align__(16) unsigned char smem[];
	return (gq_piece *)smem;
}

/* Unit U of the row at ROW (shared memory) . the M x rows at X (column
 * 32 U), into D[i]: each octet's 8 products v x summed in order with
 * fused multiply-adds (exact products but for Q4_K: the rounding of one
 * sum), the octets' sums paired, each pair times its scale (one scale
 * per 16 elements at most: qd_scale), the pairs added. */
template <int M, int TYPE>
static __device__ __forceinline__ void unit_dots(float (&d)[M],
						 const uint8_t *row,
						 const uint16_t *x, uint32_t k,
						 uint32_t u)
{
	qd_unit_head h = qd_head<TYPE>(row, u);
	float o[M][4];

#pragma unroll
	for (int q = 0; q < 4; q++) {
		float v[8];

		qd_octet<TYPE>(h, q, v);
#pragma unroll
		for (int i = 0; i < M; i++) {
			gq_piece xp = *(const gq_piece *)(x + (size_t)i * k +
							  32 * u + 8 * q);
			float s = __fmul_rn(v[0], qd_bf16(xp.v[0] & 0xffff));

			s = __fmaf_rn(v[1], qd_bf16(xp.v[0] >> 16), s);
#pragma unroll
			for (int e = 1; e < 4; e++) {
				s = __fmaf_rn(v[2 * e],
					      qd_bf16(xp.v[e] & 0xffff), s);
				s = __fmaf_rn(v[2 * e + 1],
					      qd_bf16(xp.v[e] >> 16), s);
			}
			o[i][q] = s;
		}
	}
#pragma unroll
	for (int i = 0; i < M; i++)
		d[i] = __fmul_rn(o[i][0] + o[i][1], qd_scale<TYPE>(h, 0)) +
		       __fmul_rn(o[i][2] + o[i][3], qd_scale<TYPE>(h, 2));
}

/* DOT_I8's input in shared memory (gemv_q8.h's quantization of x, laid
 * out as q8_input_dev.h says): unit u of row i is 32 int8 in two pieces,
 * 32 pieces apart, so that the lanes of a warp (consecutive units) read
 * consecutive pieces; then each unit's scale d and d times the sum of
 * its quants. */
struct gq_xq {
	const gq_piece *q; /* (M, pad / 32, 2, 32) pieces */
	const float2 *ds;  /* (M, units) */
};

static __device__ __forceinline__ size_t xq_at(const gq_args &a, uint32_t i,
					       uint32_t u)
{
	return q8_piece_at(a.pad, i, u);
}

/* The raw input of a quarter unit (elements [8 Q, 8 Q + 8) of unit U):
 * 8 bf16 (IN_BF16), or 8 f32 and their 8 norm weights (IN_NORM). Loaded
 * apart from its use (qx_load, qx_widen) so that quantize_x can ask for
 * several rounds' inputs before it waits for the first. */
template <int IN> struct qx_raw {
	gq_piece p;
};
template <> struct qx_raw<IN_NORM> {
	float4 x[2], w[2];
};

template <int IN>
static __device__ __forceinline__ void qx_load(qx_raw<IN> &r, const gq_args &a,
					       const float *xr, uint32_t i,
					       uint32_t u, uint32_t q)
{
	if constexpr (IN == IN_NORM) {
		const float4 *xv = (const float4 *)(xr + 32 * u + 8 * q);
		const float4 *wv = (const float4 *)(a.nw + 32 * u + 8 * q);

		r.x[0] = xv[0], r.x[1] = xv[1], r.w[0] = wv[0], r.w[1] = wv[1];
	} else {
		r.p = ((const gq_piece *)(a.x + (size_t)i * a.k + 32 * u))[q];
	}
}

/* R widened into V (exact), or normalized by INV and rounded to bf16 as
 * o1_rmsnorm_cuda writes it (IN_NORM). */
template <int IN>
static __device__ __forceinline__ void qx_widen(const qx_raw<IN> &r, float inv,
						float (&v)[8])
{
	if constexpr (IN == IN_NORM) {
#pragma unroll
		for (int c = 0; c < 2; c++) {
			float4 x = r.x[c], w = r.w[c];

			v[4 * c] = __bfloat162float(rms_out(w.x, x.x, inv));
			v[4 * c + 1] = __bfloat162float(rms_out(w.y, x.y, inv));
			v[4 * c + 2] = __bfloat162float(rms_out(w.z, x.z, inv));
			v[4 * c + 3] = __bfloat162float(rms_out(w.w, x.w, inv));
		}
	} else {
#pragma unroll
		for (int e = 0; e < 4; e++) {
			v[2 * e] = qd_bf16(r.p.v[e] & 0xffff);
			v[2 * e + 1] = qd_bf16(r.p.v[e] >> 16);
		}
	}
}

/* S plus the squares of R's 8 x in order (IN_NORM: quantize_x's sum
 * where the norm is folded). */
template <int IN>
static __device__ __forceinline__ float qx_squares(const qx_raw<IN> &r, float s)
{
	static_assert(IN == IN_NORM, "a normalized input's x");
#pragma unroll
	for (int c = 0; c < 2; c++) {
		float4 x = r.x[c];

		s = __fmaf_rn(x.x, x.x, s);
		s = __fmaf_rn(x.y, x.y, s);
		s = __fmaf_rn(x.z, x.z, s);
		s = __fmaf_rn(x.w, x.w, s);
	}
	return s;
}

/* Rounds of quantize_x whose loads are issued together: a 14,336-wide
 * down product input waits for L2 twice, not seven times (more for the
 * 1-row launches, whose registers are free at that point). GQ_QX_CHUNK1:
 * a 1-row bf16 input's (8: llama3-8b's down input waits once; the same
 * bits, an A/B switch; 1.6% slower on the whole 8B, H100, 42nd
 * session). */
#ifndef GQ_QX_CHUNK1
#define GQ_QX_CHUNK1 4
#endif
template <int M, int IN> static __host__ __device__ constexpr int qx_chunk()
{
	return IN == IN_NORM ? (M == 1 ? 2 : 1)
			     : (M == 1	 ? GQ_QX_CHUNK1
				: M == 2 ? 2
					 : 1);
}

/* A unit quantized (q8_input_dev.h's q8_unit) into the pieces LO
 * (elements 0..15) and HI, its (d, sum) into DS: by the 4 lanes 4 g ..
 * 4 g + 3 of a warp, lane 4 g + Q holding elements [8 Q, 8 Q + 8) in V,
 * each lane storing its 8 quants, lane 4 g the (d, sum). Every lane of
 * the warp calls it (the exchanges are the warp's); ON: whether the
 * lane's unit exists (else it stores nothing). */
static __device__ void quantize_part(const float (&v)[8], uint32_t q, bool on,
				     gq_piece *lo, gq_piece *hi, float2 *ds)
{
	uint32_t w[2];
	float2 r = q8_unit<4>(v, w);

	if (!on)
		return;
	gq_piece *t = q < 2 ? lo : hi;

	t->v[2 * (q % 2)] = w[0], t->v[2 * (q % 2) + 1] = w[1];
	if (q == 0)
		*ds = r;
}

/* GQ_PROBE (0, the default: nothing changes): a timing probe of where a
 * one-row decode product's time goes inside the decode step's chain of
 * PDL launches (issue 18's small models: ~5.4 us a block product against
 * bench_launch's 1.9 us step). Its results are WRONG by design, so it is
 * built only as a bench_cuda_decode variant (session.sh's
 * s_object_variant), never into o1d. Bits: 1 the input's RMSNorm and
 * int8 quantization replaced by constants (every byte 1, scales 2^-10:
 * finite outputs); 2 no decoding or products (the weights still arrive,
 * sums 0); 4 nothing after the PDL wait but draining the ring's copies
 * (no outputs written: the chain's floor with these grids). 3 = 1 and
 * 2. 8 and 16: bit 1 for the normalized inputs (QKV, gate/up, the head)
 * alone, and for the bf16 inputs (O, down) alone. 32, with 1, 8 or 16:
 * those inputs copied from global memory instead (qp_input_copied), as
 * if the previous kernel had written them quantized: what inputs
 * quantized by their producer would leave to the consumer. 64: the
 * normalized inputs' sum of squares not taken (inv 1/64, quantize_x):
 * what the block's reduction before the scaling costs. */
#ifndef GQ_PROBE
#define GQ_PROBE 0
#endif

/* GQ_NORM_FOLD (1, the default; 0: an A/B switch): a normalized input's
 * RMSNorm scale taken out of the product. The row's scale is one number,
 * so W (x nw inv) = inv W (x nw): quantize_x quantizes bf16(x nw) with no
 * reduction before it, each thread summing the squares of the x it
 * quantizes as it goes (its elements in its order, then the warp's
 * butterfly, the warps' sums through the quantization's barrier:
 * norm_post), and the launch multiplies each output's sum by inv before
 * its epilogue (RoPE, SwiGLU, the store). Not the unfused composition's
 * bits: where inv is a power of two and the sum of squares exact it is
 * the same (scaling by 2^p commutes with every rounding), otherwise the
 * input is rounded to bf16 and to int8 before the scaling instead of
 * after, and the squares summed in another order (test_quant_cuda's
 * bound). +2.5% on the whole llama3-8b Q4_K_M (H100, 44th session),
 * against +4.0% with no sum at all (GQ_PROBE 64); a first version that
 * took rms_sums after the quantization (o1_rmsnorm_cuda's inv, x read
 * twice) +0.8%. */
#ifndef GQ_NORM_FOLD
#define GQ_NORM_FOLD 1
#endif
template <int IN> static __host__ __device__ constexpr bool norm_folded()
{
	return GQ_NORM_FOLD && IN == IN_NORM;
}

/* Every thread: the M input rows (IN) quantized into XQ and DS (a unit
 * by 4 lanes at a time, quantize_part), then the block's barrier.
 * IN_NORM: PART is the reduction's scratch (norm_folded: the warps' sums
 * of squares, row by row, for norm_post). */
template <int M, int IN>
static __device__ void quantize_x(const gq_args &a, gq_piece *xq, float2 *ds,
				  float (*part)[RMS_VWARPS])
{
	constexpr int C = qx_chunk<M, IN>();
	const float *xr[M] = {};
	float inv[M] = {}, sq[M] = {}; /* sq: norm_folded's sums */

	if constexpr (IN == IN_NORM) {
#pragma unroll
		for (int i = 0; i < M; i++)
			xr[i] = a.xf + (size_t)(a.rows ? a.rows[i] : i) * a.k;
		if constexpr (GQ_PROBE & 64) {
			for (int i = 0; i < M; i++)
				inv[i] = 1.0f / 64;
		} else if constexpr (norm_folded<IN>()) {
			for (int i = 0; i < M; i++)
				inv[i] = 1.0f; /* bf16(x nw) */
		} else {
			float ss[M];

			rms_sums<GQ_THREADS, M>(
			    ss, a.k, part,
			    [&](int i, uint32_t e) { return xr[i][e]; });
#pragma unroll
			for (int i = 0; i < M; i++)
				inv[i] = rms_inv(ss[i], a.k, a.eps);
		}
	}
#pragma unroll
	for (int i = 0; i < M; i++)
		/* every thread takes every round (the warp's exchanges); a
		 * chunk's loads first */
		for (uint32_t e0 = 0; e0 < 4 * a.units; e0 += C * GQ_THREADS) {
			qx_raw<IN> r[C];

#pragma unroll
			for (int c = 0; c < C; c++) {
				uint32_t e = e0 + c * GQ_THREADS + threadIdx.x;

				if (e / 4 < a.units)
					qx_load<IN>(r[c], a, xr[i], i, e / 4,
						    e % 4);
			}
#pragma unroll
			for (int c = 0; c < C; c++) {
				uint32_t e = e0 + c * GQ_THREADS + threadIdx.x;
				uint32_t u = e / 4, q = e % 4;
				bool on = u < a.units;
				gq_piece *p = xq + xq_at(a, i, on ? u : 0);
				float v[8] = {0};

				if (e0 + c * GQ_THREADS >= 4 * a.units)
					break; /* the same for the block */
				if (on)
					qx_widen<IN>(r[c], inv[i], v);
				if constexpr (norm_folded<IN>())
					if (on)
						sq[i] =
						    qx_squares<IN>(r[c], sq[i]);
				quantize_part(v, q, on, p, p + 32,
					      ds + (size_t)i * a.units + u);
			}
		}
	if constexpr (norm_folded<IN>()) {
#pragma unroll
		for (int i = 0; i < M; i++) {
			float w = rms_butterfly(sq[i]);

			if (threadIdx.x % 32 == 0)
				part[i][threadIdx.x / 32] = w;
		}
	}
	__syncthreads();
}

/* After quantize_x where the norm is folded (every thread): POST[i] =
 * row i's inv, the factor of its outputs, from the warps' sums in PART
 * (summed by one more butterfly). Else POST stays 1. */
template <int M, int IN>
static __device__ __forceinline__ void
norm_post(const gq_args &a, float (*part)[RMS_VWARPS], float (&post)[M])
{
	static_assert(GQ_WARPS <= RMS_VWARPS, "a warp's sum a column");
#pragma unroll
	for (int i = 0; i < M; i++)
		post[i] = 1.0f;
	if constexpr (norm_folded<IN>() && !(GQ_PROBE & 64)) {
		uint32_t lane = threadIdx.x % 32;

#pragma unroll
		for (int i = 0; i < M; i++)
			post[i] =
			    rms_inv(rms_butterfly(
					lane < GQ_WARPS ? part[i][lane] : 0.0f),
				    a.k, a.eps);
	}
}

/* A row's sum S times its row's POST factor where the input's norm is
 * folded (quantize_x), else S: one rounding, as the reference's. */
template <int IN>
static __device__ __forceinline__ float post_scaled(float s, float post)
{
	if constexpr (norm_folded<IN>())
		return __fmul_rn(s, post);
	else
		return s;
}

/* N 32-bit words from P (2-byte aligned, shared memory): the aligned
 * words around them, funnel-shifted (a unit of Q8_0, Q4_0, Q5_0 or Q6_K
 * starts at any even address; the last word is read only when it holds
 * some of the N words' bytes). */
template <int N>
static __device__ __forceinline__ void ld_words(const uint8_t *p,
						uint32_t (&w)[N])
{
	const uint32_t *b = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
	uint32_t sh = (uint32_t)((uintptr_t)p & 3) * 8, c = b[0];

#pragma unroll
	for (int i = 0; i < N; i++) {
		uint32_t nx = i + 1 < N || sh ? b[i + 1] : 0;

		w[i] = __funnelshift_r(c, nx, sh);
		c = nx;
	}
}

/* The unit's weights as 8 words of 4 int8, element order (gemv_q8.h):
 * Q8_0 its quants, Q4_0 nibbles (0..15), Q5_0 5-bit values (0..31; the
 * offsets are applied to the unit's sum). */
template <int TYPE>
static __device__ __forceinline__ void unit_ints(const qd_unit_head &h,
						 int32_t (&q)[8])
{
	static_assert(TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q4_0 ||
			      TYPE == O1_QUANT_Q5_0,
		      "K types go by pairs");
	if constexpr (TYPE == O1_QUANT_Q4_0) {
		uint32_t w[4];

		ld_words<4>(h.q, w);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			q[k] = (int32_t)(w[k] & 0x0f0f0f0fu);
			q[4 + k] = (int32_t)((w[k] >> 4) & 0x0f0f0f0fu);
		}
	} else if constexpr (TYPE == O1_QUANT_Q5_0) {
		uint32_t w[4];

		ld_words<4>(h.q, w);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			uint32_t f0 = (h.sel >> (4 * k)) & 0xf;
			uint32_t f1 = (h.sel >> (16 + 4 * k)) & 0xf;

			q[k] = (int32_t)((w[k] & 0x0f0f0f0fu) |
					 qd_spread_fifth(f0));
			q[4 + k] = (int32_t)(((w[k] >> 4) & 0x0f0f0f0fu) |
					     qd_spread_fifth(f1));
		}
	} else {
		uint32_t w[8];

		ld_words<8>(h.q, w);
#pragma unroll
		for (int k = 0; k < 8; k++)
			q[k] = (int32_t)w[k];
	}
}

/* The unit's product from its integer sums S0 (elements 0..15) and S1
 * and the input unit's (d, sum), in gemv_q8.h's f32 operations. */
template <int TYPE>
static __device__ __forceinline__ float
unit_scale(const qd_unit_head &h, float2 ds, int32_t s0, int32_t s1)
{
	if constexpr (TYPE == O1_QUANT_Q8_0)
		return __fmul_rn(__fmul_rn(h.d, ds.x), (float)(s0 + s1));
	else if constexpr (TYPE == O1_QUANT_Q4_0)
		return __fmul_rn(h.d,
				 __fsub_rn(__fmul_rn(ds.x, (float)(s0 + s1)),
					   __fmul_rn(8.0f, ds.y)));
	else if constexpr (TYPE == O1_QUANT_Q5_0)
		return __fmul_rn(h.d,
				 __fsub_rn(__fmul_rn(ds.x, (float)(s0 + s1)),
					   __fmul_rn(16.0f, ds.y)));
	else if constexpr (TYPE == O1_QUANT_Q4_K)
		return __fsub_rn(
		    __fmul_rn(__fmul_rn(h.d, ds.x), (float)(s0 + s1)),
		    __fmul_rn(h.m, ds.y));
	else if constexpr (TYPE == O1_QUANT_Q6_K)
		return __fmul_rn(ds.x, __fadd_rn(__fmul_rn(h.d, (float)s0),
						 __fmul_rn(h.d1, (float)s1)));
	else
		static_assert(qd_known<TYPE>() && !qd_known<TYPE>(),
			      "no product for this block type");
}

/* quant_dev.h's qd_f16 (of H's low 16 bits) for gemv_qp: the device's
 * conversion instruction (exact, as qd_f16; a NaN may come out with
 * another payload, but every use multiplies it, and a product of a NaN is
 * the canonical NaN either way); the emulation computes qd_f16's three
 * cases without branches. One instruction instead of about twenty. */
static __device__ __forceinline__ float qp_f16(uint32_t h)
{
#ifdef __CUDA_ARCH__
	float f;

	asm("{.reg .b16 t;\n\tcvt.u16.u32 t, %1;\n\tcvt.f32.f16 %0, t;}"
	    : "=f"(f)
	    : "r"(h));
	return f;
#else
	uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f,
		 mant = h & 0x3ff;
	float sub = __fmul_rn(sign ? -(float)mant : (float)mant,
			      5.9604644775390625e-8f);
	uint32_t big = exp == 0x1f ? sign | 0x7f800000u | (mant << 13)
				   : sign | ((exp + 112) << 23) | (mant << 13);

	return exp ? __uint_as_float(big) : sub;
#endif
}

/* A piece of the quantized input (shared memory) in one 16-byte load:
 * unit_sums reads every word, and through a reference the compiler
 * issued four 4-byte loads a piece. */
static __device__ __forceinline__ gq_piece ldx(const gq_piece *p)
{
	uint4 v = *(const uint4 *)p;

	return gq_piece{{v.x, v.y, v.z, v.w}};
}

/* Four products of A's unsigned bytes by B's signed bytes added to C
 * (dp4a.u32.s32; exact). */
static __device__ __forceinline__ int32_t dp4a_us(uint32_t a, uint32_t b,
						  int32_t c)
{
#ifdef __CUDA_ARCH__
	int32_t r;

	asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
	return r;
#else
	for (int i = 0; i < 4; i++)
		c += (int32_t)((a >> (8 * i)) & 0xff) *
		     (int32_t)(int8_t)(b >> (8 * i));
	return c;
#endif
}

/* A unit's integer sums: its 8 words of 4 int8 (element order) . the
 * input unit's two pieces, elements 0..15 into S0 and 16..31 into S1
 * (exact). HI: Q are Q4_K's raw quant words and the unit is their high
 * nibbles (a pair's second unit): the bytes masked in place (16 times
 * the nibble) and each sum shifted back once, one instruction a word
 * fewer than shifting every word (the sums are multiples of 16). */
template <bool HI = false>
static __device__ __forceinline__ void unit_sums(const int32_t *q,
						 const gq_piece &lo,
						 const gq_piece &hi,
						 int32_t &s0, int32_t &s1)
{
	s0 = 0, s1 = 0;
#pragma unroll
	for (int k = 0; k < 4; k++) {
		if constexpr (HI) {
			s0 = dp4a_us((uint32_t)q[k] & 0xf0f0f0f0u, lo.v[k], s0);
			s1 = dp4a_us((uint32_t)q[4 + k] & 0xf0f0f0f0u,
				     hi.v[k], s1);
		} else {
			s0 = __dp4a(q[k], (int32_t)lo.v[k], s0);
			s1 = __dp4a(q[4 + k], (int32_t)hi.v[k], s1);
		}
	}
	if constexpr (HI)
		s0 >>= 4, s1 >>= 4;
}

/* DOT_I8: unit U of the row at ROW (shared memory) . the M quantized
 * rows, into D[i] for the types decoded a unit at a time (Q8_0, Q4_0,
 * Q5_0; Q4_K and Q6_K go by pairs: pair_dots): the weights' integers
 * decoded once, 8 __dp4a per row (integer sums, exact), then unit_scale. V:
 * Q8_0's scale converted by the device's instruction (gemv_qp). */
template <int M, int TYPE, int V = 0>
static __device__ __forceinline__ void
unit_dots_i8(float (&d)[M], const uint8_t *row, const gq_xq &x,
	     const gq_args &a, uint32_t u)
{
	static_assert(TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q4_0 ||
			      TYPE == O1_QUANT_Q5_0,
		      "K types go by pairs");
	qd_unit_head h = {};
	int32_t q[8];

	if constexpr (V && TYPE == O1_QUANT_Q8_0) {
		h.q = row + (size_t)u * O1_QUANT_Q8_0_BYTES + 2;
		h.d = qp_f16(qd_u16(h.q - 2));
	} else {
		h = qd_head<TYPE>(row, u);
	}
	unit_ints<TYPE>(h, q);
#pragma unroll
	for (int i = 0; i < M; i++) {
		const gq_piece *xp = x.q + xq_at(a, i, u);
		int32_t s0, s1;

		unit_sums(q, ldx(xp), ldx(xp + 32), s0, s1);
		d[i] =
		    unit_scale<TYPE>(h, x.ds[(size_t)i * a.units + u], s0, s1);
	}
}

/* Q4_K's pair P of a row (units 2 P and 2 P + 1: a super-block's two
 * sub-blocks that share one 32-byte run of quants, the low nibbles unit
 * 2 P's, the high 2 P + 1's) decoded from ROW (shared memory, 4-byte
 * aligned; A16: 16-byte aligned, so 16-byte reads): the two units'
 * scales and mins (qd_head's), unit 2 P's quants and the raw words. */
struct q4k_pair {
	qd_unit_head h0, h1;
	int32_t lq[8];
	uint32_t w[8];
};

template <bool A16>
static __device__ __forceinline__ void q4k_pair_of(q4k_pair &o,
						   const uint8_t *row,
						   uint32_t p)
{
	const uint8_t *blk = row + (size_t)(p / 4) * O1_QUANT_Q4_K_BYTES;
	uint32_t t = p % 4, hd[4];

	if constexpr (A16) {
		gq_piece h = *(const gq_piece *)blk;
		gq_piece q0 = *(const gq_piece *)(blk + 16 + 32 * t);
		gq_piece q1 = *(const gq_piece *)(blk + 32 + 32 * t);

#pragma unroll
		for (int k = 0; k < 4; k++)
			hd[k] = h.v[k], o.w[k] = q0.v[k], o.w[4 + k] = q1.v[k];
	} else {
		const uint32_t *bw = (const uint32_t *)blk;
		const uint32_t *qw = (const uint32_t *)(blk + 16 + 32 * t);

#pragma unroll
		for (int k = 0; k < 4; k++)
			hd[k] = bw[k];
#pragma unroll
		for (int k = 0; k < 8; k++)
			o.w[k] = qw[k];
	}
	/* quant.h's 6-bit scale and min of sub-blocks 2 t and 2 t + 1 at
	 * once, from the 12 scale bytes read as three words (0..3 take the
	 * low 6 bits of bytes s and s + 4; 4..7 the nibbles of byte s + 4
	 * and the top 2 bits of s - 4 and s): the pair's two bytes lie side
	 * by side in each word (bytes 2 (t % 2) and up) */
	uint32_t sh = 16 * (t % 2), lo = hd[1] >> sh, mid = hd[2] >> sh,
		 hi = hd[3] >> sh;
	uint32_t sc = t < 2 ? lo & 0x3f3fu
			    : (hi & 0x0f0fu) | ((lo >> 2) & 0x3030u);
	uint32_t mn = t < 2 ? mid & 0x3f3fu
			    : ((hi >> 4) & 0x0f0fu) | ((mid >> 2) & 0x3030u);
	float d = qp_f16(hd[0] & 0xffff), dm = qp_f16(hd[0] >> 16);

	o.h0 = {}, o.h1 = {};
	o.h0.d = __fmul_rn(d, (float)(sc & 0xff));
	o.h1.d = __fmul_rn(d, (float)(sc >> 8));
	o.h0.m = __fmul_rn(dm, (float)(mn & 0xff));
	o.h1.m = __fmul_rn(dm, (float)(mn >> 8));
#pragma unroll
	for (int k = 0; k < 8; k++)
		o.lq[k] = (int32_t)(o.w[k] & 0x0f0f0f0fu);
}

/* The input's side of Q4_K's pair P for quantized row I: units 2 P and
 * 2 P + 1's pieces (XV: 2 P's low and high halves, then 2 P + 1's) and
 * their (d, sum)s in one float4. */
static __device__ __forceinline__ void q4k_pair_x(gq_piece (&xv)[4],
						  float4 &ds, const gq_xq &x,
						  const gq_args &a, uint32_t i,
						  uint32_t p)
{
	const gq_piece *xp = x.q + xq_at(a, i, 2 * p);

	ds = *(const float4 *)(x.ds + (size_t)i * a.units + 2 * p);
	xv[0] = ldx(xp), xv[1] = ldx(xp + 32), xv[2] = ldx(xp + 1);
	xv[3] = ldx(xp + 33);
}

/* A decoded pair Q . the input's side (XV, DS) into D0 (unit 2 P) and D1:
 * the same integers (exact), then unit_scale. */
static __device__ __forceinline__ void q4k_pair_dot(const q4k_pair &q,
						    const gq_piece (&xv)[4],
						    float4 ds, float &d0,
						    float &d1)
{
	int32_t s0, s1, r0, r1;

	unit_sums(q.lq, xv[0], xv[1], s0, s1);
	unit_sums<true>((const int32_t *)q.w, xv[2], xv[3], r0, r1);
	d0 = unit_scale<O1_QUANT_Q4_K>(q.h0, make_float2(ds.x, ds.y), s0, s1);
	d1 = unit_scale<O1_QUANT_Q4_K>(q.h1, make_float2(ds.z, ds.w), r0, r1);
}

/* Q4_K's pair P of the row at ROW . the M quantized rows, into D0[i] and
 * D1[i]: gemv_q8.h's values for the two units (the scales qd_head
 * decodes, the same integers, unit_scale), with the super-block's head
 * and the quants read once for both (the int8 path's lane order for
 * Q4_K, gemv_q8.h: lane l takes the pairs l, l + 32, ...). */
template <int M, bool A16>
static __device__ __forceinline__ void
pair_dots_q4k(float (&d0)[M], float (&d1)[M], const uint8_t *row,
	      const gq_xq &x, const gq_args &a, uint32_t p)
{
	q4k_pair q;

	q4k_pair_of<A16>(q, row, p);
#pragma unroll
	for (int i = 0; i < M; i++) {
		gq_piece xv[4];
		float4 ds;

		q4k_pair_x(xv, ds, x, a, i, p);
		q4k_pair_dot(q, xv, ds, d0[i], d1[i]);
	}
}

/* The input's side of pair P for the M rows (q4k_pair_x). */
template <int M> struct q4k_xin {
	gq_piece xv[M][4];
	float4 ds[M];
};

template <int M>
static __device__ __forceinline__ void q4k_xin_of(q4k_xin<M> &o,
						  const gq_xq &x,
						  const gq_args &a, uint32_t p)
{
#pragma unroll
	for (int i = 0; i < M; i++)
		q4k_pair_x(o.xv[i], o.ds[i], x, a, i, p);
}

/* pair_dots_q4k for the pair P of two rows at once (SwiGLU's gate at
 * ROW0 and up at ROW1, qp_run2), the input's side XI read once for both;
 * D[r][0][i], D[r][1][i] are row r's D0[i], D1[i], each the value
 * pair_dots_q4k gives. */
template <int M, bool A16>
static __device__ __forceinline__ void
pair_dots_q4k2(float (&d)[2][2][M], const uint8_t *row0, const uint8_t *row1,
	       const q4k_xin<M> &xi, uint32_t p)
{
	q4k_pair q0, q1;

	q4k_pair_of<A16>(q0, row0, p);
	q4k_pair_of<A16>(q1, row1, p);
#pragma unroll
	for (int i = 0; i < M; i++) {
		q4k_pair_dot(q0, xi.xv[i], xi.ds[i], d[0][0][i], d[0][1][i]);
		q4k_pair_dot(q1, xi.xv[i], xi.ds[i], d[1][0][i], d[1][1][i]);
	}
}

/* Q6_K's pair P of a row (units u = 8 b + 4 h + g and u + 2 of block b
 * = P / 4, half h = P / 2 % 2, g = P % 2: the two units that share a
 * 32-byte run of low bits, the low nibbles unit u's and the high u + 2's,
 * and a run of high bits) at ROW (shared memory, 2-byte aligned),
 * decoded: both units' scales (qd_head's) and q6 (0..63; the 32 is taken
 * off the sums in q6k_pair_dot), both runs read once for both. */
struct q6k_pair {
	qd_unit_head h0, h1;
	int32_t lq[8], hq[8];
};

static __device__ __forceinline__ uint32_t q6k_unit(uint32_t p)
{
	return p / 4 * 8 + 4 * (p / 2 % 2) + p % 2;
}

static __device__ __forceinline__ void q6k_pair_of(q6k_pair &o,
						   const uint8_t *row,
						   uint32_t p)
{
	const uint8_t *blk = row + (size_t)(p / 4) * O1_QUANT_Q6_K_BYTES;
	uint32_t h = p / 2 % 2, g = p % 2;
	uint32_t sa = qd_u16(blk + 192 + 8 * h + 2 * g),
		 sb = qd_u16(blk + 196 + 8 * h + 2 * g);
	float d = qp_f16(qd_u16(blk + 208));
	uint32_t ql[8], qh[8];

	o.h0 = {}, o.h1 = {};
	o.h0.d = __fmul_rn(d, (float)(int8_t)(sa & 0xff));
	o.h0.d1 = __fmul_rn(d, (float)(int8_t)(sa >> 8));
	o.h1.d = __fmul_rn(d, (float)(int8_t)(sb & 0xff));
	o.h1.d1 = __fmul_rn(d, (float)(int8_t)(sb >> 8));

	ld_words<8>(blk + 64 * h + 32 * g, ql);
	ld_words<8>(blk + 128 + 32 * h, qh);
#pragma unroll
	for (int k = 0; k < 8; k++) {
		/* unit u's high bits are bits 2 g, 2 g + 1 of each qh byte,
		 * u + 2's bits 2 g + 4, 2 g + 5 */
		o.lq[k] = (int32_t)((ql[k] & 0x0f0f0f0fu) |
				    ((qh[k] << (4 - 2 * g)) & 0x30303030u));
		o.hq[k] = (int32_t)(((ql[k] >> 4) & 0x0f0f0f0fu) |
				    ((qh[k] >> (2 * g)) & 0x30303030u));
	}
}

/* The input's side of Q6_K's pair P for quantized row I: units u and
 * u + 2's pieces (XV: u's low and high halves, then u + 2's) and their
 * (d, sum)s (DA, DB). */
static __device__ __forceinline__ void q6k_pair_x(gq_piece (&xv)[4],
						  float2 &da, float2 &db,
						  const gq_xq &x,
						  const gq_args &a, uint32_t i,
						  uint32_t p)
{
	uint32_t u = q6k_unit(p);
	const gq_piece *xp = x.q + xq_at(a, i, u);

	da = x.ds[(size_t)i * a.units + u];
	db = x.ds[(size_t)i * a.units + u + 2];
	xv[0] = ldx(xp), xv[1] = ldx(xp + 32), xv[2] = ldx(xp + 2);
	xv[3] = ldx(xp + 34);
}

/* A decoded pair Q . the input's side into D0 (unit u) and D1 (u + 2):
 * the exact integer sums, sum (q6 - 32) x = sum q6 x - 32 sum x, then
 * unit_scale. */
static __device__ __forceinline__ void q6k_pair_dot(const q6k_pair &q,
						    const gq_piece (&xv)[4],
						    float2 da, float2 db,
						    float &d0, float &d1)
{
	const int32_t k32[8] = {0x20202020, 0x20202020, 0x20202020,
				0x20202020, 0x20202020, 0x20202020,
				0x20202020, 0x20202020};
	int32_t s0, s1, r0, r1, c0, c1, e0, e1;

	unit_sums(q.lq, xv[0], xv[1], s0, s1);
	unit_sums(q.hq, xv[2], xv[3], r0, r1);
	unit_sums(k32, xv[0], xv[1], c0, c1);
	unit_sums(k32, xv[2], xv[3], e0, e1);
	d0 = unit_scale<O1_QUANT_Q6_K>(q.h0, da, s0 - c0, s1 - c1);
	d1 = unit_scale<O1_QUANT_Q6_K>(q.h1, db, r0 - e0, r1 - e1);
}

/* Q6_K's pair P of the row at ROW . the M quantized rows, into D0[i]
 * (unit u) and D1[i] (u + 2): gemv_q8.h's values for the two units. */
template <int M>
static __device__ __forceinline__ void
pair_dots_q6k(float (&d0)[M], float (&d1)[M], const uint8_t *row,
	      const gq_xq &x, const gq_args &a, uint32_t p)
{
	q6k_pair q;

	q6k_pair_of(q, row, p);
#pragma unroll
	for (int i = 0; i < M; i++) {
		gq_piece xv[4];
		float2 da, db;

		q6k_pair_x(xv, da, db, x, a, i, p);
		q6k_pair_dot(q, xv, da, db, d0[i], d1[i]);
	}
}

/* pair_dots_q6k for the pair P of two rows at once (qp_run2's OUT_ADD),
 * the input's side read once for both; D as pair_dots_q4k2's. */
template <int M>
static __device__ __forceinline__ void
pair_dots_q6k2(float (&d)[2][2][M], const uint8_t *row0, const uint8_t *row1,
	       const gq_xq &x, const gq_args &a, uint32_t p)
{
	q6k_pair q0, q1;

	q6k_pair_of(q0, row0, p);
	q6k_pair_of(q1, row1, p);
#pragma unroll
	for (int i = 0; i < M; i++) {
		gq_piece xv[4];
		float2 da, db;

		q6k_pair_x(xv, da, db, x, a, i, p);
		q6k_pair_dot(q0, xv, da, db, d[0][0][i], d[0][1][i]);
		q6k_pair_dot(q1, xv, da, db, d[1][0][i], d[1][1][i]);
	}
}

/* Q4_K's or Q6_K's pair P decoded (pair_dots_q4k, pair_dots_q6k). */
template <int M, int TYPE, bool A16>
static __device__ __forceinline__ void pair_dots(float (&d0)[M], float (&d1)[M],
						 const uint8_t *row,
						 const gq_xq &x,
						 const gq_args &a, uint32_t p)
{
	static_assert(TYPE == O1_QUANT_Q4_K || TYPE == O1_QUANT_Q6_K,
		      "pairs of K types only");
	if constexpr (TYPE == O1_QUANT_Q4_K)
		pair_dots_q4k<M, A16>(d0, d1, row, x, a, p);
	else if constexpr (TYPE == O1_QUANT_Q6_K)
		pair_dots_q6k<M>(d0, d1, row, x, a, p);
}

/* acc[i] += the pairs [P0, P1) of the row at ROW (TYPE Q4_K or Q6_K)
 * taken by LANE (p % 32 = lane), in increasing order, each pair's two
 * units one after the other. H: pairs a lane takes in a whole batch of
 * 32 H pairs (the loads of its pairs then issue together); 0: any span,
 * guarded. */
template <int M, int TYPE, bool A16, uint32_t H>
static __device__ __forceinline__ void
pairs_i8(float (&acc)[M], const uint8_t *row, const gq_xq &x,
	 const gq_args &a, uint32_t p0, uint32_t p1, uint32_t lane)
{
	if constexpr (H) {
		float d[H][2][M];

#pragma unroll
		for (uint32_t h = 0; h < H; h++)
			pair_dots<M, TYPE, A16>(d[h][0], d[h][1], row, x, a,
						p0 + lane + 32 * h);
#pragma unroll
		for (uint32_t h = 0; h < H; h++) {
#pragma unroll
			for (int i = 0; i < M; i++)
				acc[i] = (acc[i] + d[h][0][i]) + d[h][1][i];
		}
	} else {
		for (uint32_t p = p0 + ((lane - p0) & 31); p < p1; p += 32) {
			float d0[M], d1[M];

			pair_dots<M, TYPE, A16>(d0, d1, row, x, a, p);
#pragma unroll
			for (int i = 0; i < M; i++)
				acc[i] = (acc[i] + d0[i]) + d1[i];
		}
	}
}

/* pairs_i8 over units [U0, U1) (whole blocks), Q4_K's alignment decided
 * at run time (every lane of the grid takes the same branch): with w
 * 16-byte aligned every super-block is (a Q4_K row is 144 K / 256 bytes,
 * a multiple of 16), and shared memory keeps each byte's address mod 16
 * (the batches are copied as aligned pieces to aligned slots). Q6_K's
 * blocks are 2-byte aligned whatever w's. */
template <int M, int TYPE, uint32_t H>
static __device__ __forceinline__ void
pairs_at(float (&acc)[M], const uint8_t *row, const gq_xq &x,
	 const gq_args &a, uint32_t u0, uint32_t u1, uint32_t lane)
{
	if constexpr (TYPE == O1_QUANT_Q4_K) {
		if ((uintptr_t)a.w % 16 == 0) {
			pairs_i8<M, TYPE, true, H>(acc, row, x, a, u0 / 2,
						   u1 / 2, lane);
			return;
		}
	}
	pairs_i8<M, TYPE, false, H>(acc, row, x, a, u0 / 2, u1 / 2, lane);
}

/* Whether the int8 path decodes TYPE by pairs of units. */
template <int TYPE> static __host__ __device__ constexpr bool by_pairs()
{
	return TYPE == O1_QUANT_Q4_K || TYPE == O1_QUANT_Q6_K;
}

/* Batch B of row J: its units [*U0, *U1), and the first of its aligned
 * pieces and how many there are. */
template <int TYPE, uint32_t G = groups_of<TYPE>()>
static __device__ const gq_piece *batch_span(const gq_args &a, uint32_t j,
					     uint32_t b, uint32_t *u0,
					     uint32_t *u1, uint32_t *np)
{
	constexpr uint32_t per = 32 * G;
	const uint8_t *row = a.w + (size_t)j * a.row_bytes;
	uintptr_t lo, hi;

	*u0 = b * per;
	*u1 = *u0 + per < a.units ? *u0 + per : a.units;
	/* a batch starts on a group, and ends on one or at the row's end */
	lo = (uintptr_t)(row + (size_t)(*u0 / 32) * group_bytes<TYPE>());
	hi = *u1 == a.units
		 ? (uintptr_t)(row + a.row_bytes)
		 : (uintptr_t)(row + (size_t)(*u1 / 32) * group_bytes<TYPE>());
	*np = (uint32_t)(((hi - 1) & ~(uintptr_t)15) / 16 - lo / 16 + 1);
	return (const gq_piece *)(lo & ~(uintptr_t)15);
}

/* The lane's pieces of batch B of row J into WV (c = lane + 32 i < np). */
template <int TYPE, int P>
static __device__ void load_batch(gq_piece (&wv)[P], const gq_args &a,
				  uint32_t j, uint32_t b, uint32_t lane)
{
	uint32_t u0, u1, np;
	const gq_piece *p = batch_span<TYPE>(a, j, b, &u0, &u1, &np);

#pragma unroll
	for (int i = 0; i < P; i++)
		if (lane + 32 * i < np)
			wv[i] = ldw(p + lane + 32 * i);
}

/* acc[i] += the lane's units of batch B of row J (its pieces in shared
 * memory at SM) . x row i, in increasing unit order. */
template <int M, int TYPE, int DOT>
static __device__ void fma_batch(float (&acc)[M], const gq_args &a,
				 const gq_piece *sm, const gq_xq &x, uint32_t j,
				 uint32_t b, uint32_t lane)
{
	uint32_t u0, u1, np;
	const gq_piece *p = batch_span<TYPE>(a, j, b, &u0, &u1, &np);
	/* the row's byte 0 as seen in shared memory (the batch's units lie
	 * in the staged window; other addresses are never read) */
	const uint8_t *row = (const uint8_t *)sm +
			     ((uintptr_t)(a.w + (size_t)j * a.row_bytes) -
			      (uintptr_t)p);

	if constexpr (DOT == DOT_I8 && by_pairs<TYPE>()) {
		pairs_at<M, TYPE, 0>(acc, row, x, a, u0, u1, lane);
	} else {
		for (uint32_t u = u0 + lane; u < u1; u += 32) {
			float d[M];

			if constexpr (DOT == DOT_I8)
				unit_dots_i8<M, TYPE>(d, row, x, a, u);
			else
				unit_dots<M, TYPE>(d, row, a.x, a.k, u);
#pragma unroll
			for (int i = 0; i < M; i++)
				acc[i] = acc[i] + d[i];
		}
	}
}

/* OUT_ROPE for input row M: the pair (V0, V1) of unit J, as
 * rope.cu's o1_rope_kv_write_cuda writes it from the f32 QKV row: bias,
 * the rotation (rope_dev.h, q and k heads' dims below 2 half), q stored
 * as f32, k and v as bf16 into their KV page at slots[M]. */
static __device__ void rope_out(const gq_args &a, uint32_t m, uint32_t j,
				float v0, float v1)
{
	rope_store_pair(a.r, m, rope_row(a.r, j, 0), rope_row(a.r, j, 1), v0,
			v1);
}

/* OUT_ROPE: a warp's first output J, its rows R0 and R1 (rope_row) and,
 * in lane i < M, input row i's (cos, sin) of the pair, computed before
 * the PDL wait (positions are the step's inputs and the frequencies a
 * weight: no kernel writes them), so that the epilogue's cos and sin in
 * double and rope_row's divisions leave the end of the kernel (12.6% of
 * the QKV product's samples on the H200, eighteenth session). The same
 * values as rope_out's, so the same bits. J = UINT32_MAX: none. */
struct rope_pre {
	uint32_t j, r0, r1;
	float2 cs;
};

template <int M>
static __device__ rope_pre rope_pre_of(const gq_args &a, uint32_t j,
				       uint32_t lane)
{
	const rope_kv_epi &g = a.r;
	rope_pre p = {UINT32_MAX, 0, 0, make_float2(0.0f, 0.0f)};
	uint32_t d0;

	if (j >= a.n)
		return p;
	p.j = j, p.r0 = rope_row(g, j, 0), p.r1 = rope_row(g, j, 1);
	d0 = p.r0 % g.d;
	if (lane < (uint32_t)M && p.r0 / g.d < g.hq + g.hkv && d0 < g.half)
		rope_cs(g.pos[lane], g.inv_freq[d0], g.scale, &p.cs.x, &p.cs.y);
	return p;
}

/* The sums of the unit's rows (every lane holds them), stored: by lane
 * 0, or OUT_ROPE's input row i by lane i (its cos/sin are the costly
 * part; PRE: rope_pre_of's, used when it is J's). */
template <int M, int OUT>
static __device__ void epilogue(const gq_args &a, uint32_t j,
				const float (&res)[rows_of<OUT>()][M],
				uint32_t lane, const rope_pre *pre = nullptr)
{
	if constexpr (OUT == OUT_ROPE) {
#pragma unroll
		for (int i = 0; i < M; i++) {
			if (lane != (uint32_t)i)
				continue;
			if (pre && pre->j == j)
				rope_store_pair(a.r, i, pre->r0, pre->r1,
						res[0][i], res[1][i], &pre->cs);
			else
				rope_out(a, i, j, res[0][i], res[1][i]);
		}
		return;
	}
	if (lane)
		return;
#pragma unroll
	for (int i = 0; i < M; i++) {
		if constexpr (OUT == OUT_SWIGLU) {
			float g = res[0][i];

			a.act[(size_t)i * a.n + j] =
			    __float2bfloat16_rn(g / (1.0f + expf(-g)) * res[1][i]);
		} else if constexpr (OUT == OUT_ADD) {
			float *y = a.y + (size_t)i * a.ldy + j;

			*y = *y + res[0][i];
		} else {
			a.y[(size_t)i * a.ldy + j] = res[0][i];
		}
	}
}

/* IN_BF16 given a.xq (every thread): the M rows' pieces and (d, sum)
 * pairs, as quantize_x would leave them, copied from a.xq into XQ (DS
 * follows it): one run of 16-byte pieces in both, the pairs two a piece,
 * so every load is issued before the first store (one L2 round trip for
 * up to L pieces a thread); then the block's barrier. The pieces of units
 * past a row's last (pad) are copied as they are: no product reads them. */
template <int M> static __device__ void xq_copy(const gq_args &a, gq_piece *xq)
{
	constexpr int L = 8;
	const gq_piece *src = (const gq_piece *)a.xq;
	uint32_t nq = M * a.pad * 2, nd = M * a.units, np = nq + nd / 2;

	for (uint32_t e0 = 0; e0 < np; e0 += L * GQ_THREADS) {
		gq_piece r[L];

#pragma unroll
		for (int c = 0; c < L; c++) {
			uint32_t e = e0 + c * GQ_THREADS + threadIdx.x;

			if (e < np)
				r[c] = ldx(src + e);
		}
#pragma unroll
		for (int c = 0; c < L; c++) {
			uint32_t e = e0 + c * GQ_THREADS + threadIdx.x;

			if (e < np)
				xq[e] = r[c];
		}
	}
	if (nd % 2 && threadIdx.x == 0) /* an odd count's last pair */
		((float2 *)(xq + nq))[nd - 1] =
		    ((const float2 *)(src + nq))[nd - 1];
	__syncthreads();
}

/* Grid: blocks of GQ_WARPS warps, warp w of block b starting at unit
 * b GQ_WARPS + w and striding by the grid's warps (see the top). A unit
 * is R rows of NB batches: batch t of the walk is batch t % NB of row
 * j + (t / NB) n. */
template <int M, int TYPE, int OUT, int DOT, int IN>
static __global__ void __launch_bounds__(GQ_THREADS, GQ_BPS) gemv_q(gq_args a)
{
	constexpr int P = pieces_of<TYPE>();
	constexpr int R = rows_of<OUT>();
	constexpr uint32_t per = 32 * groups_of<TYPE>();
	uint32_t lane = threadIdx.x % 32, t = 0;
	uint32_t j = blockIdx.x * GQ_WARPS + threadIdx.x / 32;
	uint32_t nb = (a.units + per - 1) / per, nt = R * nb;
	gq_piece *sm = dyn_smem() + (threadIdx.x / 32) * 32 * P;
	gq_piece wv[P];
	float acc[M], res[R][M];

	if (j < a.n)
		load_batch<TYPE, P>(wv, a, wrow<OUT>(a, j, 0), 0, lane);
	gq_xq xin = {NULL, NULL};
	float(*part)[RMS_VWARPS] = NULL;

	o1_pdl_wait();
	o1_pdl_trigger();
	if constexpr (DOT == DOT_I8) {
		gq_piece *xq = dyn_smem() + GQ_WARPS * 32 * P;
		float2 *ds = (float2 *)(xq + (size_t)M * a.pad * 2);

		part = (float(*)[RMS_VWARPS])(ds + (size_t)M * a.units);
		if (IN == IN_BF16 && a.xq)
			xq_copy<M>(a, xq);
		else
			quantize_x<M, IN>(a, xq, ds, part);
		xin.q = xq, xin.ds = ds;
	}
#pragma unroll
	for (int i = 0; i < M; i++)
		acc[i] = 0.0f;
	while (j < a.n) {
		uint32_t nj = t + 1 < nt ? j : j + a.stride;
		uint32_t ntt = t + 1 < nt ? t + 1 : 0;
		uint32_t r = t / nb, b = t % nb;

		/* the previous batch's reads of the slice are done */
		__syncwarp();
#pragma unroll
		for (int i = 0; i < P; i++)
			sm[lane + 32 * i] = wv[i];
		__syncwarp();
		if (nj < a.n)
			load_batch<TYPE, P>(wv, a, wrow<OUT>(a, nj, ntt / nb),
					    ntt % nb, lane);
		fma_batch<M, TYPE, DOT>(acc, a, sm, xin, wrow<OUT>(a, j, r), b,
					lane);
		if (b + 1 == nb) {
			float post[M];

			/* at each row's end: held through the walk, the
			 * factors spilled (4 rows, OUT_ROPE) */
			norm_post<M, DOT == DOT_I8 ? IN : IN_BF16>(a, part,
								   post);
#pragma unroll
			for (int i = 0; i < M; i++) {
				for (int o = 16; o; o /= 2)
					acc[i] = acc[i] +
						 __shfl_xor_sync(0xffffffffu,
								 acc[i], o);
#pragma unroll
				for (int q = 0; q < R; q++)
					if ((uint32_t)q == r)
						res[q][i] = post_scaled<IN>(
						    acc[i], post[i]);
				acc[i] = 0.0f;
			}
		}
		if (nj != j)
			epilogue<M, OUT>(a, j, res, lane);
		j = nj, t = ntt;
	}
}

/* gemv_qp: DOT_I8's pipelined schedule (the default; gemv_q above
 * stays for DOT_F32 and for launches whose ring would not fit). The
 * arithmetic is gemv_q's to the bit: lane l still adds the products of
 * its units of a row in increasing order (units l, l + 32, ...; Q4_K's
 * and Q6_K's pairs l, l + 32, ...: pairs_i8), then the same warp tree. What changes is how the bytes arrive: instead of one batch in
 * registers per warp (a K-quant row of 4096 is a single 2.3 KB batch, so a
 * warp had under 2.3 KB in flight and waited for each row), each warp
 * keeps a ring of qp_stages() batches of about 2 KB in its slice of
 * shared memory, filled by cp.async (global to shared, no registers, not
 * kept in L1): qp_stages() - 1 batches are in flight while it decodes
 * one, across row ends. A lane decodes its units of a batch with their
 * loads hoisted (fma_batch_p), Q4_K and Q6_K a pair of units at a time
 * (the bytes the two share read once: pair_dots_q4k, pair_dots_q6k). */

/* X >= 5: qp_run2's variants, a step taking one batch of both rows of
 * a SwiGLU output (Q4_K only, see there). */
template <int X> static __host__ __device__ constexpr bool qp_two()
{
	return X >= 5;
}

/* The outputs a launch of N walks: qp_run2's OUT_ADD takes two a step
 * (j and j + N / 2, N even), the others one (SwiGLU's two rows are one
 * output). */
template <int OUT, int X>
static __host__ __device__ constexpr uint32_t qp_walked(uint32_t n)
{
	return qp_two<X>() && OUT != OUT_SWIGLU ? n / 2 : n;
}

/* Groups of 32 units per batch: about 2 KB (Q8_0 2176, Q4_0 and Q4_K
 * 2304, a llama3 row of 4096, Q5_0 2112, Q6_K 1680). X picks a variant
 * for bench_gemv_q's sweep: 1 half the batch (Q5_0: a third), 2 twice,
 * 3 the default's with fewer stages and three blocks a multiprocessor
 * (qp_stages), 4 with two stages and four blocks (more warps to hide the
 * decoding's latency, at most 64 registers a thread); two rows a step:
 * 5 half the batch, 3 stages, 3 blocks; 6 the whole batch, 2 stages, 2
 * blocks; 7 half, 5 stages, 2 blocks; 8 half, 2 stages, 4 blocks; 9 as
 * 6, the input's side of the lane's pairs kept in registers where a row
 * is one batch. */
template <int TYPE, int X = 0>
static __host__ __device__ constexpr uint32_t qp_groups()
{
	return (TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q6_K ? 2
		: TYPE == O1_QUANT_Q5_0				? 3
								: 4) *
	       (X == 2 ? 2 : 1) /
	       (X == 1 || X == 5 || X == 7 || X == 8 ? 2 : 1);
}

/* 16-byte pieces a lane of a ring slot: a batch at any alignment, or
 * qp_two's two (one after the other). */
template <int TYPE, int X = 0>
static __host__ __device__ constexpr int qp_pieces()
{
	return (int)(((qp_two<X>() ? 2 : 1) *
			  (qp_groups<TYPE, X>() * group_bytes<TYPE>() / 16 +
			   1) +
		      31) /
		     32);
}

/* Batches in a warp's ring: fewer with more input rows (their quantized
 * copies share the block's shared memory); X's variants 1 and 2 keep
 * about the bytes of the default ring, 3 takes 3 stages so that three
 * blocks fit a multiprocessor (where the input is short enough), 4 two
 * stages for four. */
template <int M, int X = 0>
static __host__ __device__ constexpr int qp_stages()
{
	return M == 1 ? (X == 1			    ? 6
			 : X == 2 || X == 4 || X == 6 || X == 8 || X == 9 ? 2
			 : X == 3 || X == 5		    ? 3
			 : X == 7			    ? 5
							    : 4)
	       : M == 2 ? 3
			: 2;
}

/* Blocks a multiprocessor (the launch bounds) and the shared memory a
 * block may then take. */
template <int X> static __host__ __device__ constexpr int qp_bps()
{
	/* the same warps a multiprocessor (24: 16 at 16 warps a block) */
	return X == 3 || X == 5	  ? 24 / GQ_WARPS
	       : X == 4 || X == 8 ? 32 / GQ_WARPS
				  : GQ_BPS;
}

template <int X> static constexpr size_t qp_smem_max()
{
	return qp_bps<X>() == 3 ? (size_t)74 << 10
				: (size_t)GQ_SMEM_SM / qp_bps<X>();
}

/* A 16-byte copy from global to shared memory, asynchronous on the
 * device (cp.async, L2 only) to the shared-memory address SDST (DST's:
 * the caller computes it from one conversion a kernel, as a generic
 * pointer's conversion costs several instructions a copy); the emulation
 * copies to DST at once. */
static __device__ __forceinline__ void cpa16(gq_piece *dst, uint32_t sdst,
					     const gq_piece *src)
{
#ifdef __CUDA_ARCH__
	(void)dst;
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sdst),
		     "l"(src)
		     : "memory");
#else
	(void)sdst;
	*dst = *src;
#endif
}

/* P's shared-memory address (cpa16's SDST; 0 on the emulation). */
static __device__ __forceinline__ uint32_t smem_addr(const void *p)
{
#ifdef __CUDA_ARCH__
	return (uint32_t)__cvta_generic_to_shared(p);
#else
	(void)p;
	return 0;
#endif
}

static __device__ __forceinline__ void cpa_commit(void)
{
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/* Until at most N of the thread's committed groups are pending. */
template <int N> static __device__ __forceinline__ void cpa_wait(void)
{
#ifdef __CUDA_ARCH__
	asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/* Where a warp's walk is: batch B of row R (0: gate or the only one, 1:
 * up) of output J; next() moves one batch on (the batches of a row, the
 * rows of an output, then output J + stride). */
struct qp_pos {
	uint32_t j, r, b;

	template <int R>
	__device__ __forceinline__ void next(uint32_t nb, uint32_t stride)
	{
		if (++b == nb) {
			b = 0;
			if (++r == R)
				r = 0, j += stride;
		}
	}
};

/* The warp's batch at C: its pieces copied into SLOT (at shared address
 * SLOT_S); one commit group per call, empty past the last output. */
template <int TYPE, int P, uint32_t G, int OUT>
static __device__ void qp_issue(gq_piece *slot, uint32_t slot_s,
				const gq_args &a, const qp_pos &c,
				uint32_t lane)
{
	if (c.j < a.n) {
		uint32_t u0, u1, np;
		const gq_piece *p = batch_span<TYPE, G>(
		    a, wrow<OUT>(a, c.j, c.r), c.b, &u0, &u1, &np) + lane;
		uint32_t ds = slot_s + 16 * lane;

		/* the lane's pieces lane + 32 i below np, its addresses
		 * once */
		slot += lane;
#pragma unroll
		for (int i = 0; i < P; i++)
			if (lane + 32 * i < np)
				cpa16(slot + 32 * i, ds + 512 * i, p + 32 * i);
	}
	cpa_commit();
}

/* fma_batch_p's units for the types decoded a unit at a time: the whole
 * batch's (the warp's choice) without guards, so that the units' loads
 * and decoding interleave, else each guarded. */
template <int M, int TYPE, uint32_t G>
static __device__ __forceinline__ void
units_p(float (&acc)[M], const uint8_t *row, const gq_xq &x, const gq_args &a,
	uint32_t u0, uint32_t u1, uint32_t lane)
{
	float d[G][M];

	if (u1 - u0 == 32 * G) {
#pragma unroll
		for (uint32_t g = 0; g < G; g++)
			unit_dots_i8<M, TYPE, 1>(d[g], row, x, a,
						 u0 + lane + 32 * g);
#pragma unroll
		for (uint32_t g = 0; g < G; g++) {
#pragma unroll
			for (int i = 0; i < M; i++)
				acc[i] = acc[i] + d[g][i];
		}
		return;
	}
#pragma unroll
	for (uint32_t g = 0; g < G; g++) {
#pragma unroll
		for (int i = 0; i < M; i++)
			d[g][i] = 0.0f;
		if (u0 + lane + 32 * g < u1)
			unit_dots_i8<M, TYPE, 1>(d[g], row, x, a,
						 u0 + lane + 32 * g);
	}
#pragma unroll
	for (uint32_t g = 0; g < G; g++)
		if (u0 + lane + 32 * g < u1) {
#pragma unroll
			for (int i = 0; i < M; i++)
				acc[i] = acc[i] + d[g][i];
		}
}

/* fma_batch for gemv_qp: the lane's units of the batch (up to G) decoded
 * and multiplied first, independently, then added to acc in increasing
 * unit order (the same sums as fma_batch's loop); Q4_K by pairs. */
template <int M, int TYPE, uint32_t G>
static __device__ void fma_batch_p(float (&acc)[M], const gq_args &a,
				   const gq_piece *sm, const gq_xq &x,
				   uint32_t j, uint32_t b, uint32_t lane)
{
	uint32_t u0, u1, np;
	const gq_piece *p = batch_span<TYPE, G>(a, j, b, &u0, &u1, &np);
	const uint8_t *row = (const uint8_t *)sm +
			     ((uintptr_t)(a.w + (size_t)j * a.row_bytes) -
			      (uintptr_t)p);

	if constexpr (by_pairs<TYPE>()) {
		/* a whole batch of 32 G units is 16 G pairs: G / 2 a lane
		 * where G is even */
		if (G % 2 == 0 && u1 - u0 == 32 * G)
			pairs_at<M, TYPE, G / 2>(acc, row, x, a, u0, u1, lane);
		else
			pairs_at<M, TYPE, 0>(acc, row, x, a, u0, u1, lane);
	} else {
		units_p<M, TYPE, G>(acc, row, x, a, u0, u1, lane);
	}
}

/* V summed over the warp by the fixed tree (every lane gets the sum). */
static __device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o; o /= 2)
		v = v + __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* o1_gemv_q_prefetch_next's regions, from a warp whose rows are done:
 * the regions' bytes (as one range) cut into a 256-byte aligned chunk a
 * warp of the grid, lane 0 asking L2 for its chunk with one bulk
 * prefetch (cuda_launch.h; nothing on the emulation). The warps that
 * finish first fill the kernel's tail with the next product's reads. */
static __device__ void qp_prefetch_next(const gq_args &a)
{
	uint64_t total = a.pf_bytes[0] + a.pf_bytes[1], chunk, at, end;
	uint32_t warps = gridDim.x * GQ_WARPS;
	uint32_t w = blockIdx.x * GQ_WARPS + threadIdx.x / 32;

	if (!total || threadIdx.x % 32)
		return;
	chunk = (total / warps + 255) & ~(uint64_t)255;
	at = (uint64_t)w * chunk;
	end = at + chunk < total ? at + chunk : total;
	/* the part of [at, end) in each region */
	for (int i = 0; i < 2 && at < end; i++) {
		uint64_t n = a.pf_bytes[i];

		if (at < n) {
			uint64_t e = end < n ? end : n;

			o1_prefetch_l2(a.pf[i] + at, (uint32_t)(e - at));
		}
		at = at > n ? at - n : 0;
		end = end > n ? end - n : 0;
	}
}

/* GQ_SELF_PF (bytes, 0 the default: off): before the PDL wait, each warp
 * asks L2 for the rows it will walk, whole rows from its first, lane k its
 * k-th (ROW_OF(j, r): unit j's row r, PER rows a unit, units j0, j0 +
 * stride, ... below N), as many as GQ_SELF_PF bytes hold. The ring's
 * first stages are all a warp has in flight while its block quantizes the
 * input after the wait; with these the rest of the product streams from
 * DRAM meanwhile. A hint: no bit changes (nothing on the emulation). On the
 * whole llama3-8b Q4_K_M (H100): 16,384 bytes 3.2% slower (42nd
 * session: the previous kernel's tail is still reading then); asked
 * right after the wait instead, 8,192 and 16,384 bytes 2.1% and 2.5%
 * slower (43rd). */
#ifndef GQ_SELF_PF
#define GQ_SELF_PF 0
#endif
template <typename F>
static __device__ __forceinline__ void
qp_prefetch_own(const gq_args &a, uint32_t j0, uint32_t n, uint32_t per,
		F row_of, uint32_t lane)
{
	if constexpr (GQ_SELF_PF > 0) {
		uint64_t rows = GQ_SELF_PF / a.row_bytes;
		uint32_t j = j0 + lane / per * a.stride;

		if (lane < rows && j < n) {
			uintptr_t p =
			    (uintptr_t)a.w +
			    (size_t)row_of(j, lane % per) * a.row_bytes;
			uintptr_t lo = p & ~(uintptr_t)15,
				  hi = (p + a.row_bytes + 15) & ~(uintptr_t)15;

			o1_prefetch_l2((const void *)lo, (uint32_t)(hi - lo));
		}
	}
}

/* GQ_PROBE & 32's input: the XQ and DS bytes a row takes, read from the
 * start of the input row the previous kernel wrote (IN_NORM's f32 row,
 * or the bf16 row: each holds them), every thread's loads issued before
 * its stores (one L2 round trip); the scales made finite constants
 * that still depend on the loads (fminf drops a NaN). */
template <int M, int IN>
static __device__ void qp_input_copied(const gq_args &a, gq_piece *xq,
				       float2 *ds)
{
	constexpr int L = 8; /* pieces a thread: K up to 16,384 */

	for (int i = 0; i < M; i++) {
		const gq_piece *src =
		    IN == IN_NORM
			? (const gq_piece *)(a.xf +
					     (size_t)(a.rows ? a.rows[i] : i) *
						 a.k)
			: (const gq_piece *)(a.x + (size_t)i * a.k);
		uint32_t nq = a.pad * 2, nd = (a.units + 1) / 2;
		/* the row's own 16-byte pieces, wrapped: 5K/64 pieces can
		 * exceed a short row (K < 128 bf16, < 64 f32) */
		uint32_t lim = IN == IN_NORM ? a.k / 4 : a.k / 8;
		gq_piece r[L];

#pragma unroll
		for (int c = 0; c < L; c++) {
			uint32_t e = c * GQ_THREADS + threadIdx.x;

			if (e < nq + nd)
				r[c] = src[e % lim];
		}
#pragma unroll
		for (int c = 0; c < L; c++) {
			uint32_t e = c * GQ_THREADS + threadIdx.x, u;

			if (e < nq) {
				xq[(size_t)i * nq + e] = r[c];
			} else if (e < nq + nd) {
				u = 2 * (e - nq);
				for (uint32_t h = 0; h < 2 && u + h < a.units;
				     h++)
					ds[(size_t)i * a.units + u + h] =
					    make_float2(
						1.0f / 1024 +
						    fminf(fabsf(__uint_as_float(
							      r[c].v[2 * h])),
							  0.0f),
						fminf(fabsf(__uint_as_float(
							  r[c].v[2 * h + 1])),
						      0.0f));
			}
		}
	}
	__syncthreads();
}

/* quantize_x (or xq_copy), or under GQ_PROBE its constants or copies
 * (POST 1). */
template <int M, int IN>
static __device__ __forceinline__ void qp_input(const gq_args &a, gq_piece *xq,
						float2 *ds, float (&post)[M])
{
#pragma unroll
	for (int i = 0; i < M; i++)
		post[i] = 1.0f;
	if constexpr ((GQ_PROBE & 1) || (IN == IN_NORM && (GQ_PROBE & 8)) ||
		      (IN == IN_BF16 && (GQ_PROBE & 16))) {
		if constexpr (GQ_PROBE & 32) {
			qp_input_copied<M, IN>(a, xq, ds);
		} else {
			for (uint32_t i = threadIdx.x; i < M * a.pad * 2;
			     i += GQ_THREADS)
				xq[i] = gq_piece{{0x01010101u, 0x01010101u,
						  0x01010101u, 0x01010101u}};
			for (uint32_t i = threadIdx.x; i < M * a.units;
			     i += GQ_THREADS)
				ds[i] = make_float2(1.0f / 1024, 0.0f);
			__syncthreads();
		}
	} else {
		float(*part)[RMS_VWARPS] =
		    (float(*)[RMS_VWARPS])(ds + (size_t)M * a.units);

		if (IN == IN_BF16 && a.xq) {
			xq_copy<M>(a, xq);
			return;
		}
		quantize_x<M, IN>(a, xq, ds, part);
		norm_post<M, IN>(a, part, post);
	}
}

/* The grid as gemv_q's (warp w of block b starts at output b GQ_WARPS +
 * w, strides by a.stride, the warps of the blocks running A); the ring's
 * slot t % S holds the warp's step t (qp_pos's walk), issued S - 1 steps
 * ahead. BLOCK: this block's index among those. */
template <int M, int TYPE, int OUT, int IN, int X>
static __device__ __forceinline__ void qp_run(const gq_args &a,
					      uint32_t block)
{
	constexpr int P = qp_pieces<TYPE, X>(), S = qp_stages<M, X>();
	constexpr int R = rows_of<OUT>();
	constexpr uint32_t G = qp_groups<TYPE, X>(), per = 32 * G;
	uint32_t lane = threadIdx.x % 32;
	uint32_t nb = (a.units + per - 1) / per;
	qp_pos c = {block * GQ_WARPS + threadIdx.x / 32, 0, 0}, ci = c;
	gq_piece *ring = dyn_smem() + (threadIdx.x / 32) * S * 32 * P;
	uint32_t ring_s = smem_addr(ring);
	gq_piece *xq = dyn_smem() + GQ_WARPS * S * 32 * P;
	float2 *ds = (float2 *)(xq + (size_t)M * a.pad * 2);
	gq_xq xin = {xq, ds};
	float acc[M], res[R][M], post[M];
	rope_pre pre = {UINT32_MAX, 0, 0, make_float2(0.0f, 0.0f)};

	/* the weights: no kernel writes them, so before the wait */
#pragma unroll
	for (int s = 0; s < S - 1; s++) {
		qp_issue<TYPE, P, G, OUT>(ring + s * 32 * P,
					  ring_s + 16 * s * 32 * P, a, ci,
					  lane);
		ci.next<R>(nb, a.stride);
	}
	if constexpr (OUT == OUT_ROPE)
		pre = rope_pre_of<M>(a, c.j, lane);
	auto own_row = [&](uint32_t j, uint32_t r) {
		return wrow<OUT>(a, j, r);
	};
	qp_prefetch_own(a, c.j, a.n, R, own_row, lane);
	o1_pdl_wait();
	o1_pdl_trigger();
	if constexpr (GQ_PROBE & 4) {
		cpa_wait<0>();
		return;
	}
	qp_input<M, IN>(a, xq, ds, post);
#pragma unroll
	for (int i = 0; i < M; i++)
		acc[i] = 0.0f;
	/* step t reads slot t % S (USE) and refills slot (t - 1) % S (FILL) */
	for (uint32_t use = 0, fill = S - 1; c.j < a.n;
	     use = use + 1 < S ? use + 1 : 0,
		      fill = fill + 1 < S ? fill + 1 : 0) {
		/* the previous step's slot was read by every lane: refill it */
		__syncwarp();
		qp_issue<TYPE, P, G, OUT>(ring + fill * 32 * P,
					  ring_s + 16 * fill * 32 * P, a, ci,
					  lane);
		ci.next<R>(nb, a.stride);
		cpa_wait<S - 1>();
		__syncwarp();
		if constexpr (!(GQ_PROBE & 2))
			fma_batch_p<M, TYPE, G>(acc, a, ring + use * 32 * P,
						xin, wrow<OUT>(a, c.j, c.r),
						c.b, lane);
		if (c.b + 1 == nb) {
#pragma unroll
			for (int i = 0; i < M; i++) {
				acc[i] = warp_sum(acc[i]);
#pragma unroll
				for (int q = 0; q < R; q++)
					if ((uint32_t)q == c.r)
						res[q][i] = post_scaled<IN>(
						    acc[i], post[i]);
				acc[i] = 0.0f;
			}
			if (c.r + 1 == R)
				epilogue<M, OUT>(a, c.j, res, lane, &pre);
		}
		c.next<R>(nb, a.stride);
	}
	cpa_wait<0>();
	qp_prefetch_next(a);
}

/* qp_run2's batch B, alike in every row (a Q4_K row is a multiple of 16
 * bytes, so all rows lie alike across their aligned pieces): units [U0,
 * U1), its first piece LO counted from the row's aligned start, NP
 * pieces, and OFF where the row's byte 0 falls from the staged window's
 * start (bytes; negative past the first batch). batch_span's values in
 * 32-bit arithmetic from the batch's index alone. */
struct qp_span2 {
	uint32_t u0, u1, lo, np;
	int32_t off;
};

template <int TYPE, uint32_t G>
static __device__ __forceinline__ qp_span2 span2_of(const gq_args &a,
						    uint32_t b)
{
	constexpr uint32_t per = 32 * G;
	uint32_t w16 = (uint32_t)((uintptr_t)a.w % 16), lo, hi;
	qp_span2 s;

	s.u0 = b * per;
	s.u1 = s.u0 + per < a.units ? s.u0 + per : a.units;
	lo = w16 + s.u0 / 32 * group_bytes<TYPE>();
	hi = w16 + (s.u1 == a.units ? (uint32_t)a.row_bytes
				    : s.u1 / 32 * group_bytes<TYPE>());
	s.lo = lo / 16;
	s.np = (hi - 1) / 16 - s.lo + 1;
	s.off = (int32_t)w16 - (int32_t)(16 * s.lo);
	return s;
}

/* qp_run2's step C (batch C.b of the rows of its output C.j of N) into
 * SLOT (at shared address SLOT_S): the first row's NP pieces, then the
 * second's, UP pieces on; one commit group, empty past the last output. */
template <int TYPE, int P, uint32_t G>
static __device__ void qp_issue2(gq_piece *slot, uint32_t slot_s,
				 const gq_args &a, const qp_pos &c, uint32_t n,
				 size_t up, uint32_t lane)
{
	if (c.j < n) {
		qp_span2 s = span2_of<TYPE, G>(a, c.b);
		const gq_piece *g =
		    (const gq_piece *)(((uintptr_t)a.w & ~(uintptr_t)15) +
				       (size_t)c.j * a.row_bytes) +
		    s.lo;
		uint32_t ds = slot_s + 16 * lane;

		up -= s.np; /* slot piece k >= np is the up row's k - np */
		slot += lane;
#pragma unroll
		for (int i = 0; i < P; i++) {
			uint32_t k = lane + 32 * i;

			if (k < 2 * s.np)
				cpa16(slot + 32 * i, ds + 512 * i,
				      g + k + (k < s.np ? 0 : up));
		}
	}
	cpa_commit();
}

/* acc[r][i] += a pair's two units of row r (D[r][0], then D[r][1]): the
 * order pairs_i8 adds them in, for qp_run2's two rows. */
template <int M>
static __device__ __forceinline__ void add_pair2(float (&acc)[2][M],
						 const float (&d)[2][2][M])
{
#pragma unroll
	for (int r = 0; r < 2; r++) {
#pragma unroll
		for (int i = 0; i < M; i++)
			acc[r][i] = (acc[r][i] + d[r][0][i]) + d[r][1][i];
	}
}

/* acc[r][i] += the lane's pairs of batch B of the gate (r 0) and up rows
 * staged at SM (qp_issue2's layout) . x row i, each row's pairs in
 * increasing order as pairs_i8 adds them (the lane takes pairs p % 32 =
 * lane of the row, whatever G); the input's side of a pair is read once
 * for both rows (pair_dots_q4k2), or taken from XH where HELD (a whole
 * batch that is the whole row: the lane's pairs are the same every
 * step). */
template <int M, bool A16, uint32_t G>
static __device__ __forceinline__ void
pairs2_i8(float (&acc)[2][M], const uint8_t *row0, const uint8_t *row1,
	  const gq_xq &x, const gq_args &a, const qp_span2 &s,
	  const q4k_xin<M> (&xh)[G / 2], bool held, uint32_t lane)
{
	constexpr uint32_t H = G / 2;
	uint32_t p0 = s.u0 / 2, p1 = s.u1 / 2;

	if (s.u1 - s.u0 == 32 * G) {
		float d[H][2][2][M];

#pragma unroll
		for (uint32_t h = 0; h < H; h++) {
			uint32_t p = p0 + lane + 32 * h;

			if (held) {
				pair_dots_q4k2<M, A16>(d[h], row0, row1, xh[h],
						       p);
			} else {
				q4k_xin<M> xi;

				q4k_xin_of<M>(xi, x, a, p);
				pair_dots_q4k2<M, A16>(d[h], row0, row1, xi,
						       p);
			}
		}
#pragma unroll
		for (uint32_t h = 0; h < H; h++)
			add_pair2<M>(acc, d[h]);
		return;
	}
	for (uint32_t p = p0 + ((lane - p0) & 31); p < p1; p += 32) {
		float d[2][2][M];
		q4k_xin<M> xi;

		q4k_xin_of<M>(xi, x, a, p);
		pair_dots_q4k2<M, A16>(d, row0, row1, xi, p);
		add_pair2<M>(acc, d);
	}
}

/* pairs2_i8 for Q6_K (qp_run2's OUT_ADD): the pairs of batch span S of
 * both rows, each row's in the order pairs_i8 adds them (p % 32 = lane,
 * increasing), the input's side read once for both (pair_dots_q6k2). */
template <int M, uint32_t G>
static __device__ __forceinline__ void
pairs2_q6k(float (&acc)[2][M], const uint8_t *row0, const uint8_t *row1,
	   const gq_xq &x, const gq_args &a, const qp_span2 &s, uint32_t lane)
{
	constexpr uint32_t H = G / 2;
	uint32_t p0 = s.u0 / 2, p1 = s.u1 / 2;

	if (s.u1 - s.u0 == 32 * G) {
		float d[H][2][2][M];

#pragma unroll
		for (uint32_t h = 0; h < H; h++)
			pair_dots_q6k2<M>(d[h], row0, row1, x, a,
					  p0 + lane + 32 * h);
#pragma unroll
		for (uint32_t h = 0; h < H; h++)
			add_pair2<M>(acc, d[h]);
		return;
	}
	for (uint32_t p = p0 + ((lane - p0) & 31); p < p1; p += 32) {
		float d[2][2][M];

		pair_dots_q6k2<M>(d, row0, row1, x, a, p);
		add_pair2<M>(acc, d);
	}
}

/* qp_run2's decoding of batch B staged at SM: pairs2_i8 with Q4_K's
 * alignment decided at run time (as pairs_at), pairs2_q6k for Q6_K. */
template <int M, int TYPE, uint32_t G>
static __device__ __forceinline__ void
fma_batch2(float (&acc)[2][M], const gq_args &a, const gq_piece *sm,
	   const gq_xq &x, const q4k_xin<M> (&xh)[G / 2], bool held,
	   uint32_t b, uint32_t lane)
{
	qp_span2 s = span2_of<TYPE, G>(a, b);
	const uint8_t *row = (const uint8_t *)sm + s.off;

	if constexpr (TYPE == O1_QUANT_Q6_K)
		pairs2_q6k<M, G>(acc, row, row + 16 * s.np, x, a, s, lane);
	else if ((uintptr_t)a.w % 16 == 0)
		pairs2_i8<M, true, G>(acc, row, row + 16 * s.np, x, a, s, xh,
				      held, lane);
	else
		pairs2_i8<M, false, G>(acc, row, row + 16 * s.np, x, a, s, xh,
				       held, lane);
}

/* qp_run for a Q4_K product with a step of one batch of two rows
 * (qp_two's variants): SwiGLU's gate and up rows of output j, or OUT_ADD's
 * outputs j and j + n / 2 (an even n, qp_walked). The input's pieces and
 * scales are read from shared memory once for both rows, one copy,
 * commit, wait and span serve both; a ring slot holds the two batches.
 * Each row's sums are qp_run's (the lane's pairs in the same order, the
 * same warp tree and epilogue), so the bits are. */
template <int M, int TYPE, int OUT, int IN, int X>
static __device__ __forceinline__ void qp_run2(const gq_args &a,
					       uint32_t block)
{
	static_assert((OUT == OUT_SWIGLU || OUT == OUT_ADD) &&
			      TYPE == O1_QUANT_Q4_K ||
			  (OUT == OUT_ADD && TYPE == O1_QUANT_Q6_K),
		      "rows j and j + n of whole 16-byte pieces");
	static_assert(qp_groups<TYPE, X>() % 2 == 0, "whole pairs a lane");
	constexpr int P = qp_pieces<TYPE, X>(), S = qp_stages<M, X>();
	constexpr uint32_t G = qp_groups<TYPE, X>(), per = 32 * G;
	uint32_t lane = threadIdx.x % 32;
	uint32_t nb = (a.units + per - 1) / per;
	uint32_t n = qp_walked<OUT, X>(a.n);
	size_t up = (size_t)n * a.row_bytes / 16;
	qp_pos c = {block * GQ_WARPS + threadIdx.x / 32, 0, 0}, ci = c;
	gq_piece *ring = dyn_smem() + (threadIdx.x / 32) * S * 32 * P;
	uint32_t ring_s = smem_addr(ring);
	gq_piece *xq = dyn_smem() + GQ_WARPS * S * 32 * P;
	float2 *ds = (float2 *)(xq + (size_t)M * a.pad * 2);
	gq_xq xin = {xq, ds};
	float acc[2][M], res[2][M], post[M];
	/* variant 9: the input's side of the lane's pairs in registers
	 * where a row is one whole batch */
	bool held = TYPE == O1_QUANT_Q4_K && X == 9 && a.units == per;
	q4k_xin<M> xh[G / 2];

#pragma unroll
	for (int s = 0; s < S - 1; s++) {
		qp_issue2<TYPE, P, G>(ring + s * 32 * P,
				      ring_s + 16 * s * 32 * P, a, ci, n, up,
				      lane);
		ci.next<1>(nb, a.stride);
	}
	auto own_row = [&](uint32_t j, uint32_t r) { return j + r * n; };
	qp_prefetch_own(a, c.j, n, 2, own_row, lane);
	o1_pdl_wait();
	o1_pdl_trigger();
	if constexpr (GQ_PROBE & 4) {
		cpa_wait<0>();
		return;
	}
	qp_input<M, IN>(a, xq, ds, post);
	if (held) {
#pragma unroll
		for (uint32_t h = 0; h < G / 2; h++)
			q4k_xin_of<M>(xh[h], xin, a, lane + 32 * h);
	}
#pragma unroll
	for (int i = 0; i < M; i++)
		acc[0][i] = 0.0f, acc[1][i] = 0.0f;
	for (uint32_t use = 0, fill = S - 1; c.j < n;
	     use = use + 1 < S ? use + 1 : 0,
		      fill = fill + 1 < S ? fill + 1 : 0) {
		__syncwarp();
		qp_issue2<TYPE, P, G>(ring + fill * 32 * P,
				      ring_s + 16 * fill * 32 * P, a, ci, n,
				      up, lane);
		ci.next<1>(nb, a.stride);
		cpa_wait<S - 1>();
		__syncwarp();
		if constexpr (!(GQ_PROBE & 2))
			fma_batch2<M, TYPE, G>(acc, a, ring + use * 32 * P,
					       xin, xh, held, c.b, lane);
		if (c.b + 1 == nb) {
#pragma unroll
			for (int i = 0; i < M; i++) {
				res[0][i] = post_scaled<IN>(warp_sum(acc[0][i]),
							    post[i]);
				res[1][i] = post_scaled<IN>(warp_sum(acc[1][i]),
							    post[i]);
				acc[0][i] = 0.0f, acc[1][i] = 0.0f;
			}
			if constexpr (OUT == OUT_SWIGLU) {
				epilogue<M, OUT>(a, c.j, res, lane);
			} else {
				float r0[1][M], r1[1][M];

#pragma unroll
				for (int i = 0; i < M; i++)
					r0[0][i] = res[0][i], r1[0][i] = res[1][i];
				epilogue<M, OUT>(a, c.j, r0, lane);
				epilogue<M, OUT>(a, c.j + n, r1, lane);
			}
		}
		c.next<1>(nb, a.stride);
	}
	cpa_wait<0>();
	qp_prefetch_next(a);
}

template <int M, int TYPE, int OUT, int IN, int X>
static __global__ void __launch_bounds__(GQ_THREADS, qp_bps<X>())
    gemv_qp(gq_args a)
{
	if constexpr (qp_two<X>())
		qp_run2<M, TYPE, OUT, IN, X>(a, blockIdx.x);
	else
		qp_run<M, TYPE, OUT, IN, X>(a, blockIdx.x);
}

/* Two parts of one output in one launch (a QKV matrix whose v rows are
 * in another block type: Q4_K_M's Q4_K q and k beside Q6_K v, or Q5_0
 * beside Q8_0 where K is not whole super-blocks): blocks
 * [0, B0) run part A0 (TYPE T0), the others A1, each part's warps
 * striding over its own outputs, so every row is computed as the part's
 * own launch would (the same bits) without a second kernel's launch,
 * ramp-up and tail. X0, X1: each part's ring variant, at GQ_BPS blocks a
 * multiprocessor (the launch bounds; the dynamic shared memory is the
 * larger part's). */
template <int M, int T0, int X0, int T1, int X1, int OUT, int IN>
static __global__ void __launch_bounds__(GQ_THREADS, GQ_BPS)
    gemv_qp2(gq_args a0, gq_args a1, uint32_t b0)
{
	if (blockIdx.x < b0)
		qp_run<M, T0, OUT, IN, X0>(a0, blockIdx.x);
	else
		qp_run<M, T1, OUT, IN, X1>(a1, blockIdx.x - b0);
}

/* o1_gemv_q_prefetch_next's regions, for the calling thread's next
 * gemv_qp launch. */
static thread_local struct {
	const uint8_t *p[2];
	uint64_t bytes[2];
} pf_next;

extern "C" void o1_gemv_q_prefetch_next(const void *w0, uint64_t bytes0,
					const void *w1, uint64_t bytes1)
{
	const void *w[2] = {w0, w1};
	uint64_t n[2] = {bytes0, bytes1};

	for (int i = 0; i < 2; i++) {
		/* the bulk prefetch takes 16-byte aligned whole pieces */
		bool ok = w[i] && (uintptr_t)w[i] % 16 == 0;

		pf_next.p[i] = ok ? (const uint8_t *)w[i] : NULL;
		pf_next.bytes[i] = ok ? n[i] & ~(uint64_t)15 : 0;
	}
}

/* The hint into A (the launch's), cleared: it is for one launch. */
static void take_prefetch(gq_args *a)
{
	for (int i = 0; i < 2; i++) {
		a->pf[i] = pf_next.p[i], a->pf_bytes[i] = pf_next.bytes[i];
		pf_next.p[i] = NULL, pf_next.bytes[i] = 0;
	}
}

/* Dynamic shared memory of a launch: the warps' weight slices, and
 * DOT_I8's quantized input rows (xq_at's layout) with their (d, sum). */
static size_t smem_of(const gq_args &a, int pieces, uint32_t m, int dot)
{
	size_t s = (size_t)GQ_WARPS * 32 * pieces * sizeof(gq_piece);

	if (dot == DOT_I8)
		s += (size_t)m * a.pad * 32 + (size_t)m * a.units * 8 +
		     (size_t)m * RMS_VWARPS * sizeof(float);
	return s;
}

/* PIPE: gemv_qp (variant X of qp_groups) where DOT is DOT_I8 and its
 * ring fits (the default; tools/gpu/bench_gemv_q.cu times the others). */
template <int M, int TYPE, int OUT, int DOT, int IN, bool PIPE = true,
	  int X = 0>
static int launch_m(gq_args a, bool pdl, cudaStream_t stream)
{
	void (*k)(gq_args) = gemv_q<M, TYPE, OUT, DOT, IN>;
	uint32_t walked = a.n, blocks;
	uint32_t cap = o1_cuda_sm_count() * GQ_BPS;
	size_t smem = smem_of(a, pieces_of<TYPE>(), M, DOT);
	int err = 0;

	if constexpr (PIPE && DOT == DOT_I8) {
		size_t ps = smem_of(
		    a, qp_stages<M, X>() * qp_pieces<TYPE, X>(), M, DOT_I8);
		size_t p0 = smem_of(
		    a, qp_stages<M, 0>() * qp_pieces<TYPE, 0>(), M, DOT_I8);

		if (ps <= qp_smem_max<X>())
			k = gemv_qp<M, TYPE, OUT, IN, X>, smem = ps,
			cap = o1_cuda_sm_count() * qp_bps<X>(),
			walked = qp_walked<OUT, X>(a.n);
		else if (p0 <= GQ_SMEM_MAX)
			k = gemv_qp<M, TYPE, OUT, IN, 0>, smem = p0;
	}
	take_prefetch(&a); /* gemv_q ignores it */
	blocks = (walked + GQ_WARPS - 1) / GQ_WARPS;
	blocks = blocks < cap ? blocks : cap;
	a.stride = blocks * GQ_WARPS;
	if (smem > 48 * 1024)
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	return err ? err
		   : O1_CUDA_LAUNCH("gemv_q", k, dim3(blocks), dim3(GQ_THREADS),
				    smem, stream, pdl, a);
}

/* gemv_qp's variant for one input row by block type, from the H200:
 * twice the batch for Q8_0 and Q6_K (bench_gemv_q, 2026-12-01: Q6_K head
 * 3,264 against 2,779 GB/s, Q8_0 o 3,118 against 2,606; with Q6_K by
 * pairs, 2026-12-02: head 3,890 against 3,221, down 2,570 against 2,388),
 * Q4_K three blocks a multiprocessor. Alone, Q4_K by pairs runs faster
 * with twice the batch (gate 3,149 against 3,016, qkv 2,397 against
 * 2,011); in the decode step's chain of launches the 4-layer Q4_K_M cut
 * ran at 2,187 tok/s with it and at 2,177-2,193 with three blocks
 * (bench_cuda_decode, batch 1, 2026-12-02, both with Q6_K by pairs): no
 * difference measured in the chain. The bits are the same for all. */
template <int TYPE> static constexpr int qp_variant_1()
{
	return TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q6_K ? 2
	       : TYPE == O1_QUANT_Q4_K				? 3
								: 0;
}

/* O1_GEMV_Q_SWIGLU_2ROWS (the A/B switch, 1 by default; build with
 * -DO1_GEMV_Q_SWIGLU_2ROWS=0 for the one-row schedule): one input row's
 * SwiGLU product on Q4_K runs qp_run2's variant QP_SWIGLU_X, two rows a
 * step, instead of qp_variant_1's. Same bits either way. Variant 7 (half
 * batches of both rows, 5 stages, 2 blocks a multiprocessor): llama3's
 * gate+up (2 x 14336 x 4096) 17.45-17.52 us against 18.90-19.05 for
 * variant 3 (bench_gemv_q --swiglu, H200, 2026-12-02, three runs); 6
 * 17.8-17.9, 9 18.2-18.4, 8 18.6-18.7, 5 19.1-19.3. Not yet measured in
 * the decode step's chain (bench_cuda_decode). */
#ifndef O1_GEMV_Q_SWIGLU_2ROWS
#define O1_GEMV_Q_SWIGLU_2ROWS 1
#endif
#define QP_SWIGLU_X 7

template <int TYPE, int OUT> static constexpr int qp_variant_m1()
{
	return O1_GEMV_Q_SWIGLU_2ROWS && OUT == OUT_SWIGLU &&
			   TYPE == O1_QUANT_Q4_K
		   ? QP_SWIGLU_X
		   : qp_variant_1<TYPE>();
}

/* Whether one input row's OUT_ADD product on Q4_K or Q6_K (the O and
 * down products of a decode step) runs qp_run2, outputs j and j + N / 2
 * a step (N even, rows of whole 16-byte pieces): Q4_K as its SwiGLU
 * product (variant 7), Q6_K whole batches (6: 2 stages, 2 blocks);
 * o1_gemv_q_add_two_rows sets it (A/B). Variant 7's five stages and a
 * 14,336-wide input (llama3-8b's down product) do not fit a block's
 * shared memory (120 KB): Q4_K takes variant 6 there (the same bytes in
 * flight as the one-row ring, which launch_m would fall back to: ncu on
 * the H200 had that down product at 17.4 us for 33 MB, 1.9 TB/s, against
 * 2.8 for the gate/up product's two rows). Same bits either way. */
static bool gq_add_two = true;

template <int TYPE> static constexpr int qp_add_x()
{
	return TYPE == O1_QUANT_Q4_K ? 7 : 6;
}

template <int TYPE> static bool qp_add_fits(const gq_args &a)
{
	constexpr int X = qp_add_x<TYPE>();

	return smem_of(a, qp_stages<1, X>() * qp_pieces<TYPE, X>(), 1,
		       DOT_I8) <= qp_smem_max<X>();
}

extern "C" void o1_gemv_q_add_two_rows(bool on)
{
	gq_add_two = on;
}

template <int TYPE, int OUT, int DOT, int IN>
static int launch(const gq_args &a, uint32_t m, bool pdl, cudaStream_t stream)
{
	switch (m) {
	case 1:
		if constexpr (OUT == OUT_ADD && (TYPE == O1_QUANT_Q4_K ||
						 TYPE == O1_QUANT_Q6_K))
			if (gq_add_two && a.n % 2 == 0 &&
			    a.row_bytes % 16 == 0)
				return qp_add_fits<TYPE>(a)
					   ? launch_m<1, TYPE, OUT, DOT, IN,
						      true, qp_add_x<TYPE>()>(
						 a, pdl, stream)
					   : launch_m<1, TYPE, OUT, DOT, IN,
						      true, 6>(a, pdl, stream);
		return launch_m<1, TYPE, OUT, DOT, IN, true,
				qp_variant_m1<TYPE, OUT>()>(a, pdl, stream);
	case 2:
		return launch_m<2, TYPE, OUT, DOT, IN>(a, pdl, stream);
	case 3:
		return launch_m<3, TYPE, OUT, DOT, IN>(a, pdl, stream);
	default:
		return launch_m<4, TYPE, OUT, DOT, IN>(a, pdl, stream);
	}
}

/* A part's ring variant in gemv_qp2: the type's one-row choice where it
 * runs at GQ_BPS blocks a multiprocessor, else the default. */
template <int M, int TYPE> static constexpr int qp2_variant()
{
	return M == 1 && qp_bps<qp_variant_1<TYPE>()>() == GQ_BPS
		   ? qp_variant_1<TYPE>()
		   : 0;
}

/* gemv_qp2 over A0 (blocks of T0) and A1 (T1), M rows each; -ENOSPC
 * (nothing launched) where a part's ring and input would not fit. The
 * grid's GQ_BPS blocks a multiprocessor are shared in proportion to the
 * parts' bytes, each part at least one block and at most a warp an
 * output. */
template <int M, int T0, int T1, int OUT, int IN>
static int launch_pair_m(gq_args a0, gq_args a1, bool pdl,
			 cudaStream_t stream)
{
	constexpr int X0 = qp2_variant<M, T0>(), X1 = qp2_variant<M, T1>();
	void (*k)(gq_args, gq_args, uint32_t) =
	    gemv_qp2<M, T0, X0, T1, X1, OUT, IN>;
	size_t s0 = smem_of(a0, qp_stages<M, X0>() * qp_pieces<T0, X0>(), M,
			    DOT_I8);
	size_t s1 = smem_of(a1, qp_stages<M, X1>() * qp_pieces<T1, X1>(), M,
			    DOT_I8);
	size_t smem = s0 > s1 ? s0 : s1;
	uint32_t cap = o1_cuda_sm_count() * GQ_BPS;
	uint32_t need0 = (a0.n + GQ_WARPS - 1) / GQ_WARPS;
	uint32_t need1 = (a1.n + GQ_WARPS - 1) / GQ_WARPS;
	double by0 = (double)a0.n * a0.row_bytes;
	double by1 = (double)a1.n * a1.row_bytes;
	uint32_t b0, b1;
	int err = 0;

	if (smem > GQ_SMEM_MAX || cap < 2)
		return -ENOSPC;
	take_prefetch(&a0);
	a1.pf[0] = a0.pf[0], a1.pf[1] = a0.pf[1];
	a1.pf_bytes[0] = a0.pf_bytes[0], a1.pf_bytes[1] = a0.pf_bytes[1];
	b0 = (uint32_t)(cap * by0 / (by0 + by1) + 0.5);
	b0 = b0 < 1 ? 1 : b0 > cap - 1 ? cap - 1 : b0;
	b1 = cap - b0;
	b0 = b0 < need0 ? b0 : need0;
	b1 = b1 < need1 ? b1 : need1;
	a0.stride = b0 * GQ_WARPS, a1.stride = b1 * GQ_WARPS;
	if (smem > 48 * 1024)
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	return err ? err
		   : O1_CUDA_LAUNCH("gemv_q2", k, dim3(b0 + b1),
				    dim3(GQ_THREADS), smem, stream, pdl, a0, a1,
				    b0);
}

/* DOT_I8 where its shared memory fits, else DOT_F32 (bf16 input and the
 * store or SwiGLU outputs only: the fused variants need DOT_I8, which
 * their callers check with o1_gemv_q8_fits). */
template <int TYPE, int OUT, int IN>
static int launch_dot(const gq_args &a, uint32_t m, int dot, bool pdl,
		      cudaStream_t stream)
{
	if constexpr (IN == IN_BF16 && OUT != OUT_ADD) {
		if (dot == DOT_I8 &&
		    smem_of(a, pieces_of<TYPE>(), m, DOT_I8) <= GQ_SMEM_MAX)
			return launch<TYPE, OUT, DOT_I8, IN>(a, m, pdl, stream);
		return launch<TYPE, OUT, DOT_F32, IN>(a, m, pdl, stream);
	} else {
		(void)dot;
		if (smem_of(a, pieces_of<TYPE>(), m, DOT_I8) > GQ_SMEM_MAX) {
			o1_err("gemv_q: fused variant over %u rows of %u: "
			       "beyond its shared memory",
			       m, a.k);
			return -EINVAL;
		}
		return launch<TYPE, OUT, DOT_I8, IN>(a, m, pdl, stream);
	}
}

/* The instance for TYPE (checked by the caller). */
template <int OUT, int IN = IN_BF16>
static int launch_type(const gq_args &a, enum o1_quant_type type, uint32_t m,
		       int dot, bool pdl, cudaStream_t stream)
{
	switch (type) {
	case O1_QUANT_Q8_0:
		return launch_dot<O1_QUANT_Q8_0, OUT, IN>(a, m, dot, pdl,
							  stream);
	case O1_QUANT_Q4_0:
		return launch_dot<O1_QUANT_Q4_0, OUT, IN>(a, m, dot, pdl,
							  stream);
	case O1_QUANT_Q5_0:
		return launch_dot<O1_QUANT_Q5_0, OUT, IN>(a, m, dot, pdl,
							  stream);
	case O1_QUANT_Q4_K:
		return launch_dot<O1_QUANT_Q4_K, OUT, IN>(a, m, dot, pdl,
							  stream);
	case O1_QUANT_Q6_K:
		return launch_dot<O1_QUANT_Q6_K, OUT, IN>(a, m, dot, pdl,
							  stream);
	}
	return -EINVAL; /* not reached: check() refuses other types */
}

/* Shapes and alignment both entry points need. */
static int check(const char *what, gq_args &a, const void *out,
		 enum o1_quant_type type, uint32_t m)
{
	const void *x = a.x ? (const void *)a.x : (const void *)a.xf;
	bool norm_ok =
	    !a.xf || (a.nw && (uintptr_t)a.nw % 16 == 0 && a.eps >= 0.0f);

	if (out && x && a.w && m && m <= O1_GEMV_MAX_ROWS && a.n &&
	    a.ldy >= a.n && !o1_quant_row_bytes(type, a.k, &a.row_bytes) &&
	    (uintptr_t)x % 16 == 0 && o1_quant_dev_aligned(type, a.w) &&
	    norm_ok)
		return 0;
	o1_err("%s: bad operands: type %u m %u (at most %d) n %u k %u ldy %u, "
	       "x %p (16-byte aligned) w %p, norm weight %p (16-byte "
	       "aligned) eps %g",
	       what, (unsigned)type, m, O1_GEMV_MAX_ROWS, a.n, a.k, a.ldy, x,
	       (const void *)a.w, (const void *)a.nw, (double)a.eps);
	return -EINVAL;
}

/* Arguments of both entry points. */
static gq_args args(float *y, uint16_t *act, const uint16_t *x, const void *w,
		    uint32_t n, uint32_t k, uint32_t ldy)
{
	gq_args a = {};

	a.y = y, a.act = (__nv_bfloat16 *)act, a.x = x;
	a.w = (const uint8_t *)w, a.n = n, a.k = k, a.ldy = ldy;
	a.units = k / 32, a.pad = q8_pad(k);
	return a;
}

static int gemv_store(float *y, const uint16_t *x, const void *w,
		      enum o1_quant_type type, int dot, uint32_t m, uint32_t n,
		      uint32_t k, uint32_t ldy, bool pdl, cudaStream_t stream)
{
	gq_args a = args(y, NULL, x, w, n, k, ldy);
	int err = check("gemv_q", a, y, type, m);

	return err ? err : launch_type<OUT_STORE>(a, type, m, dot, pdl, stream);
}

static int gemv_swiglu(uint16_t *act, const uint16_t *x, const void *w,
		       enum o1_quant_type type, int dot, uint32_t m, uint32_t f,
		       uint32_t k, bool pdl, cudaStream_t stream)
{
	gq_args a = args(NULL, act, x, w, f, k, f);
	int err = check("gemv_q_swiglu", a, act, type, m);

	return err ? err
		   : launch_type<OUT_SWIGLU>(a, type, m, dot, pdl, stream);
}

extern "C" int o1_gemv_q_cuda(float *y, const uint16_t *x, const void *w,
			      enum o1_quant_type type, uint32_t m, uint32_t n,
			      uint32_t k, uint32_t ldy, bool pdl,
			      cudaStream_t stream)
{
	return gemv_store(y, x, w, type, DOT_F32, m, n, k, ldy, pdl, stream);
}

extern "C" int o1_gemv_q_swiglu_cuda(uint16_t *act, const uint16_t *x,
				     const void *w, enum o1_quant_type type,
				     uint32_t m, uint32_t f, uint32_t k,
				     bool pdl, cudaStream_t stream)
{
	return gemv_swiglu(act, x, w, type, DOT_F32, m, f, k, pdl, stream);
}

extern "C" int o1_gemv_q8_cuda(float *y, const uint16_t *x, const void *w,
			       enum o1_quant_type type, uint32_t m, uint32_t n,
			       uint32_t k, uint32_t ldy, bool pdl,
			       cudaStream_t stream)
{
	return gemv_store(y, x, w, type, DOT_I8, m, n, k, ldy, pdl, stream);
}

extern "C" int o1_gemv_q8_swiglu_cuda(uint16_t *act, const uint16_t *x,
				      const void *w, enum o1_quant_type type,
				      uint32_t m, uint32_t f, uint32_t k,
				      bool pdl, cudaStream_t stream)
{
	return gemv_swiglu(act, x, w, type, DOT_I8, m, f, k, pdl, stream);
}

extern "C" int o1_gemv_q8_add_cuda(float *y, const uint16_t *x, const void *xq,
				   const void *w, enum o1_quant_type type,
				   uint32_t m, uint32_t n, uint32_t k,
				   uint32_t ldy, bool pdl, cudaStream_t stream)
{
	gq_args a = args(y, NULL, x, w, n, k, ldy);
	int err = check("gemv_q8_add", a, y, type, m);

	if (!err && xq && ((uintptr_t)xq % 16 || k % 32)) {
		o1_err("gemv_q8_add: quantized input %p not 16-byte aligned "
		       "or %u columns (a multiple of 32)",
		       xq, k);
		err = -EINVAL;
	}
	a.xq = (const uint32_t *)xq;
	return err ? err
		   : launch_type<OUT_ADD>(a, type, m, DOT_I8, pdl, stream);
}

/* Arguments of the normalized-input variants. */
static gq_args norm_args(float *y, uint16_t *act, const float *x,
			 const uint32_t *rows, const float *nw, float eps,
			 const void *w, uint32_t n, uint32_t k, uint32_t ldy)
{
	gq_args a = args(y, act, NULL, w, n, k, ldy);

	a.xf = x, a.rows = rows, a.nw = nw, a.eps = eps;
	return a;
}

extern "C" int o1_gemv_q8_norm_cuda(float *y, const float *x,
				    const uint32_t *rows, const float *norm_w,
				    float eps, const void *w,
				    enum o1_quant_type type, uint32_t m,
				    uint32_t n, uint32_t k, uint32_t ldy,
				    bool pdl, cudaStream_t stream)
{
	gq_args a = norm_args(y, NULL, x, rows, norm_w, eps, w, n, k, ldy);
	int err = check("gemv_q8_norm", a, y, type, m);

	return err ? err
		   : launch_type<OUT_STORE, IN_NORM>(a, type, m, DOT_I8, pdl,
						     stream);
}

extern "C" int o1_gemv_q8_norm_swiglu_cuda(uint16_t *act, const float *x,
					   const float *norm_w, float eps,
					   const void *w,
					   enum o1_quant_type type, uint32_t m,
					   uint32_t f, uint32_t k, bool pdl,
					   cudaStream_t stream)
{
	gq_args a = norm_args(NULL, act, x, NULL, norm_w, eps, w, f, k, f);
	int err = check("gemv_q8_norm_swiglu", a, act, type, m);

	return err ? err
		   : launch_type<OUT_SWIGLU, IN_NORM>(a, type, m, DOT_I8, pdl,
						      stream);
}

/* What OUT_ROPE needs beyond check(): rope.cu's operands and shapes, and
 * a part of whole heads within the fused QKV rows. */
static int check_rope(const struct o1_rope_kv_args *r,
		      const struct o1_attn_dims *d, uint32_t col0,
		      uint32_t rows)
{
	uint64_t all =
	    d->head_dim ? (uint64_t)(d->n_heads + 2 * (uint64_t)d->n_kv_heads) *
			      d->head_dim
			: 0;

	if (r->q && r->k_cache && r->v_cache && r->pos && r->slots &&
	    r->inv_freq && r->n_tokens && d->n_heads && d->n_kv_heads &&
	    d->n_heads % d->n_kv_heads == 0 && d->head_dim &&
	    d->head_dim % 2 == 0 && d->page_tokens && r->rot_dim &&
	    r->rot_dim % 2 == 0 && r->rot_dim <= d->head_dim &&
	    d->page_stride >=
		(uint64_t)d->n_kv_heads * d->page_tokens * d->head_dim &&
	    rows && col0 % d->head_dim == 0 && rows % d->head_dim == 0 &&
	    (uint64_t)col0 + rows <= all)
		return 0;
	o1_err("gemv_q8_norm_rope_kv: bad shape: rows [%u, +%u) of heads "
	       "%u/%u of %u, rot_dim %u, page %u tokens stride %llu",
	       col0, rows, d->n_heads, d->n_kv_heads, d->head_dim, r->rot_dim,
	       d->page_tokens, (unsigned long long)d->page_stride);
	return -EINVAL;
}

/* OUT_ROPE's arguments for the part P, checked, into *A. */
static int rope_args_of(gq_args *a, const struct o1_rope_kv_args *r,
			const struct o1_attn_dims *d, const float *x,
			const float *norm_w, float eps,
			const struct o1_gemv_q_part *p, uint32_t k)
{
	uint32_t col0 = p->col0, rows = p->rows;
	int err = check_rope(r, d, col0, rows);

	/* the units are pairs of rows; ldy is unused */
	*a = norm_args(r->q, NULL, x, NULL, norm_w, eps, p->w, rows / 2, k,
		       rows / 2);
	err = err ? err
		  : check("gemv_q8_norm_rope_kv", *a, r->q, p->type,
			  r->n_tokens);
	if (err)
		return err;
	a->r = rope_kv_epi_of(r, d, col0);
	return 0;
}

extern "C" int o1_gemv_q8_norm_rope_kv_cuda(
    const struct o1_rope_kv_args *r, const struct o1_attn_dims *d,
    const float *x, const float *norm_w, float eps, const void *w,
    enum o1_quant_type type, uint32_t col0, uint32_t rows, uint32_t k,
    bool pdl, cudaStream_t stream)
{
	struct o1_gemv_q_part p = {w, type, col0, rows};
	gq_args a;
	int err = rope_args_of(&a, r, d, x, norm_w, eps, &p, k);

	return err ? err
		   : launch_type<OUT_ROPE, IN_NORM>(a, type, r->n_tokens,
						    DOT_I8, pdl, stream);
}

/* gemv_qp2's OUT_ROPE launch over the parts A (T0 then T1) for the
 * token count of R. */
template <int T0, int T1>
static int rope_pair_m(const struct o1_rope_kv_args *r, const gq_args (&a)[2],
		       bool pdl, cudaStream_t stream)
{
	switch (r->n_tokens) {
	case 1:
		return launch_pair_m<1, T0, T1, OUT_ROPE, IN_NORM>(a[0], a[1],
								   pdl, stream);
	case 2:
		return launch_pair_m<2, T0, T1, OUT_ROPE, IN_NORM>(a[0], a[1],
								   pdl, stream);
	case 3:
		return launch_pair_m<3, T0, T1, OUT_ROPE, IN_NORM>(a[0], a[1],
								   pdl, stream);
	default:
		return launch_pair_m<4, T0, T1, OUT_ROPE, IN_NORM>(a[0], a[1],
								   pdl, stream);
	}
}

/* The QKV parts PT[0], PT[1] (each whole heads, checked by
 * rope_args_of) through gemv_qp2: 1 (nothing launched) where they are not
 * a pair it is built for or would not fit, else 0 or the launch's error.
 * The pairs: Q4_K then Q6_K (Q4_K_M's layers with a Q6_K v), and Q5_0
 * then Q8_0 (the same layers where K is not whole super-blocks, as
 * qwen2.5-0.5b's 896: llama.cpp's fallback types). */
static int rope_kv_pair(const struct o1_rope_kv_args *r,
			const struct o1_attn_dims *d, const float *x,
			const float *norm_w, float eps,
			const struct o1_gemv_q_part *pt, uint32_t k, bool pdl,
			cudaStream_t stream)
{
	bool k_pair = pt[0].type == O1_QUANT_Q4_K &&
		      pt[1].type == O1_QUANT_Q6_K;
	bool q5_pair = pt[0].type == O1_QUANT_Q5_0 &&
		       pt[1].type == O1_QUANT_Q8_0;
	gq_args a[2];
	int err = 0;

	if (!k_pair && !q5_pair)
		return 1;
	for (int i = 0; !err && i < 2; i++)
		err = rope_args_of(&a[i], r, d, x, norm_w, eps, &pt[i], k);
	if (err)
		return err;
	err = k_pair ? rope_pair_m<O1_QUANT_Q4_K, O1_QUANT_Q6_K>(r, a, pdl,
								   stream)
		     : rope_pair_m<O1_QUANT_Q5_0, O1_QUANT_Q8_0>(r, a, pdl,
								   stream);
	return err == -ENOSPC ? 1 : err;
}

extern "C" int o1_gemv_q8_norm_rope_kv_parts_cuda(
    const struct o1_rope_kv_args *r, const struct o1_attn_dims *d,
    const float *x, const float *norm_w, float eps,
    const struct o1_gemv_q_part *parts, uint32_t n_parts, uint32_t k,
    bool pdl, cudaStream_t stream)
{
	int err = 1;

	if (!parts || !n_parts) {
		o1_err("gemv_q8_norm_rope_kv_parts: no parts");
		return -EINVAL;
	}
	if (n_parts == 2)
		err = rope_kv_pair(r, d, x, norm_w, eps, parts, k, pdl, stream);
	if (err != 1)
		return err;
	err = 0;
	for (uint32_t i = 0; !err && i < n_parts; i++)
		err = o1_gemv_q8_norm_rope_kv_cuda(
		    r, d, x, norm_w, eps, parts[i].w, parts[i].type,
		    parts[i].col0, parts[i].rows, k, pdl, stream);
	return err;
}

extern "C" bool o1_gemv_q8_norm_folded(void)
{
	return norm_folded<IN_NORM>();
}

extern "C" bool o1_gemv_q8_fits(enum o1_quant_type type, uint32_t m, uint32_t k)
{
	gq_args a = args(NULL, NULL, NULL, NULL, 1, k, 1);
	int p = type == O1_QUANT_Q8_0	? pieces_of<O1_QUANT_Q8_0>()
		: type == O1_QUANT_Q4_0 ? pieces_of<O1_QUANT_Q4_0>()
		: type == O1_QUANT_Q5_0 ? pieces_of<O1_QUANT_Q5_0>()
		: type == O1_QUANT_Q4_K ? pieces_of<O1_QUANT_Q4_K>()
		: type == O1_QUANT_Q6_K ? pieces_of<O1_QUANT_Q6_K>()
					: 0;

	return p && smem_of(a, p, m, DOT_I8) <= GQ_SMEM_MAX;
}

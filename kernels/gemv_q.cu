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
 * aligned (Q8_0 34 bytes, Q4_0 18, Q6_K 210), so the warp does not read
 * them unit by unit: a row is walked in batches of groups_of() groups of
 * 32 units, and the batch's bytes are read with 16-byte loads of the
 * aligned pieces covering them, piece c = lane + 32 i (coalesced, up to
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
 * PDL (cuda_launch.h): each warp loads its first batch, then every thread
 * waits for the previous kernel and lets the next one launch (no kernel
 * writes the weights). Invariants: K a multiple of the type's block, x
 * 16-byte aligned, w as quant_dev.h's loads need, LDY >= N.
 */
#include <errno.h>
#include <stdint.h>

#include <atomic>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "quant_dev.h"

extern "C" {
#include "common/log.h"
}

#define GQ_WARPS   8 /* warps per block */
#define GQ_THREADS (GQ_WARPS * 32)
/* Blocks per multiprocessor: at most 128 registers a thread (the launch
 * bounds), so two fit the register file. */
#define GQ_BPS	   2
#define GQ_DEVICES 64 /* multiprocessor counts cached per device */

enum { OUT_STORE, OUT_SWIGLU };

struct gq_args {
	float *y;	    /* OUT_STORE (M, ldy), columns [0, n) written */
	__nv_bfloat16 *act; /* OUT_SWIGLU (M, n) */
	const uint16_t *x;  /* (M, k) bf16 */
	const uint8_t *w;   /* n rows of row_bytes; OUT_SWIGLU 2 n */
	uint64_t row_bytes; /* of w */
	uint32_t n, k, ldy;
	uint32_t units;	 /* k / 32 */
	uint32_t stride; /* warps in the grid */
};

struct __align__(16) gq_piece
{
	uint32_t v[4]; /* 16 bytes */
};

/* Bytes of 32 units of TYPE (in a row, so whole super-blocks for the K
 * types). */
template <int TYPE> static __host__ __device__ constexpr uint32_t group_bytes()
{
	return TYPE == O1_QUANT_Q8_0   ? 32 * O1_QUANT_Q8_0_BYTES
	       : TYPE == O1_QUANT_Q4_0 ? 32 * O1_QUANT_Q4_0_BYTES
	       : TYPE == O1_QUANT_Q4_K ? 4 * O1_QUANT_Q4_K_BYTES
				       : 4 * O1_QUANT_Q6_K_BYTES;
}

/* Groups of 32 units per batch: about 4 KB, 8-9 pieces per lane. */
template <int TYPE> static __host__ __device__ constexpr uint32_t groups_of()
{
	return TYPE == O1_QUANT_Q8_0 ? 4 : TYPE == O1_QUANT_Q6_K ? 5 : 7;
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

/* Batch B of row J: its units [*U0, *U1), and the first of its aligned
 * pieces and how many there are. */
template <int TYPE>
static __device__ const gq_piece *batch_span(const gq_args &a, uint32_t j,
					     uint32_t b, uint32_t *u0,
					     uint32_t *u1, uint32_t *np)
{
	constexpr uint32_t per = 32 * groups_of<TYPE>();
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
template <int M, int TYPE>
static __device__ void fma_batch(float (&acc)[M], const gq_args &a,
				 const gq_piece *sm, uint32_t j, uint32_t b,
				 uint32_t lane)
{
	uint32_t u0, u1, np;
	const gq_piece *p = batch_span<TYPE>(a, j, b, &u0, &u1, &np);
	/* the row's byte 0 as seen in shared memory (the batch's units lie
	 * in the staged window; other addresses are never read) */
	const uint8_t *row = (const uint8_t *)sm +
			     ((uintptr_t)(a.w + (size_t)j * a.row_bytes) -
			      (uintptr_t)p);

	for (uint32_t u = u0 + lane; u < u1; u += 32) {
		float d[M];

		unit_dots<M, TYPE>(d, row, a.x, a.k, u);
#pragma unroll
		for (int i = 0; i < M; i++)
			acc[i] = acc[i] + d[i];
	}
}

/* The sums of the unit's rows (every lane holds them), stored. */
template <int M, int OUT>
static __device__ void epilogue(const gq_args &a, uint32_t j,
				const float (&res)[OUT == OUT_SWIGLU ? 2 : 1][M],
				uint32_t lane)
{
	if (lane)
		return;
#pragma unroll
	for (int i = 0; i < M; i++) {
		if constexpr (OUT == OUT_SWIGLU) {
			float g = res[0][i];

			a.act[(size_t)i * a.n + j] =
			    __float2bfloat16_rn(g / (1.0f + expf(-g)) * res[1][i]);
		} else {
			a.y[(size_t)i * a.ldy + j] = res[0][i];
		}
	}
}

/* Grid: blocks of GQ_WARPS warps, warp w of block b starting at unit
 * b GQ_WARPS + w and striding by the grid's warps (see the top). A unit
 * is R rows of NB batches: batch t of the walk is batch t % NB of row
 * j + (t / NB) n. */
template <int M, int TYPE, int OUT>
static __global__ void __launch_bounds__(GQ_THREADS, GQ_BPS) gemv_q(gq_args a)
{
	constexpr int P = pieces_of<TYPE>();
	constexpr int R = OUT == OUT_SWIGLU ? 2 : 1;
	constexpr uint32_t per = 32 * groups_of<TYPE>();
	uint32_t lane = threadIdx.x % 32, t = 0;
	uint32_t j = blockIdx.x * GQ_WARPS + threadIdx.x / 32;
	uint32_t nb = (a.units + per - 1) / per, nt = R * nb;
	gq_piece *sm = dyn_smem() + (threadIdx.x / 32) * 32 * P;
	gq_piece wv[P];
	float acc[M], res[R][M];

	if (j < a.n)
		load_batch<TYPE, P>(wv, a, j, 0, lane);
	o1_pdl_wait();
	o1_pdl_trigger();
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
			load_batch<TYPE, P>(wv, a, nj + ntt / nb * a.n,
					    ntt % nb, lane);
		fma_batch<M, TYPE>(acc, a, sm, j + r * a.n, b, lane);
		if (b + 1 == nb) {
#pragma unroll
			for (int i = 0; i < M; i++) {
				for (int o = 16; o; o /= 2)
					acc[i] = acc[i] +
						 __shfl_xor_sync(0xffffffffu,
								 acc[i], o);
#pragma unroll
				for (int q = 0; q < R; q++)
					if ((uint32_t)q == r)
						res[q][i] = acc[i];
				acc[i] = 0.0f;
			}
		}
		if (nj != j)
			epilogue<M, OUT>(a, j, res, lane);
		j = nj, t = ntt;
	}
}

/* Multiprocessors of the current device, asked once per device. */
static uint32_t sm_count(void)
{
	static std::atomic<int> cached[GQ_DEVICES];
	int dev = 0, n = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 ||
	    dev >= GQ_DEVICES) {
		cudaGetLastError();
		return 132;
	}
	n = cached[dev].load(std::memory_order_relaxed);
	if (!n &&
	    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) ==
		cudaSuccess &&
	    n > 0)
		cached[dev].store(n, std::memory_order_relaxed);
	if (n <= 0) {
		cudaGetLastError();
		return 132;
	}
	return (uint32_t)n;
}

template <int M, int TYPE, int OUT>
static int launch_m(gq_args a, bool pdl, cudaStream_t stream)
{
	uint32_t blocks = (a.n + GQ_WARPS - 1) / GQ_WARPS;
	uint32_t cap = sm_count() * GQ_BPS;
	size_t smem = (size_t)GQ_WARPS * 32 * pieces_of<TYPE>() *
		      sizeof(gq_piece);

	blocks = blocks < cap ? blocks : cap;
	a.stride = blocks * GQ_WARPS;
	return O1_CUDA_LAUNCH("gemv_q", (gemv_q<M, TYPE, OUT>), dim3(blocks),
			      dim3(GQ_THREADS), smem, stream, pdl, a);
}

template <int TYPE, int OUT>
static int launch(const gq_args &a, uint32_t m, bool pdl, cudaStream_t stream)
{
	switch (m) {
	case 1:
		return launch_m<1, TYPE, OUT>(a, pdl, stream);
	case 2:
		return launch_m<2, TYPE, OUT>(a, pdl, stream);
	case 3:
		return launch_m<3, TYPE, OUT>(a, pdl, stream);
	default:
		return launch_m<4, TYPE, OUT>(a, pdl, stream);
	}
}

/* The instance for TYPE (checked by the caller). */
template <int OUT>
static int launch_type(const gq_args &a, enum o1_quant_type type, uint32_t m,
		       bool pdl, cudaStream_t stream)
{
	switch (type) {
	case O1_QUANT_Q8_0:
		return launch<O1_QUANT_Q8_0, OUT>(a, m, pdl, stream);
	case O1_QUANT_Q4_0:
		return launch<O1_QUANT_Q4_0, OUT>(a, m, pdl, stream);
	case O1_QUANT_Q4_K:
		return launch<O1_QUANT_Q4_K, OUT>(a, m, pdl, stream);
	default:
		return launch<O1_QUANT_Q6_K, OUT>(a, m, pdl, stream);
	}
}

/* Shapes and alignment both entry points need. */
static int check(const char *what, gq_args &a, const void *out,
		 enum o1_quant_type type, uint32_t m)
{
	if (out && a.x && a.w && m && m <= O1_GEMV_MAX_ROWS && a.n &&
	    a.ldy >= a.n && !o1_quant_row_bytes(type, a.k, &a.row_bytes) &&
	    (uintptr_t)a.x % 16 == 0 && o1_quant_dev_aligned(type, a.w))
		return 0;
	o1_err("%s: bad operands: type %u m %u (at most %d) n %u k %u ldy %u, "
	       "x %p (16-byte aligned) w %p",
	       what, (unsigned)type, m, O1_GEMV_MAX_ROWS, a.n, a.k, a.ldy,
	       (const void *)a.x, (const void *)a.w);
	return -EINVAL;
}

extern "C" int o1_gemv_q_cuda(float *y, const uint16_t *x, const void *w,
			      enum o1_quant_type type, uint32_t m, uint32_t n,
			      uint32_t k, uint32_t ldy, bool pdl,
			      cudaStream_t stream)
{
	gq_args a = {y, NULL, x, (const uint8_t *)w, 0, n, k, ldy, k / 32, 0};
	int err = check("gemv_q", a, y, type, m);

	return err ? err : launch_type<OUT_STORE>(a, type, m, pdl, stream);
}

extern "C" int o1_gemv_q_swiglu_cuda(uint16_t *act, const uint16_t *x,
				     const void *w, enum o1_quant_type type,
				     uint32_t m, uint32_t f, uint32_t k,
				     bool pdl, cudaStream_t stream)
{
	gq_args a = {NULL, (__nv_bfloat16 *)act, x, (const uint8_t *)w, 0, f,
		     k, f, k / 32, 0};
	int err = check("gemv_q_swiglu", a, act, type, m);

	return err ? err : launch_type<OUT_SWIGLU>(a, type, m, pdl, stream);
}

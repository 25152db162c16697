/* Matrix products for few rows (decode) on the device, and their fused
 * decode variants. The product is matmul.h's
 *   y (M,N) f32 = x (M,K) . w (N,K)^T
 * (no bias) with x and w in bf16, for M <= O1_GEMV_MAX_ROWS, where a
 * general GEMM (cuBLAS) reads the weights at a fraction of the memory
 * bandwidth.
 *
 * Arithmetic. A warp computes one output column j (a weight row): lane l
 * takes the 16-byte pieces (8 bf16) c = l, l + 32, l + 64, ... of w's row
 * j, multiplies each into every input row (so w is read once for all M
 * rows), accumulates in f32 in increasing c, then a fixed xor butterfly
 * sums the lanes. Each y[m][j] therefore has one operation order whatever
 * M, N, the grid or the variant: results are bitwise reproducible, a row's
 * result does not depend on the other rows, and the fused variants give
 * the bits of the unfused kernels' composition.
 *
 * Schedule (the speed). The grid is at most GEMV_BPS blocks per
 * multiprocessor of GEMV_WARPS warps, so the next kernel's blocks fit
 * beside it (PDL, below); each warp walks work units (a column, or a pair
 * of columns) unit, unit + warps in the grid, ..., in batches of P pieces
 * per lane and row: the P 16-byte loads of a batch are issued before any
 * is used, and the next batch (of this unit or the next) is loaded before
 * the warp sums and stores the finished unit, so a warp always has loads
 * in flight. Where a row is one batch of half the pieces and warps have
 * several units (K = 896: qwen2.5-0.5b's gate/up and LM head), the
 * default launch is gemv2 instead: two register buffers of half the
 * pieces taken in turn, so two units' loads are in flight (both before
 * the PDL wait at the start) where gemv waited on DRAM once a unit; the
 * same pieces in the same order, the same bits. Likewise a lone input
 * row's product whose row is just over one batch (qwen2.5-0.5b's down
 * product, K = 4864) takes it in one batch of GEMV_WHOLE pieces
 * (whole_row), not a second of 3 to wait for. Weights are read with
 * the non-coherent path without L1 allocation (each byte is read once;
 * L1 keeps the input rows).
 *
 * Variants (one kernel template; kernels_cuda.h has the contracts). The
 * input is bf16 rows, copied into shared memory by each block first
 * (IN_STAGED) or, when M K bf16 exceed GEMV_STAGE_BYTES, read through L1
 * (IN_BF16), or the RMSNorm of f32 rows (IN_NORM, optionally gathered
 * through a row list): each block normalizes the M rows into shared
 * memory as bf16 first, with rms_reduce.h's arithmetic, so they are
 * o1_rmsnorm_cuda's output bit for bit. Where the input comes from changes
 * no bit. The output is stored (OUT_STORE), added to y (OUT_ADD: the residual
 * stream; each element belongs to one lane), or computed from a pair of
 * columns: bf16(silu(gate) * up) as swiglu.cu computes it (OUT_SWIGLU:
 * gate row j and up row N + j), or the QKV epilogue of rope.cu's
 * o1_rope_kv_write_cuda (OUT_ROPE: bias, the RoPE rotation of a q or k
 * pair (i, i + R/2) with rope_dev.h's arithmetic, q stored as f32, k and v
 * written to their KV pages as bf16; unrotated dims and v in pairs of the
 * same head).
 *
 * PDL (cuda_launch.h): before it waits for the previous kernel each warp
 * loads its first batch of weights (no kernel writes the weights), so the
 * loads overlap the previous kernel's tail and the launch; then every
 * thread waits and lets the next kernel launch.
 * Invariants: K % 8 == 0, x, w (and IN_NORM's rows and weight) 16-byte
 * aligned (rows then are too); IN_NORM: K <= O1_GEMV_NORM_MAX_K.
 */
#include <errno.h>
#include <stdint.h>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "rms_reduce.h"
#include "rope_dev.h"

extern "C" {
#include "common/log.h"
}

#define GEMV_WARPS   8 /* warps per block */
#define GEMV_THREADS (GEMV_WARPS * 32)
/* Blocks per multiprocessor: two, at most 128 registers a thread (the
 * launch bounds), so both fit the register file. */
#define GEMV_BPS O1_GEMV_BPS_DEFAULT

/* Staged bf16 input rows at most (shared memory per block). */
#define GEMV_STAGE_BYTES (64u << 10)
/* Input pieces a thread loads at once when staging them. */
#define GEMV_STAGE_LOADS 4
/* Pieces a lane a batch of whole_row's launch (one row, one unit a warp). */
#define GEMV_WHOLE 20

enum { IN_BF16, IN_STAGED, IN_NORM };
enum { OUT_STORE, OUT_ADD, OUT_SWIGLU, OUT_ROPE };

struct gemv_args {
	float *y;		/* OUT_STORE (M,N); OUT_ADD (M,N), added to */
	__nv_bfloat16 *act;	/* OUT_SWIGLU (M,N) */
	const uint4 *x;		/* IN_BF16, IN_STAGED (M,K) bf16, 8 a piece */
	const float *xf;	/* IN_NORM (.,K) f32 */
	const uint32_t *rows;	/* IN_NORM: input row i is xf row rows[i] */
	const float *nw;	/* IN_NORM (K) f32: the norm's weight */
	const uint4 *w;		/* (N,K); OUT_SWIGLU (2N,K): gate, then up */
	uint32_t n, k8;		/* output columns; K / 8 */
	uint32_t units, stride; /* work units; warps in the grid */
	float eps;		/* IN_NORM */
	rope_kv_epi r;		/* OUT_ROPE */
};

/* Weight rows a work unit reads: two for the paired outputs. */
template <int OUT> static __host__ __device__ constexpr int rows_of()
{
	return OUT == OUT_SWIGLU || OUT == OUT_ROPE ? 2 : 1;
}

/* Pieces per lane and weight row in one batch: 16 (256 bytes in flight
 * per lane) for one weight row, 8 per row for two (4 for OUT_ROPE, whose
 * epilogue needs the registers); half as many for 3 or 4 input rows
 * (their pieces need registers too). bench_gemv on the H200 (2026-12-01):
 * against 8 and 4, the presets' products at one input row took 2-24% less
 * time (the most for K = 4096, whose rows one batch then covers). */
template <int M, int OUT> static __host__ __device__ constexpr int batch_of()
{
	return (OUT == OUT_ROPE	      ? 4
		: rows_of<OUT>() == 2 ? 8
				      : 16) /
	       (M > 2 ? 2 : 1);
}

/* The block's dynamic shared memory (IN_NORM: partial sums, then the
 * normalized rows). */
static __device__ unsigned char *dyn_smem(void)
{
	extern __shared__ __align__(16) unsigned char smem[];
	return smem;
}

/* A weight piece: read once, so not kept in L1. Volatile, so the
 * compiler keeps the loads where they are written: issued before the
 * warp's sums and stores of the previous unit, not sunk to their use. */
static __device__ uint4 ldw(const uint4 *p)
{
#ifdef __CUDA_ARCH__
	uint4 v;

	asm volatile(
	    "ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
	    : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
	    : "l"(p));
	return v;
#else
	return *p;
#endif
}

/* The 8 products of two 16-byte pieces, summed pairwise in a fixed order. */
static __device__ float dot8(uint4 a, uint4 b)
{
	const __nv_bfloat162 *pa = (const __nv_bfloat162 *)&a;
	const __nv_bfloat162 *pb = (const __nv_bfloat162 *)&b;
	float s[4];

#pragma unroll
	for (int i = 0; i < 4; i++) {
		float2 fa = __bfloat1622float2(pa[i]);
		float2 fb = __bfloat1622float2(pb[i]);

		s[i] = __fmul_rn(fa.x, fb.x) + __fmul_rn(fa.y, fb.y);
	}
	return (s[0] + s[1]) + (s[2] + s[3]);
}

/* Offset of the normalized rows in shared memory, and the total. */
static __host__ __device__ size_t norm_rows_off(int m)
{
	return ((size_t)m * RMS_VWARPS * sizeof(float) + 15) / 16 * 16;
}

static size_t norm_smem(int m, uint32_t k8)
{
	return norm_rows_off(m) + (size_t)m * k8 * 16;
}

/* IN_NORM: the M rows of xf normalized into shared memory, (M, k8)
 * pieces of 8 bf16, pieces written as o1_rmsnorm_cuda writes elements. */
template <int M>
static __device__ void stage_norm(const gemv_args &a, unsigned char *sm)
{
	float(*part)[RMS_VWARPS] = (float(*)[RMS_VWARPS])sm;
	uint4 *xs = (uint4 *)(sm + norm_rows_off(M));
	uint32_t k = a.k8 * 8;
	const float *xr[M];
	float ss[M];

#pragma unroll
	for (int i = 0; i < M; i++)
		xr[i] = a.xf + (size_t)(a.rows ? a.rows[i] : i) * k;
	rms_sums<GEMV_THREADS, M>(ss, k, part,
				  [&](int i, uint32_t e) { return xr[i][e]; });
#pragma unroll
	for (int i = 0; i < M; i++) {
		float inv = rms_inv(ss[i], k, a.eps);

		for (uint32_t c = threadIdx.x; c < a.k8; c += GEMV_THREADS) {
			const float4 *xv = (const float4 *)(xr[i] + 8 * c);
			const float4 *wv = (const float4 *)(a.nw + 8 * c);
			float4 x0 = xv[0], x1 = xv[1], w0 = wv[0], w1 = wv[1];
			uint4 piece;
			__nv_bfloat162 *p = (__nv_bfloat162 *)&piece;

			p[0] = __halves2bfloat162(rms_out(w0.x, x0.x, inv),
						  rms_out(w0.y, x0.y, inv));
			p[1] = __halves2bfloat162(rms_out(w0.z, x0.z, inv),
						  rms_out(w0.w, x0.w, inv));
			p[2] = __halves2bfloat162(rms_out(w1.x, x1.x, inv),
						  rms_out(w1.y, x1.y, inv));
			p[3] = __halves2bfloat162(rms_out(w1.z, x1.z, inv),
						  rms_out(w1.w, x1.w, inv));
			xs[(size_t)i * a.k8 + c] = piece;
		}
	}
	__syncthreads();
}

/* IN_STAGED: the M rows of x copied into shared memory as norm rows are,
 * GEMV_STAGE_LOADS pieces a thread loaded before any is stored (one L2
 * round trip for up to that many pieces a thread, where a load-store loop
 * waits for each: qwen2.5-0.5b's down input is 2.4 pieces a thread). */
template <int M>
static __device__ void stage_x(const gemv_args &a, unsigned char *sm)
{
	uint4 *xs = (uint4 *)(sm + norm_rows_off(M));
	uint32_t n = M * a.k8;

	for (uint32_t c = threadIdx.x; c < n;
	     c += GEMV_STAGE_LOADS * GEMV_THREADS) {
		uint4 v[GEMV_STAGE_LOADS];

#pragma unroll
		for (int i = 0; i < GEMV_STAGE_LOADS; i++)
			if (c + i * GEMV_THREADS < n)
				v[i] = a.x[c + i * GEMV_THREADS];
#pragma unroll
		for (int i = 0; i < GEMV_STAGE_LOADS; i++)
			if (c + i * GEMV_THREADS < n)
				xs[c + i * GEMV_THREADS] = v[i];
	}
	__syncthreads();
}

/* Piece C of input row I: global (IN_BF16) or staged (IN_STAGED,
 * IN_NORM). */
template <int M, int IN>
static __device__ uint4 x_piece(const gemv_args &a, const unsigned char *sm,
				int i, uint32_t c)
{
	if constexpr (IN != IN_BF16)
		return ((const uint4 *)(sm + norm_rows_off(
						 M)))[(size_t)i * a.k8 + c];
	else
		return __ldg(a.x + (size_t)i * a.k8 + c);
}

/* The weight rows of unit U. OUT_ROPE: unit = (head, e), e < D/2; q and k
 * heads pair (e, e + half) for e < half (rotated), then the unrotated dims
 * [2 half, D) in two halves; v heads pair (e, e + D/2). */
template <int OUT>
static __device__ void unit_rows(const gemv_args &a, uint32_t u,
				 uint32_t (&row)[rows_of<OUT>()])
{
	if constexpr (OUT == OUT_ROPE) {
		uint32_t hd2 = a.r.d / 2, head = u / hd2, e = u % hd2;
		uint32_t base = head * a.r.d;

		if (head >= a.r.hq + a.r.hkv) {
			row[0] = base + e, row[1] = base + e + hd2;
		} else if (e < a.r.half) {
			row[0] = base + e, row[1] = base + e + a.r.half;
		} else {
			row[0] = base + a.r.half + e;
			row[1] = row[0] + (hd2 - a.r.half);
		}
	} else if constexpr (OUT == OUT_SWIGLU) {
		row[0] = u, row[1] = a.n + u;
	} else {
		row[0] = u;
	}
}

/* Whether batch B lies within the row: its loads need no bounds check
 * (and so are issued back to back). */
template <int P>
static __device__ bool full_batch(const gemv_args &a, uint32_t b)
{
	return (b + 1) * P * 32 <= a.k8;
}

/* Batch B of the lane's pieces of ROW's weight rows: c = lane + 32 (B P +
 * i), i < P, those below k8. */
template <int R, int P>
static __device__ void load_batch(uint4 (&wv)[R][P], const gemv_args &a,
				  const uint32_t (&row)[R], uint32_t b,
				  uint32_t lane)
{
	const uint4 *wr[R];

#pragma unroll
	for (int r = 0; r < R; r++)
		wr[r] = a.w + (size_t)row[r] * a.k8 + lane + 32 * b * P;
	if (full_batch<P>(a, b)) {
#pragma unroll
		for (int i = 0; i < P; i++)
#pragma unroll
			for (int r = 0; r < R; r++)
				wv[r][i] = ldw(wr[r] + 32 * i);
		return;
	}
#pragma unroll
	for (int i = 0; i < P; i++)
		if (lane + 32 * (b * P + i) < a.k8)
#pragma unroll
			for (int r = 0; r < R; r++)
				wv[r][i] = ldw(wr[r] + 32 * i);
}

/* acc[r][m] += piece C of weight row r (W[r]) . input row m. */
template <int M, int R, int IN>
static __device__ void fma_piece(float (&acc)[R][M], const uint4 (&w)[R],
				 const gemv_args &a, const unsigned char *sm,
				 uint32_t c)
{
#pragma unroll
	for (int m = 0; m < M; m++) {
		uint4 xv = x_piece<M, IN>(a, sm, m, c);

#pragma unroll
		for (int r = 0; r < R; r++)
			acc[r][m] += dot8(w[r], xv);
	}
}

/* acc[r][m] += batch B of weight row r . input row m, in increasing c. */
template <int M, int R, int P, int IN>
static __device__ void fma_batch(float (&acc)[R][M], const uint4 (&wv)[R][P],
				 const gemv_args &a, const unsigned char *sm,
				 uint32_t b, uint32_t lane)
{
	bool full = full_batch<P>(a, b);

#pragma unroll
	for (int i = 0; i < P; i++) {
		uint32_t c = lane + 32 * (b * P + i);
		uint4 w[R];

		if (!full && c >= a.k8)
			break;
#pragma unroll
		for (int r = 0; r < R; r++)
			w[r] = wv[r][i];
		fma_piece<M, R, IN>(acc, w, a, sm, c);
	}
}

/* swiglu.cu's silu(gate) * up, rounded to bf16. */
static __device__ __nv_bfloat16 silu_mul(float g, float u)
{
	return __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
}

/* OUT_ROPE for input row M: the pair (V0 at weight row ROW0, V1 at ROW1)
 * of the fused QKV row, as o1_rope_kv_write_cuda writes it. */
static __device__ void rope_out(const gemv_args &a, uint32_t m,
				const uint32_t (&row)[2], float v0, float v1)
{
	rope_store_pair(a.r, m, row[0], row[1], v0, v1);
}

/* The finished unit U (weight rows ROW), every lane holding the sums:
 * lane m writes input row m's outputs. */
template <int M, int OUT>
static __device__ void
epilogue(const gemv_args &a, uint32_t u, const uint32_t (&row)[rows_of<OUT>()],
	 const float (&acc)[rows_of<OUT>()][M], float y_old, uint32_t lane)
{
#pragma unroll
	for (int m = 0; m < M; m++) {
		size_t at = (size_t)m * a.n + u;

		if (lane != (uint32_t)m)
			continue;
		if constexpr (OUT == OUT_STORE)
			a.y[at] = acc[0][m];
		else if constexpr (OUT == OUT_ADD)
			a.y[at] = y_old + acc[0][m];
		else if constexpr (OUT == OUT_SWIGLU)
			a.act[at] = silu_mul(acc[0][m], acc[1][m]);
		else
			rope_out(a, m, row, acc[0][m], acc[1][m]);
	}
}

/* The warp's sums in place: every lane gets them (the fixed butterfly). */
template <int M, int R> static __device__ void warp_sums(float (&acc)[R][M])
{
#pragma unroll
	for (int r = 0; r < R; r++)
#pragma unroll
		for (int m = 0; m < M; m++)
			for (int o = 16; o; o /= 2)
				acc[r][m] +=
				    __shfl_xor_sync(0xffffffffu, acc[r][m], o);
}

template <int M, int R> static __device__ void zero(float (&acc)[R][M])
{
#pragma unroll
	for (int r = 0; r < R; r++)
#pragma unroll
		for (int m = 0; m < M; m++)
			acc[r][m] = 0.0f;
}

/* Grid: blocks of GEMV_WARPS warps, warp w of block b starting at unit
 * b GEMV_WARPS + w and striding by the grid's warps (see the top).
 * Shared (IN_NORM, IN_STAGED): partial sums (IN_NORM), then the input,
 * M K bf16. */
template <int M, int IN, int OUT, int P>
static __global__ void __launch_bounds__(GEMV_THREADS, GEMV_BPS)
    gemv(gemv_args a)
{
	constexpr int R = rows_of<OUT>();
	uint32_t lane = threadIdx.x % 32, b = 0;
	uint32_t u = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
	uint32_t nb = (a.k8 + 32 * P - 1) / (32 * P);
	unsigned char *sm = dyn_smem();
	uint32_t row[R];
	uint4 wv[R][P];
	float acc[R][M], y_old = 0.0f;

	if (u < a.units) {
		unit_rows<OUT>(a, u, row);
		load_batch<R, P>(wv, a, row, 0, lane);
	}
	o1_pdl_wait();
	o1_pdl_trigger();
	if constexpr (IN == IN_NORM)
		stage_norm<M>(a, sm);
	else if constexpr (IN == IN_STAGED)
		stage_x<M>(a, sm);
	zero<M, R>(acc);
	while (u < a.units) {
		uint32_t nu = b + 1 < nb ? u : u + a.stride;
		uint32_t nbt = b + 1 < nb ? b + 1 : 0, nrow[R];

		/* OUT_ADD: lane m reads y[m][u] when the unit starts, so the
		 * read is done by the time the sum is added to it */
		if (OUT == OUT_ADD && b == 0 && lane < M)
			y_old = a.y[(size_t)lane * a.n + u];
		fma_batch<M, R, P, IN>(acc, wv, a, sm, b, lane);
#pragma unroll
		for (int r = 0; r < R; r++)
			nrow[r] = row[r];
		if (nu != u && nu < a.units)
			unit_rows<OUT>(a, nu, nrow);
		if (nu < a.units)
			load_batch<R, P>(wv, a, nrow, nbt, lane);
		if (nu != u) {
			warp_sums<M, R>(acc);
			epilogue<M, OUT>(a, u, row, acc, y_old, lane);
			zero<M, R>(acc);
		}
#pragma unroll
		for (int r = 0; r < R; r++)
			row[r] = nrow[r];
		u = nu, b = nbt;
	}
}

/* One unit of gemv2: consumes WV (unit U's one batch), loads into it
 * the unit after the one in the other buffer (U + 2 strides), sums and
 * stores U. A unit's weight rows are found again where needed (a few
 * integer operations; registers are what limits the batch). */
template <int M, int IN, int OUT, int P>
static __device__ void step2(const gemv_args &a, const unsigned char *sm,
			     uint32_t lane, uint4 (&wv)[rows_of<OUT>()][P],
			     float (&acc)[rows_of<OUT>()][M], uint32_t u)
{
	constexpr int R = rows_of<OUT>();
	uint32_t u2 = u + 2 * a.stride, row[R];
	float y_old = 0.0f;

	/* OUT_ADD: read before the sums, as gemv does */
	if (OUT == OUT_ADD && lane < M)
		y_old = a.y[(size_t)lane * a.n + u];
	fma_batch<M, R, P, IN>(acc, wv, a, sm, 0, lane);
	if (u2 < a.units) {
		unit_rows<OUT>(a, u2, row);
		load_batch<R, P>(wv, a, row, 0, lane);
	}
	unit_rows<OUT>(a, u, row);
	warp_sums<M, R>(acc);
	epilogue<M, OUT>(a, u, row, acc, y_old, lane);
	zero<M, R>(acc);
}

/* gemv for rows of one batch with two in flight a warp (register buffers
 * taken in turn, a unit each): while one unit is summed the next is
 * loaded, and the one after is already on its way; the first two units'
 * weights are loaded before the PDL wait. A warp waits on DRAM about half
 * as many times as gemv's (launch_setup picks it: two_buffers). The
 * pieces, their order and the sums are gemv's: the same bits.
 * Invariant: k8 <= 32 P. */
template <int M, int IN, int OUT, int P>
static __global__ void __launch_bounds__(GEMV_THREADS, GEMV_BPS)
    gemv2(gemv_args a)
{
	constexpr int R = rows_of<OUT>();
	uint32_t lane = threadIdx.x % 32;
	uint32_t u = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
	unsigned char *sm = dyn_smem();
	uint32_t row[R];
	uint4 w0[R][P], w1[R][P];
	float acc[R][M];

	if (u < a.units) {
		unit_rows<OUT>(a, u, row);
		load_batch<R, P>(w0, a, row, 0, lane);
	}
	if (u + a.stride < a.units) {
		unit_rows<OUT>(a, u + a.stride, row);
		load_batch<R, P>(w1, a, row, 0, lane);
	}
	o1_pdl_wait();
	o1_pdl_trigger();
	if constexpr (IN == IN_NORM)
		stage_norm<M>(a, sm);
	else if constexpr (IN == IN_STAGED)
		stage_x<M>(a, sm);
	zero<M, R>(acc);
	for (; u < a.units; u += 2 * a.stride) {
		step2<M, IN, OUT, P>(a, sm, lane, w0, acc, u);
		if (u + a.stride >= a.units)
			break;
		step2<M, IN, OUT, P>(a, sm, lane, w1, acc, u + a.stride);
	}
}

/* The grid for A's units at BPS blocks per multiprocessor (the launch
 * setup bench_gemv.cu varies); sets A's stride. */
static uint32_t grid_for(gemv_args &a, uint32_t bps)
{
	uint32_t blocks = (a.units + GEMV_WARPS - 1) / GEMV_WARPS;
	uint32_t cap = o1_cuda_sm_count() * (bps ? bps : 1);

	blocks = blocks < cap ? blocks : cap;
	a.stride = blocks * GEMV_WARPS;
	return blocks;
}

template <int M, int IN, int OUT, int P, bool TWO = false>
static int launch(gemv_args a, uint32_t bps, bool pdl, cudaStream_t stream)
{
	void (*k)(gemv_args) = gemv<M, IN, OUT, P>;
	size_t smem = IN != IN_BF16 ? norm_smem(M, a.k8) : 0;
	uint32_t blocks = grid_for(a, bps);
	int err = 0;

	if constexpr (TWO)
		k = gemv2<M, IN, OUT, P>;
	if (smem > 48 * 1024)
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	return err ? err
		   : O1_CUDA_LAUNCH("gemv", k, dim3(blocks), dim3(GEMV_THREADS),
				    smem, stream, pdl, a);
}

/* Whether the default setup runs gemv2 with batches of LO pieces (half
 * the default's, the same registers for two): a row is one such batch and
 * some warp has two units or more (qwen2.5-0.5b's gate/up and head, K =
 * 896; llama3.2-1b's head). Rows of several batches keep gemv's one
 * batch of twice the pieces. */
static bool two_buffers(gemv_args a, uint32_t lo, uint32_t bps)
{
	grid_for(a, bps);
	return a.k8 <= 32 * lo && a.units > a.stride;
}

/* Whether the default setup of one input row runs gemv with batches of
 * GEMV_WHOLE pieces: a row is more than one batch of D but one of
 * GEMV_WHOLE, and every warp has one unit (qwen2.5-0.5b's down product,
 * K = 4864: 19 pieces a lane, where D = 16 left a second batch of 3 to
 * wait for after the first). Bf16 inputs only: the normalizing stage
 * leaves too few registers for the batch. */
static bool whole_row(gemv_args a, uint32_t d, uint32_t bps)
{
	grid_for(a, bps);
	return a.k8 > 32 * d && a.k8 <= 32 * GEMV_WHOLE && a.units <= a.stride;
}

/* The pieces per lane a batch that a setup may name for M rows and
 * variant OUT: the default D = batch_of, and D / 2 when at least 2 (M =
 * 3, which no bucket step has, only D). Not 2 D: batch_of's values are
 * the most the registers hold (ptxas spills above them at 128 registers a
 * thread, the launch bounds). */
template <int M, int OUT> static uint32_t pieces_of(uint8_t (&out)[3])
{
	constexpr int D = batch_of<M, OUT>();
	uint32_t n = 0;

	out[n++] = D;
	if (M != 3 && D / 2 >= 2)
		out[n++] = D / 2;
	return n;
}

/* The instance for M rows and setup U (checked by setup_ok): the
 * default's batch or half of it. */
template <int M, int IN, int OUT>
static int launch_setup(const gemv_args &a, o1_gemv_setup u, bool pdl,
			cudaStream_t stream)
{
	constexpr int D = batch_of<M, OUT>();
	constexpr int LO = M != 3 && D / 2 >= 2 ? D / 2 : D;
	uint32_t bps = u.bps ? u.bps : GEMV_BPS;

	if (u.pieces == LO)
		return launch<M, IN, OUT, LO>(a, bps, pdl, stream);
	if constexpr (LO != D) {
		if (two_buffers(a, LO, bps))
			return launch<M, IN, OUT, LO, true>(a, bps, pdl,
							    stream);
	}
	if constexpr (M == 1 && rows_of<OUT>() == 1 && IN != IN_NORM) {
		if (whole_row(a, D, bps))
			return launch<M, IN, OUT, GEMV_WHOLE>(a, bps, pdl,
							      stream);
	}
	return launch<M, IN, OUT, D>(a, bps, pdl, stream);
}

/* The instance for M rows (1 .. O1_GEMV_MAX_ROWS, checked). */
template <int IN, int OUT>
static int launch_rows(const gemv_args &a, uint32_t m, o1_gemv_setup u,
		       bool pdl, cudaStream_t stream)
{
	switch (m) {
	case 1:
		return launch_setup<1, IN, OUT>(a, u, pdl, stream);
	case 2:
		return launch_setup<2, IN, OUT>(a, u, pdl, stream);
	case 3:
		return launch_setup<3, IN, OUT>(a, u, pdl, stream);
	default:
		return launch_setup<4, IN, OUT>(a, u, pdl, stream);
	}
}

/* The OUT variant of the public enum. */
template <int OUT> static uint32_t pieces_rows(uint32_t m, uint8_t (&out)[3])
{
	switch (m) {
	case 1:
		return pieces_of<1, OUT>(out);
	case 2:
		return pieces_of<2, OUT>(out);
	case 3:
		return pieces_of<3, OUT>(out);
	default:
		return pieces_of<4, OUT>(out);
	}
}

extern "C" uint32_t o1_gemv_pieces(enum o1_gemv_variant v, uint32_t m,
				   uint8_t out[3])
{
	uint8_t p[3] = {0, 0, 0};
	uint32_t n = 0;

	if (!m || m > O1_GEMV_MAX_ROWS)
		return 0;
	switch (v) {
	case O1_GEMV_PLAIN:
	case O1_GEMV_ADD:
	case O1_GEMV_NORM:
		n = pieces_rows<OUT_STORE>(m, p);
		break;
	case O1_GEMV_SWIGLU:
		n = pieces_rows<OUT_SWIGLU>(m, p);
		break;
	case O1_GEMV_ROPE:
		n = pieces_rows<OUT_ROPE>(m, p);
		break;
	default:
		return 0;
	}
	for (uint32_t i = 0; i < n; i++)
		out[i] = p[i];
	return n;
}

/* Whether U is a setup of variant V over M rows: -EINVAL (logged) if not. */
static int setup_ok(const char *what, enum o1_gemv_variant v, uint32_t m,
		    o1_gemv_setup u)
{
	uint8_t p[3];
	uint32_t n = o1_gemv_pieces(v, m, p);
	bool ok = u.bps <= O1_GEMV_BPS_MAX && !u.pieces;

	for (uint32_t i = 0; i < n && !ok; i++)
		ok = u.bps <= O1_GEMV_BPS_MAX && u.pieces == p[i];
	if (ok)
		return 0;
	o1_err("%s: bad setup: %u blocks a multiprocessor (at most %d), %u "
	       "pieces (not one of the %u offered for %u rows)",
	       what, u.bps, O1_GEMV_BPS_MAX, u.pieces, n, m);
	return -EINVAL;
}

/* Shapes and alignment every variant needs; OUT and W are the output and
 * the matrix, X the input (bf16 rows, or f32 rows to normalize). */
static int check(const char *what, const void *out, const void *x,
		 const void *w, uint32_t m, uint32_t n, uint32_t k)
{
	if (out && x && w && m && m <= O1_GEMV_MAX_ROWS && n && k &&
	    k % 8 == 0 && ((uintptr_t)x | (uintptr_t)w) % 16 == 0)
		return 0;
	o1_err("%s: bad operands: m %u (at most %d) n %u k %u (a multiple of "
	       "8), x %p w %p (16-byte aligned)",
	       what, m, O1_GEMV_MAX_ROWS, n, k, x, w);
	return -EINVAL;
}

/* What the normalized input needs beyond check(). */
static int check_norm(const char *what, const float *nw, uint32_t k, float eps)
{
	if (nw && (uintptr_t)nw % 16 == 0 && k <= O1_GEMV_NORM_MAX_K &&
	    eps >= 0)
		return 0;
	o1_err("%s: bad norm: weight %p (16-byte aligned), k %u (at most "
	       "%d), eps %g",
	       what, (const void *)nw, k, O1_GEMV_NORM_MAX_K, eps);
	return -EINVAL;
}

/* Whether M bf16 input rows of K are copied to shared memory first. */
static bool staged(uint32_t m, uint32_t k)
{
	return (uint64_t)m * k * 2 <= GEMV_STAGE_BYTES;
}

/* Arguments with everything but the variant's own fields. */
static gemv_args args(const uint16_t *x, const float *xf, const float *nw,
		      float eps, const uint16_t *w, uint32_t n, uint32_t k)
{
	gemv_args a = {};

	a.x = (const uint4 *)x, a.xf = xf, a.nw = nw, a.eps = eps;
	a.w = (const uint4 *)w, a.n = n, a.k8 = k / 8, a.units = n;
	return a;
}

extern "C" int o1_gemv_bf16_cuda(float *y, const uint16_t *x, const uint16_t *w,
				 uint32_t m, uint32_t n, uint32_t k,
				 struct o1_gemv_setup u, bool pdl,
				 cudaStream_t stream)
{
	gemv_args a = args(x, NULL, NULL, 0, w, n, k);
	int err = check("gemv", y, x, w, m, n, k);

	err = err ? err : setup_ok("gemv", O1_GEMV_PLAIN, m, u);
	a.y = y;
	if (err)
		return err;
	return staged(m, k)
		   ? launch_rows<IN_STAGED, OUT_STORE>(a, m, u, pdl, stream)
		   : launch_rows<IN_BF16, OUT_STORE>(a, m, u, pdl, stream);
}

extern "C" int o1_gemv_add_bf16_cuda(float *y, const uint16_t *x,
				     const uint16_t *w, uint32_t m, uint32_t n,
				     uint32_t k, struct o1_gemv_setup u,
				     bool pdl, cudaStream_t stream)
{
	gemv_args a = args(x, NULL, NULL, 0, w, n, k);
	int err = check("gemv_add", y, x, w, m, n, k);

	err = err ? err : setup_ok("gemv_add", O1_GEMV_ADD, m, u);
	a.y = y;
	if (err)
		return err;
	return staged(m, k)
		   ? launch_rows<IN_STAGED, OUT_ADD>(a, m, u, pdl, stream)
		   : launch_rows<IN_BF16, OUT_ADD>(a, m, u, pdl, stream);
}

extern "C" int o1_gemv_norm_bf16_cuda(float *y, const float *x,
				      const float *norm_w, float eps,
				      const uint16_t *w, uint32_t m, uint32_t n,
				      uint32_t k, struct o1_gemv_setup u,
				      bool pdl, cudaStream_t stream)
{
	return o1_gemv_norm_rows_bf16_cuda(y, x, NULL, norm_w, eps, w, m, n, k,
					   u, pdl, stream);
}

extern "C" int o1_gemv_norm_rows_bf16_cuda(
    float *y, const float *x, const uint32_t *rows, const float *norm_w,
    float eps, const uint16_t *w, uint32_t m, uint32_t n, uint32_t k,
    struct o1_gemv_setup u, bool pdl, cudaStream_t stream)
{
	gemv_args a = args(NULL, x, norm_w, eps, w, n, k);
	int err = check("gemv_norm", y, x, w, m, n, k);

	err = err ? err : check_norm("gemv_norm", norm_w, k, eps);
	err = err ? err : setup_ok("gemv_norm", O1_GEMV_NORM, m, u);
	a.y = y, a.rows = rows;
	return err ? err
		   : launch_rows<IN_NORM, OUT_STORE>(a, m, u, pdl, stream);
}

extern "C" int o1_gemv_norm_swiglu_bf16_cuda(uint16_t *act, const float *x,
					     const float *norm_w, float eps,
					     const uint16_t *w, uint32_t m,
					     uint32_t f, uint32_t k,
					     struct o1_gemv_setup u, bool pdl,
					     cudaStream_t stream)
{
	gemv_args a = args(NULL, x, norm_w, eps, w, f, k);
	int err = check("gemv_norm_swiglu", act, x, w, m, f, k);

	err = err ? err : check_norm("gemv_norm_swiglu", norm_w, k, eps);
	err = err ? err : setup_ok("gemv_norm_swiglu", O1_GEMV_SWIGLU, m, u);
	a.act = (__nv_bfloat16 *)act;
	return err ? err
		   : launch_rows<IN_NORM, OUT_SWIGLU>(a, m, u, pdl, stream);
}

/* What OUT_ROPE needs beyond check() and check_norm(): the operands and
 * shape rope.cu's o1_rope_kv_write_cuda takes. */
static int check_rope(const struct o1_rope_kv_args *r,
		      const struct o1_attn_dims *d, uint32_t m)
{
	if (r->q && r->k_cache && r->v_cache && r->pos && r->slots &&
	    r->inv_freq && r->n_tokens == m && d->n_heads && d->n_kv_heads &&
	    d->n_heads % d->n_kv_heads == 0 && d->head_dim &&
	    d->head_dim % 2 == 0 && d->page_tokens && r->rot_dim &&
	    r->rot_dim % 2 == 0 && r->rot_dim <= d->head_dim &&
	    d->page_stride >=
		(uint64_t)d->n_kv_heads * d->page_tokens * d->head_dim)
		return 0;
	o1_err("gemv_norm_rope_kv: bad shape: %u tokens for %u rows, heads "
	       "%u/%u of %u, rot_dim %u, page %u tokens stride %llu",
	       r->n_tokens, m, d->n_heads, d->n_kv_heads, d->head_dim,
	       r->rot_dim, d->page_tokens, (unsigned long long)d->page_stride);
	return -EINVAL;
}

extern "C" int o1_gemv_norm_rope_kv_cuda(const struct o1_rope_kv_args *r,
					 const struct o1_attn_dims *d,
					 const float *x, const float *norm_w,
					 float eps, const uint16_t *w,
					 uint32_t m, uint32_t k,
					 struct o1_gemv_setup u, bool pdl,
					 cudaStream_t stream)
{
	uint32_t n = (d->n_heads + 2 * d->n_kv_heads) * d->head_dim;
	gemv_args a = args(NULL, x, norm_w, eps, w, n, k);
	int err = check_rope(r, d, m);

	err = err ? err : check("gemv_norm_rope_kv", r->q, x, w, m, n, k);
	err = err ? err : check_norm("gemv_norm_rope_kv", norm_w, k, eps);
	err = err ? err : setup_ok("gemv_norm_rope_kv", O1_GEMV_ROPE, m, u);
	a.units = n / 2;
	a.r = rope_kv_epi_of(r, d, 0);
	return err ? err : launch_rows<IN_NORM, OUT_ROPE>(a, m, u, pdl, stream);
}

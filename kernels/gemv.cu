/* Matrix products for few rows (decode) on the device, and their fused
 * decode variants. The product is matmul.h's
 *   y (M,N) f32 = x (M,K) . w (N,K)^T
 * (no bias) with x and w in bf16, for M <= O1_GEMV_MAX_ROWS, where a
 * general GEMM (cuBLAS) reads the weights at a fraction of the memory
 * bandwidth. A warp per output column j: its lanes stride over K in
 * 16-byte pieces (8 bf16) of w's row j, each piece multiplied into every
 * row of x (so w is read once for all M rows), f32 accumulation per lane
 * in increasing k, then a fixed warp tree sum. Each y[m][j] therefore has
 * one operation order whatever M, N or the launch: results are bitwise
 * reproducible, and a row's result does not depend on the other rows.
 *
 * Variants (one kernel template; kernels_cuda.h has the contracts). The
 * input is bf16 rows (IN_BF16), or the RMSNorm of f32 rows (IN_NORM): each
 * block normalizes the M rows into shared memory as bf16 first, with
 * rms_reduce.h's arithmetic, so they are o1_rmsnorm_cuda's output bit for
 * bit. The output is stored (OUT_STORE), added to y (OUT_ADD: the
 * residual stream; each element belongs to one lane), or, with two
 * columns per warp (gate row j and up row N + j of w), bf16(silu(gate) *
 * up) as swiglu.cu computes it (OUT_SWIGLU). Every column keeps the
 * product's operation order, so a fused launch gives the bits of the
 * unfused kernels' composition.
 *
 * PDL (cuda_launch.h): thread 0 of a block first asks for the block's
 * weight rows in L2 (at most GEMV_PREFETCH_BYTES per range: no kernel
 * writes the weights), so their reads overlap the previous kernel's tail
 * and the launch; then every thread waits for the previous kernel and lets
 * the next one launch. Without PDL nothing is prefetched.
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

extern "C" {
#include "common/log.h"
}

#define GEMV_WARPS   4 /* output columns per block */
#define GEMV_THREADS (GEMV_WARPS * 32)
/* Per block and range: four rows of K = 4096 (more would crowd L2 while
 * the previous kernel streams its own weights through it). */
#define GEMV_PREFETCH_BYTES (32u << 10)

enum { IN_BF16, IN_NORM };
enum { OUT_STORE, OUT_ADD, OUT_SWIGLU };

struct gemv_args {
	float *y;	    /* OUT_STORE (M,N); OUT_ADD (M,N), added to */
	__nv_bfloat16 *act; /* OUT_SWIGLU (M,N) */
	const uint4 *x;	    /* IN_BF16 (M,K) bf16, 8 a piece */
	const float *xf;    /* IN_NORM (M,K) f32 */
	const float *nw;    /* IN_NORM (K) f32: the norm's weight */
	const uint4 *w;	    /* (N,K); OUT_SWIGLU (2N,K): gate, then up */
	uint32_t n, k8;	    /* output columns; K / 8 */
	float eps;	    /* IN_NORM */
	bool prefetch;	    /* PDL: weight rows to L2 before the wait */
};

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

/* Thread 0: the block's weight rows into L2, R ranges of them (the gate
 * rows, then the up rows N + j), at most GEMV_PREFETCH_BYTES each. */
template <int R> static __device__ void prefetch_rows(const gemv_args &a)
{
	uint32_t j0 = blockIdx.x * GEMV_WARPS;
	uint32_t rows = a.n - j0 < GEMV_WARPS ? a.n - j0 : GEMV_WARPS;
	uint64_t bytes = (uint64_t)rows * a.k8 * 16;
	uint32_t b =
	    bytes < GEMV_PREFETCH_BYTES ? (uint32_t)bytes : GEMV_PREFETCH_BYTES;

#pragma unroll
	for (int r = 0; r < R; r++)
		o1_prefetch_l2(a.w + ((size_t)r * a.n + j0) * a.k8, b);
}

/* IN_NORM: the M rows of xf normalized into shared memory, (M, k8)
 * pieces of 8 bf16, pieces written as o1_rmsnorm_cuda writes elements. */
template <int M> static __device__ void stage_norm(const gemv_args &a)
{
	extern __shared__ uint4 xs[];
	__shared__ float part[M][RMS_VWARPS];
	uint32_t k = a.k8 * 8;
	float ss[M];

	rms_sums<GEMV_THREADS, M>(ss, k, part, [&](int i, uint32_t e) {
		return a.xf[(size_t)i * k + e];
	});
#pragma unroll
	for (int i = 0; i < M; i++) {
		float inv = rms_inv(ss[i], k, a.eps);

		for (uint32_t c = threadIdx.x; c < a.k8; c += GEMV_THREADS) {
			const float4 *xr =
			    (const float4 *)(a.xf + (size_t)i * k + 8 * c);
			const float4 *wr = (const float4 *)(a.nw + 8 * c);
			float4 x0 = xr[0], x1 = xr[1], w0 = wr[0], w1 = wr[1];
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

/* Piece C of input row I: global (IN_BF16) or staged (IN_NORM). */
template <int IN>
static __device__ uint4 x_piece(const gemv_args &a, int i, uint32_t c)
{
	extern __shared__ uint4 xs[];

	if constexpr (IN == IN_NORM)
		return xs[(size_t)i * a.k8 + c];
	else
		return __ldg(a.x + (size_t)i * a.k8 + c);
}

/* acc[r][i] = row r of the warp's columns (j; with R = 2 also N + j) of w
 * . input row i, summed over the warp (every lane gets it). */
template <int M, int R, int IN>
static __device__ void dot_rows(float (&acc)[R][M], const gemv_args &a,
				uint32_t j, uint32_t lane)
{
	const uint4 *wr[R];

#pragma unroll
	for (int r = 0; r < R; r++) {
		wr[r] = a.w + ((size_t)r * a.n + j) * a.k8;
#pragma unroll
		for (int i = 0; i < M; i++)
			acc[r][i] = 0.0f;
	}
#pragma unroll 4
	for (uint32_t c = lane; c < a.k8; c += 32) {
		uint4 wv[R];

#pragma unroll
		for (int r = 0; r < R; r++)
			wv[r] = __ldg(wr[r] + c);
#pragma unroll
		for (int i = 0; i < M; i++) {
			uint4 xv = x_piece<IN>(a, i, c);

#pragma unroll
			for (int r = 0; r < R; r++)
				acc[r][i] += dot8(wv[r], xv);
		}
	}
#pragma unroll
	for (int r = 0; r < R; r++)
#pragma unroll
		for (int i = 0; i < M; i++)
			for (int o = 16; o; o /= 2)
				acc[r][i] +=
				    __shfl_xor_sync(0xffffffffu, acc[r][i], o);
}

/* swiglu.cu's silu(gate) * up, rounded to bf16. */
static __device__ __nv_bfloat16 silu_mul(float g, float u)
{
	return __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
}

/* Block = GEMV_WARPS output columns, warp = column j (see the top).
 * Shared (IN_NORM): the normalized input, M * K bf16. */
template <int M, int IN, int OUT>
static __global__ void __launch_bounds__(GEMV_THREADS) gemv(gemv_args a)
{
	constexpr int R = OUT == OUT_SWIGLU ? 2 : 1;
	uint32_t lane = threadIdx.x % 32;
	uint32_t j = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
	float acc[R][M];

	if (a.prefetch && threadIdx.x == 0)
		prefetch_rows<R>(a);
	o1_pdl_wait();
	o1_pdl_trigger();
	if constexpr (IN == IN_NORM)
		stage_norm<M>(a);
	if (j >= a.n)
		return;
	dot_rows<M, R, IN>(acc, a, j, lane);
	if (lane)
		return;
#pragma unroll
	for (int i = 0; i < M; i++) {
		size_t at = (size_t)i * a.n + j;

		if constexpr (OUT == OUT_STORE)
			a.y[at] = acc[0][i];
		else if constexpr (OUT == OUT_ADD)
			a.y[at] = a.y[at] + acc[0][i];
		else
			a.act[at] = silu_mul(acc[0][i], acc[R - 1][i]);
	}
}

template <int M, int IN, int OUT>
static int launch(const gemv_args &a, bool pdl, cudaStream_t stream)
{
	void (*k)(gemv_args) = gemv<M, IN, OUT>;
	size_t smem = IN == IN_NORM ? (size_t)M * a.k8 * 16 : 0;
	int err = 0;

	if (smem > 48 * 1024)
		err = O1_CUDA_CHECK(cudaFuncSetAttribute(
		    k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	return err ? err
		   : O1_CUDA_LAUNCH("gemv", k,
				    dim3((a.n + GEMV_WARPS - 1) / GEMV_WARPS),
				    dim3(GEMV_THREADS), smem, stream, pdl, a);
}

/* The instance for M rows (1 .. O1_GEMV_MAX_ROWS, checked). */
template <int IN, int OUT>
static int launch_rows(gemv_args a, uint32_t m, bool pdl, cudaStream_t stream)
{
	a.prefetch = pdl;
	switch (m) {
	case 1:
		return launch<1, IN, OUT>(a, pdl, stream);
	case 2:
		return launch<2, IN, OUT>(a, pdl, stream);
	case 3:
		return launch<3, IN, OUT>(a, pdl, stream);
	default:
		return launch<4, IN, OUT>(a, pdl, stream);
	}
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

extern "C" int o1_gemv_bf16_cuda(float *y, const uint16_t *x, const uint16_t *w,
				 uint32_t m, uint32_t n, uint32_t k, bool pdl,
				 cudaStream_t stream)
{
	gemv_args a = {
	    y, NULL, (const uint4 *)x, NULL, NULL, (const uint4 *)w, n, k / 8,
	    0, false};
	int err = check("gemv", y, x, w, m, n, k);

	return err ? err : launch_rows<IN_BF16, OUT_STORE>(a, m, pdl, stream);
}

extern "C" int o1_gemv_add_bf16_cuda(float *y, const uint16_t *x,
				     const uint16_t *w, uint32_t m, uint32_t n,
				     uint32_t k, bool pdl, cudaStream_t stream)
{
	gemv_args a = {
	    y, NULL, (const uint4 *)x, NULL, NULL, (const uint4 *)w, n, k / 8,
	    0, false};
	int err = check("gemv_add", y, x, w, m, n, k);

	return err ? err : launch_rows<IN_BF16, OUT_ADD>(a, m, pdl, stream);
}

extern "C" int o1_gemv_norm_bf16_cuda(float *y, const float *x,
				      const float *norm_w, float eps,
				      const uint16_t *w, uint32_t m, uint32_t n,
				      uint32_t k, bool pdl, cudaStream_t stream)
{
	gemv_args a = {y, NULL,	 NULL, x,    norm_w, (const uint4 *)w,
		       n, k / 8, eps,  false};
	int err = check("gemv_norm", y, x, w, m, n, k);

	err = err ? err : check_norm("gemv_norm", norm_w, k, eps);
	return err ? err : launch_rows<IN_NORM, OUT_STORE>(a, m, pdl, stream);
}

extern "C" int o1_gemv_norm_swiglu_bf16_cuda(uint16_t *act, const float *x,
					     const float *norm_w, float eps,
					     const uint16_t *w, uint32_t m,
					     uint32_t f, uint32_t k, bool pdl,
					     cudaStream_t stream)
{
	gemv_args a = {NULL,   (__nv_bfloat16 *)act,
		       NULL,   x,
		       norm_w, (const uint4 *)w,
		       f,      k / 8,
		       eps,    false};
	int err = check("gemv_norm_swiglu", act, x, w, m, f, k);

	err = err ? err : check_norm("gemv_norm_swiglu", norm_w, k, eps);
	return err ? err : launch_rows<IN_NORM, OUT_SWIGLU>(a, m, pdl, stream);
}

/* Matrix product for few rows (decode) on the device: matmul.h's
 *   y (M,N) f32 = x (M,K) . w (N,K)^T
 * (no bias) with x and w in bf16, for M <= O1_GEMV_MAX_ROWS, where a
 * general GEMM (cuBLAS) reads the weights at a fraction of the memory
 * bandwidth. A warp per output column j: its lanes stride over K in
 * 16-byte pieces (8 bf16) of w's row j, each piece multiplied into every
 * row of x (so w is read once for all M rows), f32 accumulation per lane
 * in increasing k, then a fixed warp tree sum. Each y[m][j] therefore has
 * one operation order whatever M, N or the launch: results are bitwise
 * reproducible, and a row's result does not depend on the other rows.
 * PDL (cuda_launch.h): thread 0 of a block first asks for the block's
 * weight rows in L2 (at most GEMV_PREFETCH_BYTES: no kernel writes the
 * weights), so their reads overlap the previous kernel's tail and the
 * launch; then every thread waits for the previous kernel and lets the next
 * one launch. Without PDL nothing is prefetched.
 * Invariants: K % 8 == 0, x and w 16-byte aligned (rows then are too).
 */
#include <errno.h>
#include <stdint.h>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "log.h"
}

#define GEMV_WARPS 4 /* output columns per block */
/* Per block: four rows of K = 4096 (more would crowd L2 while the
 * previous kernel streams its own weights through it). */
#define GEMV_PREFETCH_BYTES (32u << 10)

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

/* Thread 0: the block's weight rows into L2 (at most
 * GEMV_PREFETCH_BYTES). */
static __device__ void prefetch_rows(const uint4 *w, uint32_t n, uint32_t k8)
{
	uint32_t j0 = blockIdx.x * GEMV_WARPS;
	uint32_t rows = n - j0 < GEMV_WARPS ? n - j0 : GEMV_WARPS;
	uint64_t bytes = (uint64_t)rows * k8 * 16;

	o1_prefetch_l2(w + (size_t)j0 * k8, bytes < GEMV_PREFETCH_BYTES
						? (uint32_t)bytes
						: GEMV_PREFETCH_BYTES);
}

/* y (M,N) = x (M, 8 K8) . w (N, 8 K8)^T; block = GEMV_WARPS columns. */
template <int M>
static __global__ void gemv(float *y, const uint4 *x, const uint4 *w,
			    uint32_t n, uint32_t k8, bool prefetch)
{
	uint32_t lane = threadIdx.x % 32;
	uint32_t j = blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
	const uint4 *wr = w + (size_t)j * k8;
	float acc[M];

	if (prefetch && threadIdx.x == 0)
		prefetch_rows(w, n, k8);
	o1_pdl_wait();
	o1_pdl_trigger();
	if (j >= n)
		return;
#pragma unroll
	for (int i = 0; i < M; i++)
		acc[i] = 0.0f;
#pragma unroll 4
	for (uint32_t c = lane; c < k8; c += 32) {
		uint4 wv = __ldg(wr + c);

#pragma unroll
		for (int i = 0; i < M; i++)
			acc[i] += dot8(wv, __ldg(x + (size_t)i * k8 + c));
	}
#pragma unroll
	for (int i = 0; i < M; i++) {
		for (int o = 16; o; o /= 2)
			acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
		if (lane == 0)
			y[(size_t)i * n + j] = acc[i];
	}
}

template <int M>
static int launch(float *y, const uint4 *x, const uint4 *w, uint32_t n,
		  uint32_t k8, bool pdl, cudaStream_t stream)
{
	void (*k)(float *, const uint4 *, const uint4 *, uint32_t, uint32_t,
		  bool) = gemv<M>;

	return O1_CUDA_LAUNCH(
	    "gemv", k, dim3((n + GEMV_WARPS - 1) / GEMV_WARPS),
	    dim3(GEMV_WARPS * 32), 0, stream, pdl, y, x, w, n, k8, pdl);
}

extern "C" int o1_gemv_bf16_cuda(float *y, const uint16_t *x, const uint16_t *w,
				 uint32_t m, uint32_t n, uint32_t k, bool pdl,
				 cudaStream_t stream)
{
	const uint4 *xv = (const uint4 *)x, *wv = (const uint4 *)w;

	if (!y || !x || !w || !m || m > O1_GEMV_MAX_ROWS || !n || !k || k % 8 ||
	    ((uintptr_t)x | (uintptr_t)w) % 16) {
		o1_err("gemv: bad operands: m %u (at most %d) n %u k %u (a "
		       "multiple of 8), x %p w %p (16-byte aligned)",
		       m, O1_GEMV_MAX_ROWS, n, k, (const void *)x,
		       (const void *)w);
		return -EINVAL;
	}
	if (m == 1)
		return launch<1>(y, xv, wv, n, k / 8, pdl, stream);
	if (m == 2)
		return launch<2>(y, xv, wv, n, k / 8, pdl, stream);
	if (m == 3)
		return launch<3>(y, xv, wv, n, k / 8, pdl, stream);
	return launch<4>(y, xv, wv, n, k / 8, pdl, stream);
}

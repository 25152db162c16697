/* RMSNorm arithmetic shared by rmsnorm.cu and gemv.cu's normalized input
 * (C++ device code): one order of operations whatever the block size, so
 * a product that normalizes its own input gets the bits o1_rmsnorm_cuda
 * writes.
 *
 * The sum of squares of a row of DIM floats: element e goes to virtual
 * thread e % RMS_VTHREADS, which sums v * v over its elements in
 * increasing e; each virtual warp (32 consecutive virtual threads) sums
 * its lanes with the xor butterfly, then the RMS_VWARPS warp sums are
 * summed by one more butterfly (lanes past them add 0). A block of T
 * threads (T a multiple of 32 dividing RMS_VTHREADS) plays virtual threads
 * t, t + T, ...: thread t of warp w plays virtual warp w + q T / 32, lane
 * t % 32, for q < RMS_VTHREADS / T.
 */
#ifndef O1_RMS_REDUCE_H
#define O1_RMS_REDUCE_H

#ifndef __CUDACC__
#error "rms_reduce.h is for .cu files"
#endif

#include <stdint.h>

#include <cuda_bf16.h>

#define RMS_VTHREADS 512
#define RMS_VWARPS   (RMS_VTHREADS / 32)

static inline __device__ float rms_butterfly(float v)
{
	for (int o = 16; o; o /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* Rounds of RMS_VTHREADS elements a thread asks VALUE for before it adds
 * any, for its Q virtual threads and the M rows: their loads in flight
 * together (one at a time, a llama3-8b row, 4,096 wide over 256 threads,
 * was 16 loads one after the other from L2 in every block of a decode
 * step's normalized products). 16 values a thread for one row; one at a
 * time for more (gemv.cu's two-row kernels spill with a round of four). */
template <int M, int Q> static __host__ __device__ constexpr int rms_batch()
{
	return M == 1 && Q <= 16 ? 16 / Q : 1;
}

/* ss[i] = the sum of squares of row i < M, VALUE(i, e) giving element e
 * (it may have side effects: each (i, e) is asked once, by one thread).
 * Every thread of the block (T threads) must call it; all get the sums.
 * PART is shared scratch. The elements are asked for rms_batch() rounds
 * at a time and added in the order above (the same bits). */
template <int T, int M, class F>
static __device__ void rms_sums(float (&ss)[M], uint32_t dim,
				float (*part)[RMS_VWARPS], F value)
{
	constexpr int Q = RMS_VTHREADS / T, U = rms_batch<M, Q>();
	static_assert(T % 32 == 0 && RMS_VTHREADS % T == 0, "block size");
	uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	float s[M][Q];

#pragma unroll
	for (int q = 0; q < Q; q++)
#pragma unroll
		for (int i = 0; i < M; i++)
			s[i][q] = 0.0f;
	if constexpr (U == 1) { /* a value at a time, each q in turn */
#pragma unroll
		for (int q = 0; q < Q; q++)
			for (uint32_t e = threadIdx.x + q * T; e < dim;
			     e += RMS_VTHREADS)
#pragma unroll
				for (int i = 0; i < M; i++) {
					float v = value(i, e);

					s[i][q] += v * v;
				}
	}
	/* else virtual thread threadIdx.x + q T takes e = e0 + q T + u
	 * RMS_VTHREADS: in increasing e for each q */
	for (uint32_t e0 = threadIdx.x; U > 1 && e0 < dim;
	     e0 += U * RMS_VTHREADS) {
		float v[M][Q][U];

#pragma unroll
		for (int u = 0; u < U; u++)
#pragma unroll
			for (int q = 0; q < Q; q++) {
				uint32_t e = e0 + q * T + u * RMS_VTHREADS;

#pragma unroll
				for (int i = 0; i < M; i++)
					v[i][q][u] = e < dim ? value(i, e) : 0.0f;
			}
		/* an element past DIM adds +0 to a sum that is never -0 */
#pragma unroll
		for (int u = 0; u < U; u++)
#pragma unroll
			for (int q = 0; q < Q; q++)
#pragma unroll
				for (int i = 0; i < M; i++)
					s[i][q] += v[i][q][u] * v[i][q][u];
	}
#pragma unroll
	for (int i = 0; i < M; i++)
#pragma unroll
		for (int q = 0; q < Q; q++) {
			float v = rms_butterfly(s[i][q]);

			if (!lane)
				part[i][warp + q * (T / 32)] = v;
		}
	__syncthreads();
#pragma unroll
	for (int i = 0; i < M; i++)
		ss[i] = rms_butterfly(lane < RMS_VWARPS ? part[i][lane] : 0.0f);
}

/* 1 / sqrt(mean of squares + eps) from the sum of squares. */
static inline __device__ float rms_inv(float ss, uint32_t dim, float eps)
{
	return 1.0f / sqrtf(ss / (float)dim + eps);
}

/* One normalized element, rounded for the next product. */
static inline __device__ __nv_bfloat16 rms_out(float weight, float x, float inv)
{
	return __float2bfloat16_rn(weight * (x * inv));
}

#endif

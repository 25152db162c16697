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

/* ss[i] = the sum of squares of row i < M, VALUE(i, e) giving element e
 * (it may have side effects: each (i, e) is asked once, by one thread).
 * Every thread of the block (T threads) must call it; all get the sums.
 * PART is shared scratch. */
template <int T, int M, class F>
static __device__ void rms_sums(float (&ss)[M], uint32_t dim,
				float (*part)[RMS_VWARPS], F value)
{
	constexpr int Q = RMS_VTHREADS / T;
	static_assert(T % 32 == 0 && RMS_VTHREADS % T == 0, "block size");
	uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	float s[M][Q];

#pragma unroll
	for (int q = 0; q < Q; q++) {
#pragma unroll
		for (int i = 0; i < M; i++)
			s[i][q] = 0.0f;
		for (uint32_t e = threadIdx.x + q * T; e < dim;
		     e += RMS_VTHREADS) {
#pragma unroll
			for (int i = 0; i < M; i++) {
				float v = value(i, e);

				s[i][q] += v * v;
			}
		}
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

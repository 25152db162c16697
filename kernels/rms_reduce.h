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
 * (it may have side effects: each (i, e) is asked once, by one thread),
 * with the row's elements shared by R blocks of T threads (a cluster;
 * this one is RANK < R): block r's thread t plays virtual threads r T +
 * t, r T + t + R T, ... (blocks past RMS_VTHREADS / T play none), so each
 * virtual warp's sum is made in one block, which gives it to PUT(i,
 * virtual warp, sum) to store into PART wherever the blocks read it;
 * then SYNC() (after it, PART is whole in every block) and every thread
 * of every block gets the sums. The elements are asked for rms_batch()
 * rounds at a time and added in the order above (the same bits for any
 * R and T). */
template <int T, int M, int R, class F, class Put, class Sync>
static __device__ void rms_sums_split(float (&ss)[M], uint32_t dim,
				      uint32_t rank,
				      float (*part)[RMS_VWARPS], F value,
				      Put put, Sync sync)
{
	/* blocks that play, the threads they hold */
	constexpr int RE = R < RMS_VTHREADS / T ? R : RMS_VTHREADS / T;
	constexpr int TT = T * RE;
	constexpr int Q = RMS_VTHREADS / TT, U = rms_batch<M, Q>();
	static_assert(T % 32 == 0 && RMS_VTHREADS % T == 0 && R >= 1,
		      "block size");
	uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
	uint32_t base = rank * T + threadIdx.x; /* its first virtual thread */
	float s[M][Q];

#pragma unroll
	for (int q = 0; q < Q; q++)
#pragma unroll
		for (int i = 0; i < M; i++)
			s[i][q] = 0.0f;
	if (rank < (uint32_t)RE) { /* the same for the block */
		if constexpr (U == 1) { /* a value at a time, each q in turn */
#pragma unroll
			for (int q = 0; q < Q; q++)
				for (uint32_t e = base + q * TT; e < dim;
				     e += RMS_VTHREADS)
#pragma unroll
					for (int i = 0; i < M; i++) {
						float v = value(i, e);

						s[i][q] += v * v;
					}
		}
		/* else virtual thread base + q TT takes e = e0 + q TT + u
		 * RMS_VTHREADS: in increasing e for each q */
		for (uint32_t e0 = base; U > 1 && e0 < dim;
		     e0 += U * RMS_VTHREADS) {
			float v[M][Q][U];

#pragma unroll
			for (int u = 0; u < U; u++)
#pragma unroll
				for (int q = 0; q < Q; q++) {
					uint32_t e =
					    e0 + q * TT + u * RMS_VTHREADS;

#pragma unroll
					for (int i = 0; i < M; i++)
						v[i][q][u] = e < dim
								 ? value(i, e)
								 : 0.0f;
				}
			/* an element past DIM adds +0 to a sum that is
			 * never -0 */
#pragma unroll
			for (int u = 0; u < U; u++)
#pragma unroll
				for (int q = 0; q < Q; q++)
#pragma unroll
					for (int i = 0; i < M; i++)
						s[i][q] += v[i][q][u] *
							   v[i][q][u];
		}
#pragma unroll
		for (int i = 0; i < M; i++)
#pragma unroll
			for (int q = 0; q < Q; q++) {
				float v = rms_butterfly(s[i][q]);

				if (!lane)
					put(i,
					    rank * (T / 32) + warp +
						q * (TT / 32),
					    v);
			}
	}
	sync();
#pragma unroll
	for (int i = 0; i < M; i++)
		ss[i] = rms_butterfly(lane < RMS_VWARPS ? part[i][lane] : 0.0f);
}

/* rms_sums_split for a block alone (every thread of the block must call
 * it; PART is its shared scratch). */
template <int T, int M, class F>
static __device__ void rms_sums(float (&ss)[M], uint32_t dim,
				float (*part)[RMS_VWARPS], F value)
{
	rms_sums_split<T, M, 1>(
	    ss, dim, 0, part, value,
	    [&](int i, uint32_t w, float v) { part[i][w] = v; },
	    [] { __syncthreads(); });
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

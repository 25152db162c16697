/* RMSNorm fused with the residual add, one block per output row: the
 * block adds the residual into x (the residual stream, f32), reduces the
 * sum of squares in f32 (per-thread partial sums, warp shuffles, then the
 * warps' sums in shared memory) and writes the normalized row as bf16 for the
 * next product. With PDL (cuda_launch.h) every thread first waits for the
 * previous kernel. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "log.h"
}

#define RMS_THREADS 512

/* Sum of V over the block (all threads get it); PART holds a float per
 * warp. */
static __device__ float block_sum(float v, float *part)
{
	uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;

	for (int o = 16; o; o /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	if (!lane)
		part[warp] = v;
	__syncthreads();
	v = lane < blockDim.x / 32 ? part[lane] : 0.0f;
	for (int o = 16; o; o /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* out (n_rows,dim) bf16; x, residual (.,dim) f32 (residual may be NULL);
 * weight (dim) f32; rows (n_rows) or NULL; block i = output row i. */
static __global__ void rmsnorm(__nv_bfloat16 *out, float *x,
			       const float *residual, const float *weight,
			       const uint32_t *rows, uint32_t dim, float eps)
{
	__shared__ float part[RMS_THREADS / 32];
	uint32_t r = rows ? rows[blockIdx.x] : blockIdx.x;
	float *xr = x + (size_t)r * dim;
	__nv_bfloat16 *o = out + (size_t)blockIdx.x * dim;
	float ss = 0, inv;

	o1_pdl_wait();
	o1_pdl_trigger();
	for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x) {
		float v = xr[i];

		if (residual) {
			v = v + residual[(size_t)r * dim + i];
			xr[i] = v;
		}
		ss += v * v;
	}
	ss = block_sum(ss, part);
	inv = 1.0f / sqrtf(ss / (float)dim + eps);
	for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
		o[i] = __float2bfloat16_rn(weight[i] * (xr[i] * inv));
}

extern "C" int o1_rmsnorm_cuda(uint16_t *out, float *x, const float *residual,
			       const float *weight, const uint32_t *rows,
			       uint32_t n_rows, uint32_t dim, float eps,
			       bool pdl, cudaStream_t stream)
{
	if (!out || !x || !weight || !dim || !(eps >= 0)) {
		o1_err("rmsnorm: bad operands: dim %u eps %g", dim, eps);
		return -EINVAL;
	}
	if (!n_rows)
		return 0;
	return O1_CUDA_LAUNCH(
	    "rmsnorm", rmsnorm, dim3(n_rows), dim3(RMS_THREADS), 0, stream, pdl,
	    (__nv_bfloat16 *)out, x, residual, weight, rows, dim, eps);
}

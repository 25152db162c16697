/* RMSNorm fused with the residual add, one block per output row: the
 * block adds the residual into x (the residual stream, f32), reduces the
 * sum of squares in f32 (rms_reduce.h: per-thread partial sums, warp
 * shuffles, then the warps' sums in shared memory, an order gemv.cu's
 * normalized input repeats) and writes the normalized row as bf16 for the
 * next product. With PDL (cuda_launch.h) every thread first waits for the
 * previous kernel. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "rms_reduce.h"

extern "C" {
#include "common/log.h"
}

#define RMS_THREADS RMS_VTHREADS /* a thread per virtual thread */

/* out (n_rows,dim) bf16; x, residual (.,dim) f32 (residual may be NULL);
 * weight (dim) f32; rows (n_rows) or NULL; block i = output row i. Each
 * element is added, written back and normalized by the same thread. */
static __global__ void rmsnorm(__nv_bfloat16 *out, float *x,
			       const float *residual, const float *weight,
			       const uint32_t *rows, uint32_t dim, float eps)
{
	__shared__ float part[1][RMS_VWARPS];
	__nv_bfloat16 *o = out + (size_t)blockIdx.x * dim;
	const float *res;
	float ss[1], inv, *xr;
	uint32_t r;

	o1_pdl_wait();
	o1_pdl_trigger();
	r = rows ? rows[blockIdx.x] : blockIdx.x;
	xr = x + (size_t)r * dim;
	res = residual ? residual + (size_t)r * dim : NULL;
	rms_sums<RMS_THREADS, 1>(ss, dim, part, [&](int, uint32_t i) {
		float v = xr[i];

		if (res) {
			v = v + res[i];
			xr[i] = v;
		}
		return v;
	});
	inv = rms_inv(ss[0], dim, eps);
	for (uint32_t i = threadIdx.x; i < dim; i += RMS_THREADS)
		o[i] = rms_out(weight[i], xr[i], inv);
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

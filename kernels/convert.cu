/* bf16 <-> f32 conversion, elementwise (round to nearest even). Used at
 * load to turn the f32 staging copy of each weight into bf16. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "common/log.h"
}

/* dst (n) bf16 = src (n) f32; grid-stride. */
static __global__ void to_bf16(__nv_bfloat16 *dst, const float *src, uint64_t n)
{
	uint64_t step = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += step)
		dst[i] = __float2bfloat16_rn(src[i]);
}

/* dst (n) f32 = src (n) bf16; grid-stride. */
static __global__ void to_f32(float *dst, const __nv_bfloat16 *src, uint64_t n)
{
	uint64_t step = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += step)
		dst[i] = __bfloat162float(src[i]);
}

static unsigned blocks_for(uint64_t n)
{
	uint64_t b = (n + 255) / 256;

	return b > 65536 ? 65536 : (unsigned)(b ? b : 1);
}

extern "C" int o1_convert_bf16_from_f32_cuda(uint16_t *dst, const float *src,
					     uint64_t n, cudaStream_t stream)
{
	if (!dst || !src) {
		o1_err("convert: NULL operand for %llu elements",
		       (unsigned long long)n);
		return -EINVAL;
	}
	if (!n)
		return 0;
	to_bf16<<<blocks_for(n), 256, 0, stream>>>((__nv_bfloat16 *)dst, src,
						   n);
	return O1_CUDA_LAUNCHED("convert to bf16");
}

extern "C" int o1_convert_f32_from_bf16_cuda(float *dst, const uint16_t *src,
					     uint64_t n, cudaStream_t stream)
{
	if (!dst || !src) {
		o1_err("convert: NULL operand for %llu elements",
		       (unsigned long long)n);
		return -EINVAL;
	}
	if (!n)
		return 0;
	to_f32<<<blocks_for(n), 256, 0, stream>>>(
	    dst, (const __nv_bfloat16 *)src, n);
	return O1_CUDA_LAUNCHED("convert to f32");
}

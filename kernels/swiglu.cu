/* SwiGLU on the device: silu(gate) * up in f32, rounded once to bf16 for
 * the down projection. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "log.h"
}

/* out (T,F) bf16; gate, up (T,F) f32 with row stride ld; block t = row t. */
static __global__ void swiglu(__nv_bfloat16 *out, const float *gate,
			      const float *up, uint32_t ld, uint32_t f)
{
	const float *g = gate + (size_t)blockIdx.x * ld;
	const float *u = up + (size_t)blockIdx.x * ld;
	__nv_bfloat16 *o = out + (size_t)blockIdx.x * f;

	for (uint32_t i = threadIdx.x; i < f; i += blockDim.x) {
		float x = g[i];

		o[i] = __float2bfloat16_rn(x / (1.0f + expf(-x)) * u[i]);
	}
}

extern "C" int o1_swiglu_cuda(uint16_t *out, const float *gate, const float *up,
			      uint32_t ld, uint32_t n_tokens, uint32_t ffn_dim,
			      cudaStream_t stream)
{
	if (!out || !gate || !up || !ffn_dim || ld < ffn_dim) {
		o1_err("swiglu: bad operands: ffn_dim %u ld %u", ffn_dim, ld);
		return -EINVAL;
	}
	if (!n_tokens)
		return 0;
	swiglu<<<n_tokens, 256, 0, stream>>>((__nv_bfloat16 *)out, gate, up, ld,
					     ffn_dim);
	return O1_CUDA_LAUNCHED("swiglu");
}

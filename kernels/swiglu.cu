/* SwiGLU on the device: silu(gate) * up in f32, rounded once to bf16 for
 * the down projection. With PDL (cuda_launch.h) every thread first waits
 * for the previous kernel. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "common/log.h"
}

/* out (T,F) bf16; gate, up (T,F) f32 with row stride ld; one thread per
 * output element, grid-stride (a block per row left a decode step with one
 * block on the whole GPU). */
static __global__ void swiglu(__nv_bfloat16 *out, const float *gate,
			      const float *up, uint32_t ld, uint32_t f,
			      uint64_t n)
{
	uint64_t step = (uint64_t)gridDim.x * blockDim.x;

	o1_pdl_wait();
	o1_pdl_trigger();
	for (uint64_t e = blockIdx.x * blockDim.x + threadIdx.x; e < n;
	     e += step) {
		size_t at = e / f * ld + e % f;
		float x = gate[at];

		out[e] = __float2bfloat16_rn(x / (1.0f + expf(-x)) * up[at]);
	}
}

extern "C" int o1_swiglu_cuda(uint16_t *out, const float *gate, const float *up,
			      uint32_t ld, uint32_t n_tokens, uint32_t ffn_dim,
			      bool pdl, cudaStream_t stream)
{
	uint64_t n = (uint64_t)n_tokens * ffn_dim;
	unsigned blocks =
	    (n + 255) / 256 < 65536 ? (unsigned)((n + 255) / 256) : 65536;

	if (!out || !gate || !up || !ffn_dim || ld < ffn_dim) {
		o1_err("swiglu: bad operands: ffn_dim %u ld %u", ffn_dim, ld);
		return -EINVAL;
	}
	if (!n_tokens)
		return 0;
	return O1_CUDA_LAUNCH("swiglu", swiglu, dim3(blocks), dim3(256), 0,
			      stream, pdl, (__nv_bfloat16 *)out, gate, up, ld,
			      ffn_dim, n);
}

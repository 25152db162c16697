/* SwiGLU on the device: silu(gate) * up in f32, rounded once to bf16 for
 * the down projection, from f32 gate/up (the decode products' output) or
 * bf16 (cuBLAS's for wide steps: half the bytes written and read back; the
 * rounding transformers' bf16 models do too). With PDL (cuda_launch.h)
 * every thread first waits for the previous kernel. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "common/log.h"
}

static __device__ float silu_mul(float g, float u)
{
	return g / (1.0f + expf(-g)) * u;
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
		out[e] = __float2bfloat16_rn(silu_mul(gate[at], up[at]));
	}
}

/* The same from bf16 gate, up: 8 elements (16 bytes) a thread a step when
 * F, LD and the pointers allow (VEC), else one. */
template <bool VEC>
static __global__ void swiglu_bf16(__nv_bfloat16 *out,
				   const __nv_bfloat16 *gate,
				   const __nv_bfloat16 *up, uint32_t ld,
				   uint32_t f, uint64_t n)
{
	uint64_t step = (uint64_t)gridDim.x * blockDim.x;
	uint32_t w = VEC ? 8 : 1, per_row = f / w;

	o1_pdl_wait();
	o1_pdl_trigger();
	for (uint64_t e = blockIdx.x * blockDim.x + threadIdx.x; e < n / w;
	     e += step) {
		size_t at = e / per_row * ld + e % per_row * w;

		if (VEC) {
			uint4 g = *(const uint4 *)(gate + at);
			uint4 u = *(const uint4 *)(up + at), o;
			const __nv_bfloat162 *g2 = (const __nv_bfloat162 *)&g;
			const __nv_bfloat162 *u2 = (const __nv_bfloat162 *)&u;
			__nv_bfloat162 *o2 = (__nv_bfloat162 *)&o;

			for (int i = 0; i < 4; i++) {
				float2 gf = __bfloat1622float2(g2[i]);
				float2 uf = __bfloat1622float2(u2[i]);

				o2[i] = __floats2bfloat162_rn(
				    silu_mul(gf.x, uf.x), silu_mul(gf.y, uf.y));
			}
			*(uint4 *)(out + e * 8) = o;
		} else {
			out[e] = __float2bfloat16_rn(silu_mul(
			    __bfloat162float(gate[at]), __bfloat162float(up[at])));
		}
	}
}

static unsigned swiglu_blocks(uint64_t threads)
{
	return (threads + 255) / 256 < 65536 ? (unsigned)((threads + 255) / 256)
					      : 65536;
}

extern "C" int o1_swiglu_bf16_cuda(uint16_t *out, const uint16_t *gate,
				   const uint16_t *up, uint32_t ld,
				   uint32_t n_tokens, uint32_t ffn_dim,
				   bool pdl, cudaStream_t stream)
{
	uint64_t n = (uint64_t)n_tokens * ffn_dim;
	bool vec = ffn_dim % 8 == 0 && ld % 8 == 0 &&
		   ((uintptr_t)out | (uintptr_t)gate | (uintptr_t)up) % 16 == 0;

	if (!out || !gate || !up || !ffn_dim || ld < ffn_dim) {
		o1_err("swiglu: bad operands: ffn_dim %u ld %u", ffn_dim, ld);
		return -EINVAL;
	}
	if (!n_tokens)
		return 0;
	if (vec)
		return O1_CUDA_LAUNCH(
		    "swiglu_bf16", swiglu_bf16<true>, dim3(swiglu_blocks(n / 8)),
		    dim3(256), 0, stream, pdl, (__nv_bfloat16 *)out,
		    (const __nv_bfloat16 *)gate, (const __nv_bfloat16 *)up, ld,
		    ffn_dim, n);
	return O1_CUDA_LAUNCH("swiglu_bf16", swiglu_bf16<false>,
			      dim3(swiglu_blocks(n)), dim3(256), 0, stream, pdl,
			      (__nv_bfloat16 *)out, (const __nv_bfloat16 *)gate,
			      (const __nv_bfloat16 *)up, ld, ffn_dim, n);
}

extern "C" int o1_swiglu_cuda(uint16_t *out, const float *gate, const float *up,
			      uint32_t ld, uint32_t n_tokens, uint32_t ffn_dim,
			      bool pdl, cudaStream_t stream)
{
	uint64_t n = (uint64_t)n_tokens * ffn_dim;
	unsigned blocks = swiglu_blocks(n);

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

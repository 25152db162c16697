/* Embedding gather on the device: one block per token row, bf16 table to
 * the f32 residual stream. Out-of-range ids (which the caller refuses
 * first) give a zero row rather than a wild read. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "common/log.h"
}

/* out (T,dim) f32 = table (vocab,dim) bf16 [ids (T)]; block t = row t. */
static __global__ void gather(float *out, const __nv_bfloat16 *table,
			      const int32_t *ids, uint32_t dim, uint32_t vocab)
{
	int32_t id = ids[blockIdx.x];
	float *o = out + (size_t)blockIdx.x * dim;
	const __nv_bfloat16 *row = table + (size_t)id * dim;
	bool ok = id >= 0 && (uint32_t)id < vocab;

	for (uint32_t i = threadIdx.x; i < dim; i += blockDim.x)
		o[i] = ok ? __bfloat162float(row[i]) : 0.0f;
}

extern "C" int o1_embedding_cuda(float *out, const uint16_t *table,
				 const int32_t *ids, uint32_t n_tokens,
				 uint32_t dim, uint32_t vocab,
				 cudaStream_t stream)
{
	if (!out || !table || !ids || !dim || !vocab) {
		o1_err("embedding: bad operands: dim %u vocab %u", dim, vocab);
		return -EINVAL;
	}
	if (!n_tokens)
		return 0;
	gather<<<n_tokens, 256, 0, stream>>>(out, (const __nv_bfloat16 *)table,
					     ids, dim, vocab);
	return O1_CUDA_LAUNCHED("embedding");
}

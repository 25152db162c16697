/* attention_prefill.cu's entry points for the emulated decode kernels
 * (run_decode.sh): its tensor-core kernel cannot be emulated, so no shape
 * fits it and o1_attention_cuda sends every row to the row kernel. */
#include <errno.h>

#include "kernels_cuda.h"

extern "C" bool o1_attention_tiled_fits(const struct o1_attn_dims *dims,
					const uint16_t *out, const float *q,
					const uint16_t *k_cache,
					const uint16_t *v_cache)
{
	(void)dims, (void)out, (void)q, (void)k_cache, (void)v_cache;
	return false;
}

extern "C" int o1_attention_tiled_cuda(uint16_t *out, const float *q,
				       const uint16_t *k_cache,
				       const uint16_t *v_cache,
				       const struct o1_attn_dims *dims,
				       const struct o1_attn_batch *batch,
				       uint32_t n_rows, uint32_t min_new,
				       cudaStream_t stream)
{
	(void)out, (void)q, (void)k_cache, (void)v_cache, (void)dims;
	(void)batch, (void)n_rows, (void)min_new, (void)stream;
	return -EINVAL;
}

/* RMSNorm as transformers' LlamaRMSNorm computes it in float32:
 *   r = 1 / sqrt(mean(x^2) + eps),  out = weight * (x * r)
 * x, out (T,dim); weight (dim). OUT may equal X (in place). The sum of
 * squares is accumulated in double, in index order (the reference is more
 * exact than torch's f32 reduction; the difference is far below the 1e-3
 * tolerance of the end-to-end tests). */
#ifndef O1_RMSNORM_H
#define O1_RMSNORM_H

#include <stdint.h>

#include "threads.h"

int o1_rmsnorm_cpu(struct o1_threads *tp, float *out, const float *x,
		   const float *weight, uint32_t n_tokens, uint32_t dim,
		   float eps);

#endif

/* SwiGLU activation of the MLP: out (T,F) = silu(gate) * up, with
 * silu(g) = g / (1 + exp(-g)) in float32. OUT may equal GATE or UP. */
#ifndef O1_SWIGLU_H
#define O1_SWIGLU_H

#include <stdint.h>

#include "threads.h"

int o1_swiglu_cpu(struct o1_threads *tp, float *out, const float *gate,
		  const float *up, uint32_t n_tokens, uint32_t ffn_dim);

#endif

/* Residual add: x (T,dim) += y (T,dim), elementwise in float32. */
#ifndef O1_RESIDUAL_H
#define O1_RESIDUAL_H

#include <stdint.h>

#include "threads.h"

int o1_residual_add_cpu(struct o1_threads *tp, float *x, const float *y,
			uint32_t n_tokens, uint32_t dim);

#endif

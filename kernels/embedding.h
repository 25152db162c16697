/* Embedding gather: out (T,dim) = table (vocab,dim) [ids (T)].
 * Returns 0, or -O1_E_BOUNDS (logged with the id) when an id is negative or
 * >= vocab; OUT is then unspecified. */
#ifndef O1_EMBEDDING_H
#define O1_EMBEDDING_H

#include <stdint.h>

#include "threads.h"

int o1_embedding_cpu(struct o1_threads *tp, float *out, const float *table,
		     const int32_t *ids, uint32_t n_tokens, uint32_t dim,
		     uint32_t vocab);

#endif

/* Embedding gather: out (T,dim) = table (vocab,dim) [ids (T)].
 * Returns 0, or -O1_E_BOUNDS (logged with the id) when an id is negative or
 * >= vocab; OUT is then unspecified. The _q form reads a table of rows in
 * block TYPE (quant.h; dim whole blocks) and dequantizes the rows it
 * gathers: exactly quant.h's values, as if the table were f32. */
#ifndef O1_EMBEDDING_H
#define O1_EMBEDDING_H

#include <stdint.h>

#include "quant.h"
#include "threads.h"

int o1_embedding_cpu(struct o1_threads *tp, float *out, const float *table,
		     const int32_t *ids, uint32_t n_tokens, uint32_t dim,
		     uint32_t vocab);
/* -EINVAL also for TYPE not a block type or DIM not whole blocks. */
int o1_embedding_q_cpu(struct o1_threads *tp, float *out, const void *table,
		       enum o1_quant_type type, const int32_t *ids,
		       uint32_t n_tokens, uint32_t dim, uint32_t vocab);

#endif

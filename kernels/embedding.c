/* Embedding gather: one row copy per token; ids are checked first so a bad
 * id never reads outside the table. */
#include "embedding.h"

#include <string.h>

#include "common/error.h"
#include "common/log.h"

int o1_embedding_cpu(struct o1_threads *tp, float *out, const float *table,
		     const int32_t *ids, uint32_t n_tokens, uint32_t dim,
		     uint32_t vocab)
{
	(void)tp;
	for (uint32_t t = 0; t < n_tokens; t++) {
		if (ids[t] < 0 || (uint32_t)ids[t] >= vocab) {
			o1_err("embedding: token id %d at row %u outside the "
			       "vocabulary of %u",
			       ids[t], t, vocab);
			return -O1_E_BOUNDS;
		}
	}
	for (uint32_t t = 0; t < n_tokens; t++)
		memcpy(out + (size_t)t * dim, table + (size_t)ids[t] * dim,
		       dim * sizeof(float));
	return 0;
}

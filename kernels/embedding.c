/* Embedding gather: one row copy (or, from a quantized table, one row
 * dequantization) per token; ids are checked first so a bad id never
 * reads outside the table. */
#include "embedding.h"

#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

static int check_ids(const int32_t *ids, uint32_t n_tokens, uint32_t vocab)
{
	for (uint32_t t = 0; t < n_tokens; t++) {
		if (ids[t] < 0 || (uint32_t)ids[t] >= vocab) {
			o1_err("embedding: token id %d at row %u outside the "
			       "vocabulary of %u",
			       ids[t], t, vocab);
			return -O1_E_BOUNDS;
		}
	}
	return 0;
}

int o1_embedding_cpu(struct o1_threads *tp, float *out, const float *table,
		     const int32_t *ids, uint32_t n_tokens, uint32_t dim,
		     uint32_t vocab)
{
	int err = check_ids(ids, n_tokens, vocab);

	(void)tp;
	if (err)
		return err;
	for (uint32_t t = 0; t < n_tokens; t++)
		memcpy(out + (size_t)t * dim, table + (size_t)ids[t] * dim,
		       dim * sizeof(float));
	return 0;
}

int o1_embedding_q_cpu(struct o1_threads *tp, float *out, const void *table,
		       enum o1_quant_type type, const int32_t *ids,
		       uint32_t n_tokens, uint32_t dim, uint32_t vocab)
{
	int err = check_ids(ids, n_tokens, vocab);
	uint64_t rb;

	(void)tp;
	if (o1_quant_row_bytes(type, dim, &rb)) {
		o1_err("embedding: %s rows of %u", o1_quant_name(type), dim);
		return -EINVAL;
	}
	if (err)
		return err;
	for (uint32_t t = 0; t < n_tokens; t++)
		o1_quant_dequantize(type, (const char *)table + ids[t] * rb,
				    out + (size_t)t * dim, dim);
	return 0;
}

/* A model's weight bytes by storage type (o1ctl status): every tensor's
 * n_bytes (what its file holds: GGUF blocks stay blocks) counted under
 * its dtype, the types largest first (the ones that matter lead). */
#ifndef O1_MODEL_WEIGHTS_H
#define O1_MODEL_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define O1_MODEL_WEIGHT_TYPES_MAX 8

struct o1_model_weights {
	uint64_t total; /* bytes, every tensor */
	uint32_t n;	/* distinct types (more than the max: in "other") */
	struct o1_model_weight_type {
		enum o1_dtype type;
		uint32_t tensors;
		uint64_t bytes;
	} t[O1_MODEL_WEIGHT_TYPES_MAX];
	uint64_t other; /* bytes of types past the max */
};

void o1_model_weights(const struct o1_model *m, struct o1_model_weights *out);

/* "4.91 GB: Q4_K 3.93 GB (193), Q6_K 0.85 GB (33), F32 0.27 MB (65)"
 * (decimal units, tensors in parentheses) into BUF of N > 0 bytes.
 * Returns 0, or -ENOSPC when it was cut short (BUF still terminated). */
int o1_model_weights_text(const struct o1_model_weights *w, char *buf,
			  size_t n);

#endif

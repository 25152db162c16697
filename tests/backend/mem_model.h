/* Small decoder models held in memory for the engine tests: random
 * weights (fixed seed) in the layout of model.h, f32, or converted per
 * role to F16, BF16 or a GGUF block type, and the GGUF Q/K row interleave
 * on demand. */
#ifndef O1_TEST_MEM_MODEL_H
#define O1_TEST_MEM_MODEL_H

#include <stdint.h>

#include "model/model.h"

#define MEM_MODEL_MAX_TENSORS 160

struct mem_model {
	struct o1_model m;
	struct o1_tensor t[MEM_MODEL_MAX_TENSORS];
	void *data[MEM_MODEL_MAX_TENSORS]; /* owned */
};

/* Every tensor D implies, values uniform in offset +- scale (weights
 * 0.3, norms 1 +- 0.3, biases 0.5, embedding 1), from SEED. Validated. */
void mem_model_build(struct mem_model *f, const struct o1_model_desc *d,
		     uint64_t seed);
/* Converts every f32 tensor of ROLE to DTYPE (F16, BF16, or a block type
 * of kernels/quant.h when its rows are whole blocks). Interleave first:
 * mem_model_interleave takes f32 tensors. */
void mem_model_convert(struct mem_model *f, enum o1_tensor_role role,
		       enum o1_dtype dtype);
/* Stores WQ, WK, BQ, BK rows in GGUF's interleaved order and marks them
 * qk_interleaved (o1_tensor_read_f32 undoes it). */
void mem_model_interleave(struct mem_model *f);
void mem_model_release(struct mem_model *f);

#endif

/* llama.cpp's tensor-type recipes for the mixes o1model convert writes
 * (see quant_recipe.h). */
#include "quant_recipe.h"

#include <errno.h>
#include <strings.h>

#include "kernels/quant.h"

static const struct {
	const char *name;
	enum o1_dtype base;
	uint32_t ftype; /* LLAMA_FTYPE_MOSTLY_* */
} mixes[] = {
    [O1MODEL_Q8_0] = {"q8_0", O1_DTYPE_Q8_0, 7},
    [O1MODEL_Q4_0] = {"q4_0", O1_DTYPE_Q4_0, 2},
    [O1MODEL_Q4_K_M] = {"q4_k_m", O1_DTYPE_Q4_K, 15},
    [O1MODEL_Q6_K] = {"q6_k", O1_DTYPE_Q6_K, 18},
};

int o1model_quant_parse(const char *s, enum o1model_quant *out)
{
	for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++)
		if (strcasecmp(s, mixes[i].name) == 0) {
			*out = (enum o1model_quant)i;
			return 0;
		}
	return -EINVAL;
}

const char *o1model_quant_name(enum o1model_quant q)
{
	return (unsigned)q < sizeof(mixes) / sizeof(mixes[0]) ? mixes[q].name
							      : "?";
}

bool o1model_quant_more_bits(uint32_t i, uint32_t n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The tensor llama.cpp treats as the output: the LM head, or the token
 * embedding of a tied model. */
static bool is_head(const struct o1_model *m, const struct o1_tensor *t)
{
	return t->role == O1_T_OUTPUT ||
	       (t->role == O1_T_TOKEN_EMBD && m->desc.tied_embeddings);
}

/* The type of matrix T before the row-length fallback. */
static enum o1_dtype pick(const struct o1_model *m, const struct o1_tensor *t,
			  enum o1model_quant q)
{
	enum o1_dtype base = mixes[q].base;
	bool more = t->layer >= 0 && o1model_quant_more_bits((uint32_t)t->layer,
							     m->desc.n_layers);

	if (is_head(m, t))
		return base == O1_DTYPE_Q8_0 ? O1_DTYPE_Q8_0 : O1_DTYPE_Q6_K;
	if (q == O1MODEL_Q4_K_M && more &&
	    (t->role == O1_T_WV || t->role == O1_T_W_DOWN))
		return O1_DTYPE_Q6_K;
	return base;
}

/* A type whose block divides COLS, from TYPE down the fallback chain. */
static enum o1_dtype fit(enum o1_dtype type, uint64_t cols)
{
	while (o1_quant_is_block(type) &&
	       cols % o1_quant_block_elements(type) != 0)
		type = type == O1_DTYPE_Q4_K   ? O1_DTYPE_Q5_0
		       : type == O1_DTYPE_Q6_K ? O1_DTYPE_Q8_0
					       : O1_DTYPE_F16;
	return type;
}

uint32_t o1model_quant_types(const struct o1_model *m, enum o1model_quant q,
			     enum o1_dtype *types)
{
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		const struct o1_tensor *t = &m->tensors[i];

		types[i] = t->n_dims == 1
			       ? O1_DTYPE_F32
			       : fit(pick(m, t, q), t->shape[t->n_dims - 1]);
	}
	return mixes[q].ftype;
}

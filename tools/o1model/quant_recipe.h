/* o1model convert --quantize: which GGUF type each tensor takes, after
 * llama.cpp's llama-quantize (no importance matrix, no overrides):
 *
 *   q8_0    every matrix Q8_0;
 *   q4_0    every matrix Q4_0, the LM head Q6_K (llama.cpp's rule for the
 *           output tensor of every quantized mix but Q8_0);
 *   q6_k    every matrix Q6_K;
 *   q4_k_m  Q4_K, with Q6_K for the LM head and, in the layers
 *           use_more_bits picks (the first and last eighth, and every
 *           third in between: about half), attn_v and ffn_down.
 * The LM head is the token embedding of a tied model. Vectors stay F32.
 * A matrix whose rows are not whole blocks of its type falls back as
 * llama.cpp's: Q4_K to Q5_0, Q6_K to Q8_0, Q8_0, Q4_0 and Q5_0 to F16.
 */
#ifndef O1MODEL_QUANT_RECIPE_H
#define O1MODEL_QUANT_RECIPE_H

#include <stdint.h>

#include "model/model.h"

enum o1model_quant {
	O1MODEL_Q8_0,
	O1MODEL_Q4_0,
	O1MODEL_Q4_K_M,
	O1MODEL_Q6_K,
};

/* q8_0|q4_0|q4_k_m|q6_k (either case); -EINVAL otherwise. */
int o1model_quant_parse(const char *s, enum o1model_quant *out);
const char *o1model_quant_name(enum o1model_quant q);

/* Fills TYPES[i] for M->tensors[i] and returns llama.cpp's
 * general.file_type of the mix (LLAMA_FTYPE_MOSTLY_*). */
uint32_t o1model_quant_types(const struct o1_model *m, enum o1model_quant q,
			     enum o1_dtype *types);

/* llama.cpp's use_more_bits: layer I of N gets the larger type. */
bool o1model_quant_more_bits(uint32_t i, uint32_t n);

#endif

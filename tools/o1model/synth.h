/* Random models for o1model make: presets with the shapes of real models,
 * a seeded generator, and an in-memory struct o1_model the writers take. */
#ifndef O1MODEL_SYNTH_H
#define O1MODEL_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

struct o1model_synth_opts {
	const char *preset; /* tiny|qwen2.5-0.5b|llama3.2-1b|llama3-8b */
	enum o1_arch arch;
	bool arch_given; /* false: the preset's own family */
	uint32_t layers; /* 0: the preset's */
	uint32_t vocab;	 /* 0: the preset's (tiny: the tokenizer's) */
	uint32_t ctx;	 /* 0: the preset's */
	uint64_t seed;
	enum o1_dtype dtype;	 /* F32, F16 or BF16: how tensors are held */
	const char *tokenizer;	 /* NULL: the built-in tiny vocabulary */
	const char *scratch_dir; /* where the weights are staged (unlinked
				  * file, so big presets need no RAM) */
	uint32_t n_threads;	 /* tensors filled at once; 0: online CPUs */
};

/* Builds the model O describes. Tensors follow model.h's conventions and
 * hold deterministic values: matrices, embeddings and biases N(0, 0.02),
 * norm weights 1 + N(0, 0.02), each tensor from its own stream seeded by
 * (seed, role, layer), so the bytes are the same for any thread count
 * (tensors are filled on O->n_threads threads, largest first).
 * *OUT is owned by the caller (o1_model_close).
 * Returns -EINVAL (with a log line) for a bad preset or size. */
int o1model_synth_create(const struct o1model_synth_opts *o,
			 struct o1_model **out);

#endif

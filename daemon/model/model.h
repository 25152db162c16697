/* The model description every loader produces and every backend consumes.
 *
 * A GGUF file and a Hugging Face folder both load into one struct o1_model:
 * the hyperparameters (struct o1_model_desc) and one struct o1_tensor per
 * weight, named by role (enum o1_tensor_role) and layer.
 *
 * Conventions, whatever the source format:
 * - Matrices are row-major [out_features, in_features] (HF orientation; the
 *   same bytes as GGUF's ne0 = in_features, ne1 = out_features).
 * - Q and K projection rows (and their biases) are in HF order: rotary
 *   pairs are the two halves of each head (NeoX style). The GGUF loader
 *   undoes llama.cpp's interleave permutation of llama-architecture Q/K;
 *   the GGUF writer applies it again.
 * - Tensor data is borrowed from the file mapping held by struct o1_model
 *   (valid until o1_model_close), in the file's own dtype. Backends convert
 *   with o1_tensor_read_f32() (see dtype.h) at load.
 */
#ifndef O1_MODEL_H
#define O1_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/rope.h" /* struct o1_rope: the rotation is the kernel's contract */
#include "dtype.h"
#include "vocab.h"

enum o1_arch {
	O1_ARCH_LLAMA,
	O1_ARCH_QWEN2,
	O1_ARCH_MISTRAL,
	O1_ARCH_COUNT,
};

struct o1_model_desc {
	enum o1_arch arch;
	char name[128];		/* model.name default: from metadata or file */
	uint32_t n_layers;
	uint32_t dim;		/* hidden size */
	uint32_t n_heads;
	uint32_t n_kv_heads;
	uint32_t head_dim;
	uint32_t ffn_dim;	/* intermediate size */
	uint32_t vocab_size;
	uint32_t max_context_tokens;
	float norm_eps;		/* RMSNorm epsilon */
	bool tied_embeddings;	/* LM head reads the token embedding */
	bool qkv_bias;		/* Q/K/V projections have biases */
	struct o1_rope rope;
	int32_t bos_id;		/* -1 when unknown */
	int32_t eos_id;		/* -1 when unknown */
};

enum o1_tensor_role {
	O1_T_TOKEN_EMBD, /* [vocab, dim] */
	O1_T_OUTPUT_NORM, /* [dim] */
	O1_T_OUTPUT,	  /* [vocab, dim]; absent when tied */
	O1_T_ATTN_NORM,	  /* per layer [dim] */
	O1_T_WQ,	  /* [n_heads*head_dim, dim] */
	O1_T_WK,	  /* [n_kv_heads*head_dim, dim] */
	O1_T_WV,	  /* [n_kv_heads*head_dim, dim] */
	O1_T_BQ,	  /* [n_heads*head_dim], only with qkv_bias */
	O1_T_BK,	  /* [n_kv_heads*head_dim] */
	O1_T_BV,	  /* [n_kv_heads*head_dim] */
	O1_T_WO,	  /* [dim, n_heads*head_dim] */
	O1_T_FFN_NORM,	  /* [dim] */
	O1_T_W_GATE,	  /* [ffn, dim] */
	O1_T_W_UP,	  /* [ffn, dim] */
	O1_T_W_DOWN,	  /* [dim, ffn] */
	O1_T_ROPE_FREQS,  /* optional [rope.dim/2]: GGUF's rope_freqs.weight,
			   * per-pair divisors of the inverse frequencies
			   * (llama3 scaling as llama.cpp stores it) */
	O1_T_ROLE_COUNT,
};

#define O1_TENSOR_MAX_DIMS 4

struct o1_tensor {
	enum o1_tensor_role role;
	int32_t layer;		/* -1 for global tensors */
	enum o1_dtype dtype;
	uint32_t n_dims;
	uint64_t shape[O1_TENSOR_MAX_DIMS]; /* outermost first: [out, in] */
	const void *data;	/* borrowed: see the file comment */
	uint64_t n_bytes;
	bool qk_interleaved;	/* data rows still in GGUF llama order; the
				 * reader un-permutes while converting */
};

struct o1_model {
	struct o1_model_desc desc;
	struct o1_tensor *tensors; /* owned; n_tensors entries */
	uint32_t n_tensors;
	struct o1_vocab *vocab;	   /* owned; NULL when the files have none */
	void *source;		   /* owned by the loader: open files/mappings */
	void (*unload)(struct o1_model *m); /* frees source; set by loader */
	char path[4096];
};

/* Opens PATH: a .gguf file, or a folder with config.json and safetensors.
 * On success *out is owned by the caller (o1_model_close). Every malformed
 * input is an error return with one log line saying what is wrong. */
int o1_model_open(const char *path, struct o1_model **out);
void o1_model_close(struct o1_model *model);

/* Finds the tensor with ROLE in LAYER (-1 for globals); NULL if absent. */
const struct o1_tensor *o1_model_tensor(const struct o1_model *model,
					enum o1_tensor_role role, int layer);

/* Checks that every required tensor is present with the shape the
 * description implies; returns 0 or -O1_E_MISSING / -O1_E_SHAPE. */
int o1_model_validate(const struct o1_model *model);

/* Reads tensor T into DST as float32 (n_elements floats), undoing any
 * storage permutation, dequantizing as needed. */
int o1_tensor_read_f32(const struct o1_model *model, const struct o1_tensor *t,
		       float *dst);

/* Copies T, a matrix of block-format rows (Q8_0, Q4_K, ...), into DST
 * (t->n_bytes) as it is, blocks untouched, rows put back in canonical
 * order when stored permuted (see o1_model_interleaved_row): the form the
 * backends keep weights in. Returns 0, or -O1_E_SHAPE (logged) when the
 * rows are not whole blocks. */
int o1_tensor_read_blocks(const struct o1_model *model,
			  const struct o1_tensor *t, void *dst);

uint64_t o1_tensor_elements(const struct o1_tensor *t);

/* GGUF llama stores each head's Q/K rows interleaved (pair i of the rotary
 * dims at rows 2i, 2i+1); HF keeps the halves apart (rows i, i + D/2).
 * Returns the stored row that holds canonical row R (HEAD_DIM even). */
uint64_t o1_model_interleaved_row(uint64_t r, uint32_t head_dim);

/* The shape D implies for ROLE: *ROWS by *COLS, or a vector of *COLS when
 * *ROWS is 0 (see the enum above). Returns 0, or -EINVAL (both 0) for a
 * role with no fixed shape (O1_T_ROPE_FREQS, out of range). */
int o1_model_expected_shape(const struct o1_model_desc *d,
			    enum o1_tensor_role role, uint64_t *rows,
			    uint64_t *cols);

/* Loader back ends, called by o1_model_open with M zeroed and M->path set.
 * Each fills desc, tensors, vocab, source and unload; on failure it frees
 * what it allocated and leaves M as it found it. */
int o1_model_load_gguf(struct o1_model *m);
int o1_model_load_hf(struct o1_model *m);

/* Writers (o1model make/convert). M's tensors follow this header's
 * conventions; the GGUF writer applies llama.cpp's names, metadata keys
 * and Q/K permutation; the HF writer writes config.json, model.safetensors
 * and, with a vocabulary, tokenizer.json. DTYPE is F32, F16 or BF16. */
int o1_model_write_gguf(const struct o1_model *m, enum o1_dtype dtype,
			const char *path);
/* The GGUF writer with a type per tensor: TYPES[i] for M->tensors[i], F32,
 * F16, BF16 or a block type whose block divides the rows (quantized with
 * kernels/quant.h's reference quantizers on every online CPU: the same
 * bytes for any count); vectors are written F32 whatever TYPES says.
 * FTYPE is llama.cpp's general.file_type (LLAMA_FTYPE_*). -EINVAL for a
 * type a matrix cannot take. */
int o1_model_write_gguf_as(const struct o1_model *m,
			   const enum o1_dtype *types, uint32_t ftype,
			   const char *path);
int o1_model_write_hf(const struct o1_model *m, enum o1_dtype dtype,
		      const char *dir);

const char *o1_arch_name(enum o1_arch arch);
const char *o1_tensor_role_name(enum o1_tensor_role role);
const char *o1_rope_scaling_name(enum o1_rope_scaling scaling);

#endif

/* The vocabulary as model files carry it, before any tokenizer is built.
 *
 * GGUF keeps it in tokenizer.ggml.* metadata; a Hugging Face folder in
 * tokenizer.json (+ tokenizer_config.json); GPT-2 style folders in
 * vocab.json/encoder.json + merges.txt/vocab.bpe. Each loader fills one
 * struct o1_vocab, the tokenizer (daemon/tokenizer) is built from it, and
 * the model writers store it back in either format, so a conversion keeps
 * the tokenizer.
 *
 * All strings are owned by the struct (each malloc'd, freed by destroy) and
 * NUL-terminated;
 * token texts are in the model's own encoding (GPT-2 byte-to-unicode
 * for byte-level BPE, U+2581 for SentencePiece spaces).
 */
#ifndef O1_VOCAB_H
#define O1_VOCAB_H

#include <stdbool.h>
#include <stdint.h>

enum o1_vocab_kind {
	O1_VOCAB_BPE, /* byte-level BPE: GGUF "gpt2" */
	O1_VOCAB_SPM, /* SentencePiece BPE with scores: GGUF "llama" */
};

/* GGUF token types (tokenizer.ggml.token_type). */
enum o1_token_type {
	O1_TOKEN_UNDEFINED = 0,
	O1_TOKEN_NORMAL = 1,
	O1_TOKEN_UNKNOWN = 2,
	O1_TOKEN_CONTROL = 3,
	O1_TOKEN_USER_DEFINED = 4,
	O1_TOKEN_UNUSED = 5,
	O1_TOKEN_BYTE = 6,
};

struct o1_vocab {
	enum o1_vocab_kind kind;
	char pre[64];		/* pre-tokenizer name: "gpt2", "llama-bpe",
				 * "qwen2", "default" ... */
	uint32_t n_tokens;
	char **tokens;		/* [n_tokens] */
	float *scores;		/* [n_tokens] or NULL */
	int32_t *types;		/* [n_tokens] enum o1_token_type, or NULL */
	uint32_t n_merges;
	char **merges;		/* [n_merges] "left right", rank order */
	int32_t bos_id, eos_id, unk_id, pad_id; /* -1 when absent */
	bool add_bos;		/* prepend BOS when encoding a prompt */
	bool add_eos;
	bool add_space_prefix;	/* SPM dummy prefix */
	bool ignore_merges;	/* a pre-token in the vocabulary is one id */
	char *chat_template;	/* Jinja text or NULL */
};

/* Allocates an empty vocabulary with room for N_TOKENS and N_MERGES. */
int o1_vocab_create(uint32_t n_tokens, uint32_t n_merges,
		    struct o1_vocab **out);
void o1_vocab_destroy(struct o1_vocab *v);
/* Returns a malloc'd NUL-terminated copy of LEN bytes of S for a slot of V
 * (freed by o1_vocab_destroy once stored there); NULL when out of memory. */
char *o1_vocab_strdup(struct o1_vocab *v, const char *s, uint64_t len);
/* Names every id without a token "<|unused_ID|>" (type UNUSED), for the
 * loaders of formats that may skip ids. 0 or -ENOMEM. */
int o1_vocab_fill_holes(struct o1_vocab *v);

/* Loaders, one per file format (each logs what is wrong on failure):
 * - GGUF tokenizer.ggml.* metadata of a model or vocab-only file
 *   (daemon/model/model_gguf.c);
 * - HF tokenizer.json, plus tokenizer_config.json beside it when present
 *   for special-token flags and the chat template
 *   (daemon/model/tokenizer_json.c). */
int o1_vocab_load_gguf(const char *path, struct o1_vocab **out);
int o1_vocab_load_tokenizer_json(const char *path, struct o1_vocab **out);
/* Writes V as an HF tokenizer.json (and tokenizer_config.json holding the
 * chat template and BOS/EOS flags) into folder DIR. */
int o1_vocab_write_tokenizer_json(const struct o1_vocab *v, const char *dir);

#endif

/* Text <-> token ids for the model's vocabulary.
 *
 * Two algorithms, chosen by vocab->kind:
 * - byte-level BPE (GPT-2, Llama 3, Qwen2): the family's pre-tokenizer
 *   regex (PCRE2, UTF + UCP, JIT) splits the text, each piece's bytes go
 *   through the GPT-2 byte-to-unicode mapping and merge by rank;
 *   ignore_merges emits a piece found whole in the vocabulary as one id;
 * - SentencePiece BPE (Llama 2, Mistral): spaces become U+2581, a dummy
 *   prefix space when add_space_prefix, merges by score, bytes missing
 *   from the vocabulary fall back to <0xNN> tokens (llama.cpp's behaviour).
 *
 * A tokenizer is immutable once created: any number of threads may encode
 * and decode with one tokenizer at the same time (each call uses its own
 * scratch memory). Input text must be valid UTF-8: anything else is
 * rejected with -O1_E_TOKENIZER and one log line giving the byte offset.
 * Decoded text is always valid UTF-8: bytes that do not form a character
 * come out as U+FFFD.
 */
#ifndef O1_TOKENIZER_H
#define O1_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/vocab.h"

struct o1_tokenizer;

/* Builds a tokenizer from V. V is only borrowed during the call: the
 * tokenizer keeps its own copy of everything it needs. Fails with
 * -O1_E_UNSUPPORTED for a pre-tokenizer name it does not know (see
 * o1_tokenizer_pre_names) and -O1_E_FORMAT for a vocabulary that cannot
 * encode (e.g. byte-level BPE without all 256 byte tokens). */
int o1_tokenizer_create(const struct o1_vocab *v, struct o1_tokenizer **out);
void o1_tokenizer_destroy(struct o1_tokenizer *t);

/* Comma-separated list of the byte-level pre-tokenizer names accepted. */
const char *o1_tokenizer_pre_names(void);

enum o1_encode_flags {
	/* BOS first / EOS last when the vocabulary says add_bos / add_eos */
	O1_ENCODE_ADD_SPECIAL = 1u << 0,
	/* match control tokens (<|eot_id|>, <s> ...) in the text; user-defined
	 * added tokens are always matched, as llama.cpp and HF do */
	O1_ENCODE_PARSE_SPECIAL = 1u << 1,
};

/* Encodes LEN bytes of TEXT into IDS. Returns the number of ids the text
 * needs (snprintf-style: when it exceeds CAP, only the first CAP ids were
 * stored, call again with more room), or a negative error:
 * -O1_E_TOKENIZER for invalid UTF-8, -ENOMEM. */
int o1_tokenizer_encode(const struct o1_tokenizer *t, const char *text,
			size_t len, unsigned flags, int32_t *ids, size_t cap);

/* Token count, the raw text of ID in the model's own encoding (NULL when
 * out of range; owned by T), and the id of an exact token text (-1 when
 * absent). */
uint32_t o1_tokenizer_n_tokens(const struct o1_tokenizer *t);
const char *o1_tokenizer_token_text(const struct o1_tokenizer *t, int32_t id);
int32_t o1_tokenizer_find(const struct o1_tokenizer *t, const char *text,
			  size_t len);
/* The bytes token ID stands for in output text (its decoded piece, which
 * may be part of a UTF-8 character; a control token's piece is its text),
 * owned by T; *LEN its length. NULL for an id out of range. */
const uint8_t *o1_tokenizer_token_bytes(const struct o1_tokenizer *t,
					int32_t id, size_t *len);
int32_t o1_tokenizer_bos(const struct o1_tokenizer *t);
int32_t o1_tokenizer_eos(const struct o1_tokenizer *t);
/* True for control tokens (BOS, EOS, <|eot_id|> ...). */
bool o1_tokenizer_is_special(const struct o1_tokenizer *t, int32_t id);

enum o1_decode_flags {
	/* control tokens produce no text */
	O1_DECODE_SKIP_SPECIAL = 1u << 0,
	/* SentencePiece with a dummy prefix: drop the one leading space of the
	 * first text piece (decoding a whole prompt, not a continuation) */
	O1_DECODE_STRIP_PREFIX = 1u << 1,
	/* with SKIP_SPECIAL: control tokens that are tool-call markers
	 * ([TOOL_CALLS], <|python_tag|> ..., tool_call.h) keep their text, so
	 * the calls of a request with tools can be read back */
	O1_DECODE_KEEP_TOOL_MARKERS = 1u << 2,
};

/* Per-sequence incremental detokenizer state, in the caller's storage.
 * Bytes of an incomplete UTF-8 character wait in PEND until the tokens
 * that complete it arrive. */
struct o1_detok {
	uint8_t pend[4];
	uint8_t n_pend;
	uint8_t strip; /* a leading space is still to be dropped */
	unsigned flags;
};

void o1_tokenizer_decode_init(struct o1_detok *d, unsigned flags);
/* Appends the text of token ID to OUT: only whole, valid UTF-8 characters
 * (invalid bytes become U+FFFD). Returns the number of bytes written, or
 * -ENOSPC (state unchanged) when CAP is too small: CAP >= 4 * (length of
 * the token's piece + 4) always suffices; -O1_E_BOUNDS for a bad id. */
int o1_tokenizer_decode_step(const struct o1_tokenizer *t, struct o1_detok *d,
			     int32_t id, char *out, size_t cap);
/* Ends the sequence: an incomplete character still pending comes out as
 * U+FFFD. Returns bytes written (at most 3) or -ENOSPC. */
int o1_tokenizer_decode_flush(struct o1_detok *d, char *out, size_t cap);
/* Decodes N ids at once into OUT, NUL-terminated when CAP > 0. Returns the
 * text length needed (snprintf-style: truncated when >= CAP) or a negative
 * error. */
int o1_tokenizer_decode(const struct o1_tokenizer *t, const int32_t *ids,
			size_t n, unsigned flags, char *out, size_t cap);

/* Largest decoded piece of any token, in bytes. */
size_t o1_tokenizer_max_piece(const struct o1_tokenizer *t);

#endif

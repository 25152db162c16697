/* The small byte-level BPE vocabulary o1model builds for random models when
 * no --tokenizer is given. */
#ifndef O1MODEL_TINY_VOCAB_H
#define O1MODEL_TINY_VOCAB_H

#include <stdint.h>

#include "model/vocab.h"

#define O1MODEL_TINY_MERGES 320

/* Builds the vocabulary: 256 byte tokens (GPT-2 byte-to-unicode text),
 * O1MODEL_TINY_MERGES merged tokens learned deterministically from a text
 * compiled into the tool, and the special tokens <|begin_of_text|>,
 * <|end_of_text|>, <|im_start|>, <|im_end|>; pre "gpt2", a ChatML chat
 * template. *OUT is owned by the caller (o1_vocab_destroy). */
int o1model_tiny_vocab_build(struct o1_vocab **out);

/* Grows V to N_TOKENS entries with "<|unused_K|>" tokens of type UNUSED.
 * N_TOKENS must be at least V->n_tokens. */
int o1model_vocab_pad(struct o1_vocab *v, uint32_t n_tokens);

#endif

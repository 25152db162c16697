/* Vocabulary loaders beside those of daemon/model: GPT-2 style file pairs,
 * and one entry point that accepts any supported vocabulary source. */
#ifndef O1_VOCAB_GPT2_H
#define O1_VOCAB_GPT2_H

#include "model/vocab.h"

/* Loads VOCAB_PATH (vocab.json or encoder.json: {"token": id, ...}) and
 * MERGES_PATH (merges.txt or vocab.bpe: one "left right" merge per line,
 * an optional "#version" first line) as a byte-level BPE vocabulary.
 * The files do not name their pre-tokenizer, so it is inferred from the
 * digit tokens, which each family's regex shapes: a token of four or more
 * digits means GPT-2 ("gpt2"); digits in runs of at most three mean
 * Llama 3 ("llama-bpe", with ignore_merges as its tokenizer.json sets);
 * single digits only mean Qwen2 ("qwen2"). Tokens written <|...|> are
 * control tokens; <|endoftext|> / <|begin_of_text|> / <|end_of_text|> set
 * BOS and EOS. Ids missing from the map become unused "<|unused_N|>". */
int o1_vocab_load_gpt2(const char *vocab_path, const char *merges_path,
		       struct o1_vocab **out);

/* Loads PATH, which is a GGUF file, a tokenizer.json, a vocab.json /
 * encoder.json with its merges file beside it, or a folder holding
 * tokenizer.json or such a pair. -ENOENT (logged) when nothing is there. */
int o1_vocab_load_any(const char *path, struct o1_vocab **out);

#endif

/* Small hand-built vocabularies for the tokenizer's tests and fuzz harness:
 * no files needed. */
#ifndef O1_TOK_FIXTURE_H
#define O1_TOK_FIXTURE_H

#include <stdbool.h>

#include "model/vocab.h"

/* Byte-level BPE: ids 0..255 are the bytes (GPT-2 mapping, byte order),
 * then the merge results in order, "xyz" (no merge makes it), then
 * <|endoftext|> (control) and <|user|> (user-defined). */
int tok_fixture_bpe(const char *pre, bool ignore_merges, struct o1_vocab **out);

/* SentencePiece: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then the
 * pieces of the table in tok_fixture.c with their scores. add_space_prefix and
 * add_bos are on. */
int tok_fixture_spm(struct o1_vocab **out);

/* Id of TEXT in V, -1 when absent. */
int tok_fixture_id(const struct o1_vocab *v, const char *text);

#endif

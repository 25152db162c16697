/* Byte-level BPE training for o1model's demo model: learns a vocabulary
 * from a text, so that the text's words become single tokens. */
#ifndef O1MODEL_BPE_TRAIN_H
#define O1MODEL_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "model/vocab.h"

#define O1MODEL_BPE_MAX_MERGES 4096

/* Learns up to N_MERGES merges from LEN bytes of TEXT and builds the
 * vocabulary: 256 byte tokens (GPT-2 byte-to-unicode text), one token per
 * merge, then <|begin_of_text|> (BOS), <|end_of_text|>, <|im_start|>,
 * <|im_end|> (EOS, ends a chat turn) as control tokens; pre "gpt2", a
 * ChatML chat template, add_bos.
 *
 * Training is deterministic: the text is split into words (an optional
 * leading space, then a run of letters (bytes >= 0x80 count as letters),
 * digits or other symbols; or a run of whitespace), each merge takes the
 * most frequent adjacent pair over all words (ties: the lowest pair of
 * ids, left id first), a pair whose text already is a token is skipped,
 * and training stops early when the best pair left occurs fewer than
 * MIN_COUNT times (1 or 0: when every word is one token). Words are cut at
 * 63 bytes. *OUT is owned by the caller (o1_vocab_destroy). Returns
 * -EINVAL (logged) for N_MERGES above O1MODEL_BPE_MAX_MERGES. */
int o1model_bpe_train(const char *text, size_t len, uint32_t n_merges,
		      uint32_t min_count, struct o1_vocab **out);

#endif

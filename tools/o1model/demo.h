/* The demo model of o1model make --preset demo: a bigram language model of
 * a text, counted here and written as transformer weights, so a model that
 * writes readable text exists without any training run.
 *
 * The model, exactly (tests re-derive it from this description):
 * - vocabulary: byte-level BPE learned from the text itself with
 *   up to O1MODEL_DEMO_MERGES merges (bpe_train.h), so the text's words
 *   are single tokens (up to 63 bytes); EOS <|im_end|>, ChatML chat template,
 * BOS added to prompts;
 * - the texts are concatenated with "\n\n" between them; Markdown table
 *   rows (lines starting with '|') and fenced code blocks (from a line
 *   starting with ``` to the next, both included) become blank lines;
 * - the text is cut into paragraphs at blank lines (a line holding only
 *   spaces, tabs or '\r' counts as blank); each paragraph, without its
 *   final newline, is encoded with the model's tokenizer (no special
 *   tokens); the stream is BOS, paragraph 1, EOS, paragraph 2, EOS, ...;
 * - S, the tokens the model may emit: every token of some paragraph, and
 *   EOS. c(i, j) counts the adjacent pairs (i, j) of the stream;
 * - P(j | i) = (c(i, j) + K) / (sum over S of c(i, .) + K |S|) for j in S
 *   (add-K smoothing, K = O1MODEL_DEMO_K); tokens outside S get the logit
 *   O1MODEL_DEMO_NEVER (probability about e^-100, never sampled);
 * - weights, dim = vocab size: token embedding = identity (one-hot rows),
 *   one llama layer whose every weight is zero (attention and MLP add
 *   exactly 0 to the residual), final RMSNorm weights sqrt(1/dim + eps)
 *   (RMSNorm turns e_i into e_i / sqrt(1/dim + eps); the weight cancels
 *   the factor, leaving e_i), LM head [vocab, dim] with column i = log
 *   P(. | i). So the logits of a position holding token i are exactly
 *   log P(. | i), up to float rounding (about 1e-5 absolute). */
#ifndef O1MODEL_DEMO_H
#define O1MODEL_DEMO_H

#include <stdint.h>

#include "model/model.h"

#define O1MODEL_DEMO_K	       0.0001
#define O1MODEL_DEMO_MERGES    4096
#define O1MODEL_DEMO_NEVER     (-100.0f)
#define O1MODEL_DEMO_MAX_TEXTS 64

struct o1model_demo_opts {
	const char *texts[O1MODEL_DEMO_MAX_TEXTS]; /* files, concatenated with
						    * a blank line between */
	uint32_t n_texts;			   /* 0: README.md and
						    * docs/ *.md files of the source
						    * tree o1model was built
						    * from */
	enum o1_dtype dtype;			   /* F32, F16 or BF16 */
};

/* Builds the demo model of O's texts. *OUT is owned by the caller
 * (o1_model_close). Returns -EINVAL (logged) for a missing or empty text
 * or bad dtype, -O1_E_TOKENIZER (logged with the file) for text that is
 * not UTF-8. */
int o1model_demo_create(const struct o1model_demo_opts *o,
			struct o1_model **out);

#endif

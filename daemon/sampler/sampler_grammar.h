/* A sampler's grammar constraint (sampler.h, o1_sampler_constrain): the
 * request's matcher and the mask of the next token over the logits row
 * (o1_sample_mask_words(vocab) words, the tokens past the grammar's
 * vocabulary refused). Internal to the sampler module. */
#ifndef O1_SAMPLER_GRAMMAR_H
#define O1_SAMPLER_GRAMMAR_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "kernels/sample.h"

struct sampler_grammar;

/* Takes M (owned from now on) for a logits row of VOCAB entries. */
int sampler_grammar_create(struct o1_grammar_matcher *m, uint32_t vocab,
			   uint32_t n_words, struct sampler_grammar **out);
void sampler_grammar_destroy(struct sampler_grammar *g);
/* Computes the next token's mask now (when not done yet). */
int sampler_grammar_prepare(struct sampler_grammar *g);
/* The next token's mask (computed now unless prepared), valid until the
 * next accept. -O1_E_GRAMMAR when no token is allowed. */
int sampler_grammar_mask(struct sampler_grammar *g, const uint32_t **mask);
/* Feeds the sampled token to the matcher: 0, 1 for an end token, or
 * -O1_E_GRAMMAR when the grammar refuses it. */
int sampler_grammar_accept(struct sampler_grammar *g, int32_t id);

#endif

/* The grammar constraint of a sampler (sampler_grammar.h). The mask is
 * computed once per token, either ahead (sampler_grammar_prepare, e.g.
 * before the step that samples it) or when the logits are there; it is
 * spent by the token the sampler then draws (on the host or in a backend:
 * kernels/sample.h's masked rows). Tokens past the grammar's vocabulary
 * (a padded logits row) are never allowed: the mask has the row's words,
 * those past the grammar's stay 0. Everything is allocated at create.
 */
#include "sampler_grammar.h"

#include <errno.h>
#include <stdlib.h>

#include "common/error.h"

struct sampler_grammar {
	struct o1_grammar_matcher *m; /* owned */
	uint32_t *mask; /* [max(n_words, row_words)]: the matcher writes
			 * n_words, sampling reads row_words */
	uint32_t n_words, row_words, vocab;
	bool ready; /* mask is the next token's */
};

int sampler_grammar_create(struct o1_grammar_matcher *m, uint32_t vocab,
			   uint32_t n_words, struct sampler_grammar **out)
{
	struct sampler_grammar *g = calloc(1, sizeof(*g));
	uint32_t row_words = o1_sample_mask_words(vocab);

	if (!g)
		return -ENOMEM;
	g->mask = calloc(n_words > row_words ? n_words : row_words,
			 sizeof(*g->mask));
	if (!g->mask) {
		free(g);
		return -ENOMEM;
	}
	g->m = m;
	g->n_words = n_words;
	g->row_words = row_words;
	g->vocab = vocab;
	*out = g;
	return 0;
}

void sampler_grammar_destroy(struct sampler_grammar *g)
{
	if (!g)
		return;
	o1_grammar_matcher_destroy(g->m);
	free(g->mask);
	free(g);
}

int sampler_grammar_prepare(struct sampler_grammar *g)
{
	int err;

	if (g->ready)
		return 0;
	err = o1_grammar_matcher_fill_mask(g->m, g->mask, g->n_words);
	/* past a limit the mask still holds only allowed tokens: use it */
	if (err && err != -O1_E_BOUNDS)
		return err;
	g->ready = true;
	return 0;
}

int sampler_grammar_mask(struct sampler_grammar *g, const uint32_t **mask)
{
	uint32_t any = 0, tail = g->vocab % 32;
	int err = sampler_grammar_prepare(g);

	if (err)
		return err;
	if (tail) /* tokens past the row */
		g->mask[g->row_words - 1] &= (1u << tail) - 1;
	for (uint32_t w = 0; w < g->row_words && !any; w++)
		any |= g->mask[w];
	*mask = g->mask;
	return any ? 0 : -O1_E_GRAMMAR;
}

int sampler_grammar_accept(struct sampler_grammar *g, int32_t id)
{
	g->ready = false;
	return o1_grammar_matcher_accept_token(g->m, id);
}

/* The grammar constraint of a sampler (sampler_grammar.h). The mask is
 * computed once per token, either ahead (sampler_grammar_prepare, e.g.
 * while the device runs the step) or when the logits are there; it is
 * spent by the token the sampler then draws. Tokens past the grammar's
 * vocabulary (a padded logits row) are never allowed. Everything is
 * allocated at create.
 */
#include "sampler_grammar.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

struct sampler_grammar {
	struct o1_grammar_matcher *m; /* owned */
	uint32_t *mask;		      /* [n_words] */
	uint32_t n_words, vocab;
	float *row; /* [vocab] */
	bool ready; /* mask is the next token's */
};

int sampler_grammar_create(struct o1_grammar_matcher *m, uint32_t vocab,
			   uint32_t n_words, struct sampler_grammar **out)
{
	struct sampler_grammar *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->mask = calloc(n_words ? n_words : 1, sizeof(*g->mask));
	g->row = malloc((size_t)vocab * sizeof(*g->row));
	if (!g->mask || !g->row) {
		free(g->mask);
		free(g->row);
		free(g);
		return -ENOMEM;
	}
	g->m = m;
	g->n_words = n_words;
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
	free(g->row);
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

int sampler_grammar_apply(struct sampler_grammar *g, const float *logits,
			  const float **row)
{
	uint32_t any = 0, words = (g->vocab + 31) / 32;
	int err = sampler_grammar_prepare(g);

	if (err)
		return err;
	for (uint32_t w = 0; w < words; w++) {
		uint32_t bits = w < g->n_words ? g->mask[w] : 0;
		uint32_t base = w * 32;
		uint32_t n = g->vocab - base < 32 ? g->vocab - base : 32;

		any |= bits;
		if (bits == UINT32_MAX && n == 32) {
			memcpy(g->row + base, logits + base, 32 * sizeof(float));
			continue;
		}
		for (uint32_t i = 0; i < n; i++)
			g->row[base + i] =
			    bits >> i & 1 ? logits[base + i] : -INFINITY;
	}
	*row = g->row;
	return any ? 0 : -O1_E_GRAMMAR;
}

int sampler_grammar_accept(struct sampler_grammar *g, int32_t id)
{
	g->ready = false;
	return o1_grammar_matcher_accept_token(g->m, id);
}

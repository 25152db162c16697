/* libFuzzer harness for grammar text: the input up to the first NUL byte
 * (or all of it) is compiled; a grammar that compiles gets a matcher fed
 * the bytes after the NUL one at a time, and at every step the mask over
 * a small vocabulary (every single byte and a few multi-byte pieces, a
 * control token that @"[TOOL_CALLS]" names, an end token) must equal
 * feeding each token and rolling it back; a rollback of the whole walk
 * must bring the start state back (the same mask again). Refusals must
 * come with a message. The token classes of the shared pass
 * (grammar_share.c) must be those of a walk from every position
 * (gr_tokens_create without sharing), table for table. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_int.h"

#define MAX_TEXT  4096
#define MAX_STEPS 64

static const char *const pieces[] = {"\"", "ab", "\":", "{\"", "},", "\\u",
				     "\xc3\xa9", "\xe2\x82", "12", "  ",
				     "true", "[]"};

static struct o1_grammar_vocab *vocab(void)
{
	static struct o1_grammar_vocab *v;
	enum { N = 256 + sizeof(pieces) / sizeof(pieces[0]) + 2 };
	static uint8_t all[256], kinds[N];
	static const uint8_t *bytes[N];
	static uint32_t lens[N];

	if (v)
		return v;
	for (int b = 0; b < 256; b++) {
		all[b] = (uint8_t)b;
		bytes[b] = &all[b];
		lens[b] = 1;
	}
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		bytes[256 + i] = (const uint8_t *)pieces[i];
		lens[256 + i] = (uint32_t)strlen(pieces[i]);
	}
	bytes[N - 2] = (const uint8_t *)"[TOOL_CALLS]";
	lens[N - 2] = 12;
	kinds[N - 2] = O1_GRAMMAR_TOKEN_CONTROL;
	bytes[N - 1] = (const uint8_t *)"</s>";
	lens[N - 1] = 4;
	kinds[N - 1] = O1_GRAMMAR_TOKEN_END;
	if (o1_grammar_vocab_create(N, bytes, lens, kinds, &v))
		abort();
	return v;
}

/* The mask must be exactly the tokens that can be fed. */
static void check_mask(struct o1_grammar_matcher *m, uint32_t *mask,
		       uint32_t n_tokens)
{
	if (o1_grammar_matcher_fill_mask(m, mask, (n_tokens + 31) / 32))
		return; /* a limit: the mask is a subset, not checked */
	for (uint32_t id = 0; id < n_tokens; id++) {
		int rc = o1_grammar_matcher_accept_token(m, (int32_t)id);
		bool bit = mask[id / 32] >> (id % 32) & 1;

		if (rc == -O1_E_BOUNDS)
			continue;
		if ((rc >= 0) != bit)
			abort();
		if (rc >= 0 && o1_grammar_matcher_rollback(m, 1))
			abort();
	}
}

/* Position S's classes in A and B: the same sets, forms and orders. */
static bool same_pos(const struct o1_grammar_tokens *a,
		     const struct o1_grammar_tokens *b, uint32_t s)
{
	const struct gpos *p = &a->pos[s], *q = &b->pos[s];
	size_t words = a->n_words * sizeof(*a->bits);

	if (p->n_acc != q->n_acc || p->n_unc != q->n_unc ||
	    (p->acc_bits == GR_NONE) != (q->acc_bits == GR_NONE))
		return false;
	if (p->acc_bits != GR_NONE &&
	    memcmp(a->bits + (size_t)p->acc_bits * a->n_words,
		   b->bits + (size_t)q->acc_bits * b->n_words, words))
		return false;
	if (p->acc_bits == GR_NONE &&
	    memcmp(a->ids + p->acc_off, b->ids + q->acc_off,
		   p->n_acc * sizeof(*a->ids)))
		return false;
	return !memcmp(a->ids + p->unc_off, b->ids + q->unc_off,
		       p->n_unc * sizeof(*a->ids));
}

static void check_shared(const struct o1_grammar *g,
			 const struct o1_grammar_vocab *v,
			 const struct o1_grammar_tokens *t)
{
	struct o1_grammar_tokens *plain;

	if (gr_tokens_create(g, v, 1, false, &plain))
		return;
	for (uint32_t s = 0; s < g->n_states; s++)
		if (g->states[s].has_bytes && !same_pos(t, plain, s))
			abort();
	o1_grammar_tokens_destroy(plain);
}

static void walk(struct o1_grammar *g, const uint8_t *in, size_t n)
{
	struct o1_grammar_vocab *v = vocab();
	uint32_t n_tokens = o1_grammar_vocab_size(v), steps = 0;
	uint32_t start[16] = {0}, mask[16] = {0};
	struct o1_grammar_limits lim = {.max_rollback = MAX_STEPS};
	struct o1_grammar_tokens *t;
	struct o1_grammar_matcher *m;

	if (o1_grammar_tokens_create(g, v, 1, &t))
		return;
	check_shared(g, v, t);
	if (o1_grammar_matcher_create(g, t, &lim, &m)) {
		o1_grammar_tokens_destroy(t);
		return;
	}
	if (!o1_grammar_matcher_fill_mask(m, start, 16))
		check_mask(m, mask, n_tokens);
	for (size_t i = 0; i < n && steps < MAX_STEPS; i++) {
		if (o1_grammar_matcher_accept_bytes(m, in + i, 1))
			continue;
		steps++;
		check_mask(m, mask, n_tokens);
	}
	if (o1_grammar_matcher_rollback(m, steps))
		abort();
	memset(mask, 0, sizeof(mask));
	if (!o1_grammar_matcher_fill_mask(m, mask, 16) &&
	    memcmp(mask, start, sizeof(mask)))
		abort();
	o1_grammar_matcher_destroy(m);
	o1_grammar_tokens_destroy(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t text_len = nul ? (size_t)(nul - data) : size;
	struct o1_grammar_error err;
	struct o1_grammar *g;
	int rc;

	if (text_len > MAX_TEXT)
		return 0;
	rc = o1_grammar_compile((const char *)data, text_len, &err, &g);
	if (rc) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	if (nul)
		walk(g, nul + 1, size - text_len - 1);
	o1_grammar_destroy(g);
	return 0;
}

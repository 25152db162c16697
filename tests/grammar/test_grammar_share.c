/* The shared token pass (grammar_share.c, grammar_mask.c) against the
 * plain one: for every position of every grammar, the token classes made
 * with walks shared (orbits of a counting shift, equivalent states, the
 * memo of first bytes; on 1 and 3 threads) must be exactly those of a walk
 * of the vocabulary from each position alone: the same accepted set in
 * the same form (list in trie order, or bitmask), the same uncertain list
 * in the same order. So every mask is bit for bit the same.
 *
 * Grammars: the 20 schemas of tools/bench/grammar/schemas.jsonl
 * (test_grammar_o1d's: bounded strings, formats, keys other than a
 * name, enums, recursion) and hand-written ones with bounded repetition
 * of characters, calls inside a count and minimum lengths. Vocabularies:
 * a made-up one of every string of up to 3 symbols over JSON-ish bytes
 * (quotes, escapes, 2- and 3-byte UTF-8 pieces); Llama 3's 128,256
 * tokens, and the same extended to Qwen2's 151,936 by joining two of its
 * tokens (skipped without ../shared). Also checks that sharing happens:
 * a string of at most 12 characters must make orbits, keys other than a
 * name equivalent states. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/prng.h"
#include "grammar/grammar_int.h"
#include "grammar/grammar_schema.h"
#include "grammar/grammar_tokenizer.h"

#define VOCAB_DIR   O1_SHARED_DIR "/testdata/vocab"
#define SCHEMAS	    O1_SOURCE_DIR "/tools/bench/grammar/schemas.jsonl"
#define MAX_SCHEMAS 64

static const char *const gbnf[] = {
    "root ::= \"\\\"\" ch{0,12} \"\\\"\"\n"
    "ch ::= [^\"\\\\] | \"\\\\\" [\"\\\\nu]\n",
    /* a count of calls: not a chain (calls), still equal positions */
    "root ::= \"[\" ( item ( \",\" item ){0,4} )? \"]\"\n"
    "item ::= \"\\\"\" [a-z\\u00e9]{1,3} \"\\\"\"\n",
    "root ::= \"\\\"\" [^\"]{3,7} \"\\\"\" ( \",\" root )?\n",
    "root ::= ( [ab] [\\u00e9\\u20ac]{2,5} \":\" ){1,3}\n",
};

struct schemas {
	char *line[MAX_SCHEMAS];
	int n;
};

static void load_schemas(struct schemas *s)
{
	FILE *f = fopen(SCHEMAS, "r");
	char buf[8192];

	assert_non_null(f);
	s->n = 0;
	while (s->n < MAX_SCHEMAS && fgets(buf, sizeof(buf), f))
		if (buf[0] == '{')
			s->line[s->n++] = strdup(buf);
	fclose(f);
	assert_int_equal(s->n, 20);
}

static void free_schemas(struct schemas *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->line[i]);
}

/* Position S's accepted set as a mask. */
static void accepted(const struct o1_grammar_tokens *t, uint32_t s,
		     uint32_t *mask)
{
	const struct gpos *p = &t->pos[s];

	memset(mask, 0, t->n_words * sizeof(*mask));
	if (p->acc_bits != GR_NONE) {
		memcpy(mask, t->bits + (size_t)p->acc_bits * t->n_words,
		       t->n_words * sizeof(*mask));
		return;
	}
	for (uint32_t k = 0; k < p->n_acc; k++)
		mask[t->ids[p->acc_off + k] / 32] |=
		    1u << (t->ids[p->acc_off + k] % 32);
}

static void same_tables(const struct o1_grammar *g,
			const struct o1_grammar_tokens *a,
			const struct o1_grammar_tokens *b, const char *what)
{
	uint32_t *ma = malloc(a->n_words * sizeof(*ma));
	uint32_t *mb = malloc(a->n_words * sizeof(*mb));

	assert_non_null(ma);
	assert_non_null(mb);
	for (uint32_t s = 0; s < g->n_states; s++) {
		const struct gpos *p = &a->pos[s], *q = &b->pos[s];

		if (!g->states[s].has_bytes)
			continue;
		if (p->n_acc != q->n_acc || p->n_unc != q->n_unc ||
		    (p->acc_bits == GR_NONE) != (q->acc_bits == GR_NONE))
			fail_msg("%s: state %u: accepted %u / %u, uncertain "
				 "%u / %u",
				 what, s, p->n_acc, q->n_acc, p->n_unc,
				 q->n_unc);
		accepted(a, s, ma);
		accepted(b, s, mb);
		if (memcmp(ma, mb, a->n_words * sizeof(*ma)))
			fail_msg("%s: state %u: accepted sets differ", what, s);
		if (p->acc_bits == GR_NONE &&
		    memcmp(a->ids + p->acc_off, b->ids + q->acc_off,
			   p->n_acc * sizeof(*a->ids)))
			fail_msg("%s: state %u: accepted order", what, s);
		if (memcmp(a->ids + p->unc_off, b->ids + q->unc_off,
			   p->n_unc * sizeof(*a->ids)))
			fail_msg("%s: state %u: uncertain lists differ", what,
				 s);
	}
	free(ma);
	free(mb);
}

static void check_grammar(const struct o1_grammar *g,
			  const struct o1_grammar_vocab *v, const char *what)
{
	struct o1_grammar_tokens *plain, *shared;

	assert_int_equal(gr_tokens_create(g, v, 1, false, &plain), 0);
	assert_int_equal(gr_tokens_create(g, v, 1, true, &shared), 0);
	same_tables(g, plain, shared, what);
	o1_grammar_tokens_destroy(shared);
	assert_int_equal(gr_tokens_create(g, v, 3, true, &shared), 0);
	same_tables(g, plain, shared, what);
	o1_grammar_tokens_destroy(shared);
	o1_grammar_tokens_destroy(plain);
}

static void check_all(const struct o1_grammar_vocab *v)
{
	struct schemas sc;
	char what[64];

	load_schemas(&sc);
	for (int i = 0; i < sc.n; i++) {
		struct o1_grammar_error err;
		struct o1_grammar *g;

		assert_int_equal(o1_grammar_compile_schema(sc.line[i],
							   strlen(sc.line[i]),
							   NULL, &err, &g),
				 0);
		snprintf(what, sizeof(what), "schema %d", i + 1);
		check_grammar(g, v, what);
		o1_grammar_destroy(g);
	}
	free_schemas(&sc);
	for (size_t i = 0; i < sizeof(gbnf) / sizeof(gbnf[0]); i++) {
		struct o1_grammar_error err;
		struct o1_grammar *g;

		assert_int_equal(
		    o1_grammar_compile(gbnf[i], strlen(gbnf[i]), &err, &g), 0);
		snprintf(what, sizeof(what), "grammar %zu", i);
		check_grammar(g, v, what);
		o1_grammar_destroy(g);
	}
}

/* Every string of 1 to 3 symbols; a symbol is one byte or a UTF-8 piece,
 * so tokens also end inside characters. */
static struct o1_grammar_vocab *made_up_vocab(void)
{
	static const char *const sym[] = {
	    "a", "b", "\"", "\\",   "u",    "0",	":",	",",	   "[",
	    "]", " ", "n",  "\xc3", "\xa9", "\xe2\x82", "\xac", "\xc3\xa9"};
	enum { N_SYM = sizeof(sym) / sizeof(sym[0]) };
	uint32_t n = N_SYM + N_SYM * N_SYM + N_SYM * N_SYM * N_SYM + 1, k = 0;
	uint8_t(*buf)[8] = malloc(n * sizeof(*buf));
	const uint8_t **bytes = malloc(n * sizeof(*bytes));
	uint32_t *lens = malloc(n * sizeof(*lens));
	uint8_t *kinds = calloc(n, 1);
	struct o1_grammar_vocab *v;

	assert_true(buf && bytes && lens && kinds);
	for (uint32_t len = 1; len <= 3; len++) {
		uint32_t total = 1;

		for (uint32_t d = 0; d < len; d++)
			total *= N_SYM;
		for (uint32_t x = 0; x < total; x++, k++) {
			uint32_t y = x;

			lens[k] = 0;
			for (uint32_t d = 0; d < len; d++, y /= N_SYM) {
				size_t l = strlen(sym[y % N_SYM]);

				memcpy(buf[k] + lens[k], sym[y % N_SYM], l);
				lens[k] += (uint32_t)l;
			}
			bytes[k] = buf[k];
		}
	}
	bytes[k] = buf[0];
	lens[k] = 0;
	kinds[k] = O1_GRAMMAR_TOKEN_END;
	assert_int_equal(o1_grammar_vocab_create(n, bytes, lens, kinds, &v), 0);
	free(buf);
	free(bytes);
	free(lens);
	free(kinds);
	return v;
}

static void test_made_up_vocab(void **state)
{
	struct o1_grammar_vocab *v = made_up_vocab();

	(void)state;
	check_all(v);
	o1_grammar_vocab_destroy(v);
}

static struct o1_grammar_vocab *llama3(void)
{
	struct o1_vocab *ov;
	struct o1_tokenizer *tok;
	struct o1_grammar_vocab *v;

	if (o1_vocab_load_tokenizer_json(VOCAB_DIR "/llama3.2/tokenizer.json",
					 &ov))
		return NULL;
	assert_int_equal(o1_tokenizer_create(ov, &tok), 0);
	o1_vocab_destroy(ov);
	assert_int_equal(o1_grammar_vocab_from_tokenizer(tok, &v), 0);
	o1_tokenizer_destroy(tok);
	return v;
}

/* V extended to N tokens, each new one two of V's text tokens joined. */
static struct o1_grammar_vocab *extend(const struct o1_grammar_vocab *v,
				       uint32_t n)
{
	uint32_t base = o1_grammar_vocab_size(v);
	const uint8_t **bytes = malloc(n * sizeof(*bytes));
	uint32_t *lens = malloc(n * sizeof(*lens));
	uint8_t *kinds = malloc(n), *extra = malloc((size_t)(n - base) * 512);
	struct o1_grammar_vocab *out;
	uint64_t rng[4];
	size_t off = 0;

	assert_true(bytes && lens && kinds && extra);
	o1_prng_seed(rng, 23);
	for (uint32_t i = 0; i < base; i++) {
		bytes[i] = o1_grammar_vocab_token(v, i, &lens[i]);
		kinds[i] = (uint8_t)o1_grammar_vocab_kind(v, i);
	}
	for (uint32_t i = base; i < n; i++) {
		uint32_t a, c, la, lc;
		const uint8_t *pa, *pc;

		do {
			a = (uint32_t)(o1_prng_next(rng) % base);
			c = (uint32_t)(o1_prng_next(rng) % base);
			pa = o1_grammar_vocab_token(v, a, &la);
			pc = o1_grammar_vocab_token(v, c, &lc);
		} while (kinds[a] != O1_GRAMMAR_TOKEN_TEXT ||
			 kinds[c] != O1_GRAMMAR_TOKEN_TEXT || !la || !lc ||
			 la + lc > 512);
		memcpy(extra + off, pa, la);
		memcpy(extra + off + la, pc, lc);
		bytes[i] = extra + off;
		lens[i] = la + lc;
		kinds[i] = O1_GRAMMAR_TOKEN_TEXT;
		off += la + lc;
	}
	assert_int_equal(o1_grammar_vocab_create(n, bytes, lens, kinds, &out),
			 0);
	free(bytes);
	free(lens);
	free(kinds);
	free(extra);
	return out;
}

static void test_real_vocab(void **state)
{
	struct o1_grammar_vocab *v = llama3(), *big;

	(void)state;
	if (!v)
		skip();
	check_all(v);
	big = extend(v, 151936);
	o1_grammar_vocab_destroy(v);
	check_all(big);
	o1_grammar_vocab_destroy(big);
}

/* Sharing happens where it should (or the comparisons above prove
 * little): orbits for a string of at most 12 characters, equivalent
 * states for keys other than a given name. */
static void test_shares(void **state)
{
	struct schemas sc;
	int with_orbits = 0, with_equal = 0;

	(void)state;
	load_schemas(&sc);
	for (int i = 0; i < sc.n; i++) {
		struct o1_grammar_error err;
		struct o1_grammar *g;
		struct gshare sh;
		uint32_t derived = 0, copies = 0;

		assert_int_equal(o1_grammar_compile_schema(sc.line[i],
							   strlen(sc.line[i]),
							   NULL, &err, &g),
				 0);
		assert_int_equal(gr_share_build(g, &sh), 0);
		for (uint32_t s = 0; s < g->n_states; s++) {
			derived += sh.top[s] != GR_NONE && sh.top[s] != s;
			copies += sh.rep[s] != s;
			/* an orbit member is phi^orbit(top) */
			if (sh.top[s] != GR_NONE) {
				uint32_t x = sh.top[s];

				for (uint32_t k = 0; k < sh.orbit[s]; k++)
					x = sh.phi[x];
				assert_int_equal(x, s);
			}
		}
		/* schema 1: "name" of at most 12 characters: 14 orbits
		 * (counting states, partial characters) of 12-13 states */
		if (i == 0)
			assert_true(derived >= 150);
		/* schema 17: keys other than "id" */
		if (i == 16)
			assert_true(copies >= 2);
		with_orbits += derived > 0;
		with_equal += copies > 0;
		gr_share_fini(&sh);
		o1_grammar_destroy(g);
	}
	free_schemas(&sc);
	assert_true(with_orbits >= 4);
	assert_true(with_equal >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shares),
	    cmocka_unit_test(test_made_up_vocab),
	    cmocka_unit_test(test_real_vocab),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Token masks against brute force: at every step of seeded random walks,
 * each token's bit must say exactly whether feeding that token's bytes to
 * the matcher (accept_token, then rollback) succeeds. Over a hand-made
 * vocabulary that holds every byte (so tokens end inside characters),
 * duplicates, an empty token, end and ignored tokens, for grammars with
 * recursion, ambiguity and tail calls; then over real vocabularies from
 * ../shared (Llama 3's 128,256 tokens, GPT-2's 50,257; skipped without
 * them). The walks pick among allowed tokens, half the time among those
 * with JSON punctuation so they leave strings and close structures.
 * Token classes made by 3 threads must give the same masks as by one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_tokenizer.h"

#define VOCAB_DIR O1_SHARED_DIR "/testdata/vocab"

static const char json_gbnf[] =
	"root   ::= object\n"
	"value  ::= object | array | string | number | \"true\" | \"false\" "
	"| \"null\"\n"
	"object ::= \"{\" ws ( member ( \",\" ws member )* )? \"}\"\n"
	"member ::= string ws \":\" ws value ws\n"
	"array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
	"string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" "
	"[\"\\\\/bfnrt] | \"\\\\u\" [0-9a-fA-F]{4} )* \"\\\"\"\n"
	"number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? "
	"( [eE] [-+]? [0-9]+ )?\n"
	"ws     ::= [ \\n]{0,2}\n";

static const char *const grammars[] = {
	json_gbnf,
	/* ambiguity: several stacks in the same state */
	"root ::= \"x\" p \"a\" | \"x\" q \"b\" | \"y\"\np ::= root\n"
	"q ::= root",
	/* tail calls, a rule that ends where its caller may go on */
	"root ::= item+\nitem ::= \"<\" word \">\" | word \" \"\n"
	"word ::= [a-z\\xe9]+ | \"\\u00e9t\\u00e9\"",
};

struct walk {
	struct o1_grammar_matcher *m, *m2; /* m2: tokens from 3 threads */
	uint32_t *mask2;
	const struct o1_grammar_vocab *v;
	uint32_t *mask, *cand, n_words, n_tokens;
	unsigned seed;
};

static bool bit(const uint32_t *mask, uint32_t id)
{
	return mask[id / 32] >> (id % 32) & 1;
}

/* Every token's bit against feeding it; returns how many are allowed. */
static uint32_t brute_check(struct walk *w, int step)
{
	uint32_t allowed = 0;

	for (uint32_t id = 0; id < w->n_tokens; id++) {
		int rc = o1_grammar_matcher_accept_token(w->m, (int32_t)id);

		if (rc >= 0)
			assert_int_equal(o1_grammar_matcher_rollback(w->m, 1),
					 0);
		if ((rc >= 0) != bit(w->mask, id))
			fail_msg("step %d: token %u: mask %d, feeding it %d",
				 step, id, bit(w->mask, id), rc);
		if (rc < 0 && rc != -O1_E_GRAMMAR)
			fail_msg("token %u: %d", id, rc);
		allowed += rc >= 0;
	}
	return allowed;
}

static bool punctuation(const struct walk *w, uint32_t id)
{
	uint32_t len;
	const uint8_t *b = o1_grammar_vocab_token(w->v, id, &len);

	for (uint32_t i = 0; i < len; i++)
		if (b[i] && strchr("\"{}[],:0123456789<>", b[i]))
			return true;
	return false;
}

static uint32_t pick(struct walk *w)
{
	bool punct = rand_r(&w->seed) % 2;
	uint32_t n = 0;

	for (int pass = 0; pass < 2 && !n; pass++, punct = false)
		for (uint32_t id = 0; id < w->n_tokens; id++)
			if (bit(w->mask, id) && (!punct || punctuation(w, id)))
				w->cand[n++] = id;
	assert_true(n > 0);
	return w->cand[rand_r(&w->seed) % n];
}

/* STEPS steps of one walk, checked every CHECK_EVERY steps; it ends
 * where nothing is allowed, which must be where the matcher says it is
 * terminated. */
static void run_walk(struct walk *w, int steps, int check_every)
{
	for (int step = 0; step < steps; step++) {
		uint32_t any = 0;

		uint32_t id;

		assert_int_equal(o1_grammar_matcher_fill_mask(w->m, w->mask,
							      w->n_words),
				 0);
		assert_int_equal(o1_grammar_matcher_fill_mask(w->m2, w->mask2,
							      w->n_words),
				 0);
		assert_memory_equal(w->mask, w->mask2,
				    w->n_words * sizeof(*w->mask));
		if (step % check_every == 0)
			brute_check(w, step);
		for (uint32_t k = 0; k < w->n_words; k++)
			any |= w->mask[k];
		if (!any) {
			assert_true(o1_grammar_matcher_is_terminated(w->m));
			return;
		}
		id = pick(w);
		assert_true(o1_grammar_matcher_accept_token(w->m, (int32_t)id) >=
			    0);
		assert_true(o1_grammar_matcher_accept_token(w->m2,
							    (int32_t)id) >= 0);
	}
}

static void walks(const char *grammar, const struct o1_grammar_vocab *v,
		  int n, int steps, int check_every)
{
	struct o1_grammar_error err;
	struct o1_grammar *g;
	struct o1_grammar_tokens *t, *t3;
	struct walk w = {.v = v,
			 .n_words = o1_grammar_mask_words(v),
			 .n_tokens = o1_grammar_vocab_size(v)};

	if (o1_grammar_compile(grammar, strlen(grammar), &err, &g))
		fail_msg("%u:%u %s", err.line, err.col, err.msg);
	assert_int_equal(o1_grammar_tokens_create(g, v, 1, &t), 0);
	assert_int_equal(o1_grammar_tokens_create(g, v, 3, &t3), 0);
	w.mask = malloc(w.n_words * sizeof(*w.mask));
	w.mask2 = malloc(w.n_words * sizeof(*w.mask2));
	assert_non_null(w.mask2);
	w.cand = malloc(w.n_tokens * sizeof(*w.cand));
	assert_non_null(w.mask);
	assert_non_null(w.cand);
	assert_int_equal(o1_grammar_matcher_create(g, t, NULL, &w.m), 0);
	assert_int_equal(o1_grammar_matcher_create(g, t3, NULL, &w.m2), 0);
	for (int i = 0; i < n; i++) {
		w.seed = 1000u + (unsigned)i;
		o1_grammar_matcher_reset(w.m);
		o1_grammar_matcher_reset(w.m2);
		run_walk(&w, steps, check_every);
	}
	o1_grammar_matcher_destroy(w.m);
	o1_grammar_matcher_destroy(w.m2);
	o1_grammar_tokens_destroy(t);
	o1_grammar_tokens_destroy(t3);
	o1_grammar_destroy(g);
	free(w.mask);
	free(w.mask2);
	free(w.cand);
}

/* Every byte, then pieces that cross rule ends and characters. */
static const char *const pieces[] = {
	"{\"", "\":", "\",", "\"}", "},", "[{", "]}", "}]", "true", "null",
	" \"", "\\\"", "\\u", "\"\\u00", "123", "0.", "e+", "\xc3\xa9",
	"\xa9\"", "\"}]}", ",\n", "\n\"", ":{\"", "<a", "b>", "\xc3\xa9t",
	"x", "ab ", "y", "xxy", "ba", "<\xc3", "\"a\":1,\"b\":[", "{}", "",
	"{\"", /* a duplicate */
};

static void test_small_vocab(void **state)
{
	uint32_t n = 256 + sizeof(pieces) / sizeof(pieces[0]) + 2;
	const uint8_t **bytes = calloc(n, sizeof(*bytes));
	uint32_t *lens = calloc(n, sizeof(*lens));
	uint8_t *kinds = calloc(n, 1), all[256];
	struct o1_grammar_vocab *v;

	(void)state;
	for (int b = 0; b < 256; b++) {
		all[b] = (uint8_t)b;
		bytes[b] = &all[b];
		lens[b] = 1;
	}
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		bytes[256 + i] = (const uint8_t *)pieces[i];
		lens[256 + i] = (uint32_t)strlen(pieces[i]);
	}
	bytes[n - 2] = (const uint8_t *)"<eos>";
	lens[n - 2] = 5;
	kinds[n - 2] = O1_GRAMMAR_TOKEN_END;
	bytes[n - 1] = (const uint8_t *)"{";
	lens[n - 1] = 1;
	kinds[n - 1] = O1_GRAMMAR_TOKEN_IGNORE;
	assert_int_equal(o1_grammar_vocab_create(n, bytes, lens, kinds, &v), 0);
	for (size_t i = 0; i < sizeof(grammars) / sizeof(grammars[0]); i++)
		walks(grammars[i], v, 12, 60, 1);
	o1_grammar_vocab_destroy(v);
	free(bytes);
	free(lens);
	free(kinds);
}

/* End tokens: allowed exactly when complete; after one, nothing. */
static void test_end_tokens(void **state)
{
	static const char *toks[] = {"a", "b", "<eos>"};
	static const uint8_t kinds[] = {0, 0, O1_GRAMMAR_TOKEN_END};
	uint32_t lens[3] = {1, 1, 5}, mask[1];
	struct o1_grammar_vocab *v;
	struct o1_grammar *g;
	struct o1_grammar_tokens *t;
	struct o1_grammar_matcher *m;

	(void)state;
	assert_int_equal(o1_grammar_vocab_create(3, (const uint8_t **)toks,
						 lens, kinds, &v),
			 0);
	assert_int_equal(o1_grammar_compile("root ::= \"a\" \"b\"?", 17, NULL,
					    &g),
			 0);
	assert_int_equal(o1_grammar_tokens_create(g, v, 1, &t), 0);
	assert_int_equal(o1_grammar_matcher_create(g, t, NULL, &m), 0);
	assert_int_equal(o1_grammar_matcher_fill_mask(m, mask, 1), 0);
	assert_int_equal(mask[0], 1u);
	assert_int_equal(o1_grammar_matcher_accept_token(m, 2), -O1_E_GRAMMAR);
	assert_int_equal(o1_grammar_matcher_accept_token(m, 0), 0);
	assert_int_equal(o1_grammar_matcher_fill_mask(m, mask, 1), 0);
	assert_int_equal(mask[0], 6u);
	assert_int_equal(o1_grammar_matcher_accept_token(m, 2), 1);
	assert_true(o1_grammar_matcher_is_terminated(m));
	assert_int_equal(o1_grammar_matcher_fill_mask(m, mask, 1), 0);
	assert_int_equal(mask[0], 0u);
	assert_int_equal(o1_grammar_matcher_accept_token(m, 1), -O1_E_GRAMMAR);
	assert_int_equal(o1_grammar_matcher_rollback(m, 1), 0);
	assert_int_equal(o1_grammar_matcher_accept_token(m, 1), 0);
	assert_true(o1_grammar_matcher_is_terminated(m));
	assert_int_equal(o1_grammar_matcher_accept_token(m, 3), -O1_E_BOUNDS);
	assert_int_equal(o1_grammar_matcher_fill_mask(m, mask, 0), -EINVAL);
	o1_grammar_matcher_destroy(m);
	o1_grammar_tokens_destroy(t);
	o1_grammar_destroy(g);
	o1_grammar_vocab_destroy(v);
	assert_int_equal(o1_grammar_vocab_create(0, NULL, NULL, NULL, &v),
			 -EINVAL);
}

static struct o1_grammar_vocab *load_real(const char *path)
{
	struct o1_vocab *ov;
	struct o1_tokenizer *tok;
	struct o1_grammar_vocab *v;
	size_t n = strlen(path);
	int rc = n > 5 && !strcmp(path + n - 5, ".gguf")
			 ? o1_vocab_load_gguf(path, &ov)
			 : o1_vocab_load_tokenizer_json(path, &ov);

	if (rc)
		return NULL;
	rc = o1_tokenizer_create(ov, &tok);
	o1_vocab_destroy(ov);
	assert_int_equal(rc, 0);
	assert_int_equal(o1_grammar_vocab_from_tokenizer(tok, &v), 0);
	o1_tokenizer_destroy(tok);
	return v;
}

static void test_real_vocab(void **state)
{
	static const char *const paths[] = {
		VOCAB_DIR "/llama3.2/tokenizer.json",
		VOCAB_DIR "/ggml-vocab-gpt-2.gguf",
	};
	int done = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct o1_grammar_vocab *v = load_real(paths[i]);

		if (!v)
			continue;
		walks(json_gbnf, v, 3, 40, 4);
		o1_grammar_vocab_destroy(v);
		done++;
	}
	if (!done)
		skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_small_vocab),
	    cmocka_unit_test(test_end_tokens),
	    cmocka_unit_test(test_real_vocab),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

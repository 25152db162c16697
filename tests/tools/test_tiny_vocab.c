/* o1model's built-in vocabulary: its shape (256 byte tokens in GPT-2's
 * byte-to-unicode text, learned merges whose parts and results are all
 * tokens, the special tokens), determinism, and that the project's
 * tokenizer encodes with it, uses its merges, and decodes back exactly. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/chat_template.h"
#include "tools/o1model/tiny_vocab.h"
#include "tokenizer/tokenizer.h"

static int32_t find(const struct o1_vocab *v, const char *text)
{
	for (uint32_t i = 0; i < v->n_tokens; i++)
		if (strcmp(v->tokens[i], text) == 0)
			return (int32_t)i;
	return -1;
}

static void test_shape(void **state)
{
	struct o1_vocab *v;
	char left[256], joined[256];

	(void)state;
	assert_int_equal(o1model_tiny_vocab_build(&v), 0);
	assert_int_equal(v->kind, O1_VOCAB_BPE);
	assert_string_equal(v->pre, "gpt2");
	assert_true(v->n_merges >= 200 && v->n_merges <= O1MODEL_TINY_MERGES);
	assert_int_equal(v->n_tokens, 256 + v->n_merges + 4);
	assert_string_equal(v->tokens['A'], "A");
	assert_string_equal(v->tokens[' '], "\xC4\xA0");  /* U+0120 */
	assert_string_equal(v->tokens['\n'], "\xC4\x8A"); /* U+010A */
	assert_string_equal(v->tokens[0], "\xC4\x80");	  /* U+0100 */
	assert_int_equal(find(v, "<|begin_of_text|>"), v->bos_id);
	assert_int_equal(find(v, "<|im_end|>"), v->eos_id);
	assert_int_equal(v->types[v->bos_id], O1_TOKEN_CONTROL);
	assert_int_equal(v->types[300], O1_TOKEN_NORMAL);
	for (uint32_t i = 0; i < v->n_tokens; i++)
		assert_int_equal(find(v, v->tokens[i]), (int32_t)i);
	for (uint32_t i = 0; i < v->n_merges; i++) {
		const char *sp = strchr(v->merges[i], ' ');

		assert_non_null(sp);
		snprintf(left, sizeof(left), "%.*s", (int)(sp - v->merges[i]),
			 v->merges[i]);
		snprintf(joined, sizeof(joined), "%s%s", left, sp + 1);
		assert_true(find(v, left) >= 0);
		assert_true(find(v, sp + 1) >= 0);
		/* merge I makes token 256 + I */
		assert_string_equal(v->tokens[256 + i], joined);
	}
	o1_vocab_destroy(v);
}

static void test_deterministic(void **state)
{
	struct o1_vocab *a, *b;

	(void)state;
	assert_int_equal(o1model_tiny_vocab_build(&a), 0);
	assert_int_equal(o1model_tiny_vocab_build(&b), 0);
	assert_int_equal(a->n_tokens, b->n_tokens);
	for (uint32_t i = 0; i < a->n_merges; i++)
		assert_string_equal(a->merges[i], b->merges[i]);
	o1_vocab_destroy(a);
	o1_vocab_destroy(b);
}

static void test_tokenizes(void **state)
{
	static const char text[] = "The daemon serves the processes on the "
				   "same machine. Ünïcödé ✓ 2026\n";
	struct o1_vocab *v;
	struct o1_tokenizer *t;
	struct o1_chat_template *ct;
	int32_t ids[256];
	char back[512];
	int n;

	(void)state;
	assert_int_equal(o1model_tiny_vocab_build(&v), 0);
	assert_int_equal(o1_tokenizer_create(v, &t), 0);
	n = o1_tokenizer_encode(t, text, strlen(text), 0, ids, 256);
	assert_true(n > 0);
	/* the merges are used: the English part takes far fewer tokens */
	assert_true(o1_tokenizer_encode(t, text, 52, 0, ids, 256) < 52 / 2);
	assert_int_equal(
	    o1_tokenizer_decode(t, ids, (size_t)n, 0, back, sizeof(back)),
	    strlen(text));
	assert_string_equal(back, text);
	n = o1_tokenizer_encode(t, "<|im_start|>", 12, O1_ENCODE_PARSE_SPECIAL,
				ids, 256);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], find(v, "<|im_start|>"));
	assert_int_equal(o1_chat_template_load(v, "tiny", NULL, &ct), 0);
	assert_int_equal(o1_chat_template_family(ct), O1_CHAT_CHATML);
	o1_chat_template_destroy(ct);
	o1_tokenizer_destroy(t);
	o1_vocab_destroy(v);
}

static void test_pad(void **state)
{
	struct o1_vocab *v;
	uint32_t n;

	(void)state;
	assert_int_equal(o1model_tiny_vocab_build(&v), 0);
	n = v->n_tokens;
	assert_int_equal(o1model_vocab_pad(v, n - 1), -EINVAL);
	assert_int_equal(o1model_vocab_pad(v, n), 0);
	assert_int_equal(v->n_tokens, n);
	assert_int_equal(o1model_vocab_pad(v, n + 3), 0);
	assert_int_equal(v->n_tokens, n + 3);
	assert_string_equal(v->tokens[n + 2], "<|unused_2|>");
	assert_int_equal(v->types[n + 2], O1_TOKEN_UNUSED);
	o1_vocab_destroy(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shape),
	    cmocka_unit_test(test_deterministic),
	    cmocka_unit_test(test_tokenizes),
	    cmocka_unit_test(test_pad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

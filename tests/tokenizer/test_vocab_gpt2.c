/* GPT-2 pair loader tests: token map and merges (with and without a
 * #version line, CRLF), holes in the ids, special tokens, the pre-tokenizer
 * inferred from digit tokens, path dispatch, and malformed files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/log.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gpt2.h"

static char dir[64];

static void write_file(const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void remove_files(void)
{
	static const char *const names[] = {"vocab.json", "merges.txt",
					    "encoder.json", "vocab.bpe"};
	char path[128];

	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
}

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/o1-vocab-gpt2-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	remove_files();
	return rmdir(dir);
}

static const char base_map[] =
    "{\"H\": 0, \"e\": 1, \"l\": 2, \"o\": 3, \"He\": 4, \"ll\": 5, "
    "\"Hell\": 6, \"Hello\": 7, \"1\": 8, \"2\": 9, \"3\": 10, "
    "\"4\": 11, \"\\u0120\": 12, %s \"<|endoftext|>\": 20}";

static struct o1_vocab *load_with(const char *extra, const char *merges)
{
	struct o1_vocab *v = NULL;
	char map[512];
	char vp[128], mp[128];

	snprintf(map, sizeof(map), base_map, extra);
	write_file("vocab.json", map);
	write_file("merges.txt", merges);
	snprintf(vp, sizeof(vp), "%s/vocab.json", dir);
	snprintf(mp, sizeof(mp), "%s/merges.txt", dir);
	assert_int_equal(o1_vocab_load_gpt2(vp, mp, &v), 0);
	return v;
}

static void test_load_pair(void **state)
{
	struct o1_vocab *v =
	    load_with("\"1234\": 13,", "#version: 0.2\r\nH e\r\nl l\r\n"
				       "He ll\r\n\r\nHell o\r\n");

	(void)state;
	assert_int_equal(v->kind, O1_VOCAB_BPE);
	assert_int_equal(v->n_tokens, 21);
	assert_string_equal(v->tokens[7], "Hello");
	assert_string_equal(v->tokens[12], "\xc4\xa0");
	assert_int_equal(v->types[15], O1_TOKEN_UNUSED);
	assert_string_equal(v->tokens[15], "<|unused_15|>");
	assert_int_equal(v->types[20], O1_TOKEN_CONTROL);
	assert_int_equal(v->bos_id, 20);
	assert_int_equal(v->eos_id, 20);
	assert_int_equal(v->n_merges, 4);
	assert_string_equal(v->merges[0], "H e");
	assert_string_equal(v->merges[3], "Hell o");
	assert_string_equal(v->pre, "gpt2");
	assert_false(v->ignore_merges);
	o1_vocab_destroy(v);
}

static void test_detect_pre(void **state)
{
	struct o1_vocab *v;

	(void)state;
	v = load_with("\"123\": 13, \"\\u012012\": 14,", "H e\nl l");
	assert_string_equal(v->pre, "llama-bpe");
	assert_true(v->ignore_merges);
	assert_int_equal(v->n_merges, 2); /* no #version, no final newline */
	o1_vocab_destroy(v);
	v = load_with("", "H e\n");
	assert_string_equal(v->pre, "qwen2");
	o1_vocab_destroy(v);
	v = load_with("\"\\u01201234\": 13,", "H e\n");
	assert_string_equal(v->pre, "gpt2");
	o1_vocab_destroy(v);
}

static void test_load_any_folder(void **state)
{
	struct o1_tokenizer *t;
	struct o1_vocab *v;
	int32_t ids[8];
	char path[128];

	(void)state;
	remove_files();
	write_file("encoder.json", "{\"H\": 0, \"e\": 1, \"He\": 2}");
	write_file("vocab.bpe", "#version: 0.2\nH e\n");
	assert_int_equal(o1_vocab_load_any(dir, &v), 0);
	assert_int_equal(v->n_tokens, 3);
	assert_int_equal(o1_tokenizer_create(v, &t), 0);
	assert_int_equal(o1_tokenizer_encode(t, "He", 2, 0, ids, 8), 1);
	assert_int_equal(ids[0], 2);
	o1_tokenizer_destroy(t);
	o1_vocab_destroy(v);
	snprintf(path, sizeof(path), "%s/encoder.json", dir);
	assert_int_equal(o1_vocab_load_any(path, &v), 0);
	o1_vocab_destroy(v);
	snprintf(path, sizeof(path), "%s/nothing-here", dir);
	assert_int_equal(o1_vocab_load_any(path, &v), -ENOENT);
	remove_files();
	assert_int_equal(o1_vocab_load_any(dir, &v), -ENOENT);
}

static void test_malformed(void **state)
{
	struct o1_vocab *v = NULL;
	char vp[128], mp[128];

	(void)state;
	snprintf(vp, sizeof(vp), "%s/vocab.json", dir);
	snprintf(mp, sizeof(mp), "%s/merges.txt", dir);
	write_file("merges.txt", "a b\n");
	write_file("vocab.json", "{\"a\": 0, \"b\": ");
	assert_int_equal(o1_vocab_load_gpt2(vp, mp, &v), -O1_E_FORMAT);
	write_file("vocab.json", "{\"a\": 0, \"b\": 0}");
	assert_int_equal(o1_vocab_load_gpt2(vp, mp, &v), -O1_E_FORMAT);
	write_file("vocab.json", "{\"a\": -1}");
	assert_int_equal(o1_vocab_load_gpt2(vp, mp, &v), -O1_E_FORMAT);
	write_file("vocab.json", "{\"a\": 1.5}");
	assert_int_equal(o1_vocab_load_gpt2(vp, mp, &v), -O1_E_FORMAT);
	write_file("vocab.json", "[0, 1]");
	assert_int_equal(o1_vocab_load_gpt2(vp, mp, &v), -O1_E_FORMAT);
	write_file("vocab.json", "{}");
	assert_int_equal(o1_vocab_load_gpt2(vp, mp, &v), -O1_E_FORMAT);
	unlink(mp);
	assert_int_equal(o1_vocab_load_gpt2(vp, mp, &v), -ENOENT);
	assert_null(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load_pair),
	    cmocka_unit_test(test_detect_pre),
	    cmocka_unit_test(test_load_any_folder),
	    cmocka_unit_test(test_malformed),
	};

	o1_log_set_level(O1_LOG_ERROR);
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* tokenizer.json reader and writer: the real Llama-3.2 and GPT-2 files
 * (counts, special tokens, pre-tokenizer names), the tiny Llama subset
 * with sparse ids, a SentencePiece-style file, tokenizer_config.json,
 * every malformation, and write -> load round trips field by field. */
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
#include "tests/common/test_util.h"
#include "model/vocab.h"

#define VOCAB_DIR O1_SHARED_DIR "/testdata/vocab"

static char tmpdir[64];

static int make_tmpdir(void **state)
{
	(void)state;
	o1_test_dir_make(tmpdir, sizeof(tmpdir), "tj");
	return 0;
}

static int remove_tmpdir(void **state)
{
	(void)state;
	return o1_test_dir_remove(tmpdir);
}

/* Loads TEXT as tmpdir/tokenizer.json. */
static int load_text(const char *text, struct o1_vocab **v)
{
	char path[4096];

	o1_test_file_put(tmpdir, "tokenizer.json", text);
	snprintf(path, sizeof(path), "%s/tokenizer.json", tmpdir);
	return o1_vocab_load_tokenizer_json(path, v);
}

/* Writes V into tmpdir, loads it back and checks it is identical. */
static void roundtrip(const struct o1_vocab *v)
{
	struct o1_vocab *back;
	char path[4096];

	assert_int_equal(o1_vocab_write_tokenizer_json(v, tmpdir), 0);
	snprintf(path, sizeof(path), "%s/tokenizer.json", tmpdir);
	assert_int_equal(o1_vocab_load_tokenizer_json(path, &back), 0);
	o1_test_assert_vocab_equal(v, back);
	o1_vocab_destroy(back);
}

static void test_llama32(void **state)
{
	static const char path[] = VOCAB_DIR "/llama3.2/tokenizer.json";
	struct o1_vocab *v;

	(void)state;
	if (access(path, R_OK) != 0)
		skip();
	assert_int_equal(o1_vocab_load_tokenizer_json(path, &v), 0);
	assert_int_equal(v->kind, O1_VOCAB_BPE);
	assert_string_equal(v->pre, "llama-bpe");
	assert_int_equal(v->n_tokens, 128256);
	assert_int_equal(v->n_merges, 280147);
	assert_true(v->ignore_merges);
	assert_string_equal(v->tokens[128000], "<|begin_of_text|>");
	assert_int_equal(v->types[128000], O1_TOKEN_CONTROL);
	assert_string_equal(v->tokens[128001], "<|end_of_text|>");
	assert_int_equal(v->types[128001], O1_TOKEN_CONTROL);
	assert_string_equal(v->tokens[128009], "<|eot_id|>");
	assert_string_equal(v->tokens[9906], "Hello");
	assert_int_equal(v->types[9906], O1_TOKEN_NORMAL);
	assert_string_equal(v->tokens[1917], "\xc4\xa0world"); /* Ġworld */
	assert_string_equal(v->merges[0], "\xc4\xa0 \xc4\xa0");
	assert_false(v->add_bos);
	assert_int_equal(v->bos_id, -1);
	roundtrip(v);
	o1_vocab_destroy(v);
}

static void test_gpt2(void **state)
{
	static const char path[] = VOCAB_DIR "/gpt-2/tokenizer.json";
	struct o1_vocab *v;

	(void)state;
	if (access(path, R_OK) != 0)
		skip();
	assert_int_equal(o1_vocab_load_tokenizer_json(path, &v), 0);
	assert_int_equal(v->kind, O1_VOCAB_BPE);
	assert_string_equal(v->pre, "gpt2");
	assert_int_equal(v->n_tokens, 50257);
	assert_int_equal(v->n_merges, 50000);
	assert_false(v->ignore_merges);
	assert_string_equal(v->tokens[50256], "<|endoftext|>");
	assert_string_equal(v->merges[0], "\xc4\xa0 t");
	for (uint32_t i = 0; i < v->n_tokens; i++)
		assert_int_equal(v->types[i], O1_TOKEN_NORMAL);
	roundtrip(v);
	o1_vocab_destroy(v);
}

static void test_mini_llama(void **state)
{
	static const char path[] = VOCAB_DIR "/llama3.2/mini_llama.json";
	struct o1_vocab *v;

	(void)state;
	if (access(path, R_OK) != 0)
		skip();
	assert_int_equal(o1_vocab_load_tokenizer_json(path, &v), 0);
	assert_string_equal(v->pre, "llama-bpe");
	assert_int_equal(v->n_tokens, 128002);
	assert_int_equal(v->n_merges, 77);
	assert_false(v->ignore_merges);
	assert_string_equal(v->tokens[0], "!");
	assert_string_equal(v->tokens[383], "he");
	assert_int_equal(v->types[128001], O1_TOKEN_CONTROL);
	assert_string_equal(v->tokens[97671], "<|unused_97671|>");
	assert_int_equal(v->types[97671], O1_TOKEN_UNUSED);
	roundtrip(v);
	o1_vocab_destroy(v);
}

/* A Llama-2 style SentencePiece BPE tokenizer.json. */
static const char spm_json[] =
    "{\"version\":\"1.0\",\"added_tokens\":["
    "{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
    "{\"id\":1,\"content\":\"<s>\",\"special\":true},"
    "{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
    "{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
    "\"content\":\"\xe2\x96\x81\"}]},"
    "\"pre_tokenizer\":null,"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
    "{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],"
    "\"special_tokens\":{}},"
    "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":"
    "\"ByteFallback\"}]},"
    "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":"
    "true,\"byte_fallback\":true,\"vocab\":{\"<unk>\":0,\"<s>\":1,"
    "\"</s>\":2,\"<0x00>\":3,\"<0x0A>\":4,\"\xe2\x96\x81\xe2\x96\x81\":5,"
    "\"\xe2\x96\x81"
    "a\":6,\"ab\":7,\"\xe2\x96\x81"
    "ab\":8,"
    "\"\xe2\x96\x81\":9,\"a\":10,\"b\":11},"
    "\"merges\":[\"\xe2\x96\x81 \xe2\x96\x81\",\"\xe2\x96\x81 a\","
    "[\"a\",\"b\"],\"\xe2\x96\x81"
    "a b\"]}}";

static void test_spm(void **state)
{
	struct o1_vocab *v;

	(void)state;
	assert_int_equal(load_text(spm_json, &v), 0);
	assert_int_equal(v->kind, O1_VOCAB_SPM);
	assert_true(v->add_space_prefix);
	assert_int_equal(v->n_tokens, 12);
	assert_int_equal(v->types[0], O1_TOKEN_UNKNOWN);
	assert_int_equal(v->unk_id, 0);
	assert_int_equal(v->types[1], O1_TOKEN_CONTROL);
	assert_int_equal(v->types[3], O1_TOKEN_BYTE);
	assert_int_equal(v->types[4], O1_TOKEN_BYTE);
	assert_int_equal(v->types[6], O1_TOKEN_NORMAL);
	assert_int_equal(v->bos_id, 1);
	assert_true(v->add_bos);
	assert_false(v->add_eos);
	assert_int_equal(v->n_merges, 4);
	assert_string_equal(v->merges[2], "a b");
	/* scores: -rank of the merge that makes the token */
	assert_true(v->scores[5] == 0.0f);
	assert_true(v->scores[6] == -1.0f);
	assert_true(v->scores[7] == -2.0f);
	assert_true(v->scores[8] == -3.0f);
	assert_true(v->scores[9] < -3.0f && v->scores[10] < v->scores[9]);
	assert_true(v->scores[0] == 0.0f && v->scores[3] == 0.0f);
	roundtrip(v);
	o1_vocab_destroy(v);
}

static void test_spm_from_scores(void **state)
{
	static const char *const toks[] = {
	    "<unk>",
	    "<s>",
	    "</s>",
	    "\xe2\x96\x81"
	    "a",
	    "bc",
	    "\xe2\x96\x81"
	    "abc",
	    "ab",
	    "\xe2\x96\x81",
	    "a",
	    "b",
	    "c",
	};
	static const float scores[] = {0, 0, 0, -1, -2, -3, -4, -5, -6, -7, -8};
	struct o1_vocab *v, *back;
	char path[4096];

	(void)state;
	assert_int_equal(o1_vocab_create(11, 0, &v), 0);
	v->kind = O1_VOCAB_SPM;
	v->add_space_prefix = true;
	for (uint32_t i = 0; i < 11; i++) {
		v->tokens[i] = o1_vocab_strdup(v, toks[i], strlen(toks[i]));
		v->scores[i] = scores[i];
		v->types[i] = i < 3 ? O1_TOKEN_CONTROL : O1_TOKEN_NORMAL;
	}
	v->types[0] = O1_TOKEN_UNKNOWN;
	v->unk_id = 0;
	v->bos_id = 1;
	v->eos_id = 2;
	v->add_bos = true;
	assert_int_equal(o1_vocab_write_tokenizer_json(v, tmpdir), 0);
	snprintf(path, sizeof(path), "%s/tokenizer.json", tmpdir);
	assert_int_equal(o1_vocab_load_tokenizer_json(path, &back), 0);
	/* merges in score order of the merged token; "▁ab c" is no merge
	 * because ▁ab is not a token */
	assert_int_equal(back->n_merges, 4);
	assert_string_equal(back->merges[0], "\xe2\x96\x81 a");
	assert_string_equal(back->merges[1], "b c");
	assert_string_equal(back->merges[2], "\xe2\x96\x81"
					     "a bc");
	assert_string_equal(back->merges[3], "a b");
	assert_int_equal(back->bos_id, 1);
	assert_int_equal(back->eos_id, 2);
	assert_true(back->add_bos);
	assert_true(back->add_space_prefix);
	for (uint32_t i = 4; i < 8; i++) /* score order preserved */
		assert_true(back->scores[i] < back->scores[i - 1]);
	o1_vocab_destroy(back);
	o1_vocab_destroy(v);
}

#define BPE_HEAD                                                               \
	"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},"
#define BPE_MERGES "\"merges\":[\"a b\"]},"
#define BYTELEVEL  "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}"

static void test_pre_names(void **state)
{
	static const char qwen2[] = BPE_HEAD BPE_MERGES
	    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{"
	    "\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|"
	    "'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
	    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|"
	    "\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":"
	    "false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}}";
	static const char other[] = BPE_HEAD BPE_MERGES
	    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{"
	    "\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"}},{"
	    "\"type\":\"ByteLevel\",\"use_regex\":false}]}}";
	struct o1_vocab *v;

	(void)state;
	assert_int_equal(load_text(qwen2, &v), 0);
	assert_string_equal(v->pre, "qwen2");
	assert_int_equal(v->kind, O1_VOCAB_BPE);
	roundtrip(v);
	o1_vocab_destroy(v);
	assert_int_equal(load_text(BPE_HEAD BPE_MERGES BYTELEVEL "}", &v), 0);
	assert_string_equal(v->pre, "gpt2");
	o1_vocab_destroy(v);
	assert_int_equal(load_text(other, &v), -O1_E_UNSUPPORTED);
	assert_int_equal(load_text(BPE_HEAD BPE_MERGES
				   "\"pre_tokenizer\":{\"type\":"
				   "\"ByteLevel\",\"use_regex\":"
				   "false}}",
				   &v),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(load_text(BPE_HEAD BPE_MERGES "\"pre_tokenizer\":{"
						       "\"type\":"
						       "\"Whitespace\"}}",
				   &v),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(load_text("{\"model\":{\"type\":\"Unigram\",\"vocab\":"
				   "[[\"a\",-1.0]]}}",
				   &v),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(load_text("{\"model\":{\"type\":\"WordPiece\","
				   "\"vocab\":{\"a\":0}}}",
				   &v),
			 -O1_E_UNSUPPORTED);
}

static void test_sparse_ids(void **state)
{
	struct o1_vocab *v;

	(void)state;
	assert_int_equal(
	    load_text("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,"
		      "\"b\":5},\"merges\":[]},\"added_tokens\":[{\"id\":9,"
		      "\"content\":\"<x>\",\"special\":false}]," BYTELEVEL "}",
		      &v),
	    0);
	assert_int_equal(v->n_tokens, 10);
	assert_string_equal(v->tokens[1], "<|unused_1|>");
	assert_int_equal(v->types[4], O1_TOKEN_UNUSED);
	assert_int_equal(v->types[5], O1_TOKEN_NORMAL);
	assert_int_equal(v->types[9], O1_TOKEN_USER_DEFINED);
	roundtrip(v);
	o1_vocab_destroy(v);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{\"model\":{\"type\":\"BPE\",\"vocab\":",
	    "{}",
	    "{\"model\":[]}",
	    "{\"model\":{\"type\":3,\"vocab\":{}}}",
	    "{\"model\":{\"type\":\"BPE\",\"vocab\":[]}}",
	    "{\"model\":{\"type\":\"BPE\",\"vocab\":{}}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":{}}," BYTELEVEL "}",
	    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1}}," BYTELEVEL "}",
	    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"0\"}}," BYTELEVEL
	    "}",
	    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0.5}}," BYTELEVEL
	    "}",
	    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999}}"
	    "," BYTELEVEL "}",
	    "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0}}"
	    "," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[\"ab\"]}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[\"a b c\"]}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[\" b\"]}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[[\"a\"]]}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[[\"a\",2]]}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[[\"a \",\"b\"]]}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[3]}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[],\"unk_token\":\"<unk>\"}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[],\"unk_token\":1}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[],\"byte_fallback\":1}," BYTELEVEL "}",
	    BPE_HEAD "\"merges\":[],\"ignore_merges\":\"yes\"}," BYTELEVEL "}",
	    BPE_HEAD BPE_MERGES "\"added_tokens\":{}," BYTELEVEL "}",
	    BPE_HEAD BPE_MERGES "\"added_tokens\":[{\"id\":1,\"content\":"
				"\"zz\"}]," BYTELEVEL "}",
	    BPE_HEAD BPE_MERGES "\"added_tokens\":[{\"id\":3}]," BYTELEVEL "}",
	    BPE_HEAD BPE_MERGES "\"added_tokens\":[{\"id\":3,\"content\":"
				"\"x\",\"special\":1}]," BYTELEVEL "}",
	    BPE_HEAD BPE_MERGES "\"added_tokens\":[7]," BYTELEVEL "}",
	    BPE_HEAD BPE_MERGES
	    "\"pre_tokenizer\":{\"type\":\"Sequence\","
	    "\"pretokenizers\":[{\"type\":\"Split\"},{\"type\":"
	    "\"ByteLevel\"}]}}",
	};
	struct o1_vocab *v;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = load_text(bad[i], &v);

		if (err != -O1_E_FORMAT)
			fail_msg("case %zu (%s) gave %d", i, bad[i], err);
	}
	assert_int_equal(
	    o1_vocab_load_tokenizer_json("/nonexistent/x.json", &v), -ENOENT);
}

static void test_config(void **state)
{
	static const char tok[] = BPE_HEAD BPE_MERGES
	    "\"added_tokens\":[{\"id\":3,\"content\":"
	    "\"<s>\",\"special\":true},{\"id\":4,\"content\":\"</s>\","
	    "\"special\":true}]," BYTELEVEL "}";
	struct o1_vocab *v;

	(void)state;
	o1_test_file_put(
	    tmpdir, "tokenizer_config.json",
	    "{\"bos_token\":{\"content\":\"<s>\",\"lstrip\":false},"
	    "\"eos_token\":\"</s>\",\"pad_token\":\"</s>\",\"add_bos_token\":"
	    "true,\"add_eos_token\":false,\"chat_template\":[{\"name\":"
	    "\"tool_use\",\"template\":\"T\"},{\"name\":\"default\","
	    "\"template\":\"{{ messages }}\"}]}");
	assert_int_equal(load_text(tok, &v), 0);
	assert_int_equal(v->bos_id, 3);
	assert_int_equal(v->eos_id, 4);
	assert_int_equal(v->pad_id, 4);
	assert_true(v->add_bos);
	assert_false(v->add_eos);
	assert_string_equal(v->chat_template, "{{ messages }}");
	roundtrip(v);
	v->add_eos = true;
	roundtrip(v);
	o1_vocab_destroy(v);
	o1_test_file_put(tmpdir, "tokenizer_config.json",
			 "{\"chat_template\":\"X\",\"eos_token\":"
			 "\"<missing>\"}");
	assert_int_equal(load_text(tok, &v), 0);
	assert_string_equal(v->chat_template, "X");
	assert_int_equal(v->eos_id, -1);
	o1_vocab_destroy(v);
	/* chat_template.jinja beside it wins, as in transformers */
	o1_test_file_put(tmpdir, "chat_template.jinja", "{{ bos_token }}J");
	assert_int_equal(load_text(tok, &v), 0);
	assert_string_equal(v->chat_template, "{{ bos_token }}J");
	o1_vocab_destroy(v);
	o1_test_file_put(tmpdir, "chat_template.jinja", NULL);
	o1_test_file_put(tmpdir, "tokenizer_config.json",
			 "{\"add_bos_token\":1}");
	assert_int_equal(load_text(tok, &v), -O1_E_FORMAT);
	o1_test_file_put(tmpdir, "tokenizer_config.json",
			 "{\"chat_template\":5}");
	assert_int_equal(load_text(tok, &v), -O1_E_FORMAT);
	o1_test_file_put(tmpdir, "tokenizer_config.json", "[");
	assert_int_equal(load_text(tok, &v), -O1_E_FORMAT);
	o1_test_file_put(tmpdir, "tokenizer_config.json", NULL);
}

static void test_writer_errors(void **state)
{
	struct o1_vocab *v;

	(void)state;
	assert_int_equal(o1_vocab_create(2, 1, &v), 0);
	v->tokens[0] = o1_vocab_strdup(v, "a", 1);
	assert_int_equal(o1_vocab_write_tokenizer_json(v, tmpdir), -EINVAL);
	v->tokens[1] = o1_vocab_strdup(v, "b", 1);
	v->types[0] = v->types[1] = O1_TOKEN_NORMAL;
	v->merges[0] = o1_vocab_strdup(v, "ab", 2);
	assert_int_equal(o1_vocab_write_tokenizer_json(v, tmpdir), -EINVAL);
	free(v->merges[0]);
	v->merges[0] = o1_vocab_strdup(v, "a b", 3);
	strcpy(v->pre, "deepseek-llm");
	assert_int_equal(o1_vocab_write_tokenizer_json(v, tmpdir),
			 -O1_E_UNSUPPORTED);
	strcpy(v->pre, "gpt2");
	v->add_bos = true; /* without a BOS id */
	assert_int_equal(o1_vocab_write_tokenizer_json(v, tmpdir), -EINVAL);
	v->add_bos = false;
	assert_int_equal(o1_vocab_write_tokenizer_json(v, "/nonexistent/d"),
			 -ENOENT);
	roundtrip(v);
	o1_vocab_destroy(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_llama32, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_gpt2, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_mini_llama, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_spm, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_spm_from_scores, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_pre_names, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_sparse_ids, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_malformed, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_config, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_writer_errors, make_tmpdir,
					    remove_tmpdir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

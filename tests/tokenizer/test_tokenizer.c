/* Tokenizer tests: byte mapping, BPE merges by rank, pre-tokenizer splits,
 * ignore_merges, SentencePiece merges/byte fallback/dummy prefix, special
 * tokens, invalid input, the output-capacity contract, concurrent encodes,
 * and round trips on hand-built and (when ../shared is there) real
 * vocabularies. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/log.h"
#include "common/utf8.h"
#include "tok_fixture.h"
#include "tokenizer/tokenizer_int.h"
#include "tokenizer/vocab_gpt2.h"

#define VOCAB_DIR O1_SHARED_DIR "/testdata/vocab"

struct fix {
	struct o1_vocab *v;
	struct o1_tokenizer *t;
};

static void fix_bpe(struct fix *f, const char *pre, bool ignore_merges)
{
	assert_int_equal(tok_fixture_bpe(pre, ignore_merges, &f->v), 0);
	assert_int_equal(o1_tokenizer_create(f->v, &f->t), 0);
}

static void fix_spm(struct fix *f)
{
	assert_int_equal(tok_fixture_spm(&f->v), 0);
	assert_int_equal(o1_tokenizer_create(f->v, &f->t), 0);
}

static void fix_free(struct fix *f)
{
	o1_tokenizer_destroy(f->t);
	o1_vocab_destroy(f->v);
}

/* Encodes S and compares with the token texts in EXPECT (NULL-ended). */
static void expect_texts(struct fix *f, const char *s, unsigned flags,
			 const char *const *expect)
{
	int32_t ids[256];
	int n = o1_tokenizer_encode(f->t, s, strlen(s), flags, ids, 256);
	int i;

	assert_true(n >= 0);
	for (i = 0; expect[i]; i++) {
		assert_true(i < n);
		assert_string_equal(o1_tokenizer_token_text(f->t, ids[i]),
				    expect[i]);
	}
	assert_int_equal(n, i);
}

#define EXPECT(f, s, flags, ...)                                               \
	expect_texts(f, s, flags, (const char *const[]){__VA_ARGS__, NULL})

static void test_byte_mapping(void **state)
{
	bool seen[324] = {false};

	(void)state;
	assert_int_equal(tok_byte_to_cp(' '), 0x120);  /* Ġ */
	assert_int_equal(tok_byte_to_cp('\n'), 0x10a); /* Ċ */
	assert_int_equal(tok_byte_to_cp('A'), 'A');
	assert_int_equal(tok_byte_to_cp(0xad), 0x143);
	assert_int_equal(tok_byte_to_cp(0x7f), 0x121);
	for (unsigned b = 0; b < 256; b++) {
		uint32_t cp = tok_byte_to_cp((uint8_t)b);

		assert_true(cp < 324);
		assert_false(seen[cp]);
		seen[cp] = true;
		assert_int_equal(tok_cp_to_byte(cp), (int)b);
	}
	assert_int_equal(tok_cp_to_byte(0x20), -1);
	assert_int_equal(tok_cp_to_byte(324), -1);
}

static void test_bpe_merges_by_rank(void **state)
{
	struct fix f;

	(void)state;
	fix_bpe(&f, "gpt2", false);
	/* " the": Ġt (rank 0), then he (1) before "Ġt h" (22) */
	EXPECT(&f, "Hello the world", 0, "Hello", "Ġthe", "Ġworld");
	EXPECT(&f, "abc", 0, "ab", "c");
	EXPECT(&f, "xyz", 0, "x", "y", "z");
	EXPECT(&f, "", 0, NULL);
	fix_free(&f);
}

static void test_regex_splits(void **state)
{
	struct fix f;

	(void)state;
	fix_bpe(&f, "gpt2", false);
	/* \s+(?!\S) leaves the last space to the word */
	EXPECT(&f, "a  b", 0, "a", "Ġ", "Ġ", "b");
	EXPECT(&f, "a   b", 0, "a", "ĠĠ", "Ġ", "b");
	EXPECT(&f, "2345", 0, "2", "3", "45");
	EXPECT(&f, "'S", 0, "'", "S");
	fix_free(&f);

	fix_bpe(&f, "llama-bpe", false);
	EXPECT(&f, "2345", 0, "2", "3", "4", "5"); /* \p{N}{1,3} */
	EXPECT(&f, "12345", 0, "123", "45");
	EXPECT(&f, "'S", 0, "'S"); /* (?i:'s) */
	fix_free(&f);

	fix_bpe(&f, "qwen2", false);
	EXPECT(&f, "12345", 0, "1", "2", "3", "4", "5");
	fix_free(&f);
}

static void test_ignore_merges(void **state)
{
	struct fix f;

	(void)state;
	fix_bpe(&f, "llama-bpe", true);
	EXPECT(&f, "xyz", 0, "xyz");
	EXPECT(&f, "Hello", 0, "Hello");
	fix_free(&f);
}

static void test_unknown_pre(void **state)
{
	struct o1_tokenizer *t = NULL;
	struct o1_vocab *v;

	(void)state;
	assert_int_equal(tok_fixture_bpe("no-such-regex", false, &v), 0);
	assert_int_equal(o1_tokenizer_create(v, &t), -O1_E_UNSUPPORTED);
	assert_null(t);
	o1_vocab_destroy(v);
}

static void test_specials(void **state)
{
	struct fix f;
	int32_t ids[64];
	int n;

	(void)state;
	fix_bpe(&f, "gpt2", false);
	EXPECT(&f, "a<|endoftext|>", O1_ENCODE_PARSE_SPECIAL, "a",
	       "<|endoftext|>");
	n = o1_tokenizer_encode(f.t, "a<|endoftext|>", 14, 0, ids, 64);
	assert_int_equal(n, 14); /* a, then the 13 bytes: no merges apply */
	EXPECT(&f, "a<|user|>b", 0, "a", "<|user|>", "b");
	EXPECT(&f, "<|endoftext|><|endoftext|>", O1_ENCODE_PARSE_SPECIAL,
	       "<|endoftext|>", "<|endoftext|>");
	/* add_bos is off in this vocabulary */
	EXPECT(&f, "a", O1_ENCODE_ADD_SPECIAL, "a");
	assert_true(o1_tokenizer_is_special(f.t, o1_tokenizer_bos(f.t)));
	fix_free(&f);
}

static void test_spm(void **state)
{
	struct fix f;

	(void)state;
	fix_spm(&f);
	EXPECT(&f, "hello world", 0, "▁hello", "▁world");
	EXPECT(&f, "hello world", O1_ENCODE_ADD_SPECIAL, "<s>", "▁hello",
	       "▁world");
	EXPECT(&f, "abc", 0, "▁", "ab", "c"); /* equal scores: leftmost */
	EXPECT(&f, "€", 0, "▁", "<0xE2>", "<0x82>", "<0xAC>");
	EXPECT(&f, "é", 0, "▁", "é");
	EXPECT(&f, "  ", 0, "▁▁", "▁");
	EXPECT(&f, "", 0, NULL);
	EXPECT(&f, "", O1_ENCODE_ADD_SPECIAL, "<s>");
	fix_free(&f);
	assert_int_equal(tok_fixture_spm(&f.v), 0);
	f.v->add_eos = true;
	assert_int_equal(o1_tokenizer_create(f.v, &f.t), 0);
	EXPECT(&f, "hello", O1_ENCODE_ADD_SPECIAL, "<s>", "▁hello", "</s>");
	EXPECT(&f, "hello", 0, "▁hello");
	/* after a special token the dummy prefix comes back (llama.cpp) */
	EXPECT(&f, "hello<user>world", 0, "▁hello", "<user>", "▁world");
	EXPECT(&f, "hello</s>", O1_ENCODE_PARSE_SPECIAL, "▁hello", "</s>");
	fix_free(&f);
}

/* Runs up to 32 characters merge by linear scans, longer ones with the
 * heap: "hello" repeated across that length gives the same pattern. */
static void test_spm_long_runs(void **state)
{
	int32_t ids[64], hello, h, e, ll, o;
	char text[128] = "";
	struct fix f;

	(void)state;
	fix_spm(&f);
	hello = tok_fixture_id(f.v, "▁hello");
	h = tok_fixture_id(f.v, "h");
	e = tok_fixture_id(f.v, "e");
	ll = tok_fixture_id(f.v, "ll");
	o = tok_fixture_id(f.v, "o");
	for (int k = 1; k <= 12; k++) {
		int n;

		strcat(text, "hello");
		n = o1_tokenizer_encode(f.t, text, strlen(text), 0, ids, 64);
		assert_int_equal(n, 1 + 4 * (k - 1));
		assert_int_equal(ids[0], hello);
		for (int i = 1; i < n; i += 4) {
			assert_int_equal(ids[i], h);
			assert_int_equal(ids[i + 1], e);
			assert_int_equal(ids[i + 2], ll);
			assert_int_equal(ids[i + 3], o);
		}
	}
	fix_free(&f);
}

/* A token with U+2581 inside makes the merges run over whole segments
 * instead of word by word: "o▁w" forms across the space. */
static void test_spm_cross_space(void **state)
{
	struct fix f;
	int32_t id;

	(void)state;
	assert_int_equal(tok_fixture_spm(&f.v), 0);
	id = tok_fixture_id(f.v, "é");
	free(f.v->tokens[id]);
	f.v->tokens[id] = strdup("o\xe2\x96\x81w");
	f.v->scores[id] = 10;
	assert_int_equal(o1_tokenizer_create(f.v, &f.t), 0);
	assert_false(f.t->spm_runs);
	EXPECT(&f, "lo wo", 0, "▁", "l", "o▁w", "o");
	fix_free(&f);
	fix_spm(&f);
	assert_true(f.t->spm_runs);
	EXPECT(&f, "lo wo", 0, "▁", "l", "o", "▁w", "o");
	fix_free(&f);
}

static void test_invalid_utf8(void **state)
{
	static const char *const bad[] = {
	    "\xff",
	    "a\xc3",
	    "\xed\xa0\x80",
	    "\xc0\xaf",
	    "\xf4\x90\x80\x80",
	    "\x80",
	    "\xe2\x82",
	    "ok\xf0\x9f\x9a",
	};
	struct fix f;
	int32_t ids[16];

	(void)state;
	fix_bpe(&f, "gpt2", false);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(o1_tokenizer_encode(
				     f.t, bad[i], strlen(bad[i]), 0, ids, 16),
				 -O1_E_TOKENIZER);
	fix_free(&f);
}

static void test_capacity(void **state)
{
	struct fix f;
	int32_t ids[4] = {-7, -7, -7, -7};

	(void)state;
	fix_bpe(&f, "gpt2", false);
	assert_int_equal(
	    o1_tokenizer_encode(f.t, "Hello the world", 15, 0, ids, 1), 3);
	assert_int_equal(ids[0], tok_fixture_id(f.v, "Hello"));
	assert_int_equal(ids[1], -7);
	assert_int_equal(
	    o1_tokenizer_encode(f.t, "Hello the world", 15, 0, NULL, 0), 3);
	fix_free(&f);
}

/* Random valid UTF-8 of N characters from mixed ranges; fixed seed. */
static size_t random_text(unsigned *seed, char *out, size_t n)
{
	static const uint32_t ranges[][2] = {
	    {' ', '~'},	      {' ', ' '},	  {'\n', '\n'},
	    {'0', '9'},	      {0xa0, 0x24f},	  {0x400, 0x4ff},
	    {0x4e00, 0x4fff}, {0x1f600, 0x1f64f}, {0x1780, 0x17ff},
	    {'\t', '\t'},
	};
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		const uint32_t *r = ranges[rand_r(seed) % 10];
		uint32_t cp = r[0] + (uint32_t)rand_r(seed) % (r[1] - r[0] + 1);

		len += o1_utf8_encode(cp, out + len);
	}
	out[len] = 0;
	return len;
}

static void round_trips(const struct o1_tokenizer *t, unsigned seed, int count)
{
	char text[4 * 200 + 1], back[8 * 200 + 16];
	int32_t ids[1024];

	for (int k = 0; k < count; k++) {
		size_t len = random_text(&seed, text, 1 + (size_t)k % 200);
		int n = o1_tokenizer_encode(t, text, len, 0, ids, 1024);
		int m;

		assert_true(n > 0 && n <= 1024);
		m = o1_tokenizer_decode(t, ids, (size_t)n,
					O1_DECODE_STRIP_PREFIX, back,
					sizeof(back));
		assert_int_equal(m, (int)len);
		assert_memory_equal(back, text, len);
	}
}

static void test_round_trip_fixtures(void **state)
{
	struct fix f;

	(void)state;
	fix_bpe(&f, "gpt2", false);
	round_trips(f.t, 1, 300);
	fix_free(&f);
	fix_bpe(&f, "llama-bpe", true);
	round_trips(f.t, 2, 300);
	fix_free(&f);
	fix_spm(&f);
	round_trips(f.t, 3, 300);
	fix_free(&f);
}

struct enc_job {
	const struct o1_tokenizer *t;
	const char *text;
	size_t len;
	const int32_t *want;
	int n_want;
	int bad;
};

static void *encode_many(void *arg)
{
	struct enc_job *j = arg;
	int32_t *ids = malloc((size_t)j->n_want * sizeof(*ids));

	for (int k = 0; ids && k < 20; k++) {
		int n = o1_tokenizer_encode(j->t, j->text, j->len, 0, ids,
					    (size_t)j->n_want);

		j->bad += n != j->n_want ||
			  memcmp(ids, j->want, (size_t)n * sizeof(*ids));
	}
	j->bad += !ids;
	free(ids);
	return NULL;
}

static void test_concurrent_encodes(void **state)
{
	static char text[4 * 5000 + 1];
	unsigned seed = 9;
	struct enc_job jobs[4];
	pthread_t th[4];
	int32_t *want;
	struct fix f;
	size_t len;
	int n;

	(void)state;
	fix_bpe(&f, "llama-bpe", true);
	len = random_text(&seed, text, 5000);
	want = malloc(len * sizeof(*want));
	assert_non_null(want);
	n = o1_tokenizer_encode(f.t, text, len, 0, want, len);
	assert_true(n > 0);
	for (int i = 0; i < 4; i++) {
		jobs[i] = (struct enc_job){f.t, text, len, want, n, 0};
		assert_int_equal(
		    pthread_create(&th[i], NULL, encode_many, &jobs[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].bad, 0);
	}
	free(want);
	fix_free(&f);
}

/* Real vocabularies from ../shared: NULL when absent. */
static struct o1_tokenizer *load_real(const char *path)
{
	struct o1_tokenizer *t = NULL;
	struct o1_vocab *v;
	struct stat st;

	if (stat(path, &st) != 0)
		return NULL;
	assert_int_equal(o1_vocab_load_any(path, &v), 0);
	assert_int_equal(o1_tokenizer_create(v, &t), 0);
	o1_vocab_destroy(v);
	return t;
}

/* Every normal token whose text is whole UTF-8 encodes back to itself,
 * or to other ids that decode to the same text; returns the share that
 * came back as the one id, in percent. */
static int single_tokens(const struct o1_tokenizer *t, bool spm)
{
	int eligible = 0, same = 0;
	char piece[1024], back[2048];
	int32_t ids[512];

	for (uint32_t id = 0; id < o1_tokenizer_n_tokens(t); id++) {
		int len, n;

		if (t->types[id] != O1_TOKEN_NORMAL ||
		    (spm && strncmp(o1_tokenizer_token_text(t, (int32_t)id),
				    "\xe2\x96\x81", 3)))
			continue;
		len = o1_tokenizer_decode(t, (int32_t[]){(int32_t)id}, 1,
					  spm ? O1_DECODE_STRIP_PREFIX : 0,
					  piece, sizeof(piece));
		if (len <= 0 || len >= (int)sizeof(piece) ||
		    strstr(piece, "\xef\xbf\xbd"))
			continue;
		eligible++;
		n = o1_tokenizer_encode(t, piece, (size_t)len, 0, ids, 512);
		assert_true(n > 0 && n <= 512);
		same += n == 1 && ids[0] == (int32_t)id;
		assert_int_equal(o1_tokenizer_decode(t, ids, (size_t)n,
						     O1_DECODE_STRIP_PREFIX,
						     back, sizeof(back)),
				 len);
		assert_memory_equal(back, piece, (size_t)len);
	}
	assert_true(eligible > 1000);
	print_message("%d of %d single tokens come back as themselves\n", same,
		      eligible);
	return (int)(100LL * same / eligible);
}

static void test_real_vocabularies(void **state)
{
	static const struct {
		const char *path;
		bool spm;
		int min_pct;
	} vocabs[] = {
	    {VOCAB_DIR "/ggml-vocab-gpt-2.gguf", false, 99},
	    {VOCAB_DIR "/ggml-vocab-llama-spm.gguf", true, 95},
	    {VOCAB_DIR "/llama3.2/tokenizer.json", false, 99},
	};
	int done = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(vocabs) / sizeof(vocabs[0]); i++) {
		struct o1_tokenizer *t = load_real(vocabs[i].path);

		if (!t)
			continue;
		round_trips(t, 100 + (unsigned)i, 200);
		assert_true(single_tokens(t, vocabs[i].spm) >=
			    vocabs[i].min_pct);
		o1_tokenizer_destroy(t);
		done++;
	}
	if (!done)
		skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_byte_mapping),
	    cmocka_unit_test(test_bpe_merges_by_rank),
	    cmocka_unit_test(test_regex_splits),
	    cmocka_unit_test(test_ignore_merges),
	    cmocka_unit_test(test_unknown_pre),
	    cmocka_unit_test(test_specials),
	    cmocka_unit_test(test_spm),
	    cmocka_unit_test(test_spm_long_runs),
	    cmocka_unit_test(test_spm_cross_space),
	    cmocka_unit_test(test_invalid_utf8),
	    cmocka_unit_test(test_capacity),
	    cmocka_unit_test(test_round_trip_fixtures),
	    cmocka_unit_test(test_concurrent_encodes),
	    cmocka_unit_test(test_real_vocabularies),
	};

	o1_log_set_level(O1_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

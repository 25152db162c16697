/* Incremental detokenizer tests: characters split across tokens come out
 * whole and only once complete, invalid bytes become U+FFFD, the output
 * room is checked before the state changes, specials can be skipped, and
 * the SentencePiece dummy prefix is dropped on request. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/log.h"
#include "tok_fixture.h"
#include "tokenizer/tokenizer_int.h"

struct fix {
	struct o1_vocab *v;
	struct o1_tokenizer *t;
	struct o1_detok d;
	char out[256];
};

static int setup_bpe(void **state)
{
	static struct fix f;

	if (tok_fixture_bpe("gpt2", false, &f.v) ||
	    o1_tokenizer_create(f.v, &f.t))
		return -1;
	*state = &f;
	return 0;
}

static int setup_spm(void **state)
{
	static struct fix f;

	if (tok_fixture_spm(&f.v) || o1_tokenizer_create(f.v, &f.t))
		return -1;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	o1_tokenizer_destroy(f->t);
	o1_vocab_destroy(f->v);
	return 0;
}

/* Feeds one id; checks the bytes that come out. */
static void step(struct fix *f, int32_t id, const char *want)
{
	int n =
	    o1_tokenizer_decode_step(f->t, &f->d, id, f->out, sizeof(f->out));

	assert_int_equal(n, (int)strlen(want));
	assert_memory_equal(f->out, want, (size_t)n);
}

static int32_t id_of(struct fix *f, const char *text)
{
	int32_t id = tok_fixture_id(f->v, text);

	assert_true(id >= 0);
	return id;
}

static void test_split_character(void **state)
{
	struct fix *f = *state;
	int32_t ids[8];

	/* 🚀 = F0 9F 9A 80: "ðŁ" (F0 9F), then bytes 9A and 80 */
	assert_int_equal(
	    o1_tokenizer_encode(f->t, "\xf0\x9f\x9a\x80", 4, 0, ids, 8), 3);
	o1_tokenizer_decode_init(&f->d, 0);
	step(f, ids[0], "");
	step(f, ids[1], "");
	step(f, ids[2], "\xf0\x9f\x9a\x80");
	assert_int_equal(o1_tokenizer_decode_flush(&f->d, f->out, 8), 0);
	/* ids 0..255 of the fixture are the bytes themselves */
	o1_tokenizer_decode_init(&f->d, 0);
	step(f, 0xe2, "");
	step(f, 0x82, "");
	step(f, 'A',
	     "\xef\xbf\xbd"
	     "A");
}

static void test_invalid_bytes(void **state)
{
	struct fix *f = *state;

	o1_tokenizer_decode_init(&f->d, 0);
	step(f, 0x80, "\xef\xbf\xbd");
	step(f, 0xff, "\xef\xbf\xbd");
	step(f, 0xed, "");
	step(f, 0xa0, "\xef\xbf\xbd\xef\xbf\xbd"); /* surrogate half */
	step(f, 0xc0, "\xef\xbf\xbd");		   /* overlong lead */
	step(f, 0xf0, "");
	assert_int_equal(o1_tokenizer_decode_flush(&f->d, f->out, 2), -ENOSPC);
	assert_int_equal(o1_tokenizer_decode_flush(&f->d, f->out, 3), 3);
	assert_memory_equal(f->out, "\xef\xbf\xbd", 3);
	assert_int_equal(o1_tokenizer_decode_flush(&f->d, f->out, 3), 0);
}

static void test_room_and_bounds(void **state)
{
	struct fix *f = *state;
	int32_t hello = id_of(f, "Hello");
	char out[16];

	o1_tokenizer_decode_init(&f->d, 0);
	step(f, 0xe2, "");
	assert_int_equal(o1_tokenizer_decode_step(f->t, &f->d, hello, out, 7),
			 -ENOSPC);
	/* the pending byte is still there: FFFD then Hello */
	step(f, hello, "\xef\xbf\xbdHello");
	assert_int_equal(o1_tokenizer_decode_step(f->t, &f->d, -1, out, 16),
			 -O1_E_BOUNDS);
	assert_int_equal(o1_tokenizer_decode_step(
			     f->t, &f->d, (int32_t)f->v->n_tokens, out, 16),
			 -O1_E_BOUNDS);
	assert_true(o1_tokenizer_max_piece(f->t) >= 13);
}

static void test_specials(void **state)
{
	struct fix *f = *state;
	int32_t eot = id_of(f, "<|endoftext|>");

	o1_tokenizer_decode_init(&f->d, 0);
	step(f, eot, "<|endoftext|>");
	o1_tokenizer_decode_init(&f->d, O1_DECODE_SKIP_SPECIAL);
	step(f, eot, "");
	step(f, id_of(f, "<|user|>"), "<|user|>");
}

static void test_whole_decode(void **state)
{
	struct fix *f = *state;
	int32_t ids[] = {id_of(f, "Hello"), id_of(f, "Ġworld"), 0xe2};
	char out[32];

	assert_int_equal(o1_tokenizer_decode(f->t, ids, 3, 0, out, 32), 14);
	assert_string_equal(out, "Hello world\xef\xbf\xbd");
	assert_int_equal(o1_tokenizer_decode(f->t, ids, 3, 0, out, 6), 14);
	assert_string_equal(out, "Hello");
	assert_int_equal(o1_tokenizer_decode(f->t, ids, 3, 0, NULL, 0), 14);
}

static void test_spm_pieces(void **state)
{
	struct fix *f = *state;
	int32_t ids[] = {id_of(f, "▁hello"), id_of(f, "▁world")};
	char out[32];

	o1_tokenizer_decode_init(&f->d, 0);
	step(f, id_of(f, "<0xE2>"), "");
	step(f, id_of(f, "<0x82>"), "");
	step(f, id_of(f, "<0xAC>"), "€");
	step(f, 0, "\xe2\x96\x85"); /* unk, as llama.cpp shows it */
	step(f, 1, "<s>");
	assert_int_equal(
	    o1_tokenizer_decode(f->t, ids, 2, O1_DECODE_STRIP_PREFIX, out, 32),
	    11);
	assert_string_equal(out, "hello world");
	assert_int_equal(o1_tokenizer_decode(f->t, ids, 2, 0, out, 32), 12);
	assert_string_equal(out, " hello world");
	/* BOS before the text does not use up the strip */
	assert_int_equal(
	    o1_tokenizer_decode(f->t, (int32_t[]){1, ids[0]}, 2,
				O1_DECODE_STRIP_PREFIX | O1_DECODE_SKIP_SPECIAL,
				out, 32),
	    5);
	assert_string_equal(out, "hello");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_split_character, setup_bpe,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_invalid_bytes, setup_bpe,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_room_and_bounds, setup_bpe,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_specials, setup_bpe, teardown),
	    cmocka_unit_test_setup_teardown(test_whole_decode, setup_bpe,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_spm_pieces, setup_spm,
					    teardown),
	};

	o1_log_set_level(O1_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

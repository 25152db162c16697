/* common/utf8 against a second statement of UTF-8, checked exhaustively.
 *
 * The reference below does not use the standard's table of byte ranges
 * that utf8.c follows: it reads the lead byte's bit pattern, gathers six
 * bits from each 10xxxxxx byte, and then asks whether the number is a
 * scalar value (<= U+10FFFF, not a surrogate) written in its shortest
 * form. Both must agree on every sequence of one to three bytes, on every
 * four-byte sequence with a four-byte lead (F0-F4; F5-F7 where the bit
 * pattern holds), and on every code point's round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <string.h>

#include "common/prng.h"
#include "common/utf8.h"

/* The reference decoder: length and code point, 0 when S[0, LEN) does not
 * start a character. SURROGATES as o1_utf8_decode_surrogates. */
static size_t ref_decode(const uint8_t *s, size_t len, int surrogates,
			 uint32_t *cp)
{
	static const uint32_t shortest[5] = {0, 0, 0x80, 0x800, 0x10000};
	size_t n;
	uint32_t c;

	if (!len)
		return 0;
	if (!(s[0] & 0x80))
		n = 1, c = s[0];
	else if ((s[0] >> 5) == 0x6)
		n = 2, c = s[0] & 0x1f;
	else if ((s[0] >> 4) == 0xe)
		n = 3, c = s[0] & 0x0f;
	else if ((s[0] >> 3) == 0x1e)
		n = 4, c = s[0] & 0x07;
	else
		return 0;
	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] >> 6) != 0x2)
			return 0;
		c = c * 64 + (s[i] & 0x3f);
	}
	if (c < shortest[n] || c > 0x10ffff)
		return 0;
	if (!surrogates && c >= 0xd800 && c <= 0xdfff)
		return 0;
	*cp = c;
	return n;
}

/* Both decoders, and the byte-at-a-time form, agree with the reference
 * on S[0, LEN). */
static void check_seq(const uint8_t *s, size_t len)
{
	for (int sur = 0; sur < 2; sur++) {
		uint32_t want = 0, got = 0;
		size_t wn = ref_decode(s, len, sur, &want);
		size_t gn = sur ? o1_utf8_decode_surrogates(s, len, &got)
				: o1_utf8_decode(s, len, &got);

		if (gn != wn || (wn && got != want))
			fail_msg("%zu bytes %02x %02x %02x %02x (surrogates "
				 "%d): got %zu U+%04X, want %zu U+%04X",
				 len, s[0], len > 1 ? s[1] : 0,
				 len > 2 ? s[2] : 0, len > 3 ? s[3] : 0, sur,
				 gn, got, wn, want);
	}
}

/* The streaming form: a well-formed character is exactly a lead byte
 * whose length fits followed by bytes cont_ok takes. */
static size_t stream_len(const uint8_t *s, size_t len)
{
	size_t n = o1_utf8_lead_len(s[0]);

	if (!n || n > len)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!o1_utf8_cont_ok(s[0], i, s[i]))
			return 0;
	return n;
}

static void test_short_sequences(void **state)
{
	uint8_t s[3] = {0};

	(void)state;
	assert_int_equal(o1_utf8_decode(s, 0, NULL), 0);
	for (uint32_t v = 0; v < 1u << 24; v++) {
		s[0] = (uint8_t)(v >> 16);
		s[1] = (uint8_t)(v >> 8);
		s[2] = (uint8_t)v;
		/* a one-byte buffer once per lead, two bytes once per pair */
		if (!(v & 0xffff))
			check_seq(s, 1);
		if (!(v & 0xff))
			check_seq(s, 2);
		check_seq(s, 3);
		assert_int_equal(stream_len(s, 3), o1_utf8_decode(s, 3, NULL));
	}
}

/* Every four-byte sequence that starts with F0-F4 (the leads of four-byte
 * characters); for F5-F7, which the bit pattern also reads as four-byte
 * leads, every sequence whose other bytes read as 10xxxxxx (the others
 * fail the pattern before any range is asked). Other leads decide within
 * three bytes. */
static void test_four_byte_sequences(void **state)
{
	uint8_t s[4];

	(void)state;
	for (uint32_t v = 0; v < 5u << 24; v++) {
		s[0] = (uint8_t)(0xf0 + (v >> 24));
		s[1] = (uint8_t)(v >> 16);
		s[2] = (uint8_t)(v >> 8);
		s[3] = (uint8_t)v;
		check_seq(s, 4);
		if (stream_len(s, 4) != o1_utf8_decode(s, 4, NULL))
			fail_msg("stream form disagrees on %08x", v);
	}
	for (uint32_t v = 0; v < 3u << 18; v++) {
		s[0] = (uint8_t)(0xf5 + (v >> 18));
		s[1] = (uint8_t)(0x80 | (v >> 12 & 0x3f));
		s[2] = (uint8_t)(0x80 | (v >> 6 & 0x3f));
		s[3] = (uint8_t)(0x80 | (v & 0x3f));
		check_seq(s, 4);
		assert_int_equal(o1_utf8_decode(s, 4, NULL), 0);
	}
}

/* Every code point: encode, then decode back; the length is the
 * reference's, surrogates encode but only the relaxed decoder reads them,
 * and nothing above U+10FFFF encodes. */
static void test_round_trip(void **state)
{
	uint8_t b[8];
	uint32_t cp;

	(void)state;
	for (uint32_t c = 0; c <= 0x10ffff; c++) {
		size_t n = o1_utf8_encode(c, b);
		bool sur = c >= 0xd800 && c <= 0xdfff;

		if (!n || ref_decode(b, n, 1, &cp) != n || cp != c)
			fail_msg("U+%04X encodes badly (%zu bytes)", c, n);
		if (o1_utf8_decode_surrogates(b, n, &cp) != n || cp != c)
			fail_msg("U+%04X does not decode back", c);
		if (o1_utf8_decode(b, n, &cp) != (sur ? 0 : n))
			fail_msg("U+%04X: strict decode disagrees", c);
		if (o1_utf8_decode(b, n - 1, NULL))
			fail_msg("U+%04X cut short decodes", c);
	}
	for (uint64_t c = 0x110000; c <= 0xffffffffu; c += 0x1000 + c / 16) {
		memset(b, 0xaa, sizeof(b));
		assert_int_equal(o1_utf8_encode((uint32_t)c, b), 0);
		assert_int_equal(b[0], 0xaa);
	}
	assert_int_equal(o1_utf8_encode(0xffffffffu, b), 0);
}

/* The boundaries by name, so a failure reads as the rule it breaks. */
static void test_boundaries(void **state)
{
	static const struct {
		const char *s;
		size_t n;
	} ok[] = {
	    {"\x7f", 1},
	    {"\xc2\x80", 2},
	    {"\xdf\xbf", 2},
	    {"\xe0\xa0\x80", 3},
	    {"\xed\x9f\xbf", 3}, /* U+D7FF */
	    {"\xee\x80\x80", 3},
	    {"\xef\xbf\xbf", 3},
	    {"\xf0\x90\x80\x80", 4},
	    {"\xf4\x8f\xbf\xbf", 4}, /* U+10FFFF */
	};
	/* stray continuations; overlong forms of each length; surrogates;
	 * above U+10FFFF; cut short; a bad follower */
	static const char *const bad[] = {
	    "\x80",
	    "\xbf",
	    "\xc0\x80",
	    "\xc1\xbf",
	    "\xc0\xaf",
	    "\xe0\x80\xaf",
	    "\xe0\x9f\xbf",
	    "\xf0\x80\x80\xaf",
	    "\xf0\x8f\xbf\xbf",
	    "\xed\xa0\x80",
	    "\xed\xbf\xbf",
	    "\xf4\x90\x80\x80",
	    "\xf5\x80\x80\x80",
	    "\xff",
	    "\xe2\x82",
	    "\xc3\x28",
	};
	size_t at;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		assert_int_equal(o1_utf8_decode(ok[i].s, strlen(ok[i].s), NULL),
				 ok[i].n);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(o1_utf8_decode(bad[i], strlen(bad[i]), NULL),
				 0);
	assert_int_equal(o1_utf8_decode_surrogates("\xed\xa0\x80", 3, NULL), 3);
	assert_int_equal(o1_utf8_decode_surrogates("\xc0\x80", 2, NULL), 0);
	assert_true(o1_utf8_valid("", 0, NULL));
	assert_true(o1_utf8_valid("caf\xc3\xa9", 5, NULL));
	assert_false(o1_utf8_valid("ok\xc3(", 4, &at));
	assert_int_equal(at, 2);
	assert_false(o1_utf8_valid("ab\xe2\x82", 4, &at));
	assert_int_equal(at, 2);
}

/* Whole buffers of boundary bytes: valid() and its first bad offset agree
 * with a walk of the reference decoder. */
static void test_valid_buffers(void **state)
{
	static const uint8_t pick[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f,
				       0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0,
				       0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
	uint64_t rng[4];
	uint8_t b[16];
	uint32_t cp;

	(void)state;
	o1_prng_seed(rng, 7);
	for (int t = 0; t < 200000; t++) {
		size_t n = o1_prng_next(rng) % (sizeof(b) + 1), i = 0, at = n;

		for (size_t k = 0; k < n; k++)
			b[k] = pick[o1_prng_next(rng) % sizeof(pick)];
		while (i < n) {
			size_t k = ref_decode(b + i, n - i, 0, &cp);

			if (!k)
				break;
			i += k;
		}
		bool want = i == n;

		at = n + 1;
		assert_int_equal(o1_utf8_valid(b, n, &at), want);
		assert_int_equal(at, want ? n + 1 : i);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_short_sequences),
	    cmocka_unit_test(test_four_byte_sequences),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_boundaries),
	    cmocka_unit_test(test_valid_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The sidecar's byte-level input checks (tools/sidecar/sidecar_input.c):
 * a body that is not UTF-8 (the rules: tests/common/test_utf8.c), NUL
 * bytes and \u0000 escapes (inside strings only, not an escaped
 * backslash's "u0000"), and text made UTF-8 for echoing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "tools/sidecar/sidecar_input.h"

static void test_body(void **state)
{
	char why[160];
	static const char nul[] = "{\"prompt\":\"a\0b\"}";

	(void)state;
	assert_int_equal(o1_sidecar_body_check("{\"p\":\"x\"}", 9, why,
					       sizeof(why)),
			 0);
	assert_int_equal(o1_sidecar_body_check(nul, sizeof(nul) - 1, why,
					       sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "NUL byte at offset 12"));
	assert_int_equal(o1_sidecar_body_check("{\"m\":\"\xff\"}", 9, why,
					       sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "not UTF-8"));
	assert_int_equal(o1_sidecar_body_check("{\"m\":\"\xed\xa0\x80\"}", 11,
					       why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "bad byte at offset 6"));
	/* \u0000 in a string, in a key too */
	assert_int_equal(
	    o1_sidecar_body_check("{\"c\":\"a\\u0000b\"}", 16, why,
				  sizeof(why)),
	    -EINVAL);
	assert_non_null(strstr(why, "\\u0000"));
	assert_int_equal(o1_sidecar_body_check("{\"\\u0000\":1}", 12, why,
					       sizeof(why)),
			 -EINVAL);
	/* an escaped backslash then "u0000" is text; \u0001 is not NUL */
	assert_int_equal(
	    o1_sidecar_body_check("{\"c\":\"a\\\\u0000\"}", 16, why,
				  sizeof(why)),
	    0);
	assert_int_equal(o1_sidecar_body_check("{\"c\":\"\\u0001\"}", 14, why,
					       sizeof(why)),
			 0);
	/* outside strings a backslash is not an escape (invalid JSON, for
	 * the parser to refuse) */
	assert_int_equal(o1_sidecar_body_check("{\\u0000}", 8, why,
					       sizeof(why)),
			 0);
}

static void test_clean(void **state)
{
	char out[16];

	(void)state;
	o1_sidecar_utf8_clean("a\xff" "b", out, sizeof(out));
	assert_string_equal(out, "a\xef\xbf\xbd" "b");
	o1_sidecar_utf8_clean("caf\xc3\xa9", out, sizeof(out));
	assert_string_equal(out, "caf\xc3\xa9");
	/* a character that does not fit is left out, never cut */
	o1_sidecar_utf8_clean("abcd\xe2\x82\xac", out, 6);
	assert_string_equal(out, "abcd");
	o1_sidecar_utf8_clean("\xc3", out, sizeof(out)); /* cut short */
	assert_string_equal(out, "\xef\xbf\xbd");
	o1_sidecar_utf8_clean("x", out, 1);
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_body),
	    cmocka_unit_test(test_clean),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

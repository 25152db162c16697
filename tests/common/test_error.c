/* o1_strerror: errno values, the reserved range, and out-of-range codes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"

static void test_errno_passes_through(void **state)
{
	(void)state;
	assert_string_equal(o1_strerror(-ENOENT), strerror(ENOENT));
	assert_string_equal(o1_strerror(0), "success");
}

static void test_reserved_range(void **state)
{
	(void)state;
	for (int e = O1_E_BASE + 1; e < O1_E_LAST; e++) {
		const char *s = o1_strerror(-e);
		assert_non_null(s);
		assert_true(strlen(s) > 0);
		assert_string_not_equal(s, "unknown error");
	}
	assert_string_equal(o1_strerror(-O1_E_FORMAT), "malformed data");
	assert_string_equal(o1_strerror(-O1_E_LAST), "unknown error");
	assert_string_equal(o1_strerror(-O1_E_BASE), "unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errno_passes_through),
		cmocka_unit_test(test_reserved_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

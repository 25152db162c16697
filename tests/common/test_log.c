/* Logging: level parsing, filtering, and the one-line format. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"

static void test_parse_level(void **state)
{
	enum o1_log_level lvl;

	(void)state;
	assert_int_equal(o1_log_parse_level("debug", &lvl), 0);
	assert_int_equal(lvl, O1_LOG_DEBUG);
	assert_int_equal(o1_log_parse_level("error", &lvl), 0);
	assert_int_equal(lvl, O1_LOG_ERROR);
	assert_int_equal(o1_log_parse_level("loud", &lvl), -EINVAL);
}

/* Redirects stderr to a file, logs, and reads the lines back. */
static void test_format_and_filter(void **state)
{
	char path[] = "/tmp/o1-test-log-XXXXXX";
	char buf[4096] = {0};
	int fd = mkstemp(path), saved = dup(2);
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	dup2(fd, 2);
	o1_log_set_level(O1_LOG_WARN);
	o1_info("hidden %d", 1);
	o1_warn("shown %d", 2);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fdopen(fd, "r");
	rewind(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	unlink(path);
	buf[n] = 0;
	assert_null(strstr(buf, "hidden"));
	assert_non_null(strstr(buf, "warn  test_log.c:"));
	assert_non_null(strstr(buf, " shown 2\n"));
	assert_int_equal(buf[4], '-');
	assert_non_null(strchr(buf, 'Z'));
	o1_log_set_level(O1_LOG_INFO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_level),
		cmocka_unit_test(test_format_and_filter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Logging: level parsing, filtering, the one-line format, and the
 * per-source rate limit (every line printed or counted, sources apart). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* Starts capturing stderr into a temporary file; returns the saved fd. */
static int capture(char *path, int *fd)
{
	int saved = dup(2);

	*fd = mkstemp(path);
	assert_true(*fd >= 0);
	dup2(*fd, 2);
	return saved;
}

/* What was written so far (malloc'd, NUL-terminated). */
static char *captured(int fd)
{
	off_t n;
	char *buf;

	fflush(stderr);
	n = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
	buf[n] = 0;
	return buf;
}

static int count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)); p++)
		n++;
	return n;
}

/* Sum of N in every "N more like this suppressed" of text. */
static int suppressed_sum(const char *text)
{
	int sum = 0;

	for (const char *p = text; (p = strstr(p, " more like this")); p++) {
		const char *q = p;

		while (q > text && q[-1] >= '0' && q[-1] <= '9')
			q--;
		sum += atoi(q);
	}
	return sum;
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* 2000 lines from one source: at most a burst per window are printed, the
 * others are summed up once the window is over ("N more like this
 * suppressed", with the last one), and none is lost; another source's
 * lines meanwhile all print. */
static void test_limited(void **state)
{
	char path[] = "/tmp/o1-test-log-XXXXXX";
	uint64_t t0 = ms_now(), windows;
	int fd, saved = capture(path, &fd), printed, other;
	char *text = NULL;

	(void)state;
	for (int i = 0; i < 2000; i++) {
		o1_log_limited(O1_LOG_WARN, 7, "flood line %d", i);
		if (i % 500 == 0)
			o1_log_limited(O1_LOG_WARN, 8, "quiet source %d", i);
	}
	windows = (ms_now() - t0) / 1000 + 1;
	/* the flood stopped: its count comes out once the window is over */
	for (int i = 0; i < 1000; i++) {
		o1_log_flush_suppressed(0);
		free(text);
		text = captured(fd);
		if (count(text, "flood line") - count(text, "the last: flood") +
			suppressed_sum(text) ==
		    2000)
			break;
		usleep(10000);
	}
	dup2(saved, 2);
	close(saved);
	close(fd);
	unlink(path);
	printed = count(text, "flood line") - count(text, "the last: flood");
	other = count(text, "quiet source");
	assert_true(printed >= O1_LOG_BURST);
	assert_true((uint64_t)printed <= O1_LOG_BURST * (windows + 1));
	assert_int_equal(printed + suppressed_sum(text), 2000);
	assert_non_null(strstr(text, "the last: flood line 1999\n"));
	assert_int_equal(other, 4);
	free(text);
}

/* A level filtered out is neither printed nor counted. */
static void test_limited_filtered(void **state)
{
	char path[] = "/tmp/o1-test-log-XXXXXX";
	int fd, saved = capture(path, &fd);
	char *text;

	(void)state;
	for (int i = 0; i < 100; i++)
		o1_log_limited(O1_LOG_DEBUG, 9, "debug line %d", i);
	o1_log_set_level(O1_LOG_OFF);
	o1_err("an error nobody sees");
	o1_log_set_level(O1_LOG_INFO);
	o1_log_flush_suppressed(0);
	text = captured(fd);
	dup2(saved, 2);
	close(saved);
	close(fd);
	unlink(path);
	assert_string_equal(text, "");
	free(text);
}

/* flush(1) sums up a window that is not over yet (at exit). */
static void test_flush_all(void **state)
{
	char path[] = "/tmp/o1-test-log-XXXXXX";
	int fd, saved = capture(path, &fd);
	char *text;

	(void)state;
	for (int i = 0; i < O1_LOG_BURST + 5; i++)
		o1_log_limited(O1_LOG_WARN, 11, "exit line %d", i);
	o1_log_flush_suppressed(1);
	text = captured(fd);
	dup2(saved, 2);
	close(saved);
	close(fd);
	unlink(path);
	assert_int_equal(count(text, "exit line") - 1, O1_LOG_BURST);
	assert_non_null(strstr(text, " 5 more like this suppressed"));
	assert_non_null(strstr(text, "the last: exit line 14\n"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_level),
		cmocka_unit_test(test_format_and_filter),
		cmocka_unit_test(test_limited),
		cmocka_unit_test(test_limited_filtered),
		cmocka_unit_test(test_flush_all),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* o1_file_read: contents and NUL terminator, the size limit (at and over),
 * empty files, and the failures (missing file, directory, device) with their
 * codes and their one log line. o1_file_map: contents, an empty file, a missing
 * one. o1_file_write_text: text and newline, truncation, a missing folder
 * and a full device. Works in a fresh mkdtemp directory. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/file.h"

struct fixture {
	char dir[64];
	char path[128];
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/o1-test-file-XXXXXX");
	if (!mkdtemp(fx->dir)) {
		free(fx);
		return -1;
	}
	snprintf(fx->path, sizeof(fx->path), "%s/f", fx->dir);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	unlink(fx->path);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* Sends stderr to a fresh file; returns the saved stderr for
 * end_capture. */
static int begin_capture(int *fd)
{
	char tmp[] = "/tmp/o1-test-file-log-XXXXXX";
	int saved = dup(2);

	*fd = mkstemp(tmp);
	assert_true(*fd >= 0 && saved >= 0);
	unlink(tmp);
	fflush(stderr);
	dup2(*fd, 2);
	return saved;
}

/* Restores stderr and leaves what was logged in LOG. */
static void end_capture(int fd, int saved, char *log, size_t log_size)
{
	ssize_t n;

	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, log, log_size - 1, 0);
	log[n > 0 ? n : 0] = 0;
	close(fd);
}

static int read_logged(const char *path, uint64_t max, char **out, size_t *len,
		       char *log, size_t log_size)
{
	int fd, saved = begin_capture(&fd);
	int ret = o1_file_read(path, max, out, len);

	end_capture(fd, saved, log, log_size);
	return ret;
}

static int map_logged(const char *path, void **map, size_t *size, char *log,
		      size_t log_size)
{
	int fd, saved = begin_capture(&fd);
	int ret = o1_file_map(path, map, size);

	end_capture(fd, saved, log, log_size);
	return ret;
}

static int write_logged(const char *path, const char *text, char *log,
			size_t log_size)
{
	int fd, saved = begin_capture(&fd);
	int ret = o1_file_write_text(path, text);

	end_capture(fd, saved, log, log_size);
	return ret;
}

static void test_reads_whole_file(void **state)
{
	struct fixture *fx = *state;
	const char data[] = "{\"a\": 1}\n\0tail";
	char *buf = NULL;
	size_t len = 0;

	write_bytes(fx->path, data, sizeof(data) - 1);
	assert_int_equal(o1_file_read(fx->path, 1024, &buf, &len), 0);
	assert_int_equal(len, sizeof(data) - 1);
	assert_memory_equal(buf, data, len);
	assert_int_equal(buf[len], 0);
	free(buf);
	/* Exactly at the limit is allowed. */
	assert_int_equal(o1_file_read(fx->path, len, &buf, &len), 0);
	assert_int_equal(len, sizeof(data) - 1);
	free(buf);
}

static void test_empty_file(void **state)
{
	struct fixture *fx = *state;
	char *buf = NULL;
	size_t len = 99;

	write_bytes(fx->path, "", 0);
	assert_int_equal(o1_file_read(fx->path, 0, &buf, &len), 0);
	assert_non_null(buf);
	assert_int_equal(len, 0);
	assert_int_equal(buf[0], 0);
	free(buf);
}

static void test_over_limit(void **state)
{
	struct fixture *fx = *state;
	char *buf = NULL, log[1024];
	size_t len = 7;

	write_bytes(fx->path, "0123456789", 10);
	assert_int_equal(read_logged(fx->path, 9, &buf, &len, log, sizeof(log)),
			 -O1_E_BOUNDS);
	assert_null(buf);
	assert_int_equal(len, 7);
	assert_non_null(strstr(log, fx->path));
	assert_non_null(strstr(log, "10 bytes, over the 9-byte limit"));
	assert_non_null(strchr(log, '\n'));
	assert_ptr_equal(strchr(log, '\n'), log + strlen(log) - 1);
}

static void test_missing_file(void **state)
{
	struct fixture *fx = *state;
	char *buf = NULL, log[1024];
	size_t len = 0;

	assert_int_equal(
	    read_logged(fx->path, 1024, &buf, &len, log, sizeof(log)), -ENOENT);
	assert_null(buf);
	/* Absence is the caller's to report: nothing at the default level. */
	assert_string_equal(log, "");
}

static void test_directory(void **state)
{
	struct fixture *fx = *state;
	char *buf = NULL, log[1024];
	size_t len = 0;

	assert_int_equal(mkdir(fx->path, 0700), 0);
	assert_int_equal(
	    read_logged(fx->path, UINT64_MAX, &buf, &len, log, sizeof(log)),
	    -EISDIR);
	rmdir(fx->path);
	assert_null(buf);
	assert_non_null(strstr(log, fx->path));
	assert_non_null(strstr(log, "directory"));
	assert_int_equal(
	    read_logged("/dev/null", 1024, &buf, &len, log, sizeof(log)),
	    -EINVAL);
	assert_null(buf);
	assert_non_null(strstr(log, "/dev/null: not a regular file"));
}

static void test_map(void **state)
{
	struct fixture *fx = *state;
	char data[10000], log[1024];
	void *map = NULL;
	size_t size = 0;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7);
	write_bytes(fx->path, data, sizeof(data));
	assert_int_equal(o1_file_map(fx->path, &map, &size), 0);
	assert_int_equal(size, sizeof(data));
	assert_memory_equal(map, data, size);
	o1_file_unmap(map, size);
	write_bytes(fx->path, "", 0);
	map = fx;
	assert_int_equal(o1_file_map(fx->path, &map, &size), 0);
	assert_null(map);
	assert_int_equal(size, 0);
	o1_file_unmap(map, size);
	unlink(fx->path);
	map = NULL;
	assert_int_equal(map_logged(fx->path, &map, &size, log, sizeof(log)),
			 -ENOENT);
	assert_null(map);
	assert_non_null(strstr(log, fx->path));
}

static void test_write_text(void **state)
{
	struct fixture *fx = *state;
	char *buf = NULL, log[1024], missing[160];
	size_t len = 0;

	assert_int_equal(o1_file_write_text(fx->path, "{\"a\": 12345}"), 0);
	assert_int_equal(o1_file_write_text(fx->path, "{}"), 0);
	assert_int_equal(o1_file_read(fx->path, 64, &buf, &len), 0);
	assert_int_equal(len, 3);
	assert_string_equal(buf, "{}\n");
	free(buf);
	snprintf(missing, sizeof(missing), "%s/no/such", fx->dir);
	assert_int_equal(write_logged(missing, "x", log, sizeof(log)), -ENOENT);
	assert_non_null(strstr(log, missing));
	if (access("/dev/full", W_OK) != 0)
		return;
	/* the data is buffered: only fclose sees the full device */
	assert_int_equal(write_logged("/dev/full", "x", log, sizeof(log)),
			 -ENOSPC);
	assert_non_null(strstr(log, "/dev/full"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_reads_whole_file, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_empty_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_over_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_directory, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_map, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_write_text, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

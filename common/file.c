/* o1_file_read: open, fstat, check the type and the limit, then read
 * exactly st_size bytes (looping over short reads) into a buffer one byte
 * longer, NUL-terminated. The buffer is handed out only when complete.
 * o1_file_map: an empty file is not mapped (mmap refuses length 0).
 * o1_file_write_text: stdio, with fclose's error kept (buffered data is
 * written there). */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "log.h"

static int check_size(const char *path, const struct stat *st,
		      uint64_t max_bytes)
{
	if (S_ISDIR(st->st_mode)) {
		o1_err("%s: is a directory, not a file", path);
		return -EISDIR;
	}
	if (!S_ISREG(st->st_mode)) {
		o1_err("%s: not a regular file (mode %o)", path,
		       (unsigned)st->st_mode);
		return -EINVAL;
	}
	if ((uint64_t)st->st_size > max_bytes ||
	    (uint64_t)st->st_size >= SIZE_MAX) {
		o1_err("%s: %lld bytes, over the %llu-byte limit", path,
		       (long long)st->st_size, (unsigned long long)max_bytes);
		return -O1_E_BOUNDS;
	}
	return 0;
}

static int read_all(int fd, const char *path, char *buf, size_t size)
{
	size_t done = 0;

	while (done < size) {
		ssize_t n = read(fd, buf + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;

			o1_err("%s: read: %s", path, strerror(-err));
			return err;
		}
		if (n == 0) {
			o1_err("%s: ended after %zu of %zu bytes", path, done,
			       size);
			return -EIO;
		}
		done += (size_t)n;
	}
	return 0;
}

int o1_file_read(const char *path, uint64_t max_bytes, char **out, size_t *len)
{
	struct stat st;
	char *buf;
	size_t size;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (err == -ENOENT)
			o1_debug("%s: %s", path, strerror(-err));
		else
			o1_err("%s: %s", path, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) != 0) {
		err = -errno;
		o1_err("%s: fstat: %s", path, strerror(-err));
		goto close_fd;
	}
	err = check_size(path, &st, max_bytes);
	if (err)
		goto close_fd;
	size = (size_t)st.st_size;
	buf = malloc(size + 1);
	if (!buf) {
		o1_err("%s: no memory for %zu bytes", path, size + 1);
		err = -ENOMEM;
		goto close_fd;
	}
	err = read_all(fd, path, buf, size);
	if (err) {
		free(buf);
		goto close_fd;
	}
	buf[size] = 0;
	*out = buf;
	*len = size;
close_fd:
	close(fd);
	return err;
}

int o1_file_map(const char *path, void **map, size_t *size)
{
	struct stat st;
	void *m = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int err = 0;

	if (fd < 0) {
		err = -errno;
		o1_err("%s: open: %s", path, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) != 0) {
		err = -errno;
		o1_err("%s: fstat: %s", path, strerror(-err));
		goto close_fd;
	}
	if (st.st_size > 0) {
		m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd,
			 0);
		if (m == MAP_FAILED) {
			err = -errno;
			o1_err("%s: mmap of %lld bytes: %s", path,
			       (long long)st.st_size, strerror(-err));
			goto close_fd;
		}
	}
	*map = m;
	*size = (size_t)st.st_size;
close_fd:
	close(fd);
	return err;
}

void o1_file_unmap(void *map, size_t size)
{
	if (map)
		munmap(map, size);
}

int o1_file_write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int err = 0;

	if (!f) {
		err = -errno;
		o1_err("%s: %s", path, strerror(-err));
		return err;
	}
	if (fputs(text, f) < 0 || fputc('\n', f) < 0)
		err = -EIO;
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (err)
		o1_err("%s: %s", path, strerror(-err));
	return err;
}

/* Whole files: read-only mappings (model weights), reads with a size
 * limit for small text files (JSON configs, indexes) parsed from memory,
 * and text writes. */
#ifndef O1_FILE_H
#define O1_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Reads the regular file PATH, at most MAX_BYTES long, into a new buffer
 * with a NUL after its LEN bytes. *OUT is transferred to the caller (free()).
 * Returns 0, -errno (-ENOENT when PATH is absent, -EISDIR for a directory,
 * -EINVAL for another non-regular file: a FIFO, a device), -O1_E_BOUNDS when
 * the file is over MAX_BYTES, or -EIO when it shrinks while read. Every failure
 * but -ENOENT is logged once with the path and the limit or errno; a missing
 * file is logged at debug level only, since some callers treat it as optional.
 * On failure *OUT and *LEN are unset. */
int o1_file_read(const char *path, uint64_t max_bytes, char **out, size_t *len);

/* Maps PATH read-only and private. *MAP gets the mapping (NULL for an
 * empty file) and *SIZE its length; release it with o1_file_unmap.
 * Returns 0 or -errno, logged once with the path and the step that
 * failed. On failure *MAP and *SIZE are unset. */
int o1_file_map(const char *path, void **map, size_t *size);
/* Releases a mapping from o1_file_map; MAP may be NULL. */
void o1_file_unmap(void *map, size_t size);

/* Writes TEXT and a newline to PATH, created (0666 & ~umask) or truncated.
 * Returns 0 or -errno (-EIO when a write fails); every failure is logged
 * once with the path. */
int o1_file_write_text(const char *path, const char *text);

#endif

/* GGUF v2/v3 reader and writer.
 *
 * The reader maps the file read-only and parses the header, every metadata
 * key/value (all value types, nested arrays) and every tensor info up
 * front, checking each count, length, offset and size against the file
 * before use, so that accessors never touch memory outside the mapping.
 * Strings point into the mapping (borrowed until o1_gguf_close) and are
 * not NUL-terminated: they carry a length.
 *
 * Errors from open: -O1_E_FORMAT (bad magic, truncation, a count larger
 * than the file could hold, bad alignment, a misaligned tensor offset,
 * bad n_dims, a duplicate key or tensor name, nesting deeper than
 * O1_GGUF_MAX_DEPTH), -O1_E_VERSION (not v2/v3, or big-endian),
 * -O1_E_UNSUPPORTED (a tensor type o1_dtype_supported() rejects),
 * -O1_E_SHAPE (a zero dimension, ne[0] not a whole number of blocks),
 * -EOVERFLOW (element count or byte size overflows), -O1_E_BOUNDS (tensor
 * data outside the file). Each logs one line with the offending values.
 */
#ifndef O1_GGUF_H
#define O1_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

enum o1_gguf_type {
	O1_GGUF_UINT8 = 0,
	O1_GGUF_INT8 = 1,
	O1_GGUF_UINT16 = 2,
	O1_GGUF_INT16 = 3,
	O1_GGUF_UINT32 = 4,
	O1_GGUF_INT32 = 5,
	O1_GGUF_FLOAT32 = 6,
	O1_GGUF_BOOL = 7,
	O1_GGUF_STRING = 8,
	O1_GGUF_ARRAY = 9,
	O1_GGUF_UINT64 = 10,
	O1_GGUF_INT64 = 11,
	O1_GGUF_FLOAT64 = 12,
	O1_GGUF_TYPE_COUNT,
};

#define O1_GGUF_MAX_DEPTH	  4  /* nesting levels of arrays in arrays */
#define O1_GGUF_MAX_NAME	  63 /* tensor name bytes, as ggml's limit */
#define O1_GGUF_DEFAULT_ALIGNMENT 32

struct o1_gguf_str {
	const char *ptr; /* borrowed, not NUL-terminated */
	uint64_t len;
};

struct o1_gguf;

struct o1_gguf_tensor_info {
	struct o1_gguf_str name;
	uint32_t n_dims;
	uint64_t ne[4]; /* ne[0] is the fastest-varying dimension */
	enum o1_dtype type;
	uint64_t offset; /* from the start of the data section */
	uint64_t n_bytes;
	const void *data; /* borrowed, inside the mapping */
};

/* Opens and validates PATH. *out is owned by the caller. */
int o1_gguf_open(const char *path, struct o1_gguf **out);
/* Parses an in-memory image (borrowed until close); used by the fuzzer. */
int o1_gguf_open_memory(const void *data, size_t size, struct o1_gguf **out);
void o1_gguf_close(struct o1_gguf *g);

uint32_t o1_gguf_version(const struct o1_gguf *g);
uint64_t o1_gguf_alignment(const struct o1_gguf *g);

/* Metadata: index of KEY, or -O1_E_MISSING. */
int64_t o1_gguf_find_key(const struct o1_gguf *g, const char *key);
uint64_t o1_gguf_n_kv(const struct o1_gguf *g);
struct o1_gguf_str o1_gguf_key(const struct o1_gguf *g, uint64_t i);
enum o1_gguf_type o1_gguf_kv_type(const struct o1_gguf *g, uint64_t i);

/* Typed getters by key: 0, -O1_E_MISSING, or -O1_E_FORMAT on a type
 * mismatch. Integer getters accept any integer type whose value fits. */
int o1_gguf_get_u32(const struct o1_gguf *g, const char *key, uint32_t *out);
int o1_gguf_get_i64(const struct o1_gguf *g, const char *key, int64_t *out);
int o1_gguf_get_f32(const struct o1_gguf *g, const char *key, float *out);
int o1_gguf_get_bool(const struct o1_gguf *g, const char *key, bool *out);
int o1_gguf_get_str(const struct o1_gguf *g, const char *key,
		    struct o1_gguf_str *out);
/* FLOAT32 or FLOAT64 as a double. */
int o1_gguf_get_f64(const struct o1_gguf *g, const char *key, double *out);

/* Arrays: element type and count of the array under KEY. */
int o1_gguf_get_arr(const struct o1_gguf *g, const char *key,
		    enum o1_gguf_type *elem_type, uint64_t *count);
/* Element I of a string array (O(1): offsets are indexed at open). */
int o1_gguf_arr_str(const struct o1_gguf *g, const char *key, uint64_t i,
		    struct o1_gguf_str *out);
/* Pointer to the packed elements of a numeric array (borrowed; may be
 * unaligned: read with memcpy). */
int o1_gguf_arr_data(const struct o1_gguf *g, const char *key,
		     const void **data);

uint64_t o1_gguf_n_tensors(const struct o1_gguf *g);
const struct o1_gguf_tensor_info *o1_gguf_tensor(const struct o1_gguf *g,
						 uint64_t i);
const struct o1_gguf_tensor_info *o1_gguf_find_tensor(const struct o1_gguf *g,
						      const char *name);

/* Writer: collect metadata and tensors, then write in one pass. */
struct o1_gguf_writer;
int o1_gguf_writer_create(struct o1_gguf_writer **out);
void o1_gguf_writer_destroy(struct o1_gguf_writer *w);
int o1_gguf_writer_set_u32(struct o1_gguf_writer *w, const char *key,
			   uint32_t v);
int o1_gguf_writer_set_i32(struct o1_gguf_writer *w, const char *key,
			   int32_t v);
int o1_gguf_writer_set_f32(struct o1_gguf_writer *w, const char *key, float v);
int o1_gguf_writer_set_bool(struct o1_gguf_writer *w, const char *key, bool v);
int o1_gguf_writer_set_str(struct o1_gguf_writer *w, const char *key,
			   const char *v);
/* Any scalar TYPE (not STRING/ARRAY); V points to the value in its C type
 * (uint8_t ... double, bool for BOOL). Setting a key again replaces it. */
int o1_gguf_writer_set_val(struct o1_gguf_writer *w, const char *key,
			   enum o1_gguf_type type, const void *v);
/* Arrays: copies COUNT elements (strings: COUNT NUL-terminated pointers). */
int o1_gguf_writer_set_arr(struct o1_gguf_writer *w, const char *key,
			   enum o1_gguf_type elem_type, const void *elems,
			   uint64_t count);
/* Adds a tensor; DATA is copied at write time (borrowed until then). */
int o1_gguf_writer_add_tensor(struct o1_gguf_writer *w, const char *name,
			      enum o1_dtype type, uint32_t n_dims,
			      const uint64_t ne[4], const void *data,
			      uint64_t n_bytes);
/* Same, with the bytes produced at write time: FILL(CTX, DST) writes
 * N_BYTES into DST and returns 0 or an error (CTX borrowed until write).
 * The writer holds one such buffer at a time, so a file far larger than
 * memory can be written tensor by tensor. */
int o1_gguf_writer_add_tensor_fill(struct o1_gguf_writer *w, const char *name,
				   enum o1_dtype type, uint32_t n_dims,
				   const uint64_t ne[4], uint64_t n_bytes,
				   int (*fill)(void *ctx, void *dst),
				   void *ctx);
/* Writes a GGUF v3 file (alignment from general.alignment if set as a
 * UINT32, else 32); removes PATH again on failure. */
int o1_gguf_writer_write(struct o1_gguf_writer *w, const char *path);

#endif

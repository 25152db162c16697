/* safetensors reader and writer.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * optionally "__metadata__": {string: string}}) and the data section.
 * The reader maps the file read-only (or borrows a caller's buffer) and
 * checks everything up front: header length against the file, every
 * dtype (F32, F16, BF16), shape, offset range and size, names unique,
 * byte ranges disjoint. Accessors then never reach outside the mapping.
 *
 * A folder holds either model.safetensors or shards listed by
 * model.safetensors.index.json ("weight_map": tensor -> shard file); the
 * set API opens each shard once and indexes every tensor by name.
 */
#ifndef O1_SAFETENSORS_H
#define O1_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#define O1_ST_MAX_DIMS	       8
#define O1_ST_MAX_HEADER_BYTES (100ull << 20)

struct o1_st_tensor {
	const char *name;    /* owned by the file, NUL-terminated */
	enum o1_dtype dtype; /* F32, F16 or BF16 */
	uint32_t n_dims;
	uint64_t shape[O1_ST_MAX_DIMS];
	const void *data; /* borrowed: inside the mapping */
	uint64_t n_bytes;
};

struct o1_safetensors;

/* Maps and validates PATH; *out is owned by the caller. */
int o1_safetensors_open(const char *path, struct o1_safetensors **out);
/* Parses an in-memory image, borrowed until close (used by the fuzzer). */
int o1_safetensors_open_memory(const void *data, size_t size,
			       struct o1_safetensors **out);
void o1_safetensors_close(struct o1_safetensors *st);

uint64_t o1_safetensors_n_tensors(const struct o1_safetensors *st);
/* Tensors in header order; borrowed until close. */
const struct o1_st_tensor *
o1_safetensors_tensor(const struct o1_safetensors *st, uint64_t i);
const struct o1_st_tensor *o1_safetensors_find(const struct o1_safetensors *st,
					       const char *name);

/* A model folder: DIR/model.safetensors, or the shards named by
 * DIR/model.safetensors.index.json (plain file names in DIR only). */
struct o1_safetensors_set;
int o1_safetensors_set_open(const char *dir, struct o1_safetensors_set **out);
void o1_safetensors_set_close(struct o1_safetensors_set *set);
uint64_t o1_safetensors_set_n_tensors(const struct o1_safetensors_set *set);
const struct o1_st_tensor *
o1_safetensors_set_tensor(const struct o1_safetensors_set *set, uint64_t i);
const struct o1_st_tensor *
o1_safetensors_set_find(const struct o1_safetensors_set *set, const char *name);

/* Writer: add tensors (name and shape copied, DATA borrowed until write),
 * then write one file. Tensors are laid out by element size (largest
 * first, so every tensor stays aligned) then name; the header is padded
 * with spaces to a multiple of 8 and carries {"format": "pt"} metadata. */
struct o1_safetensors_writer;
int o1_safetensors_writer_create(struct o1_safetensors_writer **out);
void o1_safetensors_writer_destroy(struct o1_safetensors_writer *w);
int o1_safetensors_writer_add(struct o1_safetensors_writer *w, const char *name,
			      enum o1_dtype dtype, uint32_t n_dims,
			      const uint64_t *shape, const void *data,
			      uint64_t n_bytes);
/* Same, with the bytes produced at write time: FILL(CTX, DST) writes
 * N_BYTES into DST and returns 0 or an error (CTX borrowed until write). */
int o1_safetensors_writer_add_fill(struct o1_safetensors_writer *w,
				   const char *name, enum o1_dtype dtype,
				   uint32_t n_dims, const uint64_t *shape,
				   uint64_t n_bytes,
				   int (*fill)(void *ctx, void *dst),
				   void *ctx);
int o1_safetensors_writer_write(struct o1_safetensors_writer *w,
				const char *path);

#endif

/* GGUF v2/v3 reader (over a read-only mapping or borrowed memory) and
 * writer.
 *
 * Reader invariants, established by o1_gguf_open*() before it returns 0:
 * - every key, value, array element and tensor info lies inside [0, size);
 *   each kv records the offset of its value, so getters re-read nothing
 *   but the bytes already checked;
 * - every count was bounded by the bytes left in the image before any
 *   allocation sized by it (each item takes at least one byte per count),
 *   so a hostile header cannot make us allocate more than a few times the
 *   image size;
 * - keys and tensor names are unique; sorted index arrays serve lookups;
 * - every tensor's data [data_start + offset, + n_bytes) is inside the
 *   image and offset is a multiple of the alignment.
 * The file layout: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv x (string key, u32 type, value), n_tensors x (string name, u32
 * n_dims, u64 ne[n_dims], u32 type, u64 offset), padding to the alignment,
 * tensor data. Strings are u64 length + bytes; arrays are u32 element
 * type + u64 count + elements. All little-endian.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the GGUF reader reads little-endian values in place");

#define GGUF_MAGIC	 0x46554747u /* "GGUF" read as a little-endian u32 */
#define MIN_KV_BYTES	 13	     /* key length, type, one value byte */
#define MIN_TENSOR_BYTES 24	     /* name length, n_dims, type, offset */

struct gguf_kv {
	struct o1_gguf_str key;
	enum o1_gguf_type type;
	uint64_t value_off; /* scalar value, string length or array header */
	enum o1_gguf_type elem_type; /* arrays */
	uint64_t count;		     /* arrays */
	uint64_t elems_off;	     /* arrays: first element */
	uint64_t *str_offs; /* string arrays: [count] offsets of lengths */
};

struct o1_gguf {
	const uint8_t *base;
	uint64_t size;
	void *map; /* owned mapping, NULL for open_memory */
	const char *label;
	char path[256];
	uint32_t version;
	uint64_t alignment;
	uint64_t n_kv;
	struct gguf_kv *kv;
	uint64_t *kv_sorted;
	uint64_t n_tensors;
	struct o1_gguf_tensor_info *ti;
	uint64_t *ti_sorted;
	uint64_t data_start;
};

struct cursor {
	const struct o1_gguf *g;
	uint64_t off;
};

static const uint8_t scalar_sizes[O1_GGUF_TYPE_COUNT] = {
    [O1_GGUF_UINT8] = 1,   [O1_GGUF_INT8] = 1,	  [O1_GGUF_UINT16] = 2,
    [O1_GGUF_INT16] = 2,   [O1_GGUF_UINT32] = 4,  [O1_GGUF_INT32] = 4,
    [O1_GGUF_FLOAT32] = 4, [O1_GGUF_BOOL] = 1,	  [O1_GGUF_UINT64] = 8,
    [O1_GGUF_INT64] = 8,   [O1_GGUF_FLOAT64] = 8,
};

static uint64_t remaining(const struct cursor *c)
{
	return c->g->size - c->off;
}

static int take(struct cursor *c, void *dst, uint64_t n, const char *what)
{
	if (n > remaining(c)) {
		o1_err("gguf %s: truncated reading %s at byte %llu: need %llu "
		       "bytes, %llu left",
		       c->g->label, what, (unsigned long long)c->off,
		       (unsigned long long)n, (unsigned long long)remaining(c));
		return -O1_E_FORMAT;
	}
	if (dst)
		memcpy(dst, c->g->base + c->off, n);
	c->off += n;
	return 0;
}

static int take_u32(struct cursor *c, uint32_t *v, const char *what)
{
	return take(c, v, sizeof(*v), what);
}

static int take_u64(struct cursor *c, uint64_t *v, const char *what)
{
	return take(c, v, sizeof(*v), what);
}

static int take_str(struct cursor *c, struct o1_gguf_str *s, const char *what)
{
	uint64_t start = c->off;
	int err = take_u64(c, &s->len, what);

	if (err)
		return err;
	if (s->len > remaining(c)) {
		o1_err("gguf %s: %s at byte %llu has length %llu, only %llu "
		       "bytes left",
		       c->g->label, what, (unsigned long long)start,
		       (unsigned long long)s->len,
		       (unsigned long long)remaining(c));
		return -O1_E_FORMAT;
	}
	s->ptr = (const char *)c->g->base + c->off;
	c->off += s->len;
	return 0;
}

static int check_type(const struct cursor *c, uint32_t type, const char *what)
{
	if (type >= O1_GGUF_TYPE_COUNT) {
		o1_err("gguf %s: %s at byte %llu has unknown value type %u",
		       c->g->label, what, (unsigned long long)c->off - 4, type);
		return -O1_E_FORMAT;
	}
	return 0;
}

static int skip_value(struct cursor *c, enum o1_gguf_type type, int depth);

/* Reads an array header; bounds COUNT by the bytes left (each element
 * takes at least MIN bytes). */
static int take_arr_header(struct cursor *c, uint32_t *elem, uint64_t *count,
			   int depth)
{
	uint64_t min;
	int err = take_u32(c, elem, "array type");

	if (!err)
		err = check_type(c, *elem, "array element");
	if (!err)
		err = take_u64(c, count, "array count");
	if (err)
		return err;
	if (*elem == O1_GGUF_ARRAY && depth + 1 >= O1_GGUF_MAX_DEPTH) {
		o1_err("gguf %s: arrays nested deeper than %d at byte %llu",
		       c->g->label, O1_GGUF_MAX_DEPTH,
		       (unsigned long long)c->off);
		return -O1_E_FORMAT;
	}
	min = *elem == O1_GGUF_STRING  ? 8
	      : *elem == O1_GGUF_ARRAY ? 12
				       : scalar_sizes[*elem];
	if (*count > remaining(c) / min) {
		o1_err("gguf %s: array of %llu elements of type %u at byte "
		       "%llu, only %llu bytes left",
		       c->g->label, (unsigned long long)*count, *elem,
		       (unsigned long long)c->off,
		       (unsigned long long)remaining(c));
		return -O1_E_FORMAT;
	}
	return 0;
}

static int skip_elems(struct cursor *c, enum o1_gguf_type elem, uint64_t count,
		      int depth)
{
	int err = 0;

	if (elem != O1_GGUF_STRING && elem != O1_GGUF_ARRAY)
		return take(c, NULL, count * scalar_sizes[elem], "array");
	for (uint64_t i = 0; i < count && !err; i++)
		err = skip_value(c, elem, depth + 1);
	return err;
}

static int skip_value(struct cursor *c, enum o1_gguf_type type, int depth)
{
	struct o1_gguf_str s;
	uint32_t elem;
	uint64_t count;
	int err;

	if (type == O1_GGUF_STRING)
		return take_str(c, &s, "string value");
	if (type != O1_GGUF_ARRAY)
		return take(c, NULL, scalar_sizes[type], "value");
	err = take_arr_header(c, &elem, &count, depth);
	return err ? err : skip_elems(c, elem, count, depth);
}

/* Top-level array: records element type, count and, for strings, the
 * offset of every element. */
static int read_array(struct cursor *c, struct gguf_kv *kv)
{
	uint32_t elem;
	struct o1_gguf_str s;
	int err = take_arr_header(c, &elem, &kv->count, 0);

	if (err)
		return err;
	kv->elem_type = elem;
	kv->elems_off = c->off;
	if (elem != O1_GGUF_STRING)
		return skip_elems(c, elem, kv->count, 0);
	kv->str_offs = malloc((kv->count ? kv->count : 1) * sizeof(uint64_t));
	if (!kv->str_offs)
		return -ENOMEM;
	for (uint64_t i = 0; i < kv->count && !err; i++) {
		kv->str_offs[i] = c->off;
		err = take_str(c, &s, "array string");
	}
	return err;
}

static int read_kv(struct cursor *c, struct gguf_kv *kv)
{
	uint32_t type;
	int err = take_str(c, &kv->key, "key");

	if (!err)
		err = take_u32(c, &type, "value type");
	if (!err)
		err = check_type(c, type, "key");
	if (err)
		return err;
	kv->type = type;
	kv->value_off = c->off;
	if (type == O1_GGUF_ARRAY)
		return read_array(c, kv);
	return skip_value(c, type, 0);
}

static int str_cmp(struct o1_gguf_str a, struct o1_gguf_str b)
{
	int r = memcmp(a.ptr, b.ptr, a.len < b.len ? a.len : b.len);

	if (r)
		return r;
	return a.len < b.len ? -1 : a.len > b.len;
}

/* Records sorted by index: each starts with its name. */
struct sort_ctx {
	const void *recs;
	size_t stride;
};

static struct o1_gguf_str name_at(const struct sort_ctx *c, uint64_t i)
{
	return *(const struct o1_gguf_str *)((const char *)c->recs +
					     i * c->stride);
}

static int cmp_index(const void *a, const void *b, void *ctx)
{
	return str_cmp(name_at(ctx, *(const uint64_t *)a),
		       name_at(ctx, *(const uint64_t *)b));
}

/* Builds a sorted index over N names (the first field of records of
 * STRIDE bytes) and rejects duplicates. */
static int sort_unique(const struct o1_gguf *g, const void *names,
		       size_t stride, uint64_t n, const char *what,
		       uint64_t **out)
{
	struct sort_ctx ctx = {names, stride};
	uint64_t *idx = malloc((n ? n : 1) * sizeof(*idx));

	if (!idx)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, n, sizeof(*idx), cmp_index, &ctx);
	for (uint64_t i = 1; i < n; i++) {
		struct o1_gguf_str s = name_at(&ctx, idx[i]);

		if (str_cmp(name_at(&ctx, idx[i - 1]), s) == 0) {
			o1_err("gguf %s: duplicate %s '%.*s'", g->label, what,
			       (int)(s.len > 200 ? 200 : s.len), s.ptr);
			free(idx);
			return -O1_E_FORMAT;
		}
	}
	*out = idx;
	return 0;
}

static int read_header(struct cursor *c, struct o1_gguf *g)
{
	uint32_t magic;
	int err = take_u32(c, &magic, "magic");

	if (err)
		return err;
	if (magic != GGUF_MAGIC) {
		o1_err("gguf %s: bad magic 0x%08x (expected 0x%08x \"GGUF\")",
		       g->label, magic, GGUF_MAGIC);
		return -O1_E_FORMAT;
	}
	err = take_u32(c, &g->version, "version");
	if (err)
		return err;
	if (g->version != 2 && g->version != 3) {
		o1_err("gguf %s: version %u not supported (2 and 3 are%s)",
		       g->label, g->version,
		       (g->version & 0xffff) == 0 ? "; big-endian file?" : "");
		return -O1_E_VERSION;
	}
	err = take_u64(c, &g->n_tensors, "tensor count");
	if (!err)
		err = take_u64(c, &g->n_kv, "kv count");
	if (err)
		return err;
	if (g->n_kv > remaining(c) / MIN_KV_BYTES ||
	    g->n_tensors > remaining(c) / MIN_TENSOR_BYTES ||
	    g->n_kv * MIN_KV_BYTES + g->n_tensors * MIN_TENSOR_BYTES >
		remaining(c)) {
		o1_err("gguf %s: header claims %llu tensors and %llu keys, "
		       "only %llu bytes follow",
		       g->label, (unsigned long long)g->n_tensors,
		       (unsigned long long)g->n_kv,
		       (unsigned long long)remaining(c));
		return -O1_E_FORMAT;
	}
	return 0;
}

static int read_kvs(struct cursor *c, struct o1_gguf *g)
{
	int err = 0;

	g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof(*g->kv));
	if (!g->kv)
		return -ENOMEM;
	for (uint64_t i = 0; i < g->n_kv && !err; i++)
		err = read_kv(c, &g->kv[i]);
	if (!err)
		err = sort_unique(g, g->kv, sizeof(*g->kv), g->n_kv, "key",
				  &g->kv_sorted);
	return err;
}

static int read_alignment(struct o1_gguf *g)
{
	uint32_t a;
	int err = o1_gguf_get_u32(g, "general.alignment", &a);

	g->alignment = O1_GGUF_DEFAULT_ALIGNMENT;
	if (err == -O1_E_MISSING)
		return 0;
	if (err)
		return err;
	if (a == 0 || (a & (a - 1)) != 0) {
		o1_err("gguf %s: general.alignment %u is not a power of two",
		       g->label, a);
		return -O1_E_FORMAT;
	}
	g->alignment = a;
	return 0;
}

/* Name, dimensions and type of one tensor info. */
static int read_tensor_shape(struct cursor *c, struct o1_gguf_tensor_info *t)
{
	uint32_t type = 0;
	int err = take_str(c, &t->name, "tensor name");

	if (!err && t->name.len > O1_GGUF_MAX_NAME) {
		o1_err("gguf %s: tensor name of %llu bytes at byte %llu "
		       "(limit %d)",
		       c->g->label, (unsigned long long)t->name.len,
		       (unsigned long long)c->off - t->name.len,
		       O1_GGUF_MAX_NAME);
		err = -O1_E_FORMAT;
	}
	if (!err)
		err = take_u32(c, &t->n_dims, "tensor n_dims");
	if (!err && (t->n_dims == 0 || t->n_dims > 4)) {
		o1_err("gguf %s: tensor '%.*s' has %u dimensions (1 to 4)",
		       c->g->label, (int)t->name.len, t->name.ptr, t->n_dims);
		err = -O1_E_FORMAT;
	}
	for (uint32_t d = 0; !err && d < 4; d++)
		t->ne[d] = 1;
	for (uint32_t d = 0; !err && d < t->n_dims; d++)
		err = take_u64(c, &t->ne[d], "tensor dims");
	if (!err)
		err = take_u32(c, &type, "tensor type");
	if (!err)
		err = take_u64(c, &t->offset, "tensor offset");
	t->type = (enum o1_dtype)type;
	return err;
}

static void tensor_err(const struct o1_gguf *g,
		       const struct o1_gguf_tensor_info *t, const char *what)
{
	o1_err("gguf %s: tensor '%.*s' %s: ne [%llu,%llu,%llu,%llu] type %s",
	       g->label, (int)t->name.len, t->name.ptr, what,
	       (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
	       (unsigned long long)t->ne[2], (unsigned long long)t->ne[3],
	       o1_dtype_name(t->type));
}

/* Element count and byte size of T: every ne >= 1, ne[0] whole blocks,
 * no overflow. */
static int check_tensor_size(const struct o1_gguf *g,
			     struct o1_gguf_tensor_info *t)
{
	uint64_t n = 1;
	int err;

	for (uint32_t d = 0; d < t->n_dims; d++) {
		if (t->ne[d] == 0) {
			tensor_err(g, t, "has a zero dimension");
			return -O1_E_SHAPE;
		}
		if (t->ne[d] > (uint64_t)INT64_MAX / n) {
			tensor_err(g, t, "element count overflows");
			return -EOVERFLOW;
		}
		n *= t->ne[d];
	}
	if (t->ne[0] % o1_dtype_block_elements(t->type) != 0) {
		tensor_err(g, t, "ne[0] is not a whole number of blocks");
		return -O1_E_SHAPE;
	}
	err = o1_dtype_row_bytes(t->type, n, &t->n_bytes);
	if (err)
		tensor_err(g, t, "byte size overflows");
	return err;
}

/* GGML's name for a tensor type id, for the refusal of the types this
 * build does not read. */
static const char *ggml_type_name(uint32_t type)
{
	static const char *const names[] = {
	    "F32",    "F16",	    "Q4_0",	  "Q4_1",	"Q4_2",
	    "Q4_3",   "Q5_0",	    "Q5_1",	  "Q8_0",	"Q8_1",
	    "Q2_K",   "Q3_K",	    "Q4_K",	  "Q5_K",	"Q6_K",
	    "Q8_K",   "IQ2_XXS",    "IQ2_XS",	  "IQ3_XXS",	"IQ1_S",
	    "IQ4_NL", "IQ3_S",	    "IQ2_S",	  "IQ4_XS",	"I8",
	    "I16",    "I32",	    "I64",	  "F64",	"IQ1_M",
	    "BF16",   "Q4_0_4_4",   "Q4_0_4_8",	  "Q4_0_8_8",	"TQ1_0",
	    "TQ2_0",  "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",
	};

	return type < sizeof(names) / sizeof(names[0]) ? names[type]
						       : "unknown";
}

static int read_tensor(struct cursor *c, struct o1_gguf_tensor_info *t)
{
	uint32_t type;
	int err = read_tensor_shape(c, t);

	if (err)
		return err;
	type = (uint32_t)t->type;
	if (!o1_dtype_supported(type)) {
		o1_err("gguf %s: tensor '%.*s' has type %u (%s), which this "
		       "build does not read (F32, F16, BF16, Q8_0, Q4_0, Q5_0, "
		       "Q4_K, Q6_K); requantize the model to one of those",
		       c->g->label, (int)t->name.len, t->name.ptr, type,
		       ggml_type_name(type));
		return -O1_E_UNSUPPORTED;
	}
	return check_tensor_size(c->g, t);
}

/* Places each tensor's data inside the data section. */
static int place_tensor(struct o1_gguf *g, struct o1_gguf_tensor_info *t)
{
	uint64_t avail = g->size > g->data_start ? g->size - g->data_start : 0;

	if (t->offset % g->alignment != 0) {
		o1_err("gguf %s: tensor '%.*s' offset %llu is not a multiple "
		       "of the alignment %llu",
		       g->label, (int)t->name.len, t->name.ptr,
		       (unsigned long long)t->offset,
		       (unsigned long long)g->alignment);
		return -O1_E_FORMAT;
	}
	if (t->offset > avail || t->n_bytes > avail - t->offset) {
		o1_err("gguf %s: tensor '%.*s' data [%llu, +%llu) is outside "
		       "the %llu-byte data section at byte %llu",
		       g->label, (int)t->name.len, t->name.ptr,
		       (unsigned long long)t->offset,
		       (unsigned long long)t->n_bytes,
		       (unsigned long long)avail,
		       (unsigned long long)g->data_start);
		return -O1_E_BOUNDS;
	}
	t->data = g->base + g->data_start + t->offset;
	return 0;
}

static int read_tensors(struct cursor *c, struct o1_gguf *g)
{
	int err = 0;

	g->ti = calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*g->ti));
	if (!g->ti)
		return -ENOMEM;
	for (uint64_t i = 0; i < g->n_tensors && !err; i++)
		err = read_tensor(c, &g->ti[i]);
	if (err)
		return err;
	/* c->off <= size < 2^63 for any real image: no overflow below */
	g->data_start =
	    (c->off + g->alignment - 1) / g->alignment * g->alignment;
	for (uint64_t i = 0; i < g->n_tensors && !err; i++)
		err = place_tensor(g, &g->ti[i]);
	if (!err)
		err = sort_unique(g, g->ti, sizeof(*g->ti), g->n_tensors,
				  "tensor", &g->ti_sorted);
	return err;
}

static int parse(struct o1_gguf *g)
{
	struct cursor c = {.g = g, .off = 0};
	int err = read_header(&c, g);

	if (!err)
		err = read_kvs(&c, g);
	if (!err)
		err = read_alignment(g);
	if (!err)
		err = read_tensors(&c, g);
	return err;
}

static int gguf_new(const char *label, struct o1_gguf **out)
{
	struct o1_gguf *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	snprintf(g->path, sizeof(g->path), "%s", label);
	g->label = g->path;
	*out = g;
	return 0;
}

int o1_gguf_open_memory(const void *data, size_t size, struct o1_gguf **out)
{
	struct o1_gguf *g;
	int err = gguf_new("<memory>", &g);

	if (err)
		return err;
	g->base = data;
	g->size = size;
	err = parse(g);
	if (err) {
		o1_gguf_close(g);
		return err;
	}
	*out = g;
	return 0;
}

static int map_file(struct o1_gguf *g, const char *path)
{
	size_t size;
	void *map;
	int err = o1_file_map(path, &map, &size);

	if (err)
		return err;
	if (size < 8) {
		o1_err("gguf %s: %zu bytes is too short for a GGUF header",
		       path, size);
		o1_file_unmap(map, size);
		return -O1_E_FORMAT;
	}
	g->map = map;
	g->base = map;
	g->size = size;
	return 0;
}

int o1_gguf_open(const char *path, struct o1_gguf **out)
{
	struct o1_gguf *g;
	int err = gguf_new(path, &g);

	if (err)
		return err;
	err = map_file(g, path);
	if (!err)
		err = parse(g);
	if (err) {
		o1_gguf_close(g);
		return err;
	}
	*out = g;
	return 0;
}

void o1_gguf_close(struct o1_gguf *g)
{
	if (!g)
		return;
	for (uint64_t i = 0; g->kv && i < g->n_kv; i++)
		free(g->kv[i].str_offs);
	free(g->kv);
	free(g->kv_sorted);
	free(g->ti);
	free(g->ti_sorted);
	o1_file_unmap(g->map, g->size);
	free(g);
}

uint32_t o1_gguf_version(const struct o1_gguf *g)
{
	return g->version;
}

uint64_t o1_gguf_alignment(const struct o1_gguf *g)
{
	return g->alignment;
}

/* Binary search of NAME in a sorted index over records of STRIDE bytes. */
static int64_t lookup(const void *recs, size_t stride, const uint64_t *idx,
		      uint64_t n, const char *name)
{
	struct o1_gguf_str key = {name, strlen(name)};
	uint64_t lo = 0, hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct o1_gguf_str *s =
		    (const void *)((const char *)recs + idx[mid] * stride);
		int r = str_cmp(*s, key);

		if (r == 0)
			return (int64_t)idx[mid];
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -O1_E_MISSING;
}

int64_t o1_gguf_find_key(const struct o1_gguf *g, const char *key)
{
	if (!g->kv_sorted)
		return -O1_E_MISSING;
	return lookup(g->kv, sizeof(*g->kv), g->kv_sorted, g->n_kv, key);
}

uint64_t o1_gguf_n_kv(const struct o1_gguf *g)
{
	return g->n_kv;
}

struct o1_gguf_str o1_gguf_key(const struct o1_gguf *g, uint64_t i)
{
	struct o1_gguf_str none = {"", 0};

	return i < g->n_kv ? g->kv[i].key : none;
}

enum o1_gguf_type o1_gguf_kv_type(const struct o1_gguf *g, uint64_t i)
{
	return i < g->n_kv ? g->kv[i].type : O1_GGUF_TYPE_COUNT;
}

uint64_t o1_gguf_n_tensors(const struct o1_gguf *g)
{
	return g->n_tensors;
}

const struct o1_gguf_tensor_info *o1_gguf_tensor(const struct o1_gguf *g,
						 uint64_t i)
{
	return i < g->n_tensors ? &g->ti[i] : NULL;
}

const struct o1_gguf_tensor_info *o1_gguf_find_tensor(const struct o1_gguf *g,
						      const char *name)
{
	int64_t i;

	if (!g->ti_sorted)
		return NULL;
	i = lookup(g->ti, sizeof(*g->ti), g->ti_sorted, g->n_tensors, name);
	return i < 0 ? NULL : &g->ti[i];
}

/* The kv under KEY, or NULL (-O1_E_MISSING in *err). */
static const struct gguf_kv *find_kv(const struct o1_gguf *g, const char *key,
				     int *err)
{
	int64_t i = o1_gguf_find_key(g, key);

	*err = i < 0 ? (int)i : 0;
	return i < 0 ? NULL : &g->kv[i];
}

static int type_err(const struct o1_gguf *g, const char *key,
		    enum o1_gguf_type type, const char *want)
{
	o1_err("gguf %s: key %s has value type %u, expected %s", g->label, key,
	       type, want);
	return -O1_E_FORMAT;
}

/* An integer value as a sign flag and a magnitude-preserving pair. */
static int read_int(const struct o1_gguf *g, const struct gguf_kv *kv,
		    const char *key, int64_t *s, uint64_t *u, bool *is_signed)
{
	const uint8_t *p = g->base + kv->value_off;
	union {
		uint8_t u8;
		int8_t i8;
		uint16_t u16;
		int16_t i16;
		uint32_t u32;
		int32_t i32;
		uint64_t u64;
		int64_t i64;
	} v;

	if (kv->type == O1_GGUF_FLOAT32 || kv->type == O1_GGUF_FLOAT64 ||
	    kv->type == O1_GGUF_BOOL || kv->type == O1_GGUF_STRING ||
	    kv->type == O1_GGUF_ARRAY)
		return type_err(g, key, kv->type, "an integer");
	memcpy(&v, p, scalar_sizes[kv->type]);
	*is_signed = true;
	switch (kv->type) {
	case O1_GGUF_UINT8:
		*s = v.u8;
		break;
	case O1_GGUF_INT8:
		*s = v.i8;
		break;
	case O1_GGUF_UINT16:
		*s = v.u16;
		break;
	case O1_GGUF_INT16:
		*s = v.i16;
		break;
	case O1_GGUF_UINT32:
		*s = v.u32;
		break;
	case O1_GGUF_INT32:
		*s = v.i32;
		break;
	case O1_GGUF_INT64:
		*s = v.i64;
		break;
	default: /* UINT64 */
		*u = v.u64;
		*is_signed = false;
	}
	return 0;
}

static int range_err(const struct o1_gguf *g, const char *key, int64_t s,
		     uint64_t u, bool is_signed, const char *want)
{
	if (is_signed)
		o1_err("gguf %s: key %s = %lld does not fit %s", g->label, key,
		       (long long)s, want);
	else
		o1_err("gguf %s: key %s = %llu does not fit %s", g->label, key,
		       (unsigned long long)u, want);
	return -O1_E_FORMAT;
}

int o1_gguf_get_u32(const struct o1_gguf *g, const char *key, uint32_t *out)
{
	int64_t s = 0;
	uint64_t u = 0;
	bool is_signed;
	int err;
	const struct gguf_kv *kv = find_kv(g, key, &err);

	if (!err)
		err = read_int(g, kv, key, &s, &u, &is_signed);
	if (err)
		return err;
	if (is_signed ? s < 0 || s > UINT32_MAX : u > UINT32_MAX)
		return range_err(g, key, s, u, is_signed, "u32");
	*out = is_signed ? (uint32_t)s : (uint32_t)u;
	return 0;
}

int o1_gguf_get_i64(const struct o1_gguf *g, const char *key, int64_t *out)
{
	int64_t s = 0;
	uint64_t u = 0;
	bool is_signed;
	int err;
	const struct gguf_kv *kv = find_kv(g, key, &err);

	if (!err)
		err = read_int(g, kv, key, &s, &u, &is_signed);
	if (err)
		return err;
	if (!is_signed && u > INT64_MAX)
		return range_err(g, key, s, u, is_signed, "i64");
	*out = is_signed ? s : (int64_t)u;
	return 0;
}

int o1_gguf_get_f64(const struct o1_gguf *g, const char *key, double *out)
{
	int err;
	const struct gguf_kv *kv = find_kv(g, key, &err);
	float f;

	if (err)
		return err;
	if (kv->type == O1_GGUF_FLOAT64) {
		memcpy(out, g->base + kv->value_off, sizeof(*out));
		return 0;
	}
	if (kv->type != O1_GGUF_FLOAT32)
		return type_err(g, key, kv->type, "a float");
	memcpy(&f, g->base + kv->value_off, sizeof(f));
	*out = f;
	return 0;
}

int o1_gguf_get_f32(const struct o1_gguf *g, const char *key, float *out)
{
	double d;
	int err = o1_gguf_get_f64(g, key, &d);

	if (!err)
		*out = (float)d;
	return err;
}

int o1_gguf_get_bool(const struct o1_gguf *g, const char *key, bool *out)
{
	int err;
	const struct gguf_kv *kv = find_kv(g, key, &err);

	if (err)
		return err;
	if (kv->type != O1_GGUF_BOOL)
		return type_err(g, key, kv->type, "a bool");
	*out = g->base[kv->value_off] != 0;
	return 0;
}

/* The string whose u64 length sits at OFF (checked at open). */
static struct o1_gguf_str str_at(const struct o1_gguf *g, uint64_t off)
{
	struct o1_gguf_str s;

	memcpy(&s.len, g->base + off, sizeof(s.len));
	s.ptr = (const char *)g->base + off + sizeof(s.len);
	return s;
}

int o1_gguf_get_str(const struct o1_gguf *g, const char *key,
		    struct o1_gguf_str *out)
{
	int err;
	const struct gguf_kv *kv = find_kv(g, key, &err);

	if (err)
		return err;
	if (kv->type != O1_GGUF_STRING)
		return type_err(g, key, kv->type, "a string");
	*out = str_at(g, kv->value_off);
	return 0;
}

int o1_gguf_get_arr(const struct o1_gguf *g, const char *key,
		    enum o1_gguf_type *elem_type, uint64_t *count)
{
	int err;
	const struct gguf_kv *kv = find_kv(g, key, &err);

	if (err)
		return err;
	if (kv->type != O1_GGUF_ARRAY)
		return type_err(g, key, kv->type, "an array");
	*elem_type = kv->elem_type;
	*count = kv->count;
	return 0;
}

int o1_gguf_arr_str(const struct o1_gguf *g, const char *key, uint64_t i,
		    struct o1_gguf_str *out)
{
	int err;
	const struct gguf_kv *kv = find_kv(g, key, &err);

	if (err)
		return err;
	if (kv->type != O1_GGUF_ARRAY || kv->elem_type != O1_GGUF_STRING)
		return type_err(g, key,
				kv->type == O1_GGUF_ARRAY ? kv->elem_type
							  : kv->type,
				"a string array");
	if (i >= kv->count) {
		o1_err("gguf %s: index %llu past the %llu strings of %s",
		       g->label, (unsigned long long)i,
		       (unsigned long long)kv->count, key);
		return -O1_E_BOUNDS;
	}
	*out = str_at(g, kv->str_offs[i]);
	return 0;
}

int o1_gguf_arr_data(const struct o1_gguf *g, const char *key,
		     const void **data)
{
	int err;
	const struct gguf_kv *kv = find_kv(g, key, &err);

	if (err)
		return err;
	if (kv->type != O1_GGUF_ARRAY)
		return type_err(g, key, kv->type, "a numeric array");
	if (kv->elem_type == O1_GGUF_STRING || kv->elem_type == O1_GGUF_ARRAY) {
		o1_err("gguf %s: key %s is an array of type %u, expected a "
		       "numeric array",
		       g->label, key, kv->elem_type);
		return -O1_E_FORMAT;
	}
	*data = g->base + kv->elems_off;
	return 0;
}

/* Writer. Keys keep insertion order; setting a key again replaces its
 * value in place. Tensor data is borrowed until o1_gguf_writer_write, or
 * produced by a fill callback into a buffer that lives while that one
 * tensor is written. */
struct wkv {
	char *key;
	enum o1_gguf_type type;
	enum o1_gguf_type elem_type;
	uint64_t count;
	uint8_t scalar[8];
	char *str;   /* STRING */
	void *elems; /* numeric array, count * size bytes */
	char **strs; /* string array, count strings */
};

struct wtensor {
	char *name;
	enum o1_dtype type;
	uint32_t n_dims;
	uint64_t ne[4];
	const void *data; /* or NULL and fill/ctx */
	int (*fill)(void *ctx, void *dst);
	void *ctx;
	uint64_t n_bytes;
	uint64_t offset;
};

struct o1_gguf_writer {
	struct wkv *kv;
	uint64_t n_kv, cap_kv;
	struct wtensor *t;
	uint64_t n_t, cap_t;
	int err; /* a set that failed half-way: write refuses */
};

/* Records ERR when a key was left half-set, so that write fails. */
static int poison(struct o1_gguf_writer *w, struct wkv *kv, int err)
{
	kv->type = O1_GGUF_UINT8;
	w->err = err;
	return err;
}

int o1_gguf_writer_create(struct o1_gguf_writer **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void wkv_clear(struct wkv *kv)
{
	for (uint64_t i = 0; kv->strs && i < kv->count; i++)
		free(kv->strs[i]);
	free(kv->strs);
	free(kv->elems);
	free(kv->str);
	kv->strs = NULL;
	kv->elems = NULL;
	kv->str = NULL;
	kv->count = 0;
}

void o1_gguf_writer_destroy(struct o1_gguf_writer *w)
{
	if (!w)
		return;
	for (uint64_t i = 0; i < w->n_kv; i++) {
		wkv_clear(&w->kv[i]);
		free(w->kv[i].key);
	}
	for (uint64_t i = 0; i < w->n_t; i++)
		free(w->t[i].name);
	free(w->kv);
	free(w->t);
	free(w);
}

static int grow(void **arr, uint64_t *cap, uint64_t n, size_t size)
{
	uint64_t ncap = *cap ? *cap * 2 : 16;
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	memset((char *)p + *cap * size, 0, (ncap - *cap) * size);
	*arr = p;
	*cap = ncap;
	return 0;
}

/* The slot for KEY, emptied (existing) or new. */
static int wkv_slot(struct o1_gguf_writer *w, const char *key, struct wkv **out)
{
	int err;

	for (uint64_t i = 0; i < w->n_kv; i++) {
		if (strcmp(w->kv[i].key, key) == 0) {
			wkv_clear(&w->kv[i]);
			*out = &w->kv[i];
			return 0;
		}
	}
	err = grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof(*w->kv));
	if (err)
		return err;
	w->kv[w->n_kv].key = strdup(key);
	if (!w->kv[w->n_kv].key)
		return -ENOMEM;
	*out = &w->kv[w->n_kv++];
	return 0;
}

static bool is_scalar(enum o1_gguf_type type)
{
	return (unsigned)type < O1_GGUF_TYPE_COUNT && type != O1_GGUF_STRING &&
	       type != O1_GGUF_ARRAY;
}

int o1_gguf_writer_set_val(struct o1_gguf_writer *w, const char *key,
			   enum o1_gguf_type type, const void *v)
{
	struct wkv *kv;
	int err;

	if (!is_scalar(type)) {
		o1_err("gguf writer: key %s: type %u is not a scalar", key,
		       type);
		return -EINVAL;
	}
	err = wkv_slot(w, key, &kv);
	if (err)
		return err;
	kv->type = type;
	if (type == O1_GGUF_BOOL)
		kv->scalar[0] = *(const bool *)v ? 1 : 0;
	else
		memcpy(kv->scalar, v, scalar_sizes[type]);
	return 0;
}

int o1_gguf_writer_set_u32(struct o1_gguf_writer *w, const char *key,
			   uint32_t v)
{
	return o1_gguf_writer_set_val(w, key, O1_GGUF_UINT32, &v);
}

int o1_gguf_writer_set_i32(struct o1_gguf_writer *w, const char *key, int32_t v)
{
	return o1_gguf_writer_set_val(w, key, O1_GGUF_INT32, &v);
}

int o1_gguf_writer_set_f32(struct o1_gguf_writer *w, const char *key, float v)
{
	return o1_gguf_writer_set_val(w, key, O1_GGUF_FLOAT32, &v);
}

int o1_gguf_writer_set_bool(struct o1_gguf_writer *w, const char *key, bool v)
{
	return o1_gguf_writer_set_val(w, key, O1_GGUF_BOOL, &v);
}

int o1_gguf_writer_set_str(struct o1_gguf_writer *w, const char *key,
			   const char *v)
{
	struct wkv *kv;
	int err;

	if (!v) {
		o1_err("gguf writer: key %s: NULL string", key);
		return -EINVAL;
	}
	err = wkv_slot(w, key, &kv);
	if (err)
		return err;
	kv->type = O1_GGUF_STRING;
	kv->str = strdup(v);
	return kv->str ? 0 : poison(w, kv, -ENOMEM);
}

static int copy_strs(struct wkv *kv, const char *const *src, uint64_t count)
{
	kv->strs = calloc(count ? count : 1, sizeof(char *));
	if (!kv->strs)
		return -ENOMEM;
	kv->count = count;
	for (uint64_t i = 0; i < count; i++) {
		if (!src[i]) {
			o1_err(
			    "gguf writer: key %s: string %llu of %llu is NULL",
			    kv->key, (unsigned long long)i,
			    (unsigned long long)count);
			return -EINVAL;
		}
		kv->strs[i] = strdup(src[i]);
		if (!kv->strs[i])
			return -ENOMEM;
	}
	return 0;
}

int o1_gguf_writer_set_arr(struct o1_gguf_writer *w, const char *key,
			   enum o1_gguf_type elem_type, const void *elems,
			   uint64_t count)
{
	struct wkv *kv;
	int err;

	if (!is_scalar(elem_type) && elem_type != O1_GGUF_STRING) {
		o1_err("gguf writer: key %s: arrays of type %u not supported",
		       key, elem_type);
		return -EINVAL;
	}
	if (count > SIZE_MAX / 8)
		return -EOVERFLOW;
	err = wkv_slot(w, key, &kv);
	if (err)
		return err;
	kv->type = O1_GGUF_ARRAY;
	kv->elem_type = elem_type;
	if (elem_type == O1_GGUF_STRING) {
		err = copy_strs(kv, elems, count);
		return err ? poison(w, kv, err) : 0;
	}
	kv->elems = malloc(count ? count * scalar_sizes[elem_type] : 1);
	if (!kv->elems)
		return poison(w, kv, -ENOMEM);
	if (count)
		memcpy(kv->elems, elems, count * scalar_sizes[elem_type]);
	kv->count = count;
	return 0;
}

static int check_new_tensor(const struct o1_gguf_writer *w, const char *name,
			    enum o1_dtype type, uint32_t n_dims,
			    const uint64_t ne[4], uint64_t n_bytes)
{
	uint64_t n = 1, need = 0;
	int err = 0;

	for (uint64_t i = 0; i < w->n_t; i++)
		if (strcmp(w->t[i].name, name) == 0)
			err = -EEXIST;
	if (strlen(name) > O1_GGUF_MAX_NAME || n_dims == 0 || n_dims > 4 ||
	    !o1_dtype_supported(type))
		err = err ? err : -EINVAL;
	for (uint32_t d = 0; !err && d < n_dims; d++) {
		if (ne[d] == 0 || ne[d] > (uint64_t)INT64_MAX / n)
			err = -EINVAL;
		else
			n *= ne[d];
	}
	if (!err && ne[0] % o1_dtype_block_elements(type) != 0)
		err = -O1_E_SHAPE;
	if (!err)
		err = o1_dtype_row_bytes(type, n, &need);
	if (!err && need != n_bytes)
		err = -O1_E_SHAPE;
	if (err)
		o1_err("gguf writer: tensor %s: %u dims [%llu,...] type %u, "
		       "%llu bytes (%llu expected): %s",
		       name, n_dims, (unsigned long long)ne[0], type,
		       (unsigned long long)n_bytes, (unsigned long long)need,
		       o1_strerror(err));
	return err;
}

static int add_wtensor(struct o1_gguf_writer *w, const char *name,
		       enum o1_dtype type, uint32_t n_dims,
		       const uint64_t ne[4], uint64_t n_bytes,
		       struct wtensor **out)
{
	struct wtensor *t;
	int err = check_new_tensor(w, name, type, n_dims, ne, n_bytes);

	if (!err)
		err = grow((void **)&w->t, &w->cap_t, w->n_t, sizeof(*w->t));
	if (err)
		return err;
	t = &w->t[w->n_t];
	t->name = strdup(name);
	if (!t->name)
		return -ENOMEM;
	t->type = type;
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < 4; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	t->n_bytes = n_bytes;
	w->n_t++;
	*out = t;
	return 0;
}

int o1_gguf_writer_add_tensor(struct o1_gguf_writer *w, const char *name,
			      enum o1_dtype type, uint32_t n_dims,
			      const uint64_t ne[4], const void *data,
			      uint64_t n_bytes)
{
	struct wtensor *t;
	int err = add_wtensor(w, name, type, n_dims, ne, n_bytes, &t);

	if (!err)
		t->data = data;
	return err;
}

int o1_gguf_writer_add_tensor_fill(struct o1_gguf_writer *w, const char *name,
				   enum o1_dtype type, uint32_t n_dims,
				   const uint64_t ne[4], uint64_t n_bytes,
				   int (*fill)(void *ctx, void *dst), void *ctx)
{
	struct wtensor *t;
	int err;

	if (!fill) {
		o1_err("gguf writer: tensor %s: NULL fill callback", name);
		return -EINVAL;
	}
	err = add_wtensor(w, name, type, n_dims, ne, n_bytes, &t);
	if (!err) {
		t->fill = fill;
		t->ctx = ctx;
	}
	return err;
}

static int put(FILE *f, const void *p, uint64_t n)
{
	return n == 0 || fwrite(p, 1, n, f) == n ? 0 : -EIO;
}

static int put_u32(FILE *f, uint32_t v)
{
	return put(f, &v, sizeof(v));
}

static int put_u64(FILE *f, uint64_t v)
{
	return put(f, &v, sizeof(v));
}

static int put_str(FILE *f, const char *s)
{
	uint64_t len = strlen(s);
	int err = put_u64(f, len);

	return err ? err : put(f, s, len);
}

static int put_kv(FILE *f, const struct wkv *kv)
{
	int err = put_str(f, kv->key);

	if (!err)
		err = put_u32(f, kv->type);
	if (err)
		return err;
	if (kv->type == O1_GGUF_STRING)
		return put_str(f, kv->str);
	if (kv->type != O1_GGUF_ARRAY)
		return put(f, kv->scalar, scalar_sizes[kv->type]);
	err = put_u32(f, kv->elem_type);
	if (!err)
		err = put_u64(f, kv->count);
	if (!err && kv->elem_type != O1_GGUF_STRING)
		return put(f, kv->elems,
			   kv->count * scalar_sizes[kv->elem_type]);
	for (uint64_t i = 0; !err && i < kv->count; i++)
		err = put_str(f, kv->strs[i]);
	return err;
}

static int put_pad(FILE *f, uint64_t *pos, uint64_t align)
{
	static const uint8_t zeros[256];
	uint64_t pad = (align - *pos % align) % align;
	int err = 0;

	*pos += pad;
	for (; pad > 0 && !err; pad -= pad > 256 ? 256 : pad)
		err = put(f, zeros, pad > 256 ? 256 : pad);
	return err;
}

static uint64_t writer_alignment(const struct o1_gguf_writer *w)
{
	uint32_t a;

	for (uint64_t i = 0; i < w->n_kv; i++) {
		if (strcmp(w->kv[i].key, "general.alignment") == 0 &&
		    w->kv[i].type == O1_GGUF_UINT32) {
			memcpy(&a, w->kv[i].scalar, sizeof(a));
			if (a && (a & (a - 1)) == 0)
				return a;
		}
	}
	return O1_GGUF_DEFAULT_ALIGNMENT;
}

static int put_header(FILE *f, struct o1_gguf_writer *w, uint64_t align)
{
	uint64_t off = 0;
	int err = put_u32(f, GGUF_MAGIC);

	if (!err)
		err = put_u32(f, 3);
	if (!err)
		err = put_u64(f, w->n_t);
	if (!err)
		err = put_u64(f, w->n_kv);
	for (uint64_t i = 0; !err && i < w->n_kv; i++)
		err = put_kv(f, &w->kv[i]);
	for (uint64_t i = 0; !err && i < w->n_t; i++) {
		struct wtensor *t = &w->t[i];

		t->offset = off;
		off += (t->n_bytes + align - 1) / align * align;
		err = put_str(f, t->name);
		if (!err)
			err = put_u32(f, t->n_dims);
		if (!err)
			err = put(f, t->ne, t->n_dims * sizeof(uint64_t));
		if (!err)
			err = put_u32(f, t->type);
		if (!err)
			err = put_u64(f, t->offset);
	}
	return err;
}

/* T's bytes: borrowed data, or a buffer filled for this tensor alone. */
static int put_tensor(FILE *f, const struct wtensor *t)
{
	void *buf;
	int err;

	if (!t->fill)
		return put(f, t->data, t->n_bytes);
	buf = malloc(t->n_bytes ? t->n_bytes : 1);
	if (!buf)
		return -ENOMEM;
	err = t->fill(t->ctx, buf);
	if (err)
		o1_err("gguf writer: tensor %s: producing %llu bytes: %s",
		       t->name, (unsigned long long)t->n_bytes,
		       o1_strerror(err));
	else
		err = put(f, buf, t->n_bytes);
	free(buf);
	return err;
}

static int put_all(FILE *f, struct o1_gguf_writer *w)
{
	uint64_t align = writer_alignment(w), pos;
	int err = put_header(f, w, align);
	long at = ftell(f);

	if (err || at < 0)
		return err ? err : -EIO;
	pos = (uint64_t)at;
	err = put_pad(f, &pos, align);
	for (uint64_t i = 0; !err && i < w->n_t; i++) {
		err = put_tensor(f, &w->t[i]);
		pos += w->t[i].n_bytes;
		if (!err)
			err = put_pad(f, &pos, align);
	}
	return err;
}

int o1_gguf_writer_write(struct o1_gguf_writer *w, const char *path)
{
	FILE *f;
	int err;

	if (w->err) {
		o1_err("gguf writer %s: not written, a key failed to set: %s",
		       path, o1_strerror(w->err));
		return w->err;
	}
	f = fopen(path, "wb");
	if (!f) {
		err = -errno;
		o1_err("gguf writer %s: %s", path, strerror(errno));
		return err;
	}
	err = put_all(f, w);
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (err) {
		o1_err("gguf writer %s: write failed: %s", path,
		       o1_strerror(err));
		unlink(path);
	}
	return err;
}

/* safetensors: parse and validate a header over a mapping or a buffer,
 * open a folder's shards, write one file.
 *
 * Invariants after a successful open: every tensor's [data, data+n_bytes)
 * lies inside the data section, n_bytes = elements * element size without
 * overflow, names are unique and NUL-terminated, non-empty byte ranges are
 * pairwise disjoint, and by_name[] lists the tensors sorted by name.
 */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "hf_quant.h"

#define ST_MAX_EXACT_INT 9007199254740992.0 /* 2^53 */

struct o1_safetensors {
	const uint8_t *base; /* whole image: borrowed or the mapping */
	size_t size;
	void *map;   /* owned mapping, NULL for memory images */
	char *label; /* path for log lines */
	uint64_t n_tensors;
	struct o1_st_tensor *tensors;
	struct o1_st_tensor **by_name;
};

struct o1_safetensors_set {
	struct o1_safetensors **files;
	uint32_t n_files;
	uint64_t n_tensors;
	const struct o1_st_tensor **tensors; /* sorted by name */
};

struct st_entry {
	char *name;
	enum o1_dtype dtype;
	uint32_t n_dims;
	uint64_t shape[O1_ST_MAX_DIMS];
	const void *data; /* or NULL and fill/ctx */
	uint64_t n_bytes;
	int (*fill)(void *ctx, void *dst);
	void *ctx;
};

struct o1_safetensors_writer {
	struct st_entry *entries;
	uint32_t n, cap;
};

static int dtype_from_name(const char *label, const char *tensor,
			   const char *name, enum o1_dtype *out)
{
	if (strcmp(name, "F32") == 0)
		*out = O1_DTYPE_F32;
	else if (strcmp(name, "F16") == 0)
		*out = O1_DTYPE_F16;
	else if (strcmp(name, "BF16") == 0)
		*out = O1_DTYPE_BF16;
	else if (o1_hf_quant_method_of(tensor, name))
		return o1_hf_quant_refuse_tensor(
		    label, tensor, name, o1_hf_quant_method_of(tensor, name));
	else {
		o1_err("safetensors %s: tensor \"%s\" has dtype \"%s\"; only "
		       "F32, F16 and BF16 are supported",
		       label, tensor, name);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

static const char *dtype_to_name(enum o1_dtype t)
{
	switch (t) {
	case O1_DTYPE_F32:
		return "F32";
	case O1_DTYPE_F16:
		return "F16";
	case O1_DTYPE_BF16:
		return "BF16";
	default:
		return NULL;
	}
}

static uint32_t elem_bytes(enum o1_dtype t)
{
	return t == O1_DTYPE_F32 ? 4 : 2;
}

/* A JSON number that is a non-negative integer below 2^53. */
static bool json_u64(const cJSON *j, uint64_t *out)
{
	double d;

	if (!cJSON_IsNumber(j))
		return false;
	d = j->valuedouble;
	if (!(d >= 0 && d < ST_MAX_EXACT_INT) || d != (double)(uint64_t)d)
		return false;
	*out = (uint64_t)d;
	return true;
}

static int parse_shape(const char *label, const char *name, const cJSON *js,
		       struct o1_st_tensor *t, uint64_t *elements)
{
	const cJSON *dim;
	uint64_t n = 1;

	if (!cJSON_IsArray(js) || cJSON_GetArraySize(js) > O1_ST_MAX_DIMS) {
		o1_err("safetensors %s: tensor \"%s\": shape must be an array "
		       "of at most %d integers",
		       label, name, O1_ST_MAX_DIMS);
		return -O1_E_FORMAT;
	}
	t->n_dims = 0;
	cJSON_ArrayForEach(dim, js)
	{
		uint64_t d;

		if (!json_u64(dim, &d)) {
			o1_err("safetensors %s: tensor \"%s\": dimension %u is "
			       "not a non-negative integer",
			       label, name, t->n_dims);
			return -O1_E_FORMAT;
		}
		if (__builtin_mul_overflow(n, d, &n)) {
			o1_err("safetensors %s: tensor \"%s\": element count "
			       "overflows",
			       label, name);
			return -O1_E_BOUNDS;
		}
		t->shape[t->n_dims++] = d;
	}
	*elements = n;
	return 0;
}

static int parse_offsets(const char *label, const char *name, const cJSON *jo,
			 uint64_t *begin, uint64_t *end)
{
	if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 ||
	    !json_u64(cJSON_GetArrayItem(jo, 0), begin) ||
	    !json_u64(cJSON_GetArrayItem(jo, 1), end)) {
		o1_err("safetensors %s: tensor \"%s\": data_offsets must be "
		       "[begin, end] non-negative integers",
		       label, name);
		return -O1_E_FORMAT;
	}
	return 0;
}

/* Fills T from the header entry J; DATA/DATA_SIZE is the data section. */
static int parse_tensor(const char *label, const cJSON *j, const uint8_t *data,
			uint64_t data_size, struct o1_st_tensor *t)
{
	const char *name = j->string;
	const cJSON *jd = cJSON_GetObjectItemCaseSensitive(j, "dtype");
	uint64_t elements, bytes, begin, end;
	int err;

	if (!cJSON_IsObject(j) || !cJSON_IsString(jd)) {
		o1_err("safetensors %s: tensor \"%s\": entry must be an object "
		       "with a string dtype",
		       label, name);
		return -O1_E_FORMAT;
	}
	err = dtype_from_name(label, name, jd->valuestring, &t->dtype);
	if (!err)
		err = parse_shape(label, name,
				  cJSON_GetObjectItemCaseSensitive(j, "shape"),
				  t, &elements);
	if (!err)
		err = parse_offsets(
		    label, name,
		    cJSON_GetObjectItemCaseSensitive(j, "data_offsets"), &begin,
		    &end);
	if (err)
		return err;
	if (begin > end || end > data_size) {
		o1_err("safetensors %s: tensor \"%s\": data_offsets [%llu, "
		       "%llu] outside the %llu-byte data section",
		       label, name, (unsigned long long)begin,
		       (unsigned long long)end, (unsigned long long)data_size);
		return -O1_E_BOUNDS;
	}
	if (__builtin_mul_overflow(elements, elem_bytes(t->dtype), &bytes) ||
	    end - begin != bytes) {
		o1_err("safetensors %s: tensor \"%s\": %llu bytes for %llu "
		       "elements of %s",
		       label, name, (unsigned long long)(end - begin),
		       (unsigned long long)elements, jd->valuestring);
		return -O1_E_SHAPE;
	}
	t->name = name;
	t->data = data + begin;
	t->n_bytes = bytes;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	const struct o1_st_tensor *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

static int cmp_data(const void *a, const void *b)
{
	const struct o1_st_tensor *const *x = a, *const *y = b;
	const uint8_t *p = (*x)->data, *q = (*y)->data;

	return p < q ? -1 : p > q;
}

/* Sorts PTRS (N tensors) by name and rejects duplicates. */
static int check_unique(const char *label, const struct o1_st_tensor **ptrs,
			uint64_t n)
{
	qsort(ptrs, n, sizeof(*ptrs), cmp_name);
	for (uint64_t i = 1; i < n; i++) {
		if (strcmp(ptrs[i - 1]->name, ptrs[i]->name) == 0) {
			o1_err("safetensors %s: tensor \"%s\" appears twice",
			       label, ptrs[i]->name);
			return -O1_E_FORMAT;
		}
	}
	return 0;
}

/* Rejects two tensors whose non-empty byte ranges overlap. */
static int check_disjoint(struct o1_safetensors *st)
{
	const struct o1_st_tensor **tmp;
	const uint8_t *reach = NULL;
	const char *owner = NULL;
	int err = 0;

	tmp = malloc((st->n_tensors ? st->n_tensors : 1) * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	for (uint64_t i = 0; i < st->n_tensors; i++)
		tmp[i] = &st->tensors[i];
	qsort(tmp, st->n_tensors, sizeof(*tmp), cmp_data);
	for (uint64_t i = 0; i < st->n_tensors && !err; i++) {
		const uint8_t *p = tmp[i]->data;

		if (tmp[i]->n_bytes == 0)
			continue;
		if (reach && p < reach) {
			o1_err("safetensors %s: tensors \"%s\" and \"%s\" "
			       "overlap",
			       st->label, owner, tmp[i]->name);
			err = -O1_E_FORMAT;
		}
		if (!reach || p + tmp[i]->n_bytes > reach) {
			reach = p + tmp[i]->n_bytes;
			owner = tmp[i]->name;
		}
	}
	free(tmp);
	return err;
}

static int check_metadata(const char *label, const cJSON *j)
{
	const cJSON *kv;

	if (!cJSON_IsObject(j)) {
		o1_err("safetensors %s: __metadata__ is not an object", label);
		return -O1_E_FORMAT;
	}
	cJSON_ArrayForEach(kv, j)
	{
		if (!cJSON_IsString(kv)) {
			o1_err("safetensors %s: __metadata__ value \"%s\" is "
			       "not a string",
			       label, kv->string);
			return -O1_E_FORMAT;
		}
	}
	return 0;
}

/* Parses the header JSON ROOT into st->tensors. */
static int parse_entries(struct o1_safetensors *st, const cJSON *root,
			 const uint8_t *data, uint64_t data_size)
{
	const cJSON *j;
	uint64_t n = 0;
	int err;

	cJSON_ArrayForEach(j, root) n++;
	st->tensors = calloc(n ? n : 1, sizeof(*st->tensors));
	st->by_name = calloc(n ? n : 1, sizeof(*st->by_name));
	if (!st->tensors || !st->by_name)
		return -ENOMEM;
	cJSON_ArrayForEach(j, root)
	{
		struct o1_st_tensor *t = &st->tensors[st->n_tensors];

		if (strcmp(j->string, "__metadata__") == 0) {
			err = check_metadata(st->label, j);
			if (err)
				return err;
			continue;
		}
		err = parse_tensor(st->label, j, data, data_size, t);
		if (err)
			return err;
		t->name = strdup(t->name);
		if (!t->name)
			return -ENOMEM;
		st->by_name[st->n_tensors++] = t;
	}
	err = check_unique(st->label, (const struct o1_st_tensor **)st->by_name,
			   st->n_tensors);
	return err ? err : check_disjoint(st);
}

static bool only_spaces(const char *p, const char *end)
{
	for (; p < end; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
	return true;
}

static int parse_image(struct o1_safetensors *st)
{
	const char *hdr = (const char *)st->base + 8;
	const char *parse_end = NULL;
	uint64_t hlen;
	cJSON *root;
	int err;

	if (st->size < 8) {
		o1_err("safetensors %s: %zu bytes, too short for a header",
		       st->label, st->size);
		return -O1_E_FORMAT;
	}
	memcpy(&hlen, st->base, 8);
	hlen = le64toh(hlen);
	if (hlen > O1_ST_MAX_HEADER_BYTES || hlen > st->size - 8) {
		o1_err("safetensors %s: header length %llu exceeds the file "
		       "(%zu bytes) or the %llu-byte limit",
		       st->label, (unsigned long long)hlen, st->size,
		       O1_ST_MAX_HEADER_BYTES);
		return -O1_E_BOUNDS;
	}
	root = cJSON_ParseWithLengthOpts(hdr, hlen, &parse_end, 0);
	if (!root || !cJSON_IsObject(root) || hlen == 0 || hdr[0] != '{' ||
	    !only_spaces(parse_end, hdr + hlen)) {
		o1_err("safetensors %s: header is not one JSON object (error "
		       "near byte %lld of %llu)",
		       st->label, (long long)(parse_end ? parse_end - hdr : -1),
		       (unsigned long long)hlen);
		cJSON_Delete(root);
		return -O1_E_FORMAT;
	}
	err = parse_entries(st, root, st->base + 8 + hlen, st->size - 8 - hlen);
	cJSON_Delete(root);
	return err;
}

void o1_safetensors_close(struct o1_safetensors *st)
{
	if (!st)
		return;
	for (uint64_t i = 0; i < st->n_tensors; i++)
		free((char *)st->tensors[i].name);
	free(st->tensors);
	free(st->by_name);
	o1_file_unmap(st->map, st->size);
	free(st->label);
	free(st);
}

static int open_common(struct o1_safetensors *st, struct o1_safetensors **out)
{
	int err = st->label ? parse_image(st) : -ENOMEM;

	if (err) {
		o1_safetensors_close(st);
		return err;
	}
	*out = st;
	return 0;
}

int o1_safetensors_open_memory(const void *data, size_t size,
			       struct o1_safetensors **out)
{
	struct o1_safetensors *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	st->base = data;
	st->size = size;
	st->label = strdup("<memory>");
	return open_common(st, out);
}

int o1_safetensors_open(const char *path, struct o1_safetensors **out)
{
	static const uint8_t empty[1];
	struct o1_safetensors *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	err = o1_file_map(path, &st->map, &st->size);
	if (err) {
		free(st);
		return err;
	}
	st->base = st->map ? st->map : empty;
	st->label = strdup(path);
	return open_common(st, out);
}

uint64_t o1_safetensors_n_tensors(const struct o1_safetensors *st)
{
	return st->n_tensors;
}

const struct o1_st_tensor *
o1_safetensors_tensor(const struct o1_safetensors *st, uint64_t i)
{
	return i < st->n_tensors ? &st->tensors[i] : NULL;
}

static const struct o1_st_tensor *
find_sorted(const struct o1_st_tensor *const *v, uint64_t n, const char *name)
{
	uint64_t lo = 0, hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		int c = strcmp(v[mid]->name, name);

		if (c == 0)
			return v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct o1_st_tensor *o1_safetensors_find(const struct o1_safetensors *st,
					       const char *name)
{
	return find_sorted((const struct o1_st_tensor *const *)st->by_name,
			   st->n_tensors, name);
}

/* ---- folders ---- */

void o1_safetensors_set_close(struct o1_safetensors_set *set)
{
	if (!set)
		return;
	for (uint32_t i = 0; i < set->n_files; i++)
		o1_safetensors_close(set->files[i]);
	free(set->files);
	free(set->tensors);
	free(set);
}

static int add_file(struct o1_safetensors_set *set, const char *path)
{
	struct o1_safetensors **files;
	int err;

	files = realloc(set->files, (set->n_files + 1) * sizeof(*files));
	if (!files)
		return -ENOMEM;
	set->files = files;
	err = o1_safetensors_open(path, &files[set->n_files]);
	if (err)
		return err;
	set->n_files++;
	return 0;
}

static bool plain_file_name(const char *s)
{
	return s[0] && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
	       !strchr(s, '/') && strlen(s) < NAME_MAX;
}

/* Opens every distinct shard named in WEIGHT_MAP (at most once each). */
static int open_shards(struct o1_safetensors_set *set, const char *dir,
		       const cJSON *weight_map, const char *index)
{
	const cJSON *j, *k;
	char path[PATH_MAX];
	int err;

	cJSON_ArrayForEach(j, weight_map)
	{
		if (!cJSON_IsString(j) || !plain_file_name(j->valuestring)) {
			o1_err("%s: tensor \"%s\" maps to a shard that is not "
			       "a plain file name in the folder: %s",
			       index, j->string,
			       cJSON_IsString(j) ? j->valuestring
						 : "(not a "
						   "string)");
			return -O1_E_FORMAT;
		}
		for (k = weight_map->child; k != j; k = k->next)
			if (strcmp(k->valuestring, j->valuestring) == 0)
				break;
		if (k != j)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir,
			     j->valuestring) >= (int)sizeof(path))
			return -ENAMETOOLONG;
		err = add_file(set, path);
		if (err)
			return err;
	}
	return 0;
}

/* Checks that each tensor of WEIGHT_MAP is in the set. */
static int check_weight_map(const struct o1_safetensors_set *set,
			    const cJSON *weight_map, const char *index)
{
	const cJSON *j;

	cJSON_ArrayForEach(j, weight_map)
	{
		if (!o1_safetensors_set_find(set, j->string)) {
			o1_err("%s: tensor \"%s\" is not in shard %s", index,
			       j->string, j->valuestring);
			return -O1_E_MISSING;
		}
	}
	return 0;
}

static int open_index(struct o1_safetensors_set *set, const char *dir,
		      const char *index, cJSON **root)
{
	const cJSON *weight_map;
	size_t len = 0;
	char *text = NULL;
	int err = o1_file_read(index, O1_ST_MAX_HEADER_BYTES, &text, &len);

	if (err == -ENOENT)
		o1_err("%s: %s", index, o1_strerror(err));
	if (err)
		return err;
	*root = cJSON_ParseWithLength(text, len);
	free(text);
	weight_map = cJSON_GetObjectItemCaseSensitive(*root, "weight_map");
	if (!cJSON_IsObject(weight_map)) {
		o1_err("%s: not JSON with a \"weight_map\" object", index);
		return -O1_E_FORMAT;
	}
	return open_shards(set, dir, weight_map, index);
}

/* Indexes every tensor of every file by name; duplicates are errors. */
static int index_tensors(struct o1_safetensors_set *set, const char *dir)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < set->n_files; i++)
		n += set->files[i]->n_tensors;
	set->tensors = malloc((n ? n : 1) * sizeof(*set->tensors));
	if (!set->tensors)
		return -ENOMEM;
	for (uint32_t i = 0; i < set->n_files; i++)
		for (uint64_t t = 0; t < set->files[i]->n_tensors; t++)
			set->tensors[set->n_tensors++] =
			    &set->files[i]->tensors[t];
	return check_unique(dir, set->tensors, set->n_tensors);
}

int o1_safetensors_set_open(const char *dir, struct o1_safetensors_set **out)
{
	struct o1_safetensors_set *set = calloc(1, sizeof(*set));
	char single[PATH_MAX], index[PATH_MAX];
	cJSON *root = NULL;
	int err;

	if (!set)
		return -ENOMEM;
	if (snprintf(single, sizeof(single), "%s/model.safetensors", dir) >=
		(int)sizeof(single) ||
	    snprintf(index, sizeof(index), "%s/model.safetensors.index.json",
		     dir) >= (int)sizeof(index)) {
		err = -ENAMETOOLONG;
		goto fail;
	}
	if (access(single, F_OK) == 0)
		err = add_file(set, single);
	else if (access(index, F_OK) == 0)
		err = open_index(set, dir, index, &root);
	else {
		o1_err("%s: neither model.safetensors nor "
		       "model.safetensors.index.json",
		       dir);
		err = -O1_E_MISSING;
	}
	if (!err)
		err = index_tensors(set, dir);
	if (!err && root)
		err = check_weight_map(
		    set, cJSON_GetObjectItemCaseSensitive(root, "weight_map"),
		    index);
	cJSON_Delete(root);
	if (err)
		goto fail;
	*out = set;
	return 0;
fail:
	o1_safetensors_set_close(set);
	return err;
}

uint64_t o1_safetensors_set_n_tensors(const struct o1_safetensors_set *set)
{
	return set->n_tensors;
}

const struct o1_st_tensor *
o1_safetensors_set_tensor(const struct o1_safetensors_set *set, uint64_t i)
{
	return i < set->n_tensors ? set->tensors[i] : NULL;
}

const struct o1_st_tensor *
o1_safetensors_set_find(const struct o1_safetensors_set *set, const char *name)
{
	return find_sorted(set->tensors, set->n_tensors, name);
}

/* ---- writer ---- */

int o1_safetensors_writer_create(struct o1_safetensors_writer **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void o1_safetensors_writer_destroy(struct o1_safetensors_writer *w)
{
	if (!w)
		return;
	for (uint32_t i = 0; i < w->n; i++)
		free(w->entries[i].name);
	free(w->entries);
	free(w);
}

static int add_entry(struct o1_safetensors_writer *w, const char *name,
		     enum o1_dtype dtype, uint32_t n_dims,
		     const uint64_t *shape, uint64_t n_bytes,
		     struct st_entry **out)
{
	struct st_entry *e;
	uint64_t n = 1;

	for (uint32_t i = 0; i < n_dims && i < O1_ST_MAX_DIMS; i++)
		if (__builtin_mul_overflow(n, shape[i], &n))
			n = UINT64_MAX;
	if (!dtype_to_name(dtype) || n_dims > O1_ST_MAX_DIMS ||
	    n > UINT64_MAX / 4 || n * elem_bytes(dtype) != n_bytes) {
		o1_err("safetensors writer: tensor \"%s\": %s, %u dims, %llu "
		       "bytes do not fit",
		       name, o1_dtype_name(dtype), n_dims,
		       (unsigned long long)n_bytes);
		return -EINVAL;
	}
	if (w->n == w->cap) {
		uint32_t cap = w->cap ? w->cap * 2 : 64;

		e = realloc(w->entries, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		w->entries = e;
		w->cap = cap;
	}
	e = &w->entries[w->n];
	memset(e, 0, sizeof(*e));
	e->name = strdup(name);
	if (!e->name)
		return -ENOMEM;
	e->dtype = dtype;
	e->n_dims = n_dims;
	memcpy(e->shape, shape, n_dims * sizeof(*shape));
	e->n_bytes = n_bytes;
	w->n++;
	*out = e;
	return 0;
}

int o1_safetensors_writer_add(struct o1_safetensors_writer *w, const char *name,
			      enum o1_dtype dtype, uint32_t n_dims,
			      const uint64_t *shape, const void *data,
			      uint64_t n_bytes)
{
	struct st_entry *e;
	int err = add_entry(w, name, dtype, n_dims, shape, n_bytes, &e);

	if (!err)
		e->data = data;
	return err;
}

int o1_safetensors_writer_add_fill(struct o1_safetensors_writer *w,
				   const char *name, enum o1_dtype dtype,
				   uint32_t n_dims, const uint64_t *shape,
				   uint64_t n_bytes,
				   int (*fill)(void *ctx, void *dst), void *ctx)
{
	struct st_entry *e;
	int err = add_entry(w, name, dtype, n_dims, shape, n_bytes, &e);

	if (!err) {
		e->fill = fill;
		e->ctx = ctx;
	}
	return err;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct st_entry *x = a, *y = b;

	if (elem_bytes(x->dtype) != elem_bytes(y->dtype))
		return elem_bytes(x->dtype) > elem_bytes(y->dtype) ? -1 : 1;
	return strcmp(x->name, y->name);
}

static cJSON *u64_array(const uint64_t *v, uint32_t n)
{
	cJSON *a = cJSON_CreateArray();
	char num[32];

	for (uint32_t i = 0; a && i < n; i++) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)v[i]);
		if (!cJSON_AddItemToArray(a, cJSON_CreateRaw(num))) {
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

static cJSON *entry_json(const struct st_entry *e, uint64_t begin)
{
	uint64_t offs[2] = {begin, begin + e->n_bytes};
	cJSON *j = cJSON_CreateObject();

	if (!j ||
	    !cJSON_AddStringToObject(j, "dtype", dtype_to_name(e->dtype)) ||
	    !cJSON_AddItemToObject(j, "shape",
				   u64_array(e->shape, e->n_dims)) ||
	    !cJSON_AddItemToObject(j, "data_offsets", u64_array(offs, 2))) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* The header text, unpadded; NULL when out of memory. */
static char *header_json(const struct o1_safetensors_writer *w)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
	uint64_t off = 0;
	char *text = NULL;

	if (!meta || !cJSON_AddStringToObject(meta, "format", "pt"))
		goto out;
	for (uint32_t i = 0; i < w->n; i++) {
		cJSON *j = entry_json(&w->entries[i], off);

		if (!cJSON_AddItemToObject(root, w->entries[i].name, j))
			goto out;
		off += w->entries[i].n_bytes;
	}
	text = cJSON_PrintUnformatted(root);
out:
	cJSON_Delete(root);
	return text;
}

static int check_writer_names(const struct o1_safetensors_writer *w)
{
	for (uint32_t i = 1; i < w->n; i++) {
		if (strcmp(w->entries[i - 1].name, w->entries[i].name) == 0) {
			o1_err("safetensors writer: tensor \"%s\" added twice",
			       w->entries[i].name);
			return -EINVAL;
		}
	}
	return 0;
}

static int write_all(FILE *f, const void *p, uint64_t n)
{
	return n == 0 || fwrite(p, 1, n, f) == n ? 0 : -EIO;
}

static int write_entry(const struct st_entry *e, FILE *f)
{
	void *buf;
	int err;

	if (!e->fill)
		return write_all(f, e->data, e->n_bytes);
	buf = malloc(e->n_bytes ? e->n_bytes : 1);
	if (!buf)
		return -ENOMEM;
	err = e->fill(e->ctx, buf);
	if (!err)
		err = write_all(f, buf, e->n_bytes);
	free(buf);
	return err;
}

static int write_body(const struct o1_safetensors_writer *w, const char *hdr,
		      FILE *f)
{
	uint64_t len = strlen(hdr), padded = (len + 7) & ~7ull, le;
	static const char spaces[8] = "        ";
	int err;

	le = htole64(padded);
	err = write_all(f, &le, 8);
	if (!err)
		err = write_all(f, hdr, len);
	if (!err)
		err = write_all(f, spaces, padded - len);
	for (uint32_t i = 0; !err && i < w->n; i++)
		err = write_entry(&w->entries[i], f);
	return err;
}

int o1_safetensors_writer_write(struct o1_safetensors_writer *w,
				const char *path)
{
	char tmp[PATH_MAX];
	char *hdr = NULL;
	FILE *f = NULL;
	int err;

	qsort(w->entries, w->n, sizeof(*w->entries), cmp_entry);
	err = check_writer_names(w);
	if (err)
		return err;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	hdr = header_json(w);
	if (!hdr)
		return -ENOMEM;
	f = fopen(tmp, "wb");
	if (!f) {
		err = -errno;
		o1_err("safetensors writer: %s: %s", tmp, strerror(errno));
		goto out_free;
	}
	err = write_body(w, hdr, f);
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) != 0)
		err = -errno;
	if (err) {
		o1_err("safetensors writer: %s: %s", path, o1_strerror(err));
		unlink(tmp);
	}
out_free:
	free(hdr);
	return err;
}

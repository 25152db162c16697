/* gguf.c: a hand-built image (byte by byte) and its malformations, each
 * of which must fail with the right error; every value type through the
 * writer and back; tensor placement and alignment. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "model/gguf.h"
#include "tests/common/test_util.h"

/* A growable byte image. */
struct img {
	uint8_t b[4096];
	size_t len;
};

static size_t put(struct img *m, const void *p, size_t n)
{
	size_t at = m->len;

	assert_true(m->len + n <= sizeof(m->b));
	memcpy(m->b + m->len, p, n);
	m->len += n;
	return at;
}

static size_t put_u32(struct img *m, uint32_t v)
{
	return put(m, &v, 4);
}

static size_t put_u64(struct img *m, uint64_t v)
{
	return put(m, &v, 8);
}

static size_t put_str(struct img *m, const char *s)
{
	size_t at = put_u64(m, strlen(s));

	put(m, s, strlen(s));
	return at;
}

static void set_u32(struct img *m, size_t at, uint32_t v)
{
	memcpy(m->b + at, &v, 4);
}

static void set_u64(struct img *m, size_t at, uint64_t v)
{
	memcpy(m->b + at, &v, 8);
}

/* Offsets of the fields the malformation tests patch. */
struct fields {
	size_t version, n_tensors, n_kv, key0_len, align_val, str_len;
	size_t arr_count, t0_name, t0_ndims, t0_ne0, t0_ne1, t0_type;
	size_t t0_off, t1_name, t1_off, infos_end, data_start;
};

/* A valid v3 image: 3 keys (alignment u32 32, a string, an array of 3
 * u16), 2 tensors ("a" F32 [4,2] at 0, "b" F16 [8] at 32), data last. */
static void build(struct img *m, struct fields *f)
{
	m->len = 0;
	put_u32(m, 0x46554747);
	f->version = put_u32(m, 3);
	f->n_tensors = put_u64(m, 2);
	f->n_kv = put_u64(m, 3);
	f->key0_len = put_str(m, "general.alignment");
	put_u32(m, O1_GGUF_UINT32);
	f->align_val = put_u32(m, 32);
	put_str(m, "s");
	put_u32(m, O1_GGUF_STRING);
	f->str_len = put_str(m, "hello");
	put_str(m, "arr");
	put_u32(m, O1_GGUF_ARRAY);
	put_u32(m, O1_GGUF_UINT16);
	f->arr_count = put_u64(m, 3);
	put(m, "\x01\x00\x02\x00\x03\x00", 6);
	f->t0_name = put_str(m, "a");
	f->t0_ndims = put_u32(m, 2);
	f->t0_ne0 = put_u64(m, 4);
	f->t0_ne1 = put_u64(m, 2);
	f->t0_type = put_u32(m, O1_DTYPE_F32);
	f->t0_off = put_u64(m, 0);
	f->t1_name = put_str(m, "b");
	put_u32(m, 1);
	put_u64(m, 8);
	put_u32(m, O1_DTYPE_F16);
	f->t1_off = put_u64(m, 32);
	f->infos_end = m->len;
	while (m->len % 32)
		put(m, "", 1);
	f->data_start = m->len;
	for (int i = 0; i < 8; i++) {
		float v = (float)i;

		put(m, &v, 4);
	}
	for (int i = 0; i < 8; i++)
		put(m, "\x00\x3c", 2); /* 1.0 in F16 */
}

static int open_img(const struct img *m, size_t len)
{
	struct o1_gguf *g = NULL;
	int err = o1_gguf_open_memory(m->b, len, &g);

	o1_gguf_close(g);
	return err;
}

static void test_valid(void **state)
{
	struct img m;
	struct fields f;
	struct o1_gguf *g;
	const struct o1_gguf_tensor_info *t;
	struct o1_gguf_str s;
	enum o1_gguf_type et;
	uint64_t n;
	const void *data;
	uint16_t u16[3];

	(void)state;
	build(&m, &f);
	assert_int_equal(o1_gguf_open_memory(m.b, m.len, &g), 0);
	assert_int_equal(o1_gguf_version(g), 3);
	assert_int_equal(o1_gguf_alignment(g), 32);
	assert_int_equal(o1_gguf_n_kv(g), 3);
	assert_int_equal(o1_gguf_find_key(g, "arr"), 2);
	assert_int_equal(o1_gguf_find_key(g, "ar"), -O1_E_MISSING);
	assert_int_equal(o1_gguf_kv_type(g, 1), O1_GGUF_STRING);
	s = o1_gguf_key(g, 1);
	assert_int_equal(s.len, 1);
	assert_int_equal(o1_gguf_get_str(g, "s", &s), 0);
	assert_int_equal(s.len, 5);
	assert_memory_equal(s.ptr, "hello", 5);
	assert_int_equal(o1_gguf_get_arr(g, "arr", &et, &n), 0);
	assert_int_equal(et, O1_GGUF_UINT16);
	assert_int_equal(n, 3);
	assert_int_equal(o1_gguf_arr_data(g, "arr", &data), 0);
	memcpy(u16, data, 6);
	assert_int_equal(u16[2], 3);
	assert_int_equal(o1_gguf_n_tensors(g), 2);
	t = o1_gguf_find_tensor(g, "b");
	assert_non_null(t);
	assert_ptr_equal(t, o1_gguf_tensor(g, 1));
	assert_int_equal(t->type, O1_DTYPE_F16);
	assert_int_equal(t->n_bytes, 16);
	assert_ptr_equal(t->data, (const uint8_t *)m.b + f.data_start + 32);
	t = o1_gguf_tensor(g, 0);
	assert_int_equal(t->n_dims, 2);
	assert_int_equal(t->ne[1], 2);
	assert_int_equal(t->ne[2], 1);
	assert_int_equal(t->n_bytes, 32);
	assert_null(o1_gguf_find_tensor(g, "c"));
	assert_null(o1_gguf_tensor(g, 2));
	o1_gguf_close(g);
	set_u32(&m, f.version, 2);
	assert_int_equal(open_img(&m, m.len), 0);
}

/* Every cut before the end fails: header and metadata cuts as malformed,
 * cuts inside tensor data as out of bounds. */
static void test_truncated(void **state)
{
	struct img m;
	struct fields f;

	(void)state;
	build(&m, &f);
	assert_true(f.infos_end < f.data_start); /* some padding */
	for (size_t cut = 0; cut < m.len; cut++)
		assert_int_equal(open_img(&m, cut), cut < f.infos_end
							? -O1_E_FORMAT
							: -O1_E_BOUNDS);
}

static void test_header(void **state)
{
	struct img m;
	struct fields f;

	(void)state;
	build(&m, &f);
	m.b[0] = 'X';
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u32(&m, f.version, 1);
	assert_int_equal(open_img(&m, m.len), -O1_E_VERSION);
	set_u32(&m, f.version, 4);
	assert_int_equal(open_img(&m, m.len), -O1_E_VERSION);
	set_u32(&m, f.version, 0x03000000); /* big-endian v3 */
	assert_int_equal(open_img(&m, m.len), -O1_E_VERSION);
	build(&m, &f);
	set_u64(&m, f.n_tensors, UINT64_MAX);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	set_u64(&m, f.n_tensors, 1ull << 40);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u64(&m, f.n_kv, UINT64_MAX / 2);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	set_u64(&m, f.n_kv, 1000);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	assert_int_equal(open_img(&m, 0), -O1_E_FORMAT);
}

static void test_strings_arrays(void **state)
{
	struct img m;
	struct fields f;

	(void)state;
	build(&m, &f);
	set_u64(&m, f.key0_len, 1ull << 40);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	set_u64(&m, f.key0_len, UINT64_MAX);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u64(&m, f.str_len, m.len);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u64(&m, f.arr_count, UINT64_MAX / 2 + 2); /* x2 wraps */
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	set_u64(&m, f.arr_count, 1ull << 62);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u32(&m, f.arr_count - 4, 13); /* element type */
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u32(&m, f.str_len - 4, 99); /* value type */
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
}

static void test_alignment(void **state)
{
	static const uint32_t bad[] = {0, 3, 48, 0x80000001};
	struct img m;
	struct fields f;
	struct o1_gguf *g;

	(void)state;
	build(&m, &f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		set_u32(&m, f.align_val, bad[i]);
		assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	}
	/* alignment 16: data starts at the next multiple of 16, and the
	 * tensor offsets (0, 32) are still multiples */
	set_u32(&m, f.align_val, 16);
	assert_int_equal(o1_gguf_open_memory(m.b, m.len, &g), 0);
	assert_int_equal(o1_gguf_alignment(g), 16);
	o1_gguf_close(g);
	set_u32(&m, f.align_val, 64); /* offset 32 now misaligned */
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u32(&m, f.align_val - 4, O1_GGUF_FLOAT32); /* wrong type */
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
}

static void test_tensor_infos(void **state)
{
	struct img m;
	struct fields f;

	(void)state;
	build(&m, &f);
	set_u64(&m, f.t1_off, 64);
	assert_int_equal(open_img(&m, m.len), -O1_E_BOUNDS);
	set_u64(&m, f.t1_off, UINT64_MAX - 31);
	assert_int_equal(open_img(&m, m.len), -O1_E_BOUNDS);
	set_u64(&m, f.t1_off, 36);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u64(&m, f.t0_ne0, 1ull << 40);
	set_u64(&m, f.t0_ne1, 1ull << 40);
	assert_int_equal(open_img(&m, m.len), -EOVERFLOW);
	set_u64(&m, f.t0_ne0, 1ull << 62);
	set_u64(&m, f.t0_ne1, 1);
	assert_int_equal(open_img(&m, m.len), -EOVERFLOW); /* bytes */
	build(&m, &f);
	set_u64(&m, f.t0_ne1, 0);
	assert_int_equal(open_img(&m, m.len), -O1_E_SHAPE);
	build(&m, &f);
	set_u32(&m, f.t0_ndims, 5);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	set_u32(&m, f.t0_ndims, 0);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u32(&m, f.t0_type, 3); /* Q4_1: valid GGUF, not ours */
	assert_int_equal(open_img(&m, m.len), -O1_E_UNSUPPORTED);
	set_u32(&m, f.t0_type, 0xffffffff);
	assert_int_equal(open_img(&m, m.len), -O1_E_UNSUPPORTED);
	set_u32(&m, f.t0_type, O1_DTYPE_Q8_0); /* ne0 = 4: not a block */
	assert_int_equal(open_img(&m, m.len), -O1_E_SHAPE);
	build(&m, &f);
	m.b[f.t1_name + 8] = 'a'; /* both tensors named "a" */
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	build(&m, &f);
	set_u64(&m, f.t0_name, O1_GGUF_MAX_NAME + 1);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
}

static void test_duplicate_key(void **state)
{
	struct img m;

	(void)state;
	m.len = 0;
	put_u32(&m, 0x46554747);
	put_u32(&m, 3);
	put_u64(&m, 0);
	put_u64(&m, 2);
	put_str(&m, "k");
	put_u32(&m, O1_GGUF_UINT8);
	put(&m, "\x01", 1);
	put_str(&m, "k");
	put_u32(&m, O1_GGUF_INT8);
	put(&m, "\x02", 1);
	assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
	m.b[m.len - 1 - 4 - 1] = 'j';
	assert_int_equal(open_img(&m, m.len), 0);
}

/* Nested arrays: two levels read and skip; deeper than the limit fails. */
static void test_nested(void **state)
{
	struct img m;
	struct o1_gguf *g;
	enum o1_gguf_type et;
	uint64_t n;
	const void *d;

	(void)state;
	for (int depth = 1; depth <= O1_GGUF_MAX_DEPTH + 1; depth++) {
		m.len = 0;
		put_u32(&m, 0x46554747);
		put_u32(&m, 3);
		put_u64(&m, 0);
		put_u64(&m, 2);
		put_str(&m, "nest");
		put_u32(&m, O1_GGUF_ARRAY);
		for (int l = 1; l < depth; l++) {
			put_u32(&m, O1_GGUF_ARRAY);
			put_u64(&m, 1);
		}
		put_u32(&m, O1_GGUF_STRING);
		put_u64(&m, 2);
		put_str(&m, "x");
		put_str(&m, "yz");
		put_str(&m, "after");
		put_u32(&m, O1_GGUF_BOOL);
		put(&m, "\x01", 1);
		if (depth > O1_GGUF_MAX_DEPTH) {
			assert_int_equal(open_img(&m, m.len), -O1_E_FORMAT);
			continue;
		}
		assert_int_equal(o1_gguf_open_memory(m.b, m.len, &g), 0);
		assert_int_equal(o1_gguf_get_arr(g, "nest", &et, &n), 0);
		assert_int_equal(et,
				 depth == 1 ? O1_GGUF_STRING : O1_GGUF_ARRAY);
		assert_int_equal(n, depth == 1 ? 2 : 1);
		assert_int_equal(o1_gguf_arr_data(g, "nest", &d), -O1_E_FORMAT);
		assert_int_equal(o1_gguf_find_key(g, "after"), 1);
		o1_gguf_close(g);
	}
}

static void set_all_types(struct o1_gguf_writer *w)
{
	const uint8_t u8 = 250;
	const int8_t i8 = -100;
	const uint16_t u16 = 65000;
	const int16_t i16 = -30000;
	const uint64_t u64 = UINT64_MAX;
	const int64_t i64 = INT64_MIN;
	const double f64 = 1.0 / 3;
	const float f32s[3] = {1.5f, -2.25f, 1e30f};
	const int32_t i32s[2] = {-7, 7};
	const char *strs[3] = {"one", "", "three \xe2\x96\x81"};

	assert_int_equal(o1_gguf_writer_set_val(w, "u8", O1_GGUF_UINT8, &u8),
			 0);
	assert_int_equal(o1_gguf_writer_set_val(w, "i8", O1_GGUF_INT8, &i8), 0);
	assert_int_equal(o1_gguf_writer_set_val(w, "u16", O1_GGUF_UINT16, &u16),
			 0);
	assert_int_equal(o1_gguf_writer_set_val(w, "i16", O1_GGUF_INT16, &i16),
			 0);
	assert_int_equal(o1_gguf_writer_set_u32(w, "u32", 4000000000u), 0);
	assert_int_equal(o1_gguf_writer_set_i32(w, "i32", -5), 0);
	assert_int_equal(o1_gguf_writer_set_f32(w, "f32", 0.1f), 0);
	assert_int_equal(o1_gguf_writer_set_bool(w, "bool", true), 0);
	assert_int_equal(o1_gguf_writer_set_str(w, "str", "text"), 0);
	assert_int_equal(o1_gguf_writer_set_val(w, "u64", O1_GGUF_UINT64, &u64),
			 0);
	assert_int_equal(o1_gguf_writer_set_val(w, "i64", O1_GGUF_INT64, &i64),
			 0);
	assert_int_equal(
	    o1_gguf_writer_set_val(w, "f64", O1_GGUF_FLOAT64, &f64), 0);
	assert_int_equal(
	    o1_gguf_writer_set_arr(w, "af32", O1_GGUF_FLOAT32, f32s, 3), 0);
	assert_int_equal(
	    o1_gguf_writer_set_arr(w, "ai32", O1_GGUF_INT32, i32s, 2), 0);
	assert_int_equal(
	    o1_gguf_writer_set_arr(w, "astr", O1_GGUF_STRING, strs, 3), 0);
	assert_int_equal(
	    o1_gguf_writer_set_arr(w, "empty", O1_GGUF_UINT8, NULL, 0), 0);
	assert_int_equal(o1_gguf_writer_set_str(w, "str", "replaced"), 0);
}

static void check_all_types(const struct o1_gguf *g)
{
	int64_t i;
	uint32_t u;
	float f;
	double d;
	bool b;
	struct o1_gguf_str s;
	enum o1_gguf_type et;
	uint64_t n;
	const void *data;
	float f32s[3];

	assert_int_equal(o1_gguf_n_kv(g), 16);
	assert_int_equal(o1_gguf_get_u32(g, "u8", &u), 0);
	assert_int_equal(u, 250);
	assert_int_equal(o1_gguf_get_i64(g, "i8", &i), 0);
	assert_int_equal(i, -100);
	assert_int_equal(o1_gguf_get_u32(g, "u16", &u), 0);
	assert_int_equal(u, 65000);
	assert_int_equal(o1_gguf_get_i64(g, "i16", &i), 0);
	assert_int_equal(i, -30000);
	assert_int_equal(o1_gguf_get_u32(g, "u32", &u), 0);
	assert_int_equal(u, 4000000000u);
	assert_int_equal(o1_gguf_get_i64(g, "i32", &i), 0);
	assert_int_equal(i, -5);
	assert_int_equal(o1_gguf_get_u32(g, "i32", &u), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_get_f32(g, "f32", &f), 0);
	assert_true(f == 0.1f);
	assert_int_equal(o1_gguf_get_bool(g, "bool", &b), 0);
	assert_true(b);
	assert_int_equal(o1_gguf_get_str(g, "str", &s), 0);
	assert_int_equal(s.len, 8);
	assert_memory_equal(s.ptr, "replaced", 8);
	assert_int_equal(o1_gguf_get_i64(g, "u64", &i), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_get_u32(g, "u64", &u), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_kv_type(g, o1_gguf_find_key(g, "u64")),
			 O1_GGUF_UINT64);
	assert_int_equal(o1_gguf_get_i64(g, "i64", &i), 0);
	assert_true(i == INT64_MIN);
	assert_int_equal(o1_gguf_get_f64(g, "f64", &d), 0);
	assert_true(d == 1.0 / 3);
	assert_int_equal(o1_gguf_get_arr(g, "af32", &et, &n), 0);
	assert_int_equal(et, O1_GGUF_FLOAT32);
	assert_int_equal(n, 3);
	assert_int_equal(o1_gguf_arr_data(g, "af32", &data), 0);
	memcpy(f32s, data, sizeof(f32s));
	assert_true(f32s[2] == 1e30f);
	assert_int_equal(o1_gguf_arr_str(g, "astr", 2, &s), 0);
	assert_int_equal(s.len, 9);
	assert_memory_equal(s.ptr, "three \xe2\x96\x81", 9);
	assert_int_equal(o1_gguf_arr_str(g, "astr", 1, &s), 0);
	assert_int_equal(s.len, 0);
	assert_int_equal(o1_gguf_arr_str(g, "astr", 3, &s), -O1_E_BOUNDS);
	assert_int_equal(o1_gguf_arr_str(g, "af32", 0, &s), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_get_arr(g, "empty", &et, &n), 0);
	assert_int_equal(n, 0);
	/* type mismatches and absent keys */
	assert_int_equal(o1_gguf_get_str(g, "u8", &s), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_get_bool(g, "u8", &b), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_get_f32(g, "u8", &f), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_get_u32(g, "str", &u), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_get_arr(g, "str", &et, &n), -O1_E_FORMAT);
	assert_int_equal(o1_gguf_get_u32(g, "nope", &u), -O1_E_MISSING);
}

static void add_tensors(struct o1_gguf_writer *w, const float *f32,
			const uint8_t *q8)
{
	const uint64_t ne_a[4] = {3, 5}, ne_q[4] = {32, 2};

	assert_int_equal(
	    o1_gguf_writer_add_tensor(w, "a", O1_DTYPE_F32, 2, ne_a, f32, 60),
	    0);
	assert_int_equal(
	    o1_gguf_writer_add_tensor(w, "q", O1_DTYPE_Q8_0, 2, ne_q, q8, 68),
	    0);
	assert_int_equal(
	    o1_gguf_writer_add_tensor(w, "a", O1_DTYPE_F32, 2, ne_a, f32, 60),
	    -EEXIST);
	assert_int_equal(
	    o1_gguf_writer_add_tensor(w, "bad", O1_DTYPE_F32, 2, ne_a, f32, 56),
	    -O1_E_SHAPE);
	assert_int_equal(o1_gguf_writer_add_tensor(w, "bad", O1_DTYPE_Q8_0, 2,
						   ne_a, f32, 60),
			 -O1_E_SHAPE);
	assert_int_equal(
	    o1_gguf_writer_add_tensor(w, "bad", O1_DTYPE_F32, 5, ne_a, f32, 60),
	    -EINVAL);
}

static void test_writer_round_trip(void **state)
{
	struct o1_gguf_writer *w;
	struct o1_gguf *g;
	const struct o1_gguf_tensor_info *t;
	char path[64];
	float f32[15];
	uint8_t q8[68];

	(void)state;
	for (int i = 0; i < 15; i++)
		f32[i] = (float)i * 0.5f - 3;
	for (int i = 0; i < 68; i++)
		q8[i] = (uint8_t)(i * 37);
	o1_test_file_make(path, sizeof(path), "gguf");
	assert_int_equal(o1_gguf_writer_create(&w), 0);
	set_all_types(w);
	add_tensors(w, f32, q8);
	assert_int_equal(o1_gguf_writer_write(w, path), 0);
	o1_gguf_writer_destroy(w);
	assert_int_equal(o1_gguf_open(path, &g), 0);
	check_all_types(g);
	assert_int_equal(o1_gguf_version(g), 3);
	assert_int_equal(o1_gguf_n_tensors(g), 2);
	t = o1_gguf_find_tensor(g, "a");
	assert_int_equal(t->ne[0], 3);
	assert_int_equal(t->ne[1], 5);
	assert_memory_equal(t->data, f32, 60);
	t = o1_gguf_find_tensor(g, "q");
	assert_int_equal(t->type, O1_DTYPE_Q8_0);
	assert_int_equal(t->offset % 32, 0);
	assert_memory_equal(t->data, q8, 68);
	o1_gguf_close(g);
	unlink(path);
}

/* general.alignment set by the caller is honoured by the writer. */
static void test_writer_alignment(void **state)
{
	struct o1_gguf_writer *w;
	struct o1_gguf *g;
	const uint64_t ne[4] = {3};
	const float v[3] = {1, 2, 3};
	char path[64];

	(void)state;
	o1_test_file_make(path, sizeof(path), "gguf");
	assert_int_equal(o1_gguf_writer_create(&w), 0);
	assert_int_equal(o1_gguf_writer_set_u32(w, "general.alignment", 256),
			 0);
	assert_int_equal(
	    o1_gguf_writer_add_tensor(w, "x", O1_DTYPE_F32, 1, ne, v, 12), 0);
	assert_int_equal(
	    o1_gguf_writer_add_tensor(w, "y", O1_DTYPE_F32, 1, ne, v, 12), 0);
	assert_int_equal(o1_gguf_writer_write(w, path), 0);
	o1_gguf_writer_destroy(w);
	assert_int_equal(o1_gguf_open(path, &g), 0);
	assert_int_equal(o1_gguf_alignment(g), 256);
	assert_int_equal(o1_gguf_find_tensor(g, "y")->offset, 256);
	assert_int_equal(((const uint8_t *)o1_gguf_find_tensor(g, "x")->data -
			  (const uint8_t *)o1_gguf_find_tensor(g, "y")->data) %
			     256,
			 0);
	o1_gguf_close(g);
	unlink(path);
}

static void test_open_errors(void **state)
{
	const char *strs[3] = {"a", NULL, "c"};
	struct o1_gguf *g;
	struct o1_gguf_writer *w;
	char path[64];
	FILE *f;

	(void)state;
	assert_int_equal(o1_gguf_open("/nonexistent/x.gguf", &g), -ENOENT);
	o1_test_file_make(path, sizeof(path), "gguf");
	assert_int_equal(o1_gguf_open(path, &g), -O1_E_FORMAT); /* empty */
	f = fopen(path, "wb");
	fwrite("GGUF\x01\x00\x00\x00", 1, 8, f);
	fclose(f);
	assert_int_equal(o1_gguf_open(path, &g), -O1_E_VERSION);
	unlink(path);
	assert_int_equal(o1_gguf_writer_create(&w), 0);
	assert_int_equal(o1_gguf_writer_write(w, "/nonexistent/dir/x.gguf"),
			 -ENOENT);
	assert_int_equal(o1_gguf_writer_set_val(w, "k", O1_GGUF_STRING, "x"),
			 -EINVAL);
	assert_int_equal(o1_gguf_writer_set_arr(w, "k", O1_GGUF_ARRAY, NULL, 0),
			 -EINVAL);
	assert_int_equal(o1_gguf_writer_set_str(w, "k", NULL), -EINVAL);
	o1_gguf_writer_destroy(w);
	/* a string array with a NULL element fails and poisons the writer */
	assert_int_equal(o1_gguf_writer_create(&w), 0);
	assert_int_equal(
	    o1_gguf_writer_set_arr(w, "k", O1_GGUF_STRING, strs, 3), -EINVAL);
	o1_test_file_make(path, sizeof(path), "gguf");
	unlink(path);
	assert_int_equal(o1_gguf_writer_write(w, path), -EINVAL);
	assert_int_equal(access(path, F_OK), -1);
	o1_gguf_writer_destroy(w);
	o1_gguf_writer_destroy(NULL);
	o1_gguf_close(NULL);
}

/* Every allocation of open_memory failing in turn gives -ENOMEM (and no
 * leak under ASan) until the budget suffices. */
static void test_open_enomem(void **state)
{
	struct img m;
	struct fields f;
	struct o1_gguf *g;
	long k;
	int err;

	(void)state;
	build(&m, &f);
	for (k = 0;; k++) {
		o1_test_alloc_fail_at(k);
		err = o1_gguf_open_memory(m.b, m.len, &g);
		o1_test_alloc_fail_at(-1);
		if (err == 0)
			break;
		assert_int_equal(err, -ENOMEM);
	}
	assert_true(k >= 4); /* struct, kvs, string offsets, tensors... */
	assert_int_equal(o1_gguf_n_tensors(g), 2);
	o1_gguf_close(g);
}

/* The same for a writer built and written with allocations failing. */
static int write_with_budget(long k, const char *path)
{
	struct o1_gguf_writer *w = NULL;
	const char *strs[2] = {"x", "y"};
	const uint64_t ne[4] = {2};
	const float v[2] = {1, 2};
	int err;

	o1_test_alloc_fail_at(k);
	err = o1_gguf_writer_create(&w);
	if (!err)
		err = o1_gguf_writer_set_str(w, "s", "value");
	if (!err)
		err = o1_gguf_writer_set_arr(w, "a", O1_GGUF_STRING, strs, 2);
	if (!err)
		err = o1_gguf_writer_set_arr(w, "f", O1_GGUF_FLOAT32, v, 2);
	if (!err)
		err = o1_gguf_writer_add_tensor(w, "t", O1_DTYPE_F32, 1, ne, v,
						8);
	if (!err || w)
		err = err ? err : o1_gguf_writer_write(w, path);
	o1_test_alloc_fail_at(-1);
	o1_gguf_writer_destroy(w);
	return err;
}

static void test_writer_enomem(void **state)
{
	struct o1_gguf *g;
	char path[64];
	long k;
	int err;

	(void)state;
	o1_test_file_make(path, sizeof(path), "gguf");
	for (k = 0; (err = write_with_budget(k, path)) != 0; k++)
		assert_int_equal(err, -ENOMEM);
	assert_true(k >= 6);
	assert_int_equal(o1_gguf_open(path, &g), 0);
	assert_int_equal(o1_gguf_n_kv(g), 3);
	o1_gguf_close(g);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_header),
	    cmocka_unit_test(test_strings_arrays),
	    cmocka_unit_test(test_alignment),
	    cmocka_unit_test(test_tensor_infos),
	    cmocka_unit_test(test_duplicate_key),
	    cmocka_unit_test(test_nested),
	    cmocka_unit_test(test_writer_round_trip),
	    cmocka_unit_test(test_writer_alignment),
	    cmocka_unit_test(test_open_errors),
	    cmocka_unit_test(test_open_enomem),
	    cmocka_unit_test(test_writer_enomem),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

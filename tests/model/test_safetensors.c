/* safetensors reader, folder sets and writer: valid files parse to the
 * right tensors, every malformation maps to its error, shards load through
 * the index, hostile shard names are refused, writer output reads back
 * byte for byte. */
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
#include "model/safetensors.h"
#include "tests/common/test_util.h"

/* A safetensors image: header HDR then DATA_LEN bytes of pattern. */
static uint8_t *image(const char *hdr, size_t data_len, size_t *size)
{
	uint64_t n = strlen(hdr);
	uint8_t *buf = malloc(8 + n + data_len + 1);

	assert_non_null(buf);
	memcpy(buf, &n, 8); /* tests run on little-endian hosts */
	memcpy(buf + 8, hdr, n);
	for (size_t i = 0; i < data_len; i++)
		buf[8 + n + i] = (uint8_t)(i * 7 + 1);
	*size = 8 + n + data_len;
	return buf;
}

static int open_hdr(const char *hdr, size_t data_len)
{
	struct o1_safetensors *st = NULL;
	size_t size;
	uint8_t *buf = image(hdr, data_len, &size);
	int err = o1_safetensors_open_memory(buf, size, &st);

	if (err == 0)
		o1_safetensors_close(st);
	free(buf);
	return err;
}

static void test_valid(void **state)
{
	const char *hdr =
	    "{\"__metadata__\":{\"format\":\"pt\"},"
	    "\"b\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[24,36]}"
	    ","
	    "\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]},"
	    "\"e\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[36,36]"
	    "},"
	    "\"s\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[36,38]}} "
	    "  ";
	struct o1_safetensors *st;
	const struct o1_st_tensor *t;
	size_t size;
	uint8_t *buf = image(hdr, 38, &size);
	uint64_t hlen;

	(void)state;
	memcpy(&hlen, buf, 8);
	assert_int_equal(o1_safetensors_open_memory(buf, size, &st), 0);
	assert_int_equal(o1_safetensors_n_tensors(st), 4);
	t = o1_safetensors_find(st, "b");
	assert_non_null(t);
	assert_int_equal(t->dtype, O1_DTYPE_F16);
	assert_int_equal(t->n_dims, 2);
	assert_int_equal(t->shape[0], 2);
	assert_int_equal(t->shape[1], 3);
	assert_int_equal(t->n_bytes, 12);
	assert_ptr_equal(t->data, buf + 8 + hlen + 24);
	t = o1_safetensors_find(st, "a");
	assert_int_equal(t->dtype, O1_DTYPE_F32);
	assert_ptr_equal(t->data, buf + 8 + hlen);
	t = o1_safetensors_find(st, "s");
	assert_int_equal(t->n_dims, 0);
	assert_int_equal(t->n_bytes, 2);
	assert_int_equal(o1_safetensors_find(st, "e")->n_bytes, 0);
	assert_null(o1_safetensors_find(st, "c"));
	assert_string_equal(o1_safetensors_tensor(st, 0)->name, "b");
	assert_null(o1_safetensors_tensor(st, 4));
	o1_safetensors_close(st);
	free(buf);
}

#define T1 "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static void test_header_errors(void **state)
{
	struct o1_safetensors *st;
	uint8_t small[7] = {0};
	size_t size;
	uint8_t *buf;
	uint64_t huge = O1_ST_MAX_HEADER_BYTES + 8;

	(void)state;
	assert_int_equal(o1_safetensors_open_memory(small, 7, &st),
			 -O1_E_FORMAT);
	buf = image(T1 "}", 8, &size);
	for (size_t cut = 8; cut < size - 8; cut += 5) /* header past EOF */
		assert_int_equal(o1_safetensors_open_memory(buf, cut, &st),
				 -O1_E_BOUNDS);
	assert_int_equal(o1_safetensors_open_memory(buf, size - 1, &st),
			 -O1_E_BOUNDS); /* data truncated */
	memcpy(buf, &huge, 8);
	assert_int_equal(o1_safetensors_open_memory(buf, size, &st),
			 -O1_E_BOUNDS);
	free(buf);
	assert_int_equal(open_hdr(T1, 8), -O1_E_FORMAT);      /* cut JSON */
	assert_int_equal(open_hdr(T1 "}x", 8), -O1_E_FORMAT); /* trailing */
	assert_int_equal(open_hdr("[1,2]", 0), -O1_E_FORMAT);
	assert_int_equal(open_hdr("", 0), -O1_E_FORMAT);
	assert_int_equal(open_hdr(" {}", 0), -O1_E_FORMAT);
	assert_int_equal(open_hdr("{}", 0), 0);
	assert_int_equal(open_hdr(T1 "} \n", 8), 0);
	assert_int_equal(open_hdr(T1 ",\"__metadata__\":{\"a\":1}}", 8),
			 -O1_E_FORMAT);
	assert_int_equal(open_hdr(T1 ",\"__metadata__\":[]}", 8), -O1_E_FORMAT);
}

static void test_tensor_errors(void **state)
{
	(void)state;
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"I64\",\"shape\":[1],"
				  "\"data_offsets\":[0,8]}}",
				  8),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],"
				  "\"data_offsets\":[0,1]}}",
				  8),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":32,\"shape\":[2],"
				  "\"data_offsets\":[0,8]}}",
				  8),
			 -O1_E_FORMAT);
	assert_int_equal(open_hdr("{\"t\":[1]}", 8), -O1_E_FORMAT);
	/* shape: missing, negative, fractional, too many dims, overflow */
	assert_int_equal(
	    open_hdr("{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8),
	    -O1_E_FORMAT);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],"
				  "\"data_offsets\":[0,8]}}",
				  8),
			 -O1_E_FORMAT);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],"
				  "\"data_offsets\":[0,8]}}",
				  8),
			 -O1_E_FORMAT);
	assert_int_equal(
	    open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,"
		     "2],\"data_offsets\":[0,8]}}",
		     8),
	    -O1_E_FORMAT);
	assert_int_equal(
	    open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,"
		     "4294967296],\"data_offsets\":[0,8]}}",
		     8),
	    -O1_E_BOUNDS);
	/* offsets: missing, out of range, reversed, size mismatch */
	assert_int_equal(
	    open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8),
	    -O1_E_FORMAT);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
				  "\"data_offsets\":[0,8,9]}}",
				  8),
			 -O1_E_FORMAT);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
				  "\"data_offsets\":[4,12]}}",
				  8),
			 -O1_E_BOUNDS);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[0],"
				  "\"data_offsets\":[8,4]}}",
				  8),
			 -O1_E_BOUNDS);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],"
				  "\"data_offsets\":[0,6]}}",
				  8),
			 -O1_E_SHAPE);
	assert_int_equal(open_hdr("{\"t\":{\"dtype\":\"F16\",\"shape\":[2],"
				  "\"data_offsets\":[0,8]}}",
				  8),
			 -O1_E_SHAPE);
}

static void test_overlap_duplicate(void **state)
{
	(void)state;
	assert_int_equal(
	    open_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
		     "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\","
		     "\"shape\":[2],\"data_offsets\":[4,12]}}",
		     12),
	    -O1_E_FORMAT);
	assert_int_equal(
	    open_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],"
		     "\"data_offsets\":[0,12]},\"b\":{\"dtype\":\"F16\","
		     "\"shape\":[2],\"data_offsets\":[4,8]}}",
		     12),
	    -O1_E_FORMAT);
	assert_int_equal(
	    open_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
		     "\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\","
		     "\"shape\":[1],\"data_offsets\":[4,8]}}",
		     8),
	    -O1_E_FORMAT);
	assert_int_equal(
	    open_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
		     "\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\","
		     "\"shape\":[1],\"data_offsets\":[4,8]}}",
		     8),
	    0);
}

/* ---- files and folders ---- */

static char tmpdir[64];

static int make_tmpdir(void **state)
{
	(void)state;
	o1_test_dir_make(tmpdir, sizeof(tmpdir), "st");
	return 0;
}

static int remove_tmpdir(void **state)
{
	(void)state;
	return o1_test_dir_remove(tmpdir);
}

static float f32_data[12];
static uint16_t h16_data[6];

/* Writes shard NAME holding tensors NAMES (F32 [2,3] and F16 [6]). */
static void write_shard(const char *name, const char *t_f32, const char *t_f16)
{
	struct o1_safetensors_writer *w;
	uint64_t s2[2] = {2, 3}, s1[1] = {6};
	char path[4096];

	for (int i = 0; i < 12; i++)
		f32_data[i] = (float)i * 0.5f - 2;
	for (int i = 0; i < 6; i++)
		h16_data[i] = (uint16_t)(0x3c00 + i);
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	assert_int_equal(o1_safetensors_writer_create(&w), 0);
	if (t_f16)
		assert_int_equal(o1_safetensors_writer_add(w, t_f16,
							   O1_DTYPE_F16, 1, s1,
							   h16_data, 12),
				 0);
	assert_int_equal(o1_safetensors_writer_add(w, t_f32, O1_DTYPE_F32, 2,
						   s2, f32_data, 24),
			 0);
	assert_int_equal(o1_safetensors_writer_write(w, path), 0);
	o1_safetensors_writer_destroy(w);
}

static void test_writer_roundtrip(void **state)
{
	struct o1_safetensors *st;
	const struct o1_st_tensor *t;
	char path[4096], hdr[512];
	uint64_t hlen;
	FILE *f;

	(void)state;
	write_shard("w.safetensors", "z.weight", "a.weight");
	snprintf(path, sizeof(path), "%s/w.safetensors", tmpdir);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(&hlen, 1, 8, f), 8);
	assert_int_equal(hlen % 8, 0);
	assert_true(hlen < sizeof(hdr));
	assert_int_equal(fread(hdr, 1, hlen, f), hlen);
	fclose(f);
	hdr[hlen] = 0;
	assert_non_null(strstr(hdr, "{\"__metadata__\":{\"format\":\"pt\"},"));
	/* F32 first (alignment), then F16 */
	assert_true(strstr(hdr, "z.weight") < strstr(hdr, "a.weight"));
	assert_int_equal(o1_safetensors_open(path, &st), 0);
	t = o1_safetensors_find(st, "z.weight");
	assert_int_equal(t->dtype, O1_DTYPE_F32);
	assert_int_equal(t->n_dims, 2);
	assert_memory_equal(t->data, f32_data, 24);
	assert_int_equal((uintptr_t)t->data % 4, 0);
	t = o1_safetensors_find(st, "a.weight");
	assert_int_equal(t->dtype, O1_DTYPE_F16);
	assert_memory_equal(t->data, h16_data, 12);
	o1_safetensors_close(st);
}

static void test_writer_errors(void **state)
{
	struct o1_safetensors_writer *w;
	uint64_t shape[1] = {2};
	char path[4096];

	(void)state;
	snprintf(path, sizeof(path), "%s/bad.safetensors", tmpdir);
	assert_int_equal(o1_safetensors_writer_create(&w), 0);
	assert_int_equal(o1_safetensors_writer_add(w, "x", O1_DTYPE_F32, 1,
						   shape, f32_data, 4),
			 -EINVAL);
	assert_int_equal(o1_safetensors_writer_add(w, "x", O1_DTYPE_Q8_0, 1,
						   shape, f32_data, 8),
			 -EINVAL);
	assert_int_equal(o1_safetensors_writer_add(w, "x", O1_DTYPE_F32, 1,
						   shape, f32_data, 8),
			 0);
	assert_int_equal(o1_safetensors_writer_add(w, "x", O1_DTYPE_F32, 1,
						   shape, f32_data, 8),
			 0);
	assert_int_equal(o1_safetensors_writer_write(w, path), -EINVAL);
	assert_int_not_equal(access(path, F_OK), 0);
	o1_safetensors_writer_destroy(w);
}

static void test_file_errors(void **state)
{
	struct o1_safetensors *st;
	char path[4096];

	(void)state;
	snprintf(path, sizeof(path), "%s/missing.safetensors", tmpdir);
	assert_int_equal(o1_safetensors_open(path, &st), -ENOENT);
	o1_test_file_put(tmpdir, "empty.safetensors", "");
	snprintf(path, sizeof(path), "%s/empty.safetensors", tmpdir);
	assert_int_equal(o1_safetensors_open(path, &st), -O1_E_FORMAT);
}

static const char index_ok[] =
    "{\"metadata\":{\"total_size\":72},\"weight_map\":{"
    "\"l.0.w\":\"model-00001-of-00002.safetensors\","
    "\"l.0.b\":\"model-00001-of-00002.safetensors\","
    "\"l.1.w\":\"model-00002-of-00002.safetensors\"}}";

static void test_sharded(void **state)
{
	struct o1_safetensors_set *set;
	const struct o1_st_tensor *t;

	(void)state;
	write_shard("model-00001-of-00002.safetensors", "l.0.w", "l.0.b");
	write_shard("model-00002-of-00002.safetensors", "l.1.w", NULL);
	o1_test_file_put(tmpdir, "model.safetensors.index.json", index_ok);
	assert_int_equal(o1_safetensors_set_open(tmpdir, &set), 0);
	assert_int_equal(o1_safetensors_set_n_tensors(set), 3);
	t = o1_safetensors_set_find(set, "l.1.w");
	assert_non_null(t);
	assert_memory_equal(t->data, f32_data, 24);
	t = o1_safetensors_set_find(set, "l.0.b");
	assert_non_null(t);
	assert_memory_equal(t->data, h16_data, 12);
	assert_null(o1_safetensors_set_find(set, "l.2.w"));
	o1_safetensors_set_close(set);
}

static int open_index(const char *text)
{
	struct o1_safetensors_set *set;
	int err;

	o1_test_file_put(tmpdir, "model.safetensors.index.json", text);
	err = o1_safetensors_set_open(tmpdir, &set);
	if (!err)
		o1_safetensors_set_close(set);
	return err;
}

static void test_sharded_errors(void **state)
{
	(void)state;
	write_shard("a.safetensors", "x", NULL);
	write_shard("b.safetensors", "x", NULL);
	assert_int_equal(open_index("{\"weight_map\":{\"x\":\"../a."
				    "safetensors\"}}"),
			 -O1_E_FORMAT);
	assert_int_equal(open_index("{\"weight_map\":{\"x\":\"/tmp/a."
				    "safetensors\"}}"),
			 -O1_E_FORMAT);
	assert_int_equal(open_index("{\"weight_map\":{\"x\":\"..\"}}"),
			 -O1_E_FORMAT);
	assert_int_equal(open_index("{\"weight_map\":{\"x\":\"\"}}"),
			 -O1_E_FORMAT);
	assert_int_equal(open_index("{\"weight_map\":{\"x\":3}}"),
			 -O1_E_FORMAT);
	assert_int_equal(open_index("{\"weight_map\":[]}"), -O1_E_FORMAT);
	assert_int_equal(open_index("not json"), -O1_E_FORMAT);
	assert_int_equal(open_index("{\"weight_map\":{\"x\":\"c."
				    "safetensors\"}}"),
			 -ENOENT);
	assert_int_equal(open_index("{\"weight_map\":{\"y\":\"a."
				    "safetensors\"}}"),
			 -O1_E_MISSING);
	/* x in both shards */
	assert_int_equal(open_index("{\"weight_map\":{\"x\":\"a.safetensors\","
				    "\"z\":\"b.safetensors\"}}"),
			 -O1_E_FORMAT);
	assert_int_equal(open_index("{\"weight_map\":{\"x\":\"a.safetensors\"}"
				    "}"),
			 0);
}

static void test_no_weights(void **state)
{
	struct o1_safetensors_set *set;

	(void)state;
	assert_int_equal(o1_safetensors_set_open(tmpdir, &set), -O1_E_MISSING);
}

static void test_testdata(void **state)
{
	static const char path[] =
	    O1_SHARED_DIR "/testdata/hf/qwen2-tiny/model.safetensors";
	struct o1_safetensors *st;
	const struct o1_st_tensor *t;

	(void)state;
	if (access(path, R_OK) != 0)
		skip();
	assert_int_equal(o1_safetensors_open(path, &st), 0);
	/* embed + norm + 2 layers * 12 (qkv biases included) */
	assert_int_equal(o1_safetensors_n_tensors(st), 2 + 2 * 12);
	t = o1_safetensors_find(st, "model.embed_tokens.weight");
	assert_non_null(t);
	assert_int_equal(t->shape[0], 512);
	assert_int_equal(t->shape[1], 64);
	assert_int_equal(t->n_bytes, 512 * 64 * 4);
	o1_safetensors_close(st);
}

int main(void)
{
	const struct CMUnitTest mem_tests[] = {
	    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_header_errors),
	    cmocka_unit_test(test_tensor_errors),
	    cmocka_unit_test(test_overlap_duplicate),
	    cmocka_unit_test(test_testdata),
	};
	const struct CMUnitTest dir_tests[] = {
	    cmocka_unit_test_setup_teardown(test_no_weights, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_writer_roundtrip, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_writer_errors, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_file_errors, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_sharded, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_sharded_errors, make_tmpdir,
					    remove_tmpdir),
	};
	int failed = cmocka_run_group_tests(mem_tests, NULL, NULL);

	return failed + cmocka_run_group_tests(dir_tests, NULL, NULL);
}

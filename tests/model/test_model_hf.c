/* HF folder loader and writer over the transformers-made test models:
 * descriptions match their config.json, every tensor is present with the
 * right shape, sharded and edited folders load or fail as they should,
 * and write -> load round trips are bit-exact (F32, and F16/BF16 against
 * the dtype conversions). */
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
#include "model/model.h"
#include "model/safetensors.h"
#include "tests/common/test_util.h"

#define HF_DIR O1_SHARED_DIR "/testdata/hf"

static char tmpdir[64];

static int make_tmpdir(void **state)
{
	(void)state;
	o1_test_dir_make(tmpdir, sizeof(tmpdir), "mhf");
	return 0;
}

static int remove_tmpdir(void **state)
{
	(void)state;
	return o1_test_dir_remove(tmpdir);
}

static bool have_testdata(void)
{
	return access(HF_DIR "/qwen2-tiny/model.safetensors", R_OK) == 0 &&
	       access(HF_DIR "/llama-tiny/model.safetensors", R_OK) == 0;
}

static void check_all_f32(const struct o1_model *m)
{
	for (uint32_t i = 0; i < m->n_tensors; i++)
		assert_int_equal(m->tensors[i].dtype, O1_DTYPE_F32);
	assert_int_equal(o1_model_validate(m), 0);
}

static void test_load_qwen2(void **state)
{
	struct o1_model *m;
	const struct o1_model_desc *d;

	(void)state;
	if (!have_testdata())
		skip();
	assert_int_equal(o1_model_open(HF_DIR "/qwen2-tiny", &m), 0);
	d = &m->desc;
	assert_int_equal(d->arch, O1_ARCH_QWEN2);
	assert_string_equal(d->name, "qwen2-tiny");
	assert_int_equal(d->vocab_size, 512);
	assert_int_equal(d->dim, 64);
	assert_int_equal(d->n_layers, 2);
	assert_int_equal(d->n_heads, 4);
	assert_int_equal(d->n_kv_heads, 2);
	assert_int_equal(d->head_dim, 16);
	assert_int_equal(d->ffn_dim, 128);
	assert_true(d->qkv_bias);
	assert_true(d->tied_embeddings);
	assert_true(d->rope.theta == 1e6f);
	assert_true(d->norm_eps == 1e-6f);
	/* embed, norm, 2 layers of 9 matrices/norms + 3 biases */
	assert_int_equal(m->n_tensors, 2 + 2 * 12);
	assert_null(o1_model_tensor(m, O1_T_OUTPUT, -1));
	assert_int_equal(o1_model_tensor(m, O1_T_BK, 1)->shape[0], 32);
	assert_null(m->vocab);
	check_all_f32(m);
	o1_model_close(m);
}

static void test_load_llama(void **state)
{
	struct o1_model *m;
	const struct o1_tensor *t;
	struct o1_safetensors *st;

	(void)state;
	if (!have_testdata())
		skip();
	assert_int_equal(o1_model_open(HF_DIR "/llama-tiny/", &m), 0);
	assert_string_equal(m->desc.name, "llama-tiny");
	assert_int_equal(m->desc.arch, O1_ARCH_LLAMA);
	assert_int_equal(m->desc.vocab_size, 640);
	assert_int_equal(m->desc.n_layers, 3);
	assert_int_equal(m->desc.n_kv_heads, 1);
	assert_int_equal(m->desc.head_dim, 24);
	assert_int_equal(m->desc.rope.dim, 24);
	assert_int_equal(m->desc.ffn_dim, 256);
	assert_false(m->desc.tied_embeddings);
	assert_false(m->desc.qkv_bias);
	assert_true(m->desc.rope.theta == 1e4f);
	assert_true(m->desc.norm_eps == 1e-5f);
	assert_int_equal(m->desc.bos_id, 1);
	assert_int_equal(m->desc.eos_id, 2);
	assert_int_equal(m->n_tensors, 3 + 3 * 9);
	check_all_f32(m);
	t = o1_model_tensor(m, O1_T_WK, 2);
	assert_int_equal(t->shape[0], 24);
	assert_int_equal(t->shape[1], 96);
	assert_int_equal(
	    o1_safetensors_open(HF_DIR "/llama-tiny/model.safetensors", &st),
	    0);
	assert_memory_equal(
	    t->data,
	    o1_safetensors_find(st, "model.layers.2.self_attn.k_proj.weight")
		->data,
	    t->n_bytes);
	t = o1_model_tensor(m, O1_T_OUTPUT, -1);
	assert_memory_equal(t->data,
			    o1_safetensors_find(st, "lm_head.weight")->data,
			    t->n_bytes);
	o1_safetensors_close(st);
	o1_model_close(m);
}

/* Copies DIR's config.json into the temp folder. */
static void copy_config(const char *dir)
{
	char src[4096];
	size_t len;
	char *text;

	snprintf(src, sizeof(src), "%s/config.json", dir);
	text = o1_test_file_read(src, &len);
	o1_test_file_put(tmpdir, "config.json", text);
	free(text);
}

enum edit { KEEP, DROP, RENAME, RESHAPE };

/* Writes SRC's tensors into FILE of the temp folder, applying EDIT to the
 * tensor named TARGET (RENAME: to NEW_NAME); SHARD 0/1 keeps only the
 * first/second half of the tensors, -1 all of them. */
static void write_edited(const char *src, const char *file, int shard,
			 const char *target, enum edit edit,
			 const char *new_name)
{
	struct o1_safetensors *st;
	struct o1_safetensors_writer *w;
	char path[4096];
	uint64_t n;

	snprintf(path, sizeof(path), "%s/model.safetensors", src);
	assert_int_equal(o1_safetensors_open(path, &st), 0);
	assert_int_equal(o1_safetensors_writer_create(&w), 0);
	n = o1_safetensors_n_tensors(st);
	for (uint64_t i = 0; i < n; i++) {
		const struct o1_st_tensor *t = o1_safetensors_tensor(st, i);
		bool hit = target && strcmp(t->name, target) == 0;
		uint64_t shape[2] = {t->shape[0], t->shape[1]};

		if ((shard == 0 && i >= n / 2) || (shard == 1 && i < n / 2) ||
		    (hit && edit == DROP))
			continue;
		if (hit && edit == RESHAPE) /* same bytes, transposed shape */
			shape[0] = t->shape[1], shape[1] = t->shape[0];
		assert_int_equal(
		    o1_safetensors_writer_add(
			w, hit && edit == RENAME ? new_name : t->name, t->dtype,
			t->n_dims, shape, t->data, t->n_bytes),
		    0);
	}
	snprintf(path, sizeof(path), "%s/%s", tmpdir, file);
	assert_int_equal(o1_safetensors_writer_write(w, path), 0);
	o1_safetensors_writer_destroy(w);
	o1_safetensors_close(st);
}

static int open_edited(const char *src, const char *target, enum edit edit,
		       const char *new_name)
{
	struct o1_model *m;
	int err;

	copy_config(src);
	write_edited(src, "model.safetensors", -1, target, edit, new_name);
	err = o1_model_open(tmpdir, &m);
	if (!err)
		o1_model_close(m);
	return err;
}

static void test_edited_folders(void **state)
{
	static const char q[] = HF_DIR "/qwen2-tiny";
	static const char l[] = HF_DIR "/llama-tiny";
	struct o1_model *m;

	(void)state;
	if (!have_testdata())
		skip();
	assert_int_equal(open_edited(q, NULL, KEEP, NULL), 0);
	assert_int_equal(
	    open_edited(q, "model.layers.1.mlp.up_proj.weight", DROP, NULL),
	    -O1_E_MISSING);
	assert_int_equal(
	    open_edited(q, "model.layers.0.self_attn.v_proj.bias", DROP, NULL),
	    -O1_E_MISSING);
	assert_int_equal(open_edited(q, "model.norm.weight", DROP, NULL),
			 -O1_E_MISSING);
	assert_int_equal(open_edited(q, "model.layers.1.mlp.down_proj.weight",
				     RESHAPE, NULL),
			 -O1_E_SHAPE);
	assert_int_equal(open_edited(q, "model.layers.1.mlp.up_proj.weight",
				     RENAME,
				     "model.layers.1.rotary_emb.inv_freq"),
			 -O1_E_MISSING);
	/* an unknown extra tensor is ignored; a layer past the config fails */
	assert_int_equal(open_edited(q, "model.layers.1.mlp.up_proj.weight",
				     RENAME,
				     "model.layers.1.mlp.up_proj.weight"),
			 0);
	assert_int_equal(open_edited(q, "model.norm.weight", RENAME,
				     "model.layers.7.input_layernorm.weight"),
			 -O1_E_SHAPE);
	/* llama without lm_head ties to the embedding */
	copy_config(l);
	write_edited(l, "model.safetensors", -1, "lm_head.weight", DROP, NULL);
	assert_int_equal(o1_model_open(tmpdir, &m), 0);
	assert_true(m->desc.tied_embeddings);
	assert_null(o1_model_tensor(m, O1_T_OUTPUT, -1));
	o1_model_close(m);
}

static void test_extra_tensor(void **state)
{
	static const char q[] = HF_DIR "/qwen2-tiny";
	struct o1_safetensors *st;
	struct o1_safetensors_writer *w;
	struct o1_model *m;
	static const float inv_freq[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint64_t shape[1] = {8};
	char path[4096];

	(void)state;
	if (!have_testdata())
		skip();
	copy_config(q);
	assert_int_equal(
	    o1_safetensors_open(HF_DIR "/qwen2-tiny/model.safetensors", &st),
	    0);
	assert_int_equal(o1_safetensors_writer_create(&w), 0);
	for (uint64_t i = 0; i < o1_safetensors_n_tensors(st); i++) {
		const struct o1_st_tensor *t = o1_safetensors_tensor(st, i);

		assert_int_equal(o1_safetensors_writer_add(w, t->name, t->dtype,
							   t->n_dims, t->shape,
							   t->data, t->n_bytes),
				 0);
	}
	assert_int_equal(o1_safetensors_writer_add(
			     w, "model.layers.0.self_attn.rotary_emb.inv_freq",
			     O1_DTYPE_F32, 1, shape, inv_freq, 32),
			 0);
	snprintf(path, sizeof(path), "%s/model.safetensors", tmpdir);
	assert_int_equal(o1_safetensors_writer_write(w, path), 0);
	o1_safetensors_writer_destroy(w);
	o1_safetensors_close(st);
	assert_int_equal(o1_model_open(tmpdir, &m), 0);
	assert_int_equal(m->n_tensors, 26);
	o1_model_close(m);
}

static void test_sharded(void **state)
{
	static const char l[] = HF_DIR "/llama-tiny";
	struct o1_model *m, *ref;

	(void)state;
	if (!have_testdata())
		skip();
	copy_config(l);
	write_edited(l, "model-00001-of-00002.safetensors", 0, NULL, KEEP,
		     NULL);
	write_edited(l, "model-00002-of-00002.safetensors", 1, NULL, KEEP,
		     NULL);
	o1_test_file_put(tmpdir, "model.safetensors.index.json",
			 "{\"metadata\":{},\"weight_map\":{"
			 "\"model.norm.weight\":"
			 "\"model-00002-of-00002.safetensors\"}}");
	/* the index names only one shard: half the tensors are missing */
	assert_int_equal(o1_model_open(tmpdir, &m), -O1_E_MISSING);
	o1_test_file_put(tmpdir, "model.safetensors.index.json",
			 "{\"metadata\":{},\"weight_map\":{"
			 "\"model.norm.weight\":"
			 "\"model-00002-of-00002.safetensors\","
			 "\"model.embed_tokens.weight\":"
			 "\"model-00001-of-00002.safetensors\"}}");
	assert_int_equal(o1_model_open(tmpdir, &m), 0);
	assert_int_equal(o1_model_open(l, &ref), 0);
	o1_test_assert_tensors_identical(ref, m);
	o1_model_close(ref);
	o1_model_close(m);
}

static void assert_same_desc(const struct o1_model_desc *a,
			     const struct o1_model_desc *b)
{
	o1_test_assert_desc_equal(a, b);
	assert_int_equal(a->arch, b->arch);
	assert_int_equal(a->bos_id, b->bos_id);
	assert_int_equal(a->eos_id, b->eos_id);
}

/* Checks that B holds A's tensors converted to B's dtype element by
 * element (F32 -> F16/BF16 via dtype.h, identical dtypes bit-exact). */
static void assert_converted(const struct o1_model *a, const struct o1_model *b,
			     enum o1_dtype dtype)
{
	assert_int_equal(a->n_tensors, b->n_tensors);
	for (uint32_t i = 0; i < a->n_tensors; i++) {
		const struct o1_tensor *ta = &a->tensors[i];
		const struct o1_tensor *tb =
		    o1_model_tensor(b, ta->role, ta->layer);
		uint64_t n = o1_tensor_elements(ta);
		float *f = o1_test_tensor_f32(a, ta);
		uint16_t *h = malloc(n * sizeof(uint16_t));

		assert_non_null(tb);
		assert_int_equal(tb->dtype, dtype);
		assert_int_equal(o1_tensor_elements(tb), n);
		if (dtype == ta->dtype) {
			assert_memory_equal(ta->data, tb->data, ta->n_bytes);
		} else if (dtype == O1_DTYPE_F32) {
			assert_memory_equal(f, tb->data, n * 4);
		} else {
			for (uint64_t k = 0; k < n; k++)
				h[k] = dtype == O1_DTYPE_F16
					   ? o1_f32_to_f16(f[k])
					   : o1_f32_to_bf16(f[k]);
			assert_memory_equal(h, tb->data, n * 2);
		}
		free(f);
		free(h);
	}
}

/* Writes A to SUB as DTYPE, reopens it into *OUT and checks it. */
static void write_reopen(const struct o1_model *a, enum o1_dtype dtype,
			 const char *sub, struct o1_model **out)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/%s", tmpdir, sub);
	assert_int_equal(o1_model_write_hf(a, dtype, dir), 0);
	assert_int_equal(o1_model_open(dir, out), 0);
	assert_same_desc(&a->desc, &(*out)->desc);
	assert_converted(a, *out, dtype);
}

static void roundtrip(const char *src)
{
	struct o1_model *m, *f32, *f16, *bf16, *back;

	assert_int_equal(o1_model_open(src, &m), 0);
	write_reopen(m, O1_DTYPE_F32, "f32", &f32);
	write_reopen(f32, O1_DTYPE_F32, "f32b", &back);
	o1_model_close(back);
	write_reopen(m, O1_DTYPE_F16, "f16", &f16);
	write_reopen(f16, O1_DTYPE_F16, "f16b", &back); /* bytes copied */
	o1_model_close(back);
	write_reopen(f16, O1_DTYPE_F32, "f16to32", &back); /* exact widen */
	o1_model_close(back);
	write_reopen(m, O1_DTYPE_BF16, "bf16", &bf16);
	write_reopen(bf16, O1_DTYPE_F32, "bf16to32", &back);
	o1_model_close(back);
	o1_model_close(bf16);
	o1_model_close(f16);
	o1_model_close(f32);
	o1_model_close(m);
}

static void test_write_roundtrip(void **state)
{
	struct o1_model *m;

	(void)state;
	if (!have_testdata())
		skip();
	roundtrip(HF_DIR "/qwen2-tiny");
	assert_int_equal(o1_test_dir_remove(tmpdir), 0);
	assert_int_equal(mkdir(tmpdir, 0700), 0);
	roundtrip(HF_DIR "/llama-tiny");
	assert_int_equal(o1_model_open(HF_DIR "/llama-tiny", &m), 0);
	assert_int_equal(o1_model_write_hf(m, O1_DTYPE_Q8_0, tmpdir), -EINVAL);
	assert_int_equal(
	    o1_model_write_hf(m, O1_DTYPE_F32, "/nonexistent-dir/x/y"),
	    -ENOENT);
	o1_model_close(m);
}

static void test_tokenizer_in_folder(void **state)
{
	static const char tok[] =
	    O1_SHARED_DIR "/testdata/vocab/llama3.2/mini_llama.json";
	static const char q[] = HF_DIR "/qwen2-tiny";
	struct o1_model *m, *back;
	char dst[4096], cmd[8192];

	(void)state;
	if (!have_testdata() || access(tok, R_OK) != 0)
		skip();
	copy_config(q);
	write_edited(q, "model.safetensors", -1, NULL, KEEP, NULL);
	snprintf(dst, sizeof(dst), "%s/tokenizer.json", tmpdir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", tok, dst);
	assert_int_equal(system(cmd), 0);
	o1_test_file_put(tmpdir, "tokenizer_config.json",
			 "{\"eos_token\":\"<|end_of_text|>\"}\n");
	assert_int_equal(o1_model_open(tmpdir, &m), 0);
	assert_non_null(m->vocab);
	assert_int_equal(m->vocab->n_tokens, 128002);
	assert_int_equal(m->desc.eos_id, 128001); /* config.json has null */
	assert_int_equal(m->desc.bos_id, -1);
	snprintf(dst, sizeof(dst), "%s/out", tmpdir);
	assert_int_equal(o1_model_write_hf(m, O1_DTYPE_F32, dst), 0);
	assert_int_equal(o1_model_open(dst, &back), 0);
	assert_non_null(back->vocab);
	assert_int_equal(back->vocab->n_tokens, m->vocab->n_tokens);
	assert_int_equal(back->vocab->n_merges, m->vocab->n_merges);
	assert_string_equal(back->vocab->pre, "llama-bpe");
	o1_model_close(back);
	/* a malformed tokenizer.json fails the load */
	o1_test_file_put(tmpdir, "tokenizer.json", "{\"model\":3}\n");
	o1_model_close(m);
	assert_int_equal(o1_model_open(tmpdir, &m), -O1_E_FORMAT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load_qwen2),
	    cmocka_unit_test(test_load_llama),
	    cmocka_unit_test_setup_teardown(test_edited_folders, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_extra_tensor, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_sharded, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_write_roundtrip, make_tmpdir,
					    remove_tmpdir),
	    cmocka_unit_test_setup_teardown(test_tokenizer_in_folder,
					    make_tmpdir, remove_tmpdir),
	};

	if (!have_testdata())
		return 77;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* o1_test_util: see test_util.h. Failures are cmocka assertions (they end
 * the running test), so every helper either succeeds or does not return. */
#include "test_util.h"

#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/file.h"

void o1_test_dir_make(char *dir, size_t size, const char *tag)
{
	int n = snprintf(dir, size, "/tmp/o1_test_%s_XXXXXX", tag);

	assert_true(n > 0 && (size_t)n < size);
	assert_non_null(mkdtemp(dir));
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 ? 0 : -errno;
}

int o1_test_dir_remove(const char *dir)
{
	return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void o1_test_file_make(char *path, size_t size, const char *tag)
{
	int n = snprintf(path, size, "/tmp/o1_test_%s_XXXXXX", tag), fd;

	assert_true(n > 0 && (size_t)n < size);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
}

void o1_test_file_put(const char *dir, const char *name, const char *text)
{
	char path[4096];
	FILE *f;

	assert_true(snprintf(path, sizeof(path), "%s/%s", dir, name) <
		    (int)sizeof(path));
	if (!text) {
		unlink(path);
		return;
	}
	f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

char *o1_test_file_read(const char *path, size_t *len)
{
	char *buf = NULL;
	int err = o1_file_read(path, UINT64_MAX, &buf, len);

	if (err)
		fail_msg("read %s: %d", path, err);
	return buf;
}

int o1_test_run(const char *cmd, char *out, size_t size)
{
	FILE *p = popen(cmd, "r");
	size_t n;
	int status;

	assert_non_null(p);
	n = fread(out, 1, size - 1, p);
	out[n] = 0;
	status = pclose(p);
	assert_true(status >= 0);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int o1_test_capture_stderr(int (*fn)(const void *arg), const void *arg,
			   char *out, size_t size)
{
	int saved = dup(2), ret;
	FILE *f = tmpfile();
	size_t n;

	assert_true(saved >= 0);
	assert_non_null(f);
	fflush(stderr);
	assert_true(dup2(fileno(f), 2) >= 0);
	ret = fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	n = fread(out, 1, size - 1, f);
	out[n] = 0;
	fclose(f);
	return ret;
}

void o1_test_assert_desc_equal(const struct o1_model_desc *a,
			       const struct o1_model_desc *b)
{
	assert_int_equal(a->n_layers, b->n_layers);
	assert_int_equal(a->dim, b->dim);
	assert_int_equal(a->n_heads, b->n_heads);
	assert_int_equal(a->n_kv_heads, b->n_kv_heads);
	assert_int_equal(a->head_dim, b->head_dim);
	assert_int_equal(a->ffn_dim, b->ffn_dim);
	assert_int_equal(a->vocab_size, b->vocab_size);
	assert_int_equal(a->max_context_tokens, b->max_context_tokens);
	assert_memory_equal(&a->norm_eps, &b->norm_eps, sizeof(a->norm_eps));
	assert_int_equal(a->tied_embeddings, b->tied_embeddings);
	assert_int_equal(a->qkv_bias, b->qkv_bias);
	assert_memory_equal(&a->rope.theta, &b->rope.theta,
			    sizeof(a->rope.theta));
	assert_int_equal(a->rope.dim, b->rope.dim);
	assert_int_equal(a->rope.scaling, b->rope.scaling);
}

float *o1_test_tensor_f32(const struct o1_model *m, const struct o1_tensor *t)
{
	uint64_t n = o1_tensor_elements(t);
	float *f = malloc((n ? n : 1) * sizeof(float));

	assert_non_null(f);
	assert_int_equal(o1_tensor_read_f32(m, t, f), 0);
	return f;
}

void o1_test_assert_vocab_equal(const struct o1_vocab *a,
				const struct o1_vocab *b)
{
	if (!a || !b) {
		assert_ptr_equal(a, b);
		return;
	}
	assert_int_equal(a->kind, b->kind);
	assert_string_equal(a->pre, b->pre);
	assert_int_equal(a->n_tokens, b->n_tokens);
	assert_int_equal(a->n_merges, b->n_merges);
	for (uint32_t i = 0; i < a->n_tokens; i++) {
		assert_string_equal(a->tokens[i], b->tokens[i]);
		assert_int_equal(a->types[i], b->types[i]);
	}
	assert_int_equal(a->scores == NULL, b->scores == NULL);
	if (a->scores)
		assert_memory_equal(a->scores, b->scores,
				    a->n_tokens * sizeof(float));
	for (uint32_t i = 0; i < a->n_merges; i++)
		assert_string_equal(a->merges[i], b->merges[i]);
	assert_int_equal(a->bos_id, b->bos_id);
	assert_int_equal(a->eos_id, b->eos_id);
	assert_int_equal(a->unk_id, b->unk_id);
	assert_int_equal(a->pad_id, b->pad_id);
	assert_int_equal(a->add_bos, b->add_bos);
	assert_int_equal(a->add_eos, b->add_eos);
	assert_int_equal(a->add_space_prefix, b->add_space_prefix);
	assert_int_equal(a->ignore_merges, b->ignore_merges);
	assert_int_equal(a->chat_template == NULL, b->chat_template == NULL);
	if (a->chat_template)
		assert_string_equal(a->chat_template, b->chat_template);
}

void o1_test_assert_tensors_identical(const struct o1_model *a,
				      const struct o1_model *b)
{
	assert_int_equal(a->n_tensors, b->n_tensors);
	for (uint32_t i = 0; i < a->n_tensors; i++) {
		const struct o1_tensor *x = &a->tensors[i];
		const struct o1_tensor *y =
		    o1_model_tensor(b, x->role, x->layer);

		if (!y)
			fail_msg("tensor %s layer %d missing",
				 o1_tensor_role_name(x->role), x->layer);
		assert_int_equal(x->dtype, y->dtype);
		assert_int_equal(x->n_dims, y->n_dims);
		assert_memory_equal(x->shape, y->shape, sizeof(x->shape));
		assert_int_equal(x->qk_interleaved, y->qk_interleaved);
		assert_int_equal(x->n_bytes, y->n_bytes);
		if (memcmp(x->data, y->data, x->n_bytes) != 0)
			fail_msg("tensor %s layer %d differs",
				 o1_tensor_role_name(x->role), x->layer);
	}
}

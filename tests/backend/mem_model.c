/* In-memory test models (mem_model.h). */
#include "mem_model.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

static float frand(uint64_t *rng)
{
	*rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((*rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static void add(struct mem_model *f, uint64_t *rng, enum o1_tensor_role role,
		int layer, uint64_t rows, uint64_t cols, float scale,
		float offset)
{
	uint32_t i = f->m.n_tensors++;
	uint64_t n = rows ? rows * cols : cols;
	float *d = malloc(n * sizeof(float));

	assert_true(i < MEM_MODEL_MAX_TENSORS);
	assert_non_null(d);
	for (uint64_t j = 0; j < n; j++)
		d[j] = offset + frand(rng) * scale;
	f->data[i] = d;
	f->t[i] = (struct o1_tensor){.role = role,
				     .layer = layer,
				     .dtype = O1_DTYPE_F32,
				     .n_dims = rows ? 2 : 1,
				     .shape = {rows ? rows : cols, cols},
				     .data = d,
				     .n_bytes = n * 4};
}

static void add_layer(struct mem_model *f, uint64_t *rng, int l)
{
	const struct o1_model_desc *d = &f->m.desc;
	uint64_t q = d->n_heads * d->head_dim, kv = d->n_kv_heads * d->head_dim;

	add(f, rng, O1_T_ATTN_NORM, l, 0, d->dim, 0.3f, 1);
	add(f, rng, O1_T_WQ, l, q, d->dim, 0.3f, 0);
	add(f, rng, O1_T_WK, l, kv, d->dim, 0.3f, 0);
	add(f, rng, O1_T_WV, l, kv, d->dim, 0.3f, 0);
	if (d->qkv_bias) {
		add(f, rng, O1_T_BQ, l, 0, q, 0.5f, 0);
		add(f, rng, O1_T_BK, l, 0, kv, 0.5f, 0);
		add(f, rng, O1_T_BV, l, 0, kv, 0.5f, 0);
	}
	add(f, rng, O1_T_WO, l, d->dim, q, 0.3f, 0);
	add(f, rng, O1_T_FFN_NORM, l, 0, d->dim, 0.3f, 1);
	add(f, rng, O1_T_W_GATE, l, d->ffn_dim, d->dim, 0.3f, 0);
	add(f, rng, O1_T_W_UP, l, d->ffn_dim, d->dim, 0.3f, 0);
	add(f, rng, O1_T_W_DOWN, l, d->dim, d->ffn_dim, 0.3f, 0);
}

void mem_model_build(struct mem_model *f, const struct o1_model_desc *d,
		     uint64_t seed)
{
	uint64_t rng = seed;

	memset(f, 0, sizeof(*f));
	f->m.desc = *d;
	f->m.tensors = f->t;
	snprintf(f->m.path, sizeof(f->m.path), "mem_model");
	add(f, &rng, O1_T_TOKEN_EMBD, -1, d->vocab_size, d->dim, 1, 0);
	add(f, &rng, O1_T_OUTPUT_NORM, -1, 0, d->dim, 0.3f, 1);
	if (!d->tied_embeddings)
		add(f, &rng, O1_T_OUTPUT, -1, d->vocab_size, d->dim, 0.3f, 0);
	for (int l = 0; l < (int)d->n_layers; l++)
		add_layer(f, &rng, l);
	assert_int_equal(o1_model_validate(&f->m), 0);
}

void mem_model_convert(struct mem_model *f, enum o1_tensor_role role,
		       enum o1_dtype dtype)
{
	for (uint32_t i = 0; i < f->m.n_tensors; i++) {
		struct o1_tensor *t = &f->t[i];
		uint64_t n = o1_tensor_elements(t), bytes;
		void *out;

		if (t->role != role || t->dtype != O1_DTYPE_F32)
			continue;
		/* whole rows of whole blocks (n_bytes = rows x row bytes) */
		assert_int_equal(
		    o1_dtype_row_bytes(dtype, t->shape[t->n_dims - 1], &bytes),
		    0);
		bytes *= n / t->shape[t->n_dims - 1];
		out = malloc(bytes);
		assert_non_null(out);
		assert_int_equal(o1_dtype_from_f32(dtype, f->data[i], out, n), 0);
		free(f->data[i]);
		f->data[i] = out;
		t->data = out;
		t->dtype = dtype;
		t->n_bytes = bytes;
	}
}

static void interleave(struct o1_tensor *t, void *data, uint32_t hd)
{
	uint64_t rows = t->shape[0];
	uint64_t cols = t->n_dims == 1 ? 1 : t->shape[1];
	float *src = data, *dst = malloc(rows * cols * sizeof(float));

	assert_non_null(dst);
	assert_int_equal(t->dtype, O1_DTYPE_F32);
	for (uint64_t r = 0; r < rows; r++)
		memcpy(dst + o1_model_interleaved_row(r, hd) * cols,
		       src + r * cols, cols * sizeof(float));
	memcpy(src, dst, rows * cols * sizeof(float));
	free(dst);
	t->qk_interleaved = true;
}

void mem_model_interleave(struct mem_model *f)
{
	for (uint32_t i = 0; i < f->m.n_tensors; i++) {
		enum o1_tensor_role r = f->t[i].role;

		if (r == O1_T_WQ || r == O1_T_WK || r == O1_T_BQ ||
		    r == O1_T_BK)
			interleave(&f->t[i], f->data[i], f->m.desc.head_dim);
	}
}

void mem_model_release(struct mem_model *f)
{
	for (uint32_t i = 0; i < f->m.n_tensors; i++)
		free(f->data[i]);
	memset(f, 0, sizeof(*f));
}

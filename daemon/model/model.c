/* o1_model: format dispatch, tensor lookup, shape validation, and reading
 * tensors as float32 in the canonical (HF) layout. */
#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/log.h"
#include "kernels/quant.h"

static const char *const o1_arch_names[] = {
	[O1_ARCH_LLAMA] = "llama",
	[O1_ARCH_QWEN2] = "qwen2",
	[O1_ARCH_MISTRAL] = "mistral",
};
_Static_assert(sizeof(o1_arch_names) / sizeof(o1_arch_names[0]) ==
		       O1_ARCH_COUNT,
	       "one name per architecture");

static const char *const o1_role_names[] = {
	[O1_T_TOKEN_EMBD] = "token_embd",   [O1_T_OUTPUT_NORM] = "output_norm",
	[O1_T_OUTPUT] = "output",	    [O1_T_ATTN_NORM] = "attn_norm",
	[O1_T_WQ] = "attn_q",		    [O1_T_WK] = "attn_k",
	[O1_T_WV] = "attn_v",		    [O1_T_BQ] = "attn_q.bias",
	[O1_T_BK] = "attn_k.bias",	    [O1_T_BV] = "attn_v.bias",
	[O1_T_WO] = "attn_output",	    [O1_T_FFN_NORM] = "ffn_norm",
	[O1_T_W_GATE] = "ffn_gate",	    [O1_T_W_UP] = "ffn_up",
	[O1_T_W_DOWN] = "ffn_down",	    [O1_T_ROPE_FREQS] = "rope_freqs",
};
_Static_assert(sizeof(o1_role_names) / sizeof(o1_role_names[0]) ==
		       O1_T_ROLE_COUNT,
	       "one name per tensor role");

static const char *const o1_scaling_names[] = {
	[O1_ROPE_SCALING_NONE] = "none",
	[O1_ROPE_SCALING_LINEAR] = "linear",
	[O1_ROPE_SCALING_LLAMA3] = "llama3",
	[O1_ROPE_SCALING_YARN] = "yarn",
};
_Static_assert(sizeof(o1_scaling_names) / sizeof(o1_scaling_names[0]) ==
		       O1_ROPE_SCALING_COUNT,
	       "one name per rope scaling");

const char *o1_arch_name(enum o1_arch arch)
{
	return (unsigned)arch < O1_ARCH_COUNT ? o1_arch_names[arch] : "?";
}

const char *o1_tensor_role_name(enum o1_tensor_role role)
{
	return (unsigned)role < O1_T_ROLE_COUNT ? o1_role_names[role] : "?";
}

const char *o1_rope_scaling_name(enum o1_rope_scaling scaling)
{
	return (unsigned)scaling < O1_ROPE_SCALING_COUNT
		       ? o1_scaling_names[scaling]
		       : "?";
}

int o1_model_open(const char *path, struct o1_model **out)
{
	struct o1_model *m;
	struct stat st;
	int err;

	if (stat(path, &st) != 0) {
		err = -errno;
		o1_err("model %s: %s", path, strerror(errno));
		return err;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	if (strlen(path) >= sizeof(m->path)) {
		free(m);
		return -ENAMETOOLONG;
	}
	strcpy(m->path, path);
	err = S_ISDIR(st.st_mode) ? o1_model_load_hf(m) : o1_model_load_gguf(m);
	if (err == 0)
		err = o1_model_validate(m);
	if (err) {
		o1_model_close(m);
		return err;
	}
	*out = m;
	return 0;
}

void o1_model_close(struct o1_model *m)
{
	if (!m)
		return;
	if (m->unload)
		m->unload(m);
	o1_vocab_destroy(m->vocab);
	free(m->tensors);
	free(m);
}

const struct o1_tensor *o1_model_tensor(const struct o1_model *m,
					enum o1_tensor_role role, int layer)
{
	for (uint32_t i = 0; i < m->n_tensors; i++)
		if (m->tensors[i].role == role && m->tensors[i].layer == layer)
			return &m->tensors[i];
	return NULL;
}

uint64_t o1_tensor_elements(const struct o1_tensor *t)
{
	uint64_t n = 1;

	for (uint32_t i = 0; i < t->n_dims; i++)
		n *= t->shape[i];
	return n;
}

int o1_model_expected_shape(const struct o1_model_desc *d,
			    enum o1_tensor_role role, uint64_t *rows,
			    uint64_t *cols)
{
	uint64_t q = (uint64_t)d->n_heads * d->head_dim;
	uint64_t kv = (uint64_t)d->n_kv_heads * d->head_dim;

	*rows = 0;
	*cols = d->dim;
	switch (role) {
	case O1_T_TOKEN_EMBD:
	case O1_T_OUTPUT:
		*rows = d->vocab_size;
		break;
	case O1_T_OUTPUT_NORM:
	case O1_T_ATTN_NORM:
	case O1_T_FFN_NORM:
		break;
	case O1_T_WQ:
		*rows = q;
		break;
	case O1_T_WK:
	case O1_T_WV:
		*rows = kv;
		break;
	case O1_T_BQ:
		*cols = q;
		break;
	case O1_T_BK:
	case O1_T_BV:
		*cols = kv;
		break;
	case O1_T_WO:
		*rows = d->dim, *cols = q;
		break;
	case O1_T_W_GATE:
	case O1_T_W_UP:
		*rows = d->ffn_dim;
		break;
	case O1_T_W_DOWN:
		*rows = d->dim, *cols = d->ffn_dim;
		break;
	default:
		*cols = 0;
		return -EINVAL;
	}
	return 0;
}

static int check_tensor(const struct o1_model *m, enum o1_tensor_role role,
			int layer)
{
	const struct o1_tensor *t = o1_model_tensor(m, role, layer);
	uint64_t rows, cols, need;
	int err;

	if (!t) {
		o1_err("model %s: tensor %s (layer %d) missing", m->path,
		       o1_tensor_role_name(role), layer);
		return -O1_E_MISSING;
	}
	err = o1_model_expected_shape(&m->desc, role, &rows, &cols);
	if (err)
		return err;
	if ((rows == 0 && (t->n_dims != 1 || t->shape[0] != cols)) ||
	    (rows != 0 && (t->n_dims != 2 || t->shape[0] != rows ||
			   t->shape[1] != cols))) {
		o1_err("model %s: tensor %s (layer %d) has shape [%llu,%llu] "
		       "(%u dims), expected [%llu,%llu]",
		       m->path, o1_tensor_role_name(role), layer,
		       (unsigned long long)t->shape[0],
		       (unsigned long long)(t->n_dims > 1 ? t->shape[1] : 0),
		       t->n_dims, (unsigned long long)rows,
		       (unsigned long long)cols);
		return -O1_E_SHAPE;
	}
	err = o1_dtype_row_bytes(t->dtype, o1_tensor_elements(t), &need);
	if (err || need != t->n_bytes || !t->data) {
		o1_err("model %s: tensor %s (layer %d): %llu bytes of %s for "
		       "%llu elements",
		       m->path, o1_tensor_role_name(role), layer,
		       (unsigned long long)t->n_bytes, o1_dtype_name(t->dtype),
		       (unsigned long long)o1_tensor_elements(t));
		return -O1_E_SHAPE;
	}
	return 0;
}

static int check_desc(const struct o1_model *m)
{
	const struct o1_model_desc *d = &m->desc;

	if (d->n_layers == 0 || d->dim == 0 || d->n_heads == 0 ||
	    d->n_kv_heads == 0 || d->head_dim == 0 || d->ffn_dim == 0 ||
	    d->vocab_size == 0 || d->n_heads % d->n_kv_heads != 0 ||
	    d->head_dim % 2 != 0 || d->rope.dim > d->head_dim ||
	    d->rope.dim % 2 != 0 || !(d->norm_eps > 0) ||
	    !(d->rope.theta > 0) || d->n_layers > 4096 || d->dim > 1u << 20 ||
	    d->head_dim > 1024 || d->n_heads > 4096 ||
	    d->vocab_size > 1u << 24 || d->ffn_dim > 1u << 22) {
		o1_err("model %s: inconsistent hyperparameters: layers %u dim "
		       "%u heads %u kv_heads %u head_dim %u rope_dim %u ffn %u "
		       "vocab %u eps %g theta %g",
		       m->path, d->n_layers, d->dim, d->n_heads, d->n_kv_heads,
		       d->head_dim, d->rope.dim, d->ffn_dim, d->vocab_size,
		       d->norm_eps, d->rope.theta);
		return -O1_E_FORMAT;
	}
	return 0;
}

int o1_model_validate(const struct o1_model *m)
{
	static const enum o1_tensor_role layer_roles[] = {
		O1_T_ATTN_NORM, O1_T_WQ,       O1_T_WK,	   O1_T_WV,
		O1_T_WO,	O1_T_FFN_NORM, O1_T_W_GATE, O1_T_W_UP,
		O1_T_W_DOWN,
	};
	static const enum o1_tensor_role bias_roles[] = {O1_T_BQ, O1_T_BK,
							 O1_T_BV};
	int err = check_desc(m);

	if (!err)
		err = check_tensor(m, O1_T_TOKEN_EMBD, -1);
	if (!err)
		err = check_tensor(m, O1_T_OUTPUT_NORM, -1);
	if (!err && !m->desc.tied_embeddings)
		err = check_tensor(m, O1_T_OUTPUT, -1);
	for (int l = 0; !err && l < (int)m->desc.n_layers; l++) {
		for (size_t i = 0; !err && i < sizeof(layer_roles) /
							sizeof(layer_roles[0]);
		     i++)
			err = check_tensor(m, layer_roles[i], l);
		for (size_t i = 0; !err && m->desc.qkv_bias && i < 3; i++)
			err = check_tensor(m, bias_roles[i], l);
	}
	return err;
}

uint64_t o1_model_interleaved_row(uint64_t r, uint32_t head_dim)
{
	uint64_t head = r / head_dim, in_head = r % head_dim;
	uint64_t half = head_dim / 2;
	uint64_t j = in_head / half, i = in_head % half;

	return head * head_dim + i * 2 + j;
}

int o1_tensor_read_blocks(const struct o1_model *m, const struct o1_tensor *t,
			  void *dst)
{
	uint64_t rows = t->shape[0], rb = 0;
	uint8_t *d = dst;

	if (o1_quant_row_bytes(t->dtype, t->shape[1], &rb) ||
	    rb * rows != t->n_bytes) {
		o1_err("model: %s (layer %d): %llu bytes of %s for [%llu, "
		       "%llu]: rows are not whole blocks",
		       o1_tensor_role_name(t->role), t->layer,
		       (unsigned long long)t->n_bytes, o1_dtype_name(t->dtype),
		       (unsigned long long)rows,
		       (unsigned long long)t->shape[1]);
		return -O1_E_SHAPE;
	}
	if (!t->qk_interleaved) {
		memcpy(d, t->data, t->n_bytes);
		return 0;
	}
	for (uint64_t r = 0; r < rows; r++)
		memcpy(d + r * rb,
		       (const uint8_t *)t->data +
			   o1_model_interleaved_row(r, m->desc.head_dim) * rb,
		       rb);
	return 0;
}

int o1_tensor_read_f32(const struct o1_model *m, const struct o1_tensor *t,
		       float *dst)
{
	uint64_t cols = t->shape[t->n_dims - 1];
	uint64_t rows = o1_tensor_elements(t) / (cols ? cols : 1);
	uint64_t row_bytes;
	int err = o1_dtype_row_bytes(t->dtype, cols, &row_bytes);

	if (err)
		return err;
	if (!t->qk_interleaved) {
		o1_dtype_to_f32(t->dtype, t->data, dst, rows * cols);
		return 0;
	}
	if (t->n_dims == 1) { /* a bias: permute single elements */
		uint64_t n = t->shape[0];
		float *tmp = malloc(n * sizeof(float));

		if (!tmp)
			return -ENOMEM;
		o1_dtype_to_f32(t->dtype, t->data, tmp, n);
		for (uint64_t r = 0; r < n; r++)
			dst[r] = tmp[o1_model_interleaved_row(r, m->desc.head_dim)];
		free(tmp);
		return 0;
	}
	for (uint64_t r = 0; r < rows; r++) {
		uint64_t src = o1_model_interleaved_row(r, m->desc.head_dim);

		o1_dtype_to_f32(t->dtype,
				(const char *)t->data + src * row_bytes,
				dst + r * cols, cols);
	}
	return 0;
}

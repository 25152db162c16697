/* Hugging Face folders: config.json + safetensors (+ tokenizer.json) ->
 * struct o1_model, and the writer back.
 *
 * Tensors keep pointing into the safetensors mappings, which the model's
 * source (struct o1_safetensors_set) owns until unload. A folder's tensor
 * names map to roles through one table; tensors with other names
 * (rotary_emb.inv_freq and the like) are skipped with a debug line.
 * BOS/EOS ids come from config.json / generation_config.json, else from
 * the tokenizer files.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "hf_config.h"
#include "hf_quant.h"
#include "common/log.h"
#include "model.h"
#include "safetensors.h"

#define HF_LAYER_PREFIX "model.layers."

static const char *const hf_names[O1_T_ROLE_COUNT] = {
    [O1_T_TOKEN_EMBD] = "model.embed_tokens.weight",
    [O1_T_OUTPUT_NORM] = "model.norm.weight",
    [O1_T_OUTPUT] = "lm_head.weight",
    [O1_T_ATTN_NORM] = "input_layernorm.weight",
    [O1_T_WQ] = "self_attn.q_proj.weight",
    [O1_T_WK] = "self_attn.k_proj.weight",
    [O1_T_WV] = "self_attn.v_proj.weight",
    [O1_T_BQ] = "self_attn.q_proj.bias",
    [O1_T_BK] = "self_attn.k_proj.bias",
    [O1_T_BV] = "self_attn.v_proj.bias",
    [O1_T_WO] = "self_attn.o_proj.weight",
    [O1_T_FFN_NORM] = "post_attention_layernorm.weight",
    [O1_T_W_GATE] = "mlp.gate_proj.weight",
    [O1_T_W_UP] = "mlp.up_proj.weight",
    [O1_T_W_DOWN] = "mlp.down_proj.weight",
    [O1_T_ROPE_FREQS] = NULL, /* not stored in HF folders */
};

static bool is_global(enum o1_tensor_role r)
{
	return r == O1_T_TOKEN_EMBD || r == O1_T_OUTPUT_NORM ||
	       r == O1_T_OUTPUT;
}

static bool is_bias(enum o1_tensor_role r)
{
	return r == O1_T_BQ || r == O1_T_BK || r == O1_T_BV;
}

/* Parses "N." of a layer name (decimal, no leading zeros); -1 if not. */
static int64_t parse_layer(const char *s, const char **rest)
{
	int64_t n = 0;
	const char *p = s;

	if (*p == '0' && p[1] != '.')
		return -1;
	for (; *p >= '0' && *p <= '9' && n < INT32_MAX; p++)
		n = n * 10 + (*p - '0');
	if (p == s || *p != '.' || n >= INT32_MAX)
		return -1;
	*rest = p + 1;
	return n;
}

/* Role and layer of NAME; false for names outside the table. */
static bool role_of(const char *name, enum o1_tensor_role *role, int64_t *layer)
{
	const char *rest = name;

	*layer = -1;
	if (strncmp(name, HF_LAYER_PREFIX, strlen(HF_LAYER_PREFIX)) == 0) {
		*layer = parse_layer(name + strlen(HF_LAYER_PREFIX), &rest);
		if (*layer < 0)
			return false;
	}
	for (int r = 0; r < O1_T_ROLE_COUNT; r++) {
		if (hf_names[r] && is_global(r) == (*layer < 0) &&
		    strcmp(rest, hf_names[r]) == 0) {
			*role = (enum o1_tensor_role)r;
			return true;
		}
	}
	return false;
}

/* Whether the loaded model keeps tensor ROLE (false: skipped). */
static bool wanted(const struct o1_model *m, enum o1_tensor_role role)
{
	if (role == O1_T_OUTPUT && m->desc.tied_embeddings)
		return false;
	return !is_bias(role) || m->desc.qkv_bias;
}

static int add_tensor(struct o1_model *m, const struct o1_st_tensor *st,
		      enum o1_tensor_role role, int64_t layer)
{
	struct o1_tensor *t = &m->tensors[m->n_tensors];

	if (layer >= m->desc.n_layers) {
		o1_err("model %s: tensor %s is for layer %lld, but config has "
		       "%u layers",
		       m->path, st->name, (long long)layer, m->desc.n_layers);
		return -O1_E_SHAPE;
	}
	if (st->n_dims > O1_TENSOR_MAX_DIMS) {
		o1_err("model %s: tensor %s has %u dims", m->path, st->name,
		       st->n_dims);
		return -O1_E_SHAPE;
	}
	memset(t, 0, sizeof(*t));
	t->role = role;
	t->layer = (int32_t)layer;
	t->dtype = st->dtype;
	t->n_dims = st->n_dims;
	memcpy(t->shape, st->shape, st->n_dims * sizeof(st->shape[0]));
	t->data = st->data;
	t->n_bytes = st->n_bytes;
	m->n_tensors++;
	return 0;
}

static int collect_tensors(struct o1_model *m,
			   const struct o1_safetensors_set *set)
{
	uint64_t n = o1_safetensors_set_n_tensors(set);
	enum o1_tensor_role role;
	int64_t layer;
	int err;

	if (!o1_safetensors_set_find(set, hf_names[O1_T_OUTPUT]) &&
	    !m->desc.tied_embeddings) {
		o1_info("model %s: no lm_head.weight; tying it to the token "
			"embedding",
			m->path);
		m->desc.tied_embeddings = true;
	}
	m->tensors = calloc(n ? n : 1, sizeof(*m->tensors));
	if (!m->tensors)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		const struct o1_st_tensor *st =
		    o1_safetensors_set_tensor(set, i);
		const char *dt = o1_dtype_name(st->dtype);
		const char *q = o1_hf_quant_method_of(st->name, dt);

		if (q) /* a float tensor of a quantized checkpoint */
			return o1_hf_quant_refuse_tensor(m->path, st->name, dt,
							 q);
		if (!role_of(st->name, &role, &layer) || !wanted(m, role)) {
			o1_debug("model %s: ignoring tensor %s", m->path,
				 st->name);
			continue;
		}
		err = add_tensor(m, st, role, layer);
		if (err)
			return err;
	}
	return 0;
}

static int load_vocab(struct o1_model *m)
{
	char path[PATH_MAX];
	int err;

	if (snprintf(path, sizeof(path), "%s/tokenizer.json", m->path) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	if (access(path, F_OK) != 0)
		return 0;
	err = o1_vocab_load_tokenizer_json(path, &m->vocab);
	if (!err && m->vocab->n_tokens > m->desc.vocab_size)
		o1_warn("model %s: tokenizer has %u tokens, the embedding %u "
			"rows",
			m->path, m->vocab->n_tokens, m->desc.vocab_size);
	if (!err && m->desc.bos_id < 0)
		m->desc.bos_id = m->vocab->bos_id;
	if (!err && m->desc.eos_id < 0)
		m->desc.eos_id = m->vocab->eos_id;
	if (err == -O1_E_UNSUPPORTED) {
		o1_warn("model %s: tokenizer.json not usable; the model takes "
			"token ids only",
			m->path);
		m->vocab = NULL;
		return 0;
	}
	return err;
}

static void set_name(struct o1_model *m)
{
	const char *end = m->path + strlen(m->path), *start;

	while (end > m->path + 1 && end[-1] == '/')
		end--;
	start = end;
	while (start > m->path && start[-1] != '/')
		start--;
	snprintf(m->desc.name, sizeof(m->desc.name), "%.*s", (int)(end - start),
		 start);
}

static void unload_hf(struct o1_model *m)
{
	o1_safetensors_set_close(m->source);
	m->source = NULL;
}

int o1_model_load_hf(struct o1_model *m)
{
	struct o1_safetensors_set *set = NULL;
	int err = o1_hf_config_load(m->path, &m->desc);

	if (!err)
		err = o1_safetensors_set_open(m->path, &set);
	if (!err)
		err = collect_tensors(m, set);
	if (!err)
		err = load_vocab(m);
	if (err) {
		o1_safetensors_set_close(set);
		free(m->tensors);
		m->tensors = NULL;
		m->n_tensors = 0;
		memset(&m->desc, 0, sizeof(m->desc));
		return err;
	}
	set_name(m);
	m->source = set;
	m->unload = unload_hf;
	return 0;
}

/* ---- writer ---- */

struct hf_fill {
	const struct o1_model *m;
	const struct o1_tensor *t;
	enum o1_dtype dtype;
};

/* Produces T's bytes in DTYPE through float32 (undoing any storage
 * permutation). */
static int fill_converted(void *ctx, void *dst)
{
	const struct hf_fill *f = ctx;
	uint64_t n = o1_tensor_elements(f->t);
	float *tmp = f->dtype == O1_DTYPE_F32 ? dst : malloc(n * sizeof(float));
	int err;

	if (!tmp)
		return -ENOMEM;
	err = o1_tensor_read_f32(f->m, f->t, tmp);
	if (!err && f->dtype != O1_DTYPE_F32)
		err = o1_dtype_from_f32(f->dtype, tmp, dst, n);
	if (tmp != dst)
		free(tmp);
	return err;
}

static int tensor_name(const struct o1_tensor *t, char *buf, size_t size)
{
	const char *base = hf_names[t->role];

	if (is_global(t->role))
		return snprintf(buf, size, "%s", base) >= (int)size ? -EINVAL
								    : 0;
	return snprintf(buf, size, HF_LAYER_PREFIX "%d.%s", t->layer, base) >=
		       (int)size
		   ? -EINVAL
		   : 0;
}

static int add_model_tensor(struct o1_safetensors_writer *w,
			    struct hf_fill *fill)
{
	const struct o1_tensor *t = fill->t;
	uint64_t n = o1_tensor_elements(t);
	uint64_t bytes = n * (fill->dtype == O1_DTYPE_F32 ? 4 : 2);
	char name[128];
	int err = tensor_name(t, name, sizeof(name));

	if (err)
		return err;
	if (t->dtype == fill->dtype && !t->qk_interleaved)
		return o1_safetensors_writer_add(w, name, t->dtype, t->n_dims,
						 t->shape, t->data, t->n_bytes);
	return o1_safetensors_writer_add_fill(w, name, fill->dtype, t->n_dims,
					      t->shape, bytes, fill_converted,
					      fill);
}

static bool written(const struct o1_model *m, const struct o1_tensor *t)
{
	if ((unsigned)t->role >= O1_T_ROLE_COUNT || !hf_names[t->role])
		return false;
	return wanted(m, t->role);
}

static int write_weights(const struct o1_model *m, enum o1_dtype dtype,
			 const char *path)
{
	struct o1_safetensors_writer *w = NULL;
	struct hf_fill *fills =
	    calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*fills));
	int err = fills ? o1_safetensors_writer_create(&w) : -ENOMEM;

	for (uint32_t i = 0; !err && i < m->n_tensors; i++) {
		fills[i] = (struct hf_fill){m, &m->tensors[i], dtype};
		if (written(m, &m->tensors[i]))
			err = add_model_tensor(w, &fills[i]);
		else
			o1_debug("HF writer: %s has no HF tensor; skipped",
				 o1_tensor_role_name(m->tensors[i].role));
	}
	if (!err)
		err = o1_safetensors_writer_write(w, path);
	o1_safetensors_writer_destroy(w);
	free(fills);
	return err;
}

int o1_model_write_hf(const struct o1_model *m, enum o1_dtype dtype,
		      const char *dir)
{
	char path[PATH_MAX];
	int err;

	if (!o1_dtype_is_float(dtype)) {
		o1_err("HF writer: dtype %s; F32, F16 or BF16 only",
		       o1_dtype_name(dtype));
		return -EINVAL;
	}
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		err = -errno;
		o1_err("HF writer: mkdir %s: %s", dir, strerror(errno));
		return err;
	}
	if (snprintf(path, sizeof(path), "%s/model.safetensors", dir) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	err = write_weights(m, dtype, path);
	snprintf(path, sizeof(path), "%s/config.json", dir);
	if (!err)
		err = o1_hf_config_write(&m->desc, dtype, path);
	if (!err && m->vocab)
		err = o1_vocab_write_tokenizer_json(m->vocab, dir);
	return err;
}

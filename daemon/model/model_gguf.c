/* GGUF model files <-> struct o1_model, and the GGUF tokenizer metadata
 * <-> struct o1_vocab.
 *
 * Loading maps the file (struct o1_gguf is the model's source and stays
 * open until unload); tensors point into the mapping. Names and keys are
 * llama.cpp's. llama.cpp's converter permutes the Q/K rows of llama-family
 * models so that rotary pairs are adjacent; the loader flags those tensors
 * qk_interleaved (o1_tensor_read_f32 undoes it) and the writer applies the
 * permutation again, so a write/load round trip is the identity.
 * Architectures "llama" and "mistral" are permuted, "qwen2" is not;
 * Mistral models are written as "llama", as llama.cpp does.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "gguf.h"
#include "common/log.h"
#include "kernels/quant.h"
#include "kernels/threads.h"
#include "model.h"

/* Per-layer tensor names, "blk.N." + suffix. */
static const char *const layer_names[O1_T_ROLE_COUNT] = {
    [O1_T_ATTN_NORM] = "attn_norm.weight",
    [O1_T_WQ] = "attn_q.weight",
    [O1_T_WK] = "attn_k.weight",
    [O1_T_WV] = "attn_v.weight",
    [O1_T_BQ] = "attn_q.bias",
    [O1_T_BK] = "attn_k.bias",
    [O1_T_BV] = "attn_v.bias",
    [O1_T_WO] = "attn_output.weight",
    [O1_T_FFN_NORM] = "ffn_norm.weight",
    [O1_T_W_GATE] = "ffn_gate.weight",
    [O1_T_W_UP] = "ffn_up.weight",
    [O1_T_W_DOWN] = "ffn_down.weight",
};

static const char *const global_names[O1_T_ROLE_COUNT] = {
    [O1_T_TOKEN_EMBD] = "token_embd.weight",
    [O1_T_OUTPUT_NORM] = "output_norm.weight",
    [O1_T_OUTPUT] = "output.weight",
    [O1_T_ROPE_FREQS] = "rope_freqs.weight",
};

static bool str_is(struct o1_gguf_str s, const char *lit)
{
	return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

/* Reading: the model's architecture and metadata. */
struct meta {
	const struct o1_gguf *g;
	const char *path;
	const char *arch; /* key prefix */
};

static void arch_key(const struct meta *mt, const char *suffix, char *buf,
		     size_t size)
{
	snprintf(buf, size, "%s.%s", mt->arch, suffix);
}

/* Reads <arch>.SUFFIX; DEF < 0 makes it required. */
static int meta_u32(const struct meta *mt, const char *suffix, int64_t def,
		    uint32_t *out)
{
	char key[128];
	int err;

	arch_key(mt, suffix, key, sizeof(key));
	err = o1_gguf_get_u32(mt->g, key, out);
	if (err == -O1_E_MISSING && def >= 0) {
		*out = (uint32_t)def;
		return 0;
	}
	if (err == -O1_E_MISSING)
		o1_err("model %s: required key %s missing", mt->path, key);
	return err;
}

static int meta_f32(const struct meta *mt, const char *suffix, float def,
		    bool required, float *out)
{
	char key[128];
	int err;

	arch_key(mt, suffix, key, sizeof(key));
	err = o1_gguf_get_f32(mt->g, key, out);
	if (err == -O1_E_MISSING && !required) {
		*out = def;
		return 0;
	}
	if (err == -O1_E_MISSING)
		o1_err("model %s: required key %s missing", mt->path, key);
	return err;
}

/* GGUF's architecture names are o1_arch_name()'s. */
static int read_arch(struct meta *mt, enum o1_arch *arch)
{
	struct o1_gguf_str s;
	int err = o1_gguf_get_str(mt->g, "general.architecture", &s);

	if (err == -O1_E_MISSING)
		o1_err("model %s: general.architecture missing", mt->path);
	if (err)
		return err;
	for (int a = 0; a < O1_ARCH_COUNT; a++) {
		if (str_is(s, o1_arch_name(a))) {
			*arch = a;
			mt->arch = o1_arch_name(a);
			return 0;
		}
	}
	o1_err("model %s: architecture '%.*s' not supported (llama, qwen2, "
	       "mistral)",
	       mt->path, (int)(s.len > 32 ? 32 : s.len), s.ptr);
	return -O1_E_UNSUPPORTED;
}

static int read_shape_keys(const struct meta *mt, struct o1_model_desc *d)
{
	int err = meta_u32(mt, "context_length", -1, &d->max_context_tokens);

	if (!err)
		err = meta_u32(mt, "embedding_length", -1, &d->dim);
	if (!err)
		err = meta_u32(mt, "block_count", -1, &d->n_layers);
	if (!err)
		err = meta_u32(mt, "feed_forward_length", -1, &d->ffn_dim);
	if (!err)
		err = meta_u32(mt, "attention.head_count", -1, &d->n_heads);
	if (!err)
		err = meta_u32(mt, "attention.head_count_kv", d->n_heads,
			       &d->n_kv_heads);
	if (!err)
		err = meta_f32(mt, "attention.layer_norm_rms_epsilon", 0, true,
			       &d->norm_eps);
	if (!err && d->n_heads == 0) {
		o1_err("model %s: attention.head_count is 0", mt->path);
		err = -O1_E_FORMAT;
	}
	if (!err)
		err = meta_u32(mt, "attention.key_length", d->dim / d->n_heads,
			       &d->head_dim);
	return err;
}

static int read_scaling_type(const struct meta *mt, struct o1_rope *r)
{
	char key[128];
	struct o1_gguf_str s;
	int err;

	arch_key(mt, "rope.scaling.type", key, sizeof(key));
	err = o1_gguf_get_str(mt->g, key, &s);
	if (err == -O1_E_MISSING) {
		/* older files: rope.scale_linear only */
		err =
		    meta_f32(mt, "rope.scale_linear", 1.0f, false, &r->factor);
		if (!err && r->factor != 1.0f)
			r->scaling = O1_ROPE_SCALING_LINEAR;
		return err;
	}
	if (err)
		return err;
	if (str_is(s, "none"))
		r->scaling = O1_ROPE_SCALING_NONE;
	else if (str_is(s, "linear"))
		r->scaling = O1_ROPE_SCALING_LINEAR;
	else if (str_is(s, "yarn"))
		r->scaling = O1_ROPE_SCALING_YARN;
	else {
		o1_err("model %s: %s '%.*s' not supported (none, linear, "
		       "yarn)",
		       mt->path, key, (int)(s.len > 32 ? 32 : s.len), s.ptr);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

static int read_rope(const struct meta *mt, struct o1_model_desc *d)
{
	struct o1_rope *r = &d->rope;
	int err = meta_u32(mt, "rope.dimension_count", d->head_dim, &r->dim);

	if (!err)
		err =
		    meta_f32(mt, "rope.freq_base", 10000.0f, false, &r->theta);
	if (!err)
		err = read_scaling_type(mt, r);
	if (err || r->scaling == O1_ROPE_SCALING_NONE)
		return err;
	err = meta_f32(mt, "rope.scaling.factor", r->factor, false, &r->factor);
	if (!err)
		err = meta_u32(mt, "rope.scaling.original_context_length", 0,
			       &r->original_max_positions);
	if (!err)
		err = meta_f32(mt, "rope.scaling.yarn_beta_fast", 32.0f, false,
			       &r->beta_fast);
	if (!err)
		err = meta_f32(mt, "rope.scaling.yarn_beta_slow", 1.0f, false,
			       &r->beta_slow);
	if (!err)
		err = meta_f32(mt, "rope.scaling.attn_factor", 0.0f, false,
			       &r->attn_factor);
	return err;
}

/* general.name, else the file's basename without its extension. */
static void read_name(const struct meta *mt, struct o1_model_desc *d)
{
	struct o1_gguf_str s;
	const char *base = strrchr(mt->path, '/');
	const char *dot;
	size_t len;

	if (o1_gguf_get_str(mt->g, "general.name", &s) == 0 && s.len > 0) {
		len = s.len < sizeof(d->name) ? s.len : sizeof(d->name) - 1;
		memcpy(d->name, s.ptr, len);
		d->name[len] = 0;
		return;
	}
	base = base ? base + 1 : mt->path;
	dot = strrchr(base, '.');
	len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
	if (len >= sizeof(d->name))
		len = sizeof(d->name) - 1;
	memcpy(d->name, base, len);
	d->name[len] = 0;
}

static int read_token_id(const struct o1_gguf *g, const char *key, int32_t *out)
{
	uint32_t v;
	int err = o1_gguf_get_u32(g, key, &v);

	*out = -1;
	if (err == -O1_E_MISSING)
		return 0;
	if (!err && v > INT32_MAX)
		err = -O1_E_FORMAT;
	if (!err)
		*out = (int32_t)v;
	return err;
}

static int read_vocab_size(const struct meta *mt, struct o1_model_desc *d)
{
	const struct o1_gguf_tensor_info *t;
	enum o1_gguf_type et;
	uint64_t n = 0;
	int err = meta_u32(mt, "vocab_size", 0, &d->vocab_size);

	if (err || d->vocab_size)
		return err;
	t = o1_gguf_find_tensor(mt->g, global_names[O1_T_TOKEN_EMBD]);
	if (t && t->n_dims == 2)
		n = t->ne[1];
	else if (o1_gguf_get_arr(mt->g, "tokenizer.ggml.tokens", &et, &n))
		n = 0;
	if (n > UINT32_MAX) {
		o1_err("model %s: vocabulary of %llu tokens", mt->path,
		       (unsigned long long)n);
		return -O1_E_FORMAT;
	}
	d->vocab_size = (uint32_t)n;
	return 0;
}

static int read_desc(struct meta *mt, struct o1_model_desc *d)
{
	int err = read_arch(mt, &d->arch);

	if (!err)
		err = read_shape_keys(mt, d);
	if (!err)
		err = read_rope(mt, d);
	if (!err)
		err = read_vocab_size(mt, d);
	if (!err)
		err = read_token_id(mt->g, "tokenizer.ggml.bos_token_id",
				    &d->bos_id);
	if (!err)
		err = read_token_id(mt->g, "tokenizer.ggml.eos_token_id",
				    &d->eos_id);
	if (err)
		return err;
	read_name(mt, d);
	d->tied_embeddings =
	    !o1_gguf_find_tensor(mt->g, global_names[O1_T_OUTPUT]);
	d->qkv_bias = o1_gguf_find_tensor(mt->g, "blk.0.attn_q.bias") != NULL;
	return 0;
}

/* Role and layer of tensor NAME; false for tensors we do not use. */
static bool parse_name(struct o1_gguf_str name, enum o1_tensor_role *role,
		       int32_t *layer)
{
	char buf[O1_GGUF_MAX_NAME + 1], *end;
	unsigned long l;

	memcpy(buf, name.ptr, name.len);
	buf[name.len] = 0;
	for (int r = 0; r < O1_T_ROLE_COUNT; r++) {
		if (global_names[r] && strcmp(buf, global_names[r]) == 0) {
			*role = r, *layer = -1;
			return true;
		}
	}
	if (strncmp(buf, "blk.", 4) != 0 || buf[4] < '0' || buf[4] > '9')
		return false;
	l = strtoul(buf + 4, &end, 10);
	if (*end != '.' || l > INT32_MAX || (buf[4] == '0' && end != buf + 5))
		return false; /* one spelling per layer: no leading zeros */
	for (int r = 0; r < O1_T_ROLE_COUNT; r++) {
		if (layer_names[r] && strcmp(end + 1, layer_names[r]) == 0) {
			*role = r, *layer = (int32_t)l;
			return true;
		}
	}
	return false;
}

static bool is_qk(enum o1_tensor_role role)
{
	return role == O1_T_WQ || role == O1_T_WK || role == O1_T_BQ ||
	       role == O1_T_BK;
}

static bool interleaved_arch(enum o1_arch arch)
{
	return arch == O1_ARCH_LLAMA || arch == O1_ARCH_MISTRAL;
}

static void fill_tensor(const struct o1_gguf_tensor_info *ti,
			enum o1_tensor_role role, int32_t layer,
			enum o1_arch arch, struct o1_tensor *t)
{
	t->role = role;
	t->layer = layer;
	t->dtype = ti->type;
	t->n_dims = ti->n_dims;
	for (uint32_t d = 0; d < ti->n_dims; d++)
		t->shape[d] = ti->ne[ti->n_dims - 1 - d];
	t->data = ti->data;
	t->n_bytes = ti->n_bytes;
	t->qk_interleaved = interleaved_arch(arch) && is_qk(role);
}

/* One info line naming the block types the file holds. */
static void log_quantized(const char *path, const struct o1_tensor *t,
			  uint32_t n)
{
	bool seen[O1_DTYPE_BF16 + 1] = {false};
	char types[128] = "";
	uint32_t count = 0;
	size_t len = 0;

	for (uint32_t i = 0; i < n; i++) {
		enum o1_dtype d = t[i].dtype;

		if (d == O1_DTYPE_F32 || d == O1_DTYPE_F16 ||
		    d == O1_DTYPE_BF16)
			continue;
		count++;
		if (seen[d] || len >= sizeof(types) - 16)
			continue;
		seen[d] = true;
		len +=
		    (size_t)snprintf(types + len, sizeof(types) - len, "%s%s",
				     len ? ", " : "", o1_dtype_name(d));
	}
	if (count)
		o1_info("model %s: %u tensors in GGUF block formats (%s)", path,
			count, types);
}

/* rope_freqs, when present, holds one F32 divisor per rotary pair (model.c
 * does not check this optional tensor). */
static int check_rope_freqs(const struct meta *mt,
			    const struct o1_model_desc *d,
			    const struct o1_tensor *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (t[i].role != O1_T_ROPE_FREQS)
			continue;
		if (t[i].n_dims != 1 || t[i].shape[0] != d->rope.dim / 2) {
			o1_err("model %s: rope_freqs has %u dims [%llu], "
			       "expected [%u] (rope.dimension_count / 2)",
			       mt->path, t[i].n_dims,
			       (unsigned long long)t[i].shape[0],
			       d->rope.dim / 2);
			return -O1_E_SHAPE;
		}
	}
	return 0;
}

static int map_tensors(const struct meta *mt, const struct o1_model_desc *d,
		       struct o1_tensor **out, uint32_t *n_out)
{
	uint64_t n = o1_gguf_n_tensors(mt->g);
	enum o1_tensor_role role;
	struct o1_tensor *t;
	uint32_t k = 0;
	int32_t layer;
	int err;

	if (n > UINT32_MAX) {
		o1_err("model %s: %llu tensors", mt->path,
		       (unsigned long long)n);
		return -O1_E_FORMAT;
	}
	t = calloc(n ? n : 1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		const struct o1_gguf_tensor_info *ti = o1_gguf_tensor(mt->g, i);

		if (!parse_name(ti->name, &role, &layer)) {
			o1_debug("model %s: ignoring tensor %.*s", mt->path,
				 (int)ti->name.len, ti->name.ptr);
			continue;
		}
		if (layer >= 0 && (uint32_t)layer >= d->n_layers) {
			o1_err("model %s: tensor %.*s is past block_count %u",
			       mt->path, (int)ti->name.len, ti->name.ptr,
			       d->n_layers);
			free(t);
			return -O1_E_FORMAT;
		}
		fill_tensor(ti, role, layer, d->arch, &t[k++]);
	}
	err = check_rope_freqs(mt, d, t, k);
	if (err) {
		free(t);
		return err;
	}
	log_quantized(mt->path, t, k);
	*out = t;
	*n_out = k;
	return 0;
}

static int vocab_from_gguf(const struct o1_gguf *g, const char *path,
			   struct o1_vocab **out);

static void unload_gguf(struct o1_model *m)
{
	o1_gguf_close(m->source);
	m->source = NULL;
}

int o1_model_load_gguf(struct o1_model *m)
{
	struct meta mt = {.path = m->path};
	struct o1_model_desc desc = {0};
	struct o1_tensor *tensors = NULL;
	struct o1_vocab *vocab = NULL;
	struct o1_gguf *g;
	uint32_t n = 0;
	int err = o1_gguf_open(m->path, &g);

	if (err)
		return err;
	mt.g = g;
	err = read_desc(&mt, &desc);
	if (!err)
		err = map_tensors(&mt, &desc, &tensors, &n);
	if (err)
		goto close_gguf;
	if (o1_gguf_find_key(g, "tokenizer.ggml.model") >= 0) {
		err = vocab_from_gguf(g, m->path, &vocab);
		if (err)
			goto free_tensors;
	}
	m->desc = desc;
	m->tensors = tensors;
	m->n_tensors = n;
	m->vocab = vocab;
	m->source = g;
	m->unload = unload_gguf;
	return 0;
free_tensors:
	free(tensors);
close_gguf:
	o1_gguf_close(g);
	return err;
}

/* Vocabulary: tokenizer.ggml.* */
static int vocab_kind(const struct o1_gguf *g, const char *path,
		      enum o1_vocab_kind *kind)
{
	struct o1_gguf_str s;
	int err = o1_gguf_get_str(g, "tokenizer.ggml.model", &s);

	if (err == -O1_E_MISSING)
		o1_err("vocab %s: tokenizer.ggml.model missing", path);
	if (err)
		return err;
	if (str_is(s, "gpt2"))
		*kind = O1_VOCAB_BPE;
	else if (str_is(s, "llama"))
		*kind = O1_VOCAB_SPM;
	else {
		o1_err("vocab %s: tokenizer.ggml.model '%.*s' not supported "
		       "(gpt2, llama)",
		       path, (int)(s.len > 32 ? 32 : s.len), s.ptr);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

/* Count of string array KEY (0 when absent), at most LIMIT. */
static int str_arr_count(const struct o1_gguf *g, const char *path,
			 const char *key, uint64_t limit, uint32_t *out)
{
	enum o1_gguf_type et;
	uint64_t n;
	int err = o1_gguf_get_arr(g, key, &et, &n);

	*out = 0;
	if (err == -O1_E_MISSING)
		return 0;
	if (err)
		return err;
	if (et != O1_GGUF_STRING || n > limit) {
		o1_err("vocab %s: %s is an array of %llu elements of type %u, "
		       "expected at most %llu strings",
		       path, key, (unsigned long long)n, et,
		       (unsigned long long)limit);
		return -O1_E_FORMAT;
	}
	*out = (uint32_t)n;
	return 0;
}

static int copy_strs(const struct o1_gguf *g, struct o1_vocab *v,
		     const char *key, char **dst, uint32_t n)
{
	struct o1_gguf_str s;
	int err = 0;

	for (uint32_t i = 0; i < n && !err; i++) {
		err = o1_gguf_arr_str(g, key, i, &s);
		if (!err && !(dst[i] = o1_vocab_strdup(v, s.ptr, s.len)))
			err = -ENOMEM;
	}
	return err;
}

/* Numeric per-token array KEY of ELEM_TYPE, copied to DST if present. */
static int copy_token_arr(const struct o1_gguf *g, const char *path,
			  const char *key, enum o1_gguf_type elem_type,
			  void *dst, uint32_t n)
{
	enum o1_gguf_type et;
	const void *data;
	uint64_t count;
	int err = o1_gguf_get_arr(g, key, &et, &count);

	if (err == -O1_E_MISSING)
		return 0;
	if (!err && (et != elem_type || count != n)) {
		o1_err("vocab %s: %s has %llu elements of type %u, expected "
		       "%u of type %u",
		       path, key, (unsigned long long)count, et, n, elem_type);
		err = -O1_E_FORMAT;
	}
	if (!err)
		err = o1_gguf_arr_data(g, key, &data);
	if (!err)
		memcpy(dst, data, (size_t)n * 4);
	return err;
}

static int read_special_ids(const struct o1_gguf *g, const char *path,
			    struct o1_vocab *v)
{
	static const char *const keys[4] = {
	    "tokenizer.ggml.bos_token_id",
	    "tokenizer.ggml.eos_token_id",
	    "tokenizer.ggml.unknown_token_id",
	    "tokenizer.ggml.padding_token_id",
	};
	int32_t *ids[4] = {&v->bos_id, &v->eos_id, &v->unk_id, &v->pad_id};
	int err = 0;

	for (int i = 0; i < 4 && !err; i++) {
		err = read_token_id(g, keys[i], ids[i]);
		if (!err && *ids[i] >= (int32_t)v->n_tokens) {
			o1_err("vocab %s: %s = %d is past the %u tokens", path,
			       keys[i], *ids[i], v->n_tokens);
			err = -O1_E_FORMAT;
		}
	}
	return err;
}

static int read_flag(const struct o1_gguf *g, const char *key, bool *flag)
{
	int err = o1_gguf_get_bool(g, key, flag);

	return err == -O1_E_MISSING ? 0 : err;
}

/* Pre-tokenizers that llama.cpp treats as Llama 3's: a pre-token found in
 * the vocabulary is one id (merges ignored), and BOS is added by default. */
static bool llama3_pre(const char *pre)
{
	static const char *const names[] = {
	    "llama3",	 "llama-v3", "llama-bpe", "falcon3",
	    "falcon-h1", "pixtral",  "midm-2.0",  "lfm2",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(pre, names[i]) == 0)
			return true;
	return false;
}

static int read_vocab_strings(const struct o1_gguf *g, struct o1_vocab *v)
{
	struct o1_gguf_str s;
	int err = o1_gguf_get_str(g, "tokenizer.ggml.pre", &s);

	if (!err) {
		size_t len =
		    s.len < sizeof(v->pre) ? s.len : sizeof(v->pre) - 1;

		memcpy(v->pre, s.ptr, len);
		v->pre[len] = 0;
	} else if (err != -O1_E_MISSING) {
		return err;
	}
	v->ignore_merges = llama3_pre(v->pre);
	err = o1_gguf_get_str(g, "tokenizer.chat_template", &s);
	if (err == -O1_E_MISSING)
		return 0;
	if (!err && !(v->chat_template = o1_vocab_strdup(v, s.ptr, s.len)))
		err = -ENOMEM;
	return err;
}

static int read_vocab_body(const struct o1_gguf *g, const char *path,
			   struct o1_vocab *v)
{
	int err =
	    copy_strs(g, v, "tokenizer.ggml.tokens", v->tokens, v->n_tokens);

	if (!err)
		err = copy_strs(g, v, "tokenizer.ggml.merges", v->merges,
				v->n_merges);
	if (!err)
		err = copy_token_arr(g, path, "tokenizer.ggml.scores",
				     O1_GGUF_FLOAT32, v->scores, v->n_tokens);
	if (!err)
		err = copy_token_arr(g, path, "tokenizer.ggml.token_type",
				     O1_GGUF_INT32, v->types, v->n_tokens);
	if (!err)
		err = read_special_ids(g, path, v);
	if (!err)
		err = read_vocab_strings(g, v);
	v->add_bos = v->kind == O1_VOCAB_SPM || llama3_pre(v->pre);
	v->add_space_prefix = v->kind == O1_VOCAB_SPM;
	if (!err)
		err = read_flag(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
	if (!err)
		err = read_flag(g, "tokenizer.ggml.add_eos_token", &v->add_eos);
	if (!err)
		err = read_flag(g, "tokenizer.ggml.add_space_prefix",
				&v->add_space_prefix);
	return err;
}

static int vocab_from_gguf(const struct o1_gguf *g, const char *path,
			   struct o1_vocab **out)
{
	enum o1_vocab_kind kind;
	struct o1_vocab *v;
	uint32_t n_tokens, n_merges;
	int err = vocab_kind(g, path, &kind);

	if (!err)
		err = str_arr_count(g, path, "tokenizer.ggml.tokens", INT32_MAX,
				    &n_tokens);
	if (!err && n_tokens == 0) {
		o1_err("vocab %s: tokenizer.ggml.tokens missing or empty",
		       path);
		err = -O1_E_MISSING;
	}
	if (!err)
		err = str_arr_count(g, path, "tokenizer.ggml.merges", INT32_MAX,
				    &n_merges);
	if (!err)
		err = o1_vocab_create(n_tokens, n_merges, &v);
	if (err)
		return err;
	v->kind = kind;
	err = read_vocab_body(g, path, v);
	if (err) {
		o1_vocab_destroy(v);
		return err;
	}
	*out = v;
	return 0;
}

int o1_vocab_load_gguf(const char *path, struct o1_vocab **out)
{
	struct o1_gguf *g;
	int err = o1_gguf_open(path, &g);

	if (err)
		return err;
	err = vocab_from_gguf(g, path, out);
	o1_gguf_close(g);
	return err;
}

/* Writing. The header and tensor infos come first (sizes follow from the
 * shapes and the target types); then, as the GGUF writer reaches each
 * tensor, its fill callback converts it to float32 in canonical order,
 * re-permutes Q/K for llama-family architectures and stores it: matrices
 * in their type (block types quantized by kernels/quant.h's reference
 * quantizers, rows spread over a thread pool), vectors (norms, biases,
 * rope factors) in F32 as llama.cpp does. Only one tensor's buffers are
 * alive at a time. */
struct wstate {
	const struct o1_model *m;
	struct o1_gguf_writer *w;
	const char *path;
	const char *arch; /* key prefix: "llama" or "qwen2" */
	struct gguf_fill *fills; /* [m->n_tensors], borrowed by the writer */
	float *freqs;		 /* llama3 rope_freqs */
	struct o1_threads *tp;	 /* quantization workers */
};

struct gguf_fill {
	const struct wstate *s;
	const struct o1_tensor *t;
	enum o1_dtype dtype;
};

static int w_u32(struct wstate *s, const char *suffix, uint32_t v)
{
	char key[128];

	snprintf(key, sizeof(key), "%s.%s", s->arch, suffix);
	return o1_gguf_writer_set_u32(s->w, key, v);
}

static int w_f32(struct wstate *s, const char *suffix, float v)
{
	char key[128];

	snprintf(key, sizeof(key), "%s.%s", s->arch, suffix);
	return o1_gguf_writer_set_f32(s->w, key, v);
}

static int w_str(struct wstate *s, const char *suffix, const char *v)
{
	char key[128];

	snprintf(key, sizeof(key), "%s.%s", s->arch, suffix);
	return o1_gguf_writer_set_str(s->w, key, v);
}

/* llama.cpp's general.file_type for an all-DTYPE model. */
static uint32_t file_type(enum o1_dtype dtype)
{
	return dtype == O1_DTYPE_F32 ? 0 : dtype == O1_DTYPE_F16 ? 1 : 32;
}

static int write_hparams(struct wstate *s, uint32_t ftype, bool quantized)
{
	const struct o1_model_desc *d = &s->m->desc;
	int err = o1_gguf_writer_set_str(s->w, "general.architecture", s->arch);

	if (!err)
		err = o1_gguf_writer_set_str(s->w, "general.name", d->name);
	if (!err)
		err = o1_gguf_writer_set_u32(s->w, "general.file_type", ftype);
	if (!err && quantized) /* the block layouts of ggml since 2023 */
		err = o1_gguf_writer_set_u32(s->w,
					     "general.quantization_version", 2);
	if (!err)
		err = w_u32(s, "context_length", d->max_context_tokens);
	if (!err)
		err = w_u32(s, "embedding_length", d->dim);
	if (!err)
		err = w_u32(s, "block_count", d->n_layers);
	if (!err)
		err = w_u32(s, "feed_forward_length", d->ffn_dim);
	if (!err)
		err = w_u32(s, "attention.head_count", d->n_heads);
	if (!err)
		err = w_u32(s, "attention.head_count_kv", d->n_kv_heads);
	if (!err)
		err = w_f32(s, "attention.layer_norm_rms_epsilon", d->norm_eps);
	if (!err)
		err = w_u32(s, "attention.key_length", d->head_dim);
	if (!err)
		err = w_u32(s, "attention.value_length", d->head_dim);
	if (!err)
		err = w_u32(s, "vocab_size", d->vocab_size);
	return err;
}

static int write_rope(struct wstate *s)
{
	const struct o1_rope *r = &s->m->desc.rope;
	int err = w_u32(s, "rope.dimension_count", r->dim);

	if (!err)
		err = w_f32(s, "rope.freq_base", r->theta);
	if (err || (r->scaling != O1_ROPE_SCALING_LINEAR &&
		    r->scaling != O1_ROPE_SCALING_YARN))
		return err;
	err = w_str(s, "rope.scaling.type", o1_rope_scaling_name(r->scaling));
	if (!err)
		err = w_f32(s, "rope.scaling.factor", r->factor);
	if (err || r->scaling != O1_ROPE_SCALING_YARN)
		return err;
	err = w_u32(s, "rope.scaling.original_context_length",
		    r->original_max_positions);
	if (!err)
		err = w_f32(s, "rope.scaling.yarn_beta_fast", r->beta_fast);
	if (!err)
		err = w_f32(s, "rope.scaling.yarn_beta_slow", r->beta_slow);
	if (!err && r->attn_factor != 0)
		err = w_f32(s, "rope.scaling.attn_factor", r->attn_factor);
	return err;
}

static int write_token_ids(struct o1_gguf_writer *w, const struct o1_vocab *v)
{
	static const char *const keys[4] = {
	    "tokenizer.ggml.bos_token_id",
	    "tokenizer.ggml.eos_token_id",
	    "tokenizer.ggml.unknown_token_id",
	    "tokenizer.ggml.padding_token_id",
	};
	const int32_t ids[4] = {v->bos_id, v->eos_id, v->unk_id, v->pad_id};
	int err = 0;

	for (int i = 0; i < 4 && !err; i++)
		if (ids[i] >= 0)
			err = o1_gguf_writer_set_u32(w, keys[i],
						     (uint32_t)ids[i]);
	return err;
}

static int write_vocab(struct o1_gguf_writer *w, const struct o1_vocab *v)
{
	int err =
	    o1_gguf_writer_set_str(w, "tokenizer.ggml.model",
				   v->kind == O1_VOCAB_SPM ? "llama" : "gpt2");

	if (!err)
		err = o1_gguf_writer_set_str(w, "tokenizer.ggml.pre", v->pre);
	if (!err)
		err = o1_gguf_writer_set_arr(w, "tokenizer.ggml.tokens",
					     O1_GGUF_STRING, v->tokens,
					     v->n_tokens);
	if (!err && v->scores)
		err = o1_gguf_writer_set_arr(w, "tokenizer.ggml.scores",
					     O1_GGUF_FLOAT32, v->scores,
					     v->n_tokens);
	if (!err && v->types)
		err = o1_gguf_writer_set_arr(w, "tokenizer.ggml.token_type",
					     O1_GGUF_INT32, v->types,
					     v->n_tokens);
	if (!err && v->n_merges)
		err = o1_gguf_writer_set_arr(w, "tokenizer.ggml.merges",
					     O1_GGUF_STRING, v->merges,
					     v->n_merges);
	if (!err)
		err = write_token_ids(w, v);
	if (!err)
		err = o1_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token",
					      v->add_bos);
	if (!err)
		err = o1_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token",
					      v->add_eos);
	if (!err)
		err = o1_gguf_writer_set_bool(
		    w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
	if (!err && v->chat_template)
		err = o1_gguf_writer_set_str(w, "tokenizer.chat_template",
					     v->chat_template);
	return err;
}

/* Canonical row R of a head goes to stored row 2i + j, where R = j*D/2 + i
 * (llama.cpp's reshape(n_head, 2, D/2).swapaxes(1, 2)). */
static void interleave_rows(const float *src, float *dst, uint64_t rows,
			    uint64_t cols, uint32_t head_dim)
{
	for (uint64_t r = 0; r < rows; r++) {
		uint64_t to = o1_model_interleaved_row(r, head_dim);

		memcpy(dst + to * cols, src + r * cols, cols * sizeof(float));
	}
}

static void tensor_name(const struct o1_tensor *t, char *buf, size_t size)
{
	if (t->layer < 0)
		snprintf(buf, size, "%s", global_names[t->role]);
	else
		snprintf(buf, size, "blk.%d.%s", t->layer,
			 layer_names[t->role]);
}

/* Reads T as float32, permuted for GGUF where the architecture needs it. */
static int gguf_order_f32(const struct wstate *s, const struct o1_tensor *t,
			  float *dst)
{
	uint64_t n = o1_tensor_elements(t);
	uint64_t cols = t->n_dims == 1 ? 1 : t->shape[t->n_dims - 1];
	float *tmp;
	int err;

	if (!interleaved_arch(s->m->desc.arch) || !is_qk(t->role))
		return o1_tensor_read_f32(s->m, t, dst);
	tmp = malloc(n * sizeof(float));
	if (!tmp)
		return -ENOMEM;
	err = o1_tensor_read_f32(s->m, t, tmp);
	if (!err)
		interleave_rows(tmp, dst, n / cols, cols, s->m->desc.head_dim);
	free(tmp);
	return err;
}

/* Converts N floats F (rows of COLS) of T to DTYPE at DST. */
static int from_f32(const struct wstate *s, const struct o1_tensor *t,
		    enum o1_dtype dtype, const float *f, void *dst, uint64_t n)
{
	uint64_t cols = t->shape[t->n_dims - 1];

	if (!o1_quant_is_block(dtype))
		return o1_dtype_from_f32(dtype, f, dst, n);
	return o1_quant_quantize_rows(s->tp, (enum o1_quant_type)dtype, f, dst,
				      n / cols, cols);
}

/* The writer's fill callback: T in GGUF order, converted to the dtype. */
static int fill_gguf(void *ctx, void *dst)
{
	const struct gguf_fill *g = ctx;
	uint64_t n = o1_tensor_elements(g->t);
	float *f = dst;
	int err;

	if (g->dtype != O1_DTYPE_F32) {
		f = malloc((n ? n : 1) * sizeof(float));
		if (!f)
			return -ENOMEM;
	}
	err = gguf_order_f32(g->s, g->t, f);
	if (!err && f != dst)
		err = from_f32(g->s, g->t, g->dtype, f, dst, n);
	if (f != dst)
		free(f);
	return err;
}

static int write_tensor(struct wstate *s, struct gguf_fill *fill)
{
	const struct o1_tensor *t = fill->t;
	uint64_t ne[4] = {1, 1, 1, 1}, bytes;
	char name[96];
	int err;

	if (t->role == O1_T_ROPE_FREQS &&
	    s->m->desc.rope.scaling == O1_ROPE_SCALING_LLAMA3)
		return 0; /* recomputed from the description */
	if ((t->layer < 0 ? global_names : layer_names)[t->role] == NULL) {
		o1_err("gguf writer %s: tensor %s has no GGUF name", s->path,
		       o1_tensor_role_name(t->role));
		return -EINVAL;
	}
	tensor_name(t, name, sizeof(name));
	for (uint32_t d = 0; d < t->n_dims; d++)
		ne[d] = t->shape[t->n_dims - 1 - d];
	err = o1_dtype_row_bytes(fill->dtype, o1_tensor_elements(t), &bytes);
	if (!err)
		err = o1_gguf_writer_add_tensor_fill(s->w, name, fill->dtype,
						     t->n_dims, ne, bytes,
						     fill_gguf, fill);
	return err;
}

/* llama3 rope scaling as per-pair divisors of the inverse frequencies
 * (transformers' _compute_llama3_parameters; llama.cpp's rope_freqs). */
static int write_llama3_freqs(struct wstate *s)
{
	const struct o1_rope *r = &s->m->desc.rope;
	uint64_t half = r->dim / 2, ne[4] = {half, 1, 1, 1};
	double lo_wave = r->original_max_positions / r->low_freq_factor;
	double hi_wave = r->original_max_positions / r->high_freq_factor;
	float *f = malloc((half ? half : 1) * sizeof(float));

	if (!f)
		return -ENOMEM;
	s->freqs = f;
	for (uint64_t i = 0; i < half; i++) {
		double inv = pow(r->theta, -(double)(2 * i) / r->dim);
		double wave = 2 * M_PI / inv, smooth;

		if (wave < hi_wave)
			f[i] = 1.0f;
		else if (wave > lo_wave)
			f[i] = r->factor;
		else {
			smooth = (r->original_max_positions / wave -
				  r->low_freq_factor) /
				 (r->high_freq_factor - r->low_freq_factor);
			f[i] =
			    (float)(1.0 / ((1 - smooth) / r->factor + smooth));
		}
	}
	return o1_gguf_writer_add_tensor(s->w, global_names[O1_T_ROPE_FREQS],
					 O1_DTYPE_F32, 1, ne, f,
					 half * sizeof(float));
}

/* Every matrix's type is a float type or a block type dividing its rows. */
static int check_types(const struct o1_model *m, const enum o1_dtype *types,
		       const char *path)
{
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		const struct o1_tensor *t = &m->tensors[i];
		uint64_t bytes;

		if (t->n_dims == 1 || o1_dtype_is_float(types[i]))
			continue;
		if (!o1_quant_is_block(types[i]) ||
		    o1_dtype_row_bytes(types[i], t->shape[t->n_dims - 1],
				       &bytes)) {
			o1_err("gguf writer %s: %s (layer %d) cannot be %s "
			       "(rows of %llu)",
			       path, o1_tensor_role_name(t->role), t->layer,
			       o1_dtype_name(types[i]),
			       (unsigned long long)t->shape[t->n_dims - 1]);
			return -EINVAL;
		}
	}
	return 0;
}

static int check_write_args(const struct o1_model *m, const char *path)
{
	const struct o1_rope *r = &m->desc.rope;

	if (m->desc.head_dim == 0 || m->desc.head_dim % 2 != 0) {
		o1_err("gguf writer %s: head_dim %u", path, m->desc.head_dim);
		return -EINVAL;
	}
	if (r->scaling == O1_ROPE_SCALING_LLAMA3 &&
	    (!(r->factor > 0) || !(r->low_freq_factor > 0) ||
	     !(r->high_freq_factor > r->low_freq_factor) ||
	     r->original_max_positions == 0)) {
		o1_err("gguf writer %s: llama3 rope factor %g low %g high %g "
		       "original context %u",
		       path, r->factor, r->low_freq_factor, r->high_freq_factor,
		       r->original_max_positions);
		return -EINVAL;
	}
	return 0;
}

static bool any_block(const struct o1_model *m, const enum o1_dtype *types)
{
	for (uint32_t i = 0; i < m->n_tensors; i++)
		if (m->tensors[i].n_dims > 1 && o1_quant_is_block(types[i]))
			return true;
	return false;
}

static int write_all(struct wstate *s, const enum o1_dtype *types,
		     uint32_t ftype)
{
	int err = write_hparams(s, ftype, any_block(s->m, types));

	if (!err)
		err = write_rope(s);
	if (!err && s->m->vocab)
		err = write_vocab(s->w, s->m->vocab);
	if (!err && s->m->desc.rope.scaling == O1_ROPE_SCALING_LLAMA3)
		err = write_llama3_freqs(s);
	for (uint32_t i = 0; !err && i < s->m->n_tensors; i++) {
		const struct o1_tensor *t = &s->m->tensors[i];

		s->fills[i] = (struct gguf_fill){
		    s, t, t->n_dims == 1 ? O1_DTYPE_F32 : types[i]};
		err = write_tensor(s, &s->fills[i]);
	}
	if (!err)
		err = o1_gguf_writer_write(s->w, s->path);
	return err;
}

int o1_model_write_gguf_as(const struct o1_model *m,
			   const enum o1_dtype *types, uint32_t ftype,
			   const char *path)
{
	struct wstate s = {.m = m, .path = path};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int err = check_write_args(m, path);

	if (!err)
		err = check_types(m, types, path);
	if (err)
		return err;
	s.arch = m->desc.arch == O1_ARCH_QWEN2 ? "qwen2" : "llama";
	s.fills = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*s.fills));
	if (!s.fills)
		return -ENOMEM;
	err = o1_gguf_writer_create(&s.w);
	if (!err && any_block(m, types))
		err = o1_threads_create(
		    cpus > 1 ? (uint32_t)(cpus < 256 ? cpus : 256) : 1, &s.tp);
	if (!err)
		err = write_all(&s, types, ftype);
	o1_threads_destroy(s.tp);
	o1_gguf_writer_destroy(s.w);
	free(s.freqs);
	free(s.fills);
	return err;
}

int o1_model_write_gguf(const struct o1_model *m, enum o1_dtype dtype,
			const char *path)
{
	enum o1_dtype *types;
	int err;

	if (!o1_dtype_is_float(dtype)) {
		o1_err("gguf writer %s: dtype %s not supported (F32, F16, "
		       "BF16; o1_model_write_gguf_as takes block types)",
		       path, o1_dtype_name(dtype));
		return -EINVAL;
	}
	types = malloc((m->n_tensors ? m->n_tensors : 1) * sizeof(*types));
	if (!types)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->n_tensors; i++)
		types[i] = dtype;
	err = o1_model_write_gguf_as(m, types, file_type(dtype), path);
	free(types);
	return err;
}

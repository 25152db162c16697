/* config.json parsing and writing.
 *
 * Parsing is one pass of typed getters over the cJSON tree; every getter
 * logs the key and the offending value itself, so callers only propagate.
 * Writing emits floats in their shortest decimal form that reads back as
 * the same float, so desc -> config.json -> desc is exact.
 */
#include "hf_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "hf_quant.h"

#define HF_MAX_FILE_BYTES (16u << 20)

struct hf_arch {
	const char *model_type;
	const char *class_name;
	uint32_t default_max_pos;
};

static const struct hf_arch hf_arches[] = {
    [O1_ARCH_LLAMA] = {"llama", "LlamaForCausalLM", 2048},
    [O1_ARCH_QWEN2] = {"qwen2", "Qwen2ForCausalLM", 32768},
    [O1_ARCH_MISTRAL] = {"mistral", "MistralForCausalLM", 131072},
};
_Static_assert(sizeof(hf_arches) / sizeof(hf_arches[0]) == O1_ARCH_COUNT,
	       "one HF name per architecture");

/* Parser state: the source label for log lines. */
struct hf_ctx {
	const char *label;
};

static const cJSON *get(const cJSON *obj, const char *key)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNull(j) ? NULL : j;
}

static void describe(const cJSON *j, char *buf, size_t size)
{
	char *text = cJSON_PrintUnformatted(j);

	snprintf(buf, size, "%s", text ? text : "?");
	free(text);
}

static int bad_value(const struct hf_ctx *c, const char *key, const cJSON *j,
		     const char *want)
{
	char val[64];

	describe(j, val, sizeof(val));
	o1_err("config %s: \"%s\" is %s; expected %s", c->label, key, val,
	       want);
	return -O1_E_FORMAT;
}

static int missing(const struct hf_ctx *c, const char *key)
{
	o1_err("config %s: required key \"%s\" is missing", c->label, key);
	return -O1_E_MISSING;
}

/* An integer in [MIN, MAX]; absent: DEF when OPTIONAL, else an error. */
static int get_u32(const struct hf_ctx *c, const cJSON *obj, const char *key,
		   bool optional, uint32_t def, uint32_t min, uint32_t max,
		   uint32_t *out)
{
	const cJSON *j = get(obj, key);
	char want[64];
	double d;

	if (!j) {
		*out = def;
		return optional ? 0 : missing(c, key);
	}
	d = cJSON_IsNumber(j) ? j->valuedouble : NAN;
	if (!(d >= min && d <= max) || d != floor(d)) {
		snprintf(want, sizeof(want), "an integer in [%u, %u]", min,
			 max);
		return bad_value(c, key, j, want);
	}
	*out = (uint32_t)d;
	return 0;
}

/* A finite number in (MIN, MAX]; absent: DEF when OPTIONAL. */
static int get_f32(const struct hf_ctx *c, const cJSON *obj, const char *key,
		   bool optional, float def, double min, double max, float *out)
{
	const cJSON *j = get(obj, key);
	char want[80];
	double d;

	if (!j) {
		*out = def;
		return optional ? 0 : missing(c, key);
	}
	d = cJSON_IsNumber(j) ? j->valuedouble : NAN;
	if (!(d > min && d <= max) || !isfinite((float)d) || (float)d == 0) {
		snprintf(want, sizeof(want), "a number in (%g, %g]", min, max);
		return bad_value(c, key, j, want);
	}
	*out = (float)d;
	return 0;
}

static int get_bool(const struct hf_ctx *c, const cJSON *obj, const char *key,
		    bool def, bool *out)
{
	const cJSON *j = get(obj, key);

	if (!j) {
		*out = def;
		return 0;
	}
	if (!cJSON_IsBool(j))
		return bad_value(c, key, j, "true or false");
	*out = cJSON_IsTrue(j);
	return 0;
}

/* A token id: null/absent (-1), an integer, or a list (first entry). */
static int get_token_id(const struct hf_ctx *c, const cJSON *obj,
			const char *key, int32_t *out)
{
	const cJSON *j = get(obj, key);
	double d;

	if (cJSON_IsArray(j))
		j = j->child;
	*out = -1;
	if (!j)
		return 0;
	d = cJSON_IsNumber(j) ? j->valuedouble : -1;
	if (!(d >= 0 && d <= INT32_MAX) || d != floor(d))
		return bad_value(c, key, j,
				 "a token id, a list of ids or null");
	*out = (int32_t)d;
	return 0;
}

static int arch_from_type(const char *type, enum o1_arch *out)
{
	for (int a = 0; a < O1_ARCH_COUNT; a++) {
		if (strcmp(type, hf_arches[a].model_type) == 0) {
			*out = (enum o1_arch)a;
			return 0;
		}
	}
	return -O1_E_UNSUPPORTED;
}

static int arch_from_classes(const cJSON *list, enum o1_arch *out)
{
	const cJSON *j;

	cJSON_ArrayForEach(j, list)
	{
		for (int a = 0; cJSON_IsString(j) && a < O1_ARCH_COUNT; a++) {
			if (strcmp(j->valuestring, hf_arches[a].class_name) ==
			    0) {
				*out = (enum o1_arch)a;
				return 0;
			}
		}
	}
	return -O1_E_UNSUPPORTED;
}

static int parse_arch(const struct hf_ctx *c, const cJSON *root,
		      enum o1_arch *out)
{
	const cJSON *type = get(root, "model_type");
	const cJSON *archs = get(root, "architectures");
	char val[64];

	if (type && !cJSON_IsString(type))
		return bad_value(c, "model_type", type, "a string");
	if (archs && !cJSON_IsArray(archs))
		return bad_value(c, "architectures", archs, "a list");
	if (type && arch_from_type(type->valuestring, out) == 0)
		return 0;
	if (arch_from_classes(archs, out) == 0)
		return 0;
	if (!type && !archs)
		return missing(c, "model_type");
	describe(type ? type : archs, val, sizeof(val));
	o1_err("config %s: model %s is not llama, qwen2 or mistral", c->label,
	       val);
	return -O1_E_UNSUPPORTED;
}

static int parse_sizes(const struct hf_ctx *c, const cJSON *root,
		       struct o1_model_desc *d)
{
	int err =
	    get_u32(c, root, "hidden_size", false, 0, 1, 1u << 20, &d->dim);

	if (!err)
		err = get_u32(c, root, "num_hidden_layers", false, 0, 1, 4096,
			      &d->n_layers);
	if (!err)
		err = get_u32(c, root, "num_attention_heads", false, 0, 1, 4096,
			      &d->n_heads);
	if (!err)
		err = get_u32(c, root, "num_key_value_heads", true, d->n_heads,
			      1, d->n_heads, &d->n_kv_heads);
	if (!err && d->n_heads % d->n_kv_heads != 0) {
		o1_err("config %s: num_attention_heads %u is not a multiple "
		       "of num_key_value_heads %u",
		       c->label, d->n_heads, d->n_kv_heads);
		return -O1_E_FORMAT;
	}
	if (!err)
		err = get_u32(c, root, "intermediate_size", false, 0, 1,
			      1u << 22, &d->ffn_dim);
	if (!err)
		err = get_u32(c, root, "vocab_size", false, 0, 1, 1u << 24,
			      &d->vocab_size);
	if (!err)
		err = get_u32(c, root, "max_position_embeddings", true,
			      hf_arches[d->arch].default_max_pos, 1, 1u << 30,
			      &d->max_context_tokens);
	return err;
}

static int parse_head_dim(const struct hf_ctx *c, const cJSON *root,
			  struct o1_model_desc *d)
{
	int err;

	if (get(root, "head_dim")) {
		err = get_u32(c, root, "head_dim", false, 0, 2, 1024,
			      &d->head_dim);
		if (!err && d->head_dim % 2 != 0)
			err = bad_value(c, "head_dim", get(root, "head_dim"),
					"an even number");
		return err;
	}
	if (d->dim % d->n_heads != 0 || d->dim / d->n_heads > 1024 ||
	    (d->dim / d->n_heads) % 2 != 0) {
		o1_err("config %s: no head_dim, and hidden_size %u / "
		       "num_attention_heads %u is not an even integer <= 1024",
		       c->label, d->dim, d->n_heads);
		return -O1_E_FORMAT;
	}
	d->head_dim = d->dim / d->n_heads;
	return 0;
}

static int check_act(const struct hf_ctx *c, const cJSON *root)
{
	const cJSON *act = get(root, "hidden_act");
	bool mlp_bias;
	int err;

	if (act && !cJSON_IsString(act))
		return bad_value(c, "hidden_act", act, "a string");
	if (act && strcmp(act->valuestring, "silu") != 0) {
		o1_err("config %s: hidden_act \"%s\" is not supported (silu "
		       "only)",
		       c->label, act->valuestring);
		return -O1_E_UNSUPPORTED;
	}
	err = get_bool(c, root, "mlp_bias", false, &mlp_bias);
	if (!err && mlp_bias) {
		o1_err("config %s: mlp_bias true is not supported", c->label);
		return -O1_E_UNSUPPORTED;
	}
	return err;
}

static int parse_flags(const struct hf_ctx *c, const cJSON *root,
		       struct o1_model_desc *d)
{
	int err =
	    get_f32(c, root, "rms_norm_eps", true, 1e-6f, 0, 1, &d->norm_eps);

	if (!err)
		err = get_bool(c, root, "tie_word_embeddings", false,
			       &d->tied_embeddings);
	if (!err && d->arch == O1_ARCH_LLAMA)
		err = get_bool(c, root, "attention_bias", false, &d->qkv_bias);
	if (!err)
		d->qkv_bias |= d->arch == O1_ARCH_QWEN2;
	if (!err)
		err = check_act(c, root);
	if (!err)
		err = get_token_id(c, root, "bos_token_id", &d->bos_id);
	if (!err)
		err = get_token_id(c, root, "eos_token_id", &d->eos_id);
	return err;
}

static int scaling_kind(const struct hf_ctx *c, const cJSON *rs,
			enum o1_rope_scaling *out)
{
	const cJSON *t = get(rs, "rope_type");

	if (!t)
		t = get(rs, "type");
	if (!t) {
		*out = O1_ROPE_SCALING_NONE;
		return get(rs, "factor") ? missing(c, "rope_scaling.rope_type")
					 : 0;
	}
	if (!cJSON_IsString(t))
		return bad_value(c, "rope_type", t, "a string");
	if (strcmp(t->valuestring, "default") == 0)
		*out = O1_ROPE_SCALING_NONE;
	else if (strcmp(t->valuestring, "linear") == 0)
		*out = O1_ROPE_SCALING_LINEAR;
	else if (strcmp(t->valuestring, "llama3") == 0)
		*out = O1_ROPE_SCALING_LLAMA3;
	else if (strcmp(t->valuestring, "yarn") == 0)
		*out = O1_ROPE_SCALING_YARN;
	else {
		o1_err("config %s: rope type \"%s\" is not supported (default, "
		       "linear, llama3, yarn)",
		       c->label, t->valuestring);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

static int parse_llama3(const struct hf_ctx *c, const cJSON *rs,
			struct o1_rope *r)
{
	int err = get_f32(c, rs, "low_freq_factor", false, 0, 0, 1e6,
			  &r->low_freq_factor);

	if (!err)
		err = get_f32(c, rs, "high_freq_factor", false, 0, 0, 1e6,
			      &r->high_freq_factor);
	if (!err)
		err = get_u32(c, rs, "original_max_position_embeddings", false,
			      0, 1, 1u << 30, &r->original_max_positions);
	if (!err && !(r->high_freq_factor > r->low_freq_factor)) {
		o1_err("config %s: llama3 rope high_freq_factor %g must exceed "
		       "low_freq_factor %g",
		       c->label, r->high_freq_factor, r->low_freq_factor);
		err = -O1_E_FORMAT;
	}
	return err;
}

static int parse_yarn(const struct hf_ctx *c, const cJSON *rs, uint32_t max_pos,
		      struct o1_rope *r)
{
	int err = get_u32(c, rs, "original_max_position_embeddings", true,
			  max_pos, 1, 1u << 30, &r->original_max_positions);

	if (!err)
		err = get_f32(c, rs, "beta_fast", true, 32, 0, 1e6,
			      &r->beta_fast);
	if (!err)
		err =
		    get_f32(c, rs, "beta_slow", true, 1, 0, 1e6, &r->beta_slow);
	if (!err && get(rs, "attention_factor"))
		err = get_f32(c, rs, "attention_factor", false, 0, 0, 1e6,
			      &r->attn_factor);
	return err;
}

/* Scaling settings from RS (rope_scaling or rope_parameters). */
static int parse_scaling(const struct hf_ctx *c, const cJSON *rs,
			 struct o1_model_desc *d)
{
	struct o1_rope *r = &d->rope;
	int err = scaling_kind(c, rs, &r->scaling);

	if (err || r->scaling == O1_ROPE_SCALING_NONE)
		return err;
	err = get_f32(c, rs, "factor", false, 0, 0, 1e6, &r->factor);
	if (!err && r->scaling == O1_ROPE_SCALING_LLAMA3)
		err = parse_llama3(c, rs, r);
	if (!err && r->scaling == O1_ROPE_SCALING_YARN)
		err = parse_yarn(c, rs, d->max_context_tokens, r);
	return err;
}

static int parse_rotary_dim(const struct hf_ctx *c, const cJSON *root,
			    const cJSON *params, struct o1_model_desc *d)
{
	const cJSON *src = get(root, "partial_rotary_factor") ? root : params;
	float f;
	int err = get_f32(c, src, "partial_rotary_factor", true, 1, 0, 1, &f);

	if (err)
		return err;
	d->rope.dim = (uint32_t)(d->head_dim * (double)f + 1e-3) & ~1u;
	if (d->rope.dim == 0) {
		o1_err("config %s: partial_rotary_factor %g leaves no rotary "
		       "dims of head_dim %u",
		       c->label, f, d->head_dim);
		return -O1_E_FORMAT;
	}
	return 0;
}

static int parse_rope(const struct hf_ctx *c, const cJSON *root,
		      struct o1_model_desc *d)
{
	const cJSON *scaling = get(root, "rope_scaling");
	const cJSON *params = get(root, "rope_parameters");
	const cJSON *theta_src = get(root, "rope_theta") ? root : params;
	int err;

	if (scaling && !cJSON_IsObject(scaling))
		return bad_value(c, "rope_scaling", scaling, "an object");
	if (params && !cJSON_IsObject(params))
		return bad_value(c, "rope_parameters", params, "an object");
	d->rope.beta_fast = 32;
	d->rope.beta_slow = 1;
	err = get_f32(c, theta_src, "rope_theta", true, 10000, 0, 1e12,
		      &d->rope.theta);
	if (!err)
		err = parse_rotary_dim(c, root, params, d);
	if (!err && (scaling || params))
		err = parse_scaling(c, scaling ? scaling : params, d);
	return err;
}

static void warn_window(const struct hf_ctx *c, const cJSON *root,
			const struct o1_model_desc *d)
{
	const cJSON *w = get(root, "sliding_window");
	const cJSON *use = get(root, "use_sliding_window");

	if (cJSON_IsNumber(w) && w->valuedouble < d->max_context_tokens &&
	    (d->arch == O1_ARCH_MISTRAL || cJSON_IsTrue(use)))
		o1_warn("config %s: sliding_window %g is ignored; attention "
			"spans the whole context",
			c->label, w->valuedouble);
}

int o1_hf_config_parse(const char *json, size_t len, const char *label,
		       struct o1_model_desc *desc)
{
	struct hf_ctx c = {.label = label};
	struct o1_model_desc d = {0};
	cJSON *root = cJSON_ParseWithLength(json, len);
	int err;

	if (!cJSON_IsObject(root)) {
		o1_err("config %s: not a JSON object", label);
		cJSON_Delete(root);
		return -O1_E_FORMAT;
	}
	err = o1_hf_quant_check_config(root, label);
	if (!err)
		err = parse_arch(&c, root, &d.arch);
	if (!err)
		err = parse_sizes(&c, root, &d);
	if (!err)
		err = parse_head_dim(&c, root, &d);
	if (!err)
		err = parse_flags(&c, root, &d);
	if (!err)
		err = parse_rope(&c, root, &d);
	if (!err)
		warn_window(&c, root, &d);
	cJSON_Delete(root);
	if (!err)
		*desc = d;
	return err;
}

/* generation_config.json's bos/eos ids win over config.json's. */
static int apply_generation_config(const char *path, struct o1_model_desc *d)
{
	struct hf_ctx c = {.label = path};
	int32_t bos, eos;
	size_t len = 0;
	char *text = NULL;
	cJSON *root;
	int err = o1_file_read(path, HF_MAX_FILE_BYTES, &text, &len);

	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	root = cJSON_ParseWithLength(text, len);
	free(text);
	if (!cJSON_IsObject(root)) {
		o1_err("config %s: not a JSON object", path);
		cJSON_Delete(root);
		return -O1_E_FORMAT;
	}
	err = get_token_id(&c, root, "bos_token_id", &bos);
	if (!err)
		err = get_token_id(&c, root, "eos_token_id", &eos);
	cJSON_Delete(root);
	if (!err && bos >= 0)
		d->bos_id = bos;
	if (!err && eos >= 0)
		d->eos_id = eos;
	return err;
}

int o1_hf_config_load(const char *dir, struct o1_model_desc *desc)
{
	char path[4096];
	size_t len = 0;
	char *text = NULL;
	int err;

	if (snprintf(path, sizeof(path), "%s/config.json", dir) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	err = o1_file_read(path, HF_MAX_FILE_BYTES, &text, &len);
	if (err == -ENOENT)
		o1_err("config %s: %s", path, o1_strerror(err));
	if (err)
		return err;
	err = o1_hf_config_parse(text, len, path, desc);
	free(text);
	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/generation_config.json", dir);
	return apply_generation_config(path, desc);
}

/* ---- writer ---- */

/* The shortest decimal that reads back as F (F finite) the way the
 * parser reads it: to double, then to float. */
static cJSON *float_json(float f)
{
	char buf[40];

	for (int p = 1; p <= 9; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, (double)f);
		if ((float)strtod(buf, NULL) == f)
			break;
	}
	return cJSON_CreateRaw(buf);
}

static bool add_float(cJSON *obj, const char *key, float f)
{
	return cJSON_AddItemToObject(obj, key, float_json(f));
}

static bool add_u32(cJSON *obj, const char *key, uint32_t v)
{
	return cJSON_AddNumberToObject(obj, key, v) != NULL;
}

static bool add_token(cJSON *obj, const char *key, int32_t id)
{
	return id >= 0 ? cJSON_AddNumberToObject(obj, key, id) != NULL
		       : cJSON_AddNullToObject(obj, key) != NULL;
}

static cJSON *scaling_json(const struct o1_rope *r)
{
	cJSON *s = cJSON_CreateObject();
	bool ok = s &&
		  cJSON_AddStringToObject(s, "rope_type",
					  o1_rope_scaling_name(r->scaling)) &&
		  add_float(s, "factor", r->factor);

	if (ok && r->scaling == O1_ROPE_SCALING_LLAMA3)
		ok = add_float(s, "low_freq_factor", r->low_freq_factor) &&
		     add_float(s, "high_freq_factor", r->high_freq_factor);
	if (ok && r->scaling != O1_ROPE_SCALING_LINEAR)
		ok = add_u32(s, "original_max_position_embeddings",
			     r->original_max_positions);
	if (ok && r->scaling == O1_ROPE_SCALING_YARN)
		ok = add_float(s, "beta_fast", r->beta_fast) &&
		     add_float(s, "beta_slow", r->beta_slow) &&
		     (r->attn_factor == 0 ||
		      add_float(s, "attention_factor", r->attn_factor));
	if (!ok) {
		cJSON_Delete(s);
		return NULL;
	}
	return s;
}

static bool add_rope(cJSON *root, const struct o1_model_desc *d)
{
	bool ok = add_float(root, "rope_theta", d->rope.theta);

	if (ok && d->rope.dim != d->head_dim)
		ok = add_float(root, "partial_rotary_factor",
			       (float)d->rope.dim / (float)d->head_dim);
	if (ok && d->rope.scaling == O1_ROPE_SCALING_NONE)
		return cJSON_AddNullToObject(root, "rope_scaling") != NULL;
	return ok && cJSON_AddItemToObject(root, "rope_scaling",
					   scaling_json(&d->rope));
}

static bool add_sizes(cJSON *root, const struct o1_model_desc *d)
{
	return add_u32(root, "hidden_size", d->dim) &&
	       add_u32(root, "num_hidden_layers", d->n_layers) &&
	       add_u32(root, "num_attention_heads", d->n_heads) &&
	       add_u32(root, "num_key_value_heads", d->n_kv_heads) &&
	       add_u32(root, "head_dim", d->head_dim) &&
	       add_u32(root, "intermediate_size", d->ffn_dim) &&
	       add_u32(root, "vocab_size", d->vocab_size) &&
	       add_u32(root, "max_position_embeddings",
		       d->max_context_tokens) &&
	       add_float(root, "rms_norm_eps", d->norm_eps);
}

static const char *torch_dtype(enum o1_dtype t)
{
	switch (t) {
	case O1_DTYPE_F32:
		return "float32";
	case O1_DTYPE_F16:
		return "float16";
	case O1_DTYPE_BF16:
		return "bfloat16";
	default:
		return NULL;
	}
}

static int check_writable(const struct o1_model_desc *d, enum o1_dtype dtype)
{
	const struct o1_rope *r = &d->rope;

	if ((unsigned)d->arch >= O1_ARCH_COUNT || !torch_dtype(dtype) ||
	    d->n_heads == 0 || d->head_dim == 0 || !isfinite(d->norm_eps) ||
	    !isfinite(r->theta) || !isfinite(r->factor) ||
	    !isfinite(r->low_freq_factor) || !isfinite(r->high_freq_factor) ||
	    !isfinite(r->beta_fast) || !isfinite(r->beta_slow) ||
	    !isfinite(r->attn_factor) ||
	    (unsigned)r->scaling >= O1_ROPE_SCALING_COUNT) {
		o1_err("config writer: arch %d, dtype %s or a rope/eps value "
		       "cannot be written",
		       d->arch, o1_dtype_name(dtype));
		return -EINVAL;
	}
	if ((d->arch == O1_ARCH_QWEN2 && !d->qkv_bias) ||
	    (d->arch == O1_ARCH_MISTRAL && d->qkv_bias)) {
		o1_err("config writer: %s with qkv_bias %d has no HF config",
		       o1_arch_name(d->arch), d->qkv_bias);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

static bool add_identity(cJSON *root, const struct o1_model_desc *d,
			 enum o1_dtype dtype)
{
	cJSON *archs = cJSON_AddArrayToObject(root, "architectures");

	return archs &&
	       cJSON_AddItemToArray(
		   archs, cJSON_CreateString(hf_arches[d->arch].class_name)) &&
	       cJSON_AddStringToObject(root, "model_type",
				       hf_arches[d->arch].model_type) &&
	       cJSON_AddStringToObject(root, "torch_dtype",
				       torch_dtype(dtype)) &&
	       cJSON_AddStringToObject(root, "hidden_act", "silu");
}

int o1_hf_config_format(const struct o1_model_desc *d, enum o1_dtype dtype,
			char **out)
{
	cJSON *root;
	bool ok;
	int err = check_writable(d, dtype);

	if (err)
		return err;
	root = cJSON_CreateObject();
	ok = root && add_identity(root, d, dtype) && add_sizes(root, d) &&
	     cJSON_AddBoolToObject(root, "tie_word_embeddings",
				   d->tied_embeddings) &&
	     add_token(root, "bos_token_id", d->bos_id) &&
	     add_token(root, "eos_token_id", d->eos_id) && add_rope(root, d);
	if (ok && d->arch == O1_ARCH_LLAMA)
		ok = cJSON_AddBoolToObject(root, "attention_bias", d->qkv_bias);
	*out = ok ? cJSON_Print(root) : NULL;
	cJSON_Delete(root);
	return *out ? 0 : -ENOMEM;
}

int o1_hf_config_write(const struct o1_model_desc *desc, enum o1_dtype dtype,
		       const char *path)
{
	char *text;
	int err = o1_hf_config_format(desc, dtype, &text);

	if (err)
		return err;
	err = o1_file_write_text(path, text);
	free(text);
	return err;
}

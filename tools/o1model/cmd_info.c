/* o1model info: prints what a model holds (description, tensors,
 * vocabulary), as text or, with --json, as one JSON object.
 * Exit 0 ok, 1 failure, 2 bad arguments. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "o1model.h"

#define N_DTYPES      31 /* enum o1_dtype values are below this */
#define N_TOKEN_TYPES 7

struct info_stats {
	uint32_t count[N_DTYPES];
	uint64_t bytes[N_DTYPES];
	uint64_t total_bytes;
	uint64_t token_bytes; /* weight bytes one decoded token reads */
	uint64_t params;
	uint32_t token_types[N_TOKEN_TYPES];
};

static void info_usage(FILE *f)
{
	fprintf(f, "usage: o1model info [--json] [--tensors] PATH\n"
		   "PATH: a .gguf file or a Hugging Face folder.\n");
}

/* What o1d does with the chat template: its family (the table o1d uses,
 * o1_chat_family_detect) or "absent", and whether it parses (ERR's
 * message when not). */
static const char *chat_family(const char *t, bool *parses,
			       struct o1_jinja_error *err)
{
	struct o1_jinja *j;

	*parses = false;
	memset(err, 0, sizeof(*err));
	if (!t)
		return "absent";
	if (!o1_jinja_parse(t, strlen(t), &j, err)) {
		*parses = true;
		o1_jinja_destroy(j);
	}
	return o1_chat_family_name(o1_chat_family_detect(t));
}

/* Bytes of T a decode step reads: all of it, but one row of an untied
 * token embedding (the LM head reads a tied one whole) and none of the
 * rope factors (folded into the frequencies at load). */
static uint64_t token_bytes(const struct o1_model *m, const struct o1_tensor *t)
{
	if (t->role == O1_T_ROPE_FREQS)
		return 0;
	if (t->role == O1_T_TOKEN_EMBD && !m->desc.tied_embeddings)
		return t->n_bytes / (t->shape[0] ? t->shape[0] : 1);
	return t->n_bytes;
}

static void gather(const struct o1_model *m, struct info_stats *s)
{
	memset(s, 0, sizeof(*s));
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		const struct o1_tensor *t = &m->tensors[i];

		if ((unsigned)t->dtype < N_DTYPES) {
			s->count[t->dtype]++;
			s->bytes[t->dtype] += t->n_bytes;
		}
		s->total_bytes += t->n_bytes;
		s->token_bytes += token_bytes(m, t);
		s->params += o1_tensor_elements(t);
	}
	for (uint32_t i = 0;
	     m->vocab && m->vocab->types && i < m->vocab->n_tokens; i++)
		if ((unsigned)m->vocab->types[i] < N_TOKEN_TYPES)
			s->token_types[m->vocab->types[i]]++;
}

static const char *token_text(const struct o1_vocab *v, int32_t id)
{
	return id >= 0 && (uint32_t)id < v->n_tokens ? v->tokens[id] : "";
}

/* F as the shortest decimal that reads back as the same float, so 1e-5
 * prints as 1e-05 and not as its double expansion. */
static double json_float(float f)
{
	char buf[32];

	for (int prec = 6; prec < 9; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, f);
		if ((float)strtod(buf, NULL) == f)
			return strtod(buf, NULL);
	}
	return f;
}

static void print_rope(const struct o1_rope *r)
{
	printf("rope:         theta %g, dim %u, scaling %s", r->theta, r->dim,
	       o1_rope_scaling_name(r->scaling));
	if (r->scaling == O1_ROPE_SCALING_LINEAR)
		printf(" (factor %g)", r->factor);
	else if (r->scaling == O1_ROPE_SCALING_LLAMA3)
		printf(" (factor %g, low %g, high %g, original %u)", r->factor,
		       r->low_freq_factor, r->high_freq_factor,
		       r->original_max_positions);
	else if (r->scaling == O1_ROPE_SCALING_YARN)
		printf(" (factor %g, original %u, beta fast %g, slow %g)",
		       r->factor, r->original_max_positions, r->beta_fast,
		       r->beta_slow);
	printf("\n");
}

static void print_desc(const struct o1_model *m)
{
	const struct o1_model_desc *d = &m->desc;

	printf("path:         %s\n", m->path);
	printf("name:         %s\n", d->name);
	printf("arch:         %s\n", o1_arch_name(d->arch));
	printf("layers:       %u\n", d->n_layers);
	printf("dim:          %u\n", d->dim);
	printf("heads:        %u (kv %u, head_dim %u)\n", d->n_heads,
	       d->n_kv_heads, d->head_dim);
	printf("ffn:          %u\n", d->ffn_dim);
	printf("vocab:        %u\n", d->vocab_size);
	printf("context:      %u\n", d->max_context_tokens);
	printf("norm eps:     %g\n", d->norm_eps);
	print_rope(&d->rope);
	printf("tied:         %s\n", d->tied_embeddings ? "yes" : "no");
	printf("qkv bias:     %s\n", d->qkv_bias ? "yes" : "no");
	printf("bos/eos:      %d / %d\n", d->bos_id, d->eos_id);
}

static void print_tensors(const struct o1_model *m, const struct info_stats *s,
			  bool each)
{
	printf("tensors:      %u, %llu parameters, %llu bytes\n", m->n_tensors,
	       (unsigned long long)s->params,
	       (unsigned long long)s->total_bytes);
	printf("per token:    %llu bytes of weights read (%.2f GB)\n",
	       (unsigned long long)s->token_bytes, s->token_bytes / 1e9);
	for (int d = 0; d < N_DTYPES; d++)
		if (s->count[d])
			printf("  %-6s      %u tensors, %llu bytes\n",
			       o1_dtype_name((enum o1_dtype)d), s->count[d],
			       (unsigned long long)s->bytes[d]);
	for (uint32_t i = 0; each && i < m->n_tensors; i++) {
		const struct o1_tensor *t = &m->tensors[i];

		char shape[64];
		int len = 0;

		for (uint32_t k = 0; k < t->n_dims; k++)
			len += snprintf(shape + len, sizeof(shape) - (size_t)len,
					"%s%llu", k ? ", " : "",
					(unsigned long long)t->shape[k]);
		printf("  %3d %-12s %-5s [%s] %llu bytes, %llu per token\n",
		       t->layer, o1_tensor_role_name(t->role),
		       o1_dtype_name(t->dtype), shape,
		       (unsigned long long)t->n_bytes,
		       (unsigned long long)token_bytes(m, t));
	}
}

static void print_vocab(const struct o1_vocab *v, const struct info_stats *s)
{
	struct o1_jinja_error err;
	const char *family;
	bool parses;

	if (!v) {
		printf("vocabulary:   absent\n");
		return;
	}
	printf("vocabulary:   %s, pre %s, %u tokens, %u merges\n",
	       v->kind == O1_VOCAB_BPE ? "bpe" : "spm", v->pre, v->n_tokens,
	       v->n_merges);
	printf("  types:      %u normal, %u control, %u byte, %u user, "
	       "%u unused\n",
	       s->token_types[O1_TOKEN_NORMAL],
	       s->token_types[O1_TOKEN_CONTROL], s->token_types[O1_TOKEN_BYTE],
	       s->token_types[O1_TOKEN_USER_DEFINED],
	       s->token_types[O1_TOKEN_UNUSED]);
	printf("  bos:        %d %s (add %s)\n", v->bos_id,
	       token_text(v, v->bos_id), v->add_bos ? "yes" : "no");
	printf("  eos:        %d %s\n", v->eos_id, token_text(v, v->eos_id));
	family = chat_family(v->chat_template, &parses, &err);
	printf("  chat:       %s", family);
	if (v->chat_template && parses)
		printf(" (Jinja, %zu bytes, tool calls: %s)",
		       strlen(v->chat_template),
		       o1_tool_format_name(
			   o1_tool_format_detect(v->chat_template)));
	else if (v->chat_template)
		printf(" (does not parse at %u:%u: %s; chats refused)", err.line,
		       err.col, err.msg);
	printf("\n");
}

static cJSON *json_rope(const struct o1_rope *r)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "theta", json_float(r->theta));
	cJSON_AddNumberToObject(o, "dim", r->dim);
	cJSON_AddStringToObject(o, "scaling", o1_rope_scaling_name(r->scaling));
	cJSON_AddNumberToObject(o, "factor", json_float(r->factor));
	cJSON_AddNumberToObject(o, "low_freq_factor",
				json_float(r->low_freq_factor));
	cJSON_AddNumberToObject(o, "high_freq_factor",
				json_float(r->high_freq_factor));
	cJSON_AddNumberToObject(o, "original_max_positions",
				r->original_max_positions);
	cJSON_AddNumberToObject(o, "beta_fast", json_float(r->beta_fast));
	cJSON_AddNumberToObject(o, "beta_slow", json_float(r->beta_slow));
	cJSON_AddNumberToObject(o, "attn_factor", json_float(r->attn_factor));
	return o;
}

static void json_desc(cJSON *o, const struct o1_model *m)
{
	const struct o1_model_desc *d = &m->desc;

	cJSON_AddStringToObject(o, "path", m->path);
	cJSON_AddStringToObject(o, "name", d->name);
	cJSON_AddStringToObject(o, "arch", o1_arch_name(d->arch));
	cJSON_AddNumberToObject(o, "n_layers", d->n_layers);
	cJSON_AddNumberToObject(o, "dim", d->dim);
	cJSON_AddNumberToObject(o, "n_heads", d->n_heads);
	cJSON_AddNumberToObject(o, "n_kv_heads", d->n_kv_heads);
	cJSON_AddNumberToObject(o, "head_dim", d->head_dim);
	cJSON_AddNumberToObject(o, "ffn_dim", d->ffn_dim);
	cJSON_AddNumberToObject(o, "vocab_size", d->vocab_size);
	cJSON_AddNumberToObject(o, "max_context_tokens", d->max_context_tokens);
	cJSON_AddNumberToObject(o, "norm_eps", json_float(d->norm_eps));
	cJSON_AddBoolToObject(o, "tied_embeddings", d->tied_embeddings);
	cJSON_AddBoolToObject(o, "qkv_bias", d->qkv_bias);
	cJSON_AddNumberToObject(o, "bos_id", d->bos_id);
	cJSON_AddNumberToObject(o, "eos_id", d->eos_id);
	cJSON_AddItemToObject(o, "rope", json_rope(&d->rope));
}

static void json_tensors(cJSON *o, const struct o1_model *m,
			 const struct info_stats *s)
{
	cJSON *t = cJSON_AddObjectToObject(o, "tensors");
	cJSON *types = cJSON_AddObjectToObject(t, "dtypes");

	cJSON_AddNumberToObject(t, "count", m->n_tensors);
	cJSON_AddNumberToObject(t, "parameters", (double)s->params);
	cJSON_AddNumberToObject(t, "bytes", (double)s->total_bytes);
	cJSON_AddNumberToObject(t, "bytes_per_token", (double)s->token_bytes);
	for (int d = 0; d < N_DTYPES; d++)
		if (s->count[d])
			cJSON_AddNumberToObject(types,
						o1_dtype_name((enum o1_dtype)d),
						s->count[d]);
}

static void json_vocab(cJSON *o, const struct o1_vocab *v,
		       const struct info_stats *s)
{
	struct o1_jinja_error err;
	bool parses;
	cJSON *j;

	if (!v) {
		cJSON_AddNullToObject(o, "vocab");
		return;
	}
	j = cJSON_AddObjectToObject(o, "vocab");
	cJSON_AddStringToObject(j, "kind",
				v->kind == O1_VOCAB_BPE ? "bpe" : "spm");
	cJSON_AddStringToObject(j, "pre", v->pre);
	cJSON_AddNumberToObject(j, "n_tokens", v->n_tokens);
	cJSON_AddNumberToObject(j, "n_merges", v->n_merges);
	cJSON_AddNumberToObject(j, "n_control",
				s->token_types[O1_TOKEN_CONTROL]);
	cJSON_AddNumberToObject(j, "n_unused", s->token_types[O1_TOKEN_UNUSED]);
	cJSON_AddNumberToObject(j, "bos_id", v->bos_id);
	cJSON_AddNumberToObject(j, "eos_id", v->eos_id);
	cJSON_AddStringToObject(j, "bos", token_text(v, v->bos_id));
	cJSON_AddStringToObject(j, "eos", token_text(v, v->eos_id));
	cJSON_AddBoolToObject(j, "add_bos", v->add_bos);
	cJSON_AddStringToObject(j, "chat_template",
				chat_family(v->chat_template, &parses, &err));
	if (v->chat_template && !parses)
		cJSON_AddStringToObject(j, "chat_template_error", err.msg);
	cJSON_AddStringToObject(
	    j, "tool_call_format",
	    o1_tool_format_name(o1_tool_format_detect(v->chat_template)));
}

static int print_json(const struct o1_model *m, const struct info_stats *s)
{
	cJSON *o = cJSON_CreateObject();
	char *text;

	if (!o)
		return -ENOMEM;
	json_desc(o, m);
	json_tensors(o, m, s);
	json_vocab(o, m->vocab, s);
	text = cJSON_Print(o);
	cJSON_Delete(o);
	if (!text)
		return -ENOMEM;
	printf("%s\n", text);
	free(text);
	return 0;
}

int o1model_cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"tensors", no_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	bool json = false, each = false;
	struct info_stats s;
	struct o1_model *m;
	int opt, err;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			info_usage(stdout);
			return 0;
		}
		if (opt == '?') {
			info_usage(stderr);
			return 2;
		}
		json |= opt == 'j';
		each |= opt == 't';
	}
	if (argc - optind != 1) {
		fprintf(stderr, "o1model info: expected one PATH\n");
		info_usage(stderr);
		return 2;
	}
	err = o1_model_open(argv[optind], &m);
	if (err) {
		fprintf(stderr, "o1model info: %s: %s\n", argv[optind],
			o1_strerror(err));
		return 1;
	}
	gather(m, &s);
	if (json) {
		err = print_json(m, &s);
	} else {
		print_desc(m);
		print_tensors(m, &s, each);
		print_vocab(m->vocab, &s);
	}
	o1_model_close(m);
	return err ? 1 : 0;
}

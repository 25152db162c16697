/* HF tokenizer.json (+ tokenizer_config.json) <-> struct o1_vocab.
 *
 * Only BPE models are taken: byte-level ones (ByteLevel pre-tokenizer,
 * with the GPT-2 regex or a Split regex we recognise: Llama-3, Qwen2)
 * and SentencePiece-style ones (Metaspace / Prepend+Replace U+2581,
 * byte_fallback). Ids may be sparse: n_tokens is the largest id + 1 and
 * holes become "<|unused_ID|>" tokens of type UNUSED, which the writer
 * leaves out again. SentencePiece scores are derived from merge ranks
 * (the token made by merge r scores -r; others score below every merge),
 * and the writer regenerates merges from scores when a vocabulary has
 * none (one converted from GGUF). Every malformed input is one log line
 * and -O1_E_FORMAT; valid but unhandled tokenizers are -O1_E_UNSUPPORTED.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "vocab.h"

#define TJ_MAX_FILE_BYTES (1ull << 30)
/* 8x the largest vocabulary in use (Gemma's 262,144): ids are dense in
 * the arrays and every missing one gets a filler name, so a 400-byte file
 * naming id 2^24 - 1 cost more than 2 GB (found by fuzz_tokenizer_json). */
#define TJ_MAX_TOKENS	  (1u << 21)
#define TJ_MAX_MERGES	  (1u << 26)
#define TJ_SPACE	  "\xe2\x96\x81" /* U+2581, SentencePiece's space */

static const char tj_llama3_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
static const char tj_qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

/* Pre-tokenizer names with a Split regex before ByteLevel (NULL: the
 * ByteLevel GPT-2 regex alone). */
static const struct {
	const char *name;
	const char *regex;
} tj_pres[] = {
    {"llama-bpe", tj_llama3_regex},
    {"qwen2", tj_qwen2_regex},
    {"gpt2", NULL},
    {"default", NULL},
};

/* ---- string -> id map (open addressing; keys borrowed) ---- */

struct tj_map {
	uint32_t mask;
	int32_t *slots; /* -1 empty, else an id into keys */
	char *const *keys;
};

static uint64_t tj_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

/* Maps each non-NULL KEYS[i] to i; the first of equal keys wins. */
static int map_build(struct tj_map *m, char *const *keys, uint32_t n)
{
	uint32_t cap = 16;

	while (cap < 2 * (uint64_t)n)
		cap *= 2;
	m->slots = malloc(cap * sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	memset(m->slots, 0xff, cap * sizeof(*m->slots));
	m->mask = cap - 1;
	m->keys = keys;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s =
		    (uint32_t)tj_hash(keys[i] ? keys[i] : "") & m->mask;

		while (keys[i] && m->slots[s] >= 0 &&
		       strcmp(keys[m->slots[s]], keys[i]) != 0)
			s = (s + 1) & m->mask;
		if (keys[i] && m->slots[s] < 0)
			m->slots[s] = (int32_t)i;
	}
	return 0;
}

static int32_t map_find(const struct tj_map *m, const char *key)
{
	uint32_t s = (uint32_t)tj_hash(key) & m->mask;

	for (; m->slots[s] >= 0; s = (s + 1) & m->mask)
		if (strcmp(m->keys[m->slots[s]], key) == 0)
			return m->slots[s];
	return -1;
}

/* ---- reading ---- */

struct tj_ctx {
	const char *label;
	struct o1_vocab *v;
	struct tj_map map; /* token text -> id, built once tokens are in */
	bool byte_fallback;
};

static int bad(const struct tj_ctx *c, const char *what, const cJSON *j)
{
	char *text = j ? cJSON_PrintUnformatted(j) : NULL;

	o1_err("tokenizer %s: %s (got %.80s)", c->label, what,
	       text ? text : "nothing");
	free(text);
	return -O1_E_FORMAT;
}

static const cJSON *get(const cJSON *obj, const char *key)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNull(j) ? NULL : j;
}

static bool is_type(const cJSON *node, const char *type)
{
	const cJSON *t = get(node, "type");

	return cJSON_IsString(t) && strcmp(t->valuestring, type) == 0;
}

/* The first component of TYPE in NODE or in its Sequence members. */
static const cJSON *find_part(const cJSON *node, const char *type)
{
	const cJSON *member, *found;

	if (is_type(node, type))
		return node;
	if (!is_type(node, "Sequence"))
		return NULL;
	cJSON_ArrayForEach(member, node)
	{
		const cJSON *item;

		if (!cJSON_IsArray(member))
			continue;
		cJSON_ArrayForEach(item, member)
		{
			found = find_part(item, type);
			if (found)
				return found;
		}
	}
	return NULL;
}

/* A token id: an integer in [0, TJ_MAX_TOKENS). */
static int token_id(const struct tj_ctx *c, const cJSON *j, uint32_t *out)
{
	double d = cJSON_IsNumber(j) ? j->valuedouble : -1;

	if (!(d >= 0 && d < TJ_MAX_TOKENS) || d != floor(d))
		return bad(c, "token id is not an integer in [0, 2^21)", j);
	*out = (uint32_t)d;
	return 0;
}

static int check_added(const struct tj_ctx *c, const cJSON *a, uint32_t *id)
{
	const cJSON *special = get(a, "special");

	if (!cJSON_IsObject(a) || !cJSON_IsString(get(a, "content")))
		return bad(c, "added token without a string content", a);
	if (special && !cJSON_IsBool(special))
		return bad(c, "added token \"special\" is not a boolean", a);
	return token_id(c, get(a, "id"), id);
}

/* Checks vocab and added_tokens; *N = largest id + 1. */
static int count_tokens(const struct tj_ctx *c, const cJSON *vocab,
			const cJSON *added, uint32_t *n)
{
	const cJSON *j;
	uint32_t id;
	int err;

	*n = 0;
	cJSON_ArrayForEach(j, vocab)
	{
		err = token_id(c, j, &id);
		if (err)
			return err;
		*n = id + 1 > *n ? id + 1 : *n;
	}
	cJSON_ArrayForEach(j, added)
	{
		err = check_added(c, j, &id);
		if (err)
			return err;
		*n = id + 1 > *n ? id + 1 : *n;
	}
	if (*n == 0)
		return bad(c, "no tokens", vocab);
	return 0;
}

static int set_token(struct tj_ctx *c, uint32_t id, const char *text,
		     int32_t type)
{
	struct o1_vocab *v = c->v;

	if (v->tokens[id]) {
		if (strcmp(v->tokens[id], text) == 0) {
			v->types[id] = type;
			return 0;
		}
		o1_err("tokenizer %s: id %u is both \"%.40s\" and \"%.40s\"",
		       c->label, id, v->tokens[id], text);
		return -O1_E_FORMAT;
	}
	v->tokens[id] = o1_vocab_strdup(v, text, strlen(text));
	if (!v->tokens[id])
		return -ENOMEM;
	v->types[id] = type;
	return 0;
}

static bool is_byte_token(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	return strlen(s) == 6 && strncmp(s, "<0x", 3) == 0 && s[5] == '>' &&
	       strchr(hex, s[3]) && strchr(hex, s[4]);
}

static int fill_tokens(struct tj_ctx *c, const cJSON *vocab, const cJSON *added)
{
	const cJSON *j;
	uint32_t id;
	int err = 0;

	cJSON_ArrayForEach(j, vocab)
	{
		int32_t type = c->byte_fallback && is_byte_token(j->string)
				   ? O1_TOKEN_BYTE
				   : O1_TOKEN_NORMAL;

		id = (uint32_t)j->valuedouble;
		if (c->v->tokens[id])
			return bad(c, "two vocab entries share an id", j);
		err = set_token(c, id, j->string, type);
		if (err)
			return err;
	}
	cJSON_ArrayForEach(j, added)
	{
		id = (uint32_t)get(j, "id")->valuedouble;
		err = set_token(c, id, get(j, "content")->valuestring,
				cJSON_IsTrue(get(j, "special"))
				    ? O1_TOKEN_CONTROL
				    : O1_TOKEN_USER_DEFINED);
		if (err)
			return err;
	}
	return 0;
}

/* Merge J ("a b" or ["a", "b"]) as "a b" in *OUT. */
static int merge_text(struct tj_ctx *c, const cJSON *j, char **out)
{
	const cJSON *l, *r;
	size_t ll, rl;
	char *s;

	if (cJSON_IsString(j)) {
		const char *sp = strchr(j->valuestring, ' ');

		if (!sp || sp == j->valuestring || !sp[1] ||
		    strchr(sp + 1, ' '))
			return bad(c, "merge is not \"left right\"", j);
		*out = o1_vocab_strdup(c->v, j->valuestring,
				       strlen(j->valuestring));
		return *out ? 0 : -ENOMEM;
	}
	l = cJSON_GetArrayItem(j, 0);
	r = cJSON_GetArrayItem(j, 1);
	if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 2 ||
	    !cJSON_IsString(l) || !cJSON_IsString(r) || !l->valuestring[0] ||
	    !r->valuestring[0] || strchr(l->valuestring, ' ') ||
	    strchr(r->valuestring, ' '))
		return bad(c, "merge is not [left, right] without spaces", j);
	ll = strlen(l->valuestring);
	rl = strlen(r->valuestring);
	s = malloc(ll + rl + 2);
	if (!s)
		return -ENOMEM;
	memcpy(s, l->valuestring, ll);
	s[ll] = ' ';
	memcpy(s + ll + 1, r->valuestring, rl + 1);
	*out = s;
	return 0;
}

static int fill_merges(struct tj_ctx *c, const cJSON *merges)
{
	const cJSON *j;
	uint32_t i = 0;
	int err;

	cJSON_ArrayForEach(j, merges)
	{
		err = merge_text(c, j, &c->v->merges[i]);
		if (err)
			return err;
		i++;
	}
	return 0;
}

/* SentencePiece scores: -rank for merge results, below every merge for
 * other normal tokens, 0 for special ones. */
static void spm_scores(struct tj_ctx *c)
{
	struct o1_vocab *v = c->v;
	char buf[1024];

	for (uint32_t id = 0; id < v->n_tokens; id++)
		v->scores[id] = v->types[id] == O1_TOKEN_NORMAL
				    ? -(float)((double)v->n_merges + id)
				    : 0;
	for (uint32_t r = v->n_merges; r-- > 0;) {
		const char *m = v->merges[r], *sp = strchr(m, ' ');
		int32_t id;

		if (strlen(m) >= sizeof(buf))
			continue;
		memcpy(buf, m, (size_t)(sp - m));
		strcpy(buf + (sp - m), sp + 1);
		id = map_find(&c->map, buf);
		if (id >= 0 && v->types[id] == O1_TOKEN_NORMAL)
			v->scores[id] = -(float)r;
	}
}

static int32_t lookup(const struct tj_ctx *c, const char *text)
{
	return text ? map_find(&c->map, text) : -1;
}

static int pre_from_split(struct tj_ctx *c, const cJSON *split)
{
	const cJSON *re = get(get(split, "pattern"), "Regex");

	if (!cJSON_IsString(re))
		return bad(c, "Split pre-tokenizer without a Regex pattern",
			   split);
	for (size_t i = 0; i < sizeof(tj_pres) / sizeof(tj_pres[0]); i++) {
		if (tj_pres[i].regex &&
		    strcmp(re->valuestring, tj_pres[i].regex) == 0) {
			snprintf(c->v->pre, sizeof(c->v->pre), "%s",
				 tj_pres[i].name);
			return 0;
		}
	}
	o1_err("tokenizer %s: unrecognised Split regex %.120s", c->label,
	       re->valuestring);
	return -O1_E_UNSUPPORTED;
}

/* Byte-level BPE: the pre-tokenizer name from the Split regex or the
 * ByteLevel GPT-2 regex. */
static int parse_bytelevel(struct tj_ctx *c, const cJSON *pre)
{
	const cJSON *split = find_part(pre, "Split");
	const cJSON *bl = find_part(pre, "ByteLevel");
	const cJSON *use_regex = get(bl, "use_regex");

	c->v->kind = O1_VOCAB_BPE;
	if (cJSON_IsTrue(get(bl, "add_prefix_space")))
		o1_warn("tokenizer %s: ByteLevel add_prefix_space is ignored",
			c->label);
	if (split)
		return pre_from_split(c, split);
	if (use_regex && !cJSON_IsTrue(use_regex)) {
		o1_err("tokenizer %s: ByteLevel without a regex and no Split "
		       "pre-tokenizer",
		       c->label);
		return -O1_E_UNSUPPORTED;
	}
	snprintf(c->v->pre, sizeof(c->v->pre), "gpt2");
	return 0;
}

static bool prepends_space(const cJSON *root)
{
	const cJSON *prepend = find_part(get(root, "normalizer"), "Prepend");
	const cJSON *meta = find_part(get(root, "pre_tokenizer"), "Metaspace");
	const cJSON *scheme = get(meta, "prepend_scheme");

	if (prepend)
		return cJSON_IsString(get(prepend, "prepend")) &&
		       strcmp(get(prepend, "prepend")->valuestring, TJ_SPACE) ==
			   0;
	if (!meta)
		return false;
	if (cJSON_IsString(scheme))
		return strcmp(scheme->valuestring, "never") != 0;
	return !get(meta, "add_prefix_space") ||
	       cJSON_IsTrue(get(meta, "add_prefix_space"));
}

static bool spm_style(const cJSON *root, bool byte_fallback)
{
	return byte_fallback ||
	       find_part(get(root, "pre_tokenizer"), "Metaspace") ||
	       find_part(get(root, "normalizer"), "Prepend") ||
	       find_part(get(root, "decoder"), "Metaspace") ||
	       find_part(get(root, "decoder"), "ByteFallback");
}

static int parse_kind(struct tj_ctx *c, const cJSON *root)
{
	const cJSON *pre = get(root, "pre_tokenizer");

	if (find_part(pre, "ByteLevel"))
		return parse_bytelevel(c, pre);
	if (!spm_style(root, c->byte_fallback)) {
		o1_err("tokenizer %s: BPE that is neither byte-level nor "
		       "SentencePiece-style",
		       c->label);
		return -O1_E_UNSUPPORTED;
	}
	c->v->kind = O1_VOCAB_SPM;
	c->v->add_space_prefix = prepends_space(root);
	return 0;
}

/* bos/eos and add_bos/add_eos from a TemplateProcessing post-processor. */
static void parse_template(struct tj_ctx *c, const cJSON *root)
{
	const cJSON *tp =
	    find_part(get(root, "post_processor"), "TemplateProcessing");
	const cJSON *item;
	bool seen_seq = false;

	cJSON_ArrayForEach(item, get(tp, "single"))
	{
		const cJSON *sp = get(get(item, "SpecialToken"), "id");
		int32_t id =
		    cJSON_IsString(sp) ? lookup(c, sp->valuestring) : -1;

		if (get(item, "Sequence"))
			seen_seq = true;
		else if (id >= 0 && !seen_seq)
			c->v->bos_id = id, c->v->add_bos = true;
		else if (id >= 0)
			c->v->eos_id = id, c->v->add_eos = true;
	}
}

static int check_model(struct tj_ctx *c, const cJSON *model)
{
	const cJSON *type = get(model, "type");
	const cJSON *bf = get(model, "byte_fallback");
	const cJSON *im = get(model, "ignore_merges");

	if (!cJSON_IsObject(model))
		return bad(c, "no \"model\" object", model);
	if (type && !cJSON_IsString(type))
		return bad(c, "model.type is not a string", type);
	if (type && strcmp(type->valuestring, "BPE") != 0) {
		o1_err(
		    "tokenizer %s: model type %s is not supported (BPE only)",
		    c->label, type->valuestring);
		return -O1_E_UNSUPPORTED;
	}
	if (!cJSON_IsObject(get(model, "vocab")))
		return bad(c, "model.vocab is not an object",
			   get(model, "vocab"));
	if (get(model, "merges") && !cJSON_IsArray(get(model, "merges")))
		return bad(c, "model.merges is not a list",
			   get(model, "merges"));
	if ((bf && !cJSON_IsBool(bf)) || (im && !cJSON_IsBool(im)))
		return bad(c, "byte_fallback/ignore_merges not boolean", model);
	if (cJSON_GetArraySize(get(model, "merges")) > (int)TJ_MAX_MERGES)
		return bad(c, "more than 2^26 merges", NULL);
	c->byte_fallback = cJSON_IsTrue(bf);
	return 0;
}

static int build_vocab(struct tj_ctx *c, const cJSON *root)
{
	const cJSON *model = get(root, "model");
	const cJSON *vocab = get(model, "vocab");
	const cJSON *merges = get(model, "merges");
	const cJSON *added = get(root, "added_tokens");
	uint32_t n;
	int err;

	if (added && !cJSON_IsArray(added))
		return bad(c, "added_tokens is not a list", added);
	err = count_tokens(c, vocab, added, &n);
	if (!err)
		err = o1_vocab_create(n, (uint32_t)cJSON_GetArraySize(merges),
				      &c->v);
	if (!err)
		err = fill_tokens(c, vocab, added);
	if (!err)
		err = o1_vocab_fill_holes(c->v);
	if (!err)
		err = fill_merges(c, merges);
	if (!err)
		err = map_build(&c->map, c->v->tokens, c->v->n_tokens);
	return err;
}

static int parse_unk(struct tj_ctx *c, const cJSON *model)
{
	const cJSON *unk = get(model, "unk_token");

	if (!unk)
		return 0;
	if (!cJSON_IsString(unk))
		return bad(c, "model.unk_token is not a string", unk);
	c->v->unk_id = lookup(c, unk->valuestring);
	if (c->v->unk_id < 0)
		return bad(c, "model.unk_token is not in the vocabulary", unk);
	c->v->types[c->v->unk_id] = O1_TOKEN_UNKNOWN;
	return 0;
}

static int parse_root(struct tj_ctx *c, const cJSON *root)
{
	const cJSON *model = get(root, "model");
	int err;

	if (!cJSON_IsObject(root))
		return bad(c, "not a JSON object", NULL);
	err = check_model(c, model);
	if (!err)
		err = build_vocab(c, root);
	if (!err)
		err = parse_kind(c, root);
	if (!err)
		err = parse_unk(c, model);
	if (err)
		return err;
	c->v->ignore_merges = cJSON_IsTrue(get(model, "ignore_merges"));
	if (c->v->kind == O1_VOCAB_SPM)
		spm_scores(c);
	parse_template(c, root);
	return 0;
}

/* ---- tokenizer_config.json ---- */

/* A special token setting: a string or {"content": string}. */
static const char *special_text(const cJSON *j)
{
	if (cJSON_IsObject(j))
		j = get(j, "content");
	return cJSON_IsString(j) ? j->valuestring : NULL;
}

static void config_token(struct tj_ctx *c, const cJSON *cfg, const char *key,
			 int32_t *id)
{
	const char *text = special_text(get(cfg, key));
	int32_t found = lookup(c, text);

	if (text && found < 0)
		o1_warn("tokenizer %s: %s \"%.40s\" is not in the vocabulary",
			c->label, key, text);
	if (found >= 0)
		*id = found;
}

static int config_template(struct tj_ctx *c, const cJSON *cfg)
{
	const cJSON *t = get(cfg, "chat_template"), *item;

	if (cJSON_IsArray(t)) {
		const cJSON *list = t;

		t = NULL;
		cJSON_ArrayForEach(item, list)
		{
			const cJSON *name = get(item, "name");

			if (cJSON_IsString(name) &&
			    strcmp(name->valuestring, "default") == 0)
				t = get(item, "template");
		}
	}
	if (!t)
		return 0;
	if (!cJSON_IsString(t))
		return bad(c, "chat_template is not a string", NULL);
	c->v->chat_template =
	    o1_vocab_strdup(c->v, t->valuestring, strlen(t->valuestring));
	return c->v->chat_template ? 0 : -ENOMEM;
}

static int apply_config(struct tj_ctx *c, const cJSON *cfg)
{
	const cJSON *ab = get(cfg, "add_bos_token");
	const cJSON *ae = get(cfg, "add_eos_token");

	if (!cJSON_IsObject(cfg))
		return bad(c, "tokenizer_config.json is not a JSON object",
			   NULL);
	if ((ab && !cJSON_IsBool(ab)) || (ae && !cJSON_IsBool(ae)))
		return bad(c, "add_bos_token/add_eos_token not boolean", cfg);
	config_token(c, cfg, "bos_token", &c->v->bos_id);
	config_token(c, cfg, "eos_token", &c->v->eos_id);
	config_token(c, cfg, "unk_token", &c->v->unk_id);
	config_token(c, cfg, "pad_token", &c->v->pad_id);
	if (ab)
		c->v->add_bos = cJSON_IsTrue(ab);
	if (ae)
		c->v->add_eos = cJSON_IsTrue(ae);
	return config_template(c, cfg);
}

static cJSON *parse_file(const char *path, int *err)
{
	size_t len = 0;
	char *text = NULL;
	cJSON *root;

	*err = o1_file_read(path, TJ_MAX_FILE_BYTES, &text, &len);
	if (*err)
		return NULL;
	root = cJSON_ParseWithLength(text, len);
	free(text);
	if (!root) {
		o1_err("tokenizer %s: not valid JSON", path);
		*err = -O1_E_FORMAT;
	}
	return root;
}

/* chat_template.jinja beside tokenizer.json: the template as newer
 * transformers saves it, preferred to tokenizer_config.json's. */
static int load_template_file(struct tj_ctx *c, const char *json_path)
{
	const char *slash = strrchr(json_path, '/');
	char path[PATH_MAX], *text = NULL;
	size_t len = 0;
	int err;

	if (snprintf(path, sizeof(path), "%.*schat_template.jinja",
		     slash ? (int)(slash - json_path + 1) : 0,
		     json_path) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	err = o1_file_read(path, TJ_MAX_FILE_BYTES, &text, &len);
	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	free(c->v->chat_template);
	c->v->chat_template = o1_vocab_strdup(c->v, text, len);
	free(text);
	return c->v->chat_template ? 0 : -ENOMEM;
}

static int load_config(struct tj_ctx *c, const char *json_path)
{
	const char *slash = strrchr(json_path, '/');
	char path[PATH_MAX];
	cJSON *cfg;
	int err;

	if (snprintf(path, sizeof(path), "%.*stokenizer_config.json",
		     slash ? (int)(slash - json_path + 1) : 0,
		     json_path) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	cfg = parse_file(path, &err);
	if (err == -ENOENT)
		return 0;
	if (!err)
		err = apply_config(c, cfg);
	cJSON_Delete(cfg);
	return err;
}

int o1_vocab_load_tokenizer_json(const char *path, struct o1_vocab **out)
{
	struct tj_ctx c = {.label = path};
	int err;
	cJSON *root = parse_file(path, &err);

	if (err == -ENOENT)
		o1_err("tokenizer %s: %s", path, o1_strerror(err));
	if (err)
		return err;
	err = parse_root(&c, root);
	cJSON_Delete(root);
	if (!err)
		err = load_config(&c, path);
	if (!err)
		err = load_template_file(&c, path);
	free(c.map.slots);
	if (err) {
		o1_vocab_destroy(c.v);
		return err;
	}
	*out = c.v;
	return 0;
}

/* ---- writing ---- */

static bool is_hole(const struct o1_vocab *v, uint32_t id)
{
	char name[32];

	snprintf(name, sizeof(name), "<|unused_%u|>", id);
	return v->types && v->types[id] == O1_TOKEN_UNUSED &&
	       strcmp(v->tokens[id], name) == 0 && id + 1 < v->n_tokens;
}

static int32_t type_of(const struct o1_vocab *v, uint32_t id)
{
	return v->types ? v->types[id] : O1_TOKEN_NORMAL;
}

static cJSON *added_json(const struct o1_vocab *v)
{
	cJSON *list = cJSON_CreateArray();

	for (uint32_t id = 0; list && id < v->n_tokens; id++) {
		int32_t t = type_of(v, id);
		cJSON *a;

		if (t != O1_TOKEN_CONTROL && t != O1_TOKEN_USER_DEFINED &&
		    t != O1_TOKEN_UNKNOWN)
			continue;
		a = cJSON_CreateObject();
		if (!cJSON_AddItemToArray(list, a) ||
		    !cJSON_AddNumberToObject(a, "id", id) ||
		    !cJSON_AddStringToObject(a, "content", v->tokens[id]) ||
		    !cJSON_AddFalseToObject(a, "single_word") ||
		    !cJSON_AddFalseToObject(a, "lstrip") ||
		    !cJSON_AddFalseToObject(a, "rstrip") ||
		    !cJSON_AddBoolToObject(a, "normalized",
					   t == O1_TOKEN_USER_DEFINED) ||
		    !cJSON_AddBoolToObject(a, "special",
					   t != O1_TOKEN_USER_DEFINED)) {
			cJSON_Delete(list);
			return NULL;
		}
	}
	return list;
}

static cJSON *typed(const char *type)
{
	cJSON *o = cJSON_CreateObject();

	if (o && !cJSON_AddStringToObject(o, "type", type)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *bytelevel_json(bool use_regex, bool add_prefix_space)
{
	cJSON *o = typed("ByteLevel");

	if (!o ||
	    !cJSON_AddBoolToObject(o, "add_prefix_space", add_prefix_space) ||
	    !cJSON_AddTrueToObject(o, "trim_offsets") ||
	    !cJSON_AddBoolToObject(o, "use_regex", use_regex)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* A Sequence of TYPE holding the N parts under KEY (NULL parts skipped;
 * consumed in every case). */
static cJSON *sequence(const char *key, cJSON **parts, int n)
{
	cJSON *seq = typed("Sequence");
	cJSON *list = cJSON_AddArrayToObject(seq, key);
	bool ok = list != NULL;

	for (int i = 0; i < n; i++) {
		if (ok && parts[i])
			ok = cJSON_AddItemToArray(list, parts[i]);
		else
			cJSON_Delete(parts[i]);
	}
	if (!ok) {
		cJSON_Delete(seq);
		return NULL;
	}
	return seq;
}

static cJSON *split_json(const char *regex)
{
	cJSON *o = typed("Split");
	cJSON *pat = cJSON_AddObjectToObject(o, "pattern");

	if (!pat || !cJSON_AddStringToObject(pat, "Regex", regex) ||
	    !cJSON_AddStringToObject(o, "behavior", "Isolated") ||
	    !cJSON_AddFalseToObject(o, "invert")) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int bpe_pre_json(const struct o1_vocab *v, cJSON **out)
{
	cJSON *parts[2];

	for (size_t i = 0; i < sizeof(tj_pres) / sizeof(tj_pres[0]); i++) {
		if (strcmp(v->pre, tj_pres[i].name) != 0)
			continue;
		if (!tj_pres[i].regex) {
			*out = bytelevel_json(true, false);
			return *out ? 0 : -ENOMEM;
		}
		parts[0] = split_json(tj_pres[i].regex);
		parts[1] = bytelevel_json(false, false);
		*out = sequence("pretokenizers", parts, 2);
		return *out ? 0 : -ENOMEM;
	}
	o1_err("tokenizer writer: pre-tokenizer \"%s\" has no tokenizer.json "
	       "form here (gpt2, llama-bpe, qwen2)",
	       v->pre);
	return -O1_E_UNSUPPORTED;
}

static cJSON *replace_json(const char *from, const char *to)
{
	cJSON *o = typed("Replace");
	cJSON *pat = cJSON_AddObjectToObject(o, "pattern");

	if (!pat || !cJSON_AddStringToObject(pat, "String", from) ||
	    !cJSON_AddStringToObject(o, "content", to)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *spm_normalizer(const struct o1_vocab *v)
{
	cJSON *parts[2] = {NULL, replace_json(" ", TJ_SPACE)};

	if (v->add_space_prefix) {
		parts[0] = typed("Prepend");
		if (parts[0] &&
		    !cJSON_AddStringToObject(parts[0], "prepend", TJ_SPACE)) {
			cJSON_Delete(parts[0]);
			parts[0] = NULL;
		}
	}
	return sequence("normalizers", parts, 2);
}

static cJSON *spm_decoder(const struct o1_vocab *v)
{
	cJSON *parts[4] = {replace_json(TJ_SPACE, " "), typed("ByteFallback"),
			   typed("Fuse"), NULL};

	if (v->add_space_prefix) {
		parts[3] = typed("Strip");
		if (parts[3] &&
		    (!cJSON_AddStringToObject(parts[3], "content", " ") ||
		     !cJSON_AddNumberToObject(parts[3], "start", 1) ||
		     !cJSON_AddNumberToObject(parts[3], "stop", 0))) {
			cJSON_Delete(parts[3]);
			parts[3] = NULL;
		}
	}
	return sequence("decoders", parts, 4);
}

static bool add_special_item(cJSON *list, const char *text)
{
	cJSON *item = cJSON_CreateObject();
	cJSON *st = cJSON_AddObjectToObject(item, "SpecialToken");

	if (!st || !cJSON_AddStringToObject(st, "id", text) ||
	    !cJSON_AddNumberToObject(st, "type_id", 0) ||
	    !cJSON_AddItemToArray(list, item)) {
		cJSON_Delete(item);
		return false;
	}
	return true;
}

static bool add_seq_item(cJSON *list, const char *which, int type_id)
{
	cJSON *item = cJSON_CreateObject();
	cJSON *seq = cJSON_AddObjectToObject(item, "Sequence");

	if (!seq || !cJSON_AddStringToObject(seq, "id", which) ||
	    !cJSON_AddNumberToObject(seq, "type_id", type_id) ||
	    !cJSON_AddItemToArray(list, item)) {
		cJSON_Delete(item);
		return false;
	}
	return true;
}

static bool add_special_entry(cJSON *map, const struct o1_vocab *v, int32_t id)
{
	cJSON *e = cJSON_AddObjectToObject(map, v->tokens[id]);
	cJSON *ids = cJSON_AddArrayToObject(e, "ids");
	cJSON *toks = cJSON_AddArrayToObject(e, "tokens");

	return toks && cJSON_AddStringToObject(e, "id", v->tokens[id]) &&
	       cJSON_AddItemToArray(ids, cJSON_CreateNumber(id)) &&
	       cJSON_AddItemToArray(toks, cJSON_CreateString(v->tokens[id]));
}

/* TemplateProcessing for add_bos/add_eos: [BOS] A [EOS] (pair: A B). */
static bool template_list(cJSON *list, const struct o1_vocab *v, bool pair)
{
	bool ok = true;

	if (v->add_bos)
		ok = add_special_item(list, v->tokens[v->bos_id]);
	ok = ok && add_seq_item(list, "A", 0);
	if (ok && pair)
		ok = add_seq_item(list, "B", 1);
	if (ok && v->add_eos)
		ok = add_special_item(list, v->tokens[v->eos_id]);
	return ok;
}

static int post_json(const struct o1_vocab *v, cJSON **out)
{
	bool bos =
	    v->add_bos && v->bos_id >= 0 && (uint32_t)v->bos_id < v->n_tokens;
	bool eos =
	    v->add_eos && v->eos_id >= 0 && (uint32_t)v->eos_id < v->n_tokens;
	cJSON *o, *map;
	bool ok;

	*out = NULL;
	if (v->add_bos != bos || v->add_eos != eos) {
		o1_err("tokenizer writer: add_bos/add_eos set without a valid "
		       "bos %d / eos %d",
		       v->bos_id, v->eos_id);
		return -EINVAL;
	}
	if (!bos && !eos)
		return 0;
	o = typed("TemplateProcessing");
	map = cJSON_AddObjectToObject(o, "special_tokens");
	ok = map &&
	     template_list(cJSON_AddArrayToObject(o, "single"), v, false) &&
	     template_list(cJSON_AddArrayToObject(o, "pair"), v, true);
	if (ok && bos)
		ok = add_special_entry(map, v, v->bos_id);
	if (ok && eos && !(bos && v->eos_id == v->bos_id))
		ok = add_special_entry(map, v, v->eos_id);
	if (!ok) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	*out = o;
	return 0;
}

static cJSON *vocab_map_json(const struct o1_vocab *v)
{
	cJSON *map = cJSON_CreateObject();

	for (uint32_t id = 0; map && id < v->n_tokens; id++) {
		if (is_hole(v, id))
			continue;
		if (!cJSON_AddNumberToObject(map, v->tokens[id], id)) {
			cJSON_Delete(map);
			return NULL;
		}
	}
	return map;
}

/* Sort order for merge generation: score descending, then id. */
static int cmp_score(const void *a, const void *b, void *scores)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	float sx = ((const float *)scores)[x], sy = ((const float *)scores)[y];

	if (sx != sy)
		return sx > sy ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Appends every split "left right" of token ID whose halves are tokens. */
static int add_splits(const struct o1_vocab *v, const struct tj_map *map,
		      uint32_t id, cJSON *list)
{
	const char *s = v->tokens[id];
	size_t len = strlen(s);
	char buf[1024];

	if (len + 2 > sizeof(buf))
		return 0;
	for (size_t k = 1; k < len; k++) {
		if (((uint8_t)s[k] & 0xc0) == 0x80)
			continue;
		memcpy(buf, s, k);
		buf[k] = 0;
		if (map_find(map, buf) < 0 || map_find(map, s + k) < 0)
			continue;
		buf[k] = ' ';
		strcpy(buf + k + 1, s + k);
		if (!cJSON_AddItemToArray(list, cJSON_CreateString(buf)))
			return -ENOMEM;
	}
	return 0;
}

/* SentencePiece merges from scores, for vocabularies without merges. */
static int merges_from_scores(const struct o1_vocab *v, cJSON *list)
{
	uint32_t *order = malloc(v->n_tokens * sizeof(*order));
	struct tj_map map = {0};
	uint32_t n = 0;
	int err = order ? map_build(&map, v->tokens, v->n_tokens) : -ENOMEM;

	for (uint32_t id = 0; !err && id < v->n_tokens; id++)
		if (type_of(v, id) == O1_TOKEN_NORMAL)
			order[n++] = id;
	if (!err && v->scores)
		qsort_r(order, n, sizeof(*order), cmp_score, v->scores);
	for (uint32_t i = 0; !err && i < n; i++)
		err = add_splits(v, &map, order[i], list);
	free(map.slots);
	free(order);
	return err;
}

static cJSON *merges_json(const struct o1_vocab *v)
{
	cJSON *list = cJSON_CreateArray();
	int err = 0;

	if (list && v->n_merges == 0 && v->kind == O1_VOCAB_SPM)
		err = merges_from_scores(v, list);
	for (uint32_t i = 0; list && !err && i < v->n_merges; i++)
		if (!cJSON_AddItemToArray(list,
					  cJSON_CreateString(v->merges[i])))
			err = -ENOMEM;
	if (err) {
		cJSON_Delete(list);
		return NULL;
	}
	return list;
}

static bool has_byte_tokens(const struct o1_vocab *v)
{
	for (uint32_t id = 0; id < v->n_tokens; id++)
		if (type_of(v, id) == O1_TOKEN_BYTE)
			return true;
	return false;
}

static cJSON *model_json(const struct o1_vocab *v)
{
	cJSON *m = typed("BPE");
	bool spm = v->kind == O1_VOCAB_SPM;
	bool unk = v->unk_id >= 0 && (uint32_t)v->unk_id < v->n_tokens;
	bool ok =
	    m && cJSON_AddNullToObject(m, "dropout") &&
	    (unk ? cJSON_AddStringToObject(m, "unk_token",
					   v->tokens[v->unk_id]) != NULL
		 : cJSON_AddNullToObject(m, "unk_token") != NULL) &&
	    cJSON_AddNullToObject(m, "continuing_subword_prefix") &&
	    cJSON_AddNullToObject(m, "end_of_word_suffix") &&
	    cJSON_AddBoolToObject(m, "fuse_unk", spm) &&
	    cJSON_AddBoolToObject(m, "byte_fallback", has_byte_tokens(v)) &&
	    cJSON_AddBoolToObject(m, "ignore_merges", v->ignore_merges) &&
	    cJSON_AddItemToObject(m, "vocab", vocab_map_json(v)) &&
	    cJSON_AddItemToObject(m, "merges", merges_json(v));

	if (!ok) {
		cJSON_Delete(m);
		return NULL;
	}
	return m;
}

static int add_pipeline(cJSON *root, const struct o1_vocab *v)
{
	cJSON *pre = NULL, *post = NULL;
	bool spm = v->kind == O1_VOCAB_SPM;
	int err = spm ? 0 : bpe_pre_json(v, &pre);

	if (!err)
		err = post_json(v, &post);
	if (err) {
		cJSON_Delete(pre);
		return err;
	}
	if (!cJSON_AddItemToObject(root, "normalizer",
				   spm ? spm_normalizer(v)
				       : cJSON_CreateNull()) ||
	    !cJSON_AddItemToObject(root, "pre_tokenizer",
				   pre ? pre : cJSON_CreateNull()) ||
	    !cJSON_AddItemToObject(root, "post_processor",
				   post ? post : cJSON_CreateNull()) ||
	    !cJSON_AddItemToObject(root, "decoder",
				   spm ? spm_decoder(v)
				       : bytelevel_json(true, true)))
		return -ENOMEM;
	return 0;
}

static int tokenizer_json(const struct o1_vocab *v, char **out)
{
	cJSON *root = cJSON_CreateObject();
	int err = root ? 0 : -ENOMEM;

	if (!err &&
	    (!cJSON_AddStringToObject(root, "version", "1.0") ||
	     !cJSON_AddNullToObject(root, "truncation") ||
	     !cJSON_AddNullToObject(root, "padding") ||
	     !cJSON_AddItemToObject(root, "added_tokens", added_json(v))))
		err = -ENOMEM;
	if (!err)
		err = add_pipeline(root, v);
	if (!err && !cJSON_AddItemToObject(root, "model", model_json(v)))
		err = -ENOMEM;
	*out = err ? NULL : cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return err ? err : *out ? 0 : -ENOMEM;
}

static bool add_token_text(cJSON *cfg, const char *key,
			   const struct o1_vocab *v, int32_t id)
{
	if (id < 0 || (uint32_t)id >= v->n_tokens)
		return cJSON_AddNullToObject(cfg, key) != NULL;
	return cJSON_AddStringToObject(cfg, key, v->tokens[id]) != NULL;
}

static int config_json(const struct o1_vocab *v, char **out)
{
	cJSON *cfg = cJSON_CreateObject();
	bool ok = cfg &&
		  cJSON_AddBoolToObject(cfg, "add_bos_token", v->add_bos) &&
		  cJSON_AddBoolToObject(cfg, "add_eos_token", v->add_eos) &&
		  add_token_text(cfg, "bos_token", v, v->bos_id) &&
		  add_token_text(cfg, "eos_token", v, v->eos_id) &&
		  add_token_text(cfg, "unk_token", v, v->unk_id) &&
		  add_token_text(cfg, "pad_token", v, v->pad_id) &&
		  cJSON_AddFalseToObject(cfg, "clean_up_tokenization_spaces") &&
		  cJSON_AddStringToObject(cfg, "tokenizer_class",
					  "PreTrainedTokenizerFast");

	if (ok && v->chat_template)
		ok = cJSON_AddStringToObject(cfg, "chat_template",
					     v->chat_template) != NULL;
	*out = ok ? cJSON_Print(cfg) : NULL;
	cJSON_Delete(cfg);
	return *out ? 0 : -ENOMEM;
}

static int write_text(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	return o1_file_write_text(path, text);
}

static int check_writable(const struct o1_vocab *v)
{
	for (uint32_t id = 0; id < v->n_tokens; id++) {
		if (!v->tokens || !v->tokens[id]) {
			o1_err("tokenizer writer: token %u has no text", id);
			return -EINVAL;
		}
	}
	for (uint32_t i = 0; i < v->n_merges; i++) {
		if (!v->merges[i] || !strchr(v->merges[i], ' ')) {
			o1_err("tokenizer writer: merge %u is not \"a b\"", i);
			return -EINVAL;
		}
	}
	return 0;
}

int o1_vocab_write_tokenizer_json(const struct o1_vocab *v, const char *dir)
{
	char *text = NULL;
	int err = check_writable(v);

	if (!err)
		err = tokenizer_json(v, &text);
	if (!err)
		err = write_text(dir, "tokenizer.json", text);
	free(text);
	text = NULL;
	if (!err)
		err = config_json(v, &text);
	if (!err)
		err = write_text(dir, "tokenizer_config.json", text);
	free(text);
	return err;
}

/* GPT-2 style vocabulary pairs (vocab.json/encoder.json + merges.txt/
 * vocab.bpe) -> struct o1_vocab, and the loader that picks a format from a
 * path. Every token id in [0, max id] gets a text, so the vocabulary has
 * no holes; every string is owned by the vocabulary.
 */
#include "vocab_gpt2.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/log.h"

static int read_file(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long size;
	int ret = 0;

	if (!f) {
		ret = -errno;
		o1_err("%s: cannot open: %s", path, strerror(errno));
		return ret;
	}
	if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET)) {
		ret = -EIO;
		o1_err("%s: cannot find its size", path);
		goto out_close;
	}
	*buf = malloc((size_t)size + 1);
	if (!*buf) {
		ret = -ENOMEM;
		goto out_close;
	}
	if (fread(*buf, 1, (size_t)size, f) != (size_t)size) {
		ret = -EIO;
		o1_err("%s: short read of %ld bytes", path, size);
		free(*buf);
		goto out_close;
	}
	(*buf)[size] = 0;
	*len = (size_t)size;
out_close:
	fclose(f);
	return ret;
}

/* Largest id in the map; -O1_E_FORMAT for a value that is not an id. */
static int max_id(const char *path, const cJSON *map, uint32_t *n)
{
	const cJSON *e;
	double max = -1;

	cJSON_ArrayForEach(e, map)
	{
		double id = cJSON_IsNumber(e) ? e->valuedouble : -1;

		if (id < 0 || id > 16777216 || id != (double)(int)id) {
			o1_err("%s: token '%s' has id %g, not an integer "
			       "in [0, 2^24]",
			       path, e->string ? e->string : "?", id);
			return -O1_E_FORMAT;
		}
		if (id > max)
			max = id;
	}
	if (max < 0) {
		o1_err("%s: no tokens", path);
		return -O1_E_FORMAT;
	}
	*n = (uint32_t)max + 1;
	return 0;
}

static int fill_tokens(const char *path, const cJSON *map, struct o1_vocab *v)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, map)
	{
		uint32_t id = (uint32_t)e->valueint;

		if (v->tokens[id]) {
			o1_err("%s: id %u given to both '%s' and '%s'", path,
			       id, v->tokens[id], e->string);
			return -O1_E_FORMAT;
		}
		v->tokens[id] =
		    o1_vocab_strdup(v, e->string, strlen(e->string));
		if (!v->tokens[id])
			return -ENOMEM;
	}
	return o1_vocab_fill_holes(v);
}

static int load_map(const char *path, struct o1_vocab **out, uint32_t n_merges)
{
	cJSON *map = NULL;
	char *buf;
	size_t len;
	uint32_t n = 0;
	int ret = read_file(path, &buf, &len);

	if (ret)
		return ret;
	map = cJSON_ParseWithLength(buf, len);
	if (!map || !cJSON_IsObject(map)) {
		o1_err("%s: not a JSON object of token -> id", path);
		ret = -O1_E_FORMAT;
		goto out_free;
	}
	ret = max_id(path, map, &n);
	if (!ret)
		ret = o1_vocab_create(n, n_merges, out);
	if (!ret) {
		ret = fill_tokens(path, map, *out);
		if (ret) {
			o1_vocab_destroy(*out);
			*out = NULL;
		}
	}
out_free:
	cJSON_Delete(map);
	free(buf);
	return ret;
}

/* Splits BUF into lines in place; counts the merges; stores them when V. */
static uint32_t scan_merges(char *buf, size_t len, struct o1_vocab *v, int *err)
{
	uint32_t n = 0;
	char *p = buf, *end = buf + len;

	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (l && p[l - 1] == '\r')
			l--;
		if (l && !(p == buf && strncmp(p, "#version", 8) == 0)) {
			if (v) {
				v->merges[n] = o1_vocab_strdup(v, p, l);
				if (!v->merges[n]) {
					*err = -ENOMEM;
					return n;
				}
			}
			n++;
		}
		p = nl ? nl + 1 : end;
	}
	return n;
}

static bool is_digits(const char *s, size_t *n)
{
	*n = strlen(s);
	if (!*n)
		return false;
	for (size_t i = 0; i < *n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* The family whose regex produced these digit tokens (see header). */
static void detect_pre(struct o1_vocab *v)
{
	size_t longest = 0, n;

	for (uint32_t i = 0; i < v->n_tokens; i++) {
		const char *s = v->tokens[i];

		if (strncmp(s, "\xc4\xa0", 2) == 0) /* Ġ, a mapped space */
			s += 2;
		if (is_digits(s, &n) && n > longest)
			longest = n;
	}
	if (longest >= 4) {
		strcpy(v->pre, "gpt2");
	} else if (longest >= 2) {
		strcpy(v->pre, "llama-bpe");
		v->ignore_merges = true;
		v->add_bos = true;
	} else {
		strcpy(v->pre, "qwen2");
	}
	o1_info("vocabulary: longest digit token %zu, pre-tokenizer %s",
		longest, v->pre);
}

static void mark_specials(struct o1_vocab *v)
{
	for (uint32_t i = 0; i < v->n_tokens; i++) {
		const char *s = v->tokens[i];
		size_t n = strlen(s);

		if (n < 5 || strncmp(s, "<|", 2) || strcmp(s + n - 2, "|>"))
			continue;
		if (v->types[i] == O1_TOKEN_NORMAL)
			v->types[i] = O1_TOKEN_CONTROL;
		if (!strcmp(s, "<|endoftext|>")) {
			v->bos_id = v->bos_id < 0 ? (int32_t)i : v->bos_id;
			v->eos_id = (int32_t)i;
		} else if (!strcmp(s, "<|begin_of_text|>")) {
			v->bos_id = (int32_t)i;
		} else if (!strcmp(s, "<|end_of_text|>")) {
			v->eos_id = (int32_t)i;
		}
	}
	if (v->bos_id < 0)
		v->add_bos = false;
}

int o1_vocab_load_gpt2(const char *vocab_path, const char *merges_path,
		       struct o1_vocab **out)
{
	struct o1_vocab *v = NULL;
	char *buf;
	size_t len;
	int ret = read_file(merges_path, &buf, &len);

	if (ret)
		return ret;
	ret = load_map(vocab_path, &v, scan_merges(buf, len, NULL, &ret));
	if (ret)
		goto out_free;
	for (uint32_t i = 0; i < v->n_tokens; i++)
		if (v->types[i] != O1_TOKEN_UNUSED)
			v->types[i] = O1_TOKEN_NORMAL;
	scan_merges(buf, len, v, &ret);
	if (ret)
		goto out_destroy;
	v->kind = O1_VOCAB_BPE;
	detect_pre(v);
	mark_specials(v);
	*out = v;
	goto out_free;
out_destroy:
	o1_vocab_destroy(v);
out_free:
	free(buf);
	return ret;
}

static bool exists(const char *dir, const char *name, char *path, size_t cap)
{
	struct stat st;

	snprintf(path, cap, "%s%s%s", dir, dir[0] ? "/" : "", name);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A pair in DIR: vocab.json or encoder.json with merges.txt or vocab.bpe. */
static int load_pair_in(const char *dir, struct o1_vocab **out)
{
	static const char *const maps[] = {"vocab.json", "encoder.json"};
	static const char *const merges[] = {"merges.txt", "vocab.bpe"};
	char map[4096], mrg[4096];

	for (int i = 0; i < 2; i++) {
		if (!exists(dir, maps[i], map, sizeof(map)))
			continue;
		for (int j = 0; j < 2; j++)
			if (exists(dir, merges[j], mrg, sizeof(mrg)))
				return o1_vocab_load_gpt2(map, mrg, out);
	}
	o1_err("%s: no tokenizer.json, nor vocab.json/encoder.json with "
	       "merges.txt/vocab.bpe",
	       dir);
	return -ENOENT;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int load_file(const char *path, struct o1_vocab **out)
{
	const char *base = strrchr(path, '/');
	char dir[4096];

	base = base ? base + 1 : path;
	if (!strcmp(base, "vocab.json") || !strcmp(base, "encoder.json")) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(base - path), path);
		if (dir[0] && dir[strlen(dir) - 1] == '/')
			dir[strlen(dir) - 1] = 0;
		return load_pair_in(dir[0] ? dir : ".", out);
	}
	if (ends_with(path, ".json"))
		return o1_vocab_load_tokenizer_json(path, out);
	return o1_vocab_load_gguf(path, out);
}

int o1_vocab_load_any(const char *path, struct o1_vocab **out)
{
	char tj[4096];
	struct stat st;

	if (stat(path, &st) != 0) {
		int ret = -errno;

		o1_err("%s: %s", path, strerror(errno));
		return ret;
	}
	if (!S_ISDIR(st.st_mode))
		return load_file(path, out);
	if (exists(path, "tokenizer.json", tj, sizeof(tj)))
		return o1_vocab_load_tokenizer_json(tj, out);
	return load_pair_in(path, out);
}

/* Tokenizer construction, lookup tables, special-token splitting and the
 * encode entry point. The per-algorithm work is in tokenizer_bpe.c and
 * tokenizer_spm.c, decoding in detokenizer.c.
 *
 * Invariant: after o1_tokenizer_create returns, nothing in the tokenizer is
 * written again until destroy, so encodes on many threads need no lock.
 */
#include "tokenizer_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/utf8.h"
#include "tool_call.h"

/* Eight bytes per multiply-xorshift round. */
uint32_t tok_hash(const char *s, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len, x;

	for (; len >= 8; s += 8, len -= 8) {
		memcpy(&x, s, 8);
		h = (h ^ x) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	x = 0;
	memcpy(&x, s, len);
	h = (h ^ x) * 0xc4ceb9fe1a85ec53ull;
	return (uint32_t)(h ^ h >> 29);
}

static bool want_all(const struct o1_tokenizer *t, int32_t id)
{
	(void)t;
	(void)id;
	return true;
}

/* Later ids win over earlier ones with the same key, as in llama.cpp. */
int tok_strmap_init(struct tok_strmap *m, uint32_t n, const char *blob,
		    const uint32_t *off,
		    bool (*want)(const struct o1_tokenizer *, int32_t),
		    const struct o1_tokenizer *t)
{
	uint32_t size = 16;

	while (size < 2 * n)
		size <<= 1;
	m->mask = size - 1;
	m->blob = blob;
	m->off = off;
	m->ids = malloc(size * sizeof(*m->ids));
	m->hashes = malloc(size * sizeof(*m->hashes));
	if (!m->ids || !m->hashes)
		return -ENOMEM;
	memset(m->ids, 0xff, size * sizeof(*m->ids));
	for (uint32_t id = 0; id < n; id++) {
		const char *s = blob + off[id];
		uint32_t len = tok_len(off, (int32_t)id);
		uint32_t h = tok_hash(s, len), i = h & m->mask;

		if (want && !want(t, (int32_t)id))
			continue;
		for (; m->ids[i] >= 0; i = (i + 1) & m->mask)
			if (m->hashes[i] == h &&
			    tok_len(off, m->ids[i]) == len &&
			    memcmp(blob + off[m->ids[i]], s, len) == 0)
				break;
		m->ids[i] = (int32_t)id;
		m->hashes[i] = h;
	}
	return 0;
}

void tok_strmap_fini(struct tok_strmap *m)
{
	free(m->ids);
	free(m->hashes);
	m->ids = NULL;
	m->hashes = NULL;
}

int32_t tok_strmap_get(const struct tok_strmap *m, const char *s, size_t len)
{
	uint32_t h, i;

	if (!m->ids)
		return -1;
	h = tok_hash(s, len);
	for (i = h & m->mask; m->ids[i] >= 0; i = (i + 1) & m->mask) {
		int32_t id = m->ids[i];

		if (m->hashes[i] == h && tok_len(m->off, id) == len &&
		    memcmp(m->blob + m->off[id], s, len) == 0)
			return id;
	}
	return -1;
}

void *tok_scratch_get(struct tok_scratch *s, size_t size)
{
	void *mem;

	if (size <= s->size)
		return s->mem;
	mem = realloc(s->mem, size);
	if (!mem)
		return NULL;
	s->mem = mem;
	s->size = size;
	return mem;
}

int tok_pieces_build(struct o1_tokenizer *t, size_t cap,
		     uint32_t (*piece)(const struct o1_tokenizer *t, int32_t id,
				       char *out))
{
	size_t total = 0;

	t->piece = malloc(cap ? cap : 1);
	t->piece_off = malloc((t->n_tokens + 1) * sizeof(*t->piece_off));
	if (!t->piece || !t->piece_off)
		return -ENOMEM;
	for (uint32_t id = 0; id < t->n_tokens; id++) {
		uint32_t n = piece(t, (int32_t)id, t->piece + total);

		t->piece_off[id] = (uint32_t)total;
		t->piece[total + n] = 0;
		total += n + 1;
		if (n > t->max_piece)
			t->max_piece = n;
	}
	t->piece_off[t->n_tokens] = (uint32_t)total;
	return 0;
}

static int copy_texts(struct o1_tokenizer *t, const struct o1_vocab *v)
{
	size_t total = 0;

	for (uint32_t i = 0; i < v->n_tokens; i++) {
		if (!v->tokens[i]) {
			o1_err("vocabulary: token %u has no text", i);
			return -O1_E_FORMAT;
		}
		total += strlen(v->tokens[i]) + 1;
	}
	if (total > UINT32_MAX) {
		o1_err("vocabulary: %zu bytes of token text, over 4 GiB",
		       total);
		return -O1_E_FORMAT;
	}
	t->text = malloc(total ? total : 1);
	t->text_off = malloc((v->n_tokens + 1) * sizeof(*t->text_off));
	if (!t->text || !t->text_off)
		return -ENOMEM;
	total = 0;
	for (uint32_t i = 0; i < v->n_tokens; i++) {
		size_t len = strlen(v->tokens[i]) + 1;

		t->text_off[i] = (uint32_t)total;
		memcpy(t->text + total, v->tokens[i], len);
		total += len;
	}
	t->text_off[v->n_tokens] = (uint32_t)total;
	return 0;
}

static int copy_attrs(struct o1_tokenizer *t, const struct o1_vocab *v)
{
	t->scores = calloc(v->n_tokens ? v->n_tokens : 1, sizeof(float));
	t->types = malloc((v->n_tokens ? v->n_tokens : 1) * sizeof(int32_t));
	if (!t->scores || !t->types)
		return -ENOMEM;
	for (uint32_t i = 0; i < v->n_tokens; i++) {
		t->types[i] = v->types ? v->types[i] : O1_TOKEN_NORMAL;
		if (v->scores)
			t->scores[i] = v->scores[i];
	}
	t->kind = v->kind;
	t->n_tokens = v->n_tokens;
	t->bos_id = v->bos_id < (int32_t)v->n_tokens ? v->bos_id : -1;
	t->eos_id = v->eos_id < (int32_t)v->n_tokens ? v->eos_id : -1;
	t->unk_id = v->unk_id < (int32_t)v->n_tokens ? v->unk_id : -1;
	t->add_bos = v->add_bos;
	t->add_eos = v->add_eos;
	t->add_space_prefix = v->add_space_prefix;
	t->ignore_merges = v->ignore_merges;
	return 0;
}

static bool matched_in_text(const struct o1_tokenizer *t, int32_t id)
{
	int32_t type = t->types[id];

	return tok_len(t->text_off, id) > 0 &&
	       (type == O1_TOKEN_CONTROL || type == O1_TOKEN_USER_DEFINED ||
		type == O1_TOKEN_UNKNOWN);
}

struct special_key {
	uint32_t first; /* first byte */
	uint32_t len;
	int32_t id;
};

/* By first byte, then longest first, then lowest id. */
static int special_cmp(const void *a, const void *b)
{
	const struct special_key *x = a, *y = b;

	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int sort_specials(struct o1_tokenizer *t)
{
	struct special_key *k =
	    malloc((t->n_specials ? t->n_specials : 1) * sizeof(*k));

	if (!k)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n_specials; i++) {
		int32_t id = t->specials[i];

		k[i] = (struct special_key){(uint8_t)t->text[t->text_off[id]],
					    tok_len(t->text_off, id), id};
	}
	qsort(k, t->n_specials, sizeof(*k), special_cmp);
	for (uint32_t i = 0; i < t->n_specials; i++)
		t->specials[i] = k[i].id;
	free(k);
	return 0;
}

static int collect_specials(struct o1_tokenizer *t)
{
	uint32_t n = 0, b = 0;

	t->specials =
	    malloc((t->n_tokens ? t->n_tokens : 1) * sizeof(*t->specials));
	if (!t->specials)
		return -ENOMEM;
	for (uint32_t id = 0; id < t->n_tokens; id++)
		if (matched_in_text(t, (int32_t)id))
			t->specials[n++] = (int32_t)id;
	t->n_specials = n;
	if (sort_specials(t))
		return -ENOMEM;
	for (uint32_t i = 0; i <= n; i++) {
		uint32_t first =
		    i < n ? (uint8_t)t->text[t->text_off[t->specials[i]]] : 256;

		while (b <= first)
			t->special_first[b++] = i;
	}
	while (b <= 256)
		t->special_first[b++] = n;
	return 0;
}

/* The control tokens whose text is a tool-call marker (by_text is built). */
static void collect_tool_markers(struct o1_tokenizer *t)
{
	for (const char *const *m = o1_tool_format_markers(); *m; m++) {
		int32_t id = tok_strmap_get(&t->by_text, *m, strlen(*m));

		if (id >= 0 && t->types[id] == O1_TOKEN_CONTROL &&
		    t->n_tool_marker < TOK_MAX_TOOL_MARKERS)
			t->tool_marker[t->n_tool_marker++] = id;
	}
}

void o1_tokenizer_destroy(struct o1_tokenizer *t)
{
	if (!t)
		return;
	tok_bpe_fini(t);
	tok_strmap_fini(&t->by_text);
	tok_strmap_fini(&t->by_piece);
	free(t->specials);
	free(t->text);
	free(t->text_off);
	free(t->piece);
	free(t->piece_off);
	free(t->scores);
	free(t->types);
	free(t);
}

int o1_tokenizer_create(const struct o1_vocab *v, struct o1_tokenizer **out)
{
	struct o1_tokenizer *t;
	int ret;

	if (!v || !out)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	ret = copy_texts(t, v);
	if (!ret)
		ret = copy_attrs(t, v);
	if (!ret)
		ret = tok_strmap_init(&t->by_text, t->n_tokens, t->text,
				      t->text_off, want_all, t);
	if (!ret)
		ret = collect_specials(t);
	if (!ret)
		collect_tool_markers(t);
	if (!ret)
		ret = v->kind == O1_VOCAB_SPM ? tok_spm_init(t)
					      : tok_bpe_init(t, v);
	if (ret)
		goto err_destroy;
	*out = t;
	return 0;

err_destroy:
	o1_tokenizer_destroy(t);
	return ret;
}

/* Finds the special token that starts at S, longest first; -1 if none. */
static int32_t special_at(const struct o1_tokenizer *t, const char *s,
			  size_t len, unsigned flags)
{
	uint8_t first = (uint8_t)s[0];

	for (uint32_t i = t->special_first[first];
	     i < t->special_first[first + 1]; i++) {
		int32_t id = t->specials[i];
		uint32_t n = tok_len(t->text_off, id);

		if (n > len || memcmp(t->text + t->text_off[id], s, n) != 0)
			continue;
		if (t->types[id] != O1_TOKEN_USER_DEFINED &&
		    !(flags & O1_ENCODE_PARSE_SPECIAL))
			continue;
		return id;
	}
	return -1;
}

/* Text between special tokens. SentencePiece gives every such segment
 * its dummy prefix: each one starts the text or follows a special token,
 * where llama.cpp adds it. */
static int encode_segment(const struct o1_tokenizer *t, const char *text,
			  size_t len, struct tok_scratch *scratch,
			  struct tok_sink *out)
{
	if (t->kind == O1_VOCAB_SPM)
		return tok_spm_encode(t, text, len, t->add_space_prefix,
				      scratch, out);
	return tok_bpe_encode(t, text, len, scratch, out);
}

static int check_utf8(const char *text, size_t len)
{
	for (size_t i = 0; i < len;) {
		uint64_t x;
		size_t n;

		if (i + 8 <= len) { /* eight ASCII bytes at once */
			memcpy(&x, text + i, 8);
			if (!(x & 0x8080808080808080ull)) {
				i += 8;
				continue;
			}
		}
		n = o1_utf8_decode(text + i, len - i, NULL);

		if (!n) {
			o1_warn("tokenizer: invalid UTF-8 at byte %zu of %zu "
				"(0x%02x)",
				i, len, (uint8_t)text[i]);
			return -O1_E_TOKENIZER;
		}
		i += n;
	}
	return 0;
}

static int encode_text(const struct o1_tokenizer *t, const char *text,
		       size_t len, unsigned flags, struct tok_scratch *scratch,
		       struct tok_sink *out)
{
	size_t start = 0;
	int ret;

	for (size_t i = 0; t->n_specials && i < len; i++) {
		int32_t id = special_at(t, text + i, len - i, flags);

		if (id < 0)
			continue;
		if (i > start) {
			ret = encode_segment(t, text + start, i - start,
					     scratch, out);
			if (ret)
				return ret;
		}
		tok_push(out, id);
		i += tok_len(t->text_off, id) - 1;
		start = i + 1;
	}
	if (start < len)
		return encode_segment(t, text + start, len - start, scratch,
				      out);
	return 0;
}

int o1_tokenizer_encode(const struct o1_tokenizer *t, const char *text,
			size_t len, unsigned flags, int32_t *ids, size_t cap)
{
	struct tok_sink out = {ids, ids ? cap : 0, 0};
	struct tok_scratch scratch = {NULL, 0};
	int ret;

	if (!t || (!text && len))
		return -EINVAL;
	ret = check_utf8(text, len);
	if (ret)
		return ret;
	if ((flags & O1_ENCODE_ADD_SPECIAL) && t->add_bos && t->bos_id >= 0)
		tok_push(&out, t->bos_id);
	ret = encode_text(t, text, len, flags, &scratch, &out);
	free(scratch.mem);
	if (ret)
		return ret;
	if ((flags & O1_ENCODE_ADD_SPECIAL) && t->add_eos && t->eos_id >= 0)
		tok_push(&out, t->eos_id);
	if (out.n > INT32_MAX) {
		o1_warn("tokenizer: %zu ids, over the int range", out.n);
		return -O1_E_BOUNDS;
	}
	return (int)out.n;
}

uint32_t o1_tokenizer_n_tokens(const struct o1_tokenizer *t)
{
	return t->n_tokens;
}

const char *o1_tokenizer_token_text(const struct o1_tokenizer *t, int32_t id)
{
	if (id < 0 || (uint32_t)id >= t->n_tokens)
		return NULL;
	return t->text + t->text_off[id];
}

const uint8_t *o1_tokenizer_token_bytes(const struct o1_tokenizer *t,
					int32_t id, size_t *len)
{
	if (id < 0 || (uint32_t)id >= t->n_tokens)
		return NULL;
	*len = tok_len(t->piece_off, id);
	return (const uint8_t *)t->piece + t->piece_off[id];
}

int32_t o1_tokenizer_find(const struct o1_tokenizer *t, const char *text,
			  size_t len)
{
	return tok_strmap_get(&t->by_text, text, len);
}

int32_t o1_tokenizer_bos(const struct o1_tokenizer *t)
{
	return t->bos_id;
}

int32_t o1_tokenizer_eos(const struct o1_tokenizer *t)
{
	return t->eos_id;
}

bool o1_tokenizer_is_special(const struct o1_tokenizer *t, int32_t id)
{
	return id >= 0 && (uint32_t)id < t->n_tokens &&
	       t->types[id] == O1_TOKEN_CONTROL;
}

size_t o1_tokenizer_max_piece(const struct o1_tokenizer *t)
{
	return t->max_piece;
}

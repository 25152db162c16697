/* Byte-level BPE: pre-tokenizer regex, GPT-2 byte-to-unicode mapping and
 * merges by rank.
 *
 * Each pre-token starts as one symbol per byte (the id of the byte's mapped
 * character) and the best adjacent pair merges first, leftmost among
 * equals, as HF tokenizers does: by linear scans for words up to BPE_SHORT
 * bytes, else through a heap (merge_heap.h) keyed (rank, position) whose
 * entries are checked when popped (both symbols still alive and still
 * forming the pair of that rank), so merges never need to delete from the
 * heap. With ignore_merges a pre-token found whole in the vocabulary is one
 * id.
 */
#include "tokenizer_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/utf8.h"
#include "merge_heap.h"

/* Pre-tokenizer regexes of HF tokenizers, by family. HF compiles them with
 * Oniguruma, whose Unicode \s is TAB..CR, NEL and General_Category Z; PCRE2's
 * (UCP) adds U+180E, so \s is spelled out: WS, and NWS for \S. */
#define WS  "\\t\\n\\x0b\\f\\r\\x{85}\\p{Z}"
#define NWS "[^" WS "]"
static const char re_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+"
    "|[" WS "]+(?!" NWS ")|[" WS "]+";
static const char re_llama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?!" NWS ")|[" WS "]+";
static const char re_qwen2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+"
    "|[" WS "]+(?!" NWS ")|[" WS "]+";
#undef WS
#undef NWS

static const struct {
	const char *name;
	const char *re;
} pre_table[] = {
    {"gpt2", re_gpt2},	      {"gpt-2", re_gpt2},
    {"default", re_gpt2},     {"llama-bpe", re_llama3},
    {"llama3", re_llama3},    {"llama-v3", re_llama3},
    {"smaug-bpe", re_llama3}, {"dbrx", re_llama3},
    {"qwen2", re_qwen2},      {"deepseek-r1-qwen", re_qwen2},
};

const char *o1_tokenizer_pre_names(void)
{
	return "gpt2, gpt-2, default (= gpt2), llama-bpe, llama3, llama-v3, "
	       "smaug-bpe, dbrx, qwen2, deepseek-r1-qwen";
}

/* Bytes that print as themselves keep their code point; the others take
 * 256, 257, ... in byte order. */
static bool byte_is_direct(uint32_t b)
{
	return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) ||
	       (b >= 174 && b <= 255);
}

uint32_t tok_byte_to_cp(uint8_t b)
{
	if (b <= 32)
		return 256 + b;
	if (b >= 127 && b <= 160)
		return 289 + (b - 127);
	if (b == 173)
		return 323;
	return b;
}

int tok_cp_to_byte(uint32_t cp)
{
	if (cp < 256)
		return byte_is_direct(cp) ? (int)cp : -1;
	if (cp <= 288)
		return (int)(cp - 256);
	if (cp <= 322)
		return (int)(cp - 289 + 127);
	return cp == 323 ? 173 : -1;
}

/* Decodes token text S through the inverse byte mapping into OUT (room for
 * LEN bytes, or NULL to only check); returns the byte count or -1 if a
 * character is not a mapped byte. */
static int unmap_text(const char *s, size_t len, char *out)
{
	size_t n = 0;

	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		size_t used = o1_utf8_decode(s + i, len - i, &cp);
		int b = used ? tok_cp_to_byte(cp) : -1;

		if (b < 0)
			return -1;
		if (out)
			out[n] = (char)b;
		n++;
		i += used;
	}
	return (int)n;
}

static bool piece_is_raw(const struct o1_tokenizer *t, int32_t id)
{
	int32_t type = t->types[id];

	return type == O1_TOKEN_CONTROL || type == O1_TOKEN_USER_DEFINED ||
	       type == O1_TOKEN_UNUSED;
}

/* Token ID's decoded bytes into OUT; raw text for added tokens and for
 * texts that are not mapped bytes. */
static uint32_t bpe_piece(const struct o1_tokenizer *t, int32_t id, char *out)
{
	const char *s = t->text + t->text_off[id];
	uint32_t len = tok_len(t->text_off, id);
	int n = piece_is_raw(t, id) ? -1 : unmap_text(s, len, out);

	if (n >= 0)
		return (uint32_t)n;
	memcpy(out, s, len);
	return len;
}

static bool want_piece(const struct o1_tokenizer *t, int32_t id)
{
	/* only tokens whose text decodes through the byte mapping */
	return !piece_is_raw(t, id) &&
	       unmap_text(t->text + t->text_off[id], tok_len(t->text_off, id),
			  NULL) >= 0;
}

static int build_pieces(struct o1_tokenizer *t)
{
	/* a decoded piece is never longer than its text */
	return tok_pieces_build(t, t->text_off[t->n_tokens], bpe_piece);
}

static int find_byte_ids(struct o1_tokenizer *t)
{
	int missing = 0;

	for (uint32_t b = 0; b < 256; b++) {
		char s[4];
		size_t n = o1_utf8_encode(tok_byte_to_cp((uint8_t)b), s);

		t->byte_id[b] = tok_strmap_get(&t->by_text, s, n);
		missing += t->byte_id[b] < 0;
	}
	if (missing)
		o1_warn("tokenizer: %d of the 256 byte tokens are missing; "
			"those bytes encode as unk (id %d)",
			missing, t->unk_id);
	return 0;
}

static uint64_t pair_key(int32_t a, int32_t b)
{
	return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static uint32_t pair_slot(const struct tok_pairmap *m, uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & m->mask;
}

static void pair_put(struct tok_pairmap *m, uint64_t key, uint32_t rank,
		     int32_t merged)
{
	uint32_t i = pair_slot(m, key);

	for (; m->slots[i].key != UINT64_MAX; i = (i + 1) & m->mask)
		if (m->slots[i].key == key)
			return; /* the first (best) rank stays */
	m->slots[i] = (struct tok_pair_slot){key, rank, merged};
}

static int pair_get(const struct tok_pairmap *m, int32_t a, int32_t b,
		    uint32_t *rank)
{
	uint64_t key = pair_key(a, b);

	for (uint32_t i = pair_slot(m, key); m->slots[i].key != UINT64_MAX;
	     i = (i + 1) & m->mask)
		if (m->slots[i].key == key) {
			*rank = m->slots[i].rank;
			return m->slots[i].merged;
		}
	return -1;
}

/* "left right" -> ids of left, right and left+right; false if any is not a
 * token. */
static bool merge_ids(const struct o1_tokenizer *t, const char *m,
		      int32_t ids[3])
{
	const char *sp = strchr(m, ' ');
	size_t ll, rl;
	char buf[512];

	if (!sp || sp == m || !sp[1])
		return false;
	ll = (size_t)(sp - m);
	rl = strlen(sp + 1);
	if (ll + rl > sizeof(buf))
		return false;
	memcpy(buf, m, ll);
	memcpy(buf + ll, sp + 1, rl);
	ids[0] = tok_strmap_get(&t->by_text, m, ll);
	ids[1] = tok_strmap_get(&t->by_text, sp + 1, rl);
	ids[2] = tok_strmap_get(&t->by_text, buf, ll + rl);
	return ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0;
}

static int build_merges(struct o1_tokenizer *t, const struct o1_vocab *v)
{
	struct tok_pairmap *m = &t->merges;
	uint32_t size = 16, skipped = 0;

	while (size < 2 * v->n_merges)
		size <<= 1;
	m->mask = size - 1;
	m->slots = malloc(size * sizeof(*m->slots));
	if (!m->slots)
		return -ENOMEM;
	memset(m->slots, 0xff, size * sizeof(*m->slots));
	for (uint32_t r = 0; r < v->n_merges; r++) {
		int32_t ids[3];

		if (!v->merges[r] || !merge_ids(t, v->merges[r], ids)) {
			skipped++;
			continue;
		}
		pair_put(m, pair_key(ids[0], ids[1]), r, ids[2]);
	}
	if (skipped)
		o1_warn("tokenizer: %u of %u merges name tokens not in the "
			"vocabulary; ignored",
			skipped, v->n_merges);
	return 0;
}

static int compile_pre(struct o1_tokenizer *t, const char *pre)
{
	const char *re = NULL;
	PCRE2_SIZE off;
	int err;

	for (size_t i = 0; i < sizeof(pre_table) / sizeof(pre_table[0]); i++)
		if (strcmp(pre, pre_table[i].name) == 0)
			re = pre_table[i].re;
	if (!re) {
		o1_err("tokenizer: unknown BPE pre-tokenizer '%s' (known: %s)",
		       pre, o1_tokenizer_pre_names());
		return -O1_E_UNSUPPORTED;
	}
	if (strcmp(pre, "default") == 0)
		o1_warn("tokenizer: pre-tokenizer 'default' taken as gpt2");
	t->re = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
			      PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
	if (!t->re) {
		o1_err("tokenizer: pcre2_compile failed at %zu: error %d",
		       (size_t)off, err);
		return -O1_E_UNSUPPORTED;
	}
	err = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE);
	t->re_jit = !err;
	if (err)
		o1_warn("tokenizer: PCRE2 JIT unavailable (%d), interpreting",
			err);
	return 0;
}

int tok_bpe_init(struct o1_tokenizer *t, const struct o1_vocab *v)
{
	int ret = build_pieces(t);

	if (!ret)
		ret = tok_strmap_init(&t->by_piece, t->n_tokens, t->piece,
				      t->piece_off, want_piece, t);
	if (!ret)
		ret = find_byte_ids(t);
	if (!ret)
		ret = build_merges(t, v);
	if (!ret)
		ret = compile_pre(t, v->pre);
	return ret;
}

void tok_bpe_fini(struct o1_tokenizer *t)
{
	free(t->merges.slots);
	pcre2_code_free(t->re);
}

struct bpe_sym {
	int32_t id;
	int32_t prev, next;
};

static void try_pair(const struct o1_tokenizer *t, struct bpe_sym *s,
		     int32_t left, struct tok_heap *h)
{
	uint32_t rank;

	if (left < 0 || s[left].next < 0)
		return;
	if (pair_get(&t->merges, s[left].id, s[s[left].next].id, &rank) >= 0)
		tok_heap_push(h, (struct tok_merge){.rank = rank,
						    .left = (uint32_t)left});
}

static void merge_loop(const struct o1_tokenizer *t, struct bpe_sym *s,
		       struct tok_heap *h)
{
	while (h->n) {
		struct tok_merge e = tok_heap_pop(h);
		int32_t l = (int32_t)e.left, r = s[l].next, merged;
		uint32_t rank;

		if (s[l].id < 0 || r < 0)
			continue;
		merged = pair_get(&t->merges, s[l].id, s[r].id, &rank);
		if (merged < 0 || rank != e.rank)
			continue;
		s[l].id = merged;
		s[l].next = s[r].next;
		if (s[r].next >= 0)
			s[s[r].next].prev = l;
		s[r].id = -1;
		try_pair(t, s, s[l].prev, h);
		try_pair(t, s, l, h);
	}
}

static int byte_token(const struct o1_tokenizer *t, uint8_t b, int32_t *id)
{
	*id = t->byte_id[b] >= 0 ? t->byte_id[b] : t->unk_id;
	if (*id >= 0)
		return 0;
	o1_warn("tokenizer: byte 0x%02x has no token and there is no unk", b);
	return -O1_E_TOKENIZER;
}

/* Words up to this many bytes merge in stack arrays (below). */
#define BPE_SHORT 32

static void rank_pair(const struct o1_tokenizer *t, const int32_t *ids,
		      size_t i, uint32_t *rank, int32_t *merged)
{
	merged[i] = pair_get(&t->merges, ids[i], ids[i + 1], &rank[i]);
	if (merged[i] < 0)
		rank[i] = UINT32_MAX;
}

/* The same merges as merge_loop for a short word: each round takes the
 * leftmost lowest-rank pair by a linear scan, which for a few symbols
 * costs less than the heap. */
static void merge_short(const struct o1_tokenizer *t, int32_t *ids, size_t n,
			struct tok_sink *out)
{
	uint32_t rank[BPE_SHORT];
	int32_t merged[BPE_SHORT];

	for (size_t i = 0; i + 1 < n; i++)
		rank_pair(t, ids, i, rank, merged);
	while (n > 1) {
		size_t best = 0;

		for (size_t i = 1; i + 1 < n; i++)
			if (rank[i] < rank[best])
				best = i;
		if (rank[best] == UINT32_MAX)
			break;
		ids[best] = merged[best];
		n--;
		memmove(ids + best + 1, ids + best + 2,
			(n - best - 1) * sizeof(*ids));
		memmove(rank + best, rank + best + 1,
			(n - best - 1) * sizeof(*rank));
		memmove(merged + best, merged + best + 1,
			(n - best - 1) * sizeof(*merged));
		if (best > 0)
			rank_pair(t, ids, best - 1, rank, merged);
		if (best + 1 < n)
			rank_pair(t, ids, best, rank, merged);
	}
	for (size_t i = 0; i < n; i++)
		tok_push(out, ids[i]);
}

static int bpe_short(const struct o1_tokenizer *t, const uint8_t *w, size_t len,
		     struct tok_sink *out)
{
	int32_t ids[BPE_SHORT];

	for (size_t i = 0; i < len; i++) {
		int ret = byte_token(t, w[i], &ids[i]);

		if (ret)
			return ret;
	}
	merge_short(t, ids, len, out);
	return 0;
}

static int bpe_word(const struct o1_tokenizer *t, const uint8_t *w, size_t len,
		    struct tok_scratch *scratch, struct tok_sink *out)
{
	struct bpe_sym *s;
	struct tok_heap h;
	int32_t id;
	int ret;

	if (t->ignore_merges || len == 1) {
		id = tok_strmap_get(&t->by_piece, (const char *)w, len);
		if (id >= 0) {
			tok_push(out, id);
			return 0;
		}
	}
	if (len <= BPE_SHORT)
		return bpe_short(t, w, len, out);
	s = tok_scratch_get(scratch, len * (sizeof(*s) + 3 * sizeof(*h.e)));
	if (!s)
		return -ENOMEM;
	h.e = (struct tok_merge *)(s + len);
	h.n = 0;
	for (size_t i = 0; i < len; i++) {
		ret = byte_token(t, w[i], &s[i].id);
		if (ret)
			return ret;
		s[i].prev = (int32_t)i - 1;
		s[i].next = i + 1 < len ? (int32_t)i + 1 : -1;
	}
	for (size_t i = 0; i + 1 < len; i++)
		try_pair(t, s, (int32_t)i, &h);
	merge_loop(t, s, &h);
	for (int32_t i = 0; i >= 0; i = s[i].next)
		tok_push(out, s[i].id);
	return 0;
}

static int split_error(int rc, size_t pos)
{
	PCRE2_UCHAR msg[120];

	pcre2_get_error_message(rc, msg, sizeof(msg));
	o1_warn("tokenizer: pre-tokenizer match failed at byte %zu: %s", pos,
		(const char *)msg);
	return -O1_E_TOKENIZER;
}

/* Splits TEXT with the pre-tokenizer regex; text between matches (none
 * with the built-in regexes) is a pre-token too. */
static int split(const struct o1_tokenizer *t, const char *text, size_t len,
		 pcre2_match_data *md, struct tok_scratch *scratch,
		 struct tok_sink *out)
{
	const uint8_t *u = (const uint8_t *)text;
	size_t pos = 0;
	int ret = 0;

	while (pos < len && !ret) {
		int rc = t->re_jit
			     ? pcre2_jit_match(t->re, u, len, pos, 0, md, NULL)
			     : pcre2_match(t->re, u, len, pos,
					   PCRE2_NO_UTF_CHECK, md, NULL);
		PCRE2_SIZE *ov;

		if (rc == PCRE2_ERROR_NOMATCH)
			return bpe_word(t, u + pos, len - pos, scratch, out);
		if (rc < 0)
			return split_error(rc, pos);
		ov = pcre2_get_ovector_pointer(md);
		if (ov[0] > pos)
			ret = bpe_word(t, u + pos, ov[0] - pos, scratch, out);
		if (ov[1] == ov[0]) /* empty match: take one character */
			ov[1] += o1_utf8_decode(u + ov[0], len - ov[0], NULL);
		if (!ret)
			ret =
			    bpe_word(t, u + ov[0], ov[1] - ov[0], scratch, out);
		pos = ov[1];
	}
	return ret;
}

int tok_bpe_encode(const struct o1_tokenizer *t, const char *text, size_t len,
		   struct tok_scratch *scratch, struct tok_sink *out)
{
	pcre2_match_data *md =
	    pcre2_match_data_create_from_pattern(t->re, NULL);
	int ret;

	if (!md)
		return -ENOMEM;
	ret = split(t, text, len, md, scratch, out);
	pcre2_match_data_free(md);
	return ret;
}

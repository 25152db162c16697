/* Byte-level BPE training (bpe_train.h): words counted once each in a
 * hash table, then merges by repeated pair counting over the distinct
 * words.
 *
 * Invariants: symbol ids are 0..255 for bytes and 256 + k for merge k;
 * a symbol's bytes are at most 63. Pair counts live in an open-addressed
 * table keyed by a * max_syms + b, kept exact as merges rewrite words
 * (a rewritten word's pairs taken out, then its new pairs put in), so a
 * merge costs one pass over the words and one over the table, not three
 * over a dense max_syms^2 array whose every access missed the cache (the
 * demo model's 4,096 merges took 3 minutes under ASan). The merge chosen
 * is the same: the highest count, then the lowest key. */
#include "bpe_train.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define N_BYTES	 256
#define WORD_MAX 63

static const char chatml_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + "
    "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";

static const char *const specials[] = {
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|im_start|>",
    "<|im_end|>",
};
#define N_SPECIALS 4

struct sym {
	char raw[WORD_MAX + 1];
	uint32_t len;
};

struct word {
	uint16_t ids[WORD_MAX];
	uint32_t n;
	uint32_t freq;
	uint32_t hash_next; /* 1-based index of the next word in the bucket */
};

/* A pair's count over the words (occurrences times word frequency).
 * BANNED: its merged text is already a symbol (it stays so: symbols are
 * never removed). KEY1: the key plus one; 0 marks a free slot. */
struct pair_slot {
	uint32_t key1;
	uint32_t count;
	uint32_t banned;
};

struct trainer {
	struct sym *syms;
	uint32_t n_syms, max_syms;
	struct word *words;
	uint32_t n_words, cap_words;
	uint32_t *buckets; /* 1-based word indices; n_buckets entries */
	uint32_t n_buckets;
	struct pair_slot *pairs; /* cap_pairs slots, a power of two */
	uint32_t cap_pairs, used_pairs;
	uint16_t (*merges)[2];
	uint32_t n_merges;
};

static uint32_t hash_bytes(const char *s, uint32_t n)
{
	uint32_t h = 2166136261u;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static bool word_is(const struct word *w, const char *s, uint32_t n)
{
	if (w->n != n)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (w->ids[i] != (uint8_t)s[i])
			return false;
	return true;
}

static int add_word(struct trainer *t, const char *s, uint32_t n)
{
	uint32_t *b = &t->buckets[hash_bytes(s, n) % t->n_buckets];
	struct word *w;

	for (uint32_t i = *b; i; i = t->words[i - 1].hash_next)
		if (word_is(&t->words[i - 1], s, n)) {
			t->words[i - 1].freq++;
			return 0;
		}
	if (t->n_words == t->cap_words) {
		uint32_t cap = t->cap_words * 2;
		struct word *ws = realloc(t->words, cap * sizeof(*ws));

		if (!ws)
			return -ENOMEM;
		t->words = ws;
		t->cap_words = cap;
	}
	w = &t->words[t->n_words++];
	w->n = n;
	w->freq = 1;
	for (uint32_t i = 0; i < n; i++)
		w->ids[i] = (uint8_t)s[i];
	w->hash_next = *b;
	*b = t->n_words;
	return 0;
}

static int char_class(uint8_t c)
{
	if (isalpha(c) || c >= 0x80)
		return 1;
	if (isdigit(c))
		return 2;
	if (isspace(c))
		return 3;
	return 4;
}

static int split_words(struct trainer *t, const char *p, size_t len)
{
	const char *end = p + len;
	int err = 0;

	while (p < end && !err) {
		uint32_t n = 0;
		int cls;

		if (*p == ' ' && p + 1 < end && char_class((uint8_t)p[1]) != 3)
			n = 1;
		cls = char_class((uint8_t)p[n]);
		while (p + n < end && char_class((uint8_t)p[n]) == cls &&
		       n < WORD_MAX)
			n++;
		err = add_word(t, p, n);
		p += n;
	}
	return err;
}

static uint32_t pair_home(uint32_t key1, uint32_t cap)
{
	return (key1 * 2654435761u) & (cap - 1);
}

static struct pair_slot *pair_probe(struct pair_slot *tab, uint32_t cap,
				    uint32_t key1)
{
	uint32_t i = pair_home(key1, cap);

	while (tab[i].key1 && tab[i].key1 != key1)
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

/* The table rebuilt with room for its live slots (a count, or a ban)
 * four times over; slots whose pair no longer occurs are dropped. */
static int pairs_rehash(struct trainer *t)
{
	uint32_t live = 0, cap = 1u << 16;
	struct pair_slot *tab;

	for (uint32_t i = 0; i < t->cap_pairs; i++) {
		const struct pair_slot *o = &t->pairs[i];

		live += o->key1 && (o->count || o->banned);
	}
	while (cap < 4 * live)
		cap *= 2;
	tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->cap_pairs; i++) {
		const struct pair_slot *o = &t->pairs[i];

		if (o->key1 && (o->count || o->banned))
			*pair_probe(tab, cap, o->key1) = *o;
	}
	free(t->pairs);
	t->pairs = tab;
	t->cap_pairs = cap;
	t->used_pairs = live;
	return 0;
}

/* Adds (SIGN 1) or takes out (SIGN 0) the pairs of W, FREQ each. */
static int word_pairs(struct trainer *t, const struct word *w, int sign)
{
	for (uint32_t j = 0; j + 1 < w->n; j++) {
		uint32_t key1 = w->ids[j] * t->max_syms + w->ids[j + 1] + 1;
		struct pair_slot *p = pair_probe(t->pairs, t->cap_pairs, key1);

		if (!p->key1) {
			if (2 * (t->used_pairs + 1) > t->cap_pairs) {
				int err = pairs_rehash(t);

				if (err)
					return err;
				p = pair_probe(t->pairs, t->cap_pairs, key1);
			}
			p->key1 = key1;
			t->used_pairs++;
		}
		if (sign)
			p->count += w->freq;
		else
			p->count -= w->freq;
	}
	return 0;
}

static bool merged_text(const struct trainer *t, uint32_t a, uint32_t b,
			struct sym *m)
{
	m->len = t->syms[a].len + t->syms[b].len;
	if (m->len > WORD_MAX)
		return false;
	memcpy(m->raw, t->syms[a].raw, t->syms[a].len);
	memcpy(m->raw + t->syms[a].len, t->syms[b].raw, t->syms[b].len);
	for (uint32_t i = 0; i < t->n_syms; i++)
		if (t->syms[i].len == m->len &&
		    memcmp(t->syms[i].raw, m->raw, m->len) == 0)
			return false;
	return true;
}

/* The best allowed pair among the words' pairs (the highest count, then
 * the lowest key); false when no pair occurs MIN_COUNT times. Bans pairs
 * whose text already exists. */
static bool best_pair(struct trainer *t, uint32_t min_count, uint32_t *a,
		      uint32_t *b, struct sym *m)
{
	for (;;) {
		struct pair_slot *bp = NULL;

		for (uint32_t i = 0; i < t->cap_pairs; i++) {
			struct pair_slot *p = &t->pairs[i];

			if (!p->key1 || !p->count || p->banned)
				continue;
			if (!bp || p->count > bp->count ||
			    (p->count == bp->count && p->key1 < bp->key1))
				bp = p;
		}
		if (!bp || bp->count < min_count)
			return false;
		*a = (bp->key1 - 1) / t->max_syms;
		*b = (bp->key1 - 1) % t->max_syms;
		if (merged_text(t, *a, *b, m))
			return true;
		bp->banned = 1;
	}
}

static bool word_has(const struct word *w, uint32_t a, uint32_t b)
{
	for (uint32_t j = 0; j + 1 < w->n; j++)
		if (w->ids[j] == a && w->ids[j + 1] == b)
			return true;
	return false;
}

/* Every word holding the pair (A, B) rewritten with ID in its place
 * (left to right), its pair counts with it. */
static int apply_merge(struct trainer *t, uint32_t a, uint32_t b, uint32_t id)
{
	int err = 0;

	for (uint32_t i = 0; i < t->n_words && !err; i++) {
		struct word *w = &t->words[i];
		uint32_t o = 0;

		if (!word_has(w, a, b))
			continue;
		err = word_pairs(t, w, 0);
		for (uint32_t j = 0; j < w->n; j++) {
			if (j + 1 < w->n && w->ids[j] == a &&
			    w->ids[j + 1] == b) {
				w->ids[o++] = (uint16_t)id;
				j++;
			} else {
				w->ids[o++] = w->ids[j];
			}
		}
		w->n = o;
		err = err ? err : word_pairs(t, w, 1);
	}
	return err;
}

static int train(struct trainer *t, uint32_t n_merges, uint32_t min_count)
{
	uint32_t a, b;
	struct sym m;
	int err = 0;

	for (uint32_t i = 0; i < t->n_words && !err; i++)
		err = word_pairs(t, &t->words[i], 1);
	while (!err && t->n_merges < n_merges &&
	       best_pair(t, min_count, &a, &b, &m)) {
		t->syms[t->n_syms] = m;
		t->merges[t->n_merges][0] = (uint16_t)a;
		t->merges[t->n_merges][1] = (uint16_t)b;
		t->n_merges++;
		err = apply_merge(t, a, b, t->n_syms++);
	}
	return err;
}

/* GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
 * others for code points 256 and up, in byte order. */
static bool byte_printable(uint32_t x)
{
	return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
}

static uint32_t byte_code_point(uint8_t b)
{
	uint32_t n = 0;

	if (byte_printable(b))
		return b;
	for (uint32_t x = 0; x < b; x++)
		n += !byte_printable(x);
	return 256 + n;
}

/* Writes the byte-level text of S to OUT (UTF-8, NUL-ended, room for
 * 2 * len + 1 bytes). */
static void byte_level_text(const struct sym *s, char *out)
{
	size_t o = 0;

	for (uint32_t i = 0; i < s->len; i++) {
		uint32_t cp = byte_code_point((uint8_t)s->raw[i]);

		if (cp < 0x80) {
			out[o++] = (char)cp;
		} else {
			out[o++] = (char)(0xC0 | (cp >> 6));
			out[o++] = (char)(0x80 | (cp & 0x3F));
		}
	}
	out[o] = 0;
}

static int set_string(struct o1_vocab *v, char **slot, const char *s)
{
	*slot = o1_vocab_strdup(v, s, strlen(s));
	return *slot ? 0 : -ENOMEM;
}

static int fill_vocab(const struct trainer *t, struct o1_vocab *v)
{
	char text[2 * (WORD_MAX + 1)], merge[2 * sizeof(text) + 2];
	int err = 0;

	for (uint32_t i = 0; i < t->n_syms && !err; i++) {
		byte_level_text(&t->syms[i], text);
		err = set_string(v, &v->tokens[i], text);
		v->types[i] = O1_TOKEN_NORMAL;
	}
	for (uint32_t i = 0; i < N_SPECIALS && !err; i++) {
		err = set_string(v, &v->tokens[t->n_syms + i], specials[i]);
		v->types[t->n_syms + i] = O1_TOKEN_CONTROL;
	}
	for (uint32_t i = 0; i < t->n_merges && !err; i++) {
		byte_level_text(&t->syms[t->merges[i][0]], merge);
		strcat(merge, " ");
		byte_level_text(&t->syms[t->merges[i][1]],
				merge + strlen(merge));
		err = set_string(v, &v->merges[i], merge);
	}
	if (!err)
		err = set_string(v, &v->chat_template, chatml_template);
	return err;
}

static int trainer_init(struct trainer *t, uint32_t n_merges)
{
	t->max_syms = N_BYTES + n_merges;
	t->cap_words = 1024;
	t->n_buckets = 65536;
	t->syms = calloc(t->max_syms, sizeof(*t->syms));
	t->words = calloc(t->cap_words, sizeof(*t->words));
	t->buckets = calloc(t->n_buckets, sizeof(*t->buckets));
	t->cap_pairs = 1u << 16;
	t->pairs = calloc(t->cap_pairs, sizeof(*t->pairs));
	t->merges = calloc(n_merges ? n_merges : 1, sizeof(*t->merges));
	if (!t->syms || !t->words || !t->buckets || !t->pairs || !t->merges)
		return -ENOMEM;
	for (uint32_t i = 0; i < N_BYTES; i++) {
		t->syms[i].raw[0] = (char)i;
		t->syms[i].len = 1;
	}
	t->n_syms = N_BYTES;
	return 0;
}

static void trainer_fini(struct trainer *t)
{
	free(t->syms);
	free(t->words);
	free(t->buckets);
	free(t->pairs);
	free(t->merges);
}

static int make_vocab(const struct trainer *t, struct o1_vocab **out)
{
	struct o1_vocab *v;
	int err = o1_vocab_create(t->n_syms + N_SPECIALS, t->n_merges, &v);

	if (err)
		return err;
	v->kind = O1_VOCAB_BPE;
	strcpy(v->pre, "gpt2");
	v->bos_id = (int32_t)t->n_syms;
	v->eos_id = (int32_t)t->n_syms + 3;
	v->add_bos = true;
	err = fill_vocab(t, v);
	if (err) {
		o1_vocab_destroy(v);
		return err;
	}
	*out = v;
	return 0;
}

int o1model_bpe_train(const char *text, size_t len, uint32_t n_merges,
		      uint32_t min_count, struct o1_vocab **out)
{
	struct trainer t = {0};
	int err;

	if (n_merges > O1MODEL_BPE_MAX_MERGES) {
		o1_err("bpe: %u merges asked (max %u)", n_merges,
		       O1MODEL_BPE_MAX_MERGES);
		return -EINVAL;
	}
	err = trainer_init(&t, n_merges);
	if (!err)
		err = split_words(&t, text, len);
	if (!err)
		err = train(&t, n_merges, min_count ? min_count : 1);
	if (!err)
		err = make_vocab(&t, out);
	trainer_fini(&t);
	return err;
}

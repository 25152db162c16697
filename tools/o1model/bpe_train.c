/* Byte-level BPE training (bpe_train.h): words counted once each in a
 * hash table, then merges by repeated pair counting over the distinct
 * words.
 *
 * Invariants: symbol ids are 0..255 for bytes and 256 + k for merge k;
 * a symbol's bytes are at most 63; pair counts live in a dense
 * [n_syms x n_syms] array that is all zero between merges (each pass
 * clears exactly the entries it touched). */
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

struct trainer {
	struct sym *syms;
	uint32_t n_syms, max_syms;
	struct word *words;
	uint32_t n_words, cap_words;
	uint32_t *buckets; /* 1-based word indices; n_buckets entries */
	uint32_t n_buckets;
	uint32_t *pairs; /* [max_syms * max_syms] counts */
	uint8_t *banned; /* [max_syms * max_syms]: merged text exists */
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

/* Adds (or, with SIGN 0, clears) the pair counts of every word. */
static void count_pairs(struct trainer *t, int sign)
{
	for (uint32_t i = 0; i < t->n_words; i++) {
		const struct word *w = &t->words[i];

		for (uint32_t j = 0; j + 1 < w->n; j++) {
			uint32_t *c =
			    &t->pairs[w->ids[j] * t->max_syms + w->ids[j + 1]];

			*c = sign ? *c + w->freq : 0;
		}
	}
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

/* The best allowed pair among the words' pairs; false when no pair
 * occurs MIN_COUNT times. Bans pairs whose text already exists. */
static bool best_pair(struct trainer *t, uint32_t min_count, uint32_t *a,
		      uint32_t *b, struct sym *m)
{
	for (;;) {
		uint32_t best = 0, idx = UINT32_MAX;

		for (uint32_t i = 0; i < t->n_words; i++) {
			const struct word *w = &t->words[i];

			for (uint32_t j = 0; j + 1 < w->n; j++) {
				uint32_t k =
				    w->ids[j] * t->max_syms + w->ids[j + 1];

				if (t->banned[k])
					continue;
				if (t->pairs[k] > best ||
				    (t->pairs[k] == best && k < idx))
					best = t->pairs[k], idx = k;
			}
		}
		if (best < min_count)
			return false;
		*a = idx / t->max_syms;
		*b = idx % t->max_syms;
		if (merged_text(t, *a, *b, m))
			return true;
		t->banned[idx] = 1;
	}
}

static void apply_merge(struct trainer *t, uint32_t a, uint32_t b, uint32_t id)
{
	for (uint32_t i = 0; i < t->n_words; i++) {
		struct word *w = &t->words[i];
		uint32_t o = 0;

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
	}
}

static void train(struct trainer *t, uint32_t n_merges, uint32_t min_count)
{
	uint32_t a, b;
	struct sym m;
	bool found = true;

	while (t->n_merges < n_merges && found) {
		count_pairs(t, 1);
		found = best_pair(t, min_count, &a, &b, &m);
		count_pairs(t, 0);
		if (!found)
			break;
		t->syms[t->n_syms] = m;
		t->merges[t->n_merges][0] = (uint16_t)a;
		t->merges[t->n_merges][1] = (uint16_t)b;
		t->n_merges++;
		apply_merge(t, a, b, t->n_syms++);
	}
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
	t->pairs = calloc((size_t)t->max_syms * t->max_syms, sizeof(uint32_t));
	t->banned = calloc((size_t)t->max_syms * t->max_syms, 1);
	t->merges = calloc(n_merges ? n_merges : 1, sizeof(*t->merges));
	if (!t->syms || !t->words || !t->buckets || !t->pairs || !t->banned ||
	    !t->merges)
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
	free(t->banned);
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
	if (!err) {
		train(&t, n_merges, min_count ? min_count : 1);
		err = make_vocab(&t, out);
	}
	trainer_fini(&t);
	return err;
}

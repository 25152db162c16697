/* A small byte-level BPE vocabulary, learned at run time from a text held
 * in this file, so random test models carry a real, working tokenizer.
 *
 * Training is deterministic: the text is split into words (optional
 * leading space + letters, digits, other symbols, or whitespace), every
 * merge takes the most frequent adjacent pair over all words (ties go to
 * the lowest pair of symbol ids), and a pair whose text already is a
 * token is skipped, so token texts stay unique. */
#include "tiny_vocab.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define N_BYTES	 256
#define MAX_SYMS (N_BYTES + O1MODEL_TINY_MERGES)

static const char train_text[] =
    "o1d is a resident inference daemon for Linux. It keeps one language "
    "model on a GPU, or on the CPU, with a paged cache of keys and "
    "values, and it serves the processes on the same machine through "
    "shared memory rings. A client writes a request into its submission "
    "ring and publishes the tail with a release store; the daemon reads "
    "the entry, copies it out of shared memory before it checks it, "
    "turns the prompt into tokens, and queues it. The scheduler forms "
    "the next step from the running sequences and the waiting prompts, "
    "within a budget of tokens and the free pages of the cache. The "
    "engine runs the step, samples the next token of every sequence, and "
    "the daemon appends the tokens and the text they decode to to the "
    "completion ring of each client. When there is nothing to do, the "
    "daemon sleeps in io_uring until a client rings its doorbell.\n"
    "The model comes from a GGUF file or from a folder of safetensors "
    "files with a config.json beside them. Both load into one "
    "description: the architecture, the number of layers, the hidden "
    "size, the number of attention heads and of key and value heads, the "
    "size of each head, the size of the feed forward layer, the size of "
    "the vocabulary, the longest context, the rotary position settings "
    "and the norm epsilon. Every tensor is checked against the shape the "
    "description implies before the daemon trusts it. A file that is "
    "truncated, that lies about its sizes, or that names a type the "
    "daemon does not know is refused with a clear message, never a "
    "crash.\n"
    "Decode steps run as captured graphs, one for each bucket of batch "
    "sizes, so that launching a step costs one call. A batch that fits "
    "no bucket runs eagerly, and the daemon counts the hits, the misses "
    "and the fallbacks. Counters and latency histograms live in maps "
    "that the kernel keeps, so an operator can read them at any time "
    "without asking the daemon. The tool o1model makes random models "
    "with the shapes of real ones, converts between the two formats, and "
    "prints what a model file holds. The weights it writes are random "
    "numbers from a seeded generator, so the same arguments always give "
    "the same bytes, and tests can compare them bit for bit.\n"
    "Hello, world! How are you today? I am fine, thank you. What is the "
    "time? It is 12:30, and the weather is warm. The quick brown fox "
    "jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9 10 100 1000 2026.\n";

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
#define N_SPECIALS (sizeof(specials) / sizeof(specials[0]))

struct sym {
	char raw[64]; /* the bytes the symbol stands for */
	uint32_t len;
};

struct word {
	uint16_t ids[64];
	uint32_t n;
	uint32_t freq;
};

struct trainer {
	struct sym syms[MAX_SYMS];
	uint32_t n_syms;
	struct word *words;
	uint32_t n_words;
	uint32_t *pair_counts; /* [MAX_SYMS * MAX_SYMS] */
	uint16_t merges[O1MODEL_TINY_MERGES][2];
	uint32_t n_merges;
};

/* GPT-2's byte-to-unicode map: printable bytes stand for themselves, the
 * others for code points 256 and up, in byte order. */
static uint32_t byte_code_point(uint8_t b)
{
	uint32_t n = 0;

	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
		return b;
	for (uint32_t x = 0; x < b; x++)
		if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) ||
		      x >= 174))
			n++;
	return 256 + n;
}

/* Appends the byte-level text of RAW[0..LEN) to OUT (UTF-8, NUL-ended). */
static void byte_level_text(const char *raw, uint32_t len, char *out)
{
	size_t o = 0;

	for (uint32_t i = 0; i < len; i++) {
		uint32_t cp = byte_code_point((uint8_t)raw[i]);

		if (cp < 0x80) {
			out[o++] = (char)cp;
		} else {
			out[o++] = (char)(0xC0 | (cp >> 6));
			out[o++] = (char)(0x80 | (cp & 0x3F));
		}
	}
	out[o] = 0;
}

static int char_class(char c)
{
	if (isalpha((unsigned char)c))
		return 1;
	if (isdigit((unsigned char)c))
		return 2;
	if (isspace((unsigned char)c))
		return 3;
	return 4;
}

static void add_word(struct trainer *t, const char *s, uint32_t len)
{
	for (uint32_t i = 0; i < t->n_words; i++) {
		struct word *w = &t->words[i];

		if (w->n == len) {
			uint32_t j = 0;

			while (j < len && w->ids[j] == (uint8_t)s[j])
				j++;
			if (j == len) {
				w->freq++;
				return;
			}
		}
	}
	t->words[t->n_words].n = len;
	t->words[t->n_words].freq = 1;
	for (uint32_t j = 0; j < len; j++)
		t->words[t->n_words].ids[j] = (uint8_t)s[j];
	t->n_words++;
}

/* Splits the text like GPT-2's pre-tokenizer (ASCII approximation). */
static void split_words(struct trainer *t)
{
	const char *p = train_text;

	while (*p) {
		uint32_t n = 0;
		int cls;

		if (*p == ' ' && p[1] && char_class(p[1]) != 3)
			n = 1;
		cls = char_class(p[n]);
		while (p[n] && char_class(p[n]) == cls && n < 63)
			n++;
		add_word(t, p, n);
		p += n;
	}
}

static void count_pairs(struct trainer *t)
{
	memset(t->pair_counts, 0, sizeof(uint32_t) * MAX_SYMS * MAX_SYMS);
	for (uint32_t i = 0; i < t->n_words; i++) {
		const struct word *w = &t->words[i];

		for (uint32_t j = 0; j + 1 < w->n; j++)
			t->pair_counts[w->ids[j] * MAX_SYMS + w->ids[j + 1]] +=
			    w->freq;
	}
}

static bool sym_exists(const struct trainer *t, const char *raw, uint32_t len)
{
	for (uint32_t i = 0; i < t->n_syms; i++)
		if (t->syms[i].len == len &&
		    memcmp(t->syms[i].raw, raw, len) == 0)
			return true;
	return false;
}

/* Picks the best pair whose merged text is new; false when none occurs
 * at least twice. */
static bool best_pair(struct trainer *t, uint32_t *a, uint32_t *b)
{
	for (;;) {
		uint32_t best = 1, idx = 0;
		struct sym m;

		for (uint32_t i = 0; i < t->n_syms * MAX_SYMS; i++)
			if (t->pair_counts[i] > best)
				best = t->pair_counts[i], idx = i;
		if (best < 2)
			return false;
		*a = idx / MAX_SYMS;
		*b = idx % MAX_SYMS;
		m.len = t->syms[*a].len + t->syms[*b].len;
		if (m.len < sizeof(m.raw)) {
			memcpy(m.raw, t->syms[*a].raw, t->syms[*a].len);
			memcpy(m.raw + t->syms[*a].len, t->syms[*b].raw,
			       t->syms[*b].len);
			if (!sym_exists(t, m.raw, m.len))
				return true;
		}
		t->pair_counts[idx] = 0;
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

static void train(struct trainer *t)
{
	uint32_t a, b;

	for (uint32_t i = 0; i < N_BYTES; i++) {
		t->syms[i].raw[0] = (char)i;
		t->syms[i].len = 1;
	}
	t->n_syms = N_BYTES;
	split_words(t);
	while (t->n_merges < O1MODEL_TINY_MERGES) {
		count_pairs(t);
		if (!best_pair(t, &a, &b))
			break;
		struct sym *s = &t->syms[t->n_syms];

		memcpy(s->raw, t->syms[a].raw, t->syms[a].len);
		memcpy(s->raw + t->syms[a].len, t->syms[b].raw, t->syms[b].len);
		s->len = t->syms[a].len + t->syms[b].len;
		t->merges[t->n_merges][0] = (uint16_t)a;
		t->merges[t->n_merges][1] = (uint16_t)b;
		t->n_merges++;
		apply_merge(t, a, b, t->n_syms++);
	}
}

static int set_string(struct o1_vocab *v, char **slot, const char *s)
{
	*slot = o1_vocab_strdup(v, s, strlen(s));
	return *slot ? 0 : -ENOMEM;
}

static int fill_vocab(const struct trainer *t, struct o1_vocab *v)
{
	char text[2 * 64 + 1], merge[2 * sizeof(text) + 2];
	int err = 0;

	for (uint32_t i = 0; i < t->n_syms && !err; i++) {
		byte_level_text(t->syms[i].raw, t->syms[i].len, text);
		err = set_string(v, &v->tokens[i], text);
		v->types[i] = O1_TOKEN_NORMAL;
	}
	for (uint32_t i = 0; i < N_SPECIALS && !err; i++) {
		err = set_string(v, &v->tokens[t->n_syms + i], specials[i]);
		v->types[t->n_syms + i] = O1_TOKEN_CONTROL;
	}
	for (uint32_t i = 0; i < t->n_merges && !err; i++) {
		const struct sym *a = &t->syms[t->merges[i][0]];
		const struct sym *b = &t->syms[t->merges[i][1]];

		byte_level_text(a->raw, a->len, merge);
		strcat(merge, " ");
		byte_level_text(b->raw, b->len, merge + strlen(merge));
		err = set_string(v, &v->merges[i], merge);
	}
	if (!err)
		err = set_string(v, &v->chat_template, chatml_template);
	return err;
}

int o1model_tiny_vocab_build(struct o1_vocab **out)
{
	struct trainer *t = calloc(1, sizeof(*t));
	struct o1_vocab *v = NULL;
	int err = -ENOMEM;

	if (!t)
		return -ENOMEM;
	t->words = calloc(sizeof(train_text), sizeof(*t->words));
	t->pair_counts = calloc((size_t)MAX_SYMS * MAX_SYMS, sizeof(uint32_t));
	if (!t->words || !t->pair_counts)
		goto out_free;
	train(t);
	err = o1_vocab_create(t->n_syms + N_SPECIALS, t->n_merges, &v);
	if (err)
		goto out_free;
	v->kind = O1_VOCAB_BPE;
	strcpy(v->pre, "gpt2");
	v->bos_id = (int32_t)t->n_syms;
	v->eos_id = (int32_t)t->n_syms + 3; /* <|im_end|> ends a chat turn */
	err = fill_vocab(t, v);
	if (err) {
		o1_vocab_destroy(v);
		goto out_free;
	}
	*out = v;
out_free:
	free(t->pair_counts);
	free(t->words);
	free(t);
	return err;
}

static int grow(void **p, size_t elem, uint32_t n)
{
	void *q = realloc(*p, elem * n);

	if (!q)
		return -ENOMEM;
	*p = q;
	return 0;
}

int o1model_vocab_pad(struct o1_vocab *v, uint32_t n_tokens)
{
	char name[32];
	uint32_t old = v->n_tokens;

	if (n_tokens < old)
		return -EINVAL;
	if (grow((void **)&v->tokens, sizeof(char *), n_tokens) ||
	    (v->scores && grow((void **)&v->scores, sizeof(float), n_tokens)) ||
	    (v->types && grow((void **)&v->types, sizeof(int32_t), n_tokens)))
		return -ENOMEM;
	for (uint32_t i = old; i < n_tokens; i++) {
		snprintf(name, sizeof(name), "<|unused_%u|>", i - old);
		v->tokens[i] = o1_vocab_strdup(v, name, strlen(name));
		if (!v->tokens[i])
			return -ENOMEM;
		if (v->scores)
			v->scores[i] = 0;
		if (v->types)
			v->types[i] = O1_TOKEN_UNUSED;
		v->n_tokens = i + 1;
	}
	return 0;
}

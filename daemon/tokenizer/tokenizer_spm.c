/* SentencePiece BPE (Llama 2, Mistral), as llama.cpp runs it.
 *
 * Spaces become U+2581, with one more in front when the caller asks for the
 * dummy prefix. The text starts as one symbol per character and the
 * adjacent pair whose concatenation is the highest-scoring token merges
 * first, leftmost among equals: by linear scans for runs up to SPM_SHORT
 * characters, else through a heap (merge_heap.h) whose entries record the
 * merged size and are dropped when popped if either symbol has changed
 * since. When no token has U+2581 after another character (t->spm_runs),
 * the text merges word by word, with the same result. Symbols that end up
 * not being tokens (single characters) fall back to <0xNN> byte tokens, or
 * unk when the vocabulary has none.
 */
#include "tokenizer_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/utf8.h"
#include "merge_heap.h"

static const char spm_space[] = "\xe2\x96\x81"; /* U+2581 */
static const char spm_unk[] = "\xe2\x96\x85";	/* U+2585, llama.cpp */

static int parse_byte_token(const char *s, uint32_t len)
{
	unsigned v;
	char tail;

	if (len != 6 || sscanf(s, "<0x%2x%c", &v, &tail) != 2 || tail != '>')
		return -1;
	return (int)v;
}

/* Decoded bytes of token ID into OUT (room for its text length + 3). */
static uint32_t spm_piece(const struct o1_tokenizer *t, int32_t id, char *out)
{
	const char *s = t->text + t->text_off[id];
	uint32_t len = tok_len(t->text_off, id), n = 0;
	int b;

	switch (t->types[id]) {
	case O1_TOKEN_BYTE:
		b = parse_byte_token(s, len);
		if (b < 0)
			break;
		out[0] = (char)b;
		return 1;
	case O1_TOKEN_UNKNOWN:
		memcpy(out, spm_unk, 3);
		return 3;
	case O1_TOKEN_UNUSED:
		return 0;
	case O1_TOKEN_CONTROL:
	case O1_TOKEN_USER_DEFINED:
		break;
	default:
		for (uint32_t i = 0; i < len; i++) {
			if (i + 3 <= len && memcmp(s + i, spm_space, 3) == 0) {
				out[n++] = ' ';
				i += 2;
				continue;
			}
			out[n++] = s[i];
		}
		return n;
	}
	memcpy(out, s, len);
	return len;
}

/* True when no token has a U+2581 right after another character. */
static bool spaces_only_lead(const struct o1_tokenizer *t)
{
	for (uint32_t id = 0; id < t->n_tokens; id++) {
		const char *s = t->text + t->text_off[id];
		uint32_t n = tok_len(t->text_off, id);
		bool other = false;

		for (uint32_t i = 0; i < n; i++) {
			bool space = i + 3 <= n && !memcmp(s + i, spm_space, 3);

			if (space && other)
				return false;
			other = !space && (s[i] & 0xc0) != 0x80;
			if (space)
				i += 2;
		}
	}
	return true;
}

int tok_spm_init(struct o1_tokenizer *t)
{
	int err = tok_pieces_build(
	    t, t->text_off[t->n_tokens] + 3 * (size_t)t->n_tokens, spm_piece);

	if (err)
		return err;
	for (int b = 0; b < 256; b++) {
		char name[8];

		snprintf(name, sizeof(name), "<0x%02X>", b);
		t->byte_id[b] = tok_strmap_get(&t->by_text, name, 6);
	}
	t->spm_runs = spaces_only_lead(t);
	o1_debug("tokenizer: SentencePiece merges %s",
		 t->spm_runs ? "word by word" : "over whole segments");
	return 0;
}

struct spm_sym {
	uint32_t start, n; /* bytes of the escaped text; n == 0: merged away */
	int32_t prev, next;
};

struct spm_work {
	const char *text; /* escaped */
	struct spm_sym *sym;
	struct tok_heap heap;
};

static void try_bigram(const struct o1_tokenizer *t, struct spm_work *w,
		       int32_t left, int32_t right)
{
	struct spm_sym *l, *r;
	int32_t id;

	if (left < 0 || right < 0)
		return;
	l = &w->sym[left];
	r = &w->sym[right];
	id = tok_strmap_get(&t->by_text, w->text + l->start, l->n + r->n);
	if (id < 0)
		return;
	tok_heap_push(&w->heap, (struct tok_merge){.score = t->scores[id],
						   .left = (uint32_t)left,
						   .right = (uint32_t)right,
						   .size = l->n + r->n});
}

static void merge_loop(const struct o1_tokenizer *t, struct spm_work *w)
{
	while (w->heap.n) {
		struct tok_merge e = tok_heap_pop(&w->heap);
		struct spm_sym *l = &w->sym[e.left], *r = &w->sym[e.right];

		if (!l->n || !r->n || l->n + r->n != e.size)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			w->sym[r->next].prev = (int32_t)e.left;
		try_bigram(t, w, l->prev, (int32_t)e.left);
		try_bigram(t, w, (int32_t)e.left, l->next);
	}
}

static int emit_symbol(const struct o1_tokenizer *t, const char *s, uint32_t n,
		       struct tok_sink *out)
{
	int32_t id = tok_strmap_get(&t->by_text, s, n);

	if (id >= 0) {
		tok_push(out, id);
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		id = t->byte_id[(uint8_t)s[i]];
		if (id < 0)
			id = t->unk_id;
		if (id < 0) {
			o1_warn("tokenizer: byte 0x%02x has no token and "
				"there is no unk",
				(uint8_t)s[i]);
			return -O1_E_TOKENIZER;
		}
		tok_push(out, id);
		if (id == t->unk_id && t->byte_id[(uint8_t)s[i]] < 0)
			break; /* one unk per character */
	}
	return 0;
}

/* Copies TEXT into BUF with each space replaced by U+2581. */
static size_t escape(const char *text, size_t len, bool prefix, char *buf)
{
	size_t n = 0;

	if (prefix) {
		memcpy(buf, spm_space, 3);
		n = 3;
	}
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ') {
			memcpy(buf + n, spm_space, 3);
			n += 3;
		} else {
			buf[n++] = text[i];
		}
	}
	return n;
}

/* Symbols for the characters of text[start, end). */
static uint32_t split_chars(struct spm_work *w, size_t start, size_t end)
{
	uint32_t count = 0;

	for (size_t i = start; i < end;) {
		size_t c = o1_utf8_decode(w->text + i, end - i, NULL);

		if (!c)
			c = 1;
		w->sym[count] =
		    (struct spm_sym){(uint32_t)i, (uint32_t)c,
				     (int32_t)count - 1, (int32_t)count + 1};
		count++;
		i += c;
	}
	if (count)
		w->sym[count - 1].next = -1;
	return count;
}

/* Runs of up to this many characters merge by linear scans (below). */
#define SPM_SHORT 32

/* Score of the token symbols I and I + 1 (compact, in S) would form, or
 * -inf when they form none. */
static float bigram_score(const struct o1_tokenizer *t, const char *text,
			  const struct spm_sym *s, uint32_t i)
{
	int32_t id =
	    tok_strmap_get(&t->by_text, text + s[i].start, s[i].n + s[i + 1].n);

	return id < 0 ? -INFINITY : t->scores[id];
}

/* The same merges as merge_loop for a short run: each round takes the
 * highest-scoring pair, leftmost among equals, by a linear scan over
 * symbols kept compact in W->sym (next/prev unused). */
static uint32_t merge_short(const struct o1_tokenizer *t, struct spm_work *w,
			    uint32_t n)
{
	struct spm_sym *s = w->sym;
	float score[SPM_SHORT];

	for (uint32_t i = 0; i + 1 < n; i++)
		score[i] = bigram_score(t, w->text, s, i);
	while (n > 1) {
		uint32_t best = 0;

		for (uint32_t i = 1; i + 1 < n; i++)
			if (score[i] > score[best])
				best = i;
		if (score[best] == -INFINITY)
			break;
		s[best].n += s[best + 1].n;
		n--;
		memmove(s + best + 1, s + best + 2,
			(n - best - 1) * sizeof(*s));
		memmove(score + best, score + best + 1,
			(n - best - 1) * sizeof(*score));
		if (best > 0)
			score[best - 1] = bigram_score(t, w->text, s, best - 1);
		if (best + 1 < n)
			score[best] = bigram_score(t, w->text, s, best);
	}
	for (uint32_t i = 0; i < n; i++)
		s[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
	return n;
}

/* Merges and emits the escaped text[start, end) as one unit. */
static int spm_run(const struct o1_tokenizer *t, struct spm_work *w,
		   size_t start, size_t end, struct tok_sink *out)
{
	uint32_t count = split_chars(w, start, end);
	int ret = 0;

	if (count <= SPM_SHORT) {
		count = merge_short(t, w, count);
	} else {
		w->heap.n = 0;
		for (uint32_t i = 1; i < count; i++)
			try_bigram(t, w, (int32_t)i - 1, (int32_t)i);
		merge_loop(t, w);
	}
	for (int32_t i = count ? 0 : -1; i >= 0 && !ret; i = w->sym[i].next)
		ret =
		    emit_symbol(t, w->text + w->sym[i].start, w->sym[i].n, out);
	return ret;
}

static bool is_space_at(const char *s, size_t i, size_t n)
{
	return i + 3 <= n && memcmp(s + i, spm_space, 3) == 0;
}

/* Where a U+2581 follows another character: no token spans such a place
 * when t->spm_runs, so the text merges run by run with the same result,
 * in cache-sized pieces. */
static int spm_runs(const struct o1_tokenizer *t, struct spm_work *w, size_t n,
		    struct tok_sink *out)
{
	size_t start = 0;
	bool prev_space = false;
	int ret = 0;

	for (size_t i = 0; i < n && !ret;) {
		bool space = is_space_at(w->text, i, n);

		if (space && !prev_space && i > start) {
			ret = spm_run(t, w, start, i, out);
			start = i;
		}
		prev_space = space;
		i += space ? 3 : 1;
	}
	if (!ret && start < n)
		ret = spm_run(t, w, start, n, out);
	return ret;
}

int tok_spm_encode(const struct o1_tokenizer *t, const char *text, size_t len,
		   bool prefix, struct tok_scratch *scratch,
		   struct tok_sink *out)
{
	size_t cap = 3 * len + 3, tlen = (cap + 7) & ~(size_t)7;
	size_t nsym = len + 1, n;
	struct spm_work w;
	char *mem;

	mem = tok_scratch_get(scratch, tlen + nsym * sizeof(*w.sym) +
					   3 * nsym * sizeof(*w.heap.e));
	if (!mem)
		return -ENOMEM;
	w.text = mem;
	w.sym = (struct spm_sym *)(mem + tlen);
	w.heap.e = (struct tok_merge *)(w.sym + nsym);
	n = escape(text, len, prefix, mem);
	if (t->spm_runs)
		return spm_runs(t, &w, n, out);
	return spm_run(t, &w, 0, n, out);
}

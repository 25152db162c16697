/* The heap of merge candidates both tokenizers' merge loops use for long
 * words: byte-level BPE pops the lowest merge rank first, SentencePiece
 * the highest piece score, and both the leftmost pair among equals. An
 * entry holds both keys and the tokenizer leaves the other one at 0, so
 * one order serves both: rank ascending, then score descending, then
 * left ascending (the tokenizers' own rules, float comparisons as they
 * were). Entries are checked by the caller when popped (lazy deletion:
 * a merge never deletes from the heap).
 *
 * The entry array is the caller's (per-encode scratch) with room for
 * every push; nothing is allocated. Static inline: the merge loops are
 * the tokenizer's hot path.
 */
#ifndef O1_MERGE_HEAP_H
#define O1_MERGE_HEAP_H

#include <stdbool.h>
#include <stdint.h>

struct tok_merge {
	uint32_t rank;	/* BPE: the pair's merge rank; SentencePiece: 0 */
	float score;	/* SentencePiece: the merged piece's; BPE: 0 */
	uint32_t left;	/* the pair's left symbol */
	uint32_t right; /* SentencePiece: its right symbol */
	uint32_t size;	/* SentencePiece: bytes of the merged piece */
};

struct tok_heap {
	struct tok_merge *e; /* the caller's */
	uint32_t n;
};

/* True when A pops before B. */
static inline bool tok_merge_first(const struct tok_merge *a,
				   const struct tok_merge *b)
{
	if (a->rank != b->rank)
		return a->rank < b->rank;
	if (a->score > b->score)
		return true;
	return a->score == b->score && a->left < b->left;
}

static inline void tok_heap_push(struct tok_heap *h, struct tok_merge x)
{
	uint32_t i = h->n++;

	while (i && tok_merge_first(&x, &h->e[(i - 1) / 2])) {
		h->e[i] = h->e[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->e[i] = x;
}

/* The first entry, taken out; the heap is not empty. */
static inline struct tok_merge tok_heap_pop(struct tok_heap *h)
{
	struct tok_merge top = h->e[0], x = h->e[--h->n];
	uint32_t i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && tok_merge_first(&h->e[c + 1], &h->e[c]))
			c++;
		if (!tok_merge_first(&h->e[c], &x))
			break;
		h->e[i] = h->e[c];
		i = c;
	}
	if (h->n)
		h->e[i] = x;
	return top;
}

#endif

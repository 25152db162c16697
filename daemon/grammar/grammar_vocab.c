/* The vocabulary as a byte trie, for masks (grammar_int.h has the layout).
 *
 * Text tokens are sorted by their bytes; walking them in that order and
 * creating a node for each byte past the common prefix with the previous
 * token gives the trie's nodes in preorder, so a node's subtree is a
 * contiguous range [i, skip[i]) and a walk that rejects a prefix jumps
 * over everything below it. Tokens with equal bytes share a node. Empty
 * tokens and tokens over GR_MAX_TOKEN bytes are left out (never allowed).
 *
 * A control token is held as 0xFF NAME 0xFF, the bytes a grammar's
 * @"NAME" item stands for (grammar.h); a text token with a 0xFF byte is
 * never allowed (no UTF-8 text has one, so no grammar could allow it
 * anyway), which keeps byte-fallback tokens from spelling that form.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* qsort_r (glibc) order: by bytes, then length, then id. */
static int cmp_token(const void *a, const void *b, void *arg)
{
	const struct o1_grammar_vocab *v = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b, lx, ly;
	const uint8_t *px = gr_tok(v, x, &lx);
	const uint8_t *py = gr_tok(v, y, &ly);
	int c = memcmp(px, py, lx < ly ? lx : ly);

	if (c)
		return c;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x < y ? -1 : 1;
}

/* Token I's kind as held: out-of-range kinds, tokens too long and text
 * with a 0xFF byte are ignored. */
static uint8_t held_kind(const uint8_t *bytes, uint32_t len, uint8_t k)
{
	if (k > O1_GRAMMAR_TOKEN_CONTROL)
		return O1_GRAMMAR_TOKEN_IGNORE;
	if (k == O1_GRAMMAR_TOKEN_TEXT &&
	    (len > GR_MAX_TOKEN || (len && memchr(bytes, 0xff, len))))
		return O1_GRAMMAR_TOKEN_IGNORE;
	if (k == O1_GRAMMAR_TOKEN_CONTROL &&
	    (!len || len > GR_MAX_TOKEN - 2 || memchr(bytes, 0xff, len)))
		return O1_GRAMMAR_TOKEN_IGNORE;
	return k;
}

static int copy_tokens(struct o1_grammar_vocab *v, const uint8_t *const *bytes,
		       const uint32_t *lens, const uint8_t *kinds)
{
	size_t total = 0;

	for (uint32_t i = 0; i < v->n_tokens; i++)
		total += lens[i] + 2u; /* room for a control token's 0xFFs */
	if (total > UINT32_MAX)
		return -EINVAL;
	v->kind = malloc(v->n_tokens);
	v->blob = malloc(total ? total : 1);
	v->tok_off = malloc((v->n_tokens + 1) * sizeof(*v->tok_off));
	v->end_ids = malloc(v->n_tokens * sizeof(*v->end_ids));
	if (!v->kind || !v->blob || !v->tok_off || !v->end_ids)
		return -ENOMEM;
	total = 0;
	for (uint32_t i = 0; i < v->n_tokens; i++) {
		uint8_t k = kinds ? kinds[i] : O1_GRAMMAR_TOKEN_TEXT;
		bool ctl;

		v->kind[i] = held_kind(bytes[i], lens[i], k);
		ctl = v->kind[i] == O1_GRAMMAR_TOKEN_CONTROL;
		if (v->kind[i] == O1_GRAMMAR_TOKEN_END)
			v->end_ids[v->n_end++] = i;
		v->tok_off[i] = (uint32_t)total;
		if (ctl)
			v->blob[total++] = 0xff;
		if (lens[i])
			memcpy(v->blob + total, bytes[i], lens[i]);
		total += lens[i];
		if (ctl)
			v->blob[total++] = 0xff;
	}
	v->tok_off[v->n_tokens] = (uint32_t)total;
	return 0;
}

/* Sorted text tokens into preorder nodes; SORTED holds N ids. A token
 * ends at the last node created when it is reached: its own last byte,
 * or for a duplicate the node of the equal token just before it. */
static int build_nodes(struct o1_grammar_vocab *v, const uint32_t *sorted,
		       uint32_t n)
{
	size_t cap = 1;
	const uint8_t *prev = NULL;
	uint32_t prev_len = 0, nn = 1;

	for (uint32_t i = 0; i < n; i++)
		cap += v->tok_off[sorted[i] + 1] - v->tok_off[sorted[i]];
	v->node_byte = malloc(cap);
	v->node_depth = malloc(cap * sizeof(*v->node_depth));
	v->node_skip = malloc(cap * sizeof(*v->node_skip));
	v->node_tok = calloc(cap + 1, sizeof(*v->node_tok));
	v->ids = malloc((n ? n : 1) * sizeof(*v->ids));
	if (!v->node_byte || !v->node_depth || !v->node_skip ||
	    !v->node_tok || !v->ids)
		return -ENOMEM;
	v->node_byte[0] = 0;
	v->node_depth[0] = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len, lcp = 0;
		const uint8_t *b = gr_tok(v, sorted[i], &len);

		while (lcp < len && lcp < prev_len && b[lcp] == prev[lcp])
			lcp++;
		for (uint32_t d = lcp; d < len; d++) {
			v->node_byte[nn] = b[d];
			v->node_depth[nn++] = (uint16_t)(d + 1);
		}
		v->node_tok[nn]++; /* counts per node, shifted by one */
		v->ids[i] = sorted[i];
		if (len > v->max_len)
			v->max_len = len;
		prev = b;
		prev_len = len;
	}
	v->n_nodes = nn;
	for (uint32_t i = 0; i < nn; i++)
		v->node_tok[i + 1] += v->node_tok[i];
	return 0;
}

static int build_skip(struct o1_grammar_vocab *v)
{
	uint32_t *stack = malloc(v->n_nodes * sizeof(*stack)), sp = 0;

	if (!stack)
		return -ENOMEM;
	for (uint32_t i = 0; i < v->n_nodes; i++) {
		while (sp && v->node_depth[stack[sp - 1]] >= v->node_depth[i])
			v->node_skip[stack[--sp]] = i;
		stack[sp++] = i;
	}
	while (sp)
		v->node_skip[stack[--sp]] = v->n_nodes;
	free(stack);
	return 0;
}

static int build_trie(struct o1_grammar_vocab *v)
{
	uint32_t *sorted = malloc(v->n_tokens * sizeof(*sorted)), n = 0;
	int rc;

	if (!sorted)
		return -ENOMEM;
	for (uint32_t i = 0; i < v->n_tokens; i++)
		if ((v->kind[i] == O1_GRAMMAR_TOKEN_TEXT ||
		     v->kind[i] == O1_GRAMMAR_TOKEN_CONTROL) &&
		    v->tok_off[i + 1] > v->tok_off[i])
			sorted[n++] = i;
	qsort_r(sorted, n, sizeof(*sorted), cmp_token, v);
	rc = build_nodes(v, sorted, n);
	free(sorted);
	return rc ?: build_skip(v);
}

int o1_grammar_vocab_create(uint32_t n, const uint8_t *const *bytes,
			    const uint32_t *lens, const uint8_t *kinds,
			    struct o1_grammar_vocab **out)
{
	struct o1_grammar_vocab *v;
	int rc;

	*out = NULL;
	if (!n)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->n_tokens = n;
	rc = copy_tokens(v, bytes, lens, kinds);
	rc = rc ?: build_trie(v);
	if (rc) {
		o1_grammar_vocab_destroy(v);
		return rc;
	}
	*out = v;
	return 0;
}

void o1_grammar_vocab_destroy(struct o1_grammar_vocab *v)
{
	if (!v)
		return;
	free(v->kind);
	free(v->blob);
	free(v->tok_off);
	free(v->end_ids);
	free(v->node_byte);
	free(v->node_depth);
	free(v->node_skip);
	free(v->node_tok);
	free(v->ids);
	free(v);
}

uint32_t o1_grammar_vocab_size(const struct o1_grammar_vocab *v)
{
	return v->n_tokens;
}

const uint8_t *o1_grammar_vocab_token(const struct o1_grammar_vocab *v,
				      uint32_t id, uint32_t *len)
{
	const uint8_t *b;

	if (id >= v->n_tokens)
		return NULL;
	b = gr_tok(v, id, len);
	if (v->kind[id] == O1_GRAMMAR_TOKEN_CONTROL) {
		*len -= 2;
		b++;
	}
	return b;
}

int32_t o1_grammar_vocab_control(const struct o1_grammar_vocab *v,
				 const char *name, size_t len)
{
	for (uint32_t i = 0; i < v->n_tokens; i++) {
		uint32_t n;
		const uint8_t *b = gr_tok(v, i, &n);

		if (v->kind[i] == O1_GRAMMAR_TOKEN_CONTROL && n == len + 2 &&
		    !memcmp(b + 1, name, len))
			return (int32_t)i;
	}
	return -1;
}

int o1_grammar_vocab_kind(const struct o1_grammar_vocab *v, uint32_t id)
{
	return id < v->n_tokens ? v->kind[id] : -EINVAL;
}

uint32_t o1_grammar_mask_words(const struct o1_grammar_vocab *v)
{
	return (v->n_tokens + 31) / 32;
}

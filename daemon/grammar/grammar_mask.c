/* Token masks: precomputed classes per position, then the check per step.
 *
 * A position is a state that can take a byte. From a stack whose top is
 * at state s, a token is
 *   accepted  when its bytes can all be consumed without popping s's
 *             frame: true whatever lies below, so decided once;
 *   uncertain when some way through pops s's frame with bytes left, and
 *             those bytes fit some caller's continuation;
 *   rejected  otherwise.
 * The precompute walks the vocabulary trie once per position from the
 * head (s, GP_BASE); a pop through GP_BASE continues at every return
 * state of the rule's calls on GP_CTX (the union of all callers), so
 * a token that no caller could continue is rejected here, not checked at
 * every step. This is XGrammar's adaptive token mask cache, with its
 * context expansion done by running the callers' own states.
 *
 * Walks are shared (grammar_share.c decides which): the top of an orbit
 * walks once for its whole orbit, keeping per token the bound below
 * which members take it (lim) and walking apart the subtrees where
 * members go on past the top (side_walks); equivalent positions copy
 * their representative's classes; and the subtree under a first byte is
 * walked once per state that byte leads to (the memo). The tables are
 * those of a walk from every position (gr_tokens_create without
 * sharing: test_grammar_share).
 *
 * Per step the mask is the union, over the distinct states of the
 * matcher's heads, of the accepted tokens, plus the uncertain tokens that
 * pass a check from the real heads. Uncertain tokens are kept in trie
 * order, so consecutive checks share their common prefix (levels of a
 * gdepth) and a rejected prefix rejects every token after it that starts
 * with it. End tokens are allowed when the matcher is complete.
 *
 * Invariants of the threaded precompute (struct job): each worker takes
 * the next state from an atomic counter and writes only its own lists
 * and the gpos entries of the states it took (an orbit's members with
 * their top); all are joined before the gather rebases the offsets into
 * one array, so a position's classes do not depend on which worker
 * walked it; the first error stops every worker before its next state.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#define PRE_FRAMES (1u << 16)
#define PRE_HEADS  256

/* Room for N values (a walk puts each token once at most). */
static int reserve(struct gvec *x, size_t n)
{
	uint32_t *v = n > x->cap ? realloc(x->v, n * sizeof(*v)) : x->v;

	if (!v)
		return -ENOMEM;
	x->v = v;
	x->cap = n > x->cap ? n : x->cap;
	return 0;
}

/* Room for MORE values after X's (doubling, as gr_vec_push does). */
static int room(struct gvec *x, size_t more)
{
	size_t cap = x->cap ? x->cap : 64;

	while (cap < x->n + more)
		cap *= 2;
	return cap == x->cap ? 0 : reserve(x, cap);
}

struct memo_ent {
	uint32_t key; /* state * 256 + byte + 1; 0: free */
	uint32_t acc_off, n_acc, unc_off, n_unc; /* in the arena */
};

struct pre {
	const struct o1_grammar *g;
	const struct o1_grammar_vocab *v;
	const struct gshare *sh; /* NULL: every position walks */
	struct gcore core;
	struct gdepth dep;
	struct gvec acc, unc, ids, bits;
	/* an orbit's walk: per token of acc and unc, how many of the orbit
	 * take it (lim: phi^i(top) does when i < lim); per trie level, lim
	 * so far and whether the walk is still in the chain */
	struct gvec acc_lim, unc_lim;
	uint32_t *lim;
	uint8_t *in_chain;
	uint32_t *cur, *tmp, *order, *count; /* store_orbit scratch */
	uint32_t *cur_bits;
	struct gvec xt;	       /* side walks' records (side_walks) */
	uint8_t *simple;       /* [n_states]: no calls, does not accept */
	struct memo_ent *memo; /* NULL: every position walks */
	uint32_t memo_mask, memo_n;
	struct gvec arena; /* the memo's token lists */
};

/* Tokens ending at node I (or, SUBTREE, anywhere below it too) into VEC,
 * and when LIMS, LIM for each into LIMS. */
static int put_node(struct pre *w, uint32_t i, bool subtree, struct gvec *vec,
		    struct gvec *lims, uint32_t lim)
{
	const struct o1_grammar_vocab *v = w->v;
	uint32_t end = subtree ? v->node_skip[i] : i + 1;
	int rc = 0;

	for (uint32_t k = v->node_tok[i]; k < v->node_tok[end] && !rc; k++) {
		rc = gr_vec_push(vec, v->ids[k]);
		if (lims && !rc)
			rc = gr_vec_push(lims, lim);
	}
	return rc;
}

/* Level K + 1's lim and chain flag, from level K's, for the step from
 * state X by BYTE to T (level K holds the one head X when in the chain).
 * While the walk is in the chain its one head is phi^i of the orbit's. */
static inline void track(struct pre *w, uint32_t k, uint32_t x, uint8_t byte,
			 int32_t t, uint32_t top)
{
	const struct gshare *sh = w->sh;
	uint32_t lim = w->lim[k];
	uint8_t on = w->in_chain[k];

	if (on && t >= 0) {
		uint32_t die = sh->die[(size_t)sh->row[x] * w->g->n_classes +
				       w->g->cls[byte]];

		lim = die < lim ? die : lim;
		on = sh->chain[t] == sh->chain[top];
	}
	w->lim[k + 1] = lim;
	w->in_chain[k + 1] = on;
}

/* The tokens ending at node I into VEC (and LIM for each into LIMS);
 * the vectors have room for every token (pre_init). */
static inline void put_fast(struct pre *w, uint32_t i, struct gvec *vec,
			    struct gvec *lims, uint32_t lim)
{
	const struct o1_grammar_vocab *v = w->v;
	uint32_t k0 = v->node_tok[i], k1 = v->node_tok[i + 1];

	for (uint32_t k = k0; k < k1; k++)
		vec->v[vec->n++] = v->ids[k];
	if (lims)
		for (uint32_t k = k0; k < k1; k++)
			lims->v[lims->n++] = lim;
}

static int side_walks(struct pre *w, uint32_t k, uint32_t node, uint32_t top);

/* Trie nodes [LO, HI) walked from level 0: their tokens into W->acc and
 * W->unc (with lims for ORBIT's top). */
static int walk_range(struct pre *w, uint32_t s, uint32_t lo, uint32_t hi,
		      bool orbit)
{
	const struct o1_grammar_vocab *v = w->v;
	struct gdepth *d = &w->dep;
	struct gvec *al = orbit ? &w->acc_lim : NULL;
	struct gvec *ul = orbit ? &w->unc_lim : NULL;
	int rc = 0;

	for (uint32_t i = lo; i < hi && rc != -ENOMEM;) {
		struct gstep st;
		uint32_t k = v->node_depth[i] - 1u, lim = 0;
		int n;

		/* most steps: one head staying inside its rule (the fast case
		 * of gr_depth_step, here without a call per trie node) */
		if (d->n[k] == 1) {
			const struct ghead *h = d->pool + d->off[k];
			int32_t t = gr_next(w->g, h->s, v->node_byte[i]);
			uint32_t off = d->off[k] + 1;

			if (t < 0) {
				if (orbit && w->in_chain[k])
					rc = side_walks(w, k, i, s);
				i = v->node_skip[i];
				continue;
			}
			if (orbit) {
				track(w, k, h->s, v->node_byte[i], t, s);
				lim = w->lim[k + 1];
			}
			if (w->simple[t] && off < d->pool_size) {
				bool ctx = h->p == GP_CTX ||
					   (h->p < GP_MAXF &&
					    w->core.frames[h->p].ctx);

				d->pool[off] =
				    (struct ghead){(uint32_t)t, h->p};
				d->off[k + 1] = off;
				d->n[k + 1] = 1;
				d->frames[k + 1] = d->frames[k];
				if (ctx)
					put_fast(w, i, &w->unc, ul, lim);
				else
					put_fast(w, i, &w->acc, al, lim);
				i++;
				continue;
			}
		} else if (orbit) {
			/* several heads: out of the chain */
			track(w, k, 0, 0, -1, s);
			lim = w->lim[k + 1];
		}
		n = gr_depth_step(d, &w->core, k, v->node_byte[i], &st);
		if (n < 0) {
			/* past a limit: the runtime check decides */
			rc = put_node(w, i, true, &w->unc, ul, lim);
			i = v->node_skip[i];
			continue;
		}
		if (st.n_real)
			rc = put_node(w, i, false, &w->acc, al, lim);
		else if (st.n_ctx)
			rc = put_node(w, i, false, &w->unc, ul, lim);
		i = n ? i + 1 : v->node_skip[i];
	}
	return rc == -ENOMEM ? rc : 0;
}

/* The walk from an orbit's TOP stops at trie node NODE (level K + 1),
 * its one head x at level K in the chain: the members still alive there
 * (i < lim) that go on by NODE's byte (die(x, byte) = 0) walk NODE's
 * subtree from their own head, phi^i(x). Their tokens are kept in W->xt
 * as records (member, where they go among the top's accepted and
 * uncertain tokens, how many of each, the ids), in trie order. */
static int side_walks(struct pre *w, uint32_t k, uint32_t node, uint32_t top)
{
	const struct gshare *sh = w->sh;
	const struct o1_grammar_vocab *v = w->v;
	struct gdepth *d = &w->dep;
	struct ghead save = d->pool[d->off[k]];
	uint8_t byte = v->node_byte[node];
	uint32_t x = save.s, z = x, nc = w->g->n_classes;
	int rc = 0;

	if (sh->die[(size_t)sh->row[x] * nc + w->g->cls[byte]])
		return 0;
	for (uint32_t m = 1;
	     m < w->lim[k] && !rc && (z = sh->phi[z]) != GR_NONE; m++) {
		size_t a0 = w->acc.n, u0 = w->unc.n, na, nu;

		if (gr_next(w->g, z, byte) < 0)
			continue;
		d->pool[d->off[k]] = (struct ghead){z, save.p};
		rc = walk_range(w, top, node, v->node_skip[node], false);
		d->pool[d->off[k]] = save;
		na = w->acc.n - a0;
		nu = w->unc.n - u0;
		rc = rc ?: room(&w->xt, 5 + na + nu);
		if (!rc && na + nu) {
			uint32_t *r = w->xt.v + w->xt.n;

			r[0] = m;
			r[1] = (uint32_t)a0;
			r[2] = (uint32_t)u0;
			r[3] = (uint32_t)na;
			r[4] = (uint32_t)nu;
			memcpy(r + 5, w->acc.v + a0, na * sizeof(*r));
			memcpy(r + 5 + na, w->unc.v + u0, nu * sizeof(*r));
			w->xt.n += 5 + na + nu;
		}
		w->acc.n = a0;
		w->unc.n = u0;
	}
	return rc;
}

/* The memo of first bytes: after byte B from any state s the walk holds
 * the one head (next(s, B), GP_BASE), so the classes of every token that
 * starts with B follow from that state (up to equivalence) alone: walked
 * once per (state, B) and copied for every other position that B takes
 * there. */
static struct memo_ent *memo_find(struct pre *w, uint32_t key)
{
	uint32_t h = (key * 0x9e3779b1u) & w->memo_mask;

	while (w->memo[h].key && w->memo[h].key != key)
		h = (h + 1) & w->memo_mask;
	return &w->memo[h];
}

static int memo_grow(struct pre *w)
{
	struct memo_ent *old = w->memo;
	uint32_t n = w->memo_mask + 1;

	if (w->memo_n < n / 2)
		return 0;
	w->memo = calloc(2 * (size_t)n, sizeof(*w->memo));
	if (!w->memo) {
		w->memo = old;
		return -ENOMEM;
	}
	w->memo_mask = 2 * n - 1;
	for (uint32_t k = 0; k < n; k++)
		if (old[k].key)
			*memo_find(w, old[k].key) = old[k];
	free(old);
	return 0;
}

static int append(struct gvec *to, const uint32_t *from, uint32_t n)
{
	int rc = 0;

	for (uint32_t k = 0; k < n && !rc; k++)
		rc = gr_vec_push(to, from[k]);
	return rc;
}

/* Root child R (byte B) from S: from the memo, or walked into it. */
static int walk_first(struct pre *w, uint32_t s, uint32_t r)
{
	const struct o1_grammar_vocab *v = w->v;
	int32_t t = gr_next(w->g, s, v->node_byte[r]);
	size_t a0 = w->acc.n, u0 = w->unc.n;
	struct memo_ent *e;
	uint32_t key;
	int rc;

	if (t < 0)
		return 0;
	/* an equivalent state classes alike (grammar_share.c) */
	key = w->sh->rep[t] * 256 + v->node_byte[r] + 1u;
	e = memo_find(w, key);
	if (e->key)
		return append(&w->acc, w->arena.v + e->acc_off, e->n_acc)
			   ?: append(&w->unc, w->arena.v + e->unc_off,
				     e->n_unc);
	rc = walk_range(w, s, r, v->node_skip[r], false);
	if (rc || w->arena.n + (w->acc.n - a0) + (w->unc.n - u0) > UINT32_MAX)
		return rc;
	*e = (struct memo_ent){key, (uint32_t)w->arena.n,
			       (uint32_t)(w->acc.n - a0), 0,
			       (uint32_t)(w->unc.n - u0)};
	rc = append(&w->arena, w->acc.v + a0, e->n_acc);
	e->unc_off = (uint32_t)w->arena.n;
	rc = rc ?: append(&w->arena, w->unc.v + u0, e->n_unc);
	w->memo_n++;
	return rc ?: memo_grow(w);
}

/* The trie walk from (S, GP_BASE): W->acc and W->unc in trie order; for
 * the top of an orbit (walked whole: lims depend on S), W->acc_lim and
 * W->unc_lim too. */
static int walk(struct pre *w, uint32_t s)
{
	const struct o1_grammar_vocab *v = w->v;
	struct gdepth *d = &w->dep;
	bool orbit = w->sh && w->sh->top[s] == s;
	int rc = 0;

	w->acc.n = w->unc.n = w->acc_lim.n = w->unc_lim.n = w->xt.n = 0;
	gr_core_truncate(&w->core, 0);
	d->pool[0] = (struct ghead){s, GP_BASE};
	d->off[0] = 0;
	d->n[0] = 1;
	d->frames[0] = 0;
	if (orbit) {
		w->lim[0] = UINT32_MAX;
		w->in_chain[0] = 1;
	}
	if (!w->memo || orbit)
		return walk_range(w, s, 1, v->n_nodes, orbit);
	for (uint32_t r = 1; r < v->n_nodes && !rc; r = v->node_skip[r])
		rc = walk_first(w, s, r);
	return rc;
}

/* Stores the walk's result for S: accepted ids as a list or, when that is
 * larger, a bitmask; uncertain ids as a list. */
static int store(struct pre *w, struct o1_grammar_tokens *t, uint32_t s)
{
	struct gpos *p = &t->pos[s];
	bool bits = w->acc.n > t->n_words;

	if (room(&w->bits, bits ? t->n_words : 0) ||
	    room(&w->ids, (bits ? 0 : w->acc.n) + w->unc.n))
		return -ENOMEM;
	p->acc_bits = GR_NONE;
	p->n_acc = (uint32_t)w->acc.n;
	p->acc_off = (uint32_t)w->ids.n;
	if (bits) {
		uint32_t *b = w->bits.v + w->bits.n;

		p->acc_bits = (uint32_t)(w->bits.n / t->n_words);
		memset(b, 0, t->n_words * sizeof(*b));
		for (size_t k = 0; k < w->acc.n; k++)
			b[w->acc.v[k] / 32] |= 1u << (w->acc.v[k] % 32);
		w->bits.n += t->n_words;
	} else {
		memcpy(w->ids.v + w->ids.n, w->acc.v,
		       w->acc.n * sizeof(*w->ids.v));
		w->ids.n += w->acc.n;
	}
	p->unc_off = (uint32_t)w->ids.n;
	p->n_unc = (uint32_t)w->unc.n;
	memcpy(w->ids.v + w->ids.n, w->unc.v, w->unc.n * sizeof(*w->ids.v));
	w->ids.n += w->unc.n;
	return 0;
}

/* Member I of the orbit whose walk W holds: the top's accepted tokens
 * W->cur (N_CUR indices into W->acc, or W->cur_bits when BITS) and its
 * uncertain ones of lim > I, with the member's side walks (W->xt) put
 * where they go in trie order. */
static int put_member(struct pre *w, const struct o1_grammar_tokens *t,
		      struct gpos *p, uint32_t i, uint32_t n_cur, bool bits)
{
	uint32_t nw = t->n_words, n_acc = n_cur, n_unc = 0, ci = 0;
	size_t ui = 0;

	for (size_t r = 0; r < w->xt.n;
	     r += 5 + w->xt.v[r + 3] + w->xt.v[r + 4])
		if (w->xt.v[r] == i) {
			n_acc += w->xt.v[r + 3];
			n_unc += w->xt.v[r + 4];
		}
	if (room(&w->bits, n_acc > nw ? nw : 0) ||
	    room(&w->ids, (n_acc > nw ? 0 : n_acc) + w->unc.n + n_unc))
		return -ENOMEM;
	p->acc_bits = GR_NONE;
	p->n_acc = n_acc;
	p->acc_off = (uint32_t)w->ids.n;
	if (n_acc > nw) {
		uint32_t *b = w->bits.v + w->bits.n;

		p->acc_bits = (uint32_t)(w->bits.n / nw);
		if (bits) {
			memcpy(b, w->cur_bits, nw * sizeof(*b));
		} else {
			memset(b, 0, nw * sizeof(*b));
			for (uint32_t k = 0; k < n_cur; k++)
				b[w->acc.v[w->cur[k]] / 32] |=
				    1u << (w->acc.v[w->cur[k]] % 32);
		}
		for (size_t r = 0; r < w->xt.n;
		     r += 5 + w->xt.v[r + 3] + w->xt.v[r + 4])
			for (uint32_t k = 0;
			     w->xt.v[r] == i && k < w->xt.v[r + 3]; k++)
				b[w->xt.v[r + 5 + k] / 32] |=
				    1u << (w->xt.v[r + 5 + k] % 32);
		w->bits.n += nw;
	} else {
		/* a list: the top's tokens before each side walk's place */
		for (size_t r = 0; r < w->xt.n;
		     r += 5 + w->xt.v[r + 3] + w->xt.v[r + 4]) {
			if (w->xt.v[r] != i)
				continue;
			while (ci < n_cur && w->cur[ci] < w->xt.v[r + 1])
				w->ids.v[w->ids.n++] = w->acc.v[w->cur[ci++]];
			memcpy(w->ids.v + w->ids.n, w->xt.v + r + 5,
			       w->xt.v[r + 3] * sizeof(*w->ids.v));
			w->ids.n += w->xt.v[r + 3];
		}
		while (ci < n_cur)
			w->ids.v[w->ids.n++] = w->acc.v[w->cur[ci++]];
	}
	p->unc_off = (uint32_t)w->ids.n;
	for (size_t r = 0; r < w->xt.n;
	     r += 5 + w->xt.v[r + 3] + w->xt.v[r + 4]) {
		if (w->xt.v[r] != i)
			continue;
		for (; ui < w->xt.v[r + 2]; ui++)
			if (w->unc_lim.v[ui] > i)
				w->ids.v[w->ids.n++] = w->unc.v[ui];
		memcpy(w->ids.v + w->ids.n, w->xt.v + r + 5 + w->xt.v[r + 3],
		       w->xt.v[r + 4] * sizeof(*w->ids.v));
		w->ids.n += w->xt.v[r + 4];
	}
	for (; ui < w->unc.n; ui++)
		if (w->unc_lim.v[ui] > i)
			w->ids.v[w->ids.n++] = w->unc.v[ui];
	p->n_unc = (uint32_t)(w->ids.n - p->unc_off);
	return 0;
}

/* The members of TOP's orbit after it, from the walk from TOP: member i
 * (phi^i(top)) takes the tokens of lim > i. Those sets shrink with i, so
 * they are built from the last member back, each the next one's plus
 * the tokens of lim = i + 1 (counting-sorted by lim, in trie order): a
 * sorted merge while the set is a list, then bits. */
static int store_orbit(struct pre *w, struct o1_grammar_tokens *t, uint32_t top,
		       uint8_t *owner, uint8_t id)
{
	const struct gshare *sh = w->sh;
	uint32_t h = 0, n_cur = 0, nw = t->n_words;
	bool bits = false;
	int rc = 0;

	for (uint32_t x = sh->phi[top]; x != GR_NONE; x = sh->phi[x])
		h++;
	/* lims above h + 1 mean the whole orbit */
	memset(w->count, 0, ((size_t)h + 3) * sizeof(*w->count));
	for (size_t k = 0; k < w->acc.n; k++) {
		uint32_t l = w->acc_lim.v[k] > h + 1 ? h + 1 : w->acc_lim.v[k];

		w->acc_lim.v[k] = l;
		w->count[l + 1]++;
	}
	for (uint32_t l = 0; l <= h + 1; l++)
		w->count[l + 1] += w->count[l];
	for (size_t k = 0; k < w->acc.n; k++)
		w->order[w->count[w->acc_lim.v[k]]++] = (uint32_t)k;
	/* count[l] is now the end of lim l's run, count[l - 1] its start */
	for (uint32_t i = h; i >= 1 && !rc; i--) {
		uint32_t x = top, lo = w->count[i], hi = w->count[i + 1];

		for (uint32_t k = 0; k < i; k++)
			x = sh->phi[x];
		if (!bits && n_cur + (hi - lo) <= nw) {
			uint32_t a = 0, b = lo, m = 0;

			while (a < n_cur || b < hi)
				w->tmp[m++] =
				    b == hi || (a < n_cur &&
						w->cur[a] < w->order[b])
					? w->cur[a++]
					: w->order[b++];
			memcpy(w->cur, w->tmp, m * sizeof(*w->cur));
		} else {
			if (!bits) {
				memset(w->cur_bits, 0,
				       nw * sizeof(*w->cur_bits));
				for (uint32_t k = 0; k < n_cur; k++) {
					uint32_t tok = w->acc.v[w->cur[k]];

					w->cur_bits[tok / 32] |= 1u
								 << (tok % 32);
				}
				bits = true;
			}
			for (uint32_t k = lo; k < hi; k++) {
				uint32_t tok = w->acc.v[w->order[k]];

				w->cur_bits[tok / 32] |= 1u << (tok % 32);
			}
		}
		n_cur += hi - lo;
		owner[x] = id;
		rc = put_member(w, t, &t->pos[x], i, n_cur, bits);
	}
	return rc;
}

static int pre_init(struct pre *w, const struct o1_grammar *g,
		    const struct o1_grammar_vocab *v, const struct gshare *sh)
{
	uint32_t nw = o1_grammar_mask_words(v), levels = v->max_len + 2;

	*w = (struct pre){.g = g, .v = v, .sh = sh};
	if (gr_core_init(&w->core, g, PRE_FRAMES, PRE_HEADS) ||
	    gr_depth_init(&w->dep, v->max_len, PRE_HEADS))
		return -ENOMEM;
	w->simple = malloc(g->n_states + 1);
	if (!w->simple || reserve(&w->acc, v->n_tokens) ||
	    reserve(&w->unc, v->n_tokens))
		return -ENOMEM;
	for (uint32_t s = 0; s < g->n_states; s++)
		w->simple[s] = !g->states[s].n_ref && !g->states[s].accept;
	if (!sh)
		return 0;
	if (reserve(&w->acc_lim, v->n_tokens) ||
	    reserve(&w->unc_lim, v->n_tokens))
		return -ENOMEM;
	w->memo_mask = 255;
	w->memo = calloc(w->memo_mask + 1, sizeof(*w->memo));
	w->lim = malloc(levels * sizeof(*w->lim));
	w->in_chain = malloc(levels);
	w->cur = malloc(((size_t)nw + 1) * sizeof(*w->cur));
	w->tmp = malloc(((size_t)nw + 1) * sizeof(*w->tmp));
	w->order = malloc(((size_t)v->n_tokens + 1) * sizeof(*w->order));
	w->count = malloc(((size_t)g->n_states + 3) * sizeof(*w->count));
	w->cur_bits = malloc(((size_t)nw + 1) * sizeof(*w->cur_bits));
	if (!w->memo || !w->lim || !w->in_chain || !w->cur || !w->tmp ||
	    !w->order || !w->count || !w->cur_bits)
		return -ENOMEM;
	return 0;
}

static void pre_fini(struct pre *w)
{
	gr_core_fini(&w->core);
	gr_depth_fini(&w->dep);
	free(w->acc.v);
	free(w->unc.v);
	free(w->ids.v);
	free(w->bits.v);
	free(w->acc_lim.v);
	free(w->unc_lim.v);
	free(w->lim);
	free(w->in_chain);
	free(w->cur);
	free(w->tmp);
	free(w->order);
	free(w->count);
	free(w->cur_bits);
	free(w->simple);
	free(w->memo);
	free(w->arena.v);
	free(w->xt.v);
}

/* The classification shared by the workers: each takes the next state
 * (walks differ by orders of magnitude: no static split), writes its
 * gpos with offsets into its own ids and bits, and OWNER says whose. */
struct job {
	struct o1_grammar_tokens *t;
	struct pre *w; /* [n] */
	uint8_t *owner;	/* [n_states] */
	uint32_t next;	/* atomic */
	int rc;		/* atomic: first error */
};

struct worker_arg {
	struct job *j;
	uint8_t id;
};

static void *worker(void *arg)
{
	struct worker_arg *a = arg;
	struct job *j = a->j;
	const struct o1_grammar *g = j->t->g;
	struct pre *w = &j->w[a->id];

	for (;;) {
		uint32_t s = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		int rc;

		if (s >= g->n_states || __atomic_load_n(&j->rc, __ATOMIC_RELAXED))
			break;
		if (!g->states[s].has_bytes)
			continue;
		/* an orbit's members come with its top's walk, an equivalent
		 * position's classes after the gather */
		if (w->sh &&
		    ((w->sh->top[s] != GR_NONE && w->sh->top[s] != s) ||
		     w->sh->rep[s] != s))
			continue;
		j->owner[s] = a->id;
		rc = walk(w, s) ?: store(w, j->t, s);
		if (!rc && w->sh && w->sh->top[s] == s)
			rc = store_orbit(w, j->t, s, j->owner, a->id);
		if (rc)
			__atomic_store_n(&j->rc, rc, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The workers' lists and masks into one array each; offsets rebased. */
static int gather(struct job *j, uint32_t n)
{
	struct o1_grammar_tokens *t = j->t;
	size_t ids = 0, bits = 0, id_base[64], bit_base[64];

	for (uint32_t k = 0; k < n; k++) {
		id_base[k] = ids;
		bit_base[k] = bits;
		ids += j->w[k].ids.n;
		bits += j->w[k].bits.n;
	}
	if (ids > UINT32_MAX || bits / (t->n_words ? t->n_words : 1) >
				    UINT32_MAX - 1)
		return -O1_E_BOUNDS;
	t->ids = malloc((ids ? ids : 1) * sizeof(*t->ids));
	t->bits = malloc((bits ? bits : 1) * sizeof(*t->bits));
	if (!t->ids || !t->bits)
		return -ENOMEM;
	t->n_ids = ids;
	t->n_bits = bits;
	for (uint32_t k = 0; k < n; k++) {
		if (j->w[k].ids.n)
			memcpy(t->ids + id_base[k], j->w[k].ids.v,
			       j->w[k].ids.n * sizeof(*t->ids));
		if (j->w[k].bits.n)
			memcpy(t->bits + bit_base[k], j->w[k].bits.v,
			       j->w[k].bits.n * sizeof(*t->bits));
	}
	for (uint32_t s = 0; s < t->g->n_states; s++) {
		struct gpos *p = &t->pos[s];
		uint8_t k = j->owner[s];

		if (!t->g->states[s].has_bytes)
			continue;
		p->acc_off += (uint32_t)id_base[k];
		p->unc_off += (uint32_t)id_base[k];
		if (p->acc_bits != GR_NONE)
			p->acc_bits += (uint32_t)(bit_base[k] / t->n_words);
	}
	return 0;
}

static int run_workers(struct job *j, uint32_t n)
{
	struct worker_arg args[64];
	pthread_t tid[64];
	uint32_t started = 1;

	for (uint32_t k = 0; k < n; k++)
		args[k] = (struct worker_arg){j, (uint8_t)k};
	for (uint32_t k = 1; k < n; k++, started++)
		if (pthread_create(&tid[k], NULL, worker, &args[k]))
			break; /* fewer threads: the others take the work */
	worker(&args[0]);
	for (uint32_t k = 1; k < started; k++)
		pthread_join(tid[k], NULL);
	return j->rc;
}

int gr_tokens_create(const struct o1_grammar *g,
		     const struct o1_grammar_vocab *v, uint32_t n_threads,
		     bool share, struct o1_grammar_tokens **out)
{
	struct o1_grammar_tokens *t = calloc(1, sizeof(*t));
	struct job j = {.t = t};
	struct gshare sh = {0};
	uint32_t n = n_threads ? (n_threads > 64 ? 64 : n_threads) : 1;
	int rc = -ENOMEM;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->g = g;
	t->v = v;
	t->n_words = o1_grammar_mask_words(v);
	t->pos = calloc(g->n_states, sizeof(*t->pos));
	j.owner = calloc(g->n_states ? g->n_states : 1, 1);
	j.w = calloc(n, sizeof(*j.w));
	if (!t->pos || !j.owner || !j.w)
		goto out;
	for (uint32_t s = 0; s < g->n_states; s++)
		t->pos[s].acc_bits = GR_NONE;
	if (share && (rc = gr_share_build(g, &sh)))
		goto out;
	rc = -ENOMEM;
	for (uint32_t k = 0; k < n; k++)
		if (pre_init(&j.w[k], g, v, share ? &sh : NULL))
			goto out;
	rc = run_workers(&j, n);
	rc = rc ?: gather(&j, n);
	for (uint32_t s = 0; !rc && share && s < g->n_states; s++)
		if (sh.rep[s] != s)
			t->pos[s] = t->pos[sh.rep[s]];
out:
	for (uint32_t k = 0; j.w && k < n; k++)
		pre_fini(&j.w[k]);
	free(j.w);
	free(j.owner);
	gr_share_fini(&sh);
	if (rc) {
		o1_grammar_tokens_destroy(t);
		return rc;
	}
	*out = t;
	return 0;
}

int o1_grammar_tokens_create(const struct o1_grammar *g,
			     const struct o1_grammar_vocab *v,
			     uint32_t n_threads, struct o1_grammar_tokens **out)
{
	return gr_tokens_create(g, v, n_threads, true, out);
}

size_t o1_grammar_tokens_bytes(const struct o1_grammar_tokens *t)
{
	return sizeof(*t) + t->g->n_states * sizeof(*t->pos) +
	       t->n_ids * sizeof(*t->ids) + t->n_bits * sizeof(*t->bits);
}

void o1_grammar_tokens_destroy(struct o1_grammar_tokens *t)
{
	if (!t)
		return;
	free(t->pos);
	free(t->ids);
	free(t->bits);
	free(t);
}

static void or_accepted(const struct o1_grammar_tokens *t,
			const struct gpos *p, uint32_t *mask)
{
	if (p->acc_bits != GR_NONE) {
		const uint32_t *b = t->bits + (size_t)p->acc_bits * t->n_words;

		for (uint32_t k = 0; k < t->n_words; k++)
			mask[k] |= b[k];
		return;
	}
	for (uint32_t k = 0; k < p->n_acc; k++) {
		uint32_t id = t->ids[p->acc_off + k];

		mask[id / 32] |= 1u << (id % 32);
	}
}

static uint32_t common_prefix(const uint8_t *a, uint32_t la, const uint8_t *b,
			      uint32_t lb)
{
	uint32_t n = la < lb ? la : lb, i = 0;

	while (i < n && a[i] == b[i])
		i++;
	return i;
}

/* The uncertain tokens of P checked from the heads at level 0 of D.
 * Levels [0, valid] hold the heads after the bytes of the last token
 * walked (PREV); when that walk failed, it failed at byte VALID. */
static int check_uncertain(const struct o1_grammar_tokens *t,
			   struct gcore *c, struct gdepth *d,
			   const struct gpos *p, uint32_t *mask)
{
	const uint8_t *prev = NULL;
	uint32_t prev_len = 0, valid = 0;
	bool failed = false;
	int err = 0;

	for (uint32_t k = 0; k < p->n_unc; k++) {
		uint32_t id = t->ids[p->unc_off + k], len, lcp, j;
		const uint8_t *b;
		struct gstep st;

		if (mask[id / 32] & (1u << (id % 32)))
			continue;
		b = gr_tok(t->v, id, &len);
		lcp = common_prefix(prev, prev_len, b, len);
		if (failed && lcp > valid)
			continue;
		prev = b;
		prev_len = len;
		for (j = lcp < valid ? lcp : valid; j < len; j++) {
			int n = gr_depth_step(d, c, j, b[j], &st);

			if (n < 0)
				err = n;
			if (n < 0 || !st.n_real)
				break;
		}
		failed = j < len;
		valid = j;
		if (!failed)
			mask[id / 32] |= 1u << (id % 32);
	}
	gr_core_truncate(c, d->frames[0]);
	return err;
}

static bool seen_state(const struct ghead *heads, uint32_t i)
{
	for (uint32_t k = 0; k < i; k++)
		if (heads[k].s == heads[i].s)
			return true;
	return false;
}

int gr_mask_fill(const struct o1_grammar_tokens *t, struct gcore *c,
		 const struct ghead *heads, uint32_t n, bool complete,
		 struct gdepth *d, uint32_t *mask)
{
	int rc = 0;

	memset(mask, 0, t->n_words * sizeof(*mask));
	for (uint32_t i = 0; i < n; i++)
		if (!seen_state(heads, i))
			or_accepted(t, &t->pos[heads[i].s], mask);
	for (uint32_t i = 0; i < n; i++) {
		const struct gpos *p = &t->pos[heads[i].s];
		int err;

		if (seen_state(heads, i) || !p->n_unc)
			continue;
		d->n[0] = 0;
		d->off[0] = 0;
		d->frames[0] = c->n_frames;
		for (uint32_t k = i; k < n; k++)
			if (heads[k].s == heads[i].s)
				d->pool[d->n[0]++] = heads[k];
		err = check_uncertain(t, c, d, p, mask);
		rc = rc ? rc : err;
	}
	for (uint32_t k = 0; complete && k < t->v->n_end; k++)
		mask[t->v->end_ids[k] / 32] |= 1u << (t->v->end_ids[k] % 32);
	return rc;
}

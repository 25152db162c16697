/* The pushdown matcher: several stacks at once over the global state table
 * (grammar_int.h).
 *
 * A stack is a head (state, parent frame); a frame (return state, parent)
 * is hash-consed, so equal stacks share their frames and two heads are the
 * same stack exactly when their (state, parent) pairs are equal. Frames
 * live in one array that only grows during a step; any later state is a
 * longer array, so rolling back is truncating it (a removed frame is
 * always the head of its hash chain, frames going in LIFO order).
 *
 * A step takes one byte through the DFA edges of every head, then closes
 * the set: calls push a frame (or none when the return state is final: a
 * tail call), finished rules pop. Only heads that can take a byte are
 * kept; "complete" records that the root may end. Left recursion is
 * refused at compile time, so a closure always ends.
 *
 * For the precompute the bottom of a stack is GP_BASE (whatever the real
 * stack holds below a position) and a pop through it continues at every
 * return state of the rule's calls, on GP_CTX: an over-approximation of
 * all the contexts a rule runs in (grammar_mask.c).
 *
 * The matcher keeps history in a ring of max_rollback + 1 entries (the
 * heads, the frame count and the flags before each step): one more than
 * can be rolled back, so trying a token (a step, then a rollback of one)
 * never costs the max_rollback steps before it.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 16;

	while (p < n)
		p *= 2;
	return p;
}

int gr_core_init(struct gcore *c, const struct o1_grammar *g,
		 uint32_t max_frames, uint32_t max_heads)
{
	uint32_t work = 8 * max_heads;

	memset(c, 0, sizeof(*c));
	c->g = g;
	c->max_frames = max_frames;
	c->max_heads = max_heads;
	c->bucket_mask = pow2_at_least(2 * max_frames) - 1;
	c->seen_mask = pow2_at_least(2 * work) - 1;
	c->frames = malloc((size_t)max_frames * sizeof(*c->frames));
	c->bucket = malloc(((size_t)c->bucket_mask + 1) * sizeof(*c->bucket));
	c->work = malloc((size_t)work * sizeof(*c->work));
	c->step_buf = malloc((size_t)max_heads * sizeof(*c->step_buf));
	c->seen = malloc(((size_t)c->seen_mask + 1) * sizeof(*c->seen));
	c->seen_tag = calloc((size_t)c->seen_mask + 1, sizeof(*c->seen_tag));
	if (!c->frames || !c->bucket || !c->work || !c->step_buf ||
	    !c->seen || !c->seen_tag) {
		gr_core_fini(c);
		return -ENOMEM;
	}
	memset(c->bucket, 0xff, ((size_t)c->bucket_mask + 1) * 4);
	return 0;
}

void gr_core_fini(struct gcore *c)
{
	free(c->frames);
	free(c->bucket);
	free(c->work);
	free(c->step_buf);
	free(c->seen);
	free(c->seen_tag);
	memset(c, 0, sizeof(*c));
}

static inline uint32_t frame_hash(uint32_t s, uint32_t p)
{
	uint64_t x = ((uint64_t)s << 32 | p) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(x >> 32);
}

void gr_core_truncate(struct gcore *c, uint32_t n_frames)
{
	while (c->n_frames > n_frames) {
		const struct gframe *f = &c->frames[--c->n_frames];

		c->bucket[frame_hash(f->s, f->p) & c->bucket_mask] = f->next;
	}
}

/* The frame (S, P), made when new. */
static int cons(struct gcore *c, uint32_t s, uint32_t p, uint32_t *out)
{
	uint32_t h = frame_hash(s, p) & c->bucket_mask;
	struct gframe *f;

	for (uint32_t i = c->bucket[h]; i != GR_NONE; i = c->frames[i].next) {
		if (c->frames[i].s == s && c->frames[i].p == p) {
			*out = i;
			return 0;
		}
	}
	if (c->n_frames == c->max_frames)
		return -O1_E_BOUNDS;
	f = &c->frames[c->n_frames];
	f->s = s;
	f->p = p;
	f->next = c->bucket[h];
	f->ctx = p == GP_CTX || (p < GP_MAXF && c->frames[p].ctx);
	c->bucket[h] = c->n_frames;
	*out = c->n_frames++;
	return 0;
}

static bool is_ctx(const struct gcore *c, uint32_t p)
{
	return p == GP_CTX || (p < GP_MAXF && c->frames[p].ctx);
}

/* Adds (S, P) to the worklist unless it is there already. */
static int push(struct gcore *c, uint32_t *nw, uint32_t s, uint32_t p)
{
	uint64_t key = (uint64_t)s << 32 | p;
	uint32_t h = frame_hash(s, p) & c->seen_mask;

	for (; c->seen_tag[h] == c->tag; h = (h + 1) & c->seen_mask)
		if (c->seen[h] == key)
			return 0;
	if (*nw == 8 * c->max_heads)
		return -O1_E_BOUNDS;
	c->seen_tag[h] = c->tag;
	c->seen[h] = key;
	c->work[(*nw)++] = (struct ghead){s, p};
	return 0;
}

static void next_tag(struct gcore *c)
{
	if (++c->tag == 0) {
		memset(c->seen_tag, 0, ((size_t)c->seen_mask + 1) * 4);
		c->tag = 1;
	}
}

/* Where a finished rule goes on: its parent, or for the precompute every
 * return state of the rule's calls. */
static int pop(struct gcore *c, uint32_t *nw, const struct ghead *h,
	       bool *complete)
{
	const struct o1_grammar *g = c->g;
	uint32_t r = g->states[h->s].rule;
	int rc = 0;

	if (h->p < GP_MAXF)
		return push(c, nw, c->frames[h->p].s, c->frames[h->p].p);
	if (h->p == GP_ROOT) {
		*complete = true;
		return 0;
	}
	for (uint32_t i = g->follow_off[r]; i < g->follow_off[r + 1] && !rc;
	     i++)
		rc = push(c, nw, g->follow[i], GP_CTX);
	return rc;
}

static int expand(struct gcore *c, uint32_t *nw, struct ghead h,
		  bool *complete)
{
	const struct gstate *st = &c->g->states[h.s];
	int rc = 0;

	for (uint32_t k = 0; k < st->n_ref && !rc; k++) {
		const struct gref *ref = &c->g->refs[st->ref_off + k];
		uint32_t p = h.p;

		if (!ref->tail)
			rc = cons(c, ref->ret, h.p, &p);
		rc = rc ?: push(c, nw, ref->callee, p);
	}
	if (!rc && st->accept)
		rc = pop(c, nw, &h, complete);
	return rc;
}

int gr_core_closure(struct gcore *c, const struct ghead *in, uint32_t n,
		    struct ghead *out, uint32_t cap, bool *complete)
{
	uint32_t nw = 0, m = 0;
	int rc = 0;

	/* a step's input must fit step_buf */
	if (cap > c->max_heads)
		cap = c->max_heads;
	next_tag(c);
	*complete = false;
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = push(c, &nw, in[i].s, in[i].p);
	for (uint32_t i = 0; i < nw && !rc; i++)
		rc = expand(c, &nw, c->work[i], complete);
	for (uint32_t i = 0; i < nw && !rc; i++) {
		if (!c->g->states[c->work[i].s].has_bytes)
			continue;
		if (m == cap)
			return -O1_E_BOUNDS;
		out[m++] = c->work[i];
	}
	return rc ? rc : (int)m;
}

int gr_core_step(struct gcore *c, const struct ghead *in, uint32_t n,
		 uint8_t byte, struct ghead *out, uint32_t cap,
		 struct gstep *st)
{
	const struct o1_grammar *g = c->g;
	uint32_t m = 0;

	st->n_real = st->n_ctx = 0;
	st->complete = false;
	for (uint32_t i = 0; i < n; i++) {
		int32_t t = gr_next(g, in[i].s, byte);

		if (t < 0)
			continue;
		c->step_buf[m++] = (struct ghead){(uint32_t)t, in[i].p};
		if (is_ctx(c, in[i].p))
			st->n_ctx++;
		else
			st->n_real++;
	}
	if (!m)
		return 0;
	/* the common case inside a rule: one stack, nothing to close */
	if (m == 1 && cap && !g->states[c->step_buf[0].s].n_ref &&
	    !g->states[c->step_buf[0].s].accept) {
		out[0] = c->step_buf[0];
		return 1;
	}
	return gr_core_closure(c, c->step_buf, m, out, cap, &st->complete);
}

int gr_depth_init(struct gdepth *d, uint32_t max_len, uint32_t max_heads)
{
	size_t levels = (size_t)max_len + 2;

	d->max_len = max_len;
	/* room for every level full at once would be (max_len + 1) *
	 * max_heads; paths through a vocabulary hold a few heads a level */
	d->pool_size = 4 * max_heads + 4 * max_len;
	d->pool = malloc((size_t)d->pool_size * sizeof(*d->pool));
	d->off = calloc(levels, sizeof(*d->off));
	d->n = calloc(levels, sizeof(*d->n));
	d->frames = calloc(levels, sizeof(*d->frames));
	if (!d->pool || !d->off || !d->n || !d->frames) {
		gr_depth_fini(d);
		return -ENOMEM;
	}
	return 0;
}

void gr_depth_fini(struct gdepth *d)
{
	free(d->pool);
	free(d->off);
	free(d->n);
	free(d->frames);
	memset(d, 0, sizeof(*d));
}

int gr_depth_step(struct gdepth *d, struct gcore *c, uint32_t k,
		  uint8_t byte, struct gstep *st)
{
	uint32_t off = d->off[k] + d->n[k];
	int rc;

	/* one stack staying inside its rule: no frames made or needed, so
	 * frames left by another branch may stay until a slow step */
	if (d->n[k] == 1 && off < d->pool_size) {
		const struct ghead *h = d->pool + d->off[k];
		int32_t t = gr_next(c->g, h->s, byte);
		bool ctx = is_ctx(c, h->p);

		st->n_real = t >= 0 && !ctx;
		st->n_ctx = t >= 0 && ctx;
		st->complete = false;
		if (t < 0)
			return 0;
		if (!c->g->states[t].n_ref && !c->g->states[t].accept) {
			d->pool[off] = (struct ghead){(uint32_t)t, h->p};
			d->off[k + 1] = off;
			d->n[k + 1] = 1;
			d->frames[k + 1] = d->frames[k];
			return 1;
		}
	}
	gr_core_truncate(c, d->frames[k]);
	rc = gr_core_step(c, d->pool + d->off[k], d->n[k], byte,
			  d->pool + off, d->pool_size - off, st);
	if (rc < 0)
		return rc;
	d->off[k + 1] = off;
	d->n[k + 1] = (uint32_t)rc;
	d->frames[k + 1] = c->n_frames;
	return rc;
}

/* The matcher proper. */

struct hist {
	uint32_t n_heads, n_frames;
	bool complete, ended;
};

struct o1_grammar_matcher {
	const struct o1_grammar *g;
	const struct o1_grammar_tokens *t;
	struct o1_grammar_limits lim;
	struct gcore core;
	struct ghead *heads, *a, *b; /* current, step scratch x2 */
	uint32_t n_heads;
	bool complete, ended;
	struct hist *hist; /* ring of max_rollback */
	struct ghead *hist_heads;
	uint32_t hist_top, hist_count;
	struct gdepth depth; /* mask scratch */
};

static int start(struct o1_grammar_matcher *m)
{
	struct ghead root = {m->g->rule_first[m->g->root], GP_ROOT};
	int rc;

	gr_core_truncate(&m->core, 0);
	m->hist_top = m->hist_count = 0;
	m->ended = false;
	rc = gr_core_closure(&m->core, &root, 1, m->heads, m->lim.max_stacks,
			     &m->complete);
	if (rc < 0)
		return rc;
	m->n_heads = (uint32_t)rc;
	return 0;
}

static void set_limits(struct o1_grammar_limits *l,
		       const struct o1_grammar_limits *in)
{
	l->max_frames = in && in->max_frames ? in->max_frames : 4096;
	l->max_stacks = in && in->max_stacks ? in->max_stacks : 64;
	l->max_rollback = in && in->max_rollback ? in->max_rollback : 32;
	if (l->max_frames > GP_MAXF / 2)
		l->max_frames = GP_MAXF / 2;
}

int o1_grammar_matcher_create(const struct o1_grammar *g,
			      const struct o1_grammar_tokens *tokens,
			      const struct o1_grammar_limits *limits,
			      struct o1_grammar_matcher **out)
{
	struct o1_grammar_matcher *m = calloc(1, sizeof(*m));
	size_t nh;
	int rc = -ENOMEM;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	if (tokens && tokens->g != g) {
		free(m);
		return -EINVAL;
	}
	m->g = g;
	m->t = tokens;
	set_limits(&m->lim, limits);
	nh = m->lim.max_stacks;
	if (gr_core_init(&m->core, g, m->lim.max_frames, m->lim.max_stacks))
		goto fail;
	m->heads = malloc(3 * nh * sizeof(*m->heads));
	m->hist = malloc((m->lim.max_rollback + 1) * sizeof(*m->hist));
	m->hist_heads = malloc((m->lim.max_rollback + 1) * nh *
			       sizeof(struct ghead));
	if (!m->heads || !m->hist || !m->hist_heads)
		goto fail;
	m->a = m->heads + nh;
	m->b = m->heads + 2 * nh;
	if (tokens &&
	    gr_depth_init(&m->depth, tokens->v->max_len, m->lim.max_stacks))
		goto fail;
	rc = start(m);
	if (rc)
		goto fail;
	*out = m;
	return 0;
fail:
	o1_grammar_matcher_destroy(m);
	return rc;
}

void o1_grammar_matcher_destroy(struct o1_grammar_matcher *m)
{
	if (!m)
		return;
	gr_core_fini(&m->core);
	gr_depth_fini(&m->depth);
	free(m->heads);
	free(m->hist);
	free(m->hist_heads);
	free(m);
}

void o1_grammar_matcher_reset(struct o1_grammar_matcher *m)
{
	/* the start fitted the limits at create, so it fits again */
	start(m);
}

/* Records the state before a step; FRAMES is the frame count then. */
static void save(struct o1_grammar_matcher *m, uint32_t frames)
{
	uint32_t cap = m->lim.max_rollback + 1, slot = m->hist_top;

	m->hist[slot] = (struct hist){m->n_heads, frames, m->complete,
				      m->ended};
	memcpy(m->hist_heads + (size_t)slot * m->lim.max_stacks, m->heads,
	       m->n_heads * sizeof(*m->heads));
	m->hist_top = (slot + 1) % cap;
	if (m->hist_count < cap)
		m->hist_count++;
}

int o1_grammar_matcher_accept_bytes(struct o1_grammar_matcher *m,
				    const uint8_t *bytes, size_t len)
{
	uint32_t n = m->n_heads, frames = m->core.n_frames;
	struct ghead *cur = m->heads, *nxt = m->a;
	struct gstep st = {.complete = m->complete};

	if (m->ended)
		return -O1_E_GRAMMAR;
	for (size_t i = 0; i < len; i++) {
		int rc = gr_core_step(&m->core, cur, n, bytes[i], nxt,
				      m->lim.max_stacks, &st);

		if (rc < 0 || !st.n_real) {
			gr_core_truncate(&m->core, frames);
			return rc < 0 ? rc : -O1_E_GRAMMAR;
		}
		n = (uint32_t)rc;
		cur = nxt;
		nxt = cur == m->a ? m->b : m->a;
	}
	save(m, frames);
	if (cur != m->heads)
		memcpy(m->heads, cur, n * sizeof(*cur));
	m->n_heads = n;
	m->complete = st.complete;
	return 0;
}

int o1_grammar_matcher_accept_token(struct o1_grammar_matcher *m,
				    int32_t id)
{
	const struct o1_grammar_vocab *v = m->t ? m->t->v : NULL;
	const uint8_t *b;
	uint32_t len;

	if (!v)
		return -EINVAL;
	if (id < 0 || (uint32_t)id >= v->n_tokens)
		return -O1_E_BOUNDS;
	if (v->kind[id] == O1_GRAMMAR_TOKEN_END) {
		if (!m->complete || m->ended)
			return -O1_E_GRAMMAR;
		save(m, m->core.n_frames);
		m->ended = true;
		return 1;
	}
	b = gr_tok(v, (uint32_t)id, &len);
	/* a control token's bytes are 0xFF NAME 0xFF (grammar.h) */
	if ((v->kind[id] != O1_GRAMMAR_TOKEN_TEXT &&
	     v->kind[id] != O1_GRAMMAR_TOKEN_CONTROL) ||
	    !len)
		return -O1_E_GRAMMAR;
	return o1_grammar_matcher_accept_bytes(m, b, len);
}

int o1_grammar_matcher_rollback(struct o1_grammar_matcher *m, uint32_t n)
{
	uint32_t cap = m->lim.max_rollback + 1, slot;
	const struct hist *h;

	if (n > m->hist_count || n > m->lim.max_rollback)
		return -O1_E_BOUNDS;
	if (!n)
		return 0;
	slot = (m->hist_top + cap - n) % cap;
	h = &m->hist[slot];
	memcpy(m->heads, m->hist_heads + (size_t)slot * m->lim.max_stacks,
	       h->n_heads * sizeof(*m->heads));
	m->n_heads = h->n_heads;
	m->complete = h->complete;
	m->ended = h->ended;
	gr_core_truncate(&m->core, h->n_frames);
	m->hist_top = slot;
	m->hist_count -= n;
	return 0;
}

bool o1_grammar_matcher_is_complete(const struct o1_grammar_matcher *m)
{
	return m->complete;
}

bool o1_grammar_matcher_is_terminated(const struct o1_grammar_matcher *m)
{
	return m->ended || (m->complete && !m->n_heads);
}

uint32_t o1_grammar_matcher_mask_words(const struct o1_grammar_matcher *m)
{
	return m->t ? m->t->n_words : 0;
}

int o1_grammar_matcher_fill_mask(struct o1_grammar_matcher *m,
				 uint32_t *mask, uint32_t n_words)
{
	if (!m->t || n_words < m->t->n_words)
		return -EINVAL;
	if (m->ended) {
		memset(mask, 0, m->t->n_words * sizeof(*mask));
		return 0;
	}
	return gr_mask_fill(m->t, &m->core, m->heads, m->n_heads, m->complete,
			    &m->depth, mask);
}

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
 * Per step the mask is the union, over the distinct states of the
 * matcher's heads, of the accepted tokens, plus the uncertain tokens that
 * pass a check from the real heads. Uncertain tokens are kept in trie
 * order, so consecutive checks share their common prefix (levels of a
 * gdepth) and a rejected prefix rejects every token after it that starts
 * with it. End tokens are allowed when the matcher is complete.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#define PRE_FRAMES (1u << 16)
#define PRE_HEADS  256

struct pre {
	const struct o1_grammar *g;
	const struct o1_grammar_vocab *v;
	struct gcore core;
	struct gdepth dep;
	struct gvec acc, unc, ids, bits;
};

/* Tokens ending at node I (or, SUBTREE, anywhere below it too) into VEC. */
static int put_node(struct pre *w, uint32_t i, bool subtree, struct gvec *vec)
{
	const struct o1_grammar_vocab *v = w->v;
	uint32_t end = subtree ? v->node_skip[i] : i + 1;
	int rc = 0;

	for (uint32_t k = v->node_tok[i]; k < v->node_tok[end] && !rc; k++)
		rc = gr_vec_push(vec, v->ids[k]);
	return rc;
}

/* The trie walk from (S, GP_BASE): W->acc and W->unc in trie order. */
static int walk(struct pre *w, uint32_t s)
{
	const struct o1_grammar_vocab *v = w->v;
	struct gdepth *d = &w->dep;
	int rc = 0;

	w->acc.n = w->unc.n = 0;
	gr_core_truncate(&w->core, 0);
	d->pool[0] = (struct ghead){s, GP_BASE};
	d->off[0] = 0;
	d->n[0] = 1;
	d->frames[0] = 0;
	for (uint32_t i = 1; i < v->n_nodes && rc != -ENOMEM;) {
		struct gstep st;
		uint32_t k = v->node_depth[i] - 1u;
		int n = gr_depth_step(d, &w->core, k, v->node_byte[i], &st);

		if (n < 0) {
			/* past a limit: the runtime check decides */
			rc = put_node(w, i, true, &w->unc);
			i = v->node_skip[i];
			continue;
		}
		if (st.n_real)
			rc = put_node(w, i, false, &w->acc);
		else if (st.n_ctx)
			rc = put_node(w, i, false, &w->unc);
		i = n ? i + 1 : v->node_skip[i];
	}
	return rc == -ENOMEM ? rc : 0;
}

/* Stores the walk's result for S: accepted ids as a list or, when that is
 * larger, a bitmask; uncertain ids as a list. */
static int store(struct pre *w, struct o1_grammar_tokens *t, uint32_t s)
{
	struct gpos *p = &t->pos[s];
	int rc = 0;

	p->acc_bits = GR_NONE;
	p->n_acc = (uint32_t)w->acc.n;
	p->acc_off = (uint32_t)w->ids.n;
	if (w->acc.n > t->n_words) {
		p->acc_bits = (uint32_t)(w->bits.n / t->n_words);
		for (uint32_t k = 0; k < t->n_words && !rc; k++)
			rc = gr_vec_push(&w->bits, 0);
		for (size_t k = 0; k < w->acc.n && !rc; k++) {
			uint32_t id = w->acc.v[k];

			w->bits.v[(size_t)p->acc_bits * t->n_words + id / 32] |=
				1u << (id % 32);
		}
	} else {
		for (size_t k = 0; k < w->acc.n && !rc; k++)
			rc = gr_vec_push(&w->ids, w->acc.v[k]);
	}
	p->unc_off = (uint32_t)w->ids.n;
	p->n_unc = (uint32_t)w->unc.n;
	for (size_t k = 0; k < w->unc.n && !rc; k++)
		rc = gr_vec_push(&w->ids, w->unc.v[k]);
	return rc;
}

static void pre_fini(struct pre *w)
{
	gr_core_fini(&w->core);
	gr_depth_fini(&w->dep);
	free(w->acc.v);
	free(w->unc.v);
	free(w->ids.v);
	free(w->bits.v);
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
		j->t->pos[s].acc_bits = GR_NONE;
		if (!g->states[s].has_bytes)
			continue;
		j->owner[s] = a->id;
		rc = walk(w, s) ?: store(w, j->t, s);
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

int o1_grammar_tokens_create(const struct o1_grammar *g,
			     const struct o1_grammar_vocab *v,
			     uint32_t n_threads, struct o1_grammar_tokens **out)
{
	struct o1_grammar_tokens *t = calloc(1, sizeof(*t));
	struct job j = {.t = t};
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
	for (uint32_t k = 0; k < n; k++) {
		j.w[k] = (struct pre){.g = g, .v = v};
		if (gr_core_init(&j.w[k].core, g, PRE_FRAMES, PRE_HEADS) ||
		    gr_depth_init(&j.w[k].dep, v->max_len, PRE_HEADS))
			goto out;
	}
	rc = run_workers(&j, n);
	rc = rc ?: gather(&j, n);
out:
	for (uint32_t k = 0; j.w && k < n; k++)
		pre_fini(&j.w[k]);
	free(j.w);
	free(j.owner);
	if (rc) {
		o1_grammar_tokens_destroy(t);
		return rc;
	}
	*out = t;
	return 0;
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

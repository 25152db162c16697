/* Sharing the token pass's work between positions (grammar_mask.c): which
 * positions get their token classes from another's walk of the vocabulary
 * instead of a walk of their own.
 *
 * Orbits of a shift. A bounded repetition (a string of at most 12
 * characters) makes a chain of states that differ only by a counter: s_i
 * after i characters, with their partial UTF-8 and escape states. A
 * partial injective map phi (s_i -> s_{i+1}, ...) is a shift when the
 * states it maps or reaches (its chain) make no calls and do not accept,
 * all lie in one rule, and for every x it maps and every byte class c,
 * with x' = next(x, c) and y' = next(phi(x), c):
 *   y' is none, or
 *   x' = y' and x' is outside the chain (both leave it the same way), or
 *   x' is some state and y' = phi(x'), or
 *   x' is none and y' is outside the chain (the member goes on where x
 *   stops: a minimum length, whose first states cannot end the string);
 * and along each orbit the members that take a class are one run.
 * A walk from phi^i(s) (s in the chain) then holds one head, phi^i of the
 * walk from s's head, until that walk leaves the chain (the same head
 * from there on: the same result) or it dies: at the first byte c taken
 * from a chain state x with i >= die(x, c), the least i >= 1 with
 * phi^i(x) undefined or next(phi^i(x), c) none. So one walk from an
 * orbit's top (a state phi does not reach) classes the whole orbit: token
 * t is, from phi^i(top), of its class from the top when i is below the
 * least die() met on t's bytes while in the chain, and rejected
 * otherwise; where the walk from the top stops at x by c but members go
 * on (die(x, c) = 0), those members walk the subtree there apart. The
 * states of a string of at most 12 characters are 13
 * orbits (the counting states, and one per partial character state): one
 * walk each instead of 13.
 *
 * Shifts are found by trying phi(s) = next(s, c) for each state s in turn
 * and following what the definition then forces, pair by pair; a try
 * that contradicts itself (or meets another chain) is dropped. The work
 * is bounded (SHARE_WORK pair x class checks): past it, the positions
 * left are walked as before. Everything here only chooses which walks to
 * skip: the classes are those the walks would give (for equivalent
 * states, unless one walk would stop at the engine's limits, PRE_HEADS
 * heads or PRE_FRAMES frames, where the other does not: then the copy
 * classes what the walk would leave to the runtime check).
 *
 * Equivalent positions: see find_equiv.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SHARE_WORK (1u << 22)

struct find {
	const struct o1_grammar *g;
	struct gshare *sh;
	uint32_t *phi, *inv; /* the try's map, GR_NONE elsewhere */
	uint32_t *dom;	     /* states the try maps, in order */
	uint32_t n_dom;
	uint32_t *same; /* states both sides reach alike */
	uint32_t n_same, cap_same;
	uint32_t *tried; /* target stamp per state, for one seed */
	uint64_t work;
};

static bool chain_state(const struct find *f, uint32_t x, uint32_t rule)
{
	const struct gstate *st = &f->g->states[x];

	return st->rule == rule && !st->n_ref && !st->accept && st->has_bytes &&
	       f->sh->chain[x] == GR_NONE;
}

/* phi(X) = Y in the try: false on a contradiction. */
static bool assign(struct find *f, uint32_t x, uint32_t y, uint32_t rule)
{
	if (x == y || !chain_state(f, x, rule) || !chain_state(f, y, rule))
		return false;
	if (f->phi[x] != GR_NONE)
		return f->phi[x] == y;
	if (f->inv[y] != GR_NONE)
		return false;
	f->phi[x] = y;
	f->inv[y] = x;
	f->dom[f->n_dom++] = x;
	return true;
}

static int note_same(struct find *f, uint32_t x)
{
	if (f->n_same == f->cap_same) {
		uint32_t cap = f->cap_same ? 2 * f->cap_same : 64;
		uint32_t *v = realloc(f->same, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->same = v;
		f->cap_same = cap;
	}
	f->same[f->n_same++] = x;
	return 0;
}

/* Along each orbit, for each byte class, the members that take it must
 * be one run (dead, alive, dead): a member that stops where the one
 * before it went on never goes on after it, so the members a walk keeps
 * are those below a bound (lim). F->same is free here. */
static bool columns_ok(struct find *f)
{
	const struct o1_grammar *g = f->g;
	uint32_t nc = g->n_classes;

	for (uint32_t k = 0; k < f->n_dom; k++) {
		uint32_t x = f->dom[k], n = 0;

		if (f->inv[x] != GR_NONE)
			continue;
		for (uint32_t y = x; y != GR_NONE && n < f->cap_same;
		     y = f->phi[y])
			f->same[n++] = y;
		for (uint32_t c = 0; c < nc; c++) {
			int runs = 0;
			bool prev = false;

			for (uint32_t j = 0; j < n; j++) {
				bool on =
				    g->trans[(size_t)f->same[j] * nc + c] >= 0;

				runs += on && !prev;
				prev = on;
			}
			if (runs > 1)
				return false;
		}
	}
	return true;
}

/* States in the try's longest orbit. An orbit of two saves one walk but
 * takes its states out of the memo of first bytes and of equivalence
 * (whose sharing is usually as good), so such shifts are not kept. */
static uint32_t longest_orbit(const struct find *f)
{
	uint32_t best = 0;

	for (uint32_t k = 0; k < f->n_dom; k++) {
		uint32_t n = 0;

		if (f->inv[f->dom[k]] != GR_NONE)
			continue;
		for (uint32_t y = f->dom[k]; y != GR_NONE && n <= f->n_dom;
		     y = f->phi[y])
			n++;
		best = n > best ? n : best;
	}
	return best;
}

/* Follows what phi(S) = T forces; 1 when it is a shift, 0 when not. */
static int propagate(struct find *f, uint32_t s, uint32_t t)
{
	const struct o1_grammar *g = f->g;
	uint32_t rule = g->states[s].rule, nc = g->n_classes;

	if (!assign(f, s, t, rule))
		return 0;
	for (uint32_t k = 0; k < f->n_dom; k++) {
		uint32_t x = f->dom[k], y = f->phi[x];
		const int32_t *tx = g->trans + (size_t)x * nc;
		const int32_t *ty = g->trans + (size_t)y * nc;

		f->work += nc;
		if (f->work > SHARE_WORK)
			return 0;
		for (uint32_t c = 0; c < nc; c++) {
			if (ty[c] < 0)
				continue;
			if (tx[c] < 0) {
				/* the member goes on where x stops: out of
				 * the chain, walked apart (grammar_mask.c) */
				if (note_same(f, (uint32_t)ty[c]))
					return -ENOMEM;
				continue;
			}
			if (tx[c] == ty[c]) {
				if (note_same(f, (uint32_t)tx[c]))
					return -ENOMEM;
			} else if (!assign(f, (uint32_t)tx[c], (uint32_t)ty[c],
					   rule)) {
				return 0;
			}
		}
	}
	for (uint32_t k = 0; k < f->n_same; k++)
		if (f->phi[f->same[k]] != GR_NONE ||
		    f->inv[f->same[k]] != GR_NONE)
			return 0;
	if (!columns_ok(f) || longest_orbit(f) < 3)
		return 0;
	/* no cycles: every state of the chain lies on a path from a top */
	for (uint32_t k = 0; k < f->n_dom; k++) {
		uint32_t x = f->dom[k], n = 0;

		while (f->inv[x] != GR_NONE && n <= f->n_dom) {
			x = f->inv[x];
			n++;
		}
		if (n > f->n_dom)
			return 0;
	}
	return 1;
}

static void undo(struct find *f)
{
	for (uint32_t k = 0; k < f->n_dom; k++) {
		f->inv[f->phi[f->dom[k]]] = GR_NONE;
		f->phi[f->dom[k]] = GR_NONE;
	}
	f->n_dom = 0;
	f->n_same = 0;
}

/* The try's chain into SH: orbits, their tops and die(). */
static int commit(struct find *f, uint32_t id)
{
	const struct o1_grammar *g = f->g;
	struct gshare *sh = f->sh;
	uint32_t nc = g->n_classes, n = 0;
	/* the chain: the states mapped and the ends of their orbits */
	size_t rows = (size_t)sh->n_rows + 2 * f->n_dom;
	uint32_t *die = realloc(sh->die, rows * nc * sizeof(*die));

	if (!die)
		return -ENOMEM;
	sh->die = die;
	for (uint32_t k = 0; k < f->n_dom; k++) {
		uint32_t x = f->dom[k];

		if (f->inv[x] != GR_NONE)
			continue;
		/* a top: its orbit, from the end (die counts back) */
		for (uint32_t y = x; y != GR_NONE; y = f->phi[y])
			f->same[n++] = y;
		for (uint32_t j = n; j-- > 0;) {
			uint32_t y = f->same[j], row = sh->n_rows++;
			uint32_t *d = sh->die + (size_t)row * nc;

			sh->chain[y] = id;
			sh->row[y] = row;
			sh->top[y] = x;
			sh->phi[y] = f->phi[y];
			sh->orbit[y] = j;
			for (uint32_t c = 0; c < nc; c++) {
				uint32_t z = f->phi[y];
				bool zon = z != GR_NONE &&
					   g->trans[(size_t)z * nc + c] >= 0;
				const uint32_t *dz =
				    z == GR_NONE
					? NULL
					: sh->die + (size_t)sh->row[z] * nc;

				if (g->trans[(size_t)y * nc + c] < 0)
					/* 0: y stops, a later member goes on */
					d[c] = zon || (dz && !dz[c]) ? 0 : 1;
				else
					d[c] = zon ? 1 + dz[c] : 1;
			}
		}
		n = 0;
	}
	return 0;
}

/* Orbits of shifts, seeded from each state in turn. */
static int find_chains(const struct o1_grammar *g, struct gshare *sh)
{
	struct find f = {.g = g, .sh = sh};
	uint32_t n = g->n_states, nc = g->n_classes, id = 0;
	int rc = -ENOMEM;

	f.phi = malloc(n * sizeof(*f.phi));
	f.inv = malloc(n * sizeof(*f.inv));
	f.dom = malloc(n * sizeof(*f.dom));
	f.tried = calloc(n, sizeof(*f.tried));
	if (!f.phi || !f.inv || !f.dom || !f.tried)
		goto out;
	/* f.same doubles as the orbit buffer in commit */
	f.cap_same = n;
	f.same = malloc(n * sizeof(*f.same));
	if (!f.same)
		goto out;
	memset(f.phi, 0xff, n * sizeof(*f.phi));
	memset(f.inv, 0xff, n * sizeof(*f.inv));
	rc = 0;
	for (uint32_t s = 0; s < n && !rc && f.work <= SHARE_WORK; s++) {
		const int32_t *ts = g->trans + (size_t)s * nc;

		if (!chain_state(&f, s, g->states[s].rule))
			continue;
		for (uint32_t c = 0; c < nc && !rc; c++) {
			uint32_t t = (uint32_t)ts[c];

			if (ts[c] < 0 || t == s || f.tried[t] == s + 1)
				continue;
			f.tried[t] = s + 1;
			rc = propagate(&f, s, t);
			if (rc == 1) {
				rc = commit(&f, id++);
				undo(&f);
				break;
			}
			undo(&f);
		}
	}
out:
	free(f.phi);
	free(f.inv);
	free(f.dom);
	free(f.same);
	free(f.tried);
	return rc < 0 ? rc : 0;
}

/* Equivalent positions: Moore refinement from (accept, final, calls) and
 * chain states apart, each state's signature being its class, the
 * classes of its byte successors, of its calls (callee, return state,
 * tail: sorted) and, when it accepts, of where a pop through the bottom
 * goes (its rule's return states, a final one replaced by its own rule's
 * as the closure does: sorted, distinct). At the fixed point equivalent
 * states see equivalent head sets after every byte. */
struct equiv {
	const struct o1_grammar *g;
	uint32_t *cls, *ncls;	 /* [n_states] */
	uint32_t *sig, *sig_off; /* signatures, [n_states + 1] offsets */
	size_t cap_sig;
	uint32_t *efol, *efol_off; /* effective follow per rule */
	uint32_t *order;	   /* [n_states] */
};

/* Rule R's pop targets with final ones replaced, into E->efol; STAMP
 * marks rules entered (cycles of tail calls) and states listed. */
static int efollow(struct equiv *e, uint32_t r, uint32_t *rstamp,
		   uint32_t *sstamp, uint32_t tag, size_t *n, size_t cap)
{
	const struct o1_grammar *g = e->g;

	if (rstamp[r] == tag)
		return 0;
	rstamp[r] = tag;
	for (uint32_t i = g->follow_off[r]; i < g->follow_off[r + 1]; i++) {
		uint32_t f = g->follow[i];
		int rc;

		if (g->states[f].final) {
			rc = efollow(e, g->states[f].rule, rstamp, sstamp, tag,
				     n, cap);
			if (rc)
				return rc;
		} else if (sstamp[f] != tag) {
			if (*n == cap)
				return -E2BIG;
			sstamp[f] = tag;
			e->efol[(*n)++] = f;
		}
	}
	return 0;
}

static int build_efollow(struct equiv *e)
{
	const struct o1_grammar *g = e->g;
	uint32_t *rstamp = calloc(g->n_rules, sizeof(*rstamp));
	uint32_t *sstamp = calloc(g->n_states, sizeof(*sstamp));
	size_t n = 0, cap = (size_t)g->n_rules * 4 + g->follow_off[g->n_rules];
	int rc = -ENOMEM;

	e->efol = malloc(cap * sizeof(*e->efol));
	e->efol_off = malloc((g->n_rules + 1) * sizeof(*e->efol_off));
	if (!rstamp || !sstamp || !e->efol || !e->efol_off)
		goto out;
	rc = 0;
	for (uint32_t r = 0; r < g->n_rules && !rc; r++) {
		e->efol_off[r] = (uint32_t)n;
		rc = efollow(e, r, rstamp, sstamp, r + 1, &n, cap);
	}
	e->efol_off[g->n_rules] = (uint32_t)n;
out:
	free(rstamp);
	free(sstamp);
	return rc;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_ref(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	for (int k = 0; k < 3; k++)
		if (x[k] != y[k])
			return x[k] < y[k] ? -1 : 1;
	return 0;
}

static int sign(struct equiv *e)
{
	const struct o1_grammar *g = e->g;
	uint32_t nc = g->n_classes;
	size_t n = 0;

	for (uint32_t s = 0; s < g->n_states; s++) {
		const struct gstate *st = &g->states[s];
		uint32_t r = st->rule, nf = 0;
		size_t need = 3 + nc + 3 * (size_t)st->n_ref;
		uint32_t *p;

		if (st->accept)
			nf = e->efol_off[r + 1] - e->efol_off[r];
		need += nf;
		if (n + need > e->cap_sig) {
			size_t cap = 2 * (n + need);
			uint32_t *v = realloc(e->sig, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			e->sig = v;
			e->cap_sig = cap;
		}
		e->sig_off[s] = (uint32_t)n;
		p = e->sig + n;
		*p++ = e->cls[s];
		for (uint32_t c = 0; c < nc; c++) {
			int32_t t = g->trans[(size_t)s * nc + c];

			*p++ = t < 0 ? GR_NONE : e->cls[t];
		}
		*p++ = st->n_ref;
		for (uint32_t k = 0; k < st->n_ref; k++) {
			const struct gref *ref = &g->refs[st->ref_off + k];

			p[3 * k] = e->cls[ref->callee];
			p[3 * k + 1] = e->cls[ref->ret];
			p[3 * k + 2] = ref->tail;
		}
		qsort(p, st->n_ref, 3 * sizeof(*p), cmp_ref);
		p += 3 * st->n_ref;
		*p++ = nf;
		for (uint32_t k = 0; k < nf; k++)
			p[k] = e->cls[e->efol[e->efol_off[r] + k]];
		qsort(p, nf, sizeof(*p), cmp_u32);
		p += nf;
		n = (size_t)(p - e->sig);
		if (n > UINT32_MAX)
			return -E2BIG;
	}
	e->sig_off[g->n_states] = (uint32_t)n;
	return 0;
}

static int cmp_sig(const void *a, const void *b, void *arg)
{
	const struct equiv *e = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint32_t lx = e->sig_off[x + 1] - e->sig_off[x];
	uint32_t ly = e->sig_off[y + 1] - e->sig_off[y];
	int c;

	if (lx != ly)
		return lx < ly ? -1 : 1;
	c = memcmp(e->sig + e->sig_off[x], e->sig + e->sig_off[y],
		   lx * sizeof(*e->sig));
	return c ? c : (x < y ? -1 : x > y);
}

static bool same_sig(const struct equiv *e, uint32_t x, uint32_t y)
{
	uint32_t lx = e->sig_off[x + 1] - e->sig_off[x];

	return lx == e->sig_off[y + 1] - e->sig_off[y] &&
	       !memcmp(e->sig + e->sig_off[x], e->sig + e->sig_off[y],
		       lx * sizeof(*e->sig));
}

/* One refinement round: new classes from signatures; returns how many. */
static uint32_t refine(struct equiv *e)
{
	uint32_t n = e->g->n_states, k = 0;

	for (uint32_t s = 0; s < n; s++)
		e->order[s] = s;
	qsort_r(e->order, n, sizeof(*e->order), cmp_sig, e);
	for (uint32_t i = 0; i < n; i++) {
		if (i && !same_sig(e, e->order[i - 1], e->order[i]))
			k++;
		e->ncls[e->order[i]] = k;
	}
	return n ? k + 1 : 0;
}

static int find_equiv(const struct o1_grammar *g, struct gshare *sh)
{
	struct equiv e = {.g = g};
	uint32_t n = g->n_states, n_cls = 0, rounds = 0;
	int rc = -ENOMEM;

	for (uint32_t s = 0; s < n; s++)
		sh->rep[s] = s;
	if ((uint64_t)n * (g->n_classes + 8) > SHARE_WORK)
		return 0;
	e.cls = malloc(n * sizeof(*e.cls));
	e.ncls = malloc(n * sizeof(*e.ncls));
	e.sig_off = malloc((n + 1) * sizeof(*e.sig_off));
	e.order = malloc(n * sizeof(*e.order));
	if (!e.cls || !e.ncls || !e.sig_off || !e.order || build_efollow(&e))
		goto out;
	/* round 0: chain states apart (their orbits class them), the rest
	 * by what a state does besides bytes */
	for (uint32_t s = 0; s < n; s++) {
		const struct gstate *st = &g->states[s];

		e.cls[s] = sh->chain[s] != GR_NONE
			       ? 16 + s
			       : (uint32_t)(st->accept | st->final << 1 |
					    st->has_bytes << 2);
	}
	for (;;) {
		uint32_t k;

		rc = sign(&e);
		if (rc)
			goto out;
		k = refine(&e);
		memcpy(e.cls, e.ncls, n * sizeof(*e.cls));
		if (k == n_cls)
			break;
		n_cls = k;
		/* too many rounds for the budget: share nothing */
		if ((uint64_t)++rounds * n * (g->n_classes + 8) > SHARE_WORK)
			goto out;
	}
	/* the first state of each class stands for it */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = e.order[i];

		if (i && e.cls[e.order[i - 1]] == e.cls[s])
			sh->rep[s] = sh->rep[e.order[i - 1]];
	}
	rc = 0;
out:
	free(e.cls);
	free(e.ncls);
	free(e.sig);
	free(e.sig_off);
	free(e.order);
	free(e.efol);
	free(e.efol_off);
	return rc == -ENOMEM ? rc : 0;
}

int gr_share_build(const struct o1_grammar *g, struct gshare *sh)
{
	uint32_t n = g->n_states;
	int rc;

	memset(sh, 0, sizeof(*sh));
	sh->chain = malloc(n * sizeof(*sh->chain));
	sh->top = malloc(n * sizeof(*sh->top));
	sh->phi = malloc(n * sizeof(*sh->phi));
	sh->row = malloc(n * sizeof(*sh->row));
	sh->orbit = calloc(n, sizeof(*sh->orbit));
	sh->rep = malloc(n * sizeof(*sh->rep));
	if (!sh->chain || !sh->top || !sh->phi || !sh->row || !sh->orbit ||
	    !sh->rep) {
		gr_share_fini(sh);
		return -ENOMEM;
	}
	memset(sh->chain, 0xff, n * sizeof(*sh->chain));
	memset(sh->top, 0xff, n * sizeof(*sh->top));
	memset(sh->phi, 0xff, n * sizeof(*sh->phi));
	memset(sh->row, 0xff, n * sizeof(*sh->row));
	rc = find_chains(g, sh);
	rc = rc ?: find_equiv(g, sh);
	if (rc)
		gr_share_fini(sh);
	return rc;
}

void gr_share_fini(struct gshare *sh)
{
	free(sh->chain);
	free(sh->top);
	free(sh->phi);
	free(sh->row);
	free(sh->orbit);
	free(sh->die);
	free(sh->rep);
	memset(sh, 0, sizeof(*sh));
}

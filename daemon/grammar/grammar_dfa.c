/* One rule's NFA -> a minimal DFA whose symbols are byte classes and calls
 * of other rules (a call is a symbol like any other here; the matcher gives
 * it its meaning). Subset construction over epsilon closures, then Moore's
 * partition refinement, then the states renumbered breadth first from the
 * start (state 0). Work is counted so a grammar built to blow up the subset
 * construction fails with -O1_E_BOUNDS instead of running for minutes.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

uint32_t gr_byte_classes(const struct gnfa *nfas, uint32_t n_rules,
			 uint8_t cls[256])
{
	uint8_t cut[257] = {0};
	uint32_t c = 0;

	for (uint32_t r = 0; r < n_rules; r++) {
		for (uint32_t i = 0; i < nfas[r].n_e; i++) {
			const struct nfa_edge *e = &nfas[r].e[i];

			if (e->kind != NE_BYTE)
				continue;
			cut[e->lo] = 1;
			cut[e->hi + 1] = 1;
		}
	}
	for (int b = 0; b < 256; b++) {
		if (b && cut[b])
			c++;
		cls[b] = (uint8_t)c;
	}
	return c + 1;
}

/* Subset construction state: DFA state i is the NFA set
 * pool[set_off[i] .. set_off[i + 1]). */
struct subset {
	const struct gnfa *nfa;
	uint32_t n_classes, max_states;
	uint64_t *work;
	struct gvec pool, set_off, stack, tmp, pairs;
	uint32_t *mark, gen;
	uint32_t *table; /* hash of sets -> state + 1 */
	uint32_t table_mask;
	struct gdfa *d; /* trans, accept and refs grow with the states */
	uint32_t cap_states, cap_refs;
};

static uint32_t hash_set(const uint32_t *s, uint32_t n)
{
	uint32_t h = 2166136261u;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 16777619u;
	return h;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Epsilon closure of the seeds in tmp, sorted, left in tmp. */
static int closure(struct subset *sc)
{
	const struct gnfa *n = sc->nfa;
	int rc = 0;

	sc->gen++;
	sc->stack.n = 0;
	for (uint32_t i = 0; i < sc->tmp.n && !rc; i++) {
		if (sc->mark[sc->tmp.v[i]] != sc->gen) {
			sc->mark[sc->tmp.v[i]] = sc->gen;
			rc = gr_vec_push(&sc->stack, sc->tmp.v[i]);
		}
	}
	sc->tmp.n = 0;
	while (!rc && sc->stack.n) {
		uint32_t s = sc->stack.v[--sc->stack.n];

		rc = gr_vec_push(&sc->tmp, s);
		for (uint32_t e = n->off[s]; !rc && e < n->off[s + 1]; e++) {
			uint32_t t = n->e[e].to;

			if (n->e[e].kind != NE_EPS || sc->mark[t] == sc->gen)
				continue;
			sc->mark[t] = sc->gen;
			rc = gr_vec_push(&sc->stack, t);
		}
	}
	*sc->work += sc->tmp.n;
	if (!rc && *sc->work > GR_MAX_SUBSET_WORK)
		rc = -O1_E_BOUNDS;
	if (!rc)
		qsort(sc->tmp.v, sc->tmp.n, sizeof(uint32_t), cmp_u32);
	return rc;
}

static int grow_states(struct subset *sc)
{
	struct gdfa *d = sc->d;
	uint32_t cap = sc->cap_states ? sc->cap_states * 2 : 64;
	int32_t *t = realloc(d->trans, (size_t)cap * sc->n_classes * 4);
	uint8_t *a;

	if (!t)
		return -ENOMEM;
	d->trans = t;
	a = realloc(d->accept, cap);
	if (!a)
		return -ENOMEM;
	d->accept = a;
	sc->cap_states = cap;
	return 0;
}

static int rehash(struct subset *sc)
{
	uint32_t mask = sc->table_mask ? sc->table_mask * 2 + 1 : 255;
	uint32_t *t = calloc(mask + 1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (uint32_t i = 0; i < sc->d->n; i++) {
		const uint32_t *s = sc->pool.v + sc->set_off.v[i];
		uint32_t n = sc->set_off.v[i + 1] - sc->set_off.v[i];
		uint32_t h = hash_set(s, n) & mask;

		while (t[h])
			h = (h + 1) & mask;
		t[h] = i + 1;
	}
	free(sc->table);
	sc->table = t;
	sc->table_mask = mask;
	return 0;
}

/* The DFA state of the set in tmp, created when new; -1 for the empty
 * set. */
static int intern(struct subset *sc, int32_t *out)
{
	uint32_t h, n = sc->tmp.n;
	int rc = 0;

	*out = -1;
	if (!n)
		return 0;
	h = hash_set(sc->tmp.v, n) & sc->table_mask;
	for (; sc->table[h]; h = (h + 1) & sc->table_mask) {
		uint32_t i = sc->table[h] - 1, off = sc->set_off.v[i];

		if (sc->set_off.v[i + 1] - off == n &&
		    !memcmp(sc->pool.v + off, sc->tmp.v, n * 4)) {
			*out = (int32_t)i;
			return 0;
		}
	}
	if (sc->d->n >= sc->max_states)
		return -O1_E_BOUNDS;
	if (sc->d->n == sc->cap_states)
		rc = grow_states(sc);
	for (uint32_t i = 0; !rc && i < n; i++)
		rc = gr_vec_push(&sc->pool, sc->tmp.v[i]);
	rc = rc ?: gr_vec_push(&sc->set_off, sc->pool.n);
	if (rc)
		return rc;
	sc->table[h] = sc->d->n + 1;
	sc->d->accept[sc->d->n] = 0;
	*out = (int32_t)sc->d->n++;
	if (sc->d->n * 2 > sc->table_mask)
		rc = rehash(sc);
	return rc;
}

static int add_ref(struct subset *sc, uint32_t state, uint32_t rule,
		   uint32_t to)
{
	struct gdfa *d = sc->d;

	if (d->n_refs == sc->cap_refs) {
		uint32_t cap = sc->cap_refs ? sc->cap_refs * 2 : 16;
		struct gdfa_ref *r = realloc(d->refs, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		d->refs = r;
		sc->cap_refs = cap;
	}
	d->refs[d->n_refs++] = (struct gdfa_ref){state, rule, to};
	return 0;
}

static int cmp_pair(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Groups pairs (symbol, NFA target) by symbol; calls back per group with
 * the closure of its targets interned. REF: symbols are rules. */
static int follow_pairs(struct subset *sc, uint32_t state, bool ref)
{
	uint32_t *p = sc->pairs.v, n = sc->pairs.n / 2;
	int rc = 0;

	if (!n)
		return 0;
	qsort(p, n, 2 * sizeof(uint32_t), cmp_pair);
	for (uint32_t i = 0; i < n && !rc;) {
		uint32_t sym = p[2 * i], j = i;
		int32_t to;

		sc->tmp.n = 0;
		for (; j < n && p[2 * j] == sym && !rc; j++)
			rc = gr_vec_push(&sc->tmp, p[2 * j + 1]);
		rc = rc ?: closure(sc);
		rc = rc ?: intern(sc, &to);
		if (!rc && ref)
			rc = add_ref(sc, state, sym, (uint32_t)to);
		else if (!rc)
			sc->d->trans[(size_t)state * sc->n_classes + sym] = to;
		i = j;
	}
	return rc;
}

static int expand(struct subset *sc, uint32_t state, const uint8_t *cls)
{
	const struct gnfa *n = sc->nfa;
	int32_t *row = sc->d->trans + (size_t)state * sc->n_classes;
	int rc = 0;

	for (uint32_t c = 0; c < sc->n_classes; c++)
		row[c] = -1;
	for (int ref = 0; ref < 2 && !rc; ref++) {
		sc->pairs.n = 0;
		for (uint32_t i = sc->set_off.v[state];
		     i < sc->set_off.v[state + 1] && !rc; i++) {
			uint32_t s = sc->pool.v[i];

			if (!ref && s == n->final)
				sc->d->accept[state] = 1;
			for (uint32_t e = n->off[s]; e < n->off[s + 1] && !rc;
			     e++) {
				const struct nfa_edge *x = &n->e[e];

				if (ref && x->kind == NE_REF)
					rc = gr_vec_push(&sc->pairs, x->rule)
						 ?: gr_vec_push(&sc->pairs,
								x->to);
				for (uint32_t c = cls[x->lo];
				     !ref && x->kind == NE_BYTE &&
				     c <= cls[x->hi] && !rc;
				     c++)
					rc = gr_vec_push(&sc->pairs, c)
						 ?: gr_vec_push(&sc->pairs,
								x->to);
			}
		}
		/* follow_pairs may move the rows: ROW is not used again */
		rc = rc ?: follow_pairs(sc, state, ref);
	}
	return rc;
}

static void subset_fini(struct subset *sc)
{
	free(sc->pool.v);
	free(sc->set_off.v);
	free(sc->stack.v);
	free(sc->tmp.v);
	free(sc->pairs.v);
	free(sc->mark);
	free(sc->table);
}

static int subset(struct subset *sc, const uint8_t *cls)
{
	int32_t start;
	int rc;

	sc->mark = calloc(sc->nfa->n_states, sizeof(*sc->mark));
	if (!sc->mark)
		return -ENOMEM;
	rc = gr_vec_push(&sc->set_off, 0) ?: rehash(sc);
	rc = rc ?: gr_vec_push(&sc->tmp, sc->nfa->start);
	rc = rc ?: closure(sc);
	rc = rc ?: intern(sc, &start);
	for (uint32_t s = 0; !rc && s < sc->d->n; s++)
		rc = expand(sc, s, cls);
	return rc;
}

/* Moore's refinement: a state's signature is its block, its blocks after
 * every class and every call; blocks split until their count is stable.
 * BLOCK receives each state's final block. */
struct moore {
	const struct gdfa *d;
	uint32_t n_classes;
	uint32_t *block, *sig, *sig_off, *table;
	uint32_t table_mask, sig_len;
};

static uint32_t signature(struct moore *m, uint32_t s, uint32_t *out,
			  const struct gdfa_ref *refs, uint32_t n_refs)
{
	const int32_t *row = m->d->trans + (size_t)s * m->n_classes;
	uint32_t n = 0;

	out[n++] = m->block[s];
	for (uint32_t c = 0; c < m->n_classes; c++)
		out[n++] = row[c] < 0 ? GR_NONE : m->block[row[c]];
	for (uint32_t i = 0; i < n_refs; i++) {
		out[n++] = refs[i].rule;
		out[n++] = m->block[refs[i].to];
	}
	return n;
}

static uint32_t moore_round(struct moore *m, const uint32_t *ref_off,
			    uint32_t *next)
{
	uint32_t blocks = 0, n = m->d->n;

	memset(m->table, 0, (m->table_mask + 1) * sizeof(*m->table));
	for (uint32_t s = 0; s < n; s++) {
		uint32_t *sg = m->sig + m->sig_off[s];
		uint32_t len = signature(m, s, sg, m->d->refs + ref_off[s],
					 ref_off[s + 1] - ref_off[s]);
		uint32_t h = hash_set(sg, len) & m->table_mask;

		for (;; h = (h + 1) & m->table_mask) {
			uint32_t o = m->table[h];

			if (!o) {
				m->table[h] = s + 1;
				next[s] = blocks++;
				break;
			}
			o--;
			if (m->sig_off[o + 1] - m->sig_off[o] == len &&
			    !memcmp(m->sig + m->sig_off[o], sg, len * 4)) {
				next[s] = next[o];
				break;
			}
		}
	}
	return blocks;
}

static int minimize(struct gdfa *d, uint32_t n_classes, uint64_t *work,
		    uint32_t *block, uint32_t *n_blocks)
{
	struct moore m = {.d = d, .n_classes = n_classes, .block = block};
	uint32_t *ref_off = calloc(d->n + 1, sizeof(*ref_off));
	uint32_t *next = malloc(d->n * sizeof(*next)), blocks = 0, prev = 0;
	int rc = -ENOMEM;

	m.sig_off = malloc((d->n + 1) * sizeof(*m.sig_off));
	m.table_mask = 1;
	while (m.table_mask < 2 * d->n)
		m.table_mask = m.table_mask * 2 + 1;
	m.table = malloc((m.table_mask + 1) * sizeof(*m.table));
	if (!ref_off || !next || !m.sig_off || !m.table)
		goto out;
	for (uint32_t i = 0; i < d->n_refs; i++)
		ref_off[d->refs[i].state + 1]++;
	m.sig_off[0] = 0;
	for (uint32_t s = 0; s < d->n; s++) {
		ref_off[s + 1] += ref_off[s];
		m.sig_off[s + 1] = m.sig_off[s] + 1 + n_classes +
				   2 * (ref_off[s + 1] - ref_off[s]);
	}
	m.sig = malloc((size_t)m.sig_off[d->n] * sizeof(*m.sig));
	if (!m.sig)
		goto out;
	for (uint32_t s = 0; s < d->n; s++)
		block[s] = d->accept[s];
	for (rc = 0; !rc;) {
		blocks = moore_round(&m, ref_off, next);
		memcpy(block, next, d->n * sizeof(*block));
		*work += m.sig_off[d->n];
		if (blocks == prev)
			break;
		prev = blocks;
		if (*work > GR_MAX_SUBSET_WORK)
			rc = -O1_E_BOUNDS;
	}
	*n_blocks = blocks;
out:
	free(ref_off);
	free(next);
	free(m.sig_off);
	free(m.sig);
	free(m.table);
	return rc;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct gdfa_ref *x = a, *y = b;

	if (x->state != y->state)
		return x->state < y->state ? -1 : 1;
	return x->rule < y->rule ? -1 : x->rule > y->rule;
}

/* The quotient DFA: blocks numbered breadth first from the start's. */
static int quotient(struct gdfa *d, uint32_t n_classes, const uint32_t *block,
		    uint32_t n_blocks, struct gdfa *q)
{
	uint32_t *num = malloc(n_blocks * sizeof(*num));
	uint32_t *rep = malloc(n_blocks * sizeof(*rep)), n = 0, nr = 0;
	uint32_t *ref_off = calloc(d->n + 1, sizeof(*ref_off));
	int rc = -ENOMEM;

	memset(q, 0, sizeof(*q));
	q->trans = malloc((size_t)n_blocks * n_classes * 4);
	q->accept = malloc(n_blocks);
	q->refs = malloc((d->n_refs ? d->n_refs : 1) * sizeof(*q->refs));
	if (!num || !rep || !ref_off || !q->trans || !q->accept || !q->refs)
		goto out;
	for (uint32_t k = 0; k < d->n_refs; k++)
		ref_off[d->refs[k].state + 1]++;
	for (uint32_t s = 0; s < d->n; s++)
		ref_off[s + 1] += ref_off[s];
	memset(num, 0xff, n_blocks * sizeof(*num));
	num[block[0]] = n;
	rep[n++] = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = rep[i];
		const int32_t *row = d->trans + (size_t)s * n_classes;

		q->accept[i] = d->accept[s];
		for (uint32_t c = 0; c < n_classes; c++) {
			if (row[c] >= 0 && num[block[row[c]]] == GR_NONE) {
				num[block[row[c]]] = n;
				rep[n++] = (uint32_t)row[c];
			}
			q->trans[(size_t)i * n_classes + c] =
				row[c] < 0 ? -1 : (int32_t)num[block[row[c]]];
		}
		for (uint32_t k = ref_off[s]; k < ref_off[s + 1]; k++) {
			uint32_t t = d->refs[k].to;

			if (num[block[t]] == GR_NONE) {
				num[block[t]] = n;
				rep[n++] = t;
			}
			q->refs[nr++] = (struct gdfa_ref){
				i, d->refs[k].rule, num[block[t]]};
		}
	}
	q->n = n;
	q->n_refs = nr;
	qsort(q->refs, nr, sizeof(*q->refs), cmp_ref);
	rc = 0;
out:
	free(num);
	free(rep);
	free(ref_off);
	return rc;
}

int gr_dfa_build(const struct gnfa *nfa, const uint8_t cls[256],
		 uint32_t n_classes, uint32_t max_states, uint64_t *work,
		 struct gdfa *d)
{
	struct subset sc = {.nfa = nfa,
			    .n_classes = n_classes,
			    .max_states = max_states,
			    .work = work};
	struct gdfa raw = {0};
	uint32_t *block = NULL, n_blocks;
	int rc;

	memset(d, 0, sizeof(*d));
	sc.d = &raw;
	rc = subset(&sc, cls);
	subset_fini(&sc);
	if (!rc) {
		block = malloc(raw.n * sizeof(*block));
		rc = block ? 0 : -ENOMEM;
	}
	rc = rc ?: minimize(&raw, n_classes, work, block, &n_blocks);
	rc = rc ?: quotient(&raw, n_classes, block, n_blocks, d);
	free(block);
	gr_dfa_fini(&raw);
	if (rc)
		gr_dfa_fini(d);
	return rc;
}

void gr_dfa_fini(struct gdfa *d)
{
	free(d->trans);
	free(d->accept);
	free(d->refs);
	memset(d, 0, sizeof(*d));
}

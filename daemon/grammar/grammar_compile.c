/* o1_grammar_compile: parse, plan the inlining, build one DFA per rule
 * still called (the root first, then breadth first), check, then lay the
 * DFAs out as one global state table.
 *
 * Checks, each an error naming the rule:
 *   - a rule that can never finish (every way through recurses without
 *     end, or the root matches nothing);
 *   - left recursion: a rule that reaches a call of itself without
 *     consuming a byte (the matcher would push frames forever).
 * Then every state that cannot reach its rule's end is cut, with the
 * edges into it, and states no longer reachable are dropped: what is left
 * is exactly what a sentence of the grammar can pass through, which is
 * what lets the matcher call any stack it holds viable.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

struct compile {
	struct gparse p;
	bool *inl;
	uint32_t *rules; /* compiled rule -> parse rule, root first */
	uint32_t *cid;	 /* parse rule -> compiled rule or GR_NONE */
	uint32_t n;
	struct gnfa *nfa;
	struct gdfa *dfa;
	uint8_t cls[256];
	uint32_t n_classes;
	uint8_t **alive; /* per rule, per state */
	uint32_t **roff; /* per rule: refs of state s at [roff[s], roff[s+1]) */
	struct o1_grammar_error *err;
};

static int oom(struct compile *c)
{
	return gr_fail(c->err, -ENOMEM, 0, 0, "out of memory");
}

static int rule_fail(struct compile *c, uint32_t r, int code,
		     const char *what)
{
	const struct grule *g = &c->p.rules[c->rules[r]];

	return gr_fail(c->err, code, g->line, g->col, "rule '%s' %s", g->name,
		       what);
}

/* NFAs of the root and of every rule it calls, breadth first. */
static int discover(struct compile *c)
{
	uint32_t n_rules = c->p.n_rules;
	int rc;

	c->inl = calloc(n_rules, sizeof(*c->inl));
	c->rules = malloc(n_rules * sizeof(*c->rules));
	c->cid = malloc(n_rules * sizeof(*c->cid));
	c->nfa = calloc(n_rules, sizeof(*c->nfa));
	if (!c->inl || !c->rules || !c->cid || !c->nfa)
		return oom(c);
	rc = gr_nfa_plan(&c->p, c->inl, c->err);
	memset(c->cid, 0xff, n_rules * sizeof(*c->cid));
	c->rules[c->n] = c->p.root;
	c->cid[c->p.root] = c->n++;
	for (uint32_t i = 0; !rc && i < c->n; i++) {
		struct gnfa *nfa = &c->nfa[i];

		rc = gr_nfa_build(&c->p, c->inl, c->rules[i], nfa, c->err);
		for (uint32_t e = 0; !rc && e < nfa->n_e; e++) {
			uint32_t q = nfa->e[e].rule;

			if (nfa->e[e].kind != NE_REF || c->cid[q] != GR_NONE)
				continue;
			c->rules[c->n] = q;
			c->cid[q] = c->n++;
		}
	}
	return rc;
}

static int build_dfas(struct compile *c)
{
	uint64_t work = 0;
	uint32_t total = 0;
	int rc = 0;

	c->n_classes = gr_byte_classes(c->nfa, c->n, c->cls);
	c->dfa = calloc(c->n, sizeof(*c->dfa));
	if (!c->dfa)
		return oom(c);
	for (uint32_t r = 0; r < c->n && !rc; r++) {
		rc = gr_dfa_build(&c->nfa[r], c->cls, c->n_classes,
				  GR_MAX_DFA_STATES - total, &work,
				  &c->dfa[r]);
		if (rc == -O1_E_BOUNDS)
			return rule_fail(c, r, rc,
					 "makes the grammar too large");
		if (rc)
			return oom(c);
		total += c->dfa[r].n;
		for (uint32_t i = 0; i < c->dfa[r].n_refs; i++)
			c->dfa[r].refs[i].rule = c->cid[c->dfa[r].refs[i].rule];
		gr_nfa_fini(&c->nfa[r]);
	}
	return rc;
}

/* One pass of "can reach its rule's end" over rule R; true on change. */
static bool alive_pass(struct compile *c, uint32_t r)
{
	const struct gdfa *d = &c->dfa[r];
	uint8_t *al = c->alive[r];
	bool changed = false;

	for (uint32_t k = d->n_refs; k-- > 0;) {
		const struct gdfa_ref *x = &d->refs[k];

		if (!al[x->state] && al[x->to] && c->alive[x->rule][0])
			al[x->state] = 1, changed = true;
	}
	for (uint32_t s = d->n; s-- > 0;) {
		const int32_t *row = d->trans + (size_t)s * c->n_classes;

		for (uint32_t k = 0; !al[s] && k < c->n_classes; k++)
			if (row[k] >= 0 && al[row[k]])
				al[s] = 1, changed = true;
	}
	return changed;
}

static int compute_alive(struct compile *c)
{
	bool changed = true;

	c->alive = calloc(c->n, sizeof(*c->alive));
	if (!c->alive)
		return oom(c);
	for (uint32_t r = 0; r < c->n; r++) {
		c->alive[r] = malloc(c->dfa[r].n);
		if (!c->alive[r])
			return oom(c);
		memcpy(c->alive[r], c->dfa[r].accept, c->dfa[r].n);
	}
	while (changed) {
		changed = false;
		for (uint32_t r = c->n; r-- > 0;)
			while (alive_pass(c, r))
				changed = true;
	}
	for (uint32_t r = 0; r < c->n; r++)
		if (!c->alive[r][0])
			return rule_fail(c, r, -O1_E_FORMAT,
					 "can never finish (it recurses "
					 "without a base case, or matches "
					 "nothing)");
	return 0;
}

/* Offsets of each state's calls in D's refs (sorted by state). */
static uint32_t *ref_index(const struct gdfa *d)
{
	uint32_t *off = calloc(d->n + 1, sizeof(*off));

	if (!off)
		return NULL;
	for (uint32_t k = 0; k < d->n_refs; k++)
		off[d->refs[k].state + 1]++;
	for (uint32_t s = 0; s < d->n; s++)
		off[s + 1] += off[s];
	return off;
}

/* Cuts edges into dead states, then keeps the states reachable from the
 * start, renumbered in their old order. */
static int trim_rule(struct compile *c, uint32_t r)
{
	struct gdfa *d = &c->dfa[r];
	uint32_t *num = malloc(d->n * sizeof(*num)), *q, *roff, nq = 0, n = 0;
	uint32_t nr = 0;
	const uint8_t *al = c->alive[r];

	q = malloc(d->n * sizeof(*q));
	if (!num || !q) {
		free(num);
		free(q);
		return oom(c);
	}
	for (size_t i = 0; i < (size_t)d->n * c->n_classes; i++)
		if (d->trans[i] >= 0 && !al[d->trans[i]])
			d->trans[i] = -1;
	for (uint32_t k = 0; k < d->n_refs; k++)
		if (al[d->refs[k].to] && al[d->refs[k].state])
			d->refs[nr++] = d->refs[k];
	d->n_refs = nr;
	roff = ref_index(d);
	if (!roff) {
		free(num);
		free(q);
		return oom(c);
	}
	memset(num, 0xff, d->n * sizeof(*num));
	num[0] = 0;
	q[nq++] = 0;
	for (uint32_t i = 0; i < nq; i++) {
		const int32_t *row = d->trans + (size_t)q[i] * c->n_classes;

		for (uint32_t k = 0; k < c->n_classes; k++)
			if (row[k] >= 0 && num[row[k]] == GR_NONE)
				num[row[k]] = 0, q[nq++] = (uint32_t)row[k];
		for (uint32_t k = roff[q[i]]; k < roff[q[i] + 1]; k++)
			if (num[d->refs[k].to] == GR_NONE)
				num[d->refs[k].to] = 0, q[nq++] = d->refs[k].to;
	}
	free(roff);
	for (uint32_t s = 0; s < d->n; s++)
		if (num[s] != GR_NONE)
			num[s] = n++;
	for (uint32_t s = 0; s < d->n; s++) {
		if (num[s] == GR_NONE)
			continue;
		memmove(d->trans + (size_t)num[s] * c->n_classes,
			d->trans + (size_t)s * c->n_classes, c->n_classes * 4);
		d->accept[num[s]] = d->accept[s];
	}
	for (size_t i = 0; i < (size_t)n * c->n_classes; i++)
		if (d->trans[i] >= 0)
			d->trans[i] = (int32_t)num[d->trans[i]];
	nr = 0;
	for (uint32_t k = 0; k < d->n_refs; k++) {
		if (num[d->refs[k].state] == GR_NONE)
			continue;
		d->refs[nr] = d->refs[k];
		d->refs[nr].state = num[d->refs[k].state];
		d->refs[nr++].to = num[d->refs[k].to];
	}
	d->n_refs = nr;
	d->n = n;
	free(num);
	free(q);
	c->roff[r] = ref_index(d);
	return c->roff[r] ? 0 : oom(c);
}

static bool nullable_pass(struct compile *c, uint8_t *nullable,
			  uint8_t *seen, uint32_t *q)
{
	bool changed = false;

	for (uint32_t r = c->n; r-- > 0;) {
		const struct gdfa *d = &c->dfa[r];
		uint32_t nq = 1;

		if (nullable[r])
			continue;
		memset(seen, 0, d->n);
		q[0] = 0;
		seen[0] = 1;
		for (uint32_t i = 0; i < nq && !nullable[r]; i++) {
			nullable[r] = d->accept[q[i]];
			for (uint32_t k = c->roff[r][q[i]];
			     k < c->roff[r][q[i] + 1]; k++) {
				const struct gdfa_ref *x = &d->refs[k];

				if (nullable[x->rule] && !seen[x->to])
					seen[x->to] = 1, q[nq++] = x->to;
			}
		}
		changed |= nullable[r];
	}
	return changed;
}

/* Appends to EDGE (room for every call of R) the rules R calls before
 * any byte is consumed; STAMP[x] == R + 1 marks those already added. */
static uint32_t left_calls(struct compile *c, const uint8_t *nullable,
			   uint8_t *seen, uint32_t *q, uint32_t r,
			   uint32_t *stamp, uint32_t *edge)
{
	const struct gdfa *d = &c->dfa[r];
	uint32_t nq = 1, n = 0;

	memset(seen, 0, d->n);
	q[0] = 0;
	seen[0] = 1;
	for (uint32_t i = 0; i < nq; i++) {
		for (uint32_t k = c->roff[r][q[i]]; k < c->roff[r][q[i] + 1];
		     k++) {
			const struct gdfa_ref *x = &d->refs[k];

			if (stamp[x->rule] != r + 1)
				stamp[x->rule] = r + 1, edge[n++] = x->rule;
			if (nullable[x->rule] && !seen[x->to])
				seen[x->to] = 1, q[nq++] = x->to;
		}
	}
	return n;
}

/* Depth-first search for a cycle in the left-call graph (edges given as
 * per-rule lists in EDGE/EDGE_OFF); iterative, colours 0/1/2. */
static int find_cycle(struct compile *c, const uint32_t *edge_off,
		      const uint32_t *edge)
{
	uint8_t *color = calloc(c->n, 1);
	uint32_t *st = malloc(c->n * sizeof(*st)), *pos;
	int rc = 0;

	pos = malloc(c->n * sizeof(*pos));
	if (!color || !st || !pos) {
		rc = oom(c);
		goto out;
	}
	for (uint32_t s = 0; s < c->n && !rc; s++) {
		uint32_t sp = 0;

		if (color[s])
			continue;
		st[sp++] = s, pos[s] = edge_off[s], color[s] = 1;
		while (sp && !rc) {
			uint32_t v = st[sp - 1], w;

			if (pos[v] == edge_off[v + 1]) {
				color[v] = 2, sp--;
				continue;
			}
			w = edge[pos[v]++];
			if (color[w] == 1)
				rc = rule_fail(c, w, -O1_E_FORMAT,
					       "is left recursive (it can "
					       "reach itself without "
					       "consuming input)");
			else if (!color[w])
				st[sp++] = w, pos[w] = edge_off[w],
				color[w] = 1;
		}
	}
out:
	free(color);
	free(st);
	free(pos);
	return rc;
}

static int check_left_recursion(struct compile *c)
{
	uint32_t max = 1, n_edges = 0, total = 1;
	uint8_t *nullable = calloc(c->n, 1), *seen;
	uint32_t *q, *edge_off = calloc(c->n + 1, sizeof(*edge_off)), *edge;
	uint32_t *stamp = calloc(c->n, sizeof(*stamp));
	int rc;

	for (uint32_t r = 0; r < c->n; r++) {
		max = c->dfa[r].n > max ? c->dfa[r].n : max;
		total += c->dfa[r].n_refs;
	}
	seen = malloc(max);
	q = malloc(max * sizeof(*q));
	edge = malloc(total * sizeof(*edge));
	rc = nullable && seen && q && stamp && edge_off && edge ? 0 : oom(c);
	while (!rc && nullable_pass(c, nullable, seen, q))
		;
	for (uint32_t r = 0; !rc && r < c->n; r++) {
		edge_off[r] = n_edges;
		n_edges += left_calls(c, nullable, seen, q, r, stamp,
				      edge + n_edges);
	}
	edge_off[c->n] = n_edges;
	rc = rc ?: find_cycle(c, edge_off, edge);
	free(nullable);
	free(seen);
	free(q);
	free(stamp);
	free(edge_off);
	free(edge);
	return rc;
}

static int alloc_grammar(struct compile *c, struct o1_grammar *g)
{
	uint32_t n_refs = 0;

	g->n_rules = c->n;
	g->n_classes = c->n_classes;
	memcpy(g->cls, c->cls, sizeof(g->cls));
	for (uint32_t r = 0; r < c->n; r++) {
		g->n_states += c->dfa[r].n;
		n_refs += c->dfa[r].n_refs;
	}
	g->n_refs = n_refs;
	g->rule_first = calloc(c->n + 1, sizeof(*g->rule_first));
	g->rule_names = calloc(c->n, sizeof(*g->rule_names));
	g->trans = malloc((size_t)g->n_states * g->n_classes * 4);
	g->states = calloc(g->n_states, sizeof(*g->states));
	g->refs = malloc((n_refs ? n_refs : 1) * sizeof(*g->refs));
	g->follow_off = calloc(c->n + 1, sizeof(*g->follow_off));
	g->follow = malloc((n_refs ? n_refs : 1) * sizeof(*g->follow));
	if (!g->rule_first || !g->rule_names || !g->trans || !g->states ||
	    !g->refs || !g->follow_off || !g->follow)
		return oom(c);
	for (uint32_t r = 0; r < c->n; r++) {
		g->rule_names[r] = strdup(c->p.rules[c->rules[r]].name);
		if (!g->rule_names[r])
			return oom(c);
		g->rule_first[r + 1] = g->rule_first[r] + c->dfa[r].n;
	}
	return 0;
}

static void lay_out_rule(struct compile *c, struct o1_grammar *g, uint32_t r,
			 uint32_t *n_refs)
{
	const struct gdfa *d = &c->dfa[r];
	uint32_t base = g->rule_first[r], k = 0;

	for (uint32_t s = 0; s < d->n; s++) {
		struct gstate *st = &g->states[base + s];
		int32_t *row = g->trans + (size_t)(base + s) * g->n_classes;
		const int32_t *src = d->trans + (size_t)s * g->n_classes;

		st->rule = r;
		st->accept = d->accept[s];
		st->ref_off = *n_refs;
		for (uint32_t x = 0; x < g->n_classes; x++) {
			row[x] = src[x] < 0 ? -1 : (int32_t)base + src[x];
			st->has_bytes |= src[x] >= 0;
		}
		for (; k < d->n_refs && d->refs[k].state == s; k++)
			g->refs[(*n_refs)++] = (struct gref){
				.callee = g->rule_first[d->refs[k].rule],
				.ret = base + d->refs[k].to};
		st->n_ref = *n_refs - st->ref_off;
	}
}

/* Follow lists: the distinct return states of each rule's calls.
 * STAMP (n_states) marks a return state already listed for the rule. */
static int lay_out_follow(struct compile *c, struct o1_grammar *g)
{
	uint32_t *stamp = calloc(g->n_states, sizeof(*stamp));
	uint32_t *fill = calloc(g->n_rules + 1, sizeof(*fill));

	if (!stamp || !fill) {
		free(stamp);
		free(fill);
		return oom(c);
	}
	for (uint32_t i = 0; i < g->n_refs; i++) {
		uint32_t r = g->states[g->refs[i].callee].rule;

		if (stamp[g->refs[i].ret] != r + 1) {
			stamp[g->refs[i].ret] = r + 1;
			g->follow_off[r + 1]++;
		}
	}
	for (uint32_t r = 0; r < g->n_rules; r++) {
		g->follow_off[r + 1] += g->follow_off[r];
		fill[r] = g->follow_off[r];
	}
	memset(stamp, 0, g->n_states * sizeof(*stamp));
	for (uint32_t i = 0; i < g->n_refs; i++) {
		uint32_t r = g->states[g->refs[i].callee].rule;

		if (stamp[g->refs[i].ret] != r + 1) {
			stamp[g->refs[i].ret] = r + 1;
			g->follow[fill[r]++] = g->refs[i].ret;
		}
	}
	free(stamp);
	free(fill);
	return 0;
}

static int lay_out(struct compile *c, struct o1_grammar *g)
{
	uint32_t n_refs = 0;

	g->root = 0;
	for (uint32_t r = 0; r < c->n; r++)
		lay_out_rule(c, g, r, &n_refs);
	for (uint32_t s = 0; s < g->n_states; s++) {
		struct gstate *st = &g->states[s];

		st->final = st->accept && !st->has_bytes && !st->n_ref;
	}
	for (uint32_t i = 0; i < g->n_refs; i++)
		g->refs[i].tail = g->states[g->refs[i].ret].final;
	return lay_out_follow(c, g);
}

static void compile_fini(struct compile *c)
{
	for (uint32_t r = 0; c->nfa && r < c->n; r++)
		gr_nfa_fini(&c->nfa[r]);
	for (uint32_t r = 0; c->dfa && r < c->n; r++)
		gr_dfa_fini(&c->dfa[r]);
	for (uint32_t r = 0; c->alive && r < c->n; r++)
		free(c->alive[r]);
	for (uint32_t r = 0; c->roff && r < c->n; r++)
		free(c->roff[r]);
	free(c->alive);
	free(c->roff);
	free(c->nfa);
	free(c->dfa);
	free(c->inl);
	free(c->rules);
	free(c->cid);
	gr_parse_fini(&c->p);
}

static int compile(struct compile *c, const char *text, size_t len)
{
	int rc = gr_parse(text, len, &c->p, c->err);

	rc = rc ?: discover(c);
	rc = rc ?: build_dfas(c);
	rc = rc ?: compute_alive(c);
	if (!rc) {
		c->roff = calloc(c->n, sizeof(*c->roff));
		rc = c->roff ? 0 : oom(c);
	}
	for (uint32_t r = 0; !rc && r < c->n; r++)
		rc = trim_rule(c, r);
	return rc ?: check_left_recursion(c);
}

int o1_grammar_compile(const char *text, size_t len,
		       struct o1_grammar_error *err, struct o1_grammar **out)
{
	struct compile c = {.err = err};
	struct o1_grammar *g = calloc(1, sizeof(*g));
	int rc = g ? 0 : -ENOMEM;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	rc = rc ?: compile(&c, text, len);
	rc = rc ?: alloc_grammar(&c, g);
	rc = rc ?: lay_out(&c, g);
	compile_fini(&c);
	if (rc) {
		o1_grammar_destroy(g);
		return rc;
	}
	*out = g;
	return 0;
}

void o1_grammar_destroy(struct o1_grammar *g)
{
	if (!g)
		return;
	for (uint32_t r = 0; g->rule_names && r < g->n_rules; r++)
		free(g->rule_names[r]);
	free(g->rule_names);
	free(g->rule_first);
	free(g->trans);
	free(g->states);
	free(g->refs);
	free(g->follow_off);
	free(g->follow);
	free(g);
}

uint32_t o1_grammar_n_rules(const struct o1_grammar *g)
{
	return g->n_rules;
}

size_t o1_grammar_bytes(const struct o1_grammar *g)
{
	size_t n = sizeof(*g) + (g->n_rules + 1) * 2 * sizeof(uint32_t);

	n += (size_t)g->n_states * g->n_classes * sizeof(*g->trans);
	n += (size_t)g->n_states * sizeof(*g->states);
	n += (size_t)g->n_refs * sizeof(*g->refs);
	n += (size_t)g->follow_off[g->n_rules] * sizeof(*g->follow);
	for (uint32_t r = 0; r < g->n_rules; r++)
		n += sizeof(char *) + strlen(g->rule_names[r]) + 1;
	return n;
}

uint32_t o1_grammar_n_states(const struct o1_grammar *g)
{
	return g->n_states;
}

/* Syntax tree -> one NFA over bytes per rule (Thompson's construction).
 *
 * Small rules that are not recursive are inlined into their callers
 * before anything else happens. That is what keeps masks cheap: a token
 * that crosses the end of a called rule depends on the stack below it and
 * needs a check at every step, while a token inside one rule is decided
 * once (grammar_mask.c). So `char` and `escape` vanish into `string`, a
 * key literal into its object. The plan is made over the rules' call
 * graph: Tarjan's algorithm finds the recursive rules (never inlined) and
 * emits the others callees first, so each rule's size is known before a
 * caller asks for it. Every piece built from a loop starts at a fresh
 * state, so no back edge leaks into a sibling alternative.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* Call graph in CSR form, for Tarjan. */
struct callg {
	uint32_t *off, *to;
};

static uint32_t count_refs(const struct gparse *p, uint32_t node,
			   uint32_t rule, struct callg *cg, uint32_t *n)
{
	const struct gast *a = &p->ast[node];

	if (a->kind == GA_REF) {
		if (cg->to)
			cg->to[cg->off[rule] + *n] = a->a;
		(*n)++;
	}
	for (uint32_t c = a->child; c != GR_NONE; c = p->ast[c].next)
		count_refs(p, c, rule, cg, n);
	return *n;
}

static int callg_build(const struct gparse *p, struct callg *cg)
{
	uint32_t total = 0, n;

	cg->to = NULL;
	cg->off = calloc(p->n_rules + 1, sizeof(*cg->off));
	if (!cg->off)
		return -ENOMEM;
	for (uint32_t r = 0; r < p->n_rules; r++) {
		n = 0;
		cg->off[r] = total;
		total += count_refs(p, p->rules[r].body, r, cg, &n);
	}
	cg->off[p->n_rules] = total;
	cg->to = malloc((total ? total : 1) * sizeof(*cg->to));
	if (!cg->to)
		return -ENOMEM;
	for (uint32_t r = 0; r < p->n_rules; r++) {
		n = 0;
		count_refs(p, p->rules[r].body, r, cg, &n);
	}
	return 0;
}

/* Tarjan's strongly connected components, iteratively. ORDER receives
 * the rules callees first; REC marks the recursive ones. */
struct tarjan {
	const struct callg *cg;
	uint32_t *index, *low, *stack, *cs_rule, *cs_edge, *order;
	uint8_t *on_stack;
	bool *rec;
	uint32_t next_index, sp, n_order;
};

static void tj_pop_scc(struct tarjan *t, uint32_t v)
{
	uint32_t first = t->sp, w;
	bool self = false;

	do {
		w = t->stack[--first];
	} while (w != v);
	for (uint32_t e = t->cg->off[v]; e < t->cg->off[v + 1]; e++)
		self |= t->cg->to[e] == v;
	for (uint32_t i = first; i < t->sp; i++) {
		w = t->stack[i];
		t->on_stack[w] = 0;
		t->rec[w] = t->sp - first > 1 || self;
		t->order[t->n_order++] = w;
	}
	t->sp = first;
}

static void tj_visit(struct tarjan *t, uint32_t root)
{
	uint32_t depth = 0;

	t->cs_rule[0] = root;
	t->cs_edge[0] = t->cg->off[root];
	t->index[root] = t->low[root] = t->next_index++;
	t->stack[t->sp++] = root;
	t->on_stack[root] = 1;
	for (;;) {
		uint32_t v = t->cs_rule[depth], e = t->cs_edge[depth]++;

		if (e < t->cg->off[v + 1]) {
			uint32_t w = t->cg->to[e];

			if (t->index[w] == GR_NONE) {
				t->index[w] = t->low[w] = t->next_index++;
				t->stack[t->sp++] = w;
				t->on_stack[w] = 1;
				depth++;
				t->cs_rule[depth] = w;
				t->cs_edge[depth] = t->cg->off[w];
			} else if (t->on_stack[w] && t->index[w] < t->low[v]) {
				t->low[v] = t->index[w];
			}
			continue;
		}
		if (t->low[v] == t->index[v])
			tj_pop_scc(t, v);
		if (!depth)
			return;
		depth--;
		if (t->low[v] < t->low[t->cs_rule[depth]])
			t->low[t->cs_rule[depth]] = t->low[v];
	}
}

static int tarjan(const struct callg *cg, uint32_t n, uint32_t *order,
		  bool *rec)
{
	struct tarjan t = {.cg = cg, .order = order, .rec = rec};
	size_t sz = (size_t)n * sizeof(uint32_t);
	int rc = -ENOMEM;

	t.index = malloc(sz);
	t.low = malloc(sz);
	t.stack = malloc(sz);
	t.cs_rule = malloc(sz);
	t.cs_edge = malloc(sz);
	t.on_stack = calloc(n, 1);
	if (!t.index || !t.low || !t.stack || !t.cs_rule || !t.cs_edge ||
	    !t.on_stack)
		goto out;
	memset(t.index, 0xff, sz);
	for (uint32_t r = 0; r < n; r++)
		if (t.index[r] == GR_NONE)
			tj_visit(&t, r);
	rc = 0;
out:
	free(t.index);
	free(t.low);
	free(t.stack);
	free(t.cs_rule);
	free(t.cs_edge);
	free(t.on_stack);
	return rc;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b > (1ull << 40) ? (1ull << 40) : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > (1ull << 40) / b ? (1ull << 40) : a * b;
}

static uint64_t class_size(const struct gparse *p, const struct gast *a)
{
	struct gutf8_seq seq[64];
	uint64_t size = 1;

	for (uint32_t i = 0; i < a->b; i++) {
		const struct gcp_range *r = &p->ranges[a->a + i];
		int n = gr_utf8_split(r->lo, r->hi, seq, 64);

		if (n < 0)
			return 1ull << 40;
		for (int k = 0; k < n; k++)
			size += seq[k].n;
	}
	return size;
}

/* NFA states the node will take, with inlined rules expanded. */
static uint64_t node_size(const struct gparse *p, uint32_t node,
			  const uint64_t *rule_size, const bool *inl)
{
	const struct gast *a = &p->ast[node];
	uint64_t s = 0;

	switch (a->kind) {
	case GA_EMPTY:
		return 1;
	case GA_LIT:
		return a->b + 1;
	case GA_CLASS:
		return class_size(p, a);
	case GA_REF:
		return inl[a->a] ? sat_add(rule_size[a->a], 1) : 2;
	case GA_REP:
		s = node_size(p, a->child, rule_size, inl);
		return sat_add(sat_mul(s, a->b == GR_INF ? a->a + 1ull : a->b),
			       2);
	default:
		for (uint32_t c = a->child; c != GR_NONE; c = p->ast[c].next)
			s = sat_add(s, node_size(p, c, rule_size, inl) + 1);
		return s;
	}
}

int gr_nfa_plan(const struct gparse *p, bool *inline_rule,
		struct o1_grammar_error *err)
{
	struct callg cg;
	uint32_t *order = malloc((p->n_rules + 1) * sizeof(*order));
	uint64_t *size = calloc(p->n_rules, sizeof(*size));
	bool *rec = calloc(p->n_rules, sizeof(*rec));
	int rc = -ENOMEM;

	memset(inline_rule, 0, p->n_rules * sizeof(*inline_rule));
	if (!order || !size || !rec || callg_build(p, &cg))
		goto out;
	rc = tarjan(&cg, p->n_rules, order, rec);
	for (uint32_t i = 0; !rc && i < p->n_rules; i++) {
		uint32_t r = order[i];

		size[r] = node_size(p, p->rules[r].body, size, inline_rule);
		inline_rule[r] =
			!rec[r] && r != p->root && size[r] <= GR_INLINE_MAX;
	}
	free(cg.off);
	free(cg.to);
out:
	free(order);
	free(size);
	free(rec);
	if (rc == -ENOMEM)
		gr_fail(err, rc, 0, 0, "out of memory");
	return rc;
}

struct nbuild {
	struct gnfa *n;
	const struct gparse *p;
	const bool *inl;
	uint32_t rule;
	struct o1_grammar_error *err;
};

static int new_state(struct nbuild *b, uint32_t *s)
{
	if (b->n->n_states >= GR_MAX_NFA_STATES)
		return gr_fail(b->err, -O1_E_BOUNDS,
			       b->p->rules[b->rule].line,
			       b->p->rules[b->rule].col,
			       "rule '%s' is too large (over %u states)",
			       b->p->rules[b->rule].name, GR_MAX_NFA_STATES);
	*s = b->n->n_states++;
	return 0;
}

static int add_edge(struct nbuild *b, uint32_t from, uint32_t to,
		    uint8_t kind, uint8_t lo, uint8_t hi, uint32_t rule)
{
	struct gnfa *n = b->n;

	if (n->n_e == n->cap_e) {
		uint32_t cap = n->cap_e ? n->cap_e * 2 : 256;
		struct nfa_edge *e = realloc(n->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		n->e = e;
		n->cap_e = cap;
	}
	n->e[n->n_e++] = (struct nfa_edge){.from = from,
					   .to = to,
					   .rule = rule,
					   .kind = kind,
					   .lo = lo,
					   .hi = hi};
	return 0;
}

static int eps(struct nbuild *b, uint32_t from, uint32_t to)
{
	return add_edge(b, from, to, NE_EPS, 0, 0, 0);
}

/* A chain of byte-range edges from FROM; *TO is its end, or the given
 * end when *TO is not GR_NONE. */
static int chain(struct nbuild *b, uint32_t from, const uint8_t *lo,
		 const uint8_t *hi, uint32_t n, uint32_t *to)
{
	uint32_t s = from, t = from;
	int rc = 0;

	for (uint32_t i = 0; i < n && !rc; i++) {
		if (i + 1 == n && *to != GR_NONE)
			t = *to;
		else
			rc = new_state(b, &t);
		if (!rc)
			rc = add_edge(b, s, t, NE_BYTE, lo[i], hi[i], 0);
		s = t;
	}
	*to = s;
	return rc;
}

static int build(struct nbuild *b, uint32_t node, uint32_t from,
		 uint32_t *to);

static int build_class(struct nbuild *b, const struct gast *a,
		       uint32_t from, uint32_t *to)
{
	struct gutf8_seq seq[64];
	int rc = new_state(b, to);

	for (uint32_t i = 0; !rc && i < a->b; i++) {
		const struct gcp_range *r = &b->p->ranges[a->a + i];
		int n = gr_utf8_split(r->lo, r->hi, seq, 64);

		for (int k = 0; !rc && k < n; k++)
			rc = chain(b, from, seq[k].lo, seq[k].hi, seq[k].n,
				   to);
	}
	return rc;
}

static int build_rep(struct nbuild *b, const struct gast *a, uint32_t from,
		     uint32_t *to)
{
	uint32_t e = from, s = 0, t = 0, end = 0;
	int rc = 0;

	for (uint32_t i = 0; !rc && i < a->a; i++) {
		rc = new_state(b, &s) ?: eps(b, e, s);
		rc = rc ?: build(b, a->child, s, &e);
	}
	rc = rc ?: new_state(b, &end);
	rc = rc ?: eps(b, e, end);
	if (!rc && a->b == GR_INF) {
		rc = new_state(b, &s) ?: eps(b, e, s);
		rc = rc ?: build(b, a->child, s, &t);
		rc = rc ?: eps(b, t, s) ?: eps(b, t, end);
	}
	for (uint32_t i = a->a; !rc && a->b != GR_INF && i < a->b; i++) {
		rc = new_state(b, &s) ?: eps(b, e, s);
		rc = rc ?: build(b, a->child, s, &e);
		rc = rc ?: eps(b, e, end);
	}
	*to = end;
	return rc;
}

static int build_alt(struct nbuild *b, const struct gast *a, uint32_t from,
		     uint32_t *to)
{
	uint32_t s = 0, e = 0;
	int rc = new_state(b, to);

	for (uint32_t c = a->child; !rc && c != GR_NONE;
	     c = b->p->ast[c].next) {
		rc = new_state(b, &s) ?: eps(b, from, s);
		rc = rc ?: build(b, c, s, &e);
		rc = rc ?: eps(b, e, *to);
	}
	return rc;
}

static int build(struct nbuild *b, uint32_t node, uint32_t from,
		 uint32_t *to)
{
	const struct gast *a = &b->p->ast[node];
	const uint8_t *lit = b->p->bytes + a->a;
	int rc = 0;

	*to = from;
	switch (a->kind) {
	case GA_EMPTY:
		return 0;
	case GA_LIT:
		*to = GR_NONE;
		return a->b ? chain(b, from, lit, lit, a->b, to)
			    : (*to = from, 0);
	case GA_CLASS:
		return build_class(b, a, from, to);
	case GA_REF:
		if (b->inl[a->a])
			return build(b, b->p->rules[a->a].body, from, to);
		rc = new_state(b, to);
		return rc ?: add_edge(b, from, *to, NE_REF, 0, 0, a->a);
	case GA_REP:
		return build_rep(b, a, from, to);
	case GA_ALT:
		return build_alt(b, a, from, to);
	default:
		for (uint32_t c = a->child; !rc && c != GR_NONE;
		     c = b->p->ast[c].next)
			rc = build(b, c, *to, to);
		return rc;
	}
}

static int cmp_edge(const void *x, const void *y)
{
	const struct nfa_edge *a = x, *b = y;

	if (a->from != b->from)
		return a->from < b->from ? -1 : 1;
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static int index_edges(struct gnfa *n)
{
	qsort(n->e, n->n_e, sizeof(*n->e), cmp_edge);
	n->off = calloc(n->n_states + 1, sizeof(*n->off));
	if (!n->off)
		return -ENOMEM;
	for (uint32_t i = 0; i < n->n_e; i++)
		n->off[n->e[i].from + 1]++;
	for (uint32_t s = 0; s < n->n_states; s++)
		n->off[s + 1] += n->off[s];
	return 0;
}

int gr_nfa_build(const struct gparse *p, const bool *inline_rule,
		 uint32_t rule, struct gnfa *n, struct o1_grammar_error *err)
{
	struct nbuild b = {
		.n = n, .p = p, .inl = inline_rule, .rule = rule, .err = err};
	int rc;

	memset(n, 0, sizeof(*n));
	rc = new_state(&b, &n->start);
	rc = rc ?: build(&b, p->rules[rule].body, n->start, &n->final);
	rc = rc ?: index_edges(n);
	if (rc == -ENOMEM)
		gr_fail(err, rc, 0, 0, "out of memory");
	return rc;
}

void gr_nfa_fini(struct gnfa *n)
{
	free(n->e);
	free(n->off);
	memset(n, 0, sizeof(*n));
}

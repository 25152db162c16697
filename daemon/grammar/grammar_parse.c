/* Grammar text -> syntax tree (the syntax is in grammar.h and
 * docs/GRAMMAR.md). A recursive descent parser over the bytes, tracking
 * line and column (in characters) for every error. Literals and classes
 * are code points: literals are stored as their UTF-8 bytes, classes as
 * sorted disjoint code point ranges with the surrogates removed, so a
 * negated class is complemented here once. Rules referenced before their
 * definition are created undefined and checked at the end.
 */
#include "grammar/grammar_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/utf8.h"

struct lexer {
	const uint8_t *s;
	size_t len, pos;
	uint32_t line, col;
	struct gparse *p;
	struct o1_grammar_error *err;
};

int gr_fail(struct o1_grammar_error *err, int code, uint32_t line,
	    uint32_t col, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->line = line;
	err->col = col;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

static int lx_fail(struct lexer *lx, const char *what)
{
	return gr_fail(lx->err, -O1_E_FORMAT, lx->line, lx->col, "%s", what);
}

static int peek(const struct lexer *lx)
{
	return lx->pos < lx->len ? lx->s[lx->pos] : -1;
}

static void advance(struct lexer *lx)
{
	uint8_t c = lx->s[lx->pos++];

	if (c == '\n') {
		lx->line++;
		lx->col = 1;
	} else if ((c & 0xc0) != 0x80) {
		lx->col++;
	}
}

static void skip_space(struct lexer *lx)
{
	for (int c = peek(lx); c >= 0; c = peek(lx)) {
		if (c == '#') {
			while (peek(lx) >= 0 && peek(lx) != '\n')
				advance(lx);
		} else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			advance(lx);
		} else {
			return;
		}
	}
}

static bool name_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static size_t name_len(const struct lexer *lx)
{
	size_t n = 0;

	while (lx->pos + n < lx->len && name_char(lx->s[lx->pos + n]))
		n++;
	return n;
}

/* A rule definition starts here: a name, blanks, then "::=". */
static bool at_rule_start(const struct lexer *lx)
{
	struct lexer t = *lx;
	size_t n = name_len(&t);

	if (!n)
		return false;
	t.pos += n;
	skip_space(&t);
	return t.len - t.pos >= 3 && memcmp(t.s + t.pos, "::=", 3) == 0;
}

static void *grow(void *arr, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t c = *cap ? *cap : 16;
	void *n;

	if (need <= *cap)
		return arr;
	while (c < need)
		c *= 2;
	n = realloc(arr, (size_t)c * elem);
	if (n)
		*cap = c;
	return n;
}

static int new_node(struct lexer *lx, uint8_t kind, uint32_t line,
		    uint32_t col, uint32_t *out)
{
	struct gparse *p = lx->p;
	struct gast *a = grow(p->ast, &p->cap_ast, p->n_ast + 1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	p->ast = a;
	a[p->n_ast] = (struct gast){.kind = kind,
				    .child = GR_NONE,
				    .next = GR_NONE,
				    .line = line,
				    .col = col};
	*out = p->n_ast++;
	return 0;
}

static uint32_t name_hash(const uint8_t *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 16777619u;
	return h;
}

/* Doubles the name table (kept at most half full). */
static int rehash_names(struct gparse *p)
{
	uint32_t mask = p->name_mask ? p->name_mask * 2 + 1 : 63;
	uint32_t *t = calloc((size_t)mask + 1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n_rules; i++) {
		const char *name = p->rules[i].name;
		uint32_t h = name_hash((const uint8_t *)name, strlen(name));

		while (t[h & mask])
			h++;
		t[h & mask] = i + 1;
	}
	free(p->by_name);
	p->by_name = t;
	p->name_mask = mask;
	return 0;
}

static int rule_id(struct lexer *lx, const uint8_t *name, size_t n,
		   uint32_t *out)
{
	struct gparse *p = lx->p;
	uint32_t h = name_hash(name, n);
	struct grule *r;

	if ((p->n_rules + 1) * 2 > p->name_mask && rehash_names(p))
		return -ENOMEM;
	for (;; h++) {
		uint32_t i = p->by_name[h & p->name_mask];

		if (!i)
			break;
		if (strlen(p->rules[i - 1].name) == n &&
		    !memcmp(p->rules[i - 1].name, name, n)) {
			*out = i - 1;
			return 0;
		}
	}
	if (p->n_rules >= GR_MAX_RULES)
		return gr_fail(lx->err, -O1_E_BOUNDS, lx->line, lx->col,
			       "more than %u rules", GR_MAX_RULES);
	r = grow(p->rules, &p->cap_rules, p->n_rules + 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	p->rules = r;
	r += p->n_rules;
	r->name = strndup((const char *)name, n);
	if (!r->name)
		return -ENOMEM;
	r->body = GR_NONE;
	r->line = lx->line;
	r->col = lx->col;
	p->by_name[h & p->name_mask] = p->n_rules + 1;
	*out = p->n_rules++;
	return 0;
}

static int hex_value(struct lexer *lx, int digits, uint32_t *cp)
{
	*cp = 0;
	for (int i = 0; i < digits; i++) {
		int c = peek(lx), v;

		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = c - 'A' + 10;
		else
			return lx_fail(lx, "expected a hex digit");
		*cp = *cp * 16 + (uint32_t)v;
		advance(lx);
	}
	return 0;
}

static int escape(struct lexer *lx, uint32_t *cp)
{
	static const char simple[] = "nrt\\\"'[]-^/";
	static const char value[] = "\n\r\t\\\"'[]-^/";
	int c = peek(lx);
	const char *hit = c > 0 ? strchr(simple, c) : NULL;

	if (c < 0)
		return lx_fail(lx, "unterminated escape");
	if (hit) {
		*cp = (uint8_t)value[hit - simple];
		advance(lx);
		return 0;
	}
	advance(lx);
	if (c == 'x')
		return hex_value(lx, 2, cp);
	if (c == 'u')
		return hex_value(lx, 4, cp);
	if (c == 'U')
		return hex_value(lx, 8, cp);
	return lx_fail(lx, "unknown escape");
}

/* One code point of a literal or class: an escape or a UTF-8 character. */
static int code_point(struct lexer *lx, uint32_t *cp)
{
	uint32_t line = lx->line, col = lx->col;
	int n, rc;

	if (peek(lx) == '\\') {
		advance(lx);
		rc = escape(lx, cp);
		if (rc)
			return rc;
		if (*cp > GR_MAX_CP || (*cp >= 0xd800 && *cp <= 0xdfff))
			return gr_fail(lx->err, -O1_E_FORMAT, line, col,
				       "escape U+%X is not a character", *cp);
		return 0;
	}
	n = o1_utf8_decode(lx->s + lx->pos, lx->len - lx->pos, cp);
	if (!n)
		return lx_fail(lx, "invalid UTF-8");
	for (int i = 0; i < n; i++)
		advance(lx);
	return 0;
}

static int parse_literal(struct lexer *lx, uint32_t *out)
{
	struct gparse *p = lx->p;
	uint32_t line = lx->line, col = lx->col, cp, off = p->n_bytes;
	int rc = new_node(lx, GA_LIT, line, col, out);

	advance(lx); /* the opening quote */
	while (!rc && peek(lx) != '"') {
		uint8_t *b;

		if (peek(lx) < 0 || peek(lx) == '\n')
			return gr_fail(lx->err, -O1_E_FORMAT, line, col,
				       "unterminated string");
		rc = code_point(lx, &cp);
		b = rc ? NULL
		       : grow(p->bytes, &p->cap_bytes, p->n_bytes + 4, 1);
		if (!rc && !b)
			rc = -ENOMEM;
		if (!rc) {
			p->bytes = b;
			p->n_bytes +=
			    (uint32_t)o1_utf8_encode(cp, b + p->n_bytes);
		}
	}
	if (rc)
		return rc;
	advance(lx);
	p->ast[*out].a = off;
	p->ast[*out].b = p->n_bytes - off;
	return 0;
}

static int push_byte(struct gparse *p, uint8_t c)
{
	uint8_t *b = grow(p->bytes, &p->cap_bytes, p->n_bytes + 1, 1);

	if (!b)
		return -ENOMEM;
	p->bytes = b;
	p->bytes[p->n_bytes++] = c;
	return 0;
}

/* @"NAME": a control token, the literal 0xFF NAME 0xFF (grammar.h). */
static int parse_control(struct lexer *lx, uint32_t *out)
{
	struct gparse *p = lx->p;
	uint32_t line = lx->line, col = lx->col, off = p->n_bytes;
	int rc;

	advance(lx); /* the '@' */
	if (peek(lx) != '"')
		return lx_fail(lx, "expected a token's name in quotes after @");
	rc = push_byte(p, 0xff);
	rc = rc ?: parse_literal(lx, out);
	rc = rc ?: push_byte(p, 0xff);
	if (rc)
		return rc;
	if (p->n_bytes - off == 2)
		return gr_fail(lx->err, -O1_E_FORMAT, line, col,
			       "a control token's name is empty");
	if (p->n_bytes - off > GR_MAX_TOKEN)
		return gr_fail(lx->err, -O1_E_FORMAT, line, col,
			       "a control token's name is over %u bytes",
			       GR_MAX_TOKEN - 2);
	p->ast[*out].a = off;
	p->ast[*out].b = p->n_bytes - off;
	p->ast[*out].line = line;
	p->ast[*out].col = col;
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct gcp_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int push_range(struct gparse *p, uint32_t lo, uint32_t hi)
{
	struct gcp_range *r;

	if (lo > hi)
		return 0;
	r = grow(p->ranges, &p->cap_ranges, p->n_ranges + 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	p->ranges = r;
	r[p->n_ranges++] = (struct gcp_range){lo, hi};
	return 0;
}

/* Ranges [OFF, n_ranges) sorted, merged, surrogates cut out, and
 * complemented when NEG. Returns the new count (the ranges stay at OFF). */
static int normalize(struct gparse *p, uint32_t off, bool neg)
{
	uint32_t n = p->n_ranges - off, m = 0, next = 0;
	struct gcp_range *r = p->ranges + off;
	int rc = 0;

	if (n)
		qsort(r, n, sizeof(*r), cmp_range);
	for (uint32_t i = 0; i < n; i++) {
		if (m && r[i].lo <= r[m - 1].hi + 1) {
			if (r[i].hi > r[m - 1].hi)
				r[m - 1].hi = r[i].hi;
		} else {
			r[m++] = r[i];
		}
	}
	p->n_ranges = off + m;
	if (neg) {
		/* the complement goes after the ranges, then moves down */
		for (uint32_t i = 0; i < m && !rc; i++) {
			if (p->ranges[off + i].lo > next)
				rc = push_range(p, next,
						p->ranges[off + i].lo - 1);
			next = p->ranges[off + i].hi + 1;
		}
		if (!rc && next <= GR_MAX_CP)
			rc = push_range(p, next, GR_MAX_CP);
		if (rc)
			return rc;
		memmove(p->ranges + off, p->ranges + off + m,
			(p->n_ranges - off - m) * sizeof(*p->ranges));
		p->n_ranges -= m;
	}
	return 0;
}

/* Cuts the surrogates U+D800..U+DFFF out of the class at OFF. */
static int cut_surrogates(struct gparse *p, uint32_t off)
{
	uint32_t end = p->n_ranges;
	int rc = 0;

	for (uint32_t i = off; i < end && !rc; i++) {
		struct gcp_range r = p->ranges[i];

		if (r.hi < 0xd800 || r.lo > 0xdfff)
			continue;
		p->ranges[i].hi = r.lo < 0xd800 ? 0xd7ff : 0;
		p->ranges[i].lo = r.lo < 0xd800 ? r.lo : 1; /* lo > hi: gone */
		if (r.hi > 0xdfff)
			rc = push_range(p, 0xe000, r.hi);
	}
	if (rc)
		return rc;
	/* drop the emptied ranges and sort the appended ones in */
	{
		uint32_t m = off;

		for (uint32_t i = off; i < p->n_ranges; i++)
			if (p->ranges[i].lo <= p->ranges[i].hi)
				p->ranges[m++] = p->ranges[i];
		p->n_ranges = m;
	}
	if (p->n_ranges > off)
		qsort(p->ranges + off, p->n_ranges - off, sizeof(*p->ranges),
		      cmp_range);
	return 0;
}

static int class_item(struct lexer *lx)
{
	uint32_t lo, hi, line = lx->line, col = lx->col;
	int rc = code_point(lx, &lo);

	hi = lo;
	if (!rc && peek(lx) == '-' && lx->pos + 1 < lx->len &&
	    lx->s[lx->pos + 1] != ']') {
		advance(lx);
		rc = code_point(lx, &hi);
		if (!rc && hi < lo)
			return gr_fail(lx->err, -O1_E_FORMAT, line, col,
				       "class range U+%X-U+%X is reversed", lo,
				       hi);
	}
	return rc ? rc : push_range(lx->p, lo, hi);
}

static int finish_class(struct lexer *lx, uint32_t node, uint32_t off,
			bool neg)
{
	struct gparse *p = lx->p;
	struct gast *a = &p->ast[node];
	int rc = normalize(p, off, neg);

	if (!rc)
		rc = cut_surrogates(p, off);
	if (rc)
		return rc;
	a = &p->ast[node];
	if (p->n_ranges == off)
		return gr_fail(lx->err, -O1_E_FORMAT, a->line, a->col,
			       "character class matches nothing");
	a->a = off;
	a->b = p->n_ranges - off;
	return 0;
}

static int parse_class(struct lexer *lx, uint32_t *out)
{
	uint32_t line = lx->line, col = lx->col, off = lx->p->n_ranges;
	bool neg = false;
	int rc = new_node(lx, GA_CLASS, line, col, out);

	if (rc)
		return rc;
	advance(lx);
	if (peek(lx) == '^') {
		neg = true;
		advance(lx);
	}
	while (peek(lx) != ']') {
		if (peek(lx) < 0 || peek(lx) == '\n')
			return gr_fail(lx->err, -O1_E_FORMAT, line, col,
				       "unterminated character class");
		rc = class_item(lx);
		if (rc)
			return rc;
	}
	advance(lx);
	return finish_class(lx, *out, off, neg);
}

static int parse_any(struct lexer *lx, uint32_t *out)
{
	uint32_t off = lx->p->n_ranges;
	int rc = new_node(lx, GA_CLASS, lx->line, lx->col, out);

	advance(lx);
	if (!rc)
		rc = push_range(lx->p, 0, GR_MAX_CP);
	return rc ? rc : finish_class(lx, *out, off, false);
}

static int parse_alts(struct lexer *lx, int depth, uint32_t *out);

static int parse_group(struct lexer *lx, int depth, uint32_t *out)
{
	uint32_t line = lx->line, col = lx->col;
	int rc;

	if (depth >= GR_MAX_NEST)
		return lx_fail(lx, "groups nested too deeply");
	advance(lx);
	rc = parse_alts(lx, depth + 1, out);
	if (rc)
		return rc;
	skip_space(lx);
	if (peek(lx) != ')')
		return gr_fail(lx->err, -O1_E_FORMAT, line, col,
			       "unclosed (");
	advance(lx);
	return 0;
}

static int parse_ref(struct lexer *lx, uint32_t *out)
{
	size_t n = name_len(lx);
	uint32_t line = lx->line, col = lx->col, rule;
	int rc;

	if (!n) {
		char what[64];
		int c = peek(lx);

		if (c >= 0x20 && c < 0x7f)
			snprintf(what, sizeof(what), "unexpected '%c'", c);
		else
			snprintf(what, sizeof(what), "unexpected byte 0x%02x",
				 c);
		return lx_fail(lx, what);
	}
	rc = rule_id(lx, lx->s + lx->pos, n, &rule);
	if (!rc)
		rc = new_node(lx, GA_REF, line, col, out);
	if (rc)
		return rc;
	lx->p->ast[*out].a = rule;
	for (size_t i = 0; i < n; i++)
		advance(lx);
	return 0;
}

static int parse_primary(struct lexer *lx, int depth, uint32_t *out)
{
	switch (peek(lx)) {
	case '"':
		return parse_literal(lx, out);
	case '@':
		return parse_control(lx, out);
	case '[':
		return parse_class(lx, out);
	case '.':
		return parse_any(lx, out);
	case '(':
		return parse_group(lx, depth, out);
	default:
		return parse_ref(lx, out);
	}
}

static int parse_uint(struct lexer *lx, uint32_t *v)
{
	uint64_t x = 0;

	skip_space(lx);
	if (peek(lx) < '0' || peek(lx) > '9')
		return lx_fail(lx, "expected a number");
	while (peek(lx) >= '0' && peek(lx) <= '9') {
		x = x * 10 + (uint64_t)(peek(lx) - '0');
		if (x > GR_MAX_REP)
			return gr_fail(lx->err, -O1_E_BOUNDS, lx->line, lx->col,
				       "repetition bound over %u", GR_MAX_REP);
		advance(lx);
	}
	*v = (uint32_t)x;
	skip_space(lx);
	return 0;
}

/* {n}, {n,} or {n,m}. */
static int parse_braces(struct lexer *lx, uint32_t *min, uint32_t *max)
{
	uint32_t line = lx->line, col = lx->col;
	int rc;

	advance(lx);
	rc = parse_uint(lx, min);
	if (rc)
		return rc;
	*max = *min;
	if (peek(lx) == ',') {
		advance(lx);
		skip_space(lx);
		*max = GR_INF;
		if (peek(lx) != '}') {
			rc = parse_uint(lx, max);
			if (rc)
				return rc;
		}
	}
	if (peek(lx) != '}')
		return lx_fail(lx, "expected } to close the repetition");
	advance(lx);
	if (*max < *min)
		return gr_fail(lx->err, -O1_E_FORMAT, line, col,
			       "repetition {%u,%u}: max below min", *min, *max);
	return 0;
}

/* x?, x* or x+: the quantifiers that nest into one (below). */
static bool unit_rep(uint32_t min, uint32_t max)
{
	return (min == 0 && max == 1) || (min <= 1 && max == GR_INF);
}

/* A unit quantifier on a unit repetition is one repetition: (x+)+ = x+,
 * (x?)+ = (x+)? = x*, (x?)? = x? (min the product, max unbounded if
 * either is). Built as written, each + copies its operand (x x*), so
 * nested ones grew the NFA as 2^depth: 18 plus signs took seconds. */
static bool fold_rep(struct gparse *p, uint32_t item, uint32_t min,
		     uint32_t max)
{
	struct gast *a = &p->ast[item];

	if (a->kind != GA_REP || !unit_rep(a->a, a->b) || !unit_rep(min, max))
		return false;
	a->b = a->b == GR_INF || max == GR_INF ? GR_INF : 1;
	a->a = a->a * min;
	return true;
}

static int wrap_rep(struct lexer *lx, uint32_t *item)
{
	uint32_t line = lx->line, col = lx->col, min = 0, max = GR_INF, rep;
	int c = peek(lx), rc = 0;

	if (c == '+')
		min = 1;
	else if (c == '?')
		max = 1;
	if (c == '{')
		rc = parse_braces(lx, &min, &max);
	else
		advance(lx);
	if (!rc && fold_rep(lx->p, *item, min, max))
		return 0;
	if (!rc)
		rc = new_node(lx, GA_REP, line, col, &rep);
	if (rc)
		return rc;
	lx->p->ast[rep].child = *item;
	lx->p->ast[rep].a = min;
	lx->p->ast[rep].b = max;
	*item = rep;
	return 0;
}

static int parse_postfix(struct lexer *lx, int depth, uint32_t *out)
{
	int rc = parse_primary(lx, depth, out);

	while (!rc) {
		skip_space(lx);
		if (peek(lx) <= 0 || !strchr("*+?{", peek(lx)))
			break;
		rc = wrap_rep(lx, out);
	}
	return rc;
}

static bool seq_end(const struct lexer *lx)
{
	int c = peek(lx);

	return c < 0 || c == '|' || c == ')' || at_rule_start(lx);
}

/* Items until | ) the end or the next rule; one item stands alone. */
static int parse_seq(struct lexer *lx, int depth, uint32_t *out)
{
	uint32_t line = lx->line, col = lx->col, last = GR_NONE, item;
	int rc = new_node(lx, GA_SEQ, line, col, out);

	skip_space(lx);
	while (!rc && !seq_end(lx)) {
		rc = parse_postfix(lx, depth, &item);
		if (rc)
			break;
		if (last == GR_NONE)
			lx->p->ast[*out].child = item;
		else
			lx->p->ast[last].next = item;
		last = item;
		skip_space(lx);
	}
	if (rc)
		return rc;
	if (last == GR_NONE)
		lx->p->ast[*out].kind = GA_EMPTY;
	else if (lx->p->ast[*out].child == last)
		*out = last;
	return 0;
}

static int parse_alts(struct lexer *lx, int depth, uint32_t *out)
{
	uint32_t alt, last, seq;
	int rc = parse_seq(lx, depth, &seq);

	if (rc || peek(lx) != '|') {
		*out = seq;
		return rc;
	}
	rc = new_node(lx, GA_ALT, lx->line, lx->col, &alt);
	if (rc)
		return rc;
	lx->p->ast[alt].child = last = seq;
	while (peek(lx) == '|') {
		advance(lx);
		rc = parse_seq(lx, depth, &seq);
		if (rc)
			return rc;
		lx->p->ast[last].next = seq;
		last = seq;
	}
	*out = alt;
	return 0;
}

static int parse_rule(struct lexer *lx)
{
	size_t n = name_len(lx);
	uint32_t line = lx->line, col = lx->col, rule, body;
	struct grule *r;
	int rc;

	if (!at_rule_start(lx))
		return lx_fail(lx, n ? "expected ::= after the rule name"
				     : "expected a rule name");
	rc = rule_id(lx, lx->s + lx->pos, n, &rule);
	if (rc)
		return rc;
	r = &lx->p->rules[rule];
	if (r->body != GR_NONE)
		return gr_fail(lx->err, -O1_E_FORMAT, line, col,
			       "rule '%s' defined twice (first at %u:%u)",
			       r->name, r->line, r->col);
	r->line = line;
	r->col = col;
	while (peek(lx) != ':')
		advance(lx);
	lx->pos += 3;
	lx->col += 3;
	rc = parse_alts(lx, 0, &body);
	if (rc)
		return rc;
	lx->p->rules[rule].body = body;
	if (peek(lx) == ')')
		return lx_fail(lx, "unmatched )");
	return 0;
}

static int check_defined(struct lexer *lx)
{
	struct gparse *p = lx->p;
	uint32_t root = GR_NONE;

	for (uint32_t i = 0; i < p->n_rules; i++) {
		if (p->rules[i].body == GR_NONE)
			return gr_fail(lx->err, -O1_E_FORMAT, p->rules[i].line,
				       p->rules[i].col,
				       "rule '%s' is used but not defined",
				       p->rules[i].name);
		if (!strcmp(p->rules[i].name, "root"))
			root = i;
	}
	if (root == GR_NONE)
		return gr_fail(lx->err, -O1_E_FORMAT, 0, 0,
			       "no rule named root");
	p->root = root;
	return 0;
}

int gr_parse(const char *text, size_t len, struct gparse *p,
	     struct o1_grammar_error *err)
{
	struct lexer lx = {.s = (const uint8_t *)text,
			   .len = len,
			   .line = 1,
			   .col = 1,
			   .p = p,
			   .err = err};
	int rc = 0;

	memset(p, 0, sizeof(*p));
	skip_space(&lx);
	while (!rc && lx.pos < lx.len) {
		rc = parse_rule(&lx);
		skip_space(&lx);
	}
	if (!rc)
		rc = check_defined(&lx);
	if (rc == -ENOMEM)
		gr_fail(err, rc, 0, 0, "out of memory");
	return rc;
}

void gr_parse_fini(struct gparse *p)
{
	for (uint32_t i = 0; i < p->n_rules; i++)
		free(p->rules[i].name);
	free(p->rules);
	free(p->by_name);
	free(p->ast);
	free(p->bytes);
	free(p->ranges);
	memset(p, 0, sizeof(*p));
}

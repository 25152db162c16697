/* JSON Schema `pattern` (ECMA-262 syntax) -> grammar text for the inside
 * of a JSON string whose value matches.
 *
 * Supported: literals, . (any character but \n \r U+2028 U+2029),
 * classes [...] with ranges, ^ and the escapes below, groups (...),
 * (?:...) and (?<name>...), alternation, * + ? {n} {n,} {n,m} (lazy forms
 * too: same language), escapes \d \D \w \W \s \S \t \n \r \v \f \0 \xHH
 * \uHHHH \u{H..} \cX and escaped punctuation, ^ at the start and $ at the
 * end of a top-level alternative. A pattern matches anywhere in the
 * string (a search), so an alternative without ^ gets any characters
 * before it and one without $ any after. Characters are code points (the
 * regex's "u" mode). Refused with the reason: backreferences, lookaround,
 * \b \B, \p{..}, anchors anywhere else, repetition bounds over 10000.
 *
 * Characters come out in their canonical JSON escapes, so the grammar
 * describes the string as a JSON serializer writes it.
 */
#include "grammar/grammar_schema_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/utf8.h"

struct rx {
	const uint8_t *s;
	size_t n, pos;
	char *why;
	size_t why_len;
	int depth;
	struct gcp_range *r; /* class scratch */
	uint32_t nr, cap;
};

static int rx_fail(struct rx *x, int code, const char *what)
{
	snprintf(x->why, x->why_len, "%s at offset %zu", what, x->pos);
	return code;
}

static int peek(const struct rx *x)
{
	return x->pos < x->n ? x->s[x->pos] : -1;
}

static int add(struct rx *x, uint32_t lo, uint32_t hi)
{
	if (x->nr == x->cap) {
		uint32_t cap = x->cap ? x->cap * 2 : 32;
		struct gcp_range *r = realloc(x->r, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		x->r = r;
		x->cap = cap;
	}
	x->r[x->nr++] = (struct gcp_range){lo, hi};
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct gcp_range *p = a, *q = b;

	return p->lo < q->lo ? -1 : p->lo > q->lo;
}

/* Ranges from FROM on: sorted, merged, complemented when NEG, and the
 * surrogates cut out. */
static int normalize(struct rx *x, uint32_t from, bool neg)
{
	uint32_t m = from, n = x->nr, next = 0;
	int rc = 0;

	if (n > from)
		qsort(x->r + from, n - from, sizeof(*x->r), cmp_range);
	for (uint32_t i = from; i < n; i++) {
		if (m > from && x->r[i].lo <= x->r[m - 1].hi + 1) {
			if (x->r[i].hi > x->r[m - 1].hi)
				x->r[m - 1].hi = x->r[i].hi;
		} else {
			x->r[m++] = x->r[i];
		}
	}
	x->nr = m;
	if (neg) {
		for (uint32_t i = from; i < m && !rc; i++) {
			if (x->r[i].lo > next)
				rc = add(x, next, x->r[i].lo - 1);
			next = x->r[i].hi + 1;
		}
		if (!rc && next <= GR_MAX_CP)
			rc = add(x, next, GR_MAX_CP);
		memmove(x->r + from, x->r + m, (x->nr - m) * sizeof(*x->r));
		x->nr -= m - from;
	}
	n = x->nr;
	for (uint32_t i = from; i < n && !rc; i++) {
		struct gcp_range r = x->r[i];

		if (r.hi < 0xd800 || r.lo > 0xdfff)
			continue;
		x->r[i].hi = r.lo < 0xd800 ? 0xd7ff : 0;
		x->r[i].lo = r.lo < 0xd800 ? r.lo : 1;
		if (r.hi > 0xdfff)
			rc = add(x, 0xe000, r.hi);
	}
	m = from;
	for (uint32_t i = from; i < x->nr; i++)
		if (x->r[i].lo <= x->r[i].hi)
			x->r[m++] = x->r[i];
	x->nr = m;
	if (x->nr > from)
		qsort(x->r + from, x->nr - from, sizeof(*x->r), cmp_range);
	return rc;
}

/* The set at FROM.. as grammar text; the scratch is given back. */
static int emit_set(struct rx *x, uint32_t from, bool neg, struct gbuf *out)
{
	int rc = normalize(x, from, neg);

	if (rc)
		return rc;
	if (x->nr == from)
		return rx_fail(x, -O1_E_FORMAT, "a class that matches nothing");
	gb_cpset(out, x->r + from, x->nr - from);
	x->nr = from;
	return 0;
}

static int hex(struct rx *x, int digits, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < digits || digits < 0; i++) {
		int c = peek(x), d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else if (digits < 0 && i > 0)
			return 0;
		else
			return rx_fail(x, -O1_E_FORMAT, "bad hex escape");
		*v = *v * 16 + (uint32_t)d;
		if (*v > GR_MAX_CP)
			return rx_fail(x, -O1_E_FORMAT, "escape past U+10FFFF");
		x->pos++;
	}
	return 0;
}

/* Adds the class escape \d \D \w \W \s \S named by C. */
static int class_escape(struct rx *x, int c)
{
	static const struct gcp_range digit[] = {{'0', '9'}};
	static const struct gcp_range word[] = {
		{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
	static const struct gcp_range space[] = {
		{9, 13},	   {' ', ' '},	     {0xa0, 0xa0},
		{0x1680, 0x1680},  {0x2000, 0x200a}, {0x2028, 0x2029},
		{0x202f, 0x202f},  {0x205f, 0x205f}, {0x3000, 0x3000},
		{0xfeff, 0xfeff}};
	const struct gcp_range *set = c == 'd' || c == 'D'   ? digit
				      : c == 'w' || c == 'W' ? word
							     : space;
	uint32_t n = set == digit ? 1 : set == word ? 4 : 10, from = x->nr;
	int rc = 0;

	for (uint32_t i = 0; i < n && !rc; i++)
		rc = add(x, set[i].lo, set[i].hi);
	if (!rc && c >= 'A' && c <= 'Z')
		rc = normalize(x, from, true);
	return rc;
}

/* One escaped character (after the backslash) as a code point; IN_CLASS
 * makes \b a backspace. */
static int char_escape(struct rx *x, bool in_class, uint32_t *cp)
{
	static const char simple[] = "tnrvf";
	static const uint8_t value[] = {9, 10, 13, 11, 12};
	int c = peek(x);
	const char *hit = c > 0 ? strchr(simple, c) : NULL;

	x->pos++;
	if (hit) {
		*cp = value[hit - simple];
		return 0;
	}
	switch (c) {
	case 'b':
		if (in_class) {
			*cp = 8;
			return 0;
		}
		return rx_fail(x, -O1_E_UNSUPPORTED, "\\b (word boundary)");
	case 'B':
		return rx_fail(x, -O1_E_UNSUPPORTED, "\\B (word boundary)");
	case '0':
		if (peek(x) >= '0' && peek(x) <= '9')
			return rx_fail(x, -O1_E_UNSUPPORTED, "octal escape");
		*cp = 0;
		return 0;
	case 'x':
		return hex(x, 2, cp);
	case 'u':
		if (peek(x) != '{')
			return hex(x, 4, cp);
		x->pos++;
		if (hex(x, -1, cp) || peek(x) != '}')
			return rx_fail(x, -O1_E_FORMAT, "bad \\u{} escape");
		x->pos++;
		return 0;
	case 'c':
		c = peek(x);
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
			return rx_fail(x, -O1_E_FORMAT, "bad \\c escape");
		x->pos++;
		*cp = (uint32_t)c % 32;
		return 0;
	case 'p':
	case 'P':
		return rx_fail(x, -O1_E_UNSUPPORTED,
			       "Unicode property escape");
	case 'k':
		return rx_fail(x, -O1_E_UNSUPPORTED, "named backreference");
	case -1:
		return rx_fail(x, -O1_E_FORMAT, "trailing backslash");
	default:
		if (c >= '1' && c <= '9')
			return rx_fail(x, -O1_E_UNSUPPORTED, "backreference");
		/* an identity escape: the character itself */
		x->pos--;
		c = o1_utf8_decode(x->s + x->pos, x->n - x->pos, cp);
		if (!c)
			return rx_fail(x, -O1_E_FORMAT, "invalid UTF-8");
		x->pos += (size_t)c;
		return 0;
	}
}

/* One class member: a character (or range start) or a class escape;
 * *CP is GR_NONE after a class escape. */
static int class_char(struct rx *x, uint32_t *cp)
{
	int n;

	if (peek(x) == '\\') {
		int c = x->pos + 1 < x->n ? x->s[x->pos + 1] : -1;

		if (c > 0 && strchr("dDwWsS", c)) {
			x->pos += 2;
			*cp = GR_NONE;
			return class_escape(x, c);
		}
		x->pos++;
		return char_escape(x, true, cp);
	}
	n = o1_utf8_decode(x->s + x->pos, x->n - x->pos, cp);
	if (!n)
		return rx_fail(x, -O1_E_FORMAT, "invalid UTF-8");
	x->pos += (size_t)n;
	return 0;
}

static int parse_class(struct rx *x, struct gbuf *out)
{
	uint32_t from = x->nr, lo, hi;
	bool neg = false;
	int rc = 0;

	x->pos++;
	if (peek(x) == '^') {
		neg = true;
		x->pos++;
	}
	while (!rc && peek(x) != ']') {
		if (peek(x) < 0)
			return rx_fail(x, -O1_E_FORMAT, "unterminated class");
		rc = class_char(x, &lo);
		if (rc || lo == GR_NONE)
			continue;
		hi = lo;
		if (peek(x) == '-' && x->pos + 1 < x->n &&
		    x->s[x->pos + 1] != ']') {
			x->pos++;
			rc = class_char(x, &hi);
			if (!rc && (hi == GR_NONE || hi < lo))
				return rx_fail(x, -O1_E_FORMAT,
					       "bad class range");
		}
		rc = rc ?: add(x, lo, hi);
	}
	if (rc)
		return rc;
	x->pos++;
	return emit_set(x, from, neg, out);
}

static int parse_alt(struct rx *x, bool top, struct gbuf *out);

static int parse_group(struct rx *x, struct gbuf *out)
{
	int rc;

	x->pos++;
	if (peek(x) == '?') {
		const char *r = (const char *)x->s + x->pos;
		size_t left = x->n - x->pos;

		if (left >= 2 && r[1] == ':') {
			x->pos += 2;
		} else if (left >= 3 && r[1] == '<' && r[2] != '=' &&
			   r[2] != '!') {
			while (peek(x) >= 0 && peek(x) != '>')
				x->pos++;
			x->pos++;
		} else {
			return rx_fail(x, -O1_E_UNSUPPORTED, "lookaround");
		}
	}
	if (++x->depth > 100)
		return rx_fail(x, -O1_E_FORMAT, "groups nested too deeply");
	gb_put(out, "(");
	rc = parse_alt(x, false, out);
	gb_put(out, ")");
	x->depth--;
	if (!rc && peek(x) != ')')
		return rx_fail(x, -O1_E_FORMAT, "unclosed (");
	x->pos++;
	return rc;
}

static int parse_atom(struct rx *x, struct gbuf *out)
{
	uint32_t cp, from = x->nr;
	int c = peek(x), rc, n;

	switch (c) {
	case '(':
		return parse_group(x, out);
	case '[':
		return parse_class(x, out);
	case '.':
		x->pos++;
		rc = add(x, '\n', '\n') ?: add(x, '\r', '\r');
		rc = rc ?: add(x, 0x2028, 0x2029);
		return rc ?: emit_set(x, from, true, out);
	case '*':
	case '+':
	case '?':
		return rx_fail(x, -O1_E_FORMAT, "nothing to repeat");
	case '^':
	case '$':
		return rx_fail(x, -O1_E_UNSUPPORTED,
			       "an anchor inside the pattern");
	case '\\':
		c = x->pos + 1 < x->n ? x->s[x->pos + 1] : -1;
		if (c > 0 && strchr("dDwWsS", c)) {
			x->pos += 2;
			rc = class_escape(x, c);
			return rc ?: emit_set(x, from, false, out);
		}
		x->pos++;
		rc = char_escape(x, false, &cp);
		break;
	default:
		n = o1_utf8_decode(x->s + x->pos, x->n - x->pos, &cp);
		rc = n ? 0 : rx_fail(x, -O1_E_FORMAT, "invalid UTF-8");
		x->pos += (size_t)n;
	}
	if (rc)
		return rc;
	if (cp >= 0xd800 && cp <= 0xdfff)
		return rx_fail(x, -O1_E_UNSUPPORTED, "a lone surrogate");
	rc = add(x, cp, cp);
	return rc ?: emit_set(x, from, false, out);
}

/* Decimal digits at *P (saturating at 10^9); false when there are none. */
static bool number(const struct rx *x, size_t *p, uint64_t *v)
{
	size_t start = *p;

	*v = 0;
	for (; *p < x->n && x->s[*p] >= '0' && x->s[*p] <= '9'; (*p)++) {
		*v = *v * 10 + (uint64_t)(x->s[*p] - '0');
		if (*v > 1000000000)
			*v = 1000000000;
	}
	return *p > start;
}

/* {n}, {n,}, {n,m} at the cursor: 1 and the bounds, or 0 when the brace
 * is a literal. */
static int braces(struct rx *x, uint32_t *min, uint32_t *max)
{
	size_t p = x->pos + 1;
	uint64_t a, b = GR_INF;
	bool comma = false;

	if (!number(x, &p, &a))
		return 0;
	if (p < x->n && x->s[p] == ',') {
		comma = true;
		p++;
		if (!number(x, &p, &b))
			b = GR_INF;
	}
	if (p >= x->n || x->s[p] != '}')
		return 0;
	x->pos = p + 1;
	*min = (uint32_t)a;
	*max = comma ? (uint32_t)b : (uint32_t)a;
	if (a > GR_MAX_REP || (*max != GR_INF && *max > GR_MAX_REP))
		return rx_fail(x, -O1_E_UNSUPPORTED, "repetition over 10000");
	if (*max < *min)
		return rx_fail(x, -O1_E_FORMAT, "repetition max below min");
	return 1;
}

static int quantifier(struct rx *x, struct gbuf *out)
{
	uint32_t min, max;
	int c = peek(x), rc = 0;

	if (c == '*' || c == '+' || c == '?') {
		gb_printf(out, "%c", c);
		x->pos++;
	} else if (c == '{') {
		rc = braces(x, &min, &max);
		if (rc <= 0)
			return rc;
		if (max == GR_INF)
			gb_printf(out, "{%u,}", min);
		else
			gb_printf(out, "{%u,%u}", min, max);
	} else {
		return 0;
	}
	if (peek(x) == '?')
		x->pos++; /* lazy: the same language */
	c = peek(x);
	if (c == '*' || c == '+' || c == '?' ||
	    (c == '{' && (rc = braces(x, &min, &max)) != 0))
		return rc < 0 ? rc : rx_fail(x, -O1_E_FORMAT, "nothing to repeat");
	return 0;
}

static bool branch_end(const struct rx *x)
{
	int c = peek(x);

	return c < 0 || c == '|' || c == ')';
}

/* One alternative; at the top it may start with ^ and end with $. */
static int parse_seq(struct rx *x, bool top, struct gbuf *out)
{
	bool start = false, end = false;
	int rc = 0;

	if (top && peek(x) == '^') {
		start = true;
		x->pos++;
	}
	if (top && !start)
		gb_put(out, GS_CCHAR "* ");
	while (!rc && !branch_end(x)) {
		if (top && peek(x) == '$' && x->pos + 1 <= x->n) {
			x->pos++;
			if (branch_end(x)) {
				end = true;
				break;
			}
			x->pos--;
		}
		gb_put(out, "(");
		rc = parse_atom(x, out);
		gb_put(out, ")");
		rc = rc ?: quantifier(x, out);
		gb_put(out, " ");
	}
	if (top && !end)
		gb_put(out, GS_CCHAR "*");
	return rc;
}

static int parse_alt(struct rx *x, bool top, struct gbuf *out)
{
	int rc;

	gb_put(out, "(");
	rc = parse_seq(x, top, out);
	while (!rc && peek(x) == '|') {
		x->pos++;
		gb_put(out, " | ");
		rc = parse_seq(x, top, out);
	}
	gb_put(out, ")");
	return rc;
}

int gr_regex(const char *re, size_t len, struct gbuf *out, char *why,
	     size_t why_len)
{
	struct rx x = {.s = (const uint8_t *)re,
		       .n = len,
		       .why = why,
		       .why_len = why_len};
	int rc = parse_alt(&x, true, out);

	if (!rc && x.pos < x.n)
		rc = rx_fail(&x, -O1_E_FORMAT, "unmatched )");
	if (rc == -ENOMEM)
		snprintf(why, why_len, "out of memory");
	free(x.r);
	return rc;
}

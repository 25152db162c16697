/* Text pieces for the JSON Schema compiler: the growing buffer, grammar
 * literals, canonical JSON (grammar_schema.h), sets of characters as the
 * canonical escapes a JSON string holds them in, and integer ranges as
 * alternatives over decimal digits (a range is cut by digit count, then
 * each same-length range by its leading digit, the textbook construction).
 */
#include "grammar/grammar_schema_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/utf8.h"

void gb_putn(struct gbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void gb_put(struct gbuf *b, const char *s)
{
	gb_putn(b, s, strlen(s));
}

void gb_printf(struct gbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		b->oom = true;
	else
		gb_putn(b, tmp, (size_t)n);
}

void gb_lit(struct gbuf *b, const char *s, size_t n)
{
	gb_put(b, "\"");
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)s[i];

		if (c == '"' || c == '\\')
			gb_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			gb_printf(b, "\\x%02x", c);
		else
			gb_putn(b, s + i, 1);
	}
	gb_put(b, "\"");
}

/* The canonical JSON escape of CP into OUT (a UTF-8 character when none
 * is needed); returns its length. */
static int json_escape(uint32_t cp, char *out)
{
	static const char named[] = "btn\0fr";

	if (cp == '"' || cp == '\\') {
		out[0] = '\\';
		out[1] = (char)cp;
		return 2;
	}
	if (cp >= 8 && cp <= 13 && named[cp - 8]) {
		out[0] = '\\';
		out[1] = named[cp - 8];
		return 2;
	}
	if (cp < 0x20)
		return sprintf(out, "\\u%04x", cp);
	return (int)o1_utf8_encode(cp, out);
}

static bool special(uint32_t cp)
{
	return cp < 0x20 || cp == '"' || cp == '\\';
}

static void put_cp(struct gbuf *b, uint32_t cp)
{
	gb_printf(b, cp > 0xffff ? "\\U%08X" : "\\u%04X", cp);
}

/* The code points a string holds raw: all but the specials. */
static const struct gcp_range raw_ranges[] = {
	{0x20, 0x21}, {0x23, 0x5b}, {0x5d, GR_MAX_CP}};

void gb_cpset(struct gbuf *b, const struct gcp_range *r, uint32_t n)
{
	bool first = true, open = false;

	gb_put(b, "(");
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t cp = r[i].lo; cp <= r[i].hi && cp < 0x80; cp++) {
			char esc[8];

			if (!special(cp))
				continue;
			gb_put(b, first ? "" : " | ");
			gb_lit(b, esc, (size_t)json_escape(cp, esc));
			first = false;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		for (int k = 0; k < 3; k++) {
			uint32_t lo = r[i].lo > raw_ranges[k].lo
					      ? r[i].lo
					      : raw_ranges[k].lo;
			uint32_t hi = r[i].hi < raw_ranges[k].hi
					      ? r[i].hi
					      : raw_ranges[k].hi;

			if (lo > hi)
				continue;
			if (!open)
				gb_put(b, first ? "[" : " | [");
			open = true;
			put_cp(b, lo);
			if (hi > lo) {
				gb_put(b, "-");
				put_cp(b, hi);
			}
		}
	}
	gb_put(b, open ? "])" : ")");
}

void gs_json_number(double x, char out[40])
{
	if (x == floor(x) && fabs(x) < 1e17) {
		snprintf(out, 40, "%.0f", x == 0 ? 0.0 : x);
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(out, 40, "%.*g", prec, x);
		if (strtod(out, NULL) == x)
			return;
	}
}

int gs_json_string(struct gbuf *b, const char *s)
{
	size_t len = strlen(s);

	gb_put(b, "\"");
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		char esc[8];
		int n = o1_utf8_decode(s + i, len - i, &cp);

		if (!n)
			return -O1_E_FORMAT;
		gb_putn(b, esc, (size_t)json_escape(cp, esc));
		i += (size_t)n;
	}
	gb_put(b, "\"");
	return 0;
}

static int cmp_member(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string,
		      (*(const cJSON *const *)b)->string);
}

/* Members sorted by key (byte order): one text per object value. */
static int write_object(struct gbuf *b, const cJSON *v)
{
	int n = cJSON_GetArraySize(v), i = 0, rc = 0;
	const cJSON **m = malloc((size_t)(n ? n : 1) * sizeof(*m));

	if (!m)
		return -ENOMEM;
	for (const cJSON *c = v->child; c; c = c->next)
		m[i++] = c;
	qsort(m, (size_t)n, sizeof(*m), cmp_member);
	gb_put(b, "{");
	for (i = 0; i < n && !rc; i++) {
		gb_put(b, i ? "," : "");
		rc = gs_json_string(b, m[i]->string);
		gb_put(b, ":");
		rc = rc ?: gs_json_write(b, m[i]);
	}
	gb_put(b, "}");
	free(m);
	return rc;
}

int gs_json_write(struct gbuf *b, const cJSON *v)
{
	char num[40];
	int rc = 0;

	if (cJSON_IsNull(v))
		gb_put(b, "null");
	else if (cJSON_IsTrue(v))
		gb_put(b, "true");
	else if (cJSON_IsFalse(v))
		gb_put(b, "false");
	else if (cJSON_IsNumber(v) && isfinite(v->valuedouble))
		gs_json_number(v->valuedouble, num), gb_put(b, num);
	else if (cJSON_IsString(v))
		rc = gs_json_string(b, v->valuestring);
	else if (cJSON_IsArray(v)) {
		gb_put(b, "[");
		for (const cJSON *c = v->child; c && !rc; c = c->next) {
			if (c != v->child)
				gb_put(b, ",");
			rc = gs_json_write(b, c);
		}
		gb_put(b, "]");
	} else if (cJSON_IsObject(v)) {
		rc = write_object(b, v);
	} else {
		rc = -O1_E_FORMAT;
	}
	return rc;
}

static void fill(char *s, char c, size_t n)
{
	memset(s, c, n);
	s[n] = 0;
}

/* L-digit strings (leading zeros kept) from X to Y, X <= Y. */
static void same_len(struct gbuf *b, const char *x, const char *y, size_t L)
{
	char nines[24], zeros[24];
	char lo = x[0], hi = y[0];
	bool first = true;

	if (!L)
		return;
	if (L == 1) {
		gb_printf(b, "[%c-%c]", lo, hi);
		return;
	}
	if (lo == hi) {
		gb_printf(b, "\"%c\" ", lo);
		same_len(b, x + 1, y + 1, L - 1);
		return;
	}
	fill(nines, '9', L - 1);
	fill(zeros, '0', L - 1);
	gb_put(b, "(");
	if (strcmp(x + 1, zeros)) {
		gb_printf(b, "\"%c\" ", lo++);
		same_len(b, x + 1, nines, L - 1);
		first = false;
	}
	if (strcmp(y + 1, nines))
		hi--;
	if (lo <= hi) {
		gb_printf(b, "%s[%c-%c] [0-9]{%zu}", first ? "" : " | ", lo, hi,
			  L - 1);
		first = false;
	}
	if (strcmp(y + 1, nines)) {
		gb_printf(b, "%s\"%c\" ", first ? "" : " | ", y[0]);
		same_len(b, zeros, y + 1, L - 1);
	}
	gb_put(b, ")");
}

static uint64_t pow10u(size_t n)
{
	uint64_t p = 1;

	while (n--)
		p *= 10;
	return p;
}

/* Non-negative integers from A to B; without B (HAS_B false) every
 * integer from A with up to max(GS_INT_DIGITS, digits of A) digits. */
static void pos_range(struct gbuf *b, uint64_t a, bool has_b, uint64_t hi)
{
	char x[24], y[24];
	size_t la = (size_t)snprintf(x, sizeof(x), "%llu",
				     (unsigned long long)a);
	size_t lb = has_b ? (size_t)snprintf(y, sizeof(y), "%llu",
					     (unsigned long long)hi)
			  : la;

	gb_put(b, "(");
	for (size_t L = la; L <= lb; L++) {
		uint64_t lo = L == la ? a : pow10u(L - 1);
		uint64_t top = L == lb && has_b ? hi : pow10u(L) - 1;

		snprintf(x, sizeof(x), "%llu", (unsigned long long)lo);
		snprintf(y, sizeof(y), "%llu", (unsigned long long)top);
		gb_put(b, L == la ? "" : " | ");
		same_len(b, x, y, L);
	}
	if (!has_b && la < GS_INT_DIGITS)
		gb_printf(b, " | [1-9] [0-9]{%zu,%d}", la, GS_INT_DIGITS - 1);
	gb_put(b, ")");
}

void gs_int_range(struct gbuf *b, bool has_lo, int64_t lo, bool has_hi,
		  int64_t hi)
{
	bool neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;

	gb_put(b, "(");
	if (neg) {
		uint64_t mlo = has_hi && hi < 0 ? (uint64_t)-hi : 1;

		gb_put(b, "\"-\" ");
		pos_range(b, mlo, has_lo, has_lo ? (uint64_t)-lo : 0);
	}
	if (pos) {
		gb_put(b, neg ? " | " : "");
		pos_range(b, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi,
			  has_hi ? (uint64_t)hi : 0);
	}
	gb_put(b, ")");
}

/* Names in `properties` and `required` lists, in document order. */
struct names {
	const char **v;
	size_t n, cap;
};

static int add_name(struct names *o, const char *name)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->v[i], name))
			return 0;
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 16;
		const char **v = realloc(o->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		o->v = v;
		o->cap = cap;
	}
	o->v[o->n++] = name;
	return 0;
}

static int collect(const cJSON *s, struct names *o, int depth)
{
	const cJSON *p = NULL, *r = NULL;
	int rc = 0;

	if (depth > 200)
		return 0;
	if (cJSON_IsObject(s)) {
		p = cJSON_GetObjectItemCaseSensitive(s, "properties");
		r = cJSON_GetObjectItemCaseSensitive(s, "required");
	}
	for (const cJSON *x = cJSON_IsObject(p) ? p->child : NULL; x && !rc;
	     x = x->next)
		rc = add_name(o, x->string);
	for (const cJSON *x = cJSON_IsArray(r) ? r->child : NULL; x && !rc;
	     x = x->next)
		if (cJSON_IsString(x))
			rc = add_name(o, x->valuestring);
	for (const cJSON *x = s ? s->child : NULL; x && !rc; x = x->next)
		rc = collect(x, o, depth + 1);
	return rc;
}

static size_t rank(const struct names *o, const char *name)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->v[i], name))
			return i;
	return o->n;
}

static int canonical(struct gbuf *b, const cJSON *v, const struct names *o);

static int canonical_object(struct gbuf *b, const cJSON *v,
			    const struct names *o)
{
	int n = cJSON_GetArraySize(v), i = 0, rc = 0, k = 0;
	const cJSON **m = malloc((size_t)(n ? n : 1) * sizeof(*m));

	if (!m)
		return -ENOMEM;
	for (const cJSON *c = v->child; c; c = c->next)
		m[i++] = c;
	qsort(m, (size_t)n, sizeof(*m), cmp_member);
	gb_put(b, "{");
	for (size_t r = 0; r <= o->n && !rc; r++) {
		for (i = 0; i < n && !rc; i++) {
			if (rank(o, m[i]->string) != r)
				continue;
			gb_put(b, k++ ? "," : "");
			rc = gs_json_string(b, m[i]->string);
			gb_put(b, ":");
			rc = rc ?: canonical(b, m[i], o);
		}
	}
	gb_put(b, "}");
	free(m);
	return rc;
}

static int canonical(struct gbuf *b, const cJSON *v, const struct names *o)
{
	int rc = 0;

	if (cJSON_IsObject(v))
		return canonical_object(b, v, o);
	if (!cJSON_IsArray(v))
		return gs_json_write(b, v);
	gb_put(b, "[");
	for (const cJSON *c = v->child; c && !rc; c = c->next) {
		gb_put(b, c != v->child ? "," : "");
		rc = canonical(b, c, o);
	}
	gb_put(b, "]");
	return rc;
}

int o1_grammar_schema_canonical(const char *schema, size_t slen,
				const char *instance, size_t ilen, char **out,
				size_t *out_len)
{
	cJSON *s = cJSON_ParseWithLength(schema, slen);
	cJSON *v = cJSON_ParseWithLength(instance, ilen);
	struct names o = {0};
	struct gbuf b = {0};
	int rc = s && v ? collect(s, &o, 0) : -O1_E_FORMAT;

	rc = rc ?: canonical(&b, v, &o);
	rc = rc ?: b.oom ? -ENOMEM : 0;
	if (!rc) {
		*out = b.p;
		*out_len = b.n;
	} else {
		free(b.p);
	}
	free(o.v);
	cJSON_Delete(s);
	cJSON_Delete(v);
	return rc;
}

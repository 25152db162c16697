/* Jinja values as Python sees them: lists and insertion-ordered dicts in
 * the render arena, conversion from cJSON, truthiness, == and <, and
 * str()/repr() text exactly as Python prints it (floats in their shortest
 * round-trip form, strings quoted and escaped like repr).
 *
 * Values built from a template can nest without bound (a namespace that
 * wraps itself in a loop), so every recursive walk here stops at
 * MAX_NEST levels with an error instead of overflowing the stack.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_int.h"

enum { MAX_NEST = 500, INDEX_MIN = 8 };

struct jlist *jv_list_new(struct jctx *c, const struct jnode *at, size_t cap)
{
	struct jlist *l = jr_alloc(c, at, sizeof(*l));

	l->n = 0;
	l->cap = cap;
	l->v = cap ? jr_alloc(c, at, cap * sizeof(*l->v)) : NULL;
	return l;
}

void jv_list_push(struct jctx *c, const struct jnode *at, struct jlist *l,
		  struct jv v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4;
		struct jv *nv = jr_alloc(c, at, cap * sizeof(*nv));

		if (l->n)
			memcpy(nv, l->v, l->n * sizeof(*nv));
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
}

struct jdict *jv_dict_new(struct jctx *c, const struct jnode *at, size_t cap)
{
	struct jdict *d = jr_alloc(c, at, sizeof(*d));

	*d = (struct jdict){.cap = cap};
	if (cap) {
		d->k = jr_alloc(c, at, cap * sizeof(*d->k));
		d->v = jr_alloc(c, at, cap * sizeof(*d->v));
	}
	return d;
}

static uint64_t hash_bytes(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h;
}

/* Equal keys hash equal: 1, 1.0 and true are one key, as in Python. */
static uint64_t key_hash(struct jv k)
{
	switch (k.type) {
	case JV_STR:
		return hash_bytes(k.u.s.p, k.u.s.n);
	case JV_INT:
		return (uint64_t)k.u.i * 0x9e3779b97f4a7c15ull;
	case JV_BOOL:
		return (uint64_t)k.u.b * 0x9e3779b97f4a7c15ull;
	case JV_FLOAT:
		if (k.u.f == floor(k.u.f) && fabs(k.u.f) < 9.2e18)
			return (uint64_t)(int64_t)k.u.f * 0x9e3779b97f4a7c15ull;
		return hash_bytes((const char *)&k.u.f, sizeof(k.u.f));
	default:
		return (uint64_t)k.type;
	}
}

static bool equal_at(struct jv a, struct jv b, int depth);

static bool list_equal(const struct jlist *a, const struct jlist *b,
		       int depth)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (!equal_at(a->v[i], b->v[i], depth + 1))
			return false;
	return true;
}

static bool dict_equal(const struct jdict *a, const struct jdict *b,
		       int depth)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct jv *v = jv_dict_get(b, a->k[i]);

		if (!v || !equal_at(a->v[i], *v, depth + 1))
			return false;
	}
	return true;
}

/* Python ==; too deep a nesting compares unequal (a limit, not a crash). */
static bool equal_at(struct jv a, struct jv b, int depth)
{
	if (depth > MAX_NEST)
		return false;
	if (jv_is_number(a) && jv_is_number(b)) {
		if (a.type == JV_FLOAT || b.type == JV_FLOAT)
			return jv_as_double(a) == jv_as_double(b);
		return (a.type == JV_INT ? a.u.i : a.u.b) ==
		       (b.type == JV_INT ? b.u.i : b.u.b);
	}
	if (a.type != b.type)
		return false;
	switch (a.type) {
	case JV_UNDEF:
	case JV_NONE:
		return true;
	case JV_STR:
		return jstr_same(a.u.s, b.u.s);
	case JV_LIST:
		if (a.sub == JV_GEN || b.sub == JV_GEN)
			return a.u.l == b.u.l;
		return a.sub == b.sub && list_equal(a.u.l, b.u.l, depth);
	case JV_DICT:
		if (a.sub == JV_NS || b.sub == JV_NS)
			return a.u.d == b.u.d;
		return dict_equal(a.u.d, b.u.d, depth);
	case JV_FUNC:
		return a.u.fn == b.u.fn;
	case JV_LOOP:
		return a.u.loop == b.u.loop;
	default:
		return false;
	}
}

bool jv_equal(struct jctx *c, const struct jnode *at, struct jv a, struct jv b)
{
	(void)c;
	(void)at;
	return equal_at(a, b, 0);
}

static void index_insert(struct jdict *d, size_t entry)
{
	size_t mask = d->idx_cap - 1, slot = key_hash(d->k[entry]) & mask;

	while (d->idx[slot])
		slot = (slot + 1) & mask;
	d->idx[slot] = (uint32_t)entry + 1;
}

/* (Re)builds the hash index at twice the entries' capacity. */
static void index_build(struct jctx *c, const struct jnode *at,
			struct jdict *d)
{
	size_t cap = 16;

	while (cap < d->cap * 2)
		cap *= 2;
	d->idx = jr_alloc(c, at, cap * sizeof(*d->idx));
	memset(d->idx, 0, cap * sizeof(*d->idx));
	d->idx_cap = cap;
	for (size_t i = 0; i < d->n; i++)
		index_insert(d, i);
}

struct jv *jv_dict_get(const struct jdict *d, struct jv k)
{
	size_t mask, slot;

	if (!d->idx) {
		for (size_t i = 0; i < d->n; i++)
			if (equal_at(d->k[i], k, 0))
				return &d->v[i];
		return NULL;
	}
	mask = d->idx_cap - 1;
	for (slot = key_hash(k) & mask; d->idx[slot]; slot = (slot + 1) & mask)
		if (equal_at(d->k[d->idx[slot] - 1], k, 0))
			return &d->v[d->idx[slot] - 1];
	return NULL;
}

struct jv *jv_dict_gets(const struct jdict *d, const char *key, size_t n)
{
	return jv_dict_get(d, jv_str(key, n));
}

static void dict_grow(struct jctx *c, const struct jnode *at,
		      struct jdict *d)
{
	size_t cap = d->cap ? d->cap * 2 : 4;
	struct jv *k = jr_alloc(c, at, cap * sizeof(*k));
	struct jv *v = jr_alloc(c, at, cap * sizeof(*v));

	if (d->n) {
		memcpy(k, d->k, d->n * sizeof(*k));
		memcpy(v, d->v, d->n * sizeof(*v));
	}
	d->k = k;
	d->v = v;
	d->cap = cap;
	if (d->cap >= INDEX_MIN)
		index_build(c, at, d);
}

void jv_dict_set(struct jctx *c, const struct jnode *at, struct jdict *d,
		 struct jv k, struct jv v)
{
	struct jv *old = jv_dict_get(d, k);

	if (old) {
		*old = v;
		return;
	}
	if (d->n == d->cap)
		dict_grow(c, at, d);
	else if (!d->idx && d->cap >= INDEX_MIN)
		index_build(c, at, d);
	d->k[d->n] = k;
	d->v[d->n] = v;
	if (d->idx)
		index_insert(d, d->n);
	d->n++;
}

static int cjson_count(const cJSON *j)
{
	int n = 0;

	for (const cJSON *it = j->child; it; it = it->next)
		n++;
	return n;
}

/* JSON numbers: integral values within 2^53 are ints (cJSON keeps no
 * text, so 1.0 reads as 1), the rest floats. */
static struct jv number(const cJSON *j)
{
	double d = j->valuedouble;

	if (d == floor(d) && fabs(d) <= 9007199254740992.0)
		return jv_int((int64_t)d);
	return jv_float(d);
}

struct jv jv_from_json(struct jctx *c, const cJSON *j)
{
	struct jlist *l;
	struct jdict *d;

	if (!j)
		return jv_none();
	if (cJSON_IsBool(j))
		return jv_bool(cJSON_IsTrue(j));
	if (cJSON_IsNumber(j))
		return number(j);
	if (cJSON_IsString(j) && j->valuestring)
		return jv_str(j->valuestring, strlen(j->valuestring));
	if (cJSON_IsArray(j)) {
		l = jv_list_new(c, NULL, (size_t)cjson_count(j));
		for (const cJSON *it = j->child; it; it = it->next)
			jv_list_push(c, NULL, l, jv_from_json(c, it));
		return jv_list(l);
	}
	if (cJSON_IsObject(j)) {
		d = jv_dict_new(c, NULL, (size_t)cjson_count(j));
		for (const cJSON *it = j->child; it; it = it->next)
			if (it->string)
				jv_dict_set(c, NULL, d,
					    jv_str(it->string,
						   strlen(it->string)),
					    jv_from_json(c, it));
		return jv_dict(d);
	}
	return jv_none();
}

bool jv_truthy(struct jv v)
{
	switch (v.type) {
	case JV_UNDEF:
	case JV_NONE:
		return false;
	case JV_BOOL:
		return v.u.b;
	case JV_INT:
		return v.u.i != 0;
	case JV_FLOAT:
		return v.u.f != 0;
	case JV_STR:
		return v.u.s.n > 0;
	case JV_LIST:
		return v.sub == JV_GEN || v.u.l->n > 0;
	case JV_DICT:
		return v.sub == JV_NS || v.u.d->n > 0;
	default:
		return true;
	}
}

bool jv_is_number(struct jv v)
{
	return v.type == JV_INT || v.type == JV_FLOAT || v.type == JV_BOOL;
}

double jv_as_double(struct jv v)
{
	return v.type == JV_FLOAT ? v.u.f
	       : v.type == JV_INT ? (double)v.u.i
				  : (double)v.u.b;
}

const char *jv_type_name(struct jv v)
{
	static const char *const names[] = {
	    [JV_UNDEF] = "Undefined", [JV_NONE] = "NoneType",
	    [JV_BOOL] = "bool",	      [JV_INT] = "int",
	    [JV_FLOAT] = "float",     [JV_STR] = "str",
	    [JV_LIST] = "list",	      [JV_DICT] = "dict",
	    [JV_FUNC] = "function",   [JV_LOOP] = "LoopContext",
	};

	static const char *const lists[] = {
	    [JV_PLAIN] = "list",      [JV_TUPLE] = "tuple",
	    [JV_GEN] = "generator",   [JV_KEYS] = "dict_keys",
	    [JV_VALUES] = "dict_values", [JV_ITEMS] = "dict_items",
	};

	if (v.type == JV_LIST && v.sub < sizeof(lists) / sizeof(lists[0]))
		return lists[v.sub];
	if (v.type == JV_DICT && v.sub == JV_NS)
		return "Namespace";
	return names[v.type];
}

static int compare_at(struct jctx *c, const struct jnode *at, struct jv a,
		      struct jv b, int depth);

static int list_compare(struct jctx *c, const struct jnode *at,
			const struct jlist *a, const struct jlist *b,
			int depth)
{
	for (size_t i = 0; i < a->n && i < b->n; i++) {
		if (equal_at(a->v[i], b->v[i], depth + 1))
			continue;
		return compare_at(c, at, a->v[i], b->v[i], depth + 1);
	}
	return a->n < b->n ? -1 : a->n > b->n;
}

static int compare_at(struct jctx *c, const struct jnode *at, struct jv a,
		      struct jv b, int depth)
{
	if (depth > MAX_NEST)
		jr_fail(c, at, "values nested too deeply to compare");
	if (jv_is_number(a) && jv_is_number(b)) {
		if (a.type == JV_INT && b.type == JV_INT)
			return a.u.i < b.u.i ? -1 : a.u.i > b.u.i;
		double x = jv_as_double(a), y = jv_as_double(b);

		return x < y ? -1 : x > y;
	}
	if (a.type == JV_STR && b.type == JV_STR) {
		size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
		int r = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0;

		if (r)
			return r < 0 ? -1 : 1;
		return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
	}
	if (jv_is_seq(a) && jv_is_seq(b) && a.sub == b.sub)
		return list_compare(c, at, a.u.l, b.u.l, depth);
	jr_fail(c, at, "'<' not supported between instances of '%s' and '%s'",
		jv_type_name(a), jv_type_name(b));
}

int jv_compare(struct jctx *c, const struct jnode *at, struct jv a,
	       struct jv b)
{
	return compare_at(c, at, a, b, 0);
}

/* Growable buffers: the top-level output is malloc'd and capped at
 * max_output; captures (macros, set blocks) live in the arena. */
static void buf_grow(struct jctx *c, const struct jnode *at, struct jbuf *b,
		     size_t need)
{
	size_t cap = b->cap ? b->cap : 64;
	char *p;

	while (cap < need)
		cap = cap * 2 < need ? need : cap * 2;
	if (b->top) {
		if (need > c->max_output)
			jfail(&c->f, O1_JINJA_ERR_LIMIT, at ? at->line : 0,
			      at ? at->col : 0,
			      "rendered text exceeds %zu bytes", c->max_output);
		if (cap > c->max_output + 1)
			cap = c->max_output + 1;
		p = realloc(b->p, cap);
		if (!p)
			jfail(&c->f, O1_JINJA_ERR_NOMEM, 0, 0, "out of memory");
	} else {
		p = jr_alloc(c, at, cap);
		if (b->n)
			memcpy(p, b->p, b->n);
	}
	b->p = p;
	b->cap = cap;
}

void jbuf_put(struct jctx *c, const struct jnode *at, struct jbuf *b,
	      const char *s, size_t n)
{
	if (!n)
		return;
	if (b->n + n + 1 > b->cap)
		buf_grow(c, at, b, b->n + n + 1);
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

struct jstr jbuf_str(struct jbuf *b)
{
	return (struct jstr){b->p ? b->p : "", b->n};
}

void jv_format_float(double f, char *out, size_t cap)
{
	char e[40], digits[24];
	int prec, exp, nd = 0, decpt;
	char *p;

	if (isnan(f) || isinf(f)) {
		snprintf(out, cap, "%s", isnan(f) ? "nan" : f < 0 ? "-inf" : "inf");
		return;
	}
	for (prec = 0; prec < 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec, f);
		if (strtod(e, NULL) == f)
			break;
	}
	for (p = e + (e[0] == '-'); *p && *p != 'e'; p++)
		if (*p != '.')
			digits[nd++] = *p;
	digits[nd] = 0;
	while (nd > 1 && digits[nd - 1] == '0')
		digits[--nd] = 0;
	exp = atoi(p + 1);
	decpt = exp + 1;
	p = out;
	if (signbit(f))
		*p++ = '-';
	if (decpt > -4 && decpt <= 16) {
		if (decpt <= 0)
			snprintf(p, cap - 1, "0.%.*s%s", -decpt,
				 "0000", digits);
		else if (decpt >= nd)
			snprintf(p, cap - 1, "%s%.*s.0", digits, decpt - nd,
				 "0000000000000000");
		else
			snprintf(p, cap - 1, "%.*s.%s", decpt, digits,
				 digits + decpt);
	} else {
		snprintf(p, cap - 1, "%c%s%s%se%c%02d", digits[0],
			 nd > 1 ? "." : "", digits + 1, "", exp < 0 ? '-' : '+',
			 exp < 0 ? -exp : exp);
	}
}

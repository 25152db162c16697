/* Jinja filters: jinja2's built-in filters that chat templates use, with
 * the same arguments and results, plus transformers' tojson (json.dumps
 * with ensure_ascii, indent, separators and sort_keys; positional
 * arguments in that order, as transformers' function takes them).
 *
 * Not provided (a template naming one fails to parse, as jinja2 fails for
 * an unknown filter): batch, filesizeformat, groupby, random, slice,
 * striptags, truncate, urlencode, urlize, wordwrap, xmlattr.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_int.h"

#define FILTER(name)                                                           \
	static struct jv f_##name(struct jctx *c, const struct jnode *at,      \
				  struct jv in, const struct jargs *args)

static struct jv str_v(struct jstr s)
{
	return (struct jv){.type = JV_STR, .u.s = s};
}

/* What jinja2 returns as a generator (map, select, unique, ...). */
static struct jv jv_gen(struct jlist *l)
{
	return (struct jv){.type = JV_LIST, .sub = JV_GEN, .u.l = l};
}

/* soft_str: str() of anything, "" for undefined. */
static struct jstr text(struct jctx *c, const struct jnode *at, struct jv v)
{
	return jv_to_str(c, at, v);
}

static void no_args(struct jctx *c, const struct jnode *at,
		    const struct jargs *args)
{
	static const char *const none[] = {NULL};
	struct jv unused;

	jargs_bind(c, at, "filter", args, none, &unused);
}

static int64_t int_arg(struct jctx *c, const struct jnode *at, struct jv v,
		       int64_t dflt)
{
	if (jv_missing(v) || v.type == JV_NONE)
		return dflt;
	if (v.type == JV_INT)
		return v.u.i;
	if (v.type == JV_BOOL)
		return v.u.b;
	jr_fail(c, at, "an integer is required, not '%s'", jv_type_name(v));
}

static bool bool_arg(struct jv v, bool dflt)
{
	return jv_missing(v) ? dflt : jv_truthy(v);
}

static struct jstr *chars_arg(struct jctx *c, const struct jnode *at,
			      struct jv v, struct jstr *store)
{
	if (jv_missing(v) || v.type == JV_NONE)
		return NULL;
	if (v.type != JV_STR)
		jr_fail(c, at, "strip arg must be None or str");
	*store = v.u.s;
	return store;
}

FILTER(trim)
{
	static const char *const names[] = {"chars", NULL};
	struct jv a[1];
	struct jstr chars;

	jargs_bind(c, at, "trim", args, names, a);
	return str_v(ju_strip(text(c, at, in), chars_arg(c, at, a[0], &chars),
			      true, true));
}

static struct jv case_filter(struct jctx *c, const struct jnode *at,
			     struct jv in, const struct jargs *args,
			     enum ju_case how)
{
	no_args(c, at, args);
	return str_v(ju_case(c, at, text(c, at, in), how));
}

FILTER(upper) { return case_filter(c, at, in, args, JU_UPPER); }
FILTER(lower) { return case_filter(c, at, in, args, JU_LOWER); }
FILTER(capitalize) { return case_filter(c, at, in, args, JU_CAPITALIZE); }

static bool title_separator(uint32_t cp)
{
	return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' ||
	       ju_isspace(cp);
}

/* jinja2's title: the first letter of each word (after "-", brackets or
 * whitespace) upper-cased, the rest lower-cased. */
FILTER(title)
{
	struct jstr s = text(c, at, in), one;
	struct jbuf b = {0};
	bool word_start = true;
	size_t i = 0;

	no_args(c, at, args);
	while (i < s.n) {
		size_t start = i;
		uint32_t cp = ju_next(s, &i);

		one = ju_case(c, at, (struct jstr){s.p + start, i - start},
			      word_start ? JU_UPPER : JU_LOWER);
		jbuf_put(c, at, &b, one.p, one.n);
		word_start = title_separator(cp);
	}
	return str_v(jbuf_str(&b));
}

FILTER(length)
{
	no_args(c, at, args);
	switch (in.type) {
	case JV_UNDEF:
		return jv_int(0);
	case JV_STR:
		return jv_int((int64_t)ju_len(in.u.s));
	case JV_LIST:
		if (in.sub == JV_GEN)
			break;
		return jv_int((int64_t)in.u.l->n);
	case JV_DICT:
		if (in.sub != JV_NS)
			return jv_int((int64_t)in.u.d->n);
		break;
	default:
		break;
	}
	jr_fail(c, at, "object of type '%s' has no len()", jv_type_name(in));
}

FILTER(default)
{
	static const char *const names[] = {"default_value", "boolean", NULL};
	struct jv a[2];

	jargs_bind(c, at, "default", args, names, a);
	if (in.type == JV_UNDEF || (bool_arg(a[1], false) && !jv_truthy(in)))
		return jv_missing(a[0]) ? jv_str("", 0) : a[0];
	return in;
}

/* json.dumps' indent: an int (that many spaces) or a string. */
static void indent_opt(struct jctx *c, const struct jnode *at, struct jv v,
		       struct jjson_opts *o)
{
	char *sp;
	int64_t n;

	if (jv_missing(v) || v.type == JV_NONE)
		return;
	o->indent_set = true;
	if (v.type == JV_STR) {
		o->indent = v.u.s;
		return;
	}
	n = int_arg(c, at, v, 0);
	if (n < 0)
		n = 0;
	if (n > 1024)
		jr_fail(c, at, "tojson indent %lld too large", (long long)n);
	sp = jr_alloc(c, at, (size_t)n + 1);
	memset(sp, ' ', (size_t)n);
	o->indent = (struct jstr){sp, (size_t)n};
}

static void separators_opt(struct jctx *c, const struct jnode *at,
			   struct jv v, struct jjson_opts *o)
{
	o->item_sep = (struct jstr){o->indent_set ? "," : ", ",
				    o->indent_set ? 1u : 2u};
	o->key_sep = (struct jstr){": ", 2};
	if (jv_missing(v) || v.type == JV_NONE)
		return;
	if (v.type != JV_LIST || v.u.l->n != 2 ||
	    v.u.l->v[0].type != JV_STR || v.u.l->v[1].type != JV_STR)
		jr_fail(c, at, "tojson separators must be two strings");
	o->item_sep = v.u.l->v[0].u.s;
	o->key_sep = v.u.l->v[1].u.s;
}

FILTER(tojson)
{
	static const char *const names[] = {"ensure_ascii", "indent",
					    "separators", "sort_keys", NULL};
	struct jjson_opts o = {0};
	struct jv a[4];

	jargs_bind(c, at, "tojson", args, names, a);
	o.ensure_ascii = bool_arg(a[0], false);
	o.sort_keys = bool_arg(a[3], false);
	indent_opt(c, at, a[1], &o);
	separators_opt(c, at, a[2], &o);
	return str_v(jv_tojson(c, at, in, &o));
}

FILTER(string)
{
	no_args(c, at, args);
	return str_v(text(c, at, in));
}

FILTER(safe)
{
	no_args(c, at, args);
	return in;
}

FILTER(escape)
{
	struct jstr s = text(c, at, in);
	struct jbuf b = {0};

	no_args(c, at, args);
	for (size_t i = 0; i < s.n; i++) {
		switch (s.p[i]) {
		case '&': jbuf_puts(c, at, &b, "&amp;"); break;
		case '<': jbuf_puts(c, at, &b, "&lt;"); break;
		case '>': jbuf_puts(c, at, &b, "&gt;"); break;
		case '"': jbuf_puts(c, at, &b, "&#34;"); break;
		case '\'': jbuf_puts(c, at, &b, "&#39;"); break;
		default: jbuf_put(c, at, &b, s.p + i, 1); break;
		}
	}
	return str_v(jbuf_str(&b));
}

FILTER(replace)
{
	static const char *const names[] = {"old", "new", "count", NULL};
	struct jv a[3];

	jargs_bind(c, at, "replace", args, names, a);
	if (jv_missing(a[0]) || jv_missing(a[1]))
		jr_fail(c, at, "replace() needs old and new");
	return str_v(ju_replace(c, at, text(c, at, in), text(c, at, a[0]),
				text(c, at, a[1]), int_arg(c, at, a[2], -1)));
}

FILTER(list)
{
	struct jlist *src, *l;

	no_args(c, at, args);
	src = jr_iter(c, at, in);
	l = jv_list_new(c, at, src->n);
	for (size_t i = 0; i < src->n; i++)
		jv_list_push(c, at, l, src->v[i]);
	return jv_list(l);
}

FILTER(first)
{
	struct jlist *l;

	no_args(c, at, args);
	l = jr_iter(c, at, in);
	return l->n ? l->v[0] : jv_undef("No first item, sequence was empty.");
}

FILTER(last)
{
	struct jlist *l;

	no_args(c, at, args);
	l = jr_iter(c, at, in);
	return l->n ? l->v[l->n - 1]
		    : jv_undef("No last item, sequence was empty.");
}

FILTER(reverse)
{
	struct jlist *src, *l;

	no_args(c, at, args);
	if (in.type == JV_STR) {
		struct jbuf b = {0};
		size_t i = in.u.s.n;

		while (i > 0) {
			size_t start = i - 1;

			while (start > 0 && (in.u.s.p[start] & 0xc0) == 0x80)
				start--;
			jbuf_put(c, at, &b, in.u.s.p + start, i - start);
			i = start;
		}
		return str_v(jbuf_str(&b));
	}
	src = jr_iter(c, at, in);
	l = jv_list_new(c, at, src->n);
	for (size_t i = src->n; i-- > 0;)
		jv_list_push(c, at, l, src->v[i]);
	return jv_gen(l);
}

/* (key, value) tuples of a dict. */
static struct jlist *pairs(struct jctx *c, const struct jnode *at,
			   const struct jdict *d)
{
	struct jlist *l = jv_list_new(c, at, d->n);

	for (size_t i = 0; i < d->n; i++) {
		struct jlist *kv = jv_list_new(c, at, 2);

		jv_list_push(c, at, kv, d->k[i]);
		jv_list_push(c, at, kv, d->v[i]);
		jv_list_push(c, at, l,
			     (struct jv){.type = JV_LIST, .sub = JV_TUPLE,
					 .u.l = kv});
	}
	return l;
}

FILTER(items)
{
	no_args(c, at, args);
	if (in.type == JV_UNDEF)
		return jv_list(jv_list_new(c, at, 0));
	if (in.type != JV_DICT || in.sub == JV_NS)
		jr_fail(c, at, "Can only get item pairs from a mapping.");
	return jv_gen(pairs(c, at, in.u.d));
}

/* An attribute path "a.b.0" looked up item-first, as make_attrgetter. */
static struct jv attr_path(struct jctx *c, const struct jnode *at,
			   struct jv item, struct jv path)
{
	struct jstr p;
	size_t i = 0;

	if (path.type == JV_INT)
		return jr_getitem(c, at, item, path);
	if (path.type != JV_STR)
		jr_fail(c, at, "attribute must be a string or an integer");
	p = path.u.s;
	while (i <= p.n) {
		const char *dot = memchr(p.p + i, '.', p.n - i);
		size_t end = dot ? (size_t)(dot - p.p) : p.n;
		struct jv key = jv_str(p.p + i, end - i);
		char *stop;
		long long n;
		char num[24];

		if (end - i > 0 && end - i < sizeof(num)) {
			memcpy(num, p.p + i, end - i);
			num[end - i] = 0;
			n = strtoll(num, &stop, 10);
			if (!*stop && num[0] != '+' && num[0] != ' ')
				key = jv_int(n);
		}
		item = jr_getitem(c, at, item, key);
		i = end + 1;
	}
	return item;
}

FILTER(join)
{
	static const char *const names[] = {"d", "attribute", NULL};
	struct jv a[2];
	struct jstr sep;
	struct jbuf b = {0};
	struct jlist *l;

	jargs_bind(c, at, "join", args, names, a);
	sep = jv_missing(a[0]) ? (struct jstr){"", 0} : text(c, at, a[0]);
	l = jr_iter(c, at, in);
	for (size_t i = 0; i < l->n; i++) {
		struct jv v = l->v[i];
		struct jstr t;

		if (!jv_missing(a[1]) && a[1].type != JV_NONE)
			v = attr_path(c, at, v, a[1]);
		t = text(c, at, v);
		if (i)
			jbuf_put(c, at, &b, sep.p, sep.n);
		jbuf_put(c, at, &b, t.p, t.n);
	}
	return str_v(jbuf_str(&b));
}

/* Splits ARGS after the first N positional ones into a new jargs. */
static struct jargs rest_args(const struct jargs *args, size_t n)
{
	struct jargs r = *args;

	r.n = args->n > n ? args->n - n : 0;
	r.v = args->n > n ? args->v + n : NULL;
	return r;
}

static struct jstr name_arg(struct jctx *c, const struct jnode *at,
			    struct jv v, const char *what)
{
	if (v.type != JV_STR)
		jr_fail(c, at, "%s requires a name", what);
	return v.u.s;
}

static struct jv kwarg(const struct jargs *args, const char *name,
		       bool *found)
{
	for (size_t k = 0; k < args->nkw; k++)
		if (jstr_eq(args->kwn[k], name)) {
			*found = true;
			return args->kwv[k];
		}
	*found = false;
	return jv_none();
}

FILTER(map)
{
	struct jlist *src = jr_iter(c, at, in), *l;
	bool has_attr, has_default;
	struct jv attr = kwarg(args, "attribute", &has_attr);
	struct jv dflt = kwarg(args, "default", &has_default);
	struct jargs rest;
	struct jstr name = {0};

	if (!(has_attr && !args->n)) {
		if (!args->n)
			jr_fail(c, at, "map requires a filter argument");
		name = name_arg(c, at, args->v[0], "map");
		rest = rest_args(args, 1);
	}
	l = jv_list_new(c, at, src->n);
	for (size_t i = 0; i < src->n; i++) {
		struct jv v;

		if (name.p) {
			v = jr_filter_by_name(c, at, name, src->v[i], &rest);
		} else {
			v = attr_path(c, at, src->v[i], attr);
			if (has_default && dflt.type != JV_NONE &&
			    v.type == JV_UNDEF)
				v = dflt;
		}
		jv_list_push(c, at, l, v);
	}
	return jv_gen(l);
}

/* select/reject (ATTR false) and selectattr/rejectattr (ATTR true). */
static struct jv select_items(struct jctx *c, const struct jnode *at,
			      struct jv in, const struct jargs *args,
			      bool attr, bool keep)
{
	struct jlist *src = jr_iter(c, at, in), *l = jv_list_new(c, at, 0);
	size_t off = attr ? 1 : 0;
	struct jstr test = {0};
	struct jargs rest = rest_args(args, off + 1);

	if (attr && !args->n)
		jr_fail(c, at, "Missing parameter for attribute name");
	if (args->n > off)
		test = name_arg(c, at, args->v[off], "select");
	for (size_t i = 0; i < src->n; i++) {
		struct jv v = attr ? attr_path(c, at, src->v[i], args->v[0])
				   : src->v[i];
		bool ok = test.p ? jr_test_by_name(c, at, test, v, &rest)
				 : jv_truthy(v);

		if (ok == keep)
			jv_list_push(c, at, l, src->v[i]);
	}
	return jv_gen(l);
}

FILTER(select) { return select_items(c, at, in, args, false, true); }
FILTER(reject) { return select_items(c, at, in, args, false, false); }
FILTER(selectattr) { return select_items(c, at, in, args, true, true); }
FILTER(rejectattr) { return select_items(c, at, in, args, true, false); }

/* A sort key: the item or its attribute, lower-cased unless
 * case-sensitive. */
static struct jv sort_key(struct jctx *c, const struct jnode *at,
			  struct jv v, struct jv attr, bool case_sensitive)
{
	if (!jv_missing(attr) && attr.type != JV_NONE)
		v = attr_path(c, at, v, attr);
	if (!case_sensitive && v.type == JV_STR)
		v = str_v(ju_case(c, at, v.u.s, JU_LOWER));
	return v;
}

/* A stable merge sort of ITEMS by KEYS (Python's sorted is stable). */
static void merge_sort(struct jctx *c, const struct jnode *at, struct jv *items,
		       struct jv *keys, size_t n, bool reverse,
		       struct jv *tmp_i, struct jv *tmp_k)
{
	size_t mid = n / 2, i = 0, j = mid, k = 0;

	if (n < 2)
		return;
	merge_sort(c, at, items, keys, mid, reverse, tmp_i, tmp_k);
	merge_sort(c, at, items + mid, keys + mid, n - mid, reverse, tmp_i,
		   tmp_k);
	while (i < mid || j < n) {
		bool take_right = i == mid;

		if (i < mid && j < n) {
			int r = jv_compare(c, at, keys[j], keys[i]);

			take_right = reverse ? r > 0 : r < 0;
		}
		tmp_i[k] = take_right ? items[j] : items[i];
		tmp_k[k++] = take_right ? keys[j++] : keys[i++];
	}
	memcpy(items, tmp_i, n * sizeof(*items));
	memcpy(keys, tmp_k, n * sizeof(*keys));
}

static struct jlist *sorted(struct jctx *c, const struct jnode *at,
			    struct jlist *src, struct jv attr,
			    bool case_sensitive, bool reverse, int by)
{
	struct jlist *l = jv_list_new(c, at, src->n);
	struct jv *keys = jr_alloc(c, at, (src->n + 1) * sizeof(*keys));
	struct jv *ti = jr_alloc(c, at, (src->n + 1) * sizeof(*ti));
	struct jv *tk = jr_alloc(c, at, (src->n + 1) * sizeof(*tk));

	for (size_t i = 0; i < src->n; i++) {
		struct jv v = src->v[i];

		if (by >= 0)
			v = v.u.l->v[by];
		keys[i] = sort_key(c, at, v, attr, case_sensitive);
		jv_list_push(c, at, l, src->v[i]);
	}
	merge_sort(c, at, l->v, keys, l->n, reverse, ti, tk);
	return l;
}

FILTER(sort)
{
	static const char *const names[] = {"reverse", "case_sensitive",
					    "attribute", NULL};
	struct jv a[3];

	jargs_bind(c, at, "sort", args, names, a);
	return jv_list(sorted(c, at, jr_iter(c, at, in), a[2],
			      bool_arg(a[1], false), bool_arg(a[0], false), -1));
}

FILTER(dictsort)
{
	static const char *const names[] = {"case_sensitive", "by", "reverse",
					    NULL};
	struct jv a[3];
	int by = 0;

	jargs_bind(c, at, "dictsort", args, names, a);
	if (in.type != JV_DICT)
		jr_fail(c, at, "dictsort needs a mapping");
	if (!jv_missing(a[1]) && a[1].type == JV_STR &&
	    jstr_eq(a[1].u.s, "value"))
		by = 1;
	else if (!jv_missing(a[1]) &&
		 !(a[1].type == JV_STR && jstr_eq(a[1].u.s, "key")))
		jr_fail(c, at, "You can only sort by either \"key\" or "
			       "\"value\"");
	return jv_list(sorted(c, at, pairs(c, at, in.u.d),
			      (struct jv){.type = JV_UNDEF, .sub = JV_MISSING},
			      bool_arg(a[0], false), bool_arg(a[2], false),
			      by));
}

FILTER(unique)
{
	static const char *const names[] = {"case_sensitive", "attribute",
					    NULL};
	struct jv a[2];
	struct jlist *src, *l, *seen;

	jargs_bind(c, at, "unique", args, names, a);
	src = jr_iter(c, at, in);
	l = jv_list_new(c, at, 0);
	seen = jv_list_new(c, at, 0);
	for (size_t i = 0; i < src->n; i++) {
		struct jv k = sort_key(c, at, src->v[i], a[1],
				       bool_arg(a[0], false));
		bool dup = false;

		for (size_t j = 0; j < seen->n && !dup; j++) {
			jr_step(c, at);
			dup = jv_equal(c, at, seen->v[j], k);
		}
		if (dup)
			continue;
		jv_list_push(c, at, seen, k);
		jv_list_push(c, at, l, src->v[i]);
	}
	return jv_gen(l);
}

static struct jv min_max(struct jctx *c, const struct jnode *at, struct jv in,
			 const struct jargs *args, int sign)
{
	static const char *const names[] = {"case_sensitive", "attribute",
					    NULL};
	struct jv a[2], best, best_key;
	struct jlist *src;

	jargs_bind(c, at, "min/max", args, names, a);
	src = jr_iter(c, at, in);
	if (!src->n)
		return jv_undef("No aggregated item, sequence was empty.");
	best = src->v[0];
	best_key = sort_key(c, at, best, a[1], bool_arg(a[0], false));
	for (size_t i = 1; i < src->n; i++) {
		struct jv k = sort_key(c, at, src->v[i], a[1],
				       bool_arg(a[0], false));

		if (jv_compare(c, at, k, best_key) * sign > 0) {
			best = src->v[i];
			best_key = k;
		}
	}
	return best;
}

FILTER(min) { return min_max(c, at, in, args, -1); }
FILTER(max) { return min_max(c, at, in, args, 1); }

FILTER(sum)
{
	static const char *const names[] = {"attribute", "start", NULL};
	struct jv a[2], total;
	struct jlist *src;

	jargs_bind(c, at, "sum", args, names, a);
	total = jv_missing(a[1]) ? jv_int(0) : a[1];
	src = jr_iter(c, at, in);
	for (size_t i = 0; i < src->n; i++) {
		struct jv v = src->v[i];

		if (!jv_missing(a[0]) && a[0].type != JV_NONE)
			v = attr_path(c, at, v, a[0]);
		total = jr_binop(c, at, JO_ADD, total, v);
	}
	return total;
}

FILTER(abs)
{
	no_args(c, at, args);
	if (in.type == JV_FLOAT)
		return jv_float(fabs(in.u.f));
	if (in.type == JV_INT && in.u.i == INT64_MIN)
		jr_fail(c, at, "integer overflow (beyond 64 bits)");
	if (in.type == JV_INT || in.type == JV_BOOL)
		return jv_int(in.type == JV_BOOL ? in.u.b : llabs(in.u.i));
	jr_fail(c, at, "bad operand type for abs(): '%s'", jv_type_name(in));
}

/* Python's int("...") for a base-10 string: optional sign, digits with
 * single underscores, surrounding whitespace. */
static bool parse_int_text(struct jstr s, int base, int64_t *out)
{
	char buf[80], *stop;
	size_t k = 0;

	s = ju_strip(s, NULL, true, true);
	for (size_t i = 0; i < s.n && k + 1 < sizeof(buf); i++)
		if (s.p[i] != '_' || (i && i + 1 < s.n))
			buf[k++] = s.p[i];
	buf[k] = 0;
	if (!k || k + 1 >= sizeof(buf) || base < 2 || base > 36)
		return false;
	errno = 0;
	*out = strtoll(buf, &stop, base);
	return !*stop && errno != ERANGE && buf[0] != ' ';
}

static bool parse_float_text(struct jstr s, double *out)
{
	char buf[80], *stop;

	s = ju_strip(s, NULL, true, true);
	if (!s.n || s.n + 1 >= sizeof(buf))
		return false;
	memcpy(buf, s.p, s.n);
	buf[s.n] = 0;
	*out = strtod(buf, &stop);
	return !*stop && (buf[0] != '0' || buf[1] != 'x');
}

FILTER(int)
{
	static const char *const names[] = {"default", "base", NULL};
	struct jv a[2];
	int64_t i;
	double f;

	jargs_bind(c, at, "int", args, names, a);
	jr_defined(c, at, in); /* int(Undefined) fails in jinja2 */
	if (in.type == JV_INT || in.type == JV_BOOL)
		return jv_int(in.type == JV_BOOL ? in.u.b : in.u.i);
	if (in.type == JV_FLOAT && isfinite(in.u.f) && fabs(in.u.f) < 9.2e18)
		return jv_int((int64_t)in.u.f);
	if (in.type == JV_STR &&
	    (parse_int_text(in.u.s, (int)int_arg(c, at, a[1], 10), &i)))
		return jv_int(i);
	if (in.type == JV_STR && parse_float_text(in.u.s, &f) && isfinite(f) &&
	    fabs(f) < 9.2e18)
		return jv_int((int64_t)f);
	return jv_missing(a[0]) ? jv_int(0) : a[0];
}

FILTER(float)
{
	static const char *const names[] = {"default", NULL};
	struct jv a[1];
	double f;

	jargs_bind(c, at, "float", args, names, a);
	jr_defined(c, at, in);
	if (jv_is_number(in))
		return jv_float(jv_as_double(in));
	if (in.type == JV_STR && parse_float_text(in.u.s, &f))
		return jv_float(f);
	return jv_missing(a[0]) ? jv_float(0) : a[0];
}

/* Python's round(int, ndigits): an int; below the units, to the nearest
 * multiple of 10^-ndigits, half to even. */
static struct jv round_int(struct jctx *c, const struct jnode *at, int64_t v,
			   int64_t prec)
{
	int64_t unit = 1, r, q;

	if (prec >= 0)
		return jv_int(v);
	for (int64_t i = 0; i < -prec; i++) {
		if (unit > INT64_MAX / 10)
			return jv_int(0);
		unit *= 10;
	}
	q = v / unit;
	r = v % unit;
	if (r < 0) {
		r += unit;
		q--;
	}
	if (r * 2 > unit || (r * 2 == unit && (q & 1)))
		q++;
	if (__builtin_mul_overflow(q, unit, &r))
		jr_fail(c, at, "integer overflow (beyond 64 bits)");
	return jv_int(r);
}

FILTER(round)
{
	static const char *const names[] = {"precision", "method", NULL};
	struct jv a[2];
	int64_t prec;
	double x, scale;
	char buf[400];

	jargs_bind(c, at, "round", args, names, a);
	prec = int_arg(c, at, a[0], 0);
	if (!jv_is_number(in))
		jr_fail(c, at, "round needs a number, not '%s'",
			jv_type_name(in));
	x = jv_as_double(in);
	if (prec < -300 || prec > 300)
		jr_fail(c, at, "round precision out of range");
	if (!jv_missing(a[1]) && a[1].type == JV_STR &&
	    !jstr_eq(a[1].u.s, "common")) {
		scale = pow(10, (double)prec);
		if (jstr_eq(a[1].u.s, "ceil"))
			return jv_float(ceil(x * scale) / scale);
		if (jstr_eq(a[1].u.s, "floor"))
			return jv_float(floor(x * scale) / scale);
		jr_fail(c, at, "method must be common, ceil or floor");
	}
	if (in.type != JV_FLOAT)
		return round_int(c, at, in.type == JV_BOOL ? in.u.b : in.u.i,
				 prec);
	if (prec <= 0 || !isfinite(x)) {
		scale = pow(10, (double)-prec);
		return jv_float(nearbyint(x / scale) * scale);
	}
	/* correctly rounded, half to even, as Python's round() */
	snprintf(buf, sizeof(buf), "%.*f", (int)prec, x);
	return jv_float(strtod(buf, NULL));
}

FILTER(indent)
{
	static const char *const names[] = {"width", "first", "blank", NULL};
	struct jv a[3];
	struct jstr s, ind;
	struct jbuf b = {0};
	size_t i = 0, line = 0;

	jargs_bind(c, at, "indent", args, names, a);
	if (in.type != JV_STR) /* jinja2 appends "\n" to its input */
		jr_fail(c, at, "unsupported operand type(s) for +=: '%s' and "
			       "'str'", jv_type_name(in));
	s = in.u.s;
	if (a[0].type == JV_STR) {
		ind = a[0].u.s;
	} else {
		struct jjson_opts o = {0};

		indent_opt(c, at, jv_missing(a[0]) ? jv_int(4) : a[0], &o);
		ind = o.indent;
	}
	if (bool_arg(a[1], false))
		jbuf_put(c, at, &b, ind.p, ind.n);
	while (i < s.n) {
		const char *nl = memchr(s.p + i, '\n', s.n - i);
		size_t end = nl ? (size_t)(nl - s.p) : s.n;

		if (line++ && (end > i || bool_arg(a[2], false)))
			jbuf_put(c, at, &b, ind.p, ind.n);
		jbuf_put(c, at, &b, s.p + i, end - i + (nl ? 1 : 0));
		i = end + 1;
	}
	/* jinja2 splits s + "\n": a final newline leaves an empty line */
	if (bool_arg(a[2], false) && s.n && s.p[s.n - 1] == '\n')
		jbuf_put(c, at, &b, ind.p, ind.n);
	return str_v(jbuf_str(&b));
}

FILTER(center)
{
	static const char *const names[] = {"width", NULL};
	struct jv a[1];
	struct jstr s;
	struct jbuf b = {0};
	int64_t width, len, left, pad;

	jargs_bind(c, at, "center", args, names, a);
	s = text(c, at, in);
	width = int_arg(c, at, a[0], 80);
	len = (int64_t)ju_len(s);
	if (width > 1 << 20)
		jr_fail(c, at, "center width too large");
	pad = width > len ? width - len : 0;
	left = pad / 2 + (pad & width & 1);
	for (int64_t i = 0; i < left; i++)
		jbuf_put(c, at, &b, " ", 1);
	jbuf_put(c, at, &b, s.p, s.n);
	for (int64_t i = left; i < pad; i++)
		jbuf_put(c, at, &b, " ", 1);
	return str_v(jbuf_str(&b));
}

FILTER(wordcount)
{
	struct jstr s = text(c, at, in);
	int64_t n = 0;
	bool in_word = false;

	no_args(c, at, args);
	for (size_t i = 0; i < s.n;) {
		uint32_t cp = ju_next(s, &i);
		bool w = cp == '_' || (cp < 0x80 ? isalnum((int)cp) != 0
						 : !ju_isspace(cp));

		n += w && !in_word;
		in_word = w;
	}
	return jv_int(n);
}

FILTER(format)
{
	struct jv fmt_args;
	struct jlist *l;

	if (args->nkw && args->n)
		jr_fail(c, at, "can't handle positional and keyword arguments "
			       "at the same time");
	if (args->nkw) {
		struct jdict *d = jv_dict_new(c, at, args->nkw);

		for (size_t k = 0; k < args->nkw; k++)
			jv_dict_set(c, at, d,
				    jv_str(args->kwn[k].p, args->kwn[k].n),
				    args->kwv[k]);
		fmt_args = jv_dict(d);
	} else {
		l = jv_list_new(c, at, args->n);
		for (size_t i = 0; i < args->n; i++)
			jv_list_push(c, at, l, args->v[i]);
		fmt_args = (struct jv){.type = JV_LIST, .sub = JV_TUPLE,
				       .u.l = l};
	}
	return str_v(jr_percent_format(c, at, text(c, at, in), fmt_args));
}

FILTER(attr)
{
	static const char *const names[] = {"name", NULL};
	struct jv a[1];

	jargs_bind(c, at, "attr", args, names, a);
	if (a[0].type != JV_STR)
		jr_fail(c, at, "attr needs a name");
	if (in.type == JV_UNDEF || !jb_has_method(in, a[0].u.s))
		return jv_undef("no such attribute");
	return jr_getattr(c, at, in, a[0].u.s);
}

FILTER(pprint)
{
	no_args(c, at, args);
	return str_v(jv_repr(c, at, in));
}

static const struct jfilter_def filters[] = {
    {"abs", f_abs},	      {"attr", f_attr},
    {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length},      {"d", f_default},
    {"default", f_default},   {"dictsort", f_dictsort},
    {"e", f_escape},	      {"escape", f_escape},
    {"first", f_first},	      {"float", f_float},
    {"forceescape", f_escape}, {"format", f_format},
    {"indent", f_indent},     {"int", f_int},
    {"items", f_items},	      {"join", f_join},
    {"last", f_last},	      {"length", f_length},
    {"list", f_list},	      {"lower", f_lower},
    {"map", f_map},	      {"max", f_max},
    {"min", f_min},	      {"pprint", f_pprint},
    {"reject", f_reject},     {"rejectattr", f_rejectattr},
    {"replace", f_replace},   {"reverse", f_reverse},
    {"round", f_round},	      {"safe", f_safe},
    {"select", f_select},     {"selectattr", f_selectattr},
    {"sort", f_sort},	      {"string", f_string},
    {"sum", f_sum},	      {"title", f_title},
    {"tojson", f_tojson},     {"trim", f_trim},
    {"unique", f_unique},     {"upper", f_upper},
    {"wordcount", f_wordcount},
};

const struct jfilter_def *jb_filter(struct jstr name)
{
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
		if (jstr_eq(name, filters[i].name))
			return &filters[i];
	return NULL;
}

struct jv jr_filter_by_name(struct jctx *c, const struct jnode *at,
			    struct jstr name, struct jv in,
			    const struct jargs *args)
{
	const struct jfilter_def *f = jb_filter(name);

	if (!f)
		jr_fail(c, at, "No filter named '%.*s'.", (int)name.n, name.p);
	if (in.type == JV_STR)
		jr_charge(c, at, in.u.s.n);
	return f->fn(c, at, in, args);
}

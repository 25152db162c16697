/* Python methods templates call on values (content.strip(),
 * role.startswith('x'), d.items(), s.split('</think>')):
 * the subset of str, list and dict methods that templates use.
 *
 * As in jinja2's immutable sandbox, methods that would modify a list or
 * dict (append, pop, update, ...) exist but fail with jinja2's "unsafe"
 * message.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_int.h"

typedef struct jv (*method_fn)(struct jctx *c, const struct jnode *at,
			       struct jv self, const struct jargs *args);

struct method {
	const char *name;
	method_fn fn; /* NULL: unsafe in the sandbox */
};

#define METHOD(name)                                                           \
	static struct jv m_##name(struct jctx *c, const struct jnode *at,      \
				  struct jv self, const struct jargs *args)

static struct jv str_v(struct jstr s)
{
	return (struct jv){.type = JV_STR, .u.s = s};
}

static void bind(struct jctx *c, const struct jnode *at, const char *what,
		 const struct jargs *args, const char *const *names,
		 struct jv *slots)
{
	jargs_bind(c, at, what, args, names, slots);
}

static struct jstr want_str(struct jctx *c, const struct jnode *at,
			    struct jv v, const char *what)
{
	if (v.type != JV_STR)
		jr_fail(c, at, "%s: must be str, not %s", what,
			jv_type_name(v));
	return v.u.s;
}

static struct jv strip_method(struct jctx *c, const struct jnode *at,
			      struct jv self, const struct jargs *args,
			      bool left, bool right)
{
	static const char *const names[] = {"chars", NULL};
	struct jv a[1];
	struct jstr chars;
	bool have;

	bind(c, at, "strip", args, names, a);
	have = !jv_missing(a[0]) && a[0].type != JV_NONE;
	if (have)
		chars = want_str(c, at, a[0], "strip arg");
	return str_v(ju_strip(self.u.s, have ? &chars : NULL, left, right));
}

METHOD(strip) { return strip_method(c, at, self, args, true, true); }
METHOD(lstrip) { return strip_method(c, at, self, args, true, false); }
METHOD(rstrip) { return strip_method(c, at, self, args, false, true); }

static struct jv case_method(struct jctx *c, const struct jnode *at,
			     struct jv self, const struct jargs *args,
			     enum ju_case how)
{
	static const char *const none[] = {NULL};
	struct jv unused;

	bind(c, at, "str method", args, none, &unused);
	return str_v(ju_case(c, at, self.u.s, how));
}

METHOD(upper) { return case_method(c, at, self, args, JU_UPPER); }
METHOD(lower) { return case_method(c, at, self, args, JU_LOWER); }
METHOD(title) { return case_method(c, at, self, args, JU_TITLE); }
METHOD(capitalize) { return case_method(c, at, self, args, JU_CAPITALIZE); }

static int64_t maxsplit_arg(struct jctx *c, const struct jnode *at,
			    struct jv v)
{
	if (jv_missing(v))
		return -1;
	if (v.type != JV_INT)
		jr_fail(c, at, "maxsplit must be an integer");
	return v.u.i;
}

static void push_str(struct jctx *c, const struct jnode *at, struct jlist *l,
		     const char *p, size_t n)
{
	jv_list_push(c, at, l, jv_str(p, n));
}

/* Whitespace split from the left: runs of whitespace separate. */
static void split_ws(struct jctx *c, const struct jnode *at, struct jlist *l,
		     struct jstr s, int64_t max)
{
	size_t i = 0;

	for (;;) {
		size_t start, j;

		s = ju_strip((struct jstr){s.p + i, s.n - i}, NULL, true,
			     false);
		i = 0;
		if (!s.n)
			return;
		if (max-- == 0) {
			push_str(c, at, l, s.p, s.n);
			return;
		}
		start = i;
		while (i < s.n) {
			j = i;
			if (ju_isspace(ju_next(s, &j)))
				break;
			i = j;
		}
		push_str(c, at, l, s.p + start, i - start);
	}
}

/* Whitespace split from the right (rsplit), built reversed. */
static void rsplit_ws(struct jctx *c, const struct jnode *at, struct jlist *l,
		      struct jstr s, int64_t max)
{
	for (;;) {
		size_t end, start;

		s = ju_strip(s, NULL, false, true);
		if (!s.n)
			return;
		if (max-- == 0) {
			push_str(c, at, l, s.p, s.n);
			return;
		}
		end = s.n;
		start = end;
		while (start > 0) {
			size_t k = start - 1, j;

			while (k > 0 && (s.p[k] & 0xc0) == 0x80)
				k--;
			j = k;
			if (ju_isspace(ju_next(s, &j)))
				break;
			start = k;
		}
		push_str(c, at, l, s.p + start, end - start);
		s.n = start;
	}
}

static void reverse_list(struct jlist *l)
{
	for (size_t i = 0; i < l->n / 2; i++) {
		struct jv t = l->v[i];

		l->v[i] = l->v[l->n - 1 - i];
		l->v[l->n - 1 - i] = t;
	}
}

static void split_sep(struct jctx *c, const struct jnode *at, struct jlist *l,
		      struct jstr s, struct jstr sep, int64_t max, bool right)
{
	if (!sep.n)
		jr_fail(c, at, "empty separator");
	while (max-- != 0) {
		ptrdiff_t hit = -1;

		if (right) {
			for (size_t k = s.n >= sep.n ? s.n - sep.n + 1 : 0;
			     k-- > 0;)
				if (!memcmp(s.p + k, sep.p, sep.n)) {
					hit = (ptrdiff_t)k;
					break;
				}
		} else {
			hit = ju_find(s, sep, 0);
		}
		if (hit < 0)
			break;
		if (right) {
			size_t after = (size_t)hit + sep.n;

			push_str(c, at, l, s.p + after, s.n - after);
			s.n = (size_t)hit;
		} else {
			push_str(c, at, l, s.p, (size_t)hit);
			s.p += (size_t)hit + sep.n;
			s.n -= (size_t)hit + sep.n;
		}
	}
	push_str(c, at, l, s.p, s.n);
}

static struct jv split_method(struct jctx *c, const struct jnode *at,
			      struct jv self, const struct jargs *args,
			      bool right)
{
	static const char *const names[] = {"sep", "maxsplit", NULL};
	struct jv a[2];
	struct jlist *l = jv_list_new(c, at, 0);
	int64_t max;

	bind(c, at, "split", args, names, a);
	max = maxsplit_arg(c, at, a[1]);
	if (jv_missing(a[0]) || a[0].type == JV_NONE) {
		if (right)
			rsplit_ws(c, at, l, self.u.s, max);
		else
			split_ws(c, at, l, self.u.s, max);
	} else {
		split_sep(c, at, l, self.u.s, want_str(c, at, a[0], "sep"),
			  max, right);
	}
	if (right)
		reverse_list(l);
	return jv_list(l);
}

METHOD(split) { return split_method(c, at, self, args, false); }
METHOD(rsplit) { return split_method(c, at, self, args, true); }

static bool line_break(uint32_t cp)
{
	return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c ||
	       (cp >= 0x1c && cp <= 0x1e) || cp == 0x85 || cp == 0x2028 ||
	       cp == 0x2029;
}

METHOD(splitlines)
{
	static const char *const names[] = {"keepends", NULL};
	struct jv a[1];
	struct jlist *l = jv_list_new(c, at, 0);
	struct jstr s = self.u.s;
	size_t i = 0, start = 0;
	bool keep;

	bind(c, at, "splitlines", args, names, a);
	keep = !jv_missing(a[0]) && jv_truthy(a[0]);
	while (i < s.n) {
		size_t before = i;
		uint32_t cp = ju_next(s, &i);

		if (!line_break(cp))
			continue;
		if (cp == '\r' && i < s.n && s.p[i] == '\n')
			i++;
		push_str(c, at, l, s.p + start, (keep ? i : before) - start);
		start = i;
	}
	if (start < s.n)
		push_str(c, at, l, s.p + start, s.n - start);
	return jv_list(l);
}

/* str.startswith/endswith: a prefix or a tuple of them. */
static struct jv affix_method(struct jctx *c, const struct jnode *at,
			      struct jv self, const struct jargs *args,
			      bool end)
{
	static const char *const names[] = {"prefix", NULL};
	struct jv a[1];
	struct jlist *opts;
	struct jstr s = self.u.s;

	bind(c, at, end ? "endswith" : "startswith", args, names, a);
	if (a[0].type == JV_STR) {
		opts = jv_list_new(c, at, 1);
		jv_list_push(c, at, opts, a[0]);
	} else if (a[0].type == JV_LIST && a[0].sub == JV_TUPLE) {
		opts = a[0].u.l;
	} else {
		jr_fail(c, at, "%s first arg must be str or a tuple of str",
			end ? "endswith" : "startswith");
	}
	for (size_t i = 0; i < opts->n; i++) {
		struct jstr p = want_str(c, at, opts->v[i], "affix");

		if (p.n <= s.n &&
		    !memcmp(end ? s.p + s.n - p.n : s.p, p.p, p.n))
			return jv_bool(true);
	}
	return jv_bool(false);
}

METHOD(startswith) { return affix_method(c, at, self, args, false); }
METHOD(endswith) { return affix_method(c, at, self, args, true); }

METHOD(replace)
{
	static const char *const names[] = {"old", "new", "count", NULL};
	struct jv a[3];
	int64_t count = -1;

	bind(c, at, "replace", args, names, a);
	if (!jv_missing(a[2]))
		count = a[2].type == JV_INT ? a[2].u.i : -1;
	return str_v(ju_replace(c, at, self.u.s, want_str(c, at, a[0], "old"),
				want_str(c, at, a[1], "new"), count));
}

/* find/rfind/index/rindex: a code-point index, or -1 (find) or an error
 * (index). */
static struct jv find_method(struct jctx *c, const struct jnode *at,
			     struct jv self, const struct jargs *args,
			     bool right, bool raise)
{
	static const char *const names[] = {"sub", NULL};
	struct jv a[1];
	struct jstr s = self.u.s, sub;
	ptrdiff_t hit = -1, h;

	bind(c, at, "find", args, names, a);
	sub = want_str(c, at, a[0], "sub");
	if (!right) {
		hit = ju_find(s, sub, 0);
	} else {
		for (size_t from = 0; (h = ju_find(s, sub, from)) >= 0;
		     from = (size_t)h + 1) {
			hit = h;
			if ((size_t)h >= s.n)
				break;
		}
	}
	if (hit < 0 && raise)
		jr_fail(c, at, "substring not found");
	if (hit < 0)
		return jv_int(-1);
	return jv_int((int64_t)ju_len((struct jstr){s.p, (size_t)hit}));
}

METHOD(find) { return find_method(c, at, self, args, false, false); }
METHOD(rfind) { return find_method(c, at, self, args, true, false); }
METHOD(index)
{
	struct jlist *l;

	if (self.type == JV_STR)
		return find_method(c, at, self, args, false, true);
	if (args->n != 1)
		jr_fail(c, at, "index() takes exactly one argument");
	l = self.u.l;
	for (size_t i = 0; i < l->n; i++)
		if (jv_equal(c, at, l->v[i], args->v[0]))
			return jv_int((int64_t)i);
	jr_fail(c, at, "%.*s is not in list",
		(int)jv_repr(c, at, args->v[0]).n,
		jv_repr(c, at, args->v[0]).p);
}

METHOD(count)
{
	struct jstr s, sub;
	int64_t n = 0;
	ptrdiff_t h;

	if (args->n != 1 || args->nkw)
		jr_fail(c, at, "count() takes exactly one argument");
	if (self.type == JV_LIST) {
		for (size_t i = 0; i < self.u.l->n; i++)
			n += jv_equal(c, at, self.u.l->v[i], args->v[0]);
		return jv_int(n);
	}
	s = self.u.s;
	sub = want_str(c, at, args->v[0], "count");
	if (!sub.n)
		return jv_int((int64_t)ju_len(s) + 1);
	for (size_t from = 0; (h = ju_find(s, sub, from)) >= 0;
	     from = (size_t)h + sub.n)
		n++;
	return jv_int(n);
}

METHOD(join)
{
	struct jlist *l;
	struct jbuf b = {0};

	if (args->n != 1 || args->nkw)
		jr_fail(c, at, "join() takes exactly one argument");
	l = jr_iter(c, at, args->v[0]);
	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i].type != JV_STR)
			jr_fail(c, at, "sequence item %zu: expected str "
				"instance, %s found", i, jv_type_name(l->v[i]));
		if (i)
			jbuf_put(c, at, &b, self.u.s.p, self.u.s.n);
		jbuf_put(c, at, &b, l->v[i].u.s.p, l->v[i].u.s.n);
	}
	return str_v(jbuf_str(&b));
}

static bool is_alpha_cp(uint32_t cp)
{
	if (cp < 0x80)
		return isalpha((int)cp) != 0;
	return !ju_isspace(cp) && cp != 0xa0 && !(cp >= 0x2000 && cp <= 0x206f) &&
	       !(cp >= 0x3000 && cp <= 0x303f) && !(cp >= 0xff00 && cp <= 0xff0f);
}

/* isdigit/isalpha/isalnum/isspace: every character, and at least one. */
static struct jv class_method(struct jctx *c, const struct jnode *at,
			      struct jv self, const struct jargs *args,
			      char cls)
{
	static const char *const none[] = {NULL};
	struct jstr s = self.u.s;
	struct jv unused;
	size_t i = 0;

	bind(c, at, "str method", args, none, &unused);
	if (!s.n)
		return jv_bool(false);
	while (i < s.n) {
		uint32_t cp = ju_next(s, &i);
		bool digit = cp >= '0' && cp <= '9', ok;

		ok = cls == 'd'	  ? digit
		     : cls == 'a' ? is_alpha_cp(cp)
		     : cls == 'n' ? digit || is_alpha_cp(cp)
				  : ju_isspace(cp);
		if (!ok)
			return jv_bool(false);
	}
	return jv_bool(true);
}

METHOD(isdigit) { return class_method(c, at, self, args, 'd'); }
METHOD(isalpha) { return class_method(c, at, self, args, 'a'); }
METHOD(isalnum) { return class_method(c, at, self, args, 'n'); }
METHOD(isspace) { return class_method(c, at, self, args, 's'); }

static struct jv case_test(struct jctx *c, const struct jnode *at,
			   struct jv self, const struct jargs *args,
			   enum ju_case how)
{
	static const char *const none[] = {NULL};
	struct jv unused;
	struct jstr s = self.u.s;

	bind(c, at, "str method", args, none, &unused);
	return jv_bool(jstr_same(s, ju_case(c, at, s, how)) &&
		       !jstr_same(s, ju_case(c, at, s,
					     how == JU_LOWER ? JU_UPPER
							     : JU_LOWER)));
}

METHOD(islower) { return case_test(c, at, self, args, JU_LOWER); }
METHOD(isupper) { return case_test(c, at, self, args, JU_UPPER); }

static struct jv trim_affix(struct jctx *c, const struct jnode *at,
			    struct jv self, const struct jargs *args,
			    bool suffix)
{
	struct jstr s = self.u.s, a;

	if (args->n != 1 || args->nkw)
		jr_fail(c, at, "removeprefix/removesuffix take one argument");
	a = want_str(c, at, args->v[0], "affix");
	if (a.n > s.n || memcmp(suffix ? s.p + s.n - a.n : s.p, a.p, a.n))
		return self;
	return jv_str(suffix ? s.p : s.p + a.n, s.n - a.n);
}

METHOD(removeprefix) { return trim_affix(c, at, self, args, false); }
METHOD(removesuffix) { return trim_affix(c, at, self, args, true); }

/* One "{...}" field of str.format: an index, a name, or automatic. */
static struct jv format_field(struct jctx *c, const struct jnode *at,
			      struct jstr field, const struct jargs *args,
			      size_t *auto_idx)
{
	char num[24];

	if (memchr(field.p, ':', field.n) || memchr(field.p, '!', field.n) ||
	    memchr(field.p, '.', field.n) || memchr(field.p, '[', field.n))
		jr_fail(c, at, "str.format: only plain {} fields are "
			       "supported");
	if (!field.n) {
		if (*auto_idx >= args->n)
			jr_fail(c, at, "Replacement index %zu out of range",
				*auto_idx);
		return args->v[(*auto_idx)++];
	}
	if (isdigit((unsigned char)field.p[0]) && field.n < sizeof(num)) {
		size_t i;

		memcpy(num, field.p, field.n);
		num[field.n] = 0;
		i = (size_t)strtoul(num, NULL, 10);
		if (i >= args->n)
			jr_fail(c, at, "Replacement index %zu out of range", i);
		return args->v[i];
	}
	for (size_t k = 0; k < args->nkw; k++)
		if (jstr_same(args->kwn[k], field))
			return args->kwv[k];
	jr_fail(c, at, "KeyError: '%.*s'", (int)field.n, field.p);
}

METHOD(format)
{
	struct jstr f = self.u.s, t;
	struct jbuf b = {0};
	size_t i = 0, auto_idx = 0;

	while (i < f.n) {
		char ch = f.p[i];

		if ((ch == '{' || ch == '}') && i + 1 < f.n && f.p[i + 1] == ch) {
			jbuf_put(c, at, &b, &ch, 1);
			i += 2;
		} else if (ch == '{') {
			const char *close = memchr(f.p + i, '}', f.n - i);

			if (!close)
				jr_fail(c, at, "Single '{' encountered in format "
					       "string");
			t = jv_to_str(c, at,
				      format_field(c, at,
						   (struct jstr){f.p + i + 1,
								 (size_t)(close -
									  f.p) -
								     i - 1},
						   args, &auto_idx));
			jbuf_put(c, at, &b, t.p, t.n);
			i = (size_t)(close - f.p) + 1;
		} else if (ch == '}') {
			jr_fail(c, at, "Single '}' encountered in format string");
		} else {
			jbuf_put(c, at, &b, &ch, 1);
			i++;
		}
	}
	return str_v(jbuf_str(&b));
}

static void no_method_args(struct jctx *c, const struct jnode *at,
			   const struct jargs *args)
{
	static const char *const none[] = {NULL};
	struct jv unused;

	bind(c, at, "dict method", args, none, &unused);
}

METHOD(items)
{
	struct jlist *l;

	no_method_args(c, at, args);
	l = jv_list_new(c, at, self.u.d->n);
	for (size_t i = 0; i < self.u.d->n; i++) {
		struct jlist *kv = jv_list_new(c, at, 2);

		jv_list_push(c, at, kv, self.u.d->k[i]);
		jv_list_push(c, at, kv, self.u.d->v[i]);
		jv_list_push(c, at, l, (struct jv){.type = JV_LIST,
						   .sub = JV_TUPLE,
						   .u.l = kv});
	}
	return (struct jv){.type = JV_LIST, .sub = JV_ITEMS, .u.l = l};
}

static struct jv dict_column(struct jctx *c, const struct jnode *at,
			     struct jv self, const struct jargs *args,
			     bool keys)
{
	struct jlist *l;

	no_method_args(c, at, args);
	l = jv_list_new(c, at, self.u.d->n);
	for (size_t i = 0; i < self.u.d->n; i++)
		jv_list_push(c, at, l, keys ? self.u.d->k[i] : self.u.d->v[i]);
	return (struct jv){.type = JV_LIST, .sub = keys ? JV_KEYS : JV_VALUES,
			   .u.l = l};
}

METHOD(keys) { return dict_column(c, at, self, args, true); }
METHOD(values) { return dict_column(c, at, self, args, false); }

METHOD(get)
{
	static const char *const names[] = {"key", "default", NULL};
	struct jv a[2], *v;

	bind(c, at, "get", args, names, a);
	if (jv_missing(a[0]))
		jr_fail(c, at, "get expected at least 1 argument, got 0");
	v = jv_dict_get(self.u.d, a[0]);
	if (v)
		return *v;
	return jv_missing(a[1]) ? jv_none() : a[1];
}

METHOD(copy)
{
	struct jdict *d;
	struct jlist *l;

	no_method_args(c, at, args);
	if (self.type == JV_LIST) {
		l = jv_list_new(c, at, self.u.l->n);
		for (size_t i = 0; i < self.u.l->n; i++)
			jv_list_push(c, at, l, self.u.l->v[i]);
		return (struct jv){.type = JV_LIST, .sub = self.sub, .u.l = l};
	}
	d = jv_dict_new(c, at, self.u.d->n);
	for (size_t i = 0; i < self.u.d->n; i++)
		jv_dict_set(c, at, d, self.u.d->k[i], self.u.d->v[i]);
	return jv_dict(d);
}

static const struct method str_methods[] = {
    {"capitalize", m_capitalize}, {"count", m_count},
    {"endswith", m_endswith},	  {"find", m_find},
    {"format", m_format},	  {"index", m_index},
    {"isalnum", m_isalnum},	  {"isalpha", m_isalpha},
    {"isdigit", m_isdigit},	  {"islower", m_islower},
    {"isspace", m_isspace},	  {"isupper", m_isupper},
    {"join", m_join},		  {"lower", m_lower},
    {"lstrip", m_lstrip},	  {"removeprefix", m_removeprefix},
    {"removesuffix", m_removesuffix}, {"replace", m_replace},
    {"rfind", m_rfind},		  {"rsplit", m_rsplit},
    {"rstrip", m_rstrip},	  {"split", m_split},
    {"splitlines", m_splitlines}, {"startswith", m_startswith},
    {"strip", m_strip},		  {"title", m_title},
    {"upper", m_upper},		  {NULL, NULL},
};

static const struct method list_methods[] = {
    {"count", m_count},	 {"index", m_index}, {"copy", m_copy},
    {"append", NULL},	 {"clear", NULL},    {"extend", NULL},
    {"insert", NULL},	 {"pop", NULL},	     {"remove", NULL},
    {"reverse", NULL},	 {"sort", NULL},     {NULL, NULL},
};

static const struct method tuple_methods[] = {
    {"count", m_count}, {"index", m_index}, {NULL, NULL},
};

static const struct method dict_methods[] = {
    {"get", m_get},	  {"items", m_items}, {"keys", m_keys},
    {"values", m_values}, {"copy", m_copy},   {"clear", NULL},
    {"pop", NULL},	  {"popitem", NULL},  {"setdefault", NULL},
    {"update", NULL},	  {NULL, NULL},
};

static const struct method *find_method_def(struct jv obj, struct jstr name)
{
	const struct method *m;

	if (obj.type == JV_STR)
		m = str_methods;
	else if (obj.type == JV_LIST && obj.sub == JV_PLAIN)
		m = list_methods;
	else if (obj.type == JV_LIST && obj.sub == JV_TUPLE)
		m = tuple_methods;
	else if (obj.type == JV_DICT && obj.sub != JV_NS)
		m = dict_methods;
	else
		return NULL;
	for (; m->name; m++)
		if (jstr_eq(name, m->name))
			return m;
	return NULL;
}

bool jb_has_method(struct jv obj, struct jstr name)
{
	return find_method_def(obj, name) != NULL;
}

struct jv jb_call_method(struct jctx *c, const struct jnode *at, struct jv obj,
			 struct jstr name, const struct jargs *args)
{
	const struct method *m = find_method_def(obj, name);

	if (!m)
		jr_fail(c, at, "'%s' object has no attribute '%.*s'",
			jv_type_name(obj), (int)name.n, name.p);
	if (!m->fn)
		jr_fail(c, at, "access to attribute '%s' of '%s' object is "
			"unsafe.", m->name, jv_type_name(obj));
	if (obj.type == JV_STR)
		jr_charge(c, at, obj.u.s.n);
	return m->fn(c, at, obj, args);
}

/* Jinja expressions: evaluation of the syntax tree's expression nodes with
 * Python's semantics (int/float arithmetic, str and list concatenation and
 * repetition, chained comparisons, "and"/"or" returning an operand), and
 * jinja2's lookup rules: obj.name tries a method, then an item; obj[key]
 * the item, then a method; a missing one is Undefined, which prints as
 * nothing and fails only when used further.
 *
 * Integers are 64-bit; where Python would grow a big integer, evaluation
 * fails with "integer overflow".
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "template/jinja_int.h"

static struct jv undef_fmt(struct jctx *c, const struct jnode *at,
			   const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* An Undefined whose hint (the error when it is used) is formatted. */
static struct jv undef_fmt(struct jctx *c, const struct jnode *at,
			   const char *fmt, ...)
{
	char tmp[256], *hint;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(tmp))
		n = sizeof(tmp) - 1;
	hint = jr_alloc(c, at, (size_t)n + 1);
	memcpy(hint, tmp, (size_t)n + 1);
	return jv_undef(hint);
}

void jr_defined(struct jctx *c, const struct jnode *at, struct jv v)
{
	if (v.type == JV_UNDEF)
		jr_fail(c, at, "%.*s", (int)v.u.s.n,
			v.u.s.n ? v.u.s.p : "value is undefined");
}

/* How Python's messages name an object: 'str object', 'None'. */
static const char *object_name(struct jv v)
{
	switch (v.type) {
	case JV_NONE: return "'None'";
	case JV_STR: return "'str object'";
	case JV_LIST: return v.sub == JV_TUPLE ? "'tuple object'"
			      : v.sub == JV_PLAIN ? "'list object'"
						  : "'iterator object'";
	case JV_DICT: return v.sub == JV_NS ? "'Namespace object'"
					    : "'dict object'";
	case JV_INT: return "'int object'";
	case JV_FLOAT: return "'float object'";
	case JV_BOOL: return "'bool object'";
	default: return "'object'";
	}
}

static struct jv bound_method(struct jctx *c, const struct jnode *at,
			      struct jv obj, struct jstr name)
{
	struct jfunc *fn = jr_alloc(c, at, sizeof(*fn));

	*fn = (struct jfunc){.kind = JF_METHOD, .name = name, .self = obj};
	return (struct jv){.type = JV_FUNC, .u.fn = fn};
}

static struct jv loop_func(struct jctx *c, const struct jnode *at,
			   struct jloop *loop, enum jfunc_kind kind,
			   struct jstr name)
{
	struct jfunc *fn = jr_alloc(c, at, sizeof(*fn));

	*fn = (struct jfunc){.kind = (uint8_t)kind, .name = name, .loop = loop};
	return (struct jv){.type = JV_FUNC, .u.fn = fn};
}

static struct jv loop_item(const struct jloop *l, size_t i, bool ok)
{
	return ok ? l->items[i] : jv_undef("there is no such item");
}

static struct jv loop_attr(struct jctx *c, const struct jnode *at,
			   struct jloop *l, struct jstr name)
{
	if (jstr_eq(name, "index"))
		return jv_int((int64_t)l->index0 + 1);
	if (jstr_eq(name, "index0"))
		return jv_int((int64_t)l->index0);
	if (jstr_eq(name, "revindex"))
		return jv_int((int64_t)(l->length - l->index0));
	if (jstr_eq(name, "revindex0"))
		return jv_int((int64_t)(l->length - l->index0 - 1));
	if (jstr_eq(name, "first"))
		return jv_bool(l->index0 == 0);
	if (jstr_eq(name, "last"))
		return jv_bool(l->index0 + 1 == l->length);
	if (jstr_eq(name, "length"))
		return jv_int((int64_t)l->length);
	if (jstr_eq(name, "depth"))
		return jv_int((int64_t)l->depth0 + 1);
	if (jstr_eq(name, "depth0"))
		return jv_int((int64_t)l->depth0);
	if (jstr_eq(name, "previtem"))
		return loop_item(l, l->index0 - 1, l->index0 > 0);
	if (jstr_eq(name, "nextitem"))
		return loop_item(l, l->index0 + 1, l->index0 + 1 < l->length);
	if (jstr_eq(name, "cycle"))
		return loop_func(c, at, l, JF_CYCLE, name);
	if (jstr_eq(name, "changed"))
		return loop_func(c, at, l, JF_CHANGED, name);
	return undef_fmt(c, at, "'LoopContext object' has no attribute '%.*s'",
			 (int)name.n, name.p);
}

struct jv jr_getattr(struct jctx *c, const struct jnode *at, struct jv obj,
		     struct jstr name)
{
	struct jv *v;

	jr_defined(c, at, obj);
	if (obj.type == JV_LOOP)
		return loop_attr(c, at, obj.u.loop, name);
	if (jb_has_method(obj, name))
		return bound_method(c, at, obj, name);
	if (obj.type == JV_DICT && (v = jv_dict_gets(obj.u.d, name.p, name.n)))
		return *v;
	return undef_fmt(c, at, "%s has no attribute '%.*s'",
			 object_name(obj), (int)name.n, name.p);
}

static bool as_index(struct jv k, int64_t *i)
{
	if (k.type == JV_INT)
		*i = k.u.i;
	else if (k.type == JV_BOOL)
		*i = k.u.b;
	else
		return false;
	return true;
}

/* S[I] for a string: one code point. */
static struct jv str_item(struct jctx *c, const struct jnode *at,
			  struct jstr s, int64_t i, bool *ok)
{
	int64_t n;
	size_t off, end;

	jr_charge(c, at, s.n);
	n = (int64_t)ju_len(s);

	if (i < 0)
		i += n;
	*ok = i >= 0 && i < n;
	if (!*ok)
		return jv_none();
	off = ju_offset(s, (size_t)i);
	end = off;
	ju_next(s, &end);
	return jv_str(s.p + off, end - off);
}

struct jv jr_getitem(struct jctx *c, const struct jnode *at, struct jv obj,
		     struct jv key)
{
	struct jv *v, r;
	int64_t i;
	bool ok = false;

	jr_defined(c, at, obj);
	if (jv_is_seq(obj) && as_index(key, &i)) {
		int64_t k = i < 0 ? i + (int64_t)obj.u.l->n : i;

		if (k >= 0 && k < (int64_t)obj.u.l->n)
			return obj.u.l->v[k];
		return undef_fmt(c, at, "%s has no element %lld",
				 object_name(obj), (long long)i);
	}
	if (obj.type == JV_STR && as_index(key, &i)) {
		r = str_item(c, at, obj.u.s, i, &ok);
		if (ok)
			return r;
	}
	if (key.type == JV_STR)
		jr_charge(c, at, key.u.s.n);
	if (obj.type == JV_DICT && (v = jv_dict_get(obj.u.d, key)))
		return *v;
	if (key.type == JV_STR)
		return jr_getattr(c, at, obj, key.u.s);
	return undef_fmt(c, at, "%s has no element %.*s", object_name(obj),
			 (int)jv_repr(c, at, key).n, jv_repr(c, at, key).p);
}

/* Python's slice index adjustment for LEN items. */
static void slice_bounds(struct jctx *c, const struct jnode *at, size_t len,
			 struct jv vs[3], int64_t *start, int64_t *stop,
			 int64_t *step)
{
	int64_t n = (int64_t)len, lo, hi, *out[2] = {start, stop};

	*step = 1;
	if (vs[2].type != JV_NONE && vs[2].type != JV_UNDEF &&
	    !as_index(vs[2], step))
		jr_fail(c, at, "slice indices must be integers or None");
	if (*step == 0)
		jr_fail(c, at, "slice step cannot be zero");
	lo = *step < 0 ? -1 : 0;
	hi = *step < 0 ? n - 1 : n;
	for (int k = 0; k < 2; k++) {
		int64_t v;

		if (vs[k].type == JV_NONE || vs[k].type == JV_UNDEF) {
			*out[k] = (*step < 0) == (k == 0) ? hi : lo;
			continue;
		}
		if (!as_index(vs[k], &v))
			jr_fail(c, at, "slice indices must be integers or "
				       "None");
		if (v < 0)
			v += n;
		*out[k] = v < lo ? lo : v > hi ? hi : v;
	}
}

static struct jv slice_str(struct jctx *c, const struct jnode *at,
			   struct jstr s, int64_t start, int64_t stop,
			   int64_t step)
{
	struct jbuf b = {0};
	size_t a, e;

	if (step == 1) {
		if (stop <= start)
			return jv_str("", 0);
		a = ju_offset(s, (size_t)start);
		e = a + ju_offset((struct jstr){s.p + a, s.n - a},
				  (size_t)(stop - start));
		return jv_str(s.p + a, e - a);
	}
	for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
		a = ju_offset(s, (size_t)i);
		e = a;
		ju_next(s, &e);
		jbuf_put(c, at, &b, s.p + a, e - a);
	}
	return (struct jv){.type = JV_STR, .u.s = jbuf_str(&b)};
}

static struct jv eval_slice(struct jctx *c, const struct jnode *nd,
			    struct jscope *s, struct jv obj)
{
	const struct jnode *sl = nd->b, *parts[3] = {sl->a, sl->b, sl->c};
	struct jv vs[3];
	int64_t start, stop, step;
	struct jlist *l;

	for (int k = 0; k < 3; k++)
		vs[k] = parts[k] ? jr_eval(c, parts[k], s) : jv_none();
	jr_defined(c, nd, obj);
	if (obj.type == JV_STR)
		jr_charge(c, nd, obj.u.s.n);
	if (obj.type != JV_STR && !jv_is_seq(obj))
		return undef_fmt(c, nd, "%s cannot be sliced",
				 object_name(obj));
	slice_bounds(c, nd,
		     obj.type == JV_STR ? ju_len(obj.u.s) : obj.u.l->n, vs,
		     &start, &stop, &step);
	if (obj.type == JV_STR)
		return slice_str(c, nd, obj.u.s, start, stop, step);
	l = jv_list_new(c, nd, 0);
	for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
		jv_list_push(c, nd, l, obj.u.l->v[i]);
	return (struct jv){.type = JV_LIST, .sub = obj.sub, .u.l = l};
}

struct jlist *jr_iter(struct jctx *c, const struct jnode *at, struct jv v)
{
	struct jlist *l;
	size_t i = 0;

	switch (v.type) {
	case JV_LIST:
		return v.u.l;
	case JV_UNDEF:
		return jv_list_new(c, at, 0);
	case JV_DICT:
		if (v.sub == JV_NS)
			break;
		l = jr_alloc(c, at, sizeof(*l));
		*l = (struct jlist){.n = v.u.d->n, .cap = v.u.d->n,
				    .v = v.u.d->k};
		return l;
	case JV_STR:
		l = jv_list_new(c, at, v.u.s.n);
		while (i < v.u.s.n) {
			size_t start = i;

			ju_next(v.u.s, &i);
			jv_list_push(c, at, l,
				     jv_str(v.u.s.p + start, i - start));
		}
		return l;
	default:
		break;
	}
	jr_fail(c, at, "'%s' object is not iterable", jv_type_name(v));
}

void jr_eval_args(struct jctx *c, const struct jnode *nd, struct jscope *s,
		  struct jargs *out)
{
	*out = (struct jargs){.n = nd->l1.n, .nkw = nd->l2.n};
	if (out->n)
		out->v = jr_alloc(c, nd, out->n * sizeof(*out->v));
	for (size_t i = 0; i < out->n; i++)
		out->v[i] = jr_eval(c, nd->l1.v[i], s);
	if (!out->nkw)
		return;
	out->kwn = jr_alloc(c, nd, out->nkw * sizeof(*out->kwn));
	out->kwv = jr_alloc(c, nd, out->nkw * sizeof(*out->kwv));
	for (size_t i = 0; i < out->nkw; i++) {
		out->kwn[i] = nd->l2.v[i]->name;
		out->kwv[i] = jr_eval(c, nd->l2.v[i]->a, s);
	}
}

void jargs_bind(struct jctx *c, const struct jnode *at, const char *what,
		const struct jargs *args, const char *const *names,
		struct jv *slots)
{
	size_t np = 0;

	while (names[np])
		slots[np++] = (struct jv){.type = JV_UNDEF, .sub = JV_MISSING};
	if (args->n > np)
		jr_fail(c, at, "%s() takes at most %zu arguments (%zu given)",
			what, np, args->n);
	for (size_t i = 0; i < args->n; i++)
		slots[i] = args->v[i];
	for (size_t k = 0; k < args->nkw; k++) {
		size_t i = 0;

		while (i < np && !jstr_eq(args->kwn[k], names[i]))
			i++;
		if (i == np)
			jr_fail(c, at, "%s() got an unexpected keyword "
				"argument '%.*s'", what, (int)args->kwn[k].n,
				args->kwn[k].p);
		if (!jv_missing(slots[i]))
			jr_fail(c, at, "%s() got multiple values for argument "
				"'%s'", what, names[i]);
		slots[i] = args->kwv[k];
	}
}

static struct jv call_loop_cycle(struct jctx *c, const struct jnode *at,
				 struct jloop *l, const struct jargs *args)
{
	if (!args->n)
		jr_fail(c, at, "no items for cycling given");
	return args->v[l->index0 % args->n];
}

static struct jv call_loop_changed(struct jctx *c, const struct jnode *at,
				   struct jloop *l, const struct jargs *args)
{
	struct jlist *now = jv_list_new(c, at, args->n);
	struct jv v;
	bool changed;

	for (size_t i = 0; i < args->n; i++)
		jv_list_push(c, at, now, args->v[i]);
	v = jv_list(now);
	changed = !l->changed_set || !jv_equal(c, at, l->changed_last, v);
	l->changed_last = v;
	l->changed_set = true;
	return jv_bool(changed);
}

struct jv jr_call(struct jctx *c, const struct jnode *at, struct jv fn,
		  const struct jargs *args)
{
	jr_defined(c, at, fn);
	if (fn.type == JV_LOOP)
		return jr_call_loop(c, at, fn.u.loop, args);
	if (fn.type != JV_FUNC)
		jr_fail(c, at, "'%s' object is not callable", jv_type_name(fn));
	switch (fn.u.fn->kind) {
	case JF_GLOBAL:
		return fn.u.fn->call(c, at, args);
	case JF_METHOD:
		return jb_call_method(c, at, fn.u.fn->self, fn.u.fn->name,
				      args);
	case JF_CYCLE:
		return call_loop_cycle(c, at, fn.u.fn->loop, args);
	case JF_CHANGED:
		return call_loop_changed(c, at, fn.u.fn->loop, args);
	default:
		return jr_call_macro(c, at, fn.u.fn, args);
	}
}

/* A call; a method call obj.name(...) does not build the bound method. */
static struct jv eval_call(struct jctx *c, const struct jnode *nd,
			   struct jscope *s)
{
	struct jargs args;
	struct jv obj;

	if (nd->a->kind == JN_ATTR) {
		obj = jr_eval(c, nd->a->a, s);
		if (obj.type != JV_UNDEF && obj.type != JV_LOOP &&
		    jb_has_method(obj, nd->a->name)) {
			jr_eval_args(c, nd, s, &args);
			return jb_call_method(c, nd, obj, nd->a->name, &args);
		}
		obj = jr_getattr(c, nd->a, obj, nd->a->name);
	} else {
		obj = jr_eval(c, nd->a, s);
	}
	jr_eval_args(c, nd, s, &args);
	return jr_call(c, nd, obj, &args);
}

struct jv jr_apply_filter(struct jctx *c, const struct jnode *nd,
			  struct jscope *s, struct jv in)
{
	struct jargs args;

	jr_eval_args(c, nd, s, &args);
	if (in.type == JV_STR)
		jr_charge(c, nd, in.u.s.n);
	return nd->filter->fn(c, nd, in, &args);
}

static struct jv eval_test(struct jctx *c, const struct jnode *nd,
			   struct jscope *s)
{
	struct jv in = jr_eval(c, nd->a, s);
	struct jargs args;

	jr_eval_args(c, nd, s, &args);
	if (in.type == JV_STR)
		jr_charge(c, nd, in.u.s.n);
	return jv_bool(nd->test->fn(c, nd, in, &args) != nd->neg);
}

static struct jv eval_name(struct jctx *c, const struct jnode *nd,
			   struct jscope *s)
{
	struct jv *v = jr_scope_find(s, nd->name), g;

	if (v)
		return *v;
	if (jb_global(c, nd, nd->name, &g))
		return g;
	return undef_fmt(c, nd, "'%.*s' is undefined", (int)nd->name.n,
			 nd->name.p);
}

static struct jv eval_seq(struct jctx *c, const struct jnode *nd,
			  struct jscope *s)
{
	struct jlist *l = jv_list_new(c, nd, nd->l1.n);

	for (size_t i = 0; i < nd->l1.n; i++)
		jv_list_push(c, nd, l, jr_eval(c, nd->l1.v[i], s));
	return (struct jv){.type = JV_LIST,
			   .sub = nd->kind == JN_TUPLE ? JV_TUPLE : 0,
			   .u.l = l};
}

static struct jv eval_dict(struct jctx *c, const struct jnode *nd,
			   struct jscope *s)
{
	struct jdict *d = jv_dict_new(c, nd, nd->l1.n);

	for (size_t i = 0; i < nd->l1.n; i++) {
		struct jv k = jr_eval(c, nd->l1.v[i], s);

		if (jv_unhashable(k))
			jr_fail(c, nd, "unhashable type: '%s'",
				jv_type_name(k));
		jv_dict_set(c, nd, d, k, jr_eval(c, nd->l2.v[i], s));
	}
	return jv_dict(d);
}

static struct jv eval_concat(struct jctx *c, const struct jnode *nd,
			     struct jscope *s)
{
	struct jbuf b = {0};

	for (size_t i = 0; i < nd->l1.n; i++) {
		struct jstr t = jv_to_str(c, nd, jr_eval(c, nd->l1.v[i], s));

		jbuf_put(c, nd, &b, t.p, t.n);
	}
	return (struct jv){.type = JV_STR, .u.s = jbuf_str(&b)};
}

/* "in": substring, list element or dict key. */
static bool contains(struct jctx *c, const struct jnode *at, struct jv item,
		     struct jv box)
{
	struct jlist *l;

	if (box.type == JV_STR) {
		if (item.type != JV_STR)
			jr_fail(c, at, "'in <string>' requires string as left "
				"operand, not %s", jv_type_name(item));
		jr_charge(c, at, box.u.s.n);
		return ju_find(box.u.s, item.u.s, 0) >= 0;
	}
	if (box.type == JV_DICT && jv_unhashable(item))
		jr_fail(c, at, "unhashable type: '%s'", jv_type_name(item));
	if (box.type == JV_DICT)
		return jv_dict_get(box.u.d, item) != NULL;
	if (box.type != JV_LIST && box.type != JV_UNDEF)
		jr_fail(c, at, "argument of type '%s' is not iterable",
			jv_type_name(box));
	l = jr_iter(c, at, box);
	for (size_t i = 0; i < l->n; i++)
		if (jv_equal(c, at, l->v[i], item))
			return true;
	return false;
}

static bool compare_one(struct jctx *c, const struct jnode *at, enum jop op,
			struct jv a, struct jv b)
{
	if (a.type == JV_STR && b.type == JV_STR)
		jr_charge(c, at, a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n);
	switch (op) {
	case JO_EQ: return jv_equal(c, at, a, b);
	case JO_NE: return !jv_equal(c, at, a, b);
	case JO_IN: return contains(c, at, a, b);
	case JO_NOTIN: return !contains(c, at, a, b);
	default: break;
	}
	jr_defined(c, at, a);
	jr_defined(c, at, b);
	switch (op) {
	case JO_LT: return jv_compare(c, at, a, b) < 0;
	case JO_LTEQ: return jv_compare(c, at, a, b) <= 0;
	case JO_GT: return jv_compare(c, at, a, b) > 0;
	default: return jv_compare(c, at, a, b) >= 0;
	}
}

static struct jv eval_compare(struct jctx *c, const struct jnode *nd,
			      struct jscope *s)
{
	struct jv left = jr_eval(c, nd->a, s);

	for (size_t i = 0; i < nd->l1.n; i++) {
		struct jv right = jr_eval(c, nd->l1.v[i], s);

		if (!compare_one(c, nd, (enum jop)nd->ops[i], left, right))
			return jv_bool(false);
		left = right;
	}
	return jv_bool(true);
}

static struct jv eval_unary(struct jctx *c, const struct jnode *nd,
			    struct jscope *s)
{
	struct jv v = jr_eval(c, nd->a, s);

	jr_defined(c, nd, v);
	if (!jv_is_number(v))
		jr_fail(c, nd, "bad operand type for unary %c: '%s'",
			nd->kind == JN_NEG ? '-' : '+', jv_type_name(v));
	if (nd->kind == JN_POS)
		return v.type == JV_BOOL ? jv_int(v.u.b) : v;
	if (v.type == JV_FLOAT)
		return jv_float(-v.u.f);
	return jr_binop(c, nd, JO_SUB, jv_int(0), v);
}

struct jv jr_eval(struct jctx *c, const struct jnode *nd, struct jscope *s)
{
	struct jv v;

	jr_step(c, nd);
	if (++c->depth > c->max_depth)
		jfail(&c->f, O1_JINJA_ERR_LIMIT, nd->line, nd->col,
		      "template nested deeper than %u levels", c->max_depth);
	switch (nd->kind) {
	case JN_CONST: v = nd->value; break;
	case JN_NAME: v = eval_name(c, nd, s); break;
	case JN_LIST:
	case JN_TUPLE: v = eval_seq(c, nd, s); break;
	case JN_DICT: v = eval_dict(c, nd, s); break;
	case JN_ATTR:
		v = jr_getattr(c, nd, jr_eval(c, nd->a, s), nd->name);
		break;
	case JN_ITEM:
		v = nd->b->kind == JN_SLICE
			? eval_slice(c, nd, s, jr_eval(c, nd->a, s))
			: jr_getitem(c, nd, jr_eval(c, nd->a, s),
				     jr_eval(c, nd->b, s));
		break;
	case JN_CALL: v = eval_call(c, nd, s); break;
	case JN_FILTER:
		v = jr_apply_filter(c, nd, s, jr_eval(c, nd->a, s));
		break;
	case JN_TEST: v = eval_test(c, nd, s); break;
	case JN_NEG:
	case JN_POS: v = eval_unary(c, nd, s); break;
	case JN_NOT: v = jv_bool(!jv_truthy(jr_eval(c, nd->a, s))); break;
	case JN_BINOP:
		v = jr_binop(c, nd, (enum jop)nd->op, jr_eval(c, nd->a, s),
			     jr_eval(c, nd->b, s));
		break;
	case JN_AND:
		v = jr_eval(c, nd->a, s);
		if (jv_truthy(v))
			v = jr_eval(c, nd->b, s);
		break;
	case JN_OR:
		v = jr_eval(c, nd->a, s);
		if (!jv_truthy(v))
			v = jr_eval(c, nd->b, s);
		break;
	case JN_COMPARE: v = eval_compare(c, nd, s); break;
	case JN_COND:
		v = jv_truthy(jr_eval(c, nd->b, s))
			? jr_eval(c, nd->a, s)
			: nd->c ? jr_eval(c, nd->c, s) : jv_undef(NULL);
		break;
	case JN_CONCAT: v = eval_concat(c, nd, s); break;
	default: jr_fail(c, nd, "not an expression");
	}
	c->depth--;
	return v;
}

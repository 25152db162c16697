/* The global functions of transformers' chat-template environment: jinja2's
 * range, namespace and dict, and transformers' raise_exception and
 * strftime_now.
 *
 * range() stops at 100000 items as in jinja2's sandbox; strftime_now
 * formats the render's clock (struct o1_jinja_render_opts.now) in local
 * time with the C library's strftime, which Python's uses too.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "template/jinja_int.h"

enum { MAX_RANGE = 100000 };

static int64_t range_int(struct jctx *c, const struct jnode *at, struct jv v)
{
	if (v.type == JV_INT)
		return v.u.i;
	if (v.type == JV_BOOL)
		return v.u.b;
	jr_fail(c, at, "'%s' object cannot be interpreted as an integer",
		jv_type_name(v));
}

static struct jv g_range(struct jctx *c, const struct jnode *at,
			 const struct jargs *args)
{
	int64_t start = 0, stop, step = 1, n;
	struct jlist *l;

	if (args->nkw || args->n < 1 || args->n > 3)
		jr_fail(c, at, "range expected 1 to 3 integer arguments");
	stop = range_int(c, at, args->v[args->n == 1 ? 0 : 1]);
	if (args->n > 1)
		start = range_int(c, at, args->v[0]);
	if (args->n > 2)
		step = range_int(c, at, args->v[2]);
	if (!step)
		jr_fail(c, at, "range() arg 3 must not be zero");
	if (step > 0)
		n = start < stop ? (stop - start - 1) / step + 1 : 0;
	else
		n = start > stop ? (start - stop - 1) / -step + 1 : 0;
	if (n > MAX_RANGE)
		jr_fail(c, at, "Range too big. The sandbox blocks ranges larger "
			       "than MAX_RANGE (%d).", MAX_RANGE);
	l = jv_list_new(c, at, (size_t)n);
	for (int64_t i = 0; i < n; i++)
		jv_list_push(c, at, l, jv_int(start + i * step));
	return jv_list(l);
}

/* dict(mapping?, **kwargs), the body of namespace() too. */
static struct jdict *dict_of(struct jctx *c, const struct jnode *at,
			     const struct jargs *args)
{
	struct jdict *d = jv_dict_new(c, at, args->nkw);

	if (args->n > 1)
		jr_fail(c, at, "expected at most 1 positional argument, got %zu",
			args->n);
	if (args->n == 1) {
		struct jv m = args->v[0];

		if (m.type != JV_DICT)
			jr_fail(c, at, "'%s' object is not a mapping",
				jv_type_name(m));
		for (size_t i = 0; i < m.u.d->n; i++)
			jv_dict_set(c, at, d, m.u.d->k[i], m.u.d->v[i]);
	}
	for (size_t k = 0; k < args->nkw; k++)
		jv_dict_set(c, at, d, jv_str(args->kwn[k].p, args->kwn[k].n),
			    args->kwv[k]);
	return d;
}

static struct jv g_dict(struct jctx *c, const struct jnode *at,
			const struct jargs *args)
{
	return jv_dict(dict_of(c, at, args));
}

static struct jv g_namespace(struct jctx *c, const struct jnode *at,
			     const struct jargs *args)
{
	return (struct jv){.type = JV_DICT, .sub = JV_NS,
			   .u.d = dict_of(c, at, args)};
}

static struct jv g_raise_exception(struct jctx *c, const struct jnode *at,
				   const struct jargs *args)
{
	static const char *const names[] = {"message", NULL};
	struct jv a[1];
	struct jstr msg;

	jargs_bind(c, at, "raise_exception", args, names, a);
	if (jv_missing(a[0]))
		jr_fail(c, at, "raise_exception() missing 1 required positional "
			       "argument: 'message'");
	msg = jv_to_str(c, at, a[0]);
	jfail(&c->f, O1_JINJA_ERR_RAISED, at->line, at->col, "%.*s",
	      (int)msg.n, msg.p);
}

static struct jv g_strftime_now(struct jctx *c, const struct jnode *at,
				const struct jargs *args)
{
	static const char *const names[] = {"format", NULL};
	struct jv a[1];
	char *fmt, *out;
	struct tm tm;
	size_t n;

	jargs_bind(c, at, "strftime_now", args, names, a);
	if (a[0].type != JV_STR)
		jr_fail(c, at, "strftime_now() needs a format string");
	if (a[0].u.s.n > 256)
		jr_fail(c, at, "strftime_now format longer than 256 bytes");
	fmt = jr_alloc(c, at, a[0].u.s.n + 1);
	memcpy(fmt, a[0].u.s.p, a[0].u.s.n);
	fmt[a[0].u.s.n] = 0;
	if (!localtime_r(&c->now, &tm))
		jr_fail(c, at, "strftime_now: no local time");
	out = jr_alloc(c, at, 4096);
	n = strftime(out, 4096, fmt, &tm);
	return jv_str(out, n);
}

static const struct {
	const char *name;
	struct jv (*call)(struct jctx *c, const struct jnode *at,
			  const struct jargs *args);
} globals[] = {
    {"range", g_range},
    {"dict", g_dict},
    {"namespace", g_namespace},
    {"raise_exception", g_raise_exception},
    {"strftime_now", g_strftime_now},
};

bool jb_global(struct jctx *c, const struct jnode *at, struct jstr name,
	       struct jv *out)
{
	for (size_t i = 0; i < sizeof(globals) / sizeof(globals[0]); i++) {
		struct jfunc *fn;

		if (!jstr_eq(name, globals[i].name))
			continue;
		fn = jr_alloc(c, at, sizeof(*fn));
		*fn = (struct jfunc){.kind = JF_GLOBAL, .name = name,
				     .call = globals[i].call};
		*out = (struct jv){.type = JV_FUNC, .u.fn = fn};
		return true;
	}
	return false;
}

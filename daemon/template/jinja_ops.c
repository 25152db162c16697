/* Jinja's arithmetic with Python's rules: + - * / // % ** over ints
 * (bools count as ints), floats, string and list concatenation and
 * repetition, and printf-style "fmt % args" formatting.
 *
 * Python's ints do not overflow; ours are 64-bit and fail with "integer
 * overflow" instead. Repetition is bounded by the render's memory cap.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "template/jinja_int.h"

static const char *const op_text[] = {
    [JO_ADD] = "+",  [JO_SUB] = "-",	   [JO_DIV] = "/",
    [JO_FLOORDIV] = "//", [JO_MUL] = "*", [JO_MOD] = "%",
    [JO_POW] = "**",
};

static _Noreturn void unsupported(struct jctx *c, const struct jnode *at,
				  enum jop op, struct jv a, struct jv b)
{
	if (op == JO_ADD && a.type == JV_STR)
		jr_fail(c, at, "can only concatenate str (not \"%s\") to str",
			jv_type_name(b));
	if (op == JO_ADD && a.type == JV_LIST)
		jr_fail(c, at, "can only concatenate %s (not \"%s\") to %s",
			jv_type_name(a), jv_type_name(b), jv_type_name(a));
	jr_fail(c, at, "unsupported operand type(s) for %s: '%s' and '%s'",
		op_text[op], jv_type_name(a), jv_type_name(b));
}

static int64_t as_int(struct jv v)
{
	return v.type == JV_BOOL ? v.u.b : v.u.i;
}

static _Noreturn void overflow(struct jctx *c, const struct jnode *at)
{
	jr_fail(c, at, "integer overflow (beyond 64 bits)");
}

static int64_t ipow(struct jctx *c, const struct jnode *at, int64_t base,
		    int64_t exp)
{
	int64_t r = 1;

	while (exp > 0) {
		if ((exp & 1) && __builtin_mul_overflow(r, base, &r))
			overflow(c, at);
		exp >>= 1;
		if (exp && __builtin_mul_overflow(base, base, &base))
			overflow(c, at);
	}
	return r;
}

static struct jv int_op(struct jctx *c, const struct jnode *at, enum jop op,
			int64_t x, int64_t y)
{
	int64_t r;

	switch (op) {
	case JO_ADD:
		if (__builtin_add_overflow(x, y, &r))
			overflow(c, at);
		return jv_int(r);
	case JO_SUB:
		if (__builtin_sub_overflow(x, y, &r))
			overflow(c, at);
		return jv_int(r);
	case JO_MUL:
		if (__builtin_mul_overflow(x, y, &r))
			overflow(c, at);
		return jv_int(r);
	case JO_FLOORDIV:
	case JO_MOD:
		if (!y)
			jr_fail(c, at, "integer division or modulo by zero");
		if (x == INT64_MIN && y == -1)
			overflow(c, at);
		r = x % y;
		if (r && ((r < 0) != (y < 0)))
			r += y;
		return jv_int(op == JO_MOD ? r : (x - r) / y);
	case JO_POW:
		if (y < 0)
			return jv_float(pow((double)x, (double)y));
		return jv_int(ipow(c, at, x, y));
	default: /* JO_DIV */
		if (!y)
			jr_fail(c, at, "division by zero");
		return jv_float((double)x / (double)y);
	}
}

/* Python's float // and %: the remainder takes the divisor's sign. */
static struct jv float_divmod(enum jop op, double x, double y)
{
	double mod = fmod(x, y), div = (x - mod) / y, fl;

	if (mod) {
		if ((y < 0) != (mod < 0)) {
			mod += y;
			div -= 1.0;
		}
	} else {
		mod = copysign(0.0, y);
	}
	if (op == JO_MOD)
		return jv_float(mod);
	if (!div)
		return jv_float(copysign(0.0, x / y));
	fl = floor(div);
	if (div - fl > 0.5)
		fl += 1.0;
	return jv_float(fl);
}

static struct jv float_op(struct jctx *c, const struct jnode *at,
			  enum jop op, double x, double y)
{
	switch (op) {
	case JO_ADD: return jv_float(x + y);
	case JO_SUB: return jv_float(x - y);
	case JO_MUL: return jv_float(x * y);
	case JO_POW: return jv_float(pow(x, y));
	default: break;
	}
	if (y == 0)
		jr_fail(c, at, op == JO_DIV ? "float division by zero"
			       : op == JO_MOD ? "float modulo"
					      : "float floor division by zero");
	if (op == JO_DIV)
		return jv_float(x / y);
	return float_divmod(op, x, y);
}

/* S * N for strings and lists. */
static struct jv repeat(struct jctx *c, const struct jnode *at, struct jv s,
			int64_t n)
{
	struct jbuf b = {0};
	struct jlist *l;
	size_t unit;

	if (n < 0)
		n = 0;
	unit = s.type == JV_STR ? s.u.s.n : s.u.l->n * sizeof(struct jv);
	if (unit && (uint64_t)n > c->arena.cap_bytes / unit)
		jfail(&c->f, O1_JINJA_ERR_LIMIT, at->line, at->col,
		      "repetition exceeds the memory limit");
	if (s.type == JV_STR) {
		for (int64_t i = 0; i < n; i++)
			jbuf_put(c, at, &b, s.u.s.p, s.u.s.n);
		return (struct jv){.type = JV_STR, .u.s = jbuf_str(&b)};
	}
	l = jv_list_new(c, at, (size_t)n * s.u.l->n);
	for (int64_t i = 0; i < n; i++)
		for (size_t k = 0; k < s.u.l->n; k++)
			jv_list_push(c, at, l, s.u.l->v[k]);
	return (struct jv){.type = JV_LIST, .sub = s.sub, .u.l = l};
}

static struct jv concat(struct jctx *c, const struct jnode *at, struct jv a,
			struct jv b)
{
	struct jbuf buf = {0};
	struct jlist *l;

	if (a.type == JV_STR) {
		jbuf_put(c, at, &buf, a.u.s.p, a.u.s.n);
		jbuf_put(c, at, &buf, b.u.s.p, b.u.s.n);
		return (struct jv){.type = JV_STR, .u.s = jbuf_str(&buf)};
	}
	l = jv_list_new(c, at, a.u.l->n + b.u.l->n);
	for (size_t i = 0; i < a.u.l->n; i++)
		jv_list_push(c, at, l, a.u.l->v[i]);
	for (size_t i = 0; i < b.u.l->n; i++)
		jv_list_push(c, at, l, b.u.l->v[i]);
	return (struct jv){.type = JV_LIST, .sub = a.sub, .u.l = l};
}

static bool is_seq(struct jv v)
{
	return v.type == JV_STR || jv_is_seq(v);
}

static bool is_intlike(struct jv v)
{
	return v.type == JV_INT || v.type == JV_BOOL;
}

struct jv jr_binop(struct jctx *c, const struct jnode *at, enum jop op,
		   struct jv a, struct jv b)
{
	jr_defined(c, at, a);
	jr_defined(c, at, b);
	if (jv_is_number(a) && jv_is_number(b)) {
		if (a.type == JV_FLOAT || b.type == JV_FLOAT)
			return float_op(c, at, op, jv_as_double(a),
					jv_as_double(b));
		return int_op(c, at, op, as_int(a), as_int(b));
	}
	if (op == JO_ADD && is_seq(a) && a.type == b.type && a.sub == b.sub)
		return concat(c, at, a, b);
	if (op == JO_MUL && is_seq(a) && is_intlike(b))
		return repeat(c, at, a, as_int(b));
	if (op == JO_MUL && is_intlike(a) && is_seq(b))
		return repeat(c, at, b, as_int(a));
	if (op == JO_MOD && a.type == JV_STR)
		return (struct jv){.type = JV_STR,
				   .u.s = jr_percent_format(c, at, a.u.s, b)};
	unsupported(c, at, op, a, b);
}

/* One conversion spec: "%" [(key)] flags width [.prec] type. */
struct spec {
	char flags[8];
	int width, prec;
	char type;
	struct jstr key;
};

/* V with the decimal digit D appended, at most SPEC_MAX: a template's
 * "%99999999999d" must not overflow an int (the fuzzer's find). */
#define SPEC_MAX 4096
static int digit_in(int v, char d)
{
	v = v * 10 + (d - '0');
	return v > SPEC_MAX ? SPEC_MAX : v;
}

static size_t parse_spec(struct jstr f, size_t i, struct spec *sp)
{
	size_t nf = 0;

	*sp = (struct spec){.width = -1, .prec = -1};
	if (i < f.n && f.p[i] == '(') {
		size_t start = ++i;

		while (i < f.n && f.p[i] != ')')
			i++;
		sp->key = (struct jstr){f.p + start, i - start};
		i++;
	}
	while (i < f.n && strchr("-+ #0", f.p[i]) && f.p[i] && nf < 6)
		sp->flags[nf++] = f.p[i++];
	for (; i < f.n && f.p[i] >= '0' && f.p[i] <= '9'; i++)
		sp->width = digit_in(sp->width < 0 ? 0 : sp->width, f.p[i]);
	if (i < f.n && f.p[i] == '.')
		for (sp->prec = 0, i++; i < f.n && f.p[i] >= '0' &&
					f.p[i] <= '9';
		     i++)
			sp->prec = digit_in(sp->prec, f.p[i]);
	sp->type = i < f.n ? f.p[i++] : 0;
	return i;
}

static void put_number(struct jctx *c, const struct jnode *at,
		       struct jbuf *b, const struct spec *sp, struct jv v)
{
	char fmt[32], out[8300];
	bool integer = strchr("dixXo", sp->type) != NULL;

	if (!jv_is_number(v))
		jr_fail(c, at, "%%%c format: a real number is required, not %s",
			sp->type, jv_type_name(v));
	snprintf(fmt, sizeof(fmt), "%%%s*.*%s%c", sp->flags,
		 integer ? "ll" : "", sp->type == 'i' ? 'd' : sp->type);
	if (integer)
		snprintf(out, sizeof(out), fmt, sp->width < 0 ? 0 : sp->width,
			 sp->prec < 0 ? 1 : sp->prec,
			 (long long)(v.type == JV_FLOAT ? (int64_t)v.u.f
							: as_int(v)));
	else
		snprintf(out, sizeof(out), fmt, sp->width < 0 ? 0 : sp->width,
			 sp->prec < 0 ? 6 : sp->prec, jv_as_double(v));
	jbuf_puts(c, at, b, out);
}

static void put_text(struct jctx *c, const struct jnode *at, struct jbuf *b,
		     const struct spec *sp, struct jstr s)
{
	size_t len = sp->prec >= 0 ? ju_offset(s, (size_t)sp->prec) : s.n;
	size_t cps = ju_len((struct jstr){s.p, len});
	bool left = strchr(sp->flags, '-') != NULL;

	for (int i = (int)cps; !left && i < sp->width; i++)
		jbuf_put(c, at, b, " ", 1);
	jbuf_put(c, at, b, s.p, len);
	for (int i = (int)cps; left && i < sp->width; i++)
		jbuf_put(c, at, b, " ", 1);
}

static struct jv next_arg(struct jctx *c, const struct jnode *at,
			  struct jv args, const struct spec *sp, size_t *k)
{
	struct jv *v;

	if (sp->key.p) {
		if (args.type != JV_DICT)
			jr_fail(c, at, "format requires a mapping");
		v = jv_dict_get(args.u.d, jv_str(sp->key.p, sp->key.n));
		if (!v)
			jr_fail(c, at, "KeyError: '%.*s'", (int)sp->key.n,
				sp->key.p);
		return *v;
	}
	if (args.type == JV_LIST && args.sub == JV_TUPLE) {
		if (*k >= args.u.l->n)
			jr_fail(c, at, "not enough arguments for format "
				       "string");
		return args.u.l->v[(*k)++];
	}
	if ((*k)++)
		jr_fail(c, at, "not enough arguments for format string");
	return args;
}

struct jstr jr_percent_format(struct jctx *c, const struct jnode *at,
			      struct jstr f, struct jv args)
{
	struct jbuf b = {0};
	struct spec sp;
	size_t i = 0, k = 0;

	while (i < f.n) {
		const char *pct = memchr(f.p + i, '%', f.n - i);
		size_t stop = pct ? (size_t)(pct - f.p) : f.n;

		jbuf_put(c, at, &b, f.p + i, stop - i);
		if (!pct)
			break;
		i = parse_spec(f, stop + 1, &sp);
		if (sp.type == '%') {
			jbuf_put(c, at, &b, "%", 1);
		} else if (sp.type == 's' || sp.type == 'r') {
			struct jv v = next_arg(c, at, args, &sp, &k);

			put_text(c, at, &b, &sp,
				 sp.type == 's' ? jv_to_str(c, at, v)
						: jv_repr(c, at, v));
		} else if (sp.type && strchr("dixXoeEfFgG", sp.type)) {
			put_number(c, at, &b, &sp,
				   next_arg(c, at, args, &sp, &k));
		} else {
			jr_fail(c, at, "unsupported format character '%c'",
				sp.type ? sp.type : '?');
		}
	}
	if ((args.type == JV_LIST && args.sub == JV_TUPLE && k < args.u.l->n) ||
	    (!k && args.type != JV_DICT &&
	     !(args.type == JV_LIST && args.sub == JV_TUPLE)))
		jr_fail(c, at, "not all arguments converted during string "
			       "formatting");
	return jbuf_str(&b);
}

/* Jinja tests ("x is defined", "x is not none", "n is divisibleby 3"):
 * jinja2's built-in tests with Python's type rules (a bool is a number but
 * not an integer; undefined is iterable; a dict is a sequence).
 */
#include <string.h>

#include "template/jinja_int.h"

#define TEST(name)                                                             \
	static bool t_##name(struct jctx *c, const struct jnode *at,           \
			     struct jv in, const struct jargs *args)

static struct jv one_arg(struct jctx *c, const struct jnode *at,
			 const struct jargs *args)
{
	static const char *const names[] = {"other", NULL};
	struct jv a[1];

	jargs_bind(c, at, "test", args, names, a);
	if (jv_missing(a[0]))
		jr_fail(c, at, "the test needs an argument");
	return a[0];
}

static void no_args(struct jctx *c, const struct jnode *at,
		    const struct jargs *args)
{
	static const char *const none[] = {NULL};
	struct jv unused;

	jargs_bind(c, at, "test", args, none, &unused);
}

TEST(defined) { no_args(c, at, args); return in.type != JV_UNDEF; }
TEST(undefined) { no_args(c, at, args); return in.type == JV_UNDEF; }
TEST(none) { no_args(c, at, args); return in.type == JV_NONE; }
TEST(boolean) { no_args(c, at, args); return in.type == JV_BOOL; }
TEST(true) { no_args(c, at, args); return in.type == JV_BOOL && in.u.b; }
TEST(false) { no_args(c, at, args); return in.type == JV_BOOL && !in.u.b; }
TEST(string) { no_args(c, at, args); return in.type == JV_STR; }
TEST(integer) { no_args(c, at, args); return in.type == JV_INT; }
TEST(float) { no_args(c, at, args); return in.type == JV_FLOAT; }
TEST(number) { no_args(c, at, args); return jv_is_number(in); }
TEST(escaped) { no_args(c, at, args); (void)in; return false; }

TEST(mapping)
{
	no_args(c, at, args);
	return in.type == JV_DICT && in.sub != JV_NS;
}

TEST(iterable)
{
	no_args(c, at, args);
	return in.type == JV_UNDEF || in.type == JV_STR ||
	       in.type == JV_LIST || (in.type == JV_DICT && in.sub != JV_NS);
}

TEST(sequence)
{
	no_args(c, at, args);
	return in.type == JV_UNDEF || in.type == JV_STR ||
	       in.type == JV_LIST || (in.type == JV_DICT && in.sub != JV_NS);
}

TEST(callable)
{
	no_args(c, at, args);
	/* jinja2's Undefined is callable (calling it fails) */
	return in.type == JV_FUNC || in.type == JV_LOOP || in.type == JV_UNDEF;
}

static bool case_only(struct jctx *c, const struct jnode *at, struct jv in,
		      enum ju_case how)
{
	struct jstr s = jv_to_str(c, at, in), t = ju_case(c, at, s, how);
	struct jstr other = ju_case(c, at, s, how == JU_LOWER ? JU_UPPER
							     : JU_LOWER);

	/* Python: at least one cased character, and none of the other case */
	return jstr_same(s, t) && !jstr_same(s, other);
}

TEST(lower) { no_args(c, at, args); return case_only(c, at, in, JU_LOWER); }
TEST(upper) { no_args(c, at, args); return case_only(c, at, in, JU_UPPER); }

static int64_t int_of(struct jctx *c, const struct jnode *at, struct jv v)
{
	if (v.type == JV_INT)
		return v.u.i;
	if (v.type == JV_BOOL)
		return v.u.b;
	jr_fail(c, at, "an integer is required, not '%s'", jv_type_name(v));
}

TEST(even)
{
	no_args(c, at, args);
	return int_of(c, at, in) % 2 == 0;
}

TEST(odd)
{
	no_args(c, at, args);
	return int_of(c, at, in) % 2 != 0;
}

TEST(divisibleby)
{
	struct jv n = one_arg(c, at, args);

	return !jv_truthy(jr_binop(c, at, JO_MOD, in, n));
}

TEST(eq) { return jv_equal(c, at, in, one_arg(c, at, args)); }
TEST(ne) { return !jv_equal(c, at, in, one_arg(c, at, args)); }
TEST(lt) { return jv_compare(c, at, in, one_arg(c, at, args)) < 0; }
TEST(le) { return jv_compare(c, at, in, one_arg(c, at, args)) <= 0; }
TEST(gt) { return jv_compare(c, at, in, one_arg(c, at, args)) > 0; }
TEST(ge) { return jv_compare(c, at, in, one_arg(c, at, args)) >= 0; }

TEST(in)
{
	struct jv box = one_arg(c, at, args);
	struct jlist *l;

	if (box.type == JV_STR) {
		if (in.type != JV_STR)
			jr_fail(c, at, "'in <string>' requires string as left "
				"operand, not %s", jv_type_name(in));
		return ju_find(box.u.s, in.u.s, 0) >= 0;
	}
	if (box.type == JV_DICT && jv_unhashable(in))
		jr_fail(c, at, "unhashable type: '%s'", jv_type_name(in));
	if (box.type == JV_DICT)
		return jv_dict_get(box.u.d, in) != NULL;
	l = jr_iter(c, at, box);
	for (size_t i = 0; i < l->n; i++)
		if (jv_equal(c, at, l->v[i], in))
			return true;
	return false;
}

/* Python's "is": the same object; scalars by value (None, True and
 * False are singletons; small ints and equal strings usually are). */
TEST(sameas)
{
	struct jv o = one_arg(c, at, args);

	if (in.type != o.type)
		return false;
	switch (in.type) {
	case JV_NONE:
	case JV_UNDEF:
		return true;
	case JV_BOOL:
		return in.u.b == o.u.b;
	case JV_INT:
		return in.u.i == o.u.i;
	case JV_FLOAT:
		return in.u.f == o.u.f;
	case JV_STR:
		return in.u.s.p == o.u.s.p && in.u.s.n == o.u.s.n;
	default:
		return in.u.l == o.u.l;
	}
}

TEST(filter)
{
	no_args(c, at, args);
	return in.type == JV_STR && jb_filter(in.u.s) != NULL;
}

TEST(test)
{
	no_args(c, at, args);
	return in.type == JV_STR && jb_test(in.u.s) != NULL;
}

static const struct jtest_def tests[] = {
    {"!=", t_ne},	     {"<", t_lt},
    {"<=", t_le},	     {"==", t_eq},
    {">", t_gt},	     {">=", t_ge},
    {"boolean", t_boolean},  {"callable", t_callable},
    {"defined", t_defined},  {"divisibleby", t_divisibleby},
    {"eq", t_eq},	     {"equalto", t_eq},
    {"escaped", t_escaped},  {"even", t_even},
    {"false", t_false},	     {"filter", t_filter},
    {"float", t_float},	     {"ge", t_ge},
    {"greaterthan", t_gt},   {"gt", t_gt},
    {"in", t_in},	     {"integer", t_integer},
    {"iterable", t_iterable}, {"le", t_le},
    {"lessthan", t_lt},	     {"lower", t_lower},
    {"lt", t_lt},	     {"mapping", t_mapping},
    {"ne", t_ne},	     {"none", t_none},
    {"number", t_number},    {"odd", t_odd},
    {"sameas", t_sameas},    {"sequence", t_sequence},
    {"string", t_string},    {"test", t_test},
    {"true", t_true},	     {"undefined", t_undefined},
    {"upper", t_upper},
};

const struct jtest_def *jb_test(struct jstr name)
{
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (jstr_eq(name, tests[i].name))
			return &tests[i];
	return NULL;
}

bool jr_test_by_name(struct jctx *c, const struct jnode *at, struct jstr name,
		     struct jv in, const struct jargs *args)
{
	const struct jtest_def *t = jb_test(name);

	if (!t)
		jr_fail(c, at, "No test named '%.*s'.", (int)name.n, name.p);
	if (in.type == JV_STR)
		jr_charge(c, at, in.u.s.n);
	return t->fn(c, at, in, args);
}

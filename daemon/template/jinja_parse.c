/* Jinja parser: tokens to a syntax tree, with jinja2's grammar and operator
 * precedence (condition, or, and, not, comparisons, + -, ~, * / // %, **,
 * unary, then postfix: attribute, subscript, call, filter, test).
 *
 * Filters and tests are resolved here, so an unknown one is a syntax error
 * at load time as in jinja2. Nesting of expressions and blocks is bounded
 * (MAX_DEPTH), which bounds the renderer's recursion too.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "template/jinja_int.h"

enum { MAX_DEPTH = 200 };

struct parser {
	struct jfail *f;
	struct o1_jinja *t;
	const struct jtoken *tok;
	size_t n, i;
	int depth;
	/* innermost open block's tag and what ends it, for messages */
	const char *open_tag;
	const char *const *open_ends;
};

struct nodevec {
	struct jnode **v;
	size_t n, cap;
};

static const struct jtoken *cur(const struct parser *p)
{
	return &p->tok[p->i];
}

static const struct jtoken *peek(const struct parser *p, size_t k)
{
	return &p->tok[p->i + k < p->n ? p->i + k : p->n - 1];
}

static const struct jtoken *next(struct parser *p)
{
	const struct jtoken *t = cur(p);

	if (p->i + 1 < p->n)
		p->i++;
	return t;
}

static const char *describe(const struct jtoken *t)
{
	static const char *const ops[JO_N] = {
	    "+", "-", "/", "//", "*", "%", "**", "~", "[", "]", "(", ")",
	    "{", "}", "==", "!=", ">", ">=", "<", "<=", "=", ".", ":", "|",
	    ",", ";", "in", "not in"};
	_Static_assert(sizeof(ops) / sizeof(ops[0]) == JO_N, "ops table");

	switch (t->type) {
	case JT_EOF: return "end of template";
	case JT_DATA: return "template data";
	case JT_VAR_BEGIN: return "begin of print statement";
	case JT_VAR_END: return "end of print statement";
	case JT_BLOCK_BEGIN: return "begin of statement block";
	case JT_BLOCK_END: return "end of statement block";
	case JT_STRING: return "string";
	case JT_INT: return "integer";
	case JT_FLOAT: return "float";
	case JT_OP: return ops[t->op];
	default: return "name";
	}
}

static _Noreturn void fail_at(struct parser *p, const struct jtoken *t,
			      const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail_at(struct parser *p, const struct jtoken *t,
		    const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	jfail(p->f, O1_JINJA_ERR_SYNTAX, t->line, t->col, "%s", msg);
}

static _Noreturn void unexpected(struct parser *p, const char *expected)
{
	const struct jtoken *t = cur(p);
	char got[80];

	if (t->type == JT_NAME)
		snprintf(got, sizeof(got), "'%.*s'", (int)t->s.n, t->s.p);
	else
		snprintf(got, sizeof(got), "'%s'", describe(t));
	fail_at(p, t, "expected %s, got %s", expected, got);
}

static bool is_name(const struct jtoken *t, const char *name)
{
	return t->type == JT_NAME && jstr_eq(t->s, name);
}

static bool is_op(const struct jtoken *t, enum jop op)
{
	return t->type == JT_OP && t->op == op;
}

static bool skip_name(struct parser *p, const char *name)
{
	if (!is_name(cur(p), name))
		return false;
	next(p);
	return true;
}

static bool skip_op(struct parser *p, enum jop op)
{
	if (!is_op(cur(p), op))
		return false;
	next(p);
	return true;
}

static void expect_op(struct parser *p, enum jop op, const char *what)
{
	if (!skip_op(p, op))
		unexpected(p, what);
}

static void expect_type(struct parser *p, enum jtok type, const char *what)
{
	if (cur(p)->type != type)
		unexpected(p, what);
	next(p);
}

static struct jnode *node(struct parser *p, enum jn_kind kind,
			  const struct jtoken *at)
{
	struct jnode *nd = jalloc(p->f, &p->t->arena, sizeof(*nd), at->line,
				  at->col);

	memset(nd, 0, sizeof(*nd));
	nd->kind = (uint8_t)kind;
	nd->line = at->line;
	nd->col = at->col;
	return nd;
}

static void vec_push(struct parser *p, struct nodevec *v, struct jnode *nd)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 4;
		struct jnode **nv = jalloc(p->f, &p->t->arena, cap * sizeof(*nv),
					   nd->line, nd->col);

		if (v->n)
			memcpy(nv, v->v, v->n * sizeof(*nv));
		v->v = nv;
		v->cap = cap;
	}
	v->v[v->n++] = nd;
}

static struct jnodes vec_done(struct nodevec *v)
{
	return (struct jnodes){v->v, v->n};
}

static void enter(struct parser *p)
{
	if (++p->depth > MAX_DEPTH)
		fail_at(p, cur(p), "template nested more than %d levels deep",
			MAX_DEPTH);
}

static struct jnode *parse_expression(struct parser *p, bool condexpr);
static struct jnode *parse_unary(struct parser *p, bool with_filter);
static struct jnode *parse_primary(struct parser *p);
static struct jnode *parse_postfix(struct parser *p, struct jnode *nd);
static struct jnode *parse_tuple(struct parser *p, bool simplified,
				 bool condexpr, const char *extra_end,
				 bool explicit_parens);

/* "(" args ")" into l1 (positional) and l2 (JN_KWARG). */
static void parse_call_args(struct parser *p, struct jnode *nd)
{
	struct nodevec args = {0}, kwargs = {0};

	expect_op(p, JO_LPAREN, "'('");
	while (!is_op(cur(p), JO_RPAREN)) {
		if (args.n || kwargs.n) {
			expect_op(p, JO_COMMA, "','");
			if (is_op(cur(p), JO_RPAREN))
				break;
		}
		if (is_op(cur(p), JO_MUL) || is_op(cur(p), JO_POW))
			fail_at(p, cur(p), "*args and **kwargs in calls are "
				"not supported");
		if (cur(p)->type == JT_NAME && is_op(peek(p, 1), JO_ASSIGN)) {
			struct jnode *kw = node(p, JN_KWARG, cur(p));

			kw->name = next(p)->s;
			next(p);
			kw->a = parse_expression(p, true);
			vec_push(p, &kwargs, kw);
			continue;
		}
		if (kwargs.n)
			fail_at(p, cur(p), "invalid syntax for function call "
				"expression");
		vec_push(p, &args, parse_expression(p, true));
	}
	next(p);
	nd->l1 = vec_done(&args);
	nd->l2 = vec_done(&kwargs);
}

/* A call of FN at the current '(': FN(args). */
static struct jnode *parse_call(struct parser *p, struct jnode *fn)
{
	struct jnode *call = node(p, JN_CALL, cur(p));

	call->a = fn;
	parse_call_args(p, call);
	return call;
}

static struct jnode *parse_filter_one(struct parser *p, struct jnode *in)
{
	const struct jtoken *name = cur(p);
	struct jnode *nd;

	expect_type(p, JT_NAME, "a filter name");
	nd = node(p, JN_FILTER, name);
	nd->a = in;
	nd->name = name->s;
	nd->filter = jb_filter(name->s);
	if (!nd->filter)
		jfail(p->f, O1_JINJA_ERR_SYNTAX, name->line, name->col,
		      "No filter named '%.*s'.", (int)name->s.n, name->s.p);
	if (is_op(cur(p), JO_LPAREN))
		parse_call_args(p, nd);
	return nd;
}

/* A filter chain "| a | b(x)" (START_INLINE: the first without "|"). */
static struct jnode *parse_filter(struct parser *p, struct jnode *in,
				  bool start_inline)
{
	while (start_inline || skip_op(p, JO_PIPE)) {
		in = parse_filter_one(p, in);
		start_inline = false;
	}
	return in;
}

static bool test_takes_bare_arg(const struct jtoken *t)
{
	if (t->type == JT_NAME)
		return !jstr_eq(t->s, "else") && !jstr_eq(t->s, "or") &&
		       !jstr_eq(t->s, "and");
	return t->type == JT_STRING || t->type == JT_INT ||
	       t->type == JT_FLOAT ||
	       (t->type == JT_OP && (t->op == JO_LPAREN ||
				     t->op == JO_LBRACKET ||
				     t->op == JO_LBRACE));
}

static struct jnode *parse_test(struct parser *p, struct jnode *in)
{
	const struct jtoken *is = next(p), *name;
	bool neg = skip_name(p, "not");
	struct jnode *nd;

	name = cur(p);
	expect_type(p, JT_NAME, "a test name");
	nd = node(p, JN_TEST, is);
	nd->a = in;
	nd->neg = neg;
	nd->name = name->s;
	nd->test = jb_test(name->s);
	if (!nd->test)
		jfail(p->f, O1_JINJA_ERR_SYNTAX, name->line, name->col,
		      "No test named '%.*s'.", (int)name->s.n, name->s.p);
	if (is_op(cur(p), JO_LPAREN)) {
		parse_call_args(p, nd);
	} else if (test_takes_bare_arg(cur(p))) {
		struct nodevec args = {0};

		if (is_name(cur(p), "is"))
			fail_at(p, cur(p), "You cannot chain multiple tests "
				"with is");
		vec_push(p, &args, parse_postfix(p, parse_primary(p)));
		nd->l1 = vec_done(&args);
	}
	return nd;
}

static struct jnode *parse_filter_expr(struct parser *p, struct jnode *nd)
{
	for (;;) {
		if (is_op(cur(p), JO_PIPE)) {
			next(p);
			nd = parse_filter_one(p, nd);
		} else if (is_name(cur(p), "is")) {
			nd = parse_test(p, nd);
		} else if (is_op(cur(p), JO_LPAREN)) {
			nd = parse_call(p, nd);
		} else {
			return nd;
		}
	}
}

/* One subscript item: an expression or a slice a:b:c. */
static struct jnode *parse_subscribed(struct parser *p)
{
	const struct jtoken *at = cur(p);
	struct jnode *first = NULL, *sl;

	if (!is_op(cur(p), JO_COLON)) {
		first = parse_expression(p, true);
		if (!is_op(cur(p), JO_COLON))
			return first;
	}
	next(p);
	sl = node(p, JN_SLICE, at);
	sl->a = first;
	if (!is_op(cur(p), JO_COLON) && !is_op(cur(p), JO_RBRACKET) &&
	    !is_op(cur(p), JO_COMMA))
		sl->b = parse_expression(p, true);
	if (skip_op(p, JO_COLON) && !is_op(cur(p), JO_RBRACKET) &&
	    !is_op(cur(p), JO_COMMA))
		sl->c = parse_expression(p, true);
	return sl;
}

static struct jnode *parse_subscript(struct parser *p, struct jnode *obj)
{
	const struct jtoken *at = next(p);
	struct jnode *nd;
	struct nodevec items = {0};

	if (at->op == JO_DOT) {
		const struct jtoken *t = next(p);

		if (t->type == JT_INT) {
			nd = node(p, JN_ITEM, at);
			nd->a = obj;
			nd->b = node(p, JN_CONST, t);
			nd->b->value = jv_int(t->i);
			return nd;
		}
		if (t->type != JT_NAME) {
			p->i--;
			unexpected(p, "a name or number after '.'");
		}
		nd = node(p, JN_ATTR, at);
		nd->a = obj;
		nd->name = t->s;
		return nd;
	}
	nd = node(p, JN_ITEM, at);
	nd->a = obj;
	do {
		if (is_op(cur(p), JO_RBRACKET))
			break;
		vec_push(p, &items, parse_subscribed(p));
	} while (skip_op(p, JO_COMMA));
	expect_op(p, JO_RBRACKET, "']'");
	if (items.n == 1) {
		nd->b = items.v[0];
	} else {
		nd->b = node(p, JN_TUPLE, at);
		nd->b->l1 = vec_done(&items);
	}
	return nd;
}

static struct jnode *parse_postfix(struct parser *p, struct jnode *nd)
{
	for (;;) {
		if (is_op(cur(p), JO_DOT) || is_op(cur(p), JO_LBRACKET)) {
			nd = parse_subscript(p, nd);
		} else if (is_op(cur(p), JO_LPAREN)) {
			nd = parse_call(p, nd);
		} else {
			return nd;
		}
	}
}

static struct jnode *parse_list(struct parser *p)
{
	struct jnode *nd = node(p, JN_LIST, next(p));
	struct nodevec items = {0};

	while (!is_op(cur(p), JO_RBRACKET)) {
		if (items.n) {
			expect_op(p, JO_COMMA, "',' or ']'");
			if (is_op(cur(p), JO_RBRACKET))
				break;
		}
		vec_push(p, &items, parse_expression(p, true));
	}
	next(p);
	nd->l1 = vec_done(&items);
	return nd;
}

static struct jnode *parse_dict(struct parser *p)
{
	struct jnode *nd = node(p, JN_DICT, next(p));
	struct nodevec keys = {0}, vals = {0};

	while (!is_op(cur(p), JO_RBRACE)) {
		if (keys.n) {
			expect_op(p, JO_COMMA, "',' or '}'");
			if (is_op(cur(p), JO_RBRACE))
				break;
		}
		vec_push(p, &keys, parse_expression(p, true));
		expect_op(p, JO_COLON, "':'");
		vec_push(p, &vals, parse_expression(p, true));
	}
	next(p);
	nd->l1 = vec_done(&keys);
	nd->l2 = vec_done(&vals);
	return nd;
}

static bool name_const(const struct jtoken *t, struct jv *out)
{
	if (jstr_eq(t->s, "true") || jstr_eq(t->s, "True"))
		*out = jv_bool(true);
	else if (jstr_eq(t->s, "false") || jstr_eq(t->s, "False"))
		*out = jv_bool(false);
	else if (jstr_eq(t->s, "none") || jstr_eq(t->s, "None"))
		*out = jv_none();
	else
		return false;
	return true;
}

/* Adjacent string literals are one string. */
static struct jnode *parse_strings(struct parser *p)
{
	const struct jtoken *first = cur(p);
	struct jnode *nd = node(p, JN_CONST, first);
	size_t n = 0, k = 0;
	char *s;

	for (size_t j = p->i; j < p->n && p->tok[j].type == JT_STRING; j++)
		n += p->tok[j].s.n;
	s = jalloc(p->f, &p->t->arena, n + 1, first->line, first->col);
	while (cur(p)->type == JT_STRING) {
		const struct jtoken *t = next(p);

		if (t->s.n)
			memcpy(s + k, t->s.p, t->s.n);
		k += t->s.n;
	}
	nd->value = jv_str(s, n);
	return nd;
}

static struct jnode *parse_primary(struct parser *p)
{
	const struct jtoken *t = cur(p);
	struct jnode *nd;

	switch (t->type) {
	case JT_NAME:
		next(p);
		nd = node(p, JN_CONST, t);
		if (!name_const(t, &nd->value)) {
			nd->kind = JN_NAME;
			nd->name = t->s;
		}
		return nd;
	case JT_STRING:
		return parse_strings(p);
	case JT_INT:
	case JT_FLOAT:
		nd = node(p, JN_CONST, next(p));
		nd->value = t->type == JT_INT ? jv_int(t->i) : jv_float(t->f);
		return nd;
	case JT_OP:
		if (t->op == JO_LPAREN) {
			next(p);
			nd = parse_tuple(p, false, true, NULL, true);
			expect_op(p, JO_RPAREN, "')'");
			return nd;
		}
		if (t->op == JO_LBRACKET)
			return parse_list(p);
		if (t->op == JO_LBRACE)
			return parse_dict(p);
		/* fall through */
	default:
		fail_at(p, t, "unexpected '%s'", describe(t));
	}
}

static struct jnode *parse_unary(struct parser *p, bool with_filter)
{
	const struct jtoken *t = cur(p);
	struct jnode *nd;

	enter(p);
	if (is_op(t, JO_SUB) || is_op(t, JO_ADD)) {
		next(p);
		nd = node(p, t->op == JO_SUB ? JN_NEG : JN_POS, t);
		nd->a = parse_unary(p, false);
	} else {
		nd = parse_primary(p);
	}
	nd = parse_postfix(p, nd);
	if (with_filter)
		nd = parse_filter_expr(p, nd);
	p->depth--;
	return nd;
}

static struct jnode *binop(struct parser *p, const struct jtoken *at,
			   enum jn_kind kind, struct jnode *a, struct jnode *b)
{
	struct jnode *nd = node(p, kind, at);

	nd->op = at->op;
	nd->a = a;
	nd->b = b;
	return nd;
}

/* The expression grammar under the conditional, loosest level first, as
 * Jinja2's parser has it: each level's operands are the next level's, the
 * last level's are unary expressions with their filters. Binary levels are
 * left-associative and driven by the table; not, the chained comparisons
 * and ~ (one node for a whole chain) have shapes of their own. */
enum jlevel {
	JL_OR,
	JL_AND,
	JL_NOT,
	JL_COMPARE,
	JL_ADD,
	JL_CONCAT,
	JL_MUL,
	JL_POW,
	JL_N,
};

enum jshape { JS_BINARY, JS_NOT, JS_COMPARE, JS_CONCAT };

#define OPS(x) (1u << (x))
_Static_assert(JO_N <= 32, "an operator set fits a mask");

static const struct jlevel_def {
	enum jshape shape;
	const char *word; /* JS_BINARY: the keyword operator, or NULL */
	uint32_t ops;	  /* JS_BINARY: symbol operators, OPS(enum jop) */
	enum jn_kind kind;
} jlevels[] = {
    [JL_OR] = {JS_BINARY, "or", 0, JN_OR},
    [JL_AND] = {JS_BINARY, "and", 0, JN_AND},
    [JL_NOT] = {JS_NOT, NULL, 0, JN_NOT},
    [JL_COMPARE] = {JS_COMPARE, NULL, 0, JN_COMPARE},
    [JL_ADD] = {JS_BINARY, NULL, OPS(JO_ADD) | OPS(JO_SUB), JN_BINOP},
    [JL_CONCAT] = {JS_CONCAT, NULL, 0, JN_CONCAT},
    [JL_MUL] = {JS_BINARY, NULL,
		OPS(JO_MUL) | OPS(JO_DIV) | OPS(JO_FLOORDIV) | OPS(JO_MOD),
		JN_BINOP},
    [JL_POW] = {JS_BINARY, NULL, OPS(JO_POW), JN_BINOP},
};
_Static_assert(sizeof(jlevels) / sizeof(jlevels[0]) == JL_N,
	       "a shape per level");

static struct jnode *parse_level(struct parser *p, enum jlevel lv);

/* An operand of level LV: an expression of the next level. */
static struct jnode *parse_operand(struct parser *p, enum jlevel lv)
{
	return lv + 1 == JL_N ? parse_unary(p, true)
			      : parse_level(p, (enum jlevel)(lv + 1));
}

/* Whether the current token is one of D's binary operators. */
static bool level_op(const struct parser *p, const struct jlevel_def *d)
{
	const struct jtoken *t = cur(p);

	if (d->word)
		return is_name(t, d->word);
	return t->type == JT_OP && t->op < JO_N && (d->ops & OPS(t->op));
}

static struct jnode *parse_binary(struct parser *p, enum jlevel lv)
{
	const struct jlevel_def *d = &jlevels[lv];
	struct jnode *left = parse_operand(p, lv);

	while (level_op(p, d)) {
		const struct jtoken *at = next(p);

		left = binop(p, at, d->kind, left, parse_operand(p, lv));
	}
	return left;
}

static struct jnode *parse_concat(struct parser *p)
{
	struct jnode *first = parse_operand(p, JL_CONCAT), *nd;
	struct nodevec items = {0};

	if (!is_op(cur(p), JO_TILDE))
		return first;
	nd = node(p, JN_CONCAT, cur(p));
	vec_push(p, &items, first);
	while (skip_op(p, JO_TILDE))
		vec_push(p, &items, parse_operand(p, JL_CONCAT));
	nd->l1 = vec_done(&items);
	return nd;
}

static bool compare_op(struct parser *p, enum jop *op)
{
	const struct jtoken *t = cur(p);

	if (t->type == JT_OP && t->op >= JO_EQ && t->op <= JO_LTEQ) {
		*op = (enum jop)t->op;
		next(p);
		return true;
	}
	if (is_name(t, "in")) {
		*op = JO_IN;
		next(p);
		return true;
	}
	if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
		*op = JO_NOTIN;
		p->i += 2;
		return true;
	}
	return false;
}

static struct jnode *parse_compare(struct parser *p)
{
	const struct jtoken *at = cur(p);
	struct jnode *first = parse_operand(p, JL_COMPARE), *nd;
	struct nodevec rhs = {0};
	uint8_t ops[64];
	enum jop op;

	while (compare_op(p, &op)) {
		if (rhs.n == sizeof(ops))
			fail_at(p, cur(p), "too many chained comparisons");
		ops[rhs.n] = (uint8_t)op;
		vec_push(p, &rhs, parse_operand(p, JL_COMPARE));
	}
	if (!rhs.n)
		return first;
	nd = node(p, JN_COMPARE, at);
	nd->a = first;
	nd->l1 = vec_done(&rhs);
	nd->ops = jalloc(p->f, &p->t->arena, rhs.n, at->line, at->col);
	memcpy(nd->ops, ops, rhs.n);
	return nd;
}

static struct jnode *parse_not(struct parser *p)
{
	const struct jtoken *at = cur(p);
	struct jnode *nd;

	if (!skip_name(p, "not"))
		return parse_operand(p, JL_NOT);
	enter(p);
	nd = node(p, JN_NOT, at);
	nd->a = parse_not(p);
	p->depth--;
	return nd;
}

static struct jnode *parse_level(struct parser *p, enum jlevel lv)
{
	switch (jlevels[lv].shape) {
	case JS_NOT:
		return parse_not(p);
	case JS_COMPARE:
		return parse_compare(p);
	case JS_CONCAT:
		return parse_concat(p);
	default:
		return parse_binary(p, lv);
	}
}

static struct jnode *parse_or(struct parser *p)
{
	return parse_level(p, JL_OR);
}

static struct jnode *parse_condexpr(struct parser *p)
{
	struct jnode *expr = parse_or(p);

	while (is_name(cur(p), "if")) {
		struct jnode *nd = node(p, JN_COND, next(p));

		enter(p);
		nd->a = expr;
		nd->b = parse_or(p);
		if (skip_name(p, "else"))
			nd->c = parse_condexpr(p);
		p->depth--;
		expr = nd;
	}
	return expr;
}

static struct jnode *parse_expression(struct parser *p, bool condexpr)
{
	return condexpr ? parse_condexpr(p) : parse_or(p);
}

static bool tuple_end(struct parser *p, const char *extra_end)
{
	const struct jtoken *t = cur(p);

	if (t->type == JT_VAR_END || t->type == JT_BLOCK_END ||
	    t->type == JT_EOF || is_op(t, JO_RPAREN))
		return true;
	return extra_end && is_name(t, extra_end);
}

/* Comma-separated expressions: a tuple when there is a comma (or
 * nothing inside explicit parentheses), else the one expression. */
static struct jnode *parse_tuple(struct parser *p, bool simplified,
				 bool condexpr, const char *extra_end,
				 bool explicit_parens)
{
	const struct jtoken *at = cur(p);
	struct nodevec items = {0};
	bool comma = false;
	struct jnode *nd;

	for (;;) {
		if (items.n)
			expect_op(p, JO_COMMA, "','");
		if (tuple_end(p, extra_end))
			break;
		vec_push(p, &items,
			 simplified ? parse_primary(p)
				    : parse_expression(p, condexpr));
		if (!is_op(cur(p), JO_COMMA))
			break;
		comma = true;
	}
	if (!comma && items.n == 1)
		return items.v[0];
	if (!items.n && !explicit_parens)
		fail_at(p, cur(p), "Expected an expression, got '%s'",
			describe(cur(p)));
	nd = node(p, JN_TUPLE, at);
	nd->l1 = vec_done(&items);
	return nd;
}

static const char *const ENDS_FOR[] = {"endfor", "else", NULL};
static const char *const ENDS_FOR_ELSE[] = {"endfor", NULL};
static const char *const ENDS_IF[] = {"elif", "else", "endif", NULL};
static const char *const ENDS_ELSE[] = {"endif", NULL};
static const char *const ENDS_SET[] = {"endset", NULL};
static const char *const ENDS_MACRO[] = {"endmacro", NULL};
static const char *const ENDS_CALL[] = {"endcall", NULL};
static const char *const ENDS_FILTER[] = {"endfilter", NULL};
static const char *const ENDS_WITH[] = {"endwith", NULL};
static const char *const ENDS_GEN[] = {"endgeneration", NULL};

/* "Jinja was looking for ..." for messages about an open block. */
static void describe_open(const struct parser *p, char *out, size_t cap)
{
	size_t k = 0;

	out[0] = 0;
	if (!p->open_tag)
		return;
	k += (size_t)snprintf(out, cap, " Jinja was looking for the following "
					"tags: ");
	for (size_t i = 0; p->open_ends[i] && k < cap; i++)
		k += (size_t)snprintf(out + k, cap - k, "%s'%s'",
				      i ? " or " : "", p->open_ends[i]);
	if (k < cap)
		snprintf(out + k, cap - k, ". The innermost block that needs "
			 "to be closed is '%s'.", p->open_tag);
}

static _Noreturn void fail_tag(struct parser *p, const struct jtoken *t)
{
	char open[256];

	describe_open(p, open, sizeof(open));
	if (t->type == JT_EOF)
		fail_at(p, t, "Unexpected end of template.%s", open);
	fail_at(p, t, "Encountered unknown tag '%.*s'.%s", (int)t->s.n, t->s.p,
		open);
}

static struct jnode *parse_statement(struct parser *p);

static void push_output(struct parser *p, struct nodevec *body,
			struct jnode *item, const struct jtoken *at)
{
	struct jnode *out = node(p, JN_OUTPUT, at);
	struct nodevec items = {0};

	vec_push(p, &items, item);
	out->l1 = vec_done(&items);
	vec_push(p, body, out);
}

static int end_index(const struct jtoken *t, const char *const *ends)
{
	for (int i = 0; ends && ends[i]; i++)
		if (is_name(t, ends[i]))
			return i;
	return -1;
}

/* Statements until a block tag named in ENDS (parser left on that name;
 * returns its index) or the end of the template (ENDS NULL only). */
static int subparse(struct parser *p, const char *tag,
		    const char *const *ends, struct jnodes *out)
{
	const char *saved_tag = p->open_tag;
	const char *const *saved_ends = p->open_ends;
	struct nodevec body = {0};
	int end = -1;

	p->open_tag = tag;
	p->open_ends = ends;
	for (;;) {
		const struct jtoken *t = cur(p);

		if (t->type == JT_EOF) {
			if (ends)
				fail_tag(p, t);
			break;
		}
		next(p);
		if (t->type == JT_DATA) {
			struct jnode *c = node(p, JN_CONST, t);

			c->value = jv_str(t->s.p, t->s.n);
			push_output(p, &body, c, t);
		} else if (t->type == JT_VAR_BEGIN) {
			push_output(p, &body,
				    parse_tuple(p, false, true, NULL, false), t);
			expect_type(p, JT_VAR_END, "'end of print statement'");
		} else if (t->type == JT_BLOCK_BEGIN) {
			if ((end = end_index(cur(p), ends)) >= 0)
				break;
			vec_push(p, &body, parse_statement(p));
			expect_type(p, JT_BLOCK_END, "'end of statement block'");
		} else {
			unexpected(p, "template data or a tag");
		}
	}
	*out = vec_done(&body);
	p->open_tag = saved_tag;
	p->open_ends = saved_ends;
	return end;
}

/* A block's body after its header; returns which end tag closed it and
 * leaves the parser after that tag's name. */
static int body(struct parser *p, const char *tag, const char *const *ends,
		struct jnodes *out)
{
	int end;

	skip_op(p, JO_COLON);
	expect_type(p, JT_BLOCK_END, "'end of statement block'");
	enter(p);
	end = subparse(p, tag, ends, out);
	p->depth--;
	next(p);
	return end;
}

static bool assignable(const struct jnode *nd)
{
	if (nd->kind == JN_NAME)
		return true;
	if (nd->kind != JN_TUPLE)
		return false;
	for (size_t i = 0; i < nd->l1.n; i++)
		if (!assignable(nd->l1.v[i]))
			return false;
	return true;
}

/* A name, a tuple of names, or (WITH_NS) a namespace attribute. */
static struct jnode *parse_assign_target(struct parser *p,
					 const char *extra_end, bool with_ns,
					 bool name_only)
{
	const struct jtoken *at = cur(p);
	struct jnode *nd;

	if (with_ns && at->type == JT_NAME && is_op(peek(p, 1), JO_DOT) &&
	    peek(p, 2)->type == JT_NAME) {
		nd = node(p, JN_ATTR, peek(p, 1));
		nd->a = node(p, JN_NAME, at);
		nd->a->name = at->s;
		nd->name = peek(p, 2)->s;
		p->i += 3;
		return nd;
	}
	if (name_only) {
		expect_type(p, JT_NAME, "a name");
		nd = node(p, JN_NAME, at);
		nd->name = at->s;
		return nd;
	}
	nd = parse_tuple(p, true, false, extra_end, false);
	if (!assignable(nd))
		fail_at(p, at, "can't assign to this expression");
	return nd;
}

static struct jnode *parse_for(struct parser *p, const struct jtoken *at)
{
	struct jnode *nd = node(p, JN_FOR, at);

	nd->a = parse_assign_target(p, "in", false, false);
	if (!skip_name(p, "in"))
		unexpected(p, "'in'");
	nd->b = parse_tuple(p, false, false, "recursive", false);
	if (skip_name(p, "if"))
		nd->c = parse_expression(p, true);
	nd->neg = skip_name(p, "recursive");
	if (body(p, "for", ENDS_FOR, &nd->l1) == 1)
		body(p, "for", ENDS_FOR_ELSE, &nd->l2);
	return nd;
}

static struct jnode *parse_if(struct parser *p, const struct jtoken *at)
{
	struct jnode *top = node(p, JN_IF, at), *nd = top;
	int end;

	for (;;) {
		nd->a = parse_tuple(p, false, false, NULL, false);
		end = body(p, "if", ENDS_IF, &nd->l1);
		if (end == 0) { /* elif: an if in the else branch */
			struct nodevec one = {0};
			struct jnode *elif = node(p, JN_IF, &p->tok[p->i - 1]);

			vec_push(p, &one, elif);
			nd->l2 = vec_done(&one);
			nd = elif;
			continue;
		}
		if (end == 1)
			body(p, "if", ENDS_ELSE, &nd->l2);
		return top;
	}
}

static struct jnode *parse_set(struct parser *p, const struct jtoken *at)
{
	struct jnode *nd = node(p, JN_SET, at);

	nd->a = parse_assign_target(p, NULL, true, false);
	if (skip_op(p, JO_ASSIGN)) {
		nd->b = parse_tuple(p, false, true, NULL, false);
		return nd;
	}
	nd->kind = JN_SETBLOCK;
	nd->b = parse_filter(p, NULL, false);
	body(p, "set", ENDS_SET, &nd->l1);
	return nd;
}

/* "(a, b=default, ...)" into l1 (names) and l2 (defaults of the last
 * ones). */
static void parse_signature(struct parser *p, struct jnode *nd)
{
	struct nodevec names = {0}, defaults = {0};

	expect_op(p, JO_LPAREN, "'('");
	while (!is_op(cur(p), JO_RPAREN)) {
		if (names.n)
			expect_op(p, JO_COMMA, "','");
		if (is_op(cur(p), JO_RPAREN))
			break;
		vec_push(p, &names, parse_assign_target(p, NULL, false, true));
		if (skip_op(p, JO_ASSIGN))
			vec_push(p, &defaults, parse_expression(p, true));
		else if (defaults.n)
			fail_at(p, cur(p), "non-default argument follows "
					   "default argument");
	}
	next(p);
	nd->l1 = vec_done(&names);
	nd->l2 = vec_done(&defaults);
}

static struct jnode *parse_macro(struct parser *p, const struct jtoken *at)
{
	struct jnode *nd = node(p, JN_MACRO, at);
	const struct jtoken *name = cur(p);

	expect_type(p, JT_NAME, "a macro name");
	nd->name = name->s;
	parse_signature(p, nd);
	body(p, "macro", ENDS_MACRO, &nd->l3);
	return nd;
}

static struct jnode *parse_call_block(struct parser *p,
				      const struct jtoken *at)
{
	struct jnode *nd = node(p, JN_CALLBLOCK, at);

	if (is_op(cur(p), JO_LPAREN))
		parse_signature(p, nd);
	nd->a = parse_expression(p, true);
	if (nd->a->kind != JN_CALL)
		fail_at(p, at, "expected call");
	body(p, "call", ENDS_CALL, &nd->l3);
	return nd;
}

static struct jnode *parse_with(struct parser *p, const struct jtoken *at)
{
	struct jnode *nd = node(p, JN_WITH, at);
	struct nodevec targets = {0}, values = {0};

	while (cur(p)->type != JT_BLOCK_END) {
		if (targets.n)
			expect_op(p, JO_COMMA, "','");
		vec_push(p, &targets, parse_assign_target(p, NULL, false, false));
		expect_op(p, JO_ASSIGN, "'='");
		vec_push(p, &values, parse_expression(p, true));
	}
	nd->l1 = vec_done(&targets);
	nd->l2 = vec_done(&values);
	body(p, "with", ENDS_WITH, &nd->l3);
	return nd;
}

static struct jnode *parse_simple(struct parser *p, const struct jtoken *at,
				  enum jn_kind kind)
{
	struct jnode *nd = node(p, kind, at);
	struct nodevec one = {0};

	if (kind == JN_FILTERBLOCK) {
		nd->b = parse_filter(p, NULL, true);
		body(p, "filter", ENDS_FILTER, &nd->l1);
	} else if (kind == JN_BODY) {
		body(p, "generation", ENDS_GEN, &nd->l1);
	} else if (kind == JN_OUTPUT) { /* print */
		vec_push(p, &one, parse_tuple(p, false, true, NULL, false));
		nd->l1 = vec_done(&one);
	}
	return nd;
}

static struct jnode *parse_statement(struct parser *p)
{
	static const char *const unsupported[] = {
	    "block", "extends", "include", "import", "from", "autoescape",
	    "do", NULL};
	const struct jtoken *t = cur(p);

	if (t->type != JT_NAME)
		fail_at(p, t, "tag name expected");
	next(p);
	if (jstr_eq(t->s, "for"))
		return parse_for(p, t);
	if (jstr_eq(t->s, "if"))
		return parse_if(p, t);
	if (jstr_eq(t->s, "set"))
		return parse_set(p, t);
	if (jstr_eq(t->s, "macro"))
		return parse_macro(p, t);
	if (jstr_eq(t->s, "call"))
		return parse_call_block(p, t);
	if (jstr_eq(t->s, "with"))
		return parse_with(p, t);
	if (jstr_eq(t->s, "filter"))
		return parse_simple(p, t, JN_FILTERBLOCK);
	if (jstr_eq(t->s, "generation"))
		return parse_simple(p, t, JN_BODY);
	if (jstr_eq(t->s, "print"))
		return parse_simple(p, t, JN_OUTPUT);
	if (jstr_eq(t->s, "break"))
		return parse_simple(p, t, JN_BREAK);
	if (jstr_eq(t->s, "continue"))
		return parse_simple(p, t, JN_CONTINUE);
	for (size_t i = 0; unsupported[i]; i++)
		if (jstr_eq(t->s, unsupported[i]))
			fail_at(p, t, "the '%s' tag is not supported in chat "
				      "templates", unsupported[i]);
	p->i--;
	fail_tag(p, t);
}

void jparse(struct jfail *f, struct o1_jinja *t, const struct jtokens *tokens)
{
	struct parser p = {.f = f, .t = t, .tok = tokens->v, .n = tokens->n};

	subparse(&p, NULL, NULL, &t->body);
}

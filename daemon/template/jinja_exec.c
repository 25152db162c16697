/* Jinja statements: output, if, for (loop.*, else, filters, recursion,
 * break/continue), set (names, tuples, namespace attributes, blocks),
 * macros and call blocks, filter blocks and with, over a chain of scopes.
 *
 * Scoping follows jinja2: each for iteration, macro call, caller() call,
 * filter block and with block runs in a new scope, so a plain "set" there
 * is lost when it ends (templates use namespace() to carry values out),
 * while if blocks share the enclosing scope. Macros see the scope they
 * were defined in as it is when they are called. An iteration's scope is
 * reused for the next iteration unless a macro defined in it kept it.
 */
#include <string.h>

#include "template/jinja_int.h"

enum flow { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

struct jscope *jr_scope_new(struct jctx *c, const struct jnode *at,
			    struct jscope *parent)
{
	struct jscope *s = jr_alloc(c, at, sizeof(*s));

	*s = (struct jscope){.parent = parent};
	return s;
}

static struct jv *find_here(struct jscope *s, struct jstr name)
{
	for (size_t i = s->n; i-- > 0;)
		if (jstr_same(s->v[i].name, name))
			return &s->v[i].v;
	return NULL;
}

struct jv *jr_scope_find(struct jscope *s, struct jstr name)
{
	struct jv *v;

	for (; s; s = s->parent)
		if ((v = find_here(s, name)))
			return v;
	return NULL;
}

void jr_scope_set(struct jctx *c, const struct jnode *at, struct jscope *s,
		  struct jstr name, struct jv v)
{
	struct jv *old = find_here(s, name);

	if (old) {
		*old = v;
		return;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct jvar *nv = jr_alloc(c, at, cap * sizeof(*nv));

		if (s->n)
			memcpy(nv, s->v, s->n * sizeof(*nv));
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = (struct jvar){name, v};
}

static void capture_scope(struct jscope *s)
{
	for (; s; s = s->parent)
		s->captured = true;
}

static enum flow exec_body(struct jctx *c, const struct jnodes *body,
			   struct jscope *s);

static void emit(struct jctx *c, const struct jnode *at, struct jstr t)
{
	jbuf_put(c, at, c->out, t.p, t.n);
}

struct jstr jr_capture(struct jctx *c, const struct jnodes *body,
		       struct jscope *s)
{
	struct jbuf buf = {0}, *saved = c->out;

	c->out = &buf;
	exec_body(c, body, s);
	c->out = saved;
	return jbuf_str(&buf);
}

/* Binds TARGET (a name or a tuple of names) to V. */
static void assign(struct jctx *c, const struct jnode *target,
		   struct jscope *s, struct jv v)
{
	struct jlist *items;

	if (target->kind == JN_NAME) {
		jr_scope_set(c, target, s, target->name, v);
		return;
	}
	items = jr_iter(c, target, v);
	if (items->n != target->l1.n)
		jr_fail(c, target, items->n > target->l1.n
				       ? "too many values to unpack (expected %zu)"
				       : "not enough values to unpack (expected "
					 "%zu)",
			target->l1.n);
	for (size_t i = 0; i < items->n; i++)
		assign(c, target->l1.v[i], s, items->v[i]);
}

static void exec_set(struct jctx *c, const struct jnode *nd,
		     struct jscope *s, struct jv v)
{
	const struct jnode *t = nd->a;
	struct jv *ns;

	if (t->kind != JN_ATTR) {
		assign(c, t, s, v);
		return;
	}
	ns = jr_scope_find(s, t->a->name);
	if (!ns || ns->type != JV_DICT || ns->sub != JV_NS)
		jr_fail(c, t, "cannot assign attribute on non-namespace object");
	jv_dict_set(c, t, ns->u.d, jv_str(t->name.p, t->name.n), v);
}

/* A filter chain of a set or filter block: the innermost filter (a NULL)
 * gets IN first. */
static struct jv apply_chain(struct jctx *c, const struct jnode *chain,
			     struct jscope *s, struct jv in)
{
	if (!chain)
		return in;
	if (chain->a)
		in = apply_chain(c, chain->a, s, in);
	return jr_apply_filter(c, chain, s, in);
}

static struct jv make_func(struct jctx *c, const struct jnode *nd,
			   enum jfunc_kind kind, struct jscope *s)
{
	struct jfunc *fn = jr_alloc(c, nd, sizeof(*fn));

	*fn = (struct jfunc){.kind = (uint8_t)kind,
			     .name = kind == JF_MACRO ? nd->name
						      : (struct jstr){"caller", 6},
			     .node = nd,
			     .scope = s};
	capture_scope(s);
	return (struct jv){.type = JV_FUNC, .u.fn = fn};
}

/* Binds a macro's or caller's parameters: positional, then keywords,
 * then defaults (evaluated in the call's scope); missing ones are
 * undefined, extra ones go to varargs and kwargs as in jinja2. */
static void bind_params(struct jctx *c, const struct jnode *at,
			const struct jnode *def, const struct jargs *args,
			struct jscope *ms)
{
	size_t np = def->l1.n, first_default = np - def->l2.n;
	struct jlist *varargs = jv_list_new(c, at, 0);
	struct jdict *kwargs = jv_dict_new(c, at, 0);
	bool *given = jr_alloc(c, at, np + 1);

	memset(given, 0, np + 1);
	for (size_t i = 0; i < args->n; i++) {
		if (i < np) {
			jr_scope_set(c, at, ms, def->l1.v[i]->name, args->v[i]);
			given[i] = true;
		} else {
			jv_list_push(c, at, varargs, args->v[i]);
		}
	}
	for (size_t k = 0; k < args->nkw; k++) {
		size_t i = 0;

		while (i < np && !jstr_same(def->l1.v[i]->name, args->kwn[k]))
			i++;
		if (i < np && given[i])
			jr_fail(c, at, "macro '%.*s' got multiple values for "
				"argument '%.*s'", (int)def->name.n,
				def->name.p, (int)args->kwn[k].n,
				args->kwn[k].p);
		if (i < np) {
			jr_scope_set(c, at, ms, args->kwn[k], args->kwv[k]);
			given[i] = true;
		} else if (jstr_eq(args->kwn[k], "caller")) {
			jr_scope_set(c, at, ms, args->kwn[k], args->kwv[k]);
		} else {
			jv_dict_set(c, at, kwargs,
				    jv_str(args->kwn[k].p, args->kwn[k].n),
				    args->kwv[k]);
		}
	}
	for (size_t i = 0; i < np; i++)
		if (!given[i])
			jr_scope_set(c, at, ms, def->l1.v[i]->name,
				     i >= first_default
					 ? jr_eval(c,
						   def->l2.v[i - first_default],
						   ms)
					 : jv_undef(NULL));
	varargs->cap = varargs->n;
	jr_scope_set(c, at, ms, (struct jstr){"varargs", 7},
		     (struct jv){.type = JV_LIST, .sub = JV_TUPLE,
				 .u.l = varargs});
	jr_scope_set(c, at, ms, (struct jstr){"kwargs", 6}, jv_dict(kwargs));
}

struct jv jr_call_macro(struct jctx *c, const struct jnode *at,
			const struct jfunc *fn, const struct jargs *args)
{
	const struct jnode *def = fn->node;
	struct jscope *ms = jr_scope_new(c, at, fn->scope);
	struct jstr out;

	if (++c->depth > c->max_depth)
		jfail(&c->f, O1_JINJA_ERR_LIMIT, at->line, at->col,
		      "macro calls nested deeper than %u levels", c->max_depth);
	bind_params(c, at, def, args, ms);
	out = jr_capture(c, &def->l3, ms);
	c->depth--;
	return (struct jv){.type = JV_STR, .u.s = out};
}

static void exec_callblock(struct jctx *c, const struct jnode *nd,
			   struct jscope *s)
{
	const struct jnode *call = nd->a;
	struct jv callee = jr_eval(c, call->a, s);
	struct jargs args, with_caller;

	jr_eval_args(c, call, s, &args);
	with_caller = args;
	with_caller.nkw = args.nkw + 1;
	with_caller.kwn = jr_alloc(c, nd, with_caller.nkw * sizeof(struct jstr));
	with_caller.kwv = jr_alloc(c, nd, with_caller.nkw * sizeof(struct jv));
	for (size_t i = 0; i < args.nkw; i++) {
		with_caller.kwn[i] = args.kwn[i];
		with_caller.kwv[i] = args.kwv[i];
	}
	with_caller.kwn[args.nkw] = (struct jstr){"caller", 6};
	with_caller.kwv[args.nkw] = make_func(c, nd, JF_CALLER, s);
	emit(c, nd, jv_to_str(c, nd, jr_call(c, call, callee, &with_caller)));
}

/* The items a for runs over, after its "if" filter (which sees the
 * target but not loop). */
static struct jlist *for_items(struct jctx *c, const struct jnode *nd,
			       struct jscope *s, struct jv iterable)
{
	struct jlist *all = jr_iter(c, nd, iterable), *kept;
	struct jscope *fs;

	if (!nd->c)
		return all;
	kept = jv_list_new(c, nd, 0);
	fs = jr_scope_new(c, nd, s);
	for (size_t i = 0; i < all->n; i++) {
		fs->n = 0;
		assign(c, nd->a, fs, all->v[i]);
		if (jv_truthy(jr_eval(c, nd->c, fs)))
			jv_list_push(c, nd, kept, all->v[i]);
	}
	return kept;
}

static void run_for(struct jctx *c, const struct jnode *nd,
		    struct jscope *s, struct jv iterable, uint32_t depth0)
{
	struct jlist *items = for_items(c, nd, s, iterable);
	struct jloop *loop = jr_alloc(c, nd, sizeof(*loop));
	struct jscope *is = NULL;

	if (!items->n) {
		exec_body(c, &nd->l2, jr_scope_new(c, nd, s));
		return;
	}
	*loop = (struct jloop){.length = items->n, .items = items->v,
			       .depth0 = depth0, .node = nd, .scope = s};
	for (size_t i = 0; i < items->n; i++) {
		jr_step(c, nd);
		if (!is || is->captured)
			is = jr_scope_new(c, nd, s);
		is->n = 0;
		loop->index0 = i;
		assign(c, nd->a, is, items->v[i]);
		jr_scope_set(c, nd, is, (struct jstr){"loop", 4},
			     (struct jv){.type = JV_LOOP, .u.loop = loop});
		if (exec_body(c, &nd->l1, is) == FLOW_BREAK)
			break;
	}
}

struct jv jr_call_loop(struct jctx *c, const struct jnode *at,
		       struct jloop *loop, const struct jargs *args)
{
	struct jbuf buf = {0}, *saved = c->out;

	if (!loop->node->neg)
		jr_fail(c, at, "the loop is not recursive: call loop() only "
			       "in a 'for ... recursive'");
	if (args->n != 1 || args->nkw)
		jr_fail(c, at, "loop() takes exactly one argument");
	if (++c->depth > c->max_depth)
		jfail(&c->f, O1_JINJA_ERR_LIMIT, at->line, at->col,
		      "recursive loop deeper than %u levels", c->max_depth);
	c->out = &buf;
	run_for(c, loop->node, loop->scope, args->v[0], loop->depth0 + 1);
	c->out = saved;
	c->depth--;
	return (struct jv){.type = JV_STR, .u.s = jbuf_str(&buf)};
}

static void exec_with(struct jctx *c, const struct jnode *nd,
		      struct jscope *s)
{
	struct jscope *ws = jr_scope_new(c, nd, s);

	for (size_t i = 0; i < nd->l1.n; i++)
		assign(c, nd->l1.v[i], ws, jr_eval(c, nd->l2.v[i], s));
	exec_body(c, &nd->l3, ws);
}

static void exec_output(struct jctx *c, const struct jnode *nd,
			struct jscope *s)
{
	for (size_t i = 0; i < nd->l1.n; i++) {
		const struct jnode *item = nd->l1.v[i];

		if (item->kind == JN_CONST && item->value.type == JV_STR)
			emit(c, item, item->value.u.s);
		else
			emit(c, item, jv_to_str(c, item, jr_eval(c, item, s)));
	}
}

static enum flow exec(struct jctx *c, const struct jnode *nd,
		      struct jscope *s)
{
	jr_step(c, nd);
	switch (nd->kind) {
	case JN_OUTPUT:
		exec_output(c, nd, s);
		break;
	case JN_IF:
		return exec_body(c, jv_truthy(jr_eval(c, nd->a, s)) ? &nd->l1
								     : &nd->l2,
				 s);
	case JN_FOR:
		run_for(c, nd, s, jr_eval(c, nd->b, s), 0);
		break;
	case JN_SET:
		exec_set(c, nd, s, jr_eval(c, nd->b, s));
		break;
	case JN_SETBLOCK:
		exec_set(c, nd, s,
			 apply_chain(c, nd->b, s,
				     (struct jv){.type = JV_STR,
						 .u.s = jr_capture(c, &nd->l1,
								   s)}));
		break;
	case JN_MACRO:
		jr_scope_set(c, nd, s, nd->name, make_func(c, nd, JF_MACRO, s));
		break;
	case JN_CALLBLOCK:
		exec_callblock(c, nd, s);
		break;
	case JN_FILTERBLOCK:
		emit(c, nd,
		     jv_to_str(c, nd,
			       apply_chain(c, nd->b, s,
					   (struct jv){.type = JV_STR,
						       .u.s = jr_capture(
							   c, &nd->l1,
							   jr_scope_new(c, nd,
									s))})));
		break;
	case JN_WITH:
		exec_with(c, nd, s);
		break;
	case JN_BREAK:
		return FLOW_BREAK;
	case JN_CONTINUE:
		return FLOW_CONTINUE;
	case JN_BODY:
		return exec_body(c, &nd->l1, s);
	default:
		jr_fail(c, nd, "not a statement");
	}
	return FLOW_NEXT;
}

static enum flow exec_body(struct jctx *c, const struct jnodes *body,
			   struct jscope *s)
{
	enum flow f = FLOW_NEXT;

	if (++c->depth > c->max_depth)
		jfail(&c->f, O1_JINJA_ERR_LIMIT, 0, 0,
		      "template nested deeper than %u levels", c->max_depth);
	for (size_t i = 0; i < body->n && f == FLOW_NEXT; i++)
		f = exec(c, body->v[i], s);
	c->depth--;
	return f;
}

void jr_exec_template(struct jctx *c, const struct jnodes *body)
{
	if (exec_body(c, body, c->root) != FLOW_NEXT)
		jr_fail(c, NULL, "'break' or 'continue' outside a loop");
}

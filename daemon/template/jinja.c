/* The Jinja interpreter's entry points: parse a template into an immutable
 * tree, render it with variables from a cJSON object under limits.
 *
 * Both entry points set the jmp_buf that every error below them longjmps
 * to (see jinja_int.h), and free everything on that path: the template's
 * arena on a parse error, the render's arena and output buffer on a
 * render error. A render touches the template only to read it, so renders
 * of one template may run in parallel.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_int.h"

enum {
	DEFAULT_MAX_OUTPUT = 16 << 20,
	DEFAULT_MAX_MEMORY = 64 << 20,
	DEFAULT_MAX_STEPS = 10000000,
	DEFAULT_MAX_DEPTH = 400,
	/* parse memory: source, tokens and tree, a small multiple of the
	 * text */
	PARSE_BYTES_PER_CHAR = 256,
	PARSE_BYTES_MIN = 1 << 20,
};

void jr_fail(struct jctx *c, const struct jnode *at, const char *fmt, ...)
{
	char msg[sizeof(c->f.err->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	jfail(&c->f, O1_JINJA_ERR_RUNTIME, at ? at->line : 0, at ? at->col : 0,
	      "%s", msg);
}

void *jr_alloc(struct jctx *c, const struct jnode *at, size_t n)
{
	return jalloc(&c->f, &c->arena, n, at ? at->line : 0, at ? at->col : 0);
}

void jr_step(struct jctx *c, const struct jnode *at)
{
	if (++c->steps > c->max_steps)
		jfail(&c->f, O1_JINJA_ERR_LIMIT, at ? at->line : 0,
		      at ? at->col : 0,
		      "template ran more than %llu steps (a loop without end?)",
		      (unsigned long long)c->max_steps);
}

void jr_charge(struct jctx *c, const struct jnode *at, size_t bytes)
{
	c->steps += bytes / 64;
	jr_step(c, at);
}

int o1_jinja_parse(const char *src, size_t len, struct o1_jinja **out,
		   struct o1_jinja_error *err)
{
	struct o1_jinja_error local;
	struct jtokens tokens;
	struct o1_jinja *t;
	struct jfail f;

	*out = NULL;
	f.err = err ? err : &local;
	memset(f.err, 0, sizeof(*f.err));
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	ja_init(&t->arena, len > (SIZE_MAX - PARSE_BYTES_MIN) /
				     PARSE_BYTES_PER_CHAR
			       ? SIZE_MAX
			       : PARSE_BYTES_MIN + len * PARSE_BYTES_PER_CHAR);
	if (setjmp(f.jb)) {
		o1_jinja_destroy(t);
		return f.ret;
	}
	jlex(&f, &t->arena, src, len, &tokens);
	jparse(&f, t, &tokens);
	*out = t;
	return 0;
}

void o1_jinja_destroy(struct o1_jinja *t)
{
	if (!t)
		return;
	ja_fini(&t->arena);
	free(t);
}

static void set_limits(struct jctx *c, const struct o1_jinja_render_opts *o)
{
	const struct o1_jinja_limits *l = o ? o->limits : NULL;

	c->max_output = l && l->max_output_bytes ? l->max_output_bytes
						 : DEFAULT_MAX_OUTPUT;
	c->max_steps = l && l->max_steps ? l->max_steps : DEFAULT_MAX_STEPS;
	c->max_depth = l && l->max_depth ? l->max_depth : DEFAULT_MAX_DEPTH;
	ja_init(&c->arena, l && l->max_memory_bytes ? l->max_memory_bytes
						    : DEFAULT_MAX_MEMORY);
	c->now = o && o->now ? o->now : time(NULL);
}

/* The members of VARS become the template's variables. */
static void bind_vars(struct jctx *c, const cJSON *vars)
{
	c->root = jr_scope_new(c, NULL, NULL);
	if (!vars)
		return;
	if (!cJSON_IsObject(vars))
		jr_fail(c, NULL, "template variables must be a JSON object");
	for (const cJSON *it = vars->child; it; it = it->next)
		if (it->string)
			jr_scope_set(c, NULL, c->root,
				     (struct jstr){it->string,
						   strlen(it->string)},
				     jv_from_json(c, it));
}

static int finish(struct jctx *c, char **out, size_t *len)
{
	if (!c->top.p) {
		c->top.p = malloc(1);
		if (!c->top.p)
			return -ENOMEM;
	}
	c->top.p[c->top.n] = 0;
	*out = c->top.p;
	*len = c->top.n;
	c->top.p = NULL;
	return 0;
}

int o1_jinja_render(const struct o1_jinja *t, const cJSON *vars,
		    const struct o1_jinja_render_opts *opts, char **out,
		    size_t *len, struct o1_jinja_error *err)
{
	struct o1_jinja_error local;
	struct jctx *c;
	int ret;

	*out = NULL;
	*len = 0;
	if (!err)
		err = &local;
	memset(err, 0, sizeof(*err));
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->f.err = err;
	set_limits(c, opts);
	c->top.top = true;
	c->out = &c->top;
	if (setjmp(c->f.jb)) {
		ret = c->f.ret;
		goto out;
	}
	bind_vars(c, vars);
	jr_exec_template(c, &t->body);
	ret = finish(c, out, len);
out:
	free(c->top.p);
	ja_fini(&c->arena);
	free(c);
	return ret;
}

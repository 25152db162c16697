/* Jinja chat templates: the subset of Jinja2 that models' chat templates
 * use, rendered as transformers renders them (jinja2's immutable sandbox
 * with trim_blocks, lstrip_blocks and loop controls, plus transformers'
 * raise_exception, strftime_now and tojson).
 *
 * A template is parsed once (o1_jinja_parse) into an immutable tree that
 * any number of threads may render at the same time (o1_jinja_render).
 * Rendering takes its variables from a cJSON object (messages, tools,
 * add_generation_prompt, bos_token, ...), and is bounded: output bytes,
 * evaluation steps, nesting depth and memory all have limits, so a hostile
 * template fails with an error instead of hanging or exhausting the
 * daemon. Every error carries the template line and column.
 *
 * Not supported (parse error naming the construct): template inheritance
 * and inclusion (extends, block, include, import), the do statement, and
 * line statements; autoescaping and Markup (transformers turns them off).
 */
#ifndef O1_JINJA_H
#define O1_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct cJSON;
struct o1_jinja;

enum o1_jinja_error_kind {
	O1_JINJA_OK,
	O1_JINJA_ERR_SYNTAX,  /* the template does not parse */
	O1_JINJA_ERR_RUNTIME, /* a type error, undefined value, ... */
	O1_JINJA_ERR_RAISED,  /* the template called raise_exception(msg) */
	O1_JINJA_ERR_LIMIT,   /* a render limit was reached */
	O1_JINJA_ERR_NOMEM,   /* malloc failed */
};

struct o1_jinja_error {
	enum o1_jinja_error_kind kind;
	uint32_t line, col; /* 1-based position in the template; 0 if none */
	/* the message; for O1_JINJA_ERR_RAISED exactly the raised text
	 * (truncated to fit) */
	char msg[512];
};

/* Render limits; a zero field takes the default. */
struct o1_jinja_limits {
	size_t max_output_bytes; /* rendered text (default 16 MiB) */
	size_t max_memory_bytes; /* values built while rendering (64 MiB) */
	uint64_t max_steps;	 /* expressions + statements run (10^7) */
	uint32_t max_depth;	 /* nested evaluation, macro calls (400) */
};

struct o1_jinja_render_opts {
	size_t sz; /* sizeof(struct o1_jinja_render_opts) */
	const struct o1_jinja_limits *limits; /* NULL: defaults */
	/* the time strftime_now formats (local time); 0: the current time */
	time_t now;
};

/* Parses SRC (LEN bytes of UTF-8, need not be NUL-terminated) into *OUT.
 * Returns 0, -O1_E_FORMAT for a syntax error (ERR says where and why;
 * ERR may be NULL) or -ENOMEM. *OUT is freed with o1_jinja_destroy. */
int o1_jinja_parse(const char *src, size_t len, struct o1_jinja **out,
		   struct o1_jinja_error *err);

void o1_jinja_destroy(struct o1_jinja *t);

/* Renders T with the members of the JSON object VARS as its variables
 * (borrowed for the call; NULL: none). On success *OUT is a malloc'd,
 * NUL-terminated text the caller frees, *LEN its length (the text may hold
 * NUL bytes only if VARS' strings do, which cJSON rules out). Returns 0,
 * -EINVAL for a template error (runtime or raised: ERR says which),
 * -O1_E_BOUNDS for a limit reached, -ENOMEM; ERR may be NULL. OPTS may be
 * NULL. */
int o1_jinja_render(const struct o1_jinja *t, const struct cJSON *vars,
		    const struct o1_jinja_render_opts *opts, char **out,
		    size_t *len, struct o1_jinja_error *err);

#endif

/* Internals shared by the Jinja interpreter's files (not installed).
 *
 * Memory: a parsed template lives in one arena (struct o1_jinja), a render
 * in another (struct jctx); nothing in either is freed one by one, so
 * values are plain structs that share their storage freely and a whole
 * render is released at once.
 *
 * Errors unwind with longjmp: jfail() records the error and jumps back to
 * o1_jinja_parse or o1_jinja_render, which free the arena and any output
 * buffer. Code between them therefore never cleans up after a failure, and
 * must not hold resources outside the arena (the one exception, the
 * top-level output buffer, is owned by the context and freed there).
 */
#ifndef O1_JINJA_INT_H
#define O1_JINJA_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "template/jinja.h"

/* arena: bump allocation with a byte cap */

struct ja_chunk;

struct ja_arena {
	struct ja_chunk *head;
	size_t used_bytes; /* handed out so far, chunk headers included */
	size_t cap_bytes;  /* refusal above this */
	bool over_cap;	   /* the last failure was the cap, not malloc */
};

void ja_init(struct ja_arena *a, size_t cap_bytes);
/* N bytes aligned for any type; NULL when over the cap or out of memory. */
void *ja_alloc(struct ja_arena *a, size_t n);
void ja_fini(struct ja_arena *a);

/* failure: longjmp back to the entry point */

struct jfail {
	jmp_buf jb;
	struct o1_jinja_error *err; /* never NULL */
	int ret;		    /* what the entry point returns */
};

_Noreturn void jfail(struct jfail *f, enum o1_jinja_error_kind kind,
		     uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* ja_alloc or fail (limit or out of memory) at LINE:COL. */
void *jalloc(struct jfail *f, struct ja_arena *a, size_t n, uint32_t line,
	     uint32_t col);

/* strings */

struct jstr {
	const char *p; /* not NUL-terminated */
	size_t n;
};

static inline bool jstr_eq(struct jstr a, const char *z)
{
	size_t i = 0;

	for (; i < a.n; i++)
		if (!z[i] || z[i] != a.p[i])
			return false;
	return z[i] == 0;
}

static inline bool jstr_same(struct jstr a, struct jstr b)
{
	for (size_t i = 0; i < a.n && a.n == b.n; i++)
		if (a.p[i] != b.p[i])
			return false;
	return a.n == b.n;
}

/* values */

enum jv_type {
	JV_UNDEF, /* Jinja's Undefined: u.s is a hint for errors */
	JV_NONE,
	JV_BOOL,
	JV_INT,
	JV_FLOAT,
	JV_STR,
	JV_LIST, /* sub: enum jv_list_kind */
	JV_DICT, /* sub JV_NS: a namespace() (attributes assignable) */
	JV_FUNC,
	JV_LOOP,
};

enum { JV_NS = 1, JV_MISSING = 1 /* UNDEF: arg not given */ };

/* What a JV_LIST stands for in Python. Generators (what jinja2's map,
 * select, unique, items and reverse filters return) are always true, have
 * no length, cannot be indexed and print as an object; dict views (from
 * d.keys(), d.values(), d.items()) have a length but cannot be indexed
 * and print as "dict_keys([...])". */
enum jv_list_kind {
	JV_PLAIN,
	JV_TUPLE,
	JV_GEN,
	JV_KEYS,
	JV_VALUES,
	JV_ITEMS,
};


struct jlist;
struct jdict;
struct jfunc;
struct jloop;

struct jv {
	uint8_t type; /* enum jv_type */
	uint8_t sub;
	union {
		bool b;
		int64_t i;
		double f;
		struct jstr s;
		struct jlist *l;
		struct jdict *d;
		struct jfunc *fn;
		struct jloop *loop;
	} u;
};

struct jlist {
	size_t n, cap;
	struct jv *v;
};

/* Insertion-ordered; a hash index over the keys once there are many. */
struct jdict {
	size_t n, cap;
	struct jv *k, *v;
	uint32_t *idx;	/* slot -> entry + 1 (0: empty), or NULL */
	size_t idx_cap; /* power of two */
};

/* What Python cannot hash (a dict key): lists, dicts and their views. */
static inline bool jv_unhashable(struct jv v)
{
	return (v.type == JV_LIST && v.sub != JV_TUPLE) || v.type == JV_DICT;
}

/* A list or tuple proper: indexable, sliceable, addable. */
static inline bool jv_is_seq(struct jv v)
{
	return v.type == JV_LIST && v.sub <= JV_TUPLE;
}

static inline struct jv jv_undef(const char *hint)
{
	return (struct jv){.type = JV_UNDEF,
			   .u.s = {hint, hint ? __builtin_strlen(hint) : 0}};
}
static inline struct jv jv_none(void) { return (struct jv){.type = JV_NONE}; }
static inline struct jv jv_bool(bool b)
{
	return (struct jv){.type = JV_BOOL, .u.b = b};
}
static inline struct jv jv_int(int64_t i)
{
	return (struct jv){.type = JV_INT, .u.i = i};
}
static inline struct jv jv_float(double f)
{
	return (struct jv){.type = JV_FLOAT, .u.f = f};
}
static inline struct jv jv_str(const char *p, size_t n)
{
	return (struct jv){.type = JV_STR, .u.s = {p, n}};
}
static inline struct jv jv_list(struct jlist *l)
{
	return (struct jv){.type = JV_LIST, .u.l = l};
}
static inline struct jv jv_dict(struct jdict *d)
{
	return (struct jv){.type = JV_DICT, .u.d = d};
}
static inline bool jv_missing(struct jv v)
{
	return v.type == JV_UNDEF && v.sub == JV_MISSING;
}

/* tokens */

enum jtok {
	JT_EOF,
	JT_DATA,	/* text between tags, whitespace control applied */
	JT_VAR_BEGIN,	/* {{ */
	JT_VAR_END,	/* }} */
	JT_BLOCK_BEGIN, /* {% */
	JT_BLOCK_END,	/* %} */
	JT_NAME,
	JT_STRING, /* s: the unescaped value */
	JT_INT,
	JT_FLOAT,
	JT_OP,
};

enum jop {
	JO_ADD,
	JO_SUB,
	JO_DIV,
	JO_FLOORDIV,
	JO_MUL,
	JO_MOD,
	JO_POW,
	JO_TILDE,
	JO_LBRACKET,
	JO_RBRACKET,
	JO_LPAREN,
	JO_RPAREN,
	JO_LBRACE,
	JO_RBRACE,
	JO_EQ, /* JO_EQ..JO_LTEQ: the comparison operators, in this order */
	JO_NE,
	JO_GT,
	JO_GTEQ,
	JO_LT,
	JO_LTEQ,
	JO_ASSIGN,
	JO_DOT,
	JO_COLON,
	JO_PIPE,
	JO_COMMA,
	JO_SEMICOLON,
	JO_IN, /* compare only: in, not in */
	JO_NOTIN,
	JO_N,
};

struct jtoken {
	uint8_t type; /* enum jtok */
	uint8_t op;   /* JT_OP: enum jop */
	uint32_t line, col;
	struct jstr s; /* DATA, NAME, STRING */
	int64_t i;
	double f;
};

struct jtokens {
	struct jtoken *v;
	size_t n;
};

/* Splits SRC into tokens in A; fails through F with a syntax error. */
void jlex(struct jfail *f, struct ja_arena *a, const char *src, size_t len,
	  struct jtokens *out);

/* syntax tree */

enum jn_kind {
	/* expressions */
	JN_CONST,   /* value */
	JN_NAME,    /* name */
	JN_LIST,    /* l1 items */
	JN_TUPLE,   /* l1 items */
	JN_DICT,    /* l1 keys, l2 values */
	JN_ATTR,    /* a.name */
	JN_ITEM,    /* a[b]; b may be a JN_SLICE */
	JN_SLICE,   /* a:b:c, each may be NULL */
	JN_CALL,    /* a(l1, l2 keyword args) */
	JN_KWARG,   /* name=a, in l2 of calls, filters, tests */
	JN_FILTER,  /* a | name(l1, l2); a NULL in filter blocks */
	JN_TEST,    /* a is [not: neg] name(l1, l2) */
	JN_NEG,	    /* -a */
	JN_POS,	    /* +a */
	JN_NOT,	    /* not a */
	JN_BINOP,   /* a op b */
	JN_AND,	    /* a and b */
	JN_OR,	    /* a or b */
	JN_COMPARE, /* a ops[i] l1[i] ... */
	JN_COND,    /* a if b else c (c may be NULL) */
	JN_CONCAT,  /* l1[0] ~ l1[1] ~ ... */
	/* statements */
	JN_OUTPUT,	/* l1: constants (template text) and {{ }} */
	JN_IF,		/* if a: l1 else l2 */
	JN_FOR,		/* for a in b [if c]: l1 else l2; neg: recursive */
	JN_SET,		/* a = b; a: name, tuple of names, or ns.attr */
	JN_SETBLOCK,	/* a = render(l1) | filter chain b (may be NULL) */
	JN_MACRO,	/* name(l1 params, l2 defaults): l3 */
	JN_CALLBLOCK,	/* a (a call) with caller(l1 params, l2): l3 */
	JN_FILTERBLOCK, /* render(l1) | filter chain b */
	JN_WITH,	/* l1 targets = l2 values: l3 */
	JN_BREAK,
	JN_CONTINUE,
	JN_BODY, /* l1, no scope of its own (generation blocks) */
};

struct jnode;

struct jnodes {
	struct jnode **v;
	size_t n;
};

struct jfilter_def;
struct jtest_def;

struct jnode {
	uint8_t kind; /* enum jn_kind */
	uint8_t op;   /* JN_BINOP: enum jop */
	bool neg;     /* JN_TEST: "is not"; JN_FOR: recursive */
	uint32_t line, col;
	struct jstr name;
	struct jv value;
	struct jnode *a, *b, *c;
	struct jnodes l1, l2, l3;
	uint8_t *ops; /* JN_COMPARE: enum jop per l1 operand */
	const struct jfilter_def *filter;
	const struct jtest_def *test;
};

struct o1_jinja {
	struct ja_arena arena;
	struct jnodes body;
};

/* Parses TOKENS into T->body (nodes in T->arena); fails through F. */
void jparse(struct jfail *f, struct o1_jinja *t, const struct jtokens *tokens);

/* rendering */

struct jbuf {
	char *p;
	size_t n, cap;
	bool top; /* malloc'd, capped by max_output; else in the arena */
};

struct jscope;

struct jctx {
	struct jfail f;
	struct ja_arena arena;
	struct jbuf top;
	struct jbuf *out; /* where output goes now: top or a capture */
	struct jscope *root;
	size_t max_output;
	uint64_t steps, max_steps;
	uint32_t depth, max_depth;
	time_t now;
};

_Noreturn void jr_fail(struct jctx *c, const struct jnode *at,
		       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void *jr_alloc(struct jctx *c, const struct jnode *at, size_t n);
/* Counts one step and checks the step limit. */
void jr_step(struct jctx *c, const struct jnode *at);
/* Counts a scan of BYTES bytes that allocates nothing (a string index,
 * search or comparison) as steps: what the memory cap does not bound. */
void jr_charge(struct jctx *c, const struct jnode *at, size_t bytes);

/* Arguments of a filter, test, method or function call. */
struct jargs {
	size_t n, nkw;
	struct jv *v;
	struct jstr *kwn;
	struct jv *kwv;
};

/* Binds ARGS to the parameters NAMES (NULL-terminated, at most 8) like a
 * Python call: SLOTS[i] is the argument or jv_missing. Fails for an
 * unknown keyword, a parameter given twice or too many arguments. */
void jargs_bind(struct jctx *c, const struct jnode *at, const char *what,
		const struct jargs *args, const char *const *names,
		struct jv *slots);

/* values (jinja_value.c) */

struct jlist *jv_list_new(struct jctx *c, const struct jnode *at, size_t cap);
void jv_list_push(struct jctx *c, const struct jnode *at, struct jlist *l,
		  struct jv v);
struct jdict *jv_dict_new(struct jctx *c, const struct jnode *at, size_t cap);
/* Sets K to V (replacing an equal key's value in place). */
void jv_dict_set(struct jctx *c, const struct jnode *at, struct jdict *d,
		 struct jv k, struct jv v);
/* The value stored under K, or NULL. */
struct jv *jv_dict_get(const struct jdict *d, struct jv k);
struct jv *jv_dict_gets(const struct jdict *d, const char *key, size_t n);
/* Converts a cJSON tree (depth already bounded by cJSON's parser). */
struct jv jv_from_json(struct jctx *c, const struct cJSON *j);

bool jv_truthy(struct jv v);
/* Python ==: numbers across int/float/bool, deep for lists and dicts. */
bool jv_equal(struct jctx *c, const struct jnode *at, struct jv a, struct jv b);
/* Python <, for numbers, strings and lists; -1/0/1; fails otherwise. */
int jv_compare(struct jctx *c, const struct jnode *at, struct jv a,
	       struct jv b);
const char *jv_type_name(struct jv v);
bool jv_is_number(struct jv v); /* int, float or bool */
double jv_as_double(struct jv v);

/* Python str() and repr() into the arena. */
struct jstr jv_to_str(struct jctx *c, const struct jnode *at, struct jv v);
struct jstr jv_repr(struct jctx *c, const struct jnode *at, struct jv v);
/* Appends to a growable arena buffer. */
void jbuf_put(struct jctx *c, const struct jnode *at, struct jbuf *b,
	      const char *s, size_t n);
static inline void jbuf_puts(struct jctx *c, const struct jnode *at,
			     struct jbuf *b, const char *s)
{
	jbuf_put(c, at, b, s, __builtin_strlen(s));
}
struct jstr jbuf_str(struct jbuf *b);
void jv_format_float(double f, char *out, size_t cap); /* repr(float) */

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) */
struct jjson_opts {
	bool ensure_ascii;
	bool sort_keys;
	bool indent_set;
	struct jstr indent; /* used when indent_set */
	struct jstr item_sep, key_sep;
};
struct jstr jv_tojson(struct jctx *c, const struct jnode *at, struct jv v,
		      const struct jjson_opts *o);

/* strings (jinja_str.c): UTF-8 as Python sees code points */

size_t ju_len(struct jstr s); /* code points */
/* Byte offset of code point I (I <= ju_len). */
size_t ju_offset(struct jstr s, size_t i);
/* Decodes one code point at S[*i] (advancing *i); invalid bytes are taken
 * one at a time as themselves, a surrogate's three-byte form is one code
 * point (Python's surrogatepass: a "\ud800" literal makes one). */
uint32_t ju_next(struct jstr s, size_t *i);
bool ju_isspace(uint32_t cp);
struct jstr ju_strip(struct jstr s, struct jstr *chars, bool left,
		     bool right);
enum ju_case { JU_UPPER, JU_LOWER, JU_TITLE, JU_CAPITALIZE };
struct jstr ju_case(struct jctx *c, const struct jnode *at, struct jstr s,
		    enum ju_case how);
/* Python str.find from byte offset START; -1 when absent (byte offset). */
ptrdiff_t ju_find(struct jstr hay, struct jstr needle, size_t start);
struct jstr ju_replace(struct jctx *c, const struct jnode *at, struct jstr s,
		       struct jstr old, struct jstr new_, int64_t count);

/* builtins (jinja_filters.c, jinja_tests.c, jinja_methods.c) */

typedef struct jv (*jfilter_fn)(struct jctx *c, const struct jnode *at,
				struct jv in, const struct jargs *args);
typedef bool (*jtest_fn)(struct jctx *c, const struct jnode *at, struct jv in,
			 const struct jargs *args);

struct jfilter_def {
	const char *name;
	jfilter_fn fn;
};

struct jtest_def {
	const char *name;
	jtest_fn fn;
};

const struct jfilter_def *jb_filter(struct jstr name);
const struct jtest_def *jb_test(struct jstr name);
/* OBJ.NAME(ARGS) for a method of a str, list or dict; false when OBJ's
 * type has no method NAME. */
bool jb_has_method(struct jv obj, struct jstr name);
struct jv jb_call_method(struct jctx *c, const struct jnode *at, struct jv obj,
			 struct jstr name, const struct jargs *args);
/* A global function (range, namespace, dict, raise_exception, ...) as a
 * JV_FUNC, or false. */
bool jb_global(struct jctx *c, const struct jnode *at, struct jstr name,
	       struct jv *out);

/* scopes (jinja_exec.c): a chain of variable tables; a for iteration, a
 * macro call or a with block opens one, if blocks do not */

struct jvar {
	struct jstr name;
	struct jv v;
};

struct jscope {
	struct jscope *parent;
	struct jvar *v;
	size_t n, cap;
	bool captured; /* a macro or caller keeps it: never reuse it */
};

struct jscope *jr_scope_new(struct jctx *c, const struct jnode *at,
			    struct jscope *parent);
struct jv *jr_scope_find(struct jscope *s, struct jstr name);
void jr_scope_set(struct jctx *c, const struct jnode *at, struct jscope *s,
		  struct jstr name, struct jv v);

/* evaluator (jinja_eval.c) */

struct jv jr_eval(struct jctx *c, const struct jnode *nd, struct jscope *s);
/* Evaluates a call's or filter's arguments. */
void jr_eval_args(struct jctx *c, const struct jnode *nd, struct jscope *s,
		  struct jargs *out);
/* Applies filter node ND (not its input expression) to IN. */
struct jv jr_apply_filter(struct jctx *c, const struct jnode *nd,
			  struct jscope *s, struct jv in);
/* Renders BODY into a new string in scope S. */
struct jstr jr_capture(struct jctx *c, const struct jnodes *body,
		       struct jscope *s);
/* Runs the template's top-level statements in C->root. */
void jr_exec_template(struct jctx *c, const struct jnodes *body);
/* Calls a macro or caller FN (jinja_exec.c). */
struct jv jr_call_macro(struct jctx *c, const struct jnode *at,
			const struct jfunc *fn, const struct jargs *args);
/* loop(iterable) inside a recursive for (jinja_exec.c). */
struct jv jr_call_loop(struct jctx *c, const struct jnode *at,
		       struct jloop *loop, const struct jargs *args);


/* Callable values. loop itself (a recursive for's loop(x)) is a JV_LOOP,
 * not a function. */
enum jfunc_kind {
	JF_GLOBAL,  /* a global function: call(c, at, args) */
	JF_METHOD,  /* self.name(args) */
	JF_MACRO,   /* node: the macro; scope: where it was defined */
	JF_CALLER,  /* node: the call block; scope: where it stands */
	JF_CYCLE,   /* loop.cycle */
	JF_CHANGED, /* loop.changed */
};

struct jfunc {
	uint8_t kind; /* enum jfunc_kind */
	struct jstr name;
	struct jv (*call)(struct jctx *c, const struct jnode *at,
			  const struct jargs *args);
	struct jv self;		  /* METHOD */
	const struct jnode *node; /* MACRO, CALLER */
	struct jscope *scope;	  /* MACRO, CALLER */
	struct jloop *loop;	  /* CYCLE, CHANGED */
};

struct jloop {
	size_t index0, length;
	const struct jv *items;
	uint32_t depth0;
	const struct jnode *node; /* the for statement */
	struct jscope *scope;	  /* the scope around the for */
	struct jv changed_last;
	bool changed_set;
};

/* a OP b for the arithmetic operators (jinja_ops.c). */
struct jv jr_binop(struct jctx *c, const struct jnode *at, enum jop op,
		   struct jv a, struct jv b);
/* Python's FMT % ARGS (ARGS a tuple, a dict or one value). */
struct jstr jr_percent_format(struct jctx *c, const struct jnode *at,
			      struct jstr fmt, struct jv args);
/* Calls a JV_FUNC with ARGS. */
struct jv jr_call(struct jctx *c, const struct jnode *at, struct jv fn,
		  const struct jargs *args);
/* Calls filter/test NAME (for map, select, ...). */
struct jv jr_filter_by_name(struct jctx *c, const struct jnode *at,
			    struct jstr name, struct jv in,
			    const struct jargs *args);
bool jr_test_by_name(struct jctx *c, const struct jnode *at, struct jstr name,
		     struct jv in, const struct jargs *args);
/* Items of an iterable (list, tuple, dict keys, string characters,
 * undefined = none); fails for others. */
struct jlist *jr_iter(struct jctx *c, const struct jnode *at, struct jv v);
/* obj.name / obj[key] as Jinja resolves them. */
struct jv jr_getattr(struct jctx *c, const struct jnode *at, struct jv obj,
		     struct jstr name);
struct jv jr_getitem(struct jctx *c, const struct jnode *at, struct jv obj,
		     struct jv key);
/* Fails when V is undefined (using it beyond printing or testing). */
void jr_defined(struct jctx *c, const struct jnode *at, struct jv v);

#endif

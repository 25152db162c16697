/* str() and repr() of Jinja values, as Python prints them: what "{{ x }}"
 * writes for a number, None, a list or a dict ("['a', 1]", "{'k': None}",
 * "(1,)"), with strings quoted and escaped like Python's repr.
 *
 * Python's repr keeps printable characters and escapes the rest; the set of
 * non-printable code points here covers controls, format characters,
 * separators, surrogates and private use, not every unassigned one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/utf8.h"
#include "template/jinja_int.h"

enum { MAX_NEST = 500 };

static bool printable(uint32_t cp)
{
	if (cp < 0x20 || cp == 0x7f)
		return false;
	if (cp < 0x7f)
		return true;
	if (cp <= 0xa0 || cp == 0xad || cp == 0x61c || cp == 0x6dd ||
	    cp == 0x70f || cp == 0x180e || cp == 0x1680 || cp == 0x3000 ||
	    cp == 0xfeff || cp == 0xe0001)
		return false;
	if ((cp >= 0x600 && cp <= 0x605) || (cp >= 0x2000 && cp <= 0x200f) ||
	    (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f) ||
	    (cp >= 0xd800 && cp <= 0xf8ff) || (cp >= 0xfff9 && cp <= 0xfffb) ||
	    cp >= 0xfffe)
		return cp > 0xffff && cp < 0xe0000 && (cp & 0xfffe) != 0xfffe;
	return !(cp >= 0xe0020 && cp <= 0xe007f);
}

static void repr_char(struct jctx *c, const struct jnode *at, struct jbuf *b,
		      uint32_t cp, char quote)
{
	char tmp[16];
	const char *esc = NULL;

	if (cp == (uint32_t)quote || cp == '\\') {
		tmp[0] = '\\';
		tmp[1] = (char)cp;
		jbuf_put(c, at, b, tmp, 2);
		return;
	}
	if (cp == '\n')
		esc = "\\n";
	else if (cp == '\r')
		esc = "\\r";
	else if (cp == '\t')
		esc = "\\t";
	if (esc) {
		jbuf_puts(c, at, b, esc);
	} else if (printable(cp)) {
		jbuf_put(c, at, b, tmp, o1_utf8_encode(cp, tmp));
	} else {
		snprintf(tmp, sizeof(tmp),
			 cp <= 0xff     ? "\\x%02x"
			 : cp <= 0xffff ? "\\u%04x"
					: "\\U%08x",
			 cp);
		jbuf_puts(c, at, b, tmp);
	}
}

static void repr_string(struct jctx *c, const struct jnode *at,
			struct jbuf *b, struct jstr s)
{
	bool single = memchr(s.p, '\'', s.n) != NULL,
	     dbl = memchr(s.p, '"', s.n) != NULL;
	char quote = single && !dbl ? '"' : '\'';
	size_t i = 0;

	jbuf_put(c, at, b, &quote, 1);
	while (i < s.n)
		repr_char(c, at, b, ju_next(s, &i), quote);
	jbuf_put(c, at, b, &quote, 1);
}

static void put_value(struct jctx *c, const struct jnode *at, struct jbuf *b,
		      struct jv v, bool repr, int depth);

static void put_list(struct jctx *c, const struct jnode *at, struct jbuf *b,
		     struct jv v, int depth)
{
	bool tuple = v.sub == JV_TUPLE;

	if (v.sub == JV_GEN) {
		jbuf_puts(c, at, b, "<generator object>");
		return;
	}
	if (v.sub > JV_GEN) { /* a dict view: dict_keys([...]) */
		jbuf_puts(c, at, b, jv_type_name(v));
		jbuf_puts(c, at, b, "(");
		put_list(c, at, b, jv_list(v.u.l), depth);
		jbuf_puts(c, at, b, ")");
		return;
	}
	jbuf_puts(c, at, b, tuple ? "(" : "[");
	for (size_t i = 0; i < v.u.l->n; i++) {
		if (i)
			jbuf_puts(c, at, b, ", ");
		put_value(c, at, b, v.u.l->v[i], true, depth + 1);
	}
	jbuf_puts(c, at, b, tuple ? (v.u.l->n == 1 ? ",)" : ")") : "]");
}

static void put_dict(struct jctx *c, const struct jnode *at, struct jbuf *b,
		     const struct jdict *d, int depth)
{
	jbuf_puts(c, at, b, "{");
	for (size_t i = 0; i < d->n; i++) {
		if (i)
			jbuf_puts(c, at, b, ", ");
		put_value(c, at, b, d->k[i], true, depth + 1);
		jbuf_puts(c, at, b, ": ");
		put_value(c, at, b, d->v[i], true, depth + 1);
	}
	jbuf_puts(c, at, b, "}");
}

static void put_scalar(struct jctx *c, const struct jnode *at,
		       struct jbuf *b, struct jv v)
{
	char tmp[64];

	switch (v.type) {
	case JV_NONE:
		jbuf_puts(c, at, b, "None");
		break;
	case JV_BOOL:
		jbuf_puts(c, at, b, v.u.b ? "True" : "False");
		break;
	case JV_INT:
		snprintf(tmp, sizeof(tmp), "%" PRId64, v.u.i);
		jbuf_puts(c, at, b, tmp);
		break;
	case JV_FLOAT:
		jv_format_float(v.u.f, tmp, sizeof(tmp));
		jbuf_puts(c, at, b, tmp);
		break;
	case JV_LOOP:
		snprintf(tmp, sizeof(tmp), "<LoopContext %zu/%zu>",
			 v.u.loop->index0 + 1, v.u.loop->length);
		jbuf_puts(c, at, b, tmp);
		break;
	default: /* JV_FUNC */
		jbuf_puts(c, at, b, "<function ");
		jbuf_put(c, at, b, v.u.fn->name.p, v.u.fn->name.n);
		jbuf_puts(c, at, b, ">");
		break;
	}
}

static void put_value(struct jctx *c, const struct jnode *at, struct jbuf *b,
		      struct jv v, bool repr, int depth)
{
	if (depth > MAX_NEST)
		jr_fail(c, at, "value nested too deeply to print");
	switch (v.type) {
	case JV_UNDEF:
		if (repr)
			jbuf_puts(c, at, b, "Undefined");
		break;
	case JV_STR:
		if (repr)
			repr_string(c, at, b, v.u.s);
		else
			jbuf_put(c, at, b, v.u.s.p, v.u.s.n);
		break;
	case JV_LIST:
		put_list(c, at, b, v, depth);
		break;
	case JV_DICT:
		if (v.sub == JV_NS)
			jbuf_puts(c, at, b, "<Namespace ");
		put_dict(c, at, b, v.u.d, depth);
		if (v.sub == JV_NS)
			jbuf_puts(c, at, b, ">");
		break;
	default:
		put_scalar(c, at, b, v);
		break;
	}
}

struct jstr jv_to_str(struct jctx *c, const struct jnode *at, struct jv v)
{
	struct jbuf b = {0};

	if (v.type == JV_STR)
		return v.u.s;
	if (v.type == JV_UNDEF)
		return (struct jstr){"", 0};
	put_value(c, at, &b, v, false, 0);
	return jbuf_str(&b);
}

struct jstr jv_repr(struct jctx *c, const struct jnode *at, struct jv v)
{
	struct jbuf b = {0};

	put_value(c, at, &b, v, true, 0);
	return jbuf_str(&b);
}

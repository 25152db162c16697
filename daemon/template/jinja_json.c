/* tojson as transformers defines it: Python's json.dumps(value,
 * ensure_ascii, indent, separators, sort_keys), byte for byte.
 *
 * Defaults follow json.dumps: separators ", " and ": ", or "," and ": "
 * when indenting; floats as repr() prints them (NaN, Infinity); dict keys
 * that are numbers, booleans or None become their JSON text; undefined
 * values and other objects fail as "not JSON serializable".
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "template/jinja_int.h"

enum { MAX_NEST = 500 };

struct dumper {
	struct jctx *c;
	const struct jnode *at;
	const struct jjson_opts *o;
	struct jbuf b;
};

static void put(struct dumper *d, const char *s, size_t n)
{
	jbuf_put(d->c, d->at, &d->b, s, n);
}

static void puts_(struct dumper *d, const char *s)
{
	put(d, s, strlen(s));
}

static void put_u(struct dumper *d, uint32_t u)
{
	char tmp[16];

	snprintf(tmp, sizeof(tmp), "\\u%04x", u & 0xffff);
	put(d, tmp, 6);
}

/* The escape json.dumps writes for CP, or NULL. */
static const char *short_escape(uint32_t cp)
{
	switch (cp) {
	case '"': return "\\\"";
	case '\\': return "\\\\";
	case '\b': return "\\b";
	case '\f': return "\\f";
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return "\\t";
	default: return NULL;
	}
}

static void put_string(struct dumper *d, struct jstr s)
{
	size_t i = 0, j;

	put(d, "\"", 1);
	while (i < s.n) {
		const char *e;
		uint32_t cp;

		j = i;
		cp = ju_next(s, &j);
		if ((e = short_escape(cp))) {
			put(d, e, 2);
		} else if (cp < 0x20) {
			put_u(d, cp);
		} else if (cp >= 0x80 && d->o->ensure_ascii) {
			if (cp > 0xffff) {
				put_u(d, 0xd800 + ((cp - 0x10000) >> 10));
				put_u(d, 0xdc00 + ((cp - 0x10000) & 0x3ff));
			} else {
				put_u(d, cp);
			}
		} else {
			put(d, s.p + i, j - i);
		}
		i = j;
	}
	put(d, "\"", 1);
}

static void newline(struct dumper *d, int level)
{
	if (!d->o->indent_set)
		return;
	put(d, "\n", 1);
	for (int i = 0; i < level; i++)
		put(d, d->o->indent.p, d->o->indent.n);
}

static void dump(struct dumper *d, struct jv v, int level);

static void dump_list(struct dumper *d, const struct jlist *l, int level)
{
	if (!l->n) {
		put(d, "[]", 2);
		return;
	}
	put(d, "[", 1);
	for (size_t i = 0; i < l->n; i++) {
		if (i)
			put(d, d->o->item_sep.p, d->o->item_sep.n);
		newline(d, level + 1);
		dump(d, l->v[i], level + 1);
	}
	newline(d, level);
	put(d, "]", 1);
}

static void dump_key(struct dumper *d, struct jv k)
{
	struct jstr s;

	switch (k.type) {
	case JV_STR:
		put_string(d, k.u.s);
		return;
	case JV_INT:
	case JV_FLOAT:
		s = jv_to_str(d->c, d->at, k);
		put(d, "\"", 1);
		put(d, s.p, s.n);
		put(d, "\"", 1);
		return;
	case JV_BOOL:
		puts_(d, k.u.b ? "\"true\"" : "\"false\"");
		return;
	case JV_NONE:
		puts_(d, "\"null\"");
		return;
	default:
		jr_fail(d->c, d->at,
			"keys must be str, int, float, bool or None, not %s",
			jv_type_name(k));
	}
}

/* Entry order for sort_keys: an insertion sort by key (dicts are small);
 * keys of mixed types fail as in Python. */
static size_t *sorted_order(struct dumper *d, const struct jdict *dict)
{
	size_t *ord = jr_alloc(d->c, d->at, dict->n * sizeof(*ord));

	for (size_t i = 0; i < dict->n; i++) {
		size_t j = i;

		while (j > 0 && jv_compare(d->c, d->at, dict->k[ord[j - 1]],
					   dict->k[i]) > 0) {
			ord[j] = ord[j - 1];
			j--;
		}
		ord[j] = i;
	}
	return ord;
}

static void dump_dict(struct dumper *d, const struct jdict *dict, int level)
{
	size_t *ord = NULL;

	if (!dict->n) {
		put(d, "{}", 2);
		return;
	}
	if (d->o->sort_keys)
		ord = sorted_order(d, dict);
	put(d, "{", 1);
	for (size_t i = 0; i < dict->n; i++) {
		size_t k = ord ? ord[i] : i;

		if (i)
			put(d, d->o->item_sep.p, d->o->item_sep.n);
		newline(d, level + 1);
		dump_key(d, dict->k[k]);
		put(d, d->o->key_sep.p, d->o->key_sep.n);
		dump(d, dict->v[k], level + 1);
	}
	newline(d, level);
	put(d, "}", 1);
}

static void dump_number(struct dumper *d, struct jv v)
{
	char tmp[64];

	if (v.type == JV_INT) {
		snprintf(tmp, sizeof(tmp), "%" PRId64, v.u.i);
	} else if (isnan(v.u.f)) {
		strcpy(tmp, "NaN");
	} else if (isinf(v.u.f)) {
		strcpy(tmp, v.u.f > 0 ? "Infinity" : "-Infinity");
	} else {
		jv_format_float(v.u.f, tmp, sizeof(tmp));
	}
	puts_(d, tmp);
}

static void dump(struct dumper *d, struct jv v, int level)
{
	jr_step(d->c, d->at);
	if (level > MAX_NEST)
		jr_fail(d->c, d->at, "value nested too deeply for tojson");
	switch (v.type) {
	case JV_NONE:
		puts_(d, "null");
		break;
	case JV_BOOL:
		puts_(d, v.u.b ? "true" : "false");
		break;
	case JV_INT:
	case JV_FLOAT:
		dump_number(d, v);
		break;
	case JV_STR:
		put_string(d, v.u.s);
		break;
	case JV_LIST:
		if (!jv_is_seq(v))
			jr_fail(d->c, d->at,
				"Object of type %s is not JSON serializable",
				jv_type_name(v));
		dump_list(d, v.u.l, level);
		break;
	case JV_DICT:
		if (v.sub != JV_NS) {
			dump_dict(d, v.u.d, level);
			break;
		}
		/* fall through */
	default:
		jr_fail(d->c, d->at, "Object of type %s is not JSON serializable",
			jv_type_name(v));
	}
}

struct jstr jv_tojson(struct jctx *c, const struct jnode *at, struct jv v,
		      const struct jjson_opts *o)
{
	struct dumper d = {.c = c, .at = at, .o = o};

	dump(&d, v, 0);
	return jbuf_str(&d.b);
}

/* JSON Schema -> grammar text (grammar_schema.h).
 *
 * Every schema node gets a rule s<id> (the grammar compiler inlines the
 * small ones again); a node is registered before its body is written, so
 * a $ref back to it is recursion in the grammar. A node's body is:
 *   - the alternatives of anyOf/oneOf, each merged with the keywords
 *     beside it (A and (B or C) = (A and B) or (A and C));
 *   - allOf, and $ref beside other keywords, merged into one schema
 *     (grammar_schema_merge.c) and written as that;
 *   - enum/const as the canonical texts of the values of the allowed types;
 *   - otherwise one branch per allowed type (all six when `type` is absent:
 *     JSON Schema keywords only constrain their own type).
 * A schema that matches nothing (false, an empty type intersection, an
 * enum with no value left) is GS_NOTHING: an alternative or an optional
 * member that is nothing is left out, a required one makes its parent
 * nothing, and the root being nothing is an error.
 */
#include "grammar/grammar_schema_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/utf8.h"

enum { KW_ANNOT, KW_CONTAINER, KW_ROOT, KW_VALID };

static const struct {
	const char *name;
	uint8_t kind;
} keywords[] = {
	{"$schema", KW_ANNOT},	       {"$comment", KW_ANNOT},
	{"title", KW_ANNOT},	       {"description", KW_ANNOT},
	{"default", KW_ANNOT},	       {"examples", KW_ANNOT},
	{"deprecated", KW_ANNOT},      {"readOnly", KW_ANNOT},
	{"writeOnly", KW_ANNOT},       {"contentEncoding", KW_ANNOT},
	{"contentMediaType", KW_ANNOT}, {"contentSchema", KW_ANNOT},
	{"$defs", KW_CONTAINER},       {"definitions", KW_CONTAINER},
	{"$id", KW_ROOT},	       {"type", KW_VALID},
	{"enum", KW_VALID},	       {"const", KW_VALID},
	{"properties", KW_VALID},      {"required", KW_VALID},
	{"additionalProperties", KW_VALID},
	{"items", KW_VALID},	       {"prefixItems", KW_VALID},
	{"minItems", KW_VALID},	       {"maxItems", KW_VALID},
	{"uniqueItems", KW_VALID},     {"minLength", KW_VALID},
	{"maxLength", KW_VALID},       {"pattern", KW_VALID},
	{"format", KW_VALID},	       {"minimum", KW_VALID},
	{"maximum", KW_VALID},	       {"exclusiveMinimum", KW_VALID},
	{"exclusiveMaximum", KW_VALID}, {"anyOf", KW_VALID},
	{"oneOf", KW_VALID},	       {"allOf", KW_VALID},
	{"$ref", KW_VALID},
};

enum {
	T_NULL = 1,
	T_BOOL = 2,
	T_INT = 4,
	T_NUM = 8,
	T_STR = 16,
	T_ARR = 32,
	T_OBJ = 64,
	T_ALL = 127,
};

static const char *const type_names[] = {
	"null", "boolean", "integer", "number", "string", "array", "object"};

int gs_fail(struct gsc *c, int code, const char *path, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return gr_fail(c->err, code, 0, 0, "%s (at %s)", what,
		       path[0] ? path : "#");
}

cJSON *gs_own(struct gsc *c, cJSON *tree)
{
	if (!tree)
		return NULL;
	if (c->n_owned == c->cap_owned) {
		uint32_t cap = c->cap_owned ? c->cap_owned * 2 : 16;
		cJSON **o = realloc(c->owned, cap * sizeof(*o));

		if (!o) {
			cJSON_Delete(tree);
			return NULL;
		}
		c->owned = o;
		c->cap_owned = cap;
	}
	c->owned[c->n_owned++] = tree;
	return tree;
}

/* PATH + "/" + TOKEN (escaped as a JSON pointer) into OUT, shortened
 * with "..." when long. */
static const char *sub(char *out, size_t cap, const char *path,
		       const char *token)
{
	size_t n = (size_t)snprintf(out, cap, "%s/", path[0] ? path : "#");

	for (const char *t = token; *t && n + 4 < cap; t++) {
		if (*t == '~' || *t == '/')
			n += (size_t)snprintf(out + n, cap - n, "~%c",
					      *t == '~' ? '0' : '1');
		else
			out[n++] = *t;
	}
	if (n + 4 >= cap)
		strcpy(out + cap - 4, "...");
	else
		out[n] = 0;
	return out;
}

static const char *sub_index(char *out, size_t cap, const char *path,
			     const char *key, int i)
{
	char tok[64];

	snprintf(tok, sizeof(tok), "%s/%d", key, i);
	sub(out, cap, path, key);
	snprintf(out + strlen(out), cap - strlen(out), "/%d", i);
	return out;
}

static bool known_draft(const cJSON *k)
{
	static const char *const drafts[] = {
		"https://json-schema.org/draft/2020-12/schema",
		"https://json-schema.org/draft/2019-09/schema",
		"http://json-schema.org/draft-07/schema",
		"http://json-schema.org/draft-06/schema",
		"http://json-schema.org/draft-04/schema",
	};
	const char *v = cJSON_GetStringValue(k);

	for (size_t i = 0; v && i < sizeof(drafts) / sizeof(drafts[0]); i++) {
		size_t n = strlen(drafts[i]);

		if (!strncmp(v, drafts[i], n) && (!v[n] || !strcmp(v + n, "#")))
			return true;
	}
	return false;
}

static int check_keywords(struct gsc *c, const cJSON *s, const char *path)
{
	for (const cJSON *k = s->child; k; k = k->next) {
		size_t i = 0, n = sizeof(keywords) / sizeof(keywords[0]);

		while (i < n && strcmp(keywords[i].name, k->string))
			i++;
		if (i == n)
			return gs_fail(c, -O1_E_UNSUPPORTED, path,
				       "keyword '%s' is not supported",
				       k->string);
		if (keywords[i].kind == KW_ROOT && s != c->doc)
			return gs_fail(c, -O1_E_UNSUPPORTED, path,
				       "keyword '$id' inside the schema is "
				       "not supported");
		if (!strcmp(k->string, "$schema") && !known_draft(k))
			return gs_fail(c, -O1_E_UNSUPPORTED, path,
				       "'$schema' names no JSON Schema draft "
				       "(custom metaschemas are not "
				       "supported)");
		if (!strcmp(k->string, "uniqueItems") && !cJSON_IsFalse(k))
			return gs_fail(c, -O1_E_UNSUPPORTED, path,
				       "keyword 'uniqueItems' (true) is not "
				       "supported");
	}
	return 0;
}

/* True when S has a validation keyword other than those in SKIP. */
static bool has_validation(const cJSON *s, const char *const *skip)
{
	for (const cJSON *k = s->child; k; k = k->next) {
		bool skipped = false;

		for (const char *const *x = skip; *x && !skipped; x++)
			skipped = !strcmp(*x, k->string);
		for (size_t i = 0;
		     !skipped && i < sizeof(keywords) / sizeof(keywords[0]);
		     i++)
			if (!strcmp(keywords[i].name, k->string))
				skipped = keywords[i].kind != KW_VALID;
		if (!skipped)
			return true;
	}
	return false;
}

/* A non-negative integer keyword (absent: *V unchanged, returns 0). */
static int get_count(struct gsc *c, const cJSON *s, const char *key,
		     const char *path, uint32_t *v)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, key);
	double x;

	if (!k)
		return 0;
	x = cJSON_IsNumber(k) ? k->valuedouble : -1;
	if (x < 0 || x != floor(x))
		return gs_fail(c, -O1_E_FORMAT, path,
			       "'%s' must be a non-negative integer", key);
	if (x > GR_MAX_REP)
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "'%s' over %u is not supported", key,
			       GR_MAX_REP);
	*v = (uint32_t)x;
	return 0;
}

static int types_of(struct gsc *c, const cJSON *s, const char *path,
		    unsigned *types)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
	const cJSON *one = t;

	*types = t ? 0 : T_ALL;
	if (t && cJSON_IsArray(t))
		one = t->child;
	for (; t && one; one = cJSON_IsArray(t) ? one->next : NULL) {
		unsigned bit = 0;

		for (int i = 0; i < 7 && cJSON_IsString(one); i++)
			if (!strcmp(one->valuestring, type_names[i]))
				bit = 1u << i;
		if (!bit)
			return gs_fail(c, -O1_E_FORMAT, path,
				       "'type' must name JSON types");
		*types |= bit;
	}
	if (*types & T_NUM)
		*types |= T_INT; /* an integer is a number */
	return 0;
}

static int rule_of(struct gsc *c, const cJSON *s, const char *path,
		   uint32_t *id);
static int gen(struct gsc *c, const cJSON *s, const char *path,
	       struct gbuf *e);

static void ws(struct gsc *c, struct gbuf *e)
{
	gb_put(e, c->o.ws_max ? " ws " : " ");
}

/* The value a JSON type allows, for an enum filter. */
static bool value_type_ok(const cJSON *v, unsigned types)
{
	if (cJSON_IsNull(v))
		return types & T_NULL;
	if (cJSON_IsBool(v))
		return types & T_BOOL;
	if (cJSON_IsNumber(v))
		return (types & T_NUM) ||
		       ((types & T_INT) && v->valuedouble == floor(v->valuedouble));
	if (cJSON_IsString(v))
		return types & T_STR;
	if (cJSON_IsArray(v))
		return types & T_ARR;
	return types & T_OBJ;
}

static int gen_enum(struct gsc *c, const cJSON *s, const char *path,
		    unsigned types, struct gbuf *e)
{
	static const char *const allowed[] = {"enum", "const", "type", NULL};
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
	const cJSON *co = cJSON_GetObjectItemCaseSensitive(s, "const");
	bool first = true;
	int rc = 0;

	if (has_validation(s, allowed) || (en && co))
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "'%s' beside other validation keywords is not "
			       "supported",
			       en ? "enum" : "const");
	if (en && !cJSON_IsArray(en))
		return gs_fail(c, -O1_E_FORMAT, path, "'enum' must be a list");
	gb_put(e, "(");
	for (const cJSON *v = en ? en->child : co; v && !rc;
	     v = en ? v->next : NULL) {
		struct gbuf t = {0};

		if (!value_type_ok(v, types))
			continue;
		rc = gs_json_write(&t, v);
		if (!rc && !t.oom) {
			gb_put(e, first ? "" : " | ");
			gb_lit(e, t.p, t.n);
			first = false;
		}
		rc = rc ?: t.oom ? -ENOMEM : 0;
		free(t.p);
	}
	gb_put(e, ")");
	if (rc)
		return rc == -ENOMEM ? rc
				     : gs_fail(c, rc, path,
					       "an enum value is not valid "
					       "JSON text (bad UTF-8 or not "
					       "finite)");
	return first ? GS_NOTHING : 0;
}

/* Integer bound from a number keyword: CEIL for lower bounds. */
static int int_bound(struct gsc *c, const cJSON *s, const char *key,
		     bool lower, bool excl, const char *path, bool *has,
		     int64_t *v)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, key);
	double x, r;

	if (!k)
		return 0;
	if (!cJSON_IsNumber(k) || !isfinite(k->valuedouble))
		return gs_fail(c, -O1_E_FORMAT, path, "'%s' must be a number",
			       key);
	x = k->valuedouble;
	if (fabs(x) > 4e18)
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "'%s' beyond +-4e18 is not supported", key);
	r = lower ? (excl ? floor(x) + 1 : ceil(x))
		  : (excl ? ceil(x) - 1 : floor(x));
	if (!*has || (lower ? r > (double)*v : r < (double)*v))
		*v = (int64_t)r;
	*has = true;
	return 0;
}

static int gen_integer(struct gsc *c, const cJSON *s, const char *path,
		       struct gbuf *e)
{
	bool has_lo = false, has_hi = false;
	int64_t lo = 0, hi = 0;
	int rc = int_bound(c, s, "minimum", true, false, path, &has_lo, &lo);

	rc = rc ?: int_bound(c, s, "exclusiveMinimum", true, true, path,
			     &has_lo, &lo);
	rc = rc ?: int_bound(c, s, "maximum", false, false, path, &has_hi,
			     &hi);
	rc = rc ?: int_bound(c, s, "exclusiveMaximum", false, true, path,
			     &has_hi, &hi);
	if (rc)
		return rc;
	if (has_lo && has_hi && lo > hi)
		return GS_NOTHING;
	if (!has_lo && !has_hi)
		gb_put(e, "json-integer");
	else
		gs_int_range(e, has_lo, lo, has_hi, hi);
	return 0;
}

static bool has_bounds(const cJSON *s)
{
	return cJSON_GetObjectItemCaseSensitive(s, "minimum") ||
	       cJSON_GetObjectItemCaseSensitive(s, "maximum") ||
	       cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum") ||
	       cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
}

static int gen_number(struct gsc *c, const cJSON *s, const char *path,
		      struct gbuf *e)
{
	if (!has_bounds(s)) {
		gb_put(e, "json-number");
		return 0;
	}
	return gs_number_range(c, s, path, e);
}

static int gen_string(struct gsc *c, const cJSON *s, const char *path,
		      struct gbuf *e)
{
	const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
	uint32_t min = 0, max = GR_INF;
	bool lengths = cJSON_GetObjectItemCaseSensitive(s, "minLength") ||
		       cJSON_GetObjectItemCaseSensitive(s, "maxLength");
	int rc = get_count(c, s, "minLength", path, &min);

	rc = rc ?: get_count(c, s, "maxLength", path, &max);
	if (rc)
		return rc;
	if (fmt && c->o.formats_as_annotations)
		fmt = NULL;
	if ((pat && (fmt || lengths)) || (fmt && lengths))
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "'%s' beside '%s' is not supported",
			       pat ? "pattern" : "format",
			       pat && fmt ? "format" : "minLength/maxLength");
	if (min > max)
		return GS_NOTHING;
	if (pat) {
		char why[160];

		if (!cJSON_IsString(pat))
			return gs_fail(c, -O1_E_FORMAT, path,
				       "'pattern' must be a string");
		gb_put(e, "\"\\\"\" ");
		rc = gr_regex(pat->valuestring, strlen(pat->valuestring), e,
			      why, sizeof(why));
		gb_put(e, " \"\\\"\"");
		if (rc == -ENOMEM)
			return rc;
		return rc ? gs_fail(c, rc, path, "pattern: %s", why) : 0;
	}
	if (fmt)
		return gs_format(c, fmt, path, e);
	if (!lengths)
		gb_put(e, "json-string");
	else if (max == GR_INF)
		gb_printf(e, "\"\\\"\" json-char{%u,} \"\\\"\"", min);
	else
		gb_printf(e, "\"\\\"\" json-char{%u,%u} \"\\\"\"", min, max);
	return 0;
}

/* Rule id of a subschema, or GS_NOTHING; a schema `false` is nothing. */
static int sub_rule(struct gsc *c, const cJSON *s, const char *path,
		    uint32_t *id)
{
	if (cJSON_IsFalse(s))
		return GS_NOTHING;
	return rule_of(c, s, path, id);
}

/* Array: element j is rule pre[j] below K, then ITEM ("" for none). */
struct arr {
	char (*pre)[16];
	uint32_t k, min, max;
	char item[16];
};

static const char *elem(const struct arr *a, uint32_t j)
{
	return j < a->k ? a->pre[j] : a->item;
}

static void comma(struct gsc *c, struct gbuf *e)
{
	ws(c, e);
	gb_put(e, "\",\"");
	ws(c, e);
}

/* Elements from J on, J already written (so each starts with a comma). */
static void tail(struct gsc *c, const struct arr *a, uint32_t j,
		 struct gbuf *e)
{
	if (j >= a->max || (j >= a->k && !a->item[0]))
		return;
	gb_put(e, " (");
	comma(c, e);
	gb_put(e, elem(a, j));
	if (j >= a->k) {
		uint32_t lo = a->min > j ? a->min - j : 0;

		if (a->max == GR_INF)
			gb_printf(e, "){%u,}", lo);
		else
			gb_printf(e, "){%u,%u}", lo, a->max - j);
		return;
	}
	tail(c, a, j + 1, e);
	gb_put(e, j < a->min ? ")" : ")?");
}

static int item_rule(struct gsc *c, const cJSON *x, const char *path,
		     char name[16])
{
	uint32_t id;
	int rc = sub_rule(c, x, path, &id);

	name[0] = 0;
	if (!rc)
		snprintf(name, 16, "s%u", id);
	return rc;
}

static int array_parts(struct gsc *c, const cJSON *s, const char *path,
		       struct arr *a)
{
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(s, "items");
	char p[256];
	int rc = 0;

	if (pre && !cJSON_IsArray(pre))
		return gs_fail(c, -O1_E_FORMAT, path,
			       "'prefixItems' must be a list");
	a->k = pre ? (uint32_t)cJSON_GetArraySize(pre) : 0;
	if (a->k > 150)
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "'prefixItems' over 150 schemas");
	a->pre = malloc((a->k + 1) * sizeof(*a->pre));
	if (!a->pre)
		return -ENOMEM;
	strcpy(a->item, "json-value");
	for (uint32_t i = 0; pre && i < a->k && !rc; i++) {
		sub_index(p, sizeof(p), path, "prefixItems", (int)i);
		rc = item_rule(c, cJSON_GetArrayItem(pre, (int)i), p,
			       a->pre[i]);
		if (rc == GS_NOTHING) { /* element i can never be there */
			a->k = i;
			a->item[0] = 0;
			return 0;
		}
	}
	if (!rc && it) {
		rc = item_rule(c, it, sub(p, sizeof(p), path, "items"),
			       a->item);
		rc = rc == GS_NOTHING ? 0 : rc;
	}
	return rc;
}

static int gen_array(struct gsc *c, const cJSON *s, const char *path,
		     struct gbuf *e)
{
	struct arr a = {.min = 0, .max = GR_INF};
	int rc = array_parts(c, s, path, &a);

	rc = rc ?: get_count(c, s, "minItems", path, &a.min);
	rc = rc ?: get_count(c, s, "maxItems", path, &a.max);
	if (!rc && !a.item[0] && a.k < a.max)
		a.max = a.k;
	if (!rc && a.min > a.max)
		rc = GS_NOTHING;
	if (!rc) {
		gb_put(e, "(\"[\"");
		ws(c, e);
		if (a.max > 0) {
			gb_printf(e, "(%s", elem(&a, 0));
			tail(c, &a, 1, e);
			gb_put(e, a.min ? ")" : ")?");
			ws(c, e);
		}
		gb_put(e, "\"]\")");
	}
	free(a.pre);
	return rc;
}

/* Object members: known ones in `properties` order, then the required
 * ones `properties` does not name, then additional members. */
struct member {
	const char *name;
	char rule[16];
	bool required;
};

struct obj {
	struct member *m;
	uint32_t n;
	char add[16];	   /* additional members' values, "" for none */
	const cJSON *props; /* names additional keys must avoid */
	const cJSON *req;
	const char *path; /* the object's, for a refused property name */
};

static bool is_required(const cJSON *req, const char *name)
{
	for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
		if (cJSON_IsString(r) && !strcmp(r->valuestring, name))
			return true;
	return false;
}

/* R repeats a name listed before it in REQ. */
static bool is_dup_required(const cJSON *req, const cJSON *r)
{
	for (const cJSON *x = req->child; x != r; x = x->next)
		if (cJSON_IsString(x) && !strcmp(x->valuestring, r->valuestring))
			return true;
	return false;
}

static bool in_props(const cJSON *props, const char *name)
{
	return props && cJSON_GetObjectItemCaseSensitive(props, name);
}

static int add_member(struct gsc *c, struct obj *o, const char *name,
		      const cJSON *schema, const char *path, bool required)
{
	struct member *m = &o->m[o->n];
	int rc;

	m->name = name;
	m->required = required;
	if (schema)
		rc = item_rule(c, schema, path, m->rule);
	else if (o->add[0])
		rc = (strcpy(m->rule, o->add), 0);
	else
		rc = GS_NOTHING;
	if (rc == GS_NOTHING && !required)
		return 0; /* it can never be there: left out */
	if (!rc)
		o->n++;
	return rc;
}

static int object_parts(struct gsc *c, const cJSON *s, const char *path,
			struct obj *o)
{
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s,
							   "additionalProperties");
	char p[256];
	uint32_t cap = 0;
	int rc = 0;

	o->path = path;
	o->props = cJSON_GetObjectItemCaseSensitive(s, "properties");
	o->req = cJSON_GetObjectItemCaseSensitive(s, "required");
	if ((o->props && !cJSON_IsObject(o->props)) ||
	    (o->req && !cJSON_IsArray(o->req)))
		return gs_fail(c, -O1_E_FORMAT, path,
			       "'properties' must be an object and "
			       "'required' a list");
	strcpy(o->add, "json-value");
	if (ap) {
		rc = item_rule(c, ap, sub(p, sizeof(p), path,
					  "additionalProperties"),
			       o->add);
		rc = rc == GS_NOTHING ? 0 : rc;
	}
	cap = (uint32_t)(cJSON_GetArraySize(o->props) +
			 cJSON_GetArraySize(o->req)) + 1;
	o->m = calloc(cap, sizeof(*o->m));
	if (!o->m)
		return -ENOMEM;
	for (const cJSON *x = o->props ? o->props->child : NULL; x && !rc;
	     x = x->next) {
		char q[256];

		sub(p, sizeof(p), sub(q, sizeof(q), path, "properties"),
		    x->string);
		rc = add_member(c, o, x->string, x, p,
				is_required(o->req, x->string));
	}
	for (const cJSON *r = o->req ? o->req->child : NULL; r && !rc;
	     r = r->next) {
		if (!cJSON_IsString(r))
			return gs_fail(c, -O1_E_FORMAT, path,
				       "'required' must list strings");
		if (!in_props(o->props, r->valuestring) &&
		    !is_dup_required(o->req, r))
			rc = add_member(c, o, r->valuestring, NULL, path, true);
	}
	return rc;
}

/* One known member: "key" : value. */
static int member_text(struct gsc *c, const struct obj *o,
		       const struct member *m, struct gbuf *e)
{
	struct gbuf key = {0};
	int rc = gs_json_string(&key, m->name);

	if (rc == -O1_E_FORMAT)
		rc = gs_fail(c, rc, o->path, "a property name is not UTF-8");

	if (!rc && !key.oom) {
		gb_lit(e, key.p, key.n);
		ws(c, e);
		gb_put(e, "\":\"");
		ws(c, e);
		gb_put(e, m->rule);
	}
	rc = rc ?: key.oom ? -ENOMEM : 0;
	free(key.p);
	return rc;
}

/* A trie of the declared names, over code points, for the keys an
 * additional member may not use. */
struct ktrie {
	uint32_t cp, child, next;
	bool end;
};

static int trie_add(struct ktrie **t, uint32_t *n, uint32_t *cap,
		    const char *name)
{
	uint32_t node = 0, cp;
	size_t len = strlen(name);

	for (size_t i = 0; i < len;) {
		int k = o1_utf8_decode(name + i, len - i, &cp);
		uint32_t x;

		if (!k)
			return -O1_E_FORMAT;
		i += (size_t)k;
		for (x = (*t)[node].child; x && (*t)[x].cp != cp;
		     x = (*t)[x].next)
			;
		if (!x) {
			if (*n == *cap) {
				struct ktrie *g = realloc(*t, *cap * 2 *
								      sizeof(**t));

				if (!g)
					return -ENOMEM;
				*t = g;
				*cap *= 2;
			}
			x = (*n)++;
			(*t)[x] = (struct ktrie){cp, 0, (*t)[node].child, false};
			(*t)[node].child = x;
		}
		node = x;
	}
	(*t)[node].end = true;
	return 0;
}

static int cmp_cp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The code points other than the N in CPS (sorted), surrogates out, as
 * ranges into R (room for N + 2). */
static uint32_t others(const uint32_t *cps, uint32_t n, struct gcp_range *r)
{
	uint32_t nr = 0, next = 0;

	for (uint32_t i = 0; i <= n; i++) {
		uint32_t end = i < n ? cps[i] : GR_MAX_CP + 1;

		if (end > next && !(next >= 0xd800 && end <= 0xe000))
			r[nr++] = (struct gcp_range){next, end - 1};
		next = end + 1;
	}
	/* the surrogates fall inside one range at most: split it */
	for (uint32_t i = 0; i < nr; i++) {
		if (r[i].lo > 0xdfff || r[i].hi < 0xd800)
			continue;
		if (r[i].lo >= 0xd800)
			r[i].lo = 0xe000;
		else if (r[i].hi <= 0xdfff)
			r[i].hi = 0xd7ff;
		else {
			memmove(r + i + 2, r + i + 1, (nr - i - 1) * sizeof(*r));
			r[i + 1] = (struct gcp_range){0xe000, r[i].hi};
			r[i].hi = 0xd7ff;
			nr++;
		}
		break;
	}
	return nr;
}

/* Rule k<set>-<node>: the rest of a key after the trie path to NODE,
 * closing quote included, that is no declared name. */
static int key_rule(struct gsc *c, const struct ktrie *t, uint32_t set,
		    uint32_t node)
{
	uint32_t n = 0, *cps, nr;
	struct gcp_range *r;
	bool first = true;

	for (uint32_t x = t[node].child; x; x = t[x].next)
		n++;
	cps = malloc((n + 1) * sizeof(*cps));
	r = malloc((n + 3) * sizeof(*r));
	if (!cps || !r) {
		free(cps);
		free(r);
		return -ENOMEM;
	}
	gb_printf(&c->rules, "k%u-%u ::= ", set, node);
	if (!t[node].end) {
		gb_put(&c->rules, "\"\\\"\"");
		first = false;
	}
	n = 0;
	for (uint32_t x = t[node].child; x; x = t[x].next) {
		struct gcp_range one = {t[x].cp, t[x].cp};

		gb_put(&c->rules, first ? "" : " | ");
		gb_cpset(&c->rules, &one, 1);
		gb_printf(&c->rules, " k%u-%u", set, x);
		first = false;
		cps[n++] = t[x].cp;
	}
	qsort(cps, n, sizeof(*cps), cmp_cp);
	nr = others(cps, n, r);
	gb_put(&c->rules, first ? "" : " | ");
	gb_cpset(&c->rules, r, nr);
	gb_put(&c->rules, " " GS_CCHAR "* \"\\\"\"\n");
	free(cps);
	free(r);
	return 0;
}

/* The key of an additional member: a string (canonical escapes when
 * names must be avoided) that no declared property has. */
static int extra_key(struct gsc *c, const struct obj *o, struct gbuf *e)
{
	uint32_t n = 1, cap = 16, set = c->n_sets++;
	struct ktrie *t;
	int rc;

	if (!o->props || !o->props->child) {
		gb_put(e, "json-string");
		return 0;
	}
	t = calloc(cap, sizeof(*t));
	rc = t ? 0 : -ENOMEM;
	for (const cJSON *x = o->props->child; x && !rc; x = x->next)
		rc = trie_add(&t, &n, &cap, x->string);
	if (rc == -O1_E_FORMAT)
		rc = gs_fail(c, rc, o->path, "a property name is not UTF-8");
	for (uint32_t node = 0; node < n && !rc; node++)
		rc = key_rule(c, t, set, node);
	if (!rc)
		gb_printf(e, "\"\\\"\" k%u-0", set);
	free(t);
	return rc;
}

static int extra_member(struct gsc *c, const struct obj *o, struct gbuf *e)
{
	int rc = extra_key(c, o, e);

	ws(c, e);
	gb_put(e, "\":\"");
	ws(c, e);
	gb_put(e, o->add);
	return rc;
}

/* ( , extra )* when extra members are allowed. */
static int extra_rest(struct gsc *c, const struct obj *o, struct gbuf *e)
{
	int rc = 0;

	if (!o->add[0])
		return 0;
	gb_put(e, " (");
	comma(c, e);
	rc = extra_member(c, o, e);
	gb_put(e, ")*");
	return rc;
}

/* Members when some are required: optional ones before the first
 * required carry their comma after them, the rest before them. */
static int members_required(struct gsc *c, const struct obj *o,
			    struct gbuf *e)
{
	uint32_t first = 0;
	int rc = 0;

	while (!o->m[first].required)
		first++;
	for (uint32_t i = 0; i < first && !rc; i++) {
		gb_put(e, "(");
		rc = member_text(c, o, &o->m[i], e);
		comma(c, e);
		gb_put(e, ")? ");
	}
	rc = rc ?: member_text(c, o, &o->m[first], e);
	for (uint32_t i = first + 1; i < o->n && !rc; i++) {
		gb_put(e, o->m[i].required ? " " : " (");
		comma(c, e);
		rc = member_text(c, o, &o->m[i], e);
		gb_put(e, o->m[i].required ? "" : ")?");
	}
	return rc ?: extra_rest(c, o, e);
}

/* Members when none is required: ( first-present member, then the later
 * ones each optional, then extras | only extras )?. The "later ones"
 * chains are rules t<set>-<j>, shared by the alternatives. */
static int members_optional(struct gsc *c, const struct obj *o,
			    struct gbuf *e)
{
	uint32_t set = c->n_sets++;
	int rc = 0;

	for (uint32_t j = o->n; j-- > 1 && !rc;) {
		gb_printf(&c->rules, "t%u-%u ::= (", set, j);
		comma(c, &c->rules);
		rc = member_text(c, o, &o->m[j], &c->rules);
		if (j + 1 < o->n)
			gb_printf(&c->rules, ")? t%u-%u\n", set, j + 1);
		else
			gb_put(&c->rules, ")?\n");
	}
	gb_put(e, "(");
	for (uint32_t i = 0; i < o->n && !rc; i++) {
		gb_put(e, i ? " | " : "");
		rc = member_text(c, o, &o->m[i], e);
		if (i + 1 < o->n)
			gb_printf(e, " t%u-%u", set, i + 1);
		rc = rc ?: extra_rest(c, o, e);
	}
	if (!rc && o->add[0]) {
		gb_put(e, o->n ? " | " : "");
		rc = extra_member(c, o, e);
		rc = rc ?: extra_rest(c, o, e);
	}
	gb_put(e, ")?");
	return rc;
}

static int gen_object(struct gsc *c, const cJSON *s, const char *path,
		      struct gbuf *e)
{
	struct obj o = {0};
	bool required = false;
	int rc = object_parts(c, s, path, &o);

	for (uint32_t i = 0; i < o.n; i++)
		required |= o.m[i].required;
	if (!rc) {
		gb_put(e, "(\"{\"");
		ws(c, e);
		if (required)
			rc = members_required(c, &o, e);
		else if (o.n || o.add[0])
			rc = members_optional(c, &o, e);
		ws(c, e);
		gb_put(e, "\"}\")");
	}
	free(o.m);
	return rc;
}

static int gen_type(struct gsc *c, const cJSON *s, const char *path,
		    unsigned type, struct gbuf *e)
{
	switch (type) {
	case T_NULL:
		gb_put(e, "\"null\"");
		return 0;
	case T_BOOL:
		gb_put(e, "(\"true\" | \"false\")");
		return 0;
	case T_INT:
		return gen_integer(c, s, path, e);
	case T_NUM:
		return gen_number(c, s, path, e);
	case T_STR:
		return gen_string(c, s, path, e);
	case T_ARR:
		return gen_array(c, s, path, e);
	default:
		return gen_object(c, s, path, e);
	}
}

static int gen_types(struct gsc *c, const cJSON *s, const char *path,
		     struct gbuf *e)
{
	unsigned types;
	bool first = true;
	int rc = types_of(c, s, path, &types);

	gb_put(e, "(");
	for (unsigned bit = 1; bit < T_ALL && !rc; bit <<= 1) {
		struct gbuf t = {0};

		if (!(types & bit) || (bit == T_INT && (types & T_NUM)))
			continue;
		rc = gen_type(c, s, path, bit, &t);
		if (!rc) {
			gb_put(e, first ? "" : " | ");
			gb_putn(e, t.p ? t.p : "", t.n);
			first = false;
		}
		rc = rc == GS_NOTHING ? 0 : rc;
		rc = rc ?: t.oom ? -ENOMEM : 0;
		free(t.p);
	}
	gb_put(e, ")");
	return rc ? rc : first ? GS_NOTHING : 0;
}

/* S without KEY, as an owned copy. */
static cJSON *without(struct gsc *c, const cJSON *s, const char *key)
{
	cJSON *copy = gs_own(c, cJSON_Duplicate(s, 1));

	if (copy)
		cJSON_DeleteItemFromObjectCaseSensitive(copy, key);
	return copy;
}

static int gen_alternatives(struct gsc *c, const cJSON *s, const char *path,
			    const char *key, struct gbuf *e)
{
	static const char *const skip[] = {"anyOf", "oneOf", NULL};
	const cJSON *alts = cJSON_GetObjectItemCaseSensitive(s, key);
	const cJSON *rest = NULL;
	bool first = true;
	char p[256];
	int rc = 0, i = 0;

	if (!cJSON_IsArray(alts) || !alts->child)
		return gs_fail(c, -O1_E_FORMAT, path,
			       "'%s' must be a non-empty list", key);
	if (has_validation(s, skip) && !(rest = without(c, s, key)))
		return -ENOMEM;
	gb_put(e, "(");
	for (const cJSON *a = alts->child; a && !rc; a = a->next, i++) {
		cJSON *m = NULL;
		uint32_t id;

		sub_index(p, sizeof(p), path, key, i);
		if (rest)
			rc = gs_merge(c, rest, a, p, &m);
		rc = rc ?: sub_rule(c, m ? m : a, p, &id);
		if (!rc) {
			gb_printf(e, "%ss%u", first ? "" : " | ", id);
			first = false;
		}
		rc = rc == GS_NOTHING ? 0 : rc;
	}
	gb_put(e, ")");
	return rc ? rc : first ? GS_NOTHING : 0;
}

static int gen_ref(struct gsc *c, const cJSON *s, const char *path,
		   struct gbuf *e)
{
	static const char *const skip[] = {"$ref", NULL};
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
	const cJSON *target;
	cJSON *m, *rest;
	uint32_t id;
	int rc;

	if (!cJSON_IsString(ref))
		return gs_fail(c, -O1_E_FORMAT, path, "'$ref' must be a string");
	rc = gs_resolve(c, ref->valuestring, path, &target);
	if (rc)
		return rc;
	if (!has_validation(s, skip)) {
		rc = sub_rule(c, target, ref->valuestring, &id);
		if (!rc)
			gb_printf(e, "s%u", id);
		return rc;
	}
	rest = without(c, s, "$ref");
	if (!rest)
		return -ENOMEM;
	rc = gs_merge(c, rest, target, path, &m);
	return rc ?: gen(c, m, path, e);
}

static int gen_all(struct gsc *c, const cJSON *s, const char *path,
		   struct gbuf *e)
{
	const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
	cJSON *m = without(c, s, "allOf");
	char p[256];
	int rc = m ? 0 : -ENOMEM, i = 0;

	if (!cJSON_IsArray(all) || !all->child)
		return gs_fail(c, -O1_E_FORMAT, path,
			       "'allOf' must be a non-empty list");
	for (const cJSON *x = all->child; x && !rc; x = x->next, i++)
		rc = gs_merge(c, m, x, sub_index(p, sizeof(p), path, "allOf", i),
			      &m);
	return rc ?: gen(c, m, path, e);
}

static int gen_node(struct gsc *c, const cJSON *s, const char *path,
		    struct gbuf *e)
{
	bool any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
	bool one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
	unsigned types;
	int rc;

	if (cJSON_GetObjectItemCaseSensitive(s, "allOf"))
		return gen_all(c, s, path, e);
	if (cJSON_GetObjectItemCaseSensitive(s, "$ref"))
		return gen_ref(c, s, path, e);
	if (any && one)
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "'anyOf' beside 'oneOf' is not supported");
	if (any || one)
		return gen_alternatives(c, s, path, any ? "anyOf" : "oneOf",
					e);
	if (cJSON_GetObjectItemCaseSensitive(s, "enum") ||
	    cJSON_GetObjectItemCaseSensitive(s, "const")) {
		rc = types_of(c, s, path, &types);
		return rc ?: gen_enum(c, s, path, types, e);
	}
	return gen_types(c, s, path, e);
}

static int gen(struct gsc *c, const cJSON *s, const char *path,
	       struct gbuf *e)
{
	int rc;

	if (cJSON_IsTrue(s)) {
		gb_put(e, "json-value");
		return 0;
	}
	if (cJSON_IsFalse(s))
		return GS_NOTHING;
	if (!cJSON_IsObject(s))
		return gs_fail(c, -O1_E_FORMAT, path,
			       "a schema must be an object or a boolean");
	rc = check_keywords(c, s, path);
	if (rc)
		return rc;
	if (++c->depth > 64) {
		c->depth--;
		return gs_fail(c, -O1_E_BOUNDS, path,
			       "schemas nested or merged too deeply");
	}
	rc = gen_node(c, s, path, e);
	c->depth--;
	return rc;
}

static int map_add(struct gsc *c, const cJSON *s, const char *path,
		   uint32_t *id)
{
	if (c->n_map == c->cap_map) {
		uint32_t cap = c->cap_map ? c->cap_map * 2 : 64;
		struct gs_rule *m = realloc(c->map, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		c->map = m;
		c->cap_map = cap;
	}
	if (c->n_map >= GR_MAX_RULES / 2)
		return gs_fail(c, -O1_E_BOUNDS, path, "too many schemas");
	c->map[c->n_map] = (struct gs_rule){s, strdup(path), false};
	if (!c->map[c->n_map].path)
		return -ENOMEM;
	*id = c->n_map++;
	return 0;
}

static int rule_of(struct gsc *c, const cJSON *s, const char *path,
		   uint32_t *id)
{
	struct gbuf body = {0};
	int rc;

	for (uint32_t i = 0; i < c->n_map; i++) {
		if (c->map[i].node == s) {
			*id = i;
			return c->map[i].nothing ? GS_NOTHING : 0;
		}
	}
	rc = map_add(c, s, path, id);
	rc = rc ?: gen(c, s, path, &body);
	if (rc == GS_NOTHING) {
		/* a rule that never finishes, for calls made before this
		 * was known; the compiler reports it if one is left */
		c->map[*id].nothing = true;
		gb_printf(&c->rules, "s%u ::= \"\\\"\" s%u\n", *id, *id);
	} else if (!rc) {
		gb_printf(&c->rules, "s%u ::= ", *id);
		gb_putn(&c->rules, body.p ? body.p : "\"\"", body.p ? body.n : 2);
		gb_put(&c->rules, "\n");
	}
	rc = rc ?: body.oom ? -ENOMEM : 0;
	free(body.p);
	return rc;
}

static void common_rules(struct gsc *c, struct gbuf *b)
{
	const char *w = c->o.ws_max ? " ws " : " ";

	gb_printf(b,
		  "json-value ::= json-object | json-array | json-string | "
		  "json-number | \"true\" | \"false\" | \"null\"\n"
		  "json-object ::= \"{\"%s( json-string%s\":\"%sjson-value "
		  "(%s\",\"%sjson-string%s\":\"%sjson-value )* )?%s\"}\"\n",
		  w, w, w, w, w, w, w, w);
	gb_printf(b,
		  "json-array ::= \"[\"%s( json-value (%s\",\"%sjson-value )* "
		  ")?%s\"]\"\n",
		  w, w, w, w);
	gb_put(b, "json-string ::= \"\\\"\" json-char* \"\\\"\"\n"
		  "json-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" "
		  "( [\"\\\\/bfnrt] | \"u\" json-hex4 )\n"
		  "json-hex4 ::= [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] "
		  "[0-9a-fA-F]{2}\n"
		  "json-cchar ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" "
		  "[\"\\\\bfnrt] | \"\\\\u00\" ( \"0\" [0-7] | \"0b\" | "
		  "\"0e\" | \"0f\" | \"1\" [0-9a-f] )\n");
	/* digits capped (grammar_schema_int.h); leading zeros only in
	 * the fraction and the exponent, as JSON has it */
	gb_printf(b,
		  "json-number ::= json-integer ( \".\" [0-9]{1,%d} )? "
		  "( [eE] [-+]? [0-9]{1,%d} )?\n"
		  "json-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,%d} )\n",
		  GS_FRAC_DIGITS, GS_EXP_DIGITS, GS_INT_DIGITS - 1);
	if (c->o.ws_max)
		gb_printf(b, "ws ::= [ \\t\\n\\r]{0,%u}\n", c->o.ws_max);
}

static void set_opts(struct gsc *c, const struct o1_grammar_schema_opts *o)
{
	memset(&c->o, 0, sizeof(c->o));
	if (o)
		memcpy(&c->o, o, o->sz < sizeof(c->o) ? o->sz : sizeof(c->o));
	c->o.sz = sizeof(c->o);
	if (c->o.ws_max > 64)
		c->o.ws_max = 64;
}

static void gsc_fini(struct gsc *c)
{
	for (uint32_t i = 0; i < c->n_map; i++)
		free(c->map[i].path);
	for (uint32_t i = 0; i < c->n_owned; i++)
		cJSON_Delete(c->owned[i]);
	free(c->map);
	free(c->owned);
	free(c->rules.p);
	cJSON_Delete((cJSON *)c->doc);
}

/* Text for SCHEMA into *TEXT; C is kept for the caller's error messages
 * (gsc_fini after). */
static int schema_text(struct gsc *c, const char *schema, size_t len,
		       char **text, size_t *text_len)
{
	const cJSON *id;
	struct gbuf out = {0};
	uint32_t root;
	int rc;

	c->doc = cJSON_ParseWithLength(schema, len);
	if (!c->doc)
		return gr_fail(c->err, -O1_E_FORMAT, 0, 0,
			       "the schema is not JSON text");
	id = cJSON_IsObject(c->doc)
		     ? cJSON_GetObjectItemCaseSensitive(c->doc, "$id")
		     : NULL;
	c->base = cJSON_IsString(id) ? id->valuestring : NULL;
	rc = rule_of(c, c->doc, "#", &root);
	if (rc == GS_NOTHING)
		rc = gr_fail(c->err, -O1_E_FORMAT, 0, 0,
			     "the schema matches nothing");
	if (rc == -ENOMEM)
		gr_fail(c->err, rc, 0, 0, "out of memory");
	if (rc)
		return rc;
	gb_printf(&out, "root ::= s%u\n", root);
	gb_putn(&out, c->rules.p ? c->rules.p : "", c->rules.n);
	common_rules(c, &out);
	if (out.oom || c->rules.oom) {
		free(out.p);
		return gr_fail(c->err, -ENOMEM, 0, 0, "out of memory");
	}
	*text = out.p;
	*text_len = out.n;
	return 0;
}

int o1_grammar_from_schema(const char *schema, size_t len,
			   const struct o1_grammar_schema_opts *opts,
			   struct o1_grammar_error *err, char **text,
			   size_t *text_len)
{
	struct gsc c = {.err = err};
	int rc;

	if (err)
		memset(err, 0, sizeof(*err));
	*text = NULL;
	set_opts(&c, opts);
	rc = schema_text(&c, schema, len, text, text_len);
	gsc_fini(&c);
	return rc;
}

/* A grammar error that names rule s<id> or k/t rules, told in terms of
 * the schema. */
static void translate(struct gsc *c, struct o1_grammar_error *err)
{
	unsigned id = 0;
	const char *p = err ? strstr(err->msg, "rule '") : NULL;
	char what[160];

	/* root is "root ::= s0": the document itself */
	if (!p || (strncmp(p, "rule 'root'", 11) &&
		   (sscanf(p, "rule 's%u'", &id) != 1 || id >= c->n_map)))
		return;
	snprintf(what, sizeof(what), "%s",
		 strstr(err->msg, "too large")	      ? "makes the grammar too large"
		 : strstr(err->msg, "left recursive") ? "refers to itself without "
							"consuming input"
						      : "can never be finished "
							"(it recurses without a "
							"base case, or matches "
							"nothing)");
	snprintf(err->msg, sizeof(err->msg), "the schema at %s %s",
		 c->map[id].path, what);
	err->line = err->col = 0;
}

int o1_grammar_compile_schema(const char *schema, size_t len,
			      const struct o1_grammar_schema_opts *opts,
			      struct o1_grammar_error *err,
			      struct o1_grammar **out)
{
	struct gsc c = {.err = err};
	char *text = NULL;
	size_t n;
	int rc;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	set_opts(&c, opts);
	rc = schema_text(&c, schema, len, &text, &n);
	if (!rc) {
		rc = o1_grammar_compile(text, n, err, out);
		if (rc)
			translate(&c, err);
	}
	free(text);
	gsc_fini(&c);
	return rc;
}

int o1_grammar_json_object(const struct o1_grammar_schema_opts *opts,
			   char **text, size_t *text_len)
{
	struct gsc c = {0};
	struct gbuf out = {0};

	set_opts(&c, opts);
	gb_put(&out, "root ::= json-object\n");
	common_rules(&c, &out);
	if (out.oom) {
		free(out.p);
		return -ENOMEM;
	}
	*text = out.p;
	*text_len = out.n;
	return 0;
}

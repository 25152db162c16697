/* $ref resolution and allOf merging for the JSON Schema compiler.
 *
 * A $ref is a JSON pointer within the document ("#", "#/$defs/x", with
 * ~0 ~1 and %xx escapes), optionally after the root's $id.
 *
 * Merging makes one schema valid exactly where both are, keyword by
 * keyword: type sets intersect, required lists unite, lower bounds take
 * the larger and upper bounds the smaller, enum/const values intersect,
 * a property both sides name becomes {"allOf": [both]} (expanded when its
 * own rule is written, so merging never recurses through a $ref), and a
 * property only one side names also meets the other side's
 * additionalProperties (prefixItems and items likewise). Two different
 * patterns or formats, two prefixItems lists or two anyOf/oneOf are
 * refused: their conjunction is not a simple merge.
 */
#include "grammar/grammar_schema_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* One pointer token [S, END) unescaped into OUT (CAP bytes). */
static bool token(const char *s, const char *end, char *out, size_t cap)
{
	size_t n = 0;

	for (; s < end && n + 1 < cap; s++) {
		char ch = *s;

		if (ch == '%' && end - s >= 3 && hexval(s[1]) >= 0 &&
		    hexval(s[2]) >= 0) {
			ch = (char)(hexval(s[1]) * 16 + hexval(s[2]));
			s += 2;
		}
		if (ch == '~' && s + 1 < end && (s[1] == '0' || s[1] == '1')) {
			ch = s[1] == '0' ? '~' : '/';
			s++;
		}
		out[n++] = ch;
	}
	out[n] = 0;
	return s == end;
}

static const cJSON *step(const cJSON *node, const char *tok)
{
	char *end;
	long i;

	if (cJSON_IsObject(node))
		return cJSON_GetObjectItemCaseSensitive(node, tok);
	if (!cJSON_IsArray(node) || !tok[0])
		return NULL;
	i = strtol(tok, &end, 10);
	return *end || i < 0 ? NULL : cJSON_GetArrayItem(node, (int)i);
}

int gs_resolve(struct gsc *c, const char *ref, const char *path,
	       const cJSON **out)
{
	const cJSON *node = c->doc;
	const char *p = ref;
	char tok[256];

	if (c->base && !strncmp(p, c->base, strlen(c->base)))
		p += strlen(c->base);
	if (p[0] != '#')
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "$ref '%.80s': only references within the "
			       "schema are supported",
			       ref);
	if (p[1] && p[1] != '/')
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "$ref '%.80s': anchors are not supported", ref);
	for (p++; *p && node;) {
		const char *end = strchr(p + 1, '/');

		end = end ? end : p + strlen(p);
		if (!token(p + 1, end, tok, sizeof(tok)))
			return gs_fail(c, -O1_E_FORMAT, path,
				       "$ref '%.80s': a name too long", ref);
		node = step(node, tok);
		p = end;
	}
	if (!node)
		return gs_fail(c, -O1_E_FORMAT, path,
			       "$ref '%.80s' points nowhere", ref);
	*out = node;
	return 0;
}

/* {"allOf": [X, Y]}, simplified when either is a boolean. */
static cJSON *both(const cJSON *x, const cJSON *y)
{
	cJSON *all, *o;

	if (cJSON_IsFalse(x) || cJSON_IsTrue(y))
		return cJSON_Duplicate(x, 1);
	if (cJSON_IsFalse(y) || cJSON_IsTrue(x))
		return cJSON_Duplicate(y, 1);
	o = cJSON_CreateObject();
	all = cJSON_AddArrayToObject(o, "allOf");
	if (!all) {
		cJSON_Delete(o);
		return NULL;
	}
	cJSON_AddItemToArray(all, cJSON_Duplicate(x, 1));
	cJSON_AddItemToArray(all, cJSON_Duplicate(y, 1));
	return o;
}

/* V as R's member KEY (replacing one there); V deleted where cJSON
 * refuses it. */
static int put(cJSON *r, const char *key, cJSON *v)
{
	bool ok;

	if (!v)
		return -ENOMEM;
	ok = cJSON_GetObjectItemCaseSensitive(r, key)
		 ? cJSON_ReplaceItemInObjectCaseSensitive(r, key, v)
		 : cJSON_AddItemToObject(r, key, v);
	if (ok)
		return 0;
	cJSON_Delete(v);
	return -ENOMEM;
}

static bool is(const char *key, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(key, *set))
			return true;
	return false;
}

static const char *const lower[] = {"minItems", "minLength", "minimum",
				    "exclusiveMinimum", NULL};
static const char *const upper[] = {"maxItems", "maxLength", "maximum",
				    "exclusiveMaximum", NULL};
static const char *const skipped[] = {
	"$schema", "$comment", "title", "description", "default",
	"examples", "deprecated", "readOnly", "writeOnly", "contentEncoding",
	"contentMediaType", "contentSchema", "$defs", "definitions", "$id",
	"$ref", "allOf", "properties", "additionalProperties", "prefixItems",
	"items", NULL};

static int merge_types(cJSON *r, const cJSON *a, const cJSON *b)
{
	cJSON *out = cJSON_CreateArray();

	if (!out)
		return -ENOMEM;
	for (const cJSON *x = cJSON_IsArray(a) ? a->child : a; x;
	     x = cJSON_IsArray(a) ? x->next : NULL) {
		for (const cJSON *y = cJSON_IsArray(b) ? b->child : b; y;
		     y = cJSON_IsArray(b) ? y->next : NULL) {
			const char *tx = cJSON_GetStringValue(x);
			const char *ty = cJSON_GetStringValue(y);
			const char *t = NULL;

			if (!tx || !ty)
				continue;
			if (!strcmp(tx, ty))
				t = tx;
			else if (!strcmp(tx, "integer") && !strcmp(ty, "number"))
				t = tx;
			else if (!strcmp(ty, "integer") && !strcmp(tx, "number"))
				t = ty;
			if (t)
				cJSON_AddItemToArray(out, cJSON_CreateString(t));
		}
	}
	return put(r, "type", out);
}

/* The canonical texts of an enum or const, as a NULL-ended list. */
static int values(const cJSON *s, char ***out)
{
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
	const cJSON *co = cJSON_GetObjectItemCaseSensitive(s, "const");
	int n = en ? cJSON_GetArraySize(en) : 1, i = 0, rc = 0;
	char **v = calloc((size_t)n + 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (const cJSON *x = en ? en->child : co; x && !rc;
	     x = en ? x->next : NULL) {
		struct gbuf b = {0};

		rc = gs_json_write(&b, x);
		rc = rc ?: b.oom ? -ENOMEM : 0;
		v[i++] = b.p;
	}
	*out = v;
	return rc;
}

static void free_values(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* enum/const of R and B intersected into R's enum (by canonical text). */
static int merge_values(cJSON *r, const cJSON *b)
{
	char **vr = NULL, **vb = NULL;
	cJSON *out = cJSON_CreateArray(), *src;
	int rc = out ? 0 : -ENOMEM, i = 0;

	rc = rc ?: values(r, &vr);
	rc = rc ?: values(b, &vb);
	src = cJSON_GetObjectItemCaseSensitive(r, "enum");
	for (const cJSON *x = src ? src->child
				  : cJSON_GetObjectItemCaseSensitive(r, "const");
	     x && !rc; x = src ? x->next : NULL, i++) {
		bool hit = false;

		for (char **q = vb; *q && !hit; q++)
			hit = vr[i] && !strcmp(vr[i], *q);
		if (hit)
			cJSON_AddItemToArray(out, cJSON_Duplicate(x, 1));
	}
	free_values(vr);
	free_values(vb);
	if (rc) {
		cJSON_Delete(out);
		return rc;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(r, "const");
	return put(r, "enum", out);
}

/* Keywords other than the structural ones: R (a copy of A) takes B's. */
static int merge_simple(struct gsc *c, cJSON *r, const cJSON *b,
			const char *path)
{
	int rc = 0;

	for (const cJSON *k = b->child; k && !rc; k = k->next) {
		const cJSON *mine = cJSON_GetObjectItemCaseSensitive(r, k->string);

		if (is(k->string, skipped))
			continue;
		if (!strcmp(k->string, "enum") || !strcmp(k->string, "const")) {
			if (cJSON_GetObjectItemCaseSensitive(r, "enum") ||
			    cJSON_GetObjectItemCaseSensitive(r, "const")) {
				rc = merge_values(r, b);
				continue;
			}
		}
		if (!mine) {
			rc = put(r, k->string, cJSON_Duplicate(k, 1));
		} else if (!strcmp(k->string, "type")) {
			rc = merge_types(r, mine, k);
		} else if (!strcmp(k->string, "required")) {
			for (const cJSON *x = k->child; x; x = x->next)
				cJSON_AddItemToArray((cJSON *)mine,
						     cJSON_Duplicate(x, 1));
		} else if (is(k->string, lower) || is(k->string, upper)) {
			bool lo = is(k->string, lower);

			if (!cJSON_IsNumber(k) || !cJSON_IsNumber(mine))
				return gs_fail(c, -O1_E_FORMAT, path,
					       "'%s' must be a number",
					       k->string);
			if (lo ? k->valuedouble > mine->valuedouble
			       : k->valuedouble < mine->valuedouble)
				rc = put(r, k->string, cJSON_Duplicate(k, 1));
		} else if (!strcmp(k->string, "uniqueItems")) {
			continue;
		} else if (cJSON_Compare(mine, k, 1) &&
			   (!strcmp(k->string, "pattern") ||
			    !strcmp(k->string, "format"))) {
			continue;
		} else {
			return gs_fail(c, -O1_E_UNSUPPORTED, path,
				       "allOf with two different '%s' is not "
				       "supported",
				       k->string);
		}
	}
	return rc;
}

/* properties/additionalProperties: each side's extra-member schema also
 * applies to the properties only the other side names (both sides'
 * "properties" objects: merge_objects checks). */
static int merge_props(cJSON *r, const cJSON *a, const cJSON *b)
{
	const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "properties");
	const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b, "properties");
	const cJSON *aa = cJSON_GetObjectItemCaseSensitive(
		a, "additionalProperties");
	const cJSON *ab = cJSON_GetObjectItemCaseSensitive(
		b, "additionalProperties");
	cJSON *props = cJSON_CreateObject();

	if (!props)
		return -ENOMEM;
	for (const cJSON *x = pa ? pa->child : NULL; x; x = x->next) {
		const cJSON *y = pb ? cJSON_GetObjectItemCaseSensitive(
					      pb, x->string)
				    : NULL;
		const cJSON *other = y ? y : ab;

		if (put(props, x->string,
			other ? both(x, other) : cJSON_Duplicate(x, 1))) {
			cJSON_Delete(props);
			return -ENOMEM;
		}
	}
	for (const cJSON *y = pb ? pb->child : NULL; y; y = y->next) {
		if (pa && cJSON_GetObjectItemCaseSensitive(pa, y->string))
			continue;
		if (put(props, y->string,
			aa ? both(y, aa) : cJSON_Duplicate(y, 1))) {
			cJSON_Delete(props);
			return -ENOMEM;
		}
	}
	if (put(r, "properties", props))
		return -ENOMEM;
	if (aa && ab)
		return put(r, "additionalProperties", both(aa, ab));
	if (ab)
		return put(r, "additionalProperties", cJSON_Duplicate(ab, 1));
	return 0;
}

static int merge_items(struct gsc *c, cJSON *r, const cJSON *a,
		       const cJSON *b, const char *path)
{
	const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "prefixItems");
	const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b, "prefixItems");
	const cJSON *ia = cJSON_GetObjectItemCaseSensitive(a, "items");
	const cJSON *ib = cJSON_GetObjectItemCaseSensitive(b, "items");
	const cJSON *pre = pa ? pa : pb, *other_items = pa ? ib : ia;
	cJSON *out;

	if (pa && pb)
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "allOf with two 'prefixItems' is not supported");
	if (pre && cJSON_IsArray(pre)) {
		out = cJSON_CreateArray();
		for (const cJSON *x = pre->child; out && x; x = x->next)
			cJSON_AddItemToArray(out, other_items
							  ? both(x, other_items)
							  : cJSON_Duplicate(x, 1));
		if (put(r, "prefixItems", out))
			return -ENOMEM;
	}
	if (ia && ib)
		return put(r, "items", both(ia, ib));
	if (ib)
		return put(r, "items", cJSON_Duplicate(ib, 1));
	return 0;
}

static int merge_objects(struct gsc *c, const cJSON *a, const cJSON *b,
			 const char *path, cJSON **out);

/* B's $ref and allOf first: they are merged in as schemas of their own. */
static int merge_parts(struct gsc *c, const cJSON *a, const cJSON *b,
		       const char *path, cJSON **out)
{
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(b, "$ref");
	const cJSON *all = cJSON_GetObjectItemCaseSensitive(b, "allOf");
	const cJSON *target;
	cJSON *rest;
	int rc;

	if (!ref && !all)
		return merge_objects(c, a, b, path, out);
	rest = gs_own(c, cJSON_Duplicate(b, 1));
	if (!rest)
		return -ENOMEM;
	cJSON_DeleteItemFromObjectCaseSensitive(rest, ref ? "$ref" : "allOf");
	rc = gs_merge(c, a, rest, path, out);
	if (ref && !rc) {
		if (!cJSON_IsString(ref))
			return gs_fail(c, -O1_E_FORMAT, path,
				       "'$ref' must be a string");
		rc = gs_resolve(c, ref->valuestring, path, &target);
		return rc ?: gs_merge(c, *out, target, path, out);
	}
	if (!cJSON_IsArray(all))
		return gs_fail(c, -O1_E_FORMAT, path, "'allOf' must be a list");
	for (const cJSON *x = all->child; x && !rc; x = x->next)
		rc = gs_merge(c, *out, x, path, out);
	return rc;
}

/* Whether S's "properties", if any, is an object (merge_props reads its
 * members by name). */
static bool props_object(const cJSON *s)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "properties");

	return !p || cJSON_IsObject(p);
}

static int merge_objects(struct gsc *c, const cJSON *a, const cJSON *b,
			 const char *path, cJSON **out)
{
	cJSON *r = gs_own(c, cJSON_Duplicate(a, 1));
	bool any = cJSON_GetObjectItemCaseSensitive(r, "anyOf") ||
		   cJSON_GetObjectItemCaseSensitive(r, "oneOf");
	int rc;

	if (!r)
		return -ENOMEM;
	if (any && (cJSON_GetObjectItemCaseSensitive(b, "anyOf") ||
		    cJSON_GetObjectItemCaseSensitive(b, "oneOf")))
		return gs_fail(c, -O1_E_UNSUPPORTED, path,
			       "allOf with two 'anyOf'/'oneOf' is not "
			       "supported");
	rc = merge_simple(c, r, b, path);
	if (!rc && (!props_object(a) || !props_object(b)))
		return gs_fail(c, -O1_E_FORMAT, path,
			       "'properties' must be an object");
	if (!rc && (cJSON_GetObjectItemCaseSensitive(a, "properties") ||
		    cJSON_GetObjectItemCaseSensitive(b, "properties") ||
		    cJSON_GetObjectItemCaseSensitive(b,
						     "additionalProperties")))
		rc = merge_props(r, a, b);
	if (!rc)
		rc = merge_items(c, r, a, b, path);
	*out = r;
	return rc;
}

int gs_merge(struct gsc *c, const cJSON *a, const cJSON *b,
	     const char *path, cJSON **out)
{
	int rc;

	if (cJSON_IsFalse(a) || cJSON_IsFalse(b) || cJSON_IsTrue(a) ||
	    cJSON_IsTrue(b)) {
		const cJSON *keep = cJSON_IsFalse(a) || cJSON_IsTrue(b) ? a : b;

		*out = gs_own(c, cJSON_Duplicate(keep, 1));
		return *out ? 0 : -ENOMEM;
	}
	if (!cJSON_IsObject(a) || !cJSON_IsObject(b))
		return gs_fail(c, -O1_E_FORMAT, path,
			       "a schema must be an object or a boolean");
	if (++c->depth > 64) {
		c->depth--;
		return gs_fail(c, -O1_E_BOUNDS, path,
			       "schemas nested or merged too deeply");
	}
	rc = merge_parts(c, a, b, path, out);
	c->depth--;
	return rc;
}

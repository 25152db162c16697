/* Tool calls as a grammar (see grammar_tools.h). The JSON formats build
 * one JSON Schema for "a call of one of the tools" (anyOf of objects
 * whose name is a const and whose arguments are the tool's parameters),
 * let the schema compiler write its grammar, and replace the compiler's
 * first line ("root ::= sN", always its form) with the format's frame
 * around sN. The XML format is written here directly. A marker
 * ([TOOL_CALLS], <tool_call>, </tool_call>) that the vocabulary holds as
 * a control token is named as that token (@"..."), never spelled out:
 * the model was trained to emit the one token, the text would cost a
 * dozen tokens off its training, and the reader takes either. Without
 * such a token the text is the only form (the model was trained on it). */
#include "grammar_tools.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "grammar/grammar_schema.h"

#define NAME_MAX_BYTES 256

static int fail(struct o1_grammar_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->line = err->col = 0;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

/* Tool I of the list: its name and parameters (NULL: any object). */
static int tool_at(const cJSON *t, int i, struct o1_grammar_error *err,
		   const char **name, const cJSON **params)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");

	if (!cJSON_IsObject(t) || !cJSON_IsObject(f))
		return fail(err, -O1_E_FORMAT,
			    "tools[%d]: not {\"type\": \"function\", "
			    "\"function\": {...}}",
			    i);
	if (type && !(cJSON_IsString(type) &&
		      !strcmp(type->valuestring, "function")))
		return fail(err, -O1_E_FORMAT,
			    "tools[%d].type: only \"function\" is supported", i);
	if (!cJSON_IsString(n) || !n->valuestring[0] ||
	    strlen(n->valuestring) > NAME_MAX_BYTES)
		return fail(err, -O1_E_FORMAT,
			    "tools[%d].function.name: a string of 1 to %d "
			    "bytes",
			    i, NAME_MAX_BYTES);
	*name = n->valuestring;
	*params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
	if (*params && !cJSON_IsObject(*params))
		return fail(err, -O1_E_FORMAT,
			    "tools[%d].function.parameters: not an object", i);
	return 0;
}

static int tools_list(const char *text, size_t len,
		      struct o1_grammar_error *err, cJSON **out)
{
	cJSON *doc = cJSON_ParseWithLength(text, len);
	int n;

	if (!doc)
		return fail(err, -O1_E_FORMAT, "the tools are not JSON text");
	n = cJSON_GetArraySize(doc);
	if (!cJSON_IsArray(doc) || n < 1 || n > O1_GRAMMAR_TOOLS_MAX) {
		cJSON_Delete(doc);
		return fail(err, -O1_E_FORMAT,
			    "the tools are not a list of 1 to %d tools",
			    O1_GRAMMAR_TOOLS_MAX);
	}
	*out = doc;
	return 0;
}

/* Rewrites local $refs under J ("#/x" as the tool wrote it) to point
 * into the combined schema, below BASE ("#/anyOf/3/properties/..."). */
static int rebase_refs(cJSON *j, const char *base)
{
	cJSON *c;

	cJSON_ArrayForEach(c, j)
	{
		if (c->string && !strcmp(c->string, "$ref") &&
		    cJSON_IsString(c) && c->valuestring[0] == '#') {
			size_t n = strlen(base) + strlen(c->valuestring);
			char *s = malloc(n + 1);

			if (!s)
				return -ENOMEM;
			snprintf(s, n + 1, "%s%s", base, c->valuestring + 1);
			if (!cJSON_SetValuestring(c, s)) {
				free(s);
				return -ENOMEM;
			}
			free(s);
		} else if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
			int rc = rebase_refs(c, base);

			if (rc)
				return rc;
		}
	}
	return 0;
}

/* {"type": "object", "properties": {"name": {"const": NAME}, KEY:
 * PARAMS}, "required": ["name", KEY], "additionalProperties": false} */
static cJSON *call_schema(const char *name, const cJSON *params,
			  const char *key, const char *base)
{
	cJSON *s = cJSON_CreateObject(), *props = cJSON_CreateObject();
	cJSON *nm = cJSON_CreateObject(), *req = cJSON_CreateArray();
	cJSON *p = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
	bool ok = s && props && nm && req && p;

	if (ok && !params)
		ok = cJSON_AddStringToObject(p, "type", "object") != NULL;
	if (ok) {
		/* annotations of a root only: the arguments are not one */
		cJSON_DeleteItemFromObjectCaseSensitive(p, "$schema");
		cJSON_DeleteItemFromObjectCaseSensitive(p, "$id");
		ok = !rebase_refs(p, base) &&
		     cJSON_AddStringToObject(nm, "const", name) &&
		     cJSON_AddItemToObject(props, "name", nm) &&
		     cJSON_AddItemToObject(props, key, p);
		if (ok)
			nm = p = NULL;
	}
	ok = ok && cJSON_AddStringToObject(s, "type", "object") &&
	     cJSON_AddItemToObject(s, "properties", props);
	if (ok)
		props = NULL;
	ok = ok && cJSON_AddItemToArray(req, cJSON_CreateString("name")) &&
	     cJSON_AddItemToArray(req, cJSON_CreateString(key)) &&
	     cJSON_AddItemToObject(s, "required", req);
	if (ok)
		req = NULL;
	ok = ok && cJSON_AddFalseToObject(s, "additionalProperties");
	cJSON_Delete(props);
	cJSON_Delete(nm);
	cJSON_Delete(req);
	cJSON_Delete(p);
	if (!ok) {
		cJSON_Delete(s);
		return NULL;
	}
	return s;
}

/* The combined schema: anyOf over the tools' calls (inside an array of
 * at least one for Mistral). */
static int calls_schema(enum o1_tool_format f, const cJSON *tools,
			struct o1_grammar_error *err, cJSON **out)
{
	bool list = f == O1_TOOL_MISTRAL;
	const char *key = f == O1_TOOL_LLAMA3_JSON ? "parameters" : "arguments";
	cJSON *any = cJSON_CreateArray(), *alt = cJSON_CreateObject();
	const cJSON *t;
	int i = 0, rc = 0;

	if (!any || !alt)
		rc = -ENOMEM;
	cJSON_ArrayForEach(t, tools)
	{
		const char *name;
		const cJSON *params;
		char base[96];
		cJSON *one;

		if (rc || (rc = tool_at(t, i, err, &name, &params)))
			break;
		snprintf(base, sizeof(base), "#%s/anyOf/%d/properties/%s",
			 list ? "/items" : "", i, key);
		one = call_schema(name, params, key, base);
		if (!one || !cJSON_AddItemToArray(any, one)) {
			cJSON_Delete(one);
			rc = -ENOMEM;
		}
		i++;
	}
	if (!rc && cJSON_AddItemToObject(alt, "anyOf", any))
		any = NULL;
	else if (!rc)
		rc = -ENOMEM;
	cJSON_Delete(any);
	if (!rc && list) {
		cJSON *arr = cJSON_CreateObject();

		if (!arr || !cJSON_AddStringToObject(arr, "type", "array") ||
		    !cJSON_AddNumberToObject(arr, "minItems", 1) ||
		    !cJSON_AddNumberToObject(arr, "maxItems", 1) ||
		    !cJSON_AddItemToObject(arr, "items", alt)) {
			cJSON_Delete(arr);
			rc = -ENOMEM;
		} else {
			alt = arr;
		}
	}
	if (rc) {
		cJSON_Delete(alt);
		return rc == -ENOMEM ? fail(err, rc, "out of memory") : rc;
	}
	*out = alt;
	return 0;
}

/* Marker TEXT (no quote or backslash in it): the control token of
 * that name where V has one, else the text. */
static void marker(FILE *o, const struct o1_grammar_vocab *v, const char *text)
{
	bool ctl = v && o1_grammar_vocab_control(v, text, strlen(text)) >= 0;

	fprintf(o, "%s\"%s\"", ctl ? "@" : "", text);
}

/* The frame of format F around the calls' rule CALLS. */
static void frame(FILE *o, enum o1_tool_format f,
		  const struct o1_grammar_vocab *v, const char *calls)
{
	switch (f) {
	case O1_TOOL_HERMES:
		fputs("root ::= ", o);
		marker(o, v, "<tool_call>");
		fprintf(o, " \"\\n\" %s \"\\n\" ", calls);
		marker(o, v, "</tool_call>");
		fputc('\n', o);
		break;
	case O1_TOOL_MISTRAL:
		fputs("root ::= ", o);
		marker(o, v, "[TOOL_CALLS]");
		fprintf(o, " %s\n", calls);
		break;
	default: /* LLAMA3_JSON */
		fprintf(o, "root ::= %s\n", calls);
		break;
	}
}

static int json_format(enum o1_tool_format f, const cJSON *tools,
		       const struct o1_grammar_vocab *v,
		       struct o1_grammar_error *err, FILE *o)
{
	cJSON *schema = NULL;
	char *doc = NULL, *text = NULL, *nl, calls[32];
	size_t n;
	unsigned id;
	int rc = calls_schema(f, tools, err, &schema);

	if (!rc && !(doc = cJSON_PrintUnformatted(schema)))
		rc = fail(err, -ENOMEM, "out of memory");
	if (!rc)
		rc = o1_grammar_from_schema(doc, strlen(doc), NULL, err, &text,
					    &n);
	if (!rc && (sscanf(text, "root ::= s%u\n", &id) != 1 ||
		    !(nl = strchr(text, '\n'))))
		rc = fail(err, -O1_E_FORMAT, "unexpected schema grammar");
	if (!rc) {
		snprintf(calls, sizeof(calls), "s%u", id);
		frame(o, f, v, calls);
		fputs(nl + 1, o);
	}
	free(text);
	free(doc);
	cJSON_Delete(schema);
	return rc;
}

/* A grammar literal of S: printable ASCII as is, the rest escaped. */
static void literal(FILE *o, const char *s)
{
	fputc('"', o);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(o, "\\x%02x", c);
		else
			fputc(c, o); /* UTF-8 bytes pass through */
	}
	fputc('"', o);
}

/* A parameter's value in the XML format: an enum's members (strings as
 * they are, others as JSON), a boolean or an integer by its type, else
 * any text without '<' (it would start the closing tag). */
static void xml_value(FILE *o, const cJSON *schema)
{
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum");
	const char *type = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(schema, "type"));
	const cJSON *v;
	bool first = true;

	if (cJSON_IsArray(en) && cJSON_GetArraySize(en) > 0) {
		fputc('(', o);
		cJSON_ArrayForEach(v, en)
		{
			char *j = cJSON_IsString(v) ? NULL
						    : cJSON_PrintUnformatted(v);

			fputs(first ? "" : " | ", o);
			literal(o, cJSON_IsString(v) ? v->valuestring
						     : (j ? j : "null"));
			free(j);
			first = false;
		}
		fputc(')', o);
	} else if (type && !strcmp(type, "boolean")) {
		fputs("(\"true\" | \"false\")", o);
	} else if (type && !strcmp(type, "integer")) {
		fputs("(\"-\"? [0-9]{1,18})", o);
	} else {
		fputs("[^<]+", o);
	}
}

/* One tool's <function=...> block as rule fI. */
static void xml_function(FILE *o, int i, const char *name,
			 const cJSON *params)
{
	const cJSON *props =
	    cJSON_GetObjectItemCaseSensitive(params, "properties");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
	const cJSON *p;

	fprintf(o, "f%d ::= \"<function=\" ", i);
	literal(o, name);
	fputs(" \">\\n\"", o);
	cJSON_ArrayForEach(p, props)
	{
		bool must = false;
		const cJSON *r;
		char *pn = p->string;

		cJSON_ArrayForEach(r, req) must |= cJSON_IsString(r) &&
						   !strcmp(r->valuestring, pn);
		fputs(" (\"<parameter=\" ", o);
		literal(o, pn);
		fputs(" \">\\n\" ", o);
		xml_value(o, p);
		fprintf(o, " \"\\n</parameter>\\n\")%s", must ? "" : "?");
	}
	fputs(" \"</function>\\n\"\n", o);
}

/* The members xml_function walks, checked first: no schema compiler
 * reads the XML format's parameters, and an array's items have no
 * names. */
static int xml_params_ok(const cJSON *params, int i,
			 struct o1_grammar_error *err)
{
	const cJSON *props =
	    cJSON_GetObjectItemCaseSensitive(params, "properties");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");

	if (props && !cJSON_IsObject(props))
		return fail(err, -O1_E_FORMAT,
			    "tools[%d].function.parameters.properties: not an "
			    "object",
			    i);
	if (req && !cJSON_IsArray(req))
		return fail(err, -O1_E_FORMAT,
			    "tools[%d].function.parameters.required: not a "
			    "list",
			    i);
	return 0;
}

static int xml_format(const cJSON *tools, const struct o1_grammar_vocab *v,
		      struct o1_grammar_error *err, FILE *o)
{
	const cJSON *t;
	const char *name;
	const cJSON *params;
	int i = 0, rc;

	fputs("root ::= ", o);
	marker(o, v, "<tool_call>");
	fputs(" \"\\n\" (", o);
	for (int k = 0; k < cJSON_GetArraySize(tools); k++)
		fprintf(o, "%sf%d", k ? " | " : "", k);
	fputs(") ", o);
	marker(o, v, "</tool_call>");
	fputc('\n', o);
	cJSON_ArrayForEach(t, tools)
	{
		rc = tool_at(t, i, err, &name, &params);
		if (!rc)
			rc = xml_params_ok(params, i, err);
		if (rc)
			return rc;
		xml_function(o, i++, name, params);
	}
	return 0;
}

int o1_grammar_from_tools(enum o1_tool_format f, const char *tools,
			  size_t len, struct o1_grammar_error *err,
			  char **text, size_t *text_len)
{
	return o1_grammar_from_tools_for(f, tools, len, NULL, err, text,
					 text_len);
}

int o1_grammar_from_tools_for(enum o1_tool_format f, const char *tools,
			      size_t len, const struct o1_grammar_vocab *v,
			      struct o1_grammar_error *err, char **text,
			      size_t *text_len)
{
	cJSON *list = NULL;
	char *buf = NULL;
	size_t n = 0;
	FILE *o;
	int rc;

	*text = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	if (f == O1_TOOL_NONE || f >= O1_TOOL_N)
		return fail(err, -O1_E_UNSUPPORTED,
			    "the model's chat template has no tool-call "
			    "format");
	rc = tools_list(tools, len, err, &list);
	if (rc)
		return rc;
	o = open_memstream(&buf, &n);
	if (!o) {
		cJSON_Delete(list);
		return fail(err, -ENOMEM, "out of memory");
	}
	rc = f == O1_TOOL_XML ? xml_format(list, v, err, o)
			      : json_format(f, list, v, err, o);
	if (fclose(o) && !rc)
		rc = fail(err, -ENOMEM, "out of memory");
	cJSON_Delete(list);
	if (rc) {
		free(buf);
		return rc;
	}
	*text = buf;
	*text_len = n;
	return 0;
}

int o1_grammar_compile_tools(enum o1_tool_format f, const char *tools,
			     size_t len, struct o1_grammar_error *err,
			     struct o1_grammar **out)
{
	return o1_grammar_compile_tools_for(f, tools, len, NULL, err, out);
}

int o1_grammar_compile_tools_for(enum o1_tool_format f, const char *tools,
				 size_t len, const struct o1_grammar_vocab *v,
				 struct o1_grammar_error *err,
				 struct o1_grammar **out)
{
	char *text;
	size_t n;
	int rc = o1_grammar_from_tools_for(f, tools, len, v, err, &text, &n);

	*out = NULL;
	if (rc)
		return rc;
	rc = o1_grammar_compile(text, n, err, out);
	free(text);
	return rc;
}

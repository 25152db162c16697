/* Tool calls read back from a model's output (see tool_call.h).
 *
 * Each format's reader walks the text once, collecting the calls and the
 * text before the first one. Any malformed call (JSON that does not parse,
 * a name missing, arguments that are not an object) abandons the reading:
 * the output is then returned whole as content, with no calls.
 */
#include "tool_call.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct reader {
	const char *p;
	size_t n;
	const cJSON *tools;
	struct o1_tool_calls *out;
	size_t cap;
	char *content;
	size_t content_n;
	bool bad;   /* a call did not parse */
	bool nomem; /* an allocation failed */
};

static const char *const format_names[O1_TOOL_N] = {
    [O1_TOOL_NONE] = "none",
    [O1_TOOL_HERMES] = "hermes",
    [O1_TOOL_XML] = "xml",
    [O1_TOOL_LLAMA3_JSON] = "llama3_json",
    [O1_TOOL_MISTRAL] = "mistral",
};

static const char *const markers[] = {
    "[TOOL_CALLS]", "[ARGS]",	    "[CALL_ID]", "<|python_tag|>",
    "<tool_call>",  "</tool_call>", NULL,
};

const char *const *o1_tool_format_markers(void)
{
	return markers;
}

const char *o1_tool_format_name(enum o1_tool_format f)
{
	return (unsigned)f < O1_TOOL_N ? format_names[f] : NULL;
}

enum o1_tool_format o1_tool_format_detect(const char *t)
{
	if (!t)
		return O1_TOOL_NONE;
	if (strstr(t, "<function="))
		return O1_TOOL_XML;
	if (strstr(t, "<tool_call>"))
		return O1_TOOL_HERMES;
	if (strstr(t, "[TOOL_CALLS]"))
		return O1_TOOL_MISTRAL;
	if (strstr(t, "<|python_tag|>") ||
	    (strstr(t, "<|start_header_id|>") && strstr(t, "tool")))
		return O1_TOOL_LLAMA3_JSON;
	return O1_TOOL_NONE;
}

void o1_tool_calls_fini(struct o1_tool_calls *tc)
{
	for (size_t i = 0; i < tc->n; i++) {
		free(tc->calls[i].id);
		free(tc->calls[i].name);
		free(tc->calls[i].arguments);
	}
	free(tc->calls);
	free(tc->content);
	memset(tc, 0, sizeof(*tc));
}

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* [*S, *S + *N) without surrounding whitespace. */
static void trim(const char **s, size_t *n)
{
	while (*n && is_space(**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n && is_space((*s)[*n - 1]))
		(*n)--;
}

/* The first occurrence of Z in [S, S + N), or NULL. */
static const char *find(const char *s, size_t n, const char *z)
{
	return memmem(s, n, z, strlen(z));
}

static void add_content(struct reader *r, const char *s, size_t n)
{
	char *c;

	if (!n || r->nomem)
		return;
	c = realloc(r->content, r->content_n + n + 1);
	if (!c) {
		r->nomem = true;
		return;
	}
	memcpy(c + r->content_n, s, n);
	r->content = c;
	r->content_n += n;
	c[r->content_n] = 0;
}

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

/* A function name holds no control characters (nor NUL). */
static bool name_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20)
			return false;
	return true;
}

/* Adds a call: NAME (N bytes), ARGS a JSON object, ID or NULL. */
static void add_call(struct reader *r, const char *name, size_t n,
		     const cJSON *args, const char *id)
{
	struct o1_tool_calls *o = r->out;
	struct o1_tool_call *c;

	trim(&name, &n);
	if (!n || !cJSON_IsObject(args) || !name_ok(name, n)) {
		r->bad = true;
		return;
	}
	if (o->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4;
		struct o1_tool_call *v = realloc(o->calls, cap * sizeof(*v));

		if (!v) {
			r->nomem = true;
			return;
		}
		o->calls = v;
		r->cap = cap;
	}
	c = &o->calls[o->n];
	c->name = dup_n(name, n);
	c->arguments = cJSON_PrintUnformatted(args);
	c->id = id ? strdup(id) : NULL;
	o->n++;
	if (!c->name || !c->arguments || (id && !c->id))
		r->nomem = true;
}

/* A call as a JSON object {"name", "arguments" or "parameters", "id"?};
 * arguments given as a JSON string are read as JSON. */
static void add_json_call(struct reader *r, const cJSON *obj)
{
	const cJSON *name = cJSON_GetObjectItem(obj, "name");
	const cJSON *args = cJSON_GetObjectItem(obj, "arguments");
	const cJSON *id = cJSON_GetObjectItem(obj, "id");
	cJSON *parsed = NULL, *empty = NULL;

	if (!args)
		args = cJSON_GetObjectItem(obj, "parameters");
	if (cJSON_IsString(args))
		args = parsed = cJSON_Parse(args->valuestring);
	if (!args)
		args = empty = cJSON_CreateObject();
	if (!cJSON_IsObject(obj) || !cJSON_IsString(name))
		r->bad = true;
	else
		add_call(r, name->valuestring, strlen(name->valuestring), args,
			 cJSON_IsString(id) ? id->valuestring : NULL);
	cJSON_Delete(parsed);
	cJSON_Delete(empty);
}

/* [S, S + N) as one JSON value and nothing after it but whitespace. */
static cJSON *parse_exact(const char *s, size_t n)
{
	const char *end;
	cJSON *j = cJSON_ParseWithLengthOpts(s, n, &end, false);

	while (j && end < s + n && is_space(*end))
		end++;
	if (j && end != s + n) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* One JSON value at [S, S + N): parsed, and *END set after it. */
static cJSON *parse_json_at(const char *s, size_t n, const char **end)
{
	cJSON *j = cJSON_ParseWithLengthOpts(s, n, end, false);

	if (!j)
		*end = s;
	return j;
}

/* Hermes: <tool_call>{json}</tool_call>, the last one maybe unclosed. */
static void read_hermes(struct reader *r)
{
	static const char open[] = "<tool_call>", close[] = "</tool_call>";
	const char *s = r->p, *end = r->p + r->n;

	while (!r->bad && s < end) {
		const char *a = find(s, (size_t)(end - s), open), *b, *body;
		size_t len;
		cJSON *j;

		if (!a) { /* text after a call is dropped */
			if (!r->out->n)
				add_content(r, s, (size_t)(end - s));
			break;
		}
		if (!r->out->n)
			add_content(r, s, (size_t)(a - s));
		body = a + strlen(open);
		b = find(body, (size_t)(end - body), close);
		len = (size_t)((b ? b : end) - body);
		trim(&body, &len);
		j = parse_exact(body, len);
		if (j)
			add_json_call(r, j);
		else
			r->bad = true;
		cJSON_Delete(j);
		s = b ? b + strlen(close) : end;
	}
}

/* The JSON schema type of parameter P of tool NAME in the request's
 * tools, or NULL. */
static const char *param_type(const cJSON *tools, const char *name,
			      const char *p)
{
	const cJSON *t;

	cJSON_ArrayForEach(t, tools)
	{
		const cJSON *f = cJSON_GetObjectItem(t, "function");
		const cJSON *props, *type;

		if (!f)
			f = t;
		if (!cJSON_IsString(cJSON_GetObjectItem(f, "name")) ||
		    strcmp(cJSON_GetObjectItem(f, "name")->valuestring, name))
			continue;
		props = cJSON_GetObjectItem(cJSON_GetObjectItem(f, "parameters"),
					    "properties");
		type = cJSON_GetObjectItem(cJSON_GetObjectItem(props, p),
					   "type");
		return cJSON_GetStringValue(type);
	}
	return NULL;
}

/* A parameter's text as the schema types it: strings (and parameters
 * the schema does not list) stay text; others are read as JSON where
 * they parse. */
static cJSON *typed_value(const char *type, const char *v, size_t n)
{
	cJSON *j;

	if (type && strcmp(type, "string")) {
		j = parse_exact(v, n);
		if (j)
			return j;
	}
	return cJSON_CreateString(v);
}

/* <parameter=P>value</parameter>... inside one function body. */
static cJSON *read_params(struct reader *r, const char *fn, const char *s,
			  const char *end)
{
	static const char open[] = "<parameter=", close[] = "</parameter>";
	cJSON *args = cJSON_CreateObject();

	while (args && (s = find(s, (size_t)(end - s), open))) {
		const char *pn = s + strlen(open), *gt, *v, *stop;
		char *name, *value;
		size_t vn;

		gt = memchr(pn, '>', (size_t)(end - pn));
		if (!gt) {
			r->bad = true;
			break;
		}
		v = gt + 1;
		stop = find(v, (size_t)(end - v), close);
		if (!stop)
			stop = find(v, (size_t)(end - v), open);
		if (!stop)
			stop = end;
		vn = (size_t)(stop - v);
		if (vn && *v == '\n')
			v++, vn--;
		if (vn && v[vn - 1] == '\n')
			vn--;
		name = dup_n(pn, (size_t)(gt - pn));
		value = dup_n(v, vn);
		if (!name || !value ||
		    !cJSON_AddItemToObject(
			args, name,
			typed_value(param_type(r->tools, fn, name), value, vn)))
			r->nomem = true;
		free(name);
		free(value);
		s = stop;
	}
	return args;
}

/* XML: <function=NAME>...</function>, in <tool_call> blocks or bare. */
static void read_xml(struct reader *r)
{
	static const char open[] = "<function=", close[] = "</function>";
	const char *s = r->p, *end = r->p + r->n, *first, *block;

	first = find(s, r->n, open);
	if (!first) {
		add_content(r, s, r->n);
		return;
	}
	block = find(s, (size_t)(first - s), "<tool_call>");
	add_content(r, s, (size_t)((block ? block : first) - s));
	for (s = first; !r->bad && (s = find(s, (size_t)(end - s), open));) {
		const char *name = s + strlen(open), *gt, *b;
		char *fn;
		cJSON *args;

		gt = memchr(name, '>', (size_t)(end - name));
		if (!gt) {
			r->bad = true;
			break;
		}
		b = find(gt, (size_t)(end - gt), close);
		fn = dup_n(name, (size_t)(gt - name));
		args = fn ? read_params(r, fn, gt + 1, b ? b : end) : NULL;
		if (!args)
			r->nomem = true;
		else
			add_call(r, name, (size_t)(gt - name), args, NULL);
		cJSON_Delete(args);
		free(fn);
		s = b ? b + strlen(close) : end;
	}
}

/* Llama 3: the answer is {"name", "parameters"} objects separated by
 * ";", after an optional <|python_tag|>; anything else is text. */
static void read_llama3(struct reader *r)
{
	static const char tag[] = "<|python_tag|>";
	const char *s = r->p, *end;
	size_t n = r->n;

	trim(&s, &n);
	if (n >= strlen(tag) && !memcmp(s, tag, strlen(tag))) {
		s += strlen(tag);
		n -= strlen(tag);
		trim(&s, &n);
	}
	if (!n || *s != '{') {
		add_content(r, r->p, r->n);
		return;
	}
	end = s + n;
	while (!r->bad && s < end) {
		const char *after;
		cJSON *j = parse_json_at(s, (size_t)(end - s), &after);

		if (!j) {
			r->bad = true;
			break;
		}
		add_json_call(r, j);
		cJSON_Delete(j);
		for (s = after; s < end && (is_space(*s) || *s == ';'); s++)
			;
	}
}

/* Mistral v11+: NAME[ARGS]{...}, an optional [CALL_ID]id before [ARGS],
 * calls separated by [TOOL_CALLS]. */
static void read_mistral_args(struct reader *r, const char *s,
			      const char *end)
{
	static const char args_tag[] = "[ARGS]", id_tag[] = "[CALL_ID]",
			  calls[] = "[TOOL_CALLS]";

	while (!r->bad && s < end) {
		const char *a = find(s, (size_t)(end - s), args_tag), *after;
		const char *idp = find(s, (size_t)(end - s), id_tag);
		char *id = NULL;
		cJSON *j;

		if (!a) {
			r->bad = true;
			break;
		}
		if (idp && idp < a)
			id = dup_n(idp + strlen(id_tag),
				   (size_t)(a - idp) - strlen(id_tag));
		j = parse_json_at(a + strlen(args_tag),
				  (size_t)(end - a) - strlen(args_tag), &after);
		if (!j)
			r->bad = true;
		else
			add_call(r, s, (size_t)((idp && idp < a ? idp : a) - s),
				 j, id);
		cJSON_Delete(j);
		free(id);
		for (s = after; s < end && is_space(*s); s++)
			;
		if ((size_t)(end - s) >= strlen(calls) &&
		    !memcmp(s, calls, strlen(calls)))
			s += strlen(calls);
	}
}

/* Mistral: text, then [TOOL_CALLS] and a JSON list (or v11's form). */
static void read_mistral(struct reader *r)
{
	static const char tag[] = "[TOOL_CALLS]";
	const char *s = r->p, *end = r->p + r->n, *t = find(s, r->n, tag);
	const char *after;
	cJSON *list, *it;
	size_t n;

	if (!t) {
		add_content(r, s, r->n);
		return;
	}
	add_content(r, s, (size_t)(t - s));
	s = t + strlen(tag);
	n = (size_t)(end - s);
	trim(&s, &n);
	if (!n || *s != '[') {
		read_mistral_args(r, s, s + n);
		return;
	}
	list = parse_json_at(s, n, &after);
	if (!cJSON_IsArray(list))
		r->bad = true;
	for (it = list ? list->child : NULL; it; it = it->next)
		add_json_call(r, it);
	cJSON_Delete(list);
}

/* The outcome: the content (the text before the first call, trailing
 * whitespace removed) and the calls, or all text when a call was
 * malformed. */
static int finish(struct reader *r, struct o1_tool_calls *out)
{
	const char *c;
	size_t n;

	if (r->nomem) {
		o1_tool_calls_fini(out);
		free(r->content);
		return -ENOMEM;
	}
	if (r->bad || !out->n) {
		o1_tool_calls_fini(out);
		free(r->content);
		out->content = dup_n(r->p, r->n);
		return out->content ? 0 : -ENOMEM;
	}
	c = r->content ? r->content : "";
	n = r->content_n;
	while (n && is_space(c[n - 1]))
		n--;
	out->content = dup_n(c, n);
	free(r->content);
	if (!out->content) {
		o1_tool_calls_fini(out);
		return -ENOMEM;
	}
	return 0;
}

int o1_tool_calls_parse(enum o1_tool_format f, const char *text, size_t len,
			const cJSON *tools, struct o1_tool_calls *out)
{
	struct reader r = {.p = text, .n = len, .tools = tools, .out = out};

	memset(out, 0, sizeof(*out));
	switch (f) {
	case O1_TOOL_HERMES:
		read_hermes(&r);
		break;
	case O1_TOOL_XML:
		read_xml(&r);
		break;
	case O1_TOOL_LLAMA3_JSON:
		read_llama3(&r);
		break;
	case O1_TOOL_MISTRAL:
		read_mistral(&r);
		break;
	default:
		break;
	}
	return finish(&r, out);
}

/* A chat request as JSON, checked and turned into template variables
 * (see chat_request.h). Everything is checked on the parsed document
 * before any of it is kept; a failure names the member at fault. */
#include "chat_request.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"

#define ROLE_MAX 64

struct ctx {
	char *msg;
	size_t cap;
};

static int bad(struct ctx *c, int code, const char *fmt, ...)
{
	va_list ap;

	if (c->msg && c->cap) {
		va_start(ap, fmt);
		vsnprintf(c->msg, c->cap, fmt, ap);
		va_end(ap);
	}
	return code;
}

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* A function's name: a non-empty string. */
static bool name_ok(const cJSON *n)
{
	return cJSON_IsString(n) && n->valuestring[0];
}

/* tool_calls[j] of message I: its arguments become the object they
 * encode (an object already given is kept). */
static int tool_call(struct ctx *c, int i, int j, cJSON *tc)
{
	cJSON *f = cJSON_GetObjectItemCaseSensitive(tc, "function");
	cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments"), *obj;
	const cJSON *type = get(tc, "type"), *id = get(tc, "id");

	if (!cJSON_IsObject(tc) || !cJSON_IsObject(f) ||
	    !name_ok(get(f, "name")))
		return bad(c, -O1_E_FORMAT,
			   "messages[%d].tool_calls[%d]: not {\"type\": "
			   "\"function\", \"function\": {\"name\", "
			   "\"arguments\"}}",
			   i, j);
	if ((type && !(cJSON_IsString(type) &&
		       !strcmp(type->valuestring, "function"))) ||
	    (id && !cJSON_IsString(id)))
		return bad(c, -O1_E_FORMAT,
			   "messages[%d].tool_calls[%d]: type must be "
			   "\"function\" and id a string",
			   i, j);
	if (cJSON_IsObject(a))
		return 0;
	obj = cJSON_IsString(a) ? cJSON_Parse(a->valuestring) : NULL;
	if (!cJSON_IsObject(obj)) {
		cJSON_Delete(obj);
		return bad(c, -O1_E_FORMAT,
			   "messages[%d].tool_calls[%d].function.arguments: "
			   "not a JSON object",
			   i, j);
	}
	if (!cJSON_ReplaceItemInObjectCaseSensitive(f, "arguments", obj)) {
		cJSON_Delete(obj);
		return -ENOMEM;
	}
	return 0;
}

static int message(struct ctx *c, int i, cJSON *m)
{
	const cJSON *role = get(m, "role"), *content = get(m, "content");
	cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), *tc;
	const char *str_keys[] = {"tool_call_id", "name"};
	int j = 0, rc;

	if (!cJSON_IsObject(m))
		return bad(c, -O1_E_FORMAT, "messages[%d]: not an object", i);
	if (!cJSON_IsString(role) || !role->valuestring[0] ||
	    strlen(role->valuestring) > ROLE_MAX)
		return bad(c, -O1_E_FORMAT,
			   "messages[%d].role: a string of 1 to %d bytes", i,
			   ROLE_MAX);
	if (content && !cJSON_IsString(content) && !cJSON_IsNull(content) &&
	    !cJSON_IsArray(content))
		return bad(c, -O1_E_FORMAT,
			   "messages[%d].content: a string, null or a list of "
			   "parts",
			   i);
	if (!content && !calls)
		return bad(c, -O1_E_FORMAT,
			   "messages[%d]: no content (and no tool_calls)", i);
	for (size_t k = 0; k < 2; k++) {
		const cJSON *v = get(m, str_keys[k]);

		if (v && !cJSON_IsString(v))
			return bad(c, -O1_E_FORMAT,
				   "messages[%d].%s: not a string", i,
				   str_keys[k]);
	}
	if (!calls)
		return 0;
	if (!cJSON_IsArray(calls))
		return bad(c, -O1_E_FORMAT,
			   "messages[%d].tool_calls: not a list", i);
	if (cJSON_GetArraySize(calls) > O1_CHAT_REQUEST_MAX_CALLS)
		return bad(
		    c, -O1_E_BOUNDS, "messages[%d].tool_calls: %d, at most %d",
		    i, cJSON_GetArraySize(calls), O1_CHAT_REQUEST_MAX_CALLS);
	cJSON_ArrayForEach(tc, calls) if ((rc = tool_call(c, i, j++, tc)))
	    return rc;
	return 0;
}

static int messages(struct ctx *c, cJSON *ms)
{
	cJSON *m;
	int i = 0, n = cJSON_GetArraySize(ms), rc;

	if (!cJSON_IsArray(ms) || n < 1)
		return bad(c, -O1_E_FORMAT, "messages: not a non-empty list");
	if (n > O1_CHAT_REQUEST_MAX_MESSAGES)
		return bad(c, -O1_E_BOUNDS, "messages: %d, at most %d", n,
			   O1_CHAT_REQUEST_MAX_MESSAGES);
	cJSON_ArrayForEach(m, ms) if ((rc = message(c, i++, m))) return rc;
	return 0;
}

static int tools(struct ctx *c, const cJSON *ts)
{
	const cJSON *t;
	int i = 0, n = cJSON_GetArraySize(ts);

	if (!cJSON_IsArray(ts) || n < 1)
		return bad(c, -O1_E_FORMAT, "tools: not a non-empty list");
	if (n > O1_CHAT_REQUEST_MAX_TOOLS)
		return bad(c, -O1_E_BOUNDS, "tools: %d, at most %d", n,
			   O1_CHAT_REQUEST_MAX_TOOLS);
	cJSON_ArrayForEach(t, ts)
	{
		const cJSON *type = get(t, "type"), *f = get(t, "function");
		const cJSON *p = get(f, "parameters");

		if (!cJSON_IsObject(t) || !cJSON_IsString(type) ||
		    strcmp(type->valuestring, "function") ||
		    !cJSON_IsObject(f) || !name_ok(get(f, "name")) ||
		    (p && !cJSON_IsObject(p)))
			return bad(c, -O1_E_FORMAT,
				   "tools[%d]: not {\"type\": \"function\", "
				   "\"function\": {\"name\", \"parameters\"?}}",
				   i);
		i++;
	}
	return 0;
}

/* Whether TS (may be NULL) has a tool called NAME. */
static bool has_tool(const cJSON *ts, const char *name)
{
	const cJSON *t;

	cJSON_ArrayForEach(t, ts)
	{
		const cJSON *n = get(get(t, "function"), "name");

		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return true;
	}
	return false;
}

/* tool_choice; *none when it is "none". */
static int tool_choice(struct ctx *c, const cJSON *tc, const cJSON *ts,
		       bool *none)
{
	const cJSON *n = get(get(tc, "function"), "name");
	const cJSON *type = get(tc, "type");

	*none = false;
	if (cJSON_IsString(tc)) {
		*none = !strcmp(tc->valuestring, "none");
		if (*none || !strcmp(tc->valuestring, "auto") ||
		    !strcmp(tc->valuestring, "required"))
			return ts || strcmp(tc->valuestring, "required")
				   ? 0
				   : bad(c, -O1_E_FORMAT,
					 "tool_choice: \"required\" without "
					 "tools");
	} else if (cJSON_IsObject(tc) && cJSON_IsString(type) &&
		   !strcmp(type->valuestring, "function") && name_ok(n)) {
		if (has_tool(ts, n->valuestring))
			return 0;
		return bad(c, -O1_E_FORMAT,
			   "tool_choice: no tool is called \"%.64s\"",
			   n->valuestring);
	}
	return bad(c, -O1_E_FORMAT,
		   "tool_choice: \"none\", \"auto\", \"required\" or "
		   "{\"type\": \"function\", \"function\": {\"name\"}}");
}

static int check(struct ctx *c, cJSON *doc, bool *none)
{
	const cJSON *k, *ts = get(doc, "tools"), *tc = get(doc, "tool_choice");
	int rc;

	if (!cJSON_IsObject(doc))
		return bad(c, -O1_E_FORMAT,
			   "not a JSON object {\"messages\", \"tools\"?, "
			   "\"tool_choice\"?}");
	cJSON_ArrayForEach(k, doc) if (strcmp(k->string, "messages") &&
				       strcmp(k->string, "tools") &&
				       strcmp(k->string, "tool_choice")) return
	    bad(c, -O1_E_FORMAT, "unknown member \"%.64s\"", k->string);
	rc = messages(c, cJSON_GetObjectItemCaseSensitive(doc, "messages"));
	if (!rc && ts)
		rc = tools(c, ts);
	*none = false;
	if (!rc && tc)
		rc = tool_choice(c, tc, ts, none);
	return rc;
}

int o1_chat_request_parse(const char *text, size_t len, cJSON **vars,
			  char *msg, size_t cap)
{
	struct ctx c = {msg, cap};
	cJSON *doc;
	bool none = false;
	int rc;

	*vars = NULL;
	if (msg && cap)
		msg[0] = 0;
	doc = cJSON_ParseWithLength(text, len);
	if (!doc)
		return bad(&c, -O1_E_FORMAT, "not JSON text");
	rc = check(&c, doc, &none);
	if (rc) {
		cJSON_Delete(doc);
		return rc;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(doc, "tool_choice");
	if (none)
		cJSON_DeleteItemFromObjectCaseSensitive(doc, "tools");
	*vars = doc;
	return 0;
}

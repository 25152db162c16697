/* OpenAI tool calling in a chat request (see sidecar_tools.h): the
 * checks, then the JSON chat request o1d renders, and for "required" or
 * a named function the tools list a tool-call grammar takes. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <o1/client.h>

#include "sidecar_fields.h"
#include "sidecar_tools.h"

#define NAME_MAX_CHARS 64

enum choice { CHOICE_AUTO, CHOICE_NONE, CHOICE_REQUIRED, CHOICE_NAMED };

/* OpenAI's function names: 1 to 64 of a-z, A-Z, 0-9, '_' and '-'. */
static bool name_ok(const cJSON *n)
{
	size_t len;

	if (!cJSON_IsString(n))
		return false;
	len = strlen(n->valuestring);
	if (len < 1 || len > NAME_MAX_CHARS)
		return false;
	return strspn(n->valuestring, "abcdefghijklmnopqrstuvwxyz"
				      "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				      "0123456789_-") == len;
}

static int check_tool(const cJSON *t, int i, struct o1_sidecar_req_error *err)
{
	const cJSON *type = field(t, "type"), *f = field(t, "function");
	const cJSON *d = field(f, "description"), *p = field(f, "parameters");
	const cJSON *s = field(f, "strict");

	if (!cJSON_IsObject(t) || !cJSON_IsString(type) ||
	    strcmp(type->valuestring, "function") || !cJSON_IsObject(f))
		return bad(err, "tools",
			   "tools[%d] must be {\"type\": \"function\", "
			   "\"function\": {...}}",
			   i);
	if (!name_ok(field(f, "name")))
		return bad(err, "tools",
			   "tools[%d].function.name must be 1 to 64 letters, "
			   "digits, '_' or '-'",
			   i);
	if ((d && !cJSON_IsString(d)) || (p && !cJSON_IsObject(p)) ||
	    (s && !cJSON_IsBool(s)))
		return bad(err, "tools",
			   "tools[%d].function: 'description' must be a "
			   "string, 'parameters' an object (a JSON Schema), "
			   "'strict' a boolean",
			   i);
	return 0;
}

static int check_tools(const cJSON *ts, struct o1_sidecar_req_error *err)
{
	const cJSON *t;
	char *text;
	size_t n;
	int i = 0, ret;

	if (!cJSON_IsArray(ts) || cJSON_GetArraySize(ts) < 1 ||
	    cJSON_GetArraySize(ts) > O1_SIDECAR_MAX_TOOLS)
		return bad(err, "tools", "'tools' must be a list of 1 to %d tools",
			   O1_SIDECAR_MAX_TOOLS);
	cJSON_ArrayForEach(t, ts) if ((ret = check_tool(t, i++, err))) return ret;
	text = cJSON_PrintUnformatted(ts);
	if (!text)
		return -ENOMEM;
	n = strlen(text);
	free(text);
	if (n > O1_SIDECAR_MAX_TOOLS_BYTES)
		return bad(err, "tools",
			   "'tools' is %zu bytes of JSON; at most %d", n,
			   O1_SIDECAR_MAX_TOOLS_BYTES);
	return 0;
}

/* The tool of TS called NAME, or NULL. */
static const cJSON *tool_named(const cJSON *ts, const char *name)
{
	const cJSON *t;

	cJSON_ArrayForEach(t, ts)
	{
		const cJSON *n = field(field(t, "function"), "name");

		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return t;
	}
	return NULL;
}

static int read_choice(const cJSON *root, const cJSON *ts, enum choice *ch,
		       const cJSON **named, struct o1_sidecar_req_error *err)
{
	const cJSON *tc = field(root, "tool_choice");
	const cJSON *n = field(field(tc, "function"), "name");
	const cJSON *type = field(tc, "type");
	const cJSON *par = field(root, "parallel_tool_calls");

	*ch = ts ? CHOICE_AUTO : CHOICE_NONE;
	*named = NULL;
	if (par && !cJSON_IsBool(par))
		return bad(err, "parallel_tool_calls",
			   "'parallel_tool_calls' must be a boolean");
	if (!tc)
		return 0;
	if (!ts)
		return bad(err, "tool_choice",
			   "'tool_choice' is only allowed when 'tools' are "
			   "given");
	if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none"))
		*ch = CHOICE_NONE;
	else if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "auto"))
		*ch = CHOICE_AUTO;
	else if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "required"))
		*ch = CHOICE_REQUIRED;
	else if (cJSON_IsObject(tc) && cJSON_IsString(type) &&
		 !strcmp(type->valuestring, "function") && cJSON_IsString(n)) {
		*named = tool_named(ts, n->valuestring);
		if (!*named)
			return bad(err, "tool_choice",
				   "'tool_choice' names '%.64s', which is not "
				   "one of the tools",
				   n->valuestring);
		*ch = CHOICE_NAMED;
	} else {
		return bad(err, "tool_choice",
			   "'tool_choice' must be \"none\", \"auto\", "
			   "\"required\" or {\"type\": \"function\", "
			   "\"function\": {\"name\": ...}}");
	}
	return 0;
}

/* Message I's tool_calls: OpenAI's shape, arguments JSON object text. */
static int check_calls(const cJSON *calls, int i,
		       struct o1_sidecar_req_error *err)
{
	const cJSON *c;
	int j = 0;

	if (!cJSON_IsArray(calls) ||
	    cJSON_GetArraySize(calls) > O1_SIDECAR_MAX_MESSAGES)
		return bad(err, "messages",
			   "messages[%d].tool_calls must be a list of at most "
			   "%d calls",
			   i, O1_SIDECAR_MAX_MESSAGES);
	cJSON_ArrayForEach(c, calls)
	{
		const cJSON *f = field(c, "function"), *id = field(c, "id");
		const cJSON *a = field(f, "arguments"), *type = field(c, "type");
		cJSON *obj = cJSON_IsString(a) ? cJSON_Parse(a->valuestring)
					       : NULL;
		bool ok = cJSON_IsObject(obj);

		cJSON_Delete(obj);
		if (!cJSON_IsObject(c) || (id && !cJSON_IsString(id)) ||
		    (type && (!cJSON_IsString(type) ||
			      strcmp(type->valuestring, "function"))) ||
		    !cJSON_IsObject(f) || !name_ok(field(f, "name")))
			return bad(err, "messages",
				   "messages[%d].tool_calls[%d] must be {\"id\", "
				   "\"type\": \"function\", \"function\": "
				   "{\"name\", \"arguments\"}}",
				   i, j);
		if (!ok)
			return bad(err, "messages",
				   "messages[%d].tool_calls[%d].function."
				   "arguments must be JSON text of an object",
				   i, j);
		j++;
	}
	return 0;
}

/* Content parts [{"type": "text", "text"}] joined into one string (as the
 * packed form joins them; the template sees a string). */
static int join_parts(cJSON *m)
{
	cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content"), *p;
	size_t n = 0;
	char *s;

	if (!cJSON_IsArray(c))
		return 0;
	cJSON_ArrayForEach(p, c) n += strlen(field(p, "text")->valuestring);
	s = malloc(n + 1);
	if (!s)
		return -ENOMEM;
	n = 0;
	cJSON_ArrayForEach(p, c)
	{
		const char *t = field(p, "text")->valuestring;

		memcpy(s + n, t, strlen(t));
		n += strlen(t);
	}
	s[n] = 0;
	p = cJSON_CreateString(s);
	free(s);
	if (!p || !cJSON_ReplaceItemInObjectCaseSensitive(m, "content", p)) {
		cJSON_Delete(p);
		return -ENOMEM;
	}
	return 0;
}

/* The messages as o1d takes them: checked by the packed form's reader
 * already (roles, content); here tool calls and results, "developer" as
 * "system" and content parts joined. *USES: some message carries a tool
 * call or result. */
static int messages_json(const cJSON *root, cJSON **out, bool *uses,
			 struct o1_sidecar_req_error *err)
{
	cJSON *msgs = cJSON_Duplicate(field(root, "messages"), 1), *m;
	int i = 0, ret = 0;

	*uses = false;
	if (!msgs)
		return -ENOMEM;
	cJSON_ArrayForEach(m, msgs)
	{
		const cJSON *role = field(m, "role"), *calls = field(m, "tool_calls");
		const cJSON *id = field(m, "tool_call_id"), *nm = field(m, "name");

		if (calls && (ret = check_calls(calls, i, err)))
			break;
		if ((id && !cJSON_IsString(id)) || (nm && !cJSON_IsString(nm))) {
			ret = bad(err, "messages",
				  "messages[%d]: 'tool_call_id' and 'name' "
				  "must be strings",
				  i);
			break;
		}
		if (!cJSON_IsString(role)) { /* the packed reader refused it */
			ret = bad(err, "messages", "messages[%d]: no role", i);
			break;
		}
		*uses |= calls || !strcmp(role->valuestring, "tool");
		if (!strcmp(role->valuestring, "developer"))
			cJSON_SetValuestring(
			    cJSON_GetObjectItemCaseSensitive(m, "role"),
			    "system");
		if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(m,
								  "content")) &&
		    !calls)
			cJSON_ReplaceItemInObjectCaseSensitive(
			    m, "content", cJSON_CreateString(""));
		if ((ret = join_parts(m)))
			break;
		i++;
	}
	if (ret) {
		cJSON_Delete(msgs);
		return ret;
	}
	*out = msgs;
	return 0;
}

/* R's prompt: {"messages", "tools"?, "tool_choice"?} as compact JSON. */
static int build_prompt(const cJSON *root, cJSON *msgs, const cJSON *ts,
			struct o1_sidecar_request *r)
{
	cJSON *req = cJSON_CreateObject();
	const cJSON *tc = field(root, "tool_choice");
	char *s;

	if (!req || !cJSON_AddItemToObject(req, "messages", msgs)) {
		cJSON_Delete(req);
		cJSON_Delete(msgs);
		return -ENOMEM;
	}
	if ((ts && !cJSON_AddItemToObject(req, "tools",
					  cJSON_Duplicate(ts, 1))) ||
	    (tc && !cJSON_AddItemToObject(req, "tool_choice",
					  cJSON_Duplicate(tc, 1)))) {
		cJSON_Delete(req);
		return -ENOMEM;
	}
	s = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	if (!s)
		return -ENOMEM;
	free(r->prompt);
	r->prompt = s;
	r->prompt_len = strlen(s);
	r->chat_json = true;
	return 0;
}

/* "required": every tool; a named function: that one alone. */
static int tool_grammar(const cJSON *ts, const cJSON *named,
			struct o1_sidecar_request *r,
			struct o1_sidecar_req_error *err)
{
	cJSON *one = NULL;
	char *s;

	if (r->grammar)
		return bad(err, "tool_choice",
			   "'tool_choice' \"required\" or a named function "
			   "cannot be combined with 'response_format'");
	if (named) {
		one = cJSON_CreateArray();
		if (!one ||
		    !cJSON_AddItemToArray(one, cJSON_Duplicate(named, 1))) {
			cJSON_Delete(one);
			return -ENOMEM;
		}
	}
	s = cJSON_PrintUnformatted(one ? one : ts);
	cJSON_Delete(one);
	if (!s)
		return -ENOMEM;
	r->grammar = s;
	r->grammar_len = strlen(s);
	r->grammar_type = O1_GRAMMAR_TYPE_TOOL_CALL;
	return 0;
}

int o1_sidecar_tools_parse(const cJSON *root, struct o1_sidecar_request *r,
			   struct o1_sidecar_req_error *err)
{
	const cJSON *ts = field(root, "tools"), *named;
	enum choice ch;
	cJSON *msgs = NULL;
	bool uses;
	int ret;

	if (r->kind != O1_SIDECAR_CHAT) {
		if (ts || field(root, "tool_choice"))
			return bad(err, ts ? "tools" : "tool_choice",
				   "tools are for /v1/chat/completions");
		return 0;
	}
	ret = ts ? check_tools(ts, err) : 0;
	if (!ret)
		ret = read_choice(root, ts, &ch, &named, err);
	if (!ret)
		ret = messages_json(root, &msgs, &uses, err);
	if (ret)
		return ret;
	if (!ts && !uses) { /* the packed form says it all */
		cJSON_Delete(msgs);
		return 0;
	}
	ret = build_prompt(root, msgs, ts, r);
	if (!ret && ts && ch != CHOICE_NONE) {
		r->tools = cJSON_PrintUnformatted(ts);
		if (!r->tools)
			ret = -ENOMEM;
	}
	if (!ret && (ch == CHOICE_REQUIRED || ch == CHOICE_NAMED))
		ret = tool_grammar(ts, named, r, err);
	return ret;
}

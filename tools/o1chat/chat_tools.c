/* o1chat's tools (see chat_tools.h): the request and grammar built with
 * cJSON, the answer read back with o1d's tool-call reader. */
#include "chat_tools.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "tokenizer/tool_call.h"

#define MAX_TOOLS      128
#define MAX_TOOLS_FILE (1u << 20)

/* TOOL's function name, or NULL when TOOL is not a function tool (its
 * parameters, when given, a JSON Schema object: o1d refuses others with
 * no more than "malformed data"). */
static const char *tool_name(const cJSON *tool)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
	const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");

	if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
	    !cJSON_IsObject(fn) || !cJSON_IsString(name) ||
	    !name->valuestring[0] || (params && !cJSON_IsObject(params)))
		return NULL;
	return name->valuestring;
}

static cJSON *load(const char *path)
{
	char *text = NULL;
	size_t len;
	int ret = o1_file_read(path, MAX_TOOLS_FILE, &text, &len);
	cJSON *list, *it;
	int n = 0;

	if (ret) {
		fprintf(stderr, "o1chat: --tools %s: %s\n", path,
			ret == -ENOENT	      ? "no such file"
			: ret == -O1_E_BOUNDS ? "over 1 MiB"
					      : o1_strerror(ret));
		return NULL;
	}
	list = cJSON_ParseWithLength(text, len);
	free(text);
	if (!cJSON_IsArray(list)) {
		fprintf(stderr, "o1chat: --tools %s: not a JSON list\n", path);
		cJSON_Delete(list);
		return NULL;
	}
	cJSON_ArrayForEach(it, list)
	{
		if (!tool_name(it)) {
			fprintf(stderr,
				"o1chat: --tools %s: tool %d is not "
				"{\"type\": \"function\", \"function\": "
				"{\"name\": ..., \"parameters\": {...}?}}\n",
				path, n);
			cJSON_Delete(list);
			return NULL;
		}
		n++;
	}
	if (n < 1 || n > MAX_TOOLS) {
		fprintf(stderr, "o1chat: --tools %s: %d tools (1 to %d)\n",
			path, n, MAX_TOOLS);
		cJSON_Delete(list);
		return NULL;
	}
	return list;
}

/* The tool named NAME in LIST, or NULL. */
static const cJSON *find_tool(const cJSON *list, const char *name)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, list)
	{
		if (!strcmp(tool_name(it), name))
			return it;
	}
	return NULL;
}

/* tool_choice as the request carries it, and the grammar's tools. */
static int choose(const cJSON *list, const char *choice, cJSON *req,
		  struct chat_tools *t)
{
	const cJSON *named;
	cJSON *one, *c, *fn;

	if (!strcmp(choice, "auto") || !strcmp(choice, "none") ||
	    !strcmp(choice, "required")) {
		t->read_back = strcmp(choice, "none") != 0;
		if (!strcmp(choice, "required") &&
		    !(t->grammar = cJSON_PrintUnformatted(list)))
			return -ENOMEM;
		return cJSON_AddStringToObject(req, "tool_choice", choice)
			   ? 0
			   : -ENOMEM;
	}
	named = find_tool(list, choice);
	if (!named) {
		fprintf(stderr,
			"o1chat: --tool-choice %s: expected auto, none, "
			"required or the name of one of the tools\n",
			choice);
		return -EINVAL;
	}
	t->read_back = 1;
	c = cJSON_AddObjectToObject(req, "tool_choice");
	fn = c ? cJSON_AddObjectToObject(c, "function") : NULL;
	if (!fn || !cJSON_AddStringToObject(c, "type", "function") ||
	    !cJSON_AddStringToObject(fn, "name", choice))
		return -ENOMEM;
	one = cJSON_CreateArray();
	if (!one || !cJSON_AddItemToArray(one, cJSON_Duplicate(named, 1))) {
		cJSON_Delete(one);
		return -ENOMEM;
	}
	t->grammar = cJSON_PrintUnformatted(one);
	cJSON_Delete(one);
	return t->grammar ? 0 : -ENOMEM;
}

int chat_tools_make(const char *path, const char *choice, const char *prompt,
		    struct chat_tools *t)
{
	cJSON *list = load(path), *req = NULL, *msgs, *m;
	int ret = -ENOMEM;

	memset(t, 0, sizeof(*t));
	if (!list)
		return -EINVAL;
	req = cJSON_CreateObject();
	msgs = req ? cJSON_AddArrayToObject(req, "messages") : NULL;
	m = cJSON_CreateObject();
	if (!msgs || !m || !cJSON_AddItemToArray(msgs, m) ||
	    !cJSON_AddStringToObject(m, "role", "user") ||
	    !cJSON_AddStringToObject(m, "content", prompt))
		goto out;
	ret = choose(list, choice ? choice : "auto", req, t);
	if (ret)
		goto out;
	ret = -ENOMEM;
	t->tools = cJSON_PrintUnformatted(list);
	if (!t->tools ||
	    !cJSON_AddItemToObject(req, "tools", cJSON_Duplicate(list, 1)))
		goto out;
	t->request = cJSON_PrintUnformatted(req);
	ret = t->request ? 0 : -ENOMEM;
out:
	cJSON_Delete(req);
	cJSON_Delete(list);
	if (ret)
		chat_tools_fini(t);
	if (ret == -ENOMEM)
		fprintf(stderr, "o1chat: out of memory\n");
	return ret;
}

void chat_tools_fini(struct chat_tools *t)
{
	free(t->request);
	free(t->grammar);
	free(t->tools);
	memset(t, 0, sizeof(*t));
}

int chat_tools_print(const struct chat_tools *t, uint32_t format,
		     const char *text, size_t len, FILE *out)
{
	struct o1_tool_calls tc;
	cJSON *tools = cJSON_Parse(t->tools);
	int ret = o1_tool_calls_parse((enum o1_tool_format)format, text, len,
				      tools, &tc);

	cJSON_Delete(tools);
	if (ret)
		return ret;
	if (tc.content[0] || !tc.n)
		fprintf(out, "%s\n", tc.content);
	for (size_t i = 0; i < tc.n; i++)
		fprintf(out, "tool_call: %s %s\n", tc.calls[i].name,
			tc.calls[i].arguments);
	ret = (int)tc.n;
	o1_tool_calls_fini(&tc);
	return ret;
}

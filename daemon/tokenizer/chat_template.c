/* Chat templates: the model's Jinja template parsed once and rendered per
 * request with transformers' variables, and the one table of family
 * markers (o1_chat_family_detect) that o1d and o1model share.
 *
 * A parsed template is immutable, so requests may render it from several
 * threads. Errors are returned with the interpreter's message; only
 * o1_chat_template_load, which runs at start-up, logs.
 */
#include "chat_template.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "model/vocab.h"

enum { MAX_TEMPLATE_BYTES = 4 << 20 };

struct o1_chat_template {
	struct o1_jinja *jinja;
	enum o1_chat_family family;
	enum o1_tool_format tools;
	char *source, *bos, *eos;
};

/* Markers in the order they are tried: the first family whose markers
 * all occur wins. */
static const struct {
	const char *marker, *also;
	enum o1_chat_family family;
} markers[] = {
    {"<|im_start|>", NULL, O1_CHAT_CHATML},
    {"<|start_header_id|>", NULL, O1_CHAT_LLAMA3},
    {"<start_of_turn>", NULL, O1_CHAT_GEMMA},
    {"<|START_OF_TURN_TOKEN|>", NULL, O1_CHAT_COMMAND_R},
    {"<|start|>", "<|message|>", O1_CHAT_HARMONY},
    {"<\xef\xbd\x9cUser\xef\xbd\x9c>", NULL, O1_CHAT_DEEPSEEK},
    {"[INST]", "<<SYS>>", O1_CHAT_LLAMA2},
    {"[INST]", NULL, O1_CHAT_MISTRAL},
    {"<|user|>", "<|end|>", O1_CHAT_PHI3},
    {"<|user|>", NULL, O1_CHAT_ZEPHYR},
};

static const char *const family_names[O1_CHAT_N] = {
    [O1_CHAT_OTHER] = "other",	   [O1_CHAT_CHATML] = "chatml",
    [O1_CHAT_LLAMA3] = "llama3",   [O1_CHAT_LLAMA2] = "llama2",
    [O1_CHAT_MISTRAL] = "mistral", [O1_CHAT_GEMMA] = "gemma",
    [O1_CHAT_PHI3] = "phi3",	   [O1_CHAT_ZEPHYR] = "zephyr",
    [O1_CHAT_COMMAND_R] = "command-r", [O1_CHAT_HARMONY] = "harmony",
    [O1_CHAT_DEEPSEEK] = "deepseek",
};

enum o1_chat_family o1_chat_family_detect(const char *tmpl)
{
	if (!tmpl)
		return O1_CHAT_OTHER;
	for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++)
		if (strstr(tmpl, markers[i].marker) &&
		    (!markers[i].also || strstr(tmpl, markers[i].also)))
			return markers[i].family;
	return O1_CHAT_OTHER;
}

const char *o1_chat_family_name(enum o1_chat_family f)
{
	return (unsigned)f < O1_CHAT_N ? family_names[f] : NULL;
}

void o1_chat_template_destroy(struct o1_chat_template *ct)
{
	if (!ct)
		return;
	o1_jinja_destroy(ct->jinja);
	free(ct->source);
	free(ct->bos);
	free(ct->eos);
	free(ct);
}

/* The family and the tool-call format, from the text NUL-terminated (LEN
 * bytes of TEXT may not be). */
static int detect_n(struct o1_chat_template *ct, const char *text,
		    size_t len)
{
	char *z = strndup(text, len);

	if (!z)
		return -ENOMEM;
	ct->family = o1_chat_family_detect(z);
	ct->tools = o1_tool_format_detect(z);
	free(z);
	return 0;
}

int o1_chat_template_create(const char *text, size_t len, const char *source,
			    const char *bos, const char *eos,
			    struct o1_chat_template **out,
			    struct o1_jinja_error *err)
{
	struct o1_chat_template *ct = calloc(1, sizeof(*ct));
	int ret;

	*out = NULL;
	if (!ct)
		return -ENOMEM;
	ct->source = strdup(source ? source : "");
	ct->bos = strdup(bos ? bos : "");
	ct->eos = strdup(eos ? eos : "");
	if (!ct->source || !ct->bos || !ct->eos) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = o1_jinja_parse(text, len, &ct->jinja, err);
	if (!ret)
		ret = detect_n(ct, text, len);
	if (ret)
		goto fail;
	*out = ct;
	return 0;
fail:
	o1_chat_template_destroy(ct);
	return ret;
}

enum o1_chat_family o1_chat_template_family(const struct o1_chat_template *ct)
{
	return ct->family;
}

enum o1_tool_format
o1_chat_template_tool_format(const struct o1_chat_template *ct)
{
	return ct->tools;
}

const char *o1_chat_template_source(const struct o1_chat_template *ct)
{
	return ct->source;
}

/* A special token's text, or NULL for none (-1 or out of range). */
static const char *token_text(const struct o1_vocab *v, int32_t id)
{
	return id >= 0 && (uint32_t)id < v->n_tokens ? v->tokens[id] : NULL;
}

static int load_text(const struct o1_vocab *v, const char *model_path,
		     const char *override, char **text, size_t *len,
		     char *source, size_t cap)
{
	int err;

	if (override && override[0]) {
		err = o1_file_read(override, MAX_TEMPLATE_BYTES, text, len);
		if (err)
			o1_err("model.chat_template %s: %s", override,
			       o1_strerror(err));
		snprintf(source, cap, "%s", override);
		return err;
	}
	if (!v || !v->chat_template) {
		o1_warn("%s has no chat template: chat requests are refused "
			"(send a prompt, or set model.chat_template to a "
			".jinja file)",
			model_path);
		return -O1_E_MISSING;
	}
	*text = strdup(v->chat_template);
	*len = *text ? strlen(*text) : 0;
	snprintf(source, cap, "the chat template in %s", model_path);
	return *text ? 0 : -ENOMEM;
}

int o1_chat_template_load(const struct o1_vocab *v, const char *model_path,
			  const char *override, struct o1_chat_template **out)
{
	struct o1_jinja_error e;
	char source[1200], *text = NULL;
	size_t len = 0;
	int ret;

	*out = NULL;
	ret = load_text(v, model_path, override, &text, &len, source,
			sizeof(source));
	if (ret)
		return ret;
	ret = o1_chat_template_create(
	    text, len, source, v ? token_text(v, v->bos_id) : NULL,
	    v ? token_text(v, v->eos_id) : NULL, out, &e);
	if (ret == -O1_E_FORMAT && override && override[0])
		o1_err("model.chat_template %s:%u:%u: the template does not "
		       "parse: %s",
		       override, e.line, e.col, e.msg);
	else if (ret == -O1_E_FORMAT)
		o1_err("%s, line %u, column %u: %s -- chat requests are refused; "
		       "set model.chat_template to a .jinja file to use another "
		       "template",
		       source, e.line, e.col, e.msg);
	else if (!ret)
		o1_info("chat template: %s (%s family, %zu bytes, tool calls: "
			"%s)",
			source, o1_chat_family_name((*out)->family), len,
			o1_tool_format_name((*out)->tools));
	free(text);
	return ret;
}

/* Adds KEY to OBJ as a reference to ITEM, or as a new value MADE when
 * ITEM is NULL. */
static bool add_var(cJSON *obj, const char *key, const cJSON *item,
		    cJSON *made)
{
	if (item) {
		cJSON_Delete(made);
		return cJSON_AddItemReferenceToObject(obj, key, (cJSON *)item);
	}
	return made && cJSON_AddItemToObject(obj, key, made);
}

/* VARS' members as references, plus transformers' defaults for what VARS
 * lacks. */
static cJSON *full_vars(const struct o1_chat_template *ct, const cJSON *vars)
{
	cJSON *all = cJSON_CreateObject();
	bool ok = all != NULL;

	for (const cJSON *it = vars ? vars->child : NULL; ok && it;
	     it = it->next)
		ok = it->string && cJSON_AddItemReferenceToObject(
				       all, it->string, (cJSON *)it);
	ok = ok &&
	     add_var(all, "bos_token", cJSON_GetObjectItem(vars, "bos_token"),
		     cJSON_CreateString(ct->bos)) &&
	     add_var(all, "eos_token", cJSON_GetObjectItem(vars, "eos_token"),
		     cJSON_CreateString(ct->eos)) &&
	     add_var(all, "tools", cJSON_GetObjectItem(vars, "tools"),
		     cJSON_CreateNull()) &&
	     add_var(all, "documents", cJSON_GetObjectItem(vars, "documents"),
		     cJSON_CreateNull()) &&
	     add_var(all, "add_generation_prompt",
		     cJSON_GetObjectItem(vars, "add_generation_prompt"),
		     cJSON_CreateFalse());
	if (!ok) {
		cJSON_Delete(all);
		return NULL;
	}
	return all;
}

int o1_chat_template_render_vars(const struct o1_chat_template *ct,
				 const cJSON *vars, char **out, size_t *len,
				 struct o1_jinja_error *err)
{
	cJSON *all;
	int ret;

	*out = NULL;
	*len = 0;
	if (vars && !cJSON_IsObject(vars))
		return -EINVAL;
	all = full_vars(ct, vars);
	if (!all)
		return -ENOMEM;
	ret = o1_jinja_render(ct->jinja, all, NULL, out, len, err);
	cJSON_Delete(all);
	return ret;
}

static cJSON *messages_json(const struct o1_chat_message *msgs, size_t n,
			    struct o1_jinja_error *err)
{
	cJSON *arr = cJSON_CreateArray(), *m;

	for (size_t i = 0; arr && i < n; i++) {
		if (!msgs[i].role || !msgs[i].content) {
			if (err) {
				err->kind = O1_JINJA_ERR_RUNTIME;
				snprintf(err->msg, sizeof(err->msg),
					 "message %zu has no %s", i,
					 msgs[i].role ? "content" : "role");
			}
			cJSON_Delete(arr);
			return NULL;
		}
		m = cJSON_CreateObject();
		if (!m || !cJSON_AddItemToArray(arr, m) ||
		    !cJSON_AddStringToObject(m, "role", msgs[i].role) ||
		    !cJSON_AddStringToObject(m, "content", msgs[i].content)) {
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}

int o1_chat_template_render(const struct o1_chat_template *ct,
			    const struct o1_chat_message *msgs, size_t n,
			    bool add_generation_prompt, char *out, size_t cap,
			    struct o1_jinja_error *err)
{
	cJSON *vars = cJSON_CreateObject(), *arr;
	char *text = NULL;
	size_t len = 0;
	int ret = -ENOMEM;

	if (err)
		memset(err, 0, sizeof(*err));
	if (!vars)
		return -ENOMEM;
	arr = messages_json(msgs, n, err);
	if (!arr) {
		ret = err && err->msg[0] ? -EINVAL : -ENOMEM;
		goto out;
	}
	cJSON_AddItemToObject(vars, "messages", arr);
	if (!cJSON_AddBoolToObject(vars, "add_generation_prompt",
				   add_generation_prompt))
		goto out;
	ret = o1_chat_template_render_vars(ct, vars, &text, &len, err);
	if (ret)
		goto out;
	if (len > INT32_MAX) {
		ret = -O1_E_BOUNDS;
		goto out;
	}
	if (out && cap) {
		memcpy(out, text, len < cap ? len : cap - 1);
		out[len < cap ? len : cap - 1] = 0;
	}
	ret = (int)len;
out:
	free(text);
	cJSON_Delete(vars);
	return ret;
}

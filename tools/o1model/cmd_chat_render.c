/* o1model chat-render: renders a chat with a model's template (or a
 * .jinja file) exactly as o1d would, and prints the text with nothing
 * added, so it can be compared byte for byte with transformers'
 * apply_chat_template(tokenize=False). A template error (raise_exception
 * included) goes to stderr with exit 1; exit 2 for bad arguments.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/file.h"
#include "model/vocab.h"
#include "o1model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab_gpt2.h"

#define JSON_MAX_BYTES (64u << 20)
#define TEMPLATE_MAX_BYTES (4u << 20)

struct render_args {
	const char *source, *messages, *tools, *bos, *eos;
	bool no_gen;
	cJSON *vars; /* --var NAME=JSON */
};

static void render_usage(FILE *f)
{
	fprintf(f,
		"usage: o1model chat-render MODEL|TEMPLATE --messages FILE "
		"[--tools FILE]\n"
		"       [--no-generation-prompt] [--bos-token S] "
		"[--eos-token S] [--var NAME=JSON]...\n"
		"MODEL: a .gguf file, a Hugging Face folder or its "
		"tokenizer.json (the chat\ntemplate and special tokens); "
		"TEMPLATE: a Jinja file. "
		"FILE: JSON, a list of messages or an object\nof variables. "
		"Prints the rendering as is (no newline added).\n");
}

static cJSON *read_json(const char *path)
{
	char *text;
	size_t len;
	cJSON *j;

	if (o1_file_read(path, JSON_MAX_BYTES, &text, &len)) {
		fprintf(stderr, "o1model chat-render: cannot read %s\n", path);
		return NULL;
	}
	j = cJSON_ParseWithLength(text, len);
	if (!j)
		fprintf(stderr, "o1model chat-render: %s is not JSON\n", path);
	free(text);
	return j;
}

/* The variables: the messages file (a list, or an object of variables),
 * the tools file, the --var pairs and the generation prompt flag. */
static cJSON *build_vars(struct render_args *a)
{
	cJSON *m = read_json(a->messages), *vars, *t;

	if (!m)
		return NULL;
	if (cJSON_IsArray(m)) {
		vars = cJSON_CreateObject();
		cJSON_AddItemToObject(vars, "messages", m);
	} else {
		vars = m;
	}
	if (a->tools) {
		if (!(t = read_json(a->tools))) {
			cJSON_Delete(vars);
			return NULL;
		}
		cJSON_DeleteItemFromObject(vars, "tools");
		cJSON_AddItemToObject(vars, "tools", t);
	}
	while (a->vars && a->vars->child) {
		t = cJSON_DetachItemViaPointer(a->vars, a->vars->child);
		cJSON_DeleteItemFromObject(vars, t->string);
		cJSON_AddItemToObject(vars, t->string, t);
	}
	if (!cJSON_GetObjectItem(vars, "add_generation_prompt"))
		cJSON_AddBoolToObject(vars, "add_generation_prompt", !a->no_gen);
	if (a->bos) {
		cJSON_DeleteItemFromObject(vars, "bos_token");
		cJSON_AddStringToObject(vars, "bos_token", a->bos);
	}
	if (a->eos) {
		cJSON_DeleteItemFromObject(vars, "eos_token");
		cJSON_AddStringToObject(vars, "eos_token", a->eos);
	}
	return vars;
}

static bool is_model(const char *path)
{
	struct stat st;
	size_t n = strlen(path);

	return (!stat(path, &st) && S_ISDIR(st.st_mode)) ||
	       (n > 5 && !strcmp(path + n - 5, ".gguf")) ||
	       (n > 5 && !strcmp(path + n - 5, ".json"));
}

/* The template of SOURCE: a model's own, or a Jinja file's text. */
static int open_template(const char *source, struct o1_chat_template **out)
{
	struct o1_jinja_error err;
	struct o1_vocab *v;
	char *text;
	size_t len;
	int ret;

	if (is_model(source)) {
		ret = o1_vocab_load_any(source, &v);
		if (ret) {
			fprintf(stderr, "o1model chat-render: %s: %s\n", source,
				o1_strerror(ret));
			return ret;
		}
		ret = o1_chat_template_load(v, source, NULL, out);
		o1_vocab_destroy(v);
		return ret;
	}
	ret = o1_file_read(source, TEMPLATE_MAX_BYTES, &text, &len);
	if (ret) {
		fprintf(stderr, "o1model chat-render: %s: %s\n", source,
			o1_strerror(ret));
		return ret;
	}
	ret = o1_chat_template_create(text, len, source, NULL, NULL, out, &err);
	if (ret == -O1_E_FORMAT)
		fprintf(stderr, "%s:%u:%u: %s\n", source, err.line, err.col,
			err.msg);
	free(text);
	return ret;
}

static int render(struct render_args *a)
{
	struct o1_chat_template *ct;
	struct o1_jinja_error err;
	cJSON *vars;
	char *out;
	size_t len;
	int ret;

	if (open_template(a->source, &ct))
		return 1;
	vars = build_vars(a);
	ret = vars ? o1_chat_template_render_vars(ct, vars, &out, &len, &err)
		   : -EINVAL;
	if (!ret) {
		fwrite(out, 1, len, stdout);
		free(out);
	} else if (vars) {
		fprintf(stderr, "%s%s:%u:%u: %s\n",
			err.kind == O1_JINJA_ERR_RAISED ? "TemplateError: " : "",
			o1_chat_template_source(ct), err.line, err.col,
			err.msg);
	}
	cJSON_Delete(vars);
	o1_chat_template_destroy(ct);
	return ret ? 1 : 0;
}

/* NAME=JSON into A->vars; false when malformed. */
static bool add_var(struct render_args *a, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char name[128];
	cJSON *v;

	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(name))
		return false;
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = 0;
	v = cJSON_Parse(eq + 1);
	if (!v)
		return false;
	if (!a->vars)
		a->vars = cJSON_CreateObject();
	cJSON_DeleteItemFromObject(a->vars, name);
	cJSON_AddItemToObject(a->vars, name, v);
	return true;
}

static int parse_args(int argc, char **argv, struct render_args *a)
{
	static const struct option longopts[] = {
	    {"messages", required_argument, NULL, 'm'},
	    {"tools", required_argument, NULL, 't'},
	    {"no-generation-prompt", no_argument, NULL, 'n'},
	    {"bos-token", required_argument, NULL, 'b'},
	    {"eos-token", required_argument, NULL, 'e'},
	    {"var", required_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int opt;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm': a->messages = optarg; break;
		case 't': a->tools = optarg; break;
		case 'n': a->no_gen = true; break;
		case 'b': a->bos = optarg; break;
		case 'e': a->eos = optarg; break;
		case 'v':
			if (add_var(a, optarg))
				break;
			fprintf(stderr, "o1model chat-render: --var wants "
					"NAME=JSON, not '%s'\n", optarg);
			return 2;
		case 'h': render_usage(stdout); return 0;
		default: render_usage(stderr); return 2;
		}
	}
	if (argc - optind != 1 || !a->messages) {
		fprintf(stderr, "o1model chat-render: expected MODEL|TEMPLATE "
				"and --messages FILE\n");
		render_usage(stderr);
		return 2;
	}
	a->source = argv[optind];
	return -1;
}

int o1model_cmd_chat_render(int argc, char **argv)
{
	struct render_args a = {0};
	int ret = parse_args(argc, argv, &a);

	if (ret < 0)
		ret = render(&a);
	cJSON_Delete(a.vars);
	return ret;
}

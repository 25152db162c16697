/* Chat template tests: the family table, templates parsed and rendered
 * with transformers' variables (four real templates, as they ship in
 * ../shared/testdata/chat/templates.json, each expected text being what
 * transformers renders for it), template errors with their message, the
 * buffer contract, and loading: the model's template, an override file,
 * none, and one that does not parse.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/log.h"
#include "tok_fixture.h"
#include "tokenizer/chat_template.h"

#define MSGS(...)                                                              \
	(const struct o1_chat_message[]){__VA_ARGS__},                         \
	    sizeof((const struct o1_chat_message[]){__VA_ARGS__}) /            \
		sizeof(struct o1_chat_message)

static const char tmpl_qwen2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['rol"
    "e'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assist"
    "ant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] "
    "+ '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% "
    "if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif"
    " %}";
static const char tmpl_llama3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages "
    "%}{% set content = '<|start_header_id|>' + message['role'] + '<|en"
    "d_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% "
    "if loop.index0 == 0 %}{% set content = bos_token + content %}{% en"
    "dif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<"
    "|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
static const char tmpl_llama2[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = mes"
    "sages[1:] %}{% set system_message = messages[0]['content'] %}{% el"
    "se %}{% set loop_messages = messages %}{% set system_message = fal"
    "se %}{% endif %}{% for message in loop_messages %}{% if (message['"
    "role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('"
    "Conversation roles must alternate user/assistant/user/assistant/.."
    ".') }}{% endif %}{% if loop.index0 == 0 and system_message != fals"
    "e %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>"
    "\\n\\n' + message['content'] %}{% else %}{% set content = message["
    "'content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_t"
    "oken + '[INST] ' + content | trim + ' [/INST]' }}{% elif message['"
    "role'] == 'assistant' %}{{ ' '  + content | trim + ' ' + eos_token"
    " }}{% endif %}{% endfor %}";
static const char tmpl_mistral[] =
    "{{ bos_token }}{% for message in messages %}{% if (message['role']"
    " == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conver"
    "sation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + messag"
    "e['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant'"
    " %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception"
    "('Only user and assistant roles are supported!') }}{% endif %}{% e"
    "ndfor %}";

static struct o1_chat_template *make(const char *tmpl, const char *bos,
				     const char *eos)
{
	struct o1_chat_template *ct;

	assert_int_equal(o1_chat_template_create(tmpl, strlen(tmpl), "test",
						 bos, eos, &ct, NULL),
			 0);
	return ct;
}

static void expect(const struct o1_chat_template *ct,
		   const struct o1_chat_message *m, size_t n, bool gen,
		   const char *want)
{
	char out[1024];

	assert_int_equal(
	    o1_chat_template_render(ct, m, n, gen, out, sizeof(out), NULL),
	    (int)strlen(want));
	assert_string_equal(out, want);
}

static void test_families(void **state)
{
	static const struct {
		const char *text;
		enum o1_chat_family f;
	} cases[] = {
	    {tmpl_qwen2, O1_CHAT_CHATML},
	    {tmpl_llama3, O1_CHAT_LLAMA3},
	    {tmpl_llama2, O1_CHAT_LLAMA2},
	    {tmpl_mistral, O1_CHAT_MISTRAL},
	    {"{{ '<start_of_turn>' + role }}", O1_CHAT_GEMMA},
	    {"{{ '<|user|>\\n' + c + '<|end|>' }}", O1_CHAT_PHI3},
	    {"{{ '<|user|>\\n' + c + eos_token }}", O1_CHAT_ZEPHYR},
	    {"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", O1_CHAT_COMMAND_R},
	    {"<|start|>user<|message|>", O1_CHAT_HARMONY},
	    {"<\xef\xbd\x9cUser\xef\xbd\x9c>", O1_CHAT_DEEPSEEK},
	    {"{{ messages }}", O1_CHAT_OTHER},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(o1_chat_family_detect(cases[i].text),
				 cases[i].f);
	assert_int_equal(o1_chat_family_detect(NULL), O1_CHAT_OTHER);
	assert_string_equal(o1_chat_family_name(O1_CHAT_MISTRAL), "mistral");
	assert_string_equal(o1_chat_family_name(O1_CHAT_OTHER), "other");
	assert_null(o1_chat_family_name(O1_CHAT_N));
	for (int f = 0; f < O1_CHAT_N; f++)
		assert_non_null(o1_chat_family_name((enum o1_chat_family)f));
}

static void test_chatml(void **state)
{
	struct o1_chat_template *ct = make(tmpl_qwen2, NULL, NULL);

	(void)state;
	assert_int_equal(o1_chat_template_family(ct), O1_CHAT_CHATML);
	assert_int_equal(o1_chat_template_tool_format(ct), O1_TOOL_NONE);
	assert_string_equal(o1_chat_template_source(ct), "test");
	expect(ct, MSGS({"user", "Hi"}), true,
	       "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
	       "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
	expect(ct, MSGS({"system", "S"}, {"user", "Hi"}), false,
	       "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi"
	       "<|im_end|>\n");
	o1_chat_template_destroy(ct);
}

/* bos_token comes from the template's creator. */
static void test_llama3(void **state)
{
	struct o1_chat_template *ct =
	    make(tmpl_llama3, "<|begin_of_text|>", "<|eot_id|>");

	(void)state;
	expect(ct, MSGS({"system", "S"}, {"user", " Hi \n"}), true,
	       "<|begin_of_text|><|start_header_id|>system<|end_header_id|>"
	       "\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
	       "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
	       "\n\n");
	o1_chat_template_destroy(ct);
}

/* A template's raise_exception comes back as -EINVAL with its text. */
static void test_llama2(void **state)
{
	struct o1_chat_template *ct = make(tmpl_llama2, "<s>", "</s>");
	struct o1_jinja_error err;

	(void)state;
	expect(ct,
	       MSGS({"system", "S"}, {"user", "Hi "}, {"assistant", "Hello"},
		    {"user", "Bye"}),
	       true,
	       "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST] Hello </s><s>"
	       "[INST] Bye [/INST]");
	assert_int_equal(o1_chat_template_render(
			     ct, MSGS({"user", "a"}, {"user", "b"}), true,
			     NULL, 0, &err),
			 -EINVAL);
	assert_int_equal(err.kind, O1_JINJA_ERR_RAISED);
	assert_string_equal(err.msg, "Conversation roles must alternate "
				     "user/assistant/user/assistant/...");
	o1_chat_template_destroy(ct);
}

static void test_mistral(void **state)
{
	struct o1_chat_template *ct = make(tmpl_mistral, "<s>", "</s>");
	struct o1_jinja_error err;

	(void)state;
	expect(ct,
	       MSGS({"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}),
	       true, "<s>[INST] Hi [/INST]Hello</s>[INST] Bye [/INST]");
	assert_int_equal(o1_chat_template_render(
			     ct, MSGS({"system", "S"}, {"user", "Hi"}), true,
			     NULL, 0, &err),
			 -EINVAL);
	assert_int_equal(err.kind, O1_JINJA_ERR_RAISED);
	o1_chat_template_destroy(ct);
}

/* snprintf's contract: the length is returned whatever fits. */
static void test_buffer(void **state)
{
	struct o1_chat_template *ct = make(tmpl_mistral, "<s>", "</s>");
	struct o1_jinja_error err;
	char out[8];

	(void)state;
	assert_int_equal(o1_chat_template_render(ct, MSGS({"user", "Hi"}),
						 true, out, sizeof(out), NULL),
			 20);
	assert_string_equal(out, "<s>[INS");
	assert_int_equal(o1_chat_template_render(ct, MSGS({"user", "Hi"}),
						 true, NULL, 0, NULL),
			 20);
	assert_int_equal(o1_chat_template_render(ct, MSGS({"user", NULL}),
						 true, out, sizeof(out), &err),
			 -EINVAL);
	assert_string_equal(err.msg, "message 0 has no content");
	o1_chat_template_destroy(ct);
}

/* tools, documents and extra variables reach the template; the
 * defaults are transformers' (tools and documents none). */
static void test_render_vars(void **state)
{
	static const char tmpl[] =
	    "{{ bos_token }}{{ tools is none }}{{ documents is none }}"
	    "{% if tools %}{{ tools|map(attribute='function.name')|join(',') }}"
	    "{% endif %}{{ enable_thinking is defined }}"
	    "{{ add_generation_prompt }}{{ messages|length }}";
	struct o1_chat_template *ct = make(tmpl, "<B>", "<E>");
	cJSON *vars = cJSON_Parse("{\"messages\": []}");
	char *out;
	size_t len;

	(void)state;
	assert_int_equal(
	    o1_chat_template_render_vars(ct, vars, &out, &len, NULL), 0);
	assert_string_equal(out, "<B>TrueTrueFalseFalse0");
	free(out);
	cJSON_Delete(vars);
	vars = cJSON_Parse(
	    "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}],"
	    " \"tools\": [{\"function\": {\"name\": \"a\"}}, {\"function\":"
	    " {\"name\": \"b\"}}], \"enable_thinking\": false,"
	    " \"add_generation_prompt\": true, \"bos_token\": \"[b]\"}");
	assert_int_equal(
	    o1_chat_template_render_vars(ct, vars, &out, &len, NULL), 0);
	assert_string_equal(out, "[b]FalseTruea,bTrueTrue1");
	assert_int_equal(len, strlen(out));
	free(out);
	cJSON_Delete(vars);
	o1_chat_template_destroy(ct);
}

static void test_create_errors(void **state)
{
	static const char bad[] = "{% for m in messages %}\n{{ m.x }";
	struct o1_chat_template *ct;
	struct o1_jinja_error err;

	(void)state;
	assert_int_equal(o1_chat_template_create(bad, strlen(bad), "bad", NULL,
						 NULL, &ct, &err),
			 -O1_E_FORMAT);
	assert_null(ct);
	assert_int_equal(err.line, 2);
	assert_non_null(strstr(err.msg, "unexpected '}'"));
}

static char *temp_file(const char *text)
{
	static char path[64];
	FILE *f;
	int fd;

	strcpy(path, "/tmp/o1_test_chat_XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* The model's own template, an override file in its place, none at all,
 * and templates that do not parse. */
static void test_load(void **state)
{
	struct o1_chat_template *ct;
	struct o1_vocab *v;
	char *path;

	(void)state;
	assert_int_equal(tok_fixture_spm(&v), 0);
	assert_int_equal(o1_chat_template_load(v, "m.gguf", NULL, &ct),
			 -O1_E_MISSING);
	assert_null(ct);
	v->chat_template = strdup(tmpl_mistral);
	assert_int_equal(o1_chat_template_load(v, "m.gguf", "", &ct), 0);
	expect(ct, MSGS({"user", "Hi"}), true, "<s>[INST] Hi [/INST]");
	assert_non_null(strstr(o1_chat_template_source(ct), "m.gguf"));
	o1_chat_template_destroy(ct);
	path = temp_file("{{ bos_token }}|{{ messages[0].content }}|");
	assert_int_equal(o1_chat_template_load(v, "m.gguf", path, &ct), 0);
	expect(ct, MSGS({"user", "Hi"}), true, "<s>|Hi|");
	assert_string_equal(o1_chat_template_source(ct), path);
	assert_int_equal(o1_chat_template_family(ct), O1_CHAT_OTHER);
	o1_chat_template_destroy(ct);
	unlink(path);
	assert_int_equal(o1_chat_template_load(v, "m.gguf", path, &ct),
			 -ENOENT);
	path = temp_file("{% if %}");
	assert_int_equal(o1_chat_template_load(v, "m.gguf", path, &ct),
			 -O1_E_FORMAT);
	unlink(path);
	free(v->chat_template);
	v->chat_template = strdup("{{ x");
	assert_int_equal(o1_chat_template_load(v, "m.gguf", NULL, &ct),
			 -O1_E_FORMAT);
	assert_null(ct);
	o1_vocab_destroy(v);
	o1_chat_template_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_families),	 cmocka_unit_test(test_chatml),
	    cmocka_unit_test(test_llama3),	 cmocka_unit_test(test_llama2),
	    cmocka_unit_test(test_mistral),	 cmocka_unit_test(test_buffer),
	    cmocka_unit_test(test_render_vars),
	    cmocka_unit_test(test_create_errors), cmocka_unit_test(test_load),
	};

	o1_log_set_level(O1_LOG_ERROR + 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

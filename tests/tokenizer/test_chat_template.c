/* Chat template tests: each family recognised from its markers, a named
 * family overriding the text, errors for unknown or missing templates,
 * the exact prompt of each family, bad roles and the buffer contract. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/chat_template.h"
#include "common/error.h"
#include "common/log.h"

#define MSGS(...)                                                              \
	(const struct o1_chat_message[]){__VA_ARGS__},                         \
	    sizeof((const struct o1_chat_message[]){__VA_ARGS__}) /            \
		sizeof(struct o1_chat_message)

static const char tmpl_qwen2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role']"
    " != 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant."
    "<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + "
    "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
static const char tmpl_llama3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}";
static const char tmpl_llama2[] =
    "{% if messages[0]['role'] == 'system' %}... '<<SYS>>\\n' + "
    "system_message + '\\n<</SYS>>\\n\\n' ... bos_token + '[INST] ' + "
    "content.strip() + ' [/INST]'";
static const char tmpl_mistral[] =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == "
    "'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}";

static void expect(const struct o1_chat_template *ct,
		   const struct o1_chat_message *m, size_t n, bool gen,
		   const char *want)
{
	char out[1024];

	assert_int_equal(
	    o1_chat_template_render(ct, m, n, gen, out, sizeof(out)),
	    (int)strlen(want));
	assert_string_equal(out, want);
}

static void test_recognise(void **state)
{
	struct o1_chat_template ct;

	(void)state;
	assert_int_equal(o1_chat_template_init(&ct, tmpl_qwen2, NULL), 0);
	assert_int_equal(ct.family, O1_CHAT_CHATML);
	assert_string_equal(ct.default_system, "You are a helpful assistant.");
	assert_int_equal(o1_chat_template_init(&ct, tmpl_llama3, NULL), 0);
	assert_int_equal(ct.family, O1_CHAT_LLAMA3);
	assert_int_equal(o1_chat_template_init(&ct, tmpl_llama2, NULL), 0);
	assert_int_equal(ct.family, O1_CHAT_LLAMA2);
	assert_int_equal(o1_chat_template_init(&ct, tmpl_mistral, NULL), 0);
	assert_int_equal(ct.family, O1_CHAT_MISTRAL);
	assert_null(ct.default_system);
	assert_int_equal(o1_chat_template_init(&ct, "{{ messages }}", NULL),
			 -O1_E_UNSUPPORTED);
	/* Mistral v0.3 puts no space before [/INST]: not the built-in one */
	assert_int_equal(
	    o1_chat_template_init(&ct, "{{ '[INST] ' + m + '[/INST]' }}", NULL),
	    -O1_E_UNSUPPORTED);
	assert_int_equal(o1_chat_template_init(&ct, NULL, NULL), -O1_E_MISSING);
	assert_int_equal(o1_chat_template_init(&ct, "{{ x }}", "llama3"), 0);
	assert_int_equal(ct.family, O1_CHAT_LLAMA3);
	assert_int_equal(o1_chat_template_init(&ct, tmpl_llama3, "qwen"), 0);
	assert_int_equal(ct.family, O1_CHAT_CHATML);
	assert_int_equal(o1_chat_template_init(&ct, NULL, "vicuna"),
			 -O1_E_UNSUPPORTED);
	assert_string_equal(o1_chat_template_family_name(O1_CHAT_MISTRAL),
			    "mistral");
	assert_null(o1_chat_template_family_name(O1_CHAT_N));
}

static void test_chatml(void **state)
{
	struct o1_chat_template ct;

	(void)state;
	assert_int_equal(o1_chat_template_init(&ct, NULL, "chatml"), 0);
	expect(&ct, MSGS({"system", "S"}, {"user", "Hi"}), true,
	       "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi"
	       "<|im_end|>\n<|im_start|>assistant\n");
	expect(&ct, MSGS({"user", "Hi"}), false,
	       "<|im_start|>user\nHi<|im_end|>\n");
	assert_int_equal(o1_chat_template_init(&ct, tmpl_qwen2, NULL), 0);
	expect(&ct, MSGS({"user", "Hi"}), true,
	       "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
	       "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

static void test_llama3(void **state)
{
	struct o1_chat_template ct;

	(void)state;
	assert_int_equal(o1_chat_template_init(&ct, tmpl_llama3, NULL), 0);
	expect(&ct, MSGS({"system", "S"}, {"user", " Hi \n"}), true,
	       "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
	       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
	       "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_llama31(void **state)
{
	static const char tmpl[] =
	    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}"
	    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}";
	struct o1_chat_template ct;

	(void)state;
	assert_int_equal(o1_chat_template_init(&ct, tmpl, NULL), 0);
	assert_int_equal(ct.family, O1_CHAT_LLAMA3);
	expect(
	    &ct, MSGS({"user", "Hi"}), true,
	    "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
	    "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
	    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
	    "<|start_header_id|>assistant<|end_header_id|>\n\n");
	expect(
	    &ct, MSGS({"system", " S "}, {"user", "Hi"}), false,
	    "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
	    "Date: December 2023\nToday Date: 26 Jul 2024\n\nS<|eot_id|>"
	    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

static void test_llama2(void **state)
{
	struct o1_chat_template ct;

	(void)state;
	assert_int_equal(o1_chat_template_init(&ct, tmpl_llama2, NULL), 0);
	expect(&ct,
	       MSGS({"system", "S"}, {"user", "Hi "}, {"assistant", "Hello"},
		    {"user", "Bye"}),
	       true,
	       "[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] "
	       "Bye [/INST]");
	expect(&ct, MSGS({"user", " Hi"}), true, "[INST] Hi [/INST]");
	assert_int_equal(
	    o1_chat_template_render(&ct, MSGS({"user", "a"}, {"tool", "b"}),
				    true, NULL, 0),
	    -EINVAL);
}

static void test_mistral(void **state)
{
	struct o1_chat_template ct;

	(void)state;
	assert_int_equal(o1_chat_template_init(&ct, tmpl_mistral, NULL), 0);
	expect(&ct,
	       MSGS({"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}),
	       true, "[INST] Hi [/INST]Hello</s>[INST] Bye [/INST]");
	expect(&ct, MSGS({"system", "S"}, {"user", "Hi"}), true,
	       "[INST] S\n\nHi [/INST]");
	assert_int_equal(
	    o1_chat_template_render(&ct, MSGS({"user", "a"}, {"system", "b"}),
				    true, NULL, 0),
	    -EINVAL);
}

static void test_buffer(void **state)
{
	struct o1_chat_template ct;
	char out[8];

	(void)state;
	assert_int_equal(o1_chat_template_init(&ct, NULL, "mistral"), 0);
	assert_int_equal(o1_chat_template_render(&ct, MSGS({"user", "Hi"}),
						 true, out, sizeof(out)),
			 17);
	assert_string_equal(out, "[INST] ");
	assert_int_equal(o1_chat_template_render(&ct, MSGS({"user", NULL}),
						 true, out, sizeof(out)),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_recognise), cmocka_unit_test(test_chatml),
	    cmocka_unit_test(test_llama3),
	    cmocka_unit_test(test_llama31),    cmocka_unit_test(test_llama2),
	    cmocka_unit_test(test_mistral),   cmocka_unit_test(test_buffer),
	};

	o1_log_set_level(O1_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

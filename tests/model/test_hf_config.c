/* config.json parsing against the test models' configs and real-world
 * shapes (Llama-3 rope scaling, Qwen2.5 yarn, transformers-5
 * rope_parameters), every missing key / wrong type / bad value, the
 * generation_config.json override, and writer -> parser round trips. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/error.h"
#include "model/hf_config.h"
#include "tests/common/test_util.h"

/* qwen2-tiny's config.json as transformers 5.17 wrote it. */
static const char qwen2_tiny[] =
    "{\"architectures\":[\"Qwen2ForCausalLM\"],\"attention_dropout\":0.0,"
    "\"bos_token_id\":null,\"dtype\":\"float32\",\"eos_token_id\":null,"
    "\"hidden_act\":\"silu\",\"hidden_size\":64,\"initializer_range\":0.02,"
    "\"intermediate_size\":128,\"layer_types\":[\"full_attention\","
    "\"full_attention\"],\"max_position_embeddings\":512,"
    "\"max_window_layers\":28,\"model_type\":\"qwen2\","
    "\"num_attention_heads\":4,\"num_hidden_layers\":2,"
    "\"num_key_value_heads\":2,\"pad_token_id\":null,\"rms_norm_eps\":1e-06,"
    "\"rope_parameters\":{\"rope_theta\":1000000.0,\"rope_type\":"
    "\"default\"},\"sliding_window\":null,\"tie_word_embeddings\":true,"
    "\"use_cache\":true,\"use_sliding_window\":false,\"vocab_size\":512}";

/* A Llama-3.2-1B style config (transformers 4 shape). */
static const char llama32[] =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"attention_bias\":false,"
    "\"bos_token_id\":128000,\"eos_token_id\":[128001,128008,128009],"
    "\"head_dim\":64,\"hidden_act\":\"silu\",\"hidden_size\":2048,"
    "\"intermediate_size\":8192,\"max_position_embeddings\":131072,"
    "\"mlp_bias\":false,\"model_type\":\"llama\",\"num_attention_heads\":32,"
    "\"num_hidden_layers\":16,\"num_key_value_heads\":8,"
    "\"rms_norm_eps\":1e-05,\"rope_scaling\":{\"factor\":32.0,"
    "\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
    "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},"
    "\"rope_theta\":500000.0,\"tie_word_embeddings\":true,"
    "\"vocab_size\":128256}";

static int parse(const char *json, struct o1_model_desc *d)
{
	return o1_hf_config_parse(json, strlen(json), "test", d);
}

static void test_qwen2_tiny(void **state)
{
	struct o1_model_desc d;

	(void)state;
	assert_int_equal(parse(qwen2_tiny, &d), 0);
	assert_int_equal(d.arch, O1_ARCH_QWEN2);
	assert_int_equal(d.vocab_size, 512);
	assert_int_equal(d.dim, 64);
	assert_int_equal(d.n_layers, 2);
	assert_int_equal(d.n_heads, 4);
	assert_int_equal(d.n_kv_heads, 2);
	assert_int_equal(d.head_dim, 16);
	assert_int_equal(d.rope.dim, 16);
	assert_int_equal(d.ffn_dim, 128);
	assert_int_equal(d.max_context_tokens, 512);
	assert_true(d.qkv_bias);
	assert_true(d.tied_embeddings);
	assert_true(d.rope.theta == 1e6f);
	assert_true(d.norm_eps == 1e-6f);
	assert_int_equal(d.rope.scaling, O1_ROPE_SCALING_NONE);
	assert_int_equal(d.bos_id, -1);
	assert_int_equal(d.eos_id, -1);
}

static void test_llama32(void **state)
{
	struct o1_model_desc d;

	(void)state;
	assert_int_equal(parse(llama32, &d), 0);
	assert_int_equal(d.arch, O1_ARCH_LLAMA);
	assert_int_equal(d.head_dim, 64);
	assert_false(d.qkv_bias);
	assert_true(d.tied_embeddings);
	assert_true(d.rope.theta == 500000.0f);
	assert_int_equal(d.rope.scaling, O1_ROPE_SCALING_LLAMA3);
	assert_true(d.rope.factor == 32.0f);
	assert_true(d.rope.low_freq_factor == 1.0f);
	assert_true(d.rope.high_freq_factor == 4.0f);
	assert_int_equal(d.rope.original_max_positions, 8192);
	assert_int_equal(d.bos_id, 128000);
	assert_int_equal(d.eos_id, 128001);
	assert_int_equal(d.max_context_tokens, 131072);
}

/* Parses BASE with KEY set to VALUE (JSON text; NULL deletes KEY). */
static int parse_with(const char *base, const char *key, const char *value,
		      struct o1_model_desc *d)
{
	cJSON *root = cJSON_Parse(base);
	char *text;
	int err;

	assert_non_null(root);
	cJSON_DeleteItemFromObjectCaseSensitive(root, key);
	if (value)
		assert_true(
		    cJSON_AddItemToObject(root, key, cJSON_Parse(value)));
	text = cJSON_PrintUnformatted(root);
	err = parse(text, d);
	free(text);
	cJSON_Delete(root);
	return err;
}

static void test_missing_keys(void **state)
{
	static const char *const required[] = {
	    "hidden_size",	 "num_hidden_layers", "num_attention_heads",
	    "intermediate_size", "vocab_size",
	};
	struct o1_model_desc d;

	(void)state;
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
		assert_int_equal(parse_with(qwen2_tiny, required[i], NULL, &d),
				 -O1_E_MISSING);
		assert_int_equal(
		    parse_with(qwen2_tiny, required[i], "null", &d),
		    -O1_E_MISSING);
	}
	assert_int_equal(parse("{\"hidden_size\":64}", &d), -O1_E_MISSING);
}

static void test_wrong_types(void **state)
{
	static const char *const keys[] = {
	    "hidden_size",
	    "num_hidden_layers",
	    "num_attention_heads",
	    "num_key_value_heads",
	    "intermediate_size",
	    "vocab_size",
	    "max_position_embeddings",
	    "rms_norm_eps",
	    "tie_word_embeddings",
	    "head_dim",
	    "rope_parameters",
	    "rope_scaling",
	    "bos_token_id",
	    "eos_token_id",
	    "rope_theta",
	    "partial_rotary_factor",
	    "hidden_act",
	};
	struct o1_model_desc d;

	(void)state;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		assert_int_equal(parse_with(qwen2_tiny, keys[i], "\"x\"", &d),
				 strcmp(keys[i], "hidden_act") == 0
				     ? -O1_E_UNSUPPORTED
				     : -O1_E_FORMAT);
		if (strcmp(keys[i], "hidden_act") != 0)
			assert_int_equal(
			    parse_with(qwen2_tiny, keys[i], "[[]]", &d),
			    -O1_E_FORMAT);
	}
	assert_int_equal(parse_with(llama32, "attention_bias", "1", &d),
			 -O1_E_FORMAT);
	assert_int_equal(parse_with(qwen2_tiny, "architectures", "{}", &d),
			 -O1_E_FORMAT);
	assert_int_equal(parse("[]", &d), -O1_E_FORMAT);
	assert_int_equal(parse("{\"hidden_size\":", &d), -O1_E_FORMAT);
	assert_int_equal(parse("", &d), -O1_E_FORMAT);
}

static void test_bad_values(void **state)
{
	static const struct {
		const char *key, *value;
	} cases[] = {
	    {"hidden_size", "0"},
	    {"hidden_size", "-64"},
	    {"hidden_size", "64.5"},
	    {"hidden_size", "1e30"},
	    {"num_hidden_layers", "0"},
	    {"num_attention_heads", "0"},
	    {"num_key_value_heads", "3"}, /* 4 % 3 != 0 */
	    {"num_key_value_heads", "8"}, /* more than heads */
	    {"num_key_value_heads", "0"},
	    {"head_dim", "0"},
	    {"head_dim", "4096"},
	    {"head_dim", "15"},
	    {"intermediate_size", "0"},
	    {"vocab_size", "0"},
	    {"vocab_size", "33554432"},
	    {"max_position_embeddings", "0"},
	    {"rms_norm_eps", "0"},
	    {"rms_norm_eps", "-1e-6"},
	    {"rms_norm_eps", "2"},
	    {"rope_theta", "0"},
	    {"rope_theta", "-10000"},
	    {"partial_rotary_factor", "0"},
	    {"partial_rotary_factor", "1.5"},
	    {"partial_rotary_factor", "0.01"}, /* no dims left */
	    {"bos_token_id", "-1"},
	    {"eos_token_id", "[1.5]"},
	    {"eos_token_id", "[null]"},
	    {"bos_token_id", "3000000000"},
	};
	struct o1_model_desc d;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int err =
		    parse_with(qwen2_tiny, cases[i].key, cases[i].value, &d);

		if (err != -O1_E_FORMAT)
			fail_msg("%s = %s gave %d", cases[i].key,
				 cases[i].value, err);
	}
	/* no head_dim and hidden_size not divisible by heads */
	assert_int_equal(parse_with(qwen2_tiny, "hidden_size", "66", &d),
			 -O1_E_FORMAT);
}

static void test_unsupported(void **state)
{
	struct o1_model_desc d;
	static const char *const scalings[] = {
	    "{\"type\":\"dynamic\",\"factor\":2}",
	    "{\"rope_type\":\"longrope\",\"factor\":2}",
	};

	(void)state;
	assert_int_equal(parse_with(qwen2_tiny, "model_type", "\"gpt2\"", &d),
			 0); /* architectures still says Qwen2 */
	assert_int_equal(d.arch, O1_ARCH_QWEN2);
	assert_int_equal(parse("{\"model_type\":\"gemma\",\"architectures\":"
			       "[\"GemmaForCausalLM\"]}",
			       &d),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(parse_with(qwen2_tiny, "hidden_act", "\"gelu\"", &d),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(parse_with(llama32, "mlp_bias", "true", &d),
			 -O1_E_UNSUPPORTED);
	for (int i = 0; i < 2; i++)
		assert_int_equal(
		    parse_with(llama32, "rope_scaling", scalings[i], &d),
		    -O1_E_UNSUPPORTED);
}

static void test_defaults_and_fallbacks(void **state)
{
	struct o1_model_desc d;
	static const char minimal[] =
	    "{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":"
	    "128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
	    "\"intermediate_size\":256,\"vocab_size\":100}";

	(void)state;
	assert_int_equal(parse(minimal, &d), 0);
	assert_int_equal(d.arch, O1_ARCH_MISTRAL);
	assert_int_equal(d.n_kv_heads, 4);
	assert_int_equal(d.head_dim, 32);
	assert_int_equal(d.rope.dim, 32);
	assert_true(d.rope.theta == 10000.0f);
	assert_true(d.norm_eps == 1e-6f);
	assert_false(d.tied_embeddings);
	assert_false(d.qkv_bias);
	assert_int_equal(d.max_context_tokens, 131072);
	assert_int_equal(d.bos_id, -1);
	assert_int_equal(parse_with(llama32, "head_dim", "null", &d), 0);
	assert_int_equal(d.head_dim, 64);
	assert_int_equal(parse_with(llama32, "attention_bias", "true", &d), 0);
	assert_true(d.qkv_bias);
	assert_int_equal(
	    parse_with(llama32, "partial_rotary_factor", "0.5", &d), 0);
	assert_int_equal(d.rope.dim, 32);
	assert_int_equal(parse_with(llama32, "eos_token_id", "[]", &d), 0);
	assert_int_equal(d.eos_id, -1);
	assert_int_equal(parse_with(llama32, "eos_token_id", "7", &d), 0);
	assert_int_equal(d.eos_id, 7);
}

static void test_rope_shapes(void **state)
{
	struct o1_model_desc d;

	(void)state;
	/* legacy "type" key, linear */
	assert_int_equal(parse_with(llama32, "rope_scaling",
				    "{\"type\":\"linear\",\"factor\":2.0}", &d),
			 0);
	assert_int_equal(d.rope.scaling, O1_ROPE_SCALING_LINEAR);
	assert_true(d.rope.factor == 2.0f);
	/* Qwen2.5 yarn: defaults for beta and attention factor */
	assert_int_equal(
	    parse_with(qwen2_tiny, "rope_scaling",
		       "{\"factor\":4.0,\"original_max_position_embeddings\":"
		       "32768,\"type\":\"yarn\"}",
		       &d),
	    0);
	assert_int_equal(d.rope.scaling, O1_ROPE_SCALING_YARN);
	assert_true(d.rope.factor == 4.0f);
	assert_int_equal(d.rope.original_max_positions, 32768);
	assert_true(d.rope.beta_fast == 32.0f && d.rope.beta_slow == 1.0f);
	assert_true(d.rope.attn_factor == 0.0f);
	assert_true(d.rope.theta == 1e6f); /* from rope_parameters */
	/* transformers-5 rope_parameters carrying llama3 scaling */
	assert_int_equal(
	    parse_with(qwen2_tiny, "rope_parameters",
		       "{\"rope_type\":\"llama3\",\"rope_theta\":500000.0,"
		       "\"factor\":8.0,\"low_freq_factor\":1.0,"
		       "\"high_freq_factor\":4.0,"
		       "\"original_max_position_embeddings\":8192}",
		       &d),
	    0);
	assert_int_equal(d.rope.scaling, O1_ROPE_SCALING_LLAMA3);
	assert_true(d.rope.theta == 500000.0f && d.rope.factor == 8.0f);
	/* llama3 without its keys, or with high <= low */
	assert_int_equal(parse_with(llama32, "rope_scaling",
				    "{\"rope_type\":\"llama3\",\"factor\":8}",
				    &d),
			 -O1_E_MISSING);
	assert_int_equal(
	    parse_with(llama32, "rope_scaling",
		       "{\"rope_type\":\"llama3\",\"factor\":8,"
		       "\"low_freq_factor\":4,\"high_freq_factor\":4,"
		       "\"original_max_position_embeddings\":8192}",
		       &d),
	    -O1_E_FORMAT);
	assert_int_equal(parse_with(llama32, "rope_scaling",
				    "{\"rope_type\":\"linear\"}", &d),
			 -O1_E_MISSING);
	assert_int_equal(
	    parse_with(llama32, "rope_scaling", "{\"factor\":2}", &d),
	    -O1_E_MISSING);
	assert_int_equal(parse_with(llama32, "rope_scaling",
				    "{\"rope_type\":\"linear\",\"factor\":-2}",
				    &d),
			 -O1_E_FORMAT);
	assert_int_equal(parse_with(llama32, "rope_scaling", "null", &d), 0);
	assert_int_equal(d.rope.scaling, O1_ROPE_SCALING_NONE);
}

static void assert_desc_equal(const struct o1_model_desc *a,
			      const struct o1_model_desc *b)
{
	o1_test_assert_desc_equal(a, b);
	assert_int_equal(a->arch, b->arch);
	assert_int_equal(a->bos_id, b->bos_id);
	assert_int_equal(a->eos_id, b->eos_id);
	assert_memory_equal(&a->rope.factor, &b->rope.factor, sizeof(float));
	assert_memory_equal(&a->rope.low_freq_factor, &b->rope.low_freq_factor,
			    sizeof(float));
	assert_memory_equal(&a->rope.high_freq_factor,
			    &b->rope.high_freq_factor, sizeof(float));
	assert_int_equal(a->rope.original_max_positions,
			 b->rope.original_max_positions);
	assert_memory_equal(&a->rope.beta_fast, &b->rope.beta_fast,
			    sizeof(float));
	assert_memory_equal(&a->rope.beta_slow, &b->rope.beta_slow,
			    sizeof(float));
	assert_memory_equal(&a->rope.attn_factor, &b->rope.attn_factor,
			    sizeof(float));
}

static void roundtrip(const struct o1_model_desc *d, enum o1_dtype dtype,
		      const char *torch)
{
	struct o1_model_desc back;
	char *text;

	assert_int_equal(o1_hf_config_format(d, dtype, &text), 0);
	assert_non_null(strstr(text, torch));
	assert_int_equal(parse(text, &back), 0);
	free(text);
	assert_desc_equal(d, &back);
}

static void test_writer_roundtrip(void **state)
{
	struct o1_model_desc d;

	(void)state;
	assert_int_equal(parse(qwen2_tiny, &d), 0);
	roundtrip(&d, O1_DTYPE_F32, "\"float32\"");
	assert_int_equal(parse(llama32, &d), 0);
	roundtrip(&d, O1_DTYPE_BF16, "\"bfloat16\"");
	d.norm_eps = 1.2345678e-7f;
	d.rope.theta = 123456.789f;
	d.rope.dim = 48;
	d.qkv_bias = true;
	roundtrip(&d, O1_DTYPE_F16, "\"float16\"");
	assert_int_equal(
	    parse_with(qwen2_tiny, "rope_scaling",
		       "{\"type\":\"yarn\",\"factor\":4.0,"
		       "\"original_max_position_embeddings\":32768,"
		       "\"beta_fast\":16,\"attention_factor\":0.7}",
		       &d),
	    0);
	roundtrip(&d, O1_DTYPE_F32, "\"yarn\"");
	assert_int_equal(parse_with(llama32, "rope_scaling",
				    "{\"type\":\"linear\",\"factor\":3}", &d),
			 0);
	d.arch = O1_ARCH_MISTRAL;
	d.qkv_bias = false;
	roundtrip(&d, O1_DTYPE_F32, "\"MistralForCausalLM\"");
}

static void test_writer_errors(void **state)
{
	struct o1_model_desc d;
	char *text = NULL;

	(void)state;
	assert_int_equal(parse(qwen2_tiny, &d), 0);
	d.qkv_bias = false;
	assert_int_equal(o1_hf_config_format(&d, O1_DTYPE_F32, &text),
			 -O1_E_UNSUPPORTED);
	d.qkv_bias = true;
	assert_int_equal(o1_hf_config_format(&d, O1_DTYPE_Q8_0, &text),
			 -EINVAL);
	d.rope.theta = INFINITY;
	assert_int_equal(o1_hf_config_format(&d, O1_DTYPE_F32, &text), -EINVAL);
	assert_null(text);
}

static void test_generation_config(void **state)
{
	struct o1_model_desc d;
	char tmpdir[64], path[256];

	(void)state;
	o1_test_dir_make(tmpdir, sizeof(tmpdir), "hfc");
	assert_int_equal(o1_hf_config_load(tmpdir, &d), -ENOENT);
	o1_test_file_put(tmpdir, "config.json", llama32);
	assert_int_equal(o1_hf_config_load(tmpdir, &d), 0);
	assert_int_equal(d.eos_id, 128001);
	o1_test_file_put(tmpdir, "generation_config.json",
			 "{\"bos_token_id\":5,\"eos_token_id\":[7,8]}");
	assert_int_equal(o1_hf_config_load(tmpdir, &d), 0);
	assert_int_equal(d.bos_id, 5);
	assert_int_equal(d.eos_id, 7);
	o1_test_file_put(tmpdir, "generation_config.json",
			 "{\"eos_token_id\":null}");
	assert_int_equal(o1_hf_config_load(tmpdir, &d), 0);
	assert_int_equal(d.bos_id, 128000);
	assert_int_equal(d.eos_id, 128001);
	o1_test_file_put(tmpdir, "generation_config.json", "[1]");
	assert_int_equal(o1_hf_config_load(tmpdir, &d), -O1_E_FORMAT);
	o1_test_file_put(tmpdir, "generation_config.json",
			 "{\"eos_token_id\":\"x\"}");
	assert_int_equal(o1_hf_config_load(tmpdir, &d), -O1_E_FORMAT);
	snprintf(path, sizeof(path), "%s/config.json", tmpdir);
	assert_int_equal(o1_hf_config_write(&d, O1_DTYPE_F32, path), 0);
	assert_int_equal(o1_test_dir_remove(tmpdir), 0);
}

static void test_testdata(void **state)
{
	static const char dir[] = O1_SHARED_DIR "/testdata/hf/llama-tiny";
	struct o1_model_desc d;

	(void)state;
	if (access(dir, R_OK) != 0)
		skip();
	assert_int_equal(o1_hf_config_load(dir, &d), 0);
	assert_int_equal(d.arch, O1_ARCH_LLAMA);
	assert_int_equal(d.vocab_size, 640);
	assert_int_equal(d.dim, 96);
	assert_int_equal(d.n_layers, 3);
	assert_int_equal(d.n_heads, 4);
	assert_int_equal(d.n_kv_heads, 1);
	assert_int_equal(d.head_dim, 24);
	assert_int_equal(d.ffn_dim, 256);
	assert_false(d.tied_embeddings);
	assert_false(d.qkv_bias);
	assert_true(d.rope.theta == 1e4f);
	assert_true(d.norm_eps == 1e-5f);
	assert_int_equal(d.bos_id, 1);
	assert_int_equal(d.eos_id, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_qwen2_tiny),
	    cmocka_unit_test(test_llama32),
	    cmocka_unit_test(test_missing_keys),
	    cmocka_unit_test(test_wrong_types),
	    cmocka_unit_test(test_bad_values),
	    cmocka_unit_test(test_unsupported),
	    cmocka_unit_test(test_defaults_and_fallbacks),
	    cmocka_unit_test(test_rope_shapes),
	    cmocka_unit_test(test_writer_roundtrip),
	    cmocka_unit_test(test_writer_errors),
	    cmocka_unit_test(test_generation_config),
	    cmocka_unit_test(test_testdata),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

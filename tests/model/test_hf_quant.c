/* hf_quant: quantized Hugging Face checkpoints are refused, never loaded
 * as plain weights, with the method named and the way out in the log
 * line: from config.json's quantization_config (or compression_config,
 * or bitsandbytes' load_in_4bit without a quant_method), and from tensor
 * names and dtypes in a folder whose config says nothing (GPTQ's qweight
 * in I32, fp8 weights, a float weight_scale beside plain weights). */
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
#include "model/hf_config.h"
#include "model/hf_quant.h"
#include "model/model.h"
#include "tests/common/test_util.h"

#define CONFIG_HEAD                                                            \
	"{\"model_type\": \"llama\", \"hidden_size\": 64, "                    \
	"\"intermediate_size\": 128, \"num_attention_heads\": 4, "             \
	"\"num_key_value_heads\": 2, \"num_hidden_layers\": 1, "               \
	"\"vocab_size\": 32, \"rms_norm_eps\": 1e-5, "                         \
	"\"max_position_embeddings\": 128"

static char logged[8192];

static int with_stderr(int (*fn)(const void *), const void *arg)
{
	return o1_test_capture_stderr(fn, arg, logged, sizeof(logged));
}

static int parse_config(const void *text)
{
	struct o1_model_desc d;

	return o1_hf_config_parse(text, strlen(text), "c.json", &d);
}

static void expect_refused(const char *json, const char *method)
{
	assert_int_equal(with_stderr(parse_config, json), -O1_E_UNSUPPORTED);
	if (!strstr(logged, method) || !strstr(logged, "o1model convert"))
		fail_msg("log '%s' does not name '%s' and the way out", logged,
			 method);
}

static void test_config(void **state)
{
	(void)state;
	expect_refused(CONFIG_HEAD ", \"quantization_config\": "
				   "{\"quant_method\": \"awq\", \"bits\": 4}}",
		       "quantized with awq (quantization_config)");
	expect_refused(CONFIG_HEAD ", \"quantization_config\": "
				   "{\"quant_method\": \"gptq\"}}",
		       "gptq");
	expect_refused(CONFIG_HEAD ", \"quantization_config\": "
				   "{\"quant_method\": \"fp8\"}}",
		       "fp8");
	expect_refused(CONFIG_HEAD ", \"quantization_config\": "
				   "{\"load_in_4bit\": true}}",
		       "bitsandbytes");
	expect_refused(CONFIG_HEAD ", \"compression_config\": "
				   "{\"config_groups\": {}}}",
		       "compressed-tensors (compression_config)");
	expect_refused(CONFIG_HEAD ", \"quantization_config\": 4}", "?");
	/* null is absent, as everywhere in config.json */
	assert_int_equal(with_stderr(parse_config, CONFIG_HEAD
				     ", \"quantization_config\": null}"),
			 0);
	assert_int_equal(with_stderr(parse_config, CONFIG_HEAD "}"), 0);
}

static void test_tensor_names(void **state)
{
	static const struct {
		const char *name, *dtype, *method;
	} cases[] = {
	    {"model.layers.0.mlp.up_proj.qweight", "I32", "GPTQ or AWQ"},
	    {"model.layers.0.mlp.up_proj.scales", "F16", "GPTQ or AWQ"},
	    {"model.layers.0.mlp.up_proj.g_idx", "I32", "GPTQ"},
	    {"model.layers.0.mlp.up_proj.weight", "F8_E4M3", "fp8"},
	    {"model.layers.0.mlp.up_proj.weight_scale", "F32",
	     "fp8 or int8 (compressed-tensors)"},
	    {"model.layers.0.mlp.up_proj.weight_scale_inv", "F32",
	     "fp8 (block-scaled)"},
	    {"model.layers.0.mlp.up_proj.weight", "I8", "int8"},
	    {"model.layers.0.mlp.up_proj.SCB", "F32", "bitsandbytes int8"},
	    {"model.layers.0.mlp.up_proj.weight.absmax", "F32",
	     "bitsandbytes 4-bit"},
	    {"model.layers.0.mlp.up_proj.weight.quant_state.bitsandbytes__nf4",
	     "U8", "bitsandbytes 4-bit"},
	    {"model.layers.0.mlp.up_proj.weight_packed", "I32",
	     "compressed-tensors"},
	    {"model.layers.0.mlp.up_proj.weight", "U8",
	     "a packed integer format"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *m =
		    o1_hf_quant_method_of(cases[i].name, cases[i].dtype);

		if (!m || strcmp(m, cases[i].method) != 0)
			fail_msg("%s %s: '%s', expected '%s'", cases[i].name,
				 cases[i].dtype, m ? m : "(none)",
				 cases[i].method);
	}
	assert_null(
	    o1_hf_quant_method_of("model.layers.0.mlp.up_proj.weight", "BF16"));
	assert_null(o1_hf_quant_method_of("model.norm.weight", "F32"));
	assert_null(o1_hf_quant_method_of("lm_head.weight", "F16"));
	assert_null(o1_hf_quant_method_of("model.embed_tokens.weight", "I64"));
}

/* A folder: config.json without quantization keys and a safetensors file
 * holding TENSOR (DTYPE, 4 elements of ELEM bytes) and a plain norm. */
static void write_folder(const char *dir, const char *tensor, const char *dtype,
			 int elem)
{
	char header[512], path[512];
	uint64_t len;
	FILE *f;
	int n = snprintf(header, sizeof(header),
			 "{\"%s\":{\"dtype\":\"%s\",\"shape\":[4],"
			 "\"data_offsets\":[0,%d]},\"model.norm.weight\":"
			 "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":"
			 "[%d,%d]}}",
			 tensor, dtype, 4 * elem, 4 * elem, 4 * elem + 4);

	o1_test_file_put(dir, "config.json", CONFIG_HEAD "}");
	while (n % 8)
		header[n++] = ' ';
	len = (uint64_t)n;
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(&len, 8, 1, f), 1);
	assert_int_equal(fwrite(header, 1, (size_t)n, f), (size_t)n);
	for (int i = 0; i < 4 * elem + 4; i++)
		fputc(0, f);
	fclose(f);
}

static int open_model(const void *dir)
{
	struct o1_model *m = NULL;
	int err = o1_model_open(dir, &m);

	o1_model_close(m);
	return err;
}

static void test_folders(void **state)
{
	static const struct {
		const char *tensor, *dtype;
		int elem;
		const char *method;
	} cases[] = {
	    {"model.layers.0.self_attn.q_proj.qweight", "I32", 4,
	     "(GPTQ or AWQ)"},
	    {"model.layers.0.self_attn.q_proj.weight", "F8_E4M3", 1, "(fp8)"},
	    /* float dtypes: the set opens, the name gives it away */
	    {"model.layers.0.self_attn.q_proj.weight_scale", "F32", 4,
	     "(fp8 or int8 (compressed-tensors))"},
	    {"model.layers.0.self_attn.q_proj.scales", "F16", 2,
	     "(GPTQ or AWQ)"},
	};
	char dir[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		o1_test_dir_make(dir, sizeof(dir), "hfq");
		write_folder(dir, cases[i].tensor, cases[i].dtype,
			     cases[i].elem);
		assert_int_equal(with_stderr(open_model, dir),
				 -O1_E_UNSUPPORTED);
		if (!strstr(logged, cases[i].tensor) ||
		    !strstr(logged, cases[i].method) ||
		    !strstr(logged, "o1model convert"))
			fail_msg("case %zu: log '%s'", i, logged);
		assert_int_equal(o1_test_dir_remove(dir), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_tensor_names),
	    cmocka_unit_test(test_folders),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

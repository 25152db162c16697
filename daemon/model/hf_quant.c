/* Quantized Hugging Face checkpoints (hf_quant.h): the refusal, with the
 * method named from quantization_config.quant_method (or the keys older
 * configs used), or from the tensor names and dtypes quantizers write. */
#include "hf_quant.h"

#include <stdbool.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

#define WAY_OUT                                                                \
	"o1d reads F32, F16 and BF16 safetensors or GGUF files: convert the "  \
	"unquantized checkpoint (o1model convert --quantize "                  \
	"q8_0|q4_0|q5_0|q4_k_m|q6_k FOLDER OUT.gguf) or use a GGUF file"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The method a quantization_config object Q names. */
static const char *config_method(const cJSON *q)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(q, "quant_method");

	if (cJSON_IsString(m) && m->valuestring[0])
		return m->valuestring;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "load_in_4bit")) ||
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "load_in_8bit")))
		return "bitsandbytes";
	if (cJSON_GetObjectItemCaseSensitive(q, "config_groups"))
		return "compressed-tensors";
	return "an unnamed method";
}

int o1_hf_quant_check_config(const cJSON *root, const char *label)
{
	static const char *const keys[] = {"quantization_config",
					   "compression_config"};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const cJSON *q =
		    cJSON_GetObjectItemCaseSensitive(root, keys[i]);

		if (!q || cJSON_IsNull(q))
			continue;
		o1_err("config %s: the model is quantized with %s (%s); %s",
		       label, cJSON_IsObject(q) ? config_method(q) : "?",
		       keys[i], WAY_OUT);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

const char *o1_hf_quant_method_of(const char *name, const char *dtype)
{
	static const struct {
		const char *suffix, *method;
	} names[] = {
	    {".qweight", "GPTQ or AWQ"},
	    {".qzeros", "GPTQ or AWQ"},
	    {".g_idx", "GPTQ"},
	    {".scales", "GPTQ or AWQ"},
	    {".weight_packed", "compressed-tensors"},
	    {".weight_zero_point", "compressed-tensors"},
	    {".weight_scale_inv", "fp8 (block-scaled)"},
	    {".weight_scale", "fp8 or int8 (compressed-tensors)"},
	    {".input_scale", "fp8"},
	    {".SCB", "bitsandbytes int8"},
	    {".weight_format", "bitsandbytes int8"},
	    {".absmax", "bitsandbytes 4-bit"},
	    {".quant_map", "bitsandbytes 4-bit"},
	    {".nested_absmax", "bitsandbytes 4-bit"},
	};

	if (strstr(name, ".quant_state."))
		return "bitsandbytes 4-bit";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (ends_with(name, names[i].suffix))
			return names[i].method;
	if (strncmp(dtype, "F8_", 3) == 0)
		return "fp8";
	if (strcmp(dtype, "I8") == 0)
		return "int8";
	if (strcmp(dtype, "U8") == 0 || strcmp(dtype, "I32") == 0)
		return "a packed integer format";
	return NULL;
}

int o1_hf_quant_refuse_tensor(const char *label, const char *name,
			      const char *dtype, const char *method)
{
	o1_err("safetensors %s: tensor \"%s\" (dtype %s) is part of a "
	       "quantized checkpoint (%s); %s",
	       label, name, dtype, method, WAY_OUT);
	return -O1_E_UNSUPPORTED;
}

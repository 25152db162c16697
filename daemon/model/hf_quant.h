/* Quantized Hugging Face checkpoints (AWQ, GPTQ, bitsandbytes, fp8,
 * compressed-tensors...): recognised from config.json's
 * quantization_config (or compression_config), or from a tensor's name and
 * dtype, and refused with the method named and the way out: o1d reads
 * only F32, F16 and BF16 safetensors, and never loads packed weights as
 * if they were plain ones.
 */
#ifndef O1_HF_QUANT_H
#define O1_HF_QUANT_H

#include <cjson/cJSON.h>

/* ROOT is config.json's object. Returns 0 when it declares no
 * quantization; else logs one line naming the method (LABEL names the
 * file) and returns -O1_E_UNSUPPORTED. */
int o1_hf_quant_check_config(const cJSON *root, const char *label);

/* The quantization scheme tensor NAME with safetensors DTYPE belongs to
 * ("GPTQ or AWQ", "fp8", ...), or NULL when it looks like a plain
 * weight. */
const char *o1_hf_quant_method_of(const char *name, const char *dtype);

/* Logs that tensor NAME (dtype DTYPE) of LABEL is part of a METHOD
 * checkpoint and how to get a loadable model; returns -O1_E_UNSUPPORTED. */
int o1_hf_quant_refuse_tensor(const char *label, const char *name,
			      const char *dtype, const char *method);

#endif

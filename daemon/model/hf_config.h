/* Hugging Face config.json <-> struct o1_model_desc.
 *
 * The parser takes model_type (or the architectures list) llama, qwen2 or
 * mistral, the size keys, rms_norm_eps, tie_word_embeddings, the Q/K/V
 * bias flag, rotary settings in any of the three shapes transformers has
 * used (top-level rope_theta, legacy "rope_scaling", transformers-5
 * "rope_parameters"), partial_rotary_factor and bos/eos ids. Absent
 * optional keys take transformers' defaults; JSON null counts as absent.
 * Each wrong type or out-of-range value is one log line naming the key
 * and -O1_E_FORMAT; an absent required key is -O1_E_MISSING; a valid
 * setting we do not implement is -O1_E_UNSUPPORTED.
 */
#ifndef O1_HF_CONFIG_H
#define O1_HF_CONFIG_H

#include <stddef.h>

#include "model.h"

/* Parses LEN bytes of config.json text into *DESC (name left empty).
 * LABEL names the source in log lines. */
int o1_hf_config_parse(const char *json, size_t len, const char *label,
		       struct o1_model_desc *desc);
/* Parses DIR/config.json, then takes bos/eos ids from
 * DIR/generation_config.json when that file sets them. */
int o1_hf_config_load(const char *dir, struct o1_model_desc *desc);

/* Formats DESC as transformers-loadable config.json text (malloc'd into
 * *OUT, freed by the caller); DTYPE (F32, F16, BF16) is torch_dtype. */
int o1_hf_config_format(const struct o1_model_desc *desc, enum o1_dtype dtype,
			char **out);
int o1_hf_config_write(const struct o1_model_desc *desc, enum o1_dtype dtype,
		       const char *path);

#endif

/* libFuzzer harness for the config.json parser: any text either fails
 * cleanly or yields a consistent description that the writer formats and
 * the parser reads back unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_config.h"

static bool same_float(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

static bool same_rope(const struct o1_rope *a, const struct o1_rope *b)
{
	return same_float(a->theta, b->theta) && a->dim == b->dim &&
	       a->scaling == b->scaling && same_float(a->factor, b->factor) &&
	       same_float(a->low_freq_factor, b->low_freq_factor) &&
	       same_float(a->high_freq_factor, b->high_freq_factor) &&
	       a->original_max_positions == b->original_max_positions &&
	       same_float(a->beta_fast, b->beta_fast) &&
	       same_float(a->beta_slow, b->beta_slow) &&
	       same_float(a->attn_factor, b->attn_factor);
}

static bool same_desc(const struct o1_model_desc *a,
		      const struct o1_model_desc *b)
{
	return a->arch == b->arch && a->n_layers == b->n_layers &&
	       a->dim == b->dim && a->n_heads == b->n_heads &&
	       a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim &&
	       a->ffn_dim == b->ffn_dim && a->vocab_size == b->vocab_size &&
	       a->max_context_tokens == b->max_context_tokens &&
	       same_float(a->norm_eps, b->norm_eps) &&
	       a->tied_embeddings == b->tied_embeddings &&
	       a->qkv_bias == b->qkv_bias && a->bos_id == b->bos_id &&
	       a->eos_id == b->eos_id && same_rope(&a->rope, &b->rope);
}

static bool consistent(const struct o1_model_desc *d)
{
	return d->n_kv_heads && d->n_heads % d->n_kv_heads == 0 &&
	       d->head_dim % 2 == 0 && d->rope.dim && d->rope.dim % 2 == 0 &&
	       d->rope.dim <= d->head_dim && d->norm_eps > 0 &&
	       d->rope.theta > 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct o1_model_desc d, back;
	char *text;

	if (o1_hf_config_parse((const char *)data, size, "fuzz", &d) != 0)
		return 0;
	if (!consistent(&d) || o1_hf_config_format(&d, O1_DTYPE_BF16, &text))
		abort();
	if (o1_hf_config_parse(text, strlen(text), "fuzz-back", &back) != 0 ||
	    !same_desc(&d, &back))
		abort();
	free(text);
	return 0;
}

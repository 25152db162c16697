/* SwiGLU, one task per row. */
#include "swiglu.h"

#include <math.h>
#include <stddef.h>

struct swiglu_args {
	float *out;
	const float *gate, *up;
	uint32_t f;
};

static void swiglu_row(void *arg, uint32_t t, uint32_t worker)
{
	const struct swiglu_args *a = arg;
	size_t o = (size_t)t * a->f;

	(void)worker;
	for (uint32_t i = 0; i < a->f; i++) {
		float g = a->gate[o + i];

		a->out[o + i] = (g / (1.0f + expf(-g))) * a->up[o + i];
	}
}

int o1_swiglu_cpu(struct o1_threads *tp, float *out, const float *gate,
		  const float *up, uint32_t n_tokens, uint32_t ffn_dim)
{
	struct swiglu_args a = {out, gate, up, ffn_dim};

	o1_threads_run(tp, n_tokens, swiglu_row, &a);
	return 0;
}

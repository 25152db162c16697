/* Residual add, one task per row. */
#include "residual.h"

#include <stddef.h>

struct residual_args {
	float *x;
	const float *y;
	uint32_t dim;
};

static void residual_row(void *arg, uint32_t t, uint32_t worker)
{
	const struct residual_args *a = arg;
	size_t o = (size_t)t * a->dim;

	(void)worker;
	for (uint32_t i = 0; i < a->dim; i++)
		a->x[o + i] = a->x[o + i] + a->y[o + i];
}

int o1_residual_add_cpu(struct o1_threads *tp, float *x, const float *y,
			uint32_t n_tokens, uint32_t dim)
{
	struct residual_args a = {x, y, dim};

	o1_threads_run(tp, n_tokens, residual_row, &a);
	return 0;
}

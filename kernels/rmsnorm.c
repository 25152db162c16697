/* RMSNorm, one task per row (see rmsnorm.h for the arithmetic). */
#include "rmsnorm.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>

struct rmsnorm_args {
	float *out;
	const float *x, *w;
	uint32_t dim;
	float eps;
};

static void rmsnorm_row(void *arg, uint32_t t, uint32_t worker)
{
	const struct rmsnorm_args *a = arg;
	const float *x = a->x + (size_t)t * a->dim;
	float *out = a->out + (size_t)t * a->dim;
	double ss = 0;
	float var, r;

	(void)worker;
	for (uint32_t i = 0; i < a->dim; i++)
		ss += (double)x[i] * x[i];
	var = (float)(ss / a->dim);
	r = 1.0f / sqrtf(var + a->eps);
	for (uint32_t i = 0; i < a->dim; i++)
		out[i] = a->w[i] * (x[i] * r);
}

int o1_rmsnorm_cpu(struct o1_threads *tp, float *out, const float *x,
		   const float *weight, uint32_t n_tokens, uint32_t dim,
		   float eps)
{
	struct rmsnorm_args a = {out, x, weight, dim, eps};

	if (!dim)
		return -EINVAL;
	o1_threads_run(tp, n_tokens, rmsnorm_row, &a);
	return 0;
}

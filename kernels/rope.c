/* RoPE: frequency tables per scaling type (transformers' arithmetic, in
 * float32 one operation at a time so rounding matches torch) and the
 * rotation kernel, one task per row. */
#include "rope.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "common/log.h"

#define O1_PI 3.141592653589793

static float base_power(float theta, uint32_t i, uint32_t r)
{
	float e = (float)(2 * i) / (float)r;

	return powf(theta, e);
}

static void inv_llama3(const struct o1_rope *p, float *inv, uint32_t half)
{
	float omp = (float)p->original_max_positions;
	float low_wl =
	    (float)((double)p->original_max_positions / p->low_freq_factor);
	float high_wl =
	    (float)((double)p->original_max_positions / p->high_freq_factor);
	float span = (float)((double)p->high_freq_factor - p->low_freq_factor);

	for (uint32_t i = 0; i < half; i++) {
		float wl = (float)(2 * O1_PI) / inv[i];
		float scaled = wl > low_wl ? inv[i] / p->factor : inv[i];
		float s = (omp / wl - p->low_freq_factor) / span;
		float smooth = (1.0f - s) * scaled / p->factor + s * scaled;

		if (!(wl < high_wl) && !(wl > low_wl))
			scaled = smooth;
		inv[i] = scaled;
	}
}

static double correction_dim(double rot, uint32_t r, double theta, double omp)
{
	return (r * log(omp / (rot * 2 * O1_PI))) / (2 * log(theta));
}

static void inv_yarn(const struct o1_rope *p, float *inv, uint32_t r)
{
	double beta_fast = p->beta_fast > 0 ? p->beta_fast : 32;
	double beta_slow = p->beta_slow > 0 ? p->beta_slow : 1;
	double omp = p->original_max_positions;
	double low = floor(correction_dim(beta_fast, r, p->theta, omp));
	double high = ceil(correction_dim(beta_slow, r, p->theta, omp));

	low = low > 0 ? low : 0;
	high = high < r - 1 ? high : r - 1;
	if (low == high)
		high += 0.001;
	for (uint32_t i = 0; i < r / 2; i++) {
		float pf = base_power(p->theta, i, r);
		float extra = 1.0f / pf;
		float inter = 1.0f / (p->factor * pf);
		float ramp = ((float)i - (float)low) / (float)(high - low);
		float ef;

		ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
		ef = 1.0f - ramp;
		inv[i] = inter * (1.0f - ef) + extra * ef;
	}
}

static int check_rope(const struct o1_rope *p, bool baked)
{
	bool scaled = !baked && p->scaling != O1_ROPE_SCALING_NONE;

	if (p->dim == 0 || p->dim % 2 || !(p->theta > 0) ||
	    p->scaling >= O1_ROPE_SCALING_COUNT ||
	    (scaled && !(p->factor > 0)) ||
	    (scaled && p->scaling == O1_ROPE_SCALING_LLAMA3 &&
	     (!(p->high_freq_factor > p->low_freq_factor) ||
	      !(p->low_freq_factor > 0) || !p->original_max_positions)) ||
	    (scaled && p->scaling == O1_ROPE_SCALING_YARN &&
	     !p->original_max_positions)) {
		o1_err(
		    "rope: bad parameters: dim %u theta %g scaling %d factor "
		    "%g low %g high %g original_max %u",
		    p->dim, p->theta, (int)p->scaling, p->factor,
		    p->low_freq_factor, p->high_freq_factor,
		    p->original_max_positions);
		return -O1_E_CONFIG;
	}
	return 0;
}

int o1_rope_inv_freq(const struct o1_rope *p, const float *freq_divisors,
		     float *inv, float *scale)
{
	uint32_t half = p->dim / 2;
	int err = check_rope(p, freq_divisors != NULL);

	if (err)
		return err;
	*scale = 1.0f;
	if (p->scaling == O1_ROPE_SCALING_YARN && !freq_divisors) {
		inv_yarn(p, inv, p->dim);
		*scale = p->attn_factor > 0 ? p->attn_factor
			 : p->factor <= 1   ? 1.0f
					  : (float)(0.1 * log(p->factor) + 1.0);
		return 0;
	}
	for (uint32_t i = 0; i < half; i++)
		inv[i] = 1.0f / base_power(p->theta, i, p->dim);
	if (freq_divisors) {
		for (uint32_t i = 0; i < half; i++)
			inv[i] = inv[i] / freq_divisors[i];
		return 0;
	}
	if (p->scaling == O1_ROPE_SCALING_LINEAR)
		for (uint32_t i = 0; i < half; i++)
			inv[i] = inv[i] / p->factor;
	else if (p->scaling == O1_ROPE_SCALING_LLAMA3)
		inv_llama3(p, inv, half);
	return 0;
}

struct rope_args {
	float *x;
	const int32_t *pos;
	uint32_t h, d, r;
	const float *inv;
	float scale;
};

static void rope_row(void *arg, uint32_t t, uint32_t worker)
{
	const struct rope_args *a = arg;
	uint32_t half = a->r / 2;

	(void)worker;
	for (uint32_t i = 0; i < half; i++) {
		float ang = (float)a->pos[t] * a->inv[i];
		float c = (float)cos(ang), s = (float)sin(ang);

		if (a->scale != 1.0f)
			c = c * a->scale, s = s * a->scale;
		for (uint32_t h = 0; h < a->h; h++) {
			float *x = a->x + ((size_t)t * a->h + h) * a->d;
			float x0 = x[i], x1 = x[i + half];

			x[i] = x0 * c - x1 * s;
			x[i + half] = x1 * c + x0 * s;
		}
	}
}

int o1_rope_cpu(struct o1_threads *tp, float *x, const int32_t *pos,
		uint32_t n_tokens, uint32_t n_heads, uint32_t head_dim,
		uint32_t rot_dim, const float *inv_freq, float scale)
{
	struct rope_args a = {x,       pos,	 n_heads, head_dim,
			      rot_dim, inv_freq, scale};

	if (rot_dim == 0 || rot_dim % 2 || rot_dim > head_dim) {
		o1_err("rope: rot_dim %u must be even, > 0 and <= head_dim %u",
		       rot_dim, head_dim);
		return -EINVAL;
	}
	o1_threads_run(tp, n_tokens, rope_row, &a);
	return 0;
}

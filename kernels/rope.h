/* Rotary position embedding, NeoX halves (the canonical layout of
 * model.h): in each head the pair (i, i + R/2), i < R/2, R = rot_dim, is
 * rotated by angle pos * inv_freq[i]; dims >= R pass through:
 *   a = (float)pos * inv_freq[i]            (one f32 product)
 *   c = cos(a) * scale, s = sin(a) * scale  (f32; scale 1 means no multiply)
 *   x'[i]       = x[i] * c - x[i + R/2] * s
 *   x'[i + R/2] = x[i + R/2] * c + x[i] * s
 * which is transformers' q * cos + rotate_half(q) * sin.
 *
 * o1_rope_inv_freq() computes inv_freq (R/2 floats) and the scale exactly as
 * transformers' modeling_rope_utils does, in float32 step by step:
 *   none:   inv[i] = 1 / theta^((float)(2i) / R)
 *   linear: inv[i] = none / factor
 *   llama3: wavelen = 2pi / inv; low-frequency band (wavelen > omp/lff)
 *           divided by factor, high band kept, the band in between blended
 *           by s = (omp / wavelen - lff) / (hff - lff):
 *           ((1 - s) * inv / factor) + s * inv
 *   yarn:   interpolation 1/(factor * p), extrapolation 1/p with
 *           p = theta^((float)(2i)/R), blended by 1 - ramp(i) where ramp is
 *           clamp((i - low) / (high - low), 0, 1) over the correction range
 *           [floor(cd(beta_fast)), ceil(cd(beta_slow))] clipped to
 *           [0, R-1], cd(b) = R ln(omp / (2 pi b)) / (2 ln theta);
 *           scale = attn_factor, or 0.1 ln(factor) + 1 when attn_factor is
 *           0 (1 when factor <= 1).
 * FACTOR is the effective factor: a loader that follows transformers'
 * max_position / original_max_position rule resolves it first.
 * When FREQ_DIVISORS is not NULL (GGUF's rope_freqs tensor, R/2 floats),
 * inv[i] = none[i] / freq_divisors[i] and the scaling type is ignored: the
 * file has baked it in, as llama.cpp does.
 */
#ifndef O1_ROPE_H
#define O1_ROPE_H

#include <stdint.h>

#include "threads.h"

/* The rotation's parameters, as a model file states them (the loaders in
 * daemon/model fill it). */
enum o1_rope_scaling {
	O1_ROPE_SCALING_NONE,
	O1_ROPE_SCALING_LINEAR,
	O1_ROPE_SCALING_LLAMA3,
	O1_ROPE_SCALING_YARN,
	O1_ROPE_SCALING_COUNT,
};

struct o1_rope {
	float theta;			 /* base frequency */
	uint32_t dim;			 /* rotated dims per head (= head_dim) */
	enum o1_rope_scaling scaling;
	float factor;			 /* linear, llama3, yarn */
	float low_freq_factor;		 /* llama3 */
	float high_freq_factor;		 /* llama3 */
	uint32_t original_max_positions; /* llama3, yarn */
	float beta_fast;		 /* yarn (default 32) */
	float beta_slow;		 /* yarn (default 1) */
	float attn_factor;		 /* yarn: scale on cos/sin (0 = derived) */
};

/* Returns 0, or -O1_E_CONFIG (logged) for parameters that make no sense
 * (R odd or 0, theta <= 0, factor <= 0 where used, hff <= lff). */
int o1_rope_inv_freq(const struct o1_rope *rope, const float *freq_divisors,
		     float *inv_freq, float *scale);

/* x (T,H,D), pos (T): rotates every head of every row in place.
 * Requires rot_dim even and <= head_dim. */
int o1_rope_cpu(struct o1_threads *tp, float *x, const int32_t *pos,
		uint32_t n_tokens, uint32_t n_heads, uint32_t head_dim,
		uint32_t rot_dim, const float *inv_freq, float scale);

#endif

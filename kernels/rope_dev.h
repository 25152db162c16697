/* RoPE arithmetic on the device (C++ device code), shared by rope.cu's
 * kernels and gemv.cu's fused QKV epilogue so that both round alike: the
 * angle, its cos/sin (rope.h: f32 angle, cos/sin in double rounded to f32,
 * optional scale) and the rotation of one pair. The rotation is written
 * with explicit round-to-nearest operations, so nvcc cannot contract it
 * into FMAs differently in different kernels: every kernel that rotates
 * gets the same bits, and the CPU reference's (rope.c, no contraction)
 * for the same cos/sin.
 */
#ifndef O1_ROPE_DEV_H
#define O1_ROPE_DEV_H

#include <stdint.h>

/* cos and sin of pos * inv (one f32 product), times SCALE unless 1. */
static inline __device__ void rope_cs(int32_t pos, float inv, float scale,
				      float *c, float *s)
{
	float a = (float)pos * inv;
	float cv = (float)cos((double)a), sv = (float)sin((double)a);

	if (scale != 1.0f)
		cv = cv * scale, sv = sv * scale;
	*c = cv, *s = sv;
}

/* The pair (x0 at i, x1 at i + R/2) rotated: x0 c - x1 s, x1 c + x0 s. */
static inline __device__ float rope_lo(float x0, float x1, float c, float s)
{
	return __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
}

static inline __device__ float rope_hi(float x0, float x1, float c, float s)
{
	return __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

#endif

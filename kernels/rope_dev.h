/* RoPE arithmetic on the device (C++ device code), shared by rope.cu's
 * kernels and gemv.cu's fused QKV epilogue so that both round alike: the
 * angle, its cos/sin (rope.h: f32 angle, cos/sin in double rounded to f32,
 * optional scale), the rotation of one pair, and the fused products'
 * store of a rotated pair into q or the KV pages. The rotation is written
 * with explicit round-to-nearest operations, so nvcc cannot contract it
 * into FMAs differently in different kernels: every kernel that rotates
 * gets the same bits, and the CPU reference's (rope.c, no contraction)
 * for the same cos/sin.
 */
#ifndef O1_ROPE_DEV_H
#define O1_ROPE_DEV_H

#include <stdint.h>

#include <cuda_bf16.h>

#include "kernels_cuda.h"

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

/* The fused QKV products' epilogue operands (gemv.cu, gemv_q.cu): the
 * kernel's copy of o1_rope_kv_args and the attention dims. */
struct rope_kv_epi {
	float *q;		      /* (M,Hq,D) */
	__nv_bfloat16 *kc, *vc;	      /* (pages,Hkv,P,D) */
	const float *bias;	      /* ((Hq + 2 Hkv) D) or NULL */
	const int32_t *pos;	      /* (M) */
	const uint32_t *slots;	      /* (M): page * P + slot */
	const float *inv_freq;	      /* (half) */
	float scale;		      /* on cos/sin */
	uint32_t hq, hkv, d, half, p; /* heads, head dim, rot_dim / 2, P */
	uint32_t col0;		      /* the launch's first row of QKV */
	uint64_t page_stride;	      /* elements */
};

/* Host: R and D's operands for a launch of QKV rows from COL0. */
static inline rope_kv_epi rope_kv_epi_of(const struct o1_rope_kv_args *r,
					 const struct o1_attn_dims *d,
					 uint32_t col0)
{
	return rope_kv_epi{r->q,
			   (__nv_bfloat16 *)r->k_cache,
			   (__nv_bfloat16 *)r->v_cache,
			   r->bias,
			   r->pos,
			   r->slots,
			   r->inv_freq,
			   r->scale,
			   d->n_heads,
			   d->n_kv_heads,
			   d->head_dim,
			   r->rot_dim / 2,
			   d->page_tokens,
			   col0,
			   d->page_stride};
}

/* The fused QKV products' epilogue, as rope.cu's o1_rope_kv_write_cuda
 * writes from the f32 QKV row: the pair (V0 at row R0 of the fused
 * output, V1 at R1, one head) of token M gets its bias, the rotation (q
 * and k heads' dims below HALF), then goes to q as f32 or to its K or V
 * page at slots[M] as bf16. CS: the pair's (cos, sin) as rope_cs gives
 * them, computed ahead by the caller, or NULL. */
static inline __device__ void rope_store_pair(const rope_kv_epi &g,
					      uint32_t m, uint32_t r0,
					      uint32_t r1, float v0, float v1,
					      const float2 *cs = nullptr)
{
	uint32_t head = r0 / g.d, d0 = r0 % g.d, d1 = r1 % g.d;

	if (g.bias)
		v0 = v0 + g.bias[r0], v1 = v1 + g.bias[r1];
	if (head < g.hq + g.hkv && d0 < g.half) {
		float c, s, t;

		if (cs)
			c = cs->x, s = cs->y;
		else
			rope_cs(g.pos[m], g.inv_freq[d0], g.scale, &c, &s);
		t = rope_lo(v0, v1, c, s);
		v1 = rope_hi(v0, v1, c, s);
		v0 = t;
	}
	if (head < g.hq) {
		float *q = g.q + ((size_t)m * g.hq + head) * g.d;

		q[d0] = v0, q[d1] = v1;
	} else {
		bool k = head < g.hq + g.hkv;
		uint32_t kvh = (head - g.hq) % g.hkv, slot = g.slots[m];
		__nv_bfloat16 *c = (k ? g.kc : g.vc) +
				   (slot / g.p) * g.page_stride +
				   ((size_t)kvh * g.p + slot % g.p) * g.d;

		c[d0] = __float2bfloat16_rn(v0);
		c[d1] = __float2bfloat16_rn(v1);
	}
}

#endif

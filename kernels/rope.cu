/* RoPE on the device (rope.h's arithmetic: f32 angle, cos/sin in double
 * rounded to f32, optional scale), alone in place and fused into the QKV
 * epilogue with the KV page write. One block per token row; the block
 * first tabulates cos/sin for its position in shared memory. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "log.h"
}

#define ROPE_THREADS  256
#define ROPE_MAX_HALF 256

/* cs[0..half) = cos, cs[half..2 half) = sin of pos * inv_freq[i]. */
static __device__ void rope_table(float *cs, int32_t pos, const float *inv,
				  uint32_t half, float scale)
{
	for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
		float a = (float)pos * inv[i];
		float c = (float)cos((double)a), s = (float)sin((double)a);

		if (scale != 1.0f)
			c = c * scale, s = s * scale;
		cs[i] = c, cs[half + i] = s;
	}
	__syncthreads();
}

/* Element d of a head (h (D)) after rotation; dims >= 2 half pass. */
static __device__ float rotated(const float *h, uint32_t d, uint32_t half,
				const float *cs)
{
	if (d < half)
		return h[d] * cs[d] - h[d + half] * cs[half + d];
	if (d < 2 * half)
		return h[d] * cs[d - half] + h[d - half] * cs[d];
	return h[d];
}

/* x (T,H,D) f32 in place, pos (T); block t = row t. Each head is read
 * into shared memory first so the pairs rotate from the old values. */
static __global__ void rope(float *x, const int32_t *pos, uint32_t h,
			    uint32_t d, uint32_t half, const float *inv,
			    float scale)
{
	extern __shared__ float sh[]; /* cos/sin (2 half), row (h * d) */
	float *row = x + (size_t)blockIdx.x * h * d, *cp = sh + 2 * half;

	rope_table(sh, pos[blockIdx.x], inv, half, scale);
	for (uint32_t i = threadIdx.x; i < h * d; i += blockDim.x)
		cp[i] = row[i];
	__syncthreads();
	for (uint32_t i = threadIdx.x; i < h * d; i += blockDim.x)
		row[i] = rotated(cp + i / d * d, i % d, half, sh);
}

extern "C" int o1_rope_cuda(float *x, const int32_t *pos, uint32_t n_tokens,
			    uint32_t n_heads, uint32_t head_dim,
			    uint32_t rot_dim, const float *inv_freq,
			    float scale, cudaStream_t stream)
{
	size_t smem = (rot_dim + (size_t)n_heads * head_dim) * sizeof(float);

	if (!x || !pos || !inv_freq || !rot_dim || rot_dim % 2 ||
	    rot_dim > head_dim || rot_dim / 2 > ROPE_MAX_HALF ||
	    smem > 48 * 1024) {
		o1_err("rope: bad shape: %u heads of %u, rot_dim %u", n_heads,
		       head_dim, rot_dim);
		return -EINVAL;
	}
	if (!n_tokens)
		return 0;
	rope<<<n_tokens, ROPE_THREADS, smem, stream>>>(
	    x, pos, n_heads, head_dim, rot_dim / 2, inv_freq, scale);
	return O1_CUDA_LAUNCHED("rope");
}

struct rope_kv_dev {
	uint32_t hq, hkv, d, half, p;
	uint64_t page_stride;
};

/* qkv (T,(Hq+2Hkv)D) f32 + bias -> q (T,Hq,D) f32 roped; K roped and V
 * as bf16 into k_cache/v_cache (pages,Hkv,P,D) at slots (T); block t =
 * row t. Shared: cos/sin (2 half), the biased row ((Hq+2Hkv) D). */
static __global__ void rope_kv(struct o1_rope_kv_args a, struct rope_kv_dev g)
{
	extern __shared__ float sh[];
	uint32_t t = blockIdx.x, w = (g.hq + 2 * g.hkv) * g.d;
	uint32_t qd = g.hq * g.d, kvd = g.hkv * g.d;
	float *cp = sh + 2 * g.half;
	const float *src = a.qkv + (size_t)t * w;
	uint32_t page = a.slots[t] / g.p, slot = a.slots[t] % g.p;
	__nv_bfloat16 *kc = (__nv_bfloat16 *)a.k_cache + page * g.page_stride;
	__nv_bfloat16 *vc = (__nv_bfloat16 *)a.v_cache + page * g.page_stride;

	rope_table(sh, a.pos[t], a.inv_freq, g.half, a.scale);
	for (uint32_t i = threadIdx.x; i < w; i += blockDim.x)
		cp[i] = a.bias ? src[i] + a.bias[i] : src[i];
	__syncthreads();
	for (uint32_t i = threadIdx.x; i < w; i += blockDim.x) {
		uint32_t d = i % g.d, head = i / g.d;
		/* Hq is a multiple of Hkv: head % Hkv is the kv head */
		size_t at = ((size_t)(head % g.hkv) * g.p + slot) * g.d + d;

		if (i < qd)
			a.q[(size_t)t * qd + i] =
			    rotated(cp + head * g.d, d, g.half, sh);
		else if (i < qd + kvd)
			kc[at] = __float2bfloat16_rn(
			    rotated(cp + head * g.d, d, g.half, sh));
		else
			vc[at] = __float2bfloat16_rn(cp[i]);
	}
}

static int check_rope_kv(const struct o1_rope_kv_args *a,
			 const struct o1_attn_dims *dm, size_t smem)
{
	if (!a->q || !a->k_cache || !a->v_cache || !a->qkv || !a->pos ||
	    !a->slots || !a->inv_freq || !dm->n_heads || !dm->n_kv_heads ||
	    dm->n_heads % dm->n_kv_heads || !dm->head_dim || !dm->page_tokens ||
	    !a->rot_dim || a->rot_dim % 2 || a->rot_dim > dm->head_dim ||
	    dm->page_stride <
		(uint64_t)dm->n_kv_heads * dm->page_tokens * dm->head_dim ||
	    smem > 48 * 1024) {
		o1_err("rope_kv: bad shape: heads %u/%u of %u, rot_dim %u, "
		       "page %u tokens stride %llu",
		       dm->n_heads, dm->n_kv_heads, dm->head_dim, a->rot_dim,
		       dm->page_tokens, (unsigned long long)dm->page_stride);
		return -EINVAL;
	}
	return 0;
}

extern "C" int o1_rope_kv_write_cuda(const struct o1_rope_kv_args *a,
				     const struct o1_attn_dims *dm,
				     cudaStream_t stream)
{
	struct rope_kv_dev g = {dm->n_heads,	 dm->n_kv_heads,
				dm->head_dim,	 a->rot_dim / 2,
				dm->page_tokens, dm->page_stride};
	size_t smem =
	    (a->rot_dim + (size_t)(g.hq + 2 * g.hkv) * g.d) * sizeof(float);
	int err = check_rope_kv(a, dm, smem);

	if (err || !a->n_tokens)
		return err;
	rope_kv<<<a->n_tokens, ROPE_THREADS, smem, stream>>>(*a, g);
	return O1_CUDA_LAUNCHED("rope_kv_write");
}

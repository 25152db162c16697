/* RoPE on the device (rope.h's arithmetic: f32 angle, cos/sin in double
 * rounded to f32, optional scale; rope_dev.h, which gemv.cu's fused QKV
 * epilogue shares, so both round alike), alone in place (one block per
 * row) and fused into the QKV epilogue with the KV page write (a block per
 * slice of a row). Each block first tabulates cos/sin for its position in
 * shared memory. With PDL (cuda_launch.h) the fused kernel tabulates
 * before it waits for the previous kernel: positions, slots and inverse
 * frequencies are step inputs that no kernel writes. */
#include <errno.h>

#include <cuda_bf16.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "rope_dev.h"

extern "C" {
#include "common/log.h"
}

#define ROPE_THREADS  256
#define ROPE_MAX_HALF 256

/* cs[0..half) = cos, cs[half..2 half) = sin of pos * inv_freq[i]. */
static __device__ void rope_table(float *cs, int32_t pos, const float *inv,
				  uint32_t half, float scale)
{
	for (uint32_t i = threadIdx.x; i < half; i += blockDim.x)
		rope_cs(pos, inv[i], scale, &cs[i], &cs[half + i]);
	__syncthreads();
}

/* Element d of a head (h (D)) after rotation; dims >= 2 half pass. */
static __device__ float rotated(const float *h, uint32_t d, uint32_t half,
				const float *cs)
{
	if (d < half)
		return rope_lo(h[d], h[d + half], cs[d], cs[half + d]);
	if (d < 2 * half)
		return rope_hi(h[d - half], h[d], cs[d - half], cs[d]);
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
	return O1_CUDA_LAUNCH("rope", rope, dim3(n_tokens), dim3(ROPE_THREADS),
			      smem, stream, false, x, pos, n_heads, head_dim,
			      rot_dim / 2, inv_freq, scale);
}

struct rope_kv_dev {
	uint32_t hq, hkv, d, half, p;
	uint64_t page_stride;
};

/* A qkv row: f32, or bf16 (o1_rope_kv_write_bf16_cuda). */
struct qkv_row {
	const float *f;
	const __nv_bfloat16 *h;
};

/* Element J of a qkv row plus its bias. */
static __device__ float biased(const qkv_row &row, const float *bias,
			       uint32_t j)
{
	float x = row.h ? __bfloat162float(row.h[j]) : row.f[j];

	return bias ? x + bias[j] : x;
}

/* Element d of the head starting at BASE of a biased qkv row, rotated
 * (rotated() over global memory). */
static __device__ float rotated_at(const qkv_row &row, const float *bias,
				   uint32_t base, uint32_t d, uint32_t half,
				   const float *cs)
{
	if (d < half)
		return rope_lo(biased(row, bias, base + d),
			       biased(row, bias, base + d + half), cs[d],
			       cs[half + d]);
	if (d < 2 * half)
		return rope_hi(biased(row, bias, base + d - half),
			       biased(row, bias, base + d), cs[d - half],
			       cs[d]);
	return biased(row, bias, base + d);
}

/* qkv (T,(Hq+2Hkv)D) f32, or bf16 where QKV_BF16 is set, + bias -> q
 * (T,Hq,D) f32 roped; K roped and V as bf16 into k_cache/v_cache
 * (pages,Hkv,P,D) at slots (T). Block (t, y) of gridDim.y takes elements
 * y * blockDim + k * gridDim.y * blockDim of row t (k = 0, 1, ...), one
 * per thread a round: many blocks a row for a few decode rows, one for a
 * prompt's thousands (rope_kv_blocks), so that the cos/sin table, which
 * every block computes (in double: rope_cs), is not computed again for
 * each slice of a long prompt's rows (24 times a llama3-8b row: 109 us a
 * layer of a 2,048-token prompt on the H200, a tenth of it bytes; 54.5 us
 * a block a row, still ~3x its bytes). The element's head and dimension
 * step along with it: one division a thread, not two divisions and a
 * modulo by runtime values a round (the loop's instructions being, we
 * expect, what a block a row still waits on: not yet timed). Shared:
 * cos/sin (2 half). */
static __global__ void rope_kv(struct o1_rope_kv_args a, struct rope_kv_dev g,
			       const __nv_bfloat16 *qkv_bf16)
{
	extern __shared__ float sh[];
	uint32_t t = blockIdx.x, w = (g.hq + 2 * g.hkv) * g.d;
	uint32_t step = gridDim.y * blockDim.x;
	uint32_t i = blockIdx.y * blockDim.x + threadIdx.x;
	uint32_t head = i / g.d, d = i % g.d;
	uint32_t step_h = step / g.d, step_d = step % g.d;
	qkv_row src = {qkv_bf16 ? NULL : a.qkv + (size_t)t * w,
		       qkv_bf16 ? qkv_bf16 + (size_t)t * w : NULL};
	uint32_t page = a.slots[t] / g.p, slot = a.slots[t] % g.p;
	/* kv head h's row of this slot: h * P D + at0 in its page */
	size_t at0 = page * g.page_stride + (size_t)slot * g.d;
	float *q = a.q + (size_t)t * g.hq * g.d;

	rope_table(sh, a.pos[t], a.inv_freq, g.half, a.scale);
	o1_pdl_wait();
	o1_pdl_trigger();
	for (; i < w; i += step, head += step_h, d += step_d) {
		if (d >= g.d) /* step_d < D: one carry at most */
			d -= g.d, head++;
		if (head < g.hq)
			q[i] = rotated_at(src, a.bias, head * g.d, d, g.half,
					  sh);
		else if (head < g.hq + g.hkv)
			((__nv_bfloat16 *)a.k_cache)
			    [at0 + (size_t)(head - g.hq) * g.p * g.d + d] =
				__float2bfloat16_rn(rotated_at(
				    src, a.bias, head * g.d, d, g.half, sh));
		else
			((__nv_bfloat16 *)a.v_cache)
			    [at0 + (size_t)(head - g.hq - g.hkv) * g.p * g.d +
			     d] = __float2bfloat16_rn(biased(src, a.bias, i));
	}
}

/* Blocks a row of rope_kv for N rows W wide: a block for each ROPE_THREADS
 * elements while the grid is under ROPE_KV_BLOCKS blocks (a decode step's
 * few rows keep their parallelism), fewer as the rows grow (at least one:
 * a 2,048-token prompt's rows one block each). */
#define ROPE_KV_BLOCKS 1024u

static uint32_t rope_kv_blocks(uint32_t n, uint32_t w)
{
	uint32_t most = (w + ROPE_THREADS - 1) / ROPE_THREADS;
	uint32_t want = (ROPE_KV_BLOCKS + n - 1) / n;

	return want < most ? want : most;
}

static int check_rope_kv(const struct o1_rope_kv_args *a, const void *qkv,
			 const struct o1_attn_dims *dm, size_t smem)
{
	if (!a->q || !a->k_cache || !a->v_cache || !qkv || !a->pos ||
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

/* The rows from A->qkv, or with BF16 from QKV_BF16. */
static int rope_kv_write(const struct o1_rope_kv_args *a, bool bf16,
			 const uint16_t *qkv_bf16,
			 const struct o1_attn_dims *dm, bool pdl,
			 cudaStream_t stream)
{
	struct rope_kv_dev g = {dm->n_heads,	 dm->n_kv_heads,
				dm->head_dim,	 a->rot_dim / 2,
				dm->page_tokens, dm->page_stride};
	uint32_t w = (g.hq + 2 * g.hkv) * g.d;
	size_t smem = a->rot_dim * sizeof(float);
	int err = check_rope_kv(
	    a, bf16 ? (const void *)qkv_bf16 : (const void *)a->qkv, dm, smem);

	if (err || !a->n_tokens)
		return err;
	return O1_CUDA_LAUNCH(
	    "rope_kv_write", rope_kv,
	    dim3(a->n_tokens, rope_kv_blocks(a->n_tokens, w)),
	    dim3(ROPE_THREADS), smem, stream, pdl, *a, g,
	    bf16 ? (const __nv_bfloat16 *)qkv_bf16 : NULL);
}

extern "C" int o1_rope_kv_write_cuda(const struct o1_rope_kv_args *a,
				     const struct o1_attn_dims *dm, bool pdl,
				     cudaStream_t stream)
{
	return rope_kv_write(a, false, NULL, dm, pdl, stream);
}

extern "C" int o1_rope_kv_write_bf16_cuda(const struct o1_rope_kv_args *a,
					  const uint16_t *qkv_bf16,
					  const struct o1_attn_dims *dm,
					  bool pdl, cudaStream_t stream)
{
	return rope_kv_write(a, true, qkv_bf16, dm, pdl, stream);
}

/* Device code the attention kernels share (attention.cu's row kernel,
 * attention_decode.cu, attention_decode_tc.cu, attention_prefill.cu):
 * where a row of a batch belongs, and the merge of a row's splits. */
#ifndef O1_ATTENTION_DEV_H
#define O1_ATTENTION_DEV_H

#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>

/* The sequence of batch row ROW: the last S of N with q_off[S] <= ROW
 * (q_off ascending, q_off[0] = 0; attention.h's batch). */
static inline __device__ uint32_t attn_seq_of_row(const uint32_t *q_off,
						  uint32_t n, uint32_t row)
{
	uint32_t lo = 0, hi = n;

	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;

		if (q_off[mid] <= row)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The output of one (row, head) from its N <= 32 splits' partials at P
 * (split k at P + k (D + 2): its unnormalized O, then its running max in
 * base 2 and its sum), written as bf16 O / L to OUT; by a whole warp,
 * LANE bringing split LANE's max and sum, each lane D / 32 of the
 * columns, the splits' rows read 8 at a time (a dependent load a split
 * was the merge's cost). A split that held no position of the row (max
 * -inf) weighs 0; at least one must hold one. The tensor-core decode
 * kernel's and the tiled prefill kernel's merges. */
template <int D>
static inline __device__ void attn_merge_splits(__nv_bfloat16 *out,
						const float *p, uint32_t n,
						uint32_t lane)
{
	constexpr int per = D / 32; /* columns a lane: 2 or 4 */
	float mk = -INFINITY, lk = 0.0f, mx, wk, l, acc[per] = {};

	if (lane < n)
		mk = p[lane * (D + 2) + D], lk = p[lane * (D + 2) + D + 1];
	mx = mk;
#pragma unroll
	for (int x = 16; x; x /= 2)
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
	wk = mk == -INFINITY ? 0.0f : exp2f(mk - mx);
	l = lk * wk;
#pragma unroll
	for (int x = 16; x; x /= 2)
		l += __shfl_xor_sync(0xffffffffu, l, x);
#pragma unroll 8 /* rows in flight (a macro is not expanded here) */
	for (uint32_t k = 0; k < n; k++) {
		float wt = __shfl_sync(0xffffffffu, wk, (int)k);
		const float *r = p + k * (D + 2);

#pragma unroll
		for (int i = 0; i < per / 2; i++) {
			float2 v = *(const float2 *)(r + 64 * i + 2 * lane);

			acc[2 * i] += wt * v.x, acc[2 * i + 1] += wt * v.y;
		}
	}
#pragma unroll
	for (int i = 0; i < per / 2; i++)
		*(__nv_bfloat162 *)(out + 64 * i + 2 * lane) =
		    __floats2bfloat162_rn(acc[2 * i] / l, acc[2 * i + 1] / l);
}

#endif

/* Matrix products for few rows (decode) on weights in a GGUF block format,
 * dequantized in registers right after the load (gemv_q.h's CUDA twin):
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . dequant(w) (N,K)^T
 * for M <= O1_GEMV_MAX_ROWS. A warp per output column j (row j of w): its
 * lanes stride over the row's 32-element units (quant_dev.h), each unit's
 * bytes read once and decoded to quant.h's values, multiplied into every
 * row of x (so w is read once for all M rows). A unit's 32 products
 * (each rounded: __fmul_rn) are summed in a fixed pairwise tree, added to
 * the lane's f32 accumulator in increasing unit order, then a fixed warp
 * tree sums the lanes: every y element has one operation order whatever
 * M, N or the launch (bitwise reproducible; a row's result does not depend
 * on the other rows), and differs from the CPU reference (matmul_q.h's
 * 16-lane order) only by f32 summation order.
 *
 * LDY lets a launch fill columns [0, N) of a wider output: the fused QKV
 * and gate/up outputs of the CUDA backend, whose parts may be stored in
 * different block types (one launch per part).
 *
 * PDL (cuda_launch.h): every thread waits for the previous kernel first,
 * then lets the next one launch. Invariants: K a multiple of the type's
 * block, x 16-byte aligned, w as quant_dev.h's loads need, LDY >= N.
 */
#include <errno.h>
#include <stdint.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "quant_dev.h"

extern "C" {
#include "common/log.h"
}

#define GQ_WARPS   4 /* output columns per block */
#define GQ_THREADS (GQ_WARPS * 32)

struct gq_args {
	float *y;	    /* (M, ldy), columns [0, n) written */
	const uint16_t *x;  /* (M, k) bf16 */
	const uint8_t *w;   /* n rows of row_bytes */
	uint64_t row_bytes; /* of w */
	uint32_t n, k, ldy;
	uint32_t units; /* k / 32 */
};

struct __align__(16) gq_piece
{
	uint32_t v[4]; /* 8 bf16 */
};

/* The 32 products of unit V with x's 32 elements at X (64-byte aligned),
 * summed pairwise in a fixed order. */
static __device__ __forceinline__ float unit_dot(const float (&v)[32],
						 const uint16_t *x)
{
	const gq_piece *p = (const gq_piece *)x;
	float s[32];

#pragma unroll
	for (int q = 0; q < 4; q++) {
		gq_piece piece = p[q];

#pragma unroll
		for (int i = 0; i < 4; i++) {
			int e = 8 * q + 2 * i;

			s[e] = __fmul_rn(v[e], qd_bf16(piece.v[i] & 0xffff));
			s[e + 1] =
			    __fmul_rn(v[e + 1], qd_bf16(piece.v[i] >> 16));
		}
	}
#pragma unroll
	for (int w = 16; w; w /= 2)
#pragma unroll
		for (int e = 0; e < w; e++)
			s[e] = s[e] + s[e + w];
	return s[0];
}

/* Block = GQ_WARPS output columns, warp = column j (see the top). */
template <int M, int TYPE>
static __global__ void __launch_bounds__(GQ_THREADS) gemv_q(gq_args a)
{
	uint32_t lane = threadIdx.x % 32;
	uint32_t j = blockIdx.x * GQ_WARPS + threadIdx.x / 32;
	const uint8_t *row;
	float acc[M];

	o1_pdl_wait();
	o1_pdl_trigger();
	if (j >= a.n)
		return;
	row = a.w + (size_t)j * a.row_bytes;
#pragma unroll
	for (int i = 0; i < M; i++)
		acc[i] = 0.0f;
	for (uint32_t u = lane; u < a.units; u += 32) {
		float v[32];

		qd_unit<TYPE>(row, u, v);
#pragma unroll
		for (int i = 0; i < M; i++)
			acc[i] = acc[i] +
				 unit_dot(v, a.x + (size_t)i * a.k + 32 * u);
	}
#pragma unroll
	for (int i = 0; i < M; i++)
		for (int o = 16; o; o /= 2)
			acc[i] =
			    acc[i] + __shfl_xor_sync(0xffffffffu, acc[i], o);
	if (lane)
		return;
#pragma unroll
	for (int i = 0; i < M; i++)
		a.y[(size_t)i * a.ldy + j] = acc[i];
}

template <int TYPE>
static int launch(const gq_args &a, uint32_t m, bool pdl, cudaStream_t stream)
{
	dim3 grid((a.n + GQ_WARPS - 1) / GQ_WARPS), block(GQ_THREADS);

	switch (m) {
	case 1:
		return O1_CUDA_LAUNCH("gemv_q", gemv_q<1, TYPE>, grid, block, 0,
				      stream, pdl, a);
	case 2:
		return O1_CUDA_LAUNCH("gemv_q", gemv_q<2, TYPE>, grid, block, 0,
				      stream, pdl, a);
	case 3:
		return O1_CUDA_LAUNCH("gemv_q", gemv_q<3, TYPE>, grid, block, 0,
				      stream, pdl, a);
	default:
		return O1_CUDA_LAUNCH("gemv_q", gemv_q<4, TYPE>, grid, block, 0,
				      stream, pdl, a);
	}
}

extern "C" int o1_gemv_q_cuda(float *y, const uint16_t *x, const void *w,
			      enum o1_quant_type type, uint32_t m, uint32_t n,
			      uint32_t k, uint32_t ldy, bool pdl,
			      cudaStream_t stream)
{
	gq_args a = {y, x, (const uint8_t *)w, 0, n, k, ldy, k / 32};

	if (!y || !x || !w || !m || m > O1_GEMV_MAX_ROWS || !n || ldy < n ||
	    o1_quant_row_bytes(type, k, &a.row_bytes) || (uintptr_t)x % 16 ||
	    !o1_quant_dev_aligned(type, w)) {
		o1_err("gemv_q: bad operands: type %u m %u (at most %d) n %u "
		       "k %u ldy %u, x %p (16-byte aligned) w %p",
		       (unsigned)type, m, O1_GEMV_MAX_ROWS, n, k, ldy,
		       (const void *)x, w);
		return -EINVAL;
	}
	switch (type) {
	case O1_QUANT_Q8_0:
		return launch<O1_QUANT_Q8_0>(a, m, pdl, stream);
	case O1_QUANT_Q4_0:
		return launch<O1_QUANT_Q4_0>(a, m, pdl, stream);
	case O1_QUANT_Q4_K:
		return launch<O1_QUANT_Q4_K>(a, m, pdl, stream);
	default:
		return launch<O1_QUANT_Q6_K>(a, m, pdl, stream);
	}
}

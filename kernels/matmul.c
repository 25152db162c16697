/* Deterministic f32 GEMM, y = x . w^T + b (see matmul.h for the exact
 * arithmetic every element follows). Work is split over blocks of output
 * columns (rows of w); within a block, x is walked in blocks of 64 rows so
 * that they stay in cache while the block's w rows pass over them, and tiles
 * of up to 4 x-rows by 4 w-rows share their loads. Each element's operation
 * sequence is the same in every tile shape, which is what makes results
 * independent of M.
 */
#include "matmul.h"

#include <errno.h>
#include <stddef.h>

#include "common/log.h"
#include "matmul_lanes.h"

#define NB    16 /* w rows per task */
#define MB    64 /* x rows per pass over a task's w rows (cache blocking) */
#define LANES O1_LANES

typedef o1_v16f v16f;

struct matmul_args {
	float *y;
	const float *x, *w, *bias;
	uint32_t m, n, k;
};

/* The fixed reduction of matmul.h, the K tail, then the bias. */
static inline __attribute__((always_inline)) float
finish(const v16f *s, const float *x, const float *w, uint32_t k16, uint32_t k,
       const float *bias)
{
	float r = o1_lanes_reduce(s);

	for (uint32_t i = k16; i < k; i++)
		r = r + x[i] * w[i];
	return bias ? r + *bias : r;
}

/* One MR x NR tile starting at x row M0 and w row N0. */
static inline __attribute__((always_inline)) void
tile(const struct matmul_args *a, uint32_t m0, uint32_t n0, const int mr,
     const int nr)
{
	uint32_t k = a->k, k16 = k / LANES * LANES;
	const float *xr[4], *wr[4];
	v16f acc[4][4] = {{{0}}};

	for (int i = 0; i < mr; i++)
		xr[i] = a->x + (size_t)(m0 + i) * k;
	for (int j = 0; j < nr; j++)
		wr[j] = a->w + (size_t)(n0 + j) * k;
	for (uint32_t p = 0; p < k16; p += LANES) {
		v16f wv[4], xv;

#pragma GCC unroll 4
		for (int j = 0; j < nr; j++)
			wv[j] = o1_lanes_load(wr[j] + p);
#pragma GCC unroll 4
		for (int i = 0; i < mr; i++) {
			xv = o1_lanes_load(xr[i] + p);
#pragma GCC unroll 4
			for (int j = 0; j < nr; j++)
				acc[i][j] = acc[i][j] + xv * wv[j];
		}
	}
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nr; j++)
			a->y[(size_t)(m0 + i) * a->n + n0 + j] =
			    finish(&acc[i][j], xr[i], wr[j], k16, k,
				   a->bias ? a->bias + n0 + j : NULL);
}

/* All x rows against w rows [N0, N0+NR). */
/* x rows [M0, M1) against w rows [N0, N0+NR). */
static inline __attribute__((always_inline)) void
column_group(const struct matmul_args *a, uint32_t m0, uint32_t m1, uint32_t n0,
	     const int nr)
{
	uint32_t m = m0;

	for (; m + 4 <= m1; m += 4)
		tile(a, m, n0, 4, nr);
	for (; m < m1; m++)
		tile(a, m, n0, 1, nr);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
matmul_task(void *arg, uint32_t task, uint32_t worker)
{
	const struct matmul_args *a = arg;
	uint32_t nb = task * NB, n1 = nb + NB < a->n ? nb + NB : a->n;

	(void)worker;
	for (uint32_t m0 = 0; m0 < a->m; m0 += MB) {
		uint32_t m1 = m0 + MB < a->m ? m0 + MB : a->m, n0 = nb;

		for (; n0 + 4 <= n1; n0 += 4)
			column_group(a, m0, m1, n0, 4);
		for (; n0 < n1; n0++)
			column_group(a, m0, m1, n0, 1);
	}
}

int o1_matmul_cpu(struct o1_threads *tp, float *y, const float *x,
		  const float *w, const float *bias, uint32_t m, uint32_t n,
		  uint32_t k)
{
	struct matmul_args a = {y, x, w, bias, m, n, k};

	if (!y || !x || !w || !m || !n || !k) {
		o1_err("matmul: bad operands m %u n %u k %u", m, n, k);
		return -EINVAL;
	}
	o1_threads_run(tp, (n + NB - 1) / NB, matmul_task, &a);
	return 0;
}

/* Products on block-quantized weights (see matmul_q.h for the contract).
 *
 * Work is split over tasks of 16 w rows, as in matmul.c. Within a task,
 * groups of up to four w rows pass over the x rows 64 at a time; for each
 * 256-column chunk the group's rows are dequantized into a small buffer
 * (4 KiB, in L1) and every x row of the pass accumulates against it, with
 * the 16-lane accumulators of the pass (16 KiB) kept across chunks. Each
 * block is dequantized once per 64 x rows; each element's lanes see their
 * products in increasing k, which is matmul.h's order.
 */
#include "matmul_q.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/log.h"
#include "matmul_lanes.h"

#define NB 16  /* w rows per task */
#define MB 64  /* x rows per pass (accumulators kept for all of them) */
#define NR 4   /* w rows dequantized together */
#define CK 256 /* columns dequantized at a time: whole blocks of any type */

typedef o1_v16f v16f;

struct qmm_args {
	float *y;
	const float *x;
	const uint8_t *w;
	const float *bias;
	enum o1_quant_type type;
	uint64_t row_bytes;  /* of w */
	uint32_t block, bpb; /* elements and bytes per block */
	uint32_t m, n, k;
};

/* MR x rows from ROW (accumulators from ACC) against NR_ buffered w rows,
 * over KN columns starting at column KC. */
static inline __attribute__((always_inline)) void
tile(const struct qmm_args *a, v16f (*acc)[NR], const float (*wb)[CK],
     uint32_t row, uint32_t kc, uint32_t kn, const int mr, const int nr)
{
	const float *xr[4];
	v16f s[4][NR];

	for (int i = 0; i < mr; i++) {
		xr[i] = a->x + (size_t)(row + i) * a->k + kc;
		for (int j = 0; j < nr; j++)
			s[i][j] = acc[i][j];
	}
	for (uint32_t p = 0; p < kn; p += O1_LANES) {
		v16f wv[NR], xv;

#pragma GCC unroll 4
		for (int j = 0; j < nr; j++)
			wv[j] = o1_lanes_load(wb[j] + p);
#pragma GCC unroll 4
		for (int i = 0; i < mr; i++) {
			xv = o1_lanes_load(xr[i] + p);
#pragma GCC unroll 4
			for (int j = 0; j < nr; j++)
				s[i][j] = s[i][j] + xv * wv[j];
		}
	}
	for (int i = 0; i < mr; i++)
		for (int j = 0; j < nr; j++)
			acc[i][j] = s[i][j];
}

/* Dequantizes columns [KC, KC+KN) of w rows [N0, N0+NR_) into WB. */
static void dequant_chunk(const struct qmm_args *a, float (*wb)[CK],
			  uint32_t n0, uint32_t kc, uint32_t kn, int nr)
{
	for (int j = 0; j < nr; j++)
		o1_quant_dequantize(a->type,
				    a->w + (n0 + j) * a->row_bytes +
					(uint64_t)kc / a->block * a->bpb,
				    wb[j], kn);
}

/* x rows [M0, M1) against w rows [N0, N0+NR_): every chunk, then the
 * reduction and the bias. */
static inline __attribute__((always_inline)) void
group(const struct qmm_args *a, uint32_t m0, uint32_t m1, uint32_t n0,
      const int nr)
{
	v16f acc[MB][NR];
	float wb[NR][CK] __attribute__((aligned(64)));

	memset(acc, 0, (m1 - m0) * sizeof(acc[0]));
	for (uint32_t kc = 0; kc < a->k; kc += CK) {
		uint32_t kn = a->k - kc < CK ? a->k - kc : CK, i = m0;

		dequant_chunk(a, wb, n0, kc, kn, nr);
		for (; i + 4 <= m1; i += 4)
			tile(a, acc + (i - m0), (const float(*)[CK])wb, i, kc,
			     kn, 4, nr);
		for (; i < m1; i++)
			tile(a, acc + (i - m0), (const float(*)[CK])wb, i, kc,
			     kn, 1, nr);
	}
	for (uint32_t i = m0; i < m1; i++)
		for (int j = 0; j < nr; j++) {
			float r = o1_lanes_reduce(&acc[i - m0][j]);

			a->y[(size_t)i * a->n + n0 + j] =
			    a->bias ? r + a->bias[n0 + j] : r;
		}
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
qmm_task(void *arg, uint32_t task, uint32_t worker)
{
	const struct qmm_args *a = arg;
	uint32_t nb = task * NB, n1 = nb + NB < a->n ? nb + NB : a->n;

	(void)worker;
	for (uint32_t m0 = 0; m0 < a->m; m0 += MB) {
		uint32_t m1 = m0 + MB < a->m ? m0 + MB : a->m, n0 = nb;

		for (; n0 + NR <= n1; n0 += NR)
			group(a, m0, m1, n0, NR);
		for (; n0 < n1; n0++)
			group(a, m0, m1, n0, 1);
	}
}

int o1_matmul_q_cpu(struct o1_threads *tp, float *y, const float *x,
		    const void *w, enum o1_quant_type type, const float *bias,
		    uint32_t m, uint32_t n, uint32_t k)
{
	struct qmm_args a = {y,
			     x,
			     w,
			     bias,
			     type,
			     0,
			     o1_quant_block_elements(type),
			     o1_quant_block_bytes(type),
			     m,
			     n,
			     k};

	if (!y || !x || !w || !m || !n || !k ||
	    o1_quant_row_bytes(type, k, &a.row_bytes)) {
		o1_err("matmul_q: bad operands m %u n %u k %u type %s", m, n, k,
		       o1_quant_name(type));
		return -EINVAL;
	}
	o1_threads_run(tp, (n + NB - 1) / NB, qmm_task, &a);
	return 0;
}

/* Matrix product with bias: the Q/K/V/O projections, the MLP and the LM
 * head.
 *
 *   y (M,N) = x (M,K) . w (N,K)^T + bias (N)      [bias may be NULL]
 *
 * w is row-major [out_features, in_features] as struct o1_model keeps it.
 *
 * Determinism contract (why this is not cblas_sgemm): every element
 * y[m][n] is computed by the same sequence of float operations whatever M,
 * N, the other rows in x, the thread count, the tiling or the instruction
 * set:
 *   s[l] (l = 0..15) = sum over k = l, l+16, ... < K16 of x[m][k]*w[n][k],
 *   in increasing k, each step s = s + (x*w) rounded twice (no FMA: this
 *   file is built with -ffp-contract=off), K16 = K rounded down to 16;
 *   r = ((s0+s8)+(s4+s12)) + ((s2+s10)+(s6+s14)) + (odd lanes likewise),
 *   exactly: t[l]=s[l]+s[l+8], u[l]=t[l]+t[l+4], v[l]=u[l]+u[l+2],
 *   r=v[0]+v[1];
 *   then r = r + x[m][k]*w[n][k] for k = K16..K-1 in order; then r + bias[n].
 * So a sequence's logits do not depend on what it is batched with.
 * (OpenBLAS picks kernels, blockings and thread splits by M and N, which
 * gives no such guarantee.) The CUDA twin matches within tolerance only.
 */
#ifndef O1_MATMUL_H
#define O1_MATMUL_H

#include <stdint.h>

#include "threads.h"

/* Returns 0, or -EINVAL for a zero dimension or a NULL operand. */
int o1_matmul_cpu(struct o1_threads *tp, float *y, const float *x,
		  const float *w, const float *bias, uint32_t m, uint32_t n,
		  uint32_t k);

#endif

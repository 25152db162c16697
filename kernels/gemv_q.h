/* Decode products on block-quantized weights, the CPU reference of
 * gemv_q.cu (o1_gemv_q_cuda, same parameters but PDL and the stream):
 *
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . dequant(w) (N,K)^T
 *
 * x is bf16 (the CUDA backend's product inputs), w N rows of K elements of
 * TYPE (quant.h; K whole blocks), LDY >= N the output's row stride (the
 * kernel fills columns [0, N) of a wider output). Each x row is widened to
 * f32 and multiplied with o1_matmul_q_cpu, so the reference is matmul_q.h's
 * arithmetic; the device sums in another order and multiplies a block's
 * scale into a sum of its integer products (gemv_q.cu), so the two agree
 * within f32 summation error: |gpu - cpu| <= K * 2^-24 * sum |x w|
 * at worst, ~sqrt(K) * 2^-24 * sum |x w| in practice. For tests: it
 * allocates a row of f32 per call.
 */
#ifndef O1_GEMV_Q_H
#define O1_GEMV_Q_H

#include <stdint.h>

#include "quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns 0, -EINVAL for bad shapes or operands (logged), -ENOMEM. */
int o1_gemv_q_cpu(float *y, const uint16_t *x, const void *w,
		  enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		  uint32_t ldy);

#ifdef __cplusplus
}
#endif

#endif

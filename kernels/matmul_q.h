/* Matrix product on weights kept in a GGUF block format (quant.h):
 *
 *   y (M,N) = x (M,K) . dequant(w) (N,K)^T + bias (N)      [bias may be NULL]
 *
 * w holds N rows of K elements of TYPE, each row o1_quant_row_bytes(TYPE,
 * K) bytes (what a GGUF tensor of that type holds), K a multiple of the
 * type's block.
 *
 * Rounding contract: y is bitwise o1_matmul_cpu(x, W, bias) where W is the
 * f32 dequantization of w by quant.h's expressions. A worker dequantizes
 * 256 columns of four w rows at a time into f32, exactly those values, and
 * multiplies them against the f32 activations in matmul.h's 16-lane order
 * (separate multiply and add, no FMA), so every element follows matmul.h's
 * operation sequence. Hence a quantized model's logits on the CPU backend
 * are exactly those of the same model dequantized to f32 at load, and
 * matmul.h's independence of M, of the other rows and of the thread count
 * holds here too. Weights are read as blocks: nothing the size of W is
 * ever made.
 */
#ifndef O1_MATMUL_Q_H
#define O1_MATMUL_Q_H

#include <stdint.h>

#include "quant.h"
#include "threads.h"

/* Returns 0, or -EINVAL for a zero dimension, a NULL operand, a type that
 * is not a block type or K not a whole number of its blocks. */
int o1_matmul_q_cpu(struct o1_threads *tp, float *y, const float *x,
		    const void *w, enum o1_quant_type type, const float *bias,
		    uint32_t m, uint32_t n, uint32_t k);

#endif

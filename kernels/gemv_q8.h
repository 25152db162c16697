/* The int8 path of the decode block products (gemv_q.cu's
 * o1_gemv_q8_cuda, the CUDA backend's default: cfg.quant_dot), specified
 * and computed on the CPU with the device's operations in the device's
 * order, so that the two agree bit for bit:
 *
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . dequant(w) (N,K)^T
 *
 * Input quantization, per 32-element unit u of an input row (its values
 * v, bf16 widened exactly): amax = max |v|, d = amax / 127, q = rint(v *
 * (127 / amax)) (0 when amax is 0; round to nearest even), |q| <= 127,
 * s = d * (q[0] + ... + q[31]) (the integer sum exact, one rounding); a NaN
 * in v makes d NaN. Every f32 operation is rounded on its own (no fused
 * multiply-add).
 *
 * A weight unit (quant_dev.h's unit u of the row) is 32 small integers
 * a_e with its scales: Q8_0 a = q, scale d; Q4_0 a = nibble (0..15),
 * scale d, offset 8 d; Q5_0 a = the 5-bit value (0..31), scale d, offset
 * 16 d; Q4_K a = nibble, scale D = d sc, min M = dmin mn;
 * Q6_K a = q6 - 32, scales D0 (elements 0..15) and D1 (d sc, as quant.h
 * rounds them). With S = sum_e a_e q_e (exact integers; S0, S1 over
 * elements 0..15 and 16..31) the unit's product is
 *   Q8_0  (d dx) S            Q4_0  d (dx S - 8 s)
 *   Q5_0  d (dx S - 16 s)
 *   Q4_K  (D dx) S - M s      Q6_K  dx (D0 S0 + D1 S1)
 * (dx, s: the input unit's d and s). Units are summed as the kernel's
 * lanes do: lane l adds units u = l, l + 32, ... in increasing u to 0
 * (Q4_K and Q6_K: the units of pairs p = l, l + 32, ..., the two units
 * that share a run of quants, in increasing u; Q4_K's pair p is units
 * 2 p and 2 p + 1, Q6_K's units 8 b + 4 h + g and that + 2 with b = p / 4,
 * h = p / 2 % 2, g = p % 2), then the xor butterfly (offsets 16, 8, 4, 2,
 * 1) sums the lanes; y is lane 0's.
 *
 * Distance to the f32 product (gemv_q.h, quant.h's exact weights w). The
 * offset and min multiply s = the sum of the quantized inputs q dx, so a
 * unit's product is sum_e w_e (q_e dx) up to f32 rounding: the weights
 * as they are (not their offset integers) meet the input's error, which
 * is per element |q dx - v| <= dx / 2 + 3 2^-24 |v| (dx = amax / 127: at
 * most 1/254 of the unit's largest magnitude). So
 *   |y8 - y| <= sum_u (dx_u / 2) sum_e |w_e| + 3 2^-24 sum |w v|
 *               + 2^-17 (sum_e |x_e w_e| + sum of |each term| above)
 * with 2^-17 covering f32 summation of K <= 2^16 elements both sides
 * (o1_gemv_q8_bound_cpu computes it). For inputs spread evenly within a
 * unit this is a few tenths of a percent of sum |x w|, and the relative
 * L2 error of a whole output row (errors of independent sign) ~0.1-0.5%:
 * well inside the CUDA backend's 2e-2 bound on logits. Inputs with an
 * outlier per unit lose its neighbours' precision (llama.cpp's q8_1 does
 * the same); the bound still holds.
 */
#ifndef O1_GEMV_Q8_H
#define O1_GEMV_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The product above, bitwise the device's. Returns 0, -EINVAL for bad
 * shapes or operands (logged), -ENOMEM. */
int o1_gemv_q8_cpu(float *y, const uint16_t *x, const void *w,
		   enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		   uint32_t ldy);

/* The M rows of X (K a multiple of 32) quantized as above into OUT, laid
 * out as an int8 product's quantized input in device memory
 * (kernels/q8_input_dev.h; o1_q8_input_bytes(M, K) bytes, the pieces of
 * units past a row's last left zero): what o1_gemv_q8_add_cuda's XQ
 * holds. Returns 0, or -EINVAL for K not a multiple of 32 (logged). */
int o1_q8_input_cpu(void *out, const uint16_t *x, uint32_t m, uint32_t k);
/* Bytes of that layout for M rows of K. */
size_t o1_q8_input_bytes(uint32_t m, uint32_t k);

/* bound (M,N) = the bound above on |o1_gemv_q8_cpu - o1_gemv_q_cpu| per
 * element (row stride N). Same returns. */
int o1_gemv_q8_bound_cpu(float *bound, const uint16_t *x, const void *w,
			 enum o1_quant_type type, uint32_t m, uint32_t n,
			 uint32_t k);

#ifdef __cplusplus
}
#endif

#endif

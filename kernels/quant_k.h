/* The K-quant super-blocks of quant.h, one block at a time: Q4_K's packed
 * scale/min pairs, and llama.cpp's reference quantizers for Q4_K and Q6_K
 * (their scale searches). quant.c's entry points are the interface; this
 * header is for them and for the products that read Q4_K scales. */
#ifndef O1_QUANT_K_H
#define O1_QUANT_K_H

#include <stdint.h>

/* Scale and min (6 bits each) of Q4_K sub-block J (0..7) from the 12
 * packed bytes S. */
void o1_quant_q4_k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *mn);

/* One super-block: 256 finite floats X into 144 / 210 bytes B. */
void o1_quant_q4_k_block(const float *x, uint8_t *b);
void o1_quant_q6_k_block(const float *x, uint8_t *b);

#endif

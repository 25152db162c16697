/* Weights in GGUF block formats for the CUDA tests of the block kernels
 * (test_quant_cuda.c, test_gemm_q_cuda.c), from kernel_cuda_test.h's
 * seeded values. */
#ifndef O1_QUANT_CUDA_TEST_H
#define O1_QUANT_CUDA_TEST_H

#include <stdint.h>

#include "kernels/quant.h"

/* N elements of TYPE quantized from uniform values, every third run of
 * 256 scaled down (block scales far apart within a row); malloc'd. */
uint8_t *qct_random_blocks(enum o1_quant_type type, uint64_t n);

#endif

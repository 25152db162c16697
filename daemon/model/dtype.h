/* Element types of tensor data, with GGUF's numbering (so a GGUF type id
 * casts straight to enum o1_dtype), and conversion to float32. */
#ifndef O1_DTYPE_H
#define O1_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum o1_dtype {
	O1_DTYPE_F32 = 0,
	O1_DTYPE_F16 = 1,
	O1_DTYPE_Q4_0 = 2,
	O1_DTYPE_Q5_0 = 6,
	O1_DTYPE_Q8_0 = 8,
	O1_DTYPE_Q4_K = 12,
	O1_DTYPE_Q6_K = 14,
	O1_DTYPE_BF16 = 30,
};

/* True for the types above; GGUF files may carry others. */
bool o1_dtype_supported(uint32_t type);
const char *o1_dtype_name(enum o1_dtype type);
/* True for the plain float types (F32, F16, BF16): those
 * o1_dtype_from_f32 produces and the model writers accept. */
bool o1_dtype_is_float(enum o1_dtype type);
/* Elements per block (1 for plain floats) and bytes per block. */
uint32_t o1_dtype_block_elements(enum o1_dtype type);
uint32_t o1_dtype_block_bytes(enum o1_dtype type);
/* Bytes for N elements; -O1_E_SHAPE if N is not a whole number of blocks,
 * -EOVERFLOW if the size does not fit. */
int o1_dtype_row_bytes(enum o1_dtype type, uint64_t n, uint64_t *bytes);

/* Converts N elements (a whole number of blocks) from SRC to float32. */
void o1_dtype_to_f32(enum o1_dtype type, const void *src, float *dst,
		     uint64_t n);
/* Converts float32 to TYPE: F32, F16 or BF16 (round to nearest even), or
 * a block type (kernels/quant.h's quantizers: -O1_E_SHAPE for N not whole
 * blocks, -ERANGE for a NaN or an infinity); -O1_E_UNSUPPORTED for others. */
int o1_dtype_from_f32(enum o1_dtype type, const float *src, void *dst,
		      uint64_t n);

float o1_f16_to_f32(uint16_t h);
uint16_t o1_f32_to_f16(float f);
float o1_bf16_to_f32(uint16_t b);
uint16_t o1_f32_to_bf16(float f);

#endif

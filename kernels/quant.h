/* GGUF block formats: Q8_0, Q4_0, Q5_0, Q4_K and Q6_K rows, their
 * dequantization to f32 and their quantization from f32, and IEEE half
 * precision.
 *
 * Layouts (little-endian, byte for byte what a GGUF tensor holds; a row
 * of n elements is n / elements-per-block blocks back to back):
 *   Q8_0  34 bytes / 32:  f16 d, int8 q[32]; x = q * d
 *   Q4_0  18 bytes / 32:  f16 d, u8 qs[16];
 *                         x[j] = (lo(qs[j]) - 8) * d,
 *                         x[j+16] = (hi(qs[j]) - 8) * d
 *   Q5_0  22 bytes / 32:  f16 d, u8 qh[4] (a little-endian u32: bit j
 *                         is element j's fifth bit), u8 qs[16];
 *                         x[j] = ((lo(qs[j]) | bit j << 4) - 16) * d,
 *                         x[j+16] = ((hi(qs[j]) | bit j+16 << 4) - 16) * d
 *   Q4_K 144 bytes / 256: f16 d, f16 dmin, u8 scales[12] (eight 6-bit
 *                         scale/min pairs), u8 qs[128]; sub-block s of 32:
 *                         x = (d * sc[s]) * q - dmin * mn[s]
 *   Q6_K 210 bytes / 256: u8 ql[128], u8 qh[64], int8 sc[16], f16 d;
 *                         x = (d * sc[k]) * (q6 - 32), a scale per 16
 *
 * Dequantization is the specification: every element is the float
 * expression above evaluated left to right in f32 (no FMA: built with
 * -ffp-contract=off), which is what llama.cpp's dequantize_row_* computes,
 * so results are bitwise theirs (tests/kernels/test_quant.c checks it on
 * llama.cpp's own vectors). Every CPU product on quantized weights
 * (matmul_q.h) multiplies these exact values.
 *
 * Quantization follows llama.cpp's reference quantizers (no importance
 * matrix), operation for operation: Q8_0, Q4_0 and Q5_0 bytes are
 * identical; Q4_K and Q6_K search their scales the same way in the same
 * f32 arithmetic, so their bytes are identical on the shared vectors too
 * (the test says how many rows, and checks that no row's error exceeds
 * the reference's). Non-finite inputs are refused (llama.cpp refuses such rows
 * too): the scale searches are undefined on them.
 */
#ifndef O1_QUANT_H
#define O1_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "threads.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GGUF's type ids (model/dtype.h's enum o1_dtype has the same values and
 * asserts it). */
enum o1_quant_type {
	O1_QUANT_Q4_0 = 2,
	O1_QUANT_Q5_0 = 6,
	O1_QUANT_Q8_0 = 8,
	O1_QUANT_Q4_K = 12,
	O1_QUANT_Q6_K = 14,
};

#define O1_QUANT_QK	    32	/* elements per Q8_0 / Q4_0 / Q5_0 block */
#define O1_QUANT_QK_K	    256 /* elements per Q4_K / Q6_K super-block */
#define O1_QUANT_Q8_0_BYTES 34
#define O1_QUANT_Q4_0_BYTES 18
#define O1_QUANT_Q5_0_BYTES 22
#define O1_QUANT_Q4_K_BYTES 144
#define O1_QUANT_Q6_K_BYTES 210
/* The largest block, in elements and bytes (buffers sized for any type). */
#define O1_QUANT_BLOCK_MAX	 256
#define O1_QUANT_BLOCK_BYTES_MAX 210

/* True when TYPE (a GGUF type id) is one of the five above. */
bool o1_quant_is_block(uint32_t type);
/* Elements and bytes per block; 0 for a type that is not a block type. */
uint32_t o1_quant_block_elements(uint32_t type);
uint32_t o1_quant_block_bytes(uint32_t type);
/* "Q8_0", "Q4_0", "Q5_0", "Q4_K", "Q6_K"; "?" otherwise. */
const char *o1_quant_name(uint32_t type);
/* Parses a name as above, either case; -EINVAL for anything else. */
int o1_quant_parse(const char *name, enum o1_quant_type *out);
/* Bytes of a row of N elements; -EINVAL when TYPE is not a block type or N
 * is not a whole number of its blocks. */
int o1_quant_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes);

/* Dequantizes N elements (whole blocks of TYPE, a block type) from SRC. */
void o1_quant_dequantize(enum o1_quant_type type, const void *src, float *dst,
			 uint64_t n);
/* Quantizes N elements (whole blocks) into DST. Returns 0, -EINVAL for a
 * type that is not a block type or N not whole blocks, -ERANGE when SRC
 * holds a NaN or an infinity (DST is then unspecified). */
int o1_quant_quantize(enum o1_quant_type type, const float *src, void *dst,
		      uint64_t n);

/* o1_quant_quantize over ROWS rows of COLS elements (whole blocks), rows
 * spread over TP's workers: the same bytes for any thread count, each row
 * being quantized on its own. Same returns; -ERANGE is logged with a row
 * that holds a NaN or an infinity. */
int o1_quant_quantize_rows(struct o1_threads *tp, enum o1_quant_type type,
			   const float *src, void *dst, uint64_t rows,
			   uint64_t cols);

/* IEEE binary16 <-> binary32: exact widening; narrowing rounds to nearest
 * even, keeps infinities and makes NaNs quiet NaNs. */
float o1_quant_f16_to_f32(uint16_t h);
uint16_t o1_quant_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif

#endif

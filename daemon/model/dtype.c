/* Tensor element types: sizes, half-precision conversion and conversion
 * to and from float32. The block types (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K) are
 * kernels/quant.h's: their layouts, dequantization and quantization live
 * there, so the backends' products and this file read the same values.
 * Conversions from float32 round to nearest even and keep NaN/Inf.
 */
#include "dtype.h"

#include <errno.h>
#include <string.h>

#include "common/bits.h"
#include "common/error.h"
#include "kernels/quant.h"

#define QK   O1_QUANT_QK
#define QK_K O1_QUANT_QK_K

_Static_assert(O1_DTYPE_Q4_0 == (int)O1_QUANT_Q4_0 &&
		   O1_DTYPE_Q5_0 == (int)O1_QUANT_Q5_0 &&
		   O1_DTYPE_Q8_0 == (int)O1_QUANT_Q8_0 &&
		   O1_DTYPE_Q4_K == (int)O1_QUANT_Q4_K &&
		   O1_DTYPE_Q6_K == (int)O1_QUANT_Q6_K,
	       "GGUF type ids in both enums");

struct dtype_info {
	const char *name;
	uint32_t block_elements;
	uint32_t block_bytes;
};

static const struct dtype_info dtype_infos[] = {
    [O1_DTYPE_F32] = {"F32", 1, 4},
    [O1_DTYPE_F16] = {"F16", 1, 2},
    [O1_DTYPE_Q4_0] = {"Q4_0", QK, 2 + QK / 2},
    [O1_DTYPE_Q5_0] = {"Q5_0", QK, 2 + 4 + QK / 2},
    [O1_DTYPE_Q8_0] = {"Q8_0", QK, 2 + QK},
    [O1_DTYPE_Q4_K] = {"Q4_K", QK_K, 4 + 12 + QK_K / 2},
    [O1_DTYPE_Q6_K] = {"Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2},
    [O1_DTYPE_BF16] = {"BF16", 1, 2},
};

#define N_INFOS (sizeof(dtype_infos) / sizeof(dtype_infos[0]))

bool o1_dtype_supported(uint32_t type)
{
	return type < N_INFOS && dtype_infos[type].name != NULL;
}

const char *o1_dtype_name(enum o1_dtype type)
{
	return o1_dtype_supported(type) ? dtype_infos[type].name : "?";
}

bool o1_dtype_is_float(enum o1_dtype type)
{
	return type == O1_DTYPE_F32 || type == O1_DTYPE_F16 ||
	       type == O1_DTYPE_BF16;
}

uint32_t o1_dtype_block_elements(enum o1_dtype type)
{
	return o1_dtype_supported(type) ? dtype_infos[type].block_elements : 0;
}

uint32_t o1_dtype_block_bytes(enum o1_dtype type)
{
	return o1_dtype_supported(type) ? dtype_infos[type].block_bytes : 0;
}

int o1_dtype_row_bytes(enum o1_dtype type, uint64_t n, uint64_t *bytes)
{
	uint64_t blocks;
	uint32_t per;

	if (!o1_dtype_supported(type))
		return -O1_E_UNSUPPORTED;
	if (n % dtype_infos[type].block_elements != 0)
		return -O1_E_SHAPE;
	blocks = n / dtype_infos[type].block_elements;
	per = dtype_infos[type].block_bytes;
	if (blocks > UINT64_MAX / per)
		return -EOVERFLOW;
	*bytes = blocks * per;
	return 0;
}

float o1_f16_to_f32(uint16_t h)
{
	return o1_quant_f16_to_f32(h);
}

uint16_t o1_f32_to_f16(float f)
{
	return o1_quant_f32_to_f16(f);
}

float o1_bf16_to_f32(uint16_t b)
{
	return o1_bits_f32((uint32_t)b << 16);
}

uint16_t o1_f32_to_bf16(float f)
{
	uint32_t u = o1_f32_bits(f);

	if ((u & 0x7fffffff) > 0x7f800000) /* NaN: force quiet */
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static uint16_t load_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

void o1_dtype_to_f32(enum o1_dtype type, const void *src, float *dst,
		     uint64_t n)
{
	const uint8_t *b = src;

	switch (type) {
	case O1_DTYPE_F32:
		memcpy(dst, src, n * sizeof(float));
		break;
	case O1_DTYPE_F16:
		for (uint64_t i = 0; i < n; i++)
			dst[i] = o1_f16_to_f32(load_u16(b + 2 * i));
		break;
	case O1_DTYPE_BF16:
		for (uint64_t i = 0; i < n; i++)
			dst[i] = o1_bf16_to_f32(load_u16(b + 2 * i));
		break;
	case O1_DTYPE_Q8_0:
	case O1_DTYPE_Q4_0:
	case O1_DTYPE_Q5_0:
	case O1_DTYPE_Q4_K:
	case O1_DTYPE_Q6_K:
		o1_quant_dequantize((enum o1_quant_type)type, src, dst, n);
		break;
	}
}

/* Block types: -O1_E_SHAPE for N not whole blocks, -ERANGE for a NaN or
 * an infinity in SRC. */
static int quantize(enum o1_dtype type, const float *src, void *dst,
		    uint64_t n)
{
	int err = o1_quant_quantize((enum o1_quant_type)type, src, dst, n);

	return err == -EINVAL ? -O1_E_SHAPE : err;
}

int o1_dtype_from_f32(enum o1_dtype type, const float *src, void *dst,
		      uint64_t n)
{
	uint8_t *b = dst;

	switch (type) {
	case O1_DTYPE_F32:
		memcpy(dst, src, n * sizeof(float));
		return 0;
	case O1_DTYPE_F16:
	case O1_DTYPE_BF16:
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = type == O1_DTYPE_F16
					 ? o1_f32_to_f16(src[i])
					 : o1_f32_to_bf16(src[i]);

			b[2 * i] = (uint8_t)h;
			b[2 * i + 1] = (uint8_t)(h >> 8);
		}
		return 0;
	case O1_DTYPE_Q8_0:
	case O1_DTYPE_Q4_0:
	case O1_DTYPE_Q5_0:
	case O1_DTYPE_Q4_K:
	case O1_DTYPE_Q6_K:
		return quantize(type, src, dst, n);
	default:
		return -O1_E_UNSUPPORTED;
	}
}

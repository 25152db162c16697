/* Tensor element types: sizes, half-precision conversion and dequantization
 * to float32.
 *
 * Block layouts follow GGML byte for byte (all little-endian):
 *   Q8_0  34 bytes / 32:  f16 d, int8 q[32];          x = q * d
 *   Q4_0  18 bytes / 32:  f16 d, u8 qs[16];           x[j] = (lo(qs[j]) - 8) *
 * d, x[j + 16] = (hi(qs[j]) - 8) * d Q4_K 144 bytes / 256: f16 d, f16 dmin, u8
 * scales[12] (8 packed 6-bit scale/min pairs), u8 qs[128]; per 32-element
 *                         sub-block s: x = d * sc[s] * q - dmin * mn[s]
 *   Q6_K 210 bytes / 256: u8 ql[128], u8 qh[64], int8 sc[16], f16 d;
 *                         x = d * sc[k] * (q6 - 32) per 16 elements
 * Conversions from float32 round to nearest even and keep NaN/Inf.
 */
#include "dtype.h"

#include <errno.h>
#include <string.h>

#include "common/error.h"

#define QK   32
#define QK_K 256

struct dtype_info {
	const char *name;
	uint32_t block_elements;
	uint32_t block_bytes;
};

static const struct dtype_info dtype_infos[] = {
    [O1_DTYPE_F32] = {"F32", 1, 4},
    [O1_DTYPE_F16] = {"F16", 1, 2},
    [O1_DTYPE_Q4_0] = {"Q4_0", QK, 2 + QK / 2},
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

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

float o1_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;

	if (exp == 0x1f) /* Inf or NaN: keep the payload's top bits */
		return bits_f32(sign | 0x7f800000 | (mant << 13));
	if (exp != 0)
		return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
	/* zero or subnormal: mant * 2^-24, exact in float32 */
	return (sign ? -1.0f : 1.0f) * (float)mant * 5.9604644775390625e-8f;
}

/* Rounds the magnitude bits MAG (below 2^31) right by SHIFT, to nearest
 * even. */
static uint32_t round_shift(uint32_t mag, uint32_t shift)
{
	uint32_t keep = mag >> shift;
	uint32_t rest = mag & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);

	if (rest > half || (rest == half && (keep & 1)))
		keep++;
	return keep;
}

uint16_t o1_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t mag = u & 0x7fffffff;
	int32_t exp = (int32_t)(mag >> 23) - 127;

	if (mag >= 0x7f800000) /* Inf stays Inf; NaN stays a quiet NaN */
		return sign | 0x7c00 | (mag > 0x7f800000 ? 0x200 : 0) |
		       (uint16_t)((mag & 0x7fffff) >> 13);
	if (exp > 15)
		return sign | 0x7c00;
	if (exp >= -14) /* normal: rebias; a carry may round up to Inf */
		return sign | (uint16_t)round_shift(mag - (112u << 23), 13);
	if (exp < -25)
		return sign;
	/* subnormal: shift the significand with its implicit bit */
	return sign | (uint16_t)round_shift((mag & 0x7fffff) | 0x800000,
					    (uint32_t)(-exp - 1));
}

float o1_bf16_to_f32(uint16_t b)
{
	return bits_f32((uint32_t)b << 16);
}

uint16_t o1_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffff) > 0x7f800000) /* NaN: force quiet */
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static uint16_t load_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static void q8_0_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 34, dst += QK) {
		float d = o1_f16_to_f32(load_u16(b));

		for (int j = 0; j < QK; j++)
			dst[j] = (float)(int8_t)b[2 + j] * d;
	}
}

static void q4_0_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 18, dst += QK) {
		float d = o1_f16_to_f32(load_u16(b));

		for (int j = 0; j < QK / 2; j++) {
			dst[j] = (float)((b[2 + j] & 0xf) - 8) * d;
			dst[j + QK / 2] = (float)((b[2 + j] >> 4) - 8) * d;
		}
	}
}

/* Q4_K sub-block S (0..7): its 6-bit scale and min from the 12 packed
 * bytes. Pairs 0-3 sit in the low 6 bits of bytes 0-3 (scales) and 4-7
 * (mins); pairs 4-7 take 4 bits from bytes 8-11 and their top 2 bits from
 * the spare high bits of bytes 0-3 / 4-7. */
static void q4_k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *mn)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*mn = s[j + 4] & 63;
	} else {
		*sc = (uint8_t)((s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4));
		*mn = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
	}
}

static void q4_k_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 144) {
		float d = o1_f16_to_f32(load_u16(b));
		float dmin = o1_f16_to_f32(load_u16(b + 2));
		const uint8_t *q = b + 16;

		/* 64 elements per 32 bytes: low nibbles, then high ones */
		for (int s = 0; s < 8; s += 2, q += 32) {
			uint8_t sc0, mn0, sc1, mn1;

			q4_k_scale_min(b + 4, s, &sc0, &mn0);
			q4_k_scale_min(b + 4, s + 1, &sc1, &mn1);
			for (int l = 0; l < 32; l++)
				*dst++ = d * sc0 * (q[l] & 0xf) - dmin * mn0;
			for (int l = 0; l < 32; l++)
				*dst++ = d * sc1 * (q[l] >> 4) - dmin * mn1;
		}
	}
}

/* One 128-element half of a Q6_K block: QL 64 bytes, QH 32, SC 8. */
static void q6_k_half(const uint8_t *ql, const uint8_t *qh, const int8_t *sc,
		      float d, float *dst)
{
	for (int l = 0; l < 32; l++) {
		int k = l / 16;
		int q1 = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) - 32;
		int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
		int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
		int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;

		dst[l] = d * sc[k] * q1;
		dst[l + 32] = d * sc[k + 2] * q2;
		dst[l + 64] = d * sc[k + 4] * q3;
		dst[l + 96] = d * sc[k + 6] * q4;
	}
}

static void q6_k_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 210, dst += QK_K) {
		const int8_t *sc = (const int8_t *)(b + 192);
		float d = o1_f16_to_f32(load_u16(b + 208));

		q6_k_half(b, b + 128, sc, d, dst);
		q6_k_half(b + 64, b + 160, sc + 8, d, dst + 128);
	}
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
		q8_0_to_f32(b, dst, n / QK);
		break;
	case O1_DTYPE_Q4_0:
		q4_0_to_f32(b, dst, n / QK);
		break;
	case O1_DTYPE_Q4_K:
		q4_k_to_f32(b, dst, n / QK_K);
		break;
	case O1_DTYPE_Q6_K:
		q6_k_to_f32(b, dst, n / QK_K);
		break;
	}
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
	default:
		return -O1_E_UNSUPPORTED;
	}
}

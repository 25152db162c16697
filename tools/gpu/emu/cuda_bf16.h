/* The bf16 types and conversions of cuda_bf16.h that the kernels use, for
 * the CPU emulation (emu.h): raw bits, conversions rounding to nearest
 * even as the device does (NaN stays NaN). */
#ifndef O1_EMU_CUDA_BF16_H
#define O1_EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

#include "emu.h"

struct __nv_bfloat16 {
	uint16_t x;
};

struct __nv_bfloat162 {
	__nv_bfloat16 x, y;
};

static inline float __bfloat162float(__nv_bfloat16 h)
{
	uint32_t u = (uint32_t)h.x << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return {(uint16_t)((u >> 16) | 0x40)};
	return {(uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16)};
}

static inline float2 __bfloat1622float2(__nv_bfloat162 h)
{
	return {__bfloat162float(h.x), __bfloat162float(h.y)};
}

static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a,
						__nv_bfloat16 b)
{
	return {a, b};
}

static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b)
{
	return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}

#endif

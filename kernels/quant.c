/* GGUF block formats (see quant.h for the layouts and the contract).
 *
 * The quantizers reproduce llama.cpp's reference row quantizers in their
 * f32 arithmetic: every expression below keeps the operand order and the
 * int/float conversions of that arithmetic (a product w * l * x is
 * (w * l) * x, an int scale meets a float as a float), because a single
 * different rounding can move a level and change the bytes. Built with
 * -ffp-contract=off so no multiply-add is fused.
 */
#include "quant.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include "common/bits.h"
#include "common/log.h"
#include "quant_k.h"

#define QK   O1_QUANT_QK
#define QK_K O1_QUANT_QK_K

float o1_quant_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;

	if (exp == 0x1f) /* Inf or NaN: keep the payload's top bits */
		return o1_bits_f32(sign | 0x7f800000 | (mant << 13));
	if (exp != 0)
		return o1_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
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

uint16_t o1_quant_f32_to_f16(float f)
{
	uint32_t u = o1_f32_bits(f);
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

struct quant_info {
	const char *name;
	uint32_t type, elements, bytes;
};

static const struct quant_info infos[] = {
    {"Q4_0", O1_QUANT_Q4_0, QK, O1_QUANT_Q4_0_BYTES},
    {"Q5_0", O1_QUANT_Q5_0, QK, O1_QUANT_Q5_0_BYTES},
    {"Q8_0", O1_QUANT_Q8_0, QK, O1_QUANT_Q8_0_BYTES},
    {"Q4_K", O1_QUANT_Q4_K, QK_K, O1_QUANT_Q4_K_BYTES},
    {"Q6_K", O1_QUANT_Q6_K, QK_K, O1_QUANT_Q6_K_BYTES},
};
#define N_INFOS (sizeof(infos) / sizeof(infos[0]))

static const struct quant_info *find(uint32_t type)
{
	for (size_t i = 0; i < N_INFOS; i++)
		if (infos[i].type == type)
			return &infos[i];
	return NULL;
}

bool o1_quant_is_block(uint32_t type)
{
	return find(type) != NULL;
}

uint32_t o1_quant_block_elements(uint32_t type)
{
	const struct quant_info *q = find(type);

	return q ? q->elements : 0;
}

uint32_t o1_quant_block_bytes(uint32_t type)
{
	const struct quant_info *q = find(type);

	return q ? q->bytes : 0;
}

const char *o1_quant_name(uint32_t type)
{
	const struct quant_info *q = find(type);

	return q ? q->name : "?";
}

int o1_quant_parse(const char *name, enum o1_quant_type *out)
{
	for (size_t i = 0; i < N_INFOS; i++)
		if (strcasecmp(name, infos[i].name) == 0) {
			*out = (enum o1_quant_type)infos[i].type;
			return 0;
		}
	return -EINVAL;
}

int o1_quant_row_bytes(uint32_t type, uint64_t n, uint64_t *bytes)
{
	const struct quant_info *q = find(type);

	if (!q || n % q->elements != 0)
		return -EINVAL;
	*bytes = n / q->elements * q->bytes;
	return 0;
}

static uint16_t load_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static void store_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void q8_0_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 34, dst += QK) {
		float d = o1_quant_f16_to_f32(load_u16(b));

		for (int j = 0; j < QK; j++)
			dst[j] = (float)(int8_t)b[2 + j] * d;
	}
}

static void q4_0_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 18, dst += QK) {
		float d = o1_quant_f16_to_f32(load_u16(b));

		/* two plain passes (low nibbles, high ones): vectorized */
		for (int j = 0; j < QK / 2; j++)
			dst[j] = (float)((b[2 + j] & 0xf) - 8) * d;
		for (int j = 0; j < QK / 2; j++)
			dst[j + QK / 2] = (float)((b[2 + j] >> 4) - 8) * d;
	}
}

static uint32_t load_u32(const uint8_t *p)
{
	return (uint32_t)load_u16(p) | (uint32_t)load_u16(p + 2) << 16;
}

static void q5_0_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 22, dst += QK) {
		float d = o1_quant_f16_to_f32(load_u16(b));
		uint32_t qh = load_u32(b + 2);

		for (int j = 0; j < QK / 2; j++) {
			int lo = (b[6 + j] & 0xf) | (int)((qh >> j) & 1) << 4;
			int hi = (b[6 + j] >> 4) |
				 (int)((qh >> (j + QK / 2)) & 1) << 4;

			dst[j] = (float)(lo - 16) * d;
			dst[j + QK / 2] = (float)(hi - 16) * d;
		}
	}
}

static void q4_k_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 144) {
		float d = o1_quant_f16_to_f32(load_u16(b));
		float dmin = o1_quant_f16_to_f32(load_u16(b + 2));
		const uint8_t *q = b + 16;

		/* 64 elements per 32 bytes: low nibbles, then high ones */
		for (int s = 0; s < 8; s += 2, q += 32) {
			uint8_t sc0, mn0, sc1, mn1;
			float d0, m0, d1, m1;

			o1_quant_q4_k_scale_min(b + 4, s, &sc0, &mn0);
			o1_quant_q4_k_scale_min(b + 4, s + 1, &sc1, &mn1);
			d0 = d * sc0, m0 = dmin * mn0;
			d1 = d * sc1, m1 = dmin * mn1;
			for (int l = 0; l < 32; l++)
				*dst++ = d0 * (q[l] & 0xf) - m0;
			for (int l = 0; l < 32; l++)
				*dst++ = d1 * (q[l] >> 4) - m1;
		}
	}
}

/* One 128-element half of a Q6_K block: QL 64 bytes, QH 32, SC 8. Group g
 * (32 elements) takes the low (g < 2) or high nibbles of ql[32 (g % 2) +
 * l] and bits 2g of qh[l]; its two scales are hoisted (d * sc is the
 * expression's first product either way), so each pass is a plain loop
 * the compiler vectorizes. */
static void q6_k_half(const uint8_t *ql, const uint8_t *qh, const int8_t *sc,
		      float d, float *dst)
{
	for (int g = 0; g < 4; g++) {
		const uint8_t *q = ql + 32 * (g % 2);
		float d0 = d * sc[2 * g], d1 = d * sc[2 * g + 1];
		int shift = g < 2 ? 0 : 4;

		for (int l = 0; l < 32; l++) {
			int v = ((q[l] >> shift) & 0xf) |
				(((qh[l] >> (2 * g)) & 3) << 4);

			dst[32 * g + l] = (l < 16 ? d0 : d1) * (float)(v - 32);
		}
	}
}

static void q6_k_to_f32(const uint8_t *b, float *dst, uint64_t n_blocks)
{
	for (uint64_t i = 0; i < n_blocks; i++, b += 210, dst += QK_K) {
		const int8_t *sc = (const int8_t *)(b + 192);
		float d = o1_quant_f16_to_f32(load_u16(b + 208));

		q6_k_half(b, b + 128, sc, d, dst);
		q6_k_half(b + 64, b + 160, sc + 8, d, dst + 128);
	}
}

void o1_quant_dequantize(enum o1_quant_type type, const void *src, float *dst,
			 uint64_t n)
{
	switch (type) {
	case O1_QUANT_Q8_0:
		q8_0_to_f32(src, dst, n / QK);
		break;
	case O1_QUANT_Q4_0:
		q4_0_to_f32(src, dst, n / QK);
		break;
	case O1_QUANT_Q5_0:
		q5_0_to_f32(src, dst, n / QK);
		break;
	case O1_QUANT_Q4_K:
		q4_k_to_f32(src, dst, n / QK_K);
		break;
	case O1_QUANT_Q6_K:
		q6_k_to_f32(src, dst, n / QK_K);
		break;
	}
}

/* What x86's truncating conversion gives for V, the reference's compiled
 * behaviour: an int32 truncation, INT32_MIN for NaN or out of range (then
 * the low byte, 0, where an int8 is kept). Defined in C, unlike a cast. */
static int32_t trunc_i32(float v)
{
	if (!(v > -2147483648.0f && v < 2147483648.0f))
		return INT32_MIN;
	return (int32_t)v;
}

static int8_t low_i8(int32_t v)
{
	return (int8_t)(uint8_t)((uint32_t)v & 0xff);
}

/* d = max|x| / 127, q = round(x / d) half away from zero. */
static void q8_0_block(const float *x, uint8_t *b)
{
	float amax = 0.0f, d, id;

	for (int j = 0; j < QK; j++)
		amax = fmaxf(amax, fabsf(x[j]));
	d = amax / 127;
	id = d != 0.0f ? 1.0f / d : 0.0f;
	store_u16(b, o1_quant_f32_to_f16(d));
	for (int j = 0; j < QK; j++)
		b[2 + j] = (uint8_t)low_i8(trunc_i32(roundf(x[j] * id)));
}

/* The value of largest magnitude in a block of QK, its sign kept (the
 * first of equal magnitudes): Q4_0's and Q5_0's scale is it over minus
 * half their levels. */
static float signed_max(const float *x)
{
	float amax = 0.0f, max = 0.0f;

	for (int j = 0; j < QK; j++)
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	return max;
}

/* d = (the value of largest magnitude) / -8, so that value maps to level
 * 0 exactly and the other side gets the eighth level; q = x / d + 8.5
 * truncated, at most 15. */
static void q4_0_block(const float *x, uint8_t *b)
{
	float d = signed_max(x) / -8;
	float id = d != 0.0f ? 1.0f / d : 0.0f;

	store_u16(b, o1_quant_f32_to_f16(d));
	for (int j = 0; j < QK / 2; j++) {
		int8_t lo = low_i8(trunc_i32(x[j] * id + 8.5f));
		int8_t hi = low_i8(trunc_i32(x[QK / 2 + j] * id + 8.5f));
		uint8_t q0 = (uint8_t)(lo < 15 ? lo : 15);
		uint8_t q1 = (uint8_t)(hi < 15 ? hi : 15);

		b[2 + j] = (uint8_t)(q0 | (q1 << 4));
	}
}

/* Q4_0's rule with 32 levels: d = (the value of largest magnitude) /
 * -16, q = x / d + 16.5 truncated, at most 31; the fifth bits into qh. */
static void q5_0_block(const float *x, uint8_t *b)
{
	float d = signed_max(x) / -16;
	float id = d != 0.0f ? 1.0f / d : 0.0f;
	uint32_t qh = 0;

	store_u16(b, o1_quant_f32_to_f16(d));
	for (int j = 0; j < QK / 2; j++) {
		int8_t lo = low_i8(trunc_i32(x[j] * id + 16.5f));
		int8_t hi = low_i8(trunc_i32(x[QK / 2 + j] * id + 16.5f));
		uint8_t q0 = (uint8_t)(lo < 31 ? lo : 31);
		uint8_t q1 = (uint8_t)(hi < 31 ? hi : 31);

		b[6 + j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
		qh |= (uint32_t)((q0 & 0x10) >> 4) << j;
		qh |= (uint32_t)((q1 & 0x10) >> 4) << (j + QK / 2);
	}
	store_u16(b + 2, (uint16_t)qh);
	store_u16(b + 4, (uint16_t)(qh >> 16));
}

static bool all_finite(const float *x, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return false;
	return true;
}

int o1_quant_quantize(enum o1_quant_type type, const float *src, void *dst,
		      uint64_t n)
{
	uint32_t per = o1_quant_block_elements(type);
	uint32_t bytes = o1_quant_block_bytes(type);
	uint8_t *b = dst;

	if (!per || n % per != 0)
		return -EINVAL;
	if (!all_finite(src, n))
		return -ERANGE;
	for (uint64_t i = 0; i < n / per; i++, src += per, b += bytes) {
		switch (type) {
		case O1_QUANT_Q8_0:
			q8_0_block(src, b);
			break;
		case O1_QUANT_Q4_0:
			q4_0_block(src, b);
			break;
		case O1_QUANT_Q5_0:
			q5_0_block(src, b);
			break;
		case O1_QUANT_Q4_K:
			o1_quant_q4_k_block(src, b);
			break;
		case O1_QUANT_Q6_K:
			o1_quant_q6_k_block(src, b);
			break;
		}
	}
	return 0;
}

/* Rows per task of o1_quant_quantize_rows: about 256 Ki elements. */
static uint64_t rows_per_task(uint64_t cols)
{
	return cols >= (1u << 18) ? 1 : (1u << 18) / cols;
}

struct rows_args {
	enum o1_quant_type type;
	const float *src;
	uint8_t *dst;
	uint64_t rows, cols, row_bytes, per_task;
	atomic_uint_least64_t bad; /* a row with a NaN or an Inf, + 1 */
};

static void rows_task(void *arg, uint32_t task, uint32_t worker)
{
	struct rows_args *a = arg;
	uint64_t r0 = task * a->per_task;
	uint64_t n = a->rows - r0 < a->per_task ? a->rows - r0 : a->per_task;

	(void)worker;
	for (uint64_t r = r0; r < r0 + n; r++)
		if (o1_quant_quantize(a->type, a->src + r * a->cols,
				      a->dst + r * a->row_bytes, a->cols))
			atomic_store(&a->bad, r + 1);
}

int o1_quant_quantize_rows(struct o1_threads *tp, enum o1_quant_type type,
			   const float *src, void *dst, uint64_t rows,
			   uint64_t cols)
{
	struct rows_args a = {type, src, dst, rows, cols, 0, 0, 0};
	uint64_t tasks;

	if (o1_quant_row_bytes(type, cols, &a.row_bytes) || !cols)
		return -EINVAL;
	a.per_task = rows_per_task(cols);
	tasks = (rows + a.per_task - 1) / a.per_task;
	if (tasks > UINT32_MAX)
		return -EINVAL;
	o1_threads_run(tp, (uint32_t)tasks, rows_task, &a);
	if (atomic_load(&a.bad)) {
		o1_err("quantize %s: row %llu holds a NaN or an infinity",
		       o1_quant_name(type),
		       (unsigned long long)atomic_load(&a.bad) - 1);
		return -ERANGE;
	}
	return 0;
}

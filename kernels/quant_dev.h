/* GGUF block decoding in device code, for the .cu files (quant.cu,
 * gemv_q.cu): one "unit" of 32 consecutive elements of a row at a time,
 * every element the value quant.h specifies, bit for bit (each product
 * and difference rounded on its own: __fmul_rn / __fsub_rn, never a fused
 * multiply-add).
 *
 * Unit u of a row covers elements [32u, 32u + 32):
 *   Q8_0, Q4_0, Q5_0  block u (Q5_0: its 32 fifth bits one word);
 *   Q4_K        sub-block u % 8 of super-block u / 8 (its scale and min
 *               pair; the low nibbles of 32 bytes for even sub-blocks, the
 *               high ones for odd);
 *   Q6_K        of super-block u / 8, half h = (u % 8) / 4 and group
 *               g = u % 4: ql nibbles of 32 bytes, 2 bits of qh each, two
 *               scales (one per 16 elements).
 * qd_head and qd_octet decode the same unit 8 elements at a time, the
 * scale kept apart (the decode product's inner loop, which cannot hold 32
 * values in registers and multiplies by the scale once per octets).
 * Blocks of 34, 18, 22 and 210 bytes sit at 2-byte alignment only, so
 * their bytes are read as 16-bit words; Q4_K (144 bytes) at 16. Each
 * template decodes the five types by name and refuses any other at
 * compile time (qd_known), so no type falls into another's decode.
 * Loads are plain: callers pass rows of a weight matrix, which no kernel
 * writes.
 * Plain C++ with uint8/16/32 and float only (no cuda_fp16.h, no vector
 * types), so that tools/gpu/emu runs it on the CPU too.
 */
#ifndef O1_QUANT_DEV_H
#define O1_QUANT_DEV_H

#include <stdint.h>

#include "quant.h"

/* Host: whether P is aligned for the loads below (4 bytes for Q4_K, whose
 * d and dmin are read as one word; 2 for the others). */
static inline bool o1_quant_dev_aligned(enum o1_quant_type type, const void *p)
{
	return (uintptr_t)p % (type == O1_QUANT_Q4_K ? 4 : 2) == 0;
}

/* quant.h's o1_quant_f16_to_f32: exact, Inf and NaN kept. */
static __device__ __forceinline__ float qd_f16(uint32_t h)
{
	uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f,
		 mant = h & 0x3ff;

	if (exp == 0x1f)
		return __uint_as_float(sign | 0x7f800000u | (mant << 13));
	if (exp)
		return __uint_as_float(sign | ((exp + 112) << 23) |
				       (mant << 13));
	return __fmul_rn(sign ? -(float)mant : (float)mant,
			 5.9604644775390625e-8f);
}

/* (float)(B - K) for B in [0, 2^22) and a small integer K, exact, without
 * an int-to-float conversion (a quarter-rate instruction on sm_90, which
 * bounded the dequantization's throughput): B in the low mantissa bits of
 * 1.5 x 2^23, whose step is 1, less 1.5 x 2^23 + K (both exact). */
static __device__ __forceinline__ float qd_float_less(uint32_t b, int k)
{
	return __fsub_rn(__uint_as_float(0x4B400000u | b),
			 12582912.0f + (float)k);
}

/* qd_float_less (byte I of W, K), the byte moved into 1.5 x 2^23's
 * mantissa by one byte permutation. */
static __device__ __forceinline__ float qd_byte_less(uint32_t w, int i, int k)
{
	return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B400000u,
						      0x7650u + (uint32_t)i)),
			 12582912.0f + (float)k);
}

/* bf16 bits -> f32 (exact). */
static __device__ __forceinline__ float qd_bf16(uint32_t b)
{
	return __uint_as_float(b << 16);
}

/* f32 -> bf16 bits, round to nearest even, NaN kept quiet (dtype.h's
 * o1_f32_to_bf16). */
static __device__ __forceinline__ uint16_t qd_to_bf16(float f)
{
	uint32_t u = __float_as_uint(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static __device__ __forceinline__ uint32_t qd_u16(const uint8_t *p)
{
	return *(const uint16_t *)p;
}

/* Whether the templates below decode TYPE. */
template <int TYPE> static __host__ __device__ constexpr bool qd_known()
{
	return TYPE == O1_QUANT_Q8_0 || TYPE == O1_QUANT_Q4_0 ||
	       TYPE == O1_QUANT_Q5_0 || TYPE == O1_QUANT_Q4_K ||
	       TYPE == O1_QUANT_Q6_K;
}

/* Q5_0's 32 fifth bits at BLK + 2 (bit e: element e's), as two halves:
 * the block is 2-byte aligned. */
static __device__ __forceinline__ uint32_t qd_q5_high(const uint8_t *blk)
{
	return qd_u16(blk + 2) | (qd_u16(blk + 4) << 16);
}

/* Bit 4 of byte j set where bit j of the 4-bit N is (Q5_0's fifth bits
 * into place beside 4 nibbles in bytes): N times 2^4 + 2^11 + 2^18 + 2^25
 * puts bit j of N at 8 j + 4, the four copies of N apart (no carries). */
static __device__ __forceinline__ uint32_t qd_spread_fifth(uint32_t n)
{
	return (n * 0x02040810u) & 0x10101010u;
}

/* Q4_K's 6-bit scale SC and min MN of sub-block S (0-7) from the block's
 * 12 packed bytes at X (quant.h's layout). */
static __device__ __forceinline__ void
qd_k4_scale_min(const uint8_t *x, uint32_t s, uint32_t &sc, uint32_t &mn)
{
	if (s < 4) {
		sc = x[s] & 63;
		mn = x[s + 4] & 63;
	} else {
		sc = (x[s + 4] & 0xf) | ((x[s - 4] >> 6) << 4);
		mn = (x[s + 4] >> 4) | ((x[s] >> 6) << 4);
	}
}

/* The 32 bytes at P (2-byte aligned) into B, as 16 words. */
static __device__ __forceinline__ void qd_load32(const uint8_t *p,
						 uint32_t (&b)[8])
{
#pragma unroll
	for (int i = 0; i < 8; i++)
		b[i] = qd_u16(p + 4 * i) | (qd_u16(p + 4 * i + 2) << 16);
}

static __device__ __forceinline__ uint32_t qd_byte(const uint32_t (&b)[8],
						   int i)
{
	return (b[i / 4] >> (8 * (i % 4))) & 0xff;
}

/* Unit U of a row (ROW: the row's first byte) of TYPE, dequantized into
 * V[32]. */
template <int TYPE>
static __device__ __forceinline__ void qd_unit(const uint8_t *row, uint32_t u,
					       float (&v)[32])
{
	static_assert(qd_known<TYPE>(), "no decode for this block type");
	uint32_t b[8];

	if constexpr (TYPE == O1_QUANT_Q8_0) {
		const uint8_t *blk = row + (size_t)u * O1_QUANT_Q8_0_BYTES;
		float d = qd_f16(qd_u16(blk));

		qd_load32(blk + 2, b);
#pragma unroll
		for (int i = 0; i < 8; i++) {
			uint32_t w = b[i] ^ 0x80808080u; /* int8s plus 128 */

#pragma unroll
			for (int j = 0; j < 4; j++)
				v[4 * i + j] =
				    __fmul_rn(qd_byte_less(w, j, 128), d);
		}
	} else if constexpr (TYPE == O1_QUANT_Q4_0) {
		const uint8_t *blk = row + (size_t)u * O1_QUANT_Q4_0_BYTES;
		float d = qd_f16(qd_u16(blk));

#pragma unroll
		for (int i = 0; i < 8; i++) {
			uint32_t w = qd_u16(blk + 2 + 2 * i);

#pragma unroll
			for (int h = 0; h < 2; h++) {
				uint32_t q = (w >> (8 * h)) & 0xff;

				v[2 * i + h] =
				    __fmul_rn(qd_float_less(q & 0xf, 8), d);
				v[16 + 2 * i + h] =
				    __fmul_rn(qd_float_less(q >> 4, 8), d);
			}
		}
	} else if constexpr (TYPE == O1_QUANT_Q5_0) {
		const uint8_t *blk = row + (size_t)u * O1_QUANT_Q5_0_BYTES;
		float d = qd_f16(qd_u16(blk));
		uint32_t hb = qd_q5_high(blk);

#pragma unroll
		for (int i = 0; i < 8; i++) {
			uint32_t w = qd_u16(blk + 6 + 2 * i);

#pragma unroll
			for (int h = 0; h < 2; h++) {
				uint32_t q = (w >> (8 * h)) & 0xff,
					 e = 2 * i + h;
				uint32_t lo = (q & 0xf) | ((hb >> e) & 1) << 4;
				uint32_t hi = (q >> 4) | ((hb >> (16 + e)) & 1)
							     << 4;

				v[e] = __fmul_rn(qd_float_less(lo, 16), d);
				v[16 + e] = __fmul_rn(qd_float_less(hi, 16), d);
			}
		}
	} else if constexpr (TYPE == O1_QUANT_Q4_K) {
		const uint8_t *blk =
		    row + (size_t)(u / 8) * O1_QUANT_Q4_K_BYTES;
		uint32_t s = u % 8, sc, mn;
		uint32_t dd = *(const uint32_t *)blk;
		const uint8_t *x = blk + 4;
		float d, m;

		qd_k4_scale_min(x, s, sc, mn);
		d = __fmul_rn(qd_f16(dd & 0xffff), (float)sc);
		m = __fmul_rn(qd_f16(dd >> 16), (float)mn);
		/* 4-byte aligned (the blocks are: quant.cu's invariants) */
		const uint32_t *qs = (const uint32_t *)(blk + 16 + 32 * (s / 2));

#pragma unroll
		for (int i = 0; i < 8; i++) {
			uint32_t w = (qs[i] >> (4 * (s % 2))) & 0x0f0f0f0fu;

#pragma unroll
			for (int j = 0; j < 4; j++)
				v[4 * i + j] = __fsub_rn(
				    __fmul_rn(d, qd_byte_less(w, j, 0)), m);
		}
	} else if constexpr (TYPE == O1_QUANT_Q6_K) {
		const uint8_t *blk =
		    row + (size_t)(u / 8) * O1_QUANT_Q6_K_BYTES;
		uint32_t h = (u % 8) / 4, g = u % 4, hb[8];
		const int8_t *sc = (const int8_t *)(blk + 192) + 8 * h + 2 * g;
		float d = qd_f16(qd_u16(blk + 208));
		float d0 = __fmul_rn(d, (float)sc[0]);
		float d1 = __fmul_rn(d, (float)sc[1]);

		qd_load32(blk + 64 * h + 32 * (g % 2), b);
		qd_load32(blk + 128 + 32 * h, hb);
#pragma unroll
		for (int i = 0; i < 8; i++) {
			/* four 6-bit quants, one a byte */
			uint32_t w = ((b[i] >> (g < 2 ? 0 : 4)) & 0x0f0f0f0fu) |
				     ((hb[i] >> (2 * g)) & 0x03030303u) << 4;

#pragma unroll
			for (int j = 0; j < 4; j++)
				v[4 * i + j] = __fmul_rn(
				    i < 4 ? d0 : d1, qd_byte_less(w, j, 32));
		}
	}
}

/* A unit's scales and byte pointers (qd_head), for decoding it 8 elements
 * at a time (qd_octet) with few registers live. Element e of octet o is
 * qd_unit's value (quant.h's) as the exact product v[e] * qd_scale(h, o):
 * for Q8_0, Q4_0, Q5_0 and Q6_K v is the small integer (|v| <= 128, so v
 * times a bf16 is exact in f32) and the scale the block's (Q6_K: the 16
 * elements'); for Q4_K v is the value itself (its min is not a factor)
 * and the scale 1. */
struct qd_unit_head {
	const uint8_t *q;  /* Q8_0/Q4_0/Q5_0: the quants; K types: ql /
			      nibbles */
	const uint8_t *qh; /* Q6_K: the 2-bit highs */
	float d, d1, m;	   /* scale (Q6_K: elements < 16, d1 the others),
			      Q4_K's min */
	uint32_t sel;	   /* Q4_K: nibble (s % 2); Q6_K: group g; Q5_0:
			      the fifth bits (qd_q5_high; one field for
			      both keeps the K types' code as it was) */
};

template <int TYPE>
static __device__ __forceinline__ qd_unit_head qd_head(const uint8_t *row,
						       uint32_t u)
{
	static_assert(qd_known<TYPE>(), "no decode for this block type");
	qd_unit_head h = {};

	if constexpr (TYPE == O1_QUANT_Q8_0) {
		const uint8_t *blk = row + (size_t)u * O1_QUANT_Q8_0_BYTES;

		h.d = qd_f16(qd_u16(blk));
		h.q = blk + 2;
	} else if constexpr (TYPE == O1_QUANT_Q4_0) {
		const uint8_t *blk = row + (size_t)u * O1_QUANT_Q4_0_BYTES;

		h.d = qd_f16(qd_u16(blk));
		h.q = blk + 2;
	} else if constexpr (TYPE == O1_QUANT_Q5_0) {
		const uint8_t *blk = row + (size_t)u * O1_QUANT_Q5_0_BYTES;

		h.d = qd_f16(qd_u16(blk));
		h.sel = qd_q5_high(blk);
		h.q = blk + 6;
	} else if constexpr (TYPE == O1_QUANT_Q4_K) {
		const uint8_t *blk =
		    row + (size_t)(u / 8) * O1_QUANT_Q4_K_BYTES;
		uint32_t s = u % 8, sc, mn;
		uint32_t dd = *(const uint32_t *)blk;
		const uint8_t *x = blk + 4;

		qd_k4_scale_min(x, s, sc, mn);
		h.d = __fmul_rn(qd_f16(dd & 0xffff), (float)sc);
		h.m = __fmul_rn(qd_f16(dd >> 16), (float)mn);
		h.q = blk + 16 + 32 * (s / 2);
		h.sel = s % 2;
	} else if constexpr (TYPE == O1_QUANT_Q6_K) {
		const uint8_t *blk =
		    row + (size_t)(u / 8) * O1_QUANT_Q6_K_BYTES;
		uint32_t hf = (u % 8) / 4, g = u % 4;
		const int8_t *sc =
		    (const int8_t *)(blk + 192) + 8 * hf + 2 * g;
		float d = qd_f16(qd_u16(blk + 208));

		h.d = __fmul_rn(d, (float)sc[0]);
		h.d1 = __fmul_rn(d, (float)sc[1]);
		h.q = blk + 64 * hf + 32 * (g % 2);
		h.qh = blk + 128 + 32 * hf;
		h.sel = g;
	}
	return h;
}

/* The small integer I (0 <= I < 2^23) plus 2^23 as f32 bits, so that
 * subtracting a constant gives an integer's value exactly: one logic op
 * and one add instead of a conversion (a quarter-rate instruction). */
static __device__ __forceinline__ float qd_magic(uint32_t i)
{
	return __uint_as_float(0x4b000000u | i);
}

/* 8 bytes at P (2-byte aligned) as two words. */
static __device__ __forceinline__ void qd_load8(const uint8_t *p,
						uint32_t (&b)[2])
{
	b[0] = qd_u16(p) | (qd_u16(p + 2) << 16);
	b[1] = qd_u16(p + 4) | (qd_u16(p + 6) << 16);
}

static __device__ __forceinline__ uint32_t qd_byte8(const uint32_t (&b)[2],
						    int i)
{
	return (b[i / 4] >> (8 * (i % 4))) & 0xff;
}

/* The factor of octet O's V (qd_octet). */
template <int TYPE>
static __device__ __forceinline__ float qd_scale(const qd_unit_head &h, int o)
{
	static_assert(qd_known<TYPE>(), "no decode for this block type");
	if constexpr (TYPE == O1_QUANT_Q4_K)
		return 1.0f;
	else if constexpr (TYPE == O1_QUANT_Q6_K)
		return o < 2 ? h.d : h.d1;
	else /* Q8_0, Q4_0, Q5_0: the block's */
		return h.d;
}

/* Elements [8 O, 8 O + 8) of the unit H describes, into V (times
 * qd_scale(H, O)). */
template <int TYPE>
static __device__ __forceinline__ void qd_octet(const qd_unit_head &h, int o,
						float (&v)[8])
{
	static_assert(qd_known<TYPE>(), "no decode for this block type");
	uint32_t b[2];

	if constexpr (TYPE == O1_QUANT_Q8_0) {
		qd_load8(h.q + 8 * o, b);
#pragma unroll
		for (int e = 0; e < 8; e++)
			v[e] = __fsub_rn(qd_magic(qd_byte8(b, e) ^ 0x80),
					 8388736.0f); /* 2^23 + 128 */
	} else if constexpr (TYPE == O1_QUANT_Q4_0) {
		/* elements < 16: low nibbles of bytes 0..15, then high */
		qd_load8(h.q + 8 * (o % 2), b);
#pragma unroll
		for (int e = 0; e < 8; e++) {
			uint32_t q = qd_byte8(b, e);

			q = o < 2 ? q & 0xf : q >> 4;
			v[e] = __fsub_rn(qd_magic(q),
					 8388616.0f); /* 2^23 + 8 */
		}
	} else if constexpr (TYPE == O1_QUANT_Q5_0) {
		/* Q4_0's nibbles, element 8 o + e's fifth bit above */
		qd_load8(h.q + 8 * (o % 2), b);
#pragma unroll
		for (int e = 0; e < 8; e++) {
			uint32_t q = qd_byte8(b, e);

			q = o < 2 ? q & 0xf : q >> 4;
			q |= ((h.sel >> (8 * o + e)) & 1) << 4;
			v[e] = __fsub_rn(qd_magic(q),
					 8388624.0f); /* 2^23 + 16 */
		}
	} else if constexpr (TYPE == O1_QUANT_Q4_K) {
		qd_load8(h.q + 8 * o, b);
#pragma unroll
		for (int e = 0; e < 8; e++) {
			uint32_t q = qd_byte8(b, e);

			q = h.sel ? q >> 4 : q & 0xf;
			v[e] = __fsub_rn(
			    __fmul_rn(h.d,
				      __fsub_rn(qd_magic(q), 8388608.0f)),
			    h.m);
		}
	} else if constexpr (TYPE == O1_QUANT_Q6_K) {
		uint32_t hb[2];

		qd_load8(h.q + 8 * o, b);
		qd_load8(h.qh + 8 * o, hb);
#pragma unroll
		for (int e = 0; e < 8; e++) {
			uint32_t lo = qd_byte8(b, e), hi = qd_byte8(hb, e);
			uint32_t q;

			lo = h.sel < 2 ? lo & 0xf : lo >> 4;
			q = lo | (((hi >> (2 * h.sel)) & 3) << 4);
			v[e] = __fsub_rn(qd_magic(q),
					 8388640.0f); /* 2^23 + 32 */
		}
	}
}

#endif

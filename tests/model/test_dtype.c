/* dtype.c: sizes, half-precision conversions (checked against an
 * independent ldexp-based decoder and a brute-force nearest-even encoder)
 * and each dequantizer against hand-packed blocks whose values follow from
 * GGML's documented layouts. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/dtype.h"
#include "common/error.h"

static float bits_f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint32_t f_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* IEEE binary16 value from its fields, for finite H. */
static double ref_f16(uint16_t h)
{
	int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
	double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp(m, -24);

	return s ? -v : v;
}

/* Nearest binary16 to positive finite X, ties to even (brute force over
 * the ordered positive encodings). */
static uint16_t ref_to_f16(double x)
{
	uint16_t lo = 0;

	if (x >= 65520.0)
		return 0x7c00;
	while (lo < 0x7bff && ref_f16(lo + 1) <= x)
		lo++;
	if (lo == 0x7bff || x - ref_f16(lo) < ref_f16(lo + 1) - x)
		return lo;
	if (x - ref_f16(lo) > ref_f16(lo + 1) - x)
		return lo + 1;
	return (lo & 1) ? lo + 1 : lo;
}

static void test_sizes(void **state)
{
	static const uint32_t ok[] = {0, 1, 2, 6, 8, 12, 14, 30};
	static const uint32_t bad[] = {3, 7, 10, 13, 15, 29, 31, 1000};
	uint64_t b;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		assert_true(o1_dtype_supported(ok[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(o1_dtype_supported(bad[i]));
	assert_int_equal(o1_dtype_block_bytes(O1_DTYPE_Q8_0), 34);
	assert_int_equal(o1_dtype_block_bytes(O1_DTYPE_Q4_0), 18);
	assert_int_equal(o1_dtype_block_bytes(O1_DTYPE_Q5_0), 22);
	assert_int_equal(o1_dtype_block_elements(O1_DTYPE_Q5_0), 32);
	assert_int_equal(o1_dtype_block_bytes(O1_DTYPE_Q4_K), 144);
	assert_int_equal(o1_dtype_block_bytes(O1_DTYPE_Q6_K), 210);
	assert_int_equal(o1_dtype_block_elements(O1_DTYPE_Q6_K), 256);
	assert_int_equal(o1_dtype_block_elements(O1_DTYPE_BF16), 1);
	assert_string_equal(o1_dtype_name(O1_DTYPE_Q4_K), "Q4_K");
	assert_int_equal(o1_dtype_row_bytes(O1_DTYPE_Q4_K, 512, &b), 0);
	assert_int_equal(b, 288);
	assert_int_equal(o1_dtype_row_bytes(O1_DTYPE_F16, 7, &b), 0);
	assert_int_equal(b, 14);
	assert_int_equal(o1_dtype_row_bytes(O1_DTYPE_Q8_0, 33, &b),
			 -O1_E_SHAPE);
	assert_int_equal(o1_dtype_row_bytes(O1_DTYPE_F32, UINT64_MAX / 2, &b),
			 -EOVERFLOW);
	assert_int_equal(o1_dtype_row_bytes((enum o1_dtype)3, 32, &b),
			 -O1_E_UNSUPPORTED);
}

static void test_f16_decode(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = o1_f16_to_f32((uint16_t)h);

		if (((h >> 10) & 31) == 31) {
			assert_true((h & 1023) ? isnan(f) : isinf(f));
			assert_int_equal(signbit(f) != 0, (h >> 15) != 0);
			continue;
		}
		assert_true((double)f == ref_f16((uint16_t)h));
		assert_int_equal(signbit(f) != 0, (h >> 15) != 0);
	}
	assert_true(o1_f16_to_f32(0x3c00) == 1.0f);
	assert_true(o1_f16_to_f32(0xc000) == -2.0f);
	assert_true(o1_f16_to_f32(0x7bff) == 65504.0f);
	assert_true(o1_f16_to_f32(0x0001) == ldexpf(1, -24));
}

static void test_f16_encode(void **state)
{
	(void)state;
	/* every finite half survives a round trip, sign included */
	for (uint32_t h = 0; h < 0x10000; h++)
		if (((h >> 10) & 31) != 31)
			assert_int_equal(
			    o1_f32_to_f16(o1_f16_to_f32((uint16_t)h)), h);
	assert_int_equal(o1_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(o1_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(o1_f32_to_f16(65519.0f), 0x7bff);
	assert_int_equal(o1_f32_to_f16(65520.0f), 0x7c00); /* tie -> even */
	assert_int_equal(o1_f32_to_f16(1e10f), 0x7c00);
	assert_int_equal(o1_f32_to_f16(-INFINITY), 0xfc00);
	assert_int_equal(o1_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);
	assert_int_equal(o1_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
	assert_int_equal(o1_f32_to_f16(ldexpf(1, -25)), 0x0000);
	assert_int_equal(o1_f32_to_f16(ldexpf(1.5f, -25)), 0x0001);
	assert_int_equal(o1_f32_to_f16(ldexpf(3, -25)), 0x0002);
	assert_int_equal(o1_f32_to_f16(-0.0f), 0x8000);
	assert_int_equal(o1_f32_to_f16(NAN) & 0x7c00, 0x7c00);
	assert_true((o1_f32_to_f16(NAN) & 0x3ff) != 0);
	assert_true((o1_f32_to_f16(bits_f(0x7f800001)) & 0x3ff) != 0);
	/* random values across the half range against the brute force */
	srand(7);
	for (int i = 0; i < 3000; i++) {
		float x = ldexpf((float)rand() / (float)RAND_MAX, rand() % 44 - 27);

		assert_int_equal(o1_f32_to_f16(x), ref_to_f16(x));
		assert_int_equal(o1_f32_to_f16(-x), 0x8000 | ref_to_f16(x));
	}
}

static void test_bf16(void **state)
{
	(void)state;
	for (uint32_t b = 0; b < 0x10000; b++) {
		float f = o1_bf16_to_f32((uint16_t)b);

		assert_int_equal(f_bits(f), b << 16);
		if (!isnan(f))
			assert_int_equal(o1_f32_to_bf16(f), b);
	}
	assert_int_equal(o1_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(o1_f32_to_bf16(bits_f(0x3f808000)), 0x3f80);
	assert_int_equal(o1_f32_to_bf16(bits_f(0x3f818000)), 0x3f82);
	assert_int_equal(o1_f32_to_bf16(bits_f(0x3f808001)), 0x3f81);
	assert_int_equal(o1_f32_to_bf16(bits_f(0x7f7fffff)), 0x7f80);
	assert_int_equal(o1_f32_to_bf16(INFINITY), 0x7f80);
	assert_true(isnan(o1_bf16_to_f32(o1_f32_to_bf16(bits_f(0x7f800001)))));
	assert_true(isnan(o1_bf16_to_f32(o1_f32_to_bf16(NAN))));
}

/* The writers' dtype check: exactly the types o1_dtype_from_f32 makes. */
static void test_is_float(void **state)
{
	static const float one = 1.0f;
	uint8_t out[4];

	(void)state;
	for (uint32_t t = 0; t < 40; t++) {
		if (!o1_dtype_supported(t))
			continue;
		assert_int_equal(o1_dtype_is_float(t),
				 o1_dtype_from_f32(t, &one, out, 1) == 0);
	}
	assert_true(o1_dtype_is_float(O1_DTYPE_F32));
	assert_true(o1_dtype_is_float(O1_DTYPE_F16));
	assert_true(o1_dtype_is_float(O1_DTYPE_BF16));
	assert_false(o1_dtype_is_float(O1_DTYPE_Q8_0));
	assert_false(o1_dtype_is_float(O1_DTYPE_Q4_K));
}

static void test_plain_convert(void **state)
{
	const float src[5] = {1.0f, -2.5f, 0.333333f, 65504.0f, -0.0f};
	uint8_t buf[20];
	float back[5];

	(void)state;
	assert_int_equal(o1_dtype_from_f32(O1_DTYPE_F16, src, buf, 5), 0);
	assert_int_equal(buf[0] | buf[1] << 8, 0x3c00);
	o1_dtype_to_f32(O1_DTYPE_F16, buf, back, 5);
	for (int i = 0; i < 5; i++)
		assert_float_equal(back[i], src[i], 1e-3 * fabsf(src[i]));
	assert_int_equal(o1_dtype_from_f32(O1_DTYPE_BF16, src, buf, 5), 0);
	o1_dtype_to_f32(O1_DTYPE_BF16, buf, back, 5);
	for (int i = 0; i < 5; i++)
		assert_float_equal(back[i], src[i], 1e-2 * fabsf(src[i]));
	assert_int_equal(o1_dtype_from_f32(O1_DTYPE_F32, src, buf, 5), 0);
	o1_dtype_to_f32(O1_DTYPE_F32, buf, back, 5);
	assert_memory_equal(back, src, sizeof(src));
	/* block types quantize whole blocks only (kernels/quant.h) */
	assert_int_equal(o1_dtype_from_f32(O1_DTYPE_Q8_0, src, buf, 5),
			 -O1_E_SHAPE);
	assert_int_equal(o1_dtype_from_f32((enum o1_dtype)13, src, buf, 5),
			 -O1_E_UNSUPPORTED);
}

/* A block type through o1_dtype_from_f32 and back: Q8_0 keeps 1/127 of a
 * block's largest magnitude. */
static void test_block_convert(void **state)
{
	float src[32], back[32];
	uint8_t buf[34];

	(void)state;
	for (int i = 0; i < 32; i++)
		src[i] = (float)(i - 16) / 8;
	assert_int_equal(o1_dtype_from_f32(O1_DTYPE_Q8_0, src, buf, 32), 0);
	o1_dtype_to_f32(O1_DTYPE_Q8_0, buf, back, 32);
	for (int i = 0; i < 32; i++)
		assert_float_equal(back[i], src[i], 2.0 / 127 / 2 + 1e-6);
	src[3] = NAN;
	assert_int_equal(o1_dtype_from_f32(O1_DTYPE_Q8_0, src, buf, 32),
			 -ERANGE);
}

static void put_f16(uint8_t *p, uint16_t h)
{
	p[0] = (uint8_t)h;
	p[1] = (uint8_t)(h >> 8);
}

static void test_q8_0(void **state)
{
	uint8_t b[2 * 34];
	float out[64];

	(void)state;
	put_f16(b, 0x3800);	 /* 0.5 */
	put_f16(b + 34, 0xc400); /* -4 */
	for (int j = 0; j < 32; j++) {
		b[2 + j] = (uint8_t)(int8_t)(j * 8 - 128);
		b[36 + j] = (uint8_t)(int8_t)(127 - j);
	}
	o1_dtype_to_f32(O1_DTYPE_Q8_0, b, out, 64);
	for (int j = 0; j < 32; j++) {
		assert_true(out[j] == (j * 8 - 128) * 0.5f);
		assert_true(out[32 + j] == (127 - j) * -4.0f);
	}
}

static void test_q4_0(void **state)
{
	uint8_t b[18];
	float out[32];

	(void)state;
	put_f16(b, 0x4000); /* 2 */
	for (int j = 0; j < 16; j++)
		b[2 + j] = (uint8_t)(j | (15 - j) << 4);
	o1_dtype_to_f32(O1_DTYPE_Q4_0, b, out, 32);
	for (int j = 0; j < 16; j++) {
		assert_true(out[j] == (j - 8) * 2.0f);
		assert_true(out[16 + j] == (15 - j - 8) * 2.0f);
	}
}

/* Packs eight 6-bit scale/min pairs the way GGML's Q4_K stores them:
 * pairs 0-3 in the low 6 bits of bytes 0-3 (scale) and 4-7 (min); pairs
 * 4-7 as nibbles in bytes 8-11 (scale low, min high) with their top two
 * bits in the top bits of bytes 0-3 (scale) and 4-7 (min). */
static void pack_q4_k_scales(uint8_t s[12], const uint8_t sc[8],
			     const uint8_t mn[8])
{
	memset(s, 0, 12);
	for (int j = 0; j < 4; j++) {
		s[j] = sc[j] | (uint8_t)((sc[j + 4] >> 4) << 6);
		s[j + 4] = mn[j] | (uint8_t)((mn[j + 4] >> 4) << 6);
		s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
	}
}

static void test_q4_k(void **state)
{
	static const uint8_t sc[8] = {1, 7, 20, 63, 5, 33, 17, 60};
	static const uint8_t mn[8] = {2, 40, 0, 63, 31, 16, 48, 9};
	uint8_t b[144];
	float out[256];

	(void)state;
	put_f16(b, 0x3c00);	/* d = 1 */
	put_f16(b + 2, 0x3800); /* dmin = 0.5 */
	pack_q4_k_scales(b + 4, sc, mn);
	for (int i = 0; i < 128; i++)
		b[16 + i] = (uint8_t)(i * 7 + 3);
	o1_dtype_to_f32(O1_DTYPE_Q4_K, b, out, 256);
	for (int e = 0; e < 256; e++) {
		/* 64-element chunks of 32 bytes: low nibbles, then high */
		int s = e / 32, byte = (e / 64) * 32 + e % 32;
		int q = (s % 2) ? b[16 + byte] >> 4 : b[16 + byte] & 15;

		assert_true(out[e] == 1.0f * sc[s] * q - 0.5f * mn[s]);
	}
}

static void test_q6_k(void **state)
{
	uint8_t b[210];
	float out[512];

	(void)state;
	for (int i = 0; i < 128; i++)
		b[i] = (uint8_t)(i * 13 + 5);
	for (int i = 0; i < 64; i++)
		b[128 + i] = (uint8_t)(i * 29 + 1);
	for (int i = 0; i < 16; i++)
		b[192 + i] = (uint8_t)(int8_t)(i * 9 - 70);
	put_f16(b + 208, 0x3400); /* 0.25 */
	o1_dtype_to_f32(O1_DTYPE_Q6_K, b, out, 256);
	for (int e = 0; e < 256; e++) {
		/* halves of 128; in each, 4 groups of 32 share ql bytes
		 * (groups 0/2 and 1/3 take the low/high nibble of the same
		 * byte) and qh bytes (2 bits per group), 16 per scale */
		int n = e / 128, g = (e % 128) / 32, l = e % 32;
		int ql = b[n * 64 + l + (g & 1) * 32];
		int lo = g < 2 ? ql & 15 : ql >> 4;
		int hi = (b[128 + n * 32 + l] >> (2 * g)) & 3;
		int sc = (int8_t)b[192 + n * 8 + l / 16 + 2 * g];

		assert_true(out[e] == 0.25f * sc * ((lo | hi << 4) - 32));
	}
}

/* Block strides: the second super-block starts right after the first. */
static void test_k_two_blocks(void **state)
{
	uint8_t b[2 * 210];
	float out[512];

	(void)state;
	memset(b, 0, sizeof(b));
	b[192] = 2;
	b[210 + 192] = 3;
	put_f16(b + 208, 0x3400);
	put_f16(b + 210 + 208, 0x3800);
	o1_dtype_to_f32(O1_DTYPE_Q6_K, b, out, 512);
	assert_true(out[0] == 0.25f * 2 * -32);
	assert_true(out[256] == 0.5f * 3 * -32);
	memset(b, 0, sizeof(b));
	put_f16(b, 0x3c00);
	put_f16(b + 144, 0x4000);
	b[4] = 1;
	b[144 + 4] = 5;
	b[16] = 3;
	b[144 + 16] = 2;
	o1_dtype_to_f32(O1_DTYPE_Q4_K, b, out, 512);
	assert_true(out[0] == 3.0f);
	assert_true(out[256] == 2.0f * 5 * 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_f16_decode),
	    cmocka_unit_test(test_f16_encode),
	    cmocka_unit_test(test_bf16),
	    cmocka_unit_test(test_is_float),
	    cmocka_unit_test(test_plain_convert),
	    cmocka_unit_test(test_block_convert),
	    cmocka_unit_test(test_q8_0),
	    cmocka_unit_test(test_q4_0),
	    cmocka_unit_test(test_q4_k),
	    cmocka_unit_test(test_q6_k),
	    cmocka_unit_test(test_k_two_blocks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

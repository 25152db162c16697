/* quant: GGUF block formats against llama.cpp's own vectors
 * (../shared/testdata/quant, written by its ggml-quants.c, and Q5_0's,
 * written the same way from the same input: tests/data/quant/README):
 * dequantization bitwise equal; Q8_0, Q4_0 and Q5_0 bytes identical;
 * Q4_K and Q6_K rows
 * identical or, where a row differs, no worse in squared error against the
 * input than the reference's (the count is printed). Without the shared
 * data the synthetic tests still run and the program exits 77. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <unistd.h>

#include "kernels/quant.h"

#define QDIR O1_SHARED_DIR "/testdata/quant"
#define OWNDIR O1_SOURCE_DIR "/tests/data/quant"
#define ROWS 64
#define COLS 1024

static const enum o1_quant_type types[] = {
    O1_QUANT_Q8_0, O1_QUANT_Q4_0, O1_QUANT_Q5_0, O1_QUANT_Q4_K,
    O1_QUANT_Q6_K};
static const char *const files[] = {"q8_0", "q4_0", "q5_0", "q4_k", "q6_k"};
/* where each type's vectors are (the input is always QDIR's) */
static const char *const dirs[] = {QDIR, QDIR, OWNDIR, QDIR, QDIR};

static bool have_shared(void)
{
	return access(QDIR "/input.f32", R_OK) == 0;
}

/* Reads DIR/NAME, which must hold exactly BYTES bytes. */
static void *read_exact(const char *dir, const char *name, size_t bytes)
{
	char path[512];
	void *buf = malloc(bytes + 1);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, bytes + 1, f), bytes);
	fclose(f);
	return buf;
}

static size_t row_bytes(enum o1_quant_type t)
{
	uint64_t b;

	assert_int_equal(o1_quant_row_bytes(t, COLS, &b), 0);
	return (size_t)b;
}

static void test_dequant_reference(void **state)
{
	char name[64];

	(void)state;
	if (!have_shared())
		skip();
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t rb = row_bytes(types[i]);
		uint8_t *q;
		float *want, *got = malloc(sizeof(float) * ROWS * COLS);

		snprintf(name, sizeof(name), "%s.bin", files[i]);
		q = read_exact(dirs[i], name, rb * ROWS);
		snprintf(name, sizeof(name), "%s.dequant.f32", files[i]);
		want = read_exact(dirs[i], name, sizeof(float) * ROWS * COLS);
		o1_quant_dequantize(types[i], q, got, (uint64_t)ROWS * COLS);
		assert_memory_equal(got, want, sizeof(float) * ROWS * COLS);
		free(q), free(want), free(got);
	}
}

static double sq_error(enum o1_quant_type t, const uint8_t *q, const float *x)
{
	float y[COLS];
	double e = 0;

	o1_quant_dequantize(t, q, y, COLS);
	for (int c = 0; c < COLS; c++)
		e += ((double)y[c] - x[c]) * ((double)y[c] - x[c]);
	return e;
}

/* Rows of TYPE whose bytes equal the reference's; every other row must be
 * no worse (Q8_0, Q4_0 and Q5_0: every row must be equal). */
static int compare_rows(size_t i, const float *x)
{
	enum o1_quant_type t = types[i];
	size_t rb = row_bytes(t);
	uint8_t *ours = malloc(rb * ROWS), *ref;
	char name[64];
	int same = 0;

	snprintf(name, sizeof(name), "%s.bin", files[i]);
	ref = read_exact(dirs[i], name, rb * ROWS);
	assert_int_equal(o1_quant_quantize(t, x, ours, (uint64_t)ROWS * COLS),
			 0);
	for (int r = 0; r < ROWS; r++) {
		const uint8_t *a = ours + r * rb, *b = ref + r * rb;
		const float *xr = x + (size_t)r * COLS;

		if (memcmp(a, b, rb) == 0) {
			same++;
			continue;
		}
		printf("%s row %d (kind %d) differs: squared error %.9g, "
		       "reference %.9g\n",
		       files[i], r, r % 8, sq_error(t, a, xr),
		       sq_error(t, b, xr));
		assert_true(t == O1_QUANT_Q4_K || t == O1_QUANT_Q6_K);
		assert_true(sq_error(t, a, xr) <= sq_error(t, b, xr));
	}
	free(ours), free(ref);
	return same;
}

static void test_quant_reference(void **state)
{
	float *x;

	(void)state;
	if (!have_shared())
		skip();
	x = read_exact(QDIR, "input.f32", sizeof(float) * ROWS * COLS);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		int same = compare_rows(i, x);

		printf("%s: %d of %d rows byte-identical to llama.cpp\n",
		       files[i], same, ROWS);
	}
	free(x);
}

static uint64_t rng = 0x243f6a8885a308d3ull;

static float gauss(void)
{
	double u1, u2;

	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	u1 = ((rng >> 11) + 1) * 0x1.0p-53;
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	u2 = (rng >> 11) * 0x1.0p-53;
	return (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
}

/* Relative RMS error of a round trip of normal data, per type: the
 * bounds are 1.2x what the reference quantizers give on these values
 * (0.0053, 0.086, 0.042, 0.071, 0.0175; Gaussian rows have heavier
 * tails than the shared set's mix, whence more than its README's
 * figures). */
static void test_round_trip(void **state)
{
	static const double bound[] = {0.0065, 0.105, 0.050, 0.085, 0.021};
	enum { N = 4096 };
	float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
	uint8_t *q = malloc(N * 2);

	(void)state;
	for (int i = 0; i < N; i++)
		x[i] = 0.02f * gauss();
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		double e = 0, s = 0;

		assert_int_equal(o1_quant_quantize(types[i], x, q, N), 0);
		o1_quant_dequantize(types[i], q, y, N);
		for (int j = 0; j < N; j++) {
			e += ((double)y[j] - x[j]) * ((double)y[j] - x[j]);
			s += (double)x[j] * x[j];
		}
		printf("%s: relative RMS error %.5f\n", files[i], sqrt(e / s));
		assert_true(sqrt(e / s) < bound[i]);
	}
	free(x), free(y), free(q);
}

/* Rows spread over 1 or 3 threads: the bytes of o1_quant_quantize. */
static void test_rows_threads(void **state)
{
	enum { NR = 37, NC = 512 };
	float *x = malloc(sizeof(float) * NR * NC);
	uint8_t *want = malloc(NR * 544), *got = malloc(NR * 544); /* Q8_0 */
	struct o1_threads *tp;

	(void)state;
	for (int i = 0; i < NR * NC; i++)
		x[i] = gauss();
	assert_int_equal(o1_threads_create(3, &tp), 0);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t bytes = row_bytes(types[i]) / 2 * NR; /* 512 cols */

		assert_int_equal(o1_quant_quantize(types[i], x, want, NR * NC),
				 0);
		assert_int_equal(
		    o1_quant_quantize_rows(NULL, types[i], x, got, NR, NC), 0);
		assert_memory_equal(got, want, bytes);
		memset(got, 0, bytes);
		assert_int_equal(
		    o1_quant_quantize_rows(tp, types[i], x, got, NR, NC), 0);
		assert_memory_equal(got, want, bytes);
	}
	x[20 * NC + 5] = INFINITY;
	assert_int_equal(
	    o1_quant_quantize_rows(tp, O1_QUANT_Q8_0, x, got, NR, NC), -ERANGE);
	assert_int_equal(
	    o1_quant_quantize_rows(tp, O1_QUANT_Q4_K, x, got, NR, 100),
	    -EINVAL);
	o1_threads_destroy(tp);
	free(x), free(want), free(got);
}

/* All-zero blocks come back as zeros, constant ones within f16 steps. */
static void test_exact_blocks(void **state)
{
	float x[256], y[256];
	uint8_t q[256];

	(void)state;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		uint32_t n = o1_quant_block_elements(types[i]);

		memset(x, 0, sizeof(x));
		assert_int_equal(o1_quant_quantize(types[i], x, q, n), 0);
		o1_quant_dequantize(types[i], q, y, n);
		/* Q4_0 and Q5_0 give -0: d = 0 / -8 (-16) */
		for (uint32_t j = 0; j < n; j++)
			assert_true(y[j] == 0);
		for (uint32_t j = 0; j < n; j++)
			x[j] = -0.5f;
		assert_int_equal(o1_quant_quantize(types[i], x, q, n), 0);
		o1_quant_dequantize(types[i], q, y, n);
		for (uint32_t j = 0; j < n; j++)
			assert_float_equal(y[j], -0.5f, 1e-3);
	}
}

static void test_bad_input(void **state)
{
	float x[512] = {0};
	uint8_t q[512];
	uint64_t b;

	(void)state;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		uint32_t n = o1_quant_block_elements(types[i]);

		assert_int_equal(o1_quant_quantize(types[i], x, q, n + 1),
				 -EINVAL);
		assert_int_equal(o1_quant_row_bytes(types[i], n - 16, &b),
				 -EINVAL);
		x[n - 1] = NAN;
		assert_int_equal(o1_quant_quantize(types[i], x, q, n), -ERANGE);
		x[n - 1] = -INFINITY;
		assert_int_equal(o1_quant_quantize(types[i], x, q, n), -ERANGE);
		x[n - 1] = 0;
	}
	assert_int_equal(o1_quant_quantize((enum o1_quant_type)13, x, q, 256),
			 -EINVAL);
	assert_int_equal(o1_quant_row_bytes(1, 256, &b), -EINVAL);
	assert_false(o1_quant_is_block(13));
	assert_int_equal(o1_quant_block_bytes(0), 0);
}

static void test_names(void **state)
{
	enum o1_quant_type t;
	uint64_t b;

	(void)state;
	assert_int_equal(o1_quant_parse("q4_k", &t), 0);
	assert_int_equal(t, O1_QUANT_Q4_K);
	assert_int_equal(o1_quant_parse("Q8_0", &t), 0);
	assert_int_equal(t, O1_QUANT_Q8_0);
	assert_int_equal(o1_quant_parse("q5_k", &t), -EINVAL);
	assert_int_equal(o1_quant_parse("", &t), -EINVAL);
	assert_string_equal(o1_quant_name(O1_QUANT_Q6_K), "Q6_K");
	assert_string_equal(o1_quant_name(30), "?");
	assert_int_equal(o1_quant_row_bytes(O1_QUANT_Q6_K, 512, &b), 0);
	assert_int_equal(b, 420);
	assert_int_equal(o1_quant_row_bytes(O1_QUANT_Q4_0, 64, &b), 0);
	assert_int_equal(b, 36);
	assert_int_equal(o1_quant_parse("q5_0", &t), 0);
	assert_int_equal(t, O1_QUANT_Q5_0);
	assert_string_equal(o1_quant_name(O1_QUANT_Q5_0), "Q5_0");
	assert_int_equal(o1_quant_row_bytes(O1_QUANT_Q5_0, 64, &b), 0);
	assert_int_equal(b, 44);
}

/* Every non-NaN half survives f16 -> f32 -> f16; halfway cases round to
 * even. */
static void test_f16(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = o1_quant_f16_to_f32((uint16_t)h);

		if (isnan(f))
			continue;
		assert_int_equal(o1_quant_f32_to_f16(f), h);
	}
	/* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even is 1 */
	assert_int_equal(o1_quant_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
	assert_int_equal(o1_quant_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
	assert_int_equal(o1_quant_f32_to_f16(1e6f), 0x7c00);
	assert_true(isnan(o1_quant_f16_to_f32(o1_quant_f32_to_f16(NAN))));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dequant_reference),
	    cmocka_unit_test(test_quant_reference),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_rows_threads),
	    cmocka_unit_test(test_exact_blocks),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_f16),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	return rc == 0 && !have_shared() ? 77 : rc;
}

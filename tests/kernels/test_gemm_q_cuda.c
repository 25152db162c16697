/* The tensor-core products on block-format weights over more than 4 rows,
 * kernels/gemm_q.cu (o1_gemm_q_cuda) and gemm_qp.cu's pipeline
 * (o1_gemm_qp_cuda), against the CPU, for Q8_0, Q4_0, Q5_0, Q4_K and Q6_K
 * (Q5_0's 32-block shapes in test_q5_0), on M
 * of 9 to 300 rows (not multiples of their token tiles of 32, 64 and
 * 128), N not a multiple of their weight tiles (64 or 128), K of one to
 * many steps (and, for gemm_qp, 256-element raw stages with a partial
 * last one for the 32-blocks, K split in two where the grid is small:
 * always on the emulation's 3 multiprocessors), LDY > N, rows of w at
 * 2-byte offsets from 16-byte pieces:
 * - against the exact sum (double) of the products they are specified to
 *   add: x (bf16) times the weights dequantized by quant.c and rounded to
 *   bf16 to nearest even (the values o1_quant_dequantize_bf16_cuda
 *   writes; both products are exact in f32). The device adds 16 products
 *   in one mma and K/16 such sums into an f32 accumulator (plus one
 *   addition of the halves of a split K); each addition errs by at most
 *   an ulp of a partial sum (2^-23 of sum |x w|, allowing the tensor
 *   core's truncation), hence
 *     |gpu - exact| <= (K/16 + 16) * 2^-23 * sum |x w| + 1e-30;
 *   a wrong fragment index, tile mask or pipeline stage errs by the size
 *   of whole terms (~2^-4 of sum |x w| and more) and fails it at every K
 *   here;
 * - against the CPU backend's quantized product (o1_gemv_q_cpu: the same
 *   x, the weights in f32): relative L2 distance of each row <= 1e-2 (the
 *   bf16 rounding of the weights alone gives ~2^-9 / sqrt(3)), relative
 *   to the mean row's norm where the row's own is smaller (check_cpu);
 * - a second launch (with PDL) bitwise equal to the first (a split K's
 *   atomic adds included), columns past N of each output row untouched;
 * - bad operands refused with -EINVAL (each kernel's own alignment rules).
 * gemm_qw.cu's wgmma product (o1_gemm_qw_cuda) takes the same checks on
 * the shapes o1_gemm_qw_fits takes, where the device and the build have
 * it (sm_90a, and the CPU emulation: hopper_dev.h's), its exact sum over
 * its own weight values (qw_values, as gemm_qw.cu's header says: the
 * quant times the unit's f32 scale rounded to bf16, rounded once; Q4_K's
 * two terms in two parts each; within ~2^-8 of the tiles' values). Its K in parts
 * (o1_gemm_qw_split_cuda) the same, forced to 3 parts on every shape (K
 * of 2 stages: 2), to 8 on long rows and to its own pick, each product's
 * counters back at zero after it; the bound's 16 covers the parts' few
 * additions, and the second launch's bitwise equality the order of the
 * sums whichever part ends last.
 * And gemm_qi8.cu's int8 product (o1_gemm_qi8_quantize_cuda then
 * o1_gemm_qi8_cuda, gemv_q8.h's arithmetic), on the same shapes but K a
 * multiple of 256 (rows of Q6_K at 2-byte offsets from 16-byte pieces):
 * - against o1_gemv_q8_cpu (the same quantization and unit products,
 *   summed in another order): relative L2 of each row <= 2e-5 (rounding
 *   alone gives ~1e-7; a wrong unit, scale or token gives 1e-2 and more);
 * - against the f32 product (o1_gemv_q_cpu) within gemv_q8.h's bound
 *   (o1_gemv_q8_bound_cpu) element by element;
 * - a second launch (with PDL) bitwise equal, columns past N untouched.
 * Q5_0 through gemm_qw and gemm_qi8 as Q4_0 (its values as quant.h's,
 * the fifth bit included: one ignored moves half the terms by 16 d, far
 * past every bound above).
 * O1_TEST_QUICK=1 runs fewer shapes (tools/gpu/emu/run_gemm_q.sh runs it
 * on the CPU emulation). Exit 77 without a device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "kernel_cuda_test.h"
#include "kernels/cuda_util.h"
#include "quant_cuda_test.h"
#include "kernels/gemv_q.h"
#include "kernels/gemv_q8.h"
#include "kernels/kernels_cuda.h"
#include "kernels/quant.h"

static const enum o1_quant_type types[] = {O1_QUANT_Q8_0, O1_QUANT_Q4_0,
					   O1_QUANT_Q4_K, O1_QUANT_Q6_K,
					   O1_QUANT_Q5_0};
/* gemm_qw with K in parts: the scratch, its SPLITS as the test sets it */
static struct o1_gemm_qw_split qw_split;

static int qw_split_run(float *y, const uint16_t *x, const void *w,
			enum o1_quant_type type, uint32_t m, uint32_t n,
			uint32_t k, uint32_t ldy, bool pdl, cudaStream_t stream)
{
	static uint32_t count[O1_GEMM_QW_COUNTS];
	int err = o1_gemm_qw_split_cuda(y, x, w, type, m, n, k, ldy, &qw_split,
					pdl, stream);

	/* every counter back at zero for the next product */
	kct_get(count, qw_split.count, sizeof count);
	for (size_t i = 0; i < O1_GEMM_QW_COUNTS; i++)
		if (count[i])
			fail_msg("gemm_qw split %u: m %u n %u k %u: counter "
				 "%zu left at %u",
				 qw_split.splits, m, n, k, i, count[i]);
	return err;
}

/* A product under test: all take the same operands (QW: gemm_qw, the
 * shapes o1_gemm_qw_fits takes, against its own weight values). */
struct kernel {
	const char *name;
	int (*run)(float *y, const uint16_t *x, const void *w,
		   enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		   uint32_t ldy, bool pdl, cudaStream_t stream);
	bool qw;
};

static const struct kernel kernels[] = {{"gemm_q", o1_gemm_q_cuda, false},
					{"gemm_qp", o1_gemm_qp_cuda, false},
					{"gemm_qw", o1_gemm_qw_cuda, true},
					{"gemm_qw split", qw_split_run, true}};
static const struct kernel *kern; /* the one check_gemm runs */

/* V rounded to bf16 (8 significant bits), to nearest even, in one step
 * (no double rounding through f32). */
static float qw_bf16(double v)
{
	int e;
	double f;

	if (v == 0 || !isfinite(v))
		return (float)v;
	f = frexp(v, &e);
	return (float)ldexp(nearbyint(ldexp(f, 8)), e - 8);
}

/* The values gemm_qw.cu gives the N x K weights Q of TYPE (its header
 * comment), into W. */
static void qw_values(enum o1_quant_type type, const uint8_t *q, float *w,
		      uint32_t n, uint32_t k)
{
	uint64_t rb;

	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	for (uint32_t r = 0; r < n; r++)
		for (uint32_t c = 0; c < k; c++) {
			const uint8_t *row = q + rb * r;
			float *o = &w[(size_t)r * k + c];

			if (type == O1_QUANT_Q8_0 || type == O1_QUANT_Q4_0) {
				bool q8 = type == O1_QUANT_Q8_0;
				const uint8_t *b =
				    row + (c / 32) * (q8 ? 34 : 18);
				uint32_t i = c % 32;
				double d = qw_bf16(o1_quant_f16_to_f32(
				    (uint16_t)(b[0] | b[1] << 8)));
				int v = q8 ? (int8_t)b[2 + i]
					   : (i < 16 ? b[2 + i] & 15
						     : b[2 + i - 16] >> 4) -
						 8;

				*o = qw_bf16(v * d);
			} else if (type == O1_QUANT_Q5_0) {
				const uint8_t *b = row + (c / 32) * 22;
				uint32_t i = c % 32,
					 qh = (uint32_t)b[2] | b[3] << 8 |
					      b[4] << 16 | (uint32_t)b[5] << 24;
				double d = qw_bf16(o1_quant_f16_to_f32(
				    (uint16_t)(b[0] | b[1] << 8)));
				int v = (i < 16 ? b[6 + i] & 15
						: b[6 + i - 16] >> 4) |
					(qh >> i & 1) << 4;

				*o = qw_bf16((v - 16) * d);
			} else if (type == O1_QUANT_Q4_K) {
				const uint8_t *b = row + (c / 256) * 144,
					      *x = b + 4;
				uint32_t s = c % 256 / 32, i = c % 32, sc, mn;
				float d = o1_quant_f16_to_f32(
					  (uint16_t)(b[0] | b[1] << 8)),
				      dm = o1_quant_f16_to_f32(
					  (uint16_t)(b[2] | b[3] << 8));
				uint8_t qb = b[16 + 32 * (s / 2) + i];

				if (s < 4) {
					sc = x[s] & 63, mn = x[s + 4] & 63;
				} else {
					sc = (x[s + 4] & 15) |
					     (x[s - 4] >> 6) << 4;
					mn = (x[s + 4] >> 4) | (x[s] >> 6) << 4;
				}
				/* D and -M each as two bf16 parts */
				float dd = d * (float)sc;
				float nm = -(dm * (float)mn);
				double dh = qw_bf16(dd), dl = qw_bf16(dd - dh),
				       mh = qw_bf16(nm), ml = qw_bf16(nm - mh);
				int q4 = s % 2 ? qb >> 4 : qb & 15;

				*o = qw_bf16((double)qw_bf16(q4 * dh + mh) +
					     qw_bf16(q4 * dl + ml));
			} else {
				const uint8_t *b = row + (c / 256) * 210;
				uint32_t h = c % 256 / 128, g = c % 128 / 32,
					 e = c % 32;
				uint8_t l = b[64 * h + 32 * (g % 2) + e],
					hb = b[128 + 32 * h + e];
				int v = ((g < 2 ? l & 15 : l >> 4) |
					 ((hb >> (2 * g)) & 3) << 4) -
					32;
				float d = o1_quant_f16_to_f32(
				    (uint16_t)(b[208] | b[209] << 8));
				int8_t sc = (int8_t)b[192 + 8 * h + 2 * g +
						      (e >= 16)];

				*o = qw_bf16(v *
					     (double)qw_bf16(d * (float)sc));
			}
		}
}

/* The bound of the header comment on OUT against EXACT (sum |x w| MAG). */
static void check_exact(enum o1_quant_type type, uint32_t m, uint32_t n,
			uint32_t k, uint32_t ldy, const float *gpu,
			const double *exact, const double *mag)
{
	double f = ((double)k / 16 + 16) * 0x1p-23;

	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < ldy; j++) {
			float g = gpu[(size_t)i * ldy + j];
			double e = exact[(size_t)i * n + j];
			double b = f * mag[(size_t)i * n + j] + 1e-30;

			if (j >= n) {
				if (!isnan(g))
					fail_msg("%s %s m %u n %u k %u: y[%u][%u] "
						 "past N written",
						 kern->name, o1_quant_name(type),
						 m, n, k, i, j);
				continue;
			}
			if (!(fabs(g - e) <= b))
				fail_msg("%s %s m %u n %u k %u: y[%u][%u] gpu "
					 "%.9g exact %.9g (bound %g)",
					 kern->name, o1_quant_name(type), m, n,
					 k, i, j, g, e, b);
		}
}

/* Each row's relative L2 distance to the CPU backend's product, against
 * the larger of the row's own energy and the mean row's: a row of a few
 * outputs whose sums all cancel (n 9, k 96: 1.03e-2 at seed 2903) is held
 * to the scale of the others, not to its own near-zero norm. */
static void check_cpu(enum o1_quant_type type, uint32_t m, uint32_t n,
		      uint32_t k, uint32_t ldy, const float *gpu,
		      const float *cpu)
{
	double mean = 0;

	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++)
			mean += (double)cpu[(size_t)i * ldy + j] *
				cpu[(size_t)i * ldy + j] / m;
	for (uint32_t i = 0; i < m; i++) {
		double d = 0, r = 0;

		for (uint32_t j = 0; j < n; j++) {
			double g = gpu[(size_t)i * ldy + j],
			       c = cpu[(size_t)i * ldy + j];

			d += (g - c) * (g - c);
			r += c * c;
		}
		r = r > mean ? r : mean;
		if (!(sqrt(d) <= 1e-2 * sqrt(r)))
			fail_msg("%s %s m %u n %u k %u: row %u relative L2 "
				 "%g to the CPU backend",
				 kern->name, o1_quant_name(type), m, n, k, i,
				 sqrt(d / r));
	}
}

static void check_gemm(enum o1_quant_type type, uint32_t m, uint32_t n,
		       uint32_t k, uint32_t ldy)
{
	size_t ny = (size_t)m * ldy;
	uint16_t *x = malloc((size_t)m * k * 2);
	float *wf = malloc((size_t)n * k * 4), *cpu = malloc(ny * 4),
	      *gpu = malloc(ny * 4), *again = malloc(ny * 4), *dy;
	double *exact = calloc((size_t)m * n, sizeof(double)),
	       *mag = calloc((size_t)m * n, sizeof(double));
	uint8_t *q;
	uint64_t rb;
	void *dw, *dx;

	if (kern->qw && !o1_gemm_qw_fits(type, n, k, NULL)) {
		free(x), free(wf), free(cpu), free(gpu), free(again);
		free(exact), free(mag);
		return;
	}
	q = qct_random_blocks(type, (uint64_t)n * k);
	assert_non_null(x), assert_non_null(wf), assert_non_null(cpu);
	assert_non_null(gpu), assert_non_null(again);
	assert_non_null(exact), assert_non_null(mag);
	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	for (size_t i = 0; i < (size_t)m * k; i++)
		x[i] = kct_bf16_of(kct_frand() * 2);
	for (size_t i = 0; i < ny; i++)
		cpu[i] = NAN;
	if (kern->qw) {
		qw_values(type, q, wf, n, k);
	} else {
		o1_quant_dequantize(type, q, wf, (uint64_t)n * k);
		kct_round_bf16(wf, (size_t)n * k);
	}
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			const uint16_t *xr = x + (size_t)i * k;
			const float *wr = wf + (size_t)j * k;
			double s = 0, a = 0;

			for (uint32_t c = 0; c < k; c++) {
				double p = (double)kct_f32_of(xr[c]) * wr[c];

				s += p, a += fabs(p);
			}
			exact[(size_t)i * n + j] = s;
			mag[(size_t)i * n + j] = a;
		}
	dw = kct_dev_copy(q, rb * n);
	dx = kct_dev_copy(x, (size_t)m * k * 2);
	dy = kct_dev_copy(cpu, ny * 4); /* NaN everywhere */
	assert_int_equal(o1_gemv_q_cpu(cpu, x, q, type, m, n, k, ldy), 0);
	assert_int_equal(kern->run(dy, dx, dw, type, m, n, k, ldy, false, NULL),
			 0);
	kct_get(gpu, dy, ny * 4);
	assert_int_equal(kern->run(dy, dx, dw, type, m, n, k, ldy, true, NULL),
			 0);
	kct_get(again, dy, ny * 4);
	assert_memory_equal(gpu, again, ny * 4);
	check_exact(type, m, n, k, ldy, gpu, exact, mag);
	check_cpu(type, m, n, k, ldy, gpu, cpu);
	cudaFree(dw), cudaFree(dx), cudaFree(dy);
	free(x), free(wf), free(cpu), free(gpu), free(again), free(exact);
	free(mag), free(q);
}

/* gemm_qi8.cu's product on one shape: the checks of the header comment. */
static void check_qi8(enum o1_quant_type type, uint32_t m, uint32_t n,
		      uint32_t k, uint32_t ldy)
{
	size_t ny = (size_t)m * ldy;
	uint16_t *x = malloc((size_t)m * k * 2);
	float *f32 = malloc(ny * 4), *y8 = malloc(ny * 4), *gpu = malloc(ny * 4),
	      *again = malloc(ny * 4), *bound = malloc((size_t)m * n * 4), *dy;
	uint8_t *q = qct_random_blocks(type, (uint64_t)n * k);
	uint64_t rb;
	void *dw, *dx, *scratch;

	assert_non_null(x), assert_non_null(f32), assert_non_null(y8);
	assert_non_null(gpu), assert_non_null(again), assert_non_null(bound);
	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	for (size_t i = 0; i < (size_t)m * k; i++)
		x[i] = kct_bf16_of(kct_frand() * 2);
	for (size_t i = 0; i < ny; i++)
		f32[i] = y8[i] = NAN;
	assert_int_equal(o1_gemv_q_cpu(f32, x, q, type, m, n, k, ldy), 0);
	assert_int_equal(o1_gemv_q8_cpu(y8, x, q, type, m, n, k, ldy), 0);
	assert_int_equal(o1_gemv_q8_bound_cpu(bound, x, q, type, m, n, k), 0);
	dw = kct_dev_copy(q, rb * n);
	dx = kct_dev_copy(x, (size_t)m * k * 2);
	dy = kct_dev_copy(f32, ny * 4); /* NaN past N */
	scratch = kct_dev(o1_gemm_qi8_scratch_bytes(m, k));
	assert_int_equal(o1_gemm_qi8_quantize_cuda(scratch, dx, m, k, false,
						   NULL),
			 0);
	assert_int_equal(o1_gemm_qi8_cuda(dy, scratch, dw, type, m, n, k, ldy,
					  false, NULL),
			 0);
	kct_get(gpu, dy, ny * 4);
	assert_int_equal(o1_gemm_qi8_quantize_cuda(scratch, dx, m, k, true,
						   NULL),
			 0);
	assert_int_equal(o1_gemm_qi8_cuda(dy, scratch, dw, type, m, n, k, ldy,
					  true, NULL),
			 0);
	kct_get(again, dy, ny * 4);
	assert_memory_equal(gpu, again, ny * 4);
	for (uint32_t i = 0; i < m; i++) {
		double d = 0, r = 0;

		for (uint32_t j = 0; j < ldy; j++) {
			double g = gpu[(size_t)i * ldy + j],
			       c = y8[(size_t)i * ldy + j],
			       f = f32[(size_t)i * ldy + j];

			if (j >= n) {
				if (!isnan(g))
					fail_msg("gemm_qi8 %s m %u n %u k %u: "
						 "y[%u][%u] past N written",
						 o1_quant_name(type), m, n, k,
						 i, j);
				continue;
			}
			if (!(fabs(g - f) <= bound[(size_t)i * n + j]))
				fail_msg("gemm_qi8 %s m %u n %u k %u: y[%u][%u] "
					 "gpu %.9g f32 %.9g (bound %g)",
					 o1_quant_name(type), m, n, k, i, j, g,
					 f, bound[(size_t)i * n + j]);
			d += (g - c) * (g - c);
			r += c * c;
		}
		if (!(sqrt(d) <= 2e-5 * sqrt(r)))
			fail_msg("gemm_qi8 %s m %u n %u k %u: row %u relative "
				 "L2 %g to o1_gemv_q8_cpu",
				 o1_quant_name(type), m, n, k, i,
				 sqrt(d / r));
	}
	cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(scratch);
	free(x), free(f32), free(y8), free(gpu), free(again), free(bound);
	free(q);
}

static void test_gemm_qi8(void **state)
{
	static const uint32_t ms[] = {9, 17, 40, 100, 256, 300};
	static const uint32_t ns[] = {37, 130};
	static const uint32_t ks[] = {256, 768};

	(void)state;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t a = 0; a < sizeof(ms) / sizeof(ms[0]); a++)
			for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++)
				for (size_t c = 0; c < sizeof(ks) / sizeof(ks[0]);
				     c++)
					if (!kct_quick() ||
					    (a + b + c + t) % 4 == 0)
						check_qi8(types[t], ms[a],
							  ns[b], ks[c],
							  ns[b] + (a % 2) * 5);
	/* long rows; 128-row weight tiles, tokens of 32 and 64, K split */
	check_qi8(O1_QUANT_Q4_K, 33, 65, 4096, 65);
	check_qi8(O1_QUANT_Q6_K, 65, 40, 2560, 41);
	check_qi8(O1_QUANT_Q8_0, 20, 1000, 1024, 1000);
	check_qi8(O1_QUANT_Q6_K, 50, 700, 512, 703);
	check_qi8(O1_QUANT_Q4_0, 130, 300, 512, 300);
	check_qi8(O1_QUANT_Q5_0, 130, 300, 512, 300);
	if (kct_quick())
		return;
	/* shapes of real models */
	check_qi8(O1_QUANT_Q4_K, 128, 512, 4096, 512);
	check_qi8(O1_QUANT_Q6_K, 200, 256, 14336, 256);
	check_qi8(O1_QUANT_Q8_0, 256, 1024, 4096, 1024);
}

/* Every shape of the header comment through kernel G. */
static void gemm_shapes(const struct kernel *g)
{
	static const uint32_t ms[] = {9, 17, 40, 100, 256, 300};
	static const uint32_t ns[] = {37, 130};
	static const uint32_t ks[] = {256, 768};

	kern = g;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t a = 0; a < sizeof(ms) / sizeof(ms[0]); a++)
			for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++)
				for (size_t c = 0; c < sizeof(ks) / sizeof(ks[0]);
				     c++)
					if (!kct_quick() ||
					    (a + b + c + t) % 4 == 0)
						check_gemm(types[t], ms[a],
							   ns[b], ks[c],
							   ns[b] + (a % 2) * 5);
	/* 32-blocks: an odd number of them */
	check_gemm(O1_QUANT_Q8_0, 17, 9, 96, 9);
	check_gemm(O1_QUANT_Q4_0, 70, 66, 288, 70);
	/* long rows: many steps */
	check_gemm(O1_QUANT_Q4_K, 33, 65, 4096, 65);
	check_gemm(O1_QUANT_Q6_K, 65, 40, 2560, 41);
	/* enough weight tiles for tiles of 128 by 128, one raw stage */
	check_gemm(O1_QUANT_Q4_K, 130, 8200, 256, 8203);
	/* 128-row weight tiles, tokens of 32 and 64, K split */
	check_gemm(O1_QUANT_Q8_0, 20, 1000, 1024, 1000);
	check_gemm(O1_QUANT_Q6_K, 50, 700, 512, 703);
	/* Q8_0 rows 2 bytes off a 16-byte piece: 34 * 11 bytes a row */
	check_gemm(O1_QUANT_Q8_0, 33, 70, 96 + 256, 70);
	if (kct_quick())
		return;
	/* shapes of real models */
	check_gemm(O1_QUANT_Q4_K, 128, 512, 4096, 512);
	check_gemm(O1_QUANT_Q6_K, 200, 256, 14336, 256);
	check_gemm(O1_QUANT_Q8_0, 256, 1024, 4096, 1024);
	check_gemm(O1_QUANT_Q4_0, 300, 896, 4864, 896);
	check_gemm(O1_QUANT_Q5_0, 300, 896, 4864, 896);
}

static void test_gemm_q(void **state)
{
	(void)state;
	gemm_shapes(&kernels[0]);
}

static void test_gemm_qp(void **state)
{
	(void)state;
	gemm_shapes(&kernels[1]);
}

/* Whether gemm_qw is missing from this build or device (said once a
 * test: it skips). */
static bool qw_missing(void)
{
	if (o1_gemm_qw_available())
		return false;
	printf("gemm_qw: not in this build or on this device (wgmma needs "
	       "sm_90a): skipped\n");
	return true;
}

/* gemm_qw.cu (wgmma, sm_90a): the shapes with K a multiple of 256, and
 * those of its own tiles (128 x 128, K in halves where the grid is small) */
static void test_gemm_qw(void **state)
{
	int dev = 0, sms = 0;
	uint32_t n;

	(void)state;
	if (qw_missing())
		return;
	assert_int_equal(cudaGetDevice(&dev), cudaSuccess);
	assert_int_equal(
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
	    cudaSuccess);
	gemm_shapes(&kernels[2]);
	kern = &kernels[2];
	/* two token tiles and a third partial one, 3 weight tiles */
	check_gemm(O1_QUANT_Q4_K, 300, 384, 1024, 384);
	check_gemm(O1_QUANT_Q6_K, 129, 257, 2048, 260);
	check_gemm(O1_QUANT_Q4_0, 70, 200, 512, 200);
	check_gemm(O1_QUANT_Q5_0, 70, 200, 512, 200);
	/* a grid of a wave or more: K whole */
	check_gemm(O1_QUANT_Q8_0, 256, 17000, 256, 17000);
	/* 256 tokens a block, the K-quants (48 weight tiles, K in halves:
	 * 96 blocks, 73% of an H200's 132 multiprocessors; elsewhere
	 * perhaps 128 tokens, checked the same) */
	check_gemm(O1_QUANT_Q4_K, 140, 6020, 512, 6020);
	check_gemm(O1_QUANT_Q6_K, 140, 6020, 2048, 6020);
	/* 256 tokens a block on any device (2 token tiles by N / 128
	 * weight tiles: more than a wave), a partial token tile, 16 stages
	 * through the buffers in turn */
	n = 64 * (uint32_t)sms + 4;
	check_gemm(O1_QUANT_Q4_K, 260, n, 2048, n);
	check_gemm(O1_QUANT_Q4_0, 257, n, 1024, n + 3);
}

/* gemm_qw with K in parts (o1_gemm_qw_split_cuda) */
static void test_gemm_qw_split(void **state)
{
	(void)state;
	if (qw_missing())
		return;
	qw_split.part_bytes = 64u << 20; /* the backend's tile scratch */
	qw_split.part = kct_dev(qw_split.part_bytes);
	qw_split.count = kct_dev(O1_GEMM_QW_COUNTS * 4);
	assert_int_equal(
	    cudaMemset(qw_split.count, 0, O1_GEMM_QW_COUNTS * 4),
	    cudaSuccess);
	/* parts of unequal stages (K of 6 stages: 2 each; 2: 2 parts) */
	qw_split.splits = 3;
	gemm_shapes(&kernels[3]);
	check_gemm(O1_QUANT_Q4_K, 300, 384, 1024, 384);
	/* 8 parts of 4 and of 3 or 4 stages (K of 26), tokens past M in a
	 * tile */
	qw_split.splits = 8;
	check_gemm(O1_QUANT_Q4_K, 130, 512, 4096, 515);
	check_gemm(O1_QUANT_Q4_0, 40, 300, 3328, 300);
	check_gemm(O1_QUANT_Q5_0, 40, 300, 3328, 300);
	check_gemm(O1_QUANT_Q6_K, 20, 130, 6144, 133);
	/* its own pick (16 tiles: 4 parts on an H200) */
	qw_split.splits = 0;
	check_gemm(O1_QUANT_Q8_0, 130, 1024, 4096, 1030);
	cudaFree(qw_split.part), cudaFree(qw_split.count);
	memset(&qw_split, 0, sizeof qw_split);
}

/* gemm_qw's gate/up product with SwiGLU (o1_gemm_qw_swiglu_cuda): bitwise
 * o1_swiglu_cuda on the plain product's f32 (the same sums: K whole, and
 * F chosen so that the plain product's grid is a wave of blocks, the same
 * tokens a block), nothing written past F in a row. */
static void check_swiglu(enum o1_quant_type type, uint32_t m, uint32_t f,
			 uint32_t k, uint32_t ld)
{
	size_t na = (size_t)m * ld;
	uint16_t *x = malloc((size_t)m * k * 2), *fused = malloc(na * 2),
		 *ref = malloc(na * 2), *da, *dr;
	uint8_t *q = qct_random_blocks(type, (uint64_t)2 * f * k);
	uint64_t rb;
	float *dy;
	void *dw, *dx;

	assert_non_null(x), assert_non_null(fused), assert_non_null(ref);
	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	for (size_t i = 0; i < (size_t)m * k; i++)
		x[i] = kct_bf16_of(kct_frand() * 2);
	for (size_t i = 0; i < na; i++)
		fused[i] = 0x7fc1; /* a NaN neither writes */
	dw = kct_dev_copy(q, rb * 2 * f);
	dx = kct_dev_copy(x, (size_t)m * k * 2);
	da = kct_dev_copy(fused, na * 2);
	dr = kct_dev_copy(fused, na * 2);
	dy = kct_dev((size_t)m * 2 * f * 4);
	assert_int_equal(
	    o1_gemm_qw_cuda(dy, dx, dw, type, m, 2 * f, k, 2 * f, false, NULL),
	    0);
	for (uint32_t i = 0; i < m; i++)
		assert_int_equal(o1_swiglu_cuda(dr + (size_t)i * ld,
						dy + (size_t)i * 2 * f,
						dy + (size_t)i * 2 * f + f,
						2 * f, 1, f, false, NULL),
				 0);
	assert_int_equal(
	    o1_gemm_qw_swiglu_cuda(da, dx, dw, type, m, f, k, ld, true, NULL),
	    0);
	kct_get(fused, da, na * 2);
	kct_get(ref, dr, na * 2);
	for (size_t i = 0; i < na; i++)
		if (fused[i] != ref[i]) {
			printf("swiglu %s m %u f %u k %u: [%zu][%zu] %04x, "
			       "o1_swiglu_cuda %04x\n",
			       o1_quant_name(type), m, f, k, i / ld, i % ld,
			       fused[i], ref[i]);
			fail();
		}
	cudaFree(dw), cudaFree(dx), cudaFree(da), cudaFree(dr), cudaFree(dy);
	free(x), free(fused), free(ref), free(q);
}

static void test_gemm_qw_swiglu(void **state)
{
	int dev = 0, sms = 0;
	uint32_t f;

	(void)state;
	if (qw_missing())
		return;
	assert_int_equal(cudaGetDevice(&dev), cudaSuccess);
	assert_int_equal(
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
	    cudaSuccess);
	/* 2F / 128 weight tiles at least the multiprocessors: a wave, K
	 * whole (8,448 on an H200's 132); 128 and 256 tokens a block (40,
	 * 300 and 130 rows), F not a multiple of 64 (the last tile's gate
	 * rows run into up's, its up rows past the matrix) */
	f = 64 * (uint32_t)sms;
	check_swiglu(O1_QUANT_Q4_K, 40, f + 2, 256, f + 3);
	/* Q4_K at 256 tokens a block, 8 stages through the buffers */
	check_swiglu(O1_QUANT_Q4_K, 300, f, 1024, f + 1);
	check_swiglu(O1_QUANT_Q8_0, 300, f, 512, f);
	check_swiglu(O1_QUANT_Q6_K, 130, f, 2048, f + 2);
	check_swiglu(O1_QUANT_Q5_0, 40, f, 512, f);
	/* its own refusal: LD < F */
	assert_int_equal(o1_gemm_qw_swiglu_cuda((uint16_t *)16, (uint16_t *)16,
						(void *)16, O1_QUANT_Q8_0, 1, 4,
						256, 3, false, NULL),
			 -EINVAL);
}

/* Q5_0 (block of 22 bytes, rows at any even offset from a 16-byte
 * piece): gemm_q's and gemm_qp's checks on shapes of 32-blocks, one raw
 * stage and several, a partial last one, and qwen2.5-0.5b's width (896);
 * gemm_qi8 and gemm_qw take it where K is whole steps of 256 (their
 * shapes above), not such widths. */
static void test_q5_0(void **state)
{
	static const uint32_t shapes[][4] = {
	    {17, 9, 96, 9},	{70, 66, 288, 70},   {9, 37, 256, 42},
	    {40, 130, 768, 130}, {100, 130, 896, 135}};
	float *y = kct_dev(1 << 16);
	uint16_t *x = kct_dev(1 << 16);
	uint8_t *w = kct_dev(1 << 16);

	(void)state;
	for (int g = 0; g < 2; g++) {
		kern = &kernels[g];
		for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
			if (!kct_quick() || (i + g) % 2 == 0)
				check_gemm(O1_QUANT_Q5_0, shapes[i][0],
					   shapes[i][1], shapes[i][2],
					   shapes[i][3]);
		if (!kct_quick())
			check_gemm(O1_QUANT_Q5_0, 300, 4864, 896, 4864);
	}
	assert_true(o1_gemm_q_fits(O1_QUANT_Q5_0, 64, 896));
	assert_true(o1_gemm_qp_fits(O1_QUANT_Q5_0, 64, 896, w));
	assert_false(o1_gemm_qp_fits(O1_QUANT_Q5_0, 64, 48, w));
	assert_true(o1_gemm_qi8_fits(O1_QUANT_Q5_0, 64, 512, w));
	assert_true(o1_gemm_qw_fits(O1_QUANT_Q5_0, 64, 256, w));
	assert_false(o1_gemm_qi8_fits(O1_QUANT_Q5_0, 64, 896, w));
	assert_false(o1_gemm_qw_fits(O1_QUANT_Q5_0, 64, 896, w));
	assert_int_equal(o1_gemm_qi8_cuda(y, x, w, O1_QUANT_Q5_0, 16, 64, 896,
					  64, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qw_cuda(y, x, w, O1_QUANT_Q5_0, 16, 64, 896,
					 64, false, NULL),
			 -EINVAL);
	cudaFree(y), cudaFree(x), cudaFree(w);
}

/* Operands both kernels refuse, through kernel G. */
static void bad_args(const struct kernel *g, float *y, uint16_t *x,
		     uint8_t *w)
{
	/* K not whole blocks */
	assert_int_equal(
	    g->run(y, x, w, O1_QUANT_Q4_K, 16, 1, 128, 1, false, NULL),
	    -EINVAL);
	assert_int_equal(
	    g->run(y, x, w, O1_QUANT_Q8_0, 16, 1, 48, 1, false, NULL),
	    -EINVAL);
	/* LDY < N, x misaligned, not a block type, no rows of w */
	assert_int_equal(g->run(y, x, w, O1_QUANT_Q8_0, 16, 4, 32, 3, false,
				NULL),
			 -EINVAL);
	assert_int_equal(g->run(y, x + 1, w, O1_QUANT_Q8_0, 16, 1, 32, 1,
				false, NULL),
			 -EINVAL);
	assert_int_equal(g->run(y, x, w, (enum o1_quant_type)1, 16, 1, 32, 1,
				false, NULL),
			 -EINVAL);
	assert_int_equal(
	    g->run(y, x, w, O1_QUANT_Q8_0, 16, 0, 32, 1, false, NULL),
	    -EINVAL);
	/* no x rows: nothing to do */
	assert_int_equal(
	    g->run(y, x, w, O1_QUANT_Q8_0, 0, 1, 32, 1, false, NULL), 0);
}

static void test_bad_args(void **state)
{
	float *y = kct_dev(1 << 16);
	uint16_t *x = kct_dev(1 << 16);
	uint8_t *w = kct_dev(1 << 16);

	(void)state;
	bad_args(&kernels[0], y, x, w);
	bad_args(&kernels[1], y, x, w);
	/* gemm_q: w as quant.cu's source (a K-quant block's 2-byte fields) */
	assert_int_equal(o1_gemm_q_cuda(y, x, w + 2, O1_QUANT_Q4_K, 16, 1, 256,
					1, false, NULL),
			 -EINVAL);
	assert_false(o1_gemm_q_fits(O1_QUANT_Q8_0, 1u << 22, 32));
	assert_true(o1_gemm_q_fits(O1_QUANT_Q8_0, (1u << 22) - 64, 32));
	/* gemm_qp: w 16-byte aligned (its cp.async copies) */
	assert_int_equal(o1_gemm_qp_cuda(y, x, w + 2, O1_QUANT_Q8_0, 16, 1, 32,
					 1, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qp_cuda(y, x, w + 8, O1_QUANT_Q4_K, 16, 1,
					 256, 1, false, NULL),
			 -EINVAL);
	assert_false(o1_gemm_qp_fits(O1_QUANT_Q8_0, 1u << 22, 32, w));
	assert_true(o1_gemm_qp_fits(O1_QUANT_Q8_0, (1u << 22) - 64, 32, w));
	assert_false(o1_gemm_qp_fits(O1_QUANT_Q8_0, 64, 32, w + 16 + 2));
	/* gemm_qi8: K a multiple of 256, w and the scratch 16-byte aligned,
	 * LDY >= N, a block type */
	assert_int_equal(o1_gemm_qi8_quantize_cuda(w, x, 16, 96, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qi8_quantize_cuda(w + 8, x, 16, 256, false,
						   NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qi8_quantize_cuda(w, x, 0, 256, false, NULL),
			 0);
	assert_int_equal(o1_gemm_qi8_cuda(y, x, w, O1_QUANT_Q8_0, 16, 1, 96,
					  1, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qi8_cuda(y, x, w + 8, O1_QUANT_Q4_K, 16, 1,
					  256, 1, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qi8_cuda(y, x, w, O1_QUANT_Q4_K, 16, 4, 256,
					  3, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qi8_cuda(y, x, w, (enum o1_quant_type)1, 16,
					  1, 256, 1, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qi8_cuda(y, x, w, O1_QUANT_Q4_K, 0, 1, 256, 1,
					  false, NULL),
			 0);
	assert_false(o1_gemm_qi8_fits(O1_QUANT_Q8_0, 64, 32, w));
	assert_true(o1_gemm_qi8_fits(O1_QUANT_Q6_K, 64, 512, w));
	/* gemm_qw: K a multiple of 256, w and x 16-byte aligned, LDY >= N,
	 * a block type (refused before it asks for the device's kernel) */
	assert_int_equal(o1_gemm_qw_cuda(y, x, w, O1_QUANT_Q4_K, 16, 1, 128, 1,
					 false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qw_cuda(y, x, w + 8, O1_QUANT_Q4_K, 16, 1,
					 256, 1, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qw_cuda(y, x + 1, w, O1_QUANT_Q8_0, 16, 1,
					 256, 1, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qw_cuda(y, x, w, O1_QUANT_Q4_K, 16, 4, 256,
					 3, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qw_cuda(y, x, w, (enum o1_quant_type)1, 16, 1,
					 256, 1, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qw_cuda(y, x, w, O1_QUANT_Q8_0, 16, 0, 256, 1,
					 false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemm_qw_cuda(y, x, w, O1_QUANT_Q8_0, 0, 1, 256, 1,
					 false, NULL),
			 o1_gemm_qw_available() ? 0 : -ENOTSUP);
	/* a split's scratch 16-byte aligned (its parts' float4s) */
	{
		struct o1_gemm_qw_split sp = {y + 1, 1024, (uint32_t *)w, 0};

		assert_int_equal(o1_gemm_qw_split_cuda(y, x, w, O1_QUANT_Q8_0,
						       16, 1, 256, 1, &sp,
						       false, NULL),
				 -EINVAL);
	}
	assert_false(o1_gemm_qw_fits(O1_QUANT_Q8_0, 64, 32, w));
	/* Q6_K's row pitch a multiple of 16 bytes (the tensor map's) */
	assert_false(o1_gemm_qw_fits(O1_QUANT_Q6_K, 64, 512, w));
	assert_true(o1_gemm_qw_fits(O1_QUANT_Q6_K, 64, 2048, w));
	cudaFree(y), cudaFree(x), cudaFree(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gemm_q),
	    cmocka_unit_test(test_gemm_qp),
	    cmocka_unit_test(test_gemm_qw),
	    cmocka_unit_test(test_gemm_qw_split),
	    cmocka_unit_test(test_gemm_qw_swiglu),
	    cmocka_unit_test(test_gemm_qi8),
	    cmocka_unit_test(test_q5_0),
	    cmocka_unit_test(test_bad_args),
	};

	return kct_main("test_gemm_q_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

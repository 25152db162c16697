/* GGUF block formats on the device (kernels/quant.cu, kernels/gemv_q.cu)
 * against their CPU references (kernels/quant.c, kernels/gemv_q.c), for
 * Q8_0, Q4_0, Q4_K, Q6_K and Q5_0:
 * - dequantization to f32 of llama.cpp's vectors (../shared/testdata/
 *   quant, skipped when absent; Q5_0's in tests/data/quant, from the same
 *   input) equals their .dequant.f32 bitwise, and of
 *   random rows equals quant.c's bitwise; to bf16, quant.c's values
 *   rounded to nearest even, bitwise;
 * - the embedding gather from a block table equals o1_embedding_q_cpu
 *   bitwise, zero rows for ids out of range;
 * - the decode product o1_gemv_q_cuda against o1_gemv_q_cpu on 1 to 4
 *   rows, odd and aligned N and K, LDY > N (columns past N untouched):
 *   |gpu - cpu| <= 2^-17 sum_k |x w| + 1e-30 per element (the two sum in
 *   different orders in f32; gemv_q.h), and bitwise equal on a second
 *   launch (one order per element); rows long enough that the kernel
 *   reads them in several batches;
 * - o1_gemv_q_swiglu_cuda equals o1_gemv_q_cuda then o1_swiglu_cuda
 *   bitwise;
 * - the int8 path (o1_gemv_q8_cuda, gemv_q8.h): bitwise o1_gemv_q8_cpu
 *   (the device's operations in its order) on the shapes above and on
 *   llama.cpp's vectors (their blocks as weights, their input rows of
 *   every kind as activations), and o1_gemv_q8_cpu within gemv_q8.h's
 *   bound of the f32 reference o1_gemv_q_cpu; on random rows of at least
 *   32 outputs, relative L2 to the f32 product <= 2e-2 (the backend's
 *   bound); on the vectors the largest per input kind is printed (outlier
 *   rows and sums that cancel are far from it, and within the bound);
 *   o1_gemv_q8_swiglu_cuda bitwise o1_gemv_q8_cuda then o1_swiglu_cuda;
 * - the int8 path's fused variants bitwise their unfused compositions on
 *   the device: o1_gemv_q8_norm_cuda (with and without a row list) =
 *   o1_rmsnorm_cuda then o1_gemv_q8_cuda (with the norm folded, the
 *   default: on rows whose inverse RMS is a power of two, and elsewhere
 *   within 2^-10 of o1_gemv_q8_cpu over bf16(x nw) times it:
 *   expect_folded); o1_gemv_q8_norm_swiglu_cuda = o1_rmsnorm_cuda then
 *   o1_gemv_q8_swiglu_cuda (folded: o1_gemv_q8_norm_cuda then
 *   o1_swiglu_cuda); o1_gemv_q8_add_cuda = y +
 *   o1_gemv_q8_cuda's product, also given its input quantized already
 *   (o1_q8_input_cpu's bytes: check_add_xq); o1_gemv_q8_norm_rope_kv_cuda (a
 * part of the fused QKV matrix at a time, parts of different types) and
 *   o1_gemv_q8_norm_rope_kv_parts_cuda (all parts: Q4_K then Q6_K, or
 *   Q5_0 then Q8_0, in one launch) = o1_gemv_q8_norm_cuda per part into
 *   the f32 QKV rows then
 *   o1_rope_kv_write_cuda: q, both KV caches (pages around the written
 *   slots included) equal, with and without a bias, partial and full
 *   rotation, scaled or not;
 * - bad operands are refused with -EINVAL.
 * O1_TEST_QUICK=1 keeps every launch within tools/gpu/emu's 8192 threads
 * (run there by tools/gpu/emu/run_quant.sh). Exit 77 without a device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "kernel_cuda_test.h"
#include "kernels/cuda_util.h"
#include "quant_cuda_test.h"
#include "kernels/embedding.h"
#include "kernels/gemv_q.h"
#include "kernels/gemv_q8.h"
#include "kernels/kernels_cuda.h"
#include "kernels/quant.h"

#define QDIR O1_SHARED_DIR "/testdata/quant"
#define OWNDIR O1_SOURCE_DIR "/tests/data/quant"

/* Q5_0 last, so that the loops give the other types the cases they had */
static const enum o1_quant_type types[] = {O1_QUANT_Q8_0, O1_QUANT_Q4_0,
					   O1_QUANT_Q4_K, O1_QUANT_Q6_K,
					   O1_QUANT_Q5_0};
static const char *const files[] = {"q8_0", "q4_0", "q4_k", "q6_k", "q5_0"};
/* where each type's vectors are (the input is always QDIR's) */
static const char *const dirs[] = {QDIR, QDIR, QDIR, QDIR, OWNDIR};

/* Device dequantization of the N elements at Q (f32 and bf16) against the
 * CPU's, and against WANT (when not NULL) bitwise; the blocks on the
 * device at an aligned address and 4 bytes past it (every type needs only
 * 2 or 4). */
static void check_dequant(enum o1_quant_type type, const uint8_t *q, uint64_t n,
			  const float *want)
{
	uint64_t bytes;
	float *cpu = malloc(n * 4), *gpu = malloc(n * 4), *dout;
	uint16_t *g16 = malloc(n * 2), *d16;
	uint8_t *dq;

	assert_int_equal(o1_quant_row_bytes(type, n, &bytes), 0);
	dq = kct_dev(bytes + 4);
	dout = kct_dev(n * 4);
	d16 = kct_dev(n * 2);
	o1_quant_dequantize(type, q, cpu, n);
	for (uint32_t off = 0; off <= 4; off += 4) {
		assert_int_equal(cudaMemcpy(dq + off, q, bytes,
					    cudaMemcpyHostToDevice),
				 cudaSuccess);
		assert_int_equal(
		    o1_quant_dequantize_cuda(type, dq + off, dout, n, NULL), 0);
		assert_int_equal(o1_quant_dequantize_bf16_cuda(type, dq + off,
							       d16, n, NULL),
				 0);
		kct_get(gpu, dout, n * 4);
		kct_get(g16, d16, n * 2);
		assert_memory_equal(gpu, cpu, n * 4);
		if (want)
			assert_memory_equal(gpu, want, n * 4);
		for (uint64_t i = 0; i < n; i++)
			if (g16[i] != kct_bf16_of(cpu[i]))
				fail_msg("%s bf16 element %llu (blocks at "
					 "+%u): %04x, want %04x",
					 o1_quant_name(type),
					 (unsigned long long)i, off, g16[i],
					 kct_bf16_of(cpu[i]));
	}
	cudaFree(dq), cudaFree(dout), cudaFree(d16);
	free(cpu), free(gpu), free(g16);
}

/* DIR/NAME, which must hold exactly BYTES bytes. */
static void *read_file(const char *dir, const char *name, size_t bytes)
{
	char path[512];
	void *buf = malloc(bytes + 1);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, bytes + 1, f), bytes);
	fclose(f);
	return buf;
}

static void test_dequant_vectors(void **state)
{
	enum { ROWS = 64, COLS = 1024 };
	char name[64];

	(void)state;
	if (access(QDIR "/input.f32", R_OK) != 0)
		skip();
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		uint64_t rb;
		uint8_t *q;
		float *want;

		assert_int_equal(o1_quant_row_bytes(types[i], COLS, &rb), 0);
		snprintf(name, sizeof(name), "%s.bin", files[i]);
		q = read_file(dirs[i], name, rb * ROWS);
		snprintf(name, sizeof(name), "%s.dequant.f32", files[i]);
		want = read_file(dirs[i], name, sizeof(float) * ROWS * COLS);
		check_dequant(types[i], q, ROWS * COLS, want);
		free(q), free(want);
	}
}

static void test_dequant_random(void **state)
{
	/* whole warps of 32 units; 37 super-blocks: a last warp of 8 units,
	 * whose Q6_K span (210 bytes) ends 2 bytes past its last 8-byte word */
	uint64_t sizes[] = {kct_quick() ? 8192 : 1u << 20, 37 * 256};

	(void)state;
	for (size_t k = 0; k < 2; k++)
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
			uint8_t *q = qct_random_blocks(types[i], sizes[k]);

			check_dequant(types[i], q, sizes[k], NULL);
			free(q);
		}
}

static void test_embedding(void **state)
{
	enum { DIM = 512, VOCAB = 40, T = 9 };
	int32_t ids[T] = {0, 39, 7, 7, 20, 3, 40, -1, 11};
	float *cpu = malloc(T * DIM * 4), *gpu = malloc(T * DIM * 4), *dout;
	int32_t *did;

	(void)state;
	did = kct_dev_copy(ids, sizeof(ids));
	dout = kct_dev(T * DIM * 4);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		uint64_t rb;
		uint8_t *q = qct_random_blocks(types[i], VOCAB * DIM);
		void *dq;

		assert_int_equal(o1_quant_row_bytes(types[i], DIM, &rb), 0);
		dq = kct_dev_copy(q, rb * VOCAB);
		/* the reference refuses bad ids: the good rows one by one */
		for (int t = 0; t < T; t++)
			if (ids[t] >= 0 && ids[t] < VOCAB)
				assert_int_equal(
				    o1_embedding_q_cpu(NULL, cpu + t * DIM, q,
						       types[i], &ids[t], 1,
						       DIM, VOCAB),
				    0);
			else
				memset(cpu + t * DIM, 0, DIM * 4);
		assert_int_equal(o1_embedding_q_cuda(dout, dq, types[i], did, T,
						     DIM, VOCAB, NULL),
				 0);
		kct_get(gpu, dout, T * DIM * 4);
		assert_memory_equal(gpu, cpu, T * DIM * 4);
		cudaFree(dq);
		free(q);
	}
	cudaFree(did), cudaFree(dout);
	free(cpu), free(gpu);
}

/* One product shape: GPU against the reference within 2^-17 sum |x w|,
 * columns past N untouched, a second launch bitwise the first. */
static void check_gemv(enum o1_quant_type type, uint32_t m, uint32_t n,
		       uint32_t k, uint32_t ldy)
{
	size_t ny = (size_t)m * ldy;
	uint16_t *x = malloc((size_t)m * k * 2);
	float *cpu = malloc(ny * 4), *gpu = malloc(ny * 4),
	      *again = malloc(ny * 4);
	float *mag = calloc((size_t)m * n, sizeof(float)), *dq_rows, *dy;
	uint8_t *q = qct_random_blocks(type, (uint64_t)n * k);
	uint64_t rb;
	void *dw, *dx;

	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	for (size_t i = 0; i < (size_t)m * k; i++)
		x[i] = kct_bf16_of(kct_frand() * 2);
	for (size_t i = 0; i < ny; i++)
		cpu[i] = NAN;
	dq_rows = malloc((size_t)n * k * 4);
	o1_quant_dequantize(type, q, dq_rows, (uint64_t)n * k);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++)
			for (uint32_t c = 0; c < k; c++) {
				uint32_t b = (uint32_t)x[(size_t)i * k + c]
					     << 16;
				float xf;

				memcpy(&xf, &b, 4);
				mag[(size_t)i * n + j] +=
				    fabsf(xf * dq_rows[(size_t)j * k + c]);
			}
	dw = kct_dev_copy(q, rb * n);
	dx = kct_dev_copy(x, (size_t)m * k * 2);
	dy = kct_dev_copy(cpu, ny * 4); /* NaN everywhere */
	assert_int_equal(o1_gemv_q_cpu(cpu, x, q, type, m, n, k, ldy), 0);
	assert_int_equal(
	    o1_gemv_q_cuda(dy, dx, dw, type, m, n, k, ldy, false, NULL), 0);
	kct_get(gpu, dy, ny * 4);
	assert_int_equal(
	    o1_gemv_q_cuda(dy, dx, dw, type, m, n, k, ldy, true, NULL), 0);
	kct_get(again, dy, ny * 4);
	assert_memory_equal(gpu, again, ny * 4);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < ldy; j++) {
			float g = gpu[(size_t)i * ldy + j];
			float c = cpu[(size_t)i * ldy + j];

			if (j >= n) {
				assert_true(isnan(g));
				continue;
			}
			if (!(fabsf(g - c) <=
			      0x1p-17f * mag[(size_t)i * n + j] + 1e-30f))
				fail_msg(
				    "%s m %u n %u k %u: y[%u][%u] gpu %.9g "
				    "cpu %.9g (sum |xw| %g)",
				    o1_quant_name(type), m, n, k, i, j, g, c,
				    mag[(size_t)i * n + j]);
		}
	cudaFree(dw), cudaFree(dx), cudaFree(dy);
	free(x), free(cpu), free(gpu), free(again), free(mag), free(q);
	free(dq_rows);
}

static void test_gemv(void **state)
{
	static const uint32_t ks[] = {256, 512, 1024};
	static const uint32_t ns[] = {1, 5, 37, 256};

	(void)state;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t a = 0; a < sizeof(ks) / sizeof(ks[0]); a++)
			for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++)
				for (uint32_t m = 1; m <= 4; m++)
					if (!kct_quick() ||
					    m == 1 + (a + b) % 4)
						check_gemv(types[t], m, ns[b],
							   ks[a],
							   ns[b] + (m % 2) * 3);
	/* rows of 32-blocks not filling a 256 (Q5_0's 198-byte rows
	 * alternate between 2 and 0 mod 4) */
	check_gemv(O1_QUANT_Q8_0, 2, 9, 96, 9);
	check_gemv(O1_QUANT_Q4_0, 3, 6, 288, 11);
	check_gemv(O1_QUANT_Q5_0, 3, 6, 288, 11);
	/* rows of several batches, the last one short (gemv_q.cu reads a
	 * row a few KB at a time), and warps striding over rows */
	check_gemv(O1_QUANT_Q8_0, 2, 61, 8224, 61);
	check_gemv(O1_QUANT_Q4_0, 1, 37, 14496, 40);
	check_gemv(O1_QUANT_Q4_K, 3, 61, 15360, 61);
	check_gemv(O1_QUANT_Q6_K, 4, 37, 10496, 37);
	check_gemv(O1_QUANT_Q5_0, 2, 37, 14496, 37);
	if (kct_quick())
		return;
	/* decode shapes of real models */
	check_gemv(O1_QUANT_Q4_K, 1, 4096, 4096, 4096);
	check_gemv(O1_QUANT_Q6_K, 4, 1024, 14336, 1024);
	check_gemv(O1_QUANT_Q8_0, 3, 2048, 2048, 6144);
	check_gemv(O1_QUANT_Q4_0, 2, 896, 4864, 896);
	/* qwen2.5-0.5b's gate/up in a Q4_K_M file */
	check_gemv(O1_QUANT_Q5_0, 1, 2 * 4864, 896, 2 * 4864);
}

/* The int8 path on weights Q (N rows of K of TYPE, put on the device
 * OFF bytes past a 256-byte boundary: the kernels' alignment cases) and
 * inputs X (M rows):
 * GPU bitwise the CPU reference (twice, PDL on the second), columns past
 * N untouched; the reference within gemv_q8.h's bound of the f32 one.
 * Returns the largest relative L2 distance of an output row to the f32
 * reference (rows with a nonzero reference). */
static double check_q8_on(enum o1_quant_type type, const uint8_t *q,
			  const uint16_t *x, uint32_t m, uint32_t n, uint32_t k,
			  uint32_t ldy, uint32_t off)
{
	size_t ny = (size_t)m * ldy;
	float *c8 = malloc(ny * 4), *c32 = malloc(ny * 4),
	      *gpu = malloc(ny * 4);
	float *again = malloc(ny * 4), *bound = malloc((size_t)m * n * 4), *dy;
	double worst = 0;
	uint64_t rb;
	void *dw, *dx;

	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	for (size_t i = 0; i < ny; i++)
		c8[i] = c32[i] = NAN;
	dw = kct_dev(rb * n + off);
	assert_int_equal(cudaMemcpy((uint8_t *)dw + off, q, rb * n,
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	dx = kct_dev_copy(x, (size_t)m * k * 2);
	dy = kct_dev_copy(c8, ny * 4); /* NaN everywhere */
	assert_int_equal(o1_gemv_q8_cpu(c8, x, q, type, m, n, k, ldy), 0);
	assert_int_equal(o1_gemv_q_cpu(c32, x, q, type, m, n, k, ldy), 0);
	assert_int_equal(o1_gemv_q8_bound_cpu(bound, x, q, type, m, n, k), 0);
	assert_int_equal(o1_gemv_q8_cuda(dy, dx, (uint8_t *)dw + off, type, m,
					 n, k, ldy, false, NULL),
			 0);
	kct_get(gpu, dy, ny * 4);
	assert_int_equal(o1_gemv_q8_cuda(dy, dx, (uint8_t *)dw + off, type, m,
					 n, k, ldy, true, NULL),
			 0);
	kct_get(again, dy, ny * 4);
	assert_memory_equal(gpu, again, ny * 4);
	for (uint32_t i = 0; i < m; i++) {
		double d2 = 0, r2 = 0;

		for (uint32_t j = 0; j < ldy; j++) {
			size_t at = (size_t)i * ldy + j;

			if (j >= n) {
				assert_true(isnan(gpu[at]));
				continue;
			}
			if (o1_gemv_q8_fits(type, m, k) &&
			    memcmp(&gpu[at], &c8[at], 4))
				fail_msg("%s q8 m %u n %u k %u: y[%u][%u] gpu "
					 "%.9g cpu %.9g",
					 o1_quant_name(type), m, n, k, i, j,
					 gpu[at], c8[at]);
			if (!(fabsf(c8[at] - c32[at]) <=
			      bound[(size_t)i * n + j]))
				fail_msg("%s q8 m %u n %u k %u: y[%u][%u] int8 "
					 "%.9g f32 %.9g, bound %g",
					 o1_quant_name(type), m, n, k, i, j,
					 c8[at], c32[at],
					 bound[(size_t)i * n + j]);
			d2 += ((double)c8[at] - c32[at]) *
			      ((double)c8[at] - c32[at]);
			r2 += (double)c32[at] * c32[at];
		}
		if (r2 > 0 && sqrt(d2 / r2) > worst)
			worst = sqrt(d2 / r2);
	}
	cudaFree(dw), cudaFree(dx), cudaFree(dy);
	free(c8), free(c32), free(gpu), free(again), free(bound);
	return worst;
}

/* check_q8_on with random blocks and inputs (as check_gemv's). */
static double check_q8_at(enum o1_quant_type type, uint32_t m, uint32_t n,
			  uint32_t k, uint32_t ldy, uint32_t off)
{
	uint16_t *x = malloc((size_t)m * k * 2);
	uint8_t *q = qct_random_blocks(type, (uint64_t)n * k);
	double worst;

	for (size_t i = 0; i < (size_t)m * k; i++)
		x[i] = kct_bf16_of(kct_frand() * 2);
	worst = check_q8_on(type, q, x, m, n, k, ldy, off);
	/* a row of few outputs is too few for a distance */
	if (n >= 32)
		assert_true(worst <= 2e-2);
	free(x), free(q);
	return worst;
}

static double check_q8(enum o1_quant_type type, uint32_t m, uint32_t n,
		       uint32_t k, uint32_t ldy)
{
	return check_q8_at(type, m, n, k, ldy, 0);
}

static void test_gemv_q8(void **state)
{
	static const uint32_t ks[] = {256, 512, 1024};
	static const uint32_t ns[] = {1, 5, 37, 256};
	double worst = 0, w;

	(void)state;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t a = 0; a < sizeof(ks) / sizeof(ks[0]); a++)
			for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++)
				for (uint32_t m = 1; m <= 4; m++)
					if (!kct_quick() ||
					    m == 1 + (a + b) % 4) {
						w = check_q8(
						    types[t], m, ns[b], ks[a],
						    ns[b] + (m % 2) * 3);
						worst = w > worst ? w : worst;
					}
	check_q8(O1_QUANT_Q8_0, 2, 9, 96, 9);
	check_q8(O1_QUANT_Q4_0, 3, 6, 288, 11);
	check_q8(O1_QUANT_Q5_0, 3, 6, 288, 11);
	check_q8(O1_QUANT_Q8_0, 2, 61, 8224, 61);
	check_q8(O1_QUANT_Q4_0, 1, 37, 14496, 40);
	check_q8(O1_QUANT_Q4_K, 3, 61, 15360, 61);
	check_q8(O1_QUANT_Q6_K, 4, 37, 10496, 37);
	check_q8(O1_QUANT_Q5_0, 1, 37, 14496, 40);
	/* weights at 4 and 2 bytes past 16-byte alignment (Q4_K's and the
	 * others' least) */
	check_q8_at(O1_QUANT_Q4_K, 1, 70, 2048, 70, 4);
	check_q8_at(O1_QUANT_Q4_K, 2, 33, 1024, 33, 12);
	check_q8_at(O1_QUANT_Q8_0, 1, 70, 2048, 70, 2);
	check_q8_at(O1_QUANT_Q6_K, 1, 70, 2048, 70, 6);
	check_q8_at(O1_QUANT_Q4_0, 3, 33, 1024, 33, 10);
	check_q8_at(O1_QUANT_Q5_0, 2, 33, 1024, 33, 14);
	check_q8_at(O1_QUANT_Q5_0, 1, 45, 288, 45, 2);
	if (!kct_quick()) {
		check_q8(O1_QUANT_Q4_K, 1, 4096, 4096, 4096);
		check_q8(O1_QUANT_Q6_K, 4, 1024, 14336, 1024);
		check_q8(O1_QUANT_Q8_0, 3, 2048, 2048, 6144);
		check_q8(O1_QUANT_Q4_0, 2, 896, 4864, 896);
		check_q8(O1_QUANT_Q5_0, 1, 2 * 4864, 896, 2 * 4864);
		check_q8(O1_QUANT_Q5_0, 4, 896, 896, 896);
		/* past o1_gemv_q8_fits: the f32 kernel, same bounds */
		assert_false(o1_gemv_q8_fits(O1_QUANT_Q8_0, 4, 20480));
		check_q8(O1_QUANT_Q8_0, 4, 64, 20480, 64);
	}
	printf("int8 path, random rows: largest relative L2 %.3g\n", worst);
}

/* llama.cpp's blocks as weights (64 rows of 1024, every kind) and its
 * input rows as activations, four rows of one kind (r0 % 8) at a time:
 * every kind of input (weights, tiny, outliers, zeros, constants,
 * ramps...) meets every kind of block. */
static void test_gemv_q8_vectors(void **state)
{
	enum { ROWS = 64, COLS = 1024 };
	float *in;
	uint16_t x[4 * COLS];
	char name[64];
	double worst[8] = {0};

	(void)state;
	if (access(QDIR "/input.f32", R_OK) != 0)
		skip();
	in = read_file(QDIR, "input.f32", sizeof(float) * ROWS * COLS);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		uint64_t rb;
		uint8_t *q;

		assert_int_equal(o1_quant_row_bytes(types[i], COLS, &rb), 0);
		snprintf(name, sizeof(name), "%s.bin", files[i]);
		q = read_file(dirs[i], name, rb * ROWS);
		for (uint32_t r0 = 0; r0 < (kct_quick() ? 8 : 16); r0++) {
			double w;

			for (uint32_t e = 0; e < 4 * COLS; e++)
				x[e] = kct_bf16_of(
				    in[(size_t)(r0 + 16 * (e / COLS)) * COLS +
				       e % COLS]);
			w = check_q8_on(types[i], q, x, 4, ROWS, COLS, ROWS,
					0);
			if (w > worst[r0 % 8])
				worst[r0 % 8] = w;
		}
		free(q);
	}
	free(in);
	printf("int8 path, llama.cpp vectors: largest relative L2 by input "
	       "kind (README):");
	for (int c = 0; c < 8; c++)
		printf(" %d:%.3g", c, worst[c]);
	printf("\n");
}

/* Row R of the norm's exact input (X, K a multiple of 4): each 4
 * elements (2c, 0, 0, 0) in some order or (c, c, c, c), signs at random,
 * c = 2^(R % 3 - 1): every sum of squares exact in any order, their mean
 * c^2, so with eps 0 the row's inverse RMS is 1 / c exactly, and a
 * product that scales by it after its roundings instead of before (the
 * norm folded: o1_gemv_q8_norm_folded) has the same bits. */
static void pow2_norm_row(float *x, uint32_t k, uint32_t r)
{
	float c = ldexpf(1.0f, (int)(r % 3) - 1);

	for (uint32_t g = 0; g < k; g += 4) {
		bool one = kct_frand() > 0;

		for (int e = 0; e < 4; e++)
			x[g + e] = one ? 0.0f : c;
		if (one)
			x[g + (uint32_t)((kct_frand() + 1) * 2) % 4] = 2 * c;
		for (int e = 0; e < 4; e++)
			if (kct_frand() > 0)
				x[g + e] = -x[g + e];
	}
}

/* The folded norm's product GOT (M,N) of check_fused_on's operands
 * (X_ROWS: the rows of XF, NULL for 0 .. M) against its definition:
 * o1_gemv_q8_cpu over bf16(x nw) (the device's operations), each output
 * times its row's inverse RMS (in double here), within 2^-10 of it
 * relatively: the device sums the squares in f32 (K <= 2^14 positive
 * terms: within K 2^-24 of the sum), its inverse square root is within
 * half of that plus a rounding each for the root, the division and the
 * product. */
static void expect_folded(const float *got, const float *xf,
			  const uint32_t *x_rows, const float *nw, float eps,
			  const uint8_t *q, enum o1_quant_type type, uint32_t m,
			  uint32_t n, uint32_t k)
{
	uint16_t *g = malloc((size_t)m * k * 2);
	float *c8 = malloc((size_t)m * n * 4);
	double inv[4];

	assert_true(m <= 4 && k <= 16384);
	for (uint32_t i = 0; i < m; i++) {
		const float *x = xf + (size_t)(x_rows ? x_rows[i] : i) * k;
		double ss = 0;

		for (uint32_t e = 0; e < k; e++) {
			g[(size_t)i * k + e] = kct_bf16_of(x[e] * nw[e]);
			ss += (double)x[e] * x[e];
		}
		inv[i] = 1 / sqrt(ss / k + eps);
	}
	assert_int_equal(o1_gemv_q8_cpu(c8, g, q, type, m, n, k, n), 0);
	for (uint32_t i = 0; i < m; i++)
		for (uint32_t j = 0; j < n; j++) {
			double want = c8[(size_t)i * n + j] * inv[i];
			float y = got[(size_t)i * n + j];

			if (!(fabs(y - want) <= ldexp(fabs(want), -10) + 1e-30))
				fail_msg(
				    "%s folded norm m %u n %u k %u: y[%u][%u] "
				    "%.9g, want %.9g",
				    o1_quant_name(type), m, n, k, i, j, y,
				    want);
		}
	free(g), free(c8);
}

/* The residual add given its input quantized already (XQ: gemv_q8.h's
 * o1_q8_input_cpu of the bf16 rows DH, as the decode attention leaves
 * them for the O product) is WANT bitwise, the add without it; with one
 * quant of the last row changed it is not (the copy is what the product
 * reads). DY is reset to Y0 before each launch. */
static void check_add_xq(void *dy, const void *dh, const void *dw,
			 const float *y0, const float *want,
			 enum o1_quant_type type, uint32_t m, uint32_t n,
			 uint32_t k)
{
	size_t bytes = o1_q8_input_bytes(m, k), yb = (size_t)m * n * 4;
	uint16_t *h = malloc((size_t)m * k * 2);
	uint8_t *xq = malloc(bytes);
	float *got = malloc(yb);
	void *dxq;

	kct_get(h, dh, (size_t)m * k * 2);
	assert_int_equal(o1_q8_input_cpu(xq, h, m, k), 0);
	for (int mutate = 0; mutate < 2; mutate++) {
		/* row m - 1's unit 0, element 0 (its low piece's first byte) */
		if (mutate)
			xq[(size_t)(m - 1) * ((k / 32 + 31) / 32 * 32) * 2 *
			   16] ^= 0x10;
		dxq = kct_dev_copy(xq, bytes);
		assert_int_equal(cudaMemcpy(dy, y0, yb, cudaMemcpyHostToDevice),
				 cudaSuccess);
		assert_int_equal(o1_gemv_q8_add_cuda(dy, dh, dxq, dw, type, m,
						     n, k, n, true, NULL),
				 0);
		kct_get(got, dy, yb);
		if (mutate)
			assert_memory_not_equal(got, want, yb);
		else
			assert_memory_equal(got, want, yb);
		cudaFree(dxq);
	}
	free(h), free(xq), free(got);
}

/* The fused int8 variants against their compositions (see the top), M
 * rows of K from M + 3 f32 rows (the row list picks them backwards), on
 * random rows or (EXACT) pow2_norm_row's with eps 0. Where the norm is
 * folded (o1_gemv_q8_norm_folded) the normalized product on random rows
 * is held to expect_folded instead (on EXACT rows it is the composition
 * bitwise either way), and the SwiGLU one's composition is
 * o1_gemv_q8_norm_cuda over its 2N rows then o1_swiglu_cuda. */
static void check_fused_on(enum o1_quant_type type, uint32_t m, uint32_t n,
			   uint32_t k, bool exact)
{
	uint32_t xr = m + 3, rows[4];
	float *xf = malloc((size_t)xr * k * 4), *nw = malloc((size_t)k * 4);
	float *y0 = malloc((size_t)m * n * 4), *got = malloc((size_t)m * n * 4);
	float *want = malloc((size_t)m * n * 4);
	uint16_t *a1 = malloc((size_t)m * n * 2),
		 *a2 = malloc((size_t)m * n * 2);
	uint8_t *q = qct_random_blocks(type, (uint64_t)2 * n * k);
	uint64_t rb;
	void *dw, *dxf, *dnw, *dh, *dy, *drows, *da, *dy2;
	float eps = exact ? 0.0f : 1e-5f;
	bool folded = o1_gemv_q8_norm_folded();

	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	for (size_t i = 0; i < (size_t)xr * k; i++)
		xf[i] = kct_frand() * (i % 61 == 0 ? 8.0f : 1.5f);
	for (uint32_t r = 0; exact && r < xr; r++)
		pow2_norm_row(xf + (size_t)r * k, k, r);
	for (uint32_t i = 0; i < k; i++)
		nw[i] = 0.5f + kct_frand();
	for (size_t i = 0; i < (size_t)m * n; i++)
		y0[i] = kct_frand() * 4;
	for (uint32_t i = 0; i < m; i++)
		rows[i] = xr - 1 - i;
	dw = kct_dev_copy(q, rb * 2 * n);
	dxf = kct_dev_copy(xf, (size_t)xr * k * 4);
	dnw = kct_dev_copy(nw, (size_t)k * 4);
	dh = kct_dev((size_t)m * k * 2);
	dy = kct_dev((size_t)m * n * 4);
	da = kct_dev((size_t)m * n * 2);
	dy2 = kct_dev((size_t)m * 2 * n * 4);
	drows = kct_dev_copy(rows, sizeof(rows));
	for (int gather = 0; gather < 2; gather++) {
		const uint32_t *r = gather ? drows : NULL;

		assert_int_equal(o1_rmsnorm_cuda(dh, dxf, NULL, dnw, r, m, k,
						 eps, false, NULL),
				 0);
		assert_int_equal(
		    o1_gemv_q8_cuda(dy, dh, dw, type, m, n, k, n, false, NULL),
		    0);
		kct_get(want, dy, (size_t)m * n * 4);
		assert_int_equal(o1_gemv_q8_norm_cuda(dy, dxf, r, dnw, eps, dw,
						      type, m, n, k, n, true,
						      NULL),
				 0);
		kct_get(got, dy, (size_t)m * n * 4);
		if (folded && !exact)
			expect_folded(got, xf, gather ? rows : NULL, nw, eps, q,
				      type, m, n, k);
		else
			assert_memory_equal(got, want, (size_t)m * n * 4);
	}
	/* SwiGLU over the same input, 2N rows */
	assert_int_equal(
	    o1_rmsnorm_cuda(dh, dxf, NULL, dnw, NULL, m, k, eps, false, NULL),
	    0);
	if (folded) {
		assert_int_equal(o1_gemv_q8_norm_cuda(dy2, dxf, NULL, dnw, eps,
						      dw, type, m, 2 * n, k,
						      2 * n, false, NULL),
				 0);
		assert_int_equal(o1_swiglu_cuda(da, dy2, (float *)dy2 + n,
						2 * n, m, n, false, NULL),
				 0);
	} else {
		assert_int_equal(o1_gemv_q8_swiglu_cuda(da, dh, dw, type, m, n,
							k, false, NULL),
				 0);
	}
	kct_get(a1, da, (size_t)m * n * 2);
	assert_int_equal(o1_gemv_q8_norm_swiglu_cuda(da, dxf, dnw, eps, dw,
						     type, m, n, k, true, NULL),
			 0);
	kct_get(a2, da, (size_t)m * n * 2);
	assert_memory_equal(a1, a2, (size_t)m * n * 2);
	/* the residual add: y0 + the product of the bf16 rows */
	assert_int_equal(
	    o1_gemv_q8_cuda(dy, dh, dw, type, m, n, k, n, false, NULL), 0);
	kct_get(want, dy, (size_t)m * n * 4);
	for (size_t i = 0; i < (size_t)m * n; i++)
		want[i] = y0[i] + want[i];
	assert_int_equal(
	    cudaMemcpy(dy, y0, (size_t)m * n * 4, cudaMemcpyHostToDevice),
	    cudaSuccess);
	assert_int_equal(
	    o1_gemv_q8_add_cuda(dy, dh, NULL, dw, type, m, n, k, n, true, NULL),
	    0);
	kct_get(got, dy, (size_t)m * n * 4);
	assert_memory_equal(got, want, (size_t)m * n * 4);
	check_add_xq(dy, dh, dw, y0, want, type, m, n, k);
	cudaFree(dw), cudaFree(dxf), cudaFree(dnw), cudaFree(dh);
	cudaFree(dy), cudaFree(da), cudaFree(dy2), cudaFree(drows);
	free(xf), free(nw), free(y0), free(got), free(want), free(a1);
	free(a2), free(q);
}

static void check_fused(enum o1_quant_type type, uint32_t m, uint32_t n,
			uint32_t k)
{
	check_fused_on(type, m, n, k, false);
	check_fused_on(type, m, n, k, true);
}

static void test_fused_q8(void **state)
{
	(void)state;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		check_fused(types[t], 1 + t % 4, 37, 512);
		check_fused(types[t], 4 - t % 4, 9, 1024);
	}
	check_fused(O1_QUANT_Q4_K, 2, 19, 15360);
	check_fused(O1_QUANT_Q4_K, 1, 37, 2560);
	/* an even N: the add takes outputs j and j + N / 2 a step (Q4_K,
	 * and Q6_K whose rows are whole 16-byte pieces), some warps walking
	 * two such steps on the emulation's grid */
	check_fused(O1_QUANT_Q4_K, 1, 100, 2560);
	check_fused(O1_QUANT_Q6_K, 1, 100, 2048);
	/* llama3-8b's down width: Q4_K's add two rows a step in variant 6
	 * (variant 7's ring and this input do not fit a block) */
	check_fused(O1_QUANT_Q4_K, 1, 40, 14336);
	/* Q5_0: qwen2.5-0.5b's width; rows alternating 2 and 0 mod 4 */
	check_fused(O1_QUANT_Q5_0, 3, 33, 896);
	check_fused(O1_QUANT_Q5_0, 2, 20, 288);
	/* 27 units in all: an odd count of (d, sum) pairs (xq_copy's last) */
	check_fused(O1_QUANT_Q5_0, 3, 20, 288);
	if (kct_quick())
		return;
	check_fused(O1_QUANT_Q6_K, 1, 4096, 4096);
	check_fused(O1_QUANT_Q8_0, 4, 1024, 14336);
	check_fused(O1_QUANT_Q5_0, 1, 4864, 896);
}

/* A fused QKV matrix in parts: rows [col0[i], col0[i + 1]) of TYPE[i]. */
struct qkv_parts {
	uint32_t n;
	uint32_t col0[4];
	enum o1_quant_type type[3];
};

/* The RoPE epilogue against its composition (see the top): M tokens at
 * distinct slots of 4 pages of 16, HQ/HKV heads of D, rotation over ROT
 * dims, the QKV matrix in the parts PT, K inputs. */
static void check_rope_kv(const struct qkv_parts *pt, uint32_t m, uint32_t hq,
			  uint32_t hkv, uint32_t d, uint32_t rot, bool bias,
			  float scale, uint32_t k)
{
	const int32_t pos[4] = {7, 0, 1023, 33};
	const uint32_t slots[4] = {19, 2, 63, 40};
	uint32_t n = (hq + 2 * hkv) * d, pages = 4, pt_tok = 16;
	size_t cache = (size_t)pages * hkv * pt_tok * d,
	       qn = (size_t)m * hq * d;
	float *xf = malloc((size_t)m * k * 4), *nw = malloc((size_t)k * 4);
	float *bs = malloc((size_t)n * 4), *inv = malloc((size_t)rot / 2 * 4);
	float *q[3] = {malloc(qn * 4), malloc(qn * 4), malloc(qn * 4)};
	uint16_t *kc[3] = {malloc(cache * 2), malloc(cache * 2),
			   malloc(cache * 2)};
	uint16_t *vc[3] = {malloc(cache * 2), malloc(cache * 2),
			   malloc(cache * 2)};
	struct o1_gemv_q_part gp[3];
	uint16_t *fill = malloc(cache * 2);
	void *dw[3], *dxf, *dnw, *dq, *dkc, *dvc, *dqkv, *dpos, *dsl, *dinv,
	    *dbs;
	struct o1_attn_dims ad = {
	    hq, hkv, d, pt_tok, (uint64_t)hkv * pt_tok * d, 1.0f};

	for (size_t i = 0; i < (size_t)m * k; i++)
		xf[i] = kct_frand() * (i % 53 == 0 ? 6.0f : 1.5f);
	for (uint32_t i = 0; i < k; i++)
		nw[i] = 0.5f + kct_frand();
	for (uint32_t i = 0; i < n; i++)
		bs[i] = kct_frand() * 0.25f;
	for (uint32_t i = 0; i < rot / 2; i++)
		inv[i] = (float)pow(10000.0, -2.0 * i / rot);
	for (size_t i = 0; i < cache; i++)
		fill[i] = (uint16_t)(0x3c00 + i % 977);
	for (uint32_t i = 0; i < pt->n; i++) {
		uint32_t rows = pt->col0[i + 1] - pt->col0[i];
		uint8_t *qb =
		    qct_random_blocks(pt->type[i], (uint64_t)rows * k);
		uint64_t rb;

		assert_int_equal(o1_quant_row_bytes(pt->type[i], k, &rb), 0);
		dw[i] = kct_dev_copy(qb, rb * rows);
		gp[i] = (struct o1_gemv_q_part){dw[i], pt->type[i],
						pt->col0[i], rows};
		free(qb);
	}
	dxf = kct_dev_copy(xf, (size_t)m * k * 4);
	dnw = kct_dev_copy(nw, (size_t)k * 4);
	dq = kct_dev(qn * 4);
	dkc = kct_dev(cache * 2);
	dvc = kct_dev(cache * 2);
	dqkv = kct_dev((size_t)m * n * 4);
	dpos = kct_dev_copy(pos, sizeof(pos));
	dsl = kct_dev_copy(slots, sizeof(slots));
	dinv = kct_dev_copy(inv, (size_t)rot / 2 * 4);
	dbs = kct_dev_copy(bs, (size_t)n * 4);
	struct o1_rope_kv_args ra = {dq,   dkc, dvc,  dqkv,  bias ? dbs : NULL,
				     dpos, dsl, dinv, scale, m,
				     rot};

	/* 0: the composition, 1: a fused call a part, 2: the parts' call */
	for (int fused = 0; fused < 3; fused++) {
		assert_int_equal(
		    cudaMemcpy(dkc, fill, cache * 2, cudaMemcpyHostToDevice),
		    cudaSuccess);
		assert_int_equal(
		    cudaMemcpy(dvc, fill, cache * 2, cudaMemcpyHostToDevice),
		    cudaSuccess);
		assert_int_equal(cudaMemset(dq, 0x7f, qn * 4), cudaSuccess);
		if (fused == 2)
			assert_int_equal(o1_gemv_q8_norm_rope_kv_parts_cuda(
					     &ra, &ad, dxf, dnw, 1e-5f, gp,
					     pt->n, k, true, NULL),
					 0);
		for (uint32_t i = 0; fused < 2 && i < pt->n; i++) {
			uint32_t c0 = pt->col0[i], rows = pt->col0[i + 1] - c0;

			if (fused)
				assert_int_equal(o1_gemv_q8_norm_rope_kv_cuda(
						     &ra, &ad, dxf, dnw, 1e-5f,
						     dw[i], pt->type[i], c0,
						     rows, k, true, NULL),
						 0);
			else
				assert_int_equal(o1_gemv_q8_norm_cuda(
						     (float *)dqkv + c0, dxf,
						     NULL, dnw, 1e-5f, dw[i],
						     pt->type[i], m, rows, k, n,
						     false, NULL),
						 0);
		}
		if (!fused)
			assert_int_equal(
			    o1_rope_kv_write_cuda(&ra, &ad, false, NULL), 0);
		kct_get(q[fused], dq, qn * 4);
		kct_get(kc[fused], dkc, cache * 2);
		kct_get(vc[fused], dvc, cache * 2);
	}
	for (int i = 1; i < 3; i++) {
		assert_memory_equal(q[0], q[i], qn * 4);
		assert_memory_equal(kc[0], kc[i], cache * 2);
		assert_memory_equal(vc[0], vc[i], cache * 2);
	}
	/* the writes happened: token 0's first k and v elements (slot 19:
	 * page 1, slot 3) moved */
	size_t at = (size_t)hkv * pt_tok * d + (size_t)3 * d;

	assert_true(kc[1][at] != fill[at] && vc[1][at] != fill[at]);
	for (uint32_t i = 0; i < pt->n; i++)
		cudaFree(dw[i]);
	cudaFree(dxf), cudaFree(dnw), cudaFree(dq), cudaFree(dkc);
	cudaFree(dvc), cudaFree(dqkv), cudaFree(dpos), cudaFree(dsl);
	cudaFree(dinv), cudaFree(dbs);
	free(xf), free(nw), free(bs), free(inv), free(fill);
	for (int i = 0; i < 3; i++)
		free(q[i]), free(kc[i]), free(vc[i]);
}

static void test_rope_kv_q8(void **state)
{
	/* llama3's split in a Q4_K_M file: q and k in Q4_K, v in Q6_K */
	const struct qkv_parts qk_v = {
	    2, {0, 6 * 64, 8 * 64}, {O1_QUANT_Q4_K, O1_QUANT_Q6_K}};
	const struct qkv_parts q_k_v = {
	    3,
	    {0, 4 * 64, 5 * 64, 6 * 64},
	    {O1_QUANT_Q8_0, O1_QUANT_Q4_0, O1_QUANT_Q4_K}};
	const struct qkv_parts one = {1, {0, 8 * 32}, {O1_QUANT_Q6_K}};
	/* llama3-8b's heads (32 q, 8 kv of 128) */
	const struct qkv_parts l8 = {
	    2, {0, 40 * 128, 48 * 128}, {O1_QUANT_Q4_K, O1_QUANT_Q6_K}};
	/* qwen2.5-0.5b's in a Q4_K_M file (14 q, 2 kv of 64; K 896): q and
	 * k in Q5_0, v in Q8_0 (or Q5_0: one part) */
	const struct qkv_parts qw = {
	    2, {0, 16 * 64, 18 * 64}, {O1_QUANT_Q5_0, O1_QUANT_Q8_0}};
	const struct qkv_parts qw1 = {1, {0, 18 * 64}, {O1_QUANT_Q5_0}};
	const struct qkv_parts mid = {
	    3,
	    {0, 4 * 64, 5 * 64, 6 * 64},
	    {O1_QUANT_Q4_K, O1_QUANT_Q5_0, O1_QUANT_Q6_K}};

	(void)state;
	check_rope_kv(&l8, 1, 32, 8, 128, 128, false, 1.0f, 256);
	for (uint32_t m = 1; m <= 4; m++)
		check_rope_kv(&qk_v, m, 4, 2, 64, 64, m % 2, 1.0f, 512);
	check_rope_kv(&q_k_v, 3, 4, 1, 64, 32, true, 0.75f, 1024);
	check_rope_kv(&one, 2, 4, 2, 32, 32, false, 1.0f, 256);
	check_rope_kv(&qw, 1, 14, 2, 64, 64, true, 1.0f, 896);
	check_rope_kv(&qw, 3, 14, 2, 64, 64, true, 1.0f, 288);
	check_rope_kv(&qw1, 2, 14, 2, 64, 64, false, 1.0f, 896);
	check_rope_kv(&mid, 4, 4, 1, 64, 32, false, 0.75f, 512);
	if (kct_quick())
		return;
	check_rope_kv(&qk_v, 1, 4, 2, 64, 64, false, 1.0f, 4096);
	for (uint32_t m = 2; m <= 4; m++)
		check_rope_kv(&qw, m, 14, 2, 64, 64, true, 1.0f, 896);
}

/* The SwiGLU epilogue: o1_gemv_q_swiglu_cuda over 2F rows equals
 * o1_gemv_q_cuda into (M, 2F) then o1_swiglu_cuda, bitwise (and that
 * product is check_gemv's). */
static void check_swiglu_at(enum o1_quant_type type, uint32_t m, uint32_t f,
			    uint32_t k, bool i8, uint32_t off)
{
	uint16_t *x = malloc((size_t)m * k * 2);
	uint16_t *got = malloc((size_t)m * f * 2), *want = malloc((size_t)m * f * 2);
	uint8_t *q = qct_random_blocks(type, (uint64_t)2 * f * k);
	uint64_t rb;
	void *dw, *dx, *dgu, *dact, *dref;

	assert_int_equal(o1_quant_row_bytes(type, k, &rb), 0);
	for (size_t i = 0; i < (size_t)m * k; i++)
		x[i] = kct_bf16_of(kct_frand() * 2);
	memset(got, 0xff, (size_t)m * f * 2); /* NaNs: every element written */
	dw = kct_dev(rb * 2 * f + off);
	assert_int_equal(cudaMemcpy((uint8_t *)dw + off, q, rb * 2 * f,
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	dx = kct_dev_copy(x, (size_t)m * k * 2);
	dgu = kct_dev((size_t)m * 2 * f * 4);
	dact = kct_dev_copy(got, (size_t)m * f * 2);
	dref = kct_dev((size_t)m * f * 2);
	assert_int_equal((i8 ? o1_gemv_q8_cuda : o1_gemv_q_cuda)(
			     dgu, dx, (uint8_t *)dw + off, type, m, 2 * f, k,
			     2 * f, false, NULL),
			 0);
	assert_int_equal(o1_swiglu_cuda(dref, dgu, (float *)dgu + f, 2 * f, m,
					f, false, NULL),
			 0);
	assert_int_equal((i8 ? o1_gemv_q8_swiglu_cuda : o1_gemv_q_swiglu_cuda)(
			     dact, dx, (uint8_t *)dw + off, type, m, f, k, true,
			     NULL),
			 0);
	kct_get(want, dref, (size_t)m * f * 2);
	kct_get(got, dact, (size_t)m * f * 2);
	for (size_t i = 0; i < (size_t)m * f; i++)
		if (got[i] != want[i])
			fail_msg("%s swiglu m %u f %u k %u: element %zu %04x, "
				 "want %04x",
				 o1_quant_name(type), m, f, k, i, got[i],
				 want[i]);
	cudaFree(dw), cudaFree(dx), cudaFree(dgu), cudaFree(dact);
	cudaFree(dref);
	free(x), free(got), free(want), free(q);
}

/* Both paths, the weights 16-byte aligned. */
static void check_swiglu(enum o1_quant_type type, uint32_t m, uint32_t f,
			 uint32_t k)
{
	check_swiglu_at(type, m, f, k, false, 0);
	check_swiglu_at(type, m, f, k, true, 0);
}

static void test_swiglu(void **state)
{
	(void)state;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		check_swiglu(types[t], 1 + t % 4, 37, 512);
		check_swiglu(types[t], 4 - t % 4, 61, 256);
	}
	/* rows of several batches (the pair is walked batch by batch) */
	check_swiglu(O1_QUANT_Q4_K, 2, 19, 15360);
	check_swiglu(O1_QUANT_Q8_0, 1, 53, 8224);
	/* one input row on Q4_K (two rows a step, gemv_q.cu's qp_run2):
	 * whole and partial batches, the weights 4 bytes past alignment */
	check_swiglu(O1_QUANT_Q4_K, 1, 37, 4096);
	check_swiglu(O1_QUANT_Q4_K, 1, 19, 2560);
	check_swiglu_at(O1_QUANT_Q4_K, 1, 21, 2560, true, 4);
	/* Q5_0: several batches; rows alternating 2 and 0 mod 4, the
	 * weights 2 bytes past alignment */
	check_swiglu(O1_QUANT_Q5_0, 2, 19, 14496);
	check_swiglu_at(O1_QUANT_Q5_0, 3, 21, 288, true, 2);
	check_swiglu_at(O1_QUANT_Q5_0, 1, 21, 288, false, 6);
	if (kct_quick())
		return;
	check_swiglu(O1_QUANT_Q4_K, 1, 8192, 2048);
	check_swiglu(O1_QUANT_Q6_K, 3, 4864, 896 * 2);
}

static void test_bad_args(void **state)
{
	float *y = kct_dev(4096);
	uint16_t *x = kct_dev(4096);
	uint8_t *w = kct_dev(4096);

	(void)state;
	assert_int_equal(
	    o1_gemv_q_cuda(y, x, w, O1_QUANT_Q8_0, 5, 1, 32, 1, false, NULL),
	    -EINVAL);
	assert_int_equal(
	    o1_gemv_q_cuda(y, x, w, O1_QUANT_Q4_K, 1, 1, 128, 1, false, NULL),
	    -EINVAL);
	assert_int_equal(
	    o1_gemv_q_cuda(y, x, w, O1_QUANT_Q8_0, 1, 4, 32, 3, false, NULL),
	    -EINVAL);
	assert_int_equal(o1_gemv_q_cuda(y, x + 1, w, O1_QUANT_Q8_0, 1, 1, 32, 1,
					false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemv_q_cuda(y, x, w, (enum o1_quant_type)1, 1, 1,
					32, 1, false, NULL),
			 -EINVAL);
	assert_int_equal(
	    o1_gemv_q8_cuda(y, x, w, O1_QUANT_Q8_0, 5, 1, 32, 1, false, NULL),
	    -EINVAL);
	assert_int_equal(o1_gemv_q8_cuda(y, x + 1, w, O1_QUANT_Q8_0, 1, 1, 32,
					 1, false, NULL),
			 -EINVAL);
	/* a quantized input off its 16-byte alignment */
	assert_int_equal(o1_gemv_q8_add_cuda(y, x, w + 8, w, O1_QUANT_Q8_0, 1,
					     1, 32, 1, false, NULL),
			 -EINVAL);
	assert_int_equal(o1_gemv_q8_swiglu_cuda((uint16_t *)y, x, w,
						O1_QUANT_Q4_K, 1, 1, 100, false,
						NULL),
			 -EINVAL);
	assert_int_equal(
	    o1_gemv_q8_norm_cuda(y, (float *)x, NULL, (float *)x + 1, 0, w,
				 O1_QUANT_Q8_0, 1, 1, 32, 1, false, NULL),
	    -EINVAL);
	assert_int_equal(o1_gemv_q8_norm_cuda(y, (float *)x, NULL, (float *)x,
					      -1, w, O1_QUANT_Q8_0, 1, 1, 32, 1,
					      false, NULL),
			 -EINVAL);
	/* a part of the QKV rows that splits a head */
	{
		struct o1_rope_kv_args ra = {
		    y, x,    x, y, NULL, (int32_t *)x, (uint32_t *)x,
		    y, 1.0f, 1, 64};
		struct o1_attn_dims ad = {4, 2, 64, 16, 4 * 2 * 16 * 64, 1.0f};

		assert_int_equal(o1_gemv_q8_norm_rope_kv_cuda(
				     &ra, &ad, (float *)x, (float *)x, 1e-5f, w,
				     O1_QUANT_Q8_0, 32, 64, 32, false, NULL),
				 -EINVAL);
		assert_int_equal(o1_gemv_q8_norm_rope_kv_cuda(
				     &ra, &ad, (float *)x, (float *)x, 1e-5f, w,
				     O1_QUANT_Q8_0, 448, 128, 32, false, NULL),
				 -EINVAL);
		assert_int_equal(o1_gemv_q8_norm_rope_kv_parts_cuda(
				     &ra, &ad, (float *)x, (float *)x, 1e-5f,
				     NULL, 0, 32, false, NULL),
				 -EINVAL);
		ra.n_tokens = 5;
		assert_int_equal(o1_gemv_q8_norm_rope_kv_cuda(
				     &ra, &ad, (float *)x, (float *)x, 1e-5f, w,
				     O1_QUANT_Q8_0, 0, 64, 32, false, NULL),
				 -EINVAL);
	}
	/* beyond the shared memory of the fused variants */
	assert_int_equal(o1_gemv_q8_add_cuda(y, x, NULL, w, O1_QUANT_Q8_0, 4, 1,
					     32768, 1, false, NULL),
			 -EINVAL);
	assert_int_equal(
	    o1_quant_dequantize_cuda(O1_QUANT_Q6_K, w, y, 100, NULL), -EINVAL);
	assert_int_equal(
	    o1_quant_dequantize_cuda(O1_QUANT_Q8_0, w + 1, y, 32, NULL),
	    -EINVAL);
	assert_int_equal(
	    o1_quant_dequantize_cuda(O1_QUANT_Q4_K, w + 2, y, 256, NULL),
	    -EINVAL);
	assert_int_equal(o1_embedding_q_cuda(y, w, O1_QUANT_Q4_K, (int32_t *)x,
					     1, 128, 4, NULL),
			 -EINVAL);
	/* Q5_0: part of a block, blocks at an odd address */
	assert_int_equal(
	    o1_quant_dequantize_cuda(O1_QUANT_Q5_0, w, y, 48, NULL), -EINVAL);
	assert_int_equal(
	    o1_quant_dequantize_bf16_cuda(O1_QUANT_Q5_0, w + 1, x, 32, NULL),
	    -EINVAL);
	assert_int_equal(o1_embedding_q_cuda(y, w, O1_QUANT_Q5_0, (int32_t *)x,
					     1, 48, 4, NULL),
			 -EINVAL);
	assert_int_equal(
	    o1_gemv_q_cuda(y, x, w + 1, O1_QUANT_Q5_0, 1, 1, 32, 1, false, NULL),
	    -EINVAL);
	assert_int_equal(o1_gemv_q8_cuda(y, x, w, O1_QUANT_Q5_0, 1, 1, 48, 1,
					 false, NULL),
			 -EINVAL);
	cudaFree(y), cudaFree(x), cudaFree(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dequant_vectors),
	    cmocka_unit_test(test_dequant_random),
	    cmocka_unit_test(test_embedding),
	    cmocka_unit_test(test_gemv),
	    cmocka_unit_test(test_gemv_q8),
	    cmocka_unit_test(test_gemv_q8_vectors),
	    cmocka_unit_test(test_fused_q8),
	    cmocka_unit_test(test_rope_kv_q8),
	    cmocka_unit_test(test_swiglu),
	    cmocka_unit_test(test_bad_args),
	};

	return kct_main("test_quant_cuda", tests,
			sizeof(tests) / sizeof(tests[0]));
}

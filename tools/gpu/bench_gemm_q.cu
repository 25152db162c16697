/* bench_gemm_q: the products over more rows than decode on GGUF block
 * weights, at llama3-8b's MLP shapes (gate/up 4096 -> 14336, down
 * 14336 -> 4096), beside cuBLAS on the same shape in bf16:
 *
 *   bench_gemm_q [--iters N] [--types q8_0,q4_0,q4_k,q6_k]
 *
 * For M = 16, 64, 256 and 2048 input rows and each type:
 *   mma    gemm_q.cu's tensor-core kernel (o1_gemm_q_cuda: the CUDA
 *          backend's path for M > O1_GEMV_MAX_ROWS), with the token tile
 *          width it picks, then forced to 64 and to 128 (mma64, mma128:
 *          the lab for gemm_q.cu's gq_width);
 *   tiles  the fallback: the whole matrix dequantized to bf16
 *          (o1_quant_dequantize_bf16_cuda) then cublasGemmEx;
 *   bf16   cublasGemmEx on a bf16 matrix of the same shape (the bf16
 *          model's product, the speed to reach).
 * Each: the mean over ITERS launches (default 20) after 3 warm-up ones,
 * timed with events; TFLOP/s counts 2 M N K, GB/s the weight bytes (the
 * block bytes for mma and tiles, 2 N K for bf16). The weights are 64
 * rows quantized from random values, repeated over N (their speed does
 * not depend on the values). One line per (shape, M, type):
 *   RESULT shape=gu|down m=M type=T bn=64|128 mma_us=.. mma_tflops=..
 *          mma_gbs=.. mma64_us=.. mma128_us=.. tiles_us=.. bf16_us=..
 *          bf16_tflops=.. bf16_gbs=..
 * This file includes gemm_q.cu to reach its launch by width (it does not
 * link the library's copy).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/gemm_q.cu"

#define WARMUP 3
#define SEED_ROWS 64

struct shape {
	const char *name;
	uint32_t n, k;
};

static const struct shape shapes[] = {{"gu", 14336, 4096},
				      {"down", 4096, 14336}};
static const uint32_t ms[] = {16, 64, 256, 2048};
static const struct {
	const char *name;
	enum o1_quant_type type;
} types[] = {{"q8_0", O1_QUANT_Q8_0},
	     {"q4_0", O1_QUANT_Q4_0},
	     {"q4_k", O1_QUANT_Q4_K},
	     {"q6_k", O1_QUANT_Q6_K}};

struct bufs {
	void *w;	  /* block weights, N rows */
	uint16_t *wb, *x; /* bf16 weights (N, K), inputs (M max, K) */
	float *y;
	cublasHandle_t blas;
	cudaEvent_t t0, t1;
};

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float frand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static int check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "bench_gemm_q: %s: %s\n", what, cudaGetErrorString(e));
	return -EIO;
}

/* The block bytes of N rows of K of TYPE on the device at B->w: SEED_ROWS
 * rows quantized from uniform values, repeated. */
static int put_weights(struct bufs *b, enum o1_quant_type type, uint32_t n,
		       uint32_t k, uint64_t *bytes)
{
	uint64_t rb = 0;
	float *f = (float *)malloc((size_t)SEED_ROWS * k * sizeof(float));
	uint8_t *q = NULL;
	int err = -ENOMEM;

	if (o1_quant_row_bytes(type, k, &rb) || !f)
		goto out;
	q = (uint8_t *)malloc(rb * SEED_ROWS);
	if (!q)
		goto out;
	for (size_t i = 0; i < (size_t)SEED_ROWS * k; i++)
		f[i] = frand();
	if (o1_quant_quantize(type, f, q, (uint64_t)SEED_ROWS * k))
		goto out;
	err = 0;
	for (uint32_t r = 0; !err && r < n; r += SEED_ROWS)
		err = check(cudaMemcpy((uint8_t *)b->w + r * rb, q,
				       rb * (n - r < SEED_ROWS ? n - r
							       : SEED_ROWS),
				       cudaMemcpyHostToDevice),
			    "weights");
	*bytes = rb * n;
out:
	free(f), free(q);
	return err;
}

static int bf16_gemm(struct bufs *b, const uint16_t *w, uint32_t m,
		     uint32_t n, uint32_t k)
{
	const float one = 1.0f, zero = 0.0f;

	return cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m,
			    (int)k, &one, w, CUDA_R_16BF, (int)k, b->x,
			    CUDA_R_16BF, (int)k, &zero, b->y, CUDA_R_32F,
			    (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
		       ? -EIO
		       : 0;
}

enum way { MMA, MMA64, MMA128, TILES, BF16 };

static int run_one(struct bufs *b, enum way way, enum o1_quant_type type,
		   uint32_t m, uint32_t n, uint32_t k)
{
	int err;

	switch (way) {
	case MMA:
		return o1_gemm_q_cuda(b->y, b->x, b->w, type, m, n, k, n, false,
				      NULL);
	case MMA64:
	case MMA128:
		return gq_dispatch(way == MMA64 ? 64 : 128, b->y, b->x, b->w,
				   type, m, n, k, n, false, NULL);
	case TILES:
		err = o1_quant_dequantize_bf16_cuda(type, b->w, b->wb,
						    (uint64_t)n * k, NULL);
		return err ? err : bf16_gemm(b, b->wb, m, n, k);
	default:
		return bf16_gemm(b, b->wb, m, n, k);
	}
}

/* Mean microseconds of one product, or a negative value on an error. */
static double time_way(struct bufs *b, enum way way, enum o1_quant_type type,
		       uint32_t m, uint32_t n, uint32_t k, int iters)
{
	float ms_total = 0;
	int err = 0;

	for (int i = 0; !err && i < WARMUP; i++)
		err = run_one(b, way, type, m, n, k);
	err = err ? err : check(cudaEventRecord(b->t0, NULL), "event");
	for (int i = 0; !err && i < iters; i++)
		err = run_one(b, way, type, m, n, k);
	err = err ? err : check(cudaEventRecord(b->t1, NULL), "event");
	err = err ? err : check(cudaEventSynchronize(b->t1), "sync");
	err = err ? err
		  : check(cudaEventElapsedTime(&ms_total, b->t0, b->t1),
			  "elapsed");
	return err ? -1.0 : ms_total * 1e3 / iters;
}

static int bench_shape(struct bufs *b, const struct shape *s, unsigned mask,
		       int iters)
{
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		uint64_t bytes = 0;
		int err;

		if (!(mask & (1u << t)))
			continue;
		err = put_weights(b, types[t].type, s->n, s->k, &bytes);
		if (err)
			return err;
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
			uint32_t m = ms[i];
			double fl = 2.0 * m * s->n * s->k;
			double mma = time_way(b, MMA, types[t].type, m, s->n,
					      s->k, iters);
			double m64 = time_way(b, MMA64, types[t].type, m,
					      s->n, s->k, iters);
			double m128 = time_way(b, MMA128, types[t].type, m,
					       s->n, s->k, iters);
			double tiles = time_way(b, TILES, types[t].type, m,
						s->n, s->k, iters);
			double bf = time_way(b, BF16, types[t].type, m, s->n,
					     s->k, iters);

			if (mma < 0 || m64 < 0 || m128 < 0 || tiles < 0 ||
			    bf < 0)
				return -EIO;
			printf("RESULT shape=%s m=%u type=%s bn=%d mma_us=%.1f "
			       "mma_tflops=%.1f mma_gbs=%.0f mma64_us=%.1f "
			       "mma128_us=%.1f tiles_us=%.1f bf16_us=%.1f "
			       "bf16_tflops=%.1f bf16_gbs=%.0f\n",
			       s->name, m, types[t].name, gq_width(m, s->n),
			       mma, fl / mma / 1e6, bytes / mma / 1e3, m64,
			       m128, tiles, bf, fl / bf / 1e6,
			       2.0 * s->n * s->k / bf / 1e3);
			fflush(stdout);
		}
	}
	return 0;
}

static unsigned parse_types(const char *list)
{
	unsigned mask = 0;

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		if (strstr(list, types[t].name))
			mask |= 1u << t;
	return mask;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"iters", required_argument, NULL, 'i'},
	    {"types", required_argument, NULL, 't'},
	    {NULL, 0, NULL, 0},
	};
	struct bufs b = {};
	size_t most = (size_t)14336 * 4096;
	unsigned mask = 0xf;
	int iters = 20, opt, err = 0;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 'i' && atoi(optarg) > 0) {
			iters = atoi(optarg);
		} else if (opt == 't' && parse_types(optarg)) {
			mask = parse_types(optarg);
		} else {
			fprintf(stderr, "usage: bench_gemm_q [--iters N] "
					"[--types q8_0,q4_0,q4_k,q6_k]\n");
			return 2;
		}
	}
	if (check(cudaMalloc(&b.w, most * 2), "malloc") ||
	    check(cudaMalloc((void **)&b.wb, most * 2), "malloc") ||
	    check(cudaMalloc((void **)&b.x, (size_t)2048 * 14336 * 2),
		  "malloc") ||
	    check(cudaMalloc((void **)&b.y, (size_t)2048 * 14336 * 4),
		  "malloc") ||
	    check(cudaMemset(b.x, 0x3c, (size_t)2048 * 14336 * 2), "memset") ||
	    check(cudaMemset(b.wb, 0x3c, most * 2), "memset") ||
	    check(cudaEventCreate(&b.t0), "event") ||
	    check(cudaEventCreate(&b.t1), "event") ||
	    cublasCreate(&b.blas) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "bench_gemm_q: no device or out of memory\n");
		return 1;
	}
	for (size_t s = 0; !err && s < sizeof(shapes) / sizeof(shapes[0]); s++)
		err = bench_shape(&b, &shapes[s], mask, iters);
	cublasDestroy(b.blas);
	cudaFree(b.w), cudaFree(b.wb), cudaFree(b.x), cudaFree(b.y);
	if (err)
		fprintf(stderr, "bench_gemm_q: failed (%d)\n", err);
	return err ? 1 : 0;
}

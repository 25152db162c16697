/* bench_matmul: the engine's deterministic GEMM (kernels/matmul.h) beside
 * OpenBLAS cblas_sgemm on the qwen2.5-0.5b projection shapes, and whether
 * OpenBLAS gives a row the same bits whatever M (the property the engine
 * needs for batching-invariant logits).
 *
 *   bench_matmul [--threads N]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/matmul.h"
#include "kernels/threads.h"

void openblas_set_num_threads(int n);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *randv(size_t n, uint64_t seed)
{
	float *v = malloc(n * sizeof(float));

	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		v[i] = (float)((seed >> 40) / (double)(1 << 24)) - 0.5f;
	}
	return v;
}

static void blas(float *y, const float *x, const float *w, int m, int n, int k)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x,
		    k, w, k, 0.0f, y, n);
}

/* Best-of-3 seconds for one product of each kind. */
static void time_shape(struct o1_threads *tp, int m, int n, int k)
{
	float *x = randv((size_t)m * k, 1), *w = randv((size_t)n * k, 2);
	float *y = malloc((size_t)m * n * sizeof(float));
	double best_o1 = 1e9, best_blas = 1e9, t;

	for (int r = 0; r < 3; r++) {
		t = now_s();
		o1_matmul_cpu(tp, y, x, w, NULL, m, n, k);
		t = now_s() - t;
		best_o1 = t < best_o1 ? t : best_o1;
		t = now_s();
		blas(y, x, w, m, n, k);
		t = now_s() - t;
		best_blas = t < best_blas ? t : best_blas;
	}
	printf("M %4d N %6d K %4d: o1 %8.2f ms %6.1f GFLOP/s | openblas %8.2f "
	       "ms %6.1f GFLOP/s\n",
	       m, n, k, best_o1 * 1e3, 2.0 * m * n * k / best_o1 / 1e9,
	       best_blas * 1e3, 2.0 * m * n * k / best_blas / 1e9);
	free(x), free(w), free(y);
}

/* Rows of an M-row product compared with each row computed alone. */
static int rows_differing(int m, int n, int k)
{
	float *x = randv((size_t)m * k, 3), *w = randv((size_t)n * k, 4);
	float *all = malloc((size_t)m * n * sizeof(float));
	float *one = malloc((size_t)n * sizeof(float));
	int diff = 0;

	blas(all, x, w, m, n, k);
	for (int r = 0; r < m; r++) {
		blas(one, x + (size_t)r * k, w, 1, n, k);
		diff +=
		    memcmp(one, all + (size_t)r * n, n * sizeof(float)) != 0;
	}
	free(x), free(w), free(all), free(one);
	return diff;
}

int main(int argc, char **argv)
{
	static const int shapes[][3] = {
	    {1, 896, 896},   {1, 4864, 896},  {1, 151936, 896}, {64, 896, 896},
	    {64, 4864, 896}, {64, 896, 4864}, {256, 4864, 896},
	};
	int threads =
	    argc == 3 && !strcmp(argv[1], "--threads") ? atoi(argv[2]) : 2;
	struct o1_threads *tp;

	if (threads < 1 || o1_threads_create((uint32_t)threads, &tp))
		return 2;
	openblas_set_num_threads(threads);
	printf("%d threads\n", threads);
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		time_shape(tp, shapes[i][0], shapes[i][1], shapes[i][2]);
	for (int m = 2; m <= 64; m *= 4)
		printf("openblas: %d of %d rows differ from the row computed "
		       "alone (N 896, K 896)\n",
		       rows_differing(m, 896, 896), m);
	o1_threads_destroy(tp);
	return 0;
}

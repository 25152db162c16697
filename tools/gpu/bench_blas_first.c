/* bench_blas_first: what the first cublasGemmEx call of a new row count
 * costs, against the second (issue 17 item 5: on the H200 about one mixed
 * step in 35 took 4-16 ms instead of ~1.6, and 29 of the 30 were the
 * first step of their token count, i.e. the first cuBLAS products of
 * that M).
 *
 *   bench_blas_first [--from M] [--to M] [--step S] [--dim D] [--ffn F]
 *                    [--qkv N] [--vocab V]
 *
 * The CUDA backend's eager products as cuda_forward.c's gemm() makes them
 * (bf16 x and W, f32 y and compute, CUBLAS_GEMM_DEFAULT, a 32 MiB
 * workspace set on the handle, a non-blocking stream), at llama3-8b's
 * shapes by default: for each M from FROM to TO (step S), the QKV, O,
 * gate/up and down products over M rows and the LM head over
 * min(M, 64) rows, called twice. Each call is timed on the host (the
 * enqueue: heuristics, module loading) and to the end of a stream
 * synchronize. One line per M: enqueue and total of the first round and
 * of the second, in us; "SLOW" when the first total exceeds 3x the
 * second plus 1 ms. Then a summary. The weights are zero: only time is
 * measured. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#define WS_BYTES  (32u << 20)
#define HEAD_ROWS 64
#define KINDS	  5

struct args {
	uint32_t from, to, step, dim, ffn, qkv, vocab;
};

struct shape {
	const char *name;
	uint32_t n, k;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "bench_blas_first: %s: %s\n", what,
		cudaGetErrorString(e));
	return -1;
}

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
	    {"from", required_argument, 0, 'f'},
	    {"to", required_argument, 0, 't'},
	    {"step", required_argument, 0, 's'},
	    {"dim", required_argument, 0, 'd'},
	    {"ffn", required_argument, 0, 'F'},
	    {"qkv", required_argument, 0, 'q'},
	    {"vocab", required_argument, 0, 'v'},
	    {0, 0, 0, 0}};
	int c;

	*a = (struct args){5, 512, 1, 4096, 14336, 6144, 128256};
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;
		unsigned long v;
		uint32_t *dst = c == 'f'   ? &a->from
				: c == 't' ? &a->to
				: c == 's' ? &a->step
				: c == 'd' ? &a->dim
				: c == 'F' ? &a->ffn
				: c == 'q' ? &a->qkv
				: c == 'v' ? &a->vocab
					   : NULL;

		if (!dst)
			return -1;
		errno = 0;
		v = strtoul(optarg, &end, 10);
		if (errno || end == optarg || *end || !v || v > 1u << 20) {
			fprintf(stderr, "bench_blas_first: bad value '%s'\n",
				optarg);
			return -1;
		}
		*dst = (uint32_t)v;
	}
	if (a->from > a->to) {
		fprintf(stderr, "bench_blas_first: --from above --to\n");
		return -1;
	}
	return 0;
}

/* One product: y (m, n) = x (m, k) . w (n, k)^T, as gemm() calls it;
 * the enqueue and the total (to the end of a synchronize) into US. */
static int product(cublasHandle_t h, cudaStream_t st, float *y, const void *x,
		   const void *w, uint32_t m, uint32_t n, uint32_t k,
		   double us[2])
{
	const float one = 1.0f, zero = 0.0f;
	uint64_t t0 = now_ns(), t1;
	cublasStatus_t s = cublasGemmEx(
	    h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, w,
	    CUDA_R_16BF, (int)k, x, CUDA_R_16BF, (int)k, &zero, y, CUDA_R_32F,
	    (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);

	t1 = now_ns();
	if (s != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "bench_blas_first: gemm %ux%ux%u: %s\n", m, n,
			k, cublasGetStatusString(s));
		return -1;
	}
	if (check(cudaStreamSynchronize(st), "synchronize"))
		return -1;
	us[0] += (double)(t1 - t0) / 1e3;
	us[1] += (double)(now_ns() - t0) / 1e3;
	return 0;
}

/* A step's products over M rows, twice: US[round][enqueue, total]. */
static int round_of(cublasHandle_t h, cudaStream_t st, float *y, const void *x,
		    void *const w[KINDS], const struct shape sh[KINDS],
		    uint32_t m, double us[2][2])
{
	memset(us, 0, 4 * sizeof(double));
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < KINDS; i++) {
			uint32_t rows =
			    i == KINDS - 1 && m > HEAD_ROWS ? HEAD_ROWS : m;

			if (product(h, st, y, x, w[i], rows, sh[i].n, sh[i].k,
				    us[r]))
				return -1;
		}
	return 0;
}

static int run(const struct args *a, cublasHandle_t h, cudaStream_t st,
	       float *y, const void *x, void *const w[KINDS],
	       const struct shape sh[KINDS])
{
	uint32_t n = 0, slow = 0;
	double worst = 0, extra = 0;

	printf("# M: first round enqueue / total, second round enqueue / "
	       "total (us)\n");
	for (uint32_t m = a->from; m <= a->to; m += a->step) {
		double us[2][2];
		bool is_slow;

		if (round_of(h, st, y, x, w, sh, m, us))
			return -1;
		is_slow = us[0][1] > 3 * us[1][1] + 1000;
		printf("%u: %.0f / %.0f, %.0f / %.0f%s\n", m, us[0][0],
		       us[0][1], us[1][0], us[1][1], is_slow ? " SLOW" : "");
		n++;
		slow += is_slow;
		if (us[0][1] - us[1][1] > worst)
			worst = us[0][1] - us[1][1];
		extra += us[0][1] - us[1][1];
	}
	printf("# %u row counts, %u slow on first use (> 3x the second + 1 "
	       "ms); first minus second: mean %.0f us, worst %.0f us\n",
	       n, slow, n ? extra / n : 0.0, worst);
	return 0;
}

int main(int argc, char **argv)
{
	struct args a;
	struct shape sh[KINDS];
	cublasHandle_t h = NULL;
	cudaStream_t st = NULL;
	void *w[KINDS] = {0}, *x = NULL, *ws = NULL;
	float *y = NULL;
	uint32_t kmax, nmax;
	int rc = 1;

	if (parse(argc, argv, &a))
		return 2;
	sh[0] = (struct shape){"qkv", a.qkv, a.dim};
	sh[1] = (struct shape){"o", a.dim, a.dim};
	sh[2] = (struct shape){"gate/up", 2 * a.ffn, a.dim};
	sh[3] = (struct shape){"down", a.dim, a.ffn};
	sh[4] = (struct shape){"head", a.vocab, a.dim};
	kmax = a.ffn > a.dim ? a.ffn : a.dim;
	nmax = 2 * a.ffn > a.qkv ? 2 * a.ffn : a.qkv;
	for (int i = 0; i < KINDS; i++)
		if (check(cudaMalloc(&w[i], (size_t)sh[i].n * sh[i].k * 2),
			  "weights") ||
		    check(cudaMemset(w[i], 0, (size_t)sh[i].n * sh[i].k * 2),
			  "weights"))
			goto out;
	if (check(cudaMalloc(&x, (size_t)a.to * kmax * 2), "x") ||
	    check(cudaMemset(x, 0, (size_t)a.to * kmax * 2), "x") ||
	    check(cudaMalloc(
		      (void **)&y,
		      (size_t)(a.to * (size_t)nmax > (size_t)HEAD_ROWS * a.vocab
				   ? a.to * (size_t)nmax
				   : (size_t)HEAD_ROWS * a.vocab) *
			  4),
		  "y") ||
	    check(cudaMalloc(&ws, WS_BYTES), "workspace") ||
	    check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking),
		  "stream"))
		goto out;
	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS ||
	    cublasSetStream(h, st) != CUBLAS_STATUS_SUCCESS ||
	    cublasSetWorkspace(h, ws, WS_BYTES) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "bench_blas_first: cuBLAS setup failed\n");
		goto out;
	}
	printf("# products qkv %ux%u, o %ux%u, gate/up %ux%u, down %ux%u, "
	       "head %ux%u (over min(M, %u) rows), M %u..%u step %u\n",
	       sh[0].n, sh[0].k, sh[1].n, sh[1].k, sh[2].n, sh[2].k, sh[3].n,
	       sh[3].k, sh[4].n, sh[4].k, HEAD_ROWS, a.from, a.to, a.step);
	rc = run(&a, h, st, y, x, w, sh) ? 1 : 0;
out:
	if (h)
		cublasDestroy(h);
	if (st)
		cudaStreamDestroy(st);
	for (int i = 0; i < KINDS; i++)
		cudaFree(w[i]);
	cudaFree(x);
	cudaFree(y);
	cudaFree(ws);
	return rc;
}

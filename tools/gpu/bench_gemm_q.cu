/* bench_gemm_q: the products over more rows than decode on GGUF block
 * weights, at llama3-8b's shapes, beside cuBLAS on the same shape in
 * bf16:
 *
 *   bench_gemm_q [--iters N] [--types q8_0,q4_0,q4_k,q6_k,q5_0]
 *                [--shapes qkv,o,gu,down,head] [--rows M] [--sweep]
 *
 * Shapes (N outputs x K): qkv 6144 x 4096, o 4096 x 4096, gu 28672 x 4096
 * (gate and up together), down 4096 x 14336, head 128256 x 4096; default
 * types q8_0,q4_k,q6_k, every shape. For M = 16, 64, 128, 256, 512 and
 * 2048 input rows (--rows M: that one alone, 1 to 2048; a profiler's run
 * of one shape):
 *   tiles  the fallback: the whole matrix dequantized to bf16
 *          (o1_quant_dequantize_bf16_cuda) then cublasGemmEx;
 *   mma    gemm_q.cu's tensor-core kernel (o1_gemm_q_cuda);
 *   qp     gemm_qp.cu's pipelined kernel (o1_gemm_qp_cuda) with the tiles
 *          and split it picks (shown as plan=BMxBN/splits);
 *   i8     gemm_qi8.cu's int8 tensor-core product, its input's
 *          quantization (o1_gemm_qi8_quantize_cuda) included;
 *   wg     gemm_qw.cu's wgmma product (the weights decoded in
 *          registers by bf16x2 arithmetic; sm_90a builds), K in the
 *          parts it picks as the backend's (o1_gemm_qw_split_cuda;
 *          --wg-splits N asks for N, 1 for K whole; --wg-sweep
 *          times 128 and 256 tokens a block by 1-8 parts, shown as
 *          wg_sweep=BN/S:us,...);
 *   bf16   cublasGemmEx on a bf16 matrix of the same shape (the bf16
 *          model's product, the speed to reach);
 *   with --sweep, qp forced to each plan (BM 64/128 x BN 32/64/128/256
 *          x split 1/2), the best shown as best=.. (the lab for
 *          gp_pick), sweep_rel_max the worst qp_rel of them all.
 * Each: the mean over ITERS launches (default 20) after 3 warm-up ones,
 * timed with events, the launches queued behind a kernel that holds the
 * GPU while the host issues them (the host's cost a launch, with
 * gemm_qw's two tensor maps encoded, never counted: the daemon's decode
 * steps replay CUDA graphs);
 * TFLOP/s counts 2 M N K. qp_rel is the relative L2
 * distance of qp's first rows (up to 16) to the tiles' (both are the same
 * bf16 products summed in f32: ~1e-6; 1e-3 or more is a bug). The
 * weights are 64 rows quantized from random values, repeated over N, x
 * random. One line per (shape, M, type):
 *   RESULT shape=S m=M type=T tiles_us=.. tiles_tflops=.. mma_us=..
 *          mma_tflops=.. qp_us=.. qp_tflops=.. plan=.. bf16_us=..
 *          bf16_tflops=.. qp_vs_tiles=.. qp_vs_bf16=.. qp_rel=..
 *          i8_us=.. i8_tflops=.. i8_plan=.. i8_vs_tiles=.. i8_vs_bf16=..
 *          i8_rel=.. wg_us=.. wg_tflops=.. wg_vs_tiles=.. wg_vs_bf16=..
 *          wg_rel=.. [wg_plan=128xBN/S] [best=PLAN best_us=..
 *          sweep_rel_max=..]
 * (qp_vs_tiles > 1: qp is faster than the tiles; i8_rel, the int8
 * inputs' error, ~1e-3 to 1e-2; wg_rel, its values' own rounding from
 * bf16 scales, ~2e-3 on the H200). --ways LIST (tiles,mma,qp,i8,wg,bf16;
 * default all) times only those (the others' figures are -1; qp_rel and
 * i8_rel need tiles). This file includes gemm_q.cu, gemm_qp.cu,
 * gemm_qi8.cu and gemm_qw.cu to reach their launches by plan (it does not
 * link the library's copies: an A/B variant of one of them recompiles
 * this file, tools/gpu/session.sh's s_object_variant OBJSRC).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/gemm_q.cu"
#include "kernels/gemm_qp.cu"
#include "kernels/gemm_qi8.cu"
#include "kernels/gemm_qw.cu"

#define WARMUP 3
#define SEED_ROWS 64

struct shape {
	const char *name;
	uint32_t n, k;
};

static const struct shape shapes[] = {{"qkv", 6144, 4096},
				      {"o", 4096, 4096},
				      {"gu", 28672, 4096},
				      {"down", 4096, 14336},
				      {"head", 128256, 4096}};
static const uint32_t ms[] = {16, 64, 128, 256, 512, 2048};
#define MOST_NK ((size_t)128256 * 4096)
#define MOST_M	2048
#define MOST_K	14336
#define CHECK_ROWS 16
static const struct {
	const char *name;
	enum o1_quant_type type;
} types[] = {{"q8_0", O1_QUANT_Q8_0},
	     {"q4_0", O1_QUANT_Q4_0},
	     {"q4_k", O1_QUANT_Q4_K},
	     {"q6_k", O1_QUANT_Q6_K},
	     {"q5_0", O1_QUANT_Q5_0}};

struct bufs {
	void *w;	  /* block weights, N rows */
	uint16_t *wb, *x; /* bf16 weights (N, K), inputs (M max, K) */
	float *y;
	void *scratch; /* gemm_qi8's quantized input */
	struct o1_gemm_qw_split split; /* gemm_qw's parts of K */
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

enum way { MMA, QP, QP_PLAN, TILES, BF16, I8, WG, WG_PLAN };

/* gemm_qw forced to PLAN's tokens a block (bn: 128 or 256) and parts of K
 * (splits), the scratch B's (--wg-sweep). */
static int wg_plan_run(struct bufs *b, gp_plan plan, enum o1_quant_type type,
		       uint32_t m, uint32_t n, uint32_t k)
{
	qw_args a;
	uint64_t rb = 0;

	memset(&a, 0, sizeof a);
	a.y = b->y, a.m = m, a.n = n, a.k = k, a.ldy = n;
	a.splits = plan.splits, a.part = b->split.part;
	a.count = b->split.count;
	if (!o1_gemm_qw_fits(type, n, k, b->w) ||
	    o1_quant_row_bytes(type, k, &rb) || a.splits > k / QW_SK ||
	    (uint64_t)qw_tiles(m, n, plan.bn) * a.splits * QW_BM * plan.bn *
		    4 >
		b->split.part_bytes)
		return -EINVAL;
#define WG_PLAN_RUN(T)                                                         \
	(plan.bn == 256 ? qw_launch<T, 256>(a, b->x, b->w, rb, false, NULL)    \
			: qw_launch<T, 128>(a, b->x, b->w, rb, false, NULL))
	switch (type) {
	case O1_QUANT_Q8_0:
		return WG_PLAN_RUN(O1_QUANT_Q8_0);
	case O1_QUANT_Q4_0:
		return WG_PLAN_RUN(O1_QUANT_Q4_0);
	case O1_QUANT_Q5_0:
		return WG_PLAN_RUN(O1_QUANT_Q5_0);
	case O1_QUANT_Q4_K:
		return WG_PLAN_RUN(O1_QUANT_Q4_K);
	default:
		return WG_PLAN_RUN(O1_QUANT_Q6_K);
	}
#undef WG_PLAN_RUN
}

static int run_one(struct bufs *b, enum way way, gp_plan plan,
		   enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k)
{
	int err;

	switch (way) {
	case MMA:
		return o1_gemm_q_cuda(b->y, b->x, b->w, type, m, n, k, n, false,
				      NULL);
	case QP:
		return o1_gemm_qp_cuda(b->y, b->x, b->w, type, m, n, k, n,
				       false, NULL);
	case QP_PLAN:
		return gp_dispatch(plan, b->y, b->x, b->w, type, m, n, k, n,
				   false, NULL);
	case I8:
		err = o1_gemm_qi8_quantize_cuda(b->scratch, b->x, m, k, false,
						NULL);
		return err ? err
			   : o1_gemm_qi8_cuda(b->y, b->scratch, b->w, type, m,
					      n, k, n, false, NULL);
	case WG:
		return o1_gemm_qw_split_cuda(b->y, b->x, b->w, type, m, n, k,
					     n, &b->split, false, NULL);
	case WG_PLAN:
		return wg_plan_run(b, plan, type, m, n, k);
	case TILES:
		err = o1_quant_dequantize_bf16_cuda(type, b->w, b->wb,
						    (uint64_t)n * k, NULL);
		return err ? err : bf16_gemm(b, b->wb, m, n, k);
	default:
		return bf16_gemm(b, b->wb, m, n, k);
	}
}

/* Holds the GPU for NS nanoseconds (the launches after it queue up). */
static __global__ void hold_gpu(uint64_t ns)
{
	uint64_t t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
}

/* Mean microseconds of one product, or a negative value on an error. */
static double time_way(struct bufs *b, enum way way, gp_plan plan,
		       enum o1_quant_type type, uint32_t m, uint32_t n,
		       uint32_t k, int iters)
{
	float ms_total = 0;
	int err = 0;

	for (int i = 0; !err && i < WARMUP; i++)
		err = run_one(b, way, plan, type, m, n, k);
	/* 200 us of host time a launch (ITERS <= 500: at most 1,000
	 * launches queued, the tiles' two a product) */
	hold_gpu<<<1, 1>>>(200000ull * (uint64_t)iters);
	err = err ? err : check(cudaGetLastError(), "hold");
	err = err ? err : check(cudaEventRecord(b->t0, NULL), "event");
	for (int i = 0; !err && i < iters; i++)
		err = run_one(b, way, plan, type, m, n, k);
	err = err ? err : check(cudaEventRecord(b->t1, NULL), "event");
	err = err ? err : check(cudaEventSynchronize(b->t1), "sync");
	err = err ? err
		  : check(cudaEventElapsedTime(&ms_total, b->t0, b->t1),
			  "elapsed");
	return err ? -1.0 : ms_total * 1e3 / iters;
}

/* The first rows of y (up to CHECK_ROWS of N) after one run of WAY, into
 * OUT. */
static int rows_of(struct bufs *b, enum way way, gp_plan plan,
		   enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		   float *out)
{
	uint32_t r = m < CHECK_ROWS ? m : CHECK_ROWS;
	int err = check(cudaMemset(b->y, 0xff, (size_t)r * n * 4), "memset");

	err = err ? err : run_one(b, way, plan, type, m, n, k);
	err = err ? err : check(cudaDeviceSynchronize(), "sync");
	return err ? err
		   : check(cudaMemcpy(out, b->y, (size_t)r * n * 4,
				      cudaMemcpyDeviceToHost),
			   "copy");
}

/* Relative L2 distance of the first rows of qp (WAY QP, or QP_PLAN with
 * PLAN) to the tiles'. */
static double qp_rel(struct bufs *b, enum way way, gp_plan plan,
		     enum o1_quant_type type, uint32_t m, uint32_t n,
		     uint32_t k)
{
	size_t cnt = (size_t)(m < CHECK_ROWS ? m : CHECK_ROWS) * n;
	float *t = (float *)malloc(cnt * 4), *q = (float *)malloc(cnt * 4);
	double d = 0, r = 0;

	if (!t || !q || rows_of(b, TILES, plan, type, m, n, k, t) ||
	    rows_of(b, way, plan, type, m, n, k, q)) {
		free(t), free(q);
		return -1.0;
	}
	for (size_t i = 0; i < cnt; i++)
		d += ((double)q[i] - t[i]) * ((double)q[i] - t[i]),
		    r += (double)t[i] * t[i];
	free(t), free(q);
	return r > 0 ? sqrt(d / r) : (d > 0 ? 1.0 : 0.0);
}

/* With --wg-sweep: gemm_qw at 128 and 256 tokens a block by 1, 2, 3, 4,
 * 6 and 8 parts of K (those the scratch holds), " wg_sweep=BN/S:us,..."
 * printed. */
static int wg_sweep(struct bufs *b, enum o1_quant_type type, uint32_t m,
		    uint32_t n, uint32_t k, int iters)
{
	static const uint32_t bns[] = {128, 256}, parts[] = {1, 2, 3, 4, 6, 8};
	const char *sep = " wg_sweep=";

	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 6; j++) {
			gp_plan p = {0, (int)bns[i], parts[j]};
			double us;

			if (wg_plan_run(b, p, type, m, n, k) == -EINVAL)
				continue;
			us = time_way(b, WG_PLAN, p, type, m, n, k, iters);
			if (us < 0)
				return -EIO;
			printf("%s%u/%u:%.1f", sep, bns[i], parts[j], us);
			sep = ",";
		}
	return 0;
}

/* With --sweep: the fastest forced plan's time into *BEST_US, the worst
 * qp_rel of them all into *WORST. */
static int sweep(struct bufs *b, enum o1_quant_type type, uint32_t m,
		 uint32_t n, uint32_t k, int iters, gp_plan *best,
		 double *best_us, double *worst)
{
	static const int bms[] = {64, 128}, bns[] = {32, 64, 128, 256};

	*best_us = 1e30, *worst = 0;
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 4; j++)
			for (uint32_t sp = 1; sp <= 2; sp++) {
				gp_plan p = {bms[i], bns[j], sp};
				double us = time_way(b, QP_PLAN, p, type, m, n,
						     k, iters);
				double rel =
				    qp_rel(b, QP_PLAN, p, type, m, n, k);

				if (us < 0 || rel < 0)
					return -EIO;
				if (rel > *worst)
					*worst = rel;
				if (us < *best_us)
					*best_us = us, *best = p;
			}
	return 0;
}

/* --ways: tiles, mma, qp, i8, bf16, wg */
enum { W_TILES = 1, W_MMA = 2, W_QP = 4, W_I8 = 8, W_BF16 = 16, W_WG = 32 };

/* WAY's mean microseconds where WAYS has BIT, else -2 (not run). */
static double time_if(struct bufs *b, unsigned ways, unsigned bit,
		      enum way way, gp_plan plan, enum o1_quant_type type,
		      uint32_t m, uint32_t n, uint32_t k, int iters)
{
	return ways & bit ? time_way(b, way, plan, type, m, n, k, iters)
			  : -2.0;
}

static int bench_shape(struct bufs *b, const struct shape *s, unsigned mask,
		       unsigned ways, int iters, bool do_sweep,
		       bool do_wg_sweep, uint32_t rows)
{
	const uint32_t *list = rows ? &rows : ms;
	size_t n_m = rows ? 1 : sizeof(ms) / sizeof(ms[0]);

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		enum o1_quant_type ty = types[t].type;
		uint64_t bytes = 0;
		int err;

		if (!(mask & (1u << t)))
			continue;
		err = put_weights(b, ty, s->n, s->k, &bytes);
		if (err)
			return err;
		for (size_t i = 0; i < n_m; i++) {
			uint32_t m = list[i];
			double fl = 2.0 * m * s->n * s->k;
			double best_us = 0, worst = 0;
			gp_plan p = gp_pick(m, s->n, s->k), best = {};
			gi_plan ip = gi_pick(m, s->n, s->k);
			double tiles = time_if(b, ways, W_TILES, TILES, p, ty,
					       m, s->n, s->k, iters);
			double mma = time_if(b, ways, W_MMA, MMA, p, ty, m,
					     s->n, s->k, iters);
			double qp = time_if(b, ways, W_QP, QP, p, ty, m, s->n,
					    s->k, iters);
			double i8 = time_if(b, ways, W_I8, I8, p, ty, m, s->n,
					    s->k, iters);
			double bf = time_if(b, ways, W_BF16, BF16, p, ty, m,
					    s->n, s->k, iters);
			double wg = time_if(b, ways, W_WG, WG, p, ty, m, s->n,
					    s->k, iters);
			double rel = (ways & (W_TILES | W_QP)) ==
					     (W_TILES | W_QP)
					 ? qp_rel(b, QP, p, ty, m, s->n, s->k)
					 : -2.0;
			double irel = (ways & (W_TILES | W_I8)) ==
					      (W_TILES | W_I8)
					  ? qp_rel(b, I8, p, ty, m, s->n, s->k)
					  : -2.0;
			double wrel = (ways & (W_TILES | W_WG)) ==
					      (W_TILES | W_WG)
					  ? qp_rel(b, WG, p, ty, m, s->n, s->k)
					  : -2.0;

			if (tiles == -1.0 || mma == -1.0 || qp == -1.0 ||
			    i8 == -1.0 || bf == -1.0 || rel == -1.0 ||
			    irel == -1.0 || wg == -1.0 || wrel == -1.0)
				return -EIO;
			if (do_sweep &&
			    sweep(b, ty, m, s->n, s->k, iters, &best, &best_us,
				  &worst))
				return -EIO;
			printf("RESULT shape=%s m=%u type=%s tiles_us=%.1f "
			       "tiles_tflops=%.1f mma_us=%.1f mma_tflops=%.1f "
			       "qp_us=%.1f qp_tflops=%.1f plan=%dx%d/%u "
			       "bf16_us=%.1f bf16_tflops=%.1f "
			       "qp_vs_tiles=%.2f qp_vs_bf16=%.2f qp_rel=%.1e "
			       "i8_us=%.1f i8_tflops=%.1f i8_plan=%dx%d/%u "
			       "i8_vs_tiles=%.2f i8_vs_bf16=%.2f i8_rel=%.1e",
			       s->name, m, types[t].name, tiles,
			       fl / tiles / 1e6, mma, fl / mma / 1e6, qp,
			       fl / qp / 1e6, p.bm, p.bn,
			       (s->k > 256 ? p.splits : 1u), bf, fl / bf / 1e6,
			       tiles / qp, bf / qp, rel, i8, fl / i8 / 1e6,
			       ip.bm, ip.bn, (s->k >= 512 ? ip.splits : 1u),
			       tiles / i8, bf / i8, irel);
			printf(" wg_us=%.1f wg_tflops=%.1f wg_vs_tiles=%.2f "
			       "wg_vs_bf16=%.2f wg_rel=%.1e",
			       wg, fl / wg / 1e6, tiles / wg, bf / wg, wrel);
			if (ways & W_WG) { /* tokens a block / parts of K */
				uint32_t bn = qw_bn(m, s->n, s->k, &b->split);

				printf(" wg_plan=%ux%u/%u", QW_BM, bn,
				       qw_parts(qw_tiles(m, s->n, bn),
						s->k / QW_SK, bn, &b->split));
			}
			if (do_wg_sweep && (ways & W_WG) &&
			    wg_sweep(b, ty, m, s->n, s->k, iters))
				return -EIO;
			if (do_sweep)
				printf(" best=%dx%d/%u best_us=%.1f "
				       "sweep_rel_max=%.1e",
				       best.bm, best.bn, best.splits, best_us,
				       worst);
			printf("\n");
			fflush(stdout);
		}
	}
	return 0;
}

/* The mask of NAMES that the comma-separated LIST names, each word whole
 * ("down" is not "o"); 0 where a word names none of them. */
static unsigned parse_list(const char *list, const char *const *names,
			   size_t n)
{
	unsigned mask = 0;

	for (const char *w = list; *w;) {
		size_t len = strcspn(w, ","), t = 0;

		while (t < n && (strlen(names[t]) != len ||
				 strncmp(w, names[t], len)))
			t++;
		if (t == n)
			return 0;
		mask |= 1u << t;
		w += len + (w[len] == ',');
	}
	return mask;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"iters", required_argument, NULL, 'i'},
	    {"types", required_argument, NULL, 't'},
	    {"shapes", required_argument, NULL, 's'},
	    {"sweep", no_argument, NULL, 'w'},
	    {"ways", required_argument, NULL, 'y'},
	    {"wg-splits", required_argument, NULL, 'z'},
	    {"wg-sweep", no_argument, NULL, 'x'},
	    {"rows", required_argument, NULL, 'm'},
	    {NULL, 0, NULL, 0},
	};
	static const char *const tnames[] = {"q8_0", "q4_0", "q4_k", "q6_k",
					     "q5_0"};
	static const char *const snames[] = {"qkv", "o", "gu", "down", "head"};
	static const char *const wnames[] = {"tiles", "mma", "qp", "i8",
					     "bf16", "wg"};
	unsigned ways = 0x3f;
	struct bufs b = {};
	unsigned mask = 0xd, smask = 0x1f;
	int iters = 20, opt, err = 0;
	uint32_t rows = 0; /* --rows: 0, every M of ms */
	bool do_sweep = false, do_wg_sweep = false;
	uint16_t *hx;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 'i' && atoi(optarg) > 0 && atoi(optarg) <= 500) {
			iters = atoi(optarg);
		} else if (opt == 't' && parse_list(optarg, tnames, 5)) {
			mask = parse_list(optarg, tnames, 5);
		} else if (opt == 's' && parse_list(optarg, snames, 5)) {
			smask = parse_list(optarg, snames, 5);
		} else if (opt == 'y' && parse_list(optarg, wnames, 6)) {
			ways = parse_list(optarg, wnames, 6);
		} else if (opt == 'w') {
			do_sweep = true;
		} else if (opt == 'x') {
			do_wg_sweep = true;
		} else if (opt == 'z' && atoi(optarg) >= 0) {
			b.split.splits = (uint32_t)atoi(optarg);
		} else if (opt == 'm' && atoi(optarg) >= 1 &&
			   atoi(optarg) <= MOST_M) {
			rows = (uint32_t)atoi(optarg);
		} else {
			fprintf(stderr,
				"usage: bench_gemm_q [--iters N] "
				"[--types q8_0,q4_0,q4_k,q6_k,q5_0] "
				"[--shapes qkv,o,gu,down,head] [--rows M] "
				"[--sweep] "
				"[--ways tiles,mma,qp,i8,wg,bf16] "
				"[--wg-splits N] [--wg-sweep]\n");
			return 2;
		}
	}
	if ((ways & W_WG) && !o1_gemm_qw_available()) {
		fprintf(stderr, "bench_gemm_q: no gemm_qw in this build (wgmma "
				"needs sm_90a): wg left out\n");
		ways &= ~W_WG;
	}
	b.split.part_bytes = 64u << 20; /* the backend's tile scratch */
	hx = (uint16_t *)malloc((size_t)MOST_M * MOST_K * 2);
	if (!hx)
		return 1;
	for (size_t i = 0; i < (size_t)MOST_M * MOST_K; i++) {
		float f = frand();
		uint32_t u;

		memcpy(&u, &f, 4);
		hx[i] = (uint16_t)(u >> 16);
	}
	if (check(cudaMalloc(&b.w, MOST_NK * 2), "malloc") ||
	    check(cudaMalloc((void **)&b.wb, MOST_NK * 2), "malloc") ||
	    check(cudaMalloc((void **)&b.x, (size_t)MOST_M * MOST_K * 2),
		  "malloc") ||
	    check(cudaMalloc((void **)&b.y, (size_t)MOST_M * 128256 * 4),
		  "malloc") ||
	    check(cudaMalloc(&b.scratch,
			     o1_gemm_qi8_scratch_bytes(MOST_M, MOST_K)),
		  "malloc") ||
	    check(cudaMalloc((void **)&b.split.part, b.split.part_bytes),
		  "malloc") ||
	    check(cudaMalloc((void **)&b.split.count, O1_GEMM_QW_COUNTS * 4),
		  "malloc") ||
	    check(cudaMemset(b.split.count, 0, O1_GEMM_QW_COUNTS * 4),
		  "memset") ||
	    check(cudaMemcpy(b.x, hx, (size_t)MOST_M * MOST_K * 2,
			     cudaMemcpyHostToDevice),
		  "x") ||
	    check(cudaMemset(b.wb, 0x3c, MOST_NK * 2), "memset") ||
	    check(cudaEventCreate(&b.t0), "event") ||
	    check(cudaEventCreate(&b.t1), "event") ||
	    cublasCreate(&b.blas) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "bench_gemm_q: no device or out of memory\n");
		free(hx);
		return 1;
	}
	free(hx);
	for (size_t s = 0; !err && s < sizeof(shapes) / sizeof(shapes[0]); s++)
		if (smask & (1u << s))
			err = bench_shape(&b, &shapes[s], mask, ways, iters,
					  do_sweep, do_wg_sweep, rows);
	cublasDestroy(b.blas);
	cudaFree(b.w), cudaFree(b.wb), cudaFree(b.x), cudaFree(b.y);
	cudaFree(b.scratch), cudaFree(b.split.part), cudaFree(b.split.count);
	if (err)
		fprintf(stderr, "bench_gemm_q: failed (%d)\n", err);
	return err ? 1 : 0;
}

/* bench_decode_attn: one layer's decode attention (one new row per
 * sequence, every sequence CTX tokens long, pages of 16 tokens scattered
 * over the pool, random bf16 K/V and q) in the presets' shapes
 * (qwen2.5-0.5b 14/2 heads of 64, llama3.2-1b 32/8 of 64, llama3-8b 32/8
 * of 128), at batch 1, 64 and 256 and contexts 128, 1024 and 4096:
 *   bench_decode_attn [--sweep] [--graph-len N] [--batch B] [--ctx C]
 *                     [--tc-splits S] [--tune W,R,T,H[,F]]... [--shape NAME]
 *                     [--kernel row|tc]
 * For each it times the old row kernel (o1_attention_rows_legacy_cuda)
 * and the decode kernel (o1_attention_decode_cuda, default tuning with
 * the tensor-core kernel off), each launched with MAX_LEN = the context
 * and with MAX_LEN = the graph length (default 8192: what a captured
 * decode graph passes, the longest context it serves), then the
 * tensor-core decode kernel (attention_decode_tc.cu, "tc"; 3 tiles in
 * flight, the default, and 2), and prints
 * microseconds a call and the KV bytes read over that time (GB/s), and
 * the largest |new - old| and |tc - new| output differences (tc rounds q
 * and the weights to bf16: attention_prefill.cu's bound).
 * Times: "cold", L2 flushed before each launch (as in a decode step, where
 * the weights stream through L2 between two layers' attention; median of
 * RUNS, CUDA events around the one launch), and "warm", RUNS launches back
 * to back over the same data (their mean). --sweep adds, per case, the
 * decode kernel's best tuning (warps, split rounds, target blocks, heads
 * a block: 8, 4, 2 or 1, flat loads; cold times, graph MAX_LEN) beside
 * the default's.
 * --batch/--ctx take one value each instead of the lists; --tc-splits
 * forces the tensor-core kernel's splits (1: none; default 0, its pick).
 * --tune W,R,T,H[,F] (up to 4 times) adds the decode kernel's cold graph
 * time with that tuning (warps, split rounds, target blocks, heads a
 * block, the blocks whose splits cap a short row's at up to 8 rows; 0
 * keeps the default), beside the default's: an A/B of launch shapes. A
 * named target also drops that cap (attention_decode.cu's dec_few):
 * 0,0,528,0 is the launch before it.
 * --shape NAME runs one shape only; --kernel row|tc times only that kernel
 * (the decode kernel with its default tuning, or the tensor-core one; at
 * the graph MAX_LEN, WARMUP + 2 x RUNS launches): a run for ncu
 * (tools/gpu/profile_attention.sh).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_bench.h"

#include "kernels/cuda_util.h"
#include "kernels/kernels_cuda.h"

#define PAGE_TOKENS 16
#define RUNS	    20
#define WARMUP	    3
#define FLUSH_BYTES (256u << 20) /* past the H200's 60 MB of L2 */
#define MAX_SPLITS  32		 /* the CUDA backend's scratch */
#define MAX_TUNES   4

struct shape {
	const char *name;
	uint32_t hq, hkv, d;
};

/* The command line's choices beyond shape, batch and context. */
struct opts {
	uint32_t graph_len, tc_splits, n_tunes;
	struct o1_attn_decode_tune tune[MAX_TUNES];
	int sweep;
	int kernel; /* --kernel: -1 every variant, else NEW or TC only */
	const char *shape;
};

struct bench {
	struct o1_attn_dims dims;
	struct o1_attn_batch batch;
	uint32_t rows, ctx;
	uint64_t scratch_floats;
	uint16_t *kc, *vc, *out_old, *out_new, *out_tc;
	float *q, *scratch;
	void *dev_batch, *flush;
};

enum which { OLD, NEW, TC };

struct variant {
	enum which w;
	uint32_t max_len;
	const struct o1_attn_decode_tune *tune;
};

/* Device arrays of ROWS sequences of CTX tokens, one new row each:
 * q_offsets 0..rows, start_pos ctx - 1, block tables wide enough for
 * MAX_LEN whose pages (of a pool of rows x ctx/16) are shuffled. */
static int setup_batch(struct bench *b, uint32_t pages, uint32_t max_blocks)
{
	size_t n = (size_t)2 * b->rows + 1 + (size_t)b->rows * max_blocks;
	uint32_t *h = calloc(n, 4), *perm = malloc((size_t)pages * 4);
	uint32_t per = (b->ctx + PAGE_TOKENS - 1) / PAGE_TOKENS;
	int err = h && perm ? 0 : -1;

	for (uint32_t i = 0; !err && i < pages; i++)
		perm[i] = i;
	for (uint32_t i = pages; !err && i > 1; i--) {
		uint32_t j = (uint32_t)(gpu_bench_rand() % i), t = perm[i - 1];

		perm[i - 1] = perm[j], perm[j] = t;
	}
	for (uint32_t s = 0; !err && s <= b->rows; s++)
		h[s] = s;
	for (uint32_t s = 0; !err && s < b->rows; s++) {
		h[b->rows + 1 + s] = b->ctx - 1;
		for (uint32_t k = 0; k < per; k++)
			h[2 * b->rows + 1 + (size_t)s * max_blocks + k] =
			    perm[s * per + k];
	}
	err = err ? err : (cudaMalloc(&b->dev_batch, n * 4) ? -1 : 0);
	err = err ? err : gpu_bench_upload(b->dev_batch, h, n * 4);
	free(h), free(perm);
	b->batch = (struct o1_attn_batch){
	    b->rows, (uint32_t *)b->dev_batch,
	    (uint32_t *)b->dev_batch + b->rows + 1,
	    (uint32_t *)b->dev_batch + 2 * b->rows + 1, max_blocks};
	return err;
}

static int setup(struct bench *b, const struct shape *s, uint32_t rows,
		 uint32_t ctx, uint32_t graph_len)
{
	uint32_t per = (ctx + PAGE_TOKENS - 1) / PAGE_TOKENS,
		 pages = per * rows;
	uint32_t max_len = graph_len > ctx ? graph_len : ctx;
	uint64_t stride = (uint64_t)s->hkv * PAGE_TOKENS * s->d;
	size_t out_n = (size_t)rows * s->hq * s->d;

	memset(b, 0, sizeof(*b));
	b->rows = rows, b->ctx = ctx;
	b->dims = (struct o1_attn_dims){s->hq,	s->hkv,
					s->d,	PAGE_TOKENS,
					stride, 1.0f / sqrtf((float)s->d)};
	b->scratch_floats =
	    o1_attention_cuda_scratch_floats(rows, s->hq, s->d, MAX_SPLITS);
	if (cudaMalloc((void **)&b->kc, pages * stride * 2) ||
	    cudaMalloc((void **)&b->vc, pages * stride * 2) ||
	    cudaMalloc((void **)&b->q, out_n * 4) ||
	    cudaMalloc((void **)&b->out_old, out_n * 2) ||
	    cudaMalloc((void **)&b->out_new, out_n * 2) ||
	    cudaMalloc((void **)&b->out_tc, out_n * 2) ||
	    cudaMalloc((void **)&b->scratch, b->scratch_floats * 4) ||
	    cudaMalloc(&b->flush, FLUSH_BYTES))
		return -1;
	if (gpu_bench_upload_random(b->kc, pages * stride, 0) ||
	    gpu_bench_upload_random(b->vc, pages * stride, 0) ||
	    gpu_bench_upload_random(b->q, out_n, 1))
		return -1;
	return setup_batch(b, pages, (max_len + PAGE_TOKENS - 1) / PAGE_TOKENS);
}

static void teardown(struct bench *b)
{
	cudaFree(b->kc), cudaFree(b->vc), cudaFree(b->q);
	cudaFree(b->out_old), cudaFree(b->out_new), cudaFree(b->out_tc);
	cudaFree(b->scratch);
	cudaFree(b->dev_batch), cudaFree(b->flush);
}

static int launch(struct bench *b, const struct variant *v)
{
	if (v->w == OLD)
		return o1_attention_rows_legacy_cuda(
		    b->out_old, b->q, b->kc, b->vc, &b->dims, &b->batch,
		    b->rows, v->max_len, b->scratch, b->scratch_floats, false,
		    0);
	return o1_attention_decode_cuda(
	    v->w == TC ? b->out_tc : b->out_new, b->q, b->kc, b->vc, &b->dims,
	    &b->batch, b->rows, v->max_len, b->scratch, b->scratch_floats,
	    UINT32_MAX, v->tune, NULL, false, 0);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/* Microseconds a launch of V: cold (L2 flushed before each, median) into
 * *COLD, warm (back to back, mean) into *WARM. -1 on failure. */
static int time_us(struct bench *b, const struct variant *v, double *cold,
		   double *warm)
{
	cudaEvent_t e0, e1;
	float ms[RUNS], all;
	int err = 0;

	if (cudaEventCreate(&e0) || cudaEventCreate(&e1))
		return -1;
	for (int i = 0; !err && i < WARMUP; i++)
		err = launch(b, v);
	for (int i = 0; !err && i < RUNS; i++) {
		err = cudaMemsetAsync(b->flush, i, FLUSH_BYTES, 0) ? -1 : 0;
		cudaEventRecord(e0, 0);
		err = err ? err : launch(b, v);
		cudaEventRecord(e1, 0);
		if (err || cudaEventSynchronize(e1) ||
		    cudaEventElapsedTime(&ms[i], e0, e1))
			err = -1;
	}
	if (!err) {
		cudaEventRecord(e0, 0);
		for (int i = 0; !err && i < RUNS; i++)
			err = launch(b, v);
		cudaEventRecord(e1, 0);
		if (err || cudaEventSynchronize(e1) ||
		    cudaEventElapsedTime(&all, e0, e1))
			err = -1;
	}
	cudaEventDestroy(e0), cudaEventDestroy(e1);
	if (err || cudaDeviceSynchronize())
		return -1;
	qsort(ms, RUNS, sizeof(ms[0]), cmp_float);
	*cold = ms[RUNS / 2] * 1e3;
	*warm = all * 1e3 / RUNS;
	return 0;
}

/* Largest |x - y| over two outputs (as floats); NaN anywhere wins. */
static double max_diff(const struct bench *b, const uint16_t *x,
		       const uint16_t *y)
{
	size_t n = (size_t)b->rows * b->dims.n_heads * b->dims.head_dim;
	uint16_t *o = malloc(n * 2), *w = malloc(n * 2);
	double m = -1;

	if (o && w && !cudaMemcpy(o, x, n * 2, cudaMemcpyDeviceToHost) &&
	    !cudaMemcpy(w, y, n * 2, cudaMemcpyDeviceToHost)) {
		m = 0;
		for (size_t i = 0; i < n; i++) {
			double e = fabs((double)gpu_bench_f32(o[i]) -
					gpu_bench_f32(w[i]));

			m = e > m || isnan(e) ? e : m;
		}
	}
	free(o), free(w);
	return m;
}

/* The decode kernel's best tuning at the graph MAX_LEN (cold times):
 * warps, split rounds, target blocks; for each the default heads a block
 * (4, or 2 at up to 8 rows), 4, 4 loading each round as it starts (flat)
 * rather than a round ahead, 2 and 1 (more blocks, less arithmetic
 * each), where the group makes them differ. A
 * tuning that names its split rounds splits every context longer than
 * them (the default keeps contexts of up to 2 rounds whole at <= 8
 * rows). */
static int sweep(struct bench *b, uint32_t graph_len, double dflt)
{
	static const uint32_t warps[] = {1, 2, 4, 8},
			      rounds[] = {1, 2, 4, 8, 16},
			      targets[] = {132, 264, 528, 1056};
	static const struct o1_attn_decode_tune kinds[] = {
	    {.tc = O1_ATTN_TC_OFF},
	    {.heads = 4, .tc = O1_ATTN_TC_OFF},
	    {.heads = 4, .flat = true, .tc = O1_ATTN_TC_OFF},
	    {.heads = 2, .tc = O1_ATTN_TC_OFF},
	    {.heads = 1, .tc = O1_ATTN_TC_OFF}};
	uint32_t g = b->dims.n_heads / b->dims.n_kv_heads;
	struct o1_attn_decode_tune best = kinds[0], t;
	double best_us = 1e30, by_rounds[5], cold, warm;

	for (size_t j = 0; j < 5; j++)
		by_rounds[j] = 1e30;
	for (size_t h = 0; h < sizeof(kinds) / sizeof(kinds[0]); h++) {
		if ((h == 1 && g <= 2) || (h == 2 && g < 3) ||
		    (h == 3 && g <= 1) || (h == 4 && g <= 1))
			continue; /* the same kernel as a kind before */
		for (size_t i = 0; i < 4; i++)
			for (size_t j = 0; j < 5; j++)
				for (size_t k = 0; k < 4; k++) {
					struct variant v = {NEW, graph_len, &t};

					t = kinds[h];
					t.warps = warps[i];
					t.split_rounds = rounds[j];
					t.target_blocks = targets[k];
					if (time_us(b, &v, &cold, &warm))
						return -1;
					if (cold < best_us)
						best_us = cold, best = t;
					if (cold < by_rounds[j])
						by_rounds[j] = cold;
				}
	}
	printf("    sweep: best by split rounds");
	for (size_t j = 0; j < 5; j++)
		printf(" %u: %.2f", rounds[j], by_rounds[j]);
	printf(" us\n");
	printf("    sweep: best warps %u split_rounds %u target_blocks %u "
	       "heads %u%s: %.2f us (default %.2f us)\n",
	       best.warps, best.split_rounds, best.target_blocks, best.heads,
	       best.flat ? " flat" : "", best_us, dflt);
	return 0;
}

/* --tune's N tunings T: their cold times at GRAPH_LEN into US. */
static int time_tunes(struct bench *b, uint32_t graph_len,
		      const struct o1_attn_decode_tune *t, uint32_t n,
		      double *us)
{
	double warm;

	for (uint32_t i = 0; i < n; i++) {
		struct variant v = {NEW, graph_len, &t[i]};

		if (time_us(b, &v, &us[i], &warm))
			return -1;
	}
	return 0;
}

/* --kernel: that kernel alone at the graph MAX_LEN GL, for a profiler. */
static int run_one(struct bench *b, const struct shape *s, uint32_t rows,
		   uint32_t ctx, uint32_t gl, const struct opts *o)
{
	const struct o1_attn_decode_tune rowk = {.tc = O1_ATTN_TC_OFF},
					 tck = {.tc = O1_ATTN_TC_ON,
						.tc_splits = o->tc_splits};
	struct variant v = {(enum which)o->kernel, gl,
			    o->kernel == TC ? &tck : &rowk};
	double cold, warm, gb = (double)rows * ctx * s->hkv * s->d * 4 / 1e9;

	if (time_us(b, &v, &cold, &warm))
		return -1;
	printf("%-12s batch %3u ctx %4u (%.3f GB KV): %s cold us %.2f (%.0f "
	       "GB/s), warm %.2f\n",
	       s->name, rows, ctx, gb, o->kernel == TC ? "tc" : "row", cold,
	       gb / (cold * 1e-6), warm);
	return 0;
}

static int run(const struct shape *s, uint32_t rows, uint32_t ctx,
	       const struct opts *o)
{
	const struct o1_attn_decode_tune rowk = {.tc = O1_ATTN_TC_OFF},
					 tck = {.tc = O1_ATTN_TC_ON,
						.tc_splits = o->tc_splits},
					 tck2 = {.tc = O1_ATTN_TC_ON,
						 .tc_stages = 2,
						 .tc_splits = o->tc_splits};
	struct bench b;
	uint32_t gl = o->graph_len > ctx ? o->graph_len : ctx;
	const struct variant vs[6] = {{OLD, ctx, NULL}, {OLD, gl, NULL},
				      {NEW, ctx, &rowk}, {NEW, gl, &rowk},
				      {TC, gl, &tck},	 {TC, gl, &tck2}};
	double cold[6], warm[6], tune_us[MAX_TUNES], diff, diff_tc, gb;
	int err = setup(&b, s, rows, ctx, o->graph_len);

	if (!err && o->kernel >= 0) {
		err = run_one(&b, s, rows, ctx, gl, o);
		teardown(&b);
		return err;
	}
	for (int i = 0; !err && i < 6; i++)
		err = time_us(&b, &vs[i], &cold[i], &warm[i]);
	diff = err ? -1 : max_diff(&b, b.out_old, b.out_new);
	diff_tc = err ? -1 : max_diff(&b, b.out_new, b.out_tc);
	if (!err && o->sweep)
		err = sweep(&b, gl, cold[3]);
	if (!err)
		err = time_tunes(&b, gl, o->tune, o->n_tunes, tune_us);
	teardown(&b);
	if (err) {
		fprintf(stderr,
			"bench_decode_attn: %s batch %u ctx %u failed\n",
			s->name, rows, ctx);
		return -1;
	}
	gb = (double)rows * ctx * s->hkv * s->d * 2 * 2 / 1e9;
	printf("%-12s batch %3u ctx %4u (%.3f GB KV): cold us old %.2f "
	       "(graph %.2f) new %.2f (graph %.2f), %.2fx, new %.0f GB/s; "
	       "warm us old %.2f new %.2f (graph %.2f); max |new - old| "
	       "%.3g; tc cold %.2f us (%.0f GB/s, %.2fx new) warm %.2f, "
	       "2 stages %.2f us, max |tc - new| %.3g\n",
	       s->name, rows, ctx, gb, cold[0], cold[1], cold[2], cold[3],
	       cold[1] / cold[3], gb / (cold[3] * 1e-6), warm[0], warm[2],
	       warm[3], diff, cold[4], gb / (cold[4] * 1e-6), cold[3] / cold[4],
	       warm[4], cold[5], diff_tc);
	for (uint32_t i = 0; i < o->n_tunes; i++)
		printf("    tune %u,%u,%u,%u,%u: %.2f us (%.3fx the default's "
		       "%.2f)\n",
		       o->tune[i].warps, o->tune[i].split_rounds,
		       o->tune[i].target_blocks, o->tune[i].heads,
		       o->tune[i].few_blocks, tune_us[i], tune_us[i] / cold[3],
		       cold[3]);
	fflush(stdout);
	return 0;
}

static int arg_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *v)
{
	char *end;
	long x = strtol(s, &end, 10);

	if (*end || x < (long)lo || x > (long)hi)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

/* W,R,T,H[,F]: warps (0-8), split rounds (0-64), target blocks
 * (0-100000), heads a block (0, 1, 2, 4, 8), the blocks whose splits cap a
 * short row's at a few rows (0-100000); the row kernel, tensor cores off. */
static int arg_tune(const char *s, struct o1_attn_decode_tune *t)
{
	static const uint32_t hi[5] = {8, 64, 100000, 8, 100000};
	uint32_t v[5] = {0};
	char buf[64], *save = NULL, *tok = buf, *w;
	int n = 0;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	for (; n < 5 && (w = strtok_r(tok, ",", &save)); n++, tok = NULL)
		if (arg_u32(w, 0, hi[n], &v[n]))
			return -1;
	if (n < 4 || strtok_r(NULL, ",", &save) || (v[3] & (v[3] - 1)))
		return -1;
	*t = (struct o1_attn_decode_tune){.warps = v[0],
					  .split_rounds = v[1],
					  .target_blocks = v[2],
					  .heads = v[3],
					  .few_blocks = v[4],
					  .tc = O1_ATTN_TC_OFF};
	return 0;
}

int main(int argc, char **argv)
{
	static const struct shape shapes[] = {
	    {"qwen2.5-0.5b", 14, 2, 64},
	    {"llama3.2-1b", 32, 8, 64},
	    {"llama3-8b", 32, 8, 128},
	};
	uint32_t batches[3] = {1, 64, 256}, ctxs[3] = {128, 1024, 4096};
	uint32_t nb = 3, nc = 3, ran = 0;
	struct opts o = {.graph_len = 8192, .kernel = -1};
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		int bad = 0;

		if (!strcmp(argv[i], "--sweep"))
			o.sweep = 1;
		else if (!strcmp(argv[i], "--graph-len") && i + 1 < argc)
			bad = arg_u32(argv[++i], 1, 131072, &o.graph_len);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			bad = arg_u32(argv[++i], 1, 1024, &batches[0]), nb = 1;
		else if (!strcmp(argv[i], "--ctx") && i + 1 < argc)
			bad = arg_u32(argv[++i], 1, 131072, &ctxs[0]), nc = 1;
		else if (!strcmp(argv[i], "--tc-splits") && i + 1 < argc)
			bad = arg_u32(argv[++i], 0, 32, &o.tc_splits);
		else if (!strcmp(argv[i], "--tune") && i + 1 < argc &&
			 o.n_tunes < MAX_TUNES)
			bad = arg_tune(argv[++i], &o.tune[o.n_tunes++]);
		else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
			o.shape = argv[++i];
		else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) {
			i++;
			o.kernel = !strcmp(argv[i], "row")  ? NEW
				   : !strcmp(argv[i], "tc") ? TC
							    : -1;
			bad = o.kernel < 0;
		} else
			bad = 1;
		if (bad) {
			fprintf(stderr, "usage: bench_decode_attn [--sweep] "
					"[--graph-len N] [--batch B] [--ctx "
					"C] [--tc-splits S] [--tune "
					"W,R,T,H[,F]]... [--shape NAME] "
					"[--kernel row|tc]\n");
			return 2;
		}
	}
	if (o1_cuda_probe() != 0) {
		fprintf(stderr, "bench_decode_attn: no CUDA device\n");
		return 1;
	}
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		if (o.shape && strcmp(o.shape, shapes[k].name))
			continue;
		ran++;
		for (uint32_t i = 0; i < nb; i++)
			for (uint32_t j = 0; j < nc; j++)
				rc |= run(&shapes[k], batches[i], ctxs[j], &o)
					  ? 1
					  : 0;
	}
	if (!ran) {
		fprintf(stderr,
			"bench_decode_attn: no shape '%s' (qwen2.5-0.5b, "
			"llama3.2-1b, llama3-8b)\n",
			o.shape);
		return 2;
	}
	return rc;
}

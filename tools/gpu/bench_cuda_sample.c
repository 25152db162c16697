/* bench_cuda_sample: device sampling (o1_sample_rows_cuda) speed beside
 * its floor.
 *
 *   bench_cuda_sample [--vocab N] [--iters N]
 *
 * Rows of random logits shaped like a model's (normal, sd 2.5, five
 * tokens 8-12 above; seeded), and for the "flat" modes uniform in [-4, 4]
 * (top-p then keeps most of the vocabulary: the large path). For each mode
 * and batch of 1, 8, 64 and 256 rows: microseconds per launch, eager (ITERS
 * launches back to back between two CUDA events) and from a CUDA graph
 * (one captured launch replayed ITERS times), with a fresh U per row. The
 * floor is the bytes one launch must read (the logits, plus the penalty
 * entries) divided by the device copy bandwidth measured in the same run
 * (cudaMemcpy device to device of 1 GiB, best of 10, read + write bytes). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_bench.h"

#include "common/prng.h"
#include "kernels/cuda_util.h"
#include "kernels/kernels_cuda.h"
#include "kernels/sample.h"

#define BW_BYTES (1ull << 30)
#define MAX_ROWS 256
#define PENS	 500

struct mode {
	const char *name;
	int flat;
	float t, top_p, min_p, rep, pres, freq;
	uint32_t top_k, n_logprobs, n_pen;
};

static const struct mode modes[] = {
    {"greedy", 0, 0, 1, 0, 1, 0, 0, 0, 0, 0},
    {"greedy+5 logprobs", 0, 0, 1, 0, 1, 0, 0, 0, 5, 0},
    {"temperature 0.8", 0, 0.8f, 1, 0, 1, 0, 0, 0, 0, 0},
    {"top-k 50", 0, 0.8f, 1, 0, 1, 0, 0, 50, 0, 0},
    {"top-p 0.9", 0, 0.8f, 0.9f, 0, 1, 0, 0, 0, 0, 0},
    {"min-p 0.05", 0, 0.8f, 1, 0.05f, 1, 0, 0, 0, 0, 0},
    {"penalties (500) top-p 0.9", 0, 0.8f, 0.9f, 0, 1.2f, 0.5f, 0.2f, 0, 0,
     PENS},
    {"top-k 50 top-p 0.9 +5", 0, 0.8f, 0.9f, 0, 1, 0, 0, 50, 5, 0},
    {"flat top-p 0.9", 1, 1, 0.9f, 0, 1, 0, 0, 0, 0, 0},
    {"flat top-k 3000", 1, 1, 1, 0, 1, 0, 0, 3000, 0, 0},
};

static uint64_t rng = 42;

static uint64_t next64(void)
{
	return o1_prng_splitmix64(&rng);
}

static double unif(void)
{
	return (next64() >> 11) * 0x1.0p-53;
}

static void fill(float *l, uint32_t rows, uint32_t v, int flat)
{
	for (size_t i = 0; i < (size_t)rows * v; i++) {
		double a = unif() + 1e-300, b = unif();

		l[i] =
		    flat ? (float)(unif() * 8 - 4)
			 : (float)(sqrt(-2 * log(a)) * cos(2 * M_PI * b) * 2.5);
	}
	for (uint32_t r = 0; !flat && r < rows; r++)
		for (int j = 0; j < 5; j++)
			l[(size_t)r * v + next64() % v] = 8 + (float)unif() * 4;
}

/* Device copy bandwidth, GB/s (1e9 bytes, read + write). */
static int copy_bandwidth(double *gbs)
{
	*gbs = gpu_bench_copy_gbs(BW_BYTES);
	return *gbs > 0 ? 0 : -1;
}

struct bench {
	uint32_t vocab, iters;
	float *logits[2]; /* model-like, flat */
	struct o1_sample_row *rows;
	struct o1_sample_penalty *pens;
	struct o1_sample_result *out;
	void *scratch;
	size_t scratch_bytes;
	cudaStream_t s;
	cudaEvent_t e0, e1;
};

/* Rows of mode M with fresh U; penalty entries of row r at r * PENS. */
static int upload_rows(struct bench *b, const struct mode *m, uint32_t n)
{
	static struct o1_sample_row rows[MAX_ROWS];

	for (uint32_t r = 0; r < n; r++)
		rows[r] = (struct o1_sample_row){
		    .u = unif(),
		    .temperature = m->t,
		    .top_p = m->top_p,
		    .min_p = m->min_p,
		    .repetition_penalty = m->rep,
		    .presence_penalty = m->pres,
		    .frequency_penalty = m->freq,
		    .top_k = m->top_k,
		    .n_logprobs = m->n_logprobs,
		    .pen_off = r * PENS,
		    .n_pen = m->n_pen,
		};
	return O1_CUDA_CHECK(cudaMemcpy(b->rows, rows, n * sizeof(*rows),
					cudaMemcpyHostToDevice));
}

static int launch(struct bench *b, const struct mode *m, uint32_t n)
{
	return o1_sample_rows_cuda(b->out, b->logits[m->flat], n, b->vocab,
				   b->rows, b->pens, b->scratch,
				   b->scratch_bytes, b->s);
}

/* Microseconds per launch over ITERS launches after 3 warm-up ones:
 * eager when X is NULL, else replays of X. */
static int time_iters(struct bench *b, const struct mode *m, uint32_t n,
		      cudaGraphExec_t x, double *us)
{
	float ms;
	int err = 0;

	for (uint32_t i = 0; !err && i < b->iters + 3; i++) {
		if (i == 3)
			err = O1_CUDA_CHECK(cudaEventRecord(b->e0, b->s));
		if (!err)
			err = x ? O1_CUDA_CHECK(cudaGraphLaunch(x, b->s))
				: launch(b, m, n);
	}
	if (!err)
		err = O1_CUDA_CHECK(cudaEventRecord(b->e1, b->s));
	if (!err)
		err = O1_CUDA_CHECK(cudaEventSynchronize(b->e1));
	if (!err)
		err = O1_CUDA_CHECK(cudaEventElapsedTime(&ms, b->e0, b->e1));
	if (!err)
		*us = ms * 1e3 / b->iters;
	return err;
}

/* Microseconds per launch: eager, then from a graph of one launch. */
static int time_mode(struct bench *b, const struct mode *m, uint32_t n,
		     double *eager_us, double *graph_us)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	int err = upload_rows(b, m, n);

	if (!err)
		err = time_iters(b, m, n, NULL, eager_us);
	if (!err)
		err = O1_CUDA_CHECK(cudaStreamBeginCapture(
		    b->s, cudaStreamCaptureModeThreadLocal));
	if (!err) {
		int captured = launch(b, m, n);

		err = O1_CUDA_CHECK(cudaStreamEndCapture(b->s, &g));
		err = captured ? captured : err;
	}
	if (!err)
		err = O1_CUDA_CHECK(cudaGraphInstantiate(&x, g, 0));
	if (!err)
		err = time_iters(b, m, n, x, graph_us);
	if (x)
		cudaGraphExecDestroy(x);
	if (g)
		cudaGraphDestroy(g);
	return err;
}

static int upload(void **d, const void *h, size_t bytes)
{
	int err = O1_CUDA_CHECK(cudaMalloc(d, bytes));

	if (!err && h)
		err = O1_CUDA_CHECK(
		    cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice));
	return err;
}

/* Logits (both kinds), rows, penalty entries (PENS distinct ids per
 * row), results, scratch, stream and events on the device. */
static int setup(struct bench *b)
{
	size_t lb = (size_t)MAX_ROWS * b->vocab * sizeof(float);
	size_t pb = (size_t)MAX_ROWS * PENS * sizeof(struct o1_sample_penalty);
	struct o1_sample_penalty *pens = malloc(pb);
	float *h = malloc(lb);
	int err = !h || !pens ? -ENOMEM : 0;

	for (uint32_t i = 0; !err && i < MAX_ROWS * PENS; i++)
		pens[i] = (struct o1_sample_penalty){
		    (int32_t)((i % PENS) * (b->vocab / PENS)), i % 3, 1};
	b->scratch_bytes =
	    o1_sample_rows_cuda_scratch_bytes(MAX_ROWS, b->vocab);
	for (int f = 0; !err && f < 2; f++) {
		fill(h, MAX_ROWS, b->vocab, f);
		err = upload((void **)&b->logits[f], h, lb);
	}
	if (!err)
		err = upload((void **)&b->rows, NULL,
			     MAX_ROWS * sizeof(*b->rows));
	if (!err)
		err =
		    upload((void **)&b->out, NULL, MAX_ROWS * sizeof(*b->out));
	if (!err)
		err = upload((void **)&b->pens, pens, pb);
	if (!err && b->scratch_bytes)
		err = upload(&b->scratch, NULL, b->scratch_bytes);
	if (!err)
		err = O1_CUDA_CHECK(cudaStreamCreate(&b->s));
	if (!err)
		err = O1_CUDA_CHECK(cudaEventCreate(&b->e0));
	if (!err)
		err = O1_CUDA_CHECK(cudaEventCreate(&b->e1));
	free(h), free(pens);
	return err;
}

static int parse(int argc, char **argv, struct bench *b)
{
	static const struct option opts[] = {
	    {"vocab", required_argument, NULL, 'v'},
	    {"iters", required_argument, NULL, 'i'},
	    {0},
	};
	int opt;

	b->vocab = 151936, b->iters = 200;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint32_t v = (uint32_t)strtoul(optarg ? optarg : "0", NULL, 10);

		if (opt == '?' || !v)
			return -EINVAL;
		if (opt == 'v')
			b->vocab = v;
		else
			b->iters = v;
	}
	return b->vocab < PENS ? -EINVAL : 0;
}

int main(int argc, char **argv)
{
	static const uint32_t batches[] = {1, 8, 64, 256};
	struct bench b = {0};
	double gbs;
	int err;

	if (parse(argc, argv, &b)) {
		fprintf(stderr, "usage: %s [--vocab N>=%d] [--iters N]\n",
			argv[0], PENS);
		return 2;
	}
	if (o1_cuda_probe() || copy_bandwidth(&gbs) || setup(&b)) {
		fprintf(stderr, "bench_cuda_sample: no usable CUDA device\n");
		return 1;
	}
	printf("# o1_sample_rows_cuda, vocab %u, %u launches per figure, "
	       "copy bandwidth %.0f GB/s\n",
	       b.vocab, b.iters, gbs);
	printf("%-28s %5s %10s %10s %10s\n", "mode", "rows", "eager_us",
	       "graph_us", "floor_us");
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		for (size_t j = 0; j < sizeof(batches) / sizeof(batches[0]);
		     j++) {
			uint32_t n = batches[j];
			double eager, graph, bytes;

			err = time_mode(&b, &modes[m], n, &eager, &graph);
			if (err) {
				fprintf(stderr,
					"bench_cuda_sample: %s x %u "
					"failed (%d)\n",
					modes[m].name, n, err);
				return 1;
			}
			bytes = (double)n * b.vocab * sizeof(float) +
				(double)n * modes[m].n_pen *
				    sizeof(struct o1_sample_penalty);
			printf("%-28s %5u %10.2f %10.2f %10.2f\n",
			       modes[m].name, n, eager, graph,
			       bytes / (gbs * 1e9) * 1e6);
		}
	return 0;
}

/* bench_prefill_attn: one layer's attention for one prompt chunk of T
 * tokens after START earlier positions (0 unless given; pages of 16
 * tokens, random bf16 K/V, random q), in the presets' shapes
 * (qwen2.5-0.5b 14/2 heads of 64, llama3.2-1b 32/8 of 64, llama3-8b 32/8
 * of 128), for T = 512 and 2048 (or the chunks given):
 *   bench_prefill_attn [--variant V] [T[@START]...]
 * e.g. 64@8128: a 64-token chunk of an 8k prompt (issue 17's stall case).
 * V (enum o1_attn_pf_variant, by name or number; default: default) is
 * the tiled kernel's variant in the two "tiled alone" timings; the
 * dispatch runs the default.
 * Times (CUDA events, best of 20 launches after 3 warm-ups) the row kernel
 * alone (o1_attention_rows_cuda: a block per row, f32 FMAs; what prefill
 * used before the tiled kernel), o1_attention_cuda (the dispatch: the row
 * kernel's launch with every row left to the tiled kernel, then the tiled
 * kernel, split as it picks), and the tiled kernel alone
 * (o1_attention_tiled_cuda) unsplit and split as it picks (the scratch
 * the daemon has at 256 sequences), and prints them beside the floor:
 * 2 T (2 START + T) Hq D FLOPs (Q K^T and P V over the causal part) at
 * PEAK_TFLOPS bf16, and the largest |new - old| output difference as a
 * sanity check (bf16 outputs; the rounding of attention_prefill.cu).
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
#define WARMUP	    3
#define RUNS	    20
#define PEAK_TFLOPS 790.0 /* dense bf16 an H200 sustains (the floor's rate) */

struct shape {
	const char *name;
	uint32_t hq, hkv, d;
};

/* The scratch of the daemon's attention at this many sequences
 * (cuda_backend.c: max_seqs rows of 32 splits). */
#define SCRATCH_ROWS 256

struct bench {
	struct o1_attn_dims dims;
	struct o1_attn_batch batch;
	uint32_t t, start;
	uint16_t *kc, *vc, *out_old, *out_new;
	float *q, *scratch;
	uint64_t scratch_floats;
	void *dev_batch;
	uint32_t variant; /* enum o1_attn_pf_variant */
};

static const char *const variants[O1_ATTN_PF_VARIANTS] = {"default",
							   "lean3", "wide"};

enum which { ROWS, DISPATCH, TILED, TILED_SPLIT };

/* Device arrays of a one-sequence batch of T new tokens at START:
 * q_offsets {0, T}, start_pos {START}, block table of pages in reverse. */
static int setup_batch(struct bench *b, uint32_t pages)
{
	uint32_t *h = malloc((3 + (size_t)pages) * 4);
	int err = h ? 0 : -1;

	if (!err) {
		h[0] = 0, h[1] = b->t, h[2] = b->start;
		for (uint32_t i = 0; i < pages; i++)
			h[3 + i] = pages - 1 - i;
		err =
		    cudaMalloc(&b->dev_batch, (3 + (size_t)pages) * 4) ? -1 : 0;
	}
	err = err ? err
		  : gpu_bench_upload(b->dev_batch, h, (3 + (size_t)pages) * 4);
	free(h);
	b->batch = (struct o1_attn_batch){1, (uint32_t *)b->dev_batch,
					  (uint32_t *)b->dev_batch + 2,
					  (uint32_t *)b->dev_batch + 3, pages};
	return err;
}

static int setup(struct bench *b, const struct shape *s, uint32_t t,
		 uint32_t start)
{
	uint32_t pages = (start + t + PAGE_TOKENS - 1) / PAGE_TOKENS;
	uint64_t stride = (uint64_t)s->hkv * PAGE_TOKENS * s->d;
	size_t out_n = (size_t)t * s->hq * s->d;

	memset(b, 0, sizeof(*b));
	b->t = t, b->start = start;
	b->scratch_floats =
	    o1_attention_cuda_scratch_floats(SCRATCH_ROWS, s->hq, s->d, 32);
	b->dims = (struct o1_attn_dims){s->hq,	s->hkv,
					s->d,	PAGE_TOKENS,
					stride, 1.0f / sqrtf((float)s->d)};
	if (cudaMalloc((void **)&b->kc, pages * stride * 2) ||
	    cudaMalloc((void **)&b->vc, pages * stride * 2) ||
	    cudaMalloc((void **)&b->q, out_n * 4) ||
	    cudaMalloc((void **)&b->out_old, out_n * 2) ||
	    cudaMalloc((void **)&b->out_new, out_n * 2) ||
	    cudaMalloc((void **)&b->scratch, b->scratch_floats * 4))
		return -1;
	if (gpu_bench_upload_random(b->kc, pages * stride, 0) ||
	    gpu_bench_upload_random(b->vc, pages * stride, 0) ||
	    gpu_bench_upload_random(b->q, out_n, 1))
		return -1;
	return setup_batch(b, pages);
}

static void teardown(struct bench *b)
{
	cudaFree(b->kc), cudaFree(b->vc), cudaFree(b->q);
	cudaFree(b->out_old), cudaFree(b->out_new), cudaFree(b->dev_batch);
	cudaFree(b->scratch);
}

static int launch(struct bench *b, enum which w)
{
	uint16_t *out = w == ROWS ? b->out_old : b->out_new;
	uint32_t len = b->start + b->t;

	if (w == TILED || w == TILED_SPLIT)
		return o1_attention_tiled_variant_cuda(
		    out, b->q, b->kc, b->vc, &b->dims, &b->batch, b->t, 1, len,
		    w == TILED ? 1 : 0, b->scratch, b->scratch_floats,
		    b->variant, 0);
	if (w == ROWS)
		return o1_attention_rows_cuda(out, b->q, b->kc, b->vc, &b->dims,
					      &b->batch, b->t, len, b->scratch,
					      b->scratch_floats, false, 0);
	return o1_attention_cuda(out, b->q, b->kc, b->vc, &b->dims, &b->batch,
				 b->t, len, b->scratch, b->scratch_floats, NULL,
				 NULL, false, 0);
}

/* Best time of RUNS launches of W, microseconds; < 0 on failure. */
static double time_us(struct bench *b, enum which w)
{
	cudaEvent_t e0, e1;
	float ms, best = 1e30f;
	int err = 0;

	if (cudaEventCreate(&e0) || cudaEventCreate(&e1))
		return -1;
	for (int i = 0; !err && i < WARMUP; i++)
		err = launch(b, w);
	for (int i = 0; !err && i < RUNS; i++) {
		cudaEventRecord(e0, 0);
		err = launch(b, w);
		cudaEventRecord(e1, 0);
		if (err || cudaEventSynchronize(e1) ||
		    cudaEventElapsedTime(&ms, e0, e1))
			err = -1;
		best = !err && ms < best ? ms : best;
	}
	cudaEventDestroy(e0), cudaEventDestroy(e1);
	return err || cudaDeviceSynchronize() ? -1 : best * 1e3;
}

/* Largest |new - old| over the outputs (as floats). */
static double max_diff(const struct bench *b)
{
	size_t n = (size_t)b->t * b->dims.n_heads * b->dims.head_dim;
	uint16_t *o = malloc(n * 2), *w = malloc(n * 2);
	double m = -1;

	if (o && w &&
	    !cudaMemcpy(o, b->out_old, n * 2, cudaMemcpyDeviceToHost) &&
	    !cudaMemcpy(w, b->out_new, n * 2, cudaMemcpyDeviceToHost)) {
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

static int run(const struct shape *s, uint32_t t, uint32_t start,
	       uint32_t variant)
{
	struct bench b;
	double old_us, new_us, tiled_us, split_us, diff, flops, floor_us;
	int err = setup(&b, s, t, start);

	b.variant = variant;
	old_us = err ? -1 : time_us(&b, ROWS);
	new_us = old_us < 0 ? -1 : time_us(&b, DISPATCH);
	diff = new_us < 0 ? -1 : max_diff(&b);
	tiled_us = new_us < 0 ? -1 : time_us(&b, TILED);
	split_us = tiled_us < 0 ? -1 : time_us(&b, TILED_SPLIT);
	teardown(&b);
	if (split_us < 0) {
		fprintf(stderr, "bench_prefill_attn: %s T %u@%u failed\n",
			s->name, t, start);
		return -1;
	}
	flops = 2.0 * t * (2.0 * start + t) * s->hq * s->d;
	floor_us = flops / (PEAK_TFLOPS * 1e12) * 1e6;
	printf("%s (Hq %u Hkv %u D %u), T %u@%u: row kernel %.1f us, "
	       "o1_attention_cuda %.1f us (tiled %s alone %.1f us unsplit, "
	       "%.1f us split), %.1fx; floor %.1f us (%.2f GFLOP at %.0f "
	       "TFLOP/s), new at %.0f%% of it (%.0f TFLOP/s); max |new - "
	       "old| %.3g\n",
	       s->name, s->hq, s->hkv, s->d, t, start, old_us, new_us,
	       variants[variant], tiled_us, split_us, old_us / new_us, floor_us,
	       flops / 1e9, PEAK_TFLOPS, 100.0 * floor_us / new_us,
	       flops / (new_us * 1e6), diff);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct shape shapes[] = {
	    {"qwen2.5-0.5b", 14, 2, 64},
	    {"llama3.2-1b", 32, 8, 64},
	    {"llama3-8b", 32, 8, 128},
	};
	uint32_t ts[16] = {512, 2048}, starts[16] = {0, 0}, n_t = 2;
	uint32_t variant = O1_ATTN_PF_DEFAULT;
	int rc = 0, first = 1;

	if (o1_cuda_probe() != 0) {
		fprintf(stderr, "bench_prefill_attn: no CUDA device\n");
		return 1;
	}
	if (argc > 2 && !strcmp(argv[1], "--variant")) {
		char *end;

		variant = (uint32_t)strtoul(argv[2], &end, 10);
		if (*end || end == argv[2])
			for (variant = 0; variant < O1_ATTN_PF_VARIANTS &&
					  strcmp(variants[variant], argv[2]);
			     variant++)
				;
		if (variant >= O1_ATTN_PF_VARIANTS) {
			fprintf(stderr, "bench_prefill_attn: no variant %s\n",
				argv[2]);
			return 2;
		}
		first = 3;
	}
	if (argc > first) {
		n_t = 0;
		for (int i = first; i < argc && n_t < 16; i++) {
			char *end;
			long v = strtol(argv[i], &end, 10), at = 0;

			if (*end == '@')
				at = strtol(end + 1, &end, 10);
			if (*end || v < 1 || v > 65536 || at < 0 ||
			    at > 65536) {
				fprintf(stderr,
					"usage: bench_prefill_attn "
					"[--variant V] [T[@START]...] (1 <= "
					"T <= 65536, START <= 65536)\n");
				return 2;
			}
			starts[n_t] = (uint32_t)at, ts[n_t++] = (uint32_t)v;
		}
	}
	for (uint32_t i = 0; i < n_t; i++)
		for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++)
			rc |=
			    run(&shapes[k], ts[i], starts[i], variant) ? 1 : 0;
	return rc;
}

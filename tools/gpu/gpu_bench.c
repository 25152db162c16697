/* The GPU benchmarks' shared measurements (gpu_bench.h). */
#include "gpu_bench.h"

#include <stdlib.h>
#include <string.h>

static uint64_t rng = 12345;

double gpu_bench_copy_gbs(size_t bytes)
{
	void *a = NULL, *b = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float ms, best = 1e30f;
	double gbs = 0;

	if (cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes) ||
	    cudaEventCreate(&e0) || cudaEventCreate(&e1) ||
	    cudaMemset(a, 1, bytes))
		goto out;
	for (int i = 0; i < 10; i++) {
		cudaEventRecord(e0, 0);
		cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
		cudaEventRecord(e1, 0);
		if (cudaEventSynchronize(e1) ||
		    cudaEventElapsedTime(&ms, e0, e1))
			goto out;
		best = ms < best ? ms : best;
	}
	gbs = 2.0 * (double)bytes / (best * 1e-3) / 1e9;
out:
	cudaEventDestroy(e0), cudaEventDestroy(e1);
	cudaFree(a), cudaFree(b);
	return gbs;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

double gpu_bench_graph_us(cudaStream_t st, uint32_t iters, int replays,
			  gpu_bench_launch launch, void *ctx)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float *ms = calloc(replays > 0 ? (size_t)replays : 1, sizeof(float));
	double us = -1;
	int err = 0;

	if (!ms || replays < 1 || !iters ||
	    cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal))
		goto out;
	for (uint32_t i = 0; !err && i < iters; i++)
		err = launch(ctx, i, st);
	if (cudaStreamEndCapture(st, &g) || err ||
	    cudaGraphInstantiate(&ge, g, 0) || cudaEventCreate(&e0) ||
	    cudaEventCreate(&e1))
		goto out;
	for (int r = -1; r < replays; r++) {
		float t = 0;

		cudaEventRecord(e0, st);
		cudaGraphLaunch(ge, st);
		cudaEventRecord(e1, st);
		if (cudaEventSynchronize(e1) ||
		    cudaEventElapsedTime(&t, e0, e1))
			goto out;
		if (r >= 0)
			ms[r] = t;
	}
	qsort(ms, (size_t)replays, sizeof(float), cmp_float);
	us = ms[replays / 2] * 1e3 / iters;
out:
	if (ge)
		cudaGraphExecDestroy(ge);
	if (g)
		cudaGraphDestroy(g);
	cudaEventDestroy(e0), cudaEventDestroy(e1);
	free(ms);
	return us;
}

uint64_t gpu_bench_rand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return rng;
}

float gpu_bench_frand(void)
{
	return (float)((gpu_bench_rand() >> 40) / (double)(1 << 24)) * 2 - 1;
}

uint16_t gpu_bench_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

float gpu_bench_f32(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

int gpu_bench_upload(void *dst, const void *src, size_t bytes)
{
	return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) ? -1 : 0;
}

int gpu_bench_upload_random(void *dst, size_t n, int f32)
{
	size_t chunk = (size_t)1 << 22, es = f32 ? 4 : 2;
	void *h = malloc(chunk * es);
	int err = h ? 0 : -1;

	for (size_t i = 0; !err && i < chunk; i++)
		if (f32)
			((float *)h)[i] = gpu_bench_frand() * 2;
		else
			((uint16_t *)h)[i] =
			    gpu_bench_bf16(gpu_bench_frand() * 2);
	for (size_t o = 0; !err && o < n; o += chunk)
		err = gpu_bench_upload((char *)dst + o * es, h,
				       (n - o < chunk ? n - o : chunk) * es);
	free(h);
	return err;
}

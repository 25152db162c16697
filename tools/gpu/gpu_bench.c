/* The GPU benchmarks' shared measurements (gpu_bench.h). */
#include "gpu_bench.h"

#include <stdlib.h>

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

/* bench_launch: what a step between two dependent products costs, by
 * itself, on this GPU (issue 18's small models are launch-bound: ~5 us a
 * kernel, 123 kernels a qwen2.5-0.5b token, 0.11 ms of bytes in 0.66).
 *
 *   bench_launch [--steps N] [--dim D] [--weight-kb KB] [--replays R]
 *                [--smem-kb S]
 *
 * A chain of N steps, each of G blocks of 256 threads (G in 16, 33, 66,
 * 132 and the multiprocessor count, when it differs): every block reads
 * the whole vector the previous step wrote (D floats, through L2), takes
 * its RMS, reads its share of KB of weights (each step its own, 2 MiB
 * apart, so that the chain's weights exceed L2 at the defaults), and
 * writes its slice of the next vector (an element a thread at most: a
 * permutation of the input, scaled by the RMS and the weights' sum), so
 * that a step that reads its input early computes another vector. Ways:
 * - graph: N kernels captured into one CUDA graph, no PDL;
 * - pdl: the same with programmatic dependent launch (each block loads
 *   its weights, then griddepcontrol.wait, then launch_dependents: what
 *   kernels/ do);
 * - persistent: one kernel of G blocks for all N steps (G at most what
 *   the device holds at once, by the occupancy API; else skipped), a
 *   grid barrier (an atomic count in global memory, thread 0 of each
 *   block spinning on an acquire load) between steps, the next step's
 *   weights loaded before the barrier;
 * - empty-pdl: N kernels with PDL doing nothing but the wait and the
 *   trigger (the chain's floor with kernels).
 * Each way's final vector is checked against the same chain on the CPU
 * (relative L2 <= 1e-4: f32 sums in another order and rsqrtf against
 * 1/sqrt, over N normalizations that keep the vector at unit RMS); a way
 * that fails prints FAIL and no time. Time: one graph of the whole chain
 * replayed R times (default 20) after a warm-up, the median over N (us
 * a step). RESULT lines: way, G, D, KB, us a step, us a chain.
 * --smem-kb S: every step kernel (graph, pdl, empty-pdl) also takes S KB
 * of dynamic shared memory it does not use, as the decode products take
 * theirs: above half a multiprocessor's, the next kernel's block cannot
 * start beside this one's on its multiprocessor, so PDL's early launch
 * finds no room there (whether that is what a decode kernel's ~5 us
 * beyond this bench's ~2 is). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "gpu_bench.h"
#include "kernels/cuda_launch.h"

#define THREADS	   256
#define WEIGHT_GAP (2u << 20) /* bytes between two steps' weights */

struct chain {
	float *v[2];	   /* ping-pong vectors, D floats each */
	const float4 *w;   /* the weights: step s at s * WEIGHT_GAP */
	unsigned *count;   /* the persistent way's barrier */
	uint32_t d, wq;	   /* dim, weight float4s a step */
	uint32_t steps, g; /* N, G */
};

/* The input element step S's output I takes: (I * STRIDE + S) mod D, a
 * permutation since main picks STRIDE coprime with D. */
static __host__ __device__ uint32_t source(uint32_t i, uint32_t s, uint32_t d,
					   uint32_t stride)
{
	return (uint32_t)(((uint64_t)i * stride + s) % d);
}

static __device__ float block_sum(float x, float *red)
{
	for (int o = 16; o; o >>= 1)
		x += __shfl_xor_sync(0xffffffffu, x, o);
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = x;
	__syncthreads();
	x = 0;
	for (int i = 0; i < THREADS / 32; i++)
		x += red[i];
	return x;
}

/* This block's share of step S's weights, summed (the loads issued; the
 * sum is used after the input is read). */
static __device__ float weights(const chain &c, uint32_t s)
{
	const float4 *w = c.w + (size_t)s * (WEIGHT_GAP / 16);
	uint32_t per = (c.wq + c.g - 1) / c.g, b0 = blockIdx.x * per;
	float a = 0;

	for (uint32_t i = b0 + threadIdx.x; i < b0 + per && i < c.wq;
	     i += THREADS) {
		float4 q = __ldcs(w + i);

		a += q.x + q.y + q.z + q.w;
	}
	return a;
}

/* Step S given this thread's weight sum WA: reads v[s & 1] (L2), writes
 * this block's slice of v[~s & 1]. */
static __device__ void step(const chain &c, uint32_t s, uint32_t stride,
			    float wa, float *red)
{
	const float *x = c.v[s & 1];
	float *y = c.v[(s + 1) & 1];
	uint32_t per = (c.d + c.g - 1) / c.g, i0 = blockIdx.x * per;
	float ss = 0, ws;

	for (uint32_t i = threadIdx.x; i < c.d; i += THREADS) {
		float v = __ldcg(x + i);

		ss += v * v;
	}
	ss = block_sum(ss, red);
	/* the weights only enter as a term that is 0 for the data uploaded
	 * (zeros), so that the check does not depend on their order */
	ws = block_sum(wa, red);
	for (uint32_t i = i0 + threadIdx.x; i < i0 + per && i < c.d;
	     i += THREADS)
		__stcg(y + i, __ldcg(x + source(i, s, c.d, stride)) *
				      rsqrtf(ss / (float)c.d + 1e-6f) +
				  ws);
}

static __global__ void __launch_bounds__(THREADS)
    chain_step(chain c, uint32_t s, uint32_t stride)
{
	__shared__ float red[THREADS / 32];
	float wa = weights(c, s);

	o1_pdl_wait();
	o1_pdl_trigger();
	step(c, s, stride, wa, red);
}

static __global__ void __launch_bounds__(THREADS) empty_step(void)
{
	o1_pdl_wait();
	o1_pdl_trigger();
}

/* Waits until every block of the grid has arrived TARGET times in all. */
static __device__ void grid_barrier(unsigned *count, unsigned target)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned v;

		asm volatile(
		    "red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count)
		    : "memory");
		do
			asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
				     : "=r"(v)
				     : "l"(count)
				     : "memory");
		while (v < target);
	}
	__syncthreads();
}

static __global__ void __launch_bounds__(THREADS)
    chain_persistent(chain c, uint32_t stride)
{
	__shared__ float red[THREADS / 32];
	float wa = weights(c, 0);

	for (uint32_t s = 0; s < c.steps; s++) {
		step(c, s, stride, wa, red);
		if (s + 1 < c.steps) {
			wa = weights(c, s + 1);
			grid_barrier(c.count, (s + 1) * c.g);
		}
	}
}

enum way { W_GRAPH, W_PDL, W_PERSISTENT, W_EMPTY, W_N };
static const char *way_name[W_N] = {"graph", "pdl", "persistent", "empty-pdl"};

struct run {
	chain c;
	way w;
	uint32_t stride;
	uint32_t smem; /* bytes of dynamic shared memory a step kernel */
	const float *x0; /* the input, uploaded first in each replay */
};

static int launch(void *ctx, uint32_t i, cudaStream_t st)
{
	run *r = (run *)ctx;
	cudaError_t e = cudaSuccess;

	if (i == 0) {
		e = cudaMemcpyAsync(r->c.v[0], r->x0, r->c.d * sizeof(float),
				    cudaMemcpyDeviceToDevice, st);
		if (!e && r->w == W_PERSISTENT)
			e = cudaMemsetAsync(r->c.count, 0, sizeof(unsigned),
					    st);
	}
	if (e)
		return -1;
	switch (r->w) {
	case W_GRAPH:
	case W_PDL:
		e = o1_launch(chain_step, dim3(r->c.g), dim3(THREADS), r->smem,
			      st, r->w == W_PDL, r->c, i, r->stride);
		break;
	case W_EMPTY:
		e = o1_launch(empty_step, dim3(r->c.g), dim3(THREADS), r->smem,
			      st, true);
		break;
	default:
		/* the barrier's premise: all G blocks resident at once (main
		 * checked the occupancy; nothing else runs beside the graph) */
		e = o1_launch(chain_persistent, dim3(r->c.g), dim3(THREADS), 0,
			      st, false, r->c, r->stride);
	}
	if (e)
		fprintf(stderr, "launch %s: %s\n", way_name[r->w],
			cudaGetErrorString(e));
	return e ? -1 : 0;
}

static uint32_t gcd(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t t = a % b;

		a = b, b = t;
	}
	return a;
}

/* The chain on the CPU (the weights are zeros: their term is 0). */
static std::vector<float> cpu_chain(std::vector<float> x, uint32_t steps,
				    uint32_t stride)
{
	uint32_t d = (uint32_t)x.size();
	std::vector<float> y(d);

	for (uint32_t s = 0; s < steps; s++) {
		double ss = 0;

		for (float v : x)
			ss += (double)v * v;
		for (uint32_t i = 0; i < d; i++)
			y[i] = (float)(x[source(i, s, d, stride)] /
				       sqrt(ss / d + 1e-6));
		x.swap(y);
	}
	return x;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"steps", required_argument, NULL, 'n'},
	    {"dim", required_argument, NULL, 'd'},
	    {"weight-kb", required_argument, NULL, 'w'},
	    {"replays", required_argument, NULL, 'r'},
	    {"smem-kb", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0}};
	uint32_t steps = 120, d = 896, kb = 512, stride = 7, smem_kb = 0;
	int replays = 20, o, sms = 0, fails = 0;
	cudaStream_t st;
	float *x0, *v0, *v1;
	void *w;
	unsigned *count;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		long v = optarg ? strtol(optarg, NULL, 10) : 0;

		if (o == 'n' && v >= 2 && v <= 4096)
			steps = (uint32_t)v;
		else if (o == 'd' && v >= 1 && v <= (1 << 16))
			d = (uint32_t)v;
		else if (o == 'w' && v >= 0 && v <= 2048)
			kb = (uint32_t)v;
		else if (o == 'r' && v >= 1 && v <= 1000)
			replays = (int)v;
		else if (o == 's' && v >= 0 && v <= 200)
			smem_kb = (uint32_t)v;
		else {
			fprintf(stderr,
				"usage: bench_launch [--steps 2..4096] "
				"[--dim 1..65536] [--weight-kb 0..2048] "
				"[--replays 1..1000] [--smem-kb 0..200]\n");
			return 2;
		}
	}
	while (gcd(stride, d) != 1)
		stride += 2;
	if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) ||
	    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) ||
	    cudaMalloc(&x0, d * sizeof(float)) ||
	    cudaMalloc(&v0, d * sizeof(float)) ||
	    cudaMalloc(&v1, d * sizeof(float)) ||
	    cudaMalloc(&count, sizeof(unsigned)) ||
	    cudaMalloc(&w, (size_t)steps * WEIGHT_GAP) ||
	    cudaMemset(w, 0, (size_t)steps * WEIGHT_GAP) ||
	    cudaFuncSetAttribute(chain_step,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)(smem_kb << 10)) ||
	    cudaFuncSetAttribute(empty_step,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)(smem_kb << 10))) {
		fprintf(stderr, "bench_launch: no device memory\n");
		return 1;
	}
	std::vector<float> x(d);
	for (float &v : x)
		v = gpu_bench_frand();
	if (gpu_bench_upload(x0, x.data(), d * sizeof(float)))
		return 1;
	std::vector<float> want = cpu_chain(x, steps, stride);

	printf("# %d multiprocessors, %u steps, dim %u, %u KB of weights a "
	       "step (%.1f MB a chain), %d replays, %u KB of shared memory a "
	       "step kernel\n",
	       sms, steps, d, kb, steps * kb / 1024.0, replays, smem_kb);
	std::vector<uint32_t> grids = {16, 33, 66, 132};
	if (sms != 132)
		grids.push_back((uint32_t)sms);
	for (uint32_t g : grids)
		for (int wy = 0; wy < W_N; wy++) {
			int fit = 0;

			if (wy == W_PERSISTENT &&
			    (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
				 &fit, chain_persistent, THREADS, 0) ||
			     (uint64_t)fit * sms < g)) {
				printf("RESULT %s %u %u %u skipped: %d a "
				       "multiprocessor\n",
				       way_name[wy], g, d, kb, fit);
				continue;
			}
			run r = {{{v0, v1},
				  (const float4 *)w,
				  count,
				  d,
				  kb * 1024 / 16,
				  steps,
				  g},
				 (way)wy,
				 stride,
				 smem_kb << 10,
				 x0};
			double us = gpu_bench_graph_us(
			    st, wy == W_PERSISTENT ? 1 : steps, replays, launch,
			    &r);
			std::vector<float> got(d);
			double e2 = 0, n2 = 0;

			if (us < 0) {
				printf("RESULT %s %u %u %u FAIL launch\n",
				       way_name[wy], g, d, kb);
				fails++;
				continue;
			}
			if (wy == W_PERSISTENT)
				us /= steps;
			if (wy != W_EMPTY) {
				if (cudaMemcpy(got.data(), steps & 1 ? v1 : v0,
					       d * sizeof(float),
					       cudaMemcpyDeviceToHost))
					return 1;
				for (uint32_t i = 0; i < d; i++)
					e2 += (got[i] - want[i]) *
					      (double)(got[i] - want[i]),
					    n2 += (double)want[i] * want[i];
				if (!(sqrt(e2 / n2) <= 1e-4)) {
					printf("RESULT %s %u %u %u FAIL rel "
					       "L2 %.3g\n",
					       way_name[wy], g, d, kb,
					       sqrt(e2 / n2));
					fails++;
					continue;
				}
			}
			printf("RESULT %s %u %u %u %.3f %.1f\n", way_name[wy],
			       g, d, kb, us, us * steps);
			fflush(stdout);
		}
	return fails ? 1 : 0;
}

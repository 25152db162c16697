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
 *   trigger (the chain's floor with kernels);
 * - persistent-async: the persistent way, but the next step's weights are
 *   copied into shared memory (cp.async, by warps 1-7, so that thread 0's
 *   release does not wait for them) and only waited for once the step's
 *   input is read after the barrier: their latency overlaps the barrier,
 *   as a PDL kernel's loads overlap the previous kernel (the persistent
 *   way above sums them before it arrives);
 * - persistent-flags: persistent-async with a barrier of flags: each
 *   block stores its step count to its own word (a release store, no
 *   atomic on one word), and G threads of every block each poll one
 *   block's word (acquire loads), then a block barrier: what a persistent
 *   decode kernel whose products wait on their inputs' flags would pay.
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
#include "kernels/mma_dev.h"

#define THREADS	   256
#define WEIGHT_GAP (2u << 20) /* bytes between two steps' weights */
#define MAX_GRID   1024	      /* persistent-flags: blocks at most */

struct chain {
	float *v[2];	   /* ping-pong vectors, D floats each */
	const float4 *w;   /* the weights: step s at s * WEIGHT_GAP */
	unsigned *count;   /* the persistent ways' barrier */
	unsigned *flags;   /* persistent-flags: a word a block */
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

/* This block's share of a step's weights: its float4s from *B0. */
static __device__ uint32_t weight_share(const chain &c, uint32_t *b0)
{
	uint32_t per = (c.wq + c.g - 1) / c.g;

	*b0 = blockIdx.x * per;
	return *b0 >= c.wq ? 0 : per < c.wq - *b0 ? per : c.wq - *b0;
}

/* This block's share of step S's weights, summed (the loads issued; the
 * sum is used after the input is read). */
static __device__ float weights(const chain &c, uint32_t s)
{
	const float4 *w = c.w + (size_t)s * (WEIGHT_GAP / 16);
	uint32_t b0, n = weight_share(c, &b0);
	float a = 0;

	for (uint32_t i = threadIdx.x; i < n; i += THREADS) {
		float4 q = __ldcs(w + b0 + i);

		a += q.x + q.y + q.z + q.w;
	}
	return a;
}

/* This thread's share of the sum of squares of step S's input v[s & 1]
 * (read through L2). */
static __device__ float input_squares(const chain &c, uint32_t s)
{
	const float *x = c.v[s & 1];
	float ss = 0;

	for (uint32_t i = threadIdx.x; i < c.d; i += THREADS) {
		float v = __ldcg(x + i);

		ss += v * v;
	}
	return ss;
}

/* Step S given this thread's shares SS (input_squares) and WA (its
 * weight sum): writes this block's slice of v[~s & 1]. */
static __device__ void step_out(const chain &c, uint32_t s, uint32_t stride,
				float ss, float wa, float *red)
{
	const float *x = c.v[s & 1];
	float *y = c.v[(s + 1) & 1];
	uint32_t per = (c.d + c.g - 1) / c.g, i0 = blockIdx.x * per;
	float ws;

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

/* Step S given this thread's weight sum WA: reads v[s & 1] (L2), writes
 * this block's slice of v[~s & 1]. */
static __device__ void step(const chain &c, uint32_t s, uint32_t stride,
			    float wa, float *red)
{
	step_out(c, s, stride, input_squares(c, s), wa, red);
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

/* This block's share of step S's weights (weights()'s) copied into W by
 * the threads of warps 1-7 (cp.async; warp 0 issues none, so that thread
 * 0's release in the barrier that follows has no copy to wait for). */
static __device__ void weights_copy(const chain &c, uint32_t s, float4 *w)
{
	const float4 *src = c.w + (size_t)s * (WEIGHT_GAP / 16);
	uint32_t b0, n = weight_share(c, &b0);

	if (threadIdx.x >= 32)
		for (uint32_t i = threadIdx.x - 32; i < n; i += THREADS - 32)
			mma_cp16(w + i, src + b0 + i, 16);
	mma_cp_commit();
}

/* weights_copy's W summed, once its copies landed (every thread). */
static __device__ float weights_landed(const chain &c, const float4 *w)
{
	uint32_t b0, n = weight_share(c, &b0);
	float a = 0;

	mma_cp_wait<0>();
	__syncthreads();
	for (uint32_t i = threadIdx.x; i < n; i += THREADS) {
		float4 q = w[i];

		a += q.x + q.y + q.z + q.w;
	}
	return a;
}

/* Waits until every block of the grid has stored TARGET (or more) to its
 * word of FLAGS: thread 0 stores this block's, threads 0..G-1 poll one
 * block's each. */
static __device__ void flag_barrier(unsigned *flags, uint32_t g,
				    unsigned target)
{
	__syncthreads();
	if (threadIdx.x == 0)
		asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(
				 flags + blockIdx.x),
			     "r"(target)
			     : "memory");
	for (uint32_t b = threadIdx.x; b < g; b += THREADS) {
		unsigned v;

		do
			asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
				     : "=r"(v)
				     : "l"(flags + b)
				     : "memory");
		while (v < target);
	}
	__syncthreads();
}

/* persistent-async (FLAGS false) and persistent-flags: the next step's
 * weights in flight across the barrier (dynamic shared memory: a block's
 * share of a step's weights). */
template <bool FLAGS>
static __global__ void __launch_bounds__(THREADS)
    chain_persistent_async(chain c, uint32_t stride)
{
	extern __shared__ float4 wbuf[];
	__shared__ float red[THREADS / 32];

	weights_copy(c, 0, wbuf);
	for (uint32_t s = 0; s < c.steps; s++) {
		float ss = input_squares(c, s);

		/* every thread past its reads of WBUF (step_out's barriers)
		 * before the next step's copies overwrite it */
		step_out(c, s, stride, ss, weights_landed(c, wbuf), red);
		if (s + 1 < c.steps) {
			__syncthreads();
			weights_copy(c, s + 1, wbuf);
			if (FLAGS)
				flag_barrier(c.flags, c.g, s + 1);
			else
				grid_barrier(c.count, (s + 1) * c.g);
		}
	}
}

enum way { W_GRAPH, W_PDL, W_PERSISTENT, W_EMPTY, W_ASYNC, W_FLAGS, W_N };
static const char *way_name[W_N] = {
    "graph",	       "pdl", "persistent", "empty-pdl", "persistent-async",
    "persistent-flags"};

/* The way's kernel, where it is one persistent kernel (else NULL). */
static const void *persistent_kernel(way w)
{
	return w == W_PERSISTENT ? (const void *)chain_persistent
	       : w == W_ASYNC	 ? (const void *)chain_persistent_async<false>
	       : w == W_FLAGS	 ? (const void *)chain_persistent_async<true>
				 : NULL;
}

struct run {
	chain c;
	way w;
	uint32_t stride;
	uint32_t smem; /* bytes of dynamic shared memory a step kernel */
	uint32_t wsmem;	 /* persistent-async/-flags: a block's weight bytes */
	const float *x0; /* the input, uploaded first in each replay */
};

static int launch(void *ctx, uint32_t i, cudaStream_t st)
{
	run *r = (run *)ctx;
	cudaError_t e = cudaSuccess;

	if (i == 0) {
		e = cudaMemcpyAsync(r->c.v[0], r->x0, r->c.d * sizeof(float),
				    cudaMemcpyDeviceToDevice, st);
		if (!e && persistent_kernel(r->w))
			e = cudaMemsetAsync(r->c.count, 0, sizeof(unsigned),
					    st);
		if (!e && r->w == W_FLAGS)
			e = cudaMemsetAsync(r->c.flags, 0,
					    r->c.g * sizeof(unsigned), st);
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
	case W_ASYNC:
		e = o1_launch(chain_persistent_async<false>, dim3(r->c.g),
			      dim3(THREADS), r->wsmem, st, false, r->c,
			      r->stride);
		break;
	case W_FLAGS:
		e = o1_launch(chain_persistent_async<true>, dim3(r->c.g),
			      dim3(THREADS), r->wsmem, st, false, r->c,
			      r->stride);
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
	unsigned *count, *flags;
	uint32_t wq, wsmem_max;

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
	/* the largest block share of a step's weights: the smallest grid's */
	wq = kb * 1024 / 16;
	wsmem_max = (wq + 15) / 16 * 16;
	if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) ||
	    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) ||
	    cudaMalloc(&x0, d * sizeof(float)) ||
	    cudaMalloc(&v0, d * sizeof(float)) ||
	    cudaMalloc(&v1, d * sizeof(float)) ||
	    cudaMalloc(&count, sizeof(unsigned)) ||
	    cudaMalloc(&flags, MAX_GRID * sizeof(unsigned)) ||
	    cudaMalloc(&w, (size_t)steps * WEIGHT_GAP) ||
	    cudaMemset(w, 0, (size_t)steps * WEIGHT_GAP) ||
	    cudaFuncSetAttribute(chain_step,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)(smem_kb << 10)) ||
	    cudaFuncSetAttribute(empty_step,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)(smem_kb << 10)) ||
	    cudaFuncSetAttribute(chain_persistent_async<false>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)wsmem_max) ||
	    cudaFuncSetAttribute(chain_persistent_async<true>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)wsmem_max)) {
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
			const void *pk = persistent_kernel((way)wy);
			/* persistent-async/-flags: a block's weight share */
			uint32_t wsmem = wy == W_ASYNC || wy == W_FLAGS
					     ? (wq + g - 1) / g * 16
					     : 0;
			int fit = 0;

			if (pk &&
			    (g > MAX_GRID ||
			     cudaOccupancyMaxActiveBlocksPerMultiprocessor(
				 &fit, pk, THREADS, wsmem) ||
			     (uint64_t)fit * sms < g)) {
				printf("RESULT %s %u %u %u skipped: %d a "
				       "multiprocessor\n",
				       way_name[wy], g, d, kb, fit);
				continue;
			}
			run r = {{{v0, v1},
				  (const float4 *)w,
				  count,
				  flags,
				  d,
				  wq,
				  steps,
				  g},
				 (way)wy,
				 stride,
				 smem_kb << 10,
				 wsmem,
				 x0};
			double us = gpu_bench_graph_us(st, pk ? 1 : steps,
						       replays, launch, &r);
			std::vector<float> got(d);
			double e2 = 0, n2 = 0;

			if (us < 0) {
				printf("RESULT %s %u %u %u FAIL launch\n",
				       way_name[wy], g, d, kb);
				fails++;
				continue;
			}
			if (pk)
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

/* Kernel launches for the .cu files (C++ only): an ordinary launch or a
 * programmatic dependent launch (PDL, Hopper and later).
 *
 * PDL. A kernel launched with PDL may start while the stream's previous
 * kernel still runs: as soon as every block of that kernel has called
 * o1_pdl_trigger or exited. So every block of a PDL kernel calls
 * o1_pdl_wait before it reads anything an earlier kernel of the stream
 * wrote and before it writes anything (the wait returns once the previous
 * kernel has completed and its writes are visible); before the wait it may
 * only read what no kernel of this step writes (weights; step inputs
 * uploaded before the step's first kernel; the KV rows of earlier steps'
 * tokens, also complete before the step's upload) and prefetch. Every kernel here that can be
 * launched with PDL waits in every block, early exits included, so its
 * completion implies its predecessors': the chain is ordered end to end.
 * o1_pdl_trigger only lets the next kernel launch (it orders no memory),
 * so triggering early is always safe; the kernels here trigger right after
 * their wait, and the next kernel's blocks then start on the free
 * multiprocessors (and prefetch their weights) while this one works.
 * Without PDL both calls return at once, and below compute capability 9.0
 * they compile to nothing (the CUDA backend launches with PDL on 9.0 and
 * later only). Stream capture records a PDL launch as a programmatic edge
 * of the graph (CUDA 12.3 and later), so replayed graphs overlap too.
 */
#ifndef O1_CUDA_LAUNCH_H
#define O1_CUDA_LAUNCH_H

#ifndef __CUDACC__
#error "cuda_launch.h is for .cu files"
#endif

#include <stdint.h>

#include <utility>

#include <cuda_runtime.h>

#include "cuda_util.h"

/* Waits for the stream's previous kernel (PDL; at once without). */
static inline __device__ void o1_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lets the stream's next kernel launch (PDL; nothing without). */
static inline __device__ void o1_pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Asks the copy engine to bring BYTES (a multiple of 16) at P (global
 * memory, 16-byte aligned) into L2; the thread goes on at once. */
static inline __device__ void o1_prefetch_l2(const void *p, uint32_t bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(
			 __cvta_generic_to_global(p)),
		     "r"(bytes)
		     : "memory");
#endif
}

/* Launches KERNEL over GRID x BLOCK threads in thread block clusters of
 * CLUSTER blocks (1 x 1 x 1: none) with SMEM bytes of dynamic shared
 * memory on STREAM, with PDL when PDL is set. The launch error, if any,
 * is returned and cleared from the thread's last error. */
template <typename... P, typename... A>
static cudaError_t o1_launch_cl(void (*kernel)(P...), dim3 grid, dim3 block,
				dim3 cluster, size_t smem, cudaStream_t stream,
				bool pdl, A &&...args)
{
	cudaLaunchAttribute attr[2];
	cudaLaunchConfig_t cfg = {};
	cudaError_t err, last;
	unsigned n = 0;

	if (pdl) {
		attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		attr[n++].val.programmaticStreamSerializationAllowed = 1;
	}
	if (cluster.x * cluster.y * cluster.z > 1) {
		attr[n].id = cudaLaunchAttributeClusterDimension;
		attr[n].val.clusterDim.x = cluster.x;
		attr[n].val.clusterDim.y = cluster.y;
		attr[n++].val.clusterDim.z = cluster.z;
	}
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = stream;
	cfg.attrs = n ? attr : NULL;
	cfg.numAttrs = n;
	err = cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
	last = cudaGetLastError();
	return err != cudaSuccess ? err : last;
}

/* o1_launch_cl without clusters. */
template <typename... P, typename... A>
static cudaError_t o1_launch(void (*kernel)(P...), dim3 grid, dim3 block,
			     size_t smem, cudaStream_t stream, bool pdl,
			     A &&...args)
{
	return o1_launch_cl(kernel, grid, block, dim3(1, 1, 1), smem, stream,
			    pdl, std::forward<A>(args)...);
}

/* o1_launch (arguments after NAME) checked: 0, or -O1_E_CUDA logged as
 * NAME with the caller's file:line. */
#define O1_CUDA_LAUNCH(name, ...)                                              \
	o1_cuda_check(o1_launch(__VA_ARGS__), (name), __FILE__, __LINE__)
/* The same for o1_launch_cl. */
#define O1_CUDA_LAUNCH_CL(name, ...)                                           \
	o1_cuda_check(o1_launch_cl(__VA_ARGS__), (name), __FILE__, __LINE__)

#endif

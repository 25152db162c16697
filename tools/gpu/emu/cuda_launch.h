/* kernels/cuda_launch.h for the CPU emulation (emu.h): a .cu file copied
 * out of kernels/ (as run_decode.sh and run_quant.sh do) finds this one
 * first. PDL's wait and trigger and the L2 prefetch do nothing
 * (launches run one after the other, as below compute capability 9.0), and
 * a launch runs the kernel over its grid at once, one block at a time in a
 * shuffled order (emu_launch_grid: any grid, each block within emu.cc's
 * MAX_FIBERS threads); a launch in clusters runs each cluster's blocks
 * together (emu_launch_grid_cl). */
#ifndef O1_CUDA_LAUNCH_H
#define O1_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "emu.h"

static inline void o1_pdl_wait(void)
{
}

static inline void o1_pdl_trigger(void)
{
}

static inline void o1_prefetch_l2(const void *p, uint32_t bytes)
{
	(void)p, (void)bytes;
}

/* o1_launch's arguments after NAME (a template kernel's commas stay
 * inside the variadic part): KERNEL, GRID, BLOCK, SMEM, STREAM, PDL, then
 * the kernel's arguments. */
template <typename... P, typename... A>
static int emu_o1_launch(void (*kernel)(P...), dim3 grid, dim3 block,
			 size_t smem, cudaStream_t stream, bool pdl, A... args)
{
	(void)stream, (void)pdl;
	emu_launch_grid(grid, block, smem, [=]() { kernel(args...); });
	return 0;
}

/* o1_launch_cl's: in clusters of CLUSTER blocks (emu_launch_grid_cl). */
template <typename... P, typename... A>
static int emu_o1_launch_cl(void (*kernel)(P...), dim3 grid, dim3 block,
			    dim3 cluster, size_t smem, cudaStream_t stream,
			    bool pdl, A... args)
{
	(void)stream, (void)pdl;
	emu_launch_grid_cl(grid, block, cluster, smem,
			   [=]() { kernel(args...); });
	return 0;
}

#define O1_CUDA_LAUNCH(name, ...) ((void)(name), emu_o1_launch(__VA_ARGS__))
#define O1_CUDA_LAUNCH_CL(name, ...)                                           \
	((void)(name), emu_o1_launch_cl(__VA_ARGS__))

#endif

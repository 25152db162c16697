/* kernels/cuda_launch.h for the CPU emulation (emu.h): a .cu file copied
 * out of kernels/ (as run_quant.sh does) finds this one first. Launches
 * run at once through emu_launch, a grid of GRID.X blocks as one cluster
 * (at most emu.cc's MAX_FIBERS threads in all); PDL and the L2 prefetch
 * are no-ops, as they are below compute capability 9.0. */
#ifndef O1_EMU_CUDA_LAUNCH_H
#define O1_EMU_CUDA_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_util.h"
#include "emu.h"

struct dim3 {
	unsigned x, y, z;

	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c)
	{
	}
};

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

template <typename... P, typename... A>
static int emu_o1_launch(void (*kernel)(P...), dim3 grid, dim3 block,
			 size_t smem, cudaStream_t stream, bool pdl, A... args)
{
	(void)stream, (void)pdl;
	emu_launch(grid.x, grid.y, block.x, smem, [=]() { kernel(args...); });
	return 0;
}

#define O1_CUDA_LAUNCH(name, ...) ((void)(name), emu_o1_launch(__VA_ARGS__))

#endif

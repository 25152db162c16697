/* kernels/cuda_launch.h for the CPU emulation (emu.h): PDL's wait and
 * trigger and the L2 prefetch do nothing (launches run one after the
 * other), and a launch runs the kernel over its grid at once, one block at
 * a time (emu_launch_grid). */
#ifndef O1_CUDA_LAUNCH_H
#define O1_CUDA_LAUNCH_H

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

/* NAME, KERNEL, GRID, BLOCK, SMEM, STREAM, PDL, then the arguments. */
#define O1_CUDA_LAUNCH(name, kernel, grid, block, smem, stream, pdl, ...)      \
	((void)(name), (void)(stream), (void)(pdl),                            \
	 emu_launch_grid((grid), (block), (smem),                              \
			 [=]() { (kernel)(__VA_ARGS__); }),                    \
	 0)

#endif

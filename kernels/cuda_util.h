/* CUDA error checking shared by the kernels and the CUDA backend: every
 * runtime call and every launch goes through O1_CUDA_CHECK, which logs the
 * failing expression with the caller's file:line and turns the error into
 * -O1_E_CUDA. Nothing here exits or aborts. For the kernels' launchers
 * (C++), the multiprocessor count their grids are sized by. */
#ifndef O1_CUDA_UTIL_H
#define O1_CUDA_UTIL_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returns 0 for cudaSuccess, else logs WHAT at FILE:LINE and returns
 * -O1_E_CUDA. */
int o1_cuda_check(cudaError_t err, const char *what, const char *file,
		  int line);

/* Returns 0 when a CUDA device is usable, -O1_E_UNSUPPORTED (not logged)
 * when cudaGetDeviceCount fails or finds none: tests skip on that. */
int o1_cuda_probe(void);

#ifdef __cplusplus
}

#include <atomic>

#include <stdint.h>

enum { O1_CUDA_SM_DEVICES = 64 }; /* devices whose count is cached */

/* Multiprocessors of the current device, asked of the runtime once per
 * device (per translation unit); 132, an H200's, when the runtime cannot
 * say, since a grid size is never worth an error. */
static inline uint32_t o1_cuda_sm_count(void)
{
	static std::atomic<int> cached[O1_CUDA_SM_DEVICES];
	int dev = 0, n = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 ||
	    dev >= O1_CUDA_SM_DEVICES) {
		cudaGetLastError();
		return 132;
	}
	n = cached[dev].load(std::memory_order_relaxed);
	if (!n &&
	    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) ==
		cudaSuccess &&
	    n > 0)
		cached[dev].store(n, std::memory_order_relaxed);
	if (n <= 0) {
		cudaGetLastError();
		return 132;
	}
	return (uint32_t)n;
}
#endif

#define O1_CUDA_CHECK(call) o1_cuda_check((call), #call, __FILE__, __LINE__)
/* After a kernel launch: the launch error (bad configuration). */
#define O1_CUDA_LAUNCHED(name)                                                 \
	o1_cuda_check(cudaGetLastError(), (name), __FILE__, __LINE__)

#endif

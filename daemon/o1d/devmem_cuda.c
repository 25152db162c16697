/* o1_devmem_free and o1_devmem_count through the CUDA runtime (see
 * devmem.h). */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "devmem.h"
#include "common/error.h"
#include "common/log.h"

int o1_devmem_free(uint32_t index, uint64_t *free_bytes)
{
	size_t free_b = 0, total = 0;
	cudaError_t e = cudaSetDevice((int)index);

	if (e == cudaSuccess)
		e = cudaMemGetInfo(&free_b, &total);
	if (e != cudaSuccess) {
		o1_err("cuda:%u: cannot read free memory: %s", index,
		       cudaGetErrorString(e));
		return -O1_E_CUDA;
	}
	*free_bytes = free_b;
	return 0;
}

uint32_t o1_devmem_count(char *why, size_t cap)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n <= 0) {
		snprintf(why, cap, "no CUDA device (%s)",
			 e != cudaSuccess ? cudaGetErrorString(e)
					  : "none found");
		return 0;
	}
	return (uint32_t)n;
}

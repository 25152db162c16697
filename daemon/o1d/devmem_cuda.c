/* o1_devmem_free through the CUDA runtime (see devmem.h). */
#include <cuda_runtime_api.h>

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

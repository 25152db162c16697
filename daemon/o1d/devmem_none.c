/* o1_devmem_free in a build without CUDA (see devmem.h). */
#include "devmem.h"
#include "common/error.h"

int o1_devmem_free(uint32_t index, uint64_t *free_bytes)
{
	(void)index;
	*free_bytes = 0;
	return -O1_E_UNSUPPORTED;
}

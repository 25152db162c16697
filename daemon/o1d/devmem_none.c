/* o1_devmem_free and o1_devmem_count in a build without CUDA (see
 * devmem.h). */
#include <stdio.h>

#include "devmem.h"
#include "common/error.h"

int o1_devmem_free(uint32_t index, uint64_t *free_bytes)
{
	(void)index;
	*free_bytes = 0;
	return -O1_E_UNSUPPORTED;
}

uint32_t o1_devmem_count(char *why, size_t cap)
{
	snprintf(why, cap, "this o1d is built without CUDA");
	return 0;
}

/* Free device memory, for sizing the KV pool from kv.memory_fraction. */
#ifndef O1_DEVMEM_H
#define O1_DEVMEM_H

#include <stdint.h>

/* Free bytes on CUDA device INDEX: 0, or -O1_E_UNSUPPORTED (no CUDA in
 * this build) / -O1_E_CUDA (logged). */
int o1_devmem_free(uint32_t index, uint64_t *free_bytes);

#endif

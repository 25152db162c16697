/* Free device memory, for sizing the KV pool from kv.memory_fraction. */
#ifndef O1_DEVMEM_H
#define O1_DEVMEM_H

#include <stddef.h>
#include <stdint.h>

/* Free bytes on CUDA device INDEX: 0, or -O1_E_UNSUPPORTED (no CUDA in
 * this build) / -O1_E_CUDA (logged). */
int o1_devmem_free(uint32_t index, uint64_t *free_bytes);
/* How many CUDA devices this process can use (0 without CUDA in the
 * build, or without a device or driver; never logged: no GPU is a normal
 * case for backend.device auto); why there are none into WHY (CAP). */
uint32_t o1_devmem_count(char *why, size_t cap);

#endif

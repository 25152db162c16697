/* The CUDA backend (struct o1_backend_ops o1_cuda_backend_ops, selected
 * through backend.h as O1_BACKEND_CUDA) and its allocation counter.
 *
 * Memory: at create, every weight goes to ONE device allocation: matrices
 * as bf16 (Q/K/V fused into one [q | k | v] matrix, gate/up into one
 * [gate | up] matrix, so each is one product), norm weights, Q/K/V biases
 * and the RoPE inverse frequencies as f32. The KV pool is one bf16 device
 * allocation with kv_pool.h's layout; activations, attention scratch,
 * cuBLAS's workspace and the step's input arrays are preallocated for the
 * configured limits. A step allocates nothing: the counter below proves
 * it. */
#ifndef O1_CUDA_BACKEND_H
#define O1_CUDA_BACKEND_H

#include <stdint.h>

#include "backend.h"

extern const struct o1_backend_ops o1_cuda_backend_ops;

/* Device and pinned-host allocations (cudaMalloc, cudaMallocHost) every
 * CUDA backend of this process has made so far. */
uint64_t o1_cuda_backend_alloc_count(void);

#endif

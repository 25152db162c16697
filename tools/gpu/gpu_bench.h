/* What the GPU benchmarks share: the device's copy bandwidth (each
 * figure's floor is its bytes over it, measured in the same process), a
 * sequence of launches timed as one replayed CUDA graph, and seeded
 * random operands. Plain C over the runtime API, for the .c and the .cu
 * benchmarks alike. */
#ifndef O1_GPU_BENCH_H
#define O1_GPU_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GB/s (1e9 bytes, read + write) of a device-to-device copy of BYTES,
 * the best of 10; 0 on an error. */
double gpu_bench_copy_gbs(size_t bytes);

/* Call I (of ITERS) of a timed sequence, on stream ST: 0 or an error. */
typedef int (*gpu_bench_launch)(void *ctx, uint32_t i, cudaStream_t st);

/* Microseconds a call: ITERS calls of LAUNCH captured into one graph on
 * ST (not the legacy stream), replayed REPLAYS + 1 times, the first a
 * warm-up; the median of the others over ITERS. < 0 on an error. */
double gpu_bench_graph_us(cudaStream_t st, uint32_t iters, int replays,
			  gpu_bench_launch launch, void *ctx);

/* A fixed-seed generator (the same operands every run): 64 random bits,
 * or uniform in [-1, 1). */
uint64_t gpu_bench_rand(void);
float gpu_bench_frand(void);
/* f32 -> bf16 bits to nearest even, and back (exact). */
uint16_t gpu_bench_bf16(float f);
float gpu_bench_f32(uint16_t b);

/* cudaMemcpy of BYTES host to device: 0 or -1. */
int gpu_bench_upload(void *dst, const void *src, size_t bytes);
/* N random values in [-2, 2) (bf16, or f32 when F32) uploaded to DST:
 * one chunk of random host values, repeated (timing does not care, and
 * the largest caches are gigabytes). 0 or -1. */
int gpu_bench_upload_random(void *dst, size_t n, int f32);

#ifdef __cplusplus
}
#endif

#endif

/* Helpers of the CUDA kernel tests in tests/kernels (test_<op>_cuda.c):
 * seeded random values, bf16 rounding as the device does it, device
 * buffers poisoned with NaN, copies both ways, and the tolerance check
 * (quant_cuda_test.h adds weights in GGUF block formats).
 * Only the plain runtime calls the CPU emulation (tools/gpu/emu) has, so
 * the same tests run there. Failures are cmocka assertions. */
#ifndef O1_KERNEL_CUDA_TEST_H
#define O1_KERNEL_CUDA_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* The seed: O1_TEST_SEED, else the time; printed. */
void kct_seed(void);
/* O1_TEST_QUICK set (not 0): a test runs a subset of its shapes (the CPU
 * emulation, tools/gpu/emu). */
bool kct_quick(void);
/* Uniform in [-1, 1). */
float kct_frand(void);
/* N values uniform in [-SCALE, SCALE) (malloc'd). */
float *kct_randv(size_t n, float scale);
uint16_t kct_bf16_of(float f);
float kct_f32_of(uint16_t b);
/* Rounds V to bf16 in place (the values the device holds). */
void kct_round_bf16(float *v, size_t n);

/* A device buffer of BYTES, every byte 0xff (f32 and bf16 NaN). */
void *kct_dev(size_t bytes);
void *kct_dev_copy(const void *h, size_t bytes);
/* H's N values as bf16 on the device. */
void *kct_dev_bf16(const float *h, size_t n);
/* BYTES of D after the device is idle (malloc'd). */
void *kct_host_copy(const void *d, size_t bytes);
/* The same into H. */
void kct_get(void *h, const void *d, size_t bytes);
/* N bf16 values of D as floats (malloc'd). */
float *kct_host_bf16(const void *d, size_t n);

/* |g - c| <= rel |c| + abs for every element; reports the worst. */
void kct_check_close(const char *what, const float *g, const float *c, size_t n,
		     double rel, double abs);

/* The largest |v[i]|. */
float kct_max_abs(const float *v, size_t n);

/* The stream of a launch with PDL or not: PDL launches go to a stream of
 * their own (made on first use), ordered with the legacy stream
 * (cudaStreamCreate's default), which the other launches and the copies
 * use. */
cudaStream_t kct_stream(bool pdl);

/* The main of such a test: 77 (skipped) without a CUDA device, else the
 * seed, then cmocka's run of TESTS. */
struct CMUnitTest;
int kct_main(const char *name, const struct CMUnitTest *tests, size_t n);

#endif

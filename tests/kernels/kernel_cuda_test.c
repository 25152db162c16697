/* Helpers of the CUDA kernel tests (kernel_cuda_test.h). */
#include "kernel_cuda_test.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda_util.h"

static uint64_t rng;

void kct_seed(void)
{
	const char *s = getenv("O1_TEST_SEED");

	rng = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
	printf("O1_TEST_SEED=%llu\n", (unsigned long long)rng);
}

bool kct_quick(void)
{
	const char *q = getenv("O1_TEST_QUICK");

	return q && atoi(q);
}

float kct_frand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

float *kct_randv(size_t n, float scale)
{
	float *v = malloc(n * sizeof(float) + 1);

	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = kct_frand() * scale;
	return v;
}

uint16_t kct_bf16_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return 0x7fc0;
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

float kct_f32_of(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

void kct_round_bf16(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = kct_f32_of(kct_bf16_of(v[i]));
}

void *kct_dev(size_t bytes)
{
	void *p = NULL;

	assert_int_equal(cudaMalloc(&p, bytes ? bytes : 1), cudaSuccess);
	assert_int_equal(cudaMemset(p, 0xff, bytes), cudaSuccess);
	return p;
}

void *kct_dev_copy(const void *h, size_t bytes)
{
	void *p = kct_dev(bytes);

	assert_int_equal(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice),
			 cudaSuccess);
	return p;
}

void *kct_dev_bf16(const float *h, size_t n)
{
	uint16_t *b = malloc(n * 2 + 1);
	void *p;

	assert_non_null(b);
	for (size_t i = 0; i < n; i++)
		b[i] = kct_bf16_of(h[i]);
	p = kct_dev_copy(b, n * 2);
	free(b);
	return p;
}

void kct_get(void *h, const void *d, size_t bytes)
{
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost),
			 cudaSuccess);
}

void *kct_host_copy(const void *d, size_t bytes)
{
	void *h = malloc(bytes + 1);

	assert_non_null(h);
	kct_get(h, d, bytes);
	return h;
}

float *kct_host_bf16(const void *d, size_t n)
{
	uint16_t *b = kct_host_copy(d, n * 2);
	float *f = malloc(n * sizeof(float) + 1);

	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		f[i] = kct_f32_of(b[i]);
	free(b);
	return f;
}

void kct_check_close(const char *what, const float *g, const float *c, size_t n,
		     double rel, double abs)
{
	double worst = 0;
	size_t at = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)g[i] - c[i]) / (rel * fabs(c[i]) + abs);

		if (isnan(e) || e > worst) {
			worst = e, at = i;
			if (isnan(e))
				break;
		}
	}
	if (!(worst <= 1.0))
		fprintf(stderr, "%s: element %zu: gpu %g cpu %g (%.2f x tol)\n",
			what, at, g[at], c[at], worst);
	assert_true(worst <= 1.0);
}

float kct_max_abs(const float *v, size_t n)
{
	float m = 0;

	for (size_t i = 0; i < n; i++)
		m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
	return m;
}

cudaStream_t kct_stream(bool pdl)
{
	static cudaStream_t blocking; /* the legacy stream waits for it */

	if (!pdl)
		return 0;
	if (!blocking)
		assert_int_equal(cudaStreamCreate(&blocking), cudaSuccess);
	return blocking;
}

int kct_main(const char *name, const struct CMUnitTest *tests, size_t n)
{
	if (o1_cuda_probe()) {
		printf("%s: no CUDA device, skipped\n", name);
		return 77;
	}
	kct_seed();
	return _cmocka_run_group_tests(name, tests, n, NULL, NULL);
}

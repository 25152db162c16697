/* Greedy sampling on the device: the argmax of each logits row, lowest
 * index on ties, NaN ignored (a row of NaNs gives 0). */
#include <errno.h>
#include <math.h>

#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "common/log.h"
}

#define ARGMAX_THREADS 256

/* Whether (v, i) beats (bv, bi): larger value, or equal value and lower
 * index; NaN loses to everything. */
static __device__ bool better(float v, uint32_t i, float bv, uint32_t bi)
{
	if (isnan(v))
		return false;
	if (isnan(bv) || v > bv)
		return true;
	return v == bv && i < bi;
}

/* ids (rows) = argmax of logits (rows, vocab); block r = row r. */
static __global__ void argmax(int32_t *ids, const float *logits, uint32_t vocab)
{
	__shared__ float sv[ARGMAX_THREADS];
	__shared__ uint32_t si[ARGMAX_THREADS];
	const float *row = logits + (size_t)blockIdx.x * vocab;
	float bv = NAN;
	uint32_t bi = 0;

	for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x)
		if (better(row[i], i, bv, bi))
			bv = row[i], bi = i;
	sv[threadIdx.x] = bv, si[threadIdx.x] = bi;
	__syncthreads();
	for (uint32_t s = blockDim.x / 2; s; s /= 2) {
		if (threadIdx.x < s &&
		    better(sv[threadIdx.x + s], si[threadIdx.x + s],
			   sv[threadIdx.x], si[threadIdx.x])) {
			sv[threadIdx.x] = sv[threadIdx.x + s];
			si[threadIdx.x] = si[threadIdx.x + s];
		}
		__syncthreads();
	}
	if (!threadIdx.x)
		ids[blockIdx.x] = (int32_t)si[0];
}

extern "C" int o1_argmax_cuda(int32_t *ids, const float *logits, uint32_t rows,
			      uint32_t vocab, cudaStream_t stream)
{
	if (!ids || !logits || !vocab) {
		o1_err("argmax: bad operands: %u rows of %u", rows, vocab);
		return -EINVAL;
	}
	if (!rows)
		return 0;
	argmax<<<rows, ARGMAX_THREADS, 0, stream>>>(ids, logits, vocab);
	return O1_CUDA_LAUNCHED("argmax");
}

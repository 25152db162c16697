/* GGUF block formats on the device (quant.h's CUDA twin): dequantization
 * of whole blocks to f32 (bit for bit quant.h's values) or to bf16 (those
 * values rounded to nearest even, for the tiles the tensor-core products
 * read), and the embedding gather from a block-format table.
 *
 * A thread per 32-element unit (quant_dev.h): it decodes the unit's block
 * bytes once. A tensor of rows of whole blocks is one long row of units,
 * so a launch covers any number of rows. The dequantization stages a
 * warp's 32 units (one contiguous span of the output) in shared memory and
 * the warp then writes the span in 16-byte pieces, consecutive lanes on
 * consecutive pieces: a unit's 32 outputs written by its own thread would
 * be 32 scalar stores 64 or 128 bytes apart across the warp, which use a
 * fraction of each memory transaction (the cuBLAS fallback of
 * cuda_forward.c's quantized products dequantizes whole matrices through
 * it, so it must run at the memory bandwidth). An output not 16-byte
 * aligned takes the unstaged kernel. The
 * embedding: a thread per (token, unit of the token's row); a token id
 * outside [0, vocab) (which the caller refuses first) gives zeros.
 * Invariants: SRC and tables aligned to 4 bytes (Q4_K) or 2 (the others:
 * quant_dev.h's loads), N and DIM whole blocks, fewer than 2^32 units.
 */
#include <errno.h>
#include <stdint.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "kernels_cuda.h"
#include "quant_dev.h"

extern "C" {
#include "common/log.h"
}

#define DQ_THREADS 256

enum { DQ_F32, DQ_BF16 };

/* Units [0, UNITS) of SRC to DST (f32 or bf16), 32 elements each. */
template <int TYPE, int OUT>
static __global__ void __launch_bounds__(DQ_THREADS)
    dequant(const uint8_t *src, void *dst, uint32_t units)
{
	uint32_t t = blockIdx.x * DQ_THREADS + threadIdx.x;
	float v[32];

	if (t >= units)
		return;
	qd_unit<TYPE>(src, t, v);
#pragma unroll
	for (int e = 0; e < 32; e++) {
		size_t at = (size_t)t * 32 + e;

		if constexpr (OUT == DQ_F32)
			((float *)dst)[at] = v[e];
		else
			((uint16_t *)dst)[at] = qd_to_bf16(v[e]);
	}
}

/* qd_to_bf16 (F0) | qd_to_bf16 (F1) << 16: on the device one conversion
 * for the pair (cvt.rn.bf16x2: round to nearest even, as qd_to_bf16) where
 * neither is a NaN (whose bits it may not keep as qd_to_bf16 does): the
 * integer rounding took ~6 instructions an element, and the dequantization
 * to tiles is bound by its instructions (ncu on the H200: ~2.3 TB/s of
 * reads and writes, half a copy's). */
static __device__ __forceinline__ uint32_t dq_bf16x2(float f0, float f1)
{
#ifdef __CUDA_ARCH__
	if (f0 == f0 && f1 == f1) {
		uint32_t r;

		asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(f1), "f"(f0));
		return r;
	}
#endif
	return qd_to_bf16(f0) | (uint32_t)qd_to_bf16(f1) << 16;
}

/* A unit's staging slot: its outputs plus 16 bytes, so that the 16-byte
 * stores of 8 consecutive threads (one shared-memory wavefront) fall on
 * distinct banks. */
#define DQ_SLOT(OUT) (32 * ((OUT) == DQ_F32 ? 4 : 2) + 16)

/* dequant's output through shared memory: units [0, UNITS) of SRC to DST
 * (16-byte aligned). Every lane of a warp reaches the __syncwarp, those
 * past the end included (they decode nothing). */
template <int TYPE, int OUT>
static __global__ void __launch_bounds__(DQ_THREADS)
    dequant_wide(const uint8_t *src, void *dst, uint32_t units)
{
	__shared__ uint4 stage4[DQ_THREADS * DQ_SLOT(OUT) / 16];
	uint8_t *stage = (uint8_t *)stage4;
	const uint32_t slot = DQ_SLOT(OUT), unit_bytes = slot - 16;
	uint32_t t = blockIdx.x * DQ_THREADS + threadIdx.x;
	uint32_t lane = threadIdx.x % 32, first = t - lane;
	uint8_t *mine = stage + threadIdx.x * slot;
	uint8_t *warp = stage + (threadIdx.x - lane) * slot;
	uint32_t n = first < units ? (units - first < 32 ? units - first : 32)
				   : 0;
	float v[32];

	if (t < units) {
		qd_unit<TYPE>(src, t, v);
		/* CH 16-byte chunks of 4 words, each word one f32 or two
		 * bf16 (the lower element in the low half) */
		constexpr int CH = OUT == DQ_F32 ? 8 : 4, PER = 32 / CH;

#pragma unroll
		for (int c = 0; c < CH; c++) {
			uint32_t w[4];

#pragma unroll
			for (int e = 0; e < 4; e++) {
				const float *p = v + PER * c + (PER / 4) * e;

				if constexpr (OUT == DQ_F32)
					w[e] = __float_as_uint(p[0]);
				else
					w[e] = dq_bf16x2(p[0], p[1]);
			}
			*(uint4 *)(mine + 16 * c) =
			    make_uint4(w[0], w[1], w[2], w[3]);
		}
	}
	__syncwarp();
	/* the warp's span: n units of unit_bytes, from unit FIRST on */
	for (uint32_t p = lane; p < n * unit_bytes / 16; p += 32) {
		uint32_t u = p / (unit_bytes / 16), c = p % (unit_bytes / 16);

		((uint4 *)((uint8_t *)dst + (size_t)first * unit_bytes))[p] =
		    *(const uint4 *)(warp + u * slot + 16 * c);
	}
}

/* out (T, dim) f32 = rows ids (T) of TABLE; UPR units a row, ROW_BYTES a
 * row. */
template <int TYPE>
static __global__ void __launch_bounds__(DQ_THREADS)
    gather_q(float *out, const uint8_t *table, const int32_t *ids,
	     uint32_t n_tokens, uint32_t upr, uint64_t row_bytes,
	     uint32_t vocab)
{
	uint32_t t = blockIdx.x * DQ_THREADS + threadIdx.x;
	uint32_t tok = t / upr, u = t % upr;
	float v[32];
	int32_t id;

	if (tok >= n_tokens)
		return;
	id = ids[tok];
	if (id >= 0 && (uint32_t)id < vocab)
		qd_unit<TYPE>(table + (size_t)id * row_bytes, u, v);
	else
		for (int e = 0; e < 32; e++)
			v[e] = 0.0f;
	for (int e = 0; e < 32; e++)
		out[(size_t)tok * upr * 32 + 32 * u + e] = v[e];
}

template <int TYPE>
static int launch_dequant(const void *src, void *dst, uint32_t units, bool bf16,
			  cudaStream_t stream)
{
	dim3 grid((units + DQ_THREADS - 1) / DQ_THREADS), block(DQ_THREADS);

	if ((uintptr_t)dst % 16 == 0) {
		if (bf16)
			return O1_CUDA_LAUNCH(
			    "dequant", dequant_wide<TYPE, DQ_BF16>, grid, block,
			    0, stream, false, (const uint8_t *)src, dst, units);
		return O1_CUDA_LAUNCH("dequant", dequant_wide<TYPE, DQ_F32>,
				      grid, block, 0, stream, false,
				      (const uint8_t *)src, dst, units);
	}
	if (bf16)
		return O1_CUDA_LAUNCH("dequant", dequant<TYPE, DQ_BF16>, grid,
				      block, 0, stream, false,
				      (const uint8_t *)src, dst, units);
	return O1_CUDA_LAUNCH("dequant", dequant<TYPE, DQ_F32>, grid, block, 0,
			      stream, false, (const uint8_t *)src, dst, units);
}

static int dequantize(enum o1_quant_type type, const void *src, void *dst,
		      uint64_t n, bool bf16, cudaStream_t stream)
{
	uint32_t per = o1_quant_block_elements(type);

	if (!src || !dst || !per || n % per || n / 32 >= UINT32_MAX ||
	    !o1_quant_dev_aligned(type, src)) {
		o1_err("dequantize: bad operands: type %u n %llu src %p",
		       (unsigned)type, (unsigned long long)n, src);
		return -EINVAL;
	}
	if (!n)
		return 0;
	switch (type) {
	case O1_QUANT_Q8_0:
		return launch_dequant<O1_QUANT_Q8_0>(src, dst, n / 32, bf16,
						     stream);
	case O1_QUANT_Q4_0:
		return launch_dequant<O1_QUANT_Q4_0>(src, dst, n / 32, bf16,
						     stream);
	case O1_QUANT_Q5_0:
		return launch_dequant<O1_QUANT_Q5_0>(src, dst, n / 32, bf16,
						     stream);
	case O1_QUANT_Q4_K:
		return launch_dequant<O1_QUANT_Q4_K>(src, dst, n / 32, bf16,
						     stream);
	case O1_QUANT_Q6_K:
		return launch_dequant<O1_QUANT_Q6_K>(src, dst, n / 32, bf16,
						     stream);
	}
	return -EINVAL; /* not reached: per is 0 for other types */
}

extern "C" int o1_quant_dequantize_cuda(enum o1_quant_type type,
					const void *src, float *dst, uint64_t n,
					cudaStream_t stream)
{
	return dequantize(type, src, dst, n, false, stream);
}

extern "C" int o1_quant_dequantize_bf16_cuda(enum o1_quant_type type,
					     const void *src, uint16_t *dst,
					     uint64_t n, cudaStream_t stream)
{
	return dequantize(type, src, dst, n, true, stream);
}

template <int TYPE>
static int launch_gather(float *out, const void *table, const int32_t *ids,
			 uint32_t n_tokens, uint32_t dim, uint32_t vocab,
			 cudaStream_t stream)
{
	uint64_t rb = 0, threads = (uint64_t)n_tokens * (dim / 32);

	o1_quant_row_bytes(TYPE, dim, &rb);
	return O1_CUDA_LAUNCH(
	    "embedding_q", gather_q<TYPE>,
	    dim3((uint32_t)((threads + DQ_THREADS - 1) / DQ_THREADS)),
	    dim3(DQ_THREADS), 0, stream, false, out, (const uint8_t *)table,
	    ids, n_tokens, dim / 32, rb, vocab);
}

extern "C" int o1_embedding_q_cuda(float *out, const void *table,
				   enum o1_quant_type type, const int32_t *ids,
				   uint32_t n_tokens, uint32_t dim,
				   uint32_t vocab, cudaStream_t stream)
{
	uint32_t per = o1_quant_block_elements(type);

	if (!out || !table || !ids || !dim || !vocab || !per || dim % per ||
	    !o1_quant_dev_aligned(type, table) ||
	    (uint64_t)n_tokens * (dim / 32) >= UINT32_MAX) {
		o1_err("embedding_q: bad operands: type %u dim %u vocab %u "
		       "tokens %u",
		       (unsigned)type, dim, vocab, n_tokens);
		return -EINVAL;
	}
	if (!n_tokens)
		return 0;
	switch (type) {
	case O1_QUANT_Q8_0:
		return launch_gather<O1_QUANT_Q8_0>(out, table, ids, n_tokens,
						    dim, vocab, stream);
	case O1_QUANT_Q4_0:
		return launch_gather<O1_QUANT_Q4_0>(out, table, ids, n_tokens,
						    dim, vocab, stream);
	case O1_QUANT_Q5_0:
		return launch_gather<O1_QUANT_Q5_0>(out, table, ids, n_tokens,
						    dim, vocab, stream);
	case O1_QUANT_Q4_K:
		return launch_gather<O1_QUANT_Q4_K>(out, table, ids, n_tokens,
						    dim, vocab, stream);
	case O1_QUANT_Q6_K:
		return launch_gather<O1_QUANT_Q6_K>(out, table, ids, n_tokens,
						    dim, vocab, stream);
	}
	return -EINVAL; /* not reached: per is 0 for other types */
}

/* An int8 product's quantized input in device code (gemv_q8.h specifies
 * it): the one place for its arithmetic and its layout, so that every
 * kernel that quantizes a row (gemv_q.cu's input, gemm_qi8.cu's,
 * attention_decode.cu's output for the O product) writes the same bits.
 *
 * A unit is 32 consecutive values v of a row: amax = max |v|, int8
 * q = rint(v 127 / amax) (0 where amax is 0), d = amax / 127 (NaN where a
 * value is NaN: every product of the unit is then NaN, as the f32 path's),
 * sum = d times the sum of the q; each product and quotient rounded on its
 * own (no fused multiply-add).
 *
 * The layout of M rows of K (units = K / 32, pad = units rounded up to
 * 32): each row's units in groups of 32, a group's 32 low pieces (a unit's
 * elements 0..15, 16 bytes) then its 32 high ones (16..31), so that the
 * lanes of a warp (consecutive units) read consecutive pieces; after the
 * M rows' pieces, the (d, sum) pairs, (M, units). gemv_q.cu keeps it in
 * shared memory; a kernel that writes it to device memory for the next
 * product (o1_q8_input_bytes) saves that product the quantization.
 */
#ifndef O1_Q8_INPUT_DEV_H
#define O1_Q8_INPUT_DEV_H

#include <stddef.h>
#include <stdint.h>

/* The units of K rounded up to a group of 32. */
static __host__ __device__ inline uint32_t q8_pad(uint32_t k)
{
	return (k / 32 + 31) / 32 * 32;
}

/* The 16-byte piece of unit U's low half in row I (its high half is 32
 * pieces on). */
static __host__ __device__ inline size_t q8_piece_at(uint32_t pad, uint32_t i,
						     uint32_t u)
{
	return (size_t)i * pad * 2 + (u & ~31u) * 2 + (u & 31);
}

/* Unit quantization by LANES consecutive lanes of a warp (1, 4 or 8,
 * aligned to LANES), each holding 32 / LANES of the unit's values V in
 * element order: its quants into W, 4 a word in element order; returns
 * the unit's (d, sum) to every lane of the group. The max, the NaN flag
 * and the integer sum go across the group by xor shuffles: every lane of
 * the warp must call it. */
template <int LANES>
static __device__ __forceinline__ float2 q8_unit(const float (&v)[32 / LANES],
						 uint32_t (&w)[8 / LANES])
{
	constexpr int N = 32 / LANES;
	float amax = 0.0f, d, inv;
	int32_t qsum = 0, nan = 0;

	static_assert(LANES == 1 || LANES == 4 || LANES == 8, "lanes a unit");
#pragma unroll
	for (int e = 0; e < N; e++) {
		amax = fmaxf(amax, fabsf(v[e]));
		nan |= v[e] != v[e];
	}
#pragma unroll
	for (int o = 1; o < LANES; o *= 2) {
		amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
		nan |= __shfl_xor_sync(0xffffffffu, nan, o);
	}
	d = nan ? __int_as_float(0x7fc00000) : __fdiv_rn(amax, 127.0f);
	inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
#pragma unroll
	for (int k = 0; k < N / 4; k++) {
		w[k] = 0;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int32_t x =
			    __float2int_rn(__fmul_rn(v[4 * k + j], inv));

			qsum += x;
			w[k] |= ((uint32_t)x & 0xffu) << (8 * j);
		}
	}
#pragma unroll
	for (int o = 1; o < LANES; o *= 2)
		qsum += __shfl_xor_sync(0xffffffffu, qsum, o);
	return make_float2(d, __fmul_rn(d, (float)qsum));
}

#endif

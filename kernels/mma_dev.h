/* Warp-level tensor-core operations for the .cu files (gemm_q.cu), each a
 * warp-collective (every lane of the warp calls it together):
 *
 *   mma_ldsm_x4   ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8x8
 *                 matrices of 16-bit elements from shared memory, lane i
 *                 giving the address of row i % 8 of matrix i / 8 (16
 *                 bytes, 16-byte aligned); lane l receives in R[j] the
 *                 elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1)
 *                 of matrix j, the first in the low half.
 *   mma_ldsm_x4_trans the same with .trans: lane l receives in R[j] the
 *                 elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4)
 *                 of matrix j (an mma B fragment of a row-major K x N
 *                 block: attention_decode_tc.cu's V).
 *   mma_bf16      mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32:
 *                 D (16x8) += A (16x16) B (16x8), bf16 products summed
 *                 in f32, in the PTX ISA's fragment layout: with g = l / 4
 *                 and t = l % 4, A[j] holds A(g + 8 (j % 2), 2t + 8 (j / 2)
 *                 + {0, 1}), B[j] holds B(2t + 8j + {0, 1}, g), and D[i]
 *                 is D(g + 8 (i / 2), 2t + i % 2); a pair's lower index in
 *                 the low half of its word.

 *   mma_s8_k32    mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32:
 *                 D (16x8 s32) += A (16x32) B (32x8), int8 products summed
 *                 exactly (gemm_qi8.cu); with g = l / 4 and t = l % 4,
 *                 A[j] holds the 4 bytes A(g + 8 (j % 2), 4t + 16 (j / 2)
 *                 + {0..3}), B[j] the bytes B(4t + 16j + {0..3}, g), the
 *                 lowest index in the lowest byte; D as mma_bf16's.
 *   mma_s8_k16    the m16n8k16 shape: A0 holds A(g, 4t + {0..3}), A1
 *                 A(g + 8, 4t + {0..3}), B B(4t + {0..3}, g).
 *   mma_pack_bf16 two f32 as bf16 (rounded to nearest even) in one word,
 *                 LO in the low half: cvt.rn.bf16x2.f32, one instruction
 *                 for quant_dev.h's qd_to_bf16 twice (the same bits but
 *                 for NaN, which comes out as the canonical 0x7fff).
 *   mma_quad_max, mma_quad_sum  a row's max and sum over the quad of
 *                 lanes that hold it (shuffles; the attention kernels'
 *                 softmax statistics).
 *   mma_load_a_f32 A fragments of two f32 rows, as bf16 (attention's Q).
 *
 * And per thread, the asynchronous copies of a pipelined kernel (gemm_qp.cu):
 *   mma_cp16      cp.async.cg.shared.global: 16 bytes from global SRC to
 *                 shared DST (both 16-byte aligned), the first BYTES (0 to
 *                 16) of them read and the rest zeros;
 *   mma_cp_commit cp.async.commit_group: the copies issued since the last
 *                 commit form a group;
 *   mma_cp_wait<N> cp.async.wait_group: waits until at most N of the
 *                 thread's groups are still in flight (the others' bytes
 *                 are in shared memory; other threads see them after a
 *                 barrier).
 * The emulation copies at once (so waits do nothing): a stage overwritten
 * while another warp still reads it shows as wrong products there.
 *
 * On the device these are the PTX instructions (sm_80 and later). Under
 * tools/gpu/emu (emu.h included first, O1_EMU_H defined) they are warp
 * exchanges over the lanes' fibers that move exactly the elements the
 * layouts above name, so a kernel's fragment indexing is checked on the
 * CPU; the emulated product sums the 16 products of each element in k
 * order in f32 (the device's order and rounding inside one mma are
 * unspecified: the tests bound the difference).
 */
#ifndef O1_MMA_DEV_H
#define O1_MMA_DEV_H

#include <stdint.h>

#include "quant_dev.h"

#ifdef O1_EMU_H

static inline void mma_ldsm_x4(const void *row, uint32_t (&r)[4])
{
	uint64_t mine = (uint64_t)(uintptr_t)row;
	unsigned l = emu_lane();

	emu_warp_put(&mine, 8);
	for (unsigned j = 0; j < 4; j++) {
		uint64_t p;

		emu_warp_get(8 * j + l / 4, &p, 8);
		memcpy(&r[j], (const uint8_t *)(uintptr_t)p + 4 * (l % 4), 4);
	}
	emu_warp_done();
}

static inline void mma_ldsm_x4_trans(const void *row, uint32_t (&r)[4])
{
	uint64_t mine = (uint64_t)(uintptr_t)row;
	unsigned l = emu_lane();

	emu_warp_put(&mine, 8);
	for (unsigned j = 0; j < 4; j++) {
		uint64_t p0, p1;
		uint16_t lo, hi;

		emu_warp_get(8 * j + 2 * (l % 4), &p0, 8);
		emu_warp_get(8 * j + 2 * (l % 4) + 1, &p1, 8);
		memcpy(&lo, (const uint8_t *)(uintptr_t)p0 + 2 * (l / 4), 2);
		memcpy(&hi, (const uint8_t *)(uintptr_t)p1 + 2 * (l / 4), 2);
		r[j] = lo | (uint32_t)hi << 16;
	}
	emu_warp_done();
}

static inline uint32_t mma_pack_bf16(float lo, float hi)
{
	return qd_to_bf16(lo) | (uint32_t)qd_to_bf16(hi) << 16;
}

static inline void mma_cp16(void *dst, const void *src, uint32_t bytes)
{
	memset(dst, 0, 16);
	memcpy(dst, src, bytes < 16 ? bytes : 16);
}

static inline void mma_cp_commit(void)
{
}

template <int N> static inline void mma_cp_wait(void)
{
}

static inline float mma_bf16_lo(uint32_t w)
{
	return __uint_as_float(w << 16);
}

static inline float mma_bf16_hi(uint32_t w)
{
	return __uint_as_float(w & 0xffff0000u);
}

static inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4],
			    const uint32_t (&b)[2])
{
	float A[16][16], B[16][8];
	unsigned l = emu_lane(), g = l / 4, t = l % 4;

	/* three rounds of 8 bytes a lane (the exchange slot) */
	for (unsigned round = 0; round < 3; round++) {
		uint32_t mine[2] = {round < 2 ? a[2 * round] : b[0],
				    round < 2 ? a[2 * round + 1] : b[1]};

		emu_warp_put(mine, 8);
		for (unsigned s = 0; s < 32; s++) {
			uint32_t w[2];
			unsigned sg = s / 4, st = s % 4;

			emu_warp_get(s, w, 8);
			for (unsigned h = 0; h < 2; h++) {
				unsigned j = round < 2 ? 2 * round + h : h;

				if (round < 2) {
					unsigned r = sg + 8 * (j % 2),
						 c = 2 * st + 8 * (j / 2);

					A[r][c] = mma_bf16_lo(w[h]);
					A[r][c + 1] = mma_bf16_hi(w[h]);
				} else {
					unsigned k = 2 * st + 8 * j;

					B[k][sg] = mma_bf16_lo(w[h]);
					B[k + 1][sg] = mma_bf16_hi(w[h]);
				}
			}
		}
		emu_warp_done();
	}
	for (unsigned i = 0; i < 4; i++) {
		unsigned r = g + 8 * (i / 2), c = 2 * t + i % 2;
		float s = d[i];

		for (unsigned k = 0; k < 16; k++)
			s += A[r][k] * B[k][c];
		d[i] = s;
	}
}

/* The bytes of (A, B) as mma_s8_k32's operands, summed into D: the A
 * fragments' K columns [0, KW) and B's rows alike (KW 16 or 32). */
static inline void mma_s8_emu(int32_t (&d)[4], const uint32_t *a,
			      const uint32_t *b, unsigned kw)
{
	int8_t A[16][32], B[32][8];
	unsigned l = emu_lane(), g = l / 4, t = l % 4;
	unsigned na = kw / 8, nb = kw / 16;

	for (unsigned j = 0; j < na + nb; j++) {
		uint32_t mine = j < na ? a[j] : b[j - na];

		emu_warp_put(&mine, 4);
		for (unsigned s = 0; s < 32; s++) {
			uint32_t w;
			unsigned sg = s / 4, st = s % 4;

			emu_warp_get(s, &w, 4);
			for (unsigned e = 0; e < 4; e++) {
				int8_t v = (int8_t)(w >> (8 * e));

				if (j < na)
					A[sg + 8 * (j % 2)]
					 [4 * st + 16 * (j / 2) + e] = v;
				else
					B[4 * st + 16 * (j - na) + e][sg] = v;
			}
		}
		emu_warp_done();
	}
	for (unsigned i = 0; i < 4; i++) {
		unsigned r = g + 8 * (i / 2), c = 2 * t + i % 2;
		int32_t s = 0;

		for (unsigned k = 0; k < kw; k++)
			s += A[r][k] * B[k][c];
		d[i] = (int32_t)((uint32_t)d[i] + (uint32_t)s);
	}
}

static inline void mma_s8_k32(int32_t (&d)[4], const uint32_t (&a)[4],
			      const uint32_t (&b)[2])
{
	mma_s8_emu(d, a, b, 32);
}

static inline void mma_s8_k16(int32_t (&d)[4], uint32_t a0, uint32_t a1,
			      uint32_t b)
{
	const uint32_t a[2] = {a0, a1};

	mma_s8_emu(d, a, &b, 16);
}

#else

static __device__ __forceinline__ void mma_ldsm_x4(const void *row,
						   uint32_t (&r)[4])
{
	uint32_t at = (uint32_t)__cvta_generic_to_shared(row);

	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
		     "{%0, %1, %2, %3}, [%4];"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(at));
}

static __device__ __forceinline__ void mma_ldsm_x4_trans(const void *row,
							 uint32_t (&r)[4])
{
	uint32_t at = (uint32_t)__cvta_generic_to_shared(row);

	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
		     "{%0, %1, %2, %3}, [%4];"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(at));
}

static __device__ __forceinline__ uint32_t mma_pack_bf16(float lo, float hi)
{
	uint32_t r;

	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

static __device__ __forceinline__ void mma_cp16(void *dst, const void *src,
						uint32_t bytes)
{
	uint32_t at = (uint32_t)__cvta_generic_to_shared(dst);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(at),
		     "l"(src), "r"(bytes)
		     : "memory");
}

static __device__ __forceinline__ void mma_cp_commit(void)
{
	asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> static __device__ __forceinline__ void mma_cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

static __device__ __forceinline__ void mma_bf16(float (&d)[4],
						const uint32_t (&a)[4],
						const uint32_t (&b)[2])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
		     "{%0, %1, %2, %3};"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
		       "r"(b[1]));
}

static __device__ __forceinline__ void mma_s8_k32(int32_t (&d)[4],
						  const uint32_t (&a)[4],
						  const uint32_t (&b)[2])
{
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
		     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
		     "{%0, %1, %2, %3};"
		     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
		       "r"(b[1]));
}

static __device__ __forceinline__ void mma_s8_k16(int32_t (&d)[4],
						  uint32_t a0, uint32_t a1,
						  uint32_t b)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 "
		     "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
		     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
		     : "r"(a0), "r"(a1), "r"(b));
}

#endif

/* The max and the sum of V over the quad of lanes 4 g .. 4 g + 3, which
 * hold row g of a fragment (mma_bf16's A and D: the attention kernels'
 * row statistics). */
static __device__ __forceinline__ float mma_quad_max(float v)
{
	v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
	return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

static __device__ __forceinline__ float mma_quad_sum(float v)
{
	v += __shfl_xor_sync(0xffffffffu, v, 1);
	return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* The A fragments (mma_bf16's layout) of a 16 x D tile whose rows g and
 * g + 8 are the f32 rows QA and QB of this lane's quad, as bf16: QF[k]
 * holds columns 16 k + 2 t + {0, 1} and the same + 8 (the attention
 * kernels' Q). */
template <int D>
static __device__ __forceinline__ void
mma_load_a_f32(uint32_t (&qf)[D / 16][4], const float *qa, const float *qb)
{
	int c = 2 * (threadIdx.x % 4);

#pragma unroll
	for (int k = 0; k < D / 16; k++) {
		float2 a0 = *(const float2 *)(qa + 16 * k + c);
		float2 b0 = *(const float2 *)(qb + 16 * k + c);
		float2 a1 = *(const float2 *)(qa + 16 * k + 8 + c);
		float2 b1 = *(const float2 *)(qb + 16 * k + 8 + c);

		qf[k][0] = mma_pack_bf16(a0.x, a0.y);
		qf[k][1] = mma_pack_bf16(b0.x, b0.y);
		qf[k][2] = mma_pack_bf16(a1.x, a1.y);
		qf[k][3] = mma_pack_bf16(b1.x, b1.y);
	}
}

#endif

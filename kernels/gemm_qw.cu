/* The Hopper tensor-core product over weights kept in a GGUF block format,
 * for the steps of many rows (prefill, wide decode steps), built to run at
 * the speed of cuBLAS on the bf16 matrix without writing one:
 *
 *   y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . bf16(dequant(w)) (N,K)^T
 *
 * The weights are decoded in registers straight into the A operand of
 * wgmma.mma_async (m64n128k16, bf16 in, f32 sums): each value is
 * quant_dev.h's (quant.h's, bit for bit) rounded to bf16 to nearest even,
 * the values o1_quant_dequantize_bf16_cuda writes for the tile path, so
 * the products are the tiles' and only the order of the f32 sums differs.
 * The tokens' rows are the B operand, read by the tensor cores from
 * shared memory through a matrix descriptor.
 *
 * A block of two warpgroups computes 128 weight rows (64 a warpgroup) by
 * 128 tokens. A step is 256 elements of K (8 blocks of Q8_0 and Q4_0, a
 * super-block of Q4_K and Q6_K); its copy group (cp.async, two stages: step
 * t + 1 lands while step t is multiplied) brings the tile's raw weight
 * bytes (gemm_blocks.h's qb_issue_rows) and the tokens' 256 elements in
 * the no-swizzle K-major layout wgmma reads: 8 x 8 core matrices of 8
 * tokens by 8 elements (128 contiguous bytes), the 16 token groups of one
 * 8-element column next to each other (the stride between token groups
 * 128 bytes, between columns QW_BN x 16). Each step: wait for its group,
 * barrier, issue the next, the threads decode the step's unit scales into
 * shared memory, barrier, then each warpgroup runs 16 k16 products in four
 * groups of four: the A fragments of a group decoded into one of two
 * register sets while the tensor cores run the previous group. A thread's
 * fragment: rows g and g + 8 of its warp's 16, elements 2t, 2t + 1, 2t +
 * 8, 2t + 9 of the 16 (mma.sync's A layout, which wgmma keeps for A in
 * registers). Where the grid has fewer blocks than the GPU has
 * multiprocessors, K is split in two halves: y is zeroed first and each
 * half adds its sum with atomicAdd (0 + a + b and 0 + b + a are the same
 * float: the result does not depend on the order).
 *
 * Rows past N are never written (their shared bytes are stale: their
 * products are discarded), tokens past M are zeros. Invariants: K a
 * multiple of 256; w and x 16-byte aligned; LDY >= N (o1_gemm_qw_fits).
 * wgmma needs sm_90a: a build for another target compiles the kernel body
 * out and o1_gemm_qw_available says so.
 */
#include <errno.h>
#include <stdint.h>

#include "cuda_launch.h"
#include "cuda_util.h"
#include "gemm_blocks.h"
#include "kernels_cuda.h"
#include "mma_dev.h"
#include "quant_dev.h"

extern "C" {
#include "common/log.h"
}

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QW_WGMMA 1
#else
#define QW_WGMMA 0
#endif

#define QW_THREADS 256
#define QW_BM	   128 /* weight rows a block (64 a warpgroup) */
#define QW_BN	   128 /* tokens a block: wgmma's N */
#define QW_LBO	   (QW_BN * 16) /* bytes between K-adjacent core matrices */
#define QW_SBO	   128		/* bytes between N-adjacent core matrices */
#define QW_SPLITS  2 /* 0 + a + b == 0 + b + a: the same bits either way */

/* Shared memory: two copy groups (the tokens' 256 elements, then the raw
 * weight rows), then the step's unit scales (8 x QW_BM float2). */
template <int TYPE> struct qw_smem {
	static constexpr uint32_t xs = QW_BN * 256 * 2;
	static constexpr uint32_t raw = QW_BM * qb_raw<TYPE>::ld;
	static constexpr uint32_t stage = xs + raw;
	static constexpr uint32_t sc = 8 * QW_BM * 8;
	static constexpr uint32_t total = 2 * stage + sc;
};

struct qw_args {
	float *y;
	const uint16_t *x; /* (M, K) */
	const uint8_t *w;
	uint64_t rb; /* bytes of a row of w */
	uint32_t m, n, k, ldy;
	uint32_t splits; /* parts of K */
};

/* Whether this device's copy of the module has the wgmma kernel. */
static __device__ int qw_compiled = QW_WGMMA;

/* Copy group of step J into the stage at ST: the tokens M0 .. M0 + QW_BN
 * (zeros past M) as core matrices, then the raw weight rows. A warp's 32
 * pieces: 8 tokens by 4 consecutive 8-element columns, 64 contiguous bytes
 * of each token's row read, one 128-byte row of banks written per column. */
template <int TYPE>
static __device__ __forceinline__ void qw_issue(uint8_t *st, const qw_args &a,
						uint32_t r0, uint32_t m0,
						uint32_t j, bool weights)
{
	if (weights) {
		qb_issue_rows<TYPE, QW_BM, QW_THREADS>(
		    st + qw_smem<TYPE>::xs, a.w, a.rb, a.n, r0, j);
		return;
	}
#pragma unroll
	for (int i = 0; i < QW_BN * 32 / QW_THREADS; i++) {
		uint32_t p = threadIdx.x + QW_THREADS * i, l = p % 32,
			 grp = p / 32;
		uint32_t tok = (grp % (QW_BN / 8)) * 8 + l % 8,
			 col = (grp / (QW_BN / 8)) * 4 + l / 8;
		bool in = m0 + tok < a.m;

		mma_cp16(st + (col * QW_BN + tok) * 16,
			 in ? a.x + (size_t)(m0 + tok) * a.k + 256 * j + 8 * col
			    : a.x,
			 in ? 16 : 0);
	}
}

/* The scales of unit U of the raw row at R as qw_pair takes them: Q8_0
 * and Q4_0 (d, -), Q4_K (D, M), Q6_K (D0, D1). */
template <int TYPE>
static __device__ __forceinline__ float2 qw_scales(const uint8_t *r, uint32_t u)
{
	qd_unit_head h = qd_head<TYPE>(r, u);

	return make_float2(h.d, TYPE == O1_QUANT_Q4_K ? h.m : h.d1);
}

/* Elements E and E + 1 (E even) of unit U of the raw row at R, scaled by
 * S, as a bf16 pair (E in the low half): quant.h's values, rounded. */
template <int TYPE>
static __device__ __forceinline__ uint32_t qw_pair(const uint8_t *r,
						   uint32_t u, uint32_t e,
						   float2 s)
{
	float v[2];

	if constexpr (TYPE == O1_QUANT_Q8_0) {
		uint32_t w = qd_u16(r + u * O1_QUANT_Q8_0_BYTES + 2 + e);

#pragma unroll
		for (int i = 0; i < 2; i++)
			v[i] = __fmul_rn(
			    __fsub_rn(qd_magic(((w >> (8 * i)) & 0xff) ^ 0x80),
				      8388736.0f), /* 2^23 + 128 */
			    s.x);
	} else if constexpr (TYPE == O1_QUANT_Q4_0) {
		/* elements < 16: low nibbles of bytes 0..15, then high */
		uint32_t w = qd_u16(r + u * O1_QUANT_Q4_0_BYTES + 2 + e % 16) >>
			     (e < 16 ? 0 : 4);

#pragma unroll
		for (int i = 0; i < 2; i++)
			v[i] = __fmul_rn(
			    __fsub_rn(qd_magic((w >> (8 * i)) & 0xf),
				      8388616.0f), /* 2^23 + 8 */
			    s.x);
	} else if constexpr (TYPE == O1_QUANT_Q4_K) {
		/* the low nibbles of 32 bytes for even units, high for odd */
		uint32_t w = qd_u16(r + 16 + 32 * (u / 2) + e) >> (4 * (u % 2));

#pragma unroll
		for (int i = 0; i < 2; i++)
			v[i] = __fsub_rn(
			    __fmul_rn(s.x,
				      __fsub_rn(qd_magic((w >> (8 * i)) & 0xf),
						8388608.0f)),
			    s.y);
	} else {
		uint32_t h = u / 4, g = u % 4;
		uint32_t l = qd_u16(r + 64 * h + 32 * (g % 2) + e);
		uint32_t hb = qd_u16(r + 128 + 32 * h + e);
		/* two 6-bit quants, one a byte */
		uint32_t q = ((l >> (g < 2 ? 0 : 4)) & 0x0f0fu) |
			     ((hb >> (2 * g)) & 0x0303u) << 4;

#pragma unroll
		for (int i = 0; i < 2; i++)
			v[i] = __fmul_rn(
			    __fsub_rn(qd_magic((q >> (8 * i)) & 0xff),
				      8388640.0f), /* 2^23 + 32 */
			    e < 16 ? s.x : s.y);
	}
	return mma_pack_bf16(v[0], v[1]);
}

#if QW_WGMMA
static __device__ __forceinline__ void qw_mma(float (&d)[64],
					      const uint32_t (&a)[4],
					      uint64_t desc)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
		     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
		     "{%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
		       "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
		       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
		       "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
		       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		       "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
		       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
		       "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
		       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
		       "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
		       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
		       "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
		       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
		       "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
		       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
		       "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

static __device__ __forceinline__ void qw_fence(void)
{
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

static __device__ __forceinline__ void qw_commit(void)
{
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N> static __device__ __forceinline__ void qw_wait(void)
{
	asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* The descriptor of the B operand (the tokens' core matrices) at P: no
 * swizzle, K-major. */
static __device__ __forceinline__ uint64_t qw_desc(const void *p)
{
	uint32_t a = (uint32_t)__cvta_generic_to_shared(p);

	return (uint64_t)((a & 0x3ffff) >> 4) |
	       (uint64_t)(QW_LBO >> 4) << 16 | (uint64_t)(QW_SBO >> 4) << 32;
}
#endif

/* Grid: (token tiles, weight tiles, parts of K). */
template <int TYPE>
static __global__ void __launch_bounds__(QW_THREADS, 1) gemm_qw(qw_args a)
{
#if QW_WGMMA
	using sm = qw_smem<TYPE>;
	extern __shared__ __align__(128) uint4 qw_shared[];
	uint8_t *base = (uint8_t *)qw_shared;
	float2 *sc = (float2 *)(base + 2 * sm::stage); /* [8][QW_BM] */
	uint32_t m0 = blockIdx.x * QW_BN, r0 = blockIdx.y * QW_BM;
	uint32_t lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
	/* this thread's rows of the tile: g and g + 8 of its warp's 16 */
	uint32_t wr = 16 * (threadIdx.x / 32) + g;
	uint32_t steps = a.k / 256;
	uint32_t js = steps * blockIdx.z / a.splits;
	uint32_t n_t = steps * (blockIdx.z + 1) / a.splits - js;
	float acc[64];

#pragma unroll
	for (int i = 0; i < 64; i++)
		acc[i] = 0.0f;
	/* the weights: no kernel writes them, so before the wait */
	if (n_t)
		qw_issue<TYPE>(base, a, r0, m0, js, true);
	o1_pdl_wait();
	o1_pdl_trigger();
	if (n_t)
		qw_issue<TYPE>(base, a, r0, m0, js, false);
	mma_cp_commit();
	for (uint32_t st = 0; st < n_t; st++) {
		uint8_t *cur = base + (st % 2) * sm::stage;
		const uint8_t *raw = cur + sm::xs;

		mma_cp_wait<0>();
		/* the copies reach the tensor cores through the async proxy */
		asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
		__syncthreads();
		if (st + 1 < n_t) {
			uint8_t *nx = base + ((st + 1) % 2) * sm::stage;

			qw_issue<TYPE>(nx, a, r0, m0, js + st + 1, true);
			qw_issue<TYPE>(nx, a, r0, m0, js + st + 1, false);
		}
		mma_cp_commit();
		for (uint32_t p = threadIdx.x; p < 8 * QW_BM; p += QW_THREADS) {
			uint32_t r = p % QW_BM, u = p / QW_BM;

			if (r0 + r < a.n)
				sc[u * QW_BM + r] = qw_scales<TYPE>(
				    qb_row<TYPE>(raw, a.w, a.rb, r0, r, js + st),
				    u);
		}
		__syncthreads();

		const uint8_t *ra[2];

#pragma unroll
		for (int h = 0; h < 2; h++)
			ra[h] = qb_row<TYPE>(raw, a.w, a.rb, r0, wr + 8 * h,
					     js + st);
		uint32_t af[2][4][4];

#pragma unroll
		for (int gi = 0; gi < 4; gi++) {
#pragma unroll
			for (int s = 0; s < 4; s++) {
				uint32_t kk = 4 * gi + s, u = kk / 2,
					 e = 16 * (kk % 2) + 2 * t;
				float2 s0 = sc[u * QW_BM + wr],
				       s1 = sc[u * QW_BM + wr + 8];

				af[gi % 2][s][0] = qw_pair<TYPE>(ra[0], u, e, s0);
				af[gi % 2][s][1] = qw_pair<TYPE>(ra[1], u, e, s1);
				af[gi % 2][s][2] =
				    qw_pair<TYPE>(ra[0], u, e + 8, s0);
				af[gi % 2][s][3] =
				    qw_pair<TYPE>(ra[1], u, e + 8, s1);
			}
			qw_fence();
#pragma unroll
			for (int s = 0; s < 4; s++)
				qw_mma(acc, af[gi % 2][s],
				       qw_desc(cur + (4 * gi + s) * 2 * QW_LBO));
			qw_commit();
			/* the other register set free for the next group */
			qw_wait<1>();
		}
		/* every product of this stage done before its buffer is
		 * written again */
		qw_wait<0>();
	}
	mma_cp_wait<0>();
	/* acc[4 j + e]: row g + 8 (e / 2) of the warp's 16, token 8 j + 2 t +
	 * e % 2 */
#pragma unroll
	for (int j = 0; j < QW_BN / 8; j++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			uint32_t row = r0 + wr + 8 * (e / 2),
				 tok = m0 + 8 * j + 2 * t + e % 2;
			float *p = &a.y[(size_t)tok * a.ldy + row];

			if (row >= a.n || tok >= a.m)
				continue;
			if (a.splits > 1)
				atomicAdd(p, acc[4 * j + e]);
			else
				*p = acc[4 * j + e];
		}
#endif
}

template <int TYPE> static int qw_launch(const qw_args &a, bool pdl,
					  cudaStream_t stream)
{
	constexpr uint32_t smem = qw_smem<TYPE>::total;
	dim3 grid((a.m + QW_BN - 1) / QW_BN, (a.n + QW_BM - 1) / QW_BM,
		  a.splits);
	int err = O1_CUDA_CHECK(cudaFuncSetAttribute(
	    gemm_qw<TYPE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
	    (int)smem));

	if (err)
		return err;
	if (a.splits > 1) {
		err = qb_zero_launch("gemm_qw zero", a.y, a.m, a.n, a.ldy, pdl,
				     stream);
		if (err)
			return err;
	}
	return O1_CUDA_LAUNCH("gemm_qw", gemm_qw<TYPE>, grid, dim3(QW_THREADS),
			      smem, stream, pdl, a);
}

/* Parts of K (1 or 2): two where one leaves multiprocessors idle. */
static uint32_t qw_splits(uint32_t m, uint32_t n, uint32_t k)
{
	uint64_t blocks = (uint64_t)((m + QW_BN - 1) / QW_BN) *
			  ((n + QW_BM - 1) / QW_BM);
	uint32_t s = 1, steps = k / 256;

	while (s < QW_SPLITS && blocks * s < o1_cuda_sm_count() &&
	       2 * s <= steps)
		s *= 2;
	return s;
}

extern "C" bool o1_gemm_qw_available(void)
{
#ifdef O1_EMU_H
	return false; /* tools/gpu/emu has no wgmma */
#else
	static int have = -1;
	int v = 0;

	if (have < 0)
		have = cudaMemcpyFromSymbol(&v, qw_compiled, sizeof v) ==
			       cudaSuccess &&
		       v;
	return have > 0;
#endif
}

extern "C" bool o1_gemm_qw_fits(enum o1_quant_type type, uint32_t n,
				uint32_t k, const void *w)
{
	return (type == O1_QUANT_Q8_0 || type == O1_QUANT_Q4_0 ||
		type == O1_QUANT_Q4_K || type == O1_QUANT_Q6_K) &&
	       k && k % 256 == 0 && (uintptr_t)w % 16 == 0 &&
	       (n + QW_BM - 1) / QW_BM <= 65535;
}

extern "C" int o1_gemm_qw_cuda(float *y, const uint16_t *x, const void *w,
			       enum o1_quant_type type, uint32_t m, uint32_t n,
			       uint32_t k, uint32_t ldy, bool pdl,
			       cudaStream_t stream)
{
	qw_args a = {};

	if (!y || !x || !w || !n || ldy < n || (uintptr_t)x % 16 ||
	    !o1_gemm_qw_fits(type, n, k, w)) {
		o1_err("gemm_qw: bad operands: type %u m %u n %u k %u ldy %u",
		       (unsigned)type, m, n, k, ldy);
		return -EINVAL;
	}
	if (!o1_gemm_qw_available()) {
		o1_err("gemm_qw: not in this build (wgmma needs sm_90a)");
		return -ENOTSUP;
	}
	if (!m)
		return 0;
	a.y = y, a.x = x, a.w = (const uint8_t *)w;
	a.m = m, a.n = n, a.k = k, a.ldy = ldy;
	a.splits = qw_splits(m, n, k);
	o1_quant_row_bytes(type, k, &a.rb);
	switch (type) {
	case O1_QUANT_Q8_0:
		return qw_launch<O1_QUANT_Q8_0>(a, pdl, stream);
	case O1_QUANT_Q4_0:
		return qw_launch<O1_QUANT_Q4_0>(a, pdl, stream);
	case O1_QUANT_Q4_K:
		return qw_launch<O1_QUANT_Q4_K>(a, pdl, stream);
	default:
		return qw_launch<O1_QUANT_Q6_K>(a, pdl, stream);
	}
}

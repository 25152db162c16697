/* Hopper's asynchronous operations for the .cu files that use them
 * (gemm_qw.cu), one function each, sm_90a:
 *
 *   hop_wgmma       wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16,
 *                   a warpgroup-collective (its 128 threads together):
 *                   D (64 x N, f32) (+)= A (64 x 16) B (16 x N), A from
 *                   registers in mma.sync's A layout per warp (warp w of
 *                   the group holds rows 16 w .. 16 w + 15; mma_dev.h),
 *                   B from shared memory by a descriptor (hop_desc_sw128:
 *                   N rows of 16 elements, K-major, 128-byte swizzle),
 *                   D[4 j + e] = D(16 w + g + 8 (e / 2), 8 j + 2 t + e % 2)
 *                   (g = lane / 4, t = lane % 4); N = 128 or 256 (64 or
 *                   128 accumulators a thread). ADD 0: D = A B.
 *   hop_wgmma_fence, _commit, _wait<N>: before the first product that
 *                   reads registers written since; the products issued
 *                   since the last commit form a group; wait until at most
 *                   the N newest groups are pending (the registers and
 *                   shared memory of the others free again).
 *   hop_bar_*       mbarrier: init (COUNT arrivals a phase), arrive,
 *                   arrive with an expected transaction count (bytes the
 *                   phase must also receive), wait for the phase of a
 *                   parity to complete.
 *   hop_tma_2d      cp.async.bulk.tensor.2d: a box of a tensor map (a
 *                   CUtensorMap, encoded on the host) into shared memory,
 *                   its bytes counted on a barrier; rows and columns past
 *                   the tensor filled with zeros; a 128-byte swizzle puts
 *                   16-byte chunk c of a 128-byte row at chunk c ^ (address
 *                   bits 7-9), as hop_desc_sw128 reads it.
 *   hop_tma_2d_multicast: the same box into the shared memory of each
 *                   block of the thread block cluster whose rank's bit is
 *                   set in MASK, at DST's offset, its bytes counted on
 *                   each one's barrier at BAR's offset (each block reads
 *                   the bytes once from L2 for all of them).
 *   hop_bar_arrive_remote: one arrival on the barrier at BAR's offset in
 *                   block RANK of the cluster (release at cluster scope).
 *   hop_cluster_rank, hop_cluster_sync: the block's rank in its cluster;
 *                   a barrier over every thread of the cluster (release,
 *                   then acquire: the shared memory written before it
 *                   seen by every block after it). A block whose shared
 *                   memory another block's copies or arrivals may still
 *                   reach must not exit before such a barrier.
 *   hop_add2, _mul2, _fma2: bf16x2 arithmetic, each result rounded once to
 *                   nearest even; hop_f16_f32: f16 bits as f32 (exact).
 *
 * Under tools/gpu/emu (emu.h included first, O1_EMU_H defined) they run
 * on emu.cc's fibers, so a kernel built on them is checked on the CPU: a
 * product gathers the warpgroup's A fragments when issued and is computed
 * when a wait retires it, reading B from shared memory then and stopping
 * where B changed since the issue (a buffer refilled under a product in
 * flight); the wait is a rendezvous of the warp's lanes, as the device's
 * (.sync.aligned); a tensor copy lands a few scheduler rounds after its
 * issue (data read before its barrier completes shows as stale), a
 * multicast one in each block of its mask, and a copy or remote arrival
 * that reaches a block of the cluster after its threads ended, or a
 * barrier not yet initialized, is reported; the bf16x2 operations
 * round as the device's (exactly, from double); each element's 16
 * products are added exactly, then to the f32 accumulator with one
 * rounding (the device's order inside a product is unspecified: the
 * tests bound the difference).
 */
#ifndef O1_HOPPER_DEV_H
#define O1_HOPPER_DEV_H

#include <stdint.h>

#include "quant_dev.h"

/* A tensor map (CUtensorMap: 128 bytes, 64-byte aligned), opaque here. */
struct alignas(64) hop_map {
	uint64_t v[16];
};

/* The B operand's descriptor (K-major, 128-byte swizzle: rows of 128
 * bytes, 8-row groups 1024 bytes apart) at shared address A. */
static __host__ __device__ __forceinline__ uint64_t hop_desc_of(uint32_t a)
{
	return (uint64_t)((a & 0x3ffff) >> 4) | (uint64_t)1 << 16 |
	       (uint64_t)(1024 >> 4) << 32 | (uint64_t)1 << 62;
}

#ifdef O1_EMU_H

static inline uint32_t hop_saddr(const void *p)
{
	return emu_saddr(p);
}

static inline uint64_t hop_desc_sw128(const void *p)
{
	return hop_desc_of(hop_saddr(p));
}

static inline void hop_wgmma(float (&d)[64], const uint32_t (&a)[4],
			     uint64_t desc, uint32_t add)
{
	emu_wgmma(d, 128, a, desc, add != 0);
}

static inline void hop_wgmma(float (&d)[128], const uint32_t (&a)[4],
			     uint64_t desc, uint32_t add)
{
	emu_wgmma(d, 256, a, desc, add != 0);
}

static inline void hop_wgmma_fence(void)
{
}

static inline void hop_wgmma_commit(void)
{
	emu_wgmma_commit();
}

template <int N> static inline void hop_wgmma_wait(void)
{
	emu_wgmma_wait(N);
}

template <int N> static inline void hop_pin(float (&)[N])
{
}

static inline void hop_bar_init(uint64_t *bar, uint32_t count)
{
	emu_bar_init(bar, count);
}

static inline void hop_fence_bar_init(void)
{
}

static inline void hop_fence_async_smem(void)
{
}

static inline void hop_bar_arrive(uint64_t *bar)
{
	emu_bar_arrive(bar, 0);
}

static inline void hop_bar_expect_tx(uint64_t *bar, uint32_t bytes)
{
	emu_bar_arrive(bar, bytes);
}

static inline void hop_bar_wait(uint64_t *bar, uint32_t parity)
{
	while (!emu_bar_try_wait(bar, parity))
		;
}

static inline void hop_tma_2d(void *dst, const hop_map *map, int32_t c0,
			      int32_t c1, uint64_t *bar)
{
	emu_tma_2d(dst, map->v, c0, c1, bar);
}

static inline void hop_tma_2d_multicast(void *dst, const hop_map *map,
					int32_t c0, int32_t c1, uint64_t *bar,
					uint16_t mask)
{
	emu_tma_2d_multicast(dst, map->v, c0, c1, bar, mask);
}

static inline void hop_bar_arrive_remote(uint64_t *bar, uint32_t rank)
{
	emu_bar_arrive_remote(bar, rank);
}

static inline uint32_t hop_cluster_rank(void)
{
	return emu_block_rank();
}

static inline void hop_cluster_sync(void)
{
	emu_cluster_sync();
}

/* X rounded once to bf16, to nearest even (X exact or rounded to odd in
 * double: one rounding in effect). */
static inline uint32_t hop_emu_bf16(double x)
{
	double a = fabs(x), r;
	uint32_t sign = signbit(x) ? 0x8000u : 0;
	int e, q;

	if (x != x)
		return 0x7fff;
	if (a == 0 || isinf(a))
		return sign | (a == 0 ? 0 : 0x7f80u);
	frexp(a, &e);	     /* a in [2^(e-1), 2^e) */
	q = e - 8 < -133 ? -133 : e - 8; /* 8 bits; subnormals 2^-133 */
	r = ldexp(nearbyint(ldexp(a, -q)), q);
	if (r >= 0x1p128)
		return sign | 0x7f80u;
	return sign | __float_as_uint((float)r) >> 16;
}

/* S = P + C in double, rounded to odd where inexact (so that rounding it
 * to bf16 rounds the exact sum once). */
static inline double hop_emu_sum_odd(double p, double c)
{
	double s = p + c, bb = s - p, err = (p - (s - bb)) + (c - bb);
	uint64_t u;

	memcpy(&u, &s, 8);
	if (err != 0 && !(u & 1))
		s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
	return s;
}

static inline double hop_emu_half(uint32_t w, int hi)
{
	return __uint_as_float((hi ? w >> 16 : w & 0xffff) << 16);
}

/* OP 0 a + b, 1 a b, 2 a b + c, per half. */
static inline uint32_t hop_emu_op2(uint32_t a, uint32_t b, uint32_t c, int op)
{
	uint32_t r = 0;

	for (int h = 0; h < 2; h++) {
		double x = hop_emu_half(a, h), y = hop_emu_half(b, h),
		       z = hop_emu_half(c, h);
		double v = op == 0   ? hop_emu_sum_odd(x, y)
			   : op == 1 ? x * y /* exact: 16 bits */
				     : hop_emu_sum_odd(x * y, z);

		r |= hop_emu_bf16(v) << (16 * h);
	}
	return r;
}

static inline uint32_t hop_add2(uint32_t a, uint32_t b)
{
	return hop_emu_op2(a, b, 0, 0);
}

static inline uint32_t hop_mul2(uint32_t a, uint32_t b)
{
	return hop_emu_op2(a, b, 0, 1);
}

static inline uint32_t hop_fma2(uint32_t a, uint32_t b, uint32_t c)
{
	return hop_emu_op2(a, b, c, 2);
}

static inline float hop_f16_f32(uint32_t h)
{
	return qd_f16(h);
}

#else

/* D (+)= A . B, N = 2 x D's count: ADD 0 starts the sums (D's values
 * not read). */
static __device__ __forceinline__ void
hop_wgmma(float (&d)[64], const uint32_t (&a)[4], uint64_t desc, uint32_t add)
{
	asm volatile(
	    "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
	    "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
	    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%"
	    "18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%"
	    "34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%"
	    "50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
	    "{%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
	      "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
	      "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
	      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
	      "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
	      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
	      "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
	      "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
	      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
	      "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
	      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
	      "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
	      "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(add));
}

static __device__ __forceinline__ void
hop_wgmma(float (&d)[128], const uint32_t (&a)[4], uint64_t desc, uint32_t add)
{
	asm volatile(
	    "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
	    "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
	    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%"
	    "18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%"
	    "34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%"
	    "50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%"
	    "66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%"
	    "82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%"
	    "98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%"
	    "111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%"
	    "124,%125,%126,%127}, "
	    "{%128,%129,%130,%131}, %132, p, 1, 1, 0;\n}\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
	      "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
	      "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
	      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
	      "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
	      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
	      "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
	      "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
	      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
	      "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
	      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
	      "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
	      "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
	      "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
	      "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]),
	      "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
	      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
	      "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
	      "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]),
	      "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),
	      "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
	      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
	      "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
	      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
	      "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
	      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]),
	      "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(add));
}

static __device__ __forceinline__ void hop_wgmma_fence(void)
{
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

static __device__ __forceinline__ void hop_wgmma_commit(void)
{
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N> static __device__ __forceinline__ void hop_wgmma_wait(void)
{
	asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* The accumulators kept in their registers across the asynchronous
 * products (no copy of them the products would wait for). */
template <int N> static __device__ __forceinline__ void hop_pin(float (&d)[N])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		asm volatile("" : "+f"(d[i])::"memory");
}

static __device__ __forceinline__ uint32_t hop_saddr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ uint64_t hop_desc_sw128(const void *p)
{
	return hop_desc_of(hop_saddr(p));
}

static __device__ __forceinline__ void hop_bar_init(uint64_t *bar,
						   uint32_t count)
{
	asm volatile(
	    "mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(hop_saddr(bar)),
	    "r"(count)
	    : "memory");
}

/* The barriers' initialization made visible (before any copy counts on
 * them), and the generic proxy's shared-memory accesses ordered before
 * the asynchronous proxy's (a buffer read by threads, then refilled by a
 * copy). */
static __device__ __forceinline__ void hop_fence_bar_init(void)
{
	asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

static __device__ __forceinline__ void hop_fence_async_smem(void)
{
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* One arrival on BAR. */
static __device__ __forceinline__ void hop_bar_arrive(uint64_t *bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(
			 hop_saddr(bar))
		     : "memory");
}

static __device__ __forceinline__ void hop_bar_expect_tx(uint64_t *bar,
						     uint32_t bytes)
{
	asm volatile(
	    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
		hop_saddr(bar)),
	    "r"(bytes)
	    : "memory");
}

static __device__ __forceinline__ void hop_bar_wait(uint64_t *bar,
						   uint32_t parity)
{
	uint32_t done;

	do
		asm volatile("{\n.reg .pred p;\n"
			     "mbarrier.try_wait.parity.shared::cta.b64 p, "
			     "[%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
			     : "=r"(done)
			     : "r"(hop_saddr(bar)), "r"(parity)
			     : "memory");
	while (!done);
}

/* Box (C0, C1) of MAP into DST, counted on BAR. */
static __device__ __forceinline__ void
hop_tma_2d(void *dst, const hop_map *map, int32_t c0, int32_t c1, uint64_t *bar)
{
	asm volatile(
	    "cp.async.bulk.tensor.2d.shared::cluster.global.tile."
	    "mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
		hop_saddr(dst)),
	    "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(hop_saddr(bar))
	    : "memory");
}

/* Box (C0, C1) of MAP into DST of each block of MASK (ranks' bits),
 * counted on each one's barrier at BAR's offset. */
static __device__ __forceinline__ void
hop_tma_2d_multicast(void *dst, const hop_map *map, int32_t c0, int32_t c1,
		     uint64_t *bar, uint16_t mask)
{
	asm volatile(
	    "cp.async.bulk.tensor.2d.shared::cluster.global.tile."
	    "mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
	    "%3}], [%4], %5;" ::"r"(hop_saddr(dst)),
	    "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(hop_saddr(bar)),
	    "h"(mask)
	    : "memory");
}

/* One arrival on the barrier at BAR's offset in block RANK. */
static __device__ __forceinline__ void hop_bar_arrive_remote(uint64_t *bar,
							    uint32_t rank)
{
	uint32_t at;

	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
		     : "=r"(at)
		     : "r"(hop_saddr(bar)), "r"(rank));
	asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, "
		     "[%0];" ::"r"(at)
		     : "memory");
}

static __device__ __forceinline__ uint32_t hop_cluster_rank(void)
{
	uint32_t r;

	asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
	return r;
}

static __device__ __forceinline__ void hop_cluster_sync(void)
{
	asm volatile("barrier.cluster.arrive.release.aligned;\n"
		     "barrier.cluster.wait.acquire.aligned;" ::
			 : "memory");
}

/* bf16x2 arithmetic, each result rounded once to nearest even. */
static __device__ __forceinline__ uint32_t hop_add2(uint32_t a, uint32_t b)
{
	uint32_t d;

	asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
	return d;
}

static __device__ __forceinline__ uint32_t hop_mul2(uint32_t a, uint32_t b)
{
	uint32_t d;

	asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
	return d;
}

static __device__ __forceinline__ uint32_t hop_fma2(uint32_t a, uint32_t b,
						   uint32_t c)
{
	uint32_t d;

	asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}

/* f16 bits H as f32 by the conversion instruction (exact; a NaN may come
 * out quieted). */
static __device__ __forceinline__ float hop_f16_f32(uint32_t h)
{
	float f;

	asm("{\n.reg .b16 t;\nmov.b16 t, %1;\ncvt.f32.f16 %0, t;\n}"
	    : "=f"(f)
	    : "h"((unsigned short)h));
	return f;
}

#endif
#endif

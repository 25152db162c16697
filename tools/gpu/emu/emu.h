/* CPU emulation of CUDA device code, to check a kernel's logic where no
 * GPU is: the .cu file is compiled as C++ with this header first (its
 * launch rewritten to EMU_LAUNCH, its extern __shared__ array to
 * emu_smem()), and every thread of a cluster runs as a fiber (emu.cc).
 * __syncthreads, cluster barriers and warp intrinsics are barriers over
 * the fibers concerned, so a barrier or warp intrinsic reached by only
 * part of its threads deadlocks and is reported; the order of fibers is
 * shuffled each round and atomics yield at random, to vary
 * interleavings (seeded by O1_TEST_SEED where it is set). Floating point
 * is the host's (no FMA: build with -ffp-contract=off), so __f*_rn match
 * the device; expf, exp and log are glibc's, which differ from CUDA's by
 * an ulp or two. Hopper's warpgroup products, mbarriers and tensor copies
 * (kernels/hopper_dev.h) run here too; threads now and then sit out a
 * few dozen rounds (emu_stall) so that the others run ahead through their
 * windows. Not covered: the memory model beyond barriers, timing,
 * resource limits. */
#ifndef O1_EMU_H
#define O1_EMU_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
#define __align__(n) alignas(n)
/* Static shared arrays: the blocks of a grid launched through
 * emu_launch_grid run one at a time, so one static copy per kernel serves
 * the running block (cluster launches, whose blocks run together, must
 * use only the dynamic array). */
#define __shared__ static
#define __expf(x) expf(x)

struct emu_idx {
	unsigned x, y, z;
};

struct emu_thread {
	emu_idx tid, bid, bdim, gdim;
};

extern emu_thread *emu_cur;
#define threadIdx (emu_cur->tid)
#define blockIdx  (emu_cur->bid)
#define blockDim  (emu_cur->bdim)
#define gridDim	  (emu_cur->gdim)

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c)
	{
	}
};

struct float4 {
	float x, y, z, w;
};

struct float2 {
	float x, y;
};

static inline float2 make_float2(float a, float b)
{
	return {a, b};
}

struct uint4 {
	unsigned x, y, z, w;
};

static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d)
{
	return {a, b, c, d};
}

/* The memory model beyond barriers is not emulated (fibers switch only
 * at barriers, warp exchanges and atomics). */
static inline void __threadfence(void)
{
}

static inline void __threadfence_block(void)
{
}

template <class T> static inline T __ldcg(const T *p)
{
	return *p;
}

static inline float4 make_float4(float a, float b, float c, float d)
{
	return {a, b, c, d};
}

template <class T> static inline T __ldg(const T *p)
{
	return *p;
}

static inline float __fadd_rn(float a, float b)
{
	return a + b;
}

static inline float __fsub_rn(float a, float b)
{
	return a - b;
}

static inline float __fmul_rn(float a, float b)
{
	return a * b;
}

/* glibc's fmaf rounds once, as the device's does. */
static inline float __fmaf_rn(float a, float b, float c)
{
	return fmaf(a, b, c);
}

static inline float __fdiv_rn(float a, float b)
{
	return a / b;
}

static inline int __float2int_rz(float x)
{
	return (int)x;
}

/* Round to nearest even (the host's default mode); NaN gives 0 as the
 * device's cvt.rni.s32.f32 does, out-of-range values saturate. */
static inline int __float2int_rn(float x)
{
	if (x != x)
		return 0;
	if (x >= 2147483647.0f)
		return 2147483647;
	if (x <= -2147483648.0f)
		return (-2147483647 - 1);
	return (int)nearbyintf(x);
}

/* Four signed byte products of A and B added to C (sm_61+). */
static inline int __dp4a(int a, int b, int c)
{
	for (int i = 0; i < 4; i++)
		c += (int)(int8_t)((uint32_t)a >> (8 * i)) *
		     (int)(int8_t)((uint32_t)b >> (8 * i));
	return c;
}

/* Byte I of the result: byte (S >> 4 I) & 7 of B:A (A the low word). */
static inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s)
{
	uint64_t v = (uint64_t)b << 32 | a;
	unsigned r = 0;

	for (int i = 0; i < 4; i++) {
		unsigned sel = (s >> (4 * i)) & 7;

		r |= (unsigned)(v >> (8 * sel) & 0xff) << (8 * i);
	}
	return r;
}

/* The low word of HI:LO shifted right by SHIFT mod 32. */
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift)
{
	return (unsigned)((((uint64_t)hi << 32) | lo) >> (shift & 31));
}

/* The high word of HI:LO shifted left by SHIFT mod 32. */
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift)
{
	return (unsigned)(((((uint64_t)hi << 32) | lo) << (shift & 31)) >> 32);
}

static inline unsigned long long __double2ull_rn(double x)
{
	return (unsigned long long)nearbyint(x);
}

static inline uint32_t __float_as_uint(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float __uint_as_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline float __int_as_float(int u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static inline int __popc(unsigned x)
{
	return __builtin_popcount(x);
}

static inline int __ffs(unsigned x)
{
	return __builtin_ffs(x);
}

static inline uint32_t min(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

void __syncthreads(void);
void emu_cluster_sync(void);
unsigned emu_block_rank(void);
void *emu_map_rank(void *p, unsigned rank);
unsigned char *emu_smem(void);
void emu_yield_maybe(void);
unsigned emu_lane(void);
/* A warp exchange: every lane puts a value, then reads any lane's, then
 * says it is done (the slots are reused after). */
void emu_warp_put(const void *v, size_t n);
void emu_warp_get(unsigned lane, void *v, size_t n);
void emu_warp_done(void);

template <class T> static inline T emu_shfl(T v, unsigned src, bool keep)
{
	T r = v;

	emu_warp_put(&v, sizeof(T));
	if (!keep)
		emu_warp_get(src & 31, &r, sizeof(T));
	emu_warp_done();
	return r;
}

template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o)
{
	return emu_shfl(v, emu_lane() ^ o, false);
}

template <class T> static inline T __shfl_sync(unsigned, T v, int src)
{
	return emu_shfl(v, src, false);
}

template <class T> static inline T __shfl_up_sync(unsigned, T v, unsigned delta)
{
	return emu_shfl(v, emu_lane() - delta, emu_lane() < delta);
}

/* A warp barrier: an exchange that reads nothing. */
static inline void __syncwarp(unsigned = 0xffffffffu)
{
	unsigned v = 0;

	emu_warp_put(&v, 4);
	emu_warp_done();
}

static inline unsigned __ballot_sync(unsigned, int pred)
{
	unsigned r = 0, p = pred ? 1 : 0;

	emu_warp_put(&p, 4);
	for (unsigned l = 0; l < 32; l++) {
		unsigned q;

		emu_warp_get(l, &q, 4);
		r |= q << l;
	}
	emu_warp_done();
	return r;
}

static inline int __all_sync(unsigned mask, int pred)
{
	return __ballot_sync(mask, pred) == 0xffffffffu;
}

static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
	unsigned o;

	emu_yield_maybe();
	o = *p;
	*p += v;
	return o;
}

static inline float atomicAdd(float *p, float v)
{
	float o;

	emu_yield_maybe();
	o = *p;
	*p = o + v;
	return o;
}

/* __syncthreads that also returns whether PRED was non-zero in any thread
 * of the block. */
int __syncthreads_or(int pred);

template <class T> static inline void __stcg(T *p, T v)
{
	*p = v;
}

/* Hopper's asynchronous operations, for kernels/hopper_dev.h (its header
 * says what they emulate): P's offset in the block's shared memory (a
 * pointer elsewhere aborts); a warpgroup's product, issued (its A
 * fragments gathered from the 128 threads, B named by the descriptor)
 * and retired by the issuing thread's wait (a rendezvous of its warp's
 * lanes); mbarriers kept beside the shared memory, keyed by address;
 * tensor copies landing a few scheduler rounds after their issue. */
uint32_t emu_saddr(const void *p);
void emu_wgmma(float *d, unsigned n, const uint32_t *a, uint64_t desc,
	       bool add);
void emu_wgmma_commit(void);
void emu_wgmma_wait(unsigned n);
void emu_bar_init(uint64_t *bar, unsigned count);
void emu_bar_arrive(uint64_t *bar, unsigned tx);
bool emu_bar_try_wait(uint64_t *bar, unsigned parity);
void emu_tma_2d(void *dst, const uint64_t *map, int c0, int c1,
		uint64_t *bar);
/* Clusters: a tensor copy multicast to the blocks of MASK's ranks (the
 * same offsets in each, counted on each one's barrier at BAR's offset),
 * and an arrival on block RANK's mbarrier at BAR's offset; either one
 * that reaches a block whose threads have all ended is reported. */
void emu_tma_2d_multicast(void *dst, const uint64_t *map, int c0, int c1,
			  uint64_t *bar, unsigned mask);
void emu_bar_arrive_remote(uint64_t *bar, unsigned rank);

/* Runs F for every thread of a (GX, GY) grid of NT-thread blocks in
 * clusters of GX blocks, one cluster after another, with SMEM bytes of
 * shared memory per block. */
void emu_launch(unsigned gx, unsigned gy, unsigned nt, size_t smem,
		std::function<void()> f);
#define EMU_LAUNCH(gx, gy, nt, sm, fn, ...)                                    \
	emu_launch(gx, gy, nt, sm, [=]() { fn(__VA_ARGS__); })
/* Runs F for every thread of a GRID of BLOCK.x-thread blocks, one block
 * at a time (no clusters), in an order shuffled per launch. */
void emu_launch_grid(dim3 grid, dim3 block, size_t smem,
		     std::function<void()> f);
/* The same in clusters of CL.x x CL.y x CL.z blocks (GRID a multiple of
 * it): each cluster's blocks run together (their shared memory mapped to
 * each other, cluster barriers over them; rank x + CL.x (y + CL.y z), as
 * the hardware's), the clusters one at a time in a shuffled order. */
void emu_launch_grid_cl(dim3 grid, dim3 block, dim3 cl, size_t smem,
			std::function<void()> f);

#endif

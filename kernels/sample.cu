/* Token sampling on the device: o1_sample_rows (sample.h) for rows of
 * logits that stay where the model wrote them; only the result structs
 * (ids, logprobs, entropy, top-n) are written.
 *
 * Layout. One cluster of SMP_CL (8) blocks of SMP_NT (512) threads per row:
 * grid (8, n_rows), cluster (8, 1, 1). Block r of a row holds slice r of it,
 * [r SL, (r + 1) SL) with SL = ceil(ceil(vocab / 1024) / 8) x 1024 (19456
 * at vocab 151936), in shared memory: w (the raw logits, then penalised,
 * then divided by the temperature) and e (exp_neg(w - max)). When two
 * slices of floats do not fit in shared memory (vocab above 188416) they
 * live in SCRATCH instead, (rows, 8, 2, SL) f32, same code through
 * generic pointers. The blocks of a row exchange partial results through
 * distributed shared memory (struct smp_part, read after a cluster
 * barrier); block 0 gathers, sorts and walks short candidate lists
 * (struct smp_res, buf). Every decision that changes control flow is
 * computed identically by every block, so all reach the same barriers.
 *
 * Per row: load the slice (16-byte loads when aligned) with the best key
 * (value, then lowest id; NaN never wins); sum exp(l - max) and
 * exp(l - max)(l - max) for the logprob and entropy; the top-n of the raw
 * row; penalties on the shared copy (the row's penalty ids are distinct,
 * so one thread writes each); then
 *   - greedy: the best penalised key;
 *   - temperature only: e and the reference's sums (sample.c's blocks of
 *     1024 tokens, 16 float partial sums each, in the same order, so the
 *     total and block sums are the reference's bit for bit), the block
 *     the draw falls in from those sums, then a block-wide scan of e in
 *     id order from that block's start;
 *   - top-k, top-p, min-p: the kept tokens form a prefix of the order
 *     (w descending, lower id first). A bound that surely holds the cut
 *     (top-k: the k-th highest warp maximum for k <= 128, else a count
 *     descent to the k-th token; min-p: e >= min_p; top-p:
 *     the first of eight probability thresholds whose mass reaches top_p)
 *     lets block 0 gather at most SMP_CAP candidates, sort them (bitonic)
 *     and apply sampler.h's steps 4-6 exactly in double. When the
 *     candidates do not fit (top_p near 1 on a flat row, top_k above
 *     ~2000), the cut and the draw are found by radix descent over the
 *     64-bit keys (value bits, then id): per level a histogram of the
 *     next 8 bits with counts and exact fixed-point masses (e x 2^43, sums
 *     of integers, so every order gives the same bits), merged over the
 *     cluster, until the bin that holds the crossing has at most SMP_CAP
 *     tokens, which block 0 then sorts and walks.
 * Masks (sample.h): a masked row's refused tokens become -inf as the
 * slice is loaded (one 32-bit word read per 32 tokens, through the
 * read-only cache), so everything after sees the masked row as the
 * reference's masked copy; each block also finds its lowest allowed id,
 * which answers when the row allows nothing (id -1) or the draw lands on
 * a refused token (degenerate rows), as the reference does. A row with
 * mask 0 pays one test of a register per loaded group.
 * Nothing here synchronises with the host or allocates; n_rows and vocab
 * fix the launch, every per-row value is read on the device, so a launch
 * replays from a CUDA graph.
 *
 * Agreement with the reference. w, e, the penalties and the cut tests
 * are the same float operations (no FMA contraction: __f*_rn), so kept
 * sets match; running sums are double (fixed point in the radix path)
 * summed in another order than the reference's, so a draw can differ only
 * where U x kept lies within ~1e-11 relative (radix path: ~1e-8) of a
 * boundary between two tokens, or a top-p ratio as close to top_p. NaN logits:
 * never drawn in the sampling modes (the reference's result on such rows is not
 * specified); in the top-n they rank below -inf; greedy as sample.h says.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include <cooperative_groups.h>

#include "cuda_util.h"
#include "kernels_cuda.h"

extern "C" {
#include "common/log.h"
}

namespace cg = cooperative_groups;

#define SMP_MAX_DEVICES 64  /* devices whose opt-in allow_smem remembers */
#define SMP_CL		8   /* blocks per row (a portable cluster) */
#define SMP_NT		512 /* threads per block */
#define SMP_NW		(SMP_NT / 32)
#define SMP_CAP		2048 /* candidates block 0 sorts; a power of two */
#define SMP_PER		(SMP_CAP / SMP_NT)
#define SMP_RB		1024 /* the reference's block of exp sums */
#define SMP_LANES	16   /* the reference's float partial sums per block */
#define SMP_MAX_BPR	64   /* reference blocks per slice */
#define SMP_NTH		8    /* top-p probe thresholds */
#define SMP_SMEM	(227 * 1024) /* dynamic shared memory of an sm_90 block */
#define SMP_FULL	0xffffffffu
#define SMP_FX		0x1p43 /* fixed point of e in [0, 1]: 2^19 of them fit */
#define SMP_FX_INV	0x1p-43
#define SMP_MAX_VOCAB	(SMP_CL * SMP_MAX_BPR * SMP_RB)

/* A histogram of one radix level: members per digit and their weight as
 * two words (the low word's carries go to the high one). */
struct smp_hist {
	uint32_t n[256];
	uint32_t lo[256];
	uint32_t hi[256];
};

/* One pass over the members of a set: count, weight, lowest key. */
struct smp_red {
	unsigned long long w, min_key;
	uint32_t n;
};

/* A block's partial results, read by the others after a barrier. */
struct smp_part {
	unsigned long long raw_best, src_best; /* best key of the slice */
	unsigned long long wmax_raw[SMP_NW], wmax_src[SMP_NW]; /* per warp */
	double z, zl; /* sum exp(l - m), sum exp(l - m)(l - m), m its max */
	double bsum[SMP_MAX_BPR], tail; /* the reference's block sums */
	double th_m[SMP_NTH];		/* mass with e >= threshold */
	uint32_t th_n[SMP_NTH];
	uint32_t n_valid;  /* tokens whose w is not NaN */
	uint32_t first_ok; /* the slice's lowest allowed id (masked rows) */
	struct smp_red red[2];
};

/* Block 0's results, read by the others after a barrier. */
struct smp_res {
	unsigned long long key; /* a descent's element */
	unsigned long long top[O1_SAMPLE_MAX_TOP];
	uint32_t gather_n; /* candidates appended so far (never reset) */
	int32_t found, id;
};

struct smp_shared {
	struct smp_hist h[2];
	struct smp_part p;
	struct smp_res r;
	unsigned long long mm[256]; /* a histogram merged over the cluster, */
	uint32_t mc[256];	    /* highest digit first */
	unsigned long long keys[SMP_CL * SMP_NW];
	float zpart[SMP_MAX_BPR][SMP_LANES];
	double bs[SMP_CL * SMP_MAX_BPR];
	uint32_t th_n[SMP_NW][SMP_NTH];
	float th_m[SMP_NW][SMP_NTH];
	double tmp_d[SMP_NW], bc_d[4];
	unsigned long long tmp_u[SMP_NW], bc_u[4];
	uint32_t tmp_i[SMP_NW], bc_i[4];
	unsigned long long buf[SMP_CAP];
};

/* What a descent or a gather walks: members are the tokens with key >= lo
 * (and a w that is not NaN, and e >= min_p when minp), weighed by 1, by
 * fx(e) (the stored float e) or by fx(exp((double)w - mx)) (top-k). */
enum { SMP_W_COUNT, SMP_W_E, SMP_W_EXP };

struct smp_set {
	unsigned long long lo;
	int valid_only, minp, weight;
	float min_p, mx;
};

/* The crossing a descent looks for, on the running weight C of the
 * members in order: C >= k; !(C / mass < top_p); t < C. */
enum { SMP_P_COUNT, SMP_P_TOPP, SMP_P_DRAW };

struct smp_pred {
	int kind;
	unsigned long long k;
	double mass, t;
	float top_p;
};

/* Shapes fixed by (n_rows, vocab) on the host. */
struct smp_geom {
	uint32_t vocab, sl, bpr, in_smem;
	size_t smem;
};

/* One thread's view of its row and block. */
struct smp_ctx {
	struct smp_shared *s;
	float *w, *e;	      /* this block's slice */
	float *scr;	      /* the row's slices in scratch, or NULL */
	const float *raw;     /* the row's logits */
	const uint32_t *mask; /* the row's token bitmask, or NULL */
	uint32_t first_ok;    /* lowest allowed id (SMP_FULL: none) */
	struct o1_sample_row p;
	uint32_t row, rank, s0, m, vocab, sl, bpr, n_top;
	uint32_t gbase; /* r.gather_n before the current gather */
	int hp, rp;	/* parity of the histogram and reduction slots */
	unsigned long long raw_best, src_best;
	float raw_max;
	double z, zl;
};

static __device__ __forceinline__ uint32_t lane_id(void)
{
	return threadIdx.x & 31;
}

static __device__ __forceinline__ uint32_t warp_id(void)
{
	return threadIdx.x >> 5;
}

static __device__ __forceinline__ void cluster_sync(void)
{
	cg::this_cluster().sync();
}

template <class T> static __device__ T *at_rank(T *p, uint32_t rank)
{
	return cg::this_cluster().map_shared_rank(p, rank);
}

/* Order-preserving bits of V: a higher value has a higher key; -0 is +0
 * (they tie); NaN is 0, below -inf. */
static __device__ __forceinline__ uint32_t vkey(float v)
{
	uint32_t u = __float_as_uint(v);

	if (v != v)
		return 0;
	if (v == 0.0f)
		u = 0;
	return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* A token's place in the order: value descending, then id ascending. */
static __device__ __forceinline__ unsigned long long key64(float v, uint32_t id)
{
	return (unsigned long long)vkey(v) << 32 | (SMP_FULL - id);
}

static __device__ __forceinline__ uint32_t key_id(unsigned long long k)
{
	return SMP_FULL - (uint32_t)k;
}

static __device__ __forceinline__ float key_value(unsigned long long k)
{
	uint32_t h = (uint32_t)(k >> 32);

	if (!h)
		return __uint_as_float(0x7fc00000u);
	return __uint_as_float(h & 0x80000000u ? h & 0x7fffffffu : ~h);
}

/* sample.c's exp_neg, operation for operation (no FMA contraction): e^x
 * for x <= 0, 0 below -87. */
static __device__ __forceinline__ float exp_neg(float x)
{
	float c = x < -87.0f ? -87.0f : x;
	float n = __fsub_rn(__fadd_rn(__fmul_rn(c, 1.44269504f), 12582912.0f),
			    12582912.0f);
	float r = __fsub_rn(__fsub_rn(c, __fmul_rn(n, 0.693145751953125f)),
			    __fmul_rn(n, 1.42860677e-06f));
	float q = 1.0f / 5040;

	q = __fadd_rn(__fmul_rn(q, r), 1.0f / 720);
	q = __fadd_rn(__fmul_rn(q, r), 1.0f / 120);
	q = __fadd_rn(__fmul_rn(q, r), 1.0f / 24);
	q = __fadd_rn(__fmul_rn(q, r), 1.0f / 6);
	q = __fadd_rn(__fmul_rn(q, r), 0.5f);
	q = __fadd_rn(__fmul_rn(q, r), 1.0f);
	q = __fadd_rn(__fmul_rn(q, r), 1.0f);
	return x < -87.0f ? 0.0f
			  : __fmul_rn(q, __uint_as_float(
					     (uint32_t)(__float2int_rz(n) + 127)
					     << 23));
}

/* e of a scaled logit W: exp_neg(w - mx), NaN as 0. */
static __device__ __forceinline__ float e_of(float w, float mx)
{
	float x = exp_neg(__fsub_rn(w, mx));

	return x == x ? x : 0.0f;
}

/* Fixed point of a probability in [0, 1]: x 2^43; NaN and <= 0 give 0. */
static __device__ __forceinline__ unsigned long long fx(double x)
{
	return x > 0 ? __double2ull_rn(x * SMP_FX) : 0;
}

struct op_add {
	template <class T> __device__ T operator()(T a, T b) const
	{
		return a + b;
	}
};

struct op_min {
	template <class T> __device__ T operator()(T a, T b) const
	{
		return b < a ? b : a;
	}
};

struct op_max {
	template <class T> __device__ T operator()(T a, T b) const
	{
		return b > a ? b : a;
	}
};

template <class T, class Op> static __device__ T warp_reduce(T v, Op op)
{
	for (int o = 16; o; o >>= 1)
		v = op(v, __shfl_xor_sync(SMP_FULL, v, o));
	return v;
}

/* V reduced over the block in a fixed order (warp 0's, 1's, ...); every
 * thread gets it. TMP holds one value per warp. */
template <class T, class Op>
static __device__ T block_reduce(T v, Op op, T *tmp)
{
	v = warp_reduce(v, op);
	__syncthreads();
	if (!lane_id())
		tmp[warp_id()] = v;
	__syncthreads();
	v = tmp[0];
	for (int i = 1; i < SMP_NW; i++)
		v = op(v, tmp[i]);
	return v;
}

/* Inclusive prefix sum of V in thread order; *TOTAL the block's sum. */
template <class T> static __device__ T block_scan(T v, T *tmp, T *total)
{
	uint32_t lane = lane_id(), w = warp_id();
	T off = 0, all = 0;

	for (int o = 1; o < 32; o <<= 1) {
		T y = __shfl_up_sync(SMP_FULL, v, o);

		if (lane >= (uint32_t)o)
			v += y;
	}
	__syncthreads();
	if (lane == 31)
		tmp[w] = v;
	__syncthreads();
	for (uint32_t i = 0; i < SMP_NW; i++) {
		off += i < w ? tmp[i] : 0;
		all += tmp[i];
	}
	*total = all;
	return v + off;
}

/* Sorts B[0, N) descending (N <= SMP_CAP): bitonic over the next power of
 * two, padded with 0 (below every key). */
static __device__ void sort_desc(unsigned long long *b, uint32_t n)
{
	uint32_t np = 1;

	while (np < n)
		np <<= 1;
	for (uint32_t i = n + threadIdx.x; i < np; i += SMP_NT)
		b[i] = 0;
	__syncthreads();
	for (uint32_t k = 2; k <= np; k <<= 1)
		for (uint32_t j = k >> 1; j; j >>= 1) {
			for (uint32_t i = threadIdx.x; i < np; i += SMP_NT) {
				uint32_t q = i ^ j;
				unsigned long long a = b[i], c = b[q];

				if (q > i && (!(i & k) ? a < c : a > c))
					b[i] = c, b[q] = a;
			}
			__syncthreads();
		}
}

/* Rank R's partials. */
static __device__ __forceinline__ const struct smp_part *
part_of(const struct smp_ctx &c, uint32_t r)
{
	return &at_rank(c.s, r)->p;
}

/* Element G of the row's e, whichever block holds it. */
static __device__ float e_at(const struct smp_ctx &c, uint32_t g)
{
	uint32_t r = g / c.sl;

	if (c.scr)
		return c.scr[((size_t)r * 2 + 1) * c.sl + (g - r * c.sl)];
	return at_rank(c.e, r)[g - r * c.sl];
}

/* Bit ID of the row's mask. */
static __device__ __forceinline__ bool allowed(const struct smp_ctx &c,
					       uint32_t id)
{
	return __ldg(c.mask + id / 32) >> (id % 32) & 1;
}

/* V with the refused ones of the 4 tokens from ID (a multiple of 4) at
 * -inf; *FIRST lowered to the lowest allowed of them. */
static __device__ __forceinline__ float4 mask4(const struct smp_ctx &c,
					       float4 v, uint32_t id,
					       uint32_t *first)
{
	uint32_t b = __ldg(c.mask + id / 32) >> (id % 32) & 15;

	if (b && id + __ffs(b) - 1 < *first)
		*first = id + __ffs(b) - 1;
	v.x = b & 1 ? v.x : -INFINITY;
	v.y = b & 2 ? v.y : -INFINITY;
	v.z = b & 4 ? v.z : -INFINITY;
	v.w = b & 8 ? v.w : -INFINITY;
	return v;
}

/* Copies the slice of raw logits into w (a masked row's refused tokens
 * at -inf); returns this thread's best key and, for a masked row, its
 * lowest allowed id in *FIRST (SMP_FULL: none). */
static __device__ unsigned long long load_slice(struct smp_ctx &c,
						uint32_t *first)
{
	const float *src = c.raw + c.s0;
	unsigned long long best = 0;
	uint32_t n4 = 0;

	*first = SMP_FULL;
	if (!(((uintptr_t)src | (uintptr_t)c.w) & 15)) {
		const float4 *s4 = (const float4 *)src;
		float4 *d4 = (float4 *)c.w;

		n4 = c.m / 4;
		for (uint32_t i0 = threadIdx.x; i0 < n4; i0 += SMP_NT * 8) {
			float4 v[8];

#pragma unroll
			for (int u = 0; u < 8; u++) {
				uint32_t i = i0 + u * SMP_NT;

				v[u] = i < n4 ? __ldg(s4 + i)
					      : make_float4(0, 0, 0, 0);
			}
#pragma unroll
			for (int u = 0; u < 8; u++) {
				uint32_t i = i0 + u * SMP_NT, id = c.s0 + 4 * i;
				unsigned long long k;

				if (i >= n4)
					continue;
				if (c.mask)
					v[u] = mask4(c, v[u], id, first);
				d4[i] = v[u];
				k = key64(v[u].x, id);
				k = op_max()(k, key64(v[u].y, id + 1));
				k = op_max()(k, key64(v[u].z, id + 2));
				k = op_max()(k, key64(v[u].w, id + 3));
				best = op_max()(best, k);
			}
		}
	}
	for (uint32_t i = n4 * 4 + threadIdx.x; i < c.m; i += SMP_NT) {
		float v = __ldg(src + i);

		if (c.mask && !allowed(c, c.s0 + i))
			v = -INFINITY;
		else if (c.mask && c.s0 + i < *first)
			*first = c.s0 + i;
		c.w[i] = v;
		best = op_max()(best, key64(v, c.s0 + i));
	}
	return best;
}

/* Publishes this block's best key (*BLOCK) and its warps' (WMAX). */
static __device__ unsigned long long publish_best(struct smp_ctx &c,
						  unsigned long long best,
						  unsigned long long *wmax)
{
	unsigned long long wb = warp_reduce(best, op_max());

	if (!lane_id())
		wmax[warp_id()] = wb;
	return block_reduce(best, op_max(), c.s->tmp_u);
}

/* The best key of w in this slice (after the penalties). */
static __device__ unsigned long long slice_best(const struct smp_ctx &c)
{
	unsigned long long best = 0;

	for (uint32_t i = threadIdx.x; i < c.m; i += SMP_NT)
		best = op_max()(best, key64(c.w[i], c.s0 + i));
	return best;
}

/* z and zl of the raw slice relative to its maximum MB (float partial
 * sums per thread, double over the block): -inf terms are 0 as in the
 * reference, NaN ones make both NaN. __expf's error grows with |x| only
 * on terms negligible beside the maximum's: z within ~1e-6 relative. */
static __device__ void raw_sums(struct smp_ctx &c, float mb)
{
	float z = 0, zl = 0;

	for (uint32_t i = threadIdx.x; i < c.m; i += SMP_NT) {
		float v = c.w[i], x, y;

		if (v == -INFINITY)
			continue;
		x = v - mb;
		if (x < -87.0f)
			continue;
		y = __expf(x);
		z += y;
		zl += y * x;
	}
	double bz = block_reduce((double)z, op_add(), c.s->tmp_d);
	double bzl = block_reduce((double)zl, op_add(), c.s->tmp_d);

	if (!threadIdx.x)
		c.s->p.z = bz, c.s->p.zl = bzl;
}

/* The row's raw maximum, z and zl from every block's partials (rescaled
 * to the row's maximum); NaN when the maximum is -inf or NaN, as in the
 * reference, whose l - max is then NaN. */
static __device__ void merge_raw(struct smp_ctx &c)
{
	unsigned long long best = 0;
	double z = 0, zl = 0, mx;

	for (uint32_t r = 0; r < SMP_CL; r++)
		best = op_max()(best, part_of(c, r)->raw_best);
	c.raw_best = best;
	c.raw_max = key_value(best);
	mx = c.raw_max;
	for (uint32_t r = 0; r < SMP_CL; r++) {
		const struct smp_part *q = part_of(c, r);
		double m = key_value(q->raw_best), a, d;

		if (!(m > -INFINITY)) { /* empty, NaN or -inf: 0 or NaN */
			z += q->z, zl += q->zl;
			continue;
		}
		d = m - mx;
		a = exp(d);
		z += a * q->z;
		zl += a * (q->zl + d * q->z);
	}
	if (!(mx > -INFINITY))
		z = zl = NAN;
	c.z = z, c.zl = zl;
}

/* Appends this block's members (TAKE(i, &key)) to block 0's buf through
 * one remote atomic per warp on its counter. At most SMP_CAP land; the
 * count after gather_done() says how many were offered. */
template <class F> static __device__ void gather(struct smp_ctx &c, F take)
{
	struct smp_shared *s0 = at_rank(c.s, 0);

	for (uint32_t b = warp_id() * 32; b < c.m; b += SMP_NT) {
		uint32_t i = b + lane_id(), ball, pos = 0;
		unsigned long long k = 0;
		bool t = i < c.m && take(i, &k);

		ball = __ballot_sync(SMP_FULL, t);
		if (!ball)
			continue;
		if (!lane_id())
			pos = atomicAdd(&s0->r.gather_n, __popc(ball));
		pos = __shfl_sync(SMP_FULL, pos, 0) - c.gbase +
		      __popc(ball & ((1u << lane_id()) - 1));
		if (t && pos < SMP_CAP)
			s0->buf[pos] = k;
	}
}

/* Ends a gather: a cluster barrier, then the number of members offered
 * (every block reads the same). The next gather must start after another
 * barrier, so the counter is read before it moves again. */
static __device__ uint32_t gather_done(struct smp_ctx &c)
{
	uint32_t n;

	cluster_sync();
	n = *(volatile uint32_t *)&at_rank(c.s, 0)->r.gather_n - c.gbase;
	c.gbase += n;
	return n;
}

/* Whether local token I is a member of ST; its key and weight. */
static __device__ bool member(const struct smp_ctx &c, const struct smp_set &st,
			      uint32_t i, unsigned long long *key,
			      unsigned long long *wt)
{
	float v = c.w[i], ef = 0;
	double ed = 0;
	unsigned long long k;

	if (st.valid_only && v != v)
		return false;
	k = key64(v, c.s0 + i);
	if (k < st.lo)
		return false;
	if (st.weight == SMP_W_EXP)
		ed = exp((double)v - (double)st.mx);
	else if (st.weight == SMP_W_E || st.minp)
		ef = c.e[i];
	if (st.minp &&
	    (st.weight == SMP_W_EXP ? ed < (double)st.min_p : ef < st.min_p))
		return false;
	*key = k;
	*wt = st.weight == SMP_W_COUNT ? 1
	      : st.weight == SMP_W_EXP ? fx(ed)
				       : fx(ef);
	return true;
}

/* A member's weight from its key alone (block 0 walking buf). */
static __device__ unsigned long long weight_of_key(const struct smp_set &st,
						   unsigned long long k)
{
	float v = key_value(k);

	if (st.weight == SMP_W_COUNT)
		return 1;
	if (st.weight == SMP_W_EXP)
		return fx(exp((double)v - (double)st.mx));
	return fx(e_of(v, st.mx));
}

static __device__ bool pred_true(const struct smp_pred &p, unsigned long long c)
{
	double x = (double)c * SMP_FX_INV;

	if (p.kind == SMP_P_COUNT)
		return c >= p.k;
	if (p.kind == SMP_P_TOPP)
		return !(x / p.mass < (double)p.top_p);
	return p.t < x;
}

/* Block 0: the first of the N sorted keys in buf at which BASE plus the
 * running weight satisfies PR; N when none does. */
static __device__ uint32_t first_cross(struct smp_ctx &c, uint32_t n,
				       unsigned long long base,
				       const struct smp_set &st,
				       const struct smp_pred &pr)
{
	uint32_t j0 = threadIdx.x * SMP_PER, hit = n;
	unsigned long long wv[SMP_PER], loc = 0, tot, run;

#pragma unroll
	for (int q = 0; q < SMP_PER; q++) {
		wv[q] = j0 + q < n ? weight_of_key(st, c.s->buf[j0 + q]) : 0;
		loc += wv[q];
	}
	run = base + block_scan(loc, c.s->tmp_u, &tot) - loc;
#pragma unroll
	for (int q = 0; q < SMP_PER; q++) {
		run += wv[q];
		if (j0 + q < n && hit == n && pred_true(pr, run))
			hit = j0 + q;
	}
	return block_reduce(hit, op_min(), c.s->tmp_i);
}

/* Adds weight W to digit D of histogram H. */
static __device__ void hist_add(struct smp_hist *h, uint32_t d, uint32_t n,
				unsigned long long w)
{
	uint32_t lo = (uint32_t)w, hi = (uint32_t)(w >> 32);

	atomicAdd(&h->n[d], n);
	if (lo && atomicAdd(&h->lo[d], lo) + lo < lo)
		hi++;
	if (hi)
		atomicAdd(&h->hi[d], hi);
}

/* One radix level: the histogram of digit SHIFT of the members whose
 * higher bits are PREFIX, merged over the cluster into mc/mm (highest
 * digit first). A warp whose members share one digit adds once. */
static __device__ void level_hist(struct smp_ctx &c, const struct smp_set &st,
				  int shift, unsigned long long prefix)
{
	struct smp_hist *h = &c.s->h[c.hp];

	for (uint32_t d = threadIdx.x; d < 256; d += SMP_NT)
		h->n[d] = h->lo[d] = h->hi[d] = 0;
	__syncthreads();
	for (uint32_t b = warp_id() * 32; b < c.m; b += SMP_NT) {
		uint32_t i = b + lane_id(), d = 0, ball, d0;
		unsigned long long k = 0, wt = 0;
		bool in = i < c.m && member(c, st, i, &k, &wt) &&
			  (shift == 56 || k >> (shift + 8) == prefix);

		if (in)
			d = (uint32_t)(k >> shift) & 255;
		ball = __ballot_sync(SMP_FULL, in);
		if (!ball)
			continue;
		d0 = __shfl_sync(SMP_FULL, d, __ffs(ball) - 1);
		if (__all_sync(SMP_FULL, !in || d == d0)) {
			wt = warp_reduce(in ? wt : 0ull, op_add());
			if (!lane_id())
				hist_add(h, d0, __popc(ball), wt);
		} else if (in) {
			hist_add(h, d, 1, wt);
		}
	}
	cluster_sync();
	for (uint32_t d = threadIdx.x; d < 256; d += SMP_NT) {
		unsigned long long mass = 0;
		uint32_t n = 0;

		for (uint32_t r = 0; r < SMP_CL; r++) {
			const struct smp_hist *q = &at_rank(c.s, r)->h[c.hp];

			n += q->n[d];
			mass += (unsigned long long)q->hi[d] << 32 | q->lo[d];
		}
		c.s->mc[255 - d] = n, c.s->mm[255 - d] = mass;
	}
	__syncthreads();
	c.hp ^= 1;
}

/* The first member of ST, in key order, at which the running weight
 * satisfies PR (*OUT its key); false when none does. Radix levels of 8
 * bits narrow the members to the bin holding the crossing until it holds
 * at most SMP_CAP, which block 0 sorts and walks. */
static __device__ bool descend(struct smp_ctx &c, const struct smp_set &st,
			       const struct smp_pred &pr,
			       unsigned long long *out)
{
	unsigned long long prefix = 0, base = 0;
	int shift = 64;
	uint32_t active;
	struct smp_res *r0 = &at_rank(c.s, 0)->r;

	do {
		unsigned long long wv, inc, tot;
		uint32_t first;

		shift -= 8;
		level_hist(c, st, shift, prefix);
		wv = threadIdx.x < 256
			 ? (st.weight == SMP_W_COUNT ? c.s->mc[threadIdx.x]
						     : c.s->mm[threadIdx.x])
			 : 0;
		inc = block_scan(wv, c.s->tmp_u, &tot);
		first =
		    block_reduce(threadIdx.x < 256 && pred_true(pr, base + inc)
				     ? (uint32_t)threadIdx.x
				     : 256u,
				 op_min(), c.s->tmp_i);
		if (first == 256)
			return false;
		if (threadIdx.x == first)
			c.s->bc_u[0] = inc - wv;
		__syncthreads();
		base += c.s->bc_u[0];
		prefix = prefix << 8 | (255 - first);
		active = c.s->mc[first];
		__syncthreads();
	} while (active > SMP_CAP && shift > 0);
	gather(c, [&](uint32_t i, unsigned long long *k) {
		unsigned long long wt;

		return member(c, st, i, k, &wt) && *k >> shift == prefix;
	});
	active = gather_done(c);
	if (!c.rank) {
		uint32_t n = active < SMP_CAP ? active : SMP_CAP, j;

		sort_desc(c.s->buf, n);
		j = first_cross(c, n, base, st, pr);
		if (!threadIdx.x) {
			c.s->r.found = j < n;
			c.s->r.key = j < n ? c.s->buf[j] : 0;
		}
	}
	cluster_sync();
	*out = r0->key;
	return r0->found;
}

/* The K-th highest (K >= 1) of the cluster's warp maxima in the field
 * WMAX of every block's partials; 0 when fewer than K warps had tokens. */
static __device__ unsigned long long kth_warp_max(struct smp_ctx &c, int src,
						  uint32_t k)
{
	uint32_t t = threadIdx.x;
	unsigned long long kt, v;

	if (t < SMP_CL * SMP_NW) {
		const struct smp_part *q = part_of(c, t / SMP_NW);

		c.s->keys[t] =
		    src ? q->wmax_src[t % SMP_NW] : q->wmax_raw[t % SMP_NW];
	}
	if (!t)
		c.s->bc_u[1] = 0;
	__syncthreads();
	if (t < SMP_CL * SMP_NW && (kt = c.s->keys[t])) {
		uint32_t above = 0;

		for (uint32_t i = 0; i < SMP_CL * SMP_NW; i++)
			above += c.s->keys[i] > kt;
		if (above == k - 1)
			c.s->bc_u[1] = kt;
	}
	__syncthreads();
	v = c.s->bc_u[1];
	__syncthreads();
	return v;
}

/* The raw row's N_TOP best keys, into block 0's r.top: the n-th highest
 * warp maximum bounds them from below (n warps hold a token at least that
 * high), so the tokens at or above it usually fit in buf; otherwise a
 * count descent finds the n-th key exactly. */
static __device__ void top_n(struct smp_ctx &c)
{
	struct smp_set st = {
	    kth_warp_max(c, 0, c.n_top), 0, 0, SMP_W_COUNT, 0, 0};
	uint32_t n;

	gather(c, [&](uint32_t i, unsigned long long *k) {
		*k = key64(c.w[i], c.s0 + i);
		return *k >= st.lo;
	});
	n = gather_done(c);
	if (n > SMP_CAP) {
		struct smp_pred pr = {SMP_P_COUNT, c.n_top, 0, 0, 0};
		unsigned long long x;
		struct smp_set all = st;

		all.lo = 0;
		descend(c, all, pr, &x); /* found: vocab >= n_top */
		st.lo = x;
		gather(c, [&](uint32_t i, unsigned long long *k) {
			*k = key64(c.w[i], c.s0 + i);
			return *k >= st.lo;
		});
		n = gather_done(c);
	}
	if (!c.rank) {
		sort_desc(c.s->buf, n < SMP_CAP ? n : SMP_CAP);
		if (threadIdx.x < c.n_top)
			c.s->r.top[threadIdx.x] = c.s->buf[threadIdx.x];
	}
	cluster_sync(); /* buf and the counter are free for the next gather */
}

/* sampler.h step 1 on the slice: repetition, then frequency, then
 * presence, for the row's penalty ids that fall in it. */
static __device__ void penalise(struct smp_ctx &c,
				const struct o1_sample_penalty *pens)
{
	const struct o1_sample_row &p = c.p;
	bool rep = p.repetition_penalty > 0 && p.repetition_penalty != 1;

	for (uint32_t j = threadIdx.x; pens && j < p.n_pen; j += SMP_NT) {
		struct o1_sample_penalty q = pens[(size_t)p.pen_off + j];
		uint32_t i = (uint32_t)q.id - c.s0;
		float v;

		if (q.id < 0 || i >= c.m)
			continue;
		v = c.w[i];
		if (rep)
			v = v > 0 ? __fdiv_rn(v, p.repetition_penalty)
				  : __fmul_rn(v, p.repetition_penalty);
		if (q.count) {
			v = __fsub_rn(
			    v, __fmul_rn(p.frequency_penalty, (float)q.count));
			v = __fsub_rn(v, p.presence_penalty);
		}
		c.w[i] = v;
	}
	__syncthreads();
}

/* One pass over the members of ST: count, weight, lowest key, summed over
 * the cluster (a barrier; slots alternate so a late reader of the last
 * pass is safe). */
static __device__ struct smp_red member_pass(struct smp_ctx &c,
					     const struct smp_set &st)
{
	unsigned long long w = 0, mn = ~0ull, k, wt;
	uint32_t n = 0;
	struct smp_red t = {0, ~0ull, 0};

	for (uint32_t i = threadIdx.x; i < c.m; i += SMP_NT)
		if (member(c, st, i, &k, &wt))
			n++, w += wt, mn = op_min()(mn, k);
	w = block_reduce(w, op_add(), c.s->tmp_u);
	mn = block_reduce(mn, op_min(), c.s->tmp_u);
	n = block_reduce(n, op_add(), c.s->tmp_i);
	if (!threadIdx.x)
		c.s->p.red[c.rp] = {w, mn, n};
	cluster_sync();
	for (uint32_t r = 0; r < SMP_CL; r++) {
		const struct smp_red *q = &part_of(c, r)->red[c.rp];

		t.w += q->w, t.n += q->n,
		    t.min_key = op_min()(t.min_key, q->min_key);
	}
	c.rp ^= 1;
	return t;
}

/* Block 0: sampler.h steps 4-6 over the first CNT sorted candidates in
 * buf, in double: each token's e (the stored float e, or double exp for
 * top-k), MASS (their sum when SUM), the top-p and min-p cuts when CUTS,
 * then the draw with u. Returns the index drawn; *CUT says whether a cut
 * falls within [1, CNT] (top-p tested after the last token too). */
static __device__ uint32_t buffer_draw(struct smp_ctx &c, uint32_t cnt,
				       const struct smp_set &st, double mass,
				       bool sum, bool cuts, bool *cut)
{
	const struct o1_sample_row &p = c.p;
	bool topp = cuts && p.top_p > 0 && p.top_p < 1;
	bool minp = cuts && p.min_p > 0;
	uint32_t j0 = threadIdx.x * SMP_PER, first = SMP_FULL, hit = SMP_FULL;
	uint32_t keep;
	double ev[SMP_PER], loc = 0, tot, excl, run, kept;

#pragma unroll
	for (int q = 0; q < SMP_PER; q++) {
		float v = key_value(c.s->buf[j0 + q]);

		ev[q] = j0 + q >= cnt ? 0.0
			: st.weight == SMP_W_EXP
			    ? exp((double)v - (double)st.mx)
			    : (double)e_of(v, st.mx);
		loc += ev[q];
	}
	excl = block_scan(loc, c.s->tmp_d, &tot) - loc;
	if (sum)
		mass = tot;
	if (topp && !threadIdx.x && !(tot / mass < (double)p.top_p))
		first = cnt; /* the token after the last would be cut */
	run = excl;
#pragma unroll
	for (int q = 0; q < SMP_PER; q++) {
		uint32_t j = j0 + q;

		if (j >= 1 && j < cnt && j < first &&
		    ((topp && !(run / mass < (double)p.top_p)) ||
		     (minp && ev[q] < (double)p.min_p)))
			first = j;
		run += ev[q];
	}
	first = block_reduce(first, op_min(), c.s->tmp_i);
	*cut = first <= cnt;
	keep = first < cnt ? first : cnt;
	if (keep < cnt && j0 <= keep && keep < j0 + SMP_PER) {
		double k = excl;

#pragma unroll
		for (int q = 0; q < SMP_PER; q++)
			if (j0 + q < keep)
				k += ev[q];
		c.s->bc_d[0] = k;
	}
	__syncthreads();
	kept = keep < cnt ? c.s->bc_d[0] : tot;
	run = excl;
#pragma unroll
	for (int q = 0; q < SMP_PER; q++) {
		run += ev[q];
		if (j0 + q < keep && hit == SMP_FULL && p.u * kept < run)
			hit = j0 + q;
	}
	hit = block_reduce(hit, op_min(), c.s->tmp_i);
	return hit < keep ? hit : keep - 1;
}

/* Probe thresholds on e for top-p: 2^-1, 2^-2, 2^-3, 2^-4, 2^-6, 2^-8,
 * 2^-11, 2^-15 (the candidates are the tokens with e at or above one). */
static __device__ __forceinline__ float probe_thr(int j)
{
	int x = j < 4 ? j + 1 : j < 6 ? 2 * j - 2 : j == 6 ? 11 : 15;

	return __int_as_float((127 - x) << 23);
}

/* Sums the probe's per-thread counts and masses over the block into the
 * partials. */
static __device__ __forceinline__ void
probe_publish(struct smp_ctx &c, const uint32_t *tn, const float *tm)
{
#pragma unroll
	for (int j = 0; j < SMP_NTH; j++) {
		uint32_t n = warp_reduce(tn[j], op_add());
		float m = warp_reduce(tm[j], op_add());

		if (!lane_id())
			c.s->th_n[warp_id()][j] = n,
			c.s->th_m[warp_id()][j] = m;
	}
	__syncthreads();
	if (threadIdx.x < SMP_NTH) {
		uint32_t n = 0;
		double m = 0;

		for (int w = 0; w < SMP_NW; w++)
			n += c.s->th_n[w][threadIdx.x],
			    m += c.s->th_m[w][threadIdx.x];
		c.s->p.th_n[threadIdx.x] = n, c.s->p.th_m[threadIdx.x] = m;
	}
}

/* e = exp_neg(w - mx) over the slice (0 for NaN w), the count of w that
 * are not NaN, and the reference's block sums: per block of 1024 tokens
 * below the last multiple of 16, 16 float partial sums (lane j: tokens
 * j, j + 16, ... in order) added in double in lane order; the tokens
 * after the last multiple of 16 summed alone in double. With PROBE, the
 * count and mass of e at or above each probe threshold. */
static __device__ void e_pass(struct smp_ctx &c, float mx, bool probe)
{
	uint32_t full = c.vocab & ~15u, nv = 0, tn[SMP_NTH] = {0};
	uint32_t fl = full > c.s0 ? min(full - c.s0, c.m) : 0;
	uint32_t nb = (fl + SMP_RB - 1) / SMP_RB;
	float tm[SMP_NTH] = {0};

	for (uint32_t i = threadIdx.x; i < c.m; i += SMP_NT) {
		float w = c.w[i], x = e_of(w, mx);

		c.e[i] = x;
		nv += w == w;
#pragma unroll
		for (int j = 0; j < SMP_NTH; j++)
			if (probe && x >= probe_thr(j))
				tn[j]++, tm[j] += x;
	}
	__syncthreads();
	for (uint32_t t = threadIdx.x; t < nb * SMP_LANES; t += SMP_NT) {
		uint32_t b = t / SMP_LANES, j = t % SMP_LANES;
		uint32_t end = min((b + 1) * SMP_RB, fl);
		float z = 0;

		for (uint32_t i = b * SMP_RB + j; i < end; i += SMP_LANES)
			z = __fadd_rn(z, c.e[i]);
		c.s->zpart[b][j] = z;
	}
	__syncthreads();
	for (uint32_t b = threadIdx.x; b < nb; b += SMP_NT) {
		double s = 0;

		for (int j = 0; j < SMP_LANES; j++)
			s += c.s->zpart[b][j];
		c.s->p.bsum[b] = s;
	}
	if (!threadIdx.x) {
		double s = 0;

		if (full < c.vocab && full >= c.s0 && full < c.s0 + c.m)
			for (uint32_t i = full - c.s0; i < c.m; i++)
				s += c.e[i];
		c.s->p.tail = s;
	}
	nv = block_reduce(nv, op_add(), c.s->tmp_i);
	if (!threadIdx.x)
		c.s->p.n_valid = nv;
	if (probe)
		probe_publish(c, tn, tm);
}

/* Every block, after e_pass and a barrier: the reference's block sums in
 * global order (bs), their total as the reference adds them (blocks, then
 * the tail: bc_d[0]), t = u x total (bc_d[3]) and where draw_all's block
 * search stops: bc_i[0] the block, bc_d[1] the sum before it. Warp 0
 * sums lane groups and scans them, the same way in every block. */
static __device__ void ref_blocks(struct smp_ctx &c)
{
	uint32_t full = c.vocab & ~15u, nbf = (full + SMP_RB - 1) / SMP_RB;
	uint32_t blast = (c.vocab + SMP_RB - 1) / SMP_RB - 1;

	for (uint32_t b = threadIdx.x; b < nbf; b += SMP_NT)
		c.s->bs[b] = part_of(c, b / c.bpr)->bsum[b % c.bpr];
	if (!threadIdx.x)
		c.s->bc_d[2] =
		    full < c.vocab ? part_of(c, full / c.sl)->tail : 0.0;
	__syncthreads();
	if (!warp_id()) {
		uint32_t lane = lane_id(), per = (nbf + 31) / 32;
		uint32_t b0 = min(lane * per, nbf), b1 = min(b0 + per, nbf);
		uint32_t stop = SMP_FULL, ball, src;
		double ls = 0, inc, full_sum, total, t, acc, before = 0;

		for (uint32_t b = b0; b < b1; b++)
			ls += c.s->bs[b];
		inc = ls;
		for (int o = 1; o < 32; o <<= 1) {
			double y = __shfl_up_sync(SMP_FULL, inc, o);

			if (lane >= (uint32_t)o)
				inc += y;
		}
		full_sum = __shfl_sync(SMP_FULL, inc, 31);
		total = full_sum + c.s->bc_d[2];
		t = c.p.u * total;
		acc = inc - ls;
		for (uint32_t b = b0; b < b1; b++) {
			double cb = acc + c.s->bs[b];

			if (b >= blast || t < cb) {
				stop = b, before = acc;
				break;
			}
			acc = cb;
		}
		ball = __ballot_sync(SMP_FULL, stop != SMP_FULL);
		src = ball ? __ffs(ball) - 1 : 0;
		stop = __shfl_sync(SMP_FULL, stop, src);
		before = __shfl_sync(SMP_FULL, before, src);
		if (!lane) {
			c.s->bc_d[0] = total, c.s->bc_d[3] = t;
			c.s->bc_d[1] = ball ? before : full_sum;
			c.s->bc_i[0] = ball ? stop : blast;
		}
	}
	__syncthreads();
}

/* Temperature only (the reference's draw_all): from the start of the block
 * ref_blocks() stopped at, the first token whose running sum of e passes
 * t; when rounding runs past the end, the last token from there with
 * e > 0 (0 if none). Run by the block that holds that start, reading on
 * into the next blocks' e when it must; writes block 0's r.id. */
static __device__ void draw_all(struct smp_ctx &c)
{
	double acc = c.s->bc_d[1], t = c.s->bc_d[3];
	uint32_t g0 = c.s->bc_i[0] * SMP_RB, last = 0, id = SMP_FULL;

	if (g0 / c.sl != c.rank)
		return;
	for (; g0 < c.vocab; g0 += SMP_NT) {
		uint32_t g = g0 + threadIdx.x, hit, lst;
		float x = g < c.vocab ? e_at(c, g) : 0.0f;
		double tot, inc = block_scan((double)x, c.s->tmp_d, &tot);

		hit = block_reduce(g < c.vocab && t < acc + inc
				       ? (uint32_t)threadIdx.x
				       : (uint32_t)SMP_NT,
				   op_min(), c.s->tmp_i);
		if (hit < SMP_NT) {
			id = g0 + hit;
			break;
		}
		lst = block_reduce(g < c.vocab && x > 0 ? threadIdx.x + 1 : 0u,
				   op_max(), c.s->tmp_i);
		if (lst)
			last = g0 + lst - 1;
		acc += tot;
	}
	if (!threadIdx.x)
		at_rank(c.s, 0)->r.id = (int32_t)(id != SMP_FULL ? id : last);
}

/* The kept set and the draw when the candidates did not fit in buf: ST's
 * members in order (C: all valid tokens, or top-k's), the top-p cut by
 * a descent on MASS, min-p as membership (e falls along the order), then
 * the draw over the kept tokens: in buf when they fit, else by descent;
 * past the end (rounding), the last kept token. Writes block 0's r.id. */
static __device__ void draw_large(struct smp_ctx &c, struct smp_set st,
				  double mass)
{
	const struct o1_sample_row &p = c.p;
	unsigned long long x;
	struct smp_red k;
	struct smp_pred pr = {SMP_P_TOPP, 0, mass, 0, p.top_p};
	bool found;

	if (p.top_p > 0 && p.top_p < 1 && descend(c, st, pr, &x))
		st.lo = x;
	st.minp = p.min_p > 0;
	k = member_pass(c, st);
	if (k.n <= SMP_CAP) {
		uint32_t n;

		gather(c, [&](uint32_t i, unsigned long long *key) {
			unsigned long long wt;

			return member(c, st, i, key, &wt);
		});
		n = gather_done(c);
		if (!c.rank) {
			bool cut;
			uint32_t j;

			sort_desc(c.s->buf, n);
			j = buffer_draw(c, n, st, 0, true, false, &cut);
			if (!threadIdx.x)
				c.s->r.id = (int32_t)key_id(c.s->buf[j]);
		}
		return;
	}
	pr = {SMP_P_DRAW, 0, 0, p.u * ((double)k.w * SMP_FX_INV), 0};
	found = descend(c, st, pr, &x);
	if (!c.rank && !threadIdx.x)
		c.s->r.id = (int32_t)key_id(found ? x : k.min_key);
}

/* Top-p and min-p without top-k (the reference's draw_cuts): the
 * candidates e >= floor (min_p, raised for top-p to the first probe
 * threshold whose mass reaches top_p with room for rounding) go to buf;
 * the cuts and the draw there are exact when the kept set ends inside
 * them (a cut found, all valid tokens there, or floor = min_p); else the
 * large path. MASS is the reference's total of e. */
static __device__ void draw_cuts(struct smp_ctx &c, float mx, double mass)
{
	const struct o1_sample_row &p = c.p;
	bool topp = p.top_p > 0 && p.top_p<1, minp = p.min_p> 0;
	struct smp_set st = {0, 1, 0, SMP_W_E, p.min_p, mx};
	float floor = minp ? p.min_p : 0.0f;
	uint32_t nv = 0, n;

	for (uint32_t r = 0; r < SMP_CL; r++)
		nv += part_of(c, r)->n_valid;
	for (int j = 0; topp && j < SMP_NTH; j++) {
		double m = 0;

		for (uint32_t r = 0; r < SMP_CL; r++)
			m += part_of(c, r)->th_m[j];
		if (m >= (double)p.top_p * mass * (1 + 1e-5)) {
			floor = fmaxf(floor, probe_thr(j));
			break;
		}
	}
	gather(c, [&](uint32_t i, unsigned long long *k) {
		*k = key64(c.w[i], c.s0 + i);
		return c.w[i] == c.w[i] && c.e[i] >= floor;
	});
	n = gather_done(c);
	if (n <= SMP_CAP) {
		if (!c.rank) {
			bool cut;
			uint32_t j;

			sort_desc(c.s->buf, n);
			j = buffer_draw(c, n, st, mass, false, true, &cut);
			if (!threadIdx.x)
				c.s->r.id =
				    cut || n == nv || (minp && floor <= p.min_p)
					? (int32_t)key_id(c.s->buf[j])
					: -1;
		}
		cluster_sync();
		if (at_rank(c.s, 0)->r.id >= 0)
			return;
	}
	draw_large(c, st, mass);
}

/* Block 0 after a gather of N candidates holding the first CNT tokens of
 * the order: sorts them and runs steps 4-6 there (top-k: double exp and
 * their own mass, as the reference). */
static __device__ void buffer_top_k(struct smp_ctx &c, uint32_t n, uint32_t cnt,
				    const struct smp_set &st)
{
	bool cut;
	uint32_t j;

	if (c.rank)
		return;
	sort_desc(c.s->buf, n);
	j = buffer_draw(c, cnt, st, 0, true, true, &cut);
	if (!threadIdx.x)
		c.s->r.id = (int32_t)key_id(c.s->buf[j]);
}

/* Top-k (with any cuts). For k up to the cluster's 128 warps, the k-th
 * highest warp maximum of the penalised row bounds the k best from below,
 * so they usually fit in buf; otherwise a count descent finds the k-th
 * token. The k best then go to buf when they fit, else the large path
 * runs over them. */
static __device__ void draw_top_k(struct smp_ctx &c, float mx, bool pen)
{
	const struct o1_sample_row &p = c.p;
	uint32_t k = p.top_k, n = SMP_FULL;
	struct smp_set st = {0, 1, 0, SMP_W_EXP, p.min_p, mx}, cs;
	struct smp_pred pr = {SMP_P_COUNT, k, 0, 0, 0};
	auto valid_above = [&](uint32_t i, unsigned long long *key) {
		*key = key64(c.w[i], c.s0 + i);
		return c.w[i] == c.w[i] && *key >= st.lo;
	};
	unsigned long long x;

	if (k <= SMP_CL * SMP_NW) {
		float bv = key_value(kth_warp_max(c, pen, k));

		if (bv == bv)
			st.lo = (unsigned long long)vkey(
				    __fdiv_rn(bv, p.temperature))
				<< 32;
		gather(c, valid_above);
		n = gather_done(c);
		if (n <= SMP_CAP) {
			buffer_top_k(c, n, n < k ? n : k, st);
			return;
		}
	}
	cs = st;
	cs.lo = 0, cs.weight = SMP_W_COUNT;
	st.lo = descend(c, cs, pr, &x) ? x : 0;
	if (k <= SMP_CAP) {
		gather(c, valid_above);
		n = gather_done(c);
		if (n <= SMP_CAP) {
			buffer_top_k(c, n, n, st);
			return;
		}
	}
	draw_large(c, st, (double)member_pass(c, st).w * SMP_FX_INV);
}

/* Steps 2-6 for this row; the id lands in block 0's r.id. */
static __device__ void sample(struct smp_ctx &c, bool pen)
{
	const struct o1_sample_row &p = c.p;
	bool topk = p.top_k && p.top_k < c.vocab;
	bool topp = p.top_p > 0 && p.top_p < 1, cuts = topp || p.min_p > 0;
	float sm = key_value(c.src_best), mx;
	int32_t id = -1;

	if (c.mask && c.first_ok == SMP_FULL)
		id = 0; /* nothing allowed: write_result answers -1 */
	else if (p.temperature == 0 || p.top_k == 1)
		id = (int32_t)key_id(c.src_best);
	mx = sm == sm ? __fdiv_rn(sm, p.temperature) : -INFINITY;
	if (id < 0 && mx == -INFINITY) /* the reference's NaN sums */
		id = topk && !topp ? (int32_t)p.top_k - 1 : 0;
	if (id >= 0) {
		if (!c.rank && !threadIdx.x)
			c.s->r.id = id;
		return;
	}
	for (uint32_t i = threadIdx.x; i < c.m; i += SMP_NT)
		c.w[i] = __fdiv_rn(c.w[i], p.temperature);
	__syncthreads();
	if (topk) {
		draw_top_k(c, mx, pen);
		return;
	}
	e_pass(c, mx, topp);
	cluster_sync();
	ref_blocks(c);
	if (cuts)
		draw_cuts(c, mx, c.s->bc_d[0]);
	else
		draw_all(c);
}

/* Block 0, after the last barrier: the row's result. */
static __device__ void write_result(const struct smp_ctx &c,
				    struct o1_sample_result *out)
{
	struct o1_sample_result *o = out + c.row;
	int32_t id = c.s->r.id;
	double lse = (double)c.raw_max + log(c.z);
	uint32_t j = threadIdx.x;

	if ((uint32_t)id >= c.vocab) /* every path answers a token */
		id = 0;
	if (c.mask && c.first_ok == SMP_FULL) {
		if (!j) {
			o->id = O1_SAMPLE_NO_TOKEN, o->logprob = -INFINITY;
			o->entropy = 0, o->n_top = 0;
		}
		if (j < O1_SAMPLE_MAX_TOP)
			o->top_id[j] = 0, o->top_logprob[j] = 0;
		return;
	}
	if (c.mask && !allowed(c, (uint32_t)id))
		id = (int32_t)c.first_ok;
	if (!j) {
		o->id = id;
		o->logprob = (float)((double)c.raw[id] - lse);
		o->entropy = (float)(log(c.z) - c.zl / c.z);
		o->n_top = c.n_top;
	}
	if (j < O1_SAMPLE_MAX_TOP) {
		unsigned long long k = c.s->r.top[j];

		o->top_id[j] = j < c.n_top ? (int32_t)key_id(k) : 0;
		o->top_logprob[j] =
		    j < c.n_top ? (float)((double)key_value(k) - lse) : 0.0f;
	}
}

#define SMP_HDR ((sizeof(struct smp_shared) + 15) / 16 * 16)

static __device__ void ctx_init(struct smp_ctx &c, unsigned char *smem,
				const float *logits,
				const struct o1_sample_row *rows,
				const uint32_t *masks, float *scratch,
				const struct smp_geom &g)
{
	c.s = (struct smp_shared *)smem;
	c.row = blockIdx.y;
	c.rank = cg::this_cluster().block_rank();
	c.vocab = g.vocab, c.sl = g.sl, c.bpr = g.bpr;
	c.s0 = c.rank * g.sl;
	c.m = c.s0 < g.vocab ? min(g.sl, g.vocab - c.s0) : 0;
	c.raw = logits + (size_t)c.row * g.vocab;
	c.p = rows[c.row];
	c.mask = c.p.mask && masks
		     ? masks + (size_t)(c.p.mask - 1) * ((g.vocab + 31) / 32)
		     : NULL;
	c.first_ok = SMP_FULL;
	c.scr = g.in_smem ? NULL : scratch + (size_t)c.row * SMP_CL * 2 * g.sl;
	c.w = g.in_smem ? (float *)(smem + SMP_HDR)
			: c.scr + (size_t)c.rank * 2 * g.sl;
	c.e = c.w + g.sl;
	c.n_top =
	    min(min(c.p.n_logprobs, (uint32_t)O1_SAMPLE_MAX_TOP), g.vocab);
	c.gbase = 0, c.hp = 0, c.rp = 0;
	if (!c.rank && !threadIdx.x)
		c.s->r.gather_n = 0, c.s->r.id = -1;
}

/* out (rows), logits (rows, vocab) f32, rows (rows), pens: cluster of 8
 * blocks per row (blockIdx.x the slice, blockIdx.y the row). */
static __global__ void __cluster_dims__(SMP_CL, 1, 1)
    __launch_bounds__(SMP_NT, 1)
	sample_rows(struct o1_sample_result *out, const float *logits,
		    const struct o1_sample_row *rows,
		    const struct o1_sample_penalty *pens, const uint32_t *masks,
		    float *scratch, struct smp_geom g)
{
	extern __shared__ __align__(16) unsigned char smem[];
	struct smp_ctx c;
	unsigned long long best;
	uint32_t first;
	bool pen;

	ctx_init(c, smem, logits, rows, masks, scratch, g);
	best = publish_best(c, load_slice(c, &first), c.s->p.wmax_raw);
	if (!threadIdx.x)
		c.s->p.raw_best = best;
	if (c.mask) { /* the row's value: every thread of the block */
		first = block_reduce(first, op_min(), c.s->tmp_i);
		if (!threadIdx.x)
			c.s->p.first_ok = first;
	}
	raw_sums(c, key_value(best));
	cluster_sync();
	merge_raw(c);
	for (uint32_t r = 0; c.mask && r < SMP_CL; r++)
		c.first_ok = min(c.first_ok, part_of(c, r)->first_ok);
	if (c.n_top)
		top_n(c);
	pen = c.p.n_pen &&
	      ((c.p.repetition_penalty > 0 && c.p.repetition_penalty != 1) ||
	       c.p.frequency_penalty != 0 || c.p.presence_penalty != 0);
	c.src_best = c.raw_best;
	if (pen) {
		penalise(c, pens);
		best = publish_best(c, slice_best(c), c.s->p.wmax_src);
		if (!threadIdx.x)
			c.s->p.src_best = best;
		cluster_sync();
		c.src_best = 0;
		for (uint32_t r = 0; r < SMP_CL; r++)
			c.src_best =
			    op_max()(c.src_best, part_of(c, r)->src_best);
	}
	sample(c, pen);
	cluster_sync();
	if (!c.rank)
		write_result(c, out);
}

static void plan(uint32_t vocab, struct smp_geom *g)
{
	uint32_t blocks = (vocab + SMP_RB - 1) / SMP_RB;

	g->vocab = vocab;
	g->bpr = (blocks + SMP_CL - 1) / SMP_CL;
	g->sl = g->bpr * SMP_RB;
	g->in_smem = SMP_HDR + 2 * sizeof(float) * g->sl <= SMP_SMEM;
	g->smem = SMP_HDR + (g->in_smem ? 2 * sizeof(float) * g->sl : 0);
}

extern "C" size_t o1_sample_rows_cuda_scratch_bytes(uint32_t n_rows,
						    uint32_t vocab)
{
	struct smp_geom g;

	if (!vocab || vocab > SMP_MAX_VOCAB)
		return 0;
	plan(vocab, &g);
	return g.in_smem ? 0
			 : (size_t)n_rows * SMP_CL * 2 * g.sl * sizeof(float);
}

/* Opts the kernel in to SMEM bytes of dynamic shared memory on the current
 * device, once per device and size: a call with 0 rows (the backend makes
 * one at create) does it outside any graph capture, so launches captured
 * later find it done and make no runtime call besides the launch. */
static int allow_smem(uint32_t smem)
{
	static int done[SMP_MAX_DEVICES];
	int dev, err;

	if (smem <= 48 * 1024)
		return 0;
	err = O1_CUDA_CHECK(cudaGetDevice(&dev));
	if (err)
		return err;
	if (dev < SMP_MAX_DEVICES &&
	    __atomic_load_n(&done[dev], __ATOMIC_ACQUIRE) >= (int)smem)
		return 0;
	err = O1_CUDA_CHECK(cudaFuncSetAttribute(
	    sample_rows, cudaFuncAttributeMaxDynamicSharedMemorySize,
	    (int)smem));
	if (!err && dev < SMP_MAX_DEVICES)
		__atomic_store_n(&done[dev], (int)smem, __ATOMIC_RELEASE);
	return err;
}

extern "C" int o1_sample_rows_masked_cuda(
    struct o1_sample_result *out, const float *logits, uint32_t n_rows,
    uint32_t vocab, const struct o1_sample_row *rows,
    const struct o1_sample_penalty *pens, const uint32_t *masks, void *scratch,
    size_t scratch_bytes, cudaStream_t stream)
{
	struct smp_geom g;
	size_t need = o1_sample_rows_cuda_scratch_bytes(n_rows, vocab);
	int err = 0;

	if (!out || !logits || !rows || !vocab || vocab > SMP_MAX_VOCAB ||
	    n_rows > 65535 ||
	    (need &&
	     (!scratch || scratch_bytes < need || (uintptr_t)scratch % 16))) {
		o1_err("sample: bad operands: %u rows of %u (at most %u), "
		       "scratch %zu bytes of %zu",
		       n_rows, vocab, SMP_MAX_VOCAB, scratch_bytes, need);
		return -EINVAL;
	}
	plan(vocab, &g);
	err = allow_smem(g.smem);
	if (err || !n_rows)
		return err;
	sample_rows<<<dim3(SMP_CL, n_rows), SMP_NT, g.smem, stream>>>(
	    out, logits, rows, pens, masks, (float *)scratch, g);
	return O1_CUDA_LAUNCHED("sample");
}

extern "C" int o1_sample_rows_cuda(struct o1_sample_result *out,
				   const float *logits, uint32_t n_rows,
				   uint32_t vocab,
				   const struct o1_sample_row *rows,
				   const struct o1_sample_penalty *pens,
				   void *scratch, size_t scratch_bytes,
				   cudaStream_t stream)
{
	return o1_sample_rows_masked_cuda(out, logits, n_rows, vocab, rows,
					  pens, NULL, scratch, scratch_bytes,
					  stream);
}

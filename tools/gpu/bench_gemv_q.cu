/* bench_gemv_q: gemv_q.cu's int8 decode product (o1_gemv_q8_cuda, one
 * input row, the plain store variant) per block type at llama3-8b's
 * shapes, beside bf16's gemv.cu on the same shape and the device copy
 * bandwidth: the per-kernel A/B of gemv_q.cu's schedules.
 *
 *   bench_gemv_q [--iters N] [--types q8_0,q4_0,q4_k,q6_k] [--swiglu]
 *                [--model llama3-8b|llama3.2-1b|qwen2.5-0.5b]
 *
 * (--types takes q5_0 too, not among the default's.)
 *
 * Shapes (N outputs x K inputs) of --model (default llama3-8b): 6144 x
 * 4096 (QKV), 4096 x 4096 (O), 14336 x 4096 (gate or up), 4096 x 14336
 * (down), 128256 x 4096 (LM head); llama3.2-1b's and qwen2.5-0.5b's
 * alike (a type whose block does not divide K is skipped: Q4_K and Q6_K
 * at qwen2.5-0.5b's 896). For each: bf16
 * (o1_gemv_bf16_cuda, its default setup), then each type's old schedule
 * (gemv_q: one batch a warp in registers), new (gemv_qp: the cp.async
 * ring, variant 0; the backend launches qp_variant_1's per type: Q8_0
 * and Q6_K new*2, Q4_K new3b) and new's variants (qp_groups: half
 * and twice its batch; 3 stages and 3 blocks a multiprocessor, and 2
 * stages and 4 blocks, where the input is short enough, else new
 * itself), each checked to give the old one's bits. Time
 * per product: a CUDA graph of ITERS launches (default 20; fewer where
 * they would read over 4 GB) with PDL, each
 * over its own copy of the weights (the copies span at least 1 GiB, so L2
 * holds none of them), the median of 5 replays after a warm-up. GB/s
 * counts the weight bytes. The blocks are random bytes with sane scales
 * (f16 in [2^-10, 2^-6)). Includes gemv_q.cu to reach its templates (it
 * does not link the library's copy).
 * Then, with q4_k among the types, the SwiGLU product (gate and up, 2 x
 * 14336 x 4096 in one matrix, o1_gemv_q8_swiglu_cuda's OUT_SWIGLU, bf16
 * out): old, new, new3b (the one-row default), and qp_run2's two rows a
 * step: 2r (variant 5: half batches, 3 stages, 3 blocks a
 * multiprocessor), 2r-w (6: whole, 2 stages, 2 blocks), 2r5s (7: half, 5
 * stages, 2 blocks), 2r4b (8: half, 2 stages, 4 blocks), 2r-x (9: as
 * 2r-w, the input's side of a lane's pairs in registers), timed against
 * new3b and checked to give old's bits. --swiglu: that product only. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "gpu_bench.h"
#include "kernels/gemv_q.cu"

#define POOL_BYTES (1ull << 30)
#define REPLAYS	   5

struct shape {
	const char *name;
	uint32_t n, k;
};

#define N_SHAPES 5

static const struct {
	const char *model;
	shape s[N_SHAPES];
} models[] = {
    {"llama3-8b",
     {{"qkv", 6144, 4096},
      {"o", 4096, 4096},
      {"gate", 14336, 4096},
      {"down", 4096, 14336},
      {"head", 128256, 4096}}},
    {"llama3.2-1b",
     {{"qkv", 3072, 2048},
      {"o", 2048, 2048},
      {"gate", 8192, 2048},
      {"down", 2048, 8192},
      {"head", 128256, 2048}}},
    {"qwen2.5-0.5b",
     {{"qkv", 1152, 896},
      {"o", 896, 896},
      {"gate", 4864, 896},
      {"down", 896, 4864},
      {"head", 151936, 896}}},
};

static const struct {
	const char *name;
	enum o1_quant_type type;
} types[] = {
    {"q8_0", O1_QUANT_Q8_0},
    {"q4_0", O1_QUANT_Q4_0},
    {"q5_0", O1_QUANT_Q5_0},
    {"q4_k", O1_QUANT_Q4_K},
    {"q6_k", O1_QUANT_Q6_K},
};

static __device__ uint32_t hash32(uint64_t i, uint32_t seed)
{
	uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i >> 32) ^ seed;

	h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12, h *= 0x297a2d39u;
	return h ^ (h >> 15);
}

/* Random words (never zeros: they read faster than data). */
static __global__ void fill_words(uint32_t *w, uint64_t n, uint32_t seed)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < n; i += (uint64_t)gridDim.x * blockDim.x)
		w[i] = hash32(i, seed) | 0x01010101u;
}

/* The f16 scales of every block set to [2^-10, 2^-6) (the type's offsets
 * of its d / dmin). */
static __global__ void fix_scales(uint8_t *w, uint64_t blocks, uint32_t bytes,
				  uint32_t at0, uint32_t at1)
{
	for (uint64_t b = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     b < blocks; b += (uint64_t)gridDim.x * blockDim.x) {
		uint16_t v = (uint16_t)(0x1400u | (hash32(b, 99) & 0xfffu));

		memcpy(w + b * bytes + at0, &v, 2);
		if (at1 != at0)
			memcpy(w + b * bytes + at1, &v, 2);
	}
}

static __global__ void fill_bf16(uint16_t *x, uint32_t n)
{
	for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += gridDim.x * blockDim.x)
		x[i] = __bfloat16_as_ushort(__float2bfloat16_rn(
		    (hash32(i, 7) >> 8) / 8388608.0f - 1.0f));
}

/* bf16, gemv_q, gemv_qp (the default), gemv_qp with half and twice its
 * batch, with 3 stages and 3 blocks a multiprocessor, and with 2 stages
 * and 4 blocks (qp_groups's X = 1, 2, 3, 4) */
enum kernel {
	K_BF16,
	K_OLD,
	K_NEW,
	K_HALF,
	K_TWICE,
	K_3B,
	K_4B,
	/* the SwiGLU product's (Q4_K) */
	K_S_OLD,
	K_S_NEW,
	K_S_3B,
	K_S_2R,
	K_S_2RW,
	K_S_2R5,
	K_S_2R4,
	K_S_2RX,
};
static const char *kernel_name[] = {
    "bf16", "old", "new", "new/2", "new*2", "new3b", "new4b", "old",
    "new",  "new3b", "2r", "2r-w", "2r5s", "2r4b", "2r-x"};

struct bufs {
	uint8_t *w; /* copies of the matrix, back to back */
	uint64_t bytes;
	uint32_t copies;
	uint16_t *x;
	float *y;
};

template <int TYPE>
static int launch_q(const shape &s, const bufs &b, uint32_t c,
		    enum kernel kn, cudaStream_t st)
{
	gq_args a = args(b.y, NULL, b.x, b.w + c * b.bytes, s.n, s.k, s.n);

	if (check("bench_gemv_q", a, b.y, (enum o1_quant_type)TYPE, 1))
		return -1;
	switch (kn) {
	case K_OLD:
		return launch_m<1, TYPE, OUT_STORE, DOT_I8, IN_BF16, false>(
		    a, true, st);
	case K_HALF:
		return launch_m<1, TYPE, OUT_STORE, DOT_I8, IN_BF16, true, 1>(
		    a, true, st);
	case K_TWICE:
		return launch_m<1, TYPE, OUT_STORE, DOT_I8, IN_BF16, true, 2>(
		    a, true, st);
	case K_3B:
		return launch_m<1, TYPE, OUT_STORE, DOT_I8, IN_BF16, true, 3>(
		    a, true, st);
	case K_4B:
		return launch_m<1, TYPE, OUT_STORE, DOT_I8, IN_BF16, true, 4>(
		    a, true, st);
	default:
		return launch_m<1, TYPE, OUT_STORE, DOT_I8, IN_BF16, true, 0>(
		    a, true, st);
	}
}

/* The SwiGLU product over gate and up (2 S.n rows of Q4_K) into b.y's
 * first S.n bf16. */
static int launch_sw(const shape &s, const bufs &b, uint32_t c,
		     enum kernel kn, cudaStream_t st)
{
	constexpr int T = O1_QUANT_Q4_K;
	gq_args a = args(NULL, (uint16_t *)b.y, b.x, b.w + c * b.bytes, s.n,
			 s.k, s.n);

	if (check("bench_gemv_q", a, b.y, (enum o1_quant_type)T, 1))
		return -1;
	switch (kn) {
	case K_S_OLD:
		return launch_m<1, T, OUT_SWIGLU, DOT_I8, IN_BF16, false>(
		    a, true, st);
	case K_S_NEW:
		return launch_m<1, T, OUT_SWIGLU, DOT_I8, IN_BF16, true, 0>(
		    a, true, st);
	case K_S_3B:
		return launch_m<1, T, OUT_SWIGLU, DOT_I8, IN_BF16, true, 3>(
		    a, true, st);
	case K_S_2R:
		return launch_m<1, T, OUT_SWIGLU, DOT_I8, IN_BF16, true, 5>(
		    a, true, st);
	case K_S_2RW:
		return launch_m<1, T, OUT_SWIGLU, DOT_I8, IN_BF16, true, 6>(
		    a, true, st);
	case K_S_2R5:
		return launch_m<1, T, OUT_SWIGLU, DOT_I8, IN_BF16, true, 7>(
		    a, true, st);
	case K_S_2R4:
		return launch_m<1, T, OUT_SWIGLU, DOT_I8, IN_BF16, true, 8>(
		    a, true, st);
	default:
		return launch_m<1, T, OUT_SWIGLU, DOT_I8, IN_BF16, true, 9>(
		    a, true, st);
	}
}

static int launch_one(const shape &s, const bufs &b, enum o1_quant_type type,
		      enum kernel kn, uint32_t c, cudaStream_t st)
{
	if (kn >= K_S_OLD)
		return launch_sw(s, b, c, kn, st);
	if (kn == K_BF16)
		return o1_gemv_bf16_cuda(
		    b.y, b.x, (const uint16_t *)(b.w + c * b.bytes), 1, s.n,
		    s.k, o1_gemv_setup{0, 0}, true, st);
	switch (type) {
	case O1_QUANT_Q8_0:
		return launch_q<O1_QUANT_Q8_0>(s, b, c, kn, st);
	case O1_QUANT_Q4_0:
		return launch_q<O1_QUANT_Q4_0>(s, b, c, kn, st);
	case O1_QUANT_Q5_0:
		return launch_q<O1_QUANT_Q5_0>(s, b, c, kn, st);
	case O1_QUANT_Q4_K:
		return launch_q<O1_QUANT_Q4_K>(s, b, c, kn, st);
	case O1_QUANT_Q6_K:
		return launch_q<O1_QUANT_Q6_K>(s, b, c, kn, st);
	}
	return -1;
}

struct timed {
	const shape *s;
	const bufs *b;
	enum o1_quant_type type;
	enum kernel kn;
};

static int launch_timed(void *ctx, uint32_t i, cudaStream_t st)
{
	const timed *t = (const timed *)ctx;

	return launch_one(*t->s, *t->b, t->type, t->kn, i % t->b->copies, st);
}

/* Microseconds per product: ITERS launches captured, replayed; < 0 on
 * an error. */
static double time_kernel(const shape &s, const bufs &b,
			  enum o1_quant_type type, enum kernel kn,
			  uint32_t iters, cudaStream_t st)
{
	timed t = {&s, &b, type, kn};

	/* at most about 4 GB a replay (the LM head's large copies) */
	if (iters > 4 && (double)b.bytes * iters > 4e9)
		iters = (uint32_t)(4e9 / (double)b.bytes) > 4
			    ? (uint32_t)(4e9 / (double)b.bytes)
			    : 4;
	return gpu_bench_graph_us(st, iters, REPLAYS, launch_timed, &t);
}

static double copy_gbs(void)
{
	return gpu_bench_copy_gbs(POOL_BYTES);
}

/* Buffers for BYTES of weights a copy; BLK bytes a block with its f16
 * scales at AT0 and AT1 (BLK 0: bf16, left random). */
static int open_bufs(const shape &s, uint64_t bytes, uint32_t blk,
		     uint32_t at0, uint32_t at1, bufs &b)
{
	uint64_t c = (POOL_BYTES + bytes - 1) / bytes;

	b.bytes = bytes;
	b.copies = (uint32_t)(c < 2 ? 2 : c > 64 ? 64 : c);
	if (cudaMalloc(&b.w, bytes * b.copies + 16) ||
	    cudaMalloc(&b.x, s.k * 2) || cudaMalloc(&b.y, s.n * 4ull))
		return -1;
	fill_words<<<1024, 256>>>((uint32_t *)b.w,
				  (bytes * b.copies + 16) / 4, 12345);
	if (blk)
		fix_scales<<<1024, 256>>>(b.w, bytes * b.copies / blk, blk,
					  at0, at1);
	fill_bf16<<<8, 256>>>(b.x, s.k);
	cudaMemset(b.y, 0, s.n * 4ull);
	return cudaDeviceSynchronize() ? -1 : 0;
}

static void close_bufs(bufs &b)
{
	cudaFree(b.w), cudaFree(b.x), cudaFree(b.y);
	b = bufs{};
}

/* The block bytes of TYPE and where its f16 scales lie. */
static void block_of(enum o1_quant_type type, uint32_t *blk, uint32_t *at0,
		     uint32_t *at1)
{
	*blk = 1, *at0 = *at1 = 0; /* set below for every type benched */
	switch (type) {
	case O1_QUANT_Q8_0:
		*blk = O1_QUANT_Q8_0_BYTES, *at0 = *at1 = 0;
		break;
	case O1_QUANT_Q4_0:
		*blk = O1_QUANT_Q4_0_BYTES, *at0 = *at1 = 0;
		break;
	case O1_QUANT_Q5_0:
		*blk = O1_QUANT_Q5_0_BYTES, *at0 = *at1 = 0;
		break;
	case O1_QUANT_Q4_K:
		*blk = O1_QUANT_Q4_K_BYTES, *at0 = 0, *at1 = 2;
		break;
	case O1_QUANT_Q6_K:
		*blk = O1_QUANT_Q6_K_BYTES, *at0 = *at1 = 208;
		break;
	}
}

/* REF's outputs and KN's over copy 0, bitwise (S.n f32, or bf16 for the
 * SwiGLU product): 1 same, 0 not, -1 on an error. */
static int same_bits(const shape &s, const bufs &b, enum o1_quant_type type,
		     enum kernel ref, enum kernel kn, cudaStream_t st)
{
	size_t bytes = s.n * (kn >= K_S_OLD ? 2ull : 4ull);
	std::vector<float> y0(s.n), y1(s.n);

	if (launch_one(s, b, type, ref, 0, st) ||
	    cudaMemcpyAsync(y0.data(), b.y, bytes, cudaMemcpyDeviceToHost,
			    st) ||
	    cudaMemsetAsync(b.y, 0xff, bytes, st) ||
	    launch_one(s, b, type, kn, 0, st) ||
	    cudaMemcpyAsync(y1.data(), b.y, bytes, cudaMemcpyDeviceToHost,
			    st) ||
	    cudaStreamSynchronize(st))
		return -1;
	return memcmp(y0.data(), y1.data(), bytes) ? 0 : 1;
}

static void report(const char *type, const shape &s, enum kernel kn,
		   double mb, double us, double bw, double ref_us,
		   const char *ref)
{
	printf("%-5s %-5s %7u %6u %-4s %8.1f MB %9.2f us %6.0f GB/s %5.1f%% "
	       "copy",
	       type, s.name, s.n, s.k, kernel_name[kn], mb, us, mb * 1e3 / us,
	       100.0 * mb * 1e3 / us / bw);
	if (ref_us > 0)
		printf("  x%.2f vs %s", ref_us / us, ref);
	printf("\n");
}

/* The SwiGLU product on Q4_K (see the top): each kernel timed, then its
 * bits against old's. 0, or 1 where one failed or differed. */
static int bench_swiglu(uint32_t iters, double bw, cudaStream_t st)
{
	static const shape sw = {"gate+up", 14336, 4096};
	uint32_t blk, at0, at1;
	uint64_t rb;
	bufs b = {};
	double mb, us, ref_us = 0;
	int rc = 0;

	block_of(O1_QUANT_Q4_K, &blk, &at0, &at1);
	if (o1_quant_row_bytes(O1_QUANT_Q4_K, sw.k, &rb) ||
	    open_bufs(sw, rb * 2 * sw.n, blk, at0, at1, b))
		return 1;
	mb = (double)rb * 2 * sw.n / 1e6;
	for (int kn = K_S_OLD; kn <= K_S_2RX; kn++) {
		us = time_kernel(sw, b, O1_QUANT_Q4_K, (enum kernel)kn, iters,
				 st);
		if (us <= 0) {
			fprintf(stderr, "bench_gemv_q: swiglu %s failed\n",
				kernel_name[kn]);
			rc = 1;
			continue;
		}
		report("q4_k", sw, (enum kernel)kn, mb, us, bw, ref_us,
		       "new3b");
		if (kn == K_S_3B)
			ref_us = us;
	}
	for (int kn = K_S_NEW; kn <= K_S_2RX; kn++) {
		int same = same_bits(sw, b, O1_QUANT_Q4_K, K_S_OLD,
				     (enum kernel)kn, st);

		printf("q4_k  gate+up bits old vs %s: %s\n", kernel_name[kn],
		       same > 0 ? "same" : same ? "ERROR" : "DIFFER");
		rc |= same <= 0;
	}
	close_bufs(b);
	return rc;
}

/* MODEL's index in models, or -1. */
static int model_of(const char *model)
{
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		if (!strcmp(models[i].model, model))
			return (int)i;
	return -1;
}

int main(int argc, char **argv)
{
	static const option opts[] = {{"iters", required_argument, NULL, 'i'},
				      {"types", required_argument, NULL, 't'},
				      {"swiglu", no_argument, NULL, 's'},
				      {"model", required_argument, NULL, 'm'},
				      {0, 0, 0, 0}};
	int model = 0;
	uint32_t iters = 20;
	const char *want = "q8_0,q4_0,q4_k,q6_k";
	int opt, rc = 0, swiglu_only = 0;
	cudaStream_t st;
	double bw;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 'i')
			iters = (uint32_t)strtoul(optarg, NULL, 10);
		else if (opt == 't')
			want = optarg;
		else if (opt == 's')
			swiglu_only = 1;
		else if (opt == 'm' && (model = model_of(optarg)) >= 0)
			continue;
		else {
			fprintf(stderr, "usage: bench_gemv_q [--iters N] "
					"[--types q8_0,q4_0,q5_0,q4_k,q6_k] "
					"[--swiglu] [--model llama3-8b|"
					"llama3.2-1b|qwen2.5-0.5b]\n");
			return 2;
		}
	}
	if (o1_cuda_probe() || !iters) {
		fprintf(stderr, "bench_gemv_q: no CUDA device\n");
		return 1;
	}
	cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
	bw = copy_gbs();
	printf("bench_gemv_q: copy bandwidth %.0f GB/s, %u multiprocessors, "
	       "%u launches a graph, median of %d replays, 1 input row, "
	       "shapes %s\n",
	       bw, o1_cuda_sm_count(), iters, REPLAYS, models[model].model);
	for (const shape &s : models[model].s) {
		bufs b = {};

		if (swiglu_only)
			break;
		double mb = (double)s.n * s.k * 2 / 1e6, us;

		if (open_bufs(s, (uint64_t)s.n * s.k * 2, 0, 0, 0, b))
			goto nomem;
		us = time_kernel(s, b, O1_QUANT_Q8_0, K_BF16, iters, st);
		report("bf16", s, K_BF16, mb, us, bw, 0, "old");
		close_bufs(b);
		for (const auto &t : types) {
			uint32_t blk, at0, at1;
			uint64_t rb;
			double old_us = 0;

			if (!strstr(want, t.name))
				continue;
			if (o1_quant_row_bytes(t.type, s.k, &rb)) {
				printf("%-5s %-5s K %u: not whole blocks, "
				       "skipped\n",
				       t.name, s.name, s.k);
				continue;
			}
			block_of(t.type, &blk, &at0, &at1);
			if (open_bufs(s, rb * s.n, blk, at0, at1, b))
				goto nomem;
			mb = (double)rb * s.n / 1e6;
			for (int kn = K_OLD; kn <= K_4B; kn++) {
				us = time_kernel(s, b, t.type, (enum kernel)kn,
						 iters, st);
				if (us <= 0) {
					fprintf(stderr, "bench_gemv_q: %s %s "
							"failed\n",
						t.name, kernel_name[kn]);
					rc = 1;
					continue;
				}
				report(t.name, s, (enum kernel)kn, mb, us, bw,
				       old_us, "old");
				if (kn == K_OLD)
					old_us = us;
			}
			for (int kn = K_NEW; kn <= K_4B; kn++) {
				int same = same_bits(s, b, t.type, K_OLD,
						     (enum kernel)kn, st);

				printf("%-5s %-5s bits old vs %s: %s\n",
				       t.name, s.name, kernel_name[kn],
				       same > 0 ? "same"
				       : same	? "ERROR"
						: "DIFFER");
				rc |= same <= 0;
			}
			close_bufs(b);
		}
	}
	if (strstr(want, "q4_k"))
		rc |= bench_swiglu(iters, bw, st);
	return rc || cudaGetLastError() ? 1 : 0;
nomem:
	fprintf(stderr, "bench_gemv_q: cannot allocate\n");
	return 1;
}

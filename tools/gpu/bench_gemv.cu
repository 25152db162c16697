/* bench_gemv: gemv.cu's decode products at the presets' shapes, one input
 * row, beside the device copy bandwidth: the lab where gemv.cu's launch
 * setup (GEMV_BPS blocks per multiprocessor, batch_of's pieces per lane)
 * is chosen.
 *
 *   bench_gemv [--iters N] [--quick]
 *
 * For each product of qwen2.5-0.5b, llama3.2-1b and llama3-8b (QKV over
 * the RMSNorm, x += O, SwiGLU over the RMSNorm of the gate/up product,
 * x += down, LM head over the RMSNorm: the variants the CUDA backend
 * runs, but for the QKV product's RoPE epilogue), each launch setup
 * (blocks per multiprocessor 1 to 4; pieces per lane and row in a batch:
 * 4, 8, 16, halved for the paired SwiGLU rows, and GEMV_WHOLE for x += O
 * and x += down), PDL off and on, one batch in flight a warp (gemv) and,
 * where a row is one batch, two (gemv2): the time per product from a
 * CUDA graph of ITERS launches back to back (default 20), each over its
 * own copy of the weights (the copies span at least 1 GiB, so L2 holds
 * none of them when it is read), the median of 5 replays after one
 * warm-up. GB/s counts the weight bytes only (the input and output are a
 * few KB). --quick: the one-buffer default setup (GEMV_BPS, batch_of) and
 * the backend's only, PDL on. The last lines: per product, the one-buffer
 * default's time and bandwidth, what the backend launches now
 * (launch_setup: gemv2 with half the pieces where two_buffers says so,
 * GEMV_WHOLE pieces where whole_row does) and the best setup's. This
 * file includes gemv.cu to reach its templates (it does not link the
 * library's copy). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "gpu_bench.h"
#include "kernels/gemv.cu"

#define POOL_BYTES (1ull << 30)
#define REPLAYS	   5

enum kind { K_QKV, K_O, K_GU, K_DOWN, K_HEAD };
static const char *kind_name[] = {"qkv", "o", "gate/up", "down", "head"};

struct shape {
	const char *preset;
	enum kind kind;
	uint32_t n, k; /* output columns (gate/up: F), K */
};

/* dim, qkv rows, ffn, vocab of each preset. */
static const shape shapes[] = {
    {"qwen2.5-0.5b", K_QKV, 1152, 896},
    {"qwen2.5-0.5b", K_O, 896, 896},
    {"qwen2.5-0.5b", K_GU, 4864, 896},
    {"qwen2.5-0.5b", K_DOWN, 896, 4864},
    {"qwen2.5-0.5b", K_HEAD, 151936, 896},
    {"llama3.2-1b", K_QKV, 3072, 2048},
    {"llama3.2-1b", K_O, 2048, 2048},
    {"llama3.2-1b", K_GU, 8192, 2048},
    {"llama3.2-1b", K_DOWN, 2048, 8192},
    {"llama3.2-1b", K_HEAD, 128256, 2048},
    {"llama3-8b", K_QKV, 6144, 4096},
    {"llama3-8b", K_O, 4096, 4096},
    {"llama3-8b", K_GU, 14336, 4096},
    {"llama3-8b", K_DOWN, 4096, 14336},
    {"llama3-8b", K_HEAD, 128256, 4096},
};

/* Weight rows of a shape's matrix. */
static uint64_t w_rows(const shape &s)
{
	return s.kind == K_GU ? 2ull * s.n : s.n;
}

/* Random bf16 in [-1, 1) by a hash of the index (never zeros: they read
 * faster than data). */
static __global__ void fill(__nv_bfloat16 *w, uint64_t n, uint32_t seed)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     i < n; i += (uint64_t)gridDim.x * blockDim.x) {
		uint32_t h = (uint32_t)(i * 2654435761u) ^ seed;

		h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12;
		w[i] = __float2bfloat16_rn((h >> 8) / 8388608.0f - 1.0f);
	}
}

static __global__ void fill_f32(float *x, uint32_t n, float v)
{
	for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += gridDim.x * blockDim.x)
		x[i] = v + (float)(i % 7) * 0.01f;
}

struct bufs {
	__nv_bfloat16 *w; /* copies of the matrix, back to back */
	uint32_t copies;
	uint16_t *x; /* bf16 input (K) */
	float *xf, *nw, *y;
	__nv_bfloat16 *act;
};

/* One setup of a product: blocks per multiprocessor, P, PDL, and two
 * batches in flight a warp (gemv2) or one (gemv). */
struct setup {
	uint32_t bps, p;
	bool pdl, two;
};

/* Launches the shape's variant over copy C with setup U. */
template <int P, bool TWO>
static int launch_p(const shape &s, const bufs &b, uint32_t c, const setup &u,
		    cudaStream_t st)
{
	uint64_t bytes = w_rows(s) * s.k * 2;
	const uint16_t *w = (const uint16_t *)((const char *)b.w + c * bytes);
	gemv_args a = args(b.x, b.xf, b.nw, 1e-5f, w, s.n, s.k);

	a.y = b.y, a.act = b.act;
	switch (s.kind) {
	case K_QKV:
	case K_HEAD:
		return launch<1, IN_NORM, OUT_STORE, P, TWO>(a, u.bps, u.pdl,
							     st);
	case K_O:
	case K_DOWN:
		return staged(1, s.k)
			   ? launch<1, IN_STAGED, OUT_ADD, P, TWO>(
				 a, u.bps, u.pdl, st)
			   : launch<1, IN_BF16, OUT_ADD, P, TWO>(a, u.bps,
								 u.pdl, st);
	default:
		return launch<1, IN_NORM, OUT_SWIGLU, P / 2, TWO>(a, u.bps,
								  u.pdl, st);
	}
}

static int launch_one(const shape &s, const bufs &b, uint32_t c, const setup &u,
		      cudaStream_t st)
{
	switch (u.p) {
	case 4:
		return u.two ? launch_p<4, true>(s, b, c, u, st)
			     : launch_p<4, false>(s, b, c, u, st);
	case 16:
		return u.two ? launch_p<16, true>(s, b, c, u, st)
			     : launch_p<16, false>(s, b, c, u, st);
	case GEMV_WHOLE: /* x += O and x += down only (whole_row) */
		return launch_p<GEMV_WHOLE, false>(s, b, c, u, st);
	default:
		return u.two ? launch_p<8, true>(s, b, c, u, st)
			     : launch_p<8, false>(s, b, c, u, st);
	}
}

struct timed {
	const shape *s;
	const bufs *b;
	const setup *u;
};

static int launch_timed(void *ctx, uint32_t i, cudaStream_t st)
{
	const timed *t = (const timed *)ctx;

	return launch_one(*t->s, *t->b, i % t->b->copies, *t->u, st);
}

/* Microseconds per product: ITERS launches captured, replayed. */
static double time_setup(const shape &s, const bufs &b, const setup &u,
			 uint32_t iters, cudaStream_t st)
{
	timed t = {&s, &b, &u};

	return gpu_bench_graph_us(st, iters, REPLAYS, launch_timed, &t);
}

static double copy_gbs(void)
{
	return gpu_bench_copy_gbs(POOL_BYTES);
}

static int open_bufs(const shape &s, bufs &b)
{
	uint64_t bytes = w_rows(s) * s.k * 2;
	uint64_t c = (POOL_BYTES + bytes - 1) / bytes;

	b.copies = (uint32_t)(c < 2 ? 2 : c > 64 ? 64 : c);
	if (cudaMalloc(&b.w, bytes * b.copies) || cudaMalloc(&b.x, s.k * 2) ||
	    cudaMalloc(&b.xf, s.k * 4) || cudaMalloc(&b.nw, s.k * 4) ||
	    cudaMalloc(&b.y, s.n * 4ull) || cudaMalloc(&b.act, s.n * 2ull))
		return -1;
	fill<<<1024, 256>>>(b.w, bytes / 2 * b.copies, 12345);
	fill<<<8, 256>>>((__nv_bfloat16 *)b.x, s.k, 777);
	fill_f32<<<8, 256>>>(b.xf, s.k, 0.5f);
	fill_f32<<<8, 256>>>(b.nw, s.k, 1.0f);
	cudaMemset(b.y, 0, s.n * 4ull);
	return cudaDeviceSynchronize() ? -1 : 0;
}

static void close_bufs(bufs &b)
{
	cudaFree(b.w), cudaFree(b.x), cudaFree(b.xf), cudaFree(b.nw);
	cudaFree(b.y), cudaFree(b.act);
}

/* Whether a weight row of S is one batch of P pieces a lane (P / 2 for
 * the gate/up pairs): gemv2's invariant. */
static bool one_batch(const shape &s, uint32_t p)
{
	return s.k / 8 <= 32 * (s.kind == K_GU ? p / 2 : p);
}

/* The one-buffer default (gemv, the backend's launch before gemv2). */
static setup default_setup(void)
{
	return setup{GEMV_BPS, batch_of<1, OUT_STORE>(), true, false};
}

/* What the backend launches for shape S (launch_setup's default): gemv2
 * with half the pieces where two_buffers says so. */
static setup backend_setup(const shape &s)
{
	gemv_args a = args(NULL, NULL, NULL, 0, NULL, s.n, s.k);
	uint32_t lo = batch_of<1, OUT_STORE>() / 2;

	if (two_buffers(a, s.kind == K_GU ? lo / 2 : lo, GEMV_BPS))
		return setup{GEMV_BPS, lo, true, true};
	if ((s.kind == K_O || s.kind == K_DOWN) &&
	    whole_row(a, 2 * lo, GEMV_BPS))
		return setup{GEMV_BPS, GEMV_WHOLE, true, false};
	return default_setup();
}

int main(int argc, char **argv)
{
	static const option opts[] = {{"iters", required_argument, NULL, 'i'},
				      {"quick", no_argument, NULL, 'q'},
				      {0, 0, 0, 0}};
	uint32_t iters = 20;
	bool quick = false;
	int opt;
	cudaStream_t st;
	double bw;
	std::vector<char> summary;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 'i')
			iters = (uint32_t)strtoul(optarg, NULL, 10);
		else if (opt == 'q')
			quick = true;
		else {
			fprintf(stderr, "usage: bench_gemv [--iters N] "
					"[--quick]\n");
			return 2;
		}
	}
	if (o1_cuda_probe() || !iters) {
		fprintf(stderr, "bench_gemv: no CUDA device\n");
		return 1;
	}
	cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
	bw = copy_gbs();
	printf("bench_gemv: copy bandwidth %.0f GB/s, %u multiprocessors, %u "
	       "launches a graph, median of %d replays\n",
	       bw, o1_cuda_sm_count(), iters, REPLAYS);
	printf("%-13s %-8s %7s %6s %8s  bps  P pdl buf %9s %8s %6s\n",
	       "preset",
	       "product", "N", "K", "MB", "us", "GB/s", "%copy");
	for (const shape &s : shapes) {
		bufs b = {};
		double mb = w_rows(s) * s.k * 2 / 1e6, best = 1e30, dflt = 0;
		double back = 0;
		setup bu = default_setup(), d = default_setup(),
		      k = backend_setup(s);
		char line[256];

		if (open_bufs(s, b)) {
			fprintf(stderr, "bench_gemv: cannot allocate\n");
			return 1;
		}
		for (uint32_t bps = 1; bps <= 4; bps++)
			for (uint32_t p : {4u, 8u, 16u, (uint32_t)GEMV_WHOLE})
				for (int v = 0; v < 4; v++) {
					setup u = {bps, p, (v & 1) != 0,
						   v >= 2};
					bool is_d = bps == d.bps && p == d.p &&
						    u.pdl == d.pdl &&
						    u.two == d.two;
					bool is_k = bps == k.bps && p == k.p &&
						    u.pdl == k.pdl &&
						    u.two == k.two;
					double us;

					if ((quick && !is_d && !is_k) ||
					    (u.two && !one_batch(s, p)) ||
					    (p == GEMV_WHOLE &&
					     (u.two || (s.kind != K_O &&
							s.kind != K_DOWN))))
						continue;
					us = time_setup(s, b, u, iters, st);
					printf("%-13s %-8s %7u %6u %8.1f  %3u "
					       "%2u %3s %3s %9.2f %8.0f "
					       "%5.1f%%\n",
					       s.preset, kind_name[s.kind], s.n,
					       s.k, mb, bps, p,
					       u.pdl ? "on" : "off",
					       u.two ? "2" : "1", us,
					       mb * 1e3 / us,
					       100.0 * mb * 1e3 / us / bw);
					if (us > 0 && us < best)
						best = us, bu = u;
					if (is_d)
						dflt = us;
					if (is_k)
						back = us;
				}
		snprintf(line, sizeof(line),
			 "SUMMARY %-13s %-8s %8.1f MB: default %8.2f us "
			 "%5.0f GB/s (%4.1f%%); backend (P %2u, %u buf) "
			 "%8.2f us %5.0f GB/s; best bps %u P %2u pdl %-3s "
			 "buf %u %8.2f us %5.0f GB/s\n",
			 s.preset, kind_name[s.kind], mb, dflt, mb * 1e3 / dflt,
			 100.0 * mb * 1e3 / dflt / bw, k.p, k.two ? 2 : 1, back,
			 mb * 1e3 / back, bu.bps, bu.p, bu.pdl ? "on" : "off",
			 bu.two ? 2 : 1, best, mb * 1e3 / best);
		summary.insert(summary.end(), line, line + strlen(line));
		close_bufs(b);
	}
	fwrite(summary.data(), 1, summary.size(), stdout);
	return cudaGetLastError() ? 1 : 0;
}

/* bench_qkv_q: the attention input of one llama3-8b layer in GGUF blocks
 * (the QKV product over the RMSNorm of the residual stream, RoPE, the KV
 * page write), as the CUDA backend's block path launches it at decode:
 *
 *   bench_qkv_q [--iters N] [--tokens M]
 *
 * Layouts: "q4k+q6k" (Q4_K_M's layers with a Q6_K v: q and k rows in
 * Q4_K, v in Q6_K, two parts) and "q4k" (one Q4_K part). Paths:
 *   unfused  o1_gemv_q8_norm_cuda a part into the f32 QKV rows, then
 *            o1_rope_kv_write_cuda (the block path before the RoPE
 *            epilogue: 2 or 3 kernels);
 *   fused    o1_gemv_q8_norm_rope_kv_cuda a part (1 or 2 kernels);
 *   parts    o1_gemv_q8_norm_rope_kv_parts_cuda (what the backend runs
 *            now: Q4_K then Q6_K in one kernel, gemv_qp2);
 *   parts+o  parts, then the O product (4096 x 4096 Q4_K,
 *            o1_gemv_q8_add_cuda over a bf16 row: the layer's next
 *            block product);
 *   +o pf    parts+o with o1_gemv_q_prefetch_next(O's weights) before
 *            the QKV launch, as the backend does: O read from L2.
 * Time per layer: a CUDA graph of ITERS (default 50) such layers with
 * PDL, each over its own copy of the weights (the copies span at least
 * 1 GiB, so L2 holds none), the median of 5 replays after a warm-up;
 * GB/s counts the weight bytes (O's too on the +o paths), beside the
 * device copy bandwidth. Each path's q and KV pages must equal the
 * unfused path's bitwise, and "+o pf"'s O output parts+o's ("bits
 * same"; exit 1 otherwise). M (default 1, at most 4) input rows. */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_bench.h"
#include "kernels/cuda_util.h"
#include "kernels/kernels_cuda.h"
#include "kernels/quant.h"

#define DIM	    4096
#define HQ	    32
#define HKV	    8
#define HD	    128
#define QKV_ROWS    ((HQ + 2 * HKV) * HD)
#define PAGE_TOKENS 16
#define PAGES	    4
#ifndef POOL_BYTES /* the CPU emulation builds it smaller */
#define POOL_BYTES (1ull << 30)
#endif
#define REPLAYS 5

enum path { UNFUSED, FUSED, PARTS, PARTS_O, PARTS_O_PF, N_PATHS };
static const char *const path_name[] = {"unfused", "fused", "parts", "parts+o",
					"+o pf"};

struct layout {
	const char *name;
	uint32_t n_parts;
	struct o1_gemv_q_part part[2]; /* w: offset in a copy */
};

static const struct layout layouts[] = {
    {"q4k+q6k",
     2,
     {{NULL, O1_QUANT_Q4_K, 0, (HQ + HKV) * HD},
      {NULL, O1_QUANT_Q6_K, (HQ + HKV) * HD, HKV *HD}}},
    {"q4k", 1, {{NULL, O1_QUANT_Q4_K, 0, QKV_ROWS}}},
};

struct bench {
	uint8_t *w; /* copies of the layout's parts and O, back to back */
	uint64_t copy_bytes, part_off[2], o_off, o_bytes;
	uint32_t copies, m;
	float *x, *nw, *qkv, *q, *inv, *y;
	uint16_t *kc, *vc, *att;
	int32_t *pos;
	uint32_t *slots;
	struct o1_attn_dims dims;
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static void *dev_put(const void *host, size_t bytes)
{
	void *d = NULL;

	if (cudaMalloc(&d, bytes))
		return NULL;
	if (host && cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice)) {
		cudaFree(d);
		return NULL;
	}
	return d;
}

/* The O product's matrix: HQ HD inputs, DIM outputs. */
#define O_TYPE O1_QUANT_Q4_K

/* ROWS x DIM of TYPE quantized from random weights (a few blocks scaled
 * apart) into the device at DST. */
static int put_part(uint8_t *dst, enum o1_quant_type type, uint32_t rows)
{
	uint64_t n = (uint64_t)rows * DIM, bytes;
	float *x = malloc(n * sizeof(float));
	uint8_t *q = NULL;
	int err = -1;

	if (!x || o1_quant_row_bytes(type, n, &bytes) || !(q = malloc(bytes)))
		goto out;
	for (uint64_t i = 0; i < n; i++)
		x[i] = frand() * (i / 256 % 5 == 0 ? 0.08f : 0.02f);
	if (!o1_quant_quantize(type, x, q, n) &&
	    !cudaMemcpy(dst, q, bytes, cudaMemcpyHostToDevice))
		err = 0;
out:
	free(x), free(q);
	return err;
}

/* The layout's parts at copy 0, then copy 0 repeated over the pool. */
static int open_bench(struct bench *b, const struct layout *l, uint32_t m)
{
	float x[4 * DIM], nw[DIM], inv[HD / 2];
	uint16_t att[4 * DIM];
	int32_t pos[4] = {100, 7, 2000, 31};
	uint32_t slots[4] = {5, 17, 34, 63};
	size_t cache = (size_t)PAGES * HKV * PAGE_TOKENS * HD * 2;
	uint64_t rb;

	memset(b, 0, sizeof(*b));
	b->m = m;
	for (uint32_t i = 0; i < l->n_parts; i++) {
		if (o1_quant_row_bytes(l->part[i].type, DIM, &rb))
			return -1;
		b->part_off[i] = b->copy_bytes;
		b->copy_bytes += (rb * l->part[i].rows + 255) / 256 * 256;
	}
	if (o1_quant_row_bytes(O_TYPE, HQ * HD, &rb))
		return -1;
	b->o_off = b->copy_bytes, b->o_bytes = rb * DIM;
	b->copy_bytes += (b->o_bytes + 255) / 256 * 256;
	b->copies =
	    (uint32_t)((POOL_BYTES + b->copy_bytes - 1) / b->copy_bytes);
	b->copies = b->copies < 2 ? 2 : b->copies > 128 ? 128 : b->copies;
	if (cudaMalloc((void **)&b->w, b->copy_bytes * b->copies))
		return -1;
	for (uint32_t i = 0; i < l->n_parts; i++)
		if (put_part(b->w + b->part_off[i], l->part[i].type,
			     l->part[i].rows))
			return -1;
	/* HQ HD == DIM: put_part's rows of DIM */
	if (put_part(b->w + b->o_off, O_TYPE, DIM))
		return -1;
	for (uint32_t c = 1; c < b->copies; c++)
		if (cudaMemcpy(b->w + c * b->copy_bytes, b->w, b->copy_bytes,
			       cudaMemcpyDeviceToDevice))
			return -1;
	for (uint32_t i = 0; i < 4 * DIM; i++)
		x[i] = frand() * 3.0f;
	for (uint32_t i = 0; i < DIM; i++)
		nw[i] = 0.5f + frand() * 0.25f;
	for (uint32_t i = 0; i < HD / 2; i++)
		inv[i] = (float)pow(500000.0, -2.0 * i / HD);
	for (uint32_t i = 0; i < 4 * DIM; i++) {
		float f = frand();
		uint32_t u;

		memcpy(&u, &f, 4);
		att[i] = (uint16_t)(u >> 16);
	}
	b->x = dev_put(x, sizeof(x));
	b->nw = dev_put(nw, sizeof(nw));
	b->inv = dev_put(inv, sizeof(inv));
	b->pos = dev_put(pos, sizeof(pos));
	b->slots = dev_put(slots, sizeof(slots));
	b->qkv = dev_put(NULL, (size_t)4 * QKV_ROWS * 4);
	b->q = dev_put(NULL, (size_t)4 * HQ * HD * 4);
	b->kc = dev_put(NULL, cache);
	b->vc = dev_put(NULL, cache);
	b->att = dev_put(att, sizeof(att));
	b->y = dev_put(NULL, (size_t)4 * DIM * 4);
	b->dims = (struct o1_attn_dims){HQ,
					HKV,
					HD,
					PAGE_TOKENS,
					(uint64_t)HKV * PAGE_TOKENS * HD,
					1.0f / sqrtf(HD)};
	if (!b->x || !b->nw || !b->inv || !b->pos || !b->slots || !b->qkv ||
	    !b->q || !b->kc || !b->vc || !b->att || !b->y)
		return -1;
	return cudaMemset(b->kc, 0, cache) || cudaMemset(b->vc, 0, cache) ||
		       cudaDeviceSynchronize()
		   ? -1
		   : 0;
}

static void close_bench(struct bench *b)
{
	cudaFree(b->w), cudaFree(b->x), cudaFree(b->nw), cudaFree(b->inv);
	cudaFree(b->pos), cudaFree(b->slots), cudaFree(b->qkv);
	cudaFree(b->q), cudaFree(b->kc), cudaFree(b->vc);
	cudaFree(b->att), cudaFree(b->y);
}

/* One layer's attention input by path P over copy C. */
static int run_path(const struct bench *b, const struct layout *l, enum path p,
		    uint32_t c, cudaStream_t st)
{
	struct o1_rope_kv_args ra = {b->q, b->kc,  b->vc,    b->qkv,
				     NULL, b->pos, b->slots, b->inv,
				     1.0f, b->m,   HD};
	struct o1_gemv_q_part pt[2];
	const uint8_t *o = b->w + c * b->copy_bytes + b->o_off;
	int err = 0;

	for (uint32_t i = 0; i < l->n_parts; i++) {
		pt[i] = l->part[i];
		pt[i].w = b->w + c * b->copy_bytes + b->part_off[i];
	}
	if (p >= PARTS) {
		if (p == PARTS_O_PF)
			o1_gemv_q_prefetch_next(o, b->o_bytes, NULL, 0);
		err = o1_gemv_q8_norm_rope_kv_parts_cuda(
		    &ra, &b->dims, b->x, b->nw, 1e-5f, pt, l->n_parts, DIM,
		    true, st);
		return err || p == PARTS
			   ? err
			   : o1_gemv_q8_add_cuda(b->y, b->att, NULL, o, O_TYPE,
						 b->m, DIM, HQ * HD, DIM, true,
						 st);
	}
	for (uint32_t i = 0; !err && i < l->n_parts; i++)
		err =
		    p == FUSED
			? o1_gemv_q8_norm_rope_kv_cuda(
			      &ra, &b->dims, b->x, b->nw, 1e-5f, pt[i].w,
			      pt[i].type, pt[i].col0, pt[i].rows, DIM, true, st)
			: o1_gemv_q8_norm_cuda(b->qkv + pt[i].col0, b->x, NULL,
					       b->nw, 1e-5f, pt[i].w,
					       pt[i].type, b->m, pt[i].rows,
					       DIM, QKV_ROWS, true, st);
	if (!err && p == UNFUSED)
		err = o1_rope_kv_write_cuda(&ra, &b->dims, true, st);
	return err;
}


struct timed {
	const struct bench *b;
	const struct layout *l;
	enum path p;
};

static int launch_timed(void *ctx, uint32_t i, cudaStream_t st)
{
	const struct timed *t = ctx;

	return run_path(t->b, t->l, t->p, i % t->b->copies, st);
}

/* Microseconds a layer: ITERS layers captured, replayed; < 0 on an
 * error. */
static double time_path(const struct bench *b, const struct layout *l,
			enum path p, uint32_t iters, cudaStream_t st)
{
	struct timed t = {b, l, p};

	return gpu_bench_graph_us(st, iters, REPLAYS, launch_timed, &t);
}

/* Path P's q and KV pages against the unfused path's over copy 0, and
 * +o pf's O output against parts+o's: 1 the same bits, 0 not, -1 on an
 * error. */
static int same_bits(const struct bench *b, const struct layout *l, enum path p,
		     cudaStream_t st)
{
	size_t n[4] = {(size_t)b->m * HQ * HD * 4,
		       (size_t)PAGES * HKV * PAGE_TOKENS * HD * 2,
		       (size_t)PAGES * HKV * PAGE_TOKENS * HD * 2,
		       (size_t)b->m * DIM * 4};
	void *dev[4] = {b->q, b->kc, b->vc, b->y};
	enum path ref = p == PARTS_O_PF ? PARTS_O : UNFUSED;
	uint8_t *h[2][4] = {{NULL}};
	int same = -1;

	for (int s = 0; s < 2; s++)
		for (int i = 0; i < 4; i++)
			if (!(h[s][i] = malloc(n[i])))
				goto out;
	for (int s = 0; s < 2; s++) {
		for (int i = 0; i < 4; i++)
			if (cudaMemsetAsync(dev[i], 0, n[i], st))
				goto out;
		if (run_path(b, l, s ? p : ref, 0, st))
			goto out;
		for (int i = 0; i < 4; i++)
			if (cudaMemcpyAsync(h[s][i], dev[i], n[i],
					    cudaMemcpyDeviceToHost, st))
				goto out;
		if (cudaStreamSynchronize(st))
			goto out;
	}
	same = 1;
	/* O's output only where both ran it */
	for (int i = 0; i < (ref == PARTS_O ? 4 : 3); i++)
		same &= !memcmp(h[0][i], h[1][i], n[i]);
out:
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < 4; i++)
			free(h[s][i]);
	return same;
}

static double copy_gbs(void)
{
	return gpu_bench_copy_gbs(POOL_BYTES);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"iters", required_argument, NULL, 'i'},
	    {"tokens", required_argument, NULL, 'm'},
	    {0, 0, 0, 0}};
	uint32_t iters = 50, m = 1;
	cudaStream_t st;
	double bw;
	int opt, rc = 0;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 'i')
			iters = (uint32_t)strtoul(optarg, NULL, 10);
		else if (opt == 'm')
			m = (uint32_t)strtoul(optarg, NULL, 10);
		else {
			fprintf(stderr, "usage: bench_qkv_q [--iters N] "
					"[--tokens M]\n");
			return 2;
		}
	}
	if (!iters || !m || m > O1_GEMV_MAX_ROWS) {
		fprintf(stderr, "bench_qkv_q: --iters >= 1, --tokens 1..%d\n",
			O1_GEMV_MAX_ROWS);
		return 2;
	}
	if (o1_cuda_probe()) {
		fprintf(stderr, "bench_qkv_q: no CUDA device\n");
		return 1;
	}
	cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
	bw = copy_gbs();
	printf("bench_qkv_q: copy bandwidth %.0f GB/s, %u layers a graph, "
	       "median of %d replays, %u input rows\n",
	       bw, iters, REPLAYS, m);
	for (size_t li = 0; li < sizeof(layouts) / sizeof(layouts[0]); li++) {
		const struct layout *l = &layouts[li];
		struct bench b;
		double mb, us, base = 0;

		if (open_bench(&b, l, m)) {
			fprintf(stderr, "bench_qkv_q: cannot set up %s\n",
				l->name);
			return 1;
		}
		for (int p = 0; p < N_PATHS; p++) {
			int same = p ? same_bits(&b, l, (enum path)p, st) : 1;

			/* the weights the path reads */
			mb = (double)(b.copy_bytes -
				      (p >= PARTS_O ? 0 : b.o_bytes)) /
			     1e6;

			us = time_path(&b, l, (enum path)p, iters, st);
			if (us <= 0) {
				fprintf(stderr, "bench_qkv_q: %s %s failed\n",
					l->name, path_name[p]);
				rc = 1;
				continue;
			}
			base = p == UNFUSED || p == PARTS_O ? us : base;
			printf("%-8s %-8s %6.1f MB %8.2f us %6.0f GB/s %5.1f%% "
			       "copy  x%.2f vs %s  bits %s\n",
			       l->name, path_name[p], mb, us, mb * 1e3 / us,
			       100.0 * mb * 1e3 / us / bw, base / us,
			       p >= PARTS_O ? "parts+o" : "unfused",
			       same > 0 ? "same"
			       : same	? "ERROR"
					: "DIFFER");
			rc |= same <= 0;
		}
		close_bench(&b);
	}
	return rc || cudaGetLastError() ? 1 : 0;
}

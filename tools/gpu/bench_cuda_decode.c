/* bench_cuda_decode: CUDA backend batch-1 decode speed beside its floor.
 *
 *   bench_cuda_decode MODEL [--prompt N] [--tokens N]
 *
 * Prefills N random prompt ids (seeded) in one step, twice (the second
 * is timed: the first pays cuBLAS's first-use costs; both write the same
 * KV), runs 8 warm-up decode steps, then times TOKENS greedy decode steps
 * end to end through o1_backend_step (host argmax over the copied logits
 * included) and reports tokens/s. In the same run it measures device copy
 * bandwidth (cudaMemcpy device to device of 1 GiB, best of 10, read +
 * write bytes, CUDA events) and prints the floor: the bf16 weight bytes one
 * decode step reads (every matrix once, the LM head included; the token
 * embedding one row unless tied) divided by that bandwidth, and the share
 * reached. One more decode step runs between cudaProfilerStart and Stop, so
 * `ncu --profile-from-start off` times exactly the kernels of one step
 * (tools/gpu/bench.sh sums them: the device's share of a step).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "error.h"
#include "kv_pool.h"
#include "model.h"

#define BW_BYTES (1ull << 30)

struct bench_args {
	const char *model;
	uint32_t prompt, tokens;
};

struct bench_run {
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table table;
	uint32_t pages[4096];
	int32_t *ids;
	float *logits;
	uint32_t vocab;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Device copy bandwidth, GB/s (1e9 bytes, read + write). */
static int copy_bandwidth(double *gbs)
{
	void *a = NULL, *b = NULL;
	cudaEvent_t e0 = NULL, e1 = NULL;
	float ms, best = 1e30f;
	int err = -O1_E_CUDA;

	if (cudaMalloc(&a, BW_BYTES) || cudaMalloc(&b, BW_BYTES) ||
	    cudaEventCreate(&e0) || cudaEventCreate(&e1) ||
	    cudaMemset(a, 1, BW_BYTES))
		goto out;
	for (int i = 0; i < 10; i++) {
		cudaEventRecord(e0, 0);
		cudaMemcpy(b, a, BW_BYTES, cudaMemcpyDeviceToDevice);
		cudaEventRecord(e1, 0);
		if (cudaEventSynchronize(e1) ||
		    cudaEventElapsedTime(&ms, e0, e1))
			goto out;
		best = ms < best ? ms : best;
	}
	*gbs = 2.0 * BW_BYTES / (best * 1e-3) / 1e9;
	err = 0;
out:
	cudaEventDestroy(e0), cudaEventDestroy(e1);
	cudaFree(a), cudaFree(b);
	return err;
}

/* Bytes of bf16 weights one decode step reads (norms are f32). */
static double weight_bytes(const struct o1_model *m)
{
	double n = 0;

	for (uint32_t i = 0; i < m->n_tensors; i++) {
		const struct o1_tensor *t = &m->tensors[i];

		if (t->role == O1_T_TOKEN_EMBD && !m->desc.tied_embeddings)
			n += 2.0 * m->desc.dim;
		else
			n += (t->n_dims == 1 ? 4.0 : 2.0) *
			     o1_tensor_elements(t);
	}
	return n;
}

static int parse(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
	    {"prompt", required_argument, NULL, 'p'},
	    {"tokens", required_argument, NULL, 'n'},
	    {0},
	};
	int opt;

	a->prompt = 128, a->tokens = 256;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint32_t v = (uint32_t)strtoul(optarg ? optarg : "0", NULL, 10);

		if (opt == '?' || v == 0)
			return -EINVAL;
		if (opt == 'p')
			a->prompt = v;
		else
			a->tokens = v;
	}
	if (optind + 1 != argc)
		return -EINVAL;
	a->model = argv[optind];
	return 0;
}

static int open_run(const struct o1_model *m, const struct bench_args *a,
		    struct bench_run *r)
{
	uint32_t total = a->prompt + a->tokens + 9;
	struct o1_backend_config cfg = {.max_batch_tokens = a->prompt,
					.max_seqs = 1,
					.max_context_tokens = total,
					.n_pages = (total + 15) / 16,
					.page_tokens = 16};
	uint64_t x = 12345;
	int err;

	if (cfg.n_pages > 4096)
		return -O1_E_CONTEXT;
	r->vocab = m->desc.vocab_size;
	r->ids = malloc(total * sizeof(int32_t));
	r->logits = malloc((size_t)a->prompt * r->vocab * sizeof(float));
	if (!r->ids || !r->logits)
		return -ENOMEM;
	for (uint32_t i = 0; i < a->prompt; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		r->ids[i] = (int32_t)((x >> 33) % r->vocab);
	}
	err = o1_backend_create(O1_BACKEND_CUDA, m, &cfg, &r->b);
	if (!err)
		err = o1_kv_pool_create(o1_backend_kv_layout(r->b), &r->pool);
	if (!err)
		o1_kv_table_init(&r->table, r->pages, 4096);
	return err;
}

static int step(struct bench_run *r, uint32_t pos, uint32_t n)
{
	struct o1_step_seq q = {r->ids + pos, n, pos, r->pages, 0, false};
	int err = o1_kv_table_reserve(r->pool, &r->table, pos + n);
	uint32_t best = 0;

	q.n_pages = r->table.n_pages;
	if (!err)
		err = o1_backend_step(r->b,
				      &(struct o1_step){&q, 1, r->logits, 1});
	for (uint32_t i = 1; !err && i < r->vocab; i++)
		best = r->logits[i] > r->logits[best] ? i : best;
	r->ids[pos + n] = (int32_t)best;
	return err;
}

static int run(const struct o1_model *m, const struct bench_args *a)
{
	struct bench_run r = {0};
	double t0, dt, pre, bw = 0, wb = weight_bytes(m);
	uint32_t pos = a->prompt;
	int err = open_run(m, a, &r);

	err = err ? err : step(&r, 0, a->prompt); /* warm-up: first use */
	t0 = now_s();
	err = err ? err : step(&r, 0, a->prompt); /* same ids, same KV */
	pre = now_s() - t0;
	for (uint32_t i = 0; !err && i < 8; i++)
		err = step(&r, pos++, 1);
	t0 = now_s();
	for (uint32_t i = 0; !err && i < a->tokens; i++)
		err = step(&r, pos++, 1);
	dt = now_s() - t0;
	cudaProfilerStart();
	err = err ? err : step(&r, pos++, 1);
	cudaProfilerStop();
	if (!err)
		err = copy_bandwidth(&bw);
	if (!err)
		printf("%s: %u layers dim %u vocab %u, prompt %u, %u tokens: "
		       "%.1f tok/s (%.3f ms/token); weights %.3f GB/token, "
		       "copy bandwidth %.0f GB/s, floor %.0f tok/s, %.1f%% of "
		       "it; prefill %.2f ms (%.0f tok/s)\n",
		       m->desc.name, m->desc.n_layers, m->desc.dim,
		       m->desc.vocab_size, a->prompt, a->tokens, a->tokens / dt,
		       dt * 1e3 / a->tokens, wb / 1e9, bw, bw * 1e9 / wb,
		       100.0 * (a->tokens / dt) / (bw * 1e9 / wb), pre * 1e3,
		       a->prompt / pre);
	if (r.pool)
		o1_kv_table_fini(r.pool, &r.table);
	o1_kv_pool_destroy(r.pool);
	o1_backend_destroy(r.b);
	free(r.ids), free(r.logits);
	return err;
}

int main(int argc, char **argv)
{
	struct bench_args a;
	struct o1_model *m;
	int err = parse(argc, argv, &a);

	if (err) {
		fprintf(stderr, "usage: bench_cuda_decode MODEL [--prompt N] "
				"[--tokens N]\n");
		return 2;
	}
	err = o1_model_open(a.model, &m);
	if (!err) {
		err = run(m, &a);
		o1_model_close(m);
	}
	if (err)
		fprintf(stderr, "bench_cuda_decode: %s\n", o1_strerror(err));
	return err ? 1 : 0;
}

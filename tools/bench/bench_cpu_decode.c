/* bench_cpu_decode: CPU backend decode speed beside its memory bound.
 *
 *   bench_cpu_decode MODEL [--threads N] [--prompt N] [--tokens N]
 *
 * Prefills N random prompt ids (seeded), then decodes greedily one token
 * per step and reports tokens/s. In the same run it measures memory read
 * bandwidth (a sum over a 1 GiB buffer on every thread) and copy bandwidth
 * (memcpy, read + write bytes) before and after the decode (the machine is
 * shared, so both are printed), and prints the bound: the f32 weight bytes
 * each decode step reads (every matrix once, the LM head included) divided
 * by the higher of the two read bandwidths.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "common/error.h"
#include "backend/kv_pool.h"
#include "model/model.h"
#include "kernels/threads.h"

#define BW_BYTES (1ull << 30)

struct bench_args {
	const char *model;
	uint32_t threads, prompt, tokens;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct bw_args {
	float *src, *dst;
	size_t n_per_task;
	double sums[256];
};

typedef float v8f __attribute__((vector_size(32)));

/* Sums the task's share with four independent vector accumulators, so
 * the loop is bound by loads, not by add latency. */
static void read_task(void *arg, uint32_t task, uint32_t worker)
{
	struct bw_args *a = arg;
	const v8f *p = (const v8f *)(a->src + task * a->n_per_task);
	v8f acc[4] = {{0}};

	(void)worker;
	for (size_t i = 0; i < a->n_per_task / 8; i += 4)
		for (int j = 0; j < 4; j++)
			acc[j] += p[i + j];
	for (int j = 0; j < 4; j++)
		for (int l = 0; l < 8; l++)
			a->sums[task] += acc[j][l];
}

static void copy_task(void *arg, uint32_t task, uint32_t worker)
{
	struct bw_args *a = arg;

	(void)worker;
	memcpy(a->dst + task * a->n_per_task, a->src + task * a->n_per_task,
	       a->n_per_task * sizeof(float));
}

/* Best of 5 passes, GB/s (1e9 bytes). */
static double bandwidth(struct o1_threads *tp, o1_threads_fn fn,
			struct bw_args *a, double bytes_per_pass)
{
	uint32_t tasks = o1_threads_count(tp);
	double best = 0;

	a->n_per_task = BW_BYTES / sizeof(float) / tasks;
	for (int pass = 0; pass < 5; pass++) {
		double t0 = now_s(), dt;

		o1_threads_run(tp, tasks, fn, a);
		dt = now_s() - t0;
		best = bytes_per_pass / dt / 1e9 > best
			   ? bytes_per_pass / dt / 1e9
			   : best;
	}
	return best;
}

static int measure_bandwidth(uint32_t threads, double *read_gbs,
			     double *copy_gbs)
{
	struct bw_args a = {0};
	struct o1_threads *tp;
	int err = o1_threads_create(threads, &tp);

	if (err)
		return err;
	a.src = aligned_alloc(64, BW_BYTES);
	a.dst = aligned_alloc(64, BW_BYTES);
	if (!a.src || !a.dst) {
		err = -ENOMEM;
		goto out;
	}
	memset(a.src, 1, BW_BYTES);
	memset(a.dst, 0, BW_BYTES);
	*read_gbs = bandwidth(tp, read_task, &a, BW_BYTES);
	*copy_gbs = bandwidth(tp, copy_task, &a, 2.0 * BW_BYTES);
out:
	free(a.src);
	free(a.dst);
	o1_threads_destroy(tp);
	return err;
}

/* Bytes of f32 weights one decode step reads: every tensor but the token
 * embedding (one row), plus the embedding again when it is the LM head. */
static double weight_bytes(const struct o1_model *m)
{
	double n = 0;

	for (uint32_t i = 0; i < m->n_tensors; i++)
		if (m->tensors[i].role != O1_T_TOKEN_EMBD ||
		    m->desc.tied_embeddings)
			n += o1_tensor_elements(&m->tensors[i]);
	return n * 4;
}

static int parse(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
	    {"threads", required_argument, NULL, 't'},
	    {"prompt", required_argument, NULL, 'p'},
	    {"tokens", required_argument, NULL, 'n'},
	    {0},
	};
	int opt;

	a->threads = 2, a->prompt = 128, a->tokens = 32;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint32_t v = (uint32_t)strtoul(optarg ? optarg : "0", NULL, 10);

		if (opt == '?' || v == 0)
			return -EINVAL;
		if (opt == 't')
			a->threads = v;
		else if (opt == 'p')
			a->prompt = v;
		else
			a->tokens = v;
	}
	if (optind + 1 != argc)
		return -EINVAL;
	a->model = argv[optind];
	return 0;
}

struct bench_run {
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table table;
	uint32_t pages[4096];
	int32_t *ids;
	float *logits;
	uint32_t vocab;
};

static int open_run(const struct o1_model *m, const struct bench_args *a,
		    struct bench_run *r)
{
	uint32_t total = a->prompt + a->tokens;
	struct o1_backend_config cfg = {.n_threads = a->threads,
					.max_batch_tokens = a->prompt,
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
	r->logits = malloc((size_t)r->vocab * sizeof(float));
	if (!r->ids || !r->logits)
		return -ENOMEM;
	for (uint32_t i = 0; i < a->prompt; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		r->ids[i] = (int32_t)((x >> 33) % r->vocab);
	}
	err = o1_backend_create(O1_BACKEND_CPU, m, &cfg, &r->b);
	if (!err)
		err = o1_kv_pool_create(o1_backend_kv_layout(r->b), &r->pool);
	if (err)
		return err;
	o1_kv_table_init(&r->table, r->pages, cfg.n_pages);
	return o1_kv_table_reserve(r->pool, &r->table, total);
}

static int step(struct bench_run *r, uint32_t start, uint32_t n)
{
	struct o1_step_seq s = {r->ids + start,	  n,	start, r->pages,
				r->table.n_pages, false};
	struct o1_step st = {
	    .seqs = &s, .n_seqs = 1, .logits = r->logits, .logits_rows = 1};

	return o1_backend_step(r->b, &st);
}

static int32_t argmax(const float *l, uint32_t n)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < n; i++)
		if (l[i] > l[best])
			best = i;
	return (int32_t)best;
}

static int decode(struct bench_run *r, const struct bench_args *a,
		  double *prefill_s, double *decode_s)
{
	double t0 = now_s();
	int err = step(r, 0, a->prompt);

	*prefill_s = now_s() - t0;
	t0 = now_s();
	for (uint32_t i = 0; !err && i < a->tokens; i++) {
		r->ids[a->prompt + i] = argmax(r->logits, r->vocab);
		err = step(r, a->prompt + i, 1);
	}
	*decode_s = now_s() - t0;
	return err;
}

static void close_run(struct bench_run *r)
{
	if (r->pool)
		o1_kv_table_fini(r->pool, &r->table);
	o1_kv_pool_destroy(r->pool);
	o1_backend_destroy(r->b);
	free(r->ids);
	free(r->logits);
}

int main(int argc, char **argv)
{
	struct bench_args a;
	struct bench_run r = {0};
	struct o1_model *m;
	double wbytes, pre_s = 0, dec_s = 0, rd = 0, cp = 0, rd0 = 0, cp0 = 0;
	int err;

	if (parse(argc, argv, &a)) {
		fprintf(stderr, "usage: bench_cpu_decode MODEL [--threads N] "
				"[--prompt N] [--tokens N]\n");
		return 2;
	}
	err = o1_model_open(a.model, &m);
	if (err)
		return 1;
	wbytes = weight_bytes(m);
	err = open_run(m, &a, &r);
	o1_model_close(m);
	if (!err)
		err = measure_bandwidth(a.threads, &rd0, &cp0);
	if (!err)
		err = decode(&r, &a, &pre_s, &dec_s);
	close_run(&r);
	if (!err)
		err = measure_bandwidth(a.threads, &rd, &cp);
	if (err) {
		fprintf(stderr, "bench_cpu_decode: %s\n", o1_strerror(err));
		return 1;
	}
	printf("model %s, %u threads, prompt %u, %u decode tokens\n", a.model,
	       a.threads, a.prompt, a.tokens);
	printf("prefill: %.1f tokens/s\n", a.prompt / pre_s);
	printf("decode: %.2f tokens/s (%.1f ms/token)\n", a.tokens / dec_s,
	       dec_s / a.tokens * 1e3);
	printf("bandwidth before/after: read %.1f/%.1f GB/s, copy %.1f/%.1f "
	       "GB/s (read+write)\n",
	       rd0, rd, cp0, cp);
	rd = rd > rd0 ? rd : rd0;
	printf("bound: %.2f GB of f32 weights per token / %.1f GB/s = %.2f "
	       "tokens/s; reached %.0f%%\n",
	       wbytes / 1e9, rd, rd * 1e9 / wbytes,
	       100.0 * (a.tokens / dec_s) / (rd * 1e9 / wbytes));
	return 0;
}

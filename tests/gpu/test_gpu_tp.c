/* Tensor parallelism over CUDA (tp_backend.c over cuda_backend.c, NCCL
 * through tp_group_nccl.c), against one CUDA backend on one GPU, on
 * two-layer bf16 shapes made by the o1model binary given as argv[1]:
 * llama3.2-1b (32 heads, 8 kv heads, FFN 8192: splits over 2 and 4) and
 * qwen2.5-0.5b (14 heads, 2 kv heads, Q/K/V biases: over 2 only).
 *
 * Each side runs the same script: four sequences with prompts of 17 to 40
 * random ids, prefilled together in chunks of at most 13 with logits for
 * every position, then 16 decode steps of all four, each fed the one-GPU
 * side's greedy ids (decode steps replay bucket 4's graph with graphs on).
 *
 * test_one_rank: the TP path over one rank (NCCL with a single rank, the
 * all-reduce an identity) equals the plain backend bitwise, graphs on,
 * and its graph counters are the plain backend's.
 * test_tp2, test_tp4 (2 and 4 GPUs, skipped with fewer): per step, the
 * logits' relative L2 distance to the one-GPU side must be <= 1e-2, the
 * bf16 tolerance the CUDA backend's own tests use between two ways of
 * running the same product (test_gpu_graphs: graphs off against graphs
 * on): the ranks compute the same bf16 products as one GPU except O and
 * down, whose f32 sums are split by rank and then added in another order;
 * that moves f32 values by an ulp or so, which flips some bf16 roundings
 * of the next layer's inputs. Graphs on and graphs off (eager) both. With
 * two ranks the all-reduce is one addition (commutative), so graph replay
 * and eager runs of the TP backend must agree bitwise; over four ranks
 * the difference is printed. No device allocation after create (the
 * CUDA backend's counter), rank 0's graph hits count every decode step.
 * test_refused: kv heads 2 over 4 GPUs, one device given to two ranks, a
 * device that does not exist.
 * Exit 77 without a CUDA device or without NCCL in this build. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>
#include <math.h>

#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "kernels/cuda_util.h"
#include "common/error.h"
#include "gpu_test.h"
#include "backend/kv_pool.h"
#include "model/model.h"

#define N_SEQS	  4
#define CHUNK	  13
#define N_DECODE  16
#define MAX_PAGES 8
#define PAGE	  16
#define MAX_IDS	  (MAX_PAGES * PAGE)

static int n_gpus;
static uint64_t rng = 77;

struct side {
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table t[N_SEQS];
	uint32_t pages[N_SEQS][MAX_PAGES];
	float *logits; /* N_SEQS * CHUNK rows */
};

struct world {
	struct o1_model *m;
	uint32_t vocab, prompt[N_SEQS], len[N_SEQS];
	int32_t ids[N_SEQS][MAX_IDS];
};

struct diff {
	double max_rel;
	uint64_t unequal, steps;
};

static uint32_t urand(uint32_t n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)((rng >> 33) % n);
}

static struct o1_backend_config config(uint32_t tp, bool graphs)
{
	struct o1_backend_config c = {.max_batch_tokens = N_SEQS * CHUNK,
				      .max_seqs = N_SEQS,
				      .max_context_tokens = MAX_IDS,
				      .n_pages = N_SEQS * MAX_PAGES,
				      .page_tokens = PAGE,
				      .graphs_enabled = graphs,
				      .n_graph_buckets = 3,
				      .graph_buckets = {1, 2, 4},
				      .tensor_parallel = tp};

	for (uint32_t r = 0; r < tp; r++)
		c.devices[r] = r;
	return c;
}

static void side_open(struct side *sd, const struct o1_model *m,
		      const struct o1_backend_config *cfg)
{
	memset(sd, 0, sizeof(*sd));
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, cfg, &sd->b), 0);
	assert_int_equal(
	    o1_kv_pool_create(o1_backend_kv_layout(sd->b), &sd->pool), 0);
	for (int s = 0; s < N_SEQS; s++)
		o1_kv_table_init(&sd->t[s], sd->pages[s], MAX_PAGES);
	sd->logits = malloc((size_t)N_SEQS * CHUNK * m->desc.vocab_size * 4);
	assert_non_null(sd->logits);
}

static void side_close(struct side *sd)
{
	for (int s = 0; s < N_SEQS; s++)
		o1_kv_table_fini(sd->pool, &sd->t[s]);
	o1_kv_pool_destroy(sd->pool);
	o1_backend_destroy(sd->b);
	free(sd->logits);
}

/* Every sequence brings COUNT[s] ids from LEN[s] (0 = not in the step);
 * logits for every row when ALL. Returns the rows. */
static uint32_t side_step(struct side *sd, const struct world *w,
			  const uint32_t *count, bool all)
{
	struct o1_step_seq q[N_SEQS];
	uint32_t n = 0, rows = 0;

	for (uint32_t s = 0; s < N_SEQS; s++) {
		if (!count[s])
			continue;
		assert_int_equal(o1_kv_table_reserve(sd->pool, &sd->t[s],
						     w->len[s] + count[s]),
				 0);
		q[n++] = (struct o1_step_seq){
		    w->ids[s] + w->len[s], count[s],	     w->len[s],
		    sd->pages[s],	   sd->t[s].n_pages, all};
		rows += all ? count[s] : 1;
	}
	assert_int_equal(
	    o1_backend_step(sd->b, &(struct o1_step){.seqs = q,
						     .n_seqs = n,
						     .logits = sd->logits,
						     .logits_rows = rows}),
	    0);
	return rows;
}

static double rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return isnan(num) || den == 0 ? INFINITY : sqrt(num / den);
}

/* Side 1..n_sides-1 against side 0 over ROWS rows. */
static void compare(struct side *sd, int n_sides, uint32_t rows, uint32_t vocab,
		    struct diff *d)
{
	size_t n = (size_t)rows * vocab;

	for (int k = 1; k < n_sides; k++) {
		double rel = rel_l2(sd[k].logits, sd[0].logits, n);

		d[k].max_rel = fmax(d[k].max_rel, rel);
		d[k].unequal += memcmp(sd[k].logits, sd[0].logits, n * 4) != 0;
		d[k].steps++;
	}
}

static uint32_t argmax(const float *v, uint32_t n)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < n; i++)
		best = v[i] > v[best] ? i : best;
	return best;
}

/* The script on every side; D[k] collects side k against side 0. */
static void run_script(struct world *w, struct side *sd, int n_sides,
		       struct diff *d)
{
	uint32_t count[N_SEQS], rows = 0;
	bool more = true;

	memset(w->len, 0, sizeof(w->len));
	while (more) {
		more = false;
		for (int s = 0; s < N_SEQS; s++) {
			uint32_t left = w->prompt[s] - w->len[s];

			count[s] = left < CHUNK ? left : CHUNK;
		}
		for (int k = 0; k < n_sides; k++)
			rows = side_step(&sd[k], w, count, true);
		compare(sd, n_sides, rows, w->vocab, d);
		for (int s = 0; s < N_SEQS; s++) {
			w->len[s] += count[s];
			more |= w->len[s] < w->prompt[s];
		}
	}
	for (int step = 0; step < N_DECODE; step++) {
		for (int s = 0; s < N_SEQS; s++) {
			count[s] = 1;
			w->ids[s][w->len[s]] = (int32_t)argmax(
			    sd[0].logits + (size_t)s * w->vocab, w->vocab);
		}
		for (int k = 0; k < n_sides; k++)
			rows = side_step(&sd[k], w, count, false);
		compare(sd, n_sides, rows, w->vocab, d);
		for (int s = 0; s < N_SEQS; s++)
			w->len[s]++;
	}
}

static void world_open(struct world *w, const char *args, const char *name)
{
	char path[256];

	o1_gpu_make_model(args, name, path, sizeof(path));
	assert_int_equal(o1_model_open(path, &w->m), 0);
	w->vocab = w->m->desc.vocab_size;
	for (int s = 0; s < N_SEQS; s++) {
		/* never a one-token last chunk: prefill stays eager */
		w->prompt[s] = 17 + urand(24);
		w->prompt[s] += w->prompt[s] % CHUNK == 1;
		for (uint32_t i = 0; i < MAX_IDS; i++)
			w->ids[s][i] = (int32_t)urand(w->vocab);
	}
}

static const char *const llama_args =
    "--preset llama3.2-1b --layers 2 --vocab 4096 --format safetensors "
    "--dtype bf16";
static const char *const qwen_args =
    "--preset qwen2.5-0.5b --layers 2 --vocab 4096 --format safetensors "
    "--dtype bf16";

static void test_one_rank(void **state)
{
	static struct world w;
	struct o1_backend_config plain = config(0, true), one = config(1, true);
	struct o1_backend_graph_stats a, b;
	struct side sd[2];
	struct diff d[2] = {{0}};

	(void)state;
	world_open(&w, qwen_args, "qwen2");
	side_open(&sd[0], w.m, &plain);
	side_open(&sd[1], w.m, &one);
	run_script(&w, sd, 2, d);
	printf("one rank through NCCL: %llu of %llu steps differ, max rel "
	       "L2 %.3g\n",
	       (unsigned long long)d[1].unequal, (unsigned long long)d[1].steps,
	       d[1].max_rel);
	assert_int_equal(d[1].unequal, 0);
	o1_backend_graph_stats(sd[0].b, &a);
	o1_backend_graph_stats(sd[1].b, &b);
	assert_int_equal(a.prefill, b.prefill);
	assert_int_equal(a.buckets[2].hits, N_DECODE);
	assert_int_equal(b.buckets[2].hits, N_DECODE);
	side_close(&sd[0]);
	side_close(&sd[1]);
	o1_model_close(w.m);
}

/* One GPU (graphs on), TP graphs on, TP graphs_eager, TP graphs off. */
static void tp_against_one(const char *args, const char *name, uint32_t tp)
{
	static struct world w;
	struct o1_backend_config c[4] = {config(0, true), config(tp, true),
					 config(tp, true), config(tp, false)};
	static const char *const what[] = {"", "graphs", "graphs_eager",
					   "graphs off"};
	struct o1_backend_graph_stats g;
	struct side sd[4];
	struct diff d[4] = {{0}};
	uint64_t allocs;

	c[2].graphs_eager = true;
	world_open(&w, args, name);
	for (int k = 0; k < 4; k++)
		side_open(&sd[k], w.m, &c[k]);
	allocs = o1_cuda_backend_alloc_count();
	run_script(&w, sd, 4, d);
	assert_true(o1_cuda_backend_alloc_count() == allocs);
	for (int k = 1; k < 4; k++) {
		printf("%s, TP %u, %s: max rel L2 %.3g against one GPU, %llu "
		       "of %llu steps not bitwise equal\n",
		       name, tp, what[k], d[k].max_rel,
		       (unsigned long long)d[k].unequal,
		       (unsigned long long)d[k].steps);
		assert_true(d[k].max_rel <= 1e-2);
	}
	o1_backend_graph_stats(sd[1].b, &g);
	assert_int_equal(g.buckets[2].hits, N_DECODE);
	assert_true(g.buckets[2].captured);
	o1_backend_graph_stats(sd[2].b, &g);
	assert_int_equal(g.buckets[2].misses, N_DECODE);
	for (int k = 0; k < 4; k++)
		side_close(&sd[k]);
	o1_model_close(w.m);
}

/* TP graphs against TP graphs_eager on the same script, bitwise for 2. */
static void tp_graph_vs_eager(const char *args, const char *name, uint32_t tp)
{
	static struct world w;
	struct o1_backend_config c[2] = {config(tp, true), config(tp, true)};
	struct side sd[2];
	struct diff d[2] = {{0}};

	c[1].graphs_eager = true;
	world_open(&w, args, name);
	side_open(&sd[0], w.m, &c[0]);
	side_open(&sd[1], w.m, &c[1]);
	run_script(&w, sd, 2, d);
	printf("%s, TP %u: graph replay against eager bucket steps: %llu of "
	       "%llu steps differ, max rel L2 %.3g\n",
	       name, tp, (unsigned long long)d[1].unequal,
	       (unsigned long long)d[1].steps, d[1].max_rel);
	if (tp == 2)
		assert_int_equal(d[1].unequal, 0);
	assert_true(d[1].max_rel <= 1e-2);
	side_close(&sd[0]);
	side_close(&sd[1]);
	o1_model_close(w.m);
}

static void test_tp2(void **state)
{
	(void)state;
	if (n_gpus < 2)
		skip();
	tp_against_one(llama_args, "llama", 2);
	tp_against_one(qwen_args, "qwen2", 2);
	tp_graph_vs_eager(qwen_args, "qwen2", 2);
}

static void test_tp4(void **state)
{
	(void)state;
	if (n_gpus < 4)
		skip();
	tp_against_one(llama_args, "llama", 4);
	tp_graph_vs_eager(llama_args, "llama", 4);
}

static void test_refused(void **state)
{
	struct o1_backend_config c = config(4, true);
	struct o1_backend *b;
	struct o1_model *m;
	char path[256];

	(void)state;
	o1_gpu_make_model(qwen_args, "qwen2", path, sizeof(path));
	assert_int_equal(o1_model_open(path, &m), 0);
	/* kv heads 2 cannot be split over 4 GPUs */
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, &c, &b),
			 -O1_E_UNSUPPORTED);
	c = config(2, true);
	c.devices[1] = 0;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, &c, &b),
			 -O1_E_CONFIG);
	c.devices[1] = (uint32_t)n_gpus;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, &c, &b),
			 -O1_E_CONFIG);
	o1_model_close(m);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_rank),
	    cmocka_unit_test(test_tp2),
	    cmocka_unit_test(test_tp4),
	    cmocka_unit_test(test_refused),
	};

	if (cudaGetDeviceCount(&n_gpus) != 0)
		n_gpus = 0;
	printf("%d CUDA devices; NCCL_NVLS_ENABLE=%s\n", n_gpus,
	       getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE")
					  : "(unset: the group sets 0)");
	return o1_gpu_test_main(argc, argv, "gpu_tp", tests,
				sizeof(tests) / sizeof(tests[0]));
}

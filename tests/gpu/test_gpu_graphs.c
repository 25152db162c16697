/* CUDA Graphs per decode batch bucket, on a two-layer qwen2.5-0.5b shape
 * (safetensors bf16, vocabulary 4096) made by the o1model binary given as
 * argv[1], and on `o1model make --preset tiny`.
 *
 * test_buckets: four CUDA backends over the same 256 sequences (random
 * prompts of 1 to 33 ids, prefilled eagerly 8 sequences a step): graphs on
 * (default buckets 1 .. 256), graphs_eager (the same padded bucket steps
 * launched without graphs), graphs off (unpadded), and graphs on with
 * cuda_no_pdl and cuda_no_fusion (the decode steps of buckets 1 to 4
 * without PDL, with RMSNorm, SwiGLU and the residual adds as kernels of
 * their own). For every bucket B, decode batches of n = B and n = B - 1
 * sequences (3 steps each, the graph side's greedy ids fed to all): graph,
 * eager and unfused logits must be bitwise identical (prefill logits too);
 * graphs off must be within a relative L2 error of 1e-2 of them (different
 * product shapes and attention splits round differently; padding rows
 * that wrote a real page would be far off). The counters must match the
 * steps: hits per bucket (the smallest bucket >= n), padded tokens,
 * prefill steps; the eager side counts the same steps as misses; no
 * allocation after create. Each graph's kernels: the fused side's buckets
 * 1 to 4 have 4 a layer and one in the head fewer than the unfused side's
 * (gemv.cu's fused products: RMSNorm, RoPE/KV write, SwiGLU and the
 * final RMSNorm folded into the products) and programmatic
 * (PDL) edges, where the unfused side has none (all its kernels are ours,
 * launched without PDL); larger buckets launch the same kernels on both
 * sides, cuBLAS's products among them, and so have the same kernels and
 * edges (cuBLAS may launch its own kernels with programmatic
 * dependencies: seen on the H200 with CUDA 13, issue 17).
 * A fifth backend, graphs on with cuda_autotune (cuda_tune.h: the gemv
 * setups and cuBLASLt algorithms timed at create), must give the graph
 * side's bits at n = 1 (bucket 1 only changes gemv.cu's launch setups,
 * which keep the bits) and be within the graphs-off bound (rel L2 1e-2)
 * everywhere (a cuBLASLt algorithm may sum in another order).
 * test_oversize: buckets {1, 3} with max_seqs 4: a batch of 4 runs eagerly
 * (oversize) and equals a graphs-off backend bitwise, 2 pads to 3.
 * test_replay_fault: buckets {1, 4}; with o1_backend_fail_replays every
 * (then every 2nd) replay fails and runs the bucket step eagerly: logits
 * bitwise equal to the graphs_eager side's, counted as fallbacks, hits
 * back once it is off, no allocation; graphs_eager and graphs off refuse
 * it (-O1_E_UNSUPPORTED).
 * test_bad_buckets: descending or too many buckets are refused with
 * -O1_E_CONFIG; buckets above max_seqs are dropped.
 * test_spans: context spans {24} under a context of 64 (graphs for 24 and
 * 64): decode steps whose longest sequence has up to 24 positions replay
 * the first span's graphs, longer ones the second's (the counters say
 * which), bitwise as graphs_eager with the same spans, within
 * test_buckets' 1e-2 of graphs off; no allocation after create. Spans at
 * or above the context are dropped ({UINT32_MAX}: one span), descending
 * or too many are refused (-O1_E_CONFIG).
 * test_quant_tiles: test_buckets' steps on a two-layer llama3.2-1b shape
 * converted to Q4_K_M (o1model convert): buckets 1 to 4 capture the block
 * decode products (gemv_q.cu), larger ones the tile path (each matrix
 * dequantized to bf16 tiles, cuBLAS on each), here in tiles of 1 MiB
 * (dozens a product); graphs on and graphs_eager bitwise identical,
 * graphs off (the same tiles, unpadded) within test_buckets' 1e-2.
 * Exit 77 without a CUDA device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <math.h>

#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "backend/kv_pool.h"
#include "common/error.h"
#include "gpu_test.h"
#include "kernels/cuda_util.h"
#include "model/model.h"

#define N_SEQS	   256
#define SEQ_PAGES  16
#define PAGE	   16
#define STEPS	   3
#define PREFILL_BY 8

enum { GRAPH, EAGER, PLAIN, UNFUSED, TUNED, N_SIDES };

static uint64_t rng = 99;

struct side {
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table t[N_SEQS];
	uint32_t pages[N_SEQS][SEQ_PAGES];
	float *logits;
};

struct world {
	struct o1_model *m;
	uint32_t vocab, len[N_SEQS];
	int32_t ids[N_SEQS][SEQ_PAGES * PAGE];
	struct side sd[N_SIDES];
	float max_rel, max_rel_tuned;
};

static uint32_t urand(uint32_t n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)((rng >> 33) % n);
}

static void side_open(struct side *sd, const struct o1_model *m,
		      const struct o1_backend_config *cfg)
{
	memset(sd, 0, sizeof(*sd));
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, cfg, &sd->b), 0);
	assert_int_equal(
	    o1_kv_pool_create(o1_backend_kv_layout(sd->b), &sd->pool), 0);
	for (int s = 0; s < N_SEQS; s++)
		o1_kv_table_init(&sd->t[s], sd->pages[s], SEQ_PAGES);
	sd->logits =
	    malloc((size_t)N_SEQS * m->desc.vocab_size * sizeof(float));
	assert_non_null(sd->logits);
}

static void side_close(struct side *sd)
{
	if (!sd->b)
		return; /* not opened by this test */
	for (int s = 0; s < N_SEQS; s++)
		o1_kv_table_fini(sd->pool, &sd->t[s]);
	o1_kv_pool_destroy(sd->pool);
	o1_backend_destroy(sd->b);
	free(sd->logits);
}

/* Sequences [first, first + n), each with COUNT[i] ids from position
 * len[s] (len not advanced here). */
static int side_step(struct side *sd, struct world *w, uint32_t first,
		     uint32_t n, const uint32_t *count)
{
	struct o1_step_seq q[N_SEQS];
	uint32_t rows = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = first + i, pos = w->len[s];

		assert_int_equal(
		    o1_kv_table_reserve(sd->pool, &sd->t[s], pos + count[i]),
		    0);
		q[i] = (struct o1_step_seq){
		    w->ids[s] + pos, count[i],	       pos,
		    sd->t[s].pages,  sd->t[s].n_pages, false};
		rows++;
	}
	return o1_backend_step(sd->b, &(struct o1_step){.seqs = q,
							.n_seqs = n,
							.logits = sd->logits,
							.logits_rows = rows});
}

static uint32_t argmax(const float *v, uint32_t n)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return best;
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

/* ROWS logits rows of every side against the graph side's. */
static void compare(struct world *w, uint32_t rows, const char *what)
{
	size_t n = (size_t)rows * w->vocab;
	double rel;

	if (memcmp(w->sd[GRAPH].logits, w->sd[EAGER].logits, n * 4)) {
		printf("%s: graph and eager logits differ\n", what);
		fail();
	}
	if (w->sd[UNFUSED].b &&
	    memcmp(w->sd[GRAPH].logits, w->sd[UNFUSED].logits, n * 4)) {
		printf("%s: fused and unfused logits differ\n", what);
		fail();
	}
	rel = rel_l2(w->sd[PLAIN].logits, w->sd[GRAPH].logits, n);
	if (rel > w->max_rel)
		w->max_rel = (float)rel;
	if (rel > 1e-2) {
		printf("%s: graphs off is %.3g away (rel L2)\n", what, rel);
		fail();
	}
	if (!w->sd[TUNED].b)
		return;
	rel = rel_l2(w->sd[TUNED].logits, w->sd[GRAPH].logits, n);
	w->max_rel_tuned =
	    rel > w->max_rel_tuned ? (float)rel : w->max_rel_tuned;
	if (rel > 1e-2) {
		printf("%s: autotuned is %.3g away (rel L2)\n", what, rel);
		fail();
	}
}

static void prefill_all(struct world *w)
{
	uint32_t count[PREFILL_BY];

	for (uint32_t s = 0; s < N_SEQS; s += PREFILL_BY) {
		for (uint32_t i = 0; i < PREFILL_BY; i++)
			count[i] = w->len[s + i];
		for (uint32_t i = 0; i < PREFILL_BY; i++)
			w->len[s + i] = 0;
		for (int k = 0; k < N_SIDES; k++)
			if (w->sd[k].b)
				assert_int_equal(side_step(&w->sd[k], w, s,
							   PREFILL_BY, count),
						 0);
		compare(w, PREFILL_BY, "prefill");
		for (uint32_t i = 0; i < PREFILL_BY; i++) {
			w->len[s + i] = count[i];
			w->ids[s + i][count[i]] = (int32_t)argmax(
			    w->sd[GRAPH].logits + (size_t)i * w->vocab,
			    w->vocab);
		}
	}
}

/* STEPS decode steps of sequences [0, n); the graph side's greedy ids
 * feed every side. */
static void decode(struct world *w, uint32_t n)
{
	uint32_t ones[N_SEQS];
	char what[64];

	for (uint32_t i = 0; i < n; i++)
		ones[i] = 1;
	for (int step = 0; step < STEPS; step++) {
		for (int k = 0; k < N_SIDES; k++)
			if (w->sd[k].b)
				assert_int_equal(
				    side_step(&w->sd[k], w, 0, n, ones), 0);
		snprintf(what, sizeof(what), "decode n %u step %d", n, step);
		compare(w, n, what);
		if (n == 1 && w->sd[TUNED].b &&
		    memcmp(w->sd[GRAPH].logits, w->sd[TUNED].logits,
			   (size_t)w->vocab * 4)) {
			printf("%s: autotuned logits differ\n", what);
			fail();
		}
		for (uint32_t s = 0; s < n; s++) {
			w->len[s]++;
			w->ids[s][w->len[s]] = (int32_t)argmax(
			    w->sd[GRAPH].logits + (size_t)s * w->vocab,
			    w->vocab);
		}
	}
}

static uint32_t bucket_of(const struct o1_backend_graph_stats *g, uint32_t n)
{
	for (uint32_t i = 0; i < g->n_buckets; i++)
		if (g->buckets[i].batch >= n)
			return i;
	return UINT32_MAX;
}

/* Runs the decode batches and counts what each side should report. */
static void run_buckets(struct world *w, struct o1_backend_graph_stats *want)
{
	o1_backend_graph_stats(w->sd[GRAPH].b, want);
	for (uint32_t i = 0; i < want->n_buckets; i++)
		want->buckets[i].hits = want->buckets[i].padded_tokens = 0;
	for (uint32_t i = 0; i < want->n_buckets; i++) {
		uint32_t bsz = want->buckets[i].batch;

		for (uint32_t n = bsz; n + 1 >= bsz && n; n--) {
			uint32_t j = bucket_of(want, n);

			decode(w, n);
			want->buckets[j].hits += STEPS;
			want->buckets[j].padded_tokens +=
			    STEPS * (want->buckets[j].batch - n);
		}
	}
}

/* Kernels and programmatic edges per bucket graph, fused (G) against
 * unfused (U): see the top. */
static void check_kernels(struct world *w,
			  const struct o1_backend_graph_stats *g,
			  const struct o1_backend_graph_stats *u)
{
	uint32_t layers = w->m->desc.n_layers;

	for (uint32_t i = 0; i < g->n_buckets; i++) {
		const struct o1_backend_graph_bucket *gb = &g->buckets[i],
						     *ub = &u->buckets[i];

		printf("bucket %u: %u kernels (%u PDL edges), unfused %u\n",
		       gb->batch, gb->kernels, gb->pdl_edges, ub->kernels);
		assert_true(ub->captured && gb->kernels > 0);
		if (gb->batch <= 4) {
			assert_int_equal(ub->kernels - gb->kernels,
					 4 * layers + 1);
			assert_int_equal(ub->pdl_edges, 0);
			assert_true(gb->pdl_edges > 0);
		} else {
			/* the same launches on both sides: cuBLAS's own
			 * programmatic edges, if any, are the same too */
			assert_int_equal(ub->kernels, gb->kernels);
			assert_int_equal(ub->pdl_edges, gb->pdl_edges);
		}
	}
}

static void check_stats(struct world *w,
			const struct o1_backend_graph_stats *want)
{
	struct o1_backend_graph_stats g, e, p, u;

	o1_backend_graph_stats(w->sd[GRAPH].b, &g);
	if (w->sd[UNFUSED].b) {
		o1_backend_graph_stats(w->sd[UNFUSED].b, &u);
		check_kernels(w, &g, &u);
	}
	o1_backend_graph_stats(w->sd[EAGER].b, &e);
	o1_backend_graph_stats(w->sd[PLAIN].b, &p);
	assert_int_equal(g.n_buckets, 13); /* the default list */
	assert_int_equal(g.prefill, N_SEQS / PREFILL_BY);
	assert_int_equal(g.oversize, 0);
	assert_int_equal(e.n_buckets, g.n_buckets);
	assert_int_equal(p.n_buckets, 0);
	for (uint32_t i = 0; i < g.n_buckets; i++) {
		const struct o1_backend_graph_bucket *gb = &g.buckets[i];

		printf("bucket %u: %s, %llu hits, %llu padded tokens\n",
		       gb->batch, gb->captured ? "captured" : "NOT captured",
		       (unsigned long long)gb->hits,
		       (unsigned long long)gb->padded_tokens);
		assert_true(gb->captured);
		assert_false(e.buckets[i].captured);
		assert_int_equal(gb->hits, want->buckets[i].hits);
		assert_int_equal(gb->misses + gb->fallbacks, 0);
		assert_int_equal(gb->padded_tokens,
				 want->buckets[i].padded_tokens);
		assert_int_equal(e.buckets[i].misses, want->buckets[i].hits);
		assert_int_equal(e.buckets[i].hits, 0);
	}
	printf("capture %.1f ms, %.1f MiB\n", g.capture_us / 1e3,
	       g.capture_bytes / 1048576.0);
}

/* W's model opened from PATH and its random prompts drawn. */
static void world_open(struct world *w, const char *path)
{
	assert_int_equal(o1_model_open(path, &w->m), 0);
	w->vocab = w->m->desc.vocab_size;
	for (uint32_t s = 0; s < N_SEQS; s++) {
		w->len[s] = 1 + urand(33);
		for (uint32_t i = 0; i < w->len[s]; i++)
			w->ids[s][i] = (int32_t)urand(w->vocab);
	}
}

static void world_close(struct world *w)
{
	for (int k = 0; k < N_SIDES; k++)
		side_close(&w->sd[k]);
	o1_model_close(w->m);
}

static const struct o1_backend_config bucket_cfg = {
    .max_batch_tokens = N_SEQS,
    .max_seqs = N_SEQS,
    .max_context_tokens = 256,
    .n_pages = N_SEQS * SEQ_PAGES,
    .page_tokens = PAGE};

static void test_buckets(void **state)
{
	static struct world w;
	struct o1_backend_config cfg = bucket_cfg;
	struct o1_backend_graph_stats want;
	char path[256];
	uint64_t allocs;

	(void)state;
	o1_gpu_make_model(
	    "--preset qwen2.5-0.5b --layers 2 --vocab 4096 --format "
	    "safetensors --dtype bf16",
	    "qwen2", path, sizeof(path));
	world_open(&w, path);
	cfg.graphs_enabled = true;
	side_open(&w.sd[GRAPH], w.m, &cfg);
	cfg.graphs_eager = true;
	side_open(&w.sd[EAGER], w.m, &cfg);
	cfg.graphs_enabled = cfg.graphs_eager = false;
	side_open(&w.sd[PLAIN], w.m, &cfg);
	cfg.graphs_enabled = cfg.cuda_no_pdl = cfg.cuda_no_fusion = true;
	side_open(&w.sd[UNFUSED], w.m, &cfg);
	cfg.cuda_no_pdl = cfg.cuda_no_fusion = false;
	cfg.cuda_autotune = true;
	side_open(&w.sd[TUNED], w.m, &cfg);
	allocs = o1_cuda_backend_alloc_count();
	prefill_all(&w);
	run_buckets(&w, &want);
	printf("graphs off vs graphs: max rel L2 %.3g; autotuned %.3g\n",
	       w.max_rel, w.max_rel_tuned);
	check_stats(&w, &want);
	assert_true(o1_cuda_backend_alloc_count() == allocs);
	world_close(&w);
}

static void test_quant_tiles(void **state)
{
	static struct world w;
	struct o1_backend_config cfg = bucket_cfg;
	struct o1_backend_graph_stats want;
	char src[256], path[256 + 16], cmd[1024];
	uint64_t allocs;

	(void)state;
	o1_gpu_make_model("--preset llama3.2-1b --layers 2 --vocab 4096",
			  "l1b2.gguf", src, sizeof(src));
	snprintf(path, sizeof(path), "%s/l1b2-q4km.gguf", o1_gpu_dir);
	snprintf(cmd, sizeof(cmd), "%s convert %s %s --quantize q4_k_m "
		 ">/dev/null", o1_gpu_o1model, src, path);
	assert_int_equal(system(cmd), 0);
	world_open(&w, path);
	cfg.cuda_quant_tile_bytes = 1u << 20;
	cfg.graphs_enabled = true;
	side_open(&w.sd[GRAPH], w.m, &cfg);
	cfg.graphs_eager = true;
	side_open(&w.sd[EAGER], w.m, &cfg);
	cfg.graphs_enabled = cfg.graphs_eager = false;
	side_open(&w.sd[PLAIN], w.m, &cfg);
	allocs = o1_cuda_backend_alloc_count();
	prefill_all(&w);
	run_buckets(&w, &want);
	printf("q4_k_m: graphs off vs graphs: max rel L2 %.3g\n", w.max_rel);
	check_stats(&w, &want);
	assert_true(o1_cuda_backend_alloc_count() == allocs);
	world_close(&w);
}

static void test_oversize(void **state)
{
	static struct world w;
	struct o1_backend_config cfg = {.max_batch_tokens = 64,
					.max_seqs = 4,
					.max_context_tokens = 64,
					.n_pages = 4 * SEQ_PAGES,
					.page_tokens = PAGE};
	struct o1_backend_graph_stats g;
	uint32_t count[4] = {5, 3, 9, 1}, ones[4] = {1, 1, 1, 1};
	char path[256];

	(void)state;
	o1_gpu_make_model("--preset tiny", "tiny.gguf", path, sizeof(path));
	assert_int_equal(o1_model_open(path, &w.m), 0);
	w.vocab = w.m->desc.vocab_size;
	for (uint32_t s = 0; s < 4; s++)
		for (uint32_t i = 0; i < 16; i++)
			w.ids[s][i] = (int32_t)urand(w.vocab);
	cfg.graphs_enabled = true;
	cfg.n_graph_buckets = 2;
	cfg.graph_buckets[0] = 1, cfg.graph_buckets[1] = 3;
	side_open(&w.sd[GRAPH], w.m, &cfg);
	cfg.graphs_enabled = false;
	side_open(&w.sd[PLAIN], w.m, &cfg);
	for (int k = 0; k < 2; k++) {
		int side = k ? PLAIN : GRAPH;

		assert_int_equal(side_step(&w.sd[side], &w, 0, 4, count), 0);
	}
	for (uint32_t s = 0; s < 4; s++)
		w.len[s] = count[s];
	for (uint32_t n = 4; n >= 2; n -= 2) {
		assert_int_equal(side_step(&w.sd[GRAPH], &w, 0, n, ones), 0);
		assert_int_equal(side_step(&w.sd[PLAIN], &w, 0, n, ones), 0);
		if (n == 4)
			assert_memory_equal(w.sd[GRAPH].logits,
					    w.sd[PLAIN].logits,
					    (size_t)4 * w.vocab * 4);
		for (uint32_t s = 0; s < n; s++)
			w.len[s]++;
	}
	o1_backend_graph_stats(w.sd[GRAPH].b, &g);
	assert_int_equal(g.n_buckets, 2);
	assert_int_equal(g.oversize, 1);
	assert_int_equal(g.prefill, 1);
	assert_int_equal(g.buckets[1].hits, 1);
	assert_int_equal(g.buckets[1].padded_tokens, 1);
	assert_int_equal(g.buckets[0].hits, 0);
	side_close(&w.sd[GRAPH]), side_close(&w.sd[PLAIN]);
	o1_model_close(w.m);
}

/* One decode step of sequences [0, N) on the graph and eager sides:
 * bitwise-equal logits; the graph side's greedy ids go on. */
static void decode_pair(struct world *w, uint32_t n)
{
	uint32_t ones[4] = {1, 1, 1, 1};

	for (int k = GRAPH; k <= EAGER; k++)
		assert_int_equal(side_step(&w->sd[k], w, 0, n, ones), 0);
	assert_memory_equal(w->sd[GRAPH].logits, w->sd[EAGER].logits,
			    (size_t)n * w->vocab * sizeof(float));
	for (uint32_t s = 0; s < n; s++) {
		w->len[s]++;
		w->ids[s][w->len[s]] = (int32_t)argmax(
		    w->sd[GRAPH].logits + (size_t)s * w->vocab, w->vocab);
	}
}

static void expect_bucket(struct side *sd, uint32_t i, uint64_t hits,
			  uint64_t misses, uint64_t fallbacks)
{
	struct o1_backend_graph_stats g;

	o1_backend_graph_stats(sd->b, &g);
	assert_int_equal(g.buckets[i].hits, hits);
	assert_int_equal(g.buckets[i].misses, misses);
	assert_int_equal(g.buckets[i].fallbacks, fallbacks);
}

/* The graph_replay fault's hook: failed replays run the bucket step
 * eagerly (bitwise the graphs_eager side's logits), counted as fallbacks;
 * every N-th; off again; refused where nothing replays. */
static void test_replay_fault(void **state)
{
	static struct world w;
	struct o1_backend_config cfg = {.max_batch_tokens = 64,
					.max_seqs = 4,
					.max_context_tokens = 64,
					.n_pages = 4 * SEQ_PAGES,
					.page_tokens = PAGE,
					.graphs_enabled = true,
					.n_graph_buckets = 2,
					.graph_buckets = {1, 4}};
	uint32_t count[3] = {5, 3, 9};
	char path[256];
	uint64_t allocs;

	(void)state;
	o1_gpu_make_model("--preset tiny", "tiny3.gguf", path, sizeof(path));
	assert_int_equal(o1_model_open(path, &w.m), 0);
	w.vocab = w.m->desc.vocab_size;
	for (uint32_t s = 0; s < 3; s++)
		for (uint32_t i = 0; i < 16; i++)
			w.ids[s][i] = (int32_t)urand(w.vocab);
	side_open(&w.sd[GRAPH], w.m, &cfg);
	cfg.graphs_eager = true;
	side_open(&w.sd[EAGER], w.m, &cfg);
	cfg.graphs_enabled = cfg.graphs_eager = false;
	side_open(&w.sd[PLAIN], w.m, &cfg);
	assert_int_equal(o1_backend_fail_replays(w.sd[EAGER].b, 1),
			 -O1_E_UNSUPPORTED);
	assert_int_equal(o1_backend_fail_replays(w.sd[PLAIN].b, 1),
			 -O1_E_UNSUPPORTED);
	allocs = o1_cuda_backend_alloc_count();
	for (int k = GRAPH; k <= EAGER; k++)
		assert_int_equal(side_step(&w.sd[k], &w, 0, 3, count), 0);
	for (uint32_t s = 0; s < 3; s++)
		w.len[s] = count[s];
	for (int i = 0; i < 2; i++)
		decode_pair(&w, 3); /* bucket 4: replayed */
	expect_bucket(&w.sd[GRAPH], 1, 2, 0, 0);
	assert_int_equal(o1_backend_fail_replays(w.sd[GRAPH].b, 1), 0);
	for (int i = 0; i < 3; i++)
		decode_pair(&w, 3);
	decode_pair(&w, 1); /* bucket 1 fails too */
	expect_bucket(&w.sd[GRAPH], 1, 2, 0, 3);
	expect_bucket(&w.sd[GRAPH], 0, 0, 0, 1);
	assert_int_equal(o1_backend_fail_replays(w.sd[GRAPH].b, 2), 0);
	for (int i = 0; i < 4; i++)
		decode_pair(&w, 3); /* the 2nd and 4th fail */
	expect_bucket(&w.sd[GRAPH], 1, 4, 0, 5);
	assert_int_equal(o1_backend_fail_replays(w.sd[GRAPH].b, 0), 0);
	for (int i = 0; i < 2; i++)
		decode_pair(&w, 3);
	decode_pair(&w, 1);
	expect_bucket(&w.sd[GRAPH], 1, 6, 0, 5);
	expect_bucket(&w.sd[GRAPH], 0, 1, 0, 1);
	expect_bucket(&w.sd[EAGER], 1, 0, 11, 0);
	expect_bucket(&w.sd[EAGER], 0, 0, 2, 0);
	assert_true(o1_cuda_backend_alloc_count() == allocs);
	for (int k = 0; k < N_SIDES; k++)
		side_close(&w.sd[k]);
	o1_model_close(w.m);
}

static void test_bad_buckets(void **state)
{
	struct o1_model *m;
	struct o1_backend *b;
	struct o1_backend_config cfg = {.max_batch_tokens = 8,
					.max_seqs = 4,
					.max_context_tokens = 64,
					.n_pages = 16,
					.page_tokens = 16};
	struct o1_backend_graph_stats g;
	char path[256];

	(void)state;
	o1_gpu_make_model("--preset tiny", "tiny2.gguf", path, sizeof(path));
	assert_int_equal(o1_model_open(path, &m), 0);
	cfg.graphs_enabled = true;
	cfg.n_graph_buckets = 2;
	cfg.graph_buckets[0] = 4, cfg.graph_buckets[1] = 2;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, &cfg, &b),
			 -O1_E_CONFIG);
	cfg.n_graph_buckets = O1_BACKEND_GRAPH_BUCKETS_MAX + 1;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, &cfg, &b),
			 -O1_E_CONFIG);
	cfg.n_graph_buckets = 2;
	cfg.graph_buckets[0] = 2, cfg.graph_buckets[1] = 64;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, &cfg, &b), 0);
	o1_backend_graph_stats(b, &g);
	assert_int_equal(g.n_buckets, 1);
	assert_int_equal(g.buckets[0].batch, 2);
	o1_backend_destroy(b);
	o1_model_close(m);
}

static void test_spans(void **state)
{
	static struct world w;
	struct o1_backend_config cfg = {.max_batch_tokens = 64,
					.max_seqs = 4,
					.max_context_tokens = 64,
					.n_pages = 4 * SEQ_PAGES,
					.page_tokens = PAGE,
					.graphs_enabled = true,
					.n_graph_buckets = 2,
					.graph_buckets = {2, 4},
					.n_graph_spans = 1,
					.graph_spans = {24}};
	uint32_t prompt[4] = {5, 20, 3, 9}, ones[4] = {1, 1, 1, 1};
	uint64_t want[2] = {0, 0}, allocs;
	struct o1_backend_graph_stats g;
	struct o1_backend *b;
	char path[256];

	(void)state;
	o1_gpu_make_model("--preset tiny", "tiny3.gguf", path, sizeof(path));
	assert_int_equal(o1_model_open(path, &w.m), 0);
	w.vocab = w.m->desc.vocab_size;
	for (uint32_t s = 0; s < 4; s++)
		for (uint32_t i = 0; i < SEQ_PAGES * PAGE; i++)
			w.ids[s][i] = (int32_t)urand(w.vocab);
	side_open(&w.sd[GRAPH], w.m, &cfg);
	cfg.graphs_eager = true;
	side_open(&w.sd[EAGER], w.m, &cfg);
	cfg.graphs_enabled = cfg.graphs_eager = false;
	side_open(&w.sd[PLAIN], w.m, &cfg);
	for (int k = GRAPH; k <= PLAIN; k++)
		assert_int_equal(side_step(&w.sd[k], &w, 0, 4, prompt), 0);
	for (uint32_t s = 0; s < 4; s++)
		w.len[s] = prompt[s];
	allocs = o1_cuda_backend_alloc_count();
	/* 2 rows: the longest goes 21 .. 30 positions (span 24, then 64);
	 * then 4 rows: 31 .. 34 */
	for (uint32_t i = 0; i < 14; i++) {
		uint32_t n = i < 10 ? 2 : 4, longest = 0;

		for (uint32_t s = 0; s < n; s++)
			longest =
			    w.len[s] + 1 > longest ? w.len[s] + 1 : longest;
		want[longest > 24]++;
		for (int k = GRAPH; k <= PLAIN; k++)
			assert_int_equal(side_step(&w.sd[k], &w, 0, n, ones),
					 0);
		assert_memory_equal(w.sd[GRAPH].logits, w.sd[EAGER].logits,
				    (size_t)n * w.vocab * sizeof(float));
		assert_true(rel_l2(w.sd[PLAIN].logits, w.sd[GRAPH].logits,
				   (size_t)n * w.vocab) < 1e-2);
		for (uint32_t s = 0; s < n; s++) {
			w.len[s]++;
			w.ids[s][w.len[s]] = (int32_t)argmax(
			    w.sd[GRAPH].logits + (size_t)s * w.vocab, w.vocab);
		}
	}
	assert_int_equal(o1_cuda_backend_alloc_count(), allocs);
	assert_true(want[0] == 4 && want[1] == 10);
	o1_backend_graph_stats(w.sd[GRAPH].b, &g);
	assert_int_equal(g.n_spans, 2);
	assert_int_equal(g.spans[0].len, 24);
	assert_int_equal(g.spans[1].len, 64);
	assert_int_equal(g.spans[0].steps, want[0]);
	assert_int_equal(g.spans[1].steps, want[1]);
	assert_int_equal(g.buckets[0].hits, 10);
	assert_int_equal(g.buckets[1].hits, 4);
	assert_true(g.buckets[0].captured && g.buckets[1].captured);
	o1_backend_graph_stats(w.sd[EAGER].b, &g);
	assert_int_equal(g.spans[0].steps, want[0]);
	assert_int_equal(g.buckets[0].misses + g.buckets[1].misses, 14);
	for (int k = GRAPH; k <= PLAIN; k++)
		side_close(&w.sd[k]);

	/* the spans picked, and the refusals */
	cfg.graphs_enabled = true;
	cfg.n_graph_spans = 2;
	cfg.graph_spans[0] = 16, cfg.graph_spans[1] = 64;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, w.m, &cfg, &b), 0);
	o1_backend_graph_stats(b, &g);
	assert_true(g.n_spans == 2 && g.spans[0].len == 16 &&
		    g.spans[1].len == 64);
	o1_backend_destroy(b);
	cfg.n_graph_spans = 1, cfg.graph_spans[0] = UINT32_MAX;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, w.m, &cfg, &b), 0);
	o1_backend_graph_stats(b, &g);
	assert_true(g.n_spans == 1 && g.spans[0].len == 64);
	o1_backend_destroy(b);
	cfg.n_graph_spans = 2;
	cfg.graph_spans[0] = 32, cfg.graph_spans[1] = 16;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, w.m, &cfg, &b),
			 -O1_E_CONFIG);
	cfg.n_graph_spans = O1_BACKEND_GRAPH_SPANS_MAX;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, w.m, &cfg, &b),
			 -O1_E_CONFIG);
	o1_model_close(w.m);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buckets),
	    cmocka_unit_test(test_oversize),
	    cmocka_unit_test(test_replay_fault),
	    cmocka_unit_test(test_bad_buckets),
	    cmocka_unit_test(test_quant_tiles),
	    cmocka_unit_test(test_spans),
	};
	return o1_gpu_test_main(argc, argv, "gpu_graphs", tests,
				sizeof(tests) / sizeof(tests[0]));
}

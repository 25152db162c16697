/* CUDA Graphs per decode batch bucket and context span (cuda_graphs.h).
 * Invariants: buckets and spans strictly ascending; execs[k][i] is NULL or
 * the instantiated, uploaded graph of buckets[i] in span k; its counters
 * are per[k][i], whose batch is buckets[i] and, once created, captured ==
 * (execs[k][i] != NULL), which the replay decision (graph_replay.h) reads;
 * the replay's bucket number is k * n_buckets + i. stats.buckets sums
 * per[][i] over the spans when read. Memory taken
 * by the graphs is the drop in the device's free memory (cudaMemGetInfo)
 * across warm-up, capture, instantiation and upload of all buckets: it
 * includes anything else allocated on the device meanwhile and is rounded
 * to the driver's granularity (2 MiB pages). A captured graph's kernel
 * nodes and programmatic (PDL) edges are counted before instantiation
 * (stats.buckets[i].kernels, .pdl_edges; 0 if the query fails). */
#include "cuda_graphs.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cuda_util.h"
#include "common/error.h"
#include "graph_replay.h"
#include "common/log.h"

struct o1_cuda_graphs {
	struct o1_cuda_graphs_config cfg;
	uint32_t buckets[O1_BACKEND_GRAPH_BUCKETS_MAX];
	uint32_t spans[O1_BACKEND_GRAPH_SPANS_MAX];
	cudaGraphExec_t execs[O1_BACKEND_GRAPH_SPANS_MAX]
			     [O1_BACKEND_GRAPH_BUCKETS_MAX];
	struct o1_backend_graph_bucket per[O1_BACKEND_GRAPH_SPANS_MAX]
					  [O1_BACKEND_GRAPH_BUCKETS_MAX];
	struct o1_backend_graph_stats stats; /* but buckets: per */
	struct o1_graph_replay replay; /* what a bucket step does, counts */
	uint32_t span;		       /* the step's, for body() */
};

static int wait_stream(struct o1_cuda_graphs *g)
{
	if (g->cfg.sync)
		return g->cfg.sync(g->cfg.ctx);
	return O1_CUDA_CHECK(cudaStreamSynchronize(g->cfg.stream));
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Kernel nodes and programmatic edges of GRAPH into *KERNELS, *PDL;
 * false if a query fails. */
static bool graph_counts(cudaGraph_t graph, uint32_t *kernels, uint32_t *pdl)
{
	size_t n = 0, e = 0;
	cudaGraphNode_t *nodes = NULL, *from = NULL, *to = NULL;
	cudaGraphEdgeData *data = NULL;
	enum cudaGraphNodeType type;
	bool ok = cudaGraphGetNodes(graph, NULL, &n) == cudaSuccess &&
		  cudaGraphGetEdges(graph, NULL, NULL, NULL, &e) == cudaSuccess;

	nodes = ok ? calloc(n + 1, sizeof(*nodes)) : NULL;
	from = ok ? calloc(e + 1, sizeof(*from)) : NULL;
	to = ok ? calloc(e + 1, sizeof(*to)) : NULL;
	data = ok ? calloc(e + 1, sizeof(*data)) : NULL;
	ok = nodes && from && to && data &&
	     cudaGraphGetNodes(graph, nodes, &n) == cudaSuccess &&
	     cudaGraphGetEdges(graph, from, to, data, &e) == cudaSuccess;
	*kernels = *pdl = 0;
	for (size_t i = 0; ok && i < n; i++) {
		ok = cudaGraphNodeGetType(nodes[i], &type) == cudaSuccess;
		*kernels += ok && type == cudaGraphNodeTypeKernel;
	}
	for (size_t i = 0; ok && i < e; i++)
		*pdl += data[i].type == cudaGraphDependencyTypeProgrammatic;
	if (!ok)
		*kernels = *pdl = 0;
	free(nodes), free(from), free(to), free(data);
	return ok;
}

/* Captures BODY for bucket I of span K; *EXEC stays NULL on failure. */
static int capture(struct o1_cuda_graphs *g, uint32_t k, uint32_t i,
		   cudaGraphExec_t *exec)
{
	struct o1_backend_graph_bucket *b = &g->per[k][i];
	cudaStream_t st = g->cfg.stream;
	cudaGraph_t graph = NULL;
	int err, end;

	err = O1_CUDA_CHECK(
	    cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
	if (err)
		return err;
	err = g->cfg.body(g->cfg.ctx, g->buckets[i], g->spans[k]);
	end = O1_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
	err = err ? err : end;
	if (!err && !graph_counts(graph, &b->kernels, &b->pdl_edges)) {
		o1_warn("cuda graphs: cannot count the nodes of batch %u's "
			"graph (context span %u)",
			g->buckets[i], g->spans[k]);
		cudaGetLastError();
	}
	if (!err)
		err = O1_CUDA_CHECK(cudaGraphInstantiate(exec, graph, 0));
	if (!err)
		err = O1_CUDA_CHECK(cudaGraphUpload(*exec, st));
	if (err && *exec) {
		cudaGraphExecDestroy(*exec);
		*exec = NULL;
	}
	if (graph)
		cudaGraphDestroy(graph);
	cudaGetLastError();
	return err;
}

/* Warm-up run of bucket I in span K, then its capture (when capturing). */
static int setup_bucket(struct o1_cuda_graphs *g, uint32_t k, uint32_t i)
{
	int err = g->cfg.prepare(g->cfg.ctx, g->buckets[i]);

	err = err ? err : g->cfg.body(g->cfg.ctx, g->buckets[i], g->spans[k]);
	err = err ? err : wait_stream(g);
	if (err || !g->cfg.capture)
		return err;
	if (capture(g, k, i, &g->execs[k][i]))
		o1_warn("cuda graphs: capture of batch %u (context span %u) "
			"failed; it runs eagerly",
			g->buckets[i], g->spans[k]);
	return wait_stream(g);
}

static int check_config(const struct o1_cuda_graphs_config *c)
{
	bool ok = c->n_buckets &&
		  c->n_buckets <= O1_BACKEND_GRAPH_BUCKETS_MAX && c->body &&
		  c->prepare && c->buckets && c->buckets[0];
	bool spans_ok = c->n_spans &&
			c->n_spans <= O1_BACKEND_GRAPH_SPANS_MAX && c->spans &&
			c->spans[0];

	for (uint32_t i = 1; ok && i < c->n_buckets; i++)
		ok = c->buckets[i] > c->buckets[i - 1];
	for (uint32_t k = 1; spans_ok && k < c->n_spans; k++)
		spans_ok = c->spans[k] > c->spans[k - 1];
	if (!ok)
		o1_err("cuda graphs: bad bucket list (%u buckets, at most %u, "
		       "ascending, >= 1)",
		       c->n_buckets, O1_BACKEND_GRAPH_BUCKETS_MAX);
	if (!spans_ok)
		o1_err("cuda graphs: bad context spans (%u, at most %u, "
		       "ascending, >= 1)",
		       c->n_spans, O1_BACKEND_GRAPH_SPANS_MAX);
	return ok && spans_ok ? 0 : -O1_E_CONFIG;
}

static int setup_all(struct o1_cuda_graphs *g)
{
	size_t free0 = 0, free1 = 0, total;
	uint64_t t0 = now_us();
	int err = O1_CUDA_CHECK(cudaMemGetInfo(&free0, &total));

	for (uint32_t k = 0; !err && k < g->cfg.n_spans; k++)
		for (uint32_t i = 0; !err && i < g->cfg.n_buckets; i++)
			err = setup_bucket(g, k, i);
	err = err ? err : O1_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
	g->stats.capture_us = now_us() - t0;
	g->stats.capture_bytes = free0 > free1 ? free0 - free1 : 0;
	return err;
}

/* Replays the graph of replay bucket number I (span I / n_buckets). A
 * launch that fails enqueued nothing; its error is cleared as well, or the
 * eager fallback's first launch check (cudaGetLastError) would report it
 * (a sticky error fails that anyway). */
static int launch(void *ctx, uint32_t i)
{
	struct o1_cuda_graphs *g = ctx;
	uint32_t n = g->cfg.n_buckets;
	int err = O1_CUDA_CHECK(
	    cudaGraphLaunch(g->execs[i / n][i % n], g->cfg.stream));

	if (err)
		cudaGetLastError();
	return err;
}

static int body(void *ctx, uint32_t batch)
{
	struct o1_cuda_graphs *g = ctx;

	return g->cfg.body(g->cfg.ctx, batch, g->spans[g->span]);
}

int o1_cuda_graphs_create(const struct o1_cuda_graphs_config *cfg,
			  struct o1_cuda_graphs **out)
{
	struct o1_cuda_graphs *g;
	int err = check_config(cfg);

	if (err)
		return err;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->cfg = *cfg;
	g->stats.n_buckets = cfg->n_buckets;
	g->stats.n_spans = cfg->n_spans;
	for (uint32_t i = 0; i < cfg->n_buckets; i++) {
		g->buckets[i] = cfg->buckets[i];
		for (uint32_t k = 0; k < cfg->n_spans; k++)
			g->per[k][i].batch = cfg->buckets[i];
	}
	for (uint32_t k = 0; k < cfg->n_spans; k++)
		g->spans[k] = g->stats.spans[k].len = cfg->spans[k];
	g->cfg.buckets = g->buckets;
	g->cfg.spans = g->spans;
	o1_graph_replay_init(&g->replay, &(struct o1_graph_replay_ops){
					     launch, body, g, cfg->strict});
	err = setup_all(g);
	for (uint32_t k = 0; k < cfg->n_spans; k++)
		for (uint32_t i = 0; i < cfg->n_buckets; i++)
			g->per[k][i].captured = g->execs[k][i] != NULL;
	if (err) {
		o1_cuda_graphs_destroy(g);
		return err;
	}
	o1_info("cuda graphs: %u buckets up to %u in %u context spans up to "
		"%u, %s in %.1f ms, %.1f MiB",
		cfg->n_buckets, g->buckets[cfg->n_buckets - 1], cfg->n_spans,
		g->spans[cfg->n_spans - 1],
		cfg->capture ? "captured" : "warmed up (eager)",
		g->stats.capture_us / 1e3, g->stats.capture_bytes / 1048576.0);
	*out = g;
	return 0;
}

void o1_cuda_graphs_destroy(struct o1_cuda_graphs *g)
{
	if (!g)
		return;
	for (uint32_t k = 0; k < g->cfg.n_spans; k++)
		for (uint32_t i = 0; i < g->cfg.n_buckets; i++)
			if (g->execs[k][i])
				cudaGraphExecDestroy(g->execs[k][i]);
	free(g);
}

static int find(const struct o1_cuda_graphs *g, uint32_t batch)
{
	for (uint32_t i = 0; i < g->cfg.n_buckets; i++)
		if (g->buckets[i] == batch)
			return (int)i;
	return -1;
}

int o1_cuda_graphs_bucket(struct o1_cuda_graphs *g, uint32_t n, uint32_t *batch)
{
	for (uint32_t i = 0; i < g->cfg.n_buckets; i++)
		if (g->buckets[i] >= n) {
			*batch = g->buckets[i];
			return 0;
		}
	g->stats.oversize++;
	return -ERANGE;
}

int o1_cuda_graphs_run(struct o1_cuda_graphs *g, uint32_t n, uint32_t batch,
		       uint32_t len)
{
	int i = find(g, batch);
	uint32_t k = 0;

	while (k + 1 < g->cfg.n_spans && g->spans[k] < len)
		k++;
	if (i < 0 || n > batch || len > g->spans[k]) {
		o1_err("cuda graphs: %u rows for batch %u, contexts up to %u: "
		       "not a bucket or beyond the last span (%u)",
		       n, batch, len, g->spans[g->cfg.n_spans - 1]);
		return -EINVAL;
	}
	g->span = k;
	g->stats.spans[k].steps++;
	return o1_graph_replay_step(&g->replay, &g->per[k][i],
				    k * g->cfg.n_buckets + (uint32_t)i, n);
}

int o1_cuda_graphs_fail_replays(struct o1_cuda_graphs *g, uint32_t every)
{
	uint32_t captured = 0;

	for (uint32_t k = 0; k < g->cfg.n_spans; k++)
		for (uint32_t i = 0; i < g->cfg.n_buckets; i++)
			captured += g->execs[k][i] != NULL;
	if (!captured)
		return -O1_E_UNSUPPORTED;
	o1_graph_replay_fail(&g->replay, every);
	return 0;
}

void o1_cuda_graphs_count_prefill(struct o1_cuda_graphs *g)
{
	g->stats.prefill++;
}

/* A bucket's counters summed over the spans: captured when every span
 * has its graph; kernels and edges of the last span's graph (the
 * longest contexts' launches). */
void o1_cuda_graphs_stats(const struct o1_cuda_graphs *g,
			  struct o1_backend_graph_stats *out)
{
	*out = g->stats;
	for (uint32_t i = 0; i < g->cfg.n_buckets; i++) {
		struct o1_backend_graph_bucket *b = &out->buckets[i];

		*b = g->per[g->cfg.n_spans - 1][i];
		for (uint32_t k = 0; k + 1 < g->cfg.n_spans; k++) {
			const struct o1_backend_graph_bucket *p = &g->per[k][i];

			b->captured = b->captured && p->captured;
			b->hits += p->hits;
			b->misses += p->misses;
			b->fallbacks += p->fallbacks;
			b->padded_tokens += p->padded_tokens;
		}
	}
}

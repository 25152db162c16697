/* CUDA Graphs per decode batch bucket, for the CUDA backend.
 *
 * A set of buckets (ascending batch sizes) and of context spans (ascending
 * lengths: the longest context, in positions, a step of the span may
 * have; the last is the backend's limit). A decode step runs in the
 * smallest bucket >= its rows and the shortest span >= its longest
 * sequence: a graph per (span, bucket), since a step's launches are sized
 * for the longest context the graph serves (the attention's splits, its
 * heads a block and its kernel: attention_decode.cu), and a short span's
 * launches suit short contexts. At create, for each span and bucket,
 * PREPARE fills and uploads the inputs of an all-padding batch, BODY runs
 * once eagerly (warm-up: cuBLAS and module loading happen outside any
 * capture), then BODY is captured on STREAM (thread-local capture mode),
 * instantiated and uploaded. BODY must enqueue only on STREAM, allocate
 * nothing and read every per-step value from fixed device buffers: the
 * graph keeps the host arguments of capture time. A bucket whose capture
 * fails is logged and left without a graph (its steps run BODY eagerly,
 * counted as misses); with capture off no bucket has one. A replay whose
 * launch fails runs BODY eagerly over the same inputs (a fallback); the
 * replay decision and its counters are graph_replay.h's.
 * Counters are plain integers: one thread (the engine loop) steps, and
 * calls o1_cuda_graphs_fail_replays between steps.
 */
#ifndef O1_CUDA_GRAPHS_H
#define O1_CUDA_GRAPHS_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend.h"

struct o1_cuda_graphs;

struct o1_cuda_graphs_config {
	const uint32_t *buckets; /* ascending, >= 1 */
	uint32_t n_buckets;	 /* 1 .. O1_BACKEND_GRAPH_BUCKETS_MAX */
	const uint32_t *spans;	 /* ascending, >= 1 */
	uint32_t n_spans;	 /* 1 .. O1_BACKEND_GRAPH_SPANS_MAX */
	bool capture;		 /* false: eager bucket shapes only */
	cudaStream_t stream;
	/* Enqueues the decode step of BATCH rows (the bucket's size) whose
	 * contexts are at most MAX_LEN positions (the span's length). */
	int (*body)(void *ctx, uint32_t batch, uint32_t max_len);
	/* Fills and uploads the inputs of a batch of BATCH padding rows. */
	int (*prepare)(void *ctx, uint32_t batch);
	/* Waits until STREAM's work is done (NULL: cudaStreamSynchronize). */
	int (*sync)(void *ctx);
	void *ctx;
	/* A failed graph launch is an error, not an eager run of BODY (a
	 * tensor-parallel rank must replay what its peers replay). */
	bool strict;
};

int o1_cuda_graphs_create(const struct o1_cuda_graphs_config *cfg,
			  struct o1_cuda_graphs **out);
void o1_cuda_graphs_destroy(struct o1_cuda_graphs *g);
/* The smallest bucket >= N in *BATCH; -ERANGE (counted as oversize) when
 * N is above the largest. */
int o1_cuda_graphs_bucket(struct o1_cuda_graphs *g, uint32_t n,
			  uint32_t *batch);
/* Enqueues the step of N rows padded to BATCH (from o1_cuda_graphs_bucket,
 * inputs already uploaded) whose longest sequence has LEN positions (at
 * most the last span's): replays the graph of the bucket in the shortest
 * span >= LEN, or runs BODY when it has none (a miss) or the launch fails
 * (a fallback; with strict, the launch's error instead). */
int o1_cuda_graphs_run(struct o1_cuda_graphs *g, uint32_t n, uint32_t batch,
		       uint32_t len);
/* Fault injection: from the next replay on, every EVERY-th replay fails
 * as a failed cudaGraphLaunch does (0: none); -O1_E_UNSUPPORTED when no
 * bucket has a graph (capture off or failed). */
int o1_cuda_graphs_fail_replays(struct o1_cuda_graphs *g, uint32_t every);
void o1_cuda_graphs_count_prefill(struct o1_cuda_graphs *g);
void o1_cuda_graphs_stats(const struct o1_cuda_graphs *g,
			  struct o1_backend_graph_stats *out);

#endif

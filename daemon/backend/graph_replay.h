/* The replay decision of a CUDA graph bucket step (cuda_graphs.c), kept
 * free of CUDA calls so that it is tested on the CPU.
 *
 * A bucket step replays the bucket's graph (LAUNCH) when the bucket has
 * one and runs the bucket step eagerly (BODY) when it has none (a miss) or
 * the launch failed (a fallback). A failed launch enqueued nothing, so BODY
 * runs over the same uploaded inputs the graph would have read, and its
 * result is the graph's bit for bit (same kernels, same shapes).
 *
 * Injected failures (o1_graph_replay_fail, the graph_replay fault of
 * daemon/o1d/faults.h): every N-th replay tried since the fault was set
 * fails at the launch. LAUNCH is not called; the step then takes the
 * fallback a launch that returned an error takes, and is counted the same.
 * With ops.strict a real launch failure is returned instead (the injected
 * ones still fall back).
 *
 * One thread (the one that steps) calls everything here.
 */
#ifndef O1_GRAPH_REPLAY_H
#define O1_GRAPH_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

struct o1_graph_replay_ops {
	/* Enqueues bucket BUCKET's graph; 0, or an error after which nothing
	 * was enqueued. */
	int (*launch)(void *ctx, uint32_t bucket);
	/* Enqueues the bucket step of BATCH rows eagerly. */
	int (*body)(void *ctx, uint32_t batch);
	void *ctx;
	/* A launch that really fails is the step's error, not a fallback:
	 * a tensor-parallel rank must replay exactly when its peers do
	 * (NCCL). Injected failures still fall back: every rank injects
	 * them at the same replays. */
	bool strict;
};

struct o1_graph_replay {
	struct o1_graph_replay_ops ops;
	uint32_t fail_every; /* injected: every N-th replay fails; 0: none */
	uint64_t tried;	     /* replays tried since fail_every was set */
};

/* OPS is copied; no fault injected. */
void o1_graph_replay_init(struct o1_graph_replay *r,
			  const struct o1_graph_replay_ops *ops);
/* From the next replay on, every EVERY-th replay fails (0: none); the
 * count starts over. */
void o1_graph_replay_fail(struct o1_graph_replay *r, uint32_t every);
/* The step of N rows padded to B->batch, through bucket number I whose
 * counters are B (B->captured: it has a graph). Counts the padding and
 * one hit, miss or fallback. Returns 0 after a replay, else BODY's
 * result. */
int o1_graph_replay_step(struct o1_graph_replay *r,
			 struct o1_backend_graph_bucket *b, uint32_t i,
			 uint32_t n);

#endif

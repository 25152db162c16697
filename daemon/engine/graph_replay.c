/* The replay decision of a CUDA graph bucket step (graph_replay.h).
 * Invariant: LAUNCH is called only for a bucket with a graph, and BODY
 * exactly once for every step that did not replay (miss or fallback). */
#include "graph_replay.h"

#include <errno.h>

void o1_graph_replay_init(struct o1_graph_replay *r,
			  const struct o1_graph_replay_ops *ops)
{
	*r = (struct o1_graph_replay){.ops = *ops};
}

void o1_graph_replay_fail(struct o1_graph_replay *r, uint32_t every)
{
	r->fail_every = every;
	r->tried = 0;
}

/* Replays bucket I; the injected fault fails it before the launch, as if
 * the launch had returned an error. */
static int replay(struct o1_graph_replay *r, uint32_t i)
{
	if (r->fail_every && ++r->tried % r->fail_every == 0)
		return -EIO;
	return r->ops.launch(r->ops.ctx, i);
}

int o1_graph_replay_step(struct o1_graph_replay *r,
			 struct o1_backend_graph_bucket *b, uint32_t i,
			 uint32_t n)
{
	b->padded_tokens += b->batch - n;
	if (!b->captured) {
		b->misses++;
		return r->ops.body(r->ops.ctx, b->batch);
	}
	if (replay(r, i) == 0) {
		b->hits++;
		return 0;
	}
	b->fallbacks++;
	return r->ops.body(r->ops.ctx, b->batch);
}

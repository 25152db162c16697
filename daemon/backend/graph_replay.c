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
 * the launch had returned an error. *INJECTED says which it was. */
static int replay(struct o1_graph_replay *r, uint32_t i, bool *injected)
{
	*injected = r->fail_every && ++r->tried % r->fail_every == 0;
	if (*injected)
		return -EIO;
	return r->ops.launch(r->ops.ctx, i);
}

int o1_graph_replay_step(struct o1_graph_replay *r,
			 struct o1_backend_graph_bucket *b, uint32_t i,
			 uint32_t n)
{
	bool injected;
	int err;

	b->padded_tokens += b->batch - n;
	if (!b->captured) {
		b->misses++;
		return r->ops.body(r->ops.ctx, b->batch);
	}
	err = replay(r, i, &injected);
	if (!err) {
		b->hits++;
		return 0;
	}
	if (r->ops.strict && !injected)
		return err;
	b->fallbacks++;
	return r->ops.body(r->ops.ctx, b->batch);
}

/* The daemon's side of the metrics: open the regions once at start-up
 * (pinned BPF maps, else the shared-memory file), then count through the
 * mapping with relaxed atomic adds and stores: no syscall, no lock, no
 * allocation on the hot path.
 *
 * Invariants: only one process writes a given set of regions; several
 * threads of it may, hence the atomics. Counters only grow (add); gauges
 * are stored (set). A reader may see a histogram's count, sum and slot of
 * one observation at different moments; each field is exact on its own. */
#ifndef O1_METRICS_WRITER_H
#define O1_METRICS_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "metrics_map.h"

enum o1_metrics_mode {
	O1_METRICS_MODE_AUTO, /* pinned BPF maps, else the shm file */
	O1_METRICS_MODE_BPF,  /* pinned BPF maps or fail */
	O1_METRICS_MODE_SHM,  /* the shm file only */
	O1_METRICS_MODE_ANON, /* private memory: counted, never published */
};

struct o1_metrics_opts {
	size_t sz; /* sizeof(struct o1_metrics_opts) */
	enum o1_metrics_mode mode;
	const char *bpf_dir;  /* borrowed; NULL: /sys/fs/bpf/o1d */
	const char *shm_path; /* borrowed; NULL: /dev/shm/o1d-metrics-v3 */
	long gid;	      /* group given read access; -1: ours */
	unsigned file_mode;   /* pins and file; 0: 0640 */
	bool unpin_on_close;  /* remove pins/file in o1_metrics_close */
};

/* The regions are public so the helpers below can be inline; the rest is
 * for metrics_writer.c. */
struct o1_metrics {
	struct o1_metrics_counters *ctr;    /* mapped, owned */
	struct o1_metrics_hists *hist;	    /* mapped, owned */
	struct o1_metrics_graphs *graphs;   /* mapped, owned */
	const struct o1_metrics_info *info; /* mapped, owned */
	struct o1_metrics_maps maps;
	struct o1_metrics_perm perm; /* given to pins and the file */
	bool unpin_on_close;
};

/* Opens the regions per opts (NULL: all defaults, AUTO) and logs which
 * backend is in use. In AUTO mode a BPF failure (no bpffs, no capability)
 * falls back to the file. -EADDRINUSE (logged with the owner's pid): a
 * live o1d publishes at the pin directory or file; nothing of it touched.
 * *out is owned by the caller (o1_metrics_close). */
int o1_metrics_open(const struct o1_metrics_opts *opts,
		    struct o1_metrics **out);
/* Unmaps; unpins/unlinks when the options asked for it. Accepts NULL. */
void o1_metrics_close(struct o1_metrics *m);
/* Makes o1_metrics_close remove the pins or the file whatever the options
 * say: a daemon whose start failed leaves nothing that looks like it
 * served. Accepts NULL. */
void o1_metrics_unpublish_on_close(struct o1_metrics *m);
/* "bpf" / "shm" / "anon", and the pin directory or file path. */
const char *o1_metrics_backend_name(enum o1_metrics_backend b);
const char *o1_metrics_path(const struct o1_metrics *m);

/* Records the captured batch sizes (ascending); n <= O1_METRICS_GRAPH_BUCKETS
 * or -EINVAL. Not for the hot path. */
int o1_metrics_graph_set_buckets(struct o1_metrics *m, const uint32_t *sizes,
				 unsigned n);
/* Records the context spans' longest contexts (ascending); n <=
 * O1_METRICS_GRAPH_SPANS or -EINVAL. Not for the hot path. */
int o1_metrics_graph_set_spans(struct o1_metrics *m, const uint32_t *lens,
			       unsigned n);
/* Maps an error (-errno or -O1_E_*) to the failed_* reason. */
enum o1_metrics_fail o1_metrics_fail_reason(int err);

static inline void o1_metrics_add(struct o1_metrics *m, enum o1_metrics_ctr c,
				  uint64_t n)
{
	__atomic_fetch_add(&m->ctr->v[c], n, __ATOMIC_RELAXED);
}

/* Gauges (KV pages, clients connected, running/waiting). */
static inline void o1_metrics_set(struct o1_metrics *m, enum o1_metrics_ctr c,
				  uint64_t v)
{
	__atomic_store_n(&m->ctr->v[c], v, __ATOMIC_RELAXED);
}

static inline void o1_metrics_fail(struct o1_metrics *m,
				   enum o1_metrics_fail reason)
{
	if ((unsigned)reason >= O1_METRICS_FAIL__COUNT)
		reason = O1_METRICS_FAIL_INTERNAL;
	o1_metrics_add(m, O1_METRICS_CTR_FAILED_INVALID + reason, 1);
}

static inline void o1_metrics_observe_us(struct o1_metrics *m,
					 enum o1_metrics_hist_id id,
					 uint64_t value_us)
{
	struct o1_metrics_hist *h = &m->hist->h[id];
	uint64_t max = __atomic_load_n(&h->max_us, __ATOMIC_RELAXED);

	/* a lock-free maximum: retried only while a larger value is ours */
	while (value_us > max &&
	       !__atomic_compare_exchange_n(&h->max_us, &max, value_us, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	__atomic_fetch_add(&h->slots[o1_metrics_hist_slot(value_us)], 1,
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum_us, value_us, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->count, 1, __ATOMIC_RELAXED);
}

/* A step replayed bucket's graph, padding the batch with padded rows. */
static inline void o1_metrics_graph_hit(struct o1_metrics *m, unsigned bucket,
					uint64_t padded)
{
	struct o1_metrics_graph_bucket *b;

	if (bucket >= O1_METRICS_GRAPH_BUCKETS)
		return;
	b = &m->graphs->buckets[bucket];
	__atomic_fetch_add(&b->hits, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->padded_tokens, padded, __ATOMIC_RELAXED);
}

/* A step fitted bucket but found no graph for it (ran eagerly). */
static inline void o1_metrics_graph_miss(struct o1_metrics *m, unsigned bucket)
{
	if (bucket < O1_METRICS_GRAPH_BUCKETS)
		__atomic_fetch_add(&m->graphs->buckets[bucket].misses, 1,
				   __ATOMIC_RELAXED);
}

/* A replay of bucket's graph failed and the step ran eagerly. */
static inline void o1_metrics_graph_fallback(struct o1_metrics *m,
					     unsigned bucket)
{
	if (bucket < O1_METRICS_GRAPH_BUCKETS)
		__atomic_fetch_add(&m->graphs->buckets[bucket].fallbacks, 1,
				   __ATOMIC_RELAXED);
}

/* Counts a backend kept itself, added as deltas since the last call. */
static inline void o1_metrics_graph_add(struct o1_metrics *m, unsigned bucket,
					uint64_t hits, uint64_t misses,
					uint64_t fallbacks, uint64_t padded)
{
	struct o1_metrics_graph_bucket *b;

	if (bucket >= O1_METRICS_GRAPH_BUCKETS)
		return;
	b = &m->graphs->buckets[bucket];
	__atomic_fetch_add(&b->hits, hits, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->misses, misses, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->fallbacks, fallbacks, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->padded_tokens, padded, __ATOMIC_RELAXED);
}

/* STEPS decode steps of bucket graphs ran in context span SPAN. */
static inline void o1_metrics_graph_add_span(struct o1_metrics *m,
					     unsigned span, uint64_t steps)
{
	if (span < O1_METRICS_GRAPH_SPANS)
		__atomic_fetch_add(&m->graphs->spans[span].steps, steps,
				   __ATOMIC_RELAXED);
}

static inline void o1_metrics_graph_add_oversize(struct o1_metrics *m,
						 uint64_t n)
{
	__atomic_fetch_add(&m->graphs->oversize, n, __ATOMIC_RELAXED);
}

/* A step larger than every bucket ran eagerly. */
static inline void o1_metrics_graph_oversize(struct o1_metrics *m)
{
	__atomic_fetch_add(&m->graphs->oversize, 1, __ATOMIC_RELAXED);
}

static inline void o1_metrics_graph_capture(struct o1_metrics *m,
					    uint64_t capture_us,
					    uint64_t capture_bytes)
{
	__atomic_fetch_add(&m->graphs->capture_us, capture_us,
			   __ATOMIC_RELAXED);
	__atomic_fetch_add(&m->graphs->capture_bytes, capture_bytes,
			   __ATOMIC_RELAXED);
}

#endif

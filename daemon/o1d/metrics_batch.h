/* Metrics gathered over one engine step and published once at its end: the
 * per-token counter and latency observations of up to 256 rows a step,
 * each a few locked adds on shared lines when made one by one, become one
 * add per touched counter and histogram slot (issue 17: the host's work
 * per step). Readers see a step's tokens when its rows are all streamed,
 * a step later at most; the figures are the same.
 *
 * Invariants: one thread owns a batch; between flushes, slots[h][i]
 * counts the observations of histogram h in slot i (count[h] in all,
 * sum_us[h] and max_us[h] of their values) and ctr[c] what counter c
 * gained; dirty_h / dirty_c mark the histograms and counters touched. A
 * flush adds everything to the metrics and leaves the batch empty.
 */
#ifndef O1D_METRICS_BATCH_H
#define O1D_METRICS_BATCH_H

#include <stdint.h>

#include "metrics/metrics_writer.h"

_Static_assert(O1_METRICS_HIST__COUNT <= 32 && O1_METRICS_CTR__COUNT <= 64,
	       "the dirty masks hold every histogram and counter");

struct o1_metrics_batch {
	uint32_t slots[O1_METRICS_HIST__COUNT][O1_METRICS_HIST_SLOTS];
	uint64_t count[O1_METRICS_HIST__COUNT];
	uint64_t sum_us[O1_METRICS_HIST__COUNT];
	uint64_t max_us[O1_METRICS_HIST__COUNT];
	uint64_t ctr[O1_METRICS_CTR__COUNT];
	uint32_t dirty_h;
	uint64_t dirty_c;
};

/* Zeroes B (or use a zeroed struct). */
void o1_metrics_batch_init(struct o1_metrics_batch *b);

static inline void o1_metrics_batch_add(struct o1_metrics_batch *b,
					enum o1_metrics_ctr c, uint64_t n)
{
	b->ctr[c] += n;
	b->dirty_c |= 1ull << c;
}

static inline void o1_metrics_batch_observe_us(struct o1_metrics_batch *b,
					       enum o1_metrics_hist_id h,
					       uint64_t us)
{
	b->slots[h][o1_metrics_hist_slot(us)]++;
	b->count[h]++;
	b->sum_us[h] += us;
	if (us > b->max_us[h])
		b->max_us[h] = us;
	b->dirty_h |= 1u << h;
}

/* Adds B to M (NULL: drops it) and empties B. */
void o1_metrics_batch_flush(struct o1_metrics_batch *b, struct o1_metrics *m);

#endif

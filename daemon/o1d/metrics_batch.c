/* Metrics gathered over one engine step (see metrics_batch.h). */
#include "metrics_batch.h"

#include <string.h>

void o1_metrics_batch_init(struct o1_metrics_batch *b)
{
	memset(b, 0, sizeof(*b));
}

/* Histogram H of B into M: the maximum as o1_metrics_observe_us keeps it
 * (a lock-free maximum), then each touched slot, the sum and the count. */
static void flush_hist(struct o1_metrics_batch *b, struct o1_metrics *m,
		       unsigned h)
{
	struct o1_metrics_hist *mh = &m->hist->h[h];
	uint64_t max = __atomic_load_n(&mh->max_us, __ATOMIC_RELAXED);

	while (b->max_us[h] > max && !__atomic_compare_exchange_n(
					 &mh->max_us, &max, b->max_us[h], true,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	for (unsigned i = 0; i < O1_METRICS_HIST_SLOTS; i++)
		if (b->slots[h][i])
			__atomic_fetch_add(&mh->slots[i], b->slots[h][i],
					   __ATOMIC_RELAXED);
	__atomic_fetch_add(&mh->sum_us, b->sum_us[h], __ATOMIC_RELAXED);
	__atomic_fetch_add(&mh->count, b->count[h], __ATOMIC_RELAXED);
}

void o1_metrics_batch_flush(struct o1_metrics_batch *b, struct o1_metrics *m)
{
	for (unsigned h = 0; m && h < O1_METRICS_HIST__COUNT; h++)
		if (b->dirty_h & (1u << h))
			flush_hist(b, m, h);
	for (unsigned c = 0; m && c < O1_METRICS_CTR__COUNT; c++)
		if (b->dirty_c & (1ull << c))
			o1_metrics_add(m, c, b->ctr[c]);
	for (unsigned h = 0; h < O1_METRICS_HIST__COUNT; h++)
		if (b->dirty_h & (1u << h)) {
			memset(b->slots[h], 0, sizeof(b->slots[h]));
			b->count[h] = b->sum_us[h] = b->max_us[h] = 0;
		}
	for (unsigned c = 0; c < O1_METRICS_CTR__COUNT; c++)
		b->ctr[c] = 0;
	b->dirty_h = 0;
	b->dirty_c = 0;
}

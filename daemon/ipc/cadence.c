/* The front loop's estimate of the consumer's posting pace; see
 * cadence.h. */
#include "cadence.h"

static uint64_t diff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

void o1_ipc_cadence_post(struct o1_ipc_cadence *k, uint64_t now_ns)
{
	uint64_t gap = now_ns - k->last_ns;

	if (k->last_ns && now_ns >= k->last_ns && gap < O1_CADENCE_BURST_NS)
		return; /* the same burst */
	if (!k->last_ns || now_ns < k->last_ns || gap > O1_CADENCE_MAX_GAP_NS) {
		k->n = 0;
	} else if (!k->n++) {
		k->gap_ns = gap;
		k->dev_ns = 0;
	} else {
		k->dev_ns =
		    k->dev_ns - k->dev_ns / 8 + diff(gap, k->gap_ns) / 8;
		k->gap_ns = k->gap_ns - k->gap_ns / 8 + gap / 8;
	}
	k->last_ns = now_ns;
}

uint64_t o1_ipc_cadence_wake(const struct o1_ipc_cadence *k, uint64_t now_ns,
			     uint64_t *until)
{
	uint64_t margin = 2 * k->dev_ns + 10000, due;

	if (k->n < O1_CADENCE_MIN_N || margin > O1_CADENCE_MARGIN_MAX_NS ||
	    k->gap_ns < 4 * margin)
		return 0;
	due = k->last_ns + k->gap_ns;
	if (now_ns >= due + margin)
		return 0; /* it did not come: back to waiting for the kick */
	*until = due + margin;
	return due - margin;
}

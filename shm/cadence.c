/* A waiter's estimate of its producer's posting pace and of its own timed
 * wake-ups' lateness (o1d's front loop, libo1client's wait); see
 * cadence.h. */
#include "cadence.h"

static uint64_t diff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* A running average of 1/8 weight. */
static uint64_t avg8(uint64_t mean, uint64_t x)
{
	return mean - mean / 8 + x / 8;
}

/* A gap more than O1_CADENCE_OUTLIER_NS off the mean, at time t: 1 when it
 * ends the estimate (the pace changed), else 0 (left out of the
 * averages; the next step follows this one). */
static int outlier(struct o1_cadence *k, uint64_t t)
{
	k->odd += 3;
	if (k->odd >= 4)
		return 1;
	k->last_ns = t;
	return 0;
}

void o1_cadence_post(struct o1_cadence *k, uint64_t now_ns, uint64_t kick_ns)
{
	uint64_t t = now_ns, gap;

	if (kick_ns && kick_ns <= now_ns &&
	    (!k->last_ns || kick_ns >= k->last_ns + O1_CADENCE_BURST_NS))
		t = kick_ns;
	gap = t - k->last_ns;
	if (k->last_ns && t >= k->last_ns && gap < O1_CADENCE_BURST_NS)
		return; /* the same burst */
	if (!k->last_ns || t < k->last_ns || gap > O1_CADENCE_MAX_GAP_NS) {
		k->n = 0;
	} else if (k->n && diff(gap, k->gap_ns) > O1_CADENCE_OUTLIER_NS) {
		if (!outlier(k, t))
			return;
		k->n = 0; /* afresh, from this gap */
	}
	if (k->last_ns && t > k->last_ns && gap <= O1_CADENCE_MAX_GAP_NS) {
		if (!k->n++) {
			k->gap_ns = gap;
			k->dev_ns = 0;
			k->odd = 0;
		} else {
			k->dev_ns = avg8(k->dev_ns, diff(gap, k->gap_ns));
			k->gap_ns = avg8(k->gap_ns, gap);
			k->odd -= k->odd > 0;
		}
	}
	k->last_ns = t;
}

uint64_t o1_cadence_wake(const struct o1_cadence *k, uint64_t now_ns,
			 uint64_t *until)
{
	uint64_t margin = 2 * k->dev_ns + 10000, due, early;

	if (k->n < O1_CADENCE_MIN_N || margin > O1_CADENCE_MARGIN_MAX_NS ||
	    k->gap_ns < 16 * margin)
		return 0;
	due = k->last_ns + k->gap_ns;
	if (now_ns >= due + margin)
		return 0; /* it did not come: back to waiting for the kick */
	early = k->late_ns + k->late_dev_ns;
	if (early > O1_CADENCE_LATE_MAX_NS)
		early = O1_CADENCE_LATE_MAX_NS;
	early += margin;
	*until = due + margin;
	return due > early ? due - early : 1;
}

void o1_cadence_woke(struct o1_cadence *k, uint64_t asked_ns, uint64_t now_ns)
{
	uint64_t late;

	if (!asked_ns || now_ns < asked_ns)
		return; /* ended early by another event: says nothing */
	late = now_ns - asked_ns;
	if (late > O1_CADENCE_LATE_MAX_NS)
		late = O1_CADENCE_LATE_MAX_NS; /* a preempted loop */
	if (!k->late_ns) {
		k->late_ns = late ? late : 1;
		k->late_dev_ns = 0;
		return;
	}
	k->late_dev_ns = avg8(k->late_dev_ns, diff(late, k->late_ns));
	k->late_ns = avg8(k->late_ns, late);
	if (!k->late_ns)
		k->late_ns = 1;
}

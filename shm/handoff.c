/* Yielding to a peer we handed work to; see handoff.h for the rule. */
#include "handoff.h"

#include <sched.h>

void o1_handoff_published(struct o1_handoff *h, int rang, uint64_t now_ns)
{
	if (!h->since_ns)
		h->since_ns = now_ns;
	h->rang |= rang;
}

int o1_handoff_spin(struct o1_handoff *h, struct o1_ring *r, uint64_t now_ns)
{
	if (!h->since_ns)
		return 0;
	if (!h->rang && now_ns - h->since_ns < O1_HANDOFF_AFTER_NS)
		return 0;
	h->since_ns = 0; /* checked: at most one yield per publication */
	h->rang = 0;
	if (o1_ring_unread(r) <= 0)
		return 0;
	sched_yield();
	return 1;
}

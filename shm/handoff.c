/* Yielding to a peer we handed work to; see handoff.h for the rule. */
#include "handoff.h"

#include <sched.h>

void o1_handoff_published(struct o1_handoff *h, int rang, uint64_t now_ns)
{
	if (!h->since_ns)
		h->since_ns = now_ns;
	h->rang |= rang;
}

uint32_t o1_handoff_cpu(void)
{
	int cpu = sched_getcpu(); /* the vDSO: a few ns */

	return cpu < 0 ? 0 : (uint32_t)cpu + 1;
}

void o1_handoff_note_cpu(struct o1_ring_ctrl *ctrl, uint32_t *told,
			 uint32_t cpu)
{
	if (cpu == *told)
		return;
	*told = cpu;
	atomic_store_explicit(&ctrl->cpu, cpu, memory_order_relaxed);
}

/* Where the consumer's hint says it last ran: 1 on our CPU, -1 on
 * another, 0 unknown. */
static int peer_place(struct o1_ring *r)
{
	uint32_t peer =
	    atomic_load_explicit(&r->ctrl->cpu, memory_order_relaxed);
	uint32_t cpu = o1_handoff_cpu();

	if (!peer || !cpu)
		return 0;
	return peer == cpu ? 1 : -1;
}

int o1_handoff_spin(struct o1_handoff *h, struct o1_ring *r, uint64_t now_ns)
{
	int place;

	if (!h->since_ns)
		return 0;
	place = peer_place(r);
	if (!place && !h->rang && now_ns - h->since_ns < O1_HANDOFF_AFTER_NS)
		return 0;
	h->since_ns = 0; /* checked: at most one yield per publication */
	h->rang = 0;
	if (place < 0 || o1_ring_unread(r) <= 0)
		return 0;
	sched_yield();
	return 1;
}

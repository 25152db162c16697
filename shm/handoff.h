/* Handing the CPU to a peer that cannot run while we spin.
 *
 * A thread that busy-polls keeps its CPU until it sleeps or its time slice
 * ends. When the peer it just woke (the kernel often queues a wakee on the
 * waker's CPU), or a peer the scheduler placed on the same CPU, is waiting
 * behind it, the peer runs only after the whole spin window: measured on a
 * 2-vCPU machine, the sleep path's ping cost the daemon's 200 us spin.
 *
 * The rule, on each side that produces into a ring and then spins: once
 * per publication, yield the CPU if the peer has not taken what we
 * published and its last CPU (the ring's cpu hint, kept fresh by the
 * consumer with o1_handoff_note_cpu) is ours: at once, since a peer whose
 * CPU we hold cannot be running. With no hint (0), as when it is ours, but
 * only once the publication rang the peer awake (the kernel often queues
 * the wakee here) or its entries stayed unread for O1_HANDOFF_AFTER_NS (a
 * peer spinning on another CPU takes them within a microsecond; one
 * queued behind us never does). A peer on another CPU gets no yield: it
 * is not helped, and our CPU would go to unrelated work for a time slice.
 * A yield with nothing else runnable is one system call.
 *
 * Invariants: at most one yield per publication (a peer that never reads
 * costs one system call per publication to it, never more); the wake-up
 * protocol (doorbell.h) is untouched: a yield only reorders who runs. */
#ifndef O1_HANDOFF_H
#define O1_HANDOFF_H

#include <stdint.h>

#include "ring.h"

#define O1_HANDOFF_AFTER_NS 2000ull

struct o1_handoff {
	uint64_t since_ns; /* oldest publication not yet checked; 0: none */
	int rang;	   /* one of them woke the peer */
};

/* The CPU this thread runs on, plus one (0: unknown). */
uint32_t o1_handoff_cpu(void);
/* Consumer: records cpu (o1_handoff_cpu's) in the ring's cpu hint; a
 * store only when it differs from *told (which starts at 0). */
void o1_handoff_note_cpu(struct o1_ring_ctrl *ctrl, uint32_t *told,
			 uint32_t cpu);
/* Producer: entries were just published at now_ns (never 0); rang: the
 * publication's doorbell woke a sleeping peer. */
void o1_handoff_published(struct o1_handoff *h, int rang, uint64_t now_ns);
/* Producer, on each idle turn of a spin: yields the CPU when due (see the
 * rule above) and the peer has not taken everything published on r.
 * Returns 1 when it yielded, else 0. */
int o1_handoff_spin(struct o1_handoff *h, struct o1_ring *r, uint64_t now_ns);

#endif

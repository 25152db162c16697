/* Single-producer single-consumer rings of fixed-size slots over memory the
 * caller provides (a shared mapping); the ring never owns that memory.
 *
 * Fixed slots, not variable-length records: every wire entry has the same
 * size, so a consumer never trusts a length read from shared memory and the
 * producer never has to write padding records at the wrap point.
 *
 * Shared control block (struct o1_ring_ctrl), one writer per cache line:
 *   head      written by the consumer only (release), read by the producer
 *             (acquire): slots before head may be overwritten.
 *   tail      written by the producer only (release), read by the consumer
 *             (acquire): slots before tail are committed and fully written.
 *   flags     written by the consumer only: O1_RING_NEED_WAKEUP (it is about
 *             to sleep), O1_RING_DRAINING (it accepts no new work).
 *   cpu       (flags' line) written by the consumer only: the CPU it last
 *             ran on, plus one; a scheduling hint, never trusted.
 *   doorbell  incremented by the producer when it wakes a sleeping consumer;
 *             the consumer waits on it as a futex word (see doorbell.h).
 * Indices are free-running uint32 counters; slot = index & (capacity - 1).
 *
 * Each side keeps its own index in private memory and only publishes it:
 * the shared copy of its own index is never read back. The peer's index is
 * untrusted; a value that would put more than capacity entries in the ring
 * is reported as -O1_E_PROTOCOL and the ring stays unchanged. A stale read
 * of the peer's index costs only a spurious "full" or "empty".
 *
 * The consumer's flags also say, on a submission ring, that it sleeps
 * waiting for room in the peer ring (O1_RING_WANT_ROOM, below). */
#ifndef O1_RING_H
#define O1_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define O1_CACHELINE 64

enum o1_ring_flags {
	O1_RING_NEED_WAKEUP = 1u << 0,
	O1_RING_DRAINING = 1u << 1,
	/* On a submission ring, set with NEED_WAKEUP: its consumer (the
	 * daemon) sleeps waiting for room in the peer completion ring, so
	 * the client notifies this ring's doorbell once it has taken events
	 * (see daemon/ipc/front.c). Ignored by older clients: the daemon's
	 * housekeeping tick still retries. */
	O1_RING_WANT_ROOM = 1u << 2,
};

struct o1_ring_ctrl {
	_Alignas(O1_CACHELINE) _Atomic uint32_t head;
	_Alignas(O1_CACHELINE) _Atomic uint32_t tail;
	_Alignas(O1_CACHELINE) _Atomic uint32_t flags;
	_Atomic uint32_t cpu; /* consumer: its CPU + 1 (0: unknown), a hint
			       * for the producer's handoff (handoff.h) */
	_Alignas(O1_CACHELINE) _Atomic uint32_t doorbell;
};
_Static_assert(sizeof(struct o1_ring_ctrl) == 4 * O1_CACHELINE, "ring ctrl");
_Static_assert(offsetof(struct o1_ring_ctrl, tail) == 64, "tail line");
_Static_assert(offsetof(struct o1_ring_ctrl, flags) == 128, "flags line");
_Static_assert(offsetof(struct o1_ring_ctrl, doorbell) == 192, "bell line");

/* A process-local view of one side of a ring. Not thread-safe: one thread
 * (or one lock holder) per side. */
struct o1_ring {
	struct o1_ring_ctrl *ctrl; /* borrowed: the shared control block */
	uint8_t *slots;		   /* borrowed: capacity * slot_bytes bytes */
	uint32_t mask;		   /* capacity - 1 */
	uint32_t slot_bytes;
	uint32_t
	    local; /* producer: next index to claim; consumer: next to read */
	uint32_t pub; /* producer: last published tail; consumer: head */
	uint32_t
	    peer; /* cached peer index (head for producer, tail for consumer) */
};

/* Sets up a view; capacity must be a power of two >= 2, slot_bytes a
 * multiple of 8. Both sides start at index 0: the creator resets the
 * control block before sharing it. Does not touch shared memory.
 * Returns 0 or -EINVAL. */
int o1_ring_init(struct o1_ring *r, struct o1_ring_ctrl *ctrl, void *slots,
		 uint32_t capacity, uint32_t slot_bytes);
/* Zeroes the control block: the creator does this once, before sharing. */
void o1_ring_ctrl_reset(struct o1_ring_ctrl *ctrl);

/* Producer: *slot gets the next free slot. Claims are visible to the consumer
 * only after o1_ring_commit(). Returns 0, -EAGAIN when full, -O1_E_PROTOCOL
 * when the consumer published an impossible head. */
int o1_ring_claim(struct o1_ring *r, void **slot);
/* Producer: forgets the claims made since the last commit. */
void o1_ring_abort(struct o1_ring *r);
/* Producer: publishes every claimed slot (one release store). */
void o1_ring_commit(struct o1_ring *r);

/* Consumer: *slot gets the oldest committed slot, still in shared memory:
 * copy it out before looking at it. Returns 0, -EAGAIN when empty,
 * -O1_E_PROTOCOL when the producer published an impossible tail. */
int o1_ring_peek(struct o1_ring *r, const void **slot);
/* Consumer: done with the slot from the last peek (private until publish). */
void o1_ring_advance(struct o1_ring *r);
/* Consumer: hands every advanced slot back to the producer (release). */
void o1_ring_release(struct o1_ring *r);

/* Consumer: committed entries not yet read, or -O1_E_PROTOCOL on a
 * corrupt tail. */
int o1_ring_ready(struct o1_ring *r);
/* Producer: free slots as of the latest head, or -O1_E_PROTOCOL on a
 * corrupt head. */
int o1_ring_space(struct o1_ring *r);
/* Producer: published entries the consumer has not handed back yet (its
 * head read now), or -O1_E_PROTOCOL on a corrupt head. */
int o1_ring_unread(struct o1_ring *r);

static inline uint32_t o1_ring_capacity(const struct o1_ring *r)
{
	return r->mask + 1;
}

/* Producer: free slots as of the head last read (no shared access); a
 * lower bound of o1_ring_space(). */
static inline uint32_t o1_ring_space_cached(const struct o1_ring *r)
{
	return o1_ring_capacity(r) - (r->local - r->peer);
}

#endif

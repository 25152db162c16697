/* A request slot: everything the daemon keeps for one request, allocated
 * once at start-up in the engine's slab (engine_int.h: slots) and reused.
 *
 * Ownership (two threads: front = the io_uring loop, engine = steps):
 * - A free slot belongs to the front thread (the free list is its own).
 * - submit: the front fills the request fields (params, prompt copy, stop
 *   lists, client ids, times), then hands the slot to the engine through
 *   the engine queue (mutex: its unlock publishes those writes). A slot
 *   with a grammar that is still compiling is handed over by the compile
 *   thread once it is compiled; one whose grammar was refused never
 *   reaches the engine: the front (or the compile thread) produces its
 *   ERROR and FINAL, as the only producer of that slot.
 * - The engine alone touches the seq part and produces events into the
 *   slot's out ring (single producer); the front alone consumes them and
 *   posts them to the client (single consumer). head and tail are atomics:
 *   the producer writes an entry then stores head with release; the
 *   consumer loads head with acquire, reads, then stores tail with release.
 * - The engine's last act on a slot is producing its FINAL: afterwards it
 *   never touches it again. The front frees the slot once it has consumed
 *   the FINAL (posted, or dropped for a client that is gone).
 * - cancel is written by the front (relaxed atomic, monotonic: 0 until set
 *   once) and polled by the engine; dead (front only) marks a client that
 *   is gone: its events are dropped, not posted. "front" means the front
 *   thread serving the request's client (ipc.front_threads: engine.c).
 * - The ring keeps O1_REQ_FINAL_RESERVE entries for the FINAL (and the
 *   ROUND a refinement cut short sends before it), so a FINAL can always
 *   be produced; tokens wait while the ring lacks room for one
 *   token's events (backpressure: the sequence is not scheduled).
 */
#ifndef O1_REQUEST_H
#define O1_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/wire.h"
#include "grammar_cache.h"

#define O1_REQ_OUT_ENTRIES   128 /* power of two */
#define O1_REQ_FINAL_RESERVE 2	 /* a refinement's last ROUND, the FINAL */
#define O1_REQ_STOP_BYTES    1024
#define O1_REQ_STOP_IDS	     16

enum o1_req_cancel {
	O1_REQ_RUN = 0,
	O1_REQ_CANCEL,	    /* the client or an admin asked */
	O1_REQ_CLIENT_GONE, /* the client hung up */
	O1_REQ_DRAIN,	    /* the drain deadline passed */
};

/* Published by the engine for admin listings (relaxed atomics). */
enum o1_req_phase {
	O1_REQ_QUEUED,
	O1_REQ_WAITING,
	O1_REQ_RUNNING,
	O1_REQ_FINISHED,
};

struct o1_req {
	/* written by the front before the hand-off, read-only afterwards */
	uint32_t index;
	uint32_t client_id;
	uid_t uid;
	pid_t pid;
	uint64_t req_id;
	uint64_t submit_ns;
	struct o1_wire_submit params;
	uint8_t *prompt; /* slab storage: text bytes or uint32 ids */
	uint32_t prompt_bytes;
	uint32_t stop_ids[O1_REQ_STOP_IDS];
	uint32_t n_stop_ids;
	uint8_t stop_str[O1_REQ_STOP_BYTES]; /* (u8 len, bytes) repeated */
	uint32_t stop_str_bytes;
	uint32_t n_stop_str;
	int32_t devout_area; /* the client's device output area, or -1 */
	/* O1_SUBMIT_GRAMMAR: its compiled grammar (referenced from the
	 * submit until the slot is freed; the engine sees only compiled
	 * ones), else NULL; gwait links the slot while it compiles */
	struct o1_gentry *grammar;
	struct o1_gcache_waiter gwait;

	_Atomic int cancel;	    /* enum o1_req_cancel */
	_Atomic int phase;	    /* enum o1_req_phase */
	_Atomic uint32_t generated; /* tokens sampled so far */
	_Atomic uint32_t n_prompt;  /* prompt tokens once tokenized */

	/* front only */
	bool active;
	bool dead;
	uint64_t first_token_ns; /* its first TOKEN posted; 0: none yet */
	uint32_t next_free;
	uint32_t active_at; /* its index in its front's active list */
	uint32_t front;	    /* the front thread serving its client */

	/* the out ring: engine produces, front consumes */
	_Atomic uint32_t out_head;
	_Atomic uint32_t out_tail;
	union o1_wire_entry out[O1_REQ_OUT_ENTRIES];

	void *seq; /* engine only: the scheduler's state for this slot */
};

static inline uint32_t o1_req_out_free(struct o1_req *r)
{
	uint32_t head =
	    atomic_load_explicit(&r->out_head, memory_order_relaxed);
	uint32_t tail =
	    atomic_load_explicit(&r->out_tail, memory_order_acquire);

	return O1_REQ_OUT_ENTRIES - (head - tail);
}

/* Producer side (engine): the caller checked o1_req_out_free. */
static inline void o1_req_out_push(struct o1_req *r,
				   const union o1_wire_entry *ev)
{
	uint32_t head =
	    atomic_load_explicit(&r->out_head, memory_order_relaxed);

	r->out[head & (O1_REQ_OUT_ENTRIES - 1)] = *ev;
	atomic_store_explicit(&r->out_head, head + 1, memory_order_release);
}

#endif

/* SPSC ring over caller memory. Orderings (see ring.h for the layout):
 * the producer writes a slot, then stores tail with release; the consumer
 * loads tail with acquire, copies the slot, then stores head with release;
 * the producer loads head with acquire before reusing a slot. Peer indices
 * are checked against the ring's capacity before they are used. */
#include "ring.h"

#include <errno.h>
#include <string.h>

#include "common/error.h"

int o1_ring_init(struct o1_ring *r, struct o1_ring_ctrl *ctrl, void *slots,
		 uint32_t capacity, uint32_t slot_bytes)
{
	if (!r || !ctrl || !slots || capacity < 2 ||
	    (capacity & (capacity - 1)) || !slot_bytes || slot_bytes % 8)
		return -EINVAL;
	r->ctrl = ctrl;
	r->slots = slots;
	r->mask = capacity - 1;
	r->slot_bytes = slot_bytes;
	r->local = 0;
	r->pub = 0;
	r->peer = 0;
	return 0;
}

void o1_ring_ctrl_reset(struct o1_ring_ctrl *ctrl)
{
	memset(ctrl, 0, sizeof(*ctrl));
}

static inline void *slot_at(struct o1_ring *r, uint32_t idx)
{
	return r->slots + (size_t)(idx & r->mask) * r->slot_bytes;
}

/* Reloads the consumer's head; rejects one that does not lie within the
 * capacity behind the published tail. */
static int reload_head(struct o1_ring *r)
{
	uint32_t head =
	    atomic_load_explicit(&r->ctrl->head, memory_order_acquire);

	if ((uint32_t)(r->pub - head) > o1_ring_capacity(r))
		return -O1_E_PROTOCOL;
	/* A head that moved backwards only shrinks the space we see. */
	if ((int32_t)(head - r->peer) > 0)
		r->peer = head;
	return 0;
}

int o1_ring_claim(struct o1_ring *r, void **slot)
{
	int ret;

	if (r->local - r->peer >= o1_ring_capacity(r)) {
		ret = reload_head(r);
		if (ret)
			return ret;
		if (r->local - r->peer >= o1_ring_capacity(r))
			return -EAGAIN;
	}
	*slot = slot_at(r, r->local);
	r->local++;
	return 0;
}

void o1_ring_abort(struct o1_ring *r)
{
	r->local = r->pub;
}

void o1_ring_commit(struct o1_ring *r)
{
	if (r->local == r->pub)
		return;
	atomic_store_explicit(&r->ctrl->tail, r->local, memory_order_release);
	r->pub = r->local;
}

int o1_ring_space(struct o1_ring *r)
{
	int ret = reload_head(r);

	if (ret)
		return ret;
	return (int)(o1_ring_capacity(r) - (r->local - r->peer));
}

int o1_ring_unread(struct o1_ring *r)
{
	int ret = reload_head(r);

	return ret ? ret : (int)(r->pub - r->peer);
}

/* Reloads the producer's tail; it must lie within capacity past the head
 * we published and not behind what we have already read. */
static int reload_tail(struct o1_ring *r)
{
	uint32_t tail =
	    atomic_load_explicit(&r->ctrl->tail, memory_order_acquire);

	if ((uint32_t)(tail - r->pub) > o1_ring_capacity(r) ||
	    (uint32_t)(tail - r->local) > o1_ring_capacity(r))
		return -O1_E_PROTOCOL;
	r->peer = tail;
	return 0;
}

int o1_ring_peek(struct o1_ring *r, const void **slot)
{
	int ret;

	if (r->local == r->peer) {
		ret = reload_tail(r);
		if (ret)
			return ret;
		if (r->local == r->peer)
			return -EAGAIN;
	}
	*slot = slot_at(r, r->local);
	return 0;
}

void o1_ring_advance(struct o1_ring *r)
{
	r->local++;
}

void o1_ring_release(struct o1_ring *r)
{
	if (r->local == r->pub)
		return;
	atomic_store_explicit(&r->ctrl->head, r->local, memory_order_release);
	r->pub = r->local;
}

int o1_ring_ready(struct o1_ring *r)
{
	int ret = reload_tail(r);

	if (ret)
		return ret;
	return (int)(r->peer - r->local);
}

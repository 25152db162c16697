/* Region geometry: the only place that turns sizes into offsets, so the
 * daemon and the client agree by construction. */
#include "region.h"

#include <string.h>

#include "common/error.h"
#include "wire.h"

#define HDR_BYTES 256u
#define PAGE	  4096u

static int entries_ok(uint32_t n)
{
	return n >= O1_REGION_ENTRIES_MIN && n <= O1_REGION_ENTRIES_MAX &&
	       !(n & (n - 1));
}

int o1_region_layout(uint32_t sq_entries, uint32_t cq_entries,
		     uint32_t arena_bytes, struct o1_region_layout *out)
{
	uint64_t off, arena;

	if (!entries_ok(sq_entries) || !entries_ok(cq_entries) ||
	    arena_bytes < O1_REGION_ARENA_MIN ||
	    arena_bytes > O1_REGION_ARENA_MAX)
		return -O1_E_BOUNDS;
	arena = ((uint64_t)arena_bytes + 63) & ~63ull;
	out->sq_entries = sq_entries;
	out->cq_entries = cq_entries;
	out->arena_bytes = (uint32_t)arena;
	out->sq_ctrl_off = HDR_BYTES;
	out->cq_ctrl_off = HDR_BYTES + sizeof(struct o1_ring_ctrl);
	out->sq_off = out->cq_ctrl_off + sizeof(struct o1_ring_ctrl);
	off = out->sq_off + (uint64_t)sq_entries * O1_WIRE_ENTRY_BYTES;
	out->cq_off = (uint32_t)off;
	off += (uint64_t)cq_entries * O1_WIRE_ENTRY_BYTES;
	out->arena_off = (uint32_t)off;
	off = (off + arena + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	if (off > UINT32_MAX)
		return -O1_E_BOUNDS;
	out->total_bytes = (uint32_t)off;
	return 0;
}

void o1_region_format(void *base, const struct o1_region_layout *l,
		      uint16_t flags, uint32_t client_id)
{
	struct o1_region_hdr h = {
	    .magic = O1_REGION_MAGIC,
	    .version = O1_REGION_VERSION,
	    .flags = flags,
	    .total_bytes = l->total_bytes,
	    .sq_entries = l->sq_entries,
	    .cq_entries = l->cq_entries,
	    .entry_bytes = O1_WIRE_ENTRY_BYTES,
	    .arena_bytes = l->arena_bytes,
	    .sq_ctrl_off = l->sq_ctrl_off,
	    .cq_ctrl_off = l->cq_ctrl_off,
	    .sq_off = l->sq_off,
	    .cq_off = l->cq_off,
	    .arena_off = l->arena_off,
	    .client_id = client_id,
	};

	memcpy(base, &h, sizeof(h));
	o1_ring_ctrl_reset(o1_region_sq_ctrl(base, l));
	o1_ring_ctrl_reset(o1_region_cq_ctrl(base, l));
}

int o1_region_check(const void *base, size_t map_bytes,
		    struct o1_region_layout *out, uint16_t *flags)
{
	struct o1_region_hdr h;
	struct o1_region_layout l;

	if (map_bytes < sizeof(h))
		return -O1_E_FORMAT;
	memcpy(&h, base, sizeof(h));
	if (h.magic != O1_REGION_MAGIC)
		return -O1_E_FORMAT;
	if (h.version != O1_REGION_VERSION)
		return -O1_E_VERSION;
	if (h.entry_bytes != O1_WIRE_ENTRY_BYTES ||
	    o1_region_layout(h.sq_entries, h.cq_entries, h.arena_bytes, &l) ||
	    l.total_bytes != h.total_bytes || l.total_bytes > map_bytes ||
	    l.arena_bytes != h.arena_bytes || l.sq_off != h.sq_off ||
	    l.cq_off != h.cq_off || l.arena_off != h.arena_off ||
	    l.sq_ctrl_off != h.sq_ctrl_off || l.cq_ctrl_off != h.cq_ctrl_off)
		return -O1_E_FORMAT;
	*out = l;
	*flags = h.flags;
	return 0;
}

int o1_region_rings(void *base, const struct o1_region_layout *l,
		    struct o1_ring *sq, struct o1_ring *cq)
{
	uint8_t *b = base;
	int ret = 0;

	if (sq)
		ret =
		    o1_ring_init(sq, o1_region_sq_ctrl(base, l), b + l->sq_off,
				 l->sq_entries, O1_WIRE_ENTRY_BYTES);
	if (!ret && cq)
		ret =
		    o1_ring_init(cq, o1_region_cq_ctrl(base, l), b + l->cq_off,
				 l->cq_entries, O1_WIRE_ENTRY_BYTES);
	return ret;
}

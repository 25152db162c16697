/* The per-client shared region: one memfd, created, sized and sealed by the
 * daemon, mapped MAP_SHARED by the daemon and by one client.
 *
 *   [ header 64 B | pad to 256 ]
 *   [ sq ctrl 256 B ]  submission ring indices, flags, doorbell
 *   [ cq ctrl 256 B ]  completion ring indices, flags, doorbell
 *   [ sq slots: sq_entries * 128 B ]  client -> daemon entries
 *   [ cq slots: cq_entries * 128 B ]  daemon -> client entries
 *   [ arena: arena_bytes ]  written only by the client (prompts, stop
 *                           lists); the daemon only copies out of it
 *
 * The daemon writes the header once before sending the fd and never reads
 * it back: its own geometry lives in private memory (struct
 * o1_region_layout). The client validates the header before using it.
 * Arena space belongs to the client; a prompt may be reused as soon as the
 * daemon has consumed (released) the SUBMIT entry that names it, because
 * the daemon copies the data out while it decodes the entry. */
#ifndef O1_REGION_H
#define O1_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "ring.h"

#define O1_REGION_MAGIC	      0x4853314fu /* "O1SH" little-endian */
#define O1_REGION_VERSION     1
#define O1_REGION_ENTRIES_MIN 2u
#define O1_REGION_ENTRIES_MAX 65536u
#define O1_REGION_ARENA_MIN   4096u
#define O1_REGION_ARENA_MAX   (1u << 30)

enum o1_region_flags {
	/* Wake the daemon by writing the eventfd sent with the region
	 * instead of a futex wake (its io_uring lacks FUTEX_WAIT). */
	O1_REGION_EVENTFD = 1u << 0,
};

struct o1_region_hdr {
	uint32_t magic;
	uint16_t version;     /* O1_REGION_VERSION */
	uint16_t flags;	      /* enum o1_region_flags */
	uint32_t total_bytes; /* size of the memfd */
	uint32_t sq_entries;
	uint32_t cq_entries;
	uint32_t entry_bytes; /* O1_WIRE_ENTRY_BYTES */
	uint32_t arena_bytes;
	uint32_t sq_ctrl_off; /* byte offsets from the region start */
	uint32_t cq_ctrl_off;
	uint32_t sq_off;
	uint32_t cq_off;
	uint32_t arena_off;
	uint32_t client_id; /* the daemon's name for this connection */
	uint8_t pad[12];
};
_Static_assert(sizeof(struct o1_region_hdr) == 64, "region header");

/* Geometry, kept privately by each side. */
struct o1_region_layout {
	uint32_t total_bytes;
	uint32_t sq_entries;
	uint32_t cq_entries;
	uint32_t arena_bytes;
	uint32_t sq_ctrl_off;
	uint32_t cq_ctrl_off;
	uint32_t sq_off;
	uint32_t cq_off;
	uint32_t arena_off;
};

/* Computes the layout for the given sizes (entries: powers of two in
 * [ENTRIES_MIN, ENTRIES_MAX]; arena in [ARENA_MIN, ARENA_MAX], rounded up
 * to 64). Returns 0 or -O1_E_BOUNDS. */
int o1_region_layout(uint32_t sq_entries, uint32_t cq_entries,
		     uint32_t arena_bytes, struct o1_region_layout *out);
/* Daemon: writes the header and zeroes both control blocks of a fresh
 * mapping of l->total_bytes. */
void o1_region_format(void *base, const struct o1_region_layout *l,
		      uint16_t flags, uint32_t client_id);
/* Client: validates the header of a mapping of map_bytes against the
 * layout it implies; fills *out and *flags. Returns 0, -O1_E_FORMAT (bad
 * magic or geometry) or -O1_E_VERSION. */
int o1_region_check(const void *base, size_t map_bytes,
		    struct o1_region_layout *out, uint16_t *flags);
/* Sets up ring views over a mapping: sq and cq may each be NULL. */
int o1_region_rings(void *base, const struct o1_region_layout *l,
		    struct o1_ring *sq, struct o1_ring *cq);

static inline struct o1_ring_ctrl *
o1_region_sq_ctrl(void *base, const struct o1_region_layout *l)
{
	return (struct o1_ring_ctrl *)((uint8_t *)base + l->sq_ctrl_off);
}

static inline struct o1_ring_ctrl *
o1_region_cq_ctrl(void *base, const struct o1_region_layout *l)
{
	return (struct o1_ring_ctrl *)((uint8_t *)base + l->cq_ctrl_off);
}

static inline uint8_t *o1_region_arena(void *base,
				       const struct o1_region_layout *l)
{
	return (uint8_t *)base + l->arena_off;
}

#endif

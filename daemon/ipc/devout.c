/* Device output areas: the table of the backend's CUDA IPC areas and who
 * holds each. Loop thread only.
 *
 * Invariants: an area is held by at most one client (the one whose
 * devout names it) from its handshake to its tear-down. Once handed out,
 * an area is bound to that client's uid for the daemon's lifetime: CUDA
 * IPC mappings cannot be revoked, and a process that hung up may still
 * read the area it mapped, so only its own uid may inherit the area. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "front.h"
#include "common/log.h"

int o1_ipc_devout_init(struct o1_ipc_server *srv)
{
	uint32_t n = srv->o.n_devout_areas;

	if (!n)
		return 0;
	if (!srv->o.devout_areas)
		return -EINVAL;
	srv->devout = calloc(n, sizeof(*srv->devout));
	if (!srv->devout)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		const struct o1_wire_devout *d = &srv->o.devout_areas[i];

		if (d->rows == 0 || d->status ||
		    o1_wire_devout_check(d, d->row_floats)) {
			o1_err("ipc: device output area %u: bad description "
			       "(%u rows of %u floats, stride %u)",
			       i, d->rows, d->row_floats, d->row_stride_bytes);
			return -O1_E_CONFIG;
		}
		srv->devout[i].desc = *d;
		srv->devout[i].desc.area = i;
	}
	srv->o.devout_areas = NULL; /* the copies are in srv->devout */
	return 0;
}

/* A free area bound to UID, else a free one never handed out, else -1. */
static int find_free(const struct o1_ipc_server *srv, uid_t uid)
{
	int fresh = -1;

	for (uint32_t i = 0; i < srv->o.n_devout_areas; i++) {
		const struct o1_ipc_devout *a = &srv->devout[i];

		if (a->held)
			continue;
		if (a->bound && a->uid == uid)
			return (int)i;
		if (!a->bound && fresh < 0)
			fresh = (int)i;
	}
	return fresh;
}

int o1_ipc_devout_claim(struct o1_ipc_server *srv, uid_t uid)
{
	int i = find_free(srv, uid);

	if (i < 0)
		return -O1_E_NO_DEVOUT;
	srv->devout[i].held = 1;
	srv->devout[i].bound = 1;
	srv->devout[i].uid = uid;
	return i;
}

void o1_ipc_devout_release(struct o1_ipc_server *srv, int32_t area)
{
	if (area >= 0 && (uint32_t)area < srv->o.n_devout_areas)
		srv->devout[area].held = 0;
}

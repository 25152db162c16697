/* libo1client internals: the handle and the helpers shared by conn.c
 * (connect, handshake, reconnect, errors) and stream.c (rings, arena,
 * events). Nothing here is exported (see libo1client.map). */
#ifndef O1_CLIENT_CONN_H
#define O1_CLIENT_CONN_H

#include <stdint.h>

#include "o1/client.h"
#include "pace.h"
#include "shm/handoff.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/wire.h"

struct o1_client {
	struct o1_client_opts o;
	char *path;
	char name[O1_NAME_MAX];
	int sock;   /* control socket, -1 when disconnected */
	int efd;    /* daemon's doorbell eventfd, or -1 (futex wake) */
	void *base; /* region mapping, map_bytes long */
	size_t map_bytes;
	struct o1_region_layout l;
	struct o1_wire_welcome w;
	struct o1_ring sq; /* we produce */
	struct o1_ring cq; /* we consume */
	/* Arena allocator: absolute byte counters, [head, tail) in use. A
	 * submission's space is free once the daemon released its slot:
	 * ends[idx & mask] is the tail after submission idx was written. */
	uint64_t arena_head, arena_tail;
	uint64_t *ends;
	uint32_t reclaimed; /* submissions whose arena space is reclaimed */
	uint64_t spin_ns;
	struct o1_handoff handoff; /* submissions the daemon may not have run */
	uint32_t cpu_told;	   /* our CPU as the cq's hint last said */
	int waking; /* we rang the daemon awake; it has not taken it yet */
	uint64_t ping_seq;
	struct o1_client_pace pace; /* a stream's pace, for the wait */
	unsigned inflight;
	/* alive.c: the daemon's end closed (sticky until a reconnect), when
	 * the socket was last looked at, and whether NEED_WAKEUP was left
	 * set on the completion ring for o1_client_fd */
	int gone;
	uint64_t alive_at_ns;
	int fd_armed;
};

/* Records a printf-style message as this thread's last error; returns
 * err so callers can `return o1_client_fail(err, ...)`. */
int o1_client_fail(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Maps the region from a welcome; 0 or a negative error. */
int o1_client_attach(struct o1_client *c, int memfd);
/* Unmaps and closes everything (keeps the options). */
void o1_client_detach(struct o1_client *c);
uint64_t o1_client_now_ns(void);
/* stream.c: takes one event from the completion ring (1), or 0. */
int o1_client_take(struct o1_client *c, struct o1_event *ev);
/* alive.c: whether the daemon is gone, looking at the socket when force
 * is set or 100 ms have passed since the last look. */
int o1_client_gone(struct o1_client *c, int force);
/* alive.c: o1_client_poll found nothing: arms o1_client_fd (pollable),
 * looks at the socket, takes an event published meanwhile. Returns 1, 0
 * or O1_CLIENT_E_DAEMON_GONE. */
int o1_client_idle(struct o1_client *c, struct o1_event *ev);
/* alive.c: an event was taken: o1_client_fd need not be woken now. */
void o1_client_busy(struct o1_client *c);
/* alive.c: the daemon is gone and no event is left: unmaps the region
 * (the socket stays) and returns O1_CLIENT_E_DAEMON_GONE. */
int o1_client_gone_error(struct o1_client *c);

#endif

/* Internal state of the front loop, shared by front.c (the loop),
 * session.c (handshake, entry processing, posting), server.c (set-up
 * and tear-down) and shards.c (several front threads). One struct
 * o1_ipc_server is one front thread's loop (a shard); everything here is
 * touched by that thread only, except `stop`, `kick_ns` (atomic) and the
 * kick eventfd, and what shards.c's header names for struct
 * o1_ipc_shards. */
#ifndef O1_IPC_FRONT_H
#define O1_IPC_FRONT_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include <liburing.h>

#include "shm/cadence.h"
#include "ipc.h"
#include "shm/handoff.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/wire.h"

#define DRAIN_BATCH_MAX	  64 /* submissions per client per pass */
#define O1_IPC_LINGER_MAX 16 /* refused sockets waiting for their hello */
/* Empty doorbell wake-ups of one client within one housekeeping tick
 * (100 ms) that make a storm. A well-behaved client rings only when the
 * loop announced a sleep, after publishing, so its wake-ups find work but
 * for a rare race: 1000 a second is far beyond that, and far below what
 * a client ringing in a loop makes the loop pay (a pass and a spin per
 * wake-up, a core). */
#define O1_IPC_STORM_WAKES 100
#define O1_IPC_THROTTLE_NS 1000000000ull /* wake-ups ignored after a storm */

/* io_uring user_data: kind << 56 | slot << 32 | slot generation. */
enum o1_ipc_ud {
	O1_IPC_UD_NONE,
	O1_IPC_UD_ACCEPT,
	O1_IPC_UD_KICK,
	O1_IPC_UD_SIGNAL,
	O1_IPC_UD_TIMER,
	O1_IPC_UD_SOCK, /* a client's control socket */
	O1_IPC_UD_BELL, /* a client's doorbell: futex wait or eventfd poll */
	O1_IPC_UD_CANCEL,
};

enum o1_ipc_state {
	O1_IPC_FREE,
	O1_IPC_HELLO,  /* connected, handshake not done */
	O1_IPC_ACTIVE, /* region sent */
	O1_IPC_ADMIN,  /* admin connection: messages to ->admin */
	O1_IPC_AWAY,   /* the lead's copy of a client another front thread
			* serves (shards.c): counted, listed, not touched */
};

struct o1_ipc_client {
	enum o1_ipc_state state;
	int fd;	 /* control socket, owned */
	int efd; /* doorbell eventfd (fallback mode), owned, or -1 */
	uint32_t id;
	void *base; /* region mapping, owned, l.total_bytes long */
	struct o1_region_layout l; /* private copy of the geometry */
	struct o1_ring sq;	   /* we consume */
	struct o1_ring cq;	   /* we produce */
	struct o1_wire_limits lim;
	struct ucred cred;
	uint64_t hello_deadline_ns;
	uint32_t inflight; /* requests accepted and not yet FINAL */
	uint32_t violations;
	uint64_t violation_leak_ns; /* the count last dropped (or rose from 0) */
	uint32_t empty_wakes;	    /* this tick */
	uint64_t throttle_until_ns; /* doorbell not armed before */
	int woke;		    /* a doorbell wake-up arrived this pass */
	int wake_sock;		    /* wake it on the control socket too */
	int sock_armed, bell_armed;
	int cq_dirty;	  /* claimed completions not yet committed */
	int cq_unrung;	  /* committed this pass, doorbell not yet looked
			   * at (flush: one fence for every client) */
	struct o1_handoff handoff; /* completions it may not have taken */
	uint32_t cpu_told; /* the loop's CPU as its sq's hint last said */
	int blocked;	  /* completion ring was full this pass */
	int doomed;	  /* torn down at the end of the pass */
	int bad_stamp;	  /* an unusable sent_ns was logged */
	int32_t devout;	  /* device output area held, or -1 */
	uint8_t *scratch; /* private copies of prompt and stop lists */
	size_t scratch_bytes;
	char name[O1_NAME_MAX];
	uint32_t live_at; /* its index in the server's live list */
	/* Kept across reuse of the slot (teardown clears what precedes). */
	uint32_t gen;
};

/* One device output area (devout.c): the backend's description, the uid
 * it is bound to once handed out, and whether a client holds it. */
struct o1_ipc_devout {
	struct o1_wire_devout desc;
	uid_t uid;
	int bound;
	int held;
};

struct o1_ipc_shards;

struct o1_ipc_server {
	struct o1_ipc_opts o; /* defaults filled, lists copied */
	/* Front threads (shards.c): the lead (front 0) owns the listener,
	 * signals, hand-shakes and admin connections, and hands each new
	 * client to the front thread with the fewest. lead: front 0 (itself
	 * there); group: NULL with one front thread. */
	struct o1_ipc_server *lead;
	struct o1_ipc_shards *group;
	uint32_t front; /* this loop's index, 0: the lead */
	char *path;
	uint32_t *uids, *gids, *admins; /* copies of the allow lists */
	struct o1_ipc_consumer cons;
	struct io_uring ring;
	int lfd, kick_fd, sfd;
	int use_futex;
	/* o.max_clients + o.max_half_open slots: established connections
	 * (ACTIVE, ADMIN) take at most max_clients of them, connections
	 * waiting for their hello at most max_half_open */
	struct o1_ipc_client *clients;
	uint32_t n_slots;
	/* live[0..n_live): the slots not FREE, in no order. Every pass walks
	 * this list, so its cost follows the connected clients, not
	 * max_clients (issue 19: the spin path paid for 64 empty slots). */
	uint32_t *live;
	uint32_t n_live;
	atomic_int stop;
	int draining;
	int any_doomed;
	uint32_t posted; /* events posted during the current pass */
	uint64_t copy_ns; /* when the last valid entry was copied out */
	int slept;	 /* the current pass is the first after a sleep */
	uint8_t spin_hist; /* a bit per idle period: shorter than spin_us */
	struct o1_cadence cadence; /* the consumer's posting pace */
	uint64_t spin_until_ns;	       /* spin through a post due by then */
	uint64_t cadence_from_ns; /* that spin's start, 0: none going on */
	int accept_armed, kick_armed, sig_armed, timer_armed;
	uint64_t busy_submit_ns; /* the last submit of a busy stretch */
	struct __kernel_timespec tick;
	uint8_t *admin_buf; /* O1_ADMIN_MSG_MAX request + as much reply */
	struct o1_ipc_devout *devout; /* o.n_devout_areas */
	struct o1_ipc_stats st;
	/* Refused sockets (welcome sent) kept open until what their peer
	 * sent is read, or until their deadline: -1 for a free place. */
	int linger_fd[O1_IPC_LINGER_MAX];
	uint64_t linger_deadline_ns[O1_IPC_LINGER_MAX];
	/* When the consumer last kicked (CLOCK_MONOTONIC ns): written by its
	 * thread, read by the loop to date a post it was woken for
	 * (cadence.h); a line of its own, so the consumer's store never
	 * takes the loop's fields away from it. A stale read dates one
	 * arrival by the pass instead. */
	_Alignas(64) _Atomic uint64_t kick_ns;
};

/* The I-th live client; callers walk I downwards, so a teardown during the
 * walk (the last entry moves into the freed place) skips nobody. */
static inline struct o1_ipc_client *o1_ipc_live(struct o1_ipc_server *srv,
						uint32_t i)
{
	return &srv->clients[srv->live[i]];
}

int o1_ipc_arm(struct o1_ipc_server *srv, enum o1_ipc_ud kind,
	       struct o1_ipc_client *c, uint32_t seq);
struct o1_ipc_client *o1_ipc_client_find(struct o1_ipc_server *srv,
					 uint32_t client_id);
/* Marks a client for tear-down at the end of the pass; why is logged. */
void o1_ipc_client_doom(struct o1_ipc_server *srv, struct o1_ipc_client *c,
			const char *why);
/* Handshake on a readable HELLO-state socket. */
void o1_ipc_handshake(struct o1_ipc_server *srv, struct o1_ipc_client *c);
/* Sends a failed welcome and dooms the client; why (NULL: the status's
 * text) goes to the log, rate-limited per uid. */
void o1_ipc_refuse(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		   int status, const char *why);
/* Serves one readable admin connection. */
void o1_ipc_admin_serve(struct o1_ipc_server *srv, struct o1_ipc_client *c);
void o1_ipc_client_fill_info(const struct o1_ipc_client *c,
			     struct o1_ipc_client_info *out);
/* Counts a protocol violation; dooms the client at the limit. */
void o1_ipc_violation(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		      int err, const char *why);
/* Tears down every doomed client (end of a pass, or destroy). */
void o1_ipc_reap(struct o1_ipc_server *srv);
/* Tears down a doomed connection that never said hello at once, so its
 * slot serves the next one of a burst: no consumer ever knew it. Only
 * outside any walk of the live list (the accept path). */
void o1_ipc_drop_silent(struct o1_ipc_server *srv, struct o1_ipc_client *c);
/* Device output areas (devout.c): copies the descriptions at create;
 * claim gives a free area for UID (one bound to UID first, then an
 * unbound one): its index or -O1_E_NO_DEVOUT; release accepts -1. */
int o1_ipc_devout_init(struct o1_ipc_server *srv);
int o1_ipc_devout_claim(struct o1_ipc_server *srv, uid_t uid);
void o1_ipc_devout_release(struct o1_ipc_server *srv, int32_t area);
/* Drains up to a batch of submissions; returns how many were handled. */
int o1_ipc_drain(struct o1_ipc_server *srv, struct o1_ipc_client *c);
/* Guards (guard.c): what connections and clients may cost the loop. */
/* A new connection: 0 when it may take a slot (evicting the oldest
 * connection still waiting for its hello when their budget is full), or
 * the refusal it gets (over its uid's cap). */
int o1_ipc_admit(struct o1_ipc_server *srv, const struct ucred *cred);
/* Established connections (ACTIVE, ADMIN) now; a handshake past
 * max_clients is refused. */
uint32_t o1_ipc_established(struct o1_ipc_server *srv);
/* A doorbell wake-up of c found no entry: counted, and a storm of them
 * is a violation that throttles c. */
void o1_ipc_empty_wake(struct o1_ipc_server *srv, struct o1_ipc_client *c);
/* Per tick: ends the tick's wake-up count and lets violations leak. */
void o1_ipc_guard_tick(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		       uint64_t now);
static inline int o1_ipc_throttled(const struct o1_ipc_client *c,
				   uint64_t now)
{
	return now < c->throttle_until_ns;
}
uint64_t o1_ipc_now_ns(void);
/* Cancels C's socket poll and doorbell wait on srv's io_uring. */
void o1_ipc_disarm(struct o1_ipc_server *srv, struct o1_ipc_client *c);
/* Adds C to srv's live list, or takes it off (outside any walk of it). */
void o1_ipc_live_add(struct o1_ipc_server *srv, struct o1_ipc_client *c);
void o1_ipc_live_remove(struct o1_ipc_server *srv, struct o1_ipc_client *c);
/* Makes C a FREE slot of the next generation (what it held released). */
void o1_ipc_slot_free(struct o1_ipc_client *c);
/* Serves srv's clients until stop (front.c): one front thread's loop. */
int o1_ipc_loop(struct o1_ipc_server *srv);
/* Sets up one loop's own part (server.c): client table, io_uring, kick
 * eventfd; the lead adds the listener and signals. */
int o1_ipc_loop_setup(struct o1_ipc_server *srv);
void o1_ipc_loop_fini(struct o1_ipc_server *srv);
/* Applies draining to srv's own clients (its thread). */
void o1_ipc_set_draining_local(struct o1_ipc_server *srv, int on);
/* Several front threads (shards.c); each is a no-op, or answers for one
 * thread, when srv->group is NULL. */
int o1_ipc_shards_create(struct o1_ipc_server *lead);
void o1_ipc_shards_destroy(struct o1_ipc_server *lead);
int o1_ipc_shards_run(struct o1_ipc_server *lead);
/* Front F of the lead's server (the lead itself without a group). */
struct o1_ipc_server *o1_ipc_front_of(struct o1_ipc_server *lead, uint32_t f);
/* Lead, after a client's welcome: moves it to the front thread with the
 * fewest clients (it may stay). Outside any walk of the live list. */
void o1_ipc_hand_over(struct o1_ipc_server *lead, struct o1_ipc_client *c);
/* A kick arrived: takes the clients handed to srv (or, on the lead, the
 * slots given back) and the draining state. */
void o1_ipc_shard_inbox(struct o1_ipc_server *srv);
/* Teardown of a client on a front thread other than the lead: its slot
 * goes back to the lead. */
void o1_ipc_shard_give_back(struct o1_ipc_server *srv, uint32_t idx);
/* Established clients the lead handed away (counted against max_clients)
 * and those of UID among them. */
uint32_t o1_ipc_away(const struct o1_ipc_server *lead, int by_uid, uid_t uid);
/* A front thread other than the lead copies its counters for the lead's
 * o1_ipc_server_stats: after each pass that did work, before it sleeps,
 * when it stops (shards.c's head). No-op on the lead. */
void o1_ipc_shard_publish(struct o1_ipc_server *srv);

#endif

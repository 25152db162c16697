/* The daemon's front end: the control socket, per-client shared regions
 * and the io_uring front loop that drains submission rings and wakes
 * clients. The daemon (scheduler) plugs in through struct o1_ipc_consumer.
 *
 * Threading: o1_ipc_server_run() runs the loop on the calling thread; every
 * consumer callback runs on that thread, and o1_ipc_post() must be called
 * on it too (from a callback, usually ->poll). Other threads may call only
 * o1_ipc_server_kick() and o1_ipc_server_stop(), which make the loop call
 * ->poll (resp. return) soon. An engine thread hands its events to the
 * loop through its own queue (an o1_ring over private memory serves: see
 * shm/ring.h), kicks, and ->poll posts them.
 *
 * With front_threads > 1 there are several loops (front threads), each
 * serving its own clients: o1_ipc_server_run() runs front 0 (the lead) on
 * the calling thread and starts the others. A client belongs to one front
 * for its lifetime; ->submit, ->cancel, ->disconnect, ->observe_wakeup
 * and ->refused for it run on its front's thread, with that front's srv
 * (o1_ipc_server_front() says which); ->poll runs on every front with its
 * own srv, and o1_ipc_post() on a front's srv reaches only that front's
 * clients (-ENOENT for the others). ->admin and ->signal run on the lead
 * only. So callbacks of different fronts may run at once: a consumer that
 * keeps state across clients must guard it (o1d's engine: engine.c). With
 * one front thread nothing of this changes.
 *
 * Trust: clients are untrusted. Every entry is copied out of shared memory
 * and validated (o1_wire_decode_sub), prompts and stop lists are copied
 * into private scratch before the consumer sees them, and quotas are
 * enforced here. A request's own mistakes (a value out of range, over a
 * limit the welcome gave, over the in-flight quota) fail that request
 * alone with a typed FINAL. Protocol abuse (unknown ops, padding, flags,
 * offsets outside the arena, a sustained storm of empty wake-ups) also
 * fails the entry (a FINAL, or an ERROR event when it has no request id)
 * and counts as a violation; the count decays over time, and a client
 * reaching max_violations, or corrupting its ring indices, is
 * disconnected. A client storming its doorbell is also throttled: its
 * wake-ups are ignored for a while (its ring is still read on every
 * pass). Connections, hello or not, are capped per uid. A full
 * completion ring blocks only that client: o1_ipc_post() returns -EAGAIN
 * and the loop stops draining that client's submissions until it reads. */
#ifndef O1_IPC_H
#define O1_IPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/wire.h"

struct o1_ipc_server;

struct o1_ipc_opts {
	size_t sz;		 /* sizeof(struct o1_ipc_opts) */
	const char *socket_path; /* default /run/o1d/o1d.sock; copied */
	uint32_t socket_mode;	 /* default 0660 */
	/* Peers allowed to connect: uid in allowed_uids, or primary or
	 * supplementary gid in allowed_gids. Both empty: the daemon's uid
	 * and root only. Copied by o1_ipc_server_create. */
	const uint32_t *allowed_uids;
	size_t n_allowed_uids;
	const uint32_t *allowed_gids;
	size_t n_allowed_gids;
	uint32_t spin_us;     /* busy-poll window before sleeping; default 50 */
	uint32_t max_clients; /* default 64 */
	uint32_t sq_entries;  /* default and maximum ring sizes, arena */
	uint32_t cq_entries;
	uint32_t arena_bytes;
	uint32_t max_inflight;	    /* per client; default 64 */
	uint32_t max_prompt_tokens; /* per request; default 8192 */
	uint32_t max_prompt_bytes;  /* per request; default 65536 */
	uint32_t max_tokens;	    /* per request; default 4096 */
	uint32_t max_stop_ids;	    /* default 16 */
	uint32_t max_stop_bytes;    /* default 1024 */
	uint32_t vocab_size;	    /* 0: ids unchecked here */
	uint32_t max_violations;    /* disconnect at this count; default 8 */
	uint32_t hello_timeout_ms;  /* handshake deadline; default 2000 */
	/* Connections that have not said hello yet have their own budget
	 * beside max_clients; a new one beyond it evicts the oldest (its
	 * refusal: -O1_E_QUOTA). Default 16. */
	uint32_t max_half_open;
	/* Connections of one uid at once, hello or not; 0: no cap but
	 * max_clients. */
	uint32_t max_clients_per_uid;
	/* A client's violation count drops by one each period (a leaky
	 * bucket: a client that slips now and then is never cut off);
	 * default 60000. */
	uint32_t violation_decay_ms;
	int force_eventfd;  /* 1: doorbells through eventfd + POLL_ADD even
			     * when IORING_OP_FUTEX_WAIT is available */
	int handle_signals; /* 1: block SIGINT/SIGTERM/SIGHUP and read them
			     * through a signalfd in the loop */
	/* Uids allowed on admin connections (O1_HELLO_ADMIN); empty: the
	 * daemon's uid and root. Copied like allowed_uids. */
	const uint32_t *admin_uids;
	size_t n_admin_uids;
	/* Device output areas (CUDA IPC) the backend made at start-up, one
	 * description each (rows > 0, status 0; opaque handles), copied. A
	 * client whose hello sets O1_HELLO_DEVICE_OUT gets a free one for
	 * its lifetime. An area stays bound to the uid of its first holder:
	 * a process can keep a CUDA IPC mapping after it hung up, so an area
	 * is never handed to another uid. None: such hellos are answered
	 * -O1_E_NO_DEVOUT in the welcome's devout.status. */
	const struct o1_wire_devout *devout_areas;
	uint32_t n_devout_areas;
	/* Grammar bytes a request may carry (O1_SUBMIT_GRAMMAR); 0 (no
	 * default): the daemon takes no grammars and such requests fail
	 * with -O1_E_UNSUPPORTED (their own mistake, not a violation). */
	uint32_t max_grammar_bytes;
	/* (protocol 6) the format the model's chat template writes tool
	 * calls in, told in the welcome (enum o1_wire_tool_format) */
	uint8_t tool_format;
	/* Front threads serving clients, each its own io_uring and spin
	 * (see Threading); 0 or 1: one. At most O1_IPC_FRONTS_MAX. */
	uint32_t front_threads;
};

#define O1_IPC_FRONTS_MAX 64

/* What the daemon may know about a connected client. */
struct o1_ipc_client_info {
	uint32_t client_id;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	char name[O1_NAME_MAX];
	uint32_t inflight; /* requests accepted and not yet FINAL */
	uint32_t violations;
	uint32_t region_bytes;
	int32_t devout_area; /* the client's device output area, or -1 */
};

/* A validated request, borrowed by ->submit until it returns. */
struct o1_ipc_request {
	uint32_t client_id;
	uid_t uid; /* the peer's credentials (SO_PEERCRED at connect) */
	gid_t gid;
	pid_t pid;
	struct o1_wire_submit params; /* the validated private copy */
	const uint8_t *prompt; /* text bytes or uint32 ids, private copy */
	uint32_t prompt_bytes;
	const uint32_t *stop_ids;
	uint32_t n_stop_ids;
	const uint8_t *stop_strings; /* (u8 len, bytes) repeated, validated */
	uint32_t stop_strings_bytes;
	uint32_t n_stop_strings;
	/* the client's device output area (index into opts.devout_areas),
	 * -1 when it has none; a SUBMIT with O1_SUBMIT_DEVICE_LOGITS from a
	 * client without one never reaches ->submit: its FINAL carries
	 * -O1_E_NO_DEVOUT */
	int32_t devout_area;
	/* O1_SUBMIT_GRAMMAR: params.grammar_len bytes (private copy) of
	 * kind params.grammar_kind, not checked beyond the limit; NULL
	 * without */
	const uint8_t *grammar;
};

struct o1_ipc_consumer {
	void *ctx;
	/* A new request. Return 0 to own it (it must later get exactly one
	 * FINAL through o1_ipc_post), or a negative error and the loop sends
	 * the FINAL with that error. */
	int (*submit)(void *ctx, struct o1_ipc_server *srv,
		      const struct o1_ipc_request *req);
	/* The client asked to cancel; the consumer still posts the FINAL. */
	void (*cancel)(void *ctx, struct o1_ipc_server *srv, uint32_t client_id,
		       uint64_t req_id);
	/* The client is gone: drop its requests, post nothing more to it. */
	void (*disconnect)(void *ctx, struct o1_ipc_server *srv,
			   uint32_t client_id);
	/* Called on every loop pass and after o1_ipc_server_kick(). Events
	 * posted here count as work: the loop keeps busy-polling while the
	 * consumer posts, and sleeps only after spin_us without any. */
	void (*poll)(void *ctx, struct o1_ipc_server *srv);
	/* One message from an admin connection (req, len bytes, borrowed):
	 * write the reply into reply (cap bytes) and return its length, or
	 * a negative error, answered with an empty message. NULL: admin
	 * connections are refused with -O1_E_UNSUPPORTED. */
	int (*admin)(void *ctx, struct o1_ipc_server *srv,
		     const struct o1_ipc_client_info *peer, const void *req,
		     size_t len, void *reply, size_t cap);
	/* A signal read through the signalfd; NULL: SIGINT/SIGTERM stop. */
	void (*signal)(void *ctx, struct o1_ipc_server *srv, int signo);
	/* One wake-up latency sample: ns from the client publishing a valid
	 * PING or SUBMIT (its sent_ns) to the loop copying it out; slept: 1
	 * when the loop found it after sleeping, 0 while busy-polling.
	 * Samples outside [0, O1_IPC_WAKEUP_MAX_NS] are only counted (stats
	 * wakeup_invalid). May be NULL. */
	void (*observe_wakeup)(void *ctx, uint64_t ns, int slept);
	/* A request the loop answered itself with an error FINAL (draining,
	 * quota, no device output area, a bad entry, or ->submit's error
	 * ERR), so the consumer's metrics count it like the requests it
	 * finishes. Not called for cancels. May be NULL. */
	void (*refused)(void *ctx, int err);
};

#define O1_IPC_WAKEUP_MAX_NS 10000000000ull /* 10 s */

struct o1_ipc_stats {
	uint64_t clients_connected; /* now */
	uint64_t clients_total;
	uint64_t clients_refused; /* handshake failed or uid refused */
	uint64_t client_deaths;	  /* hang-ups with requests in flight (a
				   * normal hang-up is not a death) */
	uint64_t violations;
	uint64_t kicked_out; /* disconnected for violations */
	uint64_t requests;   /* accepted by the consumer */
	uint64_t pings;
	uint64_t admin_requests;
	uint64_t wakeups_spin; /* work found while busy-polling */
	uint64_t sleeps;       /* times the loop slept in io_uring */
	uint64_t handoffs;     /* CPU yielded to a client that had not yet
				* taken its completions (shm/handoff.h) */
	uint64_t cadence_wakes; /* sleeps ended early for a post due by the
				 * consumer's pace (cadence.h) */
	uint64_t cadence_caught;  /* posts that came while the loop spun
				   * for them: no wake-up of the loop */
	uint64_t cadence_spin_ns; /* time spun for the cadence, caught or
				   * not */
	uint64_t cq_full;      /* posts refused for backpressure */
	/* Wake-up latency of valid PING and SUBMIT entries (sent_ns to
	 * copy-out), by how the loop found them: samples and their sum. */
	uint64_t wakeup_spin_n, wakeup_spin_ns;
	uint64_t wakeup_sleep_n, wakeup_sleep_ns;
	uint64_t wakeup_invalid; /* sent_ns 0, in the future or > 10 s old */
	uint64_t wakeups_empty;	 /* doorbell wake-ups that found no entry */
	uint64_t wake_storms;	 /* clients throttled for a storm of them */
	uint64_t half_open_evicted; /* hello-less connections refused for a
				     * newer one (max_half_open) */
	uint64_t uid_refused;	    /* over max_clients_per_uid */
	uint64_t ticks;		    /* housekeeping passes (every 100 ms) */
	uint64_t room_wakes; /* wake-ups by a reader that made room in a full
			      * completion ring */
	uint64_t tick_refills; /* full rings a housekeeping pass found with
				* room made: refills no wake-up brought */
	int futex_wait;		 /* 1: IORING_OP_FUTEX_WAIT in use */
};

/* Binds the socket (replacing a stale one), sets up io_uring and the client
 * table. Returns 0 and *out, or -errno. */
int o1_ipc_server_create(const struct o1_ipc_opts *opts,
			 const struct o1_ipc_consumer *consumer,
			 struct o1_ipc_server **out);
/* Closes every client, unlinks the socket, frees. Accepts NULL. Must not
 * run concurrently with o1_ipc_server_run. */
void o1_ipc_server_destroy(struct o1_ipc_server *srv);
/* Runs the front loop until o1_ipc_server_stop(). Returns 0 or -errno. */
int o1_ipc_server_run(struct o1_ipc_server *srv);
/* Thread-safe, async-signal-safe. Stop ends every front thread; kick
 * wakes the front whose srv it is given, kick_front front FRONT of srv's
 * server (an engine thread kicks the fronts its requests belong to). */
void o1_ipc_server_stop(struct o1_ipc_server *srv);
void o1_ipc_server_kick(struct o1_ipc_server *srv);
void o1_ipc_server_kick_front(struct o1_ipc_server *srv, uint32_t front);
/* Front threads of srv's server, and which one srv is (0: the lead,
 * the srv o1_ipc_server_create gave). Any thread. */
uint32_t o1_ipc_server_fronts(const struct o1_ipc_server *srv);
uint32_t o1_ipc_server_front(const struct o1_ipc_server *srv);
/* New submissions get FINAL -O1_E_DRAINING while on; clients see
 * O1_RING_DRAINING in their submission ring flags. Lead's thread; the
 * other fronts take it at their next kick. */
void o1_ipc_server_set_draining(struct o1_ipc_server *srv, int on);
/* The lead's counters plus the other fronts' as of the end of their last
 * pass that did work (shards.c): a count is in once the pass that made
 * it ends, so one made before the pass that posted an answer the caller
 * has seen is in. Lead's thread. */
void o1_ipc_server_stats(const struct o1_ipc_server *srv,
			 struct o1_ipc_stats *out);

/* Fills out with up to cap connected (data) clients; returns how many
 * there are (may exceed cap). Lead's thread only: for a client another
 * front serves, inflight and violations are 0 (that front's). */
int o1_ipc_clients(const struct o1_ipc_server *srv,
		   struct o1_ipc_client_info *out, size_t cap);

/* Posts one event (TOKEN, LOGPROBS, FINAL or ERROR) to a client's completion
 * ring and wakes it if it sleeps. A FINAL releases the request's in-flight
 * slot. Returns 0, -EAGAIN (ring full: retry later), -ENOENT (no such
 * client: it is gone) or -EINVAL (not an event). Loop thread only. */
int o1_ipc_post(struct o1_ipc_server *srv, uint32_t client_id,
		const union o1_wire_entry *ev);
/* Helpers that build the event. text may split a UTF-8 code point;
 * n_ids <= O1_WIRE_IDS_MAX, text_len <= O1_WIRE_TEXT_MAX. */
int o1_ipc_post_token(struct o1_ipc_server *srv, uint32_t client_id,
		      uint64_t req_id, const uint32_t *ids, unsigned n_ids,
		      const char *text, size_t text_len);
/* The n (1..O1_WIRE_LOGPROBS_MAX) top alternatives of the token at
 * position, posted after its TOKEN: all entries or none (-EAGAIN). */
int o1_ipc_post_logprobs(struct o1_ipc_server *srv, uint32_t client_id,
			 uint64_t req_id, uint32_t position,
			 const uint32_t *ids, const float *logprobs,
			 unsigned n);
int o1_ipc_post_final(struct o1_ipc_server *srv, uint32_t client_id,
		      uint64_t req_id, enum o1_finish_reason reason, int error,
		      uint32_t prompt_tokens, uint32_t generated_tokens);

#endif

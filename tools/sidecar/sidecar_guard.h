/* The guard in front of libmicrohttpd: what a client can hold before its
 * request is read.
 *
 * The guard owns the listening socket. It accepts each connection,
 * refuses one more from an address that has max_per_address open (429,
 * then closed; Unix-socket peers are not counted) or beyond
 * max_connections in all (503), waits (in one thread, all at once) for
 * the first bytes and refuses a request line that does not start like
 * one (400 at once, not at a timeout: binary garbage, TLS to a plain
 * port), then hands the socket to libmicrohttpd (MHD_add_connection,
 * which owns it from then on).
 *
 * Deadline for reading a request, head and body together (slowloris: a
 * byte now and then resets libmicrohttpd's idle timeout, never this): a
 * request must be read within read_timeout_ms of its connection's accept
 * (a connection that sends nothing at all: the shorter of that and
 * idle_timeout_ms, then 408) or, on a kept-alive connection, within
 * idle_timeout_ms + read_timeout_ms of the previous answer; else the
 * guard shuts the socket down (through a duplicate it keeps, so it never
 * touches a descriptor libmicrohttpd has closed and the kernel has
 * reused) and libmicrohttpd closes the connection. The request handler says when a request was read
 * (o1_sidecar_guard_read) and answered (o1_sidecar_guard_answered).
 *
 * Threads: the guard's own (accept, first bytes, deadlines), the
 * connections' (libmicrohttpd's notifications, the two calls above); one
 * mutex guards the connection table. Invariants: an address's count is
 * the number of its connections accepted and not yet closed; every
 * connection libmicrohttpd holds has one table entry from its STARTED to
 * its CLOSED notification, and its duplicate descriptor lives exactly as
 * long.
 */
#ifndef O1_SIDECAR_GUARD_H
#define O1_SIDECAR_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

struct o1_sidecar_guard_opts {
	int listen_fd; /* borrowed; the guard accepts on it */
	uint32_t max_connections; /* accepted and not closed, in all */
	uint32_t max_per_address; /* 0: no cap */
	uint32_t read_timeout_ms;
	uint32_t idle_timeout_ms;
};

struct o1_sidecar_guard_stats {
	uint64_t accepted;
	uint64_t refused_address; /* over max_per_address: 429 */
	uint64_t refused_full;	  /* over max_connections: 503 */
	uint64_t refused_garbage; /* not a request line: 400 */
	uint64_t timed_out;	  /* request not read in time */
};

struct o1_sidecar_guard;

/* Makes the connection table (no thread yet). */
int o1_sidecar_guard_create(const struct o1_sidecar_guard_opts *o,
			    struct o1_sidecar_guard **out);
/* Starts accepting for MHD (started with MHD_USE_NO_LISTEN_SOCKET and
 * this guard's notify; borrowed until stop). Returns 0 or -errno. */
int o1_sidecar_guard_start(struct o1_sidecar_guard *g, struct MHD_Daemon *mhd);
/* Stops accepting (joins the thread; connections not handed over are
 * closed). libmicrohttpd's connections stay: stop it before destroy. */
void o1_sidecar_guard_stop(struct o1_sidecar_guard *g);
/* After MHD_stop_daemon. Accepts NULL. */
void o1_sidecar_guard_destroy(struct o1_sidecar_guard *g);
/* MHD_OPTION_NOTIFY_CONNECTION's callback (CLS: the guard). */
void o1_sidecar_guard_notify(void *cls, struct MHD_Connection *mc,
			     void **socket_context,
			     enum MHD_ConnectionNotificationCode toe);
/* MC's request is read (head and body): no deadline until answered. */
void o1_sidecar_guard_read(struct o1_sidecar_guard *g,
			   struct MHD_Connection *mc);
/* MC's request is over: the next must be read in time. */
void o1_sidecar_guard_answered(struct o1_sidecar_guard *g,
			       struct MHD_Connection *mc);
void o1_sidecar_guard_stats(struct o1_sidecar_guard *g,
			    struct o1_sidecar_guard_stats *out);

#endif

/* The sidecar's side of o1d: a pool of libo1client handles (a handle is
 * used by one HTTP connection thread at a time, never shared), daemon
 * status for /health/ready and the model name, and one generation's event
 * loop, which notices a vanished HTTP client or a passed deadline and
 * cancels the request in the daemon at once.
 *
 * Invariants: a handle in the pool has no request in flight (a generation
 * that ends early cancels and drains its request to the FINAL, or the
 * handle is closed instead of returned); the pool holds at most `cap`
 * idle handles. */
#ifndef O1_SIDECAR_BACKEND_H
#define O1_SIDECAR_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include <o1/client.h>

#include "sidecar_request.h"

struct o1_sidecar_backend;

/* SOCKET is copied; at most CAP idle handles are kept. A request without
 * max_tokens gets the daemon's context (its welcome's limit), at most
 * MAX_CONTEXT when that is not 0 (the sidecar's model.max_context_tokens). */
int o1_sidecar_backend_create(const char *socket, unsigned cap,
			      uint32_t max_context,
			      struct o1_sidecar_backend **out);
void o1_sidecar_backend_destroy(struct o1_sidecar_backend *b);

struct o1_sidecar_status {
	bool up;	 /* the daemon answered */
	bool draining;	 /* it refuses new work or is not ready */
	char model[128]; /* "" when unknown */
};

/* Asks o1d's admin "status"; when admin is refused (another uid), a ping
 * through a pooled handle tells up/down only. Returns 0 (see ST). */
int o1_sidecar_backend_status(struct o1_sidecar_backend *b,
			      struct o1_sidecar_status *st);
/* Which daemon the socket belongs to: a number that changes whenever a
 * daemon (re)creates it (its inode and change time), 0 when there is no
 * socket. What was learnt of the daemon (its model) holds for one value. */
uint64_t o1_sidecar_backend_epoch(const struct o1_sidecar_backend *b);

/* One request's run. */
struct o1_sidecar_gen {
	struct o1_sidecar_backend *b;
	struct o1_client *c;		      /* from the pool while running */
	const struct o1_sidecar_request *req; /* borrowed until gen_end */
	bool reused; /* c came from the pool, not a new connect */
	bool got_event;
	uint64_t req_id;
	int http_fd;	     /* the HTTP connection, watched for a hang-up */
	int64_t deadline_ns; /* CLOCK_MONOTONIC */
	bool finished;	     /* FINAL seen */
	bool broken;	     /* transport failed: handle not reusable */
	uint64_t t_submit_ns, t_first_ns, t_end_ns;
	uint32_t prompt_tokens, generated_tokens; /* from the FINAL */
	uint32_t streamed_tokens; /* ids the TOKENs carried (no FINAL when
				   * the daemon died: the access log counts
				   * these then) */
	/* gen_start's O1_CLIENT_E_CONTEXT or _BOUNDS: the request's value
	 * over the daemon's limit, found before anything was sent */
	struct o1_client_refusal refusal;
};

/* Submits REQ (borrowed until gen_end). HTTP_FD may be -1. A stale pooled
 * handle (the daemon restarted) is replaced and the request submitted
 * again, at submission or when the connection turns out dead before the
 * first event.
 * Returns 0, or -ECONNREFUSED/-ENOENT/-ECONNRESET (daemon down), -EAGAIN,
 * -E2BIG, -EINVAL, or O1_CLIENT_E_CONTEXT/_BOUNDS (g->refusal says which
 * value is over which limit; nothing reached o1d). */
int o1_sidecar_gen_start(struct o1_sidecar_gen *g, struct o1_sidecar_backend *b,
			 const struct o1_sidecar_request *req, int http_fd,
			 uint32_t timeout_ms);
/* Next event of the request: 1; -ECONNABORTED when the HTTP client hung
 * up and -ETIMEDOUT past the deadline (both cancel the request in the
 * daemon); -ECONNRESET when the daemon went away. */
int o1_sidecar_gen_next(struct o1_sidecar_gen *g, struct o1_event *ev);
/* Cancels the request if it has not finished, drains it, and gives the
 * handle back (or closes it). Accepts a gen never started. */
void o1_sidecar_gen_end(struct o1_sidecar_gen *g);

uint64_t o1_sidecar_now_ns(void);

#endif

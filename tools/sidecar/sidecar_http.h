/* The HTTP front of o1-sidecar: libmicrohttpd with one thread per
 * connection (a generation blocks its own connection's thread only, and
 * that thread owns the libo1client handle it took from the pool), routing
 * of the OpenAI endpoints, health, models and metrics, body and
 * concurrency limits, and the access log.
 *
 * Concurrency: at most max_concurrent generations run at once (one more
 * is answered 429); at most 2 * max_concurrent + 32 connections are
 * open, max_per_address of them from one address, and each request must
 * be read within read_timeout_ms (the guard, sidecar_guard.h, accepts
 * and hands connections to libmicrohttpd).
 *
 * Drain: http_drain turns readiness to 503 while requests are still
 * served, http_quiesce stops accepting, http_in_flight tells when the
 * last request is done; o1_sidecar.c times the steps. */
#ifndef O1_SIDECAR_HTTP_H
#define O1_SIDECAR_HTTP_H

#include <stdint.h>
#include <stdio.h>

#include "sidecar_backend.h"

struct o1_sidecar_http_opts {
	const char *listen;	    /* "host:port" (port 0: any) or
				     * "unix:/path"; borrowed */
	const char *model_name;	    /* configured; "" asks the daemon */
	const char *model_fallback; /* when neither knows one */
	const char *metrics_dir;    /* pinned BPF maps; NULL: default */
	const char *metrics_shm;    /* the fallback file; NULL: default */
	int metrics_mode;	    /* enum o1_metrics_mode: AUTO, BPF, SHM */
	uint32_t max_body_bytes;
	uint32_t max_concurrent;
	uint32_t request_timeout_ms;
	uint32_t idle_timeout_s;
	uint32_t read_timeout_ms; /* head and body (sidecar_guard.h) */
	uint32_t max_per_address; /* connections; 0: no cap */
	FILE *access_log; /* borrowed; NULL: no access log */
};

struct o1_sidecar_http;

/* Binds and starts serving; B is borrowed until http_stop. The bound
 * address (with the real port) is written to BOUND (CAP bytes). Returns
 * 0, -errno (bind failure, logged) or -O1_E_CONFIG (bad listen). */
int o1_sidecar_http_start(const struct o1_sidecar_http_opts *o,
			  struct o1_sidecar_backend *b, char *bound, size_t cap,
			  struct o1_sidecar_http **out);
/* Drain, step 1 (SIGTERM): /health/ready answers 503 "draining" from now
 * on and every response closes its connection; requests are still
 * served. */
void o1_sidecar_http_drain(struct o1_sidecar_http *h);
/* Drain, step 2: closes the listening socket (new connections are
 * refused); the open ones are still served. Returns 0 or -EIO. */
int o1_sidecar_http_quiesce(struct o1_sidecar_http *h);
/* Requests begun and not yet done (streams included). */
unsigned o1_sidecar_http_in_flight(struct o1_sidecar_http *h);
/* Stops accepting, ends the connections and frees. Accepts NULL. */
void o1_sidecar_http_stop(struct o1_sidecar_http *h);

#endif

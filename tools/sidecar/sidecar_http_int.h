/* Internals shared by sidecar_http.c (server, routing, small endpoints)
 * and sidecar_generate.c (the two completion endpoints).
 *
 * A struct o1_sidecar_conn lives for one HTTP request. It is referenced by
 * the request (until libmicrohttpd's completed callback) and, for a
 * streaming answer, by the response's reader; the last reference writes
 * the access log line and frees it. */
#ifndef O1_SIDECAR_HTTP_INT_H
#define O1_SIDECAR_HTTP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <microhttpd.h>

#include "metrics/metrics_reader.h"
#include "sidecar_guard.h"
#include "sidecar_http.h"
#include "sidecar_log.h"
#include "sidecar_request.h"

struct o1_sidecar_http {
	struct MHD_Daemon *mhd;
	struct o1_sidecar_http_opts o;
	struct o1_sidecar_backend *b;
	atomic_uint running;	 /* generations in progress */
	atomic_uint in_flight;	 /* requests begun, not yet freed */
	atomic_bool draining;	 /* SIGTERM: readiness 503, close conns */
	pthread_mutex_t lock;	 /* model, metrics */
	char model[128];	 /* the daemon's, "" until known */
	uint64_t model_epoch;	 /* the daemon model[] is of (backend_epoch) */
	char fallback[128];
	char metrics_dir[256];
	char metrics_shm[320];
	struct o1_metrics_reader *metrics;
	struct o1_sidecar_guard *guard;
	int listen_fd;
	char unix_path[108];
};

struct o1_sidecar_conn {
	struct o1_sidecar_http *h;
	struct MHD_Connection *mhd;
	int fd; /* the HTTP socket */
	atomic_int refs;
	char *body;
	size_t len, cap;
	bool too_large;
	bool answered;
	struct o1_sidecar_access log;
};

/* Queues JSON (owned; freed here) with STATUS. Returns an MHD result. */
enum MHD_Result o1_sidecar_reply_json(struct o1_sidecar_conn *c,
				      unsigned status, char *json);
/* Queues an OpenAI error body. */
enum MHD_Result o1_sidecar_reply_error(struct o1_sidecar_conn *c,
				       unsigned status, const char *message,
				       const char *type, const char *param,
				       const char *code);
/* The served model name, copied into BUF: the configured one, else the
 * daemon's, asked once per daemon start (o1_sidecar_backend_epoch: a
 * restart with another model is noticed at the next request), else the
 * fallback. -ENOTCONN (BUF still filled) when no daemon answers. */
int o1_sidecar_model(struct o1_sidecar_http *h, char *buf, size_t cap);
/* While draining, R closes its connection after it is sent, so a
 * balancer does not reuse it. */
void o1_sidecar_closing(struct o1_sidecar_conn *c, struct MHD_Response *r);
/* Drops one reference; the last logs the request and frees C. */
void o1_sidecar_conn_put(struct o1_sidecar_conn *c);
/* POST /v1/chat/completions and /v1/completions with the body in C. */
enum MHD_Result o1_sidecar_generate(struct o1_sidecar_conn *c,
				    enum o1_sidecar_kind kind);

#endif

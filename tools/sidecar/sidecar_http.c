/* See sidecar_http.h and sidecar_http_int.h: the libmicrohttpd daemon,
 * the listening socket (made here, so "port 0" and Unix sockets work the
 * same way), request bodies, routing, and the health, models and metrics
 * endpoints. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "common/log.h"
#include "metrics/metrics_render.h"
#include "sidecar_http_int.h"
#include "sidecar_response.h"

#define THREAD_STACK_BYTES (512 * 1024)

enum MHD_Result o1_sidecar_reply_json(struct o1_sidecar_conn *c,
				      unsigned status, char *json)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!json)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(json), json,
					    MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(json);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	o1_sidecar_closing(c, r);
	ret = MHD_queue_response(c->mhd, status, r);
	MHD_destroy_response(r);
	c->log.status = (int)status;
	c->answered = true;
	return ret;
}

enum MHD_Result o1_sidecar_reply_error(struct o1_sidecar_conn *c,
				       unsigned status, const char *message,
				       const char *type, const char *param,
				       const char *code)
{
	char *json = NULL;

	if (!c->log.finish)
		c->log.finish = code ? code : type;
	if (o1_sidecar_error_json(message, type, param, code, &json))
		return MHD_NO;
	return o1_sidecar_reply_json(c, status, json);
}

/* Records what status said of the daemon whose socket is EPOCH. */
static void learn_model(struct o1_sidecar_http *h, uint64_t epoch,
			const struct o1_sidecar_status *st)
{
	pthread_mutex_lock(&h->lock);
	snprintf(h->model, sizeof(h->model), "%s", st->model);
	h->model_epoch = epoch;
	pthread_mutex_unlock(&h->lock);
}

static void served_name(struct o1_sidecar_http *h, char *buf, size_t cap)
{
	pthread_mutex_lock(&h->lock);
	snprintf(buf, cap, "%s",
		 h->o.model_name && h->o.model_name[0] ? h->o.model_name
		 : h->model[0]			       ? h->model
						       : h->fallback);
	pthread_mutex_unlock(&h->lock);
}

int o1_sidecar_model(struct o1_sidecar_http *h, char *buf, size_t cap)
{
	uint64_t epoch = o1_sidecar_backend_epoch(h->b), known;
	struct o1_sidecar_status st;
	int ret = 0;

	pthread_mutex_lock(&h->lock);
	known = h->model_epoch;
	pthread_mutex_unlock(&h->lock);
	if (!epoch) {
		ret = -ENOTCONN;
	} else if (epoch != known) {
		o1_sidecar_backend_status(h->b, &st);
		if (st.up)
			learn_model(h, epoch, &st);
		else
			ret = -ENOTCONN;
	}
	served_name(h, buf, cap);
	return ret;
}

void o1_sidecar_closing(struct o1_sidecar_conn *c, struct MHD_Response *r)
{
	if (atomic_load(&c->h->draining))
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
}

void o1_sidecar_conn_put(struct o1_sidecar_conn *c)
{
	struct o1_sidecar_http *h = c->h;

	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	c->log.t_end_ns = o1_sidecar_now_ns();
	if (h->o.access_log)
		o1_sidecar_access_log(h->o.access_log, &c->log);
	free(c->body);
	free(c);
	atomic_fetch_sub(&h->in_flight, 1); /* last: drain may stop now */
}

static enum MHD_Result not_found(struct o1_sidecar_conn *c)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "no route for %s %s", c->log.method,
		 c->log.path);
	return o1_sidecar_reply_error(c, MHD_HTTP_NOT_FOUND, msg,
				      "invalid_request_error", NULL,
				      "not_found");
}

static enum MHD_Result wrong_method(struct o1_sidecar_conn *c,
				    const char *allowed)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "%s %s: use %s", c->log.method, c->log.path,
		 allowed);
	return o1_sidecar_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, msg,
				      "invalid_request_error", NULL,
				      "method_not_allowed");
}

static enum MHD_Result health_ready(struct o1_sidecar_conn *c)
{
	struct o1_sidecar_status st;
	cJSON *o = cJSON_CreateObject();
	char *json;
	bool ready;

	o1_sidecar_backend_status(c->h->b, &st);
	if (atomic_load(&c->h->draining))
		st.draining = true; /* the sidecar's own SIGTERM drain */
	ready = st.up && !st.draining;
	cJSON_AddStringToObject(o, "status",
				ready	      ? "ready"
				: st.draining ? "draining"
					      : "daemon_down");
	if (st.model[0])
		cJSON_AddStringToObject(o, "model", st.model);
	json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return o1_sidecar_reply_json(
	    c, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, json);
}

static cJSON *model_object(const char *name)
{
	cJSON *m = cJSON_CreateObject();

	cJSON_AddStringToObject(m, "id", name);
	cJSON_AddStringToObject(m, "object", "model");
	cJSON_AddNumberToObject(m, "created", (double)time(NULL));
	cJSON_AddStringToObject(m, "owned_by", "o1d");
	return m;
}

static enum MHD_Result models(struct o1_sidecar_conn *c, const char *one)
{
	uint64_t epoch = o1_sidecar_backend_epoch(c->h->b);
	struct o1_sidecar_status st;
	char name[128], msg[200];
	cJSON *o, *data;
	char *json;

	/* asked every time: a list is never answered for a daemon gone */
	o1_sidecar_backend_status(c->h->b, &st);
	if (!st.up)
		return o1_sidecar_reply_error(
		    c, MHD_HTTP_SERVICE_UNAVAILABLE,
		    "o1d is not running: no model is served now",
		    "server_error", NULL, "daemon_unavailable");
	if (epoch)
		learn_model(c->h, epoch, &st);
	served_name(c->h, name, sizeof(name));
	if (one && strcmp(one, name) && strcmp(one, "default")) {
		snprintf(msg, sizeof(msg), "The model '%.100s' does not exist",
			 one);
		return o1_sidecar_reply_error(c, MHD_HTTP_NOT_FOUND, msg,
					      "invalid_request_error", "model",
					      "model_not_found");
	}
	if (one) {
		o = model_object(one);
	} else {
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "object", "list");
		data = cJSON_AddArrayToObject(o, "data");
		cJSON_AddItemToArray(data, model_object(name));
	}
	json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return o1_sidecar_reply_json(c, MHD_HTTP_OK, json);
}

/* Opens the configured metrics of a running o1d into h->metrics: in auto
 * mode a dead daemon's pins are skipped for the file. 0, -ENOENT, -ESRCH
 * (only a dead daemon's metrics: its pid in *dead) or -errno. */
static int metrics_open(struct o1_sidecar_http *h, uint64_t *dead)
{
	struct o1_metrics_reader_opts ro = {
	    .sz = sizeof(ro),
	    .mode = (enum o1_metrics_mode)h->o.metrics_mode,
	    .bpf_dir = h->metrics_dir[0] ? h->metrics_dir : NULL,
	    .shm_path = h->metrics_shm[0] ? h->metrics_shm : NULL};
	bool found_dead = false;
	uint64_t pid = 0;
	int ret;

	for (int pass = 0; pass < 2; pass++) {
		ret = o1_metrics_reader_open(&ro, &h->metrics);
		if (ret && ret != -ENOENT && ret != -ENOTDIR)
			return ret;
		if (!ret && o1_metrics_reader_owner(h->metrics, &pid) == 1)
			return 0;
		if (!ret) {
			found_dead = true;
			*dead = pid;
			o1_metrics_reader_close(h->metrics);
			h->metrics = NULL;
		}
		if (ro.mode != O1_METRICS_MODE_AUTO)
			break;
		ro.mode = O1_METRICS_MODE_SHM; /* the pins were dead or none */
	}
	return found_dead ? -ESRCH : -ENOENT;
}

/* Renders a snapshot of the running o1d's metrics into a malloc'd string;
 * -errno (-ESRCH: only a dead daemon's, its pid in *dead). Metrics kept
 * open are dropped once their writer is gone (a restart: the new daemon's
 * are opened). */
static int metrics_text(struct o1_sidecar_http *h, char **text, size_t *len,
			uint64_t *dead)
{
	struct o1_metrics_snapshot s;
	uint64_t pid;
	FILE *f;
	int ret = 0;

	pthread_mutex_lock(&h->lock);
	if (h->metrics && (o1_metrics_reader_snapshot(h->metrics, &s) ||
			   o1_metrics_reader_owner(h->metrics, &pid) != 1)) {
		o1_metrics_reader_close(h->metrics);
		h->metrics = NULL;
	}
	if (!h->metrics) {
		ret = metrics_open(h, dead);
		if (!ret)
			ret = o1_metrics_reader_snapshot(h->metrics, &s);
	}
	pthread_mutex_unlock(&h->lock);
	if (ret)
		return ret;
	f = open_memstream(text, len);
	if (!f)
		return -errno;
	ret = o1_metrics_render_prometheus(&s, f);
	if (fclose(f) && !ret)
		ret = -EIO;
	return ret;
}

static enum MHD_Result metrics(struct o1_sidecar_conn *c)
{
	struct MHD_Response *r;
	enum MHD_Result q;
	char *text = NULL, msg[160];
	uint64_t dead = 0;
	size_t len = 0;
	int ret = metrics_text(c->h, &text, &len, &dead);

	if (ret) {
		free(text);
		if (ret == -ESRCH)
			snprintf(msg, sizeof(msg),
				 "no metrics from o1d: metrics are from pid "
				 "%llu, which is not running",
				 (unsigned long long)dead);
		else
			snprintf(msg, sizeof(msg), "no metrics from o1d: %s",
				 o1_strerror(ret));
		return o1_sidecar_reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE,
					      msg, "server_error", NULL,
					      "metrics_unavailable");
	}
	r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type",
				"text/plain; version=0.0.4; charset=utf-8");
	o1_sidecar_closing(c, r);
	q = MHD_queue_response(c->mhd, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	c->log.status = MHD_HTTP_OK;
	c->answered = true;
	return q;
}

static enum MHD_Result simple(struct o1_sidecar_conn *c, const char *status)
{
	char *json = NULL;

	if (asprintf(&json, "{\"status\":\"%s\"}", status) < 0)
		return MHD_NO;
	return o1_sidecar_reply_json(c, MHD_HTTP_OK, json);
}

static enum MHD_Result get_route(struct o1_sidecar_conn *c, const char *p)
{
	if (!strcmp(p, "/health/live"))
		return simple(c, "alive");
	if (!strcmp(p, "/health/ready"))
		return health_ready(c);
	if (!strcmp(p, "/v1/models"))
		return models(c, NULL);
	if (!strncmp(p, "/v1/models/", 11))
		return models(c, p + 11);
	if (!strcmp(p, "/metrics"))
		return metrics(c);
	return not_found(c);
}

static enum MHD_Result route(struct o1_sidecar_conn *c, const char *path)
{
	bool post = !strcmp(c->log.method, "POST");
	bool chat = !strcmp(path, "/v1/chat/completions");
	char msg[160];

	o1_sidecar_guard_read(c->h->guard, c->mhd);
	if (c->too_large) {
		snprintf(msg, sizeof(msg),
			 "the request body is larger than %u bytes",
			 c->h->o.max_body_bytes);
		return o1_sidecar_reply_error(c, 413, msg,
					      "invalid_request_error", NULL,
					      "request_too_large");
	}
	if (chat || !strcmp(path, "/v1/completions"))
		return post ? o1_sidecar_generate(c,
						  chat ? O1_SIDECAR_CHAT
						       : O1_SIDECAR_COMPLETION)
			    : wrong_method(c, "POST");
	if (!strcmp(c->log.method, "GET") || !strcmp(c->log.method, "HEAD"))
		return get_route(c, path);
	return not_found(c);
}

static void client_name(struct o1_sidecar_conn *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c->mhd, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char host[64] = "unix", port[16] = "";
	socklen_t len = sizeof(struct sockaddr_in6);

	if (ci && ci->client_addr && ci->client_addr->sa_family != AF_UNIX &&
	    getnameinfo(ci->client_addr, len, host, sizeof(host), port,
			sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(host, sizeof(host), "?");
	snprintf(c->log.client, sizeof(c->log.client), "%s%s%s", host,
		 port[0] ? ":" : "", port);
	ci = MHD_get_connection_info(c->mhd, MHD_CONNECTION_INFO_CONNECTION_FD);
	c->fd = ci ? ci->connect_fd : -1;
}

/* First call of a request: its state, and an early 413 by Content-Length
 * (the body is then never read). */
static enum MHD_Result begin(struct o1_sidecar_http *h,
			     struct MHD_Connection *mc, const char *url,
			     const char *method, void **con_cls)
{
	struct o1_sidecar_conn *c = calloc(1, sizeof(*c));
	const char *cl;

	if (!c)
		return MHD_NO;
	c->h = h;
	c->mhd = mc;
	atomic_init(&c->refs, 1);
	atomic_fetch_add(&h->in_flight, 1);
	c->log.t_start_ns = o1_sidecar_now_ns();
	snprintf(c->log.method, sizeof(c->log.method), "%s", method);
	snprintf(c->log.path, sizeof(c->log.path), "%s", url);
	client_name(c);
	*con_cls = c;
	cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
					 MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > h->o.max_body_bytes) {
		c->too_large = true;
		return route(c, url);
	}
	return MHD_YES;
}

static void take_body(struct o1_sidecar_conn *c, const char *data, size_t n)
{
	size_t cap;
	char *p;

	c->log.bytes_in += n;
	if (c->too_large || c->len + n > c->h->o.max_body_bytes) {
		c->too_large = true;
		return;
	}
	if (c->len + n + 1 > c->cap) {
		cap = c->cap ? c->cap * 2 : 4096;
		while (cap < c->len + n + 1)
			cap *= 2;
		p = realloc(c->body, cap);
		if (!p) {
			c->too_large = true;
			return;
		}
		c->body = p;
		c->cap = cap;
	}
	memcpy(c->body + c->len, data, n);
	c->len += n;
	c->body[c->len] = 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct o1_sidecar_conn *c = *con_cls;

	(void)version;
	if (!c)
		return begin(cls, mc, url, method, con_cls);
	if (*upload_size) {
		if (!c->answered)
			take_body(c, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (c->answered)
		return MHD_YES;
	return route(c, url);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct o1_sidecar_conn *c = *con_cls;

	o1_sidecar_guard_answered(((struct o1_sidecar_http *)cls)->guard, mc);
	if (!c)
		return;
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !c->log.finish)
		c->log.aborted = true;
	*con_cls = NULL;
	o1_sidecar_conn_put(c);
}

static int split_hostport(const char *s, char *host, size_t cap,
			  const char **port)
{
	const char *colon = strrchr(s, ':');
	size_t n;

	if (!colon || !colon[1])
		return -O1_E_CONFIG;
	n = (size_t)(colon - s);
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		s++;
		n -= 2;
	}
	if (n == 0 || n >= cap)
		return -O1_E_CONFIG;
	memcpy(host, s, n);
	host[n] = 0;
	*port = colon + 1;
	return 0;
}

static int listen_unix(struct o1_sidecar_http *h, const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(a.sun_path) || !path[0]) {
		o1_err("sidecar: unix socket path '%s' is empty or longer "
		       "than %zu bytes",
		       path, sizeof(a.sun_path) - 1);
		return -O1_E_CONFIG;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128)) {
		int err = -errno;

		o1_err("sidecar: cannot listen on unix:%s: %s", path,
		       strerror(-err));
		close(fd);
		return err;
	}
	snprintf(h->unix_path, sizeof(h->unix_path), "%s", path);
	h->listen_fd = fd;
	return 0;
}

static int listen_tcp(struct o1_sidecar_http *h, const char *spec)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	const char *port;
	char host[256];
	int fd = -1, one = 1, ret;

	if (split_hostport(spec, host, sizeof(host), &port)) {
		o1_err("sidecar: listen '%s' is not host:port or unix:PATH",
		       spec);
		return -O1_E_CONFIG;
	}
	ret = getaddrinfo(host, port, &hints, &ai);
	if (ret) {
		o1_err("sidecar: listen '%s': %s", spec, gai_strerror(ret));
		return -O1_E_CONFIG;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) ||
	    listen(fd, 512)) {
		ret = -errno;
		o1_err("sidecar: cannot listen on %s: %s", spec,
		       strerror(-ret));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return ret;
	}
	freeaddrinfo(ai);
	h->listen_fd = fd;
	return 0;
}

static void bound_name(const struct o1_sidecar_http *h, char *buf, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[64], port[16];

	if (h->unix_path[0]) {
		snprintf(buf, cap, "unix:%s", h->unix_path);
		return;
	}
	if (getsockname(h->listen_fd, (struct sockaddr *)&ss, &len) ||
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port,
			sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(buf, cap, "?");
		return;
	}
	snprintf(buf, cap, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host,
		 port);
}

/* libmicrohttpd without a listening socket: the guard accepts and hands
 * connections over. */
static int start_mhd(struct o1_sidecar_http *h)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
			 MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET |
			 MHD_USE_ITC;
	struct o1_sidecar_guard_opts go = {
	    .listen_fd = h->listen_fd,
	    .max_connections = 2 * h->o.max_concurrent + 32,
	    .max_per_address = h->o.max_per_address,
	    .read_timeout_ms = h->o.read_timeout_ms,
	    .idle_timeout_ms = h->o.idle_timeout_s * 1000};
	int ret = o1_sidecar_guard_create(&go, &h->guard);

	if (ret)
		return ret;
	h->mhd = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, h, MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
	    o1_sidecar_guard_notify, h->guard, MHD_OPTION_CONNECTION_LIMIT,
	    go.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)h->o.idle_timeout_s, MHD_OPTION_THREAD_STACK_SIZE,
	    (size_t)THREAD_STACK_BYTES, MHD_OPTION_END);
	if (!h->mhd) {
		o1_err("sidecar: libmicrohttpd did not start");
		return -EIO;
	}
	return o1_sidecar_guard_start(h->guard, h->mhd);
}

int o1_sidecar_http_start(const struct o1_sidecar_http_opts *o,
			  struct o1_sidecar_backend *b, char *bound, size_t cap,
			  struct o1_sidecar_http **out)
{
	struct o1_sidecar_http *h = calloc(1, sizeof(*h));
	int ret;

	if (!h)
		return -ENOMEM;
	h->o = *o;
	h->b = b;
	h->listen_fd = -1;
	pthread_mutex_init(&h->lock, NULL);
	snprintf(h->model, sizeof(h->model), "%s",
		 o->model_name ? o->model_name : "");
	snprintf(h->fallback, sizeof(h->fallback), "%s",
		 o->model_fallback ? o->model_fallback : "o1d");
	snprintf(h->metrics_dir, sizeof(h->metrics_dir), "%s",
		 o->metrics_dir ? o->metrics_dir : "");
	snprintf(h->metrics_shm, sizeof(h->metrics_shm), "%s",
		 o->metrics_shm ? o->metrics_shm : "");
	ret = !strncmp(o->listen, "unix:", 5) ? listen_unix(h, o->listen + 5)
					      : listen_tcp(h, o->listen);
	if (!ret)
		ret = start_mhd(h);
	if (ret) {
		o1_sidecar_http_stop(h);
		return ret;
	}
	bound_name(h, bound, cap);
	*out = h;
	return 0;
}

void o1_sidecar_http_drain(struct o1_sidecar_http *h)
{
	atomic_store(&h->draining, true);
}

/* The guard accepts (libmicrohttpd has no listening socket): stopping it
 * stops accepting; connections it had not handed over yet (no request
 * byte read) are closed. */
int o1_sidecar_http_quiesce(struct o1_sidecar_http *h)
{
	if (h->listen_fd < 0)
		return 0;
	o1_sidecar_guard_stop(h->guard);
	close(h->listen_fd);
	h->listen_fd = -1;
	if (h->unix_path[0])
		unlink(h->unix_path);
	h->unix_path[0] = 0;
	return 0;
}

unsigned o1_sidecar_http_in_flight(struct o1_sidecar_http *h)
{
	return atomic_load(&h->in_flight);
}

void o1_sidecar_http_stop(struct o1_sidecar_http *h)
{
	if (!h)
		return;
	o1_sidecar_guard_stop(h->guard);
	if (h->mhd)
		MHD_stop_daemon(h->mhd);
	o1_sidecar_guard_destroy(h->guard);
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	if (h->unix_path[0])
		unlink(h->unix_path);
	o1_metrics_reader_close(h->metrics);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* The guard (see sidecar_guard.h). ent[] has one entry per connection the
 * guard accepted and libmicrohttpd has not closed: PENDING (the guard's
 * socket, waiting for its first bytes), HANDED (given to libmicrohttpd,
 * its STARTED notification not seen yet: matched by descriptor, which
 * cannot be reused before libmicrohttpd closes it) or LIVE (fd is the
 * guard's duplicate). An address's count is the entries with its key. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>

#include "common/log.h"
#include "sidecar_guard.h"
#include "sidecar_input.h"

#define PEEK_BYTES   O1_SIDECAR_START_BYTES
#define TICK_MS	     100 /* deadline checks while connections are open */
#define DRAIN_BYTES  65536

enum ent_state { E_FREE, E_PENDING, E_HANDED, E_LIVE };

struct ent {
	enum ent_state state;
	int fd;
	bool shut;
	uint8_t key_len; /* 0: not counted (a Unix peer) */
	uint8_t key[17]; /* family, then the address bytes */
	uint64_t deadline_ns; /* 0: none */
	struct sockaddr_storage addr;
	socklen_t addr_len;
};

struct o1_sidecar_guard {
	struct o1_sidecar_guard_opts o;
	struct MHD_Daemon *mhd;
	pthread_mutex_t lock;
	struct ent *ent;
	uint32_t n_ent;
	struct pollfd *pfd; /* guard thread: wake, listen, pending */
	uint32_t *pent;	    /* the entry of pfd[2 + i] */
	int wake[2];
	pthread_t thread;
	bool started;
	struct o1_sidecar_guard_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int o1_sidecar_guard_create(const struct o1_sidecar_guard_opts *o,
			    struct o1_sidecar_guard **out)
{
	struct o1_sidecar_guard *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->o = *o;
	g->n_ent = o->max_connections ? o->max_connections : 1;
	g->ent = calloc(g->n_ent, sizeof(*g->ent));
	g->pfd = calloc(g->n_ent + 2, sizeof(*g->pfd));
	g->pent = calloc(g->n_ent, sizeof(*g->pent));
	g->wake[0] = g->wake[1] = -1;
	pthread_mutex_init(&g->lock, NULL);
	if (!g->ent || !g->pfd || !g->pent || pipe2(g->wake, O_CLOEXEC)) {
		o1_sidecar_guard_destroy(g);
		return -ENOMEM;
	}
	*out = g;
	return 0;
}

void o1_sidecar_guard_destroy(struct o1_sidecar_guard *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; g->ent && i < g->n_ent; i++)
		if (g->ent[i].state == E_PENDING || g->ent[i].state == E_LIVE)
			close(g->ent[i].fd);
	if (g->wake[0] >= 0)
		close(g->wake[0]);
	if (g->wake[1] >= 0)
		close(g->wake[1]);
	pthread_mutex_destroy(&g->lock);
	free(g->ent);
	free(g->pfd);
	free(g->pent);
	free(g);
}

/* ---- accepting ---- */

/* The counting key of address A: family and address bytes; 0 bytes for a
 * Unix peer (not counted: file permissions decide who connects). */
static uint8_t address_key(const struct sockaddr_storage *a, uint8_t *key)
{
	if (a->ss_family == AF_INET) {
		key[0] = AF_INET;
		memcpy(key + 1, &((const struct sockaddr_in *)a)->sin_addr, 4);
		return 5;
	}
	if (a->ss_family == AF_INET6) {
		key[0] = AF_INET6;
		memcpy(key + 1, &((const struct sockaddr_in6 *)a)->sin6_addr,
		       16);
		return 17;
	}
	return 0;
}

static uint32_t address_count(const struct o1_sidecar_guard *g,
			      const uint8_t *key, uint8_t len)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < g->n_ent; i++)
		n += g->ent[i].state != E_FREE && g->ent[i].key_len == len &&
		     !memcmp(g->ent[i].key, key, len);
	return n;
}

static struct ent *free_ent(struct o1_sidecar_guard *g)
{
	for (uint32_t i = 0; i < g->n_ent; i++)
		if (g->ent[i].state == E_FREE)
			return &g->ent[i];
	return NULL;
}

/* Answers STATUS with an OpenAI error body (best effort: the socket is
 * non-blocking), reads what the client sent so the close does not reset
 * the answer away, and closes FD. */
static void refuse(int fd, unsigned status, const char *reason,
		   const char *code, const char *msg)
{
	char body[384], head[192], junk[4096];
	int nb, nh;
	size_t left = DRAIN_BYTES;
	ssize_t n;

	nb = snprintf(body, sizeof(body),
		      "{\"error\":{\"message\":\"%s\",\"type\":\"%s\","
		      "\"param\":null,\"code\":\"%s\"}}",
		      msg,
		      status == 429   ? "rate_limit_error"
		      : status == 503 ? "server_error"
				      : "invalid_request_error",
		      code);
	nh = snprintf(head, sizeof(head),
		      "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
		      "Connection: close\r\nContent-Length: %d\r\n\r\n",
		      status, reason, nb);
	if (send(fd, head, (size_t)nh, MSG_NOSIGNAL | MSG_DONTWAIT) == nh)
		send(fd, body, (size_t)nb, MSG_NOSIGNAL | MSG_DONTWAIT);
	shutdown(fd, SHUT_WR);
	while (left && (n = recv(fd, junk, sizeof(junk), MSG_DONTWAIT)) > 0)
		left -= (size_t)n < left ? (size_t)n : left;
	close(fd);
}

/* Takes one connection from the listening socket; false when none. */
static bool accept_one(struct o1_sidecar_guard *g)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);
	uint8_t key[17], klen;
	struct ent *e = NULL;
	uint64_t wait_ms;
	bool full = false;
	char msg[128];
	int fd = accept4(g->o.listen_fd, (struct sockaddr *)&a, &len,
			 SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			o1_warn("sidecar: accept: %s", strerror(errno));
		return false;
	}
	klen = address_key(&a, key);
	/* nothing sent yet: idle as well as unread */
	wait_ms = g->o.read_timeout_ms < g->o.idle_timeout_ms
		      ? g->o.read_timeout_ms
		      : g->o.idle_timeout_ms;
	pthread_mutex_lock(&g->lock);
	g->st.accepted++;
	if (g->o.max_per_address && klen &&
	    address_count(g, key, klen) >= g->o.max_per_address) {
		g->st.refused_address++;
	} else if (!(e = free_ent(g))) {
		g->st.refused_full++;
		full = true;
	} else {
		*e = (struct ent){.state = E_PENDING,
				  .fd = fd,
				  .key_len = klen,
				  .deadline_ns =
				      now_ns() + wait_ms * 1000000ull,
				  .addr = a,
				  .addr_len = len};
		memcpy(e->key, key, klen);
	}
	pthread_mutex_unlock(&g->lock);
	if (e)
		return true;
	snprintf(msg, sizeof(msg),
		 full ? "the server has %u connections open; try again"
		      : "too many connections from this address (at most %u)",
		 full ? g->n_ent : g->o.max_per_address);
	refuse(fd, full ? 503 : 429,
	       full ? "Service Unavailable" : "Too Many Requests",
	       "too_many_connections", msg);
	return true;
}

/* ---- the first bytes ---- */

/* Frees E (locked). */
static void release(struct o1_sidecar_guard *g, struct ent *e)
{
	(void)g;
	e->state = E_FREE;
	e->key_len = 0;
}

/* Pending E has bytes (or hung up): hands it to libmicrohttpd, refuses
 * it, or drops it. */
static void first_bytes(struct o1_sidecar_guard *g, struct ent *e)
{
	uint8_t b[PEEK_BYTES];
	ssize_t n = recv(e->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
	int fd = e->fd;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	pthread_mutex_lock(&g->lock);
	if (n > 0 && o1_sidecar_request_start(b, (size_t)n)) {
		e->state = E_HANDED;
		pthread_mutex_unlock(&g->lock);
		if (MHD_add_connection(g->mhd, fd,
				       (const struct sockaddr *)&e->addr,
				       e->addr_len) == MHD_YES)
			return;
		pthread_mutex_lock(&g->lock); /* MHD closed it */
		if (e->state == E_HANDED)
			release(g, e);
		pthread_mutex_unlock(&g->lock);
		return;
	}
	if (n > 0)
		g->st.refused_garbage++;
	release(g, e);
	pthread_mutex_unlock(&g->lock);
	if (n > 0)
		refuse(fd, 400, "Bad Request", "bad_request",
		       "not an HTTP request line");
	else
		close(fd);
}

/* ---- deadlines ---- */

/* Pending connections past their deadline get a 408 and are closed;
 * libmicrohttpd's are shut down. */
static void enforce(struct o1_sidecar_guard *g)
{
	uint64_t now = now_ns();
	int late[64];
	uint32_t n_late = 0;

	pthread_mutex_lock(&g->lock);
	for (uint32_t i = 0; i < g->n_ent; i++) {
		struct ent *e = &g->ent[i];

		if (!e->deadline_ns || now < e->deadline_ns || e->shut)
			continue;
		if (e->state == E_LIVE) {
			shutdown(e->fd, SHUT_RDWR);
			e->shut = true;
			g->st.timed_out++;
		} else if (e->state == E_PENDING && n_late < 64) {
			late[n_late++] = e->fd;
			release(g, e);
			g->st.timed_out++;
		}
	}
	pthread_mutex_unlock(&g->lock);
	for (uint32_t i = 0; i < n_late; i++)
		refuse(late[i], 408, "Request Timeout", "request_timeout",
		       "the request was not sent in time");
}

/* The poll set: the wake pipe, the listening socket, pending sockets.
 * Returns its size and whether any connection is open (*open). */
static nfds_t poll_set(struct o1_sidecar_guard *g, bool *open)
{
	nfds_t n = 2;

	g->pfd[0] = (struct pollfd){.fd = g->wake[0], .events = POLLIN};
	g->pfd[1] = (struct pollfd){.fd = g->o.listen_fd, .events = POLLIN};
	*open = false;
	pthread_mutex_lock(&g->lock);
	for (uint32_t i = 0; i < g->n_ent; i++) {
		*open |= g->ent[i].state != E_FREE;
		if (g->ent[i].state != E_PENDING)
			continue;
		g->pent[n - 2] = i;
		g->pfd[n++] = (struct pollfd){.fd = g->ent[i].fd,
					      .events = POLLIN};
	}
	pthread_mutex_unlock(&g->lock);
	return n;
}

static void *guard_main(void *arg)
{
	struct o1_sidecar_guard *g = arg;

	for (;;) {
		bool open;
		nfds_t n = poll_set(g, &open);

		if (poll(g->pfd, n, open ? TICK_MS : -1) < 0 && errno != EINTR)
			o1_warn("sidecar: guard poll: %s", strerror(errno));
		if (g->pfd[0].revents)
			return NULL;
		for (nfds_t i = 2; i < n; i++)
			if (g->pfd[i].revents)
				first_bytes(g, &g->ent[g->pent[i - 2]]);
		if (g->pfd[1].revents)
			for (int k = 0; k < 64 && accept_one(g); k++)
				;
		enforce(g);
	}
}

int o1_sidecar_guard_start(struct o1_sidecar_guard *g, struct MHD_Daemon *mhd)
{
	int fl = fcntl(g->o.listen_fd, F_GETFL), err;

	g->mhd = mhd;
	/* accept_one takes connections until none is left */
	if (fl < 0 || fcntl(g->o.listen_fd, F_SETFL, fl | O_NONBLOCK))
		return -errno;
	err = -pthread_create(&g->thread, NULL, guard_main, g);
	if (err)
		o1_err("sidecar: cannot start the guard: %s", strerror(-err));
	g->started = !err;
	return err;
}

void o1_sidecar_guard_stop(struct o1_sidecar_guard *g)
{
	if (!g || !g->started)
		return;
	if (write(g->wake[1], "x", 1) != 1)
		o1_warn("sidecar: cannot wake the guard: %s", strerror(errno));
	pthread_join(g->thread, NULL);
	g->started = false;
	pthread_mutex_lock(&g->lock);
	for (uint32_t i = 0; i < g->n_ent; i++)
		if (g->ent[i].state == E_PENDING) {
			close(g->ent[i].fd);
			release(g, &g->ent[i]);
		}
	pthread_mutex_unlock(&g->lock);
}

/* ---- libmicrohttpd's side ---- */

static struct ent *handed(struct o1_sidecar_guard *g, int fd)
{
	for (uint32_t i = 0; i < g->n_ent; i++)
		if (g->ent[i].state == E_HANDED && g->ent[i].fd == fd)
			return &g->ent[i];
	return NULL;
}

static void on_started(struct o1_sidecar_guard *g, struct MHD_Connection *mc,
		       void **socket_context)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ent *e;

	pthread_mutex_lock(&g->lock);
	e = ci ? handed(g, ci->connect_fd) : NULL;
	if (e) {
		e->fd = fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0);
		if (e->fd < 0) /* no deadline then, but counted */
			e->deadline_ns = 0;
		e->state = E_LIVE;
	}
	*socket_context = e;
	pthread_mutex_unlock(&g->lock);
}

void o1_sidecar_guard_notify(void *cls, struct MHD_Connection *mc,
			     void **socket_context,
			     enum MHD_ConnectionNotificationCode toe)
{
	struct o1_sidecar_guard *g = cls;
	struct ent *e = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		on_started(g, mc, socket_context);
		return;
	}
	if (!e)
		return;
	pthread_mutex_lock(&g->lock);
	if (e->fd >= 0)
		close(e->fd);
	release(g, e);
	pthread_mutex_unlock(&g->lock);
	*socket_context = NULL;
}

static struct ent *entry_of(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

void o1_sidecar_guard_read(struct o1_sidecar_guard *g,
			   struct MHD_Connection *mc)
{
	struct ent *e = entry_of(mc);

	if (!e)
		return;
	pthread_mutex_lock(&g->lock);
	e->deadline_ns = 0;
	pthread_mutex_unlock(&g->lock);
}

void o1_sidecar_guard_answered(struct o1_sidecar_guard *g,
			       struct MHD_Connection *mc)
{
	struct ent *e = entry_of(mc);
	uint64_t ms = (uint64_t)g->o.idle_timeout_ms + g->o.read_timeout_ms;

	if (!e)
		return;
	pthread_mutex_lock(&g->lock);
	if (e->state == E_LIVE && e->fd >= 0)
		e->deadline_ns = now_ns() + ms * 1000000ull;
	pthread_mutex_unlock(&g->lock);
}

void o1_sidecar_guard_stats(struct o1_sidecar_guard *g,
			    struct o1_sidecar_guard_stats *out)
{
	pthread_mutex_lock(&g->lock);
	*out = g->st;
	pthread_mutex_unlock(&g->lock);
}

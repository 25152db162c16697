/* Front-end set-up and tear-down: options with defaults, the io_uring (and
 * its FUTEX_WAIT probe), the listener, the kick eventfd, the signalfd and
 * the client table, all allocated here once. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "common/error.h"
#include "front.h"
#include "common/log.h"

#define O1_IORING_OP_FUTEX_WAIT 51
#define DEF(field, v)                                                          \
	do {                                                                   \
		if (!o->field)                                                 \
			o->field = (v);                                        \
	} while (0)

static void fill_defaults(struct o1_ipc_opts *o)
{
	if (!o->socket_path)
		o->socket_path = "/run/o1d/o1d.sock";
	DEF(socket_mode, 0660);
	DEF(spin_us, 50);
	DEF(max_clients, 64);
	DEF(sq_entries, 256);
	DEF(cq_entries, 1024);
	DEF(arena_bytes, 1u << 20);
	DEF(max_inflight, 64);
	DEF(max_prompt_tokens, 8192);
	DEF(max_prompt_bytes, 65536);
	DEF(max_tokens, 4096);
	DEF(max_stop_ids, 16);
	DEF(max_stop_bytes, 1024);
	DEF(max_violations, 8);
	DEF(hello_timeout_ms, 2000);
	DEF(max_half_open, 16);
	DEF(violation_decay_ms, 60000);
}

static int copy_opts(struct o1_ipc_server *srv, const struct o1_ipc_opts *in)
{
	struct o1_ipc_opts *o = &srv->o;
	size_t n = in->sz < sizeof(*o) ? in->sz : sizeof(*o);

	memcpy(o, in, n);
	o->sz = sizeof(*o);
	fill_defaults(o);
	if ((uint64_t)o->max_clients + o->max_half_open > 0xffff) {
		o1_err("ipc: max_clients %u + max_half_open %u above 65535",
		       o->max_clients, o->max_half_open);
		return -O1_E_CONFIG;
	}
	srv->n_slots = o->max_clients + o->max_half_open;
	srv->path = strdup(o->socket_path);
	srv->uids = calloc(o->n_allowed_uids + 1, sizeof(uint32_t));
	srv->gids = calloc(o->n_allowed_gids + 1, sizeof(uint32_t));
	srv->admins = calloc(o->n_admin_uids + 1, sizeof(uint32_t));
	srv->admin_buf = malloc(2 * O1_ADMIN_MSG_MAX);
	if (!srv->path || !srv->uids || !srv->gids || !srv->admins ||
	    !srv->admin_buf)
		return -ENOMEM;
	if (o->n_admin_uids)
		memcpy(srv->admins, o->admin_uids, o->n_admin_uids * 4);
	o->admin_uids = srv->admins;
	if (o->n_allowed_uids)
		memcpy(srv->uids, o->allowed_uids, o->n_allowed_uids * 4);
	if (o->n_allowed_gids)
		memcpy(srv->gids, o->allowed_gids, o->n_allowed_gids * 4);
	o->socket_path = srv->path;
	o->allowed_uids = srv->uids;
	o->allowed_gids = srv->gids;
	return 0;
}

static int probe_futex(struct o1_ipc_server *srv)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(&srv->ring);
	int ok;

	if (!p)
		return 0;
	ok = io_uring_opcode_supported(p, O1_IORING_OP_FUTEX_WAIT);
	io_uring_free_probe(p);
	return ok;
}

static int setup_signals(struct o1_ipc_server *srv)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))
		return -EINVAL;
	srv->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	return srv->sfd < 0 ? -errno : 0;
}

int o1_ipc_loop_setup(struct o1_ipc_server *srv)
{
	int ret;

	srv->lfd = srv->kick_fd = srv->sfd = -1;
	srv->ring.ring_fd = -1;
	for (int i = 0; i < O1_IPC_LINGER_MAX; i++)
		srv->linger_fd[i] = -1;
	srv->clients = calloc(srv->n_slots, sizeof(*srv->clients));
	srv->live = calloc(srv->n_slots, sizeof(*srv->live));
	if (!srv->clients || !srv->live)
		return -ENOMEM;
	for (uint32_t i = 0; i < srv->n_slots; i++) {
		srv->clients[i].fd = srv->clients[i].efd = -1;
		srv->clients[i].devout = -1;
	}
	ret = io_uring_queue_init(256 + 4 * srv->n_slots, &srv->ring, 0);
	if (ret) {
		o1_err("ipc: io_uring_queue_init: %s", strerror(-ret));
		return ret;
	}
	srv->use_futex = !srv->o.force_eventfd && probe_futex(srv);
	srv->st.futex_wait = srv->use_futex;
	srv->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (srv->kick_fd < 0)
		return -errno;
	srv->tick.tv_nsec = 100000000;
	return 0;
}

void o1_ipc_loop_fini(struct o1_ipc_server *srv)
{
	if (srv->ring.ring_fd >= 0)
		io_uring_queue_exit(&srv->ring);
	if (srv->kick_fd >= 0)
		close(srv->kick_fd);
	free(srv->clients);
	free(srv->live);
}

/* The lead's part: its loop, signals, the listener, the other fronts. */
static int setup(struct o1_ipc_server *srv)
{
	int ret = o1_ipc_loop_setup(srv);

	if (ret)
		return ret;
	if (srv->o.handle_signals) {
		ret = setup_signals(srv);
		if (ret)
			return ret;
	}
	ret = o1_ipc_listen(srv->path, srv->o.socket_mode, &srv->lfd);
	if (!ret)
		ret = o1_ipc_shards_create(srv);
	if (!ret)
		o1_info("ipc: doorbells through %s, %u front thread%s",
			srv->use_futex ? "io_uring FUTEX_WAIT"
				       : "eventfd POLL_ADD",
			o1_ipc_server_fronts(srv),
			o1_ipc_server_fronts(srv) > 1 ? "s" : "");
	return ret;
}

int o1_ipc_server_create(const struct o1_ipc_opts *opts,
			 const struct o1_ipc_consumer *consumer,
			 struct o1_ipc_server **out)
{
	struct o1_ipc_server *srv;
	int ret;

	if (!opts || opts->sz < offsetof(struct o1_ipc_opts, spin_us))
		return -EINVAL;
	srv = aligned_alloc(_Alignof(struct o1_ipc_server), sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	memset(srv, 0, sizeof(*srv));
	srv->lfd = srv->kick_fd = srv->sfd = -1;
	srv->ring.ring_fd = -1;
	for (int i = 0; i < O1_IPC_LINGER_MAX; i++)
		srv->linger_fd[i] = -1;
	srv->lead = srv;
	if (consumer)
		srv->cons = *consumer;
	ret = copy_opts(srv, opts);
	if (!ret)
		ret = o1_ipc_devout_init(srv);
	if (!ret)
		ret = setup(srv);
	if (ret) {
		o1_ipc_server_destroy(srv);
		return ret;
	}
	*out = srv;
	return 0;
}

void o1_ipc_server_destroy(struct o1_ipc_server *srv)
{
	if (!srv)
		return;
	o1_ipc_shards_destroy(srv); /* their clients' slots come back */
	for (uint32_t i = srv->n_live; srv->live && i-- > 0;) {
		o1_ipc_client_doom(srv, o1_ipc_live(srv, i), NULL);
		o1_ipc_reap(srv);
	}
	for (int i = 0; i < O1_IPC_LINGER_MAX; i++)
		if (srv->linger_fd[i] >= 0)
			close(srv->linger_fd[i]);
	o1_log_flush_suppressed(1); /* the counts of the last floods */
	o1_ipc_loop_fini(srv);
	if (srv->lfd >= 0) {
		/* unlink while still bound: a daemon starting now finds
		 * either our live socket or none, never a stale one it would
		 * replace just before this unlink removed its own */
		unlink(srv->path);
		close(srv->lfd);
	}
	if (srv->sfd >= 0)
		close(srv->sfd);
	free(srv->path);
	free(srv->uids);
	free(srv->gids);
	free(srv->admins);
	free(srv->admin_buf);
	free(srv->devout);
	free(srv);
}

void o1_ipc_server_kick(struct o1_ipc_server *srv)
{
	uint64_t one = 1;
	struct timespec ts;
	ssize_t n;

	/* the post's time for the loop's cadence (front.h: kick_ns) */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	atomic_store_explicit(&srv->kick_ns,
			      (uint64_t)ts.tv_sec * 1000000000ull +
				  (uint64_t)ts.tv_nsec,
			      memory_order_relaxed);
	n = write(srv->kick_fd, &one, sizeof(one));

	(void)n; /* EAGAIN: a kick is already pending */
}

void o1_ipc_server_stop(struct o1_ipc_server *srv)
{
	struct o1_ipc_server *lead = srv->lead;

	for (uint32_t f = 0; f < o1_ipc_server_fronts(lead); f++) {
		atomic_store(&o1_ipc_front_of(lead, f)->stop, 1);
		o1_ipc_server_kick(o1_ipc_front_of(lead, f));
	}
}

void o1_ipc_server_kick_front(struct o1_ipc_server *srv, uint32_t front)
{
	if (front < o1_ipc_server_fronts(srv))
		o1_ipc_server_kick(o1_ipc_front_of(srv->lead, front));
}

uint32_t o1_ipc_server_front(const struct o1_ipc_server *srv)
{
	return srv->front;
}

void o1_ipc_set_draining_local(struct o1_ipc_server *srv, int on)
{
	srv->draining = !!on;
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);
		struct o1_ring_ctrl *ctrl;

		if (c->state != O1_IPC_ACTIVE)
			continue;
		ctrl = o1_region_sq_ctrl(c->base, &c->l);
		if (on)
			atomic_fetch_or(&ctrl->flags, O1_RING_DRAINING);
		else
			atomic_fetch_and(&ctrl->flags,
					 ~(uint32_t)O1_RING_DRAINING);
	}
}

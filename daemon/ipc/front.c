/* The front loop: one thread, one io_uring (with ipc.front_threads > 1,
 * one loop per front thread, each over its own clients: shards.c).
 *
 * Each pass drains every client's submission ring (copy, validate, hand
 * over), calls the consumer's ->poll, then publishes the completions each
 * client received (one commit and at most one wake-up per client per
 * pass). With no work for spin_us (5 us while none of the last 8 idle
 * periods was shorter than spin_us) the loop sleeps in io_uring: for each
 * client it reads the submission doorbell and sets NEED_WAKEUP
 * (o1_doorbell_prepare, a full fence), arms one FUTEX_WAIT on the doorbell
 * word (or a POLL_ADD on the client's eventfd), re-checks every ring, and
 * only then waits. Control sockets (multishot accept, multishot poll), a
 * kick eventfd, the signalfd and a 100 ms housekeeping timeout are io_uring
 * requests too.
 *
 * Invariants: a client slot is torn down only at the end of a pass, never
 * inside a consumer callback (callbacks just mark it doomed), by the front
 * thread serving it (->disconnect runs there, before its mapping and fds
 * go; only the lead frees the slot, shards.c); every request
 * tagged with a slot carries the slot's generation, so completions of
 * requests armed for an earlier occupant are ignored; the daemon never
 * reads its region geometry back from shared memory; a refused socket is
 * closed only once its peer's messages are read (or at its deadline), so
 * the close never resets the refusal away.
 *
 * Why the refusal lingers: closing a SOCK_SEQPACKET socket whose receive
 * queue still holds data (a hello that arrived after the refusal was
 * decided) makes the kernel set ECONNRESET on the peer, reported before
 * the refusal queued to it; and a hello sent after the close fails with
 * EPIPE. Either way a client would see a reset instead of the reason.
 * Reading (and discarding) the hello first, then closing, leaves nothing
 * unread: the peer reads the refusal, then end of file. The front loop
 * never waits for it: the socket is polled on the housekeeping tick, at
 * most O1_IPC_LINGER_MAX at a time (when they are all taken, those whose
 * peer is done are closed first; beyond that, closed at once: the client
 * library still reads a refusal past a reset).
 *
 * What a connection may cost (guard.c): silent connections have their own
 * budget, each uid a cap, a doorbell storm throttles its client. A client
 * that asked for socket wake-ups (O1_HELLO_WAKE_SOCKET, for event loops
 * that poll an fd) gets one byte on its control socket with each wake-up
 * of its completion doorbell; a full socket buffer drops it (the socket
 * is readable already).
 *
 * A full completion ring: events for a client whose ring is full wait in
 * the consumer, and the loop sleeps like any other time (no retry timer:
 * a parked stream costs nothing). Before the sleep it sets WANT_ROOM with
 * NEED_WAKEUP on that client's submission ring, fences, and looks at the
 * completion head once more; libo1client, having taken events, looks at
 * WANT_ROOM (after a fence where it is about to wait) and rings the
 * submission doorbell. The same Dekker pair as shm/doorbell.h: either our
 * look sees the head moved or the client sees the flag. A client that
 * spins without waiting looks on every empty poll, so it sees the flag
 * within a few polls. A doorbell wake-up that finds room is not an empty
 * one; one that finds the head where it was still is. Clients that never
 * ring (older libraries, raw ones) get the housekeeping tick's pass. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "control.h"
#include "shm/doorbell.h"
#include "shm/handoff.h"
#include "common/error.h"
#include "front.h"
#include "common/log.h"
#include "shm/region.h"

#define O1_IORING_OP_FUTEX_WAIT 51   /* kernel >= 6.7; liburing 2.3 lacks it */
#define O1_FUTEX2_SIZE_U32	0x02 /* futex2 flags; no FUTEX2_PRIVATE */
#define O1_FUTEX_MASK_ANY	0xffffffffull
#define TICK_NS			100000000ll
#define SPIN_SHORT_NS		5000ull /* the spin while spinning does not pay */
#define BUSY_SUBMIT_NS		200000ull /* see busy_submit */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ud_make(enum o1_ipc_ud kind, uint32_t idx, uint32_t gen)
{
	return (uint64_t)kind << 56 | (uint64_t)idx << 32 | gen;
}

static struct io_uring_sqe *get_sqe(struct o1_ipc_server *srv)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&srv->ring);

	if (!sqe) {
		io_uring_submit(&srv->ring);
		sqe = io_uring_get_sqe(&srv->ring);
	}
	return sqe;
}

/* IORING_OP_FUTEX_WAIT by hand, per the kernel uapi: fd holds the futex2
 * flags, addr the word, addr2 (off) the expected value, addr3 the mask. */
static void prep_futex_wait(struct io_uring_sqe *sqe, _Atomic uint32_t *word,
			    uint32_t val)
{
	io_uring_prep_rw(O1_IORING_OP_FUTEX_WAIT, sqe, O1_FUTEX2_SIZE_U32,
			 (void *)word, 0, val);
	sqe->addr3 = O1_FUTEX_MASK_ANY;
}

int o1_ipc_arm(struct o1_ipc_server *srv, enum o1_ipc_ud kind,
	       struct o1_ipc_client *c, uint32_t seq)
{
	struct io_uring_sqe *sqe = get_sqe(srv);
	uint32_t idx = c ? (uint32_t)(c - srv->clients) : 0;

	if (!sqe)
		return -EBUSY;
	switch (kind) {
	case O1_IPC_UD_ACCEPT:
		io_uring_prep_multishot_accept(sqe, srv->lfd, NULL, NULL,
					       SOCK_CLOEXEC | SOCK_NONBLOCK);
		break;
	case O1_IPC_UD_KICK:
		io_uring_prep_poll_multishot(sqe, srv->kick_fd, POLLIN);
		break;
	case O1_IPC_UD_SIGNAL:
		io_uring_prep_poll_multishot(sqe, srv->sfd, POLLIN);
		break;
	case O1_IPC_UD_TIMER:
		io_uring_prep_timeout(sqe, &srv->tick, 0, 0);
		break;
	case O1_IPC_UD_SOCK:
		io_uring_prep_poll_multishot(sqe, c->fd,
					     POLLIN | POLLRDHUP | POLLHUP);
		break;
	case O1_IPC_UD_BELL:
		if (c->efd >= 0)
			io_uring_prep_poll_add(sqe, c->efd, POLLIN);
		else
			prep_futex_wait(
			    sqe, &o1_region_sq_ctrl(c->base, &c->l)->doorbell,
			    seq);
		break;
	default:
		io_uring_prep_nop(sqe);
		break;
	}
	io_uring_sqe_set_data64(sqe, ud_make(kind, idx, c ? c->gen : 0));
	return 0;
}

static void cancel_ud(struct o1_ipc_server *srv, uint64_t ud)
{
	struct io_uring_sqe *sqe = get_sqe(srv);

	if (!sqe)
		return;
	io_uring_prep_cancel64(sqe, ud, 0);
	io_uring_sqe_set_data64(sqe, ud_make(O1_IPC_UD_CANCEL, 0, 0));
}

struct o1_ipc_client *o1_ipc_client_find(struct o1_ipc_server *srv,
					 uint32_t client_id)
{
	uint32_t idx = client_id & 0xffff;
	struct o1_ipc_client *c;

	if (idx >= srv->n_slots)
		return NULL;
	c = &srv->clients[idx];
	if (c->state != O1_IPC_ACTIVE || c->doomed ||
	    (c->gen & 0xffff) != client_id >> 16)
		return NULL;
	return c;
}

void o1_ipc_client_doom(struct o1_ipc_server *srv, struct o1_ipc_client *c,
			const char *why)
{
	if (c->doomed)
		return;
	/* admin connections (health probes) and hand-shakes that never
	 * finished (a start-up probe) are routine: debug */
	if (why)
		o1_log_limited(
		    c->state == O1_IPC_ACTIVE ? O1_LOG_INFO : O1_LOG_DEBUG,
		    c->cred.uid, "ipc: closing client %u (%s, pid %d, uid %u): %s",
		    c->id, c->name, (int)c->cred.pid, (unsigned)c->cred.uid, why);
	c->doomed = 1;
	srv->any_doomed = 1;
}

void o1_ipc_disarm(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	uint32_t idx = (uint32_t)(c - srv->clients);

	if (c->sock_armed)
		cancel_ud(srv, ud_make(O1_IPC_UD_SOCK, idx, c->gen));
	if (c->bell_armed)
		cancel_ud(srv, ud_make(O1_IPC_UD_BELL, idx, c->gen));
	c->sock_armed = c->bell_armed = 0;
}

void o1_ipc_live_add(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	c->live_at = srv->n_live;
	srv->live[srv->n_live++] = (uint32_t)(c - srv->clients);
}

void o1_ipc_live_remove(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	srv->live[c->live_at] = srv->live[--srv->n_live];
	srv->clients[srv->live[c->live_at]].live_at = c->live_at;
}

void o1_ipc_slot_free(struct o1_ipc_client *c)
{
	memset(c, 0, offsetof(struct o1_ipc_client, gen));
	c->gen++;
	c->fd = c->efd = -1;
	c->devout = -1;
	c->state = O1_IPC_FREE;
}

/* Releases what C holds on this front. On the lead the slot is free at
 * once; another front gives it back to the lead, which still counts it
 * (its copy is AWAY) and frees it (shards.c). */
static void teardown(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	uint32_t idx = (uint32_t)(c - srv->clients);
	int lead = srv == srv->lead;

	o1_ipc_disarm(srv, c);
	if (c->state == O1_IPC_ACTIVE) {
		if (srv->cons.disconnect)
			srv->cons.disconnect(srv->cons.ctx, srv, c->id);
		srv->st.clients_connected -= lead;
	}
	if (c->base)
		munmap(c->base, c->l.total_bytes);
	if (c->efd >= 0)
		close(c->efd);
	if (c->fd >= 0)
		close(c->fd);
	free(c->scratch);
	if (lead)
		o1_ipc_devout_release(srv, c->devout);
	o1_ipc_live_remove(srv, c);
	o1_ipc_slot_free(c);
	if (!lead)
		o1_ipc_shard_give_back(srv, idx);
}

void o1_ipc_drop_silent(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	if (c->doomed && c->state == O1_IPC_HELLO)
		teardown(srv, c);
}

void o1_ipc_reap(struct o1_ipc_server *srv)
{
	if (!srv->any_doomed)
		return;
	srv->any_doomed = 0;
	for (uint32_t i = srv->n_live; i-- > 0;)
		if (o1_ipc_live(srv, i)->doomed)
			teardown(srv, o1_ipc_live(srv, i));
}

/* Closes the lingering sockets whose peer spoke, hung up or timed out. */
static void linger_check(struct o1_ipc_server *srv, uint64_t now)
{
	for (uint32_t i = 0; i < O1_IPC_LINGER_MAX; i++) {
		int fd = srv->linger_fd[i];

		if (fd < 0 || (o1_ipc_discard(fd) == -EAGAIN &&
			       now <= srv->linger_deadline_ns[i]))
			continue;
		close(fd);
		srv->linger_fd[i] = -1;
	}
}

static int linger_add(struct o1_ipc_server *srv, int fd, uint64_t now)
{
	for (uint32_t i = 0; i < O1_IPC_LINGER_MAX; i++) {
		if (srv->linger_fd[i] >= 0)
			continue;
		srv->linger_fd[i] = fd;
		srv->linger_deadline_ns[i] =
		    now + srv->o.hello_timeout_ms * 1000000ull;
		return 0;
	}
	return -ENOSPC;
}

/* Closes a refused socket (its welcome sent) once its peer's hello is
 * read, never waiting: now, on a later tick, or at hello_timeout_ms.
 * A full table first gives back the entries whose peers are done (they
 * wait for the next tick, 100 ms: a refused client that reconnects at
 * once fills the table with them well within one); only a table of
 * silent peers closes the new one at once. */
static void linger(struct o1_ipc_server *srv, int fd)
{
	uint64_t now;

	if (o1_ipc_discard(fd) != -EAGAIN)
		goto close_fd;
	now = now_ns();
	if (!linger_add(srv, fd, now))
		return;
	linger_check(srv, now);
	if (!linger_add(srv, fd, now))
		return;
close_fd:
	close(fd);
}

/* Refuses a connection that got no slot: the welcome, then linger. */
static void refuse_fd(struct o1_ipc_server *srv, int fd, int status)
{
	struct o1_wire_welcome w = {.magic = O1_WELCOME_MAGIC,
				    .version = O1_WIRE_VERSION,
				    .status = status};

	o1_ipc_send_welcome(fd, &w, NULL, 0);
	linger(srv, fd);
	srv->st.clients_refused++;
}

/* A free slot, or NULL; the walk is over slots, once per connection. */
static struct o1_ipc_client *free_slot(struct o1_ipc_server *srv)
{
	for (uint32_t i = 0; i < srv->n_slots; i++)
		if (srv->clients[i].state == O1_IPC_FREE)
			return &srv->clients[i];
	return NULL;
}

/* A new connection: refused at once when the established slots are all
 * taken (no hello needed to say so) or its uid is at its cap; else it
 * waits for its hello in a slot of the half-open budget. */
static void new_client(struct o1_ipc_server *srv, int fd)
{
	struct ucred cred = {0};
	socklen_t len = sizeof(cred);
	struct o1_ipc_client *c = NULL;
	const char *why = NULL;
	int ret;

	getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
	if (o1_ipc_established(srv) >= srv->o.max_clients) {
		ret = -O1_E_QUOTA;
		why = "all client slots used (ipc.max_clients)";
	} else if (!(ret = o1_ipc_admit(srv, &cred)) && !(c = free_slot(srv))) {
		ret = -O1_E_QUOTA; /* evicted ones still hold theirs */
		why = "too many connections at once";
	}
	if (ret) {
		if (why)
			o1_log_limited(O1_LOG_WARN, cred.uid,
				       "ipc: refusing a connection of pid %d "
				       "uid %u: %s",
				       (int)cred.pid, (unsigned)cred.uid, why);
		refuse_fd(srv, fd, ret);
		return;
	}
	c->state = O1_IPC_HELLO;
	o1_ipc_live_add(srv, c);
	c->fd = fd;
	c->cred = cred;
	c->id = (c->gen & 0xffff) << 16 | (uint32_t)(c - srv->clients);
	c->hello_deadline_ns = now_ns() + srv->o.hello_timeout_ms * 1000000ull;
	c->sock_armed = o1_ipc_arm(srv, O1_IPC_UD_SOCK, c, 0) == 0;
}

/* Data on an active client's control socket breaks the protocol; end of
 * file is its death. */
static void unexpected_data(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	char buf[64];
	ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);

	if (n > 0) {
		o1_ipc_violation(srv, c, -O1_E_PROTOCOL,
				 "data on the control socket");
	} else if (n == 0) {
		if (c->inflight) /* a death: it left requests behind */
			srv->st.client_deaths++;
		o1_ipc_client_doom(srv, c, "hang-up");
	}
}

static void sock_event(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		       int res)
{
	int hup = res & (POLLHUP | POLLRDHUP | POLLERR);

	if (c->state == O1_IPC_HELLO && (res & POLLIN))
		o1_ipc_handshake(srv, c);
	else if (c->state == O1_IPC_ADMIN && (res & POLLIN))
		o1_ipc_admin_serve(srv, c);
	else if (c->state == O1_IPC_ACTIVE && (res & POLLIN))
		unexpected_data(srv, c);
	if (hup && !c->doomed && c->state != O1_IPC_AWAY) {
		if (c->state == O1_IPC_ACTIVE && c->inflight)
			srv->st.client_deaths++;
		o1_ipc_client_doom(srv, c, "hang-up");
	}
}

static int room_made(struct o1_ipc_client *c);

static void housekeeping(struct o1_ipc_server *srv)
{
	uint64_t now = now_ns();

	srv->st.ticks++;
	linger_check(srv, now);
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->blocked && room_made(c))
			srv->st.tick_refills++;
		o1_ipc_guard_tick(srv, c, now);
		if (c->state == O1_IPC_HELLO && !c->doomed &&
		    now > c->hello_deadline_ns)
			o1_ipc_refuse(srv, c, -ETIMEDOUT, "no hello in time");
	}
	o1_log_flush_suppressed(0);
}

static void read_signals(struct o1_ipc_server *srv)
{
	struct signalfd_siginfo si;

	while (read(srv->sfd, &si, sizeof(si)) == sizeof(si)) {
		if (srv->cons.signal)
			srv->cons.signal(srv->cons.ctx, srv, (int)si.ssi_signo);
		else if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM)
			o1_ipc_server_stop(srv);
	}
}

static void client_cqe(struct o1_ipc_server *srv, enum o1_ipc_ud kind,
		       uint32_t idx, uint32_t gen, struct io_uring_cqe *cqe)
{
	struct o1_ipc_client *c;
	uint64_t v;

	if (idx >= srv->n_slots)
		return;
	c = &srv->clients[idx];
	if (c->gen != gen || c->state == O1_IPC_FREE ||
	    c->state == O1_IPC_AWAY)
		return; /* armed for an earlier occupant of the slot, or
			 * before the client went to another front */
	if (kind == O1_IPC_UD_BELL) {
		c->bell_armed = 0;
		c->woke |= cqe->res != -ECANCELED;
		if (c->efd >= 0 && read(c->efd, &v, sizeof(v)) < 0)
			v = 0;
		return;
	}
	if (!(cqe->flags & IORING_CQE_F_MORE))
		c->sock_armed = 0;
	if (cqe->res < 0) {
		if (cqe->res != -ECANCELED)
			o1_ipc_client_doom(srv, c, "control socket poll error");
		return;
	}
	if (!c->doomed)
		sock_event(srv, c, cqe->res);
}

static void handle_cqe(struct o1_ipc_server *srv, struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe), v;
	enum o1_ipc_ud kind = (enum o1_ipc_ud)(ud >> 56);
	int more = !!(cqe->flags & IORING_CQE_F_MORE);

	switch (kind) {
	case O1_IPC_UD_ACCEPT:
		if (cqe->res >= 0)
			new_client(srv, cqe->res);
		else
			o1_warn("ipc: accept: %s", strerror(-cqe->res));
		srv->accept_armed = more;
		break;
	case O1_IPC_UD_KICK:
		if (read(srv->kick_fd, &v, sizeof(v)) < 0)
			v = 0;
		srv->kick_armed = more;
		if (srv->group)
			o1_ipc_shard_inbox(srv);
		break;
	case O1_IPC_UD_SIGNAL:
		read_signals(srv);
		srv->sig_armed = more;
		break;
	case O1_IPC_UD_TIMER:
		housekeeping(srv);
		srv->timer_armed = 0;
		break;
	case O1_IPC_UD_SOCK:
	case O1_IPC_UD_BELL:
		client_cqe(srv, kind, (uint32_t)(ud >> 32) & 0xffffff,
			   (uint32_t)ud, cqe);
		break;
	default:
		break;
	}
}

static int process_cqes(struct o1_ipc_server *srv)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&srv->ring, head, cqe)
	{
		handle_cqe(srv, cqe);
		n++;
	}
	io_uring_cq_advance(&srv->ring, n);
	return (int)n;
}

/* Re-arms the server-wide requests that ended. */
static void rearm(struct o1_ipc_server *srv)
{
	if (srv->lfd >= 0 && !srv->accept_armed)
		srv->accept_armed = !o1_ipc_arm(srv, O1_IPC_UD_ACCEPT, NULL, 0);
	if (!srv->kick_armed)
		srv->kick_armed = !o1_ipc_arm(srv, O1_IPC_UD_KICK, NULL, 0);
	if (srv->sfd >= 0 && !srv->sig_armed)
		srv->sig_armed = !o1_ipc_arm(srv, O1_IPC_UD_SIGNAL, NULL, 0);
	if (!srv->timer_armed)
		srv->timer_armed = !o1_ipc_arm(srv, O1_IPC_UD_TIMER, NULL, 0);
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->state != O1_IPC_FREE && !c->doomed && !c->sock_armed)
			c->sock_armed = !o1_ipc_arm(srv, O1_IPC_UD_SOCK, c, 0);
	}
}

/* Publishes C's claimed completions now (a release store, no fence): a
 * spinning client sees its answer without waiting for the rest of the
 * pass; flush looks at its doorbell after the pass's one fence. */
static void publish(struct o1_ipc_client *c)
{
	if (!c->cq_dirty)
		return;
	c->cq_dirty = 0;
	c->cq_unrung = 1;
	o1_ring_commit(&c->cq);
}

/* Publishes what each client received this pass and wakes it if asleep
 * (and, when it asked, through its control socket too). One seq_cst fence
 * after every commit, then each doorbell's NEED_WAKEUP: the Dekker pair of
 * shm/doorbell.h holds for each ring (its commit precedes the fence, the
 * look follows it), and the pass waits for its stores once, not once per
 * client (issue 19: with 16 busy clients the fences were a third of the
 * pass). */
static void flush(struct o1_ipc_server *srv)
{
	uint64_t now = 0;
	int any = 0;

	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		publish(c);
		any |= c->cq_unrung;
	}
	if (!any)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);
		int rang;

		if (!c->cq_unrung)
			continue;
		c->cq_unrung = 0;
		rang = o1_doorbell_notify_fenced(
		    o1_region_cq_ctrl(c->base, &c->l), -1);
		if (!now)
			now = now_ns();
		o1_handoff_published(&c->handoff, rang == 1, now);
		if (rang < 0)
			o1_warn("ipc: cannot wake client %u", c->id);
		if (rang == 1 && c->wake_sock &&
		    send(c->fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
		    errno != EAGAIN && errno != EPIPE && errno != ECONNRESET)
			o1_warn("ipc: cannot wake client %u: %s", c->id,
				strerror(errno));
	}
}

/* Whether C's reader moved its completion head forward past the one we
 * last read (room made since the ring blocked us). A head moved backwards
 * or out of the ring is not room: a client writing garbage there cannot
 * keep the loop awake (the next post finds it corrupt). */
static int room_made(struct o1_ipc_client *c)
{
	uint32_t head = atomic_load_explicit(
	    &o1_region_cq_ctrl(c->base, &c->l)->head, memory_order_acquire);

	return (int32_t)(head - c->cq.peer) > 0 &&
	       c->cq.pub - head <= o1_ring_capacity(&c->cq);
}

/* Drains one client; a doorbell wake-up that found nothing (no entry, no
 * room made in a blocked ring) is counted. */
static int drain_client(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	int room = c->woke && c->blocked && room_made(c);
	int n = o1_ipc_drain(srv, c);

	if (c->woke) {
		c->woke = 0;
		srv->st.room_wakes += room;
		if (!n && !room && !c->doomed && !o1_ring_ready(&c->sq))
			o1_ipc_empty_wake(srv, c);
	}
	return n;
}

/* Starts the cache misses of the pass at once instead of one client at a
 * time: every submission tail line, then, where a tail moved, the line of
 * the next entry (its address from our private index, never from shared
 * memory). A busy client's tail and entry lines come from its core; read
 * in turn, each is a stall (~0.1 us on the H200 host), which made a pass
 * over 16 busy clients ~5 us (issue 19). Idle rings cost a line already
 * in our cache. The loads here only aim prefetches: drain reads the tail
 * again (acquire) and checks it. */
static void prefetch_rings(struct o1_ipc_server *srv)
{
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->state == O1_IPC_ACTIVE)
			__builtin_prefetch(&c->sq.ctrl->tail, 0, 3);
	}
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);
		struct o1_ring *r = &c->sq;

		if (c->state == O1_IPC_ACTIVE &&
		    atomic_load_explicit(&r->ctrl->tail,
					 memory_order_relaxed) != r->local)
			__builtin_prefetch(r->slots +
					       (size_t)(r->local & r->mask) *
						   r->slot_bytes,
					   0, 3);
	}
}

static int pass(struct o1_ipc_server *srv)
{
	int work = process_cqes(srv);
	uint32_t cpu = o1_handoff_cpu();

	srv->posted = 0;
	prefetch_rings(srv);
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->state != O1_IPC_ACTIVE || c->doomed)
			continue;
		o1_handoff_note_cpu(o1_region_sq_ctrl(c->base, &c->l),
				    &c->cpu_told, cpu);
		work += drain_client(srv, c);
		publish(c);
	}
	if (srv->cons.poll)
		srv->cons.poll(srv->cons.ctx, srv);
	flush(srv);
	o1_ipc_reap(srv);
	rearm(srv);
	return work + (int)srv->posted;
}

/* Announces the sleep on every ring (asking blocked clients for room),
 * arms the doorbells, re-checks; returns 1 when a ring has work after all:
 * entries to drain, or room made where events wait. A throttled client's
 * doorbell is left alone: its ring waits for the next pass (at the
 * latest, the tick). */
static int prepare_sleep(struct o1_ipc_server *srv)
{
	uint64_t now = now_ns();
	int found = 0;

	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);
		uint32_t seq;

		if (c->state != O1_IPC_ACTIVE || c->doomed ||
		    o1_ipc_throttled(c, now))
			continue;
		if (c->blocked)
			atomic_fetch_or_explicit(
			    &o1_region_sq_ctrl(c->base, &c->l)->flags,
			    O1_RING_WANT_ROOM, memory_order_relaxed);
		/* its seq_cst fence orders WANT_ROOM before the look below */
		seq = o1_doorbell_prepare(o1_region_sq_ctrl(c->base, &c->l));
		if (!c->bell_armed)
			c->bell_armed =
			    !o1_ipc_arm(srv, O1_IPC_UD_BELL, c, seq);
	}
	for (uint32_t i = srv->n_live; i-- > 0 && !found;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->state == O1_IPC_ACTIVE && !c->doomed)
			found = c->blocked ? room_made(c)
					   : o1_ring_ready(&c->sq) != 0;
	}
	return found;
}

static void finish_sleep(struct o1_ipc_server *srv)
{
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->state != O1_IPC_ACTIVE || c->doomed)
			continue;
		o1_doorbell_cancel(o1_region_sq_ctrl(c->base, &c->l));
		atomic_fetch_and_explicit(
		    &o1_region_sq_ctrl(c->base, &c->l)->flags,
		    ~(uint32_t)O1_RING_WANT_ROOM, memory_order_relaxed);
	}
}

/* Sleeps until a completion, or for at most limit_ns (0: no limit);
 * returns 1 when the limit ended it. */
static int sleep_once(struct o1_ipc_server *srv, uint64_t limit_ns)
{
	struct __kernel_timespec ts;
	struct io_uring_cqe *cqe;
	int ret = 0;

	ts.tv_sec = (long long)(limit_ns / 1000000000ull);
	ts.tv_nsec = (long long)(limit_ns % 1000000000ull);
	if (prepare_sleep(srv) || atomic_load(&srv->stop)) {
		io_uring_submit(&srv->ring);
	} else {
		srv->st.sleeps++;
		if (srv->group) /* idle: its counters as they are now */
			o1_ipc_shard_publish(srv);
		if (limit_ns)
			ret = io_uring_submit_and_wait_timeout(&srv->ring, &cqe,
							       1, &ts, NULL);
		else
			ret = io_uring_submit_and_wait(&srv->ring, 1);
		if (ret < 0 && ret != -ETIME && ret != -EINTR)
			o1_warn("ipc: io_uring wait: %s", strerror(-ret));
	}
	finish_sleep(srv);
	return ret == -ETIME;
}

/* The loop has been idle past its spin window at now: spins on (0) while
 * a post is due soon by the consumer's cadence, else sleeps (1), waking
 * in time for the next post when one is expected (cadence.h: early by
 * the margin and by what its timed wake-ups overshoot, which each one
 * that came at or after its time teaches). A cadence spin that ends here
 * ended without the post. */
static int idle_sleep(struct o1_ipc_server *srv, uint64_t now)
{
	uint64_t until = 0, wake;
	int timed_out;

	if (srv->cadence_from_ns) {
		srv->st.cadence_spin_ns += now - srv->cadence_from_ns;
		srv->cadence_from_ns = 0;
	}
	wake = o1_cadence_wake(&srv->cadence, now, &until);
	if (wake && wake <= now) {
		srv->spin_until_ns = until;
		srv->cadence_from_ns = now;
		return 0;
	}
	timed_out = sleep_once(srv, wake ? wake - now : 0);
	if (!wake)
		return 1;
	now = now_ns();
	o1_cadence_woke(&srv->cadence, wake, now);
	if (timed_out) {
		srv->spin_until_ns = until;
		srv->cadence_from_ns = now;
		srv->st.cadence_wakes++;
	}
	return 1;
}

/* A pass that posted, at now: the arrival for the cadence, dated by the
 * consumer's kick when that is this post's (cadence.h), and the end of a
 * cadence spin, which caught the post unless the loop slept since. */
static void cadence_arrival(struct o1_ipc_server *srv, uint64_t now)
{
	if (srv->cadence_from_ns) {
		srv->st.cadence_spin_ns += now - srv->cadence_from_ns;
		srv->st.cadence_caught += !srv->slept;
		srv->cadence_from_ns = 0;
	}
	srv->spin_until_ns = 0;
	o1_cadence_post(
	    &srv->cadence, now,
	    atomic_load_explicit(&srv->kick_ns, memory_order_relaxed));
}

/* An idle turn of the spin: yields the CPU to a client that may be
 * queued behind us with completions it has not taken (shm/handoff.h). */
static void handoff(struct o1_ipc_server *srv, uint64_t now)
{
	for (uint32_t i = srv->n_live; i-- > 0;) {
		struct o1_ipc_client *c = o1_ipc_live(srv, i);

		if (c->state == O1_IPC_ACTIVE && !c->doomed)
			srv->st.handoffs +=
			    (uint64_t)o1_handoff_spin(&c->handoff, &c->cq, now);
	}
}

/* Learns from an idle period of IDLE ns that just ended whether spinning
 * pays; returns the spin window for the next one: spin_ns while one of
 * the last 8 idle periods ended within spin_ns (the spin caught it, or
 * would have), else SPIN_SHORT_NS. A client that calls every few
 * milliseconds so costs no spin, whose CPU time would also make the
 * scheduler wake this thread later (it places a thread that ran past its
 * share behind the others); the first quick follow-up restores it. */
static uint64_t learn_spin(struct o1_ipc_server *srv, uint64_t idle,
			   uint64_t spin_ns)
{
	srv->spin_hist = (uint8_t)(srv->spin_hist << 1 | (idle < spin_ns));
	if (srv->spin_hist || spin_ns < SPIN_SHORT_NS)
		return spin_ns;
	return SPIN_SHORT_NS;
}

/* A loop with work on every pass never reaches the idle turn's submit:
 * what its passes queued (the tick, the signal read, the listener's
 * accept, new clients' sockets) would wait until it is next idle, so
 * housekeeping, signals and new connections would stall behind busy
 * clients (issue 19). While busy it submits every BUSY_SUBMIT_NS: a
 * syscall a fifth of a millisecond, well under the tick's 100 ms. */
static void busy_submit(struct o1_ipc_server *srv, uint64_t now)
{
	if (now - srv->busy_submit_ns < BUSY_SUBMIT_NS)
		return;
	srv->busy_submit_ns = now;
	if (io_uring_sq_ready(&srv->ring))
		io_uring_submit(&srv->ring);
}

int o1_ipc_server_run(struct o1_ipc_server *srv)
{
	return srv->group ? o1_ipc_shards_run(srv) : o1_ipc_loop(srv);
}

int o1_ipc_loop(struct o1_ipc_server *srv)
{
	uint64_t spin_ns = srv->o.spin_us * 1000ull, window = spin_ns;
	uint64_t last = now_ns(), idle_since = 0, now;
	int work;

	srv->slept = 0;
	rearm(srv);
	io_uring_submit(&srv->ring);
	while (!atomic_load_explicit(&srv->stop, memory_order_relaxed)) {
		work = pass(srv);
		if (work && !srv->slept)
			srv->st.wakeups_spin++;
		if (work)
			last = now_ns();
		if (srv->posted)
			cadence_arrival(srv, last);
		if (work && srv->group) /* for the lead's stats, at once */
			o1_ipc_shard_publish(srv);
		srv->slept = 0;
		if (work) {
			if (idle_since)
				window =
				    learn_spin(srv, last - idle_since, spin_ns);
			idle_since = 0;
			busy_submit(srv, last);
			continue;
		}
		if (!idle_since)
			idle_since = last;
		if (io_uring_sq_ready(&srv->ring))
			io_uring_submit(&srv->ring);
		now = now_ns();
		if (now - last < window || now < srv->spin_until_ns ||
		    !idle_sleep(srv, now)) {
			handoff(srv, now);
			continue;
		}
		srv->slept = 1;
		last = now_ns();
	}
	return 0;
}

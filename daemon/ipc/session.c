/* Per-client protocol: the handshake, the submission entries, quotas and
 * violations, and posting events to the completion ring.
 *
 * Copy-then-validate: each slot is copied by o1_wire_decode_sub and only
 * the copy is read; prompt, stop data and grammar are copied from the
 * arena into the client's private scratch before any check on their
 * contents, all while the slot is still unreleased (the client may reuse
 * the arena space only after the release).
 *
 * Wake-up samples: sent_ns in a valid PING or SUBMIT is the client's word,
 * read only to time publish-to-copy-out; a value that would give a
 * negative or over-10 s latency is counted and otherwise ignored. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "shm/doorbell.h"
#include "common/error.h"
#include "front.h"
#include "common/log.h"

void o1_ipc_refuse(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		   int status, const char *why)
{
	struct o1_wire_welcome w = {.magic = O1_WELCOME_MAGIC,
				    .version = O1_WIRE_VERSION,
				    .status = status};

	o1_log_limited(O1_LOG_WARN, c->cred.uid,
		       "ipc: refusing client %u of pid %d uid %u: %s (%s)",
		       c->id, (int)c->cred.pid, (unsigned)c->cred.uid,
		       why ? why : o1_strerror(status), o1_strerror(status));
	o1_ipc_send_welcome(c->fd, &w, NULL, 0);
	srv->st.clients_refused++;
	o1_ipc_client_doom(srv, c, NULL);
	/* The hello was read; whatever else arrived is read too, so that the
	 * close leaves nothing unread and the peer gets the refusal, not a
	 * reset (see front.c). */
	o1_ipc_discard(c->fd);
}

/* Picks a size: 0 means the default, and the default is the maximum. */
static int pick(uint32_t asked, uint32_t max, uint32_t *out)
{
	if (asked > max)
		return -O1_E_QUOTA;
	*out = asked ? asked : max;
	return 0;
}

static int setup_region(struct o1_ipc_server *srv, struct o1_ipc_client *c,
			const struct o1_wire_hello *h, int *memfd)
{
	uint32_t sq, cq, arena;
	size_t prompt_max;
	int ret;

	if (pick(h->sq_entries, srv->o.sq_entries, &sq) ||
	    pick(h->cq_entries, srv->o.cq_entries, &cq) ||
	    pick(h->arena_bytes, srv->o.arena_bytes, &arena))
		return -O1_E_QUOTA;
	ret = o1_region_layout(sq, cq, arena, &c->l);
	if (ret)
		return ret;
	if (!srv->use_futex) {
		c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (c->efd < 0)
			return -errno;
	}
	prompt_max = srv->o.max_prompt_bytes;
	if ((size_t)srv->o.max_prompt_tokens * 4 > prompt_max)
		prompt_max = (size_t)srv->o.max_prompt_tokens * 4;
	c->scratch_bytes = prompt_max + 4 + srv->o.max_stop_ids * 4 +
			   srv->o.max_stop_bytes + srv->o.max_grammar_bytes;
	c->scratch = malloc(c->scratch_bytes);
	if (!c->scratch)
		return -ENOMEM;
	ret = o1_ipc_region_create(&c->l, c->efd >= 0 ? O1_REGION_EVENTFD : 0,
				   c->id, memfd, &c->base);
	if (ret)
		return ret;
	return o1_region_rings(c->base, &c->l, &c->sq, &c->cq);
}

static void fill_limits(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	c->lim = (struct o1_wire_limits){
	    .arena_bytes = c->l.arena_bytes,
	    .max_prompt_bytes = srv->o.max_prompt_bytes,
	    .max_prompt_tokens = srv->o.max_prompt_tokens,
	    .max_tokens = srv->o.max_tokens,
	    .max_stop_ids = srv->o.max_stop_ids,
	    .max_stop_bytes = srv->o.max_stop_bytes,
	    .vocab_size = srv->o.vocab_size,
	    .max_grammar_bytes = srv->o.max_grammar_bytes,
	};
}

/* An admin connection: admin uids only (whatever allowed_uids says). */
static void admin_hello(struct o1_ipc_server *srv, struct o1_ipc_client *c,
			const struct o1_wire_hello *h)
{
	struct o1_wire_welcome w = {.magic = O1_WELCOME_MAGIC,
				    .version = O1_WIRE_VERSION};
	int ret = o1_ipc_peer_check(c->fd, &srv->o, &c->cred);

	if (ret == 0 || ret == -EACCES)
		ret = o1_ipc_admin_check(&srv->o, &c->cred);
	if (!ret && !srv->cons.admin)
		ret = -O1_E_UNSUPPORTED;
	if (ret) {
		o1_ipc_refuse(srv, c, ret, NULL);
		return;
	}
	memcpy(c->name, h->name, sizeof(c->name));
	w.client_id = c->id;
	if (o1_ipc_send_welcome(c->fd, &w, NULL, 0)) {
		o1_ipc_client_doom(srv, c, "cannot send the welcome");
		return;
	}
	c->state = O1_IPC_ADMIN;
	/* debug: health probes come every few seconds */
	o1_debug("ipc: admin connection %u (%s, pid %d, uid %u)", c->id,
		 c->name, (int)c->cred.pid, (unsigned)c->cred.uid);
}

void o1_ipc_client_fill_info(const struct o1_ipc_client *c,
			     struct o1_ipc_client_info *out)
{
	memset(out, 0, sizeof(*out));
	out->client_id = c->id;
	out->uid = c->cred.uid;
	out->gid = c->cred.gid;
	out->pid = c->cred.pid;
	memcpy(out->name, c->name, sizeof(out->name));
	out->inflight = c->inflight;
	out->violations = c->violations;
	out->region_bytes = c->l.total_bytes;
	out->devout_area = c->devout;
}

/* Answers the admin messages waiting on c (a few per pass). */
void o1_ipc_admin_serve(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	uint8_t *req = srv->admin_buf, *reply = req + O1_ADMIN_MSG_MAX;
	struct o1_ipc_client_info info;
	ssize_t n;
	int len;

	o1_ipc_client_fill_info(c, &info);
	for (int i = 0; i < 16; i++) {
		n = recv(c->fd, req, O1_ADMIN_MSG_MAX,
			 MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0 || n > O1_ADMIN_MSG_MAX) {
			o1_ipc_client_doom(srv, c,
					   n > 0 ? "admin message too long"
						 : "admin hang-up");
			return;
		}
		srv->st.admin_requests++;
		len = srv->cons.admin(srv->cons.ctx, srv, &info, req, (size_t)n,
				      reply, O1_ADMIN_MSG_MAX);
		if (len < 0 || len > O1_ADMIN_MSG_MAX)
			len = 0;
		if (send(c->fd, reply, (size_t)len,
			 MSG_DONTWAIT | MSG_NOSIGNAL) != len) {
			o1_ipc_client_doom(srv, c,
					   "cannot send an admin reply");
			return;
		}
	}
}

int o1_ipc_clients(const struct o1_ipc_server *srv,
		   struct o1_ipc_client_info *out, size_t cap)
{
	size_t n = 0;

	/* slot order (an admin request, not a pass): the listing stays
	 * in the order slots were taken */
	for (uint32_t i = 0; i < srv->n_slots; i++) {
		const struct o1_ipc_client *c = &srv->clients[i];

		/* AWAY: served by another front (shards.c), listed here */
		if ((c->state != O1_IPC_ACTIVE && c->state != O1_IPC_AWAY) ||
		    c->doomed)
			continue;
		if (n < cap)
			o1_ipc_client_fill_info(c, &out[n]);
		n++;
	}
	return (int)n;
}

/* A device output area for a hello that asked: into the welcome, or the
 * reason there is none (the connection goes ahead either way). */
static void give_devout(struct o1_ipc_server *srv, struct o1_ipc_client *c,
			struct o1_wire_welcome *w)
{
	int area = o1_ipc_devout_claim(srv, c->cred.uid);

	if (area < 0) {
		w->devout.status = area;
		o1_info("ipc: client %u (pid %d, uid %u) asked for a device "
			"output area: %s",
			c->id, (int)c->cred.pid, (unsigned)c->cred.uid,
			o1_strerror(area));
		return;
	}
	c->devout = area;
	w->devout = srv->devout[area].desc;
}

void o1_ipc_handshake(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	struct o1_wire_welcome w = {.magic = O1_WELCOME_MAGIC,
				    .version = O1_WIRE_VERSION};
	struct o1_wire_hello h;
	int fds[2], memfd = -1, ret;

	ret = o1_ipc_recv_hello(c->fd, &h);
	if (ret == -EAGAIN)
		return;
	/* a connection that got in while a slot was free, and said hello
	 * once they were all taken */
	if (!ret && o1_ipc_established(srv) >= srv->o.max_clients) {
		o1_ipc_refuse(srv, c, -O1_E_QUOTA,
			      "all client slots used (ipc.max_clients)");
		return;
	}
	if (!ret && (h.flags & O1_HELLO_ADMIN)) {
		admin_hello(srv, c, &h);
		return;
	}
	if (!ret)
		ret = o1_ipc_peer_check(c->fd, &srv->o, &c->cred);
	if (!ret)
		ret = setup_region(srv, c, &h, &memfd);
	if (ret) {
		o1_ipc_refuse(srv, c, ret, NULL);
		return;
	}
	memcpy(c->name, h.name, sizeof(c->name));
	c->wake_sock = !!(h.flags & O1_HELLO_WAKE_SOCKET);
	fill_limits(srv, c);
	w.client_id = c->id;
	w.region_bytes = c->l.total_bytes;
	w.max_inflight = srv->o.max_inflight;
	w.max_prompt_tokens = srv->o.max_prompt_tokens;
	w.max_prompt_bytes = srv->o.max_prompt_bytes;
	w.max_tokens = srv->o.max_tokens;
	w.vocab_size = srv->o.vocab_size;
	w.max_grammar_bytes = srv->o.max_grammar_bytes;
	w.tool_format = srv->o.tool_format;
	if (h.flags & O1_HELLO_DEVICE_OUT)
		give_devout(srv, c, &w);
	fds[0] = memfd;
	fds[1] = c->efd;
	w.n_fds = c->efd >= 0 ? 2 : 1;
	ret = o1_ipc_send_welcome(c->fd, &w, fds, w.n_fds);
	close(memfd);
	if (ret) {
		o1_ipc_client_doom(srv, c, "cannot send the welcome");
		return;
	}
	if (srv->draining)
		atomic_fetch_or(&o1_region_sq_ctrl(c->base, &c->l)->flags,
				O1_RING_DRAINING);
	c->state = O1_IPC_ACTIVE;
	srv->st.clients_connected++;
	srv->st.clients_total++;
	o1_log_limited(O1_LOG_INFO, c->cred.uid,
		       "ipc: client %u connected (%s, pid %d, uid %u, %u bytes)",
		       c->id, c->name, (int)c->cred.pid, (unsigned)c->cred.uid,
		       c->l.total_bytes);
	o1_ipc_hand_over(srv, c);
}

void o1_ipc_violation(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		      int err, const char *why)
{
	srv->st.violations++;
	if (!c->violations++) /* the leak starts with the first */
		c->violation_leak_ns = o1_ipc_now_ns();
	/* Every one counts, but the log takes a few per uid and second. */
	o1_log_limited(O1_LOG_WARN, c->cred.uid,
		       "ipc: client %u (%s, pid %d, uid %u) violation %u/%u: "
		       "%s (%s)",
		       c->id, c->name, (int)c->cred.pid, (unsigned)c->cred.uid,
		       c->violations, srv->o.max_violations, why,
		       o1_strerror(err));
	if (c->violations >= srv->o.max_violations) {
		srv->st.kicked_out++;
		o1_ipc_client_doom(srv, c, "too many violations");
	}
}

/* Claims a completion slot and copies ev in; committed by the pass. */
static int push_event(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		      const union o1_wire_entry *ev)
{
	void *slot;
	int ret = o1_ring_claim(&c->cq, &slot);

	if (ret == -EAGAIN) {
		srv->st.cq_full++;
		c->blocked = 1;
		return ret;
	}
	if (ret) {
		srv->st.violations++;
		o1_ipc_client_doom(srv, c, "corrupt completion ring head");
		return -ENOENT;
	}
	memcpy(slot, ev, sizeof(*ev));
	c->cq_dirty = 1;
	srv->posted++;
	return 0;
}

static void fail_request(struct o1_ipc_server *srv, struct o1_ipc_client *c,
			 uint64_t req_id, int err)
{
	union o1_wire_entry ev;

	memset(&ev, 0, sizeof(ev));
	ev.final.op = O1_EV_FINAL;
	ev.final.reason =
	    err == -O1_E_CANCELLED ? O1_FINISH_CANCELLED : O1_FINISH_ERROR;
	ev.final.error = err == -O1_E_CANCELLED ? 0 : err;
	ev.final.req_id = req_id;
	push_event(srv, c, &ev);
	if (err != -O1_E_CANCELLED && srv->cons.refused)
		srv->cons.refused(srv->cons.ctx, err);
}

static void send_error(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		       int err, const char *why)
{
	union o1_wire_entry ev;
	size_t n = strlen(why);

	memset(&ev, 0, sizeof(ev));
	ev.error.op = O1_EV_ERROR;
	ev.error.error = err;
	n = n < O1_WIRE_MSG_MAX ? n : O1_WIRE_MSG_MAX;
	ev.error.msg_len = (uint8_t)n;
	memcpy(ev.error.msg, why, n);
	push_event(srv, c, &ev);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Records how long a valid PING or SUBMIT waited between its client
 * publishing it (sent_ns, the client's word) and this copy-out. The first
 * unusable stamp of each client is logged. */
static void wakeup_sample(struct o1_ipc_server *srv, struct o1_ipc_client *c,
			  const union o1_wire_entry *e)
{
	uint64_t sent =
	    e->op == O1_OP_PING ? e->ping.sent_ns : e->submit.sent_ns;
	uint64_t now = now_ns(), ns = now - sent;

	srv->copy_ns = now;
	if (sent == 0 || sent > now || ns > O1_IPC_WAKEUP_MAX_NS) {
		srv->st.wakeup_invalid++;
		if (!c->bad_stamp)
			o1_warn("ipc: client %u (%s, pid %d): %s sent_ns %llu "
				"at daemon CLOCK_MONOTONIC %llu is 0, ahead or "
				"over 10 s old: not timed (logged once)",
				c->id, c->name, (int)c->cred.pid,
				o1_wire_op_name(e->op),
				(unsigned long long)sent,
				(unsigned long long)now);
		c->bad_stamp = 1;
		return;
	}
	if (srv->slept) {
		srv->st.wakeup_sleep_n++;
		srv->st.wakeup_sleep_ns += ns;
	} else {
		srv->st.wakeup_spin_n++;
		srv->st.wakeup_spin_ns += ns;
	}
	if (srv->cons.observe_wakeup)
		srv->cons.observe_wakeup(srv->cons.ctx, ns, srv->slept);
}

static void pong(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		 const struct o1_wire_ping *p)
{
	union o1_wire_entry ev;

	memset(&ev, 0, sizeof(ev));
	ev.ping.op = O1_EV_PONG;
	ev.ping.cookie = p->cookie;
	ev.ping.client_ns = p->client_ns;
	/* the copy-out's clock read (wakeup_sample, just before): one read
	 * a ping, not two */
	ev.ping.daemon_ns = srv->copy_ns;
	srv->st.pings++;
	push_event(srv, c, &ev);
}

/* Copies the prompt, stop lists and grammar out of the arena and checks
 * the stop lists and ids. */
static int copy_request(struct o1_ipc_client *c, const struct o1_wire_submit *s,
			struct o1_ipc_request *r, const char **why)
{
	const uint8_t *arena = o1_region_arena(c->base, &c->l);
	uint32_t pb =
	    s->prompt_kind == O1_PROMPT_IDS ? s->prompt_len * 4 : s->prompt_len;
	uint8_t *p = c->scratch;
	int n;

	memcpy(p, arena + s->prompt_off, pb);
	r->prompt = p;
	r->prompt_bytes = pb;
	p += (pb + 3) & ~3u; /* stop ids stay 4-aligned after a text prompt */
	if (s->n_stop_ids)
		memcpy(p, arena + s->stop_ids_off, (size_t)s->n_stop_ids * 4);
	r->stop_ids = (const uint32_t *)p;
	r->n_stop_ids = s->n_stop_ids;
	p += (size_t)s->n_stop_ids * 4;
	if (s->stop_str_len)
		memcpy(p, arena + s->stop_str_off, s->stop_str_len);
	r->stop_strings = p;
	r->stop_strings_bytes = s->stop_str_len;
	if (s->grammar_len) {
		memcpy(p + s->stop_str_len, arena + s->grammar_off,
		       s->grammar_len);
		r->grammar = p + s->stop_str_len;
	}
	n = o1_wire_stop_strings_check(p, s->stop_str_len, c->lim.max_stop_ids);
	if (n < 0) {
		*why = "stop strings";
		return n;
	}
	r->n_stop_strings = (uint32_t)n;
	for (uint32_t i = 0; c->lim.vocab_size && i < r->n_stop_ids; i++)
		if (r->stop_ids[i] >= c->lim.vocab_size) {
			*why = "stop id";
			return -O1_E_BOUNDS;
		}
	for (uint32_t i = 0;
	     c->lim.vocab_size && s->prompt_kind == O1_PROMPT_IDS &&
	     i < s->prompt_len;
	     i++)
		if (((const uint32_t *)r->prompt)[i] >= c->lim.vocab_size) {
			*why = "prompt token id";
			return -O1_E_BOUNDS;
		}
	return 0;
}

/* A request value out of the limits the welcome gave, or out of range:
 * the request's own mistake. Its FINAL says so, but it is not a violation
 * of the connection: that is left to protocol abuse (unknown ops, padding,
 * flags, offsets outside the arena, corrupt rings). Not inlined: gcc -O3
 * would compare a caller's literal with each name and warn
 * (-Wstring-compare) that the longer names can never equal it. */
__attribute__((noinline)) static bool own_mistake(const char *why)
{
	static const char *const fields[] = {
	    "prompt_len",	"max_tokens",	    "top_k",
	    "refine_steps",	"n_logprobs",	    "n_stop_ids",
	    "stop_str_len",	"temperature",	    "top_p",
	    "min_p",		"repeat_penalty",   "presence_penalty",
	    "frequency_penalty", "stop strings",    "stop id",
	    "prompt token id",	"grammar",	    "grammar_len",
	};

	for (size_t i = 0; why && i < sizeof(fields) / sizeof(fields[0]); i++)
		if (!strcmp(why, fields[i]))
			return true;
	return false;
}

static void submit(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		   const struct o1_wire_submit *s)
{
	struct o1_ipc_request r = {.client_id = c->id,
				   .uid = c->cred.uid,
				   .gid = c->cred.gid,
				   .pid = c->cred.pid,
				   .params = *s,
				   .devout_area = c->devout};
	const char *why = NULL;
	int ret;

	if (srv->draining) {
		fail_request(srv, c, s->req_id, -O1_E_DRAINING);
		return;
	}
	if ((s->flags & O1_SUBMIT_DEVICE_LOGITS) && c->devout < 0) {
		/* a capability the client lacks, not a violation */
		fail_request(srv, c, s->req_id, -O1_E_NO_DEVOUT);
		return;
	}
	if (c->inflight >= srv->o.max_inflight) {
		/* the welcome gave max_inflight, but a client multiplexing
		 * others cannot always know: a refusal, not a violation */
		fail_request(srv, c, s->req_id, -O1_E_QUOTA);
		return;
	}
	ret = copy_request(c, s, &r, &why);
	if (ret) {
		if (!own_mistake(why))
			o1_ipc_violation(srv, c, ret, why);
		fail_request(srv, c, s->req_id, ret);
		return;
	}
	ret = srv->cons.submit ? srv->cons.submit(srv->cons.ctx, srv, &r)
			       : -O1_E_UNSUPPORTED;
	if (ret) {
		fail_request(srv, c, s->req_id, ret);
		return;
	}
	c->inflight++;
	srv->st.requests++;
}

static void handle(struct o1_ipc_server *srv, struct o1_ipc_client *c,
		   const union o1_wire_entry *e, int ret, const char *why)
{
	if (ret && e->op == O1_OP_SUBMIT && own_mistake(why)) {
		fail_request(srv, c, e->submit.req_id, ret);
		return;
	}
	if (ret) {
		o1_ipc_violation(srv, c, ret, why);
		if (e->op == O1_OP_SUBMIT)
			fail_request(srv, c, e->submit.req_id, ret);
		else
			send_error(srv, c, ret, why);
		return;
	}
	switch (e->op) {
	case O1_OP_PING:
		pong(srv, c, &e->ping);
		break;
	case O1_OP_CANCEL:
		if (srv->cons.cancel)
			srv->cons.cancel(srv->cons.ctx, srv, c->id,
					 e->cancel.req_id);
		break;
	case O1_OP_SUBMIT:
		submit(srv, c, &e->submit);
		break;
	}
}

int o1_ipc_drain(struct o1_ipc_server *srv, struct o1_ipc_client *c)
{
	union o1_wire_entry e;
	const char *why = NULL;
	const void *slot;
	int n, ret, space;

	c->blocked = 0;
	for (n = 0; n < DRAIN_BATCH_MAX && !c->doomed; n++) {
		/* Room for the one reply an entry may need right away. */
		space = (int)o1_ring_space_cached(&c->cq);
		if (space == 0)
			space = o1_ring_space(&c->cq);
		if (space < 0) {
			srv->st.violations++;
			o1_ipc_client_doom(srv, c, "corrupt completion head");
			break;
		}
		if (space == 0) {
			c->blocked = 1;
			break;
		}
		ret = o1_ring_peek(&c->sq, &slot);
		if (ret == -EAGAIN)
			break;
		if (ret) {
			srv->st.violations++;
			o1_ipc_client_doom(srv, c, "corrupt submission tail");
			break;
		}
		ret = o1_wire_decode_sub(slot, &c->lim, &e, &why);
		if (!ret && e.op != O1_OP_CANCEL)
			wakeup_sample(srv, c, &e);
		handle(srv, c, &e, ret, why);
		o1_ring_advance(&c->sq);
	}
	o1_ring_release(&c->sq);
	return n;
}

int o1_ipc_post(struct o1_ipc_server *srv, uint32_t client_id,
		const union o1_wire_entry *ev)
{
	struct o1_ipc_client *c = o1_ipc_client_find(srv, client_id);
	int ret;

	if (ev->op != O1_EV_TOKEN && ev->op != O1_EV_FINAL &&
	    ev->op != O1_EV_ERROR && ev->op != O1_EV_LOGPROBS &&
	    ev->op != O1_EV_ROUND && ev->op != O1_EV_TOP_TEXT)
		return -EINVAL;
	if (!c)
		return -ENOENT;
	ret = push_event(srv, c, ev);
	if (!ret && ev->op == O1_EV_FINAL && c->inflight)
		c->inflight--;
	return ret;
}

int o1_ipc_post_token(struct o1_ipc_server *srv, uint32_t client_id,
		      uint64_t req_id, const uint32_t *ids, unsigned n_ids,
		      const char *text, size_t text_len)
{
	union o1_wire_entry ev;

	if (n_ids > O1_WIRE_IDS_MAX || text_len > O1_WIRE_TEXT_MAX)
		return -EINVAL;
	memset(&ev, 0, sizeof(ev));
	ev.token.op = O1_EV_TOKEN;
	ev.token.req_id = req_id;
	ev.token.n_ids = (uint8_t)n_ids;
	ev.token.text_len = (uint8_t)text_len;
	if (n_ids)
		memcpy(ev.token.ids, ids, n_ids * sizeof(*ids));
	if (text_len)
		memcpy(ev.token.text, text, text_len);
	return o1_ipc_post(srv, client_id, &ev);
}

int o1_ipc_post_final(struct o1_ipc_server *srv, uint32_t client_id,
		      uint64_t req_id, enum o1_finish_reason reason, int error,
		      uint32_t prompt_tokens, uint32_t generated_tokens)
{
	union o1_wire_entry ev;

	if (reason >= O1_FINISH_COUNT ||
	    (reason == O1_FINISH_ERROR) != (error < 0))
		return -EINVAL;
	memset(&ev, 0, sizeof(ev));
	ev.final.op = O1_EV_FINAL;
	ev.final.reason = (uint8_t)reason;
	ev.final.error = error;
	ev.final.req_id = req_id;
	ev.final.prompt_tokens = prompt_tokens;
	ev.final.generated_tokens = generated_tokens;
	return o1_ipc_post(srv, client_id, &ev);
}

int o1_ipc_post_logprobs(struct o1_ipc_server *srv, uint32_t client_id,
			 uint64_t req_id, uint32_t position,
			 const uint32_t *ids, const float *logprobs, unsigned n)
{
	struct o1_ipc_client *c = o1_ipc_client_find(srv, client_id);
	unsigned need = (n + O1_WIRE_TOP_PER - 1) / O1_WIRE_TOP_PER;
	union o1_wire_entry ev;
	int space;

	if (n == 0 || n > O1_WIRE_LOGPROBS_MAX)
		return -EINVAL;
	if (!c)
		return -ENOENT;
	space = (int)o1_ring_space_cached(&c->cq);
	if (space < (int)need)
		space = o1_ring_space(&c->cq);
	if (space >= 0 && space < (int)need) {
		srv->st.cq_full++;
		c->blocked = 1;
		return -EAGAIN; /* all or nothing */
	}
	for (unsigned i = 0; i < n; i += O1_WIRE_TOP_PER) {
		unsigned k = n - i < O1_WIRE_TOP_PER ? n - i : O1_WIRE_TOP_PER;

		memset(&ev, 0, sizeof(ev));
		ev.logprobs.op = O1_EV_LOGPROBS;
		ev.logprobs.n = (uint8_t)k;
		ev.logprobs.position = position;
		ev.logprobs.req_id = req_id;
		memcpy(ev.logprobs.ids, ids + i, k * sizeof(*ids));
		memcpy(ev.logprobs.logprobs, logprobs + i,
		       k * sizeof(*logprobs));
		if (push_event(srv, c, &ev))
			return -ENOENT; /* corrupt head: the client is doomed */
	}
	return 0;
}

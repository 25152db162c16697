/* The data path: submissions into the ring and the arena, events out of
 * the completion ring, and the wake-up protocol of shm/doorbell.h on both
 * rings (we wake the daemon only when it set NEED_WAKEUP; we sleep on the
 * completion doorbell only after announcing it and re-checking). A daemon
 * that sleeps on our full completion ring sets WANT_ROOM: taking an event,
 * or finding none, we look at it and ring (daemon/ipc/front.c has the
 * pairing; every wait passes a full fence before its last look).
 *
 * Arena ownership: the arena is ours alone; the daemon copies a request's
 * data while decoding it, before it releases the slot, so the space of
 * every submission before the daemon's published head is free again. */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "conn.h"
#include "shm/doorbell.h"
#include "common/error.h"

#define WAIT_SLICE_NS 100000000ll /* re-check the socket this often */
#define WAKING_MAX_NS 50000ull	  /* the longest a daemon wake-up is spun */

_Static_assert(sizeof(((struct o1_event *)0)->top_ids) ==
		   O1_WIRE_TOP_PER * sizeof(uint32_t),
	       "o1_event holds one LOGPROBS entry");
_Static_assert(sizeof(((struct o1_event *)0)->ids) >=
		   O1_WIRE_IDS_MAX * sizeof(uint32_t),
	       "o1_event holds one TOKEN entry");
_Static_assert(O1_REFINE_MAX_ROUNDS == O1_WIRE_REFINE_MAX + 1, "rounds");
_Static_assert((int)O1_REFINE_STOP_ERROR == (int)O1_REFINE_ERROR, "stop");
_Static_assert(O1_TOKEN_HAS_ENTROPY == O1_TOKEN_ENTROPY, "token bits");
_Static_assert((unsigned)O1_FLAG_CONFIDENCE == (unsigned)O1_SUBMIT_CONFIDENCE,
	       "flag");
_Static_assert((unsigned)O1_FLAG_DEVICE_LOGITS ==
		   (unsigned)O1_SUBMIT_DEVICE_LOGITS,
	       "flag");
_Static_assert(O1_TOKEN_HAS_DEVICE == O1_TOKEN_DEVICE, "token bits");
_Static_assert(O1_CLIENT_E_NO_DEVOUT == -O1_E_NO_DEVOUT, "error code");
_Static_assert((unsigned)O1_FLAG_CHAT_JSON == (unsigned)O1_SUBMIT_CHAT_JSON,
	       "flag");
_Static_assert((int)O1_GRAMMAR_TYPE_TOOL_CALL == (int)O1_GRAMMAR_TOOL_CALL,
	       "grammar kind");
_Static_assert(sizeof(((struct o1_event *)0)->top_text) ==
		   O1_WIRE_TOP_TEXT_MAX,
	       "o1_event holds one TOP_TEXT entry");
_Static_assert(sizeof(((struct o1_event *)0)->top_len) ==
		   O1_WIRE_LOGPROBS_MAX,
	       "o1_event holds one TOP_TEXT entry");

static uint32_t sq_head(struct o1_client *c)
{
	return atomic_load_explicit(&o1_region_sq_ctrl(c->base, &c->l)->head,
				    memory_order_acquire);
}

/* Frees the arena space of every submission the daemon has released. */
static void reclaim(struct o1_client *c)
{
	uint32_t head = sq_head(c);

	if ((uint32_t)(head - c->reclaimed) >
	    (uint32_t)(c->sq.pub - c->reclaimed))
		return; /* impossible head: keep what we have */
	while (c->reclaimed != head) {
		c->arena_head = c->ends[c->reclaimed & c->sq.mask];
		c->reclaimed++;
	}
}

/* Reserves bytes (4-aligned) contiguously; returns the offset or -EAGAIN. */
static int64_t arena_alloc(struct o1_client *c, uint32_t bytes)
{
	uint64_t size = c->l.arena_bytes, need = (bytes + 3u) & ~3u;
	uint64_t pos = c->arena_tail % size, skip = 0;

	if (need > size)
		return -E2BIG;
	reclaim(c);
	if (pos + need > size)
		skip = size - pos; /* do not wrap a block: start over at 0 */
	if (c->arena_tail + skip + need - c->arena_head > size)
		return -EAGAIN;
	c->arena_tail += skip + need;
	return (int64_t)(skip ? 0 : pos);
}

static int publish(struct o1_client *c)
{
	int ret;

	c->ends[(c->sq.local - 1) & c->sq.mask] = c->arena_tail;
	o1_ring_commit(&c->sq);
	ret = o1_doorbell_notify(o1_region_sq_ctrl(c->base, &c->l), c->efd);
	if (ret >= 0)
		o1_handoff_published(&c->handoff, ret == 1, o1_client_now_ns());
	c->waking |= ret == 1;
	return ret < 0 ? o1_client_fail(ret, "cannot wake the daemon") : 0;
}

static int claim(struct o1_client *c, union o1_wire_entry **e)
{
	void *slot;
	int ret;

	if (o1_client_gone(c, 0))
		return o1_client_fail(O1_CLIENT_E_DAEMON_GONE,
				      "the daemon is gone");
	ret = o1_ring_claim(&c->sq, &slot);
	if (ret == -EAGAIN)
		return o1_client_fail(ret, "submission ring full");
	if (ret)
		return o1_client_fail(ret, "submission ring corrupt");
	*e = slot;
	return 0;
}

static void fill_sampling(struct o1_wire_submit *s, const struct o1_sampling *p)
{
	struct o1_sampling d = {.sz = sizeof(d)};

	if (p)
		memcpy(&d, p, p->sz < sizeof(d) ? p->sz : sizeof(d));
	s->temperature = d.temperature;
	s->top_p = d.top_p ? d.top_p : 1.0f;
	s->min_p = d.min_p;
	s->repeat_penalty = d.repeat_penalty ? d.repeat_penalty : 1.0f;
	s->presence_penalty = d.presence_penalty;
	s->frequency_penalty = d.frequency_penalty;
	s->top_k = d.top_k;
	s->repeat_last_n = d.repeat_last_n;
	s->n_logprobs = d.n_logprobs;
	s->seed = d.seed;
}

static int stops_bytes(const struct o1_submit_opts *o, uint32_t *out)
{
	uint64_t n = 0;

	for (size_t i = 0; i < o->n_stop_strings; i++) {
		size_t len = strlen(o->stop_strings[i]);

		if (len == 0 || len > O1_WIRE_STOP_STR_MAX)
			return o1_client_fail(
			    -EINVAL, "stop string %zu: %zu bytes", i, len);
		n += 1 + len;
	}
	if (n > UINT32_MAX)
		return -E2BIG;
	*out = (uint32_t)n;
	return 0;
}

/* Writes prompt, stop ids, stop strings and grammar into one arena
 * block (o1_client_check has checked the grammar). */
static int write_data(struct o1_client *c, const struct o1_submit_opts *o,
		      struct o1_wire_submit *s)
{
	uint64_t pb = o->text ? o->text_len : o->n_ids * 4ull;
	uint64_t ib = o->n_stop_ids * 4ull, gb = o->grammar_len, total;
	uint32_t sb = 0;
	int64_t off;
	uint8_t *a;
	int ret = stops_bytes(o, &sb);

	if (ret)
		return ret;
	total = ((pb + 3) & ~3ull) + ib + sb + gb;
	if (total > c->l.arena_bytes)
		return o1_client_fail(-E2BIG,
				      "request needs %llu arena bytes, "
				      "the arena has %u",
				      (unsigned long long)total,
				      c->l.arena_bytes);
	off = arena_alloc(c, (uint32_t)total);
	if (off < 0)
		return o1_client_fail((int)off, "arena full");
	a = o1_region_arena(c->base, &c->l);
	s->prompt_off = (uint32_t)off;
	memcpy(a + off, o->text ? (const void *)o->text : (const void *)o->ids,
	       pb);
	off += (pb + 3) & ~3ull;
	s->stop_ids_off = (uint32_t)off;
	if (ib)
		memcpy(a + off, o->stop_ids, ib);
	off += ib;
	s->stop_str_off = (uint32_t)off;
	s->stop_str_len = sb;
	for (size_t i = 0; i < o->n_stop_strings; i++) {
		size_t len = strlen(o->stop_strings[i]);

		a[off++] = (uint8_t)len;
		memcpy(a + off, o->stop_strings[i], len);
		off += len;
	}
	if (gb) {
		s->grammar_off = (uint32_t)off;
		memcpy(a + off, o->grammar, gb);
	}
	return 0;
}

/* The grammar fields of the entry (its bytes: write_data). */
static void fill_grammar(struct o1_wire_submit *s,
			 const struct o1_submit_opts *o)
{
	if (o->grammar_type == O1_GRAMMAR_TYPE_NONE)
		return;
	s->flags |= O1_SUBMIT_GRAMMAR;
	s->grammar_kind = (uint8_t)o->grammar_type;
	s->grammar_len = (uint32_t)o->grammar_len;
}

int o1_client_submit(struct o1_client *c, const struct o1_submit_opts *in)
{
	struct o1_submit_opts o = {0};
	union o1_wire_entry *e = NULL, tmp;
	uint64_t arena_tail;
	int ret;

	if (!in || in->sz < offsetof(struct o1_submit_opts, sampling))
		return o1_client_fail(-EINVAL, "bad submit options");
	memcpy(&o, in, in->sz < sizeof(o) ? in->sz : sizeof(o));
	if ((o.text && !o.text_len) || (!o.text && !o.n_ids))
		return o1_client_fail(-EINVAL, "empty prompt");
	memset(&tmp, 0, sizeof(tmp));
	tmp.submit.op = O1_OP_SUBMIT;
	tmp.submit.prompt_kind = o.text ? O1_PROMPT_TEXT : O1_PROMPT_IDS;
	tmp.submit.prompt_len = (uint32_t)(o.text ? o.text_len : o.n_ids);
	/* O1_SUBMIT_GRAMMAR follows grammar_type (fill_grammar) */
	tmp.submit.flags = (uint16_t)(o.flags & ~(uint32_t)O1_SUBMIT_GRAMMAR);
	tmp.submit.max_tokens = o.max_tokens ? o.max_tokens : 256;
	tmp.submit.req_id = o.req_id;
	tmp.submit.n_stop_ids = (uint32_t)o.n_stop_ids;
	tmp.submit.refine_steps = o.refine_steps;
	fill_sampling(&tmp.submit, o.sampling);
	fill_grammar(&tmp.submit, &o);
	if (!c->base)
		return o1_client_fail(-ECONNRESET, "not connected");
	ret = o1_client_check(c, &o, NULL);
	if (ret)
		return ret; /* the caller's mistake: nothing reaches o1d */
	arena_tail = c->arena_tail;
	ret = write_data(c, &o, &tmp.submit);
	if (!ret)
		ret = claim(c, &e);
	if (ret) {
		c->arena_tail = arena_tail; /* nothing was published */
		return ret;
	}
	tmp.submit.sent_ns = o1_client_now_ns();
	memcpy(e, &tmp, sizeof(tmp));
	c->inflight++;
	return publish(c);
}

static int simple_entry(struct o1_client *c, const union o1_wire_entry *in)
{
	union o1_wire_entry *e = NULL;
	int ret = claim(c, &e);

	if (ret)
		return ret;
	memcpy(e, in, sizeof(*in));
	return publish(c);
}

int o1_client_cancel(struct o1_client *c, uint64_t req_id)
{
	union o1_wire_entry e;

	memset(&e, 0, sizeof(e));
	e.cancel.op = O1_OP_CANCEL;
	e.cancel.req_id = req_id;
	return simple_entry(c, &e);
}

static void round_event(const struct o1_wire_round *r, struct o1_event *ev)
{
	ev->type = O1_EVENT_ROUND;
	ev->req_id = r->req_id;
	ev->round = r->round;
	ev->finish = (enum o1_finish)r->reason;
	ev->refine_stop = (enum o1_refine_stop_reason)r->stop;
	ev->prompt_tokens = r->prompt_tokens;
	ev->generated_tokens = r->generated_tokens;
	ev->cached_tokens = r->cached_tokens;
	ev->conf_tokens = r->generated_tokens;
	ev->mean_logprob = r->mean_logprob;
	ev->min_logprob = r->min_logprob;
	ev->mean_entropy = r->mean_entropy;
	ev->text_bytes = r->text_bytes;
	ev->latency_ns = r->latency_ns;
}

/* A TOP_TEXT entry (decoded: its packing is checked) as offsets into a
 * copy of its data. */
static void top_text(struct o1_event *ev, const struct o1_wire_top_text *t)
{
	const uint8_t *b;
	uint32_t at = 0, len;
	int cut;

	ev->type = O1_EVENT_TOP_TEXT;
	ev->req_id = t->req_id;
	ev->position = t->position;
	ev->top_first = t->first;
	memcpy(ev->top_text, t->data, sizeof(ev->top_text));
	for (uint32_t i = 0;
	     i < t->n && !o1_wire_top_text_next(t, &at, &b, &len, &cut); i++) {
		ev->top_off[i] = (uint8_t)(b - t->data);
		ev->top_len[i] = (uint8_t)len;
		ev->top_cut[i] = (uint8_t)cut;
		ev->n_top = i + 1;
	}
}

static void to_event(const union o1_wire_entry *e, struct o1_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	switch (e->op) {
	case O1_EV_TOKEN:
		ev->type = O1_EVENT_TOKEN;
		ev->req_id = e->token.req_id;
		ev->n_ids = e->token.n_ids;
		memcpy(ev->ids, e->token.ids, sizeof(e->token.ids));
		ev->has_logprobs = e->token.has_logprobs;
		memcpy(ev->logprobs, e->token.logprobs,
		       sizeof(e->token.logprobs));
		ev->round = e->token.round;
		ev->entropy = e->token.entropy;
		ev->dev_seq = e->token.dev_seq;
		ev->text_len = e->token.text_len;
		memcpy(ev->text, e->token.text, ev->text_len);
		break;
	case O1_EV_FINAL:
		ev->type = O1_EVENT_FINAL;
		ev->req_id = e->final.req_id;
		ev->finish = (enum o1_finish)e->final.reason;
		ev->error = e->final.error;
		ev->prompt_tokens = e->final.prompt_tokens;
		ev->generated_tokens = e->final.generated_tokens;
		ev->mean_logprob = e->final.mean_logprob;
		ev->min_logprob = e->final.min_logprob;
		ev->mean_entropy = e->final.mean_entropy;
		ev->conf_tokens = e->final.conf_tokens;
		ev->rounds = e->final.rounds;
		ev->cached_tokens = e->final.cached_tokens;
		ev->refine_stop =
		    (enum o1_refine_stop_reason)e->final.refine_stop;
		break;
	case O1_EV_ROUND:
		round_event(&e->round, ev);
		break;
	case O1_EV_ERROR:
		ev->type = O1_EVENT_ERROR;
		ev->req_id = e->error.req_id;
		ev->error = e->error.error;
		memcpy(ev->message, e->error.msg, e->error.msg_len);
		break;
	case O1_EV_TOP_TEXT:
		top_text(ev, &e->top_text);
		break;
	case O1_EV_LOGPROBS:
		ev->type = O1_EVENT_LOGPROBS;
		ev->req_id = e->logprobs.req_id;
		ev->position = e->logprobs.position;
		ev->n_top = e->logprobs.n;
		memcpy(ev->top_ids, e->logprobs.ids, sizeof(ev->top_ids));
		memcpy(ev->top_logprobs, e->logprobs.logprobs,
		       sizeof(ev->top_logprobs));
		break;
	default:
		ev->type = O1_EVENT_PONG;
		ev->req_id = e->ping.cookie;
		ev->client_ns = e->ping.client_ns;
		ev->daemon_ns = e->ping.daemon_ns;
		break;
	}
}

/* Wakes the daemon if it sleeps waiting for room in our completion ring;
 * after a take, or when the ring is found empty. A relaxed look keeps the
 * common case (flag clear) free of fences. */
static void room_made(struct o1_client *c)
{
	struct o1_ring_ctrl *sq = o1_region_sq_ctrl(c->base, &c->l);

	uint32_t both = O1_RING_WANT_ROOM | O1_RING_NEED_WAKEUP;

	if ((atomic_load_explicit(&sq->flags, memory_order_relaxed) & both) ==
	    both)
		o1_doorbell_notify(sq, c->efd);
}

int o1_client_take(struct o1_client *c, struct o1_event *ev)
{
	union o1_wire_entry e;
	const char *why = "";
	const void *slot;
	int ret;

	ret = o1_ring_peek(&c->cq, &slot);
	if (ret == -EAGAIN) {
		room_made(c);
		return 0;
	}
	if (!ret)
		ret = o1_wire_decode_ev(slot, &e, &why);
	if (ret)
		return o1_client_fail(ret, "bad event from the daemon: %s",
				      why);
	o1_ring_advance(&c->cq);
	o1_ring_release(&c->cq);
	room_made(c);
	to_event(&e, ev);
	if (ev->type == O1_EVENT_FINAL && c->inflight)
		c->inflight--;
	return 1;
}

int o1_client_poll(struct o1_client *c, struct o1_event *ev)
{
	int ret;

	if (!c->base)
		return o1_client_fail(O1_CLIENT_E_DAEMON_GONE,
				      "the daemon is gone");
	ret = o1_client_take(c, ev);
	if (ret > 0)
		o1_client_busy(c);
	return ret ? ret : o1_client_idle(c, ev);
}

/* Sleeps on the completion doorbell for at most slice_ns; *how: 0 when
 * the re-check found an event (no sleep), 1 when the sleep ended
 * otherwise, 2 when it ended by its timeout. */
static int sleep_for_event(struct o1_client *c, struct o1_event *ev,
			   int64_t slice_ns, int *how)
{
	struct o1_ring_ctrl *ctrl = o1_region_cq_ctrl(c->base, &c->l);
	uint32_t seq;
	int ret;

	o1_handoff_note_cpu(ctrl, &c->cpu_told, o1_handoff_cpu());
	seq = o1_doorbell_prepare(ctrl);
	ret = o1_client_take(c, ev);
	*how = 0;
	if (ret == 0) {
		ret = o1_doorbell_wait(ctrl, seq, slice_ns);
		*how = ret == -ETIMEDOUT ? 2 : 1;
		ret = ret == -EINTR || ret == -ETIMEDOUT ? 0 : ret;
		if (!ret)
			ret = o1_client_take(c, ev);
	}
	o1_doorbell_cancel(ctrl);
	c->fd_armed = 0;
	return ret;
}

/* An event was taken by the wait at now; slept: a doorbell woke it. A
 * stream's events feed its pace (pace.h). */
static int took(struct o1_client *c, const struct o1_event *ev, int slept)
{
	if (ev->type == O1_EVENT_TOKEN || ev->type == O1_EVENT_ROUND)
		o1_client_pace_took(&c->pace, o1_client_now_ns(), slept);
	return 1;
}

/* The wait found nothing at now and may sleep at most slice: how long,
 * or 0 to spin through an event due by the stream's pace. */
static int64_t pace_slice(struct o1_client *c, uint64_t now, int64_t slice)
{
	if (!c->inflight)
		return slice;
	return o1_client_pace_sleep(&c->pace, now, slice);
}

/* Whether the daemon we rang awake is still on its way (it has not taken
 * our submission, for at most MAX ns after START); once it has,
 * *spin_from becomes now: the spin window counts from its wake-up. Spinning
 * through its wake-up, rather than sleeping too, saves our own wake-up when
 * its answer comes within the window: one wake-up a round trip instead of
 * two (a Unix socket's costs two). Short: the kernel may have queued the
 * daemon on our CPU, where it runs only when we stop (the handoff's yield
 * covers that only when its CPU hint, where it slept, is ours); yielding
 * every few us instead gave our CPU to unrelated work on a loaded host
 * (p99 in ms). */
static int daemon_waking(struct o1_client *c, uint64_t start, uint64_t now,
			 uint64_t max, uint64_t *spin_from)
{
	if (!c->waking)
		return 0;
	if (now - start < max && o1_ring_unread(&c->sq) > 0)
		return 1;
	c->waking = 0;
	*spin_from = now;
	return 0;
}

/* A turn of the spin for an event due by the pace: yields the CPU when
 * the front loop last ran on ours (or we do not know), since it, or the
 * engine thread whose kick it waits for, may be queued behind the spin;
 * else spins on (a yield there gives the CPU to unrelated work for a
 * time slice on a loaded host: p99 in ms). See pace.h. */
static void pace_turn(struct o1_client *c)
{
	uint32_t front = atomic_load_explicit(
	    &o1_region_sq_ctrl(c->base, &c->l)->cpu, memory_order_relaxed);
	uint32_t cpu = o1_handoff_cpu();

	o1_handoff_note_cpu(o1_region_cq_ctrl(c->base, &c->l), &c->cpu_told,
			    cpu); /* for the front loop's handoff */
	if (!front || !cpu || front == cpu)
		sched_yield();
}

int o1_client_wait(struct o1_client *c, struct o1_event *ev, int64_t timeout_ns)
{
	uint64_t start = o1_client_now_ns(), now, spin = c->spin_ns;
	uint64_t spin_from = start, waking_max = WAKING_MAX_NS;
	int64_t left, slice;
	int ret, how = 0;

	if (!c->base)
		return o1_client_fail(O1_CLIENT_E_DAEMON_GONE,
				      "the daemon is gone");
	if (timeout_ns >= 0 && (uint64_t)timeout_ns < spin)
		spin = (uint64_t)timeout_ns;
	if (timeout_ns >= 0 && (uint64_t)timeout_ns < waking_max)
		waking_max = (uint64_t)timeout_ns;
	o1_handoff_note_cpu(o1_region_cq_ctrl(c->base, &c->l), &c->cpu_told,
			    o1_handoff_cpu());
	for (;;) {
		ret = o1_client_take(c, ev);
		if (ret)
			return ret > 0 ? took(c, ev, how == 1) : ret;
		how = 0;
		if (c->gone)
			return o1_client_gone_error(c);
		now = o1_client_now_ns();
		left = timeout_ns < 0 ? WAIT_SLICE_NS
				      : timeout_ns - (int64_t)(now - start);
		if (left > 0 && now - spin_from >= spin && !c->waking &&
		    o1_client_pace_spin(&c->pace, now)) {
			pace_turn(c);
			continue;
		}
		if (daemon_waking(c, start, now, waking_max, &spin_from) ||
		    now - spin_from < spin) {
			o1_handoff_note_cpu(o1_region_cq_ctrl(c->base, &c->l),
					    &c->cpu_told, o1_handoff_cpu());
			o1_handoff_spin(&c->handoff, &c->sq, now);
			continue;
		}
		if (left <= 0)
			return o1_client_fail(-ETIMEDOUT, "no event in time");
		if (o1_client_gone(c, 1))
			continue; /* what it sent before it went comes first */
		slice = left < WAIT_SLICE_NS ? left : WAIT_SLICE_NS;
		slice = pace_slice(c, now, slice);
		if (!slice)
			continue; /* spin through the event due */
		ret = sleep_for_event(c, ev, slice, &how);
		o1_client_pace_woke(&c->pace, o1_client_now_ns(), how == 2);
		if (ret)
			return ret > 0 ? took(c, ev, how == 1) : ret;
	}
}

int o1_client_ping(struct o1_client *c, uint64_t *rtt_ns)
{
	union o1_wire_entry e;
	struct o1_event ev;
	uint64_t t0 = o1_client_now_ns();
	int ret;

	if (c->inflight)
		return o1_client_fail(-EBUSY, "ping with requests in flight");
	memset(&e, 0, sizeof(e));
	e.ping.op = O1_OP_PING;
	e.ping.cookie = ++c->ping_seq;
	e.ping.client_ns = t0;
	e.ping.sent_ns = o1_client_now_ns();
	ret = simple_entry(c, &e);
	while (!ret) {
		ret = o1_client_wait(c, &ev, 5000000000ll);
		if (ret < 0)
			return ret;
		ret = 0;
		if (ev.type == O1_EVENT_PONG && ev.req_id == c->ping_seq)
			break;
	}
	if (!ret && rtt_ns)
		*rtt_ns = o1_client_now_ns() - t0;
	return ret;
}

int o1_client_generate(struct o1_client *c, const struct o1_submit_opts *o,
		       o1_token_fn fn, void *arg, struct o1_event *final)
{
	struct o1_event ev;
	int ret, cancelled = 0;

	if (c->inflight)
		return o1_client_fail(-EBUSY,
				      "generate with requests in flight");
	ret = o1_client_submit(c, o);
	while (!ret) {
		ret = o1_client_wait(c, &ev, -1);
		if (ret < 0)
			return ret;
		ret = 0;
		if (ev.req_id != o->req_id)
			continue;
		if (ev.type == O1_EVENT_ERROR) /* why the FINAL fails */
			o1_client_fail(ev.error, "%s", ev.message);
		if (ev.type == O1_EVENT_FINAL) {
			*final = ev;
			return 0;
		}
		if ((ev.type == O1_EVENT_TOKEN || ev.type == O1_EVENT_ROUND) &&
		    fn && !cancelled && fn(arg, &ev)) {
			cancelled = 1;
			ret = o1_client_cancel(c, o->req_id);
		}
	}
	return ret;
}

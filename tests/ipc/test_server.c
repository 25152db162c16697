/* Test fixture, not product code: runs the real front loop (o1_ipc) with
 * a deterministic scripted consumer, for the IPC and client tests.
 *
 * Script: a request yields min(max_tokens, 1000) tokens, one per loop pass;
 * token i has id (sum of prompt bytes + i) % 1000 and text "<id> ". A
 * stop id ends it with STOP when that id comes up. A text prompt that
 * starts with "hold" yields nothing until cancelled; one that starts with
 * "endless" yields a token on every pass until cancelled (a loop that
 * always has work). Every request gets
 * exactly one FINAL; usage: prompt_tokens = prompt bytes (text) or ids.
 * With n_logprobs, each token is followed by its alternatives: ids
 * id+1..id+n (mod 1000) with logprobs -0.25, -0.5, ..., then one
 * TOP_TEXT event with each alternative's text: its id in decimal.
 * --devout N gives the loop N fake device output areas (8 rows of 1000
 * floats; handle bytes 0x10 + area) and a vocabulary of 1000; a request
 * with O1_SUBMIT_DEVICE_LOGITS from area a gets tokens with
 * O1_TOKEN_DEVICE and dev_seq 1000 a + i (one reaching ->submit without
 * an area is refused with -EPROTO, which the tests would see).
 * --max-grammar N takes grammars of up to N bytes (O1_SUBMIT_GRAMMAR):
 * a request's grammar bytes and 100 x its kind add to the sum the ids
 * come from, so a test sees what reached the consumer.
 * --poll-delay-us N makes each ->poll with a request going take N us
 * more, as an engine's step would: a reader keeps up with the stream.
 * --fronts N runs N front threads (ipc.h: Threading): the script's table
 * is guarded by a mutex, each request remembers the front that took it,
 * and only that front's ->poll advances it. "fronts" (admin) answers
 * "fronts=N served=A,B,..": requests each front has taken so far.
 *
 * usage: o1_ipc_test_server --socket PATH [--eventfd] [--allow-uid N]
 *        [--max-inflight N] [--max-violations N] [--spin-us N]
 *        [--hello-ms N] [--max-clients N] [--arena N] [--admin-uid N]
 *        [--devout N] [--max-grammar N] [--max-half-open N]
 *        [--per-uid N] [--decay-ms N] [--fronts N] [--poll-delay-us N]
 * Prints "ready" on stdout when listening, and a stats line on SIGHUP and
 * at exit (SIGTERM), with the wake-up samples the loop counted and those
 * it handed to ->observe_wakeup (count and largest). SIGINT toggles draining
 * and prints "draining=N". */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "ipc/ipc.h"
#include "common/log.h"

#define MAX_REQS 4096

struct req {
	int used;
	int hold;
	int cancelled;
	uint32_t client_id;
	uint64_t req_id;
	uint32_t sum;
	uint32_t next, total;
	uint32_t prompt_tokens;
	uint32_t stop_ids[16];
	uint32_t n_stop;
	uint32_t n_logprobs;
	int lp_pending; /* the last token's LOGPROBS are not posted yet */
	int32_t dev;	/* device output area, or -1 */
	uint32_t front; /* the front thread that took it */
};

static struct req reqs[MAX_REQS];
static int live; /* requests in use: ->poll is a no-op without any */
/* Callbacks of several fronts may run at once: all of them take this. */
static pthread_mutex_t script_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long served[O1_IPC_FRONTS_MAX];
static useconds_t poll_delay_us;

static void release(struct req *q)
{
	q->used = 0;
	live--;
}
static int draining;

static int submit_locked(struct o1_ipc_server *srv,
			 const struct o1_ipc_request *r)
{
	struct req *q = NULL;

	for (int i = 0; i < MAX_REQS && !q; i++)
		if (!reqs[i].used)
			q = &reqs[i];
	if (!q)
		return -EBUSY;
	if ((r->params.flags & O1_SUBMIT_DEVICE_LOGITS) && r->devout_area < 0)
		return -EPROTO;
	memset(q, 0, sizeof(*q));
	q->used = 1;
	q->front = o1_ipc_server_front(srv);
	served[q->front]++;
	q->dev =
	    r->params.flags & O1_SUBMIT_DEVICE_LOGITS ? r->devout_area : -1;
	live++;
	q->client_id = r->client_id;
	q->req_id = r->params.req_id;
	for (uint32_t i = 0; i < r->prompt_bytes; i++)
		q->sum += r->prompt[i];
	for (uint32_t i = 0; r->grammar && i < r->params.grammar_len; i++)
		q->sum += r->grammar[i];
	if (r->params.flags & O1_SUBMIT_GRAMMAR)
		q->sum += 100u * r->params.grammar_kind;
	q->total = r->params.max_tokens < 1000 ? r->params.max_tokens : 1000;
	if (r->params.prompt_kind == O1_PROMPT_TEXT && r->prompt_bytes >= 7 &&
	    !memcmp(r->prompt, "endless", 7))
		q->total = UINT32_MAX;
	q->prompt_tokens = r->params.prompt_kind == O1_PROMPT_IDS
			       ? r->prompt_bytes / 4
			       : r->prompt_bytes;
	q->hold = r->params.prompt_kind == O1_PROMPT_TEXT &&
		  r->prompt_bytes >= 4 && !memcmp(r->prompt, "hold", 4);
	q->n_stop = r->n_stop_ids < 16 ? r->n_stop_ids : 16;
	q->n_logprobs = r->params.n_logprobs;
	memcpy(q->stop_ids, r->stop_ids, q->n_stop * 4);
	return 0;
}

static int on_submit(void *ctx, struct o1_ipc_server *srv,
		     const struct o1_ipc_request *r)
{
	int ret;

	(void)ctx;
	pthread_mutex_lock(&script_lock);
	ret = submit_locked(srv, r);
	pthread_mutex_unlock(&script_lock);
	return ret;
}

static void on_cancel(void *ctx, struct o1_ipc_server *srv, uint32_t client,
		      uint64_t req_id)
{
	(void)ctx;
	(void)srv;
	pthread_mutex_lock(&script_lock);
	for (int i = 0; i < MAX_REQS; i++)
		if (reqs[i].used && reqs[i].client_id == client &&
		    reqs[i].req_id == req_id)
			reqs[i].cancelled = 1;
	pthread_mutex_unlock(&script_lock);
}

static void on_disconnect(void *ctx, struct o1_ipc_server *srv, uint32_t client)
{
	(void)ctx;
	(void)srv;
	pthread_mutex_lock(&script_lock);
	for (int i = 0; i < MAX_REQS; i++)
		if (reqs[i].used && reqs[i].client_id == client)
			release(&reqs[i]);
	pthread_mutex_unlock(&script_lock);
}

static int is_stop(const struct req *q, uint32_t id)
{
	for (uint32_t i = 0; i < q->n_stop; i++)
		if (q->stop_ids[i] == id)
			return 1;
	return 0;
}

/* Alternatives of token position p: ids id+1.., logprobs -0.25 (k+1). */
static int post_logprobs(struct o1_ipc_server *srv, struct req *q)
{
	uint32_t p = q->next - 1, id = (q->sum + p) % 1000, ids[20];
	float lp[20];
	int ret;

	for (uint32_t k = 0; k < q->n_logprobs; k++) {
		ids[k] = (id + k + 1) % 1000;
		lp[k] = -0.25f * (float)(k + 1);
	}
	ret = o1_ipc_post_logprobs(srv, q->client_id, q->req_id, p, ids, lp,
				   q->n_logprobs);
	if (!ret)
		q->lp_pending = 2; /* the TOP_TEXT next */
	return ret;
}

/* The alternatives' texts: "<id>" each, in one TOP_TEXT event (20 ids of
 * at most 3 digits fit). */
static int post_top_text(struct o1_ipc_server *srv, struct req *q)
{
	uint32_t p = q->next - 1, id = (q->sum + p) % 1000, at = 0;
	union o1_wire_entry ev;
	int ret;

	memset(&ev, 0, sizeof(ev));
	ev.top_text.op = O1_EV_TOP_TEXT;
	ev.top_text.n = (uint8_t)q->n_logprobs;
	ev.top_text.position = p;
	ev.top_text.req_id = q->req_id;
	for (uint32_t k = 0; k < q->n_logprobs; k++) {
		int n = snprintf((char *)ev.top_text.data + at + 1, 5, "%u",
				 (id + k + 1) % 1000);

		ev.top_text.data[at] = (uint8_t)n;
		at += 1 + (uint32_t)n;
	}
	ret = o1_ipc_post(srv, q->client_id, &ev);
	if (!ret)
		q->lp_pending = 0;
	return ret;
}

static int post_device_token(struct o1_ipc_server *srv, const struct req *q,
			     uint32_t id, const char *text, int n)
{
	union o1_wire_entry ev;

	memset(&ev, 0, sizeof(ev));
	ev.token.op = O1_EV_TOKEN;
	ev.token.req_id = q->req_id;
	ev.token.n_ids = 1;
	ev.token.ids[0] = id;
	ev.token.has_logprobs = O1_TOKEN_DEVICE;
	ev.token.dev_seq = 1000u * (uint32_t)q->dev + q->next;
	ev.token.text_len = (uint8_t)n;
	memcpy(ev.token.text, text, (size_t)n);
	return o1_ipc_post(srv, q->client_id, &ev);
}

/* Advances one request by one event; returns the post result. */
static int step(struct o1_ipc_server *srv, struct req *q)
{
	enum o1_finish_reason why = O1_FINISH_LENGTH;
	uint32_t id = (q->sum + q->next) % 1000;
	char text[16];
	int ret, n;

	if (q->lp_pending == 2)
		return post_top_text(srv, q);
	if (q->lp_pending)
		return post_logprobs(srv, q);
	if (q->cancelled)
		why = O1_FINISH_CANCELLED;
	else if (q->hold)
		return 0;
	else if (q->next < q->total && !is_stop(q, id)) {
		n = snprintf(text, sizeof(text), "%u ", id);
		ret = q->dev >= 0
			  ? post_device_token(srv, q, id, text, n)
			  : o1_ipc_post_token(srv, q->client_id, q->req_id, &id,
					      1, text, (size_t)n);
		if (!ret) {
			q->next++;
			q->lp_pending = q->n_logprobs > 0;
		}
		return ret;
	} else if (q->next < q->total) {
		why = O1_FINISH_STOP;
	}
	ret = o1_ipc_post_final(srv, q->client_id, q->req_id, why, 0,
				q->prompt_tokens, q->next);
	if (!ret)
		release(q);
	return ret;
}

static void on_poll(void *ctx, struct o1_ipc_server *srv)
{
	uint32_t f = o1_ipc_server_front(srv);

	(void)ctx;
	if (poll_delay_us && live)
		usleep(poll_delay_us);
	pthread_mutex_lock(&script_lock);
	for (int i = 0; i < MAX_REQS && live; i++)
		if (reqs[i].used && reqs[i].front == f &&
		    step(srv, &reqs[i]) == -ENOENT)
			release(&reqs[i]);
	pthread_mutex_unlock(&script_lock);
}

/* Wake-up samples the loop handed to ->observe_wakeup. */
static unsigned long long observed, observed_max_ns;

static void on_wakeup(void *ctx, uint64_t ns, int slept)
{
	(void)ctx;
	(void)slept;
	pthread_mutex_lock(&script_lock);
	observed++;
	if (ns > observed_max_ns)
		observed_max_ns = ns;
	pthread_mutex_unlock(&script_lock);
}

static void print_stats(struct o1_ipc_server *srv)
{
	struct o1_ipc_stats st;

	o1_ipc_server_stats(srv, &st);
	pthread_mutex_lock(&script_lock);
	printf(
	    "stats connected=%llu total=%llu refused=%llu deaths=%llu "
	    "violations=%llu kicked=%llu requests=%llu pings=%llu "
	    "sleeps=%llu futex=%d wake_spin=%llu wake_spin_ns=%llu "
	    "wake_sleep=%llu wake_sleep_ns=%llu wake_invalid=%llu "
	    "observed=%llu observed_max_ns=%llu wake_empty=%llu storms=%llu "
	    "evicted=%llu uid_refused=%llu ticks=%llu cq_full=%llu "
	    "room_wakes=%llu tick_refills=%llu\n",
	    (unsigned long long)st.clients_connected,
	    (unsigned long long)st.clients_total,
	    (unsigned long long)st.clients_refused,
	    (unsigned long long)st.client_deaths,
	    (unsigned long long)st.violations,
	    (unsigned long long)st.kicked_out, (unsigned long long)st.requests,
	    (unsigned long long)st.pings, (unsigned long long)st.sleeps,
	    st.futex_wait, (unsigned long long)st.wakeup_spin_n,
	    (unsigned long long)st.wakeup_spin_ns,
	    (unsigned long long)st.wakeup_sleep_n,
	    (unsigned long long)st.wakeup_sleep_ns,
	    (unsigned long long)st.wakeup_invalid, observed, observed_max_ns,
	    (unsigned long long)st.wakeups_empty,
	    (unsigned long long)st.wake_storms,
	    (unsigned long long)st.half_open_evicted,
	    (unsigned long long)st.uid_refused, (unsigned long long)st.ticks,
	    (unsigned long long)st.cq_full, (unsigned long long)st.room_wakes,
	    (unsigned long long)st.tick_refills);
	fflush(stdout);
	pthread_mutex_unlock(&script_lock);
}

/* "fronts=N served=A,B,..." */
static int fronts_reply(struct o1_ipc_server *srv, char *reply, size_t cap)
{
	uint32_t n = o1_ipc_server_fronts(srv);
	int at = snprintf(reply, cap, "fronts=%u served=", n);

	pthread_mutex_lock(&script_lock);
	for (uint32_t f = 0; f < n && at > 0 && (size_t)at < cap; f++)
		at += snprintf(reply + at, cap - (size_t)at, "%s%llu",
			       f ? "," : "", served[f]);
	pthread_mutex_unlock(&script_lock);
	return at;
}

/* Admin fixture: "clients" -> "clients=N first=NAME", "violations" ->
 * "violations=V" (the first client's count, -1 without one), anything
 * else is echoed back as "echo:" + request + " from uid U". */
static int on_admin(void *ctx, struct o1_ipc_server *srv,
		    const struct o1_ipc_client_info *peer, const void *req,
		    size_t len, void *reply, size_t cap)
{
	struct o1_ipc_client_info info[4];
	int n;

	(void)ctx;
	if (len == 6 && !memcmp(req, "fronts", 6))
		return fronts_reply(srv, reply, cap);
	if (len == 7 && !memcmp(req, "clients", 7)) {
		n = o1_ipc_clients(srv, info, 4);
		return snprintf(reply, cap, "clients=%d first=%s", n,
				n ? info[0].name : "-");
	}
	if (len == 10 && !memcmp(req, "violations", 10)) {
		n = o1_ipc_clients(srv, info, 1);
		return snprintf(reply, cap, "violations=%d",
				n ? (int)info[0].violations : -1);
	}
	return snprintf(reply, cap, "echo:%.*s from uid %u", (int)len,
			(const char *)req, (unsigned)peer->uid);
}

static void on_signal(void *ctx, struct o1_ipc_server *srv, int signo)
{
	(void)ctx;
	if (signo == SIGHUP) {
		print_stats(srv);
		return;
	}
	if (signo == SIGINT) { /* fixture: toggles draining */
		draining = !draining;
		o1_ipc_server_set_draining(srv, draining);
		printf("draining=%d\n", draining);
		fflush(stdout);
		return;
	}
	o1_ipc_server_stop(srv);
}

static struct o1_wire_devout fake_areas[4];

/* N fake device output areas: real geometry, handles made of one byte. */
static int fake_devout(struct o1_ipc_opts *o, int n)
{
	if (n < 1 || n > 4)
		return -1;
	for (int i = 0; i < n; i++) {
		struct o1_wire_devout *d = &fake_areas[i];

		d->rows = 8;
		d->row_floats = 1000;
		d->row_stride_bytes = 4096;
		d->stamps_off = 8 * 4096;
		d->area_bytes = 8 * 4096 + 8 * 4;
		snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "0000:%02x:00.0",
			 i);
		memset(d->mem_handle, 0x10 + i, sizeof(d->mem_handle));
		memset(d->event_handle, 0x20 + i, sizeof(d->event_handle));
	}
	o->devout_areas = fake_areas;
	o->n_devout_areas = (uint32_t)n;
	o->vocab_size = 1000;
	return 0;
}

static int parse_args(int argc, char **argv, struct o1_ipc_opts *o,
		      uint32_t *uid)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--eventfd")) {
			o->force_eventfd = 1;
			continue;
		}
		if (!v)
			return -1;
		i++;
		if (!strcmp(a, "--socket"))
			o->socket_path = v;
		else if (!strcmp(a, "--allow-uid")) {
			*uid = (uint32_t)atoi(v);
			o->allowed_uids = uid;
			o->n_allowed_uids = 1;
		} else if (!strcmp(a, "--admin-uid")) {
			uid[1] = (uint32_t)atoi(v);
			o->admin_uids = &uid[1];
			o->n_admin_uids = 1;
		} else if (!strcmp(a, "--max-inflight"))
			o->max_inflight = (uint32_t)atoi(v);
		else if (!strcmp(a, "--max-violations"))
			o->max_violations = (uint32_t)atoi(v);
		else if (!strcmp(a, "--spin-us"))
			o->spin_us = (uint32_t)atoi(v);
		else if (!strcmp(a, "--hello-ms"))
			o->hello_timeout_ms = (uint32_t)atoi(v);
		else if (!strcmp(a, "--max-clients"))
			o->max_clients = (uint32_t)atoi(v);
		else if (!strcmp(a, "--arena"))
			o->arena_bytes = (uint32_t)atoi(v);
		else if (!strcmp(a, "--max-grammar"))
			o->max_grammar_bytes = (uint32_t)atoi(v);
		else if (!strcmp(a, "--max-half-open"))
			o->max_half_open = (uint32_t)atoi(v);
		else if (!strcmp(a, "--per-uid"))
			o->max_clients_per_uid = (uint32_t)atoi(v);
		else if (!strcmp(a, "--decay-ms"))
			o->violation_decay_ms = (uint32_t)atoi(v);
		else if (!strcmp(a, "--fronts"))
			o->front_threads = (uint32_t)atoi(v);
		else if (!strcmp(a, "--poll-delay-us"))
			poll_delay_us = (useconds_t)atoi(v);
		else if (!strcmp(a, "--devout")) {
			if (fake_devout(o, atoi(v)))
				return -1;
		} else
			return -1;
	}
	return o->socket_path ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct o1_ipc_opts o = {.sz = sizeof(o),
				.handle_signals = 1,
				.sq_entries = 64,
				.cq_entries = 64,
				.arena_bytes = 65536};
	struct o1_ipc_consumer cons = {.submit = on_submit,
				       .cancel = on_cancel,
				       .disconnect = on_disconnect,
				       .poll = on_poll,
				       .admin = on_admin,
				       .signal = on_signal,
				       .observe_wakeup = on_wakeup};
	struct o1_ipc_server *srv;
	uint32_t uid[2];
	int ret;

	if (parse_args(argc, argv, &o, uid)) {
		fprintf(stderr, "usage: see the head of test_server.c\n");
		return 2;
	}
	ret = o1_ipc_server_create(&o, &cons, &srv);
	if (ret) {
		fprintf(stderr, "server: %s\n", o1_strerror(ret));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	ret = o1_ipc_server_run(srv);
	print_stats(srv);
	o1_ipc_server_destroy(srv);
	return ret ? 1 : 0;
}

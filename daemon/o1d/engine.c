/* The engine (see engine.h): slab, engine thread, ipc consumer.
 *
 * Invariants:
 * - a slot is in exactly one place: the free list (front), the queue
 *   (under lock), or held by the scheduler until its FINAL is in its out
 *   ring, then active on the front side until that FINAL is consumed;
 * - n_held counts slots not on the free list; the lead stops the loops
 *   when exiting and n_held reaches 0;
 * - each front's active[0..n_active) lists exactly the slots it took
 *   (r->front), so a front pass costs what is in flight on that front,
 *   not the slab's size: a slot is a 16 KiB out ring, and touching 1024
 *   of them each pass cost the spin path microseconds (issue 19);
 * - a slot's events reach its client's completion ring only from the
 *   front serving that client (its one producer): a client stays on one
 *   front, so the front that took the slot is the one that posts to it;
 * - several fronts (ipc.front_threads > 1) share the free list and
 *   n_held, under front_lock; a front changes only its own active list,
 *   under front_lock, and reads it without (no other thread changes it);
 *   a walk of every list (cancel from admin) and a slot's dead flag are
 *   under front_lock too. With one front front_lock is never taken: the
 *   pass is what it was. The engine thread kicks each front with requests
 *   (busy, a relaxed mirror of n_active: a front that just took its first
 *   slot stored it before queue_slot's lock, so the engine thread sees it
 *   once it sees the slot) and the lead always (drain, metrics, exit).
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_int.h"
#include "common/error.h"
#include "faults.h"
#include "common/log.h"
#include "metrics/metrics_writer.h"

#define NONE		  UINT32_MAX
#define DRAIN_WAIT_NS	  100000000ull /* wake-ups while draining */
#define DRAIN_GRACE_NS	  2000000000ull
#define DRAIN_LINGER_NS	  200000000ull
#define STATS_INTERVAL_NS 100000000ull

uint64_t o1_engine_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int alloc_slab(struct o1_engine *e)
{
	e->n_slots = e->o.sched.n_slots;
	e->prompt_cap = e->o.sched.max_prompt_bytes;
	e->slots = calloc(e->n_slots, sizeof(struct o1_req));
	e->prompt_mem = malloc((size_t)e->n_slots * e->prompt_cap);
	e->queue = malloc(e->n_slots * sizeof(uint32_t));
	if (!e->slots || !e->prompt_mem || !e->queue)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->n_slots; i++) {
		e->slots[i].index = i;
		e->slots[i].prompt = e->prompt_mem + (size_t)i * e->prompt_cap;
		e->slots[i].next_free = i + 1 < e->n_slots ? i + 1 : NONE;
	}
	e->free_head = 0;
	return 0;
}

static void free_fronts(struct o1_engine *e)
{
	for (uint32_t f = 0; e->fronts && f < e->n_fronts; f++)
		free(e->fronts[f].active);
	free(e->fronts);
	e->fronts = NULL;
	e->n_fronts = 0;
}

/* N fronts' active lists, each as long as the slab. */
static int alloc_fronts(struct o1_engine *e, uint32_t n)
{
	free_fronts(e);
	e->fronts = calloc(n, sizeof(*e->fronts));
	if (!e->fronts)
		return -ENOMEM;
	e->n_fronts = n;
	for (uint32_t f = 0; f < n; f++) {
		e->fronts[f].active = malloc(e->n_slots * sizeof(uint32_t));
		if (!e->fronts[f].active)
			return -ENOMEM;
	}
	return 0;
}

/* front_lock, taken only with several fronts (engine.c's head). */
static void front_lock(struct o1_engine *e)
{
	if (e->n_fronts > 1)
		pthread_mutex_lock(&e->front_lock);
}

static void front_unlock(struct o1_engine *e)
{
	if (e->n_fronts > 1)
		pthread_mutex_unlock(&e->front_lock);
}

uint32_t o1_engine_held(struct o1_engine *e)
{
	uint32_t n;

	front_lock(e);
	n = e->n_held;
	front_unlock(e);
	return n;
}

static void grammar_ready(void *ctx, struct o1_gcache_waiter *w,
			  struct o1_gentry *g);

static int create_grammars(struct o1_engine *e)
{
	struct o1_gcache_opts go = {
	    .vocab = e->o.grammar_vocab,
	    .max_entries = e->o.grammar_cache_entries,
	    .max_bytes = e->o.grammar_cache_bytes,
	    .threads = e->o.grammar_threads,
	    .tool_format = e->o.tool_format,
	    .ready = grammar_ready,
	    .ctx = e,
	};

	return o1_gcache_create(&go, &e->grammars);
}

int o1_engine_create(const struct o1_engine_opts *o, struct o1_engine **out)
{
	struct o1_engine *e = calloc(1, sizeof(*e));
	int err;

	if (!e)
		return -ENOMEM;
	e->o = *o;
	snprintf(e->model_name, sizeof(e->model_name), "%s",
		 o->model_name ? o->model_name : "");
	snprintf(e->weights, sizeof(e->weights), "%s",
		 o->weights ? o->weights : "");
	snprintf(e->backend_name, sizeof(e->backend_name), "%s",
		 o->backend_name ? o->backend_name : "");
	e->metrics = o->sched.metrics;
	e->start_ns = o1_engine_now_ns();
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->front_lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	err = alloc_slab(e);
	if (!err)
		err = alloc_fronts(e, 1);
	if (!err)
		err = o1_sched_create(&o->sched, &e->sched);
	if (!err && o->grammar_vocab)
		err = create_grammars(e);
	if (err) {
		o1_err("engine: cannot allocate %u request slots: %s",
		       o->sched.n_slots, o1_strerror(err));
		o1_engine_destroy(e);
		return err;
	}
	*out = e;
	return 0;
}

void o1_engine_destroy(struct o1_engine *e)
{
	if (!e)
		return;
	o1_sched_destroy(e->sched);
	for (uint32_t i = 0; e->slots && i < e->n_slots; i++)
		if (e->slots[i].grammar)
			o1_gcache_put(e->grammars, e->slots[i].grammar);
	o1_gcache_destroy(e->grammars);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->front_lock);
	pthread_cond_destroy(&e->cond);
	free_fronts(e);
	free(e->slots);
	free(e->prompt_mem);
	free(e->queue);
	free(e);
}

void o1_engine_set_limits(struct o1_engine *e, uint32_t max_batch_tokens,
			  uint32_t max_running, uint32_t prefill_chunk_tokens,
			  uint32_t drain_timeout_ms)
{
	pthread_mutex_lock(&e->lock);
	e->lim_batch = max_batch_tokens;
	e->lim_running = max_running;
	e->lim_chunk = prefill_chunk_tokens;
	e->o.drain_timeout_ms = drain_timeout_ms;
	e->lim_changed = true;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

/* ---- engine thread ---- */

/* Moves queued slots into the scheduler; returns how many. */
static uint32_t take_queue(struct o1_engine *e)
{
	uint32_t taken[64], n = 0;

	pthread_mutex_lock(&e->lock);
	while (e->q_n && n < 64) {
		taken[n++] = e->queue[e->q_head];
		e->q_head = (e->q_head + 1) % e->n_slots;
		e->q_n--;
	}
	if (e->lim_changed)
		o1_sched_set_limits(e->sched, e->lim_batch, e->lim_running,
				    e->lim_chunk);
	e->lim_changed = false;
	pthread_mutex_unlock(&e->lock);
	for (uint32_t i = 0; i < n; i++)
		o1_sched_add(e->sched, &e->slots[taken[i]]);
	return n;
}

/* Sleeps after a step that ran nothing, until the front wakes the engine
 * (a submission, a cancel, a reader that made room: kicked, so a wake-up
 * that came before the sleep is not lost), the scheduler's next stall
 * deadline (WAKE_NS, 0: none) or, while draining, DRAIN_WAIT_NS. No
 * periodic retry: nothing else can make a blocked sequence runnable. */
static void engine_wait(struct o1_engine *e, uint64_t wake_ns)
{
	struct timespec ts;
	uint64_t wait = 0, now = o1_engine_now_ns();

	pthread_mutex_lock(&e->lock);
	if (!e->stop && !e->q_n && !e->lim_changed && !e->kicked) {
		if (wake_ns)
			wait = wake_ns > now ? wake_ns - now : 1;
		if (e->drain_deadline_ns && (!wait || wait > DRAIN_WAIT_NS))
			wait = DRAIN_WAIT_NS;
		if (!wait) {
			pthread_cond_wait(&e->cond, &e->lock);
		} else {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)(wait / 1000000000ull);
			ts.tv_nsec += (long)(wait % 1000000000ull);
			ts.tv_sec += ts.tv_nsec / 1000000000;
			ts.tv_nsec %= 1000000000;
			pthread_cond_timedwait(&e->cond, &e->lock, &ts);
		}
	}
	e->kicked = false;
	pthread_mutex_unlock(&e->lock);
}

/* The drain deadline (0: none) and whether it has passed. */
static uint64_t deadline(struct o1_engine *e, bool *passed)
{
	uint64_t d;

	pthread_mutex_lock(&e->lock);
	d = e->drain_deadline_ns;
	pthread_mutex_unlock(&e->lock);
	*passed = d && o1_engine_now_ns() >= d;
	return d;
}

/* Adds what the backend's graph counters NOW gained since the last step
 * to the metrics. */
static void publish_graphs(struct o1_engine *e,
			   const struct o1_backend_graph_stats *now)
{
	struct o1_backend_graph_stats *last = &e->graph_last;

	if (!e->metrics)
		return;
	for (uint32_t i = 0; i < now->n_buckets; i++) {
		const struct o1_backend_graph_bucket *b = &now->buckets[i];
		const struct o1_backend_graph_bucket *l = &last->buckets[i];

		if (b->hits != l->hits || b->misses != l->misses ||
		    b->fallbacks != l->fallbacks)
			o1_metrics_graph_add(
			    e->metrics, i, b->hits - l->hits,
			    b->misses - l->misses, b->fallbacks - l->fallbacks,
			    b->padded_tokens - l->padded_tokens);
	}
	for (uint32_t i = 0; i < now->n_spans; i++)
		if (now->spans[i].steps != last->spans[i].steps)
			o1_metrics_graph_add_span(e->metrics, i,
						  now->spans[i].steps -
						      last->spans[i].steps);
	o1_metrics_graph_add_oversize(e->metrics,
				      now->oversize - last->oversize);
	*last = *now;
}

/* NOW's counters summed over the buckets, for admin status. */
static void sum_graphs(const struct o1_backend_graph_stats *now,
		       struct o1_engine_graphs *sum)
{
	*sum = (struct o1_engine_graphs){.oversize = now->oversize,
					 .prefill = now->prefill};
	for (uint32_t i = 0; i < now->n_buckets; i++) {
		sum->hits += now->buckets[i].hits;
		sum->misses += now->buckets[i].misses;
		sum->fallbacks += now->buckets[i].fallbacks;
	}
}

static void publish(struct o1_engine *e)
{
	struct o1_backend_graph_stats now;
	struct o1_engine_graphs sum = {0};

	if (e->o.graph_stats) {
		e->o.graph_stats(e->o.graph_ctx, &now);
		publish_graphs(e, &now);
		sum_graphs(&now, &sum);
	}
	pthread_mutex_lock(&e->lock);
	o1_sched_stats(e->sched, &e->stats);
	e->graphs = sum;
	pthread_mutex_unlock(&e->lock);
}

/* Wakes the fronts that may have events to post: the only one, or the
 * lead and each front holding requests (engine.c's head: busy). */
static void kick_fronts(struct o1_engine *e)
{
	o1_ipc_server_kick(e->srv);
	for (uint32_t f = 1; f < e->n_fronts; f++)
		if (atomic_load_explicit(&e->fronts[f].busy,
					 memory_order_relaxed))
			o1_ipc_server_kick_front(e->srv, f);
}

static void *engine_main(void *arg)
{
	struct o1_engine *e = arg;
	bool stop = false;

	while (!stop) {
		uint32_t added = take_queue(e);
		uint32_t held = o1_sched_active(e->sched);
		bool passed;
		uint64_t d = deadline(e, &passed);
		int n;

		if (passed && o1_sched_active(e->sched)) {
			o1_warn("drain deadline: failing %u requests",
				o1_sched_active(e->sched));
			o1_sched_fail_all(e->sched);
			added++;
		}
		if (e->o.faults)
			o1_faults_tick(e->o.faults);
		n = o1_sched_step(e->sched);
		publish(e);
		/* a FINAL without a step: a cancel, a stalled reader */
		if (n || added || d || o1_sched_active(e->sched) != held)
			kick_fronts(e);
		if (!n)
			engine_wait(e, o1_sched_wake_ns(e->sched));
		pthread_mutex_lock(&e->lock);
		stop = e->stop;
		pthread_mutex_unlock(&e->lock);
	}
	take_queue(e);
	o1_sched_fail_all(e->sched);
	return NULL;
}

int o1_engine_start(struct o1_engine *e, struct o1_ipc_server *srv)
{
	int err;

	e->srv = srv;
	if (o1_ipc_server_fronts(srv) > 1) {
		err = alloc_fronts(e, o1_ipc_server_fronts(srv));
		if (err) {
			o1_err("engine: cannot allocate the front lists");
			return err;
		}
	}
	err = -pthread_create(&e->thread, NULL, engine_main, e);
	if (err)
		o1_err("engine: cannot start its thread: %s", o1_strerror(err));
	e->thread_started = !err;
	return err;
}

void o1_engine_stop(struct o1_engine *e)
{
	/* first: slots waiting for a grammar get their FINAL */
	if (e->grammars)
		o1_gcache_stop(e->grammars);
	if (!e->thread_started)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->thread, NULL);
	e->thread_started = false;
}

/* ---- front thread: consumer callbacks ---- */

static void wake_engine(struct o1_engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->kicked = true;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

static int fill_slot(struct o1_engine *e, struct o1_req *r,
		     const struct o1_ipc_request *q)
{
	if (q->prompt_bytes > e->prompt_cap ||
	    q->n_stop_ids > O1_REQ_STOP_IDS ||
	    q->stop_strings_bytes > O1_REQ_STOP_BYTES) {
		o1_warn("client %u request %llu: prompt %u bytes (max %u), "
			"%u stop ids (max %d), stop strings %u bytes (max %d)",
			q->client_id, (unsigned long long)q->params.req_id,
			q->prompt_bytes, e->prompt_cap, q->n_stop_ids,
			O1_REQ_STOP_IDS, q->stop_strings_bytes,
			O1_REQ_STOP_BYTES);
		return -O1_E_BOUNDS;
	}
	r->client_id = q->client_id;
	r->uid = q->uid;
	r->pid = q->pid;
	r->req_id = q->params.req_id;
	r->params = q->params;
	r->submit_ns = o1_engine_now_ns();
	memcpy(r->prompt, q->prompt, q->prompt_bytes);
	r->prompt_bytes = q->prompt_bytes;
	memcpy(r->stop_ids, q->stop_ids, q->n_stop_ids * sizeof(uint32_t));
	r->n_stop_ids = q->n_stop_ids;
	memcpy(r->stop_str, q->stop_strings, q->stop_strings_bytes);
	r->stop_str_bytes = q->stop_strings_bytes;
	r->n_stop_str = q->n_stop_strings;
	r->devout_area = q->devout_area;
	r->grammar = NULL;
	atomic_store_explicit(&r->cancel, O1_REQ_RUN, memory_order_relaxed);
	atomic_store_explicit(&r->phase, O1_REQ_QUEUED, memory_order_relaxed);
	atomic_store_explicit(&r->generated, 0, memory_order_relaxed);
	atomic_store_explicit(&r->n_prompt, 0, memory_order_relaxed);
	atomic_store_explicit(&r->out_head, 0, memory_order_relaxed);
	atomic_store_explicit(&r->out_tail, 0, memory_order_relaxed);
	r->dead = false;
	return 0;
}

/* A text prompt to a model without a tokenizer: the client's mistake,
 * logged the way o1d says it to the client (the first time, then at
 * powers of two so a looping client cannot flood the log). */
static void no_tokenizer(struct o1_engine *e, const struct o1_ipc_request *q)
{
	uint64_t n = atomic_fetch_add_explicit(&e->no_tokenizer_refusals, 1,
					       memory_order_relaxed) +
		     1;

	if (n <= 1 || !(n & (n - 1)))
		o1_warn("client %u request %llu: %s (%llu such refusals)",
			q->client_id, (unsigned long long)q->params.req_id,
			o1_strerror(-O1_E_NO_TOKENIZER),
			(unsigned long long)n);
}

/* Hands R to the engine thread. */
static void queue_slot(struct o1_engine *e, struct o1_req *r)
{
	pthread_mutex_lock(&e->lock);
	e->queue[(e->q_head + e->q_n) % e->n_slots] = r->index;
	e->q_n++;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

/* R's grammar was refused (or could not be had): its ERROR event with the
 * compiler's message, then its FINAL, produced here: the slot never
 * reaches the engine, so this thread (front or compile) is its only
 * producer. Not a violation: the request's own mistake. */
static void grammar_refused(struct o1_engine *e, struct o1_req *r, int err,
			    const char *msg)
{
	union o1_wire_entry ev;
	size_t n = msg ? strlen(msg) : 0;

	o1_info("client %u request %llu: grammar refused: %s%s%s",
		r->client_id, (unsigned long long)r->req_id, o1_strerror(err),
		n ? ": " : "", n ? msg : "");
	if (n && err != -O1_E_DRAINING) {
		memset(&ev, 0, sizeof(ev));
		ev.error.op = O1_EV_ERROR;
		ev.error.error = err;
		ev.error.req_id = r->req_id;
		ev.error.msg_len = (uint8_t)(n < O1_WIRE_MSG_MAX ? n
								: O1_WIRE_MSG_MAX);
		memcpy(ev.error.msg, msg, ev.error.msg_len);
		o1_req_out_push(r, &ev);
	}
	memset(&ev, 0, sizeof(ev));
	ev.final.op = O1_EV_FINAL;
	ev.final.reason = O1_FINISH_ERROR;
	ev.final.error = err;
	ev.final.req_id = r->req_id;
	atomic_store_explicit(&r->phase, O1_REQ_FINISHED, memory_order_relaxed);
	if (e->metrics)
		o1_metrics_fail(e->metrics, o1_metrics_fail_reason(err));
	o1_req_out_push(r, &ev); /* the last touch of the slot */
}

/* R's grammar G is compiled or refused: R goes to the engine, or ends. */
static void grammar_done(struct o1_engine *e, struct o1_req *r,
			 struct o1_gentry *g)
{
	const char *msg;
	int err = o1_gentry_error(g, &msg);

	if (err)
		grammar_refused(e, r, err, msg);
	else
		queue_slot(e, r);
}

/* A compile thread (or o1_gcache_stop) is done with W's grammar. */
static void grammar_ready(void *ctx, struct o1_gcache_waiter *w,
			  struct o1_gentry *g)
{
	struct o1_engine *e = ctx;
	struct o1_req *r =
	    (struct o1_req *)((char *)w - offsetof(struct o1_req, gwait));

	uint32_t front = r->front; /* r may be freed once refused */

	grammar_done(e, r, g);
	if (o1_gentry_error(g, NULL) && e->srv)
		o1_ipc_server_kick_front(e->srv, front); /* it posts the FINAL */
}

/* Front thread: R (taken, active) with a grammar: to the engine when its
 * grammar is compiled, to grammar_ready when it compiles, or refused. */
static void get_grammar(struct o1_engine *e, struct o1_req *r,
			const struct o1_ipc_request *q)
{
	int ret;

	if (!e->grammars) {
		grammar_refused(e, r, -O1_E_UNSUPPORTED,
				"this daemon takes no grammars");
		return;
	}
	ret = o1_gcache_get(e->grammars, q->params.grammar_kind, q->grammar,
			    q->params.grammar_len, &r->gwait, &r->grammar);
	if (ret < 0)
		grammar_refused(e, r, ret, NULL);
	else if (ret == 1)
		grammar_done(e, r, r->grammar);
}

/* A slot off the free list, or NULL when all are held. */
static struct o1_req *take_slot(struct o1_engine *e)
{
	struct o1_req *r = NULL;

	front_lock(e);
	if (e->free_head != NONE) {
		r = &e->slots[e->free_head];
		e->free_head = r->next_free;
		e->n_held++;
	}
	front_unlock(e);
	return r;
}

static void put_slot(struct o1_engine *e, struct o1_req *r)
{
	r->next_free = e->free_head;
	e->free_head = r->index;
	e->n_held--;
}

/* R, filled, joins front F's active list. */
static void activate(struct o1_engine *e, struct o1_req *r, uint32_t f)
{
	struct o1_engine_front *fr = &e->fronts[f];

	front_lock(e);
	r->front = f;
	r->active = true;
	r->active_at = fr->n_active;
	fr->active[fr->n_active++] = r->index;
	if (e->n_fronts > 1)
		atomic_store_explicit(&fr->busy, fr->n_active,
				      memory_order_relaxed);
	front_unlock(e);
}

static int on_submit(void *ctx, struct o1_ipc_server *srv,
		     const struct o1_ipc_request *q)
{
	struct o1_engine *e = ctx;
	struct o1_req *r;
	int err;

	if (q->params.prompt_kind == O1_PROMPT_TEXT && !e->o.sched.tok) {
		no_tokenizer(e, q);
		return -O1_E_NO_TOKENIZER;
	}
	r = take_slot(e);
	if (!r) {
		o1_warn("client %u request %llu refused: all %u request "
			"slots in use",
			q->client_id, (unsigned long long)q->params.req_id,
			e->n_slots);
		return -O1_E_QUOTA;
	}
	err = fill_slot(e, r, q);
	if (err) {
		front_lock(e);
		put_slot(e, r);
		front_unlock(e);
		return err;
	}
	r->first_token_ns = 0;
	activate(e, r, o1_ipc_server_front(srv));
	if (e->metrics)
		o1_metrics_add(e->metrics, O1_METRICS_CTR_REQUESTS_SUBMITTED,
			       1);
	if (q->params.flags & O1_SUBMIT_GRAMMAR)
		get_grammar(e, r, q);
	else
		queue_slot(e, r);
	return 0;
}

/* Counted as submitted and failed, so the success rate (o1ctl slo) and
 * submitted = finished + in flight hold for requests the loop refused. */
static void on_refused(void *ctx, int err)
{
	struct o1_engine *e = ctx;

	if (!e->metrics)
		return;
	o1_metrics_add(e->metrics, O1_METRICS_CTR_REQUESTS_SUBMITTED, 1);
	o1_metrics_fail(e->metrics, o1_metrics_fail_reason(err));
}

/* The live request REQ_ID of CLIENT_ID on front F's list, or NULL. */
static struct o1_req *find_req(struct o1_engine *e, uint32_t f,
			       uint32_t client_id, uint64_t req_id)
{
	const struct o1_engine_front *fr = &e->fronts[f];

	for (uint32_t i = 0; i < fr->n_active; i++) {
		struct o1_req *r = &e->slots[fr->active[i]];

		if (!r->dead && r->client_id == client_id &&
		    r->req_id == req_id)
			return r;
	}
	return NULL;
}

/* Every front's list: admin's cancel names a client of any front. */
int o1_engine_cancel_req(struct o1_engine *e, uint32_t client_id,
			 uint64_t req_id, int why)
{
	struct o1_req *r = NULL;

	front_lock(e);
	for (uint32_t f = 0; f < e->n_fronts && !r; f++) {
		r = find_req(e, f, client_id, req_id);
		if (r)
			atomic_store_explicit(&r->cancel, why,
					      memory_order_relaxed);
	}
	front_unlock(e);
	if (!r)
		return -ENOENT;
	wake_engine(e);
	return 0;
}

static void on_cancel(void *ctx, struct o1_ipc_server *srv, uint32_t client_id,
		      uint64_t req_id)
{
	(void)srv;
	o1_engine_cancel_req(ctx, client_id, req_id, O1_REQ_CANCEL);
}

static void on_disconnect(void *ctx, struct o1_ipc_server *srv,
			  uint32_t client_id)
{
	struct o1_engine *e = ctx;
	const struct o1_engine_front *fr =
	    &e->fronts[o1_ipc_server_front(srv)];
	uint32_t n = 0;

	front_lock(e);
	for (uint32_t i = 0; i < fr->n_active; i++) {
		struct o1_req *r = &e->slots[fr->active[i]];

		if (r->client_id != client_id)
			continue;
		r->dead = true;
		atomic_store_explicit(&r->cancel, O1_REQ_CLIENT_GONE,
				      memory_order_relaxed);
		n++;
	}
	front_unlock(e);
	if (n) {
		o1_info("client %u gone: cancelling its %u requests", client_id,
			n);
		wake_engine(e);
	}
}

/* One info line for a finished request, as o1ctl names it (o1ctl cancel
 * CLIENT REQ_ID), for 1 of every log.requests. */
static void log_finished(struct o1_engine *e, const struct o1_req *r,
			 const struct o1_wire_final *f)
{
	uint64_t now = o1_engine_now_ns();
	uint64_t n = ++e->fronts[r->front].finished;

	if (!e->o.log_requests || n % e->o.log_requests)
		return;
	o1_info("request done: client %u req %llu finish=%s%s%s "
		"prompt_tokens=%u output_tokens=%u ttft_ms=%.1f "
		"duration_ms=%.1f",
		r->client_id, (unsigned long long)r->req_id,
		o1_wire_finish_name(f->reason), f->error ? " error=" : "",
		f->error ? o1_strerror(f->error) : "", f->prompt_tokens,
		f->generated_tokens,
		r->first_token_ns
		    ? (double)(r->first_token_ns - r->submit_ns) / 1e6
		    : -1.0,
		(double)(now - r->submit_ns) / 1e6);
}

/* Back to the free list; its front's last active entry takes its place. */
static void free_slot(struct o1_engine *e, struct o1_req *r)
{
	struct o1_engine_front *fr = &e->fronts[r->front];
	uint32_t last;

	if (r->grammar)
		o1_gcache_put(e->grammars, r->grammar);
	r->grammar = NULL;
	front_lock(e);
	last = fr->active[--fr->n_active];
	fr->active[r->active_at] = last;
	e->slots[last].active_at = r->active_at;
	if (e->n_fronts > 1)
		atomic_store_explicit(&fr->busy, fr->n_active,
				      memory_order_relaxed);
	r->active = false;
	put_slot(e, r);
	front_unlock(e);
}

/* R's client is gone (a post found no such client). */
static void mark_dead(struct o1_engine *e, struct o1_req *r)
{
	front_lock(e);
	r->dead = true;
	front_unlock(e);
}

/* Posts R's queued events through SRV, the front serving its client;
 * returns 1 when something moved. */
static int drain_slot(struct o1_engine *e, struct o1_ipc_server *srv,
		      struct o1_req *r)
{
	uint32_t tail =
	    atomic_load_explicit(&r->out_tail, memory_order_relaxed);
	uint32_t head =
	    atomic_load_explicit(&r->out_head, memory_order_acquire);
	int moved = 0;

	if (e->o.faults && !r->dead && !e->exiting &&
	    o1_faults_stalled(e->o.faults, r->client_id))
		return 0;
	while (tail != head) {
		const union o1_wire_entry *ev =
		    &r->out[tail & (O1_REQ_OUT_ENTRIES - 1)];
		int err = r->dead ? 0 : o1_ipc_post(srv, r->client_id, ev);

		if (err == -EAGAIN)
			break;
		if (err == -ENOENT)
			mark_dead(e, r);
		tail++;
		moved = 1;
		atomic_store_explicit(&r->out_tail, tail, memory_order_release);
		if (ev->op == O1_EV_TOKEN && !r->first_token_ns)
			r->first_token_ns = o1_engine_now_ns();
		if (ev->op == O1_EV_FINAL) {
			log_finished(e, r, &ev->final);
			free_slot(e, r);
			break;
		}
	}
	return moved;
}

static void feed_ipc_metrics(struct o1_engine *e)
{
	struct o1_ipc_stats st;
	struct o1_metrics *m = e->metrics;
	uint64_t now = o1_engine_now_ns();

	if (!m || now < e->next_stats_ns)
		return;
	e->next_stats_ns = now + STATS_INTERVAL_NS;
	o1_ipc_server_stats(e->srv, &st);
	o1_metrics_set(m, O1_METRICS_CTR_CLIENTS_CONNECTED,
		       st.clients_connected);
	o1_metrics_set(m, O1_METRICS_CTR_CLIENT_CONNECTS, st.clients_total);
	o1_metrics_set(m, O1_METRICS_CTR_CLIENT_DEATHS, st.client_deaths);
	o1_metrics_set(m, O1_METRICS_CTR_PROTOCOL_VIOLATIONS, st.violations);
	o1_metrics_set(m, O1_METRICS_CTR_WAKE_SPIN_HITS, st.wakeups_spin);
	o1_metrics_set(m, O1_METRICS_CTR_WAKE_SLEEPS, st.sleeps);
}

/* Draining to exit: stop once every FINAL is posted and DRAIN_LINGER_NS
 * went by without any request held, so submissions racing the drain are
 * still refused with their FINAL; or when clients leave events unread
 * past the deadline. */
static void exit_when_idle(struct o1_engine *e, struct o1_ipc_server *srv)
{
	uint64_t now = o1_engine_now_ns();
	bool late;

	pthread_mutex_lock(&e->lock);
	late =
	    e->drain_deadline_ns && now > e->drain_deadline_ns + DRAIN_GRACE_NS;
	pthread_mutex_unlock(&e->lock);
	uint32_t held = o1_engine_held(e);

	if (held && !late) {
		e->idle_since_ns = 0;
		return;
	}
	if (!held && !e->idle_since_ns)
		e->idle_since_ns = now;
	if (!late && now - e->idle_since_ns < DRAIN_LINGER_NS)
		return;
	if (held)
		o1_warn("drain: %u requests' events not read by their "
			"clients; exiting anyway",
			held);
	o1_ipc_server_stop(srv);
}

/* A wake-up latency sample from the front loop (loop thread). */
static void on_wakeup(void *ctx, uint64_t ns, int slept)
{
	struct o1_engine *e = ctx;

	(void)slept;
	if (e->metrics)
		o1_metrics_observe_us(e->metrics, O1_METRICS_HIST_WAKEUP,
				      ns / 1000);
}

/* Front srv's pass: its own requests' events; the lead's also the
 * metrics and the exit. */
static void on_poll(void *ctx, struct o1_ipc_server *srv)
{
	struct o1_engine *e = ctx;
	uint32_t f = srv == e->srv ? 0 : o1_ipc_server_front(srv);
	const struct o1_engine_front *fr = &e->fronts[f];
	int moved = 0;

	/* Backwards: a slot freed at i is replaced by one already visited. */
	for (uint32_t i = fr->n_active; i-- > 0;)
		moved |= drain_slot(e, srv, &e->slots[fr->active[i]]);
	if (moved)
		wake_engine(e);
	if (f)
		return;
	feed_ipc_metrics(e);
	if (e->exiting)
		exit_when_idle(e, srv);
}

void o1_engine_drain(struct o1_engine *e, bool on, bool exit)
{
	uint64_t deadline = 0;

	if (exit)
		e->exiting = true;
	if (!on && e->exiting)
		return;
	e->admin_drain = on && !exit;
	o1_ipc_server_set_draining(e->srv, on);
	if (exit)
		deadline = o1_engine_now_ns() +
			   (uint64_t)e->o.drain_timeout_ms * 1000000ull;
	pthread_mutex_lock(&e->lock);
	e->drain_deadline_ns = deadline;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
	o1_ipc_server_kick(e->srv);
}

static void on_signal(void *ctx, struct o1_ipc_server *srv, int signo)
{
	struct o1_engine *e = ctx;

	(void)srv;
	if (signo == SIGHUP) {
		struct o1_reload_report rep;

		if (e->o.reload)
			e->o.reload(e->o.reload_ctx, e, &rep);
		return;
	}
	if (e->exiting) {
		o1_warn("signal %d during drain: stopping now", signo);
		o1_ipc_server_stop(srv);
		return;
	}
	o1_info("signal %d: draining %u requests (deadline %u ms)", signo,
		o1_engine_held(e), e->o.drain_timeout_ms);
	o1_engine_drain(e, true, true);
}

void o1_engine_consumer(struct o1_engine *e, struct o1_ipc_consumer *out)
{
	*out = (struct o1_ipc_consumer){
	    .ctx = e,
	    .submit = on_submit,
	    .cancel = on_cancel,
	    .disconnect = on_disconnect,
	    .poll = on_poll,
	    .admin = o1_engine_admin,
	    .signal = on_signal,
	    .observe_wakeup = on_wakeup,
	    .refused = on_refused,
	};
}

/* Fault injection (see faults.h).
 *
 * Invariants: on/param are written by o1_faults_set (any thread) and read
 * relaxed; the held pages (held[0..n_held)) belong to the engine thread,
 * which alone allocates and puts them (o1_faults_tick), and n_held is
 * published as an atomic for status; a fault is inert while off. The
 * backend's replay hook is called on the engine thread only (it steps the
 * backend): o1_faults_set stores on/param, then bumps replay_gen; the
 * engine thread, seeing a new gen before a step, reads on/param (stored
 * before the gen it read) and hands them to the hook.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "faults.h"
#include "common/log.h"
#include "host_clock.h"

#define LATENCY_DEFAULT_MS 50
#define LATENCY_MAX_MS	   10000
#define NULL_IDS_DEFAULT   256
#define CLOCK_LINES	   8 /* batch sizes host_clock reports */

struct o1_faults {
	struct o1_faults_opts o;
	_Atomic bool on[O1_FAULT__COUNT];
	_Atomic uint64_t param[O1_FAULT__COUNT];
	_Atomic uint64_t delayed, failed, stalled;
	_Atomic uint32_t n_held_pub;
	uint64_t tick; /* engine thread: steps seen by step_fail */
	uint32_t *held, n_held, cap;
	uint32_t target; /* engine thread: pages to hold, 0: not set yet */
	_Atomic uint64_t kv_gen;     /* bumped by each kv_exhaust set */
	uint64_t kv_seen;	     /* engine thread: the gen target is for */
	_Atomic uint64_t replay_gen; /* bumped by each graph_replay set */
	uint64_t replay_seen;	     /* engine thread: the gen the hook has */
	_Atomic uint64_t clock_gen;  /* bumped by each host_clock set */
	uint64_t clock_seen;	     /* engine thread: the gen clock is for */
	bool clock_on;		     /* engine thread: clock is recording */
	struct o1_host_clock clock;  /* engine thread's */
};

static const char *const names[O1_FAULT__COUNT] = {
    [O1_FAULT_LATENCY] = "latency",
    [O1_FAULT_STEP_FAIL] = "step_fail",
    [O1_FAULT_STALL] = "stall",
    [O1_FAULT_KV_EXHAUST] = "kv_exhaust",
    [O1_FAULT_GRAPH_REPLAY] = "graph_replay",
    [O1_FAULT_NULL_FORWARD] = "null_forward",
    [O1_FAULT_HOST_CLOCK] = "host_clock",
};
_Static_assert(sizeof(names) / sizeof(names[0]) == O1_FAULT__COUNT,
	       "one name per fault");

const char *o1_faults_name(enum o1_fault fault)
{
	return fault < O1_FAULT__COUNT ? names[fault] : "?";
}

int o1_faults_create(const struct o1_faults_opts *o, struct o1_faults **out)
{
	struct o1_faults *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->o = *o;
	f->cap = o1_kv_pool_layout(o->pool)->n_pages;
	f->held = calloc(f->cap ? f->cap : 1, sizeof(uint32_t));
	if (!f->held || o1_host_clock_init(&f->clock)) {
		free(f->held);
		free(f);
		return -ENOMEM;
	}
	o1_warn("faults: fault injection is enabled ([faults] enabled): "
		"never in production");
	*out = f;
	return 0;
}

static void release(struct o1_faults *f)
{
	while (f->n_held)
		o1_kv_pool_put(f->o.pool, f->held[--f->n_held]);
	atomic_store(&f->n_held_pub, 0);
}

void o1_faults_destroy(struct o1_faults *f)
{
	if (!f)
		return;
	release(f);
	o1_host_clock_fini(&f->clock);
	free(f->held);
	free(f);
}

/* The pages kv_exhaust holds: PARAM, or what is free when it starts. */
static uint32_t kv_target(struct o1_faults *f)
{
	uint64_t want = atomic_load_explicit(&f->param[O1_FAULT_KV_EXHAUST],
					     memory_order_relaxed);

	if (!want)
		want = o1_kv_pool_free_pages(f->o.pool);
	return (uint32_t)(want < f->cap ? want : f->cap);
}

void o1_faults_tick(struct o1_faults *f)
{
	uint64_t gen = atomic_load(&f->kv_gen);
	uint32_t page;

	if (gen != f->kv_seen) { /* switched on or off: start over */
		if (f->n_held)
			o1_info("faults: kv_exhaust gives %u pages back",
				f->n_held);
		release(f);
		f->kv_seen = gen;
		f->target = 0;
	}
	if (!atomic_load_explicit(&f->on[O1_FAULT_KV_EXHAUST],
				  memory_order_relaxed))
		return;
	if (!f->target)
		f->target = kv_target(f);
	while (f->n_held < f->target && !o1_kv_pool_alloc(f->o.pool, &page))
		f->held[f->n_held++] = page;
	atomic_store(&f->n_held_pub, f->n_held);
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static bool is_on(struct o1_faults *f, enum o1_fault k, uint64_t *param)
{
	if (!atomic_load_explicit(&f->on[k], memory_order_relaxed))
		return false;
	*param = atomic_load_explicit(&f->param[k], memory_order_relaxed);
	return true;
}

/* graph_replay: hands a change (on, off, another PARAM) to the backend
 * before the next step. */
static void apply_replay(struct o1_faults *f)
{
	uint64_t gen = atomic_load(&f->replay_gen), p = 0;
	int err;

	if (gen == f->replay_seen || !f->o.fail_replays)
		return;
	f->replay_seen = gen;
	if (!is_on(f, O1_FAULT_GRAPH_REPLAY, &p))
		p = 0;
	err = f->o.fail_replays(f->o.replay_ctx, (uint32_t)p);
	if (err)
		o1_err("faults: graph_replay: the backend refused it: %s",
		       o1_strerror(err));
}

/* host_clock: records from scratch once switched on (o1_faults_set
 * reports when it is switched off). */
static void apply_clock(struct o1_faults *f)
{
	uint64_t gen = atomic_load(&f->clock_gen), p;

	if (gen == f->clock_seen)
		return;
	f->clock_seen = gen;
	o1_host_clock_reset(&f->clock);
	f->clock_on = is_on(f, O1_FAULT_HOST_CLOCK, &p);
}

/* null_forward's token for logits row ROW of sequence SEQ: a hash of its
 * last token there and its position, below N_IDS. */
static int32_t null_token(const struct o1_step_seq *seq, uint32_t row,
			  uint64_t n_ids)
{
	uint64_t h =
	    (uint64_t)(uint32_t)seq->tokens[row] * 0x9e3779b97f4a7c15ull +
	    (seq->start_pos + row) * 0xbf58476d1ce4e5b9ull;

	return (int32_t)((h >> 17) % n_ids);
}

static void null_row(struct o1_faults *f, const struct o1_step *step,
		     uint32_t row, int32_t id)
{
	float *l;

	if (step->samples) {
		struct o1_sample_result *r = &step->samples[row];
		uint32_t n_top = step->sample_rows[row].n_logprobs;

		r->id = id;
		r->logprob = 0;
		r->entropy = 0;
		r->n_top = n_top;
		for (uint32_t j = 0; j < n_top; j++) {
			r->top_id[j] =
			    (int32_t)(((uint32_t)id + j) % f->o.vocab);
			r->top_logprob[j] = j ? -30.0f : 0.0f;
		}
	}
	if (!step->logits)
		return;
	l = step->logits + (size_t)row * f->o.vocab;
	for (uint32_t v = 0; v < f->o.vocab; v++)
		l[v] = -1e30f;
	l[id] = 0;
}

/* A step without its forward pass (null_forward): what the host sees of
 * one, at no cost. */
static int null_step(struct o1_faults *f, const struct o1_step *step,
		     uint64_t n_ids)
{
	uint32_t row = 0;

	if (n_ids > f->o.vocab)
		n_ids = f->o.vocab;
	for (uint32_t i = 0; i < step->n_seqs; i++) {
		const struct o1_step_seq *q = &step->seqs[i];
		uint32_t first = q->all_logits ? 0 : q->n_tokens - 1;

		for (uint32_t t = first; t < q->n_tokens; t++)
			null_row(f, step, row++, null_token(q, t, n_ids));
	}
	return 0;
}

/* Whether STEP carries prompt tokens (host_clock keeps those apart). */
static bool has_prompt(const struct o1_step *step)
{
	for (uint32_t i = 0; i < step->n_seqs; i++)
		if (step->seqs[i].n_tokens > 1)
			return true;
	return false;
}

static int forward(struct o1_faults *f, const struct o1_step *step)
{
	uint64_t p;

	if (is_on(f, O1_FAULT_NULL_FORWARD, &p))
		return null_step(f, step, p);
	return f->o.step(f->o.step_ctx, step);
}

int o1_faults_step(void *ctx, const struct o1_step *step)
{
	struct o1_faults *f = ctx;
	uint64_t p;
	int err;

	apply_replay(f);
	apply_clock(f);
	if (f->clock_on)
		o1_host_clock_enter(&f->clock);
	if (is_on(f, O1_FAULT_LATENCY, &p)) {
		sleep_ms(p);
		atomic_fetch_add_explicit(&f->delayed, 1, memory_order_relaxed);
	}
	if (is_on(f, O1_FAULT_STEP_FAIL, &p) && ++f->tick % p == 0) {
		atomic_fetch_add_explicit(&f->failed, 1, memory_order_relaxed);
		return -EIO;
	}
	err = forward(f, step);
	if (f->clock_on)
		o1_host_clock_leave(&f->clock, step->n_seqs, has_prompt(step));
	return err;
}

bool o1_faults_stalled(struct o1_faults *f, uint32_t client)
{
	uint64_t p;

	if (!is_on(f, O1_FAULT_STALL, &p) || (p && p != client))
		return false;
	atomic_fetch_add_explicit(&f->stalled, 1, memory_order_relaxed);
	return true;
}

static uint64_t param_default(enum o1_fault k, uint64_t param)
{
	if (k == O1_FAULT_LATENCY && !param)
		return LATENCY_DEFAULT_MS;
	if ((k == O1_FAULT_STEP_FAIL || k == O1_FAULT_GRAPH_REPLAY) && !param)
		return 1;
	if (k == O1_FAULT_NULL_FORWARD && !param)
		return NULL_IDS_DEFAULT;
	return param;
}

int o1_faults_set(struct o1_faults *f, const char *name, bool on,
		  uint64_t param, const char **why)
{
	int k = 0;

	while (k < O1_FAULT__COUNT && strcmp(name, names[k]))
		k++;
	if (k == O1_FAULT__COUNT) {
		*why = "unknown fault (latency, step_fail, stall, kv_exhaust, "
		       "graph_replay, null_forward, host_clock)";
		return -EINVAL;
	}
	if (k == O1_FAULT_GRAPH_REPLAY && !f->o.fail_replays) {
		*why =
		    "graph_replay needs the CUDA backend with graphs enabled "
		    "and captured ([graphs] enabled = true)";
		return -O1_E_UNSUPPORTED;
	}
	if (k == O1_FAULT_NULL_FORWARD && !f->o.vocab) {
		*why = "null_forward: no vocabulary size given";
		return -O1_E_UNSUPPORTED;
	}
	if (k == O1_FAULT_LATENCY && param > LATENCY_MAX_MS) {
		*why = "latency: at most 10000 ms";
		return -EINVAL;
	}
	atomic_store(&f->param[k], param_default(k, param));
	atomic_store(&f->on[k], on);
	if (k == O1_FAULT_KV_EXHAUST)
		atomic_fetch_add(&f->kv_gen, 1);
	if (k == O1_FAULT_GRAPH_REPLAY)
		atomic_fetch_add(&f->replay_gen, 1);
	if (k == O1_FAULT_HOST_CLOCK && !on)
		o1_host_clock_report(&f->clock, CLOCK_LINES);
	if (k == O1_FAULT_HOST_CLOCK)
		atomic_fetch_add(&f->clock_gen, 1);
	o1_warn("faults: %s %s (param %llu)", names[k], on ? "on" : "off",
		(unsigned long long)param_default(k, param));
	return 0;
}

void o1_faults_stats(const struct o1_faults *f, struct o1_faults_stats *out)
{
	struct o1_faults *m = (struct o1_faults *)f;

	memset(out, 0, sizeof(*out));
	for (int k = 0; k < O1_FAULT__COUNT; k++) {
		out->on[k] = atomic_load(&m->on[k]);
		out->param[k] = atomic_load(&m->param[k]);
	}
	out->delayed_steps = atomic_load(&m->delayed);
	out->failed_steps = atomic_load(&m->failed);
	out->stalled_polls = atomic_load(&m->stalled);
	out->kv_pages_held = atomic_load(&m->n_held_pub);
}

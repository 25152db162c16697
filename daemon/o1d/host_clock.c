/* The engine thread's host time between forward passes (see host_clock.h).
 */
#include "host_clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

#define N_ENT (O1_HOST_CLOCK_BATCH_MAX + 1) /* decode batch sizes */
#define N_ALL (O1_HOST_CLOCK_PREFILL + 1)

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int o1_host_clock_init(struct o1_host_clock *c)
{
	memset(c, 0, sizeof(*c));
	c->t = calloc(N_ALL, sizeof(*c->t));
	return c->t ? 0 : -ENOMEM;
}

void o1_host_clock_fini(struct o1_host_clock *c)
{
	free(c->t);
	c->t = NULL;
}

void o1_host_clock_reset(struct o1_host_clock *c)
{
	for (uint32_t b = 0; b < N_ALL; b++) {
		atomic_store_explicit(&c->t[b].steps, 0, memory_order_relaxed);
		atomic_store_explicit(&c->t[b].cpu_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&c->t[b].wall_ns, 0,
				      memory_order_relaxed);
		atomic_store_explicit(&c->t[b].fwd_steps, 0,
				      memory_order_relaxed);
		atomic_store_explicit(&c->t[b].fwd_ns, 0, memory_order_relaxed);
	}
	c->armed = false;
}

static void add(_Atomic uint64_t *v, uint64_t n)
{
	atomic_fetch_add_explicit(v, n, memory_order_relaxed);
}

void o1_host_clock_enter(struct o1_host_clock *c)
{
	uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	struct o1_host_clock_ent *e = &c->t[c->last_batch];

	c->enter_wall = clock_ns(CLOCK_MONOTONIC);
	if (!c->armed)
		return;
	add(&e->steps, 1);
	add(&e->cpu_ns, cpu - c->last_cpu);
	add(&e->wall_ns, c->enter_wall - c->last_wall);
}

void o1_host_clock_leave(struct o1_host_clock *c, uint32_t batch, bool prefill)
{
	struct o1_host_clock_ent *e;

	c->last_batch = prefill		? O1_HOST_CLOCK_PREFILL
			: batch < N_ENT ? batch
					: N_ENT - 1;
	c->last_wall = clock_ns(CLOCK_MONOTONIC);
	e = &c->t[c->last_batch];
	add(&e->fwd_steps, 1);
	add(&e->fwd_ns, c->last_wall - c->enter_wall);
	c->armed = true;
	c->last_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static uint64_t load(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

/* The batch size with the most STEPS among those not yet PICKED
 * (the larger on ties); N_ENT when none is left. */
static uint32_t busiest(const uint64_t *steps, const bool *picked)
{
	uint32_t best = N_ENT;

	for (uint32_t b = 0; b < N_ENT; b++)
		if (steps[b] && !picked[b] &&
		    (best == N_ENT || steps[b] >= steps[best]))
			best = b;
	return best;
}

/* One line: entry B's STEPS gaps and its forward passes. */
static void report_entry(struct o1_host_clock *c, uint32_t b, uint64_t steps)
{
	struct o1_host_clock_ent *e = &c->t[b];
	uint64_t fwd = load(&e->fwd_steps);
	char what[48];

	if (b == O1_HOST_CLOCK_PREFILL)
		snprintf(what, sizeof(what), "steps with prompt tokens");
	else
		snprintf(what, sizeof(what), "batch %u%s", b,
			 b == N_ENT - 1 ? "+" : "");
	o1_info("faults: host_clock: %s: %llu steps, host cpu %.1f us a step, "
		"wall %.1f us; forward %.1f us",
		what, (unsigned long long)steps,
		(double)load(&e->cpu_ns) / 1e3 / (double)steps,
		(double)load(&e->wall_ns) / 1e3 / (double)steps,
		fwd ? (double)load(&e->fwd_ns) / 1e3 / (double)fwd : 0.0);
}

void o1_host_clock_report(struct o1_host_clock *c, uint32_t max_lines)
{
	uint64_t steps[N_ENT], prefill;
	bool picked[N_ENT] = {0};

	for (uint32_t b = 0; b < N_ENT; b++)
		steps[b] = load(&c->t[b].steps);
	for (uint32_t i = 0; i < max_lines; i++) {
		uint32_t b = busiest(steps, picked);

		if (b == N_ENT)
			break;
		picked[b] = true;
	}
	for (uint32_t b = N_ENT; b-- > 0;)
		if (picked[b])
			report_entry(c, b, steps[b]);
	prefill = load(&c->t[O1_HOST_CLOCK_PREFILL].steps);
	if (prefill)
		report_entry(c, O1_HOST_CLOCK_PREFILL, prefill);
}

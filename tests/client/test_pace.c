/* libo1client's pace (client/pace.h) with explicit clocks: no prediction
 * before enough gaps, a sleep shortened to end before the due event and
 * never lengthened, a spin that ends at the margin, a timed wake-up that
 * starts the spin and one ended by the doorbell that does not. Then
 * o1_client_wait's sequence of calls (stream.c) played over a seeded
 * model of a stream: the front loop posts at a steady 2 ms pace with
 * jitter, sometimes late by its own wake-up; the client's doorbell
 * wakes it 20-50 us after a post, its futex timeout 60-100 us late (the
 * timer slack). A steady stream is caught nearly always (without the
 * pace: never, every token a doorbell wake-up); an irregular one costs
 * next to no spin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client/pace.h"
#include "tests/common/test_rng.h"

#define MS	 1000000ull
#define US	 1000ull
#define SLICE_NS 100000000ll /* stream.c's WAIT_SLICE_NS */
#define SPIN_NS	 (20 * US)   /* libo1client's default spin window */

static void steady(struct o1_client_pace *p, uint64_t *t, uint64_t gap, int n)
{
	for (int i = 0; i < n; i++) {
		*t += gap;
		o1_client_pace_took(p, *t, 0);
	}
}

static void test_plan(void **state)
{
	struct o1_client_pace p = {0};
	uint64_t t = 1000 * MS;
	int64_t s;

	(void)state;
	o1_client_pace_took(&p, t, 1);
	steady(&p, &t, 2 * MS, 2);
	/* Two gaps: no prediction, the slice stands. */
	assert_int_equal(o1_client_pace_sleep(&p, t + SPIN_NS, SLICE_NS),
			 SLICE_NS);
	assert_int_equal(p.asked_ns, 0);
	steady(&p, &t, 2 * MS, 1);
	/* Due at t + 2 ms, margin 10 us, no lateness learned yet. */
	s = o1_client_pace_sleep(&p, t + SPIN_NS, SLICE_NS);
	assert_int_equal(s, 2 * MS - 10 * US - SPIN_NS);
	/* A slice shorter than that is kept (a caller's timeout). */
	assert_int_equal(o1_client_pace_sleep(&p, t + SPIN_NS, 1000), 1000);
	assert_int_equal(p.asked_ns, 0);
	/* Ended by the doorbell before its time: no spin, nothing learned. */
	s = o1_client_pace_sleep(&p, t + SPIN_NS, SLICE_NS);
	o1_client_pace_woke(&p, t + MS, 0);
	assert_false(o1_client_pace_spin(&p, t + MS));
	assert_int_equal(p.k.late_ns, 0);
	/* By its timeout, 5 us late: spins until the margin's end. */
	s = o1_client_pace_sleep(&p, t + SPIN_NS, SLICE_NS);
	o1_client_pace_woke(&p, t + SPIN_NS + (uint64_t)s + 5 * US, 1);
	assert_int_equal(p.k.late_ns, 5 * US);
	assert_int_equal(p.wakes, 1);
	assert_true(o1_client_pace_spin(&p, t + 2 * MS));
	assert_false(o1_client_pace_spin(&p, t + 2 * MS + 10 * US));
	assert_int_equal(p.caught, 0);
	assert_int_equal(p.spin_ns, 15 * US);
	/* The next sleep asks that much earlier. */
	assert_int_equal(o1_client_pace_sleep(&p, t + MS, SLICE_NS),
			 MS - 15 * US);
	/* A timed wake-up after the margin's end: no spin. */
	o1_client_pace_woke(&p, t + 2 * MS + 11 * US, 1);
	assert_false(o1_client_pace_spin(&p, t + 2 * MS + 11 * US));
	assert_int_equal(p.wakes, 1);
	/* Past the margin: no prediction until the next arrival. */
	assert_int_equal(
	    o1_client_pace_sleep(&p, t + 2 * MS + 10 * US, SLICE_NS), SLICE_NS);
	/* Inside the margin: spin at once; the event caught. */
	o1_client_pace_took(&p, t + 2 * MS + 12 * US, 1);
	t += 2 * MS + 12 * US;
	assert_int_equal(
	    o1_client_pace_sleep(&p, t + 2 * MS - 5 * US, SLICE_NS), 0);
	assert_true(o1_client_pace_spin(&p, t + 2 * MS - 4 * US));
	o1_client_pace_took(&p, t + 2 * MS, 0);
	assert_int_equal(p.caught, 1);
	assert_false(o1_client_pace_spin(&p, t + 2 * MS + 1));
}

/* The model. */
struct stream_model {
	uint64_t gap_ns, jitter_ns; /* gap_ns +- jitter_ns */
	uint64_t gap_max_ns;	    /* > gap_ns: uniform up to it */
	int front_late_every;	    /* a post 20-60 us late, 0: never */
	int use_pace;		    /* 0: the wait without it (before) */
};

struct outcome {
	int events, caught, doorbells;
	uint64_t spin_ns, span_ns, latency_ns;
};

static uint64_t rng_state;

/* One event posted at post, the client having taken the previous one at
 * *h: o1_client_wait's turns (its spin window, then the pace's sleep or
 * spin, then the doorbell) until it holds it, at *h. */
static void play_event(const struct stream_model *m, struct o1_client_pace *p,
		       uint64_t post, uint64_t *h, struct outcome *o)
{
	uint64_t now = *h + SPIN_NS,
		 bell = post + o1_test_uniform(&rng_state, 20 * US, 50 * US);
	int64_t s;
	int slept = 1;

	if (post <= now) { /* inside the spin window */
		now = post;
		slept = 0;
		goto took;
	}
	s = m->use_pace ? o1_client_pace_sleep(p, now, SLICE_NS) : SLICE_NS;
	if (s > 0) {
		uint64_t fire = now + (uint64_t)s +
				o1_test_uniform(&rng_state, 60 * US, 100 * US);

		if (bell <= fire) {
			o1_client_pace_woke(p, bell, 0);
			now = bell;
			o->doorbells++;
			goto took;
		}
		now = fire;
		o1_client_pace_woke(p, now, 1);
		if (post <= now) { /* there on the re-check: late */
			slept = 0;
			goto took;
		}
	}
	if (o1_client_pace_spin(p, now)) {
		uint64_t from = now, until = p->until_ns;

		if (o1_client_pace_spin(p, post)) {
			o->spin_ns += post - from;
			now = post;
			slept = 0;
			goto took;
		}
		o->spin_ns += until - from; /* ended it at until */
	}
	now = bell;
	o->doorbells++;
took:
	o->caught += !slept && now == post;
	o->latency_ns += now - post;
	o1_client_pace_took(p, now, slept);
	o->events++;
	*h = now;
}

static struct outcome play(const struct stream_model *m, int n, uint64_t seed)
{
	struct o1_client_pace p = {0};
	struct outcome o = {0};
	uint64_t t = 1000 * MS, h = t, post, g;

	rng_state = seed;
	o1_client_pace_took(&p, h, 1);
	for (int i = 0; i < n; i++) {
		g = m->gap_ns - m->jitter_ns +
		    o1_test_uniform(&rng_state, 0, 2 * m->jitter_ns);
		if (m->gap_max_ns > m->gap_ns)
			g = o1_test_uniform(&rng_state, m->gap_ns,
					    m->gap_max_ns);
		t += g;
		post = t;
		if (m->front_late_every && i % m->front_late_every == 1)
			post += o1_test_uniform(&rng_state, 20 * US, 60 * US);
		play_event(m, &p, post, &h, &o);
	}
	o.span_ns = t - 1000 * MS;
	return o;
}

static void report(const char *what, const struct outcome *o)
{
	print_message("%s: caught %d of %d events (%.1f%%), %d doorbell "
		      "wake-ups, mean latency %.1f us, spin %.1f us an event, "
		      "%.2f%% of the time\n",
		      what, o->caught, o->events, 100.0 * o->caught / o->events,
		      o->doorbells, (double)o->latency_ns / o->events / 1e3,
		      (double)o->spin_ns / o->events / 1e3,
		      100.0 * (double)o->spin_ns / (double)o->span_ns);
}

/* A decode's tokens 2 ms apart, +-5 us, the front loop late one post in
 * five: nearly every token caught, a few percent of a core spun. */
static void test_steady_stream(void **state)
{
	struct stream_model m = {.gap_ns = 2 * MS,
				 .jitter_ns = 5 * US,
				 .front_late_every = 5,
				 .use_pace = 1};
	struct outcome o, before;

	(void)state;
	for (uint64_t seed = 1; seed <= 3; seed++) {
		o = play(&m, 2000, seed * 0x9e3779b97f4a7c15ull);
		report("2 ms +-5 us, pace", &o);
		assert_true(o.caught >= 2000 * 85 / 100);
		assert_true(o.spin_ns < o.span_ns / 20);
	}
	m.jitter_ns = 30 * US;
	o = play(&m, 2000, 7);
	report("2 ms +-30 us, pace", &o);
	assert_true(o.caught >= 2000 * 70 / 100);
	m.use_pace = 0;
	before = play(&m, 2000, 7);
	report("2 ms +-30 us, no pace", &before);
	assert_int_equal(before.caught, 0);
	assert_true(before.latency_ns > 2 * o.latency_ns);
}

/* Gaps of 1-3 ms at random: no margin fits, no spin. */
static void test_irregular_stream(void **state)
{
	struct stream_model m = {
	    .gap_ns = MS, .gap_max_ns = 3 * MS, .use_pace = 1};
	struct outcome o;

	(void)state;
	o = play(&m, 2000, 11);
	report("1-3 ms at random, pace", &o);
	assert_true(o.spin_ns < o.span_ns / 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plan),
	    cmocka_unit_test(test_steady_stream),
	    cmocka_unit_test(test_irregular_stream),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

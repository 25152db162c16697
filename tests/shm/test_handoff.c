/* Handoff tests: the rule of shm/handoff.h with explicit clocks (no yield
 * before it is due, one per publication, none once the peer took the
 * entries or when its head is corrupt), and two threads on one CPU playing
 * ping-pong with spin, handoff and doorbell sleeps, where a lost wake-up
 * would show as a wait that runs into its 60 s limit. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "shm/doorbell.h"
#include "shm/handoff.h"
#include "shm/ring.h"

#define CAP 8

struct pair {
	struct o1_ring_ctrl ctrl;
	uint64_t slots[CAP];
	struct o1_ring prod, cons;
};

static struct pair *pair_new(void)
{
	struct pair *p = aligned_alloc(64, sizeof(*p));

	assert_non_null(p);
	memset(p, 0, sizeof(*p));
	assert_int_equal(o1_ring_init(&p->prod, &p->ctrl, p->slots, CAP, 8), 0);
	assert_int_equal(o1_ring_init(&p->cons, &p->ctrl, p->slots, CAP, 8), 0);
	return p;
}

static void put(struct o1_ring *r, uint64_t v)
{
	void *slot;

	assert_int_equal(o1_ring_claim(r, &slot), 0);
	memcpy(slot, &v, sizeof(v));
	o1_ring_commit(r);
}

/* Takes one entry into *v: 1, or 0 when the ring is empty. */
static int take(struct o1_ring *r, uint64_t *v)
{
	const void *slot;

	if (o1_ring_peek(r, &slot))
		return 0;
	memcpy(v, slot, sizeof(*v));
	o1_ring_advance(r);
	o1_ring_release(r);
	return 1;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set); /* best effort */
}

static void test_rule(void **state)
{
	struct pair *p = pair_new();
	struct o1_handoff h = {0};
	uint64_t t = 1000000, v;

	(void)state;
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t), 0); /* nothing */
	/* Not rung: due only once the entry stayed unread long enough. */
	put(&p->prod, 1);
	o1_handoff_published(&h, 0, t);
	assert_int_equal(
	    o1_handoff_spin(&h, &p->prod, t + O1_HANDOFF_AFTER_NS - 1), 0);
	/* A later publication does not push the oldest one's time back. */
	put(&p->prod, 2);
	o1_handoff_published(&h, 0, t + O1_HANDOFF_AFTER_NS - 1);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t + O1_HANDOFF_AFTER_NS),
			 1);
	/* One yield per publication, however long the peer leaves it. */
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t + 1000000000ull), 0);
	/* Rung awake: due at once. */
	put(&p->prod, 3);
	o1_handoff_published(&h, 1, t);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t), 1);
	/* The peer took everything: no yield, and nothing left pending. */
	while (take(&p->cons, &v))
		;
	put(&p->prod, 4);
	o1_handoff_published(&h, 1, t);
	assert_true(take(&p->cons, &v));
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t), 0);
	assert_int_equal(h.since_ns, 0);
	free(p);
}

/* The consumer's CPU hint: an unread entry is worth a yield at once when
 * the consumer last ran on our CPU, never when it ran on another, and
 * with no hint when it rang the consumer or is past its age. */
static void test_cpu_hint(void **state)
{
	struct pair *p = pair_new();
	struct o1_handoff h = {0};
	uint32_t told = 0, mine, other;
	uint64_t t = 1000000, due = t + O1_HANDOFF_AFTER_NS;

	(void)state;
	pin(sched_getcpu());
	mine = o1_handoff_cpu();
	assert_int_not_equal(mine, 0);
	other = mine + 1;
	o1_handoff_note_cpu(&p->ctrl, &told, other);
	assert_int_equal(atomic_load(&p->ctrl.cpu), other);
	assert_int_equal(told, other);
	put(&p->prod, 1);
	o1_handoff_published(&h, 0, t);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, due), 0);
	o1_handoff_published(&h, 1, t);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t), 0);
	o1_handoff_note_cpu(&p->ctrl, &told, mine);
	o1_handoff_published(&h, 1, t);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t), 1);
	o1_handoff_published(&h, 0, t);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t), 1); /* at once */
	atomic_store(&p->ctrl.cpu, 0); /* a peer that does not say */
	o1_handoff_published(&h, 0, t);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, t), 0);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, due), 1);
	free(p);
}

/* A consumer that publishes an impossible head gets no yield from us. */
static void test_corrupt_head(void **state)
{
	struct pair *p = pair_new();
	struct o1_handoff h = {0};

	(void)state;
	put(&p->prod, 1);
	o1_handoff_published(&h, 1, 5);
	atomic_store(&p->ctrl.head, 1000);
	assert_int_equal(o1_handoff_spin(&h, &p->prod, 5), 0);
	assert_int_equal(h.since_ns, 0);
	free(p);
}

#define ROUNDS	 20000
#define SPINS	 64
#define LIMIT_NS 60000000000ll /* a lost wake-up, not a busy CI machine */

struct side {
	struct o1_ring *in, *out;
	struct o1_handoff h;
	int cpu;
	uint32_t cpu_told;
	int err;
	uint64_t yields;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Waits for one entry as the daemon and the client do: a short spin with
 * the handoff, then prepare, re-check, sleep on the doorbell. */
static int recv_one(struct side *s, uint64_t *v)
{
	o1_handoff_note_cpu(s->in->ctrl, &s->cpu_told, o1_handoff_cpu());
	for (int spin = 0;; spin++) {
		uint32_t seq;
		int ret;

		if (take(s->in, v))
			return 0;
		if (spin < SPINS) {
			s->yields +=
			    (uint64_t)o1_handoff_spin(&s->h, s->out, now_ns());
			continue;
		}
		seq = o1_doorbell_prepare(s->in->ctrl);
		if (take(s->in, v)) {
			o1_doorbell_cancel(s->in->ctrl);
			return 0;
		}
		ret = o1_doorbell_wait(s->in->ctrl, seq, LIMIT_NS);
		o1_doorbell_cancel(s->in->ctrl);
		if (ret == -ETIMEDOUT)
			return ret; /* a lost wake-up */
	}
}

static int send_one(struct side *s, uint64_t v)
{
	void *slot;
	int rang;

	if (o1_ring_claim(s->out, &slot))
		return -EAGAIN;
	memcpy(slot, &v, sizeof(v));
	o1_ring_commit(s->out);
	rang = o1_doorbell_notify(s->out->ctrl, -1);
	if (rang < 0)
		return rang;
	o1_handoff_published(&s->h, rang == 1, now_ns());
	return 0;
}

static void *echo_main(void *arg)
{
	struct side *s = arg;
	uint64_t v;

	pin(s->cpu);
	for (int i = 0; i < ROUNDS && !s->err; i++) {
		s->err = recv_one(s, &v);
		if (!s->err)
			s->err = send_one(s, v + 1);
	}
	return NULL;
}

/* Both threads on the CPU we run on, so each wakes a peer queued behind
 * it; every round trip must complete (each wait gives up after 60 s). */
static void test_ping_pong_one_cpu(void **state)
{
	struct pair *a = pair_new(), *b = pair_new();
	struct side me = {.in = &b->cons, .out = &a->prod};
	struct side echo = {.in = &a->cons, .out = &b->prod};
	pthread_t t;
	uint64_t v;

	(void)state;
	me.cpu = echo.cpu = sched_getcpu();
	pin(me.cpu);
	assert_int_equal(pthread_create(&t, NULL, echo_main, &echo), 0);
	for (uint64_t i = 0; i < ROUNDS && !me.err; i++) {
		me.err = send_one(&me, i * 2);
		if (!me.err)
			me.err = recv_one(&me, &v);
		if (!me.err && v != i * 2 + 1)
			me.err = -EPROTO;
	}
	pthread_join(t, NULL);
	assert_int_equal(me.err, 0);
	assert_int_equal(echo.err, 0);
	printf("# %d round trips on cpu %d, yields %llu + %llu\n", ROUNDS,
	       me.cpu, (unsigned long long)me.yields,
	       (unsigned long long)echo.yields);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rule),
	    cmocka_unit_test(test_cpu_hint),
	    cmocka_unit_test(test_corrupt_head),
	    cmocka_unit_test(test_ping_pong_one_cpu),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

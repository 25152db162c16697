/* Ring tests: empty, full, wrap-around, batching, corrupt peer indices, and
 * two threads passing 20 million messages with a running checksum. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "shm/ring.h"

#define SLOT 8

struct fixture {
	struct o1_ring_ctrl ctrl;
	uint64_t slots[16];
	struct o1_ring prod, cons;
};

static struct fixture *fx_new(uint32_t cap)
{
	struct fixture *f = aligned_alloc(64, sizeof(*f));

	assert_non_null(f);
	memset(f, 0, sizeof(*f));
	assert_int_equal(o1_ring_init(&f->prod, &f->ctrl, f->slots, cap, SLOT),
			 0);
	assert_int_equal(o1_ring_init(&f->cons, &f->ctrl, f->slots, cap, SLOT),
			 0);
	return f;
}

static void push(struct o1_ring *r, uint64_t v)
{
	void *slot;

	assert_int_equal(o1_ring_claim(r, &slot), 0);
	memcpy(slot, &v, sizeof(v));
	o1_ring_commit(r);
}

static uint64_t pop(struct o1_ring *r)
{
	const void *slot;
	uint64_t v;

	assert_int_equal(o1_ring_peek(r, &slot), 0);
	memcpy(&v, slot, sizeof(v));
	o1_ring_advance(r);
	o1_ring_release(r);
	return v;
}

static void test_init_rejects(void **state)
{
	struct fixture *f = fx_new(4);

	(void)state;
	assert_int_equal(o1_ring_init(&f->prod, &f->ctrl, f->slots, 3, 8),
			 -EINVAL);
	assert_int_equal(o1_ring_init(&f->prod, &f->ctrl, f->slots, 1, 8),
			 -EINVAL);
	assert_int_equal(o1_ring_init(&f->prod, &f->ctrl, f->slots, 4, 12),
			 -EINVAL);
	assert_int_equal(o1_ring_init(&f->prod, NULL, f->slots, 4, 8), -EINVAL);
	free(f);
}

static void test_empty_full(void **state)
{
	struct fixture *f = fx_new(4);
	const void *cslot;
	void *slot;

	(void)state;
	assert_int_equal(o1_ring_peek(&f->cons, &cslot), -EAGAIN);
	assert_int_equal(o1_ring_ready(&f->cons), 0);
	assert_int_equal(o1_ring_space(&f->prod), 4);
	for (uint64_t i = 0; i < 4; i++)
		push(&f->prod, i);
	assert_int_equal(o1_ring_claim(&f->prod, &slot), -EAGAIN);
	assert_int_equal(o1_ring_space(&f->prod), 0);
	assert_int_equal(o1_ring_ready(&f->cons), 4);
	assert_int_equal(pop(&f->cons), 0);
	assert_int_equal(o1_ring_space(&f->prod), 1);
	push(&f->prod, 4);
	for (uint64_t i = 1; i < 5; i++)
		assert_int_equal(pop(&f->cons), i);
	assert_int_equal(o1_ring_peek(&f->cons, &cslot), -EAGAIN);
	free(f);
}

/* Visible only after commit; abort drops claims; wrap-around many times,
 * also across the uint32 index overflow. */
static void test_commit_wrap(void **state)
{
	struct fixture *f = fx_new(8);
	const void *cslot;
	void *slot;

	(void)state;
	assert_int_equal(o1_ring_claim(&f->prod, &slot), 0);
	assert_int_equal(o1_ring_peek(&f->cons, &cslot), -EAGAIN);
	o1_ring_abort(&f->prod);
	assert_int_equal(o1_ring_space(&f->prod), 8);
	/* Start both sides just below the index wrap point. */
	f->prod.local = f->prod.pub = f->prod.peer = UINT32_MAX - 20;
	f->cons.local = f->cons.pub = f->cons.peer = UINT32_MAX - 20;
	atomic_store(&f->ctrl.head, UINT32_MAX - 20);
	atomic_store(&f->ctrl.tail, UINT32_MAX - 20);
	for (uint64_t i = 0; i < 1000; i++) {
		uint32_t n = 1 + i % 8;

		for (uint32_t k = 0; k < n; k++) {
			assert_int_equal(o1_ring_claim(&f->prod, &slot), 0);
			memcpy(slot, &(uint64_t){i * 100 + k}, 8);
		}
		assert_int_equal(o1_ring_ready(&f->cons), 0);
		o1_ring_commit(&f->prod);
		assert_int_equal(o1_ring_ready(&f->cons), n);
		for (uint32_t k = 0; k < n; k++)
			assert_int_equal(pop(&f->cons), i * 100 + k);
	}
	free(f);
}

/* The producer's count of entries published and not handed back: claims
 * count only once committed, the consumer's advance only once released. */
static void test_unread(void **state)
{
	struct fixture *f = fx_new(4);
	void *slot;

	(void)state;
	assert_int_equal(o1_ring_unread(&f->prod), 0);
	assert_int_equal(o1_ring_claim(&f->prod, &slot), 0);
	assert_int_equal(o1_ring_unread(&f->prod), 0);
	o1_ring_commit(&f->prod);
	push(&f->prod, 7);
	assert_int_equal(o1_ring_unread(&f->prod), 2);
	pop(&f->cons);
	assert_int_equal(o1_ring_unread(&f->prod), 1);
	assert_int_equal(pop(&f->cons), 7);
	assert_int_equal(o1_ring_unread(&f->prod), 0);
	free(f);
}

/* A peer that publishes an impossible index is reported, not trusted. */
static void test_corrupt_indices(void **state)
{
	struct fixture *f = fx_new(4);
	const void *cslot;
	void *slot;

	(void)state;
	atomic_store(&f->ctrl.tail, 5); /* more than capacity ahead */
	assert_int_equal(o1_ring_peek(&f->cons, &cslot), -O1_E_PROTOCOL);
	atomic_store(&f->ctrl.tail, UINT32_MAX); /* behind */
	assert_int_equal(o1_ring_peek(&f->cons, &cslot), -O1_E_PROTOCOL);
	assert_int_equal(o1_ring_ready(&f->cons), -O1_E_PROTOCOL);
	atomic_store(&f->ctrl.tail, 0);
	for (uint64_t i = 0; i < 4; i++)
		push(&f->prod, i);
	atomic_store(&f->ctrl.head, 9); /* consumer claims to be ahead */
	assert_int_equal(o1_ring_claim(&f->prod, &slot), -O1_E_PROTOCOL);
	assert_int_equal(o1_ring_space(&f->prod), -O1_E_PROTOCOL);
	assert_int_equal(o1_ring_unread(&f->prod), -O1_E_PROTOCOL);
	atomic_store(&f->ctrl.head, 0);
	assert_int_equal(o1_ring_claim(&f->prod, &slot), -EAGAIN);
	free(f);
}

#define STRESS_MSGS 20000000ull
#define STRESS_CAP  4096

struct stress {
	struct o1_ring_ctrl ctrl;
	uint64_t slots[STRESS_CAP];
	uint64_t sum_sent, sum_recv;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	return x ^ (x >> 29);
}

static void *producer(void *arg)
{
	struct stress *s = arg;
	struct o1_ring r;
	uint64_t i = 0, sum = 0;
	void *slot;

	o1_ring_init(&r, &s->ctrl, s->slots, STRESS_CAP, SLOT);
	while (i < STRESS_MSGS) {
		int n = 0;

		while (n < 256 && i < STRESS_MSGS &&
		       o1_ring_claim(&r, &slot) == 0) {
			uint64_t v = mix(i++);

			memcpy(slot, &v, 8);
			sum += v;
			n++;
		}
		o1_ring_commit(&r);
		if (!n)
			sched_yield();
	}
	s->sum_sent = sum;
	return NULL;
}

static void *consumer(void *arg)
{
	struct stress *s = arg;
	struct o1_ring r;
	uint64_t i = 0, sum = 0, bad = 0;
	const void *slot;

	o1_ring_init(&r, &s->ctrl, s->slots, STRESS_CAP, SLOT);
	while (i < STRESS_MSGS) {
		int n = 0;

		while (n < 256 && o1_ring_peek(&r, &slot) == 0) {
			uint64_t v;

			memcpy(&v, slot, 8);
			bad += v != mix(i++);
			sum += v;
			o1_ring_advance(&r);
			n++;
		}
		o1_ring_release(&r);
		if (!n)
			sched_yield();
	}
	s->sum_recv = bad ? 0 : sum;
	return NULL;
}

static void test_two_threads(void **state)
{
	struct stress *s = aligned_alloc(64, sizeof(*s));
	pthread_t p, c;

	(void)state;
	assert_non_null(s);
	memset(s, 0, sizeof(*s));
	assert_int_equal(pthread_create(&c, NULL, consumer, s), 0);
	assert_int_equal(pthread_create(&p, NULL, producer, s), 0);
	pthread_join(p, NULL);
	pthread_join(c, NULL);
	assert_int_not_equal(s->sum_sent, 0);
	assert_int_equal(s->sum_sent, s->sum_recv);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_rejects),
	    cmocka_unit_test(test_empty_full),
	    cmocka_unit_test(test_commit_wrap),
	    cmocka_unit_test(test_unread),
	    cmocka_unit_test(test_corrupt_indices),
	    cmocka_unit_test(test_two_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

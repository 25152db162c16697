/* Region layout and doorbell tests: geometry limits, header round trip and
 * rejection, and a consumer thread that sleeps on the doorbell and is woken
 * by a producer only when it asked (NEED_WAKEUP). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "shm/doorbell.h"
#include "common/error.h"
#include "shm/region.h"
#include "shm/wire.h"

static void test_layout(void **state)
{
	struct o1_region_layout l, c;
	uint16_t flags;
	void *base;

	(void)state;
	assert_int_equal(o1_region_layout(3, 4, 4096, &l), -O1_E_BOUNDS);
	assert_int_equal(o1_region_layout(4, 1u << 17, 4096, &l), -O1_E_BOUNDS);
	assert_int_equal(o1_region_layout(4, 4, 100, &l), -O1_E_BOUNDS);
	assert_int_equal(o1_region_layout(64, 256, 5000, &l), 0);
	assert_int_equal(l.arena_bytes, 5056);
	assert_int_equal(l.sq_off % 64, 0);
	assert_int_equal(l.cq_off, l.sq_off + 64 * O1_WIRE_ENTRY_BYTES);
	assert_int_equal(l.arena_off, l.cq_off + 256 * O1_WIRE_ENTRY_BYTES);
	assert_true(l.arena_off + l.arena_bytes <= l.total_bytes);
	assert_int_equal(l.total_bytes % 4096, 0);
	base = aligned_alloc(4096, l.total_bytes);
	assert_non_null(base);
	o1_region_format(base, &l, O1_REGION_EVENTFD, 5);
	assert_int_equal(o1_region_check(base, l.total_bytes, &c, &flags), 0);
	assert_memory_equal(&l, &c, sizeof(l));
	assert_int_equal(flags, O1_REGION_EVENTFD);
	assert_int_equal(
	    o1_region_check(base, l.total_bytes - 4096, &c, &flags),
	    -O1_E_FORMAT);
	((struct o1_region_hdr *)base)->version = 2;
	assert_int_equal(o1_region_check(base, l.total_bytes, &c, &flags),
			 -O1_E_VERSION);
	((struct o1_region_hdr *)base)->version = O1_REGION_VERSION;
	((struct o1_region_hdr *)base)->cq_off += 128;
	assert_int_equal(o1_region_check(base, l.total_bytes, &c, &flags),
			 -O1_E_FORMAT);
	((struct o1_region_hdr *)base)->magic = 0;
	assert_int_equal(o1_region_check(base, l.total_bytes, &c, &flags),
			 -O1_E_FORMAT);
	free(base);
}

struct sleeper {
	struct o1_ring_ctrl ctrl;
	uint64_t slots[4];
	int efd;
	int received;
};

/* Consumer: one message, sleeping with the full prepare/re-check dance. */
static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	struct o1_ring r;
	const void *slot;

	o1_ring_init(&r, &s->ctrl, s->slots, 4, 8);
	for (;;) {
		uint32_t seq;

		if (o1_ring_peek(&r, &slot) == 0)
			break;
		seq = o1_doorbell_prepare(&s->ctrl);
		if (o1_ring_peek(&r, &slot) == 0) {
			o1_doorbell_cancel(&s->ctrl);
			break;
		}
		o1_doorbell_wait(&s->ctrl, seq, 5000000000ll);
		o1_doorbell_cancel(&s->ctrl);
	}
	memcpy(&s->received, slot, sizeof(int));
	return NULL;
}

static void test_doorbell_futex(void **state)
{
	struct sleeper *s = aligned_alloc(64, sizeof(*s));
	struct o1_ring r;
	pthread_t t;
	void *slot;

	(void)state;
	memset(s, 0, sizeof(*s));
	assert_int_equal(o1_doorbell_notify(&s->ctrl, -1), 0);
	o1_ring_init(&r, &s->ctrl, s->slots, 4, 8);
	assert_int_equal(pthread_create(&t, NULL, sleeper_main, s), 0);
	while (!(atomic_load(&s->ctrl.flags) & O1_RING_NEED_WAKEUP))
		usleep(100);
	usleep(10000); /* let it reach the futex */
	assert_int_equal(o1_ring_claim(&r, &slot), 0);
	memcpy(slot, &(int){1234}, sizeof(int));
	o1_ring_commit(&r);
	assert_int_equal(o1_doorbell_notify(&s->ctrl, -1), 1);
	pthread_join(t, NULL);
	assert_int_equal(s->received, 1234);
	assert_int_equal(atomic_load(&s->ctrl.doorbell), 1);
	free(s);
}

static void test_doorbell_eventfd_and_timeout(void **state)
{
	struct o1_ring_ctrl *c = aligned_alloc(64, sizeof(*c));
	int efd = eventfd(0, EFD_NONBLOCK);
	uint64_t v = 0;
	uint32_t seq;

	(void)state;
	memset(c, 0, sizeof(*c));
	seq = o1_doorbell_prepare(c);
	assert_int_equal(o1_doorbell_wait(c, seq, 1000000), -ETIMEDOUT);
	assert_int_equal(o1_doorbell_notify(c, efd), 1);
	assert_int_equal(read(efd, &v, sizeof(v)), (int)sizeof(v));
	assert_int_equal(v, 1);
	/* The doorbell moved, so a wait on the old sequence returns now. */
	assert_int_equal(o1_doorbell_wait(c, seq, -1), 0);
	o1_doorbell_cancel(c);
	assert_int_equal(o1_doorbell_notify(c, efd), 0);
	close(efd);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_layout),
	    cmocka_unit_test(test_doorbell_futex),
	    cmocka_unit_test(test_doorbell_eventfd_and_timeout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

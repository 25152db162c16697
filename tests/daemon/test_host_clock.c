/* The engine thread's host clock (daemon/o1d/host_clock.c): a gap is
 * recorded only between a leave and the next enter, under the batch size
 * of the step before, with CPU time no more than wall time; a forward
 * pass under its own batch size; batch sizes past the table count in its
 * last entry, steps with prompt tokens in their own; reset forgets
 * everything (the next enter records nothing);
 * report leaves the figures as they are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <time.h>

#include "o1d/host_clock.h"

static uint64_t steps(struct o1_host_clock *c, uint32_t b)
{
	return atomic_load(&c->t[b].steps);
}

/* Some CPU time on this thread. */
static void spin(void)
{
	struct timespec a, b;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	do
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec) <
	       200000);
}

static void test_gaps(void **state)
{
	struct o1_host_clock c;

	(void)state;
	assert_int_equal(o1_host_clock_init(&c), 0);
	o1_host_clock_enter(&c); /* nothing before it: no gap */
	o1_host_clock_leave(&c, 3, false);
	assert_int_equal(steps(&c, 3), 0);
	assert_int_equal(atomic_load(&c.t[3].fwd_steps), 1);
	spin();
	o1_host_clock_enter(&c); /* the gap after the batch of 3 */
	o1_host_clock_leave(&c, 5, false);
	assert_int_equal(steps(&c, 3), 1);
	assert_int_equal(steps(&c, 5), 0);
	assert_true(atomic_load(&c.t[3].cpu_ns) >= 200000);
	assert_true(atomic_load(&c.t[3].cpu_ns) <=
		    atomic_load(&c.t[3].wall_ns));
	o1_host_clock_enter(&c);
	o1_host_clock_leave(&c, 100000, false); /* past the table: the last */
	o1_host_clock_enter(&c);
	o1_host_clock_leave(&c, 1, true); /* prompt tokens: kept apart */
	o1_host_clock_enter(&c);
	o1_host_clock_leave(&c, 1, false);
	assert_int_equal(steps(&c, 5), 1);
	assert_int_equal(steps(&c, O1_HOST_CLOCK_PREFILL), 1);
	assert_int_equal(atomic_load(&c.t[O1_HOST_CLOCK_PREFILL].fwd_steps), 1);
	assert_int_equal(atomic_load(&c.t[1].fwd_steps), 1);
	assert_int_equal(steps(&c, O1_HOST_CLOCK_BATCH_MAX), 1);
	assert_int_equal(atomic_load(&c.t[O1_HOST_CLOCK_BATCH_MAX].fwd_steps),
			 1);
	o1_host_clock_report(&c, 2);
	assert_int_equal(steps(&c, 3), 1);
	o1_host_clock_reset(&c);
	assert_int_equal(steps(&c, 3), 0);
	o1_host_clock_enter(&c); /* after a reset: no gap */
	assert_int_equal(steps(&c, 1), 0);
	o1_host_clock_report(&c, 8); /* nothing recorded: no line */
	o1_host_clock_fini(&c);
	o1_host_clock_fini(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gaps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

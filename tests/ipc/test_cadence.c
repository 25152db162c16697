/* Cadence tests, with explicit clocks: no wake-up before enough gaps are
 * known, a steady pace predicts its next post within a margin that
 * shrinks as the pace steadies, a burst counts once, a long pause starts
 * afresh, a pace too quick for a margin is left to the spin window, and a
 * post that did not come ends the prediction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ipc/cadence.h"

#define MS 1000000ull
#define US 1000ull

static void steady(struct o1_ipc_cadence *k, uint64_t *t, uint64_t gap, int n)
{
	for (int i = 0; i < n; i++) {
		*t += gap;
		o1_ipc_cadence_post(k, *t);
	}
}

static void test_steady(void **state)
{
	struct o1_ipc_cadence k = {0};
	uint64_t t = 1000 * MS, until = 0, wake, margin;

	(void)state;
	o1_ipc_cadence_post(&k, t);
	steady(&k, &t, 2 * MS, 2);
	assert_int_equal(o1_ipc_cadence_wake(&k, t + 1, &until), 0);
	steady(&k, &t, 2 * MS, 1);
	wake = o1_ipc_cadence_wake(&k, t + 1, &until);
	assert_int_equal(wake, t + 2 * MS - 10 * US);
	assert_int_equal(until, t + 2 * MS + 10 * US);
	/* A gap 80 us late widens the margin; steady ones narrow it again. */
	steady(&k, &t, 2 * MS + 80 * US, 1);
	assert_true(o1_ipc_cadence_wake(&k, t + 1, &until) > 0);
	margin = until - (k.last_ns + k.gap_ns);
	assert_true(margin > 10 * US && margin <= O1_CADENCE_MARGIN_MAX_NS);
	steady(&k, &t, 2 * MS, 40);
	wake = o1_ipc_cadence_wake(&k, t + 1, &until);
	assert_true(until - (k.last_ns + k.gap_ns) < margin);
	assert_true(until - (k.last_ns + k.gap_ns) >= 10 * US);
	/* Inside the margin: no sleep; past it: no prediction. */
	assert_true(o1_ipc_cadence_wake(&k, wake + 1, &until) <= wake + 1);
	assert_int_equal(o1_ipc_cadence_wake(&k, until, &until), 0);
}

static void test_burst_and_pause(void **state)
{
	struct o1_ipc_cadence k = {0};
	uint64_t t = 5 * MS, until;

	(void)state;
	o1_ipc_cadence_post(&k, t);
	for (int i = 0; i < 4; i++) {
		t += 3 * MS;
		o1_ipc_cadence_post(&k, t);
		o1_ipc_cadence_post(&k, t + 5 * US); /* the same burst */
	}
	assert_int_equal(k.n, 4);
	assert_int_equal(k.gap_ns, 3 * MS);
	assert_int_equal(k.last_ns, t);
	t += O1_CADENCE_MAX_GAP_NS + 1;
	o1_ipc_cadence_post(&k, t);
	assert_int_equal(k.n, 0);
	assert_int_equal(o1_ipc_cadence_wake(&k, t + 1, &until), 0);
	o1_ipc_cadence_post(&k, t - 1); /* a clock that went back */
	assert_int_equal(k.n, 0);
}

/* Gaps of 1 and 3 ms by turns: too unsteady for any margin. */
static void test_unsteady(void **state)
{
	struct o1_ipc_cadence k = {0};
	uint64_t t = MS, until;

	(void)state;
	o1_ipc_cadence_post(&k, t);
	for (int i = 0; i < 20; i++) {
		steady(&k, &t, MS, 1);
		steady(&k, &t, 3 * MS, 1);
	}
	assert_int_equal(o1_ipc_cadence_wake(&k, t + 1, &until), 0);
}

static void test_too_quick(void **state)
{
	struct o1_ipc_cadence k = {0};
	uint64_t t = MS, until;

	(void)state;
	o1_ipc_cadence_post(&k, t);
	steady(&k, &t, 30 * US, 50);
	assert_int_equal(o1_ipc_cadence_wake(&k, t + 1, &until), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_steady),
	    cmocka_unit_test(test_burst_and_pause),
	    cmocka_unit_test(test_unsteady),
	    cmocka_unit_test(test_too_quick),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

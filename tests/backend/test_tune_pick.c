/* tune_pick.c: the autotuner's decisions without a GPU. Timings are given,
 * not measured: the median of odd and even counts, the pick (the fastest
 * measured candidate only when it beats the one in use by more than the
 * margin; unmeasured candidates never win; with the one in use
 * unmeasured, the fastest measured), and the budget (a timing is allowed
 * only if it ends within the limit; after one refusal every later one is
 * refused, whatever its cost; counts of both). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend/tune_pick.h"

static void test_median(void **state)
{
	double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2}, one[] = {7};

	(void)state;
	assert_true(o1_tune_median(odd, 3) == 3);
	assert_true(o1_tune_median(even, 4) == 2.5);
	assert_true(o1_tune_median(one, 1) == 7);
	assert_true(o1_tune_median(one, 0) == 0);
}

static void test_pick_fastest(void **state)
{
	const double us[] = {100, 90, 80, 85, 120};
	const double tie[] = {100, 100, 100};

	(void)state;
	assert_int_equal(o1_tune_pick(us, 5, O1_TUNE_MARGIN), 2);
	assert_int_equal(o1_tune_pick(tie, 3, O1_TUNE_MARGIN), 0);
	assert_int_equal(o1_tune_pick(us, 1, O1_TUNE_MARGIN), 0);
	/* no candidates: nothing is read */
	assert_int_equal(o1_tune_pick(NULL, 0, O1_TUNE_MARGIN), 0);
}

static void test_pick_margin(void **state)
{
	const double close[] = {100, 99.5, 99.2};
	const double past[] = {100, 98.9};

	(void)state;
	/* within 1%: noise, the setup in use stays */
	assert_int_equal(o1_tune_pick(close, 3, O1_TUNE_MARGIN), 0);
	assert_int_equal(o1_tune_pick(past, 2, O1_TUNE_MARGIN), 1);
	assert_int_equal(o1_tune_pick(close, 3, 0), 2);
}

static void test_pick_unmeasured(void **state)
{
	const double failed[] = {100, -1, 0, 95};
	const double no_first[] = {-1, 50, 40};
	const double none[] = {-1, -1, 0};
	const double only_failed[] = {100, -1, -1};

	(void)state;
	assert_int_equal(o1_tune_pick(failed, 4, O1_TUNE_MARGIN), 3);
	assert_int_equal(o1_tune_pick(no_first, 3, O1_TUNE_MARGIN), 2);
	assert_int_equal(o1_tune_pick(none, 3, O1_TUNE_MARGIN), 0);
	assert_int_equal(o1_tune_pick(only_failed, 3, O1_TUNE_MARGIN), 0);
}

static void test_budget(void **state)
{
	struct o1_tune_budget b;
	const uint64_t ms = 1000000;

	(void)state;
	o1_tune_budget_init(&b, 5 * ms, 10);
	assert_true(o1_tune_budget_take(&b, 5 * ms, 0));
	assert_true(o1_tune_budget_take(&b, 9 * ms, 6 * ms)); /* ends at 10 */
	assert_false(b.spent);
	assert_false(o1_tune_budget_take(&b, 12 * ms, 4 * ms)); /* at 11 */
	assert_true(b.spent);
	/* once refused, a cheap one is refused too: no picking out of order */
	assert_false(o1_tune_budget_take(&b, 12 * ms, 0));
	assert_int_equal(b.timed, 2);
	assert_int_equal(b.refused, 2);
	assert_true(o1_tune_budget_ms(&b, 8 * ms) == 3.0);
	assert_true(o1_tune_budget_ms(&b, 1 * ms) == 0); /* before start */
}

static void test_budget_zero(void **state)
{
	struct o1_tune_budget b;

	(void)state;
	o1_tune_budget_init(&b, 0, 0);
	assert_false(o1_tune_budget_take(&b, 0, 1));
	assert_int_equal(b.timed, 0);
}

/* A tuning run as cuda_tune.c drives it: jobs of candidates, each timing
 * costing its microseconds of wall time, the budget cutting the run; the
 * picks made before the cut are the fastest, those after keep 0. */
static void test_run_within_budget(void **state)
{
	static const double jobs[3][4] = {{50, 40, 45, 60},
					  {30, 31, 20, 25},
					  {70, 60, 50, 40}};
	struct o1_tune_budget b;
	uint64_t now = 0, cost = 0;
	uint32_t pick[3];

	(void)state;
	o1_tune_budget_init(&b, 0, 2); /* 2 ms = 2000 us */
	for (int j = 0; j < 3; j++) {
		double us[4];

		for (int c = 0; c < 4; c++) {
			us[c] = -1;
			if (!o1_tune_budget_take(&b, now, cost))
				continue;
			/* one timing: 5 sweeps of the candidate */
			us[c] = jobs[j][c];
			cost = (uint64_t)(5 * jobs[j][c] * 1000);
			now += cost;
		}
		pick[j] = o1_tune_pick(us, 4, O1_TUNE_MARGIN);
	}
	assert_int_equal(pick[0], 1);
	assert_int_equal(pick[1], 2);
	/* jobs 1 and 2 take 1505 us; job 3's first (estimated at the last
	 * cost, 125 us) fits and costs 350: its second would end at 2205 */
	assert_int_equal(pick[2], 0);
	assert_true(now == 1855000);
	assert_int_equal(b.timed, 9);
	assert_int_equal(b.refused, 3);
}

static void test_now(void **state)
{
	uint64_t a = o1_tune_now_ns(), b = o1_tune_now_ns();

	(void)state;
	assert_true(a > 0);
	assert_true(b >= a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_median),
	    cmocka_unit_test(test_pick_fastest),
	    cmocka_unit_test(test_pick_margin),
	    cmocka_unit_test(test_pick_unmeasured),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_budget_zero),
	    cmocka_unit_test(test_run_within_budget),
	    cmocka_unit_test(test_now),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

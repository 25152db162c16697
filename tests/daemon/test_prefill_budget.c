/* o1_prefill_budget (daemon/o1d/prefill_budget.c), fed synthetic step
 * times (no clock): the budget is the cap while off or unmeasured, ratio x
 * decode time / token cost once measured, per row bucket and context
 * range; it settles where a mixed step takes (1 + ratio) x a decode step
 * under a cost model with a fixed mixed-step cost, and under jittered step
 * times from a cost far too high; it keeps the floor and the cap, ignores
 * short lone prompt steps and survives extreme inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "o1d/prefill_budget.h"
#include "tests/common/test_rng.h"

#define US 1000ull

static void test_off_and_cold(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 0, 16);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, 64, 512, 0, 4000 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 2048);

	o1_prefill_budget_init(&b, 1.0, 16);
	/* nothing measured: the cap (the step that follows measures) */
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 2048);
	/* a mixed step before any decode step teaches nothing */
	o1_prefill_budget_observe(&b, 64, 512, 0, 4000 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 2048);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 2048);
	/* no decode rows: the whole cap (a lone prompt) */
	o1_prefill_budget_observe(&b, 64, 2048, 0, (1600 + 4096) * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 0, 0, 2048), 2048);
}

/* One decode time and one token cost: ratio x decode / cost. */
static void test_ratio(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 1.0, 16);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	/* 2048 tokens add 8192 us: 4 us a token */
	o1_prefill_budget_observe(&b, 64, 2048, 0, (1600 + 8192) * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 400);
	b.ratio = 0.5;
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 200);
	/* the cap wins when lower */
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 128), 128);
	/* another ratio on the same estimates (the whole-prompt budget) */
	assert_int_equal(o1_prefill_budget_tokens_at(&b, 1.5, 64, 64, 0, 2048),
			 600);
	assert_int_equal(o1_prefill_budget_tokens_at(&b, 1.5, 64, 64, 0, 500),
			 500);
	/* what the estimates give a step (logged beside its time): decode
	 * time plus the tokens' cost, and nothing while one is missing */
	assert_float_equal(o1_prefill_budget_predict_ns(&b, 64, 100, 0),
			   (1600 + 400) * US, 1e-6);
	assert_float_equal(o1_prefill_budget_predict_ns(&b, 64, 0, 0),
			   1600 * US, 1e-6);
	o1_prefill_budget_init(&b, 1.0, 16);
	assert_float_equal(o1_prefill_budget_predict_ns(&b, 64, 100, 0), 0, 0);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	assert_float_equal(o1_prefill_budget_predict_ns(&b, 64, 100, 0), 0, 0);
	b.ratio = 1.0;
	/* the budget off: the cap, whatever the ratio asked */
	o1_prefill_budget_observe(&b, 64, 2048, 0, (1600 + 8192) * US);
	b.ratio = 0;
	assert_int_equal(o1_prefill_budget_tokens_at(&b, 1.5, 64, 64, 0, 2048),
			 2048);
}

/* Decode steps of 64 and of 256 rows: each budget from its own time, an
 * unmeasured row count on the line through the measured ones around it
 * (or the nearest, when on one side only one is measured). */
static void test_row_buckets(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 1.0, 16);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, 256, 0, 0, 2600 * US);
	o1_prefill_budget_observe(&b, 64, 1000, 0, (1600 + 4000) * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 400);
	assert_int_equal(o1_prefill_budget_tokens(&b, 256, 0, 4096), 650);
	/* 128 rows: 1600 + (2600 - 1600) x 64 / 192 us */
	assert_int_equal(o1_prefill_budget_tokens(&b, 128, 0, 4096), 483);
	/* 8 rows, none measured below: the nearest above */
	assert_int_equal(o1_prefill_budget_tokens(&b, 8, 0, 4096), 400);
	/* 512 rows, above both: their line, extended */
	assert_int_equal(o1_prefill_budget_tokens(&b, 512, 0, 8192), 983);
	/* the mixed step of 256 rows is measured against 256's time */
	o1_prefill_budget_observe(&b, 256, 1000, 0, (2600 + 4000) * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 256, 0, 4096), 650);
	/* a slower decode step moves the estimate by 1/16 of the gap, a
	 * faster one by half */
	o1_prefill_budget_observe(&b, 64, 0, 0, 3200 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 425);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1500 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 400);
}

/* A fresh daemon's burst: only steps of a few rows measured, the budget
 * asked for the 256 rows the waiting requests will make. Past
 * O1_PREFILL_REACH x the highest measured count there is no estimate
 * (the cap, and no prediction), not the flat line of the few rows (4 ms
 * for 256 rows, which held 256 cold prompts at the floor on the H200);
 * within it, the line. */
static void test_reach(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 0.6, 16);
	for (uint32_t r = 1; r <= 4; r++)
		o1_prefill_budget_observe(&b, r, 0, 0, (4000 + r) * US);
	/* a mixed step of 4 rows and 16 tokens, 2.7 ms over the decode:
	 * mostly the small products' fixed cost */
	o1_prefill_budget_observe(&b, 4, 16, 0, (4004 + 2700) * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 256, 0, 2048), 2048);
	assert_true(o1_prefill_budget_predict_ns(&b, 256, 16, 0) == 0);
	assert_int_equal(o1_prefill_budget_tokens(&b, 9, 0, 2048), 2048);
	/* 8 rows: on the line through 3 and 4 (4,008 us): 0.6 x 4,008 /
	 * 168.75 us a token */
	assert_int_equal(o1_prefill_budget_tokens(&b, 8, 0, 2048), 16);
	assert_true(o1_prefill_budget_predict_ns(&b, 8, 16, 0) > 0);
	/* measured up to 128 rows: 256 is on their line again */
	o1_prefill_budget_observe(&b, 128, 0, 0, 9000 * US);
	o1_prefill_budget_observe(&b, 128, 400, 0, (9000 + 10000) * US);
	/* 256 rows: 4,004 + (9,000 - 4,004) x 252 / 124 us = 14,157.4
	 * (the line through 4 and 128), a budget below the cap again */
	assert_true(fabs(o1_prefill_budget_predict_ns(&b, 256, 0, 0) -
			 14157.4 * US) < US);
	assert_true(o1_prefill_budget_tokens(&b, 256, 0, 2048) < 2048);
}

/* A step of 16 decode rows whose batch grows to 256 (requests waiting):
 * its prompt tokens get the ratio's share of a 256-row step and the time
 * the 240 missing rows would take; with the batch full, the share only;
 * no spare time when the step's own rows have no estimate. */
static void test_spare(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 0.15, 16);
	o1_prefill_budget_observe(&b, 16, 0, 0, 4000 * US);
	o1_prefill_budget_observe(&b, 256, 0, 0, 10000 * US);
	o1_prefill_budget_observe(&b, 256, 400, 0, (10000 + 10000) * US);
	/* (0.6 x 10,000 + 10,000 - 4,000) / 25 us */
	assert_int_equal(
	    o1_prefill_budget_tokens_at(&b, 0.6, 256, 16, 0, 2048), 480);
	assert_int_equal(
	    o1_prefill_budget_tokens_at(&b, 0.6, 256, 256, 0, 2048), 240);
	assert_int_equal(
	    o1_prefill_budget_tokens_at(&b, 0.6, 256, 0, 0, 2048), 240);
	/* 128 rows: on the line through 16 and 256, 4,000 + 6,000 x 112 /
	 * 240 = 6,800 us (the spare 3,200) */
	assert_int_equal(
	    o1_prefill_budget_tokens_at(&b, 0.6, 256, 128, 0, 2048), 368);
	assert_int_equal(o1_prefill_budget_tokens(&b, 256, 0, 2048), 60);
}

/* Chunks late in a long prompt cost more (attention): each context range
 * has its own cost; an unmeasured one takes the nearest later range
 * measured, else the nearest earlier. */
static void test_ctx_buckets(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 1.0, 16);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, 64, 400, 0, (1600 + 1600) * US);
	o1_prefill_budget_observe(&b, 64, 200, 6000, (1600 + 1600) * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 100, 4096), 400);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 7000, 4096), 200);
	/* 1000 (unmeasured): 6000's range, the dearer side */
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 1000, 4096), 200);
	/* beyond any measured range: the nearest earlier */
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 100000, 4096), 200);
}

/* Under a cost model where a mixed step costs a fixed A beyond its tokens
 * (launches, a path without graphs) plus B a token, the budget the
 * estimator gives settles where the step takes (1 + ratio) x the decode
 * step, from a first step at the cap. */
static void test_settles(void **st)
{
	const double dec = 1600, a = 800, per = 4; /* us */
	const double ratios[] = {1.0, 0.75, 2.0};

	(void)st;
	for (uint32_t k = 0; k < 3; k++) {
		struct o1_prefill_budget b;
		double target = (1 + ratios[k]) * dec, t = 0;
		uint32_t n = 0, want = (uint32_t)((ratios[k] * dec - a) / per);

		o1_prefill_budget_init(&b, ratios[k], 16);
		o1_prefill_budget_observe(&b, 64, 0, 0, (uint64_t)(dec * US));
		for (uint32_t i = 0; i < 200; i++) {
			n = o1_prefill_budget_tokens(&b, 64, 0, 2048);
			t = dec + a + per * n;
			o1_prefill_budget_observe(&b, 64, n, 0,
						  (uint64_t)(t * US));
		}
		assert_true(t <= target * 1.01);
		assert_true(t >= target * 0.97);
		assert_true(n + 2 >= want && n <= want + 2);
	}
}

/* Jitter from a token cost 8x too high (what a run of long prompts left,
 * or a stale decode time): 64 rows decode in 1.4 ms, a token costs 3 us,
 * every step 15% slower or faster at random, ratio 0.2. The target is
 * 0.2 x 1400 / 3 = 93 tokens; the first budget is 12, the floor 16, and
 * the floor's samples carry +-13 us of noise on the 3 us token. Within 300
 * steps the budget reaches the target's neighbourhood and stays there:
 * the mean of the last 100 budgets is 75-110 tokens (an EWMA of bad news
 * faster than good sat at the floor here). */
static void test_jitter_from_high(void **st)
{
	struct o1_prefill_budget b;
	uint64_t rng = 0x5eed;
	double sum = 0;

	(void)st;
	o1_prefill_budget_init(&b, 0.2, 16);
	for (int i = 0; i < 4; i++)
		o1_prefill_budget_observe(&b, 64, 0, 0, 1400 * US);
	o1_prefill_budget_observe(&b, 64, 2048, 0, (1400 + 8 * 3 * 2048) * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 16);
	for (int i = 0; i < 300; i++) {
		uint32_t n = o1_prefill_budget_tokens(&b, 64, 0, 2048);
		double f = 0.85 + 0.3 * (double)o1_test_uniform(&rng, 0, 1000) /
				      1000;

		if (o1_prefill_budget_stale(&b, 64))
			o1_prefill_budget_observe(&b, 64, 0, 0,
						  (uint64_t)(f * 1400 * US));
		else
			o1_prefill_budget_observe(
			    &b, 64, n, 0,
			    (uint64_t)(f * (1400 + 3.0 * n) * US));
		if (i >= 200)
			sum += n;
	}
	assert_in_range((uint64_t)(sum / 100), 75, 110);
}

/* Outliers: a first decode step 60x slow (a CUDA graph captured in it)
 * is forgotten within a few steps; a one-off slow decode step moves the
 * budget a little; a mixed step of 400 tokens counts by 400 / 1,024 of
 * the gap either way, one that looks free as half the cost at most. */
static void test_outliers(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 1.0, 16);
	o1_prefill_budget_observe(&b, 64, 0, 0, 100000 * US);
	for (uint32_t i = 0; i < 16; i++)
		o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, 64, 400, 0, 3200 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 400);
	o1_prefill_budget_observe(&b, 64, 0, 0, 50000 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 425);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	/* (decode back down by half the gap, 1651 us) a mixed step no slower
	 * than its decode rows: its tokens count as 2 us (half the cost),
	 * 4 + (2 - 4) 400 / 1024 = 3.22 us */
	o1_prefill_budget_observe(&b, 64, 400, 0, 1600 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 513);
	/* tokens at 7.9 us: 3.22 + (7.87 - 3.22) 400 / 1024 = 5.03 us */
	o1_prefill_budget_observe(&b, 64, 400, 0, 4800 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 327);
	/* a small step's sample is not clipped (noise, which the weights
	 * average) and weighs its tokens: 16 tokens that look free move the
	 * cost by 16 / 1024 of it */
	o1_prefill_budget_observe(&b, 64, 16, 0, 1600 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 333);
}

/* When even a few tokens overshoot the target (the fixed cost alone is
 * above it), prompts still move by the floor each step, reached within
 * 200 steps from the cap (the small steps' samples weigh little); a cap
 * below the floor wins. */
static void test_floor(void **st)
{
	struct o1_prefill_budget b;
	uint32_t n = 0;

	(void)st;
	o1_prefill_budget_init(&b, 0.5, 16);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	for (uint32_t i = 0; i < 200; i++) {
		n = o1_prefill_budget_tokens(&b, 64, 0, 2048);
		o1_prefill_budget_observe(&b, 64, n, 0,
					  (1600 + 1000 + 4 * n) * US);
	}
	assert_int_equal(n, 16);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 8), 8);
}

/* A lone prompt step teaches the token cost only when large (a short one
 * is mostly the weights' read), less the time of a one-row decode step. */
static void test_lone_steps(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 1.0, 16);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, 0, O1_PREFILL_LONE_MIN - 1, 0,
				  5000 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 2048);
	o1_prefill_budget_observe(&b, 1, 0, 0, 800 * US);
	o1_prefill_budget_observe(&b, 0, 2000, 0, (800 + 8000) * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 400);
}

/* Noise and extremes: a mixed step measured faster than its decode rows
 * counts its tokens at 1 ns, not 0 or less (a bounded budget); huge row counts and positions
 * stay in their last buckets; zero times and empty steps are ignored. */
static void test_extremes(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 16.0, 16);
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, 64, 100, 0, 1000 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, UINT32_MAX),
			 16 * 1600 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 2048);

	o1_prefill_budget_init(&b, 1.0, 16);
	o1_prefill_budget_observe(&b, 0, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, 64, 0, 0, 0);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 2048);
	o1_prefill_budget_observe(&b, UINT32_MAX, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, UINT32_MAX, 400, UINT32_MAX,
				  3200 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 100000, UINT32_MAX,
						  2048),
			 400);
	assert_int_equal(o1_prefill_budget_tokens(&b, UINT32_MAX, 0, 2048),
			 400);
	o1_prefill_budget_observe(&b, 64, 1, 0, UINT64_MAX);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 2048), 16);
}

/* A decode estimate not measured for O1_PREFILL_STALE_STEPS steps is
 * stale, and the next measurement replaces it (contexts grew meanwhile:
 * the slow EWMA of good news would lag behind for hundreds of steps); one
 * never measured is stale above O1_PREFILL_MEASURE_ROWS rows. */
static void test_stale_decode(void **st)
{
	struct o1_prefill_budget b;

	(void)st;
	o1_prefill_budget_init(&b, 1.0, 16);
	assert_true(o1_prefill_budget_stale(&b, 64)); /* never measured */
	assert_false(o1_prefill_budget_stale(&b, O1_PREFILL_MEASURE_ROWS));
	assert_true(o1_prefill_budget_stale(&b, O1_PREFILL_MEASURE_ROWS + 1));
	assert_false(o1_prefill_budget_stale(&b, 0));
	o1_prefill_budget_observe(&b, 64, 0, 0, 1600 * US);
	o1_prefill_budget_observe(&b, 64, 2048, 0, (1600 + 8192) * US);
	for (int i = 0; i < O1_PREFILL_STALE_STEPS - 1; i++)
		o1_prefill_budget_observe(&b, 64, 400, 0, (1600 + 1600) * US);
	assert_false(o1_prefill_budget_stale(&b, 64));
	o1_prefill_budget_observe(&b, 64, 400, 0, (1600 + 1600) * US);
	assert_true(o1_prefill_budget_stale(&b, 64));
	assert_false(o1_prefill_budget_stale(&b, 8)); /* never measured */
	assert_true(o1_prefill_budget_stale(&b, 200)); /* never measured */
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 400);
	o1_prefill_budget_observe(&b, 64, 0, 0, 3200 * US);
	assert_false(o1_prefill_budget_stale(&b, 64));
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 800);
	/* fresh again: the next one moves it by the EWMA's small step */
	o1_prefill_budget_observe(&b, 64, 0, 0, 6400 * US);
	assert_int_equal(o1_prefill_budget_tokens(&b, 64, 0, 4096), 850);
	/* with the budget off nothing is stale */
	b.ratio = 0;
	for (int i = 0; i < 2 * O1_PREFILL_STALE_STEPS; i++)
		o1_prefill_budget_observe(&b, 64, 400, 0, (1600 + 1600) * US);
	assert_false(o1_prefill_budget_stale(&b, 64));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_off_and_cold),
	    cmocka_unit_test(test_ratio),
	    cmocka_unit_test(test_row_buckets),
	    cmocka_unit_test(test_reach),
	    cmocka_unit_test(test_spare),
	    cmocka_unit_test(test_ctx_buckets),
	    cmocka_unit_test(test_settles),
	    cmocka_unit_test(test_jitter_from_high),
	    cmocka_unit_test(test_outliers),
	    cmocka_unit_test(test_floor),
	    cmocka_unit_test(test_lone_steps),
	    cmocka_unit_test(test_extremes),
	    cmocka_unit_test(test_stale_decode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The CUDA graphs' replay decision (daemon/backend/graph_replay.c) with a
 * fake launch and body that record what ran: a bucket without a graph runs
 * the body (a miss); with one, a launch that succeeds is a hit and one that
 * fails runs the body once (a fallback); the injected fault fails every
 * N-th replay without calling the launch and takes the same fallback, with
 * the same counts and the body's result, as a launch that returned an
 * error; with strict, a real failure is returned and only injected ones
 * fall back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "backend/graph_replay.h"

struct fake {
	uint32_t launches, bodies;
	uint32_t last_bucket, last_batch;
	int launch_err, body_err;
};

static int fake_launch(void *ctx, uint32_t bucket)
{
	struct fake *f = ctx;

	f->launches++;
	f->last_bucket = bucket;
	return f->launch_err;
}

static int fake_body(void *ctx, uint32_t batch)
{
	struct fake *f = ctx;

	f->bodies++;
	f->last_batch = batch;
	return f->body_err;
}

static void init(struct o1_graph_replay *r, struct fake *f,
		 struct o1_backend_graph_bucket *b, uint32_t batch,
		 bool captured)
{
	memset(f, 0, sizeof(*f));
	*b = (struct o1_backend_graph_bucket){.batch = batch,
					      .captured = captured};
	o1_graph_replay_init(
	    r, &(struct o1_graph_replay_ops){fake_launch, fake_body, f, false});
}

static void test_miss(void **state)
{
	struct o1_graph_replay r;
	struct o1_backend_graph_bucket b;
	struct fake f;

	(void)state;
	init(&r, &f, &b, 8, false);
	assert_int_equal(o1_graph_replay_step(&r, &b, 3, 5), 0);
	assert_int_equal(f.launches, 0);
	assert_int_equal(f.bodies, 1);
	assert_int_equal(f.last_batch, 8);
	assert_int_equal(b.misses, 1);
	assert_int_equal(b.hits + b.fallbacks, 0);
	assert_int_equal(b.padded_tokens, 3);
	/* the fault has nothing to fail without a graph */
	o1_graph_replay_fail(&r, 1);
	f.body_err = -EIO;
	assert_int_equal(o1_graph_replay_step(&r, &b, 3, 8), -EIO);
	assert_int_equal(b.misses, 2);
	assert_int_equal(b.fallbacks, 0);
	assert_int_equal(f.launches, 0);
}

static void test_hit_and_real_failure(void **state)
{
	struct o1_graph_replay r;
	struct o1_backend_graph_bucket b;
	struct fake f;

	(void)state;
	init(&r, &f, &b, 4, true);
	assert_int_equal(o1_graph_replay_step(&r, &b, 2, 4), 0);
	assert_int_equal(f.launches, 1);
	assert_int_equal(f.last_bucket, 2);
	assert_int_equal(f.bodies, 0);
	assert_int_equal(b.hits, 1);
	/* a launch that fails: the body runs once, its result is the step's */
	f.launch_err = -1234;
	f.body_err = 0;
	assert_int_equal(o1_graph_replay_step(&r, &b, 2, 1), 0);
	assert_int_equal(f.launches, 2);
	assert_int_equal(f.bodies, 1);
	assert_int_equal(f.last_batch, 4);
	assert_int_equal(b.fallbacks, 1);
	assert_int_equal(b.hits, 1);
	assert_int_equal(b.padded_tokens, 3);
	f.body_err = -EINVAL;
	assert_int_equal(o1_graph_replay_step(&r, &b, 2, 4), -EINVAL);
	assert_int_equal(b.fallbacks, 2);
	assert_int_equal(b.misses, 0);
}

/* The injected failure counts and runs as a real one, without the launch. */
static void test_injected_is_a_failed_launch(void **state)
{
	struct o1_graph_replay r[2];
	struct o1_backend_graph_bucket b[2];
	struct fake f[2];

	(void)state;
	init(&r[0], &f[0], &b[0], 16, true);
	init(&r[1], &f[1], &b[1], 16, true);
	f[0].launch_err = -1; /* real failures */
	o1_graph_replay_fail(&r[1], 1);
	for (uint32_t n = 9; n <= 16; n++) {
		f[0].body_err = f[1].body_err = n == 12 ? -EIO : 0;
		assert_int_equal(o1_graph_replay_step(&r[1], &b[1], 0, n),
				 o1_graph_replay_step(&r[0], &b[0], 0, n));
	}
	assert_int_equal(b[0].hits, b[1].hits);
	assert_int_equal(b[0].misses, b[1].misses);
	assert_int_equal(b[0].fallbacks, b[1].fallbacks);
	assert_int_equal(b[0].padded_tokens, b[1].padded_tokens);
	assert_int_equal(b[1].padded_tokens, 7 + 6 + 5 + 4 + 3 + 2 + 1);
	assert_int_equal(b[1].fallbacks, 8);
	assert_int_equal(b[1].hits + b[1].misses, 0);
	assert_int_equal(f[1].bodies, 8);
	assert_int_equal(f[1].last_batch, 16);
	assert_int_equal(f[1].launches, 0);
	assert_int_equal(f[0].launches, 8);
}

/* Every N-th replay since the fault was set fails; off: none; each set
 * starts the count over. */
static void test_every_nth(void **state)
{
	struct o1_graph_replay r;
	struct o1_backend_graph_bucket b;
	struct fake f;

	(void)state;
	init(&r, &f, &b, 2, true);
	o1_graph_replay_fail(&r, 3);
	for (int i = 1; i <= 9; i++) {
		uint32_t fb = (uint32_t)b.fallbacks;

		o1_graph_replay_step(&r, &b, 0, 2);
		assert_int_equal(b.fallbacks - fb, i % 3 == 0);
	}
	assert_int_equal(b.hits, 6);
	assert_int_equal(f.launches, 6);
	assert_int_equal(f.bodies, 3);
	o1_graph_replay_step(&r, &b, 0, 2); /* 10th: a hit */
	o1_graph_replay_fail(&r, 3);	    /* starts over: 3 more to fail */
	o1_graph_replay_step(&r, &b, 0, 2);
	o1_graph_replay_step(&r, &b, 0, 2);
	assert_int_equal(b.fallbacks, 3);
	o1_graph_replay_step(&r, &b, 0, 2);
	assert_int_equal(b.fallbacks, 4);
	o1_graph_replay_fail(&r, 0);
	for (int i = 0; i < 5; i++)
		o1_graph_replay_step(&r, &b, 0, 2);
	assert_int_equal(b.fallbacks, 4);
	assert_int_equal(b.hits, 7 + 2 + 5);
	assert_int_equal(b.padded_tokens, 0);
}

/* strict (a tensor-parallel rank): a launch that really fails is the
 * step's error, nothing runs eagerly; an injected failure, which every
 * rank injects at the same replay, still falls back. */
static void test_strict(void **state)
{
	struct o1_graph_replay r;
	struct o1_backend_graph_bucket b;
	struct fake f;

	(void)state;
	init(&r, &f, &b, 4, true);
	r.ops.strict = true;
	assert_int_equal(o1_graph_replay_step(&r, &b, 1, 4), 0);
	assert_int_equal(b.hits, 1);
	f.launch_err = -1234;
	assert_int_equal(o1_graph_replay_step(&r, &b, 1, 3), -1234);
	assert_int_equal(f.bodies, 0);
	assert_int_equal(b.fallbacks + b.misses, 0);
	assert_int_equal(b.hits, 1);
	f.launch_err = 0;
	o1_graph_replay_fail(&r, 2);
	assert_int_equal(o1_graph_replay_step(&r, &b, 1, 4), 0);
	assert_int_equal(o1_graph_replay_step(&r, &b, 1, 4), 0);
	assert_int_equal(b.hits, 2);
	assert_int_equal(b.fallbacks, 1);
	assert_int_equal(f.bodies, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_miss),
	    cmocka_unit_test(test_hit_and_real_failure),
	    cmocka_unit_test(test_injected_is_a_failed_launch),
	    cmocka_unit_test(test_every_nth),
	    cmocka_unit_test(test_strict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Fault injection (daemon/o1d/faults.c) with a fake step and a fake
 * replay hook: graph_replay is refused without a hook (the CPU backend, or
 * CUDA without graphs) with a message naming what it needs; with one, each
 * switch reaches the hook once, on the stepping (engine) thread, before
 * the next step, with PARAM (default 1) or 0 when off, also while another
 * thread switches it many times; step_fail and kv_exhaust keep working
 * beside it. null_forward answers steps without the real one (refused
 * without a vocabulary size): tokens below PARAM, the same for the same
 * inputs, logits rows that pick them, the real step again once off;
 * host_clock leaves steps alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/error.h"
#include "o1d/faults.h"

#define NO_CALL 0xffffffffu

struct fake {
	struct o1_kv_pool *pool;
	struct o1_faults *f;
	uint32_t steps;
	uint32_t hook_calls, hook_every; /* NO_CALL: never called */
	int hook_err;
	pthread_t stepper;
	bool hook_elsewhere; /* the hook ran on another thread */
};

static int fake_step(void *ctx, const struct o1_step *st)
{
	struct fake *k = ctx;

	(void)st;
	k->steps++;
	return 0;
}

static int fake_hook(void *ctx, uint32_t every)
{
	struct fake *k = ctx;

	k->hook_calls++;
	k->hook_every = every;
	if (!pthread_equal(pthread_self(), k->stepper))
		k->hook_elsewhere = true;
	return k->hook_err;
}

static void open_fake_vocab(struct fake *k, bool hook, uint32_t vocab)
{
	const struct o1_kv_layout l = {8, 1, 1, 16, 8};
	struct o1_faults_opts o = {
	    .step = fake_step, .step_ctx = k, .vocab = vocab};

	memset(k, 0, sizeof(*k));
	k->hook_every = NO_CALL;
	k->stepper = pthread_self();
	assert_int_equal(o1_kv_pool_create(&l, &k->pool), 0);
	o.pool = k->pool;
	if (hook) {
		o.fail_replays = fake_hook;
		o.replay_ctx = k;
	}
	assert_int_equal(o1_faults_create(&o, &k->f), 0);
}

static void open_fake(struct fake *k, bool hook)
{
	open_fake_vocab(k, hook, 0);
}

static void close_fake(struct fake *k)
{
	o1_faults_destroy(k->f);
	o1_kv_pool_destroy(k->pool);
}

static int step(struct fake *k)
{
	struct o1_step st = {0};

	return o1_faults_step(k->f, &st);
}

static void test_refused_without_hook(void **state)
{
	struct o1_faults_stats s;
	const char *why = NULL;
	struct fake k;

	(void)state;
	open_fake(&k, false);
	assert_int_equal(o1_faults_set(k.f, "graph_replay", true, 0, &why),
			 -O1_E_UNSUPPORTED);
	assert_non_null(strstr(why, "needs the CUDA backend with graphs"));
	why = NULL;
	assert_int_equal(o1_faults_set(k.f, "graph_replay", false, 0, &why),
			 -O1_E_UNSUPPORTED);
	assert_non_null(why);
	o1_faults_stats(k.f, &s);
	assert_false(s.on[O1_FAULT_GRAPH_REPLAY]);
	assert_int_equal(o1_faults_set(k.f, "graph_replays", true, 0, &why),
			 -EINVAL);
	assert_non_null(strstr(why, "graph_replay, null_forward, host_clock)"));
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.steps, 1);
	assert_string_equal(o1_faults_name(O1_FAULT_GRAPH_REPLAY),
			    "graph_replay");
	close_fake(&k);
}

/* Each switch reaches the hook once, before the next step. */
static void test_hook_on_step(void **state)
{
	struct o1_faults_stats s;
	const char *why = NULL;
	struct fake k;

	(void)state;
	open_fake(&k, true);
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.hook_calls, 0); /* nothing switched yet */
	assert_int_equal(o1_faults_set(k.f, "graph_replay", true, 0, &why), 0);
	assert_int_equal(k.hook_calls, 0); /* not on the setter's call */
	o1_faults_stats(k.f, &s);
	assert_true(s.on[O1_FAULT_GRAPH_REPLAY]);
	assert_int_equal(s.param[O1_FAULT_GRAPH_REPLAY], 1);
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.hook_calls, 1);
	assert_int_equal(k.hook_every, 1);
	assert_int_equal(k.steps, 2);
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.hook_calls, 1);
	assert_int_equal(o1_faults_set(k.f, "graph_replay", true, 7, &why), 0);
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.hook_calls, 2);
	assert_int_equal(k.hook_every, 7);
	assert_int_equal(o1_faults_set(k.f, "graph_replay", false, 0, &why), 0);
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.hook_every, 0);
	/* the hook refusing (logged) does not fail the step */
	k.hook_err = -O1_E_UNSUPPORTED;
	assert_int_equal(o1_faults_set(k.f, "graph_replay", true, 2, &why), 0);
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.hook_calls, 4);
	assert_int_equal(k.steps, 6);
	assert_false(k.hook_elsewhere);
	close_fake(&k);
}

struct toggler {
	struct o1_faults *f;
	atomic_bool done;
};

static void *toggle_main(void *arg)
{
	struct toggler *t = arg;
	const char *why;

	for (uint32_t i = 0; i < 20000; i++)
		if (o1_faults_set(t->f, "graph_replay", i % 3 != 0, i % 5,
				  &why))
			break;
	atomic_store(&t->done, true);
	return NULL;
}

/* Switched from another thread while this one steps: the hook runs here
 * only, and the last switch is the one the backend ends up with. */
static void test_switch_from_another_thread(void **state)
{
	struct toggler t = {0};
	const char *why;
	pthread_t th;
	struct fake k;

	(void)state;
	open_fake(&k, true);
	t.f = k.f;
	assert_int_equal(pthread_create(&th, NULL, toggle_main, &t), 0);
	while (!atomic_load(&t.done))
		assert_int_equal(step(&k), 0);
	pthread_join(th, NULL);
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.hook_every, 4); /* i = 19999: on, param 4 */
	assert_int_equal(o1_faults_set(k.f, "graph_replay", false, 0, &why), 0);
	assert_int_equal(step(&k), 0);
	assert_int_equal(k.hook_every, 0);
	assert_false(k.hook_elsewhere);
	close_fake(&k);
}

/* The other faults beside it: step_fail fails every N-th step before the
 * real one, kv_exhaust holds pages until it is off. */
static void test_beside_other_faults(void **state)
{
	struct o1_faults_stats s;
	const char *why;
	struct fake k;
	int eio = 0;

	(void)state;
	open_fake(&k, true);
	assert_int_equal(o1_faults_set(k.f, "graph_replay", true, 3, &why), 0);
	assert_int_equal(o1_faults_set(k.f, "step_fail", true, 2, &why), 0);
	for (int i = 0; i < 6; i++)
		eio += step(&k) == -EIO;
	assert_int_equal(eio, 3);
	assert_int_equal(k.steps, 3);
	assert_int_equal(k.hook_calls, 1);
	assert_int_equal(k.hook_every, 3);
	assert_int_equal(o1_faults_set(k.f, "kv_exhaust", true, 5, &why), 0);
	o1_faults_tick(k.f);
	o1_faults_stats(k.f, &s);
	assert_int_equal(s.kv_pages_held, 5);
	assert_int_equal(s.failed_steps, 3);
	assert_true(s.on[O1_FAULT_GRAPH_REPLAY] && s.on[O1_FAULT_STEP_FAIL]);
	assert_int_equal(o1_faults_set(k.f, "kv_exhaust", false, 0, &why), 0);
	o1_faults_tick(k.f);
	assert_int_equal(o1_kv_pool_free_pages(k.pool), 8);
	close_fake(&k);
}

#define VOCAB 50

/* A step of two sequences: 3 tokens with every logits row, then 1. */
static int null_forward_step(struct fake *k, struct o1_sample_result *res,
			     float *logits)
{
	static const int32_t a[3] = {5, 6, 7}, b[1] = {9};
	static const uint32_t pages[1] = {0};
	struct o1_sample_row rows[4] = {{.n_logprobs = 0},
					{.n_logprobs = 2},
					{.n_logprobs = 0},
					{.n_logprobs = 3}};
	struct o1_step_seq seqs[2] = {{.tokens = a,
				       .n_tokens = 3,
				       .pages = pages,
				       .n_pages = 1,
				       .all_logits = true},
				      {.tokens = b,
				       .n_tokens = 1,
				       .start_pos = 4,
				       .pages = pages,
				       .n_pages = 1}};
	struct o1_step st = {.seqs = seqs,
			     .n_seqs = 2,
			     .logits = logits,
			     .logits_rows = 4,
			     .sample_rows = rows,
			     .samples = res};

	return o1_faults_step(k->f, &st);
}

static void test_null_forward(void **state)
{
	struct o1_sample_result r1[4], r2[4];
	float logits[4 * VOCAB];
	const char *why = NULL;
	struct fake k;

	(void)state;
	open_fake(&k, false);
	assert_int_equal(o1_faults_set(k.f, "null_forward", true, 0, &why),
			 -O1_E_UNSUPPORTED);
	assert_non_null(strstr(why, "vocabulary"));
	close_fake(&k);
	open_fake_vocab(&k, false, VOCAB);
	assert_int_equal(o1_faults_set(k.f, "null_forward", true, 7, &why), 0);
	memset(r1, 0xff, sizeof(r1));
	assert_int_equal(null_forward_step(&k, r1, logits), 0);
	assert_int_equal(null_forward_step(&k, r2, NULL), 0);
	assert_int_equal(k.steps, 0); /* the real step never ran */
	for (uint32_t i = 0; i < 4; i++) {
		assert_true(r1[i].id >= 0 && r1[i].id < 7);
		assert_int_equal(r1[i].id, r2[i].id); /* same inputs */
		assert_int_equal(r1[i].n_top, i == 1 ? 2 : i == 3 ? 3 : 0);
		for (uint32_t j = 0; j < r1[i].n_top; j++)
			assert_true(r1[i].top_id[j] >= 0 &&
				    r1[i].top_id[j] < VOCAB);
		for (uint32_t v = 0; v < VOCAB; v++)
			assert_true(logits[i * VOCAB + v] ==
				    ((int32_t)v == r1[i].id ? 0.0f : -1e30f));
	}
	/* the default: ids below 256, here the vocabulary's 50 */
	assert_int_equal(o1_faults_set(k.f, "null_forward", true, 0, &why), 0);
	assert_int_equal(null_forward_step(&k, r1, NULL), 0);
	for (uint32_t i = 0; i < 4; i++)
		assert_true(r1[i].id >= 0 && r1[i].id < VOCAB);
	/* host_clock beside it, then both off: the real step again */
	assert_int_equal(o1_faults_set(k.f, "host_clock", true, 0, &why), 0);
	assert_int_equal(null_forward_step(&k, r1, NULL), 0);
	assert_int_equal(null_forward_step(&k, r1, NULL), 0);
	assert_int_equal(o1_faults_set(k.f, "host_clock", false, 0, &why), 0);
	assert_int_equal(o1_faults_set(k.f, "null_forward", false, 0, &why), 0);
	assert_int_equal(k.steps, 0);
	assert_int_equal(null_forward_step(&k, r1, NULL), 0);
	assert_int_equal(k.steps, 1);
	assert_string_equal(o1_faults_name(O1_FAULT_HOST_CLOCK), "host_clock");
	close_fake(&k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refused_without_hook),
	    cmocka_unit_test(test_hook_on_step),
	    cmocka_unit_test(test_switch_from_another_thread),
	    cmocka_unit_test(test_beside_other_faults),
	    cmocka_unit_test(test_null_forward),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

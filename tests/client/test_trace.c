/* o1_trace_*: a refinement trace rebuilt from events (linked against the
 * shared library: the exported 0.2 symbols). Rounds' texts are the
 * concatenation of their TOKENs; ROUND fills the numbers; out-of-order
 * or out-of-range rounds are refused; FINAL sets stop and done. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "o1/client.h"

static struct o1_event token(uint32_t round, const char *text)
{
	struct o1_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = O1_EVENT_TOKEN;
	ev.round = round;
	ev.n_ids = 1;
	ev.text_len = strlen(text);
	memcpy(ev.text, text, ev.text_len);
	return ev;
}

static struct o1_event round_ev(uint32_t round, uint32_t cached,
				enum o1_refine_stop_reason stop)
{
	struct o1_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = O1_EVENT_ROUND;
	ev.round = round;
	ev.prompt_tokens = 40 + round;
	ev.cached_tokens = cached;
	ev.generated_tokens = 2;
	ev.mean_logprob = -0.5f;
	ev.latency_ns = 1000;
	ev.finish = O1_FINISH_REASON_EOS;
	ev.refine_stop = stop;
	return ev;
}

static void test_rounds(void **state)
{
	struct o1_trace t;
	struct o1_event ev;

	(void)state;
	o1_trace_init(&t);
	ev = token(0, "Four");
	assert_int_equal(o1_trace_add(&t, &ev), 0);
	ev = token(0, ".");
	assert_int_equal(o1_trace_add(&t, &ev), 0);
	ev = round_ev(0, 0, O1_REFINE_STOP_NONE);
	assert_int_equal(o1_trace_add(&t, &ev), 0);
	ev = token(0, "late"); /* round 0 is closed */
	assert_int_equal(o1_trace_add(&t, &ev), -EINVAL);
	ev = token(2, "skip"); /* round 1 comes first */
	assert_int_equal(o1_trace_add(&t, &ev), -EINVAL);
	ev = token(1, "Four.");
	assert_int_equal(o1_trace_add(&t, &ev), 0);
	ev = round_ev(1, 32, O1_REFINE_STOP_REPEAT);
	assert_int_equal(o1_trace_add(&t, &ev), 0);
	ev = round_ev(1, 32, O1_REFINE_STOP_REPEAT); /* twice */
	assert_int_equal(o1_trace_add(&t, &ev), -EINVAL);
	ev = round_ev(O1_REFINE_MAX_ROUNDS, 0, O1_REFINE_STOP_NONE);
	assert_int_equal(o1_trace_add(&t, &ev), -EINVAL);
	memset(&ev, 0, sizeof(ev));
	ev.type = O1_EVENT_FINAL;
	ev.refine_stop = O1_REFINE_STOP_REPEAT;
	assert_int_equal(o1_trace_add(&t, &ev), 0);
	assert_true(t.done);
	assert_int_equal(t.stop, O1_REFINE_STOP_REPEAT);
	assert_int_equal(t.n_rounds, 2);
	assert_string_equal(t.rounds[0].text, "Four.");
	assert_int_equal(t.rounds[0].text_len, 5);
	assert_string_equal(t.rounds[1].text, "Four.");
	assert_true(t.rounds[0].complete && t.rounds[1].complete);
	assert_int_equal(t.rounds[1].prompt_tokens, 41);
	assert_int_equal(t.rounds[1].cached_tokens, 32);
	assert_int_equal(t.rounds[1].stop, O1_REFINE_STOP_REPEAT);
	assert_int_equal(t.rounds[0].finish, O1_FINISH_REASON_EOS);
	assert_true(t.rounds[1].mean_logprob == -0.5f);
	o1_trace_free(&t);
	assert_null(t.rounds[0].text);
}

/* A round cut short (no ROUND yet) still has its text; empty rounds
 * have none. */
static void test_partial(void **state)
{
	struct o1_trace t;
	struct o1_event ev;

	(void)state;
	o1_trace_init(&t);
	ev = round_ev(0, 0, O1_REFINE_STOP_NONE);
	assert_int_equal(o1_trace_add(&t, &ev), 0);
	assert_null(t.rounds[0].text);
	ev = token(1, "Fo");
	assert_int_equal(o1_trace_add(&t, &ev), 0);
	assert_int_equal(t.n_rounds, 2);
	assert_false(t.rounds[1].complete);
	assert_string_equal(t.rounds[1].text, "Fo");
	o1_trace_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rounds),
	    cmocka_unit_test(test_partial),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

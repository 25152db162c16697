/* The slow-step trace (daemon/backend/step_trace.c): the window's median
 * (odd and even counts, the ring keeping the last O1_STEP_TRACE_WINDOW),
 * the slow decision (none before O1_STEP_TRACE_MIN steps of a kind, then
 * strictly more than O1_STEP_TRACE_FACTOR times the median, each kind on
 * its own), the phases of a step with skipped ones (0, the next counted
 * from the last mark), the first step of a token count, the step's shape
 * from an o1_step, and the trace off below log level debug. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <string.h>

#include "backend/backend.h"
#include "backend/step_trace.h"
#include "common/log.h"

static void test_median(void **state)
{
	struct o1_step_window w = {0};
	uint64_t m;

	(void)state;
	assert_int_equal(o1_step_window_median(&w), 0);
	o1_step_window_push(&w, 30, &m);
	assert_int_equal(m, 0);
	o1_step_window_push(&w, 10, &m);
	assert_int_equal(m, 30);
	o1_step_window_push(&w, 20, &m);
	assert_int_equal(m, 30); /* of 10, 30: the upper */
	assert_int_equal(o1_step_window_median(&w), 20);
	/* the ring keeps the last 63: 1000 x 1, then 63 x 5 */
	for (int i = 0; i < 1000; i++)
		o1_step_window_push(&w, 1, &m);
	assert_int_equal(w.n, O1_STEP_TRACE_WINDOW);
	assert_int_equal(o1_step_window_median(&w), 1);
	for (int i = 0; i < O1_STEP_TRACE_WINDOW / 2; i++)
		o1_step_window_push(&w, 5, &m);
	assert_int_equal(o1_step_window_median(&w), 1); /* 31 of 63 */
	o1_step_window_push(&w, 5, &m);
	assert_int_equal(o1_step_window_median(&w), 5); /* 32 of 63 */
}

static void test_threshold(void **state)
{
	struct o1_step_window w = {0};
	uint64_t m;

	(void)state;
	/* nothing is slow before O1_STEP_TRACE_MIN steps */
	assert_false(o1_step_window_push(&w, 1000, &m));
	for (int i = 1; i < O1_STEP_TRACE_MIN; i++)
		assert_false(o1_step_window_push(&w, 1000000, &m));
	w = (struct o1_step_window){0};
	for (int i = 0; i < O1_STEP_TRACE_MIN; i++)
		assert_false(o1_step_window_push(&w, 1000, &m));
	assert_false(o1_step_window_push(&w, 3000, &m)); /* 3x: not more */
	assert_true(o1_step_window_push(&w, 3001, &m));
	assert_int_equal(m, 1000);
	/* slow steps join the window: the median moves once they are most
	 * of it */
	for (int i = 0; i < 40; i++)
		o1_step_window_push(&w, 16000, &m);
	assert_false(o1_step_window_push(&w, 16000, &m));
	assert_int_equal(m, 16000);
}

static void test_kind(void **state)
{
	(void)state;
	assert_int_equal(o1_step_trace_kind(8, 0, true), O1_STEP_DECODE_GRAPH);
	assert_int_equal(o1_step_trace_kind(8, 0, false), O1_STEP_DECODE);
	assert_int_equal(o1_step_trace_kind(8, 100, false), O1_STEP_MIXED);
	assert_int_equal(o1_step_trace_kind(0, 100, false), O1_STEP_PREFILL);
}

/* A mixed step of 10 decode rows and 134 prompt tokens whose phases
 * take PREP, UPLOAD, LAYERS, HEAD, WAIT us from NOW (ns), OUT skipped. */
static bool mixed_step(struct o1_step_trace *t, uint64_t *now,
		       const uint64_t us[5], char *buf, size_t size)
{
	static const enum o1_step_phase ph[] = {O1_STEP_PREP, O1_STEP_UPLOAD,
						O1_STEP_LAYERS, O1_STEP_HEAD,
						O1_STEP_WAIT};
	struct o1_step_info in = {
	    11, 144, 10, 134, 11, 134, 0, "cublasGemmEx", "rows + tiled"};

	o1_step_trace_begin_at(t, true, *now);
	for (int i = 0; i < 5; i++) {
		*now += us[i] * 1000;
		if (us[i])
			o1_step_trace_mark_at(t, ph[i], *now);
	}
	return o1_step_trace_end_at(t, "test", &in, *now, buf, size);
}

static void test_phases(void **state)
{
	static struct o1_step_trace t;
	static const uint64_t fast[5] = {10, 5, 300, 100, 1185};
	static const uint64_t slow[5] = {10, 0, 14000, 100, 1890};
	char line[512];
	uint64_t now = 1000000;

	(void)state;
	o1_step_trace_init(&t);
	for (int i = 0; i < O1_STEP_TRACE_MIN; i++) {
		line[0] = 0;
		assert_false(mixed_step(&t, &now, fast, line, sizeof(line)));
		assert_string_equal(line, "");
	}
	assert_true(mixed_step(&t, &now, slow, line, sizeof(line)));
	assert_non_null(strstr(line, "slow mixed step 1: 16000 us, 10.0x "
				     "the median 1600 us"));
	/* upload skipped: 0, and layers counted from prep's end */
	assert_non_null(strstr(line, "prep 10 + upload 0 + layers 14000 + "
				     "head 100 + wait 1890 + out 0 us"));
	assert_non_null(strstr(line, "10 decode rows + 134 prompt tokens "
				     "(11 seqs, 144 tokens, 11 logits rows"));
	assert_non_null(strstr(line, "no graph, products cublasGemmEx, "
				     "attention rows + tiled"));
	/* 144 tokens came before: not a first */
	assert_null(strstr(line, "first step"));
	assert_int_equal(t.steps, O1_STEP_TRACE_MIN + 1);
	assert_int_equal(t.slow, 1);
	/* a truncated line stays a string */
	assert_true(mixed_step(&t, &now, slow, line, 40));
	assert_int_equal(strlen(line), 39);
	/* off: nothing happens, nothing is counted */
	o1_step_trace_begin_at(&t, false, now);
	o1_step_trace_mark_at(&t, O1_STEP_PREP, now + 5);
	assert_false(o1_step_trace_end_at(&t, "test",
					  &(struct o1_step_info){.tokens = 1},
					  now + 50000000, line, sizeof(line)));
	assert_int_equal(t.steps, O1_STEP_TRACE_MIN + 2);
}

static void test_kinds_apart(void **state)
{
	static struct o1_step_trace t;
	struct o1_step_info dec = {.seqs = 64,
				   .tokens = 64,
				   .decode_rows = 64,
				   .logits_rows = 64,
				   .bucket = 64};
	struct o1_step_info pre = {
	    .seqs = 1, .tokens = 512, .prompt_tokens = 512, .logits_rows = 1};
	char line[512];
	uint64_t now = 0;

	(void)state;
	o1_step_trace_init(&t);
	for (int i = 0; i < O1_STEP_TRACE_MIN; i++) {
		o1_step_trace_begin_at(&t, true, now);
		now += 1000000;
		assert_false(o1_step_trace_end_at(&t, "test", &dec, now, line,
						  sizeof(line)));
	}
	/* a prefill step ten times a decode step: its own kind, too few */
	o1_step_trace_begin_at(&t, true, now);
	now += 10000000;
	assert_false(
	    o1_step_trace_end_at(&t, "test", &pre, now, line, sizeof(line)));
	/* a new token count is flagged on its first step only */
	dec.tokens = dec.decode_rows = dec.seqs = dec.logits_rows = 63;
	o1_step_trace_begin_at(&t, true, now);
	now += 5000000;
	assert_true(
	    o1_step_trace_end_at(&t, "test", &dec, now, line, sizeof(line)));
	assert_non_null(strstr(line, "slow decode (graph) step 1: 5000 us"));
	assert_non_null(strstr(line, "63 tokens, first step of this many"));
	assert_non_null(strstr(line, "graph bucket 64"));
	o1_step_trace_begin_at(&t, true, now);
	now += 5000000;
	assert_true(
	    o1_step_trace_end_at(&t, "test", &dec, now, line, sizeof(line)));
	assert_null(strstr(line, "first step"));
}

static void test_shape(void **state)
{
	static const int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	static const uint32_t pages[2] = {0, 1};
	struct o1_step_seq seqs[3] = {
	    {ids, 1, 40, pages, 2, false},
	    {ids, 5, 0, pages, 1, false},
	    {ids, 3, 16, pages, 2, true},
	};
	struct o1_step st = {.seqs = seqs, .n_seqs = 3};
	struct o1_step_info in;

	(void)state;
	o1_step_trace_shape(&st, &in);
	assert_int_equal(in.seqs, 3);
	assert_int_equal(in.tokens, 9);
	assert_int_equal(in.decode_rows, 1);
	assert_int_equal(in.prompt_tokens, 8);
	assert_int_equal(in.logits_rows, 1 + 1 + 3);
	assert_int_equal(in.max_len, 41);
	assert_int_equal(in.bucket, 0);
	assert_null(in.products);
}

/* The clocked calls: off below debug, on at debug (a first step is never
 * slow, so nothing is logged). */
static void test_level(void **state)
{
	static struct o1_step_trace t;
	struct o1_step_info in = {.seqs = 1, .tokens = 1, .decode_rows = 1};
	enum o1_log_level old = o1_log_get_level();

	(void)state;
	o1_step_trace_init(&t);
	o1_log_set_level(O1_LOG_INFO);
	o1_step_trace_begin(&t);
	assert_false(t.on);
	assert_int_equal(o1_step_trace_now(&t), 0);
	o1_step_trace_mark(&t, O1_STEP_PREP);
	assert_int_equal(t.marked, 0);
	assert_false(o1_step_trace_end(&t, "test", &in));
	assert_int_equal(t.steps, 0);
	o1_log_set_level(O1_LOG_DEBUG);
	o1_step_trace_begin(&t);
	assert_true(t.on);
	assert_true(o1_step_trace_now(&t) > 0);
	o1_step_trace_lib(&t, 7);
	o1_step_trace_mark(&t, O1_STEP_PREP);
	assert_int_equal(t.marked, 1u << O1_STEP_PREP);
	assert_int_equal(t.lib_ns, 7);
	assert_int_equal(t.lib_calls, 1);
	assert_false(o1_step_trace_end(&t, "test", &in));
	assert_int_equal(t.steps, 1);
	assert_false(t.on);
	o1_log_set_level(old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_median),
	    cmocka_unit_test(test_threshold),
	    cmocka_unit_test(test_kind),
	    cmocka_unit_test(test_phases),
	    cmocka_unit_test(test_kinds_apart),
	    cmocka_unit_test(test_shape),
	    cmocka_unit_test(test_level),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

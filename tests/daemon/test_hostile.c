/* Careless and hostile readers against a real o1d (CPU backend, the tiny
 * model made by o1model): a client that submits its whole quota and never
 * reads its completion ring hurts only itself (issue 21, item 1).
 * - Non-readers at full quota beside a reader: while they fill the
 *   running set, the reader's request is admitted at once (fair share);
 *   once their rings are full they are parked, and the reader's request
 *   finishes in about its unloaded time, token-exact against o1model run.
 *   Meanwhile o1d does not spin (prefix hits still, CPU low).
 * - A non-reader whose parked streams hold the whole KV pool: the
 *   reader's request takes their pages.
 * - scheduler.stall_timeout_ms: each unread stream gets one FINAL with
 *   O1_E_STALLED, after every token it was sent.
 * argv: o1d o1model */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "daemon_harness.h"
#include "o1/client.h"

#define MAX_NONREADERS 4

static const char *o1d_bin, *o1model_bin;

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int setup(void **state)
{
	static struct daemon_proc d;

	if (harness_init(&d, o1model_bin))
		return -1;
	*state = &d;
	return 0;
}

static int teardown(void **state)
{
	harness_fini(*state);
	return 0;
}

/* The reader's request: 8 ids, 32 greedy tokens. */
static void victim_spec(struct spec *s)
{
	memset(s, 0, sizeof(*s));
	s->n_ids = 8;
	for (uint32_t i = 0; i < 8; i++)
		s->ids[i] = 40 + i * 13;
	s->max_tokens = 32;
	s->top_p = 1.0f;
	s->ignore_eos = true;
}

/* Runs the reader's request; its duration in ns, 0 when it failed or
 * differed from REF. */
static uint64_t victim_run(const struct daemon_proc *d, const struct spec *s,
			   const struct result *ref)
{
	struct result r;
	uint64_t t0 = now_ns();

	if (spec_run(d->socket, s, &r) || result_same(&r, ref, "reader"))
		return 0;
	return now_ns() - t0;
}

/* Connects and submits N requests (8 ids, MAX_TOKENS each) it will never
 * read; NULL on failure. */
static struct o1_client *nonreader(const struct daemon_proc *d, uint32_t n,
				   uint32_t max_tokens, uint32_t seed)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = d->socket, .name = "nonreader"};
	struct o1_client *c;
	uint32_t ids[8];

	if (o1_client_connect(&co, &c))
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		struct o1_submit_opts so = {.sz = sizeof(so),
					    .req_id = i + 1,
					    .ids = ids,
					    .n_ids = 8,
					    .max_tokens = max_tokens,
					    .flags = O1_FLAG_IGNORE_EOS};

		for (uint32_t k = 0; k < 8; k++)
			ids[k] = (seed * 97 + i * 31 + k * 7) % 400 + 20;
		if (o1_client_submit(c, &so)) {
			fprintf(stderr, "nonreader submit %u: %s\n", i,
				o1_last_error());
			o1_client_close(c);
			return NULL;
		}
	}
	return c;
}

/* Polls admin status (up to MS) until FIELD of it reaches AT_LEAST. */
static int wait_status(const struct daemon_proc *d, size_t field, int at_least,
		       int ms, struct kv_status *st)
{
	for (int i = 0; i < ms / 20; i++) {
		if (admin_status(d->socket, st))
			return -1;
		if (*(const int *)((const char *)st + field) >= at_least)
			return 0;
		msleep(20);
	}
	fprintf(stderr, "status: running %d waiting %d parked %d stalled %d\n",
		st->running, st->waiting, st->parked, st->stalled);
	return -1;
}

/* o1d's CPU time so far, in seconds (utime + stime). */
static double cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	p = strrchr(buf, ')'); /* the command may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
				"%*u %lu %lu",
			 &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The best of three unloaded runs of the reader's request. */
static uint64_t unloaded_ns(const struct daemon_proc *d, const struct spec *s,
			    const struct result *ref)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 3; i++) {
		uint64_t t = victim_run(d, s, ref);

		assert_true(t > 0);
		if (t < best)
			best = t;
	}
	return best;
}

/* Whether one of up to five runs of the reader's request finishes within
 * FACTOR x UNLOADED + SLACK_MS (stops at the first that does). */
static bool within(const struct daemon_proc *d, const struct spec *s,
		   const struct result *ref, uint64_t unloaded, double factor,
		   int slack_ms)
{
	uint64_t bound = (uint64_t)(factor * (double)unloaded) +
			 (uint64_t)slack_ms * 1000000ull;

	for (int i = 0; i < 5; i++) {
		uint64_t t = victim_run(d, s, ref);

		if (!t)
			fprintf(stderr, "reader: failed\n");
		else
			fprintf(stderr,
				"reader: %.1f ms (unloaded %.1f ms, bound "
				"%.1f ms)\n",
				t / 1e6, unloaded / 1e6, bound / 1e6);
		if (t && t <= bound)
			return true;
	}
	return false;
}

/* Three clients submit their quota (8 requests of 1000 tokens each) and
 * never read, with max_running 8: they fill the running set. The reader's
 * request is admitted beside them at once (the fair share preempts one of
 * theirs), then, once all 24 streams are parked (their rings full), it
 * finishes within 3x its unloaded time + 250 ms: it runs alone, so the
 * ideal is 1x and the issue asks for 2x; the rest absorbs a 2-core CI
 * machine under ASan, where one run can lose 100 ms or more to other
 * jobs, and the best of five runs counts. Before the fix the reader was
 * never admitted at all (it waited until the non-readers exited), so the
 * margin costs the test nothing. While everything is parked, o1d must not
 * spin: no prefix hit and under half a core of CPU in two seconds, and the
 * front loop wakes for its housekeeping ticks and our admin request only
 * (it used to retry the full rings every millisecond). */
static void test_nonreaders_beside_reader(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"scheduler.max_running=8", "ipc.max_inflight=8",
			      "scheduler.stall_timeout_ms=600000", NULL};
	struct o1_client *nr[MAX_NONREADERS] = {0};
	struct spec s;
	struct result ref;
	struct kv_status st, st2;
	long long sleeps, ticks;
	uint64_t unloaded;
	double cpu0, cpu1;

	victim_spec(&s);
	assert_int_equal(spec_reference(o1model_bin, d->model, &s, &ref), 0);
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	unloaded = unloaded_ns(d, &s, &ref);
	for (uint32_t i = 0; i < 3; i++)
		assert_non_null(nr[i] = nonreader(d, 8, 1000, i));
	assert_int_equal(wait_status(d, offsetof(struct kv_status, running), 8,
				     30000, &st),
			 0);
	/* beside them while they fill the running set: admitted at all */
	assert_true(within(d, &s, &ref, unloaded, 20.0, 5000));
	assert_int_equal(wait_status(d, offsetof(struct kv_status, parked), 24,
				     60000, &st),
			 0);
	assert_int_equal(st.running, 0);
	assert_true(within(d, &s, &ref, unloaded, 3.0, 250));
	assert_int_equal(admin_status(d->socket, &st), 0);
	cpu0 = cpu_s(d->pid);
	msleep(2000);
	cpu1 = cpu_s(d->pid);
	assert_int_equal(admin_status(d->socket, &st2), 0);
	fprintf(stderr, "all parked: %.2f s of CPU in 2 s, prefix hits "
			"%lld -> %lld, steps %lld -> %lld\n",
		cpu1 - cpu0, st.prefix_hits, st2.prefix_hits, st.steps,
		st2.steps);
	sleeps = st2.front_sleeps - st.front_sleeps;
	ticks = st2.front_ticks - st.front_ticks;
	fprintf(stderr, "front loop: %lld sleeps in %lld ticks\n", sleeps,
		ticks);
	assert_true(cpu0 >= 0 && cpu1 - cpu0 < 1.0);
	/* one per tick, a few for the admin connections around the window */
	assert_true(ticks > 0 && sleeps <= ticks + 16);
	assert_int_equal(st2.prefix_hits, st.prefix_hits);
	assert_int_equal(st2.steps, st.steps);
	for (uint32_t i = 0; i < 3; i++)
		o1_client_close(nr[i]);
	assert_int_equal(admin_wait_idle(d->socket, 30000, &st), 0);
	assert_int_equal(st.pages_free + st.pages_cached, st.pages_total);
	assert_int_equal(daemon_stop(d), 0);
}

/* One non-reader (16 requests) on a 96-page pool: its parked streams end
 * up holding the pool. The reader's request takes their pages (they are
 * recomputed if ever read) and finishes, token-exact, in the same bound
 * as above. */
static void test_nonreader_holds_pool(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"scheduler.max_running=16",
			      "ipc.max_inflight=16", "kv.pages=96",
			      "scheduler.stall_timeout_ms=600000", NULL};
	struct o1_client *nr;
	struct spec s;
	struct result ref;
	struct kv_status st;
	uint64_t unloaded;

	victim_spec(&s);
	assert_int_equal(spec_reference(o1model_bin, d->model, &s, &ref), 0);
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	unloaded = unloaded_ns(d, &s, &ref);
	assert_non_null(nr = nonreader(d, 16, 1000, 7));
	assert_int_equal(wait_status(d, offsetof(struct kv_status, parked), 16,
				     60000, &st),
			 0);
	fprintf(stderr, "parked: pages free %d cached %d used %d of %d\n",
		st.pages_free, st.pages_cached, st.pages_used,
		st.pages_total);
	assert_true(st.pages_used > st.pages_total / 2);
	assert_true(within(d, &s, &ref, unloaded, 3.0, 250));
	o1_client_close(nr);
	assert_int_equal(admin_wait_idle(d->socket, 30000, &st), 0);
	assert_int_equal(daemon_stop(d), 0);
}

/* Reads every event of C until N FINALs came (or 30 s), checking each
 * stream ended STALLED after all the tokens its FINAL counts. */
static void read_stalled(struct o1_client *c, uint32_t n)
{
	uint32_t tokens[8] = {0}, finals = 0;
	struct o1_event ev;

	while (finals < n) {
		assert_int_equal(o1_client_wait(c, &ev, 30000000000ll), 1);
		assert_true(ev.req_id >= 1 && ev.req_id <= n);
		if (ev.type == O1_EVENT_TOKEN)
			tokens[ev.req_id - 1] += ev.n_ids;
		if (ev.type != O1_EVENT_FINAL)
			continue;
		finals++;
		assert_int_equal(ev.finish, O1_FINISH_REASON_ERROR);
		assert_int_equal(ev.error, -O1_E_STALLED);
		assert_true(tokens[ev.req_id - 1] > 0);
		assert_int_equal(tokens[ev.req_id - 1], ev.generated_tokens);
	}
}

/* scheduler.stall_timeout_ms = 300: a client that reads nothing of its
 * four streams gets, when it finally reads, each stream's tokens and one
 * FINAL saying O1_E_STALLED; o1d counts four stalls and frees every
 * page. */
static void test_stall_deadline(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"scheduler.stall_timeout_ms=300",
			      "ipc.max_inflight=4", NULL};
	struct o1_client *nr;
	struct kv_status st;

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_non_null(nr = nonreader(d, 4, 1000, 3));
	assert_int_equal(wait_status(d, offsetof(struct kv_status, stalled), 4,
				     60000, &st),
			 0);
	assert_int_equal(st.parked + st.running + st.waiting, 0);
	read_stalled(nr, 4);
	assert_int_equal(admin_wait_idle(d->socket, 30000, &st), 0);
	assert_int_equal(st.stalled, 4);
	assert_true(log_has(d->log, "nothing read from its stream for 300 ms"));
	o1_client_close(nr);
	assert_int_equal(daemon_stop(d), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_nonreaders_beside_reader,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nonreader_holds_pool, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_stall_deadline, setup,
					    teardown),
	};

	if (argc < 3) {
		fprintf(stderr, "usage: test_hostile O1D O1MODEL\n");
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	return cmocka_run_group_tests(tests, NULL, NULL);
}

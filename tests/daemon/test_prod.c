/* Production checks against a running o1d on the tiny model: readiness
 * (admin status, o1ctl health), o1ctl smoke (passes on a healthy daemon,
 * fails when a check cannot pass), and o1ctl slo (objectives met, breach
 * exits non-zero, baseline deltas).
 * argv: o1d o1model o1ctl */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon_harness.h"
#include "tests/common/test_util.h"

static const char *o1d_bin, *o1ctl_bin;

/* Runs "o1ctl ARGS --socket S" with stdout into OUT (may be NULL);
 * returns the exit code. */
static int o1ctl(const struct daemon_proc *d, const char *args, char *out,
		 size_t cap)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s %s --socket %s", o1ctl_bin, args,
		 d->socket);
	return harness_run(cmd, out, cap);
}

/* o1ctl smoke ARGS with SMOKE_CANCEL_BOUND_MS, stdout into OUT; an exit
 * code other than WANT fails the test with smoke's stdout and stderr. */
static void smoke(const struct daemon_proc *d, const char *args, int want,
		  char *out, size_t cap)
{
	char cmd[512], err_path[128], *err;
	size_t len;
	int rc;

	snprintf(err_path, sizeof(err_path), "%s/smoke.err", d->dir);
	snprintf(cmd, sizeof(cmd), "smoke --cancel-bound-ms %d %s 2>%s",
		 SMOKE_CANCEL_BOUND_MS, args, err_path);
	rc = o1ctl(d, cmd, out, cap);
	if (rc == want)
		return;
	err = o1_test_file_read(err_path, &len);
	print_error("o1ctl %s: exit %d, wanted %d\nstdout:\n%s\nstderr:\n%s\n",
		    cmd, rc, want, out, err ? err : "(unreadable)");
	free(err);
	fail();
}

static cJSON *status(const struct daemon_proc *d)
{
	char buf[8192];

	if (admin_send(d->socket, "{\"op\":\"status\"}", buf, sizeof(buf)))
		return NULL;
	return cJSON_Parse(buf);
}

static bool is_true(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Ready only after the warm-up ran (logged, counted); health follows
 * ready and draining. */
static void test_ready_health(void **state)
{
	struct daemon_proc *d = *state;
	char out[4096];
	cJSON *st;

	assert_int_equal(o1ctl(d, "health", NULL, 0), 3);
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_true(log_has(d->log, "warm-up: 4 greedy tokens in"));
	st = status(d);
	assert_non_null(st);
	assert_true(is_true(st, "ready"));
	assert_true(is_true(st, "warmup_ok"));
	assert_true(num(st, "warmup_ms") > 0);
	assert_true(num(st, "graphs_total") == 0);
	assert_true(num(st, "max_context_tokens") == 2048);
	assert_true(num(st, "vocab_size") > 0);
	cJSON_Delete(st);
	assert_int_equal(o1ctl(d, "health", out, sizeof(out)), 0);
	assert_string_equal(out, "ok\n");
	assert_int_equal(o1ctl(d, "drain", NULL, 0), 0);
	assert_int_equal(o1ctl(d, "health", out, sizeof(out)), 6);
	assert_string_equal(out, "draining\n");
	st = status(d);
	assert_false(is_true(st, "ready"));
	cJSON_Delete(st);
	assert_int_equal(o1ctl(d, "resume", NULL, 0), 0);
	assert_int_equal(o1ctl(d, "inject latency on 2>&1", out, sizeof(out)),
			 1);
	assert_non_null(strstr(out, "fault injection is off"));
	assert_int_equal(o1ctl(d, "health --json", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "\"healthy\":true"));
	assert_int_equal(daemon_stop(d), 0);
}

static void check_smoke_json(const char *out, bool want_ok, const char *failing)
{
	cJSON *o = cJSON_Parse(out), *c;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "checks");
	int n = 0;

	assert_non_null(o);
	assert_int_equal(is_true(o, "ok"), want_ok);
	cJSON_ArrayForEach(c, list)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
		bool bad = failing && !strcmp(name->valuestring, failing);

		if (is_true(c, "ok") == bad)
			fprintf(stderr, "smoke check %s: %s\n",
				name->valuestring,
				cJSON_GetObjectItemCaseSensitive(c, "detail")
				    ->valuestring);
		assert_int_equal(is_true(c, "ok"), !bad);
		n++;
	}
	assert_int_equal(n, 5);
	cJSON_Delete(o);
}

/* A healthy daemon passes every check; one that refuses long prompts
 * fails the long check alone (exit 1); no daemon: exit 3. */
static void test_smoke(void **state)
{
	struct daemon_proc *d = *state;
	const char *small[] = {"ipc.max_prompt_tokens=100", NULL};
	char out[8192];

	smoke(d, "", 3, out, sizeof(out));
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	smoke(d, "", 0, out, sizeof(out));
	if (!strstr(out, "smoke: 5 of 5 checks passed"))
		fail_msg("o1ctl smoke:\n%s", out);
	smoke(d, "--json", 0, out, sizeof(out));
	check_smoke_json(out, true, NULL);
	assert_int_equal(daemon_stop(d), 0);

	assert_int_equal(daemon_start(d, o1d_bin, small), 0);
	smoke(d, "--json", 1, out, sizeof(out));
	check_smoke_json(out, false, "long");
	assert_int_equal(daemon_stop(d), 0);
}

/* The latency objectives out of the way of a run that must pass: these
 * tests are about the mechanics, and a loaded 2-core machine under ASan
 * misses the defaults (p99 TTFT 2 s, ITL 250 ms) at times (two test
 * suites side by side, 45th session). */
#define SLO_LOOSE " --set slo.p99_ttft_ms=3600000 --set slo.p99_itl_ms=3600000"

/* o1ctl slo ARGS over the metrics file of D, started in the background;
 * finish_slo reads its stdout and returns its exit code. */
static FILE *start_slo(const struct daemon_proc *d, const char *args)
{
	char cmd[1024];
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --set metrics.mode=shm --set "
		 "metrics.shm_path=%s/m.shm slo %s",
		 o1ctl_bin, d->socket, d->dir, args);
	f = popen(cmd, "r");
	assert_non_null(f);
	usleep(300000); /* its first snapshot */
	return f;
}

static int finish_slo(FILE *f, char *out, size_t cap)
{
	size_t n = fread(out, 1, cap - 1, f);
	int st = pclose(f);

	out[n] = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const cJSON *slo_item(const cJSON *o, const char *name)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(o, "slos"))
	{
		if (!strcmp(cJSON_GetObjectItemCaseSensitive(c, "name")
				->valuestring,
			    name))
			return c;
	}
	fail_msg("no slo %s", name);
	return NULL;
}

/* Objectives met under load, then a baseline saved and compared, a
 * latency objective breached, a bad baseline. (The success rate's breach
 * is in test_faults: failing steps.) */
static void test_slo(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"metrics.enabled=true", "metrics.mode=shm", NULL,
			      NULL};
	char shm[256], out[8192], args[512];
	cJSON *o;
	FILE *f;

	snprintf(shm, sizeof(shm), "metrics.shm_path=%s/m.shm", d->dir);
	sets[2] = shm;
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	f = start_slo(d, "--window 4 --json" SLO_LOOSE);
	smoke(d, "--long-max 512", 0, out, sizeof(out));
	assert_int_equal(finish_slo(f, out, sizeof(out)), 0);
	o = cJSON_Parse(out);
	assert_non_null(o);
	assert_true(is_true(o, "ok"));
	assert_int_equal(num(o, "finished"), 8); /* smoke's requests */
	assert_true(num(slo_item(o, "success_rate"), "value") == 1.0);
	assert_true(num(slo_item(o, "p99_ttft_ms"), "value") > 0);
	/* an estimate inside its range, never above the largest seen */
	assert_true(num(slo_item(o, "p99_ttft_ms"), "value") <=
		    num(slo_item(o, "p99_ttft_ms"), "high"));
	assert_true(num(slo_item(o, "p99_ttft_ms"), "value") >=
		    num(slo_item(o, "p99_ttft_ms"), "low"));
	assert_true(num(slo_item(o, "p99_itl_ms"), "value") > 0);
	cJSON_Delete(o);

	snprintf(args, sizeof(args), "--window 4 --save %s/base.json" SLO_LOOSE,
		 d->dir);
	f = start_slo(d, args);
	smoke(d, "--long-max 512", 0, out, sizeof(out));
	assert_int_equal(finish_slo(f, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "slo: ok"));

	/* TTFT objective of 1 ms: smoke's long prompt breaks it */
	snprintf(args, sizeof(args),
		 "--window 4 --baseline %s/base.json --set slo.p99_ttft_ms=1",
		 d->dir);
	f = start_slo(d, args);
	smoke(d, "--long-max 512", 0, out, sizeof(out));
	assert_int_equal(finish_slo(f, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "objective <= 1 "));
	assert_non_null(strstr(out, "BREACH  baseline"));
	assert_non_null(strstr(out, "slo: BREACH"));

	/* bad baseline: exit 2 with the reason */
	snprintf(args, sizeof(args), "--window 0.1 --baseline %s/m.shm 2>&1",
		 d->dir);
	assert_int_equal(finish_slo(start_slo(d, args), out, sizeof(out)), 2);
	assert_non_null(strstr(out, "not a file of o1ctl slo --save"));
	assert_int_equal(daemon_stop(d), 0);
}

/* ---- fault injection under load ---- */

#define LOAD_THREADS 4

struct load {
	const char *socket;
	atomic_bool stop;
	atomic_uint sent, ok, eio, other, bad_finals;
	pthread_t t[LOAD_THREADS];
};

struct worker {
	struct load *l;
	unsigned id;
};

static void *load_main(void *arg)
{
	struct worker *w = arg;
	struct load *l = w->l;
	struct result r;
	struct spec s;

	for (unsigned k = 0; !atomic_load(&l->stop); k++) {
		spec_make(&s, w->id * 1000 + k);
		s.ignore_eos = true;
		s.max_tokens = 24;
		atomic_fetch_add(&l->sent, 1);
		if (spec_run(l->socket, &s, &r) || r.finals != 1) {
			atomic_fetch_add(&l->bad_finals, 1);
			continue;
		}
		if (!r.error && r.generated == s.max_tokens)
			atomic_fetch_add(&l->ok, 1);
		else if (r.error == -EIO)
			atomic_fetch_add(&l->eio, 1);
		else
			atomic_fetch_add(&l->other, 1);
	}
	return NULL;
}

static void load_start(struct load *l, const char *socket)
{
	static struct worker w[LOAD_THREADS];

	memset(l, 0, sizeof(*l));
	l->socket = socket;
	for (unsigned i = 0; i < LOAD_THREADS; i++) {
		w[i] = (struct worker){.l = l, .id = i};
		assert_int_equal(
		    pthread_create(&l->t[i], NULL, load_main, &w[i]), 0);
	}
}

static void load_stop(struct load *l)
{
	atomic_store(&l->stop, true);
	for (unsigned i = 0; i < LOAD_THREADS; i++)
		pthread_join(l->t[i], NULL);
}

/* A number of status, or of its "faults" object when IN_FAULTS. */
static double status_num(const struct daemon_proc *d, const char *k,
			 bool in_faults)
{
	cJSON *st = status(d);
	double v;

	assert_non_null(st);
	v = num(in_faults ? cJSON_GetObjectItemCaseSensitive(st, "faults") : st,
		k);
	cJSON_Delete(st);
	return v;
}

static double metric(const struct daemon_proc *d, const char *name)
{
	char cmd[1024], out[1 << 16];
	size_t n;
	cJSON *o;
	double v;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "%s --set metrics.mode=shm --set metrics.shm_path=%s/m.shm "
		 "stats --json",
		 o1ctl_bin, d->dir);
	f = popen(cmd, "r");
	assert_non_null(f);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	assert_int_equal(pclose(f), 0);
	o = cJSON_Parse(out);
	assert_non_null(o);
	v = num(cJSON_GetObjectItemCaseSensitive(o, "counters"), name);
	cJSON_Delete(o);
	return v;
}

static int inject(const struct daemon_proc *d, const char *what)
{
	char args[128];

	snprintf(args, sizeof(args), "inject %s", what);
	return o1ctl(d, args, NULL, 0);
}

/* The CPU backend replays no graphs: graph_replay is refused with what it
 * needs, and status counts no graph steps (o1ctl status prints no graphs
 * line). */
static void check_no_graph_replay(const struct daemon_proc *d)
{
	char out[4096];
	cJSON *st, *g;

	assert_int_equal(
	    o1ctl(d, "inject graph_replay on 2>&1", out, sizeof(out)), 1);
	assert_non_null(strstr(out, "graph_replay needs the CUDA backend "
				    "with graphs enabled"));
	assert_int_equal(
	    o1ctl(d, "inject graph_replay off 3 2>&1", out, sizeof(out)), 1);
	assert_non_null(strstr(out, "needs the CUDA backend"));
	st = status(d);
	assert_non_null(st);
	g = cJSON_GetObjectItemCaseSensitive(st, "graphs");
	assert_true(cJSON_IsObject(g));
	assert_true(num(g, "hits") == 0 && num(g, "fallbacks") == 0);
	assert_true(num(g, "misses") == 0 && num(g, "prefill") == 0);
	assert_false(cJSON_HasObjectItem(
	    cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(st, "faults"), "on"),
	    "graph_replay"));
	cJSON_Delete(st);
	assert_int_equal(o1ctl(d, "status", out, sizeof(out)), 0);
	assert_null(strstr(out, "graphs:"));
}

/* slo over a 2 s window of load; its exit code. */
static int slo_now(const struct daemon_proc *d, const char *args)
{
	char out[8192];

	return finish_slo(start_slo(d, args), out, sizeof(out));
}

/* Each fault under load: its counter moves, the error or fallback path is
 * taken, every request gets exactly one FINAL, and once every fault is
 * off `o1ctl slo` is back within tolerance of the baseline taken before,
 * within RECOVER_WINDOWS windows of 2 s: a generous deadline, polled,
 * since a loaded 2-core machine under ASan recovers in 3 to 4 windows
 * and a quiet one in 1. */
#define RECOVER_WINDOWS 15
static void test_faults(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"metrics.enabled=true", "metrics.mode=shm", NULL,
			      "faults.enabled=true",  "kv.pages=64",	  NULL};
	char shm[256], base[512], check[640];
	double sub0, fin0, pre0, t0;
	struct kv_status kv;
	struct load l;
	unsigned ok0, eio0, win;

	snprintf(shm, sizeof(shm), "metrics.shm_path=%s/m.shm", d->dir);
	sets[2] = shm;
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	check_no_graph_replay(d);
	assert_int_equal(inject(d, "nonsense on"), 1);
	assert_int_equal(inject(d, "latency maybe"), 2);
	sub0 = metric(d, "requests_submitted");
	load_start(&l, d->socket);
	snprintf(base, sizeof(base),
		 "--window 2 --save %s/fbase.json" SLO_LOOSE, d->dir);
	assert_int_equal(slo_now(d, base), 0);

	/* latency: steps delayed, inter-token objective of 20 ms breached */
	assert_int_equal(inject(d, "latency on 30"), 0);
	assert_int_equal(slo_now(d, "--window 2 --set slo.p99_itl_ms=20"), 1);
	assert_int_equal(inject(d, "latency off"), 0);
	assert_true(status_num(d, "delayed_steps", true) > 10);

	/* step_fail: every 40th step fails its requests (EIO), others go on;
	 * the success rate is breached */
	ok0 = atomic_load(&l.ok);
	eio0 = atomic_load(&l.eio);
	assert_int_equal(inject(d, "step_fail on 40"), 0);
	assert_int_equal(slo_now(d, "--window 2"), 1);
	assert_int_equal(inject(d, "step_fail off"), 0);
	assert_true(status_num(d, "failed_steps", true) > 0);
	assert_true(atomic_load(&l.eio) > eio0);
	assert_true(atomic_load(&l.ok) > ok0);
	assert_true(metric(d, "failed_internal") > 0);

	/* stall: nothing delivered while on, everything after */
	assert_int_equal(inject(d, "stall on"), 0);
	usleep(300000);
	ok0 = atomic_load(&l.ok);
	usleep(500000);
	assert_int_equal(atomic_load(&l.ok), ok0);
	assert_true(status_num(d, "stalled_polls", true) > 0);
	assert_int_equal(inject(d, "stall off"), 0);
	for (int i = 0; i < 600 && atomic_load(&l.ok) <= ok0; i++)
		usleep(50000); /* delivered again: polled, 30 s at most */
	assert_true(atomic_load(&l.ok) > ok0);

	/* kv_exhaust: 56 of 64 pages held. The 4 load threads' sequences
	 * (2..46 prompt tokens + 24, so 2..5 pages of 16, 3 on average) then
	 * outgrow the 8 pages left and running ones are preempted. How soon
	 * depends on the mix in flight and the machine's speed (a sanitizer
	 * build on 2 cores is slow), so poll rather than sleep a fixed time. */
	pre0 = status_num(d, "preemptions", false);
	assert_int_equal(inject(d, "kv_exhaust on 56"), 0);
	for (int i = 0; i < 300 && status_num(d, "preemptions", false) <= pre0;
	     i++)
		usleep(50000);
	assert_true(status_num(d, "kv_pages_held", true) > 0);
	assert_true(status_num(d, "preemptions", false) > pre0);
	assert_int_equal(inject(d, "kv_exhaust off"), 0);
	for (int i = 0; i < 200 && status_num(d, "kv_pages_held", true); i++)
		usleep(10000); /* given back on the engine thread's next turn */
	assert_true(status_num(d, "kv_pages_held", true) == 0);

	/* recovery: back within tolerance of the baseline */
	snprintf(
	    check, sizeof(check),
	    "--window 2 --baseline %s/fbase.json --tolerance 400" SLO_LOOSE,
	    d->dir);
	t0 = (double)time(NULL);
	for (win = 1; win <= RECOVER_WINDOWS; win++)
		if (!slo_now(d, check))
			break;
	fprintf(stderr, "slo back at baseline after %u window(s), %.0f s\n",
		win, (double)time(NULL) - t0);
	assert_true(win <= RECOVER_WINDOWS);

	/* no request lost or doubled */
	load_stop(&l);
	fprintf(stderr,
		"load: %u sent, %u completed, %u failed (EIO), %.0f "
		"preemptions\n",
		atomic_load(&l.sent), atomic_load(&l.ok), atomic_load(&l.eio),
		status_num(d, "preemptions", false));
	assert_int_equal(atomic_load(&l.bad_finals), 0);
	assert_int_equal(atomic_load(&l.other), 0);
	assert_int_equal(admin_wait_idle(d->socket, 5000, &kv), 0);
	fin0 = metric(d, "requests_completed") +
	       metric(d, "requests_cancelled") + metric(d, "failed_internal") +
	       metric(d, "failed_engine");
	assert_int_equal(metric(d, "requests_submitted") - sub0,
			 atomic_load(&l.sent));
	assert_int_equal(fin0, atomic_load(&l.sent));
	assert_int_equal(atomic_load(&l.ok) + atomic_load(&l.eio),
			 atomic_load(&l.sent));
	assert_int_equal(daemon_stop(d), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_ready_health, harness_stop),
	    cmocka_unit_test_teardown(test_smoke, harness_stop),
	    cmocka_unit_test_teardown(test_slo, harness_stop),
	    cmocka_unit_test_teardown(test_faults, harness_stop),
	};

	if (argc < 4) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1CTL\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	harness_o1model = argv[2];
	o1ctl_bin = argv[3];
	return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}

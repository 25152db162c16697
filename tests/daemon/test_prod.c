/* Production checks against a running o1d on the tiny model: readiness
 * (admin status, o1ctl health), o1ctl smoke (passes on a healthy daemon,
 * fails when a check cannot pass), and o1ctl slo (objectives met, breach
 * exits non-zero, baseline deltas).
 * argv: o1d o1model o1ctl */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static const char *o1d_bin, *o1model_bin, *o1ctl_bin;

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

/* Runs "o1ctl ARGS --socket S" with stdout into OUT (may be NULL);
 * returns the exit code. */
static int o1ctl(const struct daemon_proc *d, const char *args, char *out,
		 size_t cap)
{
	char cmd[1024];
	FILE *f;
	size_t n = 0;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s --socket %s", o1ctl_bin, args,
		 d->socket);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (out && cap) {
		n = fread(out, 1, cap - 1, f);
		out[n] = 0;
	} else {
		char sink[4096];

		while (fread(sink, 1, sizeof(sink), f) > 0)
			;
	}
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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

	assert_int_equal(o1ctl(d, "smoke", out, sizeof(out)), 3);
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(o1ctl(d, "smoke", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "smoke: 5 of 5 checks passed"));
	assert_int_equal(o1ctl(d, "smoke --json", out, sizeof(out)), 0);
	check_smoke_json(out, true, NULL);
	assert_int_equal(daemon_stop(d), 0);

	assert_int_equal(daemon_start(d, o1d_bin, small), 0);
	assert_int_equal(o1ctl(d, "smoke --json", out, sizeof(out)), 1);
	check_smoke_json(out, false, "long");
	assert_int_equal(daemon_stop(d), 0);
}

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
	f = start_slo(d, "--window 2 --json");
	assert_int_equal(o1ctl(d, "smoke", NULL, 0), 0);
	assert_int_equal(finish_slo(f, out, sizeof(out)), 0);
	o = cJSON_Parse(out);
	assert_non_null(o);
	assert_true(is_true(o, "ok"));
	assert_int_equal(num(o, "finished"), 8); /* smoke's requests */
	assert_true(num(slo_item(o, "success_rate"), "value") == 1.0);
	assert_true(num(slo_item(o, "p99_ttft_ms"), "value") > 0);
	assert_true(num(slo_item(o, "p99_itl_ms"), "value") > 0);
	cJSON_Delete(o);

	snprintf(args, sizeof(args), "--window 2 --save %s/base.json", d->dir);
	f = start_slo(d, args);
	assert_int_equal(o1ctl(d, "smoke", NULL, 0), 0);
	assert_int_equal(finish_slo(f, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "slo: ok"));

	/* TTFT objective of 1 ms: smoke's long prompt breaks it */
	snprintf(args, sizeof(args),
		 "--window 2 --baseline %s/base.json --set slo.p99_ttft_ms=1",
		 d->dir);
	f = start_slo(d, args);
	assert_int_equal(o1ctl(d, "smoke", NULL, 0), 0);
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

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ready_health),
	    cmocka_unit_test(test_smoke),
	    cmocka_unit_test(test_slo),
	};

	if (argc < 4) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1CTL\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	o1ctl_bin = argv[3];
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* o1-sidecar across o1d's deaths and restarts (argv: o1d, o1model,
 * o1-sidecar); o1d serves the demo model on the CPU, metrics in a shm
 * file. Checked:
 * - /metrics never shows a dead daemon's metrics as current: after a
 *   SIGKILL it is a 503 naming the dead pid, and after the restart it
 *   serves the new daemon's (its pid);
 * - o1d restarted with another model: /v1/models is a 503 while o1d is
 *   down, then names the new model; a request naming it is served, one
 *   naming the old model is a 404, and the limits are the new daemon's. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "sidecar_harness.h"
#include "tests/common/test_util.h"

static struct proc side;

static int http(const char *method, const char *path, const char *body,
		char **out)
{
	return http_to(&side, method, path, body, out);
}

static void kill_daemon(void)
{
	assert_int_equal(kill(daemon_p.pid, SIGKILL), 0);
	assert_int_equal(waitpid(daemon_p.pid, NULL, 0), daemon_p.pid);
	daemon_p.pid = 0;
}

static void assert_metrics_of(pid_t pid)
{
	char want[64], *out;

	snprintf(want, sizeof(want), "pid=\"%d\"", (int)pid);
	assert_int_equal(http("GET", "/metrics", NULL, &out), 200);
	if (!strstr(out, want))
		fail_msg("/metrics lacks %s:\n%.400s", want, out);
	free(out);
}

static void test_metrics_after_kill(void **state)
{
	char want[96], *out;
	pid_t pid = daemon_p.pid;

	(void)state;
	assert_metrics_of(pid);
	kill_daemon();
	snprintf(want, sizeof(want),
		 "metrics are from pid %d, which is not running", (int)pid);
	assert_int_equal(http("GET", "/metrics", NULL, &out), 503);
	if (!strstr(out, want))
		fail_msg("/metrics after SIGKILL lacks \"%s\": %s", want, out);
	free(out);
	start_daemon();
	assert_metrics_of(daemon_p.pid);
}

/* The error code of a refused request (HTTP STATUS) whose message holds
 * WHAT (NULL: any). */
static void expect_error(const char *path, const char *body, int status,
			 const char *code, const char *what)
{
	char *out;
	int got = http(body ? "POST" : "GET", path, body, &out);

	if (got != status || !strstr(out, code) || (what && !strstr(out, what)))
		fail_msg("%s: %d, not %d %s (%s): %s", path, got, status, code,
			 what ? what : "", out);
	free(out);
}

static void assert_model_listed(const char *name)
{
	char *out;
	cJSON *j;

	assert_int_equal(http("GET", "/v1/models", NULL, &out), 200);
	j = cJSON_Parse(out);
	assert_non_null(j);
	assert_string_equal(
	    cJSON_GetObjectItem(
		cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "id")
		->valuestring,
	    name);
	cJSON_Delete(j);
	free(out);
}

static void test_model_switch(void **state)
{
	static const char demo[] = "o1 demo bigram", tiny[] = "o1 random tiny llama";
	char cmd[512], body[256], *out;

	(void)state;
	assert_model_listed(demo);
	snprintf(cmd, sizeof(cmd),
		 "%s make --preset tiny --out %s/tiny.gguf >/dev/null 2>&1",
		 o1model_bin, dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(stop(&daemon_p), 0);
	expect_error("/v1/models", NULL, 503, "daemon_unavailable", NULL);
	snprintf(model, sizeof(model), "%s/tiny.gguf", dir);
	start_daemon();
	assert_model_listed(tiny);
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"The\",\"max_tokens\":3}",
		 tiny);
	assert_int_equal(http("POST", "/v1/completions", body, &out), 200);
	free(out);
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"The\",\"max_tokens\":3}",
		 demo);
	expect_error("/v1/completions", body, 404, "model_not_found", tiny);
	expect_error("/v1/completions",
		     "{\"model\":\"default\",\"prompt\":\"The\","
		     "\"max_tokens\":5000}",
		     400, "context_length_exceeded", "limit of 2048");
}

static int setup(void **state)
{
	(void)state;
	if (harness_setup(o1d_bin, o1model_bin, sidecar_bin))
		return -1;
	start_sidecar(&side, "restart", NULL);
	return 0;
}

static int teardown(void **state)
{
	struct proc *const sidecars[] = {&side};

	(void)state;
	return harness_teardown(sidecars, 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics_after_kill),
	    cmocka_unit_test(test_model_switch),
	};

	if (harness_args(argc, argv, 0, 0, NULL))
		return 2;
	return cmocka_run_group_tests(tests, setup, teardown);
}

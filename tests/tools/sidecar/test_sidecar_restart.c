/* o1-sidecar across o1d's deaths and restarts (argv: o1d, o1model,
 * o1-sidecar); o1d serves the demo model on the CPU, metrics in a shm
 * file. Checked:
 * - /metrics never shows a dead daemon's metrics as current: after a
 *   SIGKILL it is a 503 naming the dead pid, and after the restart it
 *   serves the new daemon's (its pid). */
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

/* curl METHOD PATH with BODY (NULL: none); the answer's body into OUT
 * (malloc'd); returns the HTTP status. */
static int http(const char *method, const char *path, const char *body,
		char **out)
{
	char cmd[1024], data[128] = "", *res = malloc(1 << 20), *nl;
	int code;

	assert_non_null(res);
	if (body) {
		o1_test_file_put(dir, "body.json", body);
		snprintf(data, sizeof(data), "--data-binary @%s/body.json",
			 dir);
	}
	snprintf(cmd, sizeof(cmd),
		 "curl -sN --max-time 60 -X %s %s "
		 "-H 'Content-Type: application/json' -w '\\n%%{http_code}' "
		 "http://127.0.0.1:%d%s",
		 method, data, side.port, path);
	assert_int_equal(o1_test_run(cmd, res, 1 << 20), 0);
	nl = strrchr(res, '\n');
	assert_non_null(nl);
	code = atoi(nl + 1);
	*nl = 0;
	*out = res;
	return code;
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
	int s = stop(&side), d = stop(&daemon_p);

	(void)state;
	if (s != 0 || d != 0) {
		fprintf(stderr, "exit codes: sidecar %d, o1d %d\n", s, d);
		return -1;
	}
	return o1_test_dir_remove(dir);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics_after_kill),
	};

	if (argc != 4) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1_SIDECAR\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	sidecar_bin = argv[3];
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}

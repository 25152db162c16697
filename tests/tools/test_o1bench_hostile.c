/* The short forms of o1bench soak and o1bench hostile (tools/o1bench/
 * bench_soak.c, bench_hostile.c), seconds each, against a real o1d on the
 * tiny model (CPU) and an o1-sidecar in front of it; the long forms are
 * run by hand (docs/ROBUSTNESS.md). Checked:
 * - soak: 4 clients for 4 s, one SIGKILLed each second and replaced:
 *   every surviving request exact against o1model run, one FINAL each,
 *   o1d idle with its pages, descriptors and memory back at the end; and
 *   a soak whose reference is wrong fails (the check can fail);
 * - hostile nonreader: 3 x 8 unread requests of 1000 tokens beside a
 *   reader, whose request stays within 3x its unloaded time + 250 ms (the
 *   factor of test_hostile, for a loaded 2-core CI machine under ASan);
 * - hostile slowloris: 200 slow connections from 127.0.0.2 beside probes
 *   from 127.0.0.1, every probe served.
 * argv: o1d o1model o1bench o1-sidecar */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/common/test_util.h"
#include "tests/daemon/daemon_harness.h"

static const char *o1d_bin, *o1model_bin, *o1bench_bin, *sidecar_bin;
static pid_t sidecar_pid; /* stopped by teardown if a test failed */

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
	if (sidecar_pid > 0) {
		kill(sidecar_pid, SIGTERM);
		waitpid(sidecar_pid, NULL, 0);
		sidecar_pid = 0;
	}
	harness_fini(*state);
	return 0;
}

/* The port on the sidecar's ready line in LOG, 0 while there is none. */
static int ready_port(const char *log)
{
	char line[256];
	FILE *f = fopen(log, "r");
	int port = 0;

	while (f && !port && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "ready listen=127.0.0.1:");

		if (p)
			port = atoi(p + 23);
	}
	if (f)
		fclose(f);
	return port;
}

/* Runs CMD (output into OUT); its exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
	int st = o1_test_run(cmd, out, cap);

	fprintf(stderr, "%s\n-> %d: %s", cmd, st, out);
	return st;
}

static void test_soak_short(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"log.requests=0", NULL};
	char cmd[1024], out[4096];

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s soak --socket %s --model %s --o1model %s --clients 4 "
		 "--duration 4 --kill-fraction 0.25 --round-ms 1000 "
		 "--max-tokens 16 2>&1",
		 o1bench_bin, d->socket, d->model, o1model_bin);
	assert_int_equal(run(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "soak ok"));
	assert_null(strstr(out, "kills=0 "));
	assert_null(strstr(out, "requests=0 "));
	/* a wrong reference (a fake o1model answering 1 2 3) fails */
	o1_test_file_put(d->dir, "fake_o1model",
			 "#!/bin/sh\necho 1 2 3\n");
	snprintf(cmd, sizeof(cmd),
		 "chmod +x %s/fake_o1model && %s soak --socket %s --model %s "
		 "--o1model %s/fake_o1model --clients 2 --duration 2 "
		 "--max-tokens 16 2>&1",
		 d->dir, o1bench_bin, d->socket, d->model, d->dir);
	assert_int_equal(run(cmd, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "differ from o1model run"));
	assert_int_equal(daemon_stop(d), 0);
}

static void test_nonreader_short(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"scheduler.max_running=8", "ipc.max_inflight=8",
			      "scheduler.stall_timeout_ms=600000", NULL};
	char cmd[1024], out[4096];

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s hostile nonreader --socket %s --connections 3 "
		 "--requests 8 --max-ratio 3 --slack-ms 250 2>&1",
		 o1bench_bin, d->socket);
	assert_int_equal(run(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "hostile nonreader ok"));
	assert_non_null(strstr(out, "parked=24 "));
	assert_int_equal(daemon_stop(d), 0);
}

/* o1-sidecar in front of D on a free port (read from its ready line);
 * its pid, 0 on failure. */
static pid_t start_sidecar(const struct daemon_proc *d, int *port)
{
	char log[192];
	pid_t pid;

	snprintf(log, sizeof(log), "%s/sidecar.log", d->dir);
	pid = fork();
	if (pid == 0) {
		if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(127);
		execl(sidecar_bin, sidecar_bin, "--daemon", d->socket,
		      "--listen", "127.0.0.1:0", "--access-log", "/dev/null",
		      "--set", "sidecar.read_timeout_ms=1000", "--set",
		      "sidecar.max_connections_per_address=16", (char *)NULL);
		_exit(127);
	}
	sidecar_pid = pid;
	for (int i = 0; pid > 0 && i < 1500; i++) {
		*port = ready_port(log);
		if (*port)
			return pid;
		usleep(20000);
	}
	return 0;
}

static void test_slowloris_short(void **state)
{
	struct daemon_proc *d = *state;
	char cmd[1024], out[4096];
	int port = 0, st, st2;
	pid_t side;

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	side = start_sidecar(d, &port);
	assert_true(side > 0 && port > 0);
	snprintf(cmd, sizeof(cmd),
		 "%s hostile slowloris --http 127.0.0.1:%d --connections 200 "
		 "--seconds 3 2>&1",
		 o1bench_bin, port);
	st = run(cmd, out, sizeof(out));
	kill(side, SIGTERM);
	assert_int_equal(waitpid(side, &st2, 0), side);
	sidecar_pid = 0;
	assert_int_equal(st, 0);
	assert_true(WIFEXITED(st2) && WEXITSTATUS(st2) == 0);
	assert_non_null(strstr(out, "hostile slowloris ok"));
	assert_null(strstr(out, "slow_refused=0 "));
	assert_int_equal(daemon_stop(d), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_soak_short, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nonreader_short, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_slowloris_short, setup,
					    teardown),
	};

	if (argc != 5) {
		fprintf(stderr,
			"usage: %s O1D O1MODEL O1BENCH O1_SIDECAR\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	o1bench_bin = argv[3];
	sidecar_bin = argv[4];
	return cmocka_run_group_tests(tests, NULL, NULL);
}

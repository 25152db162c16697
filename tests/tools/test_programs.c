/* Every program answers alike (argv: o1d o1ctl o1model o1bench o1chat
 * o1-sidecar):
 * - --help: exit 0, usage on stdout, naming its exit codes; subcommands
 *   too (o1model tokenize, o1bench ping, o1ctl slo);
 * - --version: exit 0, one line "PROG RELEASE (wire protocol N,
 *   libo1client.so.N, metrics layout N)", the same for all;
 * - a bad argument: exit 2 and "PROG: " before the message;
 * - o1-sidecar --listen and --daemon are checked as their config keys
 *   (port 80800 and a relative socket refused, exit 2), and its daemon
 *   socket defaults to ipc.socket of the configuration it is given;
 * - o1chat and o1bench find the socket from -c/--set's ipc.socket;
 * - o1ctl smoke's --cancel-bound-ms and --long-max take whole numbers in
 *   their range, a bad one refused (exit 2, named) before o1d is asked;
 *   so do o1ctl cancel's CLIENT and REQ_ID (an overflow included). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/test_util.h"

enum { O1D, O1CTL, O1MODEL, O1BENCH, O1CHAT, SIDECAR, N_PROGS };

static const char *bin[N_PROGS];
static const char *const names[N_PROGS] = {"o1d",     "o1ctl",  "o1model",
					   "o1bench", "o1chat", "o1-sidecar"};

/* PROG ARGS; stdout into OUT (stderr too with ERR2OUT); exit code. */
static int run(int prog, const char *args, bool err2out, char *out,
	       size_t cap)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s %s %s </dev/null", bin[prog], args,
		 err2out ? "2>&1" : "2>/dev/null");
	return o1_test_run(cmd, out, cap);
}

static void test_help(void **state)
{
	static const struct {
		int prog;
		const char *args;
	} subs[] = {{O1MODEL, "tokenize --help"},
		    {O1BENCH, "ping --help"},
		    {O1CTL, "slo --help"}};
	char out[8192];

	(void)state;
	for (int p = 0; p < N_PROGS; p++) {
		assert_int_equal(run(p, "--help", false, out, sizeof(out)), 0);
		if (!strstr(out, "usage:"))
			fail_msg("%s --help: %s", names[p], out);
		if (p != O1MODEL && !strstr(out, "exit codes") &&
		    !strstr(out, "Exit codes"))
			fail_msg("%s --help names no exit codes: %s", names[p],
				 out);
	}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		assert_int_equal(
		    run(subs[i].prog, subs[i].args, false, out, sizeof(out)),
		    0);
		assert_non_null(strstr(out, "usage:"));
	}
}

static void test_version(void **state)
{
	char out[1024], first[1024] = "", *rest;

	(void)state;
	for (int p = 0; p < N_PROGS; p++) {
		assert_int_equal(run(p, "--version", false, out, sizeof(out)),
				 0);
		if (strncmp(out, names[p], strlen(names[p])) ||
		    out[strlen(names[p])] != ' ' || !strstr(out, "wire protocol") ||
		    !strstr(out, "libo1client.so.") ||
		    !strstr(out, "metrics layout"))
			fail_msg("%s --version: %s", names[p], out);
		rest = out + strlen(names[p]);
		if (!first[0])
			snprintf(first, sizeof(first), "%s", rest);
		assert_string_equal(rest, first);
	}
}

static void test_bad_argument(void **state)
{
	static const char *const bad[N_PROGS] = {
	    "--bogus", "bogus", "bogus", "bogus", "--bogus x", "--bogus"};
	char out[8192], want[64];

	(void)state;
	for (int p = 0; p < N_PROGS; p++) {
		assert_int_equal(run(p, bad[p], true, out, sizeof(out)), 2);
		snprintf(want, sizeof(want), "%s: ", names[p]);
		if (strncmp(out, want, strlen(want)) && !strstr(out, want))
			fail_msg("%s %s: no \"%s\": %s", names[p], bad[p], want,
				 out);
	}
}

static void test_sidecar_options(void **state)
{
	char out[8192], dir[128], args[2048];

	(void)state;
	assert_int_equal(run(SIDECAR, "--listen 127.0.0.1:80800", true, out,
			     sizeof(out)),
			 2);
	assert_non_null(strstr(out, "o1-sidecar: --listen 127.0.0.1:80800: "));
	assert_non_null(strstr(out, "port 0..65535"));
	assert_int_equal(
	    run(SIDECAR, "--daemon relative.sock", true, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "not an absolute path"));
	assert_int_equal(
	    run(SIDECAR, "--listen unix:relative", true, out, sizeof(out)), 2);
	/* the daemon socket from ipc.socket: printed on the ready line */
	o1_test_dir_make(dir, sizeof(dir), "programs");
	snprintf(args, sizeof(args),
		 "%s --listen 127.0.0.1:0 --access-log - --set "
		 "ipc.socket=%s/o1d.sock >%s/side.log 2>&1 & pid=$!; "
		 "for i in $(seq 600); do grep -q 'ready listen' %s/side.log "
		 "&& break; sleep 0.1; done; kill $pid; wait $pid; "
		 "cat %s/side.log",
		 bin[SIDECAR], dir, dir, dir, dir);
	assert_int_equal(o1_test_run(args, out, sizeof(out)), 0);
	snprintf(args, sizeof(args), "daemon=%s/o1d.sock", dir);
	if (!strstr(out, args))
		fail_msg("no \"%s\" on the ready line: %s", args, out);
	assert_int_equal(o1_test_dir_remove(dir), 0);
}

/* o1chat takes -c/--set and finds the socket in ipc.socket. */
static void test_config_socket(void **state)
{
	char out[8192], args[256];

	(void)state;
	snprintf(args, sizeof(args),
		 "--set ipc.socket=/nonexistent-o1/o1d.sock hello");
	assert_int_equal(run(O1CHAT, args, true, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "o1chat: connect /nonexistent-o1/o1d.sock"));
	assert_int_equal(run(O1CHAT, "--set ipc.socket=rel hello", true, out,
			     sizeof(out)),
			 2);
	assert_non_null(strstr(out, "not an absolute path"));
}

/* A bad number is exit 2 with the option, the value and the range; a good
 * one gets as far as the (absent) daemon: exit 3. */
static void test_smoke_options(void **state)
{
	static const char *const bad[] = {
	    "abc", "0",	 "-5",	"",	  "1e3",
	    "+7",  " 7", "7ms", "600001", "99999999999999999999"};
	static const char sock[] = "--socket /nonexistent-o1/o1d.sock";
	char out[8192], args[256], want[128];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(args, sizeof(args), "%s smoke --cancel-bound-ms '%s'",
			 sock, bad[i]);
		snprintf(want, sizeof(want),
			 "o1ctl smoke: --cancel-bound-ms '%s': want a whole "
			 "number 1..600000",
			 bad[i]);
		assert_int_equal(run(O1CTL, args, true, out, sizeof(out)), 2);
		if (!strstr(out, want))
			fail_msg("o1ctl %s: no \"%s\": %s", args, want, out);
	}
	snprintf(args, sizeof(args), "%s smoke --long-max -1", sock);
	assert_int_equal(run(O1CTL, args, true, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "o1ctl smoke: --long-max '-1': "));
	snprintf(args, sizeof(args), "%s smoke --cancel-bound-ms", sock);
	assert_int_equal(run(O1CTL, args, true, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "usage: o1ctl smoke"));
	snprintf(args, sizeof(args),
		 "%s smoke --cancel-bound-ms 600000 --long-max 64", sock);
	assert_int_equal(run(O1CTL, args, true, out, sizeof(out)), 3);
	assert_int_equal(run(O1CTL, "smoke --help", false, out, sizeof(out)),
			 0);
	assert_non_null(strstr(out, "--cancel-bound-ms MS"));
}

/* cancel's ids: whole numbers of 64 bits, else exit 2 with the id named
 * and the usage; good ones get as far as the (absent) daemon: exit 3. */
static void test_cancel_arguments(void **state)
{
	static const char sock[] = "--socket /nonexistent-o1/o1d.sock";
	static const struct {
		const char *args, *want;
	} bad[] = {
	    {"cancel 1 +5", "o1ctl cancel: REQ_ID '+5': want a whole number"},
	    {"cancel x 5", "o1ctl cancel: CLIENT 'x': want a whole number"},
	    {"cancel 1 18446744073709551616", "REQ_ID '18446744073709551616'"},
	    {"cancel 1", "usage: o1ctl cancel"},
	    {"cancel 1 2 3", "usage: o1ctl cancel"},
	};
	char out[8192], args[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(args, sizeof(args), "%s %s", sock, bad[i].args);
		assert_int_equal(run(O1CTL, args, true, out, sizeof(out)), 2);
		if (!strstr(out, bad[i].want))
			fail_msg("o1ctl %s: no \"%s\": %s", args, bad[i].want,
				 out);
	}
	snprintf(args, sizeof(args), "%s cancel 18446744073709551615 0", sock);
	assert_int_equal(run(O1CTL, args, true, out, sizeof(out)), 3);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_help),
	    cmocka_unit_test(test_version),
	    cmocka_unit_test(test_bad_argument),
	    cmocka_unit_test(test_sidecar_options),
	    cmocka_unit_test(test_config_socket),
	    cmocka_unit_test(test_smoke_options),
	    cmocka_unit_test(test_cancel_arguments),
	};

	if (argc < 1 + N_PROGS) {
		fprintf(stderr,
			"usage: %s O1D O1CTL O1MODEL O1BENCH O1CHAT "
			"O1_SIDECAR\n",
			argv[0]);
		return 2;
	}
	for (int p = 0; p < N_PROGS; p++)
		bin[p] = argv[1 + p];
	return cmocka_run_group_tests(tests, NULL, NULL);
}

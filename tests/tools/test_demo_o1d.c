/* The quickstart's path as a test (argv: o1d, o1model, o1chat, o1bench):
 * o1model makes the demo model of README.md and docs/, o1d serves it on
 * the CPU with a socket in a temporary folder, then
 * - o1chat --raw, greedy, prints exactly the text `o1model run` prints
 *   for the same prompt (same engine, same model, so any difference is a
 *   bug in the daemon's path or in o1chat's streaming);
 * - o1chat with the chat template and temperature 0.8 ends with EOS or
 *   the token limit, with tokens streamed and timings printed;
 * - o1bench run, 24 requests over 4 connections, completes every request
 *   with no error and at most max_tokens tokens each; with --long, two
 *   long prompts arrive while 4 streams decode: both complete, and the
 *   streams' token intervals are counted before and during their prefill;
 * - SIGTERM stops o1d with exit status 0. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/common/test_util.h"

static const char *o1d, *o1model, *o1chat, *o1bench;
static char dir[] = "/tmp/o1-test-demo-o1d-XXXXXX";
static char sock[128], logpath[128], model[128];
static pid_t pid;

static char *slurp(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return strcpy(buf, "");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static void start_o1d(void)
{
	char set_model[192], set_sock[192];
	struct timespec ts = {0, 50 * 1000 * 1000};

	snprintf(set_model, sizeof(set_model), "model.path=%s", model);
	snprintf(set_sock, sizeof(set_sock), "ipc.socket=%s", sock);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(o1d, o1d, "--set", set_model, "--set", set_sock, "--set",
		      "kv.pages=256", "--set", "metrics.enabled=false", "--set",
		      "backend.device=cpu", "--set", "backend.threads=2",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 600; i++) {
		if (strstr(slurp(logpath), "o1d: ready socket="))
			return;
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			pid = 0;
			fail_msg("o1d exited before ready:\n%s",
				 slurp(logpath));
		}
		nanosleep(&ts, NULL);
	}
	fail_msg("o1d not ready in 30 s:\n%s", slurp(logpath));
}

static void test_greedy_matches_o1model(void **state)
{
	char cmd[1024], want[4096], got[4096], *nl;

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "%s run %s --prompt 'The daemon' --max-tokens 24 2>/dev/null",
		 o1model, model);
	assert_int_equal(o1_test_run(cmd, want, sizeof(want)), 0);
	nl = strchr(want, '\n'); /* the ids line, then the text */
	assert_non_null(nl);
	memmove(want, nl + 1, strlen(nl + 1) + 1);
	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --raw --max-tokens 24 'The daemon' "
		 "2>/dev/null",
		 o1chat, sock);
	assert_int_equal(o1_test_run(cmd, got, sizeof(got)), 0);
	print_message("greedy: %s", got);
	assert_true(strlen(got) > 1);
	assert_string_equal(got, want);
}

static void test_chat_sampled(void **state)
{
	char cmd[1024], out[4096], err[256], *e;

	(void)state;
	snprintf(err, sizeof(err), "%s/chat.err", dir);
	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --max-tokens 60 --temperature 0.8 --seed 3 "
		 "'What does the daemon do?' 2>%s",
		 o1chat, sock, err);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	e = slurp(err);
	print_message("chat: %s%s", out, e);
	assert_true(strlen(out) > 1);
	assert_true(strstr(e, "finish=eos") || strstr(e, "finish=length"));
	assert_non_null(strstr(e, "ttft_ms="));
	assert_null(strstr(e, "tokens=0 "));
}

static long kv(const char *out, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "%s=", key);
	p = strstr(out, pat);
	if (!p)
		fail_msg("no %s in:\n%s", key, out);
	return strtol(p + strlen(pat), NULL, 10);
}

static void test_o1bench(void **state)
{
	char cmd[1024], out[4096];

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 24 --concurrency 4 "
		 "--max-tokens 32 --prompt-tokens 12 --temperature 0.8",
		 o1bench, sock);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	print_message("%s", out);
	assert_int_equal(kv(out, "\ncompleted"), 24);
	assert_int_equal(kv(out, "\nerrors"), 0);
	assert_true(kv(out, "\ntokens") > 0);
	assert_true(kv(out, "\ntokens") <= 24 * 32);
}

static void test_o1bench_long(void **state)
{
	char cmd[1024], out[4096];

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 4 --concurrency 4 "
		 "--max-tokens 200 --prompt-tokens 12 --cold --long 2 "
		 "--long-tokens 400 --long-after-ms 200",
		 o1bench, sock);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	print_message("%s", out);
	assert_int_equal(kv(out, "\ncompleted"), 4);
	assert_int_equal(kv(out, "\nerrors"), 0);
	assert_int_equal(kv(out, "\nlong_completed"), 2);
	assert_true(kv(out, "\nitl_before_n") > 0);
	assert_true(kv(out, "\nitl_during_n") > 0);
	snprintf(cmd, sizeof(cmd),
		 "%s run --socket %s --requests 4 --concurrency 4 "
		 "--max-tokens 3 --long-tokens 600 2>/dev/null",
		 o1bench, sock);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 2);
}

static int setup(void **state)
{
	char cmd[1024];

	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(sock, sizeof(sock), "%s/o1d.sock", dir);
	snprintf(logpath, sizeof(logpath), "%s/o1d.log", dir);
	snprintf(model, sizeof(model), "%s/demo.gguf", dir);
	snprintf(cmd, sizeof(cmd),
		 "%s make --preset demo --out %s >/dev/null 2>&1", o1model,
		 model);
	if (system(cmd) != 0)
		return -1;
	start_o1d();
	return 0;
}

static int teardown(void **state)
{
	int st = -1;

	(void)state;
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, &st, 0);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "o1d did not exit 0 on SIGTERM (%d):\n%s\n", st,
			slurp(logpath));
		return -1;
	}
	unlink(model);
	unlink(logpath);
	snprintf(logpath, sizeof(logpath), "%s/chat.err", dir);
	unlink(logpath);
	rmdir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_greedy_matches_o1model),
	    cmocka_unit_test(test_chat_sampled),
	    cmocka_unit_test(test_o1bench),
	    cmocka_unit_test(test_o1bench_long),
	};

	if (argc < 5) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1CHAT O1BENCH\n",
			argv[0]);
		return 2;
	}
	o1d = argv[1];
	o1model = argv[2];
	o1chat = argv[3];
	o1bench = argv[4];
	return cmocka_run_group_tests(tests, setup, teardown);
}

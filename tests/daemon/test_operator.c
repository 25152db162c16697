/* What an operator and a client see of o1d in the edge cases (real o1d
 * processes on the tiny model made by o1model, CPU backend):
 * - a model without a tokenizer (the tiny model converted to a Hugging
 *   Face folder without tokenizer files): a text prompt's FINAL says
 *   "model has no tokenizer: send token ids" (its own error code), o1d's
 *   log says the same, token-id prompts are served, and o1ctl smoke skips
 *   its text checks with that reason and passes the others;
 * - start-up: a socket directory that does not exist is named, with the
 *   hint, before the model is loaded (exit 1); backend.device auto
 *   without a GPU is one info line and no error line; a relative
 *   model.path is refused with its absolute form (exit 2);
 * - logs: one info line per finished request naming client, request,
 *   tokens, TTFT, duration and the finish reason by name (1 of N with
 *   log.requests = N, none with 0); admin connections only at debug;
 * - o1chat exits 1 when its request is cancelled (o1ctl cancel);
 * - a failed o1ctl reload relays the file:line message; o1ctl slo
 *   --baseline on a missing file says to --save one first.
 * argv: o1d o1model o1ctl o1chat */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "o1/client.h"
#include "tests/common/test_util.h"

static const char *o1d_bin, *o1ctl_bin, *o1chat_bin;

/* o1ctl ARGS with stdout and stderr into OUT; its exit code. */
static int o1ctl(const char *args, char *out, size_t cap)
{
	char cmd[8192];

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", o1ctl_bin, args);
	return o1_test_run(cmd, out, cap);
}

/* The tiny model as a Hugging Face folder without tokenizer files. */
static void model_without_tokenizer(struct daemon_proc *d)
{
	char cmd[1024], out[4096];

	snprintf(cmd, sizeof(cmd),
		 "%s convert %s %s/hf --format safetensors 2>&1 && rm -f "
		 "%s/hf/tokenizer.json %s/hf/tokenizer_config.json",
		 harness_o1model, d->model, d->dir, d->dir, d->dir);
	if (o1_test_run(cmd, out, sizeof(out)) != 0)
		fail_msg("%s: %s", cmd, out);
	snprintf(d->model, sizeof(d->model), "%s/hf", d->dir);
}

static void test_no_tokenizer(void **state)
{
	struct daemon_proc *d = *state;
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = d->socket, .name = "text"};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 1,
				    .text = "Once upon a time",
				    .text_len = 16,
				    .max_tokens = 4};
	static const char why[] = "model has no tokenizer: send token ids";
	char out[8192], args[256];
	struct o1_event fin;
	int rc;
	struct o1_client *c;
	struct result r;
	struct spec s;

	model_without_tokenizer(d);
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_generate(c, &so, NULL, NULL, &fin), 0);
	assert_int_equal(fin.finish, O1_FINISH_REASON_ERROR);
	assert_int_equal(fin.error, O1_CLIENT_E_NO_TOKENIZER);
	assert_string_equal(o1_client_strerror(fin.error), why);
	o1_client_close(c);
	assert_true(log_has(d->log, why));
	spec_make(&s, 2);
	assert_int_equal(spec_run(d->socket, &s, &r), 0);
	assert_int_equal(r.error, 0);
	assert_int_equal(r.finals, 1);
	snprintf(args, sizeof(args),
		 "--socket %s smoke --long-max 256 --cancel-bound-ms %d",
		 d->socket, SMOKE_CANCEL_BOUND_MS);
	rc = o1ctl(args, out, sizeof(out));
	if (rc || !strstr(out, "greedy   SKIP") || !strstr(out, why) ||
	    !strstr(out, "long     PASS") || !strstr(out, "cancel   PASS") ||
	    !strstr(out, "3 skipped"))
		fail_msg("o1ctl smoke: exit %d:\n%s", rc, out);
	assert_int_equal(daemon_stop(d), 0);
}

static void test_startup(void **state)
{
	struct daemon_proc *d = *state, e = *d;
	static const char *const bad_model[] = {"model.path=rel/tiny.gguf",
						NULL};
	static const char *const autodev[] = {"backend.device=auto", NULL};
	char want[512];

	snprintf(e.socket, sizeof(e.socket), "%s/missing/o1d.sock", d->dir);
	snprintf(e.log, sizeof(e.log), "%s/o1d-e.log", d->dir);
	assert_int_not_equal(daemon_start(&e, o1d_bin, NULL), 0);
	assert_int_equal(e.exit_status, 1);
	snprintf(want, sizeof(want),
		 "ipc.socket %s: directory %s/missing does not exist: "
		 "systemd's RuntimeDirectory makes it, or set ipc.socket",
		 e.socket, d->dir);
	assert_true(log_has(e.log, want));
	assert_false(log_has(e.log, "kv:")); /* no model loaded */
	assert_int_not_equal(daemon_start(&e, o1d_bin, bad_model), 0);
	assert_int_equal(e.exit_status, 2);
	assert_true(log_has(e.log, "not an absolute path (from this "
				   "directory: "));
	assert_int_equal(daemon_start(d, o1d_bin, autodev), 0);
	assert_true(log_has(d->log, "info  main.c"));
	assert_true(log_has(d->log, "backend.device auto: "));
	assert_false(log_has(d->log, " error "));
	assert_int_equal(daemon_stop(d), 0);
}

/* Lines of PATH holding WHAT. */
static int log_count(const char *path, const char *what)
{
	char cmd[512], out[64];

	snprintf(cmd, sizeof(cmd), "grep -c -- '%s' %s", what, path);
	o1_test_run(cmd, out, sizeof(out));
	return atoi(out);
}

static void run_one(const struct daemon_proc *d, unsigned i)
{
	struct result r;
	struct spec s;

	spec_make(&s, i);
	s.ignore_eos = true;
	s.temperature = 0;
	assert_int_equal(spec_run(d->socket, &s, &r), 0);
	assert_int_equal(r.finals, 1);
}

static void test_request_log(void **state)
{
	struct daemon_proc *d = *state;
	static const char *const every2[] = {"log.requests=2", NULL};
	static const char *const none[] = {"log.requests=0", NULL};
	struct kv_status st;
	struct spec s;
	char want[256];

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	run_one(d, 4);
	spec_make(&s, 4);
	assert_int_equal(admin_wait_idle(d->socket, 30000, &st), 0);
	snprintf(want, sizeof(want),
		 "req 7 finish=length prompt_tokens=%u output_tokens=%u "
		 "ttft_ms=",
		 s.n_ids, s.max_tokens);
	assert_true(log_has(d->log, "info  engine.c"));
	if (!log_has(d->log, want) || !log_has(d->log, "duration_ms="))
		fail_msg("%s lacks \"%s\"", d->log, want);
	assert_false(log_has(d->log, "admin connection"));
	assert_int_equal(daemon_stop(d), 0);
	assert_int_equal(daemon_start(d, o1d_bin, every2), 0);
	for (unsigned i = 0; i < 4; i++)
		run_one(d, i);
	assert_int_equal(admin_wait_idle(d->socket, 30000, &st), 0);
	assert_int_equal(log_count(d->log, "request done:"), 2);
	assert_int_equal(daemon_stop(d), 0);
	assert_int_equal(daemon_start(d, o1d_bin, none), 0);
	run_one(d, 1);
	assert_int_equal(admin_wait_idle(d->socket, 30000, &st), 0);
	assert_int_equal(log_count(d->log, "request done:"), 0);
	assert_int_equal(daemon_stop(d), 0);
}

/* o1chat's request cancelled by an admin: exit 1, saying so. */
static void test_o1chat_cancelled(void **state)
{
	struct daemon_proc *d = *state;
	char cmd[4096], out[4096];

	static const char *const faults[] = {"faults.enabled=true", NULL};

	/* stalled: nothing reaches o1chat, so the request is surely still
	 * running when cancelled; the FINAL comes once the stall is off */
	assert_int_equal(daemon_start(d, o1d_bin, faults), 0);
	snprintf(cmd, sizeof(cmd), "--socket %s inject stall on", d->socket);
	assert_int_equal(o1ctl(cmd, out, sizeof(out)), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --raw --max-tokens 1000 'Once' >/dev/null "
		 "2>%s/chat.err & p=$!; "
		 "for i in $(seq 3000); do %s --socket %s requests --json "
		 ">%s/req.json; grep -q req_id %s/req.json && break; "
		 "sleep 0.01; done; "
		 "c=$(sed -n 's/.*\"client\":\\([0-9]*\\).*/\\1/p' %s/req.json); "
		 "r=$(sed -n 's/.*\"req_id\":\\([0-9]*\\).*/\\1/p' %s/req.json); "
		 "%s --socket %s cancel $c $r >/dev/null; "
		 "%s --socket %s inject stall off >/dev/null; wait $p; "
		 "echo rc=$?; cat %s/chat.err",
		 o1chat_bin, d->socket, d->dir, o1ctl_bin, d->socket, d->dir,
		 d->dir, d->dir, d->dir, o1ctl_bin, d->socket, o1ctl_bin,
		 d->socket, d->dir);
	assert_int_equal(o1_test_run(cmd, out, sizeof(out)), 0);
	if (!strstr(out, "rc=1") ||
	    !strstr(out, "o1chat: the request was cancelled"))
		fail_msg("o1chat cancelled: %s", out);
	assert_int_equal(daemon_stop(d), 0);
}

static void test_reload_and_baseline(void **state)
{
	struct daemon_proc *d = *state;
	char out[4096], args[512];
	FILE *f;

	snprintf(d->config, sizeof(d->config), "%s/o1d.ini", d->dir);
	f = fopen(d->config, "w");
	assert_non_null(f);
	fputs("[log]\nlevel = info\n", f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	f = fopen(d->config, "w");
	assert_non_null(f);
	fputs("[log]\nlevel = info\n[kv]\npages = lots\n", f);
	assert_int_equal(fclose(f), 0);
	snprintf(args, sizeof(args), "--socket %s reload", d->socket);
	assert_int_equal(o1ctl(args, out, sizeof(out)), 1);
	snprintf(args, sizeof(args), "%s:4:", d->config);
	if (!strstr(out, args) || !strstr(out, "nothing reloaded"))
		fail_msg("o1ctl reload: %s", out);
	assert_int_equal(daemon_stop(d), 0);
	d->config[0] = 0;
	snprintf(args, sizeof(args),
		 "slo --window 0.1 --baseline %s/none.json", d->dir);
	assert_int_equal(o1ctl(args, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "does not exist: measure one first "
				    "with o1ctl slo --save"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_startup, harness_stop),
	    cmocka_unit_test_teardown(test_request_log, harness_stop),
	    cmocka_unit_test_teardown(test_o1chat_cancelled, harness_stop),
	    cmocka_unit_test_teardown(test_reload_and_baseline, harness_stop),
	    cmocka_unit_test_teardown(test_no_tokenizer, harness_stop),
	};

	if (argc < 5) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1CTL O1CHAT\n",
			argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	harness_o1model = argv[2];
	o1ctl_bin = argv[3];
	o1chat_bin = argv[4];
	return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}

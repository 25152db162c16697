/* The official openai npm client against o1-sidecar (argv: o1d, o1model,
 * o1-sidecar, the node folder of the sources): the pinned package is
 * installed with npm into the build tree (exit 77, skipped, when node or
 * npm is missing or the registry cannot be reached), then
 * node/openai_client.mjs runs chat and completions, streaming and not,
 * stop sequences, usage, models, errors and a refinement request
 * (refinement_trace, o1_round chunks) against a sidecar in front of o1d
 * serving the demo model, and compares the greedy answers (and each
 * refinement round's) with the ones libo1client gets directly for the
 * same requests; a 240 KB prompt with the client's default retries is one
 * 400 (context_length_exceeded on messages), sent once, and no violation
 * in o1d; response_format json_schema answers (strict, whole and
 * streamed) parse and fit their schema, and an unsupported keyword is a
 * 400 naming it; tool calls (o1d on a Hermes-style template): a forced
 * call fits its schema, whole and through the SDK's stream helper,
 * runTools runs a named function and sends the call and its result back,
 * and top_logprobs carry o1d's token text. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "sidecar_harness.h"
#include "tests/common/test_util.h"

static const char *node_src;
static char node_dir[512];
static struct proc side;

/* Installs the pinned openai package under node_dir; 0, or 77 to skip. */
static int npm_install(void)
{
	char cmd[2048], out[4096];

	if (system("command -v node >/dev/null && command -v npm >/dev/null")) {
		fprintf(stderr, "skipped: node or npm is not installed\n");
		return 77;
	}
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s && cp %s/package.json %s/package-lock.json "
		 "%s/openai_client.mjs %s/ "
		 "&& cd %s && (grep -q '\"version\": \"4.104.0\"' "
		 "node_modules/openai/package.json 2>/dev/null || timeout 180 "
		 "npm install --no-audit --no-fund --prefer-offline "
		 "--fetch-retries=1 --fetch-timeout=20000 "
		 "--loglevel=error 2>&1)",
		 node_dir, node_src, node_src, node_src, node_dir, node_dir);
	if (o1_test_run(cmd, out, sizeof(out)) != 0) {
		fprintf(stderr,
			"skipped: npm install failed (registry "
			"unreachable?):\n%s\n",
			out);
		return 77;
	}
	return 0;
}

static int on_event(void *arg, const struct o1_event *ev)
{
	assert_int_equal(o1_trace_add(arg, ev), 0);
	return 0;
}

/* The chat request with refine_steps 2 through libo1client: each round's
 * answer into WANT's "refine", the stop reason into "refine_stop". */
static void add_refine(cJSON *want, const char *packed, size_t len)
{
	static const char *const stops[] = {"none",   "steps", "confident",
					    "repeat", "limit", "cancelled",
					    "error"};
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = sock};
	struct o1_submit_opts o = {.sz = sizeof(o),
				   .req_id = 1,
				   .text = packed,
				   .text_len = len,
				   .max_tokens = 40,
				   .flags = O1_FLAG_CHAT,
				   .refine_steps = 2};
	cJSON *rounds = cJSON_AddArrayToObject(want, "refine");
	struct o1_event final;
	struct o1_client *c;
	struct o1_trace t;

	o1_trace_init(&t);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_generate(c, &o, on_event, &t, &final), 0);
	assert_int_equal(final.error, 0);
	assert_int_equal(o1_trace_add(&t, &final), 0);
	o1_client_close(c);
	assert_true(t.n_rounds >= 1 && t.stop <= O1_REFINE_STOP_ERROR);
	for (uint32_t i = 0; i < t.n_rounds; i++)
		cJSON_AddItemToArray(rounds,
				     cJSON_CreateString(t.rounds[i].text));
	cJSON_AddStringToObject(want, "refine_stop", stops[t.stop]);
	o1_trace_free(&t);
}

static void test_openai_client(void **state)
{
	static const char packed[] =
	    "system\0You answer.\0user\0What does the daemon do?";
	struct direct compl, chat;
	char cmd[1024], path[256], *text, out[16384];
	cJSON *want = cJSON_CreateObject();
	int ret;

	(void)state;
	direct("The daemon", 10, O1_FLAG_ADD_BOS, 24, NULL, &compl );
	direct(packed, sizeof(packed) - 1, O1_FLAG_CHAT, 40, NULL, &chat);
	cJSON_AddStringToObject(want, "model", "o1 demo bigram");
	cJSON_AddStringToObject(want, "completion", compl .text);
	cJSON_AddStringToObject(want, "chat", chat.text);
	add_refine(want, packed, sizeof(packed) - 1);
	text = cJSON_PrintUnformatted(want);
	o1_test_file_put(dir, "expected.json", text);
	free(text);
	cJSON_Delete(want);
	snprintf(path, sizeof(path), "%s/expected.json", dir);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && timeout 120 node openai_client.mjs "
		 "http://127.0.0.1:%d/v1 %s 2>&1",
		 node_dir, side.port, path);
	ret = o1_test_run(cmd, out, sizeof(out));
	print_message("%s", out);
	assert_int_equal(ret, 0);
	assert_non_null(strstr(out, "ok   chat: greedy equals libo1client"));
	assert_non_null(strstr(out, "ok   refine: refinement_trace equals"));
	assert_non_null(strstr(out, "ok   240 KB prompt: sent once"));
	assert_non_null(
	    strstr(out, "ok   json_schema stream: the deltas join to a "
			"fitting document"));
	assert_non_null(strstr(out, "ok   tools stream: the SDK assembles"));
	assert_non_null(strstr(out, "ok   runTools: the call and its result"));
	assert_non_null(strstr(out, "ok   top_logprobs: o1d names every"));
	assert_null(strstr(out, "FAIL"));
	/* the refused prompt was the client's mistake, not o1d's failure */
	assert_false(log_has(daemon_p.log, "violation"));
}

static int setup(void **state)
{
	(void)state;
	/* a template that knows tools (ChatML without them, as the demo's) */
	daemon_sets[0] = "model.chat_template=" O1_SOURCE_DIR
			 "/tests/tools/sidecar/data/hermes_tools.jinja";
	if (harness_setup(o1d_bin, o1model_bin, sidecar_bin))
		return -1;
	start_sidecar(&side, "node", NULL);
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
	    cmocka_unit_test(test_openai_client),
	};
	int ret;

	if (harness_args(argc, argv, 2, 2, "NODE_SRC NODE_DIR"))
		return 2;
	node_src = argv[4];
	snprintf(node_dir, sizeof(node_dir), "%s", argv[5]);
	ret = npm_install();
	if (ret)
		return ret;
	return cmocka_run_group_tests(tests, setup, teardown);
}

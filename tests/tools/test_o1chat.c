/* o1chat --tools (argv: o1d, o1model, o1chat): o1d serves the tiny model
 * on the CPU with a Hermes-style template (model.chat_template), then
 * - --tool-choice required: o1chat prints one "tool_call: NAME ARGS" line,
 *   NAME one of the file's tools and ARGS a JSON object fitting its
 *   schema (the grammar forces it; random weights never call on their
 *   own), and "tool_calls=1" in its timings line; a named tool gives that
 *   tool's call;
 * - auto: the tools reach the template (more prompt tokens than without
 *   them), the answer is printed and read back (tool_calls=N);
 * - bad uses exit 2 before any connection, naming the problem: a missing
 *   file, a file that is not a list of function tools, a --tool-choice
 *   naming no tool, --tool-choice without --tools, --tools with --raw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/daemon/daemon_harness.h"

#define TEMPLATE O1_SOURCE_DIR "/tests/tools/sidecar/data/hermes_tools.jinja"

static const char *o1d_bin, *o1chat_bin;

static const char tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"Current weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"enum\":[\"Paris\",\"Oslo\"]},"
    "\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":"
    "{\"enum\":[\"utc\",\"cet\"]}},\"required\":[\"zone\"],"
    "\"additionalProperties\":false}}}]";

/* Writes TEXT to DIR/NAME; the path into PATH. */
static void put(const struct daemon_proc *d, const char *name, const char *text,
		char *path, size_t cap)
{
	FILE *f;

	snprintf(path, cap, "%s/%s", d->dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* o1chat ARGS against D: stdout into OUT, stderr into ERR; exit code. */
static int o1chat(const struct daemon_proc *d, const char *args, char *out,
		  size_t cap, char *err, size_t err_cap)
{
	char cmd[2048], errpath[192];
	FILE *f;
	size_t n;
	int rc;

	snprintf(errpath, sizeof(errpath), "%s/o1chat.err", d->dir);
	snprintf(cmd, sizeof(cmd), "%s --socket %s %s 2>%s </dev/null",
		 o1chat_bin, d->socket, args, errpath);
	rc = harness_run(cmd, out, cap);
	f = fopen(errpath, "r");
	assert_non_null(f);
	n = fread(err, 1, err_cap - 1, f);
	err[n] = 0;
	fclose(f);
	return rc;
}

static int setup(void **state)
{
	static const char *const sets[] = {"model.chat_template=" TEMPLATE,
					   "kv.pages=256", NULL};
	struct daemon_proc *d;

	if (harness_setup(state))
		return -1;
	d = *state;
	return daemon_start(d, o1d_bin, sets);
}

static int teardown(void **state)
{
	struct daemon_proc *d = *state;
	int st = daemon_stop(d);

	return harness_teardown(state) || st ? -1 : 0;
}

/* The one "tool_call: NAME ARGS" line of OUT: NAME (or either tool when
 * NULL) with arguments that fit its schema. */
static void check_call_line(const char *out, const char *name)
{
	const char *line = strstr(out, "tool_call: "), *sp, *v;
	char fn[32];
	cJSON *args;

	if (!line)
		fail_msg("no call printed: %s", out);
	assert_null(strstr(line + 1, "tool_call: "));
	line += strlen("tool_call: ");
	sp = strchr(line, ' ');
	assert_non_null(sp);
	snprintf(fn, sizeof(fn), "%.*s", (int)(sp - line), line);
	if (name)
		assert_string_equal(fn, name);
	args = cJSON_Parse(sp + 1);
	if (!cJSON_IsObject(args))
		fail_msg("arguments not an object: %s", sp + 1);
	if (!strcmp(fn, "get_time")) {
		v = cJSON_GetStringValue(cJSON_GetObjectItem(args, "zone"));
		assert_true(v && (!strcmp(v, "utc") || !strcmp(v, "cet")));
		assert_int_equal(cJSON_GetArraySize(args), 1);
	} else {
		assert_string_equal(fn, "get_weather");
		v = cJSON_GetStringValue(cJSON_GetObjectItem(args, "city"));
		assert_true(v && (!strcmp(v, "Paris") || !strcmp(v, "Oslo")));
		v = cJSON_GetStringValue(cJSON_GetObjectItem(args, "unit"));
		assert_true(v && (!strcmp(v, "c") || !strcmp(v, "f")));
		assert_int_equal(cJSON_GetArraySize(args), 2);
	}
	cJSON_Delete(args);
}

static void forced(struct daemon_proc *d, const char *choice, const char *name)
{
	char path[192], args[512], out[8192], err[2048];

	put(d, "tools.json", tools, path, sizeof(path));
	snprintf(args, sizeof(args),
		 "--tools %s --tool-choice %s --max-tokens 200 "
		 "'Weather in Paris?'",
		 path, choice);
	if (o1chat(d, args, out, sizeof(out), err, sizeof(err)))
		fail_msg("o1chat failed: %s%s", out, err);
	print_message("%s: %s", choice, out);
	check_call_line(out, name);
	if (!strstr(err, "tool_calls=1"))
		fail_msg("timings: %s", err);
}

static void test_required(void **state)
{
	forced(*state, "required", NULL);
}

static void test_named(void **state)
{
	forced(*state, "get_time", "get_time");
}

static unsigned prompt_tokens(const char *err)
{
	const char *p = strstr(err, "prompt_tokens=");

	if (!p)
		fail_msg("no prompt_tokens: %s", err);
	return (unsigned)atoi(p + strlen("prompt_tokens="));
}

/* auto: the tools reach the template; the answer is printed, read back. */
static void test_auto(void **state)
{
	struct daemon_proc *d = *state;
	char path[192], args[512], out[8192], err[2048];
	unsigned plain, with;

	put(d, "tools.json", tools, path, sizeof(path));
	assert_int_equal(o1chat(d, "--max-tokens 8 'Weather in Paris?'", out,
				sizeof(out), err, sizeof(err)),
			 0);
	plain = prompt_tokens(err);
	snprintf(args, sizeof(args),
		 "--tools %s --max-tokens 8 "
		 "'Weather in Paris?'",
		 path);
	if (o1chat(d, args, out, sizeof(out), err, sizeof(err)))
		fail_msg("o1chat failed: %s%s", out, err);
	with = prompt_tokens(err);
	print_message("prompt tokens %u, with tools %u\n", plain, with);
	assert_true(with > plain + 50);
	assert_non_null(strstr(err, "tool_calls="));
	/* none: tools left out of the prompt, nothing read back */
	snprintf(args, sizeof(args),
		 "--tools %s --tool-choice none "
		 "--max-tokens 8 'Weather in Paris?'",
		 path);
	assert_int_equal(o1chat(d, args, out, sizeof(out), err, sizeof(err)),
			 0);
	assert_null(strstr(err, "tool_calls="));
}

static void test_bad_uses(void **state)
{
	static const struct {
		const char *file, *args, *says;
	} bad[] = {
	    {NULL, "--tools /nonexistent-o1/t.json x", "no such file"},
	    {"{\"type\": \"function\"}", "x", "not a JSON list"},
	    {"[]", "x", "0 tools"},
	    {"[{\"type\": \"function\", \"function\": {}}]", "x",
	     "tool 0 is not"},
	    {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", "
	     "\"parameters\": 5}}]",
	     "x", "tool 0 is not"},
	    {tools, "--tool-choice get_date x", "--tool-choice get_date"},
	    {NULL, "--tool-choice auto x", "needs --tools"},
	    {tools, "--raw x", "not --raw"},
	    /* ranges printed as numbers, not %g's 1.04858e+06 */
	    {NULL, "--max-tokens 0 x", "[1, 1048576]"},
	};
	struct daemon_proc *d = *state;
	char path[192], args[512], out[1024], err[2048];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (bad[i].file) {
			put(d, "bad.json", bad[i].file, path, sizeof(path));
			snprintf(args, sizeof(args), "--tools %s %s", path,
				 bad[i].args);
		} else {
			snprintf(args, sizeof(args), "%s", bad[i].args);
		}
		assert_int_equal(
		    o1chat(d, args, out, sizeof(out), err, sizeof(err)), 2);
		if (!strstr(err, bad[i].says) || strncmp(err, "o1chat: ", 8))
			fail_msg("%s: %s", args, err);
	}
}

/* Parameters o1d's schema compiler refuses: exit 1 and the daemon's
 * reason on stderr, not only the error code's text. */
static void test_refused_parameters(void **state)
{
	struct daemon_proc *d = *state;
	char path[192], args[512], out[1024], err[2048];

	put(d, "bogus.json",
	    "[{\"type\":\"function\",\"function\":{\"name\":\"f\","
	    "\"parameters\":{\"type\":\"bogus\"}}}]",
	    path, sizeof(path));
	snprintf(args, sizeof(args), "--tools %s --tool-choice required x",
		 path);
	assert_int_equal(o1chat(d, args, out, sizeof(out), err, sizeof(err)),
			 1);
	if (!strstr(err, "'type' must name JSON types"))
		fail_msg("no reason: %s", err);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_required),
	    cmocka_unit_test(test_named),
	    cmocka_unit_test(test_auto),
	    cmocka_unit_test(test_bad_uses),
	    cmocka_unit_test(test_refused_parameters),
	};

	if (argc < 4) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1CHAT\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	harness_o1model = argv[2];
	o1chat_bin = argv[3];
	return cmocka_run_group_tests(tests, setup, teardown);
}

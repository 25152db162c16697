/* o1model schema-check (tools/o1model/cmd_schema_check.c) end to end:
 * exit 0 for an instance the schema's grammar accepts (members in any
 * order: they are written in the grammar's order first), 1 for one it
 * refuses or a schema that matches nothing, 3 for an unsupported keyword
 * (named on stderr), 2 for usage errors and text that is not JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static const char *bin;
static char dir[] = "/tmp/o1-schema-check-XXXXXX";

static void put(const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Exit code of o1model schema-check on files S and I of the folder;
 * stderr kept in ERR. */
static int run(const char *s, const char *i, char *err, size_t cap)
{
	char cmd[512], path[128];
	FILE *f;
	int st;
	size_t n;

	snprintf(path, sizeof(path), "%s/stderr", dir);
	snprintf(cmd, sizeof(cmd), "'%s' schema-check %s/%s %s/%s 2>%s", bin,
		 dir, s, dir, i, path);
	st = system(cmd);
	f = fopen(path, "r");
	n = f ? fread(err, 1, cap - 1, f) : 0;
	err[n] = 0;
	if (f)
		fclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_exit_codes(void **state)
{
	char err[1024];

	(void)state;
	assert_non_null(mkdtemp(dir));
	put("s.json", "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"
		      "\"integer\",\"minimum\":1},\"tags\":{\"type\":\"array\","
		      "\"items\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"}}},"
		      "\"required\":[\"id\"],\"additionalProperties\":false}");
	put("ok.json", "{ \"tags\": [\"a\", \"bc\"],\n  \"id\": 7 }\n");
	put("bad.json", "{\"id\":0}");
	put("extra.json", "{\"id\":1,\"x\":2}");
	put("nothing.json", "false");
	put("unsup.json", "{\"type\":\"object\",\"patternProperties\":{}}");
	put("notjson.json", "{\"id\":");
	assert_int_equal(run("s.json", "ok.json", err, sizeof(err)), 0);
	assert_int_equal(run("s.json", "bad.json", err, sizeof(err)), 1);
	assert_non_null(strstr(err, "rejected"));
	assert_int_equal(run("s.json", "extra.json", err, sizeof(err)), 1);
	assert_int_equal(run("nothing.json", "ok.json", err, sizeof(err)), 1);
	assert_int_equal(run("unsup.json", "ok.json", err, sizeof(err)), 3);
	assert_non_null(strstr(err, "'patternProperties'"));
	assert_int_equal(run("s.json", "notjson.json", err, sizeof(err)), 2);
	assert_int_equal(run("s.json", "missing.json", err, sizeof(err)), 2);
	assert_int_equal(run("s.json", "", err, sizeof(err)), 2);
}

static int cleanup(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_exit_codes, cleanup),
	};

	if (argc < 2)
		return 77;
	bin = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}

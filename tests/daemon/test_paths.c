/* o1_paths_check (daemon/o1d/paths.c): a model.path that the layout does
 * not have (missing, empty, unreadable) fails with -errno and a message
 * naming the setting and the path; a file or a folder passes. Real files
 * in a fresh folder. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "config/config.h"
#include "o1d/paths.h"

static char dir[64];

static void set(struct o1_config *c, const char *key, const char *fmt,
		const char *arg)
{
	char a[O1_CONFIG_PATH_MAX + 64], v[O1_CONFIG_PATH_MAX], err[256];

	snprintf(v, sizeof(v), fmt, arg);
	snprintf(a, sizeof(a), "%s=%s", key, v);
	assert_int_equal(o1_config_set(c, a, err, sizeof(err)), 0);
}

/* A configuration whose model file exists. */
static void good(struct o1_config *c)
{
	assert_int_equal(o1_config_init_defaults(c), 0);
	set(c, "model.path", "%s/m.gguf", dir);
}

/* *MSG holds every one of the NULL-terminated needles. */
static void has(const char *msg, ...)
{
	va_list ap;
	const char *n;

	va_start(ap, msg);
	while ((n = va_arg(ap, const char *)))
		if (!strstr(msg, n))
			fail_msg("'%s' lacks '%s'", msg, n);
	va_end(ap);
}

static void test_good(void **state)
{
	struct o1_config c;
	char msg[512] = "";

	(void)state;
	good(&c);
	assert_int_equal(o1_paths_check(&c, msg, sizeof(msg)), 0);
	assert_string_equal(msg, "");
	assert_int_equal(o1_paths_check(&c, NULL, 0), 0);
}

static void test_model(void **state)
{
	struct o1_config c;
	char msg[512], p[128];

	(void)state;
	good(&c);
	set(&c, "model.path", "%s/missing.gguf", dir);
	snprintf(p, sizeof(p), "%s/missing.gguf", dir);
	assert_int_equal(o1_paths_check(&c, msg, sizeof(msg)), -ENOENT);
	has(msg, "model.path ", p, "No such file", NULL);
	good(&c);
	set(&c, "model.path", "%s", "");
	assert_int_equal(o1_paths_check(&c, msg, sizeof(msg)), -O1_E_CONFIG);
	has(msg, "model.path is empty", "--set model.path=", NULL);
	/* a Hugging Face folder is a path too */
	good(&c);
	set(&c, "model.path", "%s/hf", dir);
	assert_int_equal(o1_paths_check(&c, NULL, 0), 0);
}

/* Read permission is checked as o1d's uid (root reads every mode). */
static void test_unreadable(void **state)
{
	struct o1_config c;
	char msg[512], p[128];

	(void)state;
	if (geteuid() == 0)
		skip();
	good(&c);
	set(&c, "model.path", "%s/secret.gguf", dir);
	snprintf(p, sizeof(p), "model.path %s/secret.gguf: Permission denied",
		 dir);
	assert_int_equal(o1_paths_check(&c, msg, sizeof(msg)), -EACCES);
	has(msg, p, NULL);
}

static void touch(const char *name)
{
	char p[128];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
}

static int setup(void **state)
{
	char p[128];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/o1-paths-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	touch("m.gguf");
	touch("secret.gguf");
	snprintf(p, sizeof(p), "%s/secret.gguf", dir);
	if (chmod(p, 0))
		return -1;
	snprintf(p, sizeof(p), "%s/hf", dir);
	return mkdir(p, 0755);
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),
	    cmocka_unit_test(test_model),
	    cmocka_unit_test(test_unreadable),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

/* o1_paths_check: model.path is checked for what o1d will do with it
 * (read the file or folder), as the uid o1d runs as (access(2) with the
 * real ids, which o1d never changes). The check only reports: the later
 * open still decides, so a path that changes in between fails there, as
 * before. */
#include "paths.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"

static int fail(char *msg, size_t msg_len, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Logs the message and keeps it in MSG; returns ERR. */
static int fail(char *msg, size_t msg_len, int err, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	o1_err("%s", buf);
	if (msg_len)
		snprintf(msg, msg_len, "%s", buf);
	return err;
}

/* SETTING names an existing file or folder that o1d can read. */
static int check_readable(const char *setting, const char *path, char *msg,
			  size_t msg_len)
{
	struct stat st;
	int e;

	if (stat(path, &st) == 0 && access(path, R_OK) == 0)
		return 0;
	e = errno;
	return fail(msg, msg_len, -e, "%s %s: %s", setting, path, strerror(e));
}

int o1_paths_check(const struct o1_config *c, char *msg, size_t msg_len)
{
	if (!c->model.path[0])
		return fail(msg, msg_len, -O1_E_CONFIG,
			    "model.path is empty: set it to a .gguf file or a "
			    "Hugging Face folder (in the file given to -c, or "
			    "--set model.path=PATH)");
	return check_readable("model.path", c->model.path, msg, msg_len);
}

/* One line per event: "2026-11-29T17:00:00.123456Z INFO file.c:42 message". */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int o1_log_level = O1_LOG_INFO;

static const char *const o1_log_names[] = {
	[O1_LOG_ERROR] = "error", [O1_LOG_WARN] = "warn",
	[O1_LOG_INFO] = "info",	  [O1_LOG_DEBUG] = "debug",
	[O1_LOG_TRACE] = "trace",
};

void o1_log_set_level(enum o1_log_level level)
{
	atomic_store(&o1_log_level, (int)level);
}

enum o1_log_level o1_log_get_level(void)
{
	return (enum o1_log_level)atomic_load(&o1_log_level);
}

int o1_log_parse_level(const char *name, enum o1_log_level *out)
{
	for (size_t i = 0; i < sizeof(o1_log_names) / sizeof(o1_log_names[0]);
	     i++) {
		if (strcmp(name, o1_log_names[i]) == 0) {
			*out = (enum o1_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

void o1_log_write(enum o1_log_level level, const char *file, int line,
		  const char *fmt, ...)
{
	char msg[1024], stamp[32];
	struct timespec ts;
	struct tm tm;
	const char *base = strrchr(file, '/');
	va_list ap;

	if ((int)level > atomic_load(&o1_log_level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s.%06ldZ %-5s %s:%d %s\n", stamp, ts.tv_nsec / 1000,
		o1_log_names[level], base ? base + 1 : file, line, msg);
}

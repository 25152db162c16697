/* Logging: one line per event on stderr, with a UTC timestamp, the level and
 * the source location. Thread-safe (one fprintf per line).
 *
 * Lines a peer can trigger at will (refusals, hang-ups, violations) go
 * through o1_log_limited, keyed by their source (a uid, a client id), so
 * that no peer can flood the log: see log_limit.c. */
#ifndef O1_LOG_H
#define O1_LOG_H

#include <stdint.h>

enum o1_log_level {
	O1_LOG_OFF = -1, /* nothing at all (fuzz harnesses) */
	O1_LOG_ERROR,
	O1_LOG_WARN,
	O1_LOG_INFO,
	O1_LOG_DEBUG,
	O1_LOG_TRACE,
};

/* Sets the most verbose level printed (default O1_LOG_INFO). */
void o1_log_set_level(enum o1_log_level level);
enum o1_log_level o1_log_get_level(void);
/* Parses "error|warn|info|debug|trace"; returns 0 or -EINVAL. */
int o1_log_parse_level(const char *name, enum o1_log_level *out);

void o1_log_write(enum o1_log_level level, const char *file, int line,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Per (call site, key): at most O1_LOG_BURST lines every O1_LOG_WINDOW_NS;
 * the rest are counted, and once the window is over one line says how
 * many were suppressed and repeats the last of them. */
#define O1_LOG_BURST	 10
#define O1_LOG_WINDOW_NS 1000000000ull
void o1_log_limited_write(enum o1_log_level level, const char *file, int line,
			  uint64_t key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Writes the "N more suppressed" line of every source whose window is
 * over (all: of every source); call it now and then (the front loop
 * does, on its tick, and with all at its end), or a flood that stops is
 * never summed up. */
void o1_log_flush_suppressed(int all);

#define o1_log_limited(level, key, ...) \
	o1_log_limited_write((level), __FILE__, __LINE__, (key), __VA_ARGS__)
#define o1_log(level, ...) \
	o1_log_write((level), __FILE__, __LINE__, __VA_ARGS__)
#define o1_err(...) o1_log(O1_LOG_ERROR, __VA_ARGS__)
#define o1_warn(...) o1_log(O1_LOG_WARN, __VA_ARGS__)
#define o1_info(...) o1_log(O1_LOG_INFO, __VA_ARGS__)
#define o1_debug(...) o1_log(O1_LOG_DEBUG, __VA_ARGS__)

#endif

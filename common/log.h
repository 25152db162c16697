/* Logging: one line per event on stderr, with a UTC timestamp, the level and
 * the source location. Thread-safe (one fprintf per line). */
#ifndef O1_LOG_H
#define O1_LOG_H

enum o1_log_level {
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

#define o1_log(level, ...) \
	o1_log_write((level), __FILE__, __LINE__, __VA_ARGS__)
#define o1_err(...) o1_log(O1_LOG_ERROR, __VA_ARGS__)
#define o1_warn(...) o1_log(O1_LOG_WARN, __VA_ARGS__)
#define o1_info(...) o1_log(O1_LOG_INFO, __VA_ARGS__)
#define o1_debug(...) o1_log(O1_LOG_DEBUG, __VA_ARGS__)

#endif

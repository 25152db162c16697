/* Rate-limited log lines, per source.
 *
 * A source is a (call site, key) pair: the key names who caused the line
 * (a peer's uid, a client id), so one peer's flood is cut down without
 * hiding anyone else's lines. Each source may print O1_LOG_BURST lines per
 * window of O1_LOG_WINDOW_NS; further lines are counted, and the first
 * line of the next window, or o1_log_flush_suppressed once the window is
 * over, writes "N more like this suppressed" with the last of them.
 *
 * Invariants: a fixed table (no allocation); a source that does not fit
 * evicts the oldest one, whose count is written first, so every line is
 * either printed or counted in a summary. One mutex guards the table;
 * lines are written under it (stdio takes its own lock, nothing else). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define SOURCES_MAX 64

struct source {
	const char *file; /* static: __FILE__ */
	int line;
	int used;
	uint64_t key;
	uint64_t start_ns; /* the current window began */
	uint32_t printed;  /* lines printed in this window */
	uint32_t suppressed;
	enum o1_log_level level;
	char last[200]; /* the last suppressed line */
};

static struct source sources[SOURCES_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Writes the summary of s's suppressed lines, if any, and clears it. */
static void summarize(struct source *s, uint64_t now)
{
	if (!s->suppressed)
		return;
	o1_log_write(s->level, s->file, s->line,
		     "%u more like this suppressed in %.1f s, the last: %s",
		     s->suppressed, (double)(now - s->start_ns) / 1e9, s->last);
	s->suppressed = 0;
}

/* The entry of (file, line, key): found, or a free one, or the oldest
 * (summed up first). */
static struct source *find(const char *file, int line, uint64_t key,
			   uint64_t now)
{
	struct source *s, *spare = NULL;

	for (int i = 0; i < SOURCES_MAX; i++) {
		s = &sources[i];
		if (s->used && s->file == file && s->line == line &&
		    s->key == key)
			return s;
		if (!spare || !s->used ||
		    (spare->used && s->start_ns < spare->start_ns))
			spare = s;
	}
	if (spare->used)
		summarize(spare, now);
	memset(spare, 0, sizeof(*spare));
	spare->used = 1;
	spare->file = file;
	spare->line = line;
	spare->key = key;
	spare->start_ns = now;
	return spare;
}

void o1_log_limited_write(enum o1_log_level level, const char *file, int line,
			  uint64_t key, const char *fmt, ...)
{
	uint64_t now = now_ns();
	struct source *s;
	char msg[1024];
	va_list ap;

	if (level > o1_log_get_level())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&lock);
	s = find(file, line, key, now);
	if (now - s->start_ns >= O1_LOG_WINDOW_NS) {
		summarize(s, now);
		s->start_ns = now;
		s->printed = 0;
	}
	s->level = level;
	if (s->printed < O1_LOG_BURST) {
		s->printed++;
		o1_log_write(level, file, line, "%s", msg);
	} else {
		size_t n = strnlen(msg, sizeof(s->last) - 1);

		s->suppressed++;
		memcpy(s->last, msg, n); /* truncated: the gist is enough */
		s->last[n] = 0;
	}
	pthread_mutex_unlock(&lock);
}

void o1_log_flush_suppressed(int all)
{
	uint64_t now = now_ns();

	pthread_mutex_lock(&lock);
	for (int i = 0; i < SOURCES_MAX; i++) {
		struct source *s = &sources[i];

		if (s->used && s->suppressed &&
		    (all || now - s->start_ns >= O1_LOG_WINDOW_NS))
			summarize(s, now);
	}
	pthread_mutex_unlock(&lock);
}

/* Helpers of the o1bench commands that drive a whole daemon (soak,
 * hostile): option parsing, the clock, o1d's admin status and a process's
 * memory and descriptors from /proc. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "o1bench.h"
#include "o1d/admin.h"

uint64_t o1bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void o1bench_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int o1bench_parse_long(const char *cmd, const char *opt, const char *s,
		       long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	if (errno || end == s || *end || *out < lo || *out > hi) {
		fprintf(stderr, "o1bench %s: %s '%s': expected %ld..%ld\n", cmd,
			opt, s, lo, hi);
		return -EINVAL;
	}
	return 0;
}

int o1bench_parse_double(const char *cmd, const char *opt, const char *s,
			 double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !(*out >= lo && *out <= hi)) {
		fprintf(stderr, "o1bench %s: %s '%s': expected %g..%g\n", cmd,
			opt, s, lo, hi);
		return -EINVAL;
	}
	return 0;
}

static long long num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

int o1bench_status(const char *socket, struct o1bench_status *st)
{
	char buf[16384];
	struct ucred cr = {0};
	socklen_t len = sizeof(cr);
	cJSON *o, *kv;
	int fd, n;

	if (o1_admin_connect(socket, &fd))
		return -ECONNREFUSED;
	/* o1d's pid: its status says it only with metrics on */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		cr.pid = -1;
	n = o1_admin_call(fd, "{\"op\":\"status\"}", buf, sizeof(buf));
	close(fd);
	o = n > 0 ? cJSON_Parse(buf) : NULL;
	kv = cJSON_GetObjectItemCaseSensitive(o, "kv");
	if (!cJSON_IsObject(kv)) {
		cJSON_Delete(o);
		return -EPROTO;
	}
	*st = (struct o1bench_status){
	    .pid = cr.pid,
	    .active = num(o, "active"),
	    .running = num(o, "running"),
	    .waiting = num(o, "waiting"),
	    .parked = num(o, "parked"),
	    .stalled = num(o, "stalled"),
	    .clients = num(o, "clients"),
	    .pages_used = num(kv, "pages_used"),
	    .pages_total = num(kv, "pages_total"),
	    .prefix_hits = num(o, "prefix_hits"),
	    .steps = num(o, "steps"),
	};
	cJSON_Delete(o);
	return 0;
}

int o1bench_wait_idle(const char *socket, long ms, struct o1bench_status *st)
{
	uint64_t end = o1bench_now_ns() + (uint64_t)ms * 1000000ull;
	int err;

	do {
		err = o1bench_status(socket, st);
		if (!err && !st->active && !st->running && !st->waiting &&
		    st->parked <= 0 && !st->pages_used)
			return 0;
		o1bench_sleep_ms(20);
	} while (o1bench_now_ns() < end);
	return err ? err : -ETIMEDOUT;
}

int o1bench_proc_usage(pid_t pid, uint64_t *rss_kb, uint32_t *fds)
{
	char path[64], line[256];
	struct dirent *d;
	FILE *f;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	*rss_kb = 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			*rss_kb = strtoull(line + 6, NULL, 10);
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	*fds = 0;
	while ((d = readdir(dir)))
		*fds += d->d_name[0] != '.';
	closedir(dir);
	return 0;
}

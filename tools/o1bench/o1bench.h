/* Subcommands of o1bench. Each takes argv starting at its own name and
 * returns the process exit code (0 ok, 1 failure, 2 usage). */
#ifndef O1BENCH_H
#define O1BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct o1bench_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

#define O1BENCH_CMD(name, fn, help) int fn(int argc, char **argv);
#include "commands.def"
#undef O1BENCH_CMD

/* o1d's socket when a subcommand is given no --socket: $O1D_SOCKET, else
 * ipc.socket of the configuration (-c FILE, --set, read by main), as
 * every o1d program finds it. */
extern const char *o1bench_socket;

/* Sorts samples (ns) and prints "LABEL p50_us=.. p99_us=.. p999_us=..
 * max_us=.. n=..". */
void o1bench_print_latency(const char *label, uint64_t *ns, size_t n);

/* bench_util.c: for the commands that drive a whole daemon. */
uint64_t o1bench_now_ns(void);
void o1bench_sleep_ms(long ms);
/* S as a number in LO..HI for option OPT of command CMD; -EINVAL (said
 * on stderr). */
int o1bench_parse_long(const char *cmd, const char *opt, const char *s,
		       long lo, long hi, long *out);
int o1bench_parse_double(const char *cmd, const char *opt, const char *s,
			 double lo, double hi, double *out);

/* What o1d's admin status says (-1: a field it did not give). */
struct o1bench_status {
	pid_t pid;
	long long active, running, waiting, parked, stalled, clients;
	long long pages_used, pages_total, prefix_hits, steps;
};

/* 0, -ECONNREFUSED (no admin answer: not o1d's uid?) or -EPROTO. */
int o1bench_status(const char *socket, struct o1bench_status *st);
/* Waits up to MS until o1d holds no request and no KV page. */
int o1bench_wait_idle(const char *socket, long ms, struct o1bench_status *st);
/* PID's resident memory and open descriptors (/proc); -errno. */
int o1bench_proc_usage(pid_t pid, uint64_t *rss_kb, uint32_t *fds);

#endif

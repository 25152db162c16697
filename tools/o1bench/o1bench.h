/* Subcommands of o1bench. Each takes argv starting at its own name and
 * returns the process exit code (0 ok, 1 failure, 2 usage). */
#ifndef O1BENCH_H
#define O1BENCH_H

#include <stddef.h>
#include <stdint.h>

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

#endif

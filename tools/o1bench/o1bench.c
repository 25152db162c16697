/* o1bench: benchmarks against a running o1d (or an in-process front loop).
 * One subcommand per file (cmd_*.c); this file dispatches and holds the
 * shared percentile printer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/version.h"
#include "config/config.h"
#include "o1bench.h"

const char *o1bench_socket;

static int cmd_help(int argc, char **argv);

static const struct o1bench_cmd o1bench_cmds[] = {
#define O1BENCH_CMD(name, fn, help) {name, fn, help},
#include "commands.def"
#undef O1BENCH_CMD
    {"help", cmd_help, "show this list"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: o1bench [-c FILE] [--set section.key=value ...] "
		   "COMMAND [ARGS]\n"
		   "       o1bench --help | --version   (o1bench COMMAND "
		   "--help)\n\n"
		   "The socket is --socket, else $O1D_SOCKET, else ipc.socket "
		   "of the\nconfiguration. Exit codes: 0 done, 1 failed, 2 bad "
		   "arguments.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(o1bench_cmds) / sizeof(o1bench_cmds[0]);
	     i++)
		fprintf(f, "  %-8s %s\n", o1bench_cmds[i].name,
			o1bench_cmds[i].help);
}

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	usage(stdout);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void o1bench_print_latency(const char *label, uint64_t *ns, size_t n)
{
	if (!n) {
		printf("%s n=0\n", label);
		return;
	}
	qsort(ns, n, sizeof(*ns), cmp_u64);
	printf("%s p50_us=%.2f p99_us=%.2f p999_us=%.2f max_us=%.2f n=%zu\n",
	       label, ns[n / 2] / 1e3, ns[n * 99 / 100] / 1e3,
	       ns[n * 999 / 1000] / 1e3, ns[n - 1] / 1e3, n);
}

/* -c FILE and --set anywhere (removed from argv), then the socket. */
static int read_config(int *argc, char **argv)
{
	static struct o1_config cfg;
	const char *env = getenv("O1D_SOCKET");
	char err[512];

	if (o1_config_init_defaults(&cfg) ||
	    o1_config_parse_args(&cfg, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "o1bench: %s\n", err);
		return 2;
	}
	o1bench_socket = env && *env ? env : cfg.ipc.socket;
	return 0;
}

int main(int argc, char **argv)
{
	if (read_config(&argc, argv))
		return 2;
	if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		o1_version_print(stdout, "o1bench");
		return 0;
	}
	for (size_t i = 0; i < sizeof(o1bench_cmds) / sizeof(o1bench_cmds[0]);
	     i++)
		if (strcmp(argv[1], o1bench_cmds[i].name) == 0)
			return o1bench_cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "o1bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

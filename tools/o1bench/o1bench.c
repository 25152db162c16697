/* o1bench: benchmarks against a running o1d (or an in-process front loop).
 * One subcommand per file (cmd_*.c); this file dispatches and holds the
 * shared percentile printer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "o1bench.h"

static int cmd_help(int argc, char **argv);

static const struct o1bench_cmd o1bench_cmds[] = {
#define O1BENCH_CMD(name, fn, help) {name, fn, help},
#include "commands.def"
#undef O1BENCH_CMD
    {"help", cmd_help, "show this list"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: o1bench COMMAND [ARGS]\n\ncommands:\n");
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

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(o1bench_cmds) / sizeof(o1bench_cmds[0]);
	     i++)
		if (strcmp(argv[1], o1bench_cmds[i].name) == 0)
			return o1bench_cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "o1bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

/* o1model: model-file tool. One subcommand per file (cmd_*.c); this file
 * only dispatches through the table below. */
#include <stdio.h>
#include <string.h>

#include "common/version.h"
#include "o1model.h"

static int cmd_help(int argc, char **argv);

static const struct o1model_cmd o1model_cmds[] = {
#define O1MODEL_CMD(name, fn, help) {name, fn, help},
#include "commands.def"
#undef O1MODEL_CMD
	{"help", cmd_help, "show this list"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: o1model COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(o1model_cmds) / sizeof(o1model_cmds[0]);
	     i++)
		fprintf(f, "  %-12s %s\n", o1model_cmds[i].name,
			o1model_cmds[i].help);
}

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	usage(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		o1_version_print(stdout, "o1model");
		return 0;
	}
	for (size_t i = 0; i < sizeof(o1model_cmds) / sizeof(o1model_cmds[0]);
	     i++)
		if (strcmp(argv[1], o1model_cmds[i].name) == 0)
			return o1model_cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "o1model: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

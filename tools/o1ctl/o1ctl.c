/* o1ctl: admin CLI of o1d. One subcommand per file (cmd_*.c); this file
 * only dispatches through the table below. Subcommands that talk to the
 * daemon over its control socket slot in as more commands.def lines. */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "o1ctl.h"

static int cmd_help(int argc, char **argv);

static const struct o1ctl_cmd o1ctl_cmds[] = {
#define O1CTL_CMD(name, fn, help) {name, fn, help},
#include "commands.def"
#undef O1CTL_CMD
    {"help", cmd_help, "show this list"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: o1ctl COMMAND [ARGS]   (o1ctl COMMAND --help)\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof(o1ctl_cmds) / sizeof(o1ctl_cmds[0]); i++)
		fprintf(f, "  %-12s %s\n", o1ctl_cmds[i].name,
			o1ctl_cmds[i].help);
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
	o1_log_set_level(O1_LOG_WARN);
	if (argc < 2 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(o1ctl_cmds) / sizeof(o1ctl_cmds[0]); i++)
		if (strcmp(argv[1], o1ctl_cmds[i].name) == 0)
			return o1ctl_cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "o1ctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

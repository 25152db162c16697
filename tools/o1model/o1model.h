/* Subcommands of o1model. Each takes argv starting at its own name and
 * returns the process exit code (0 ok, 1 failure, 2 usage). */
#ifndef O1MODEL_H
#define O1MODEL_H

struct o1model_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

#define O1MODEL_CMD(name, fn, help) int fn(int argc, char **argv);
#include "commands.def"
#undef O1MODEL_CMD

#endif

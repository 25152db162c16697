/* o1ctl: admin CLI of o1d. One subcommand per file (cmd_*.c); this file
 * reads the global options and the configuration, then dispatches through
 * the table below.
 *
 *   o1ctl [-c FILE] [--set section.key=value ...] [--socket PATH] [--json]
 *         COMMAND [ARGS]
 *
 * -c and --set may stand anywhere (as for every o1d binary); --socket and
 * --json before the command apply to it as if given after it. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/version.h"
#include "metrics/metrics_map.h"
#include "o1ctl.h"

static int cmd_help(const struct o1ctl_ctx *ctx, int argc, char **argv);

static const struct o1ctl_cmd o1ctl_cmds[] = {
#define O1CTL_CMD(name, fn, help) {name, fn, help},
#include "commands.def"
#undef O1CTL_CMD
    {"help", cmd_help, "show this list"},
};

int o1ctl_parse_uint(const char *cmd, const char *what, const char *arg,
		     uint64_t lo, uint64_t hi, uint64_t *out)
{
	unsigned long long v = 0;
	char *end = NULL;

	errno = 0;
	if (arg && isdigit((unsigned char)*arg))
		v = strtoull(arg, &end, 10);
	if (!end || *end || errno || v < lo || v > hi) {
		fprintf(stderr,
			"o1ctl %s: %s '%s': want a whole number %" PRIu64
			"..%" PRIu64 "\n",
			cmd, what, arg ? arg : "", lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: o1ctl [-c FILE] [--set section.key=value ...] "
		   "[--socket PATH] [--json]\n"
		   "             COMMAND [ARGS]   (o1ctl COMMAND --help)\n"
		   "       o1ctl --help | --version\n\n"
		   "commands:\n");
	for (size_t i = 0; i < sizeof(o1ctl_cmds) / sizeof(o1ctl_cmds[0]); i++)
		fprintf(f, "  %-12s %s\n", o1ctl_cmds[i].name,
			o1ctl_cmds[i].help);
	fprintf(f,
		"\nThe control socket is --socket, else $O1D_SOCKET, else "
		"ipc.socket of the\nconfiguration (-c FILE, --set; default "
		"/run/o1d/o1d.sock). Metrics are where\no1d on that socket says it "
		"publishes them, else (or with --dir, --shm, --source)\n"
		"at metrics.bpf_dir and metrics.shm_path; a dead daemon's are "
		"never shown (exit 3).\n"
		"\nenvironment: O1D_SOCKET (the socket when --socket is not given)\n"
		"\nexit codes:\n"
		"  0  done (health: o1d serves)\n"
		"  1  the request failed or o1d refused it\n"
		"  2  bad arguments\n"
		"  3  o1d is not running (no socket, nobody listening, no "
		"metrics)\n"
		"  4  permission denied (socket, admin uid, metrics group)\n"
		"  5  version mismatch between o1ctl and o1d\n"
		"  6  health: o1d answers but has no model or is draining\n");
}

static int cmd_help(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	usage(stdout);
	return O1CTL_OK;
}

/* -c/--set anywhere, then --socket/--json before the command; *first is
 * the index of the command. */
static int parse_globals(struct o1ctl_ctx *ctx, int *argc, char **argv,
			 int *first)
{
	char err[512] = "";
	int i;

	if (o1_config_init_defaults(&ctx->cfg) ||
	    o1_config_parse_args(&ctx->cfg, argc, argv, err, sizeof(err))) {
		fprintf(stderr, "o1ctl: %s\n", err);
		return O1CTL_USAGE;
	}
	for (i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--json"))
			ctx->json = true;
		else if (!strcmp(argv[i], "--socket") && i + 1 < *argc)
			ctx->socket = argv[++i];
		else
			break;
	}
	*first = i;
	return -1;
}

static int resolve(struct o1ctl_ctx *ctx)
{
	const char *env = getenv("O1D_SOCKET");

	if (!ctx->socket || !*ctx->socket)
		ctx->socket = env && *env ? env : ctx->cfg.ipc.socket;
	if (o1_metrics_shm_path_for(ctx->cfg.metrics.shm_path, ctx->socket,
				    ctx->shm_path, sizeof(ctx->shm_path)))
		return O1CTL_USAGE;
	return -1;
}

int main(int argc, char **argv)
{
	static struct o1ctl_ctx ctx;
	int first = 1, rc;

	o1_log_set_level(O1_LOG_WARN);
	rc = parse_globals(&ctx, &argc, argv, &first);
	if (rc < 0)
		rc = resolve(&ctx);
	if (rc >= 0)
		return rc;
	if (first < argc && strcmp(argv[first], "--version") == 0) {
		o1_version_print(stdout, "o1ctl");
		return O1CTL_OK;
	}
	if (first >= argc || strcmp(argv[first], "-h") == 0 ||
	    strcmp(argv[first], "--help") == 0) {
		usage(first >= argc ? stderr : stdout);
		return first >= argc ? O1CTL_USAGE : O1CTL_OK;
	}
	for (size_t i = 0; i < sizeof(o1ctl_cmds) / sizeof(o1ctl_cmds[0]); i++)
		if (strcmp(argv[first], o1ctl_cmds[i].name) == 0)
			return o1ctl_cmds[i].fn(&ctx, argc - first,
						argv + first);
	fprintf(stderr, "o1ctl: unknown command '%s'\n", argv[first]);
	usage(stderr);
	return O1CTL_USAGE;
}

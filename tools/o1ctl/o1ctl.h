/* o1ctl: the admin CLI. Each subcommand takes the global context and argv
 * starting at its own name, and returns the process exit code (enum
 * o1ctl_exit). The helpers below give every metrics-reading subcommand the
 * same source options, with defaults from the same configuration o1d
 * reads (-c FILE, --set section.key=value). */
#ifndef O1CTL_H
#define O1CTL_H

#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "metrics/metrics_reader.h"

/* Exit codes, the same for every subcommand (o1ctl help lists them). */
enum o1ctl_exit {
	O1CTL_OK = 0,
	O1CTL_FAIL = 1,	       /* the request failed or o1d refused it */
	O1CTL_USAGE = 2,       /* bad arguments */
	O1CTL_NOT_RUNNING = 3, /* no socket, nobody listening, no metrics */
	O1CTL_DENIED = 4,      /* permission denied (socket, uid, metrics) */
	O1CTL_VERSION = 5,     /* o1d speaks another protocol or layout */
	O1CTL_UNHEALTHY = 6,   /* health: o1d answers but is not serving */
};

/* What the global options and the configuration say. */
struct o1ctl_ctx {
	struct o1_config cfg;	 /* defaults, -c FILE, --set overrides */
	const char *socket;	 /* --socket, else $O1D_SOCKET, ipc.socket */
	char shm_path[PATH_MAX]; /* metrics fallback file of that socket */
	bool json;		 /* --json before the subcommand */
};

struct o1ctl_cmd {
	const char *name;
	int (*fn)(const struct o1ctl_ctx *ctx, int argc, char **argv);
	const char *help;
};

#define O1CTL_CMD(name, fn, help)                                              \
	int fn(const struct o1ctl_ctx *ctx, int argc, char **argv);
#include "commands.def"
#undef O1CTL_CMD

/* The exit code for an error from connecting or opening the metrics. */
int o1ctl_exit_code(int err);

/* ARG, all decimal digits, as a number in LO..HI into *OUT; -1, said on
 * stderr as "o1ctl CMD: WHAT 'ARG': want a whole number LO..HI", when it is
 * not (signs, spaces, suffixes and overflow included). */
int o1ctl_parse_uint(const char *cmd, const char *what, const char *arg,
		     uint64_t lo, uint64_t hi, uint64_t *out);

/* Where metrics are read from. By default o1d on the socket is asked
 * where it publishes (admin op "metrics") and exactly that is read; when
 * it cannot be asked (not running, not an admin uid, an older o1d), or
 * with --dir DIR (bpf_dir, pins in DIR/v1), --shm PATH (fallback file) or
 * --source auto|bpf|shm, the configured places are read. Metrics whose
 * writer is not running are never shown: exit 3, "metrics are from pid N,
 * which is not running" (auto mode first tries the next place). */
struct o1ctl_source {
	struct o1_metrics_reader_opts opts;
	const char *socket; /* o1d's control socket, borrowed from ctx */
	bool named;	    /* --dir, --shm or --source given */
};

#define O1CTL_SOURCE_LONGOPTS                                                  \
	{"dir", required_argument, NULL, 'D'},                                 \
	    {"shm", required_argument, NULL, 'S'},                             \
	{                                                                      \
		"source", required_argument, NULL, 'M'                         \
	}
#define O1CTL_SOURCE_USAGE                                                     \
	"  --dir DIR       metrics.bpf_dir of o1d (default: from the "         \
	"config)\n"                                                            \
	"  --shm PATH      fallback file (default: metrics.shm_path, else "    \
	"derived\n"                                                            \
	"                  from the socket as o1d does)\n"                     \
	"  --source S      auto (pins, then file), bpf or shm (default: "      \
	"metrics.mode)\n"

/* Defaults from ctx: metrics.bpf_dir, the fallback file, metrics.mode. */
void o1ctl_source_init(struct o1ctl_source *s, const struct o1ctl_ctx *ctx);
/* Handles one of the source options; 1 if opt was one, 0 if not, -1 for a
 * bad value (printed). */
int o1ctl_source_option(struct o1ctl_source *s, int opt, const char *arg);
/* Opens the metrics of a running o1d (see struct o1ctl_source), printing a
 * clear error (daemon not running, a dead daemon's metrics, permission
 * denied, version mismatch) on failure; returns 0 or the exit code. */
int o1ctl_source_open(const struct o1ctl_source *s,
		      struct o1_metrics_reader **out);

#endif

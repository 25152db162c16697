/* o1ctl: the admin CLI. Each subcommand takes argv starting at its own name
 * and returns the process exit code (0 ok, 1 failure, 2 usage). The helpers
 * below give every metrics-reading subcommand the same source options. */
#ifndef O1CTL_H
#define O1CTL_H

#include <getopt.h>

#include "metrics_reader.h"

struct o1ctl_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

#define O1CTL_CMD(name, fn, help) int fn(int argc, char **argv);
#include "commands.def"
#undef O1CTL_CMD

/* Where metrics are read from: --dir DIR (bpf_dir, pins in DIR/v1),
 * --shm PATH (fallback file), --source auto|bpf|shm. */
struct o1ctl_source {
	struct o1_metrics_reader_opts opts;
};

#define O1CTL_SOURCE_LONGOPTS                                                  \
	{"dir", required_argument, NULL, 'D'},                                 \
	    {"shm", required_argument, NULL, 'S'},                             \
	{                                                                      \
		"source", required_argument, NULL, 'M'                         \
	}
#define O1CTL_SOURCE_USAGE                                                     \
	"  --dir DIR       metrics.bpf_dir of o1d (default /sys/fs/bpf/o1d)\n" \
	"  --shm PATH      fallback file (default /dev/shm/o1d-metrics-v1)\n"  \
	"  --source S      auto (pins, then file), bpf or shm\n"

void o1ctl_source_init(struct o1ctl_source *s);
/* Handles one of the source options; 1 if opt was one, 0 if not, -1 for a
 * bad value (printed). */
int o1ctl_source_option(struct o1ctl_source *s, int opt, const char *arg);
/* Opens the metrics, printing a clear error (daemon not running,
 * permission denied, version mismatch) on failure. */
int o1ctl_source_open(const struct o1ctl_source *s,
		      struct o1_metrics_reader **out);

#endif

/* Source options shared by the metrics-reading subcommands, and opening
 * the metrics with an error message an operator can act on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "o1ctl.h"

void o1ctl_source_init(struct o1ctl_source *s)
{
	memset(s, 0, sizeof(*s));
	s->opts.sz = sizeof(s->opts);
	s->opts.mode = O1_METRICS_MODE_AUTO;
}

int o1ctl_source_option(struct o1ctl_source *s, int opt, const char *arg)
{
	switch (opt) {
	case 'D':
		s->opts.bpf_dir = arg;
		return 1;
	case 'S':
		s->opts.shm_path = arg;
		return 1;
	case 'M':
		if (strcmp(arg, "auto") == 0)
			s->opts.mode = O1_METRICS_MODE_AUTO;
		else if (strcmp(arg, "bpf") == 0)
			s->opts.mode = O1_METRICS_MODE_BPF;
		else if (strcmp(arg, "shm") == 0)
			s->opts.mode = O1_METRICS_MODE_SHM;
		else {
			fprintf(stderr,
				"o1ctl: --source %s: want auto, bpf or shm\n",
				arg);
			return -1;
		}
		return 1;
	default:
		return 0;
	}
}

int o1ctl_source_open(const struct o1ctl_source *s,
		      struct o1_metrics_reader **out)
{
	int err = o1_metrics_reader_open(&s->opts, out);

	if (err == -ENOENT)
		fprintf(stderr, "o1ctl: no metrics found: is o1d running? "
				"(see --dir, --shm)\n");
	else if (err == -EACCES || err == -EPERM)
		fprintf(stderr, "o1ctl: permission denied reading metrics: "
				"join the group set by metrics.gid, or run as "
				"root\n");
	else if (err == -O1_E_VERSION || err == -O1_E_FORMAT)
		fprintf(stderr,
			"o1ctl: the published metrics are not in the "
			"layout this o1ctl knows (version %d): update "
			"o1ctl or o1d\n",
			O1_METRICS_VERSION);
	else if (err)
		fprintf(stderr, "o1ctl: cannot read metrics: %s\n",
			o1_strerror(err));
	return err;
}

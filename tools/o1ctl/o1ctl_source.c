/* Source options shared by the metrics-reading subcommands, and opening
 * the metrics with an error message an operator can act on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "o1ctl.h"

void o1ctl_source_init(struct o1ctl_source *s, const struct o1ctl_ctx *ctx)
{
	static const enum o1_metrics_mode modes[] = {
	    [O1_CONFIG_METRICS_AUTO] = O1_METRICS_MODE_AUTO,
	    [O1_CONFIG_METRICS_BPF] = O1_METRICS_MODE_BPF,
	    [O1_CONFIG_METRICS_SHM] = O1_METRICS_MODE_SHM,
	};

	memset(s, 0, sizeof(*s));
	s->opts.sz = sizeof(s->opts);
	s->opts.mode = modes[ctx->cfg.metrics.mode];
	s->opts.bpf_dir = ctx->cfg.metrics.bpf_dir;
	s->opts.shm_path = ctx->shm_path;
}

int o1ctl_exit_code(int err)
{
	switch (-err) {
	case 0:
		return O1CTL_OK;
	case ENOENT:
	case ECONNREFUSED:
		return O1CTL_NOT_RUNNING;
	case EACCES:
	case EPERM:
		return O1CTL_DENIED;
	case O1_E_VERSION:
	case O1_E_FORMAT:
	case EPROTO:
		return O1CTL_VERSION;
	default:
		return O1CTL_FAIL;
	}
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
		fprintf(stderr,
			"o1ctl: no metrics found at %s/%s nor %s: is o1d "
			"running? (see --dir, --shm, -c)\n",
			s->opts.bpf_dir, O1_METRICS_PIN_SUBDIR,
			s->opts.shm_path);
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
	return o1ctl_exit_code(err);
}

/* Source options shared by the metrics-reading subcommands, and opening
 * the metrics of the running o1d with an error message an operator can act
 * on. Metrics are a running daemon's or none: what o1d says it publishes
 * must carry its pid, and what the configuration points at must have a
 * live writer (o1_metrics_reader_owner). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "o1ctl.h"
#include "o1d/admin.h"
#include "shm/wire.h"

/* What o1d answered to {"op":"metrics"}. */
struct where {
	long pid;
	char backend[8];
	char path[PATH_MAX];
};

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
	s->socket = ctx->socket;
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
		break;
	case 'S':
		s->opts.shm_path = arg;
		break;
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
		break;
	default:
		return 0;
	}
	s->named = true;
	return 1;
}

/* The message for an error opening metrics at PLACE; the exit code. */
static int open_error(const char *place, int err)
{
	if (err == -EACCES || err == -EPERM)
		fprintf(stderr,
			"o1ctl: permission denied reading metrics at %s: "
			"join the group set by metrics.gid, or run as root\n",
			place);
	else if (err == -O1_E_VERSION || err == -O1_E_FORMAT)
		fprintf(stderr,
			"o1ctl: the metrics at %s are not in the layout this "
			"o1ctl knows (version %d): update o1ctl or o1d\n",
			place, O1_METRICS_VERSION);
	else
		fprintf(stderr, "o1ctl: cannot read metrics at %s: %s\n",
			place, o1_strerror(err));
	return o1ctl_exit_code(err);
}

static void copy_str(const cJSON *o, const char *k, char *dst, size_t cap)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	snprintf(dst, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* Asks o1d on sock where it publishes: 0 with *w, or -1 when it cannot be
 * asked or does not know the op (the configuration is read instead). */
static int ask(const char *sock, struct where *w)
{
	char *buf = malloc(O1_ADMIN_MSG_MAX + 1);
	const cJSON *pid, *m;
	cJSON *r = NULL;
	int fd, ret = -1;

	if (!buf || !sock || o1_admin_connect(sock, &fd))
		goto out;
	if (o1_admin_call(fd, "{\"op\":\"metrics\"}", buf,
			  O1_ADMIN_MSG_MAX + 1) > 0)
		r = cJSON_Parse(buf);
	close(fd);
	pid = cJSON_GetObjectItemCaseSensitive(r, "pid");
	m = cJSON_GetObjectItemCaseSensitive(r, "metrics");
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")) ||
	    !cJSON_IsNumber(pid) || !cJSON_IsObject(m))
		goto out;
	w->pid = (long)pid->valuedouble;
	copy_str(m, "backend", w->backend, sizeof(w->backend));
	copy_str(m, "path", w->path, sizeof(w->path));
	ret = 0;
out:
	cJSON_Delete(r);
	free(buf);
	return ret;
}

/* Opens what o1d said, and checks the metrics there are its own. */
static int open_where(const struct o1ctl_source *s, struct where *w,
		      struct o1_metrics_reader **out)
{
	struct o1_metrics_reader_opts o = {.sz = sizeof(o)};
	size_t n = strlen(w->path);
	uint64_t pid = 0;
	int err;

	if (strcmp(w->backend, "bpf") && strcmp(w->backend, "shm")) {
		fprintf(stderr,
			"o1ctl: o1d (pid %ld) on %s publishes no metrics "
			"(metrics %s: metrics.enabled is false, or nothing "
			"could be published: see its log)\n",
			w->pid, s->socket, w->backend);
		return O1CTL_NOT_RUNNING;
	}
	o.mode = w->backend[0] == 'b' ? O1_METRICS_MODE_BPF
				      : O1_METRICS_MODE_SHM;
	if (o.mode == O1_METRICS_MODE_BPF && n > 3 &&
	    !strcmp(w->path + n - 3, "/" O1_METRICS_PIN_SUBDIR))
		w->path[n - 3] = 0; /* the reader adds v1/ */
	o.bpf_dir = o.shm_path = w->path;
	err = o1_metrics_reader_open(&o, out);
	if (err)
		return open_error(w->path, err);
	err = o1_metrics_reader_owner(*out, &pid);
	if (err >= 0 && (long)pid == w->pid)
		return O1CTL_OK;
	fprintf(stderr,
		"o1ctl: the metrics at %s are from pid %llu, not from o1d "
		"(pid %ld) on %s\n",
		w->path, (unsigned long long)pid, w->pid, s->socket);
	o1_metrics_reader_close(*out);
	*out = NULL;
	return O1CTL_NOT_RUNNING;
}

/* Opens MODE's place; a dead writer's metrics are closed, their pid in
 * *dead. 0 (*out live or NULL when nothing or only dead metrics were
 * found) or an exit code (printed). */
static int open_one(const struct o1ctl_source *s, enum o1_metrics_mode mode,
		    struct o1_metrics_reader **out, uint64_t *dead,
		    char *dead_at, size_t cap)
{
	struct o1_metrics_reader_opts o = s->opts;
	uint64_t pid = 0;
	int err;

	o.mode = mode;
	*out = NULL;
	err = o1_metrics_reader_open(&o, out);
	if (err == -ENOENT || err == -ENOTDIR)
		return O1CTL_OK;
	if (err)
		return open_error(mode == O1_METRICS_MODE_BPF ? o.bpf_dir
							      : o.shm_path,
				  err);
	if (o1_metrics_reader_owner(*out, &pid) == 1)
		return O1CTL_OK;
	*dead = pid;
	snprintf(dead_at, cap, "%s", o1_metrics_reader_path(*out));
	o1_metrics_reader_close(*out);
	*out = NULL;
	return O1CTL_OK;
}

/* The configured places: the pins, then (auto) the file. */
static int open_configured(const struct o1ctl_source *s,
			   struct o1_metrics_reader **out)
{
	char at[PATH_MAX] = "";
	uint64_t dead = 0;
	int rc = O1CTL_OK;

	*out = NULL;
	if (s->opts.mode != O1_METRICS_MODE_SHM)
		rc = open_one(s, O1_METRICS_MODE_BPF, out, &dead, at,
			      sizeof(at));
	if (!rc && !*out && s->opts.mode != O1_METRICS_MODE_BPF)
		rc = open_one(s, O1_METRICS_MODE_SHM, out, &dead, at,
			      sizeof(at));
	if (rc || *out)
		return rc;
	if (at[0])
		fprintf(stderr,
			"o1ctl: metrics are from pid %llu, which is not "
			"running (%s): o1d is not running there (see "
			"--socket, -c)\n",
			(unsigned long long)dead, at);
	else
		fprintf(stderr,
			"o1ctl: no metrics found at %s/%s nor %s: is o1d "
			"running? (see --socket, -c, --dir, --shm)\n",
			s->opts.bpf_dir, O1_METRICS_PIN_SUBDIR,
			s->opts.shm_path);
	return O1CTL_NOT_RUNNING;
}

int o1ctl_source_open(const struct o1ctl_source *s,
		      struct o1_metrics_reader **out)
{
	struct where w;

	if (!s->named && ask(s->socket, &w) == 0)
		return open_where(s, &w, out);
	return open_configured(s, out);
}

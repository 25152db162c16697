/* o1-sidecar: an OpenAI-compatible HTTP front for a local o1d.
 *
 *   o1-sidecar [--daemon SOCKET] [--listen HOST:PORT|unix:PATH]
 *              [--access-log FILE|-] [-c FILE] [--set section.key=v ...]
 *
 * Settings come from the [sidecar] section of the config (and model.name
 * or model.path for the served name); the options override them and are
 * checked exactly as those keys are (--listen as sidecar.listen, or
 * unix:ABSOLUTE_PATH; --daemon as sidecar.daemon_socket). The daemon's
 * socket is --daemon, else sidecar.daemon_socket, else ipc.socket of the
 * same configuration (o1d's own file). Prints
 * "o1-sidecar: ready listen=ADDR" on stderr once serving. SIGINT/SIGTERM
 * drain it (exit 0): /health/ready answers 503 at once, requests are
 * still served for sidecar.drain_delay_ms (a load balancer's health
 * checks notice meanwhile), then the listening socket closes and the
 * requests in flight get sidecar.drain_timeout_ms to finish; a second
 * signal stops at once. The access log goes to stdout unless told
 * otherwise.
 * Exit codes: 0 stopped by a signal, 1 could not serve, 2 bad arguments
 * or configuration. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/version.h"
#include "metrics/metrics_map.h"
#include "metrics/metrics_writer.h"
#include "sidecar_backend.h"
#include "sidecar_http.h"

struct args {
	const char *daemon, *listen, *access_log;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: o1-sidecar [--daemon SOCKET] [--listen HOST:PORT|"
		"unix:PATH] [--access-log FILE|-]\n"
		"                  [-c FILE] [--set section.key=value ...]\n"
		"       o1-sidecar --help | --version\n"
		"\n"
		"OpenAI-compatible HTTP (/v1/chat/completions, /v1/completions,\n"
		"/v1/models, /health/live, /health/ready, /metrics) in front of\n"
		"o1d.\n"
		"  --daemon SOCKET   o1d's socket (default sidecar.daemon_socket, "
		"else\n"
		"                    ipc.socket of the configuration)\n"
		"  --listen ADDR     host:port (port 1..65535) or unix:PATH "
		"(default\n"
		"                    sidecar.listen)\n"
		"  --access-log F    one line per request to F (- : stdout, the "
		"default)\n"
		"  -c FILE, --set section.key=value   the configuration "
		"(config/o1d.ini)\n"
		"signals: SIGTERM, SIGINT stop it (exit 0)\n"
		"exit codes: 0 stopped, 1 could not serve, 2 bad arguments or "
		"configuration\n");
}

/* --listen and --daemon go through the config keys' own checks. */
static int check_option(struct o1_config *cfg, const char *opt,
			const char *key, const char *v)
{
	char set[O1_CONFIG_PATH_MAX + 64], err[512];

	if (!strcmp(key, "sidecar.listen") && !strncmp(v, "unix:", 5)) {
		if (v[5] == '/')
			return 0;
		fprintf(stderr,
			"o1-sidecar: %s %s: not unix:ABSOLUTE_PATH (e.g. "
			"unix:/run/o1d/http.sock)\n",
			opt, v);
		return -1;
	}
	snprintf(set, sizeof(set), "%s=%s", key, v);
	if (!o1_config_set(cfg, set, err, sizeof(err)))
		return 0;
	/* err names the --set form; the key's own words follow it */
	fprintf(stderr, "o1-sidecar: %s %s: %s\n", opt, v,
		strstr(err, ": [") ? strstr(err, ": [") + 2 : err);
	return -1;
}

static int parse(struct o1_config *cfg, int argc, char **argv, struct args *a)
{
	for (int i = 1; i < argc; i++) {
		const char **to = !strcmp(argv[i], "--daemon")	 ? &a->daemon
				  : !strcmp(argv[i], "--listen") ? &a->listen
				  : !strcmp(argv[i], "--access-log")
				      ? &a->access_log
				      : NULL;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(argv[i], "--version")) {
			o1_version_print(stdout, "o1-sidecar");
			exit(0);
		}
		if (!to || i + 1 >= argc) {
			fprintf(stderr,
				"o1-sidecar: unexpected '%s' (see o1-sidecar "
				"--help)\n",
				argv[i]);
			return -1;
		}
		*to = argv[++i];
		if ((to == &a->listen &&
		     check_option(cfg, argv[i - 1], "sidecar.listen", *to)) ||
		    (to == &a->daemon &&
		     check_option(cfg, argv[i - 1], "sidecar.daemon_socket",
				  *to)))
			return -1;
	}
	return 0;
}

/* The model file's basename without its extension. */
static void fallback_name(const struct o1_config *c, char *buf, size_t cap)
{
	const char *base = strrchr(c->model.path, '/');
	char *dot;

	size_t n;

	base = base ? base + 1 : c->model.path;
	n = strnlen(base, cap - 1);
	memcpy(buf, base, n);
	buf[n] = 0;
	dot = strrchr(buf, '.');
	if (dot && dot != buf)
		*dot = 0;
	if (!buf[0])
		snprintf(buf, cap, "o1d");
}

/* Where o1d publishes its metrics, as it decides (daemon/o1d/main.c). */
static int metrics_mode(const struct o1_config *c)
{
	switch (c->metrics.mode) {
	case O1_CONFIG_METRICS_BPF:
		return O1_METRICS_MODE_BPF;
	case O1_CONFIG_METRICS_SHM:
		return O1_METRICS_MODE_SHM;
	default:
		return O1_METRICS_MODE_AUTO;
	}
}

/* Waits up to MS for one of SET's signals: true when one came. */
static bool signalled(const sigset_t *set, uint32_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000};

	while (sigtimedwait(set, NULL, &ts) < 0)
		if (errno != EINTR)
			return false; /* EAGAIN: the time is up */
	return true;
}

/* The steps of a SIGTERM drain (see the file's head). */
static void drain(struct o1_sidecar_http *h, const struct o1_config *cfg,
		  const sigset_t *set)
{
	uint32_t left_ms = cfg->sidecar.drain_timeout_ms;

	o1_sidecar_http_drain(h);
	o1_info("sidecar: draining: not ready; accepting for %u ms more",
		cfg->sidecar.drain_delay_ms);
	if (signalled(set, cfg->sidecar.drain_delay_ms))
		goto again;
	o1_sidecar_http_quiesce(h);
	o1_info("sidecar: draining: not accepting; %u requests in flight",
		o1_sidecar_http_in_flight(h));
	while (o1_sidecar_http_in_flight(h)) {
		if (!left_ms) {
			o1_warn("sidecar: drain timeout: cutting %u requests",
				o1_sidecar_http_in_flight(h));
			return;
		}
		if (signalled(set, 20))
			goto again;
		left_ms -= left_ms > 20 ? 20 : left_ms;
	}
	return;
again:
	o1_warn("sidecar: second signal during drain: stopping now");
}

static int serve(const struct o1_config *cfg, const struct args *a, FILE *log)
{
	struct o1_sidecar_http_opts o = {
	    .listen = a->listen ? a->listen : cfg->sidecar.listen,
	    .model_name = cfg->model.name,
	    .metrics_dir = cfg->metrics.bpf_dir,
	    .max_body_bytes = cfg->sidecar.max_body_bytes,
	    .max_concurrent = cfg->sidecar.max_concurrent,
	    .request_timeout_ms = cfg->sidecar.request_timeout_ms,
	    .idle_timeout_s = cfg->sidecar.idle_timeout_s,
	    .read_timeout_ms = cfg->sidecar.read_timeout_ms,
	    .max_per_address = cfg->sidecar.max_connections_per_address
				   ? cfg->sidecar.max_connections_per_address
				   : cfg->sidecar.max_concurrent + 8,
	    .access_log = log};
	const char *sock = a->daemon			  ? a->daemon
			   : cfg->sidecar.daemon_socket[0] ? cfg->sidecar.daemon_socket
							   : cfg->ipc.socket;
	struct o1_sidecar_backend *b = NULL;
	struct o1_sidecar_http *h = NULL;
	char fallback[128], bound[160], shm[O1_CONFIG_PATH_MAX + 32];
	sigset_t set;
	int ret, sig;

	fallback_name(cfg, fallback, sizeof(fallback));
	o.model_fallback = fallback;
	o.metrics_mode = metrics_mode(cfg);
	ret = o1_metrics_shm_path_for(cfg->metrics.shm_path, sock, shm,
				      sizeof(shm));
	if (ret)
		return ret;
	o.metrics_shm = shm;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* threads inherit it */
	signal(SIGPIPE, SIG_IGN);
	ret = o1_sidecar_backend_create(sock, cfg->sidecar.max_concurrent,
					cfg->model.max_context_tokens, &b);
	if (!ret)
		ret = o1_sidecar_http_start(&o, b, bound, sizeof(bound), &h);
	if (ret)
		goto out;
	fprintf(stderr, "o1-sidecar: ready listen=%s daemon=%s\n", bound, sock);
	sigwait(&set, &sig);
	o1_info("sidecar: signal %d, draining", sig);
	drain(h, cfg, &set);
out:
	o1_sidecar_http_stop(h);
	o1_sidecar_backend_destroy(b);
	return ret;
}

int main(int argc, char **argv)
{
	struct o1_config cfg;
	struct args a = {0};
	char err[512];
	FILE *log = stdout;
	int ret;

	o1_config_init_defaults(&cfg);
	if (o1_config_parse_args(&cfg, &argc, argv, err, sizeof(err))) {
		fprintf(stderr, "o1-sidecar: %s\n", err);
		return 2;
	}
	if (parse(&cfg, argc, argv, &a))
		return 2;
	o1_log_set_level(cfg.log.level);
	if (a.access_log && strcmp(a.access_log, "-")) {
		log = fopen(a.access_log, "a");
		if (!log) {
			fprintf(stderr, "o1-sidecar: cannot open %s: %m\n",
				a.access_log);
			return 1;
		}
	}
	ret = serve(&cfg, &a, log);
	if (log != stdout)
		fclose(log);
	if (ret)
		fprintf(stderr, "o1-sidecar: %s\n", o1_strerror(ret));
	return ret ? 1 : 0;
}

/* o1ctl top: a refreshing dashboard computed from two snapshots an
 * interval apart: request and token rates, graph hit rate, KV use, and
 * p50/p99 of every histogram over the interval. With --json, one line per
 * frame: the interval's delta (o1_metrics_render_json) plus
 * "interval_s". The metrics are reopened
 * for every snapshot, so a restarted daemon is picked up (its counters
 * then count from zero, see o1_metrics_snapshot_delta). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "metrics/metrics_render.h"
#include "o1ctl.h"

struct top_opts {
	struct o1ctl_source src;
	double interval_s;
	long count; /* frames, 0: until interrupted */
	bool json;
};

static const char *const hist_names[O1_METRICS_HIST__COUNT] = {
#define O1_METRICS_X(id, f, p, h) [O1_METRICS_HIST_##id] = #f,
    O1_METRICS_HIST_LIST(O1_METRICS_X)
#undef O1_METRICS_X
};

static int snapshot(const struct o1ctl_source *src,
		    struct o1_metrics_snapshot *s, char *path, size_t sz)
{
	struct o1_metrics_reader *r;
	int err = o1ctl_source_open(src, &r);

	if (err)
		return err; /* an exit code, printed */
	err = o1_metrics_reader_snapshot(r, s);
	snprintf(path, sz, "%s %s",
		 o1_metrics_backend_name(o1_metrics_reader_backend(r)),
		 o1_metrics_reader_path(r));
	o1_metrics_reader_close(r);
	if (err)
		fprintf(stderr, "o1ctl top: reading the metrics failed: %s\n",
			o1_strerror(err));
	return err ? O1CTL_FAIL : O1CTL_OK;
}

static uint64_t failed(const struct o1_metrics_counters *c)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < O1_METRICS_FAIL__COUNT; i++)
		n += c->v[O1_METRICS_CTR_FAILED_INVALID + i];
	return n;
}

static void print_graphs(const struct o1_metrics_graphs *g, FILE *f)
{
	uint64_t hits = 0, other = g->oversize, miss = 0, fb = 0;

	for (unsigned i = 0; i < O1_METRICS_GRAPH_BUCKETS; i++) {
		hits += g->buckets[i].hits;
		miss += g->buckets[i].misses;
		fb += g->buckets[i].fallbacks;
	}
	other += miss + fb;
	if (hits + other)
		fprintf(f, "graphs      hit rate %.1f%%",
			100.0 * (double)hits / (double)(hits + other));
	else
		fprintf(f, "graphs      hit rate -");
	fprintf(f,
		"  (hits %" PRIu64 ", misses %" PRIu64 ", fallbacks %" PRIu64
		", oversize %" PRIu64 ")\n",
		hits, miss, fb, g->oversize);
}

static void print_latency_row(const struct o1_metrics_hist *x, const char *name,
			      FILE *f)
{
	double p50, p99;

	fprintf(f, "  %-12s %10" PRIu64, name, o1_metrics_hist_total(x));
	if (o1_metrics_hist_quantile_us(x, 0.5, &p50) == 0 &&
	    o1_metrics_hist_quantile_us(x, 0.99, &p99) == 0)
		fprintf(f, " %10.3f %10.3f\n", p50 / 1e3, p99 / 1e3);
	else
		fprintf(f, " %10s %10s\n", "-", "-");
}

static void print_latency(const struct o1_metrics_snapshot *d, FILE *f)
{
	fprintf(f, "\nlatency (ms)   %10s %10s %10s\n", "count", "p50", "p99");
	for (unsigned h = 0; h < O1_METRICS_HIST__COUNT; h++)
		print_latency_row(&d->hist.h[h], hist_names[h], f);
	if (d->has_runq)
		print_latency_row(&d->runq, "runq", f);
}

static void print_frame(const struct o1_metrics_snapshot *a,
			const struct o1_metrics_snapshot *b, const char *src,
			FILE *f)
{
	struct o1_metrics_snapshot d;
	const struct o1_metrics_counters *c = &d.ctr;
	double dt = (double)(b->taken_ns - a->taken_ns) / 1e9;
	uint64_t total = b->ctr.kv_pages_total;

	o1_metrics_snapshot_delta(a, b, &d);
	fprintf(f, "o1d top   pid %" PRIu64 "   via %s   interval %.2f s\n\n",
		b->info.pid, src, dt);
	fprintf(f,
		"requests/s  submitted %.1f  completed %.1f  failed %.1f"
		"  cancelled %.1f   running %" PRIu64 "  waiting %" PRIu64 "\n",
		(double)c->requests_submitted / dt,
		(double)c->requests_completed / dt, (double)failed(c) / dt,
		(double)c->requests_cancelled / dt, c->requests_running,
		c->requests_waiting);
	fprintf(f, "tokens/s    generated %.1f  prompt %.1f   steps/s %.1f\n",
		(double)c->tokens_generated / dt, (double)c->tokens_prompt / dt,
		(double)c->steps / dt);
	fprintf(f,
		"KV pages    used %" PRIu64 " / %" PRIu64
		" (%.1f%%)  cached %" PRIu64 "\n",
		c->kv_pages_used, total,
		total ? 100.0 * (double)c->kv_pages_used / (double)total : 0.0,
		c->kv_pages_cached);
	print_graphs(&d.graphs, f);
	fprintf(f,
		"clients     connected %" PRIu64 "  deaths %" PRIu64
		"  violations %" PRIu64 "\n",
		c->clients_connected, c->client_deaths, c->protocol_violations);
	print_latency(&d, f);
}

/* One JSON line: the delta over the interval. */
static int print_json(const struct o1_metrics_snapshot *a,
		      const struct o1_metrics_snapshot *b, FILE *f)
{
	struct o1_metrics_snapshot d;
	char *text;
	cJSON *j;
	int err;

	o1_metrics_snapshot_delta(a, b, &d);
	err = o1_metrics_render_json(&d, &j);
	if (err)
		return err;
	cJSON_AddNumberToObject(j, "interval_s",
				(double)(b->taken_ns - a->taken_ns) / 1e9);
	text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (!text)
		return -ENOMEM;
	fprintf(f, "%s\n", text);
	cJSON_free(text);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: o1ctl top [--interval SECONDS] [--count N] "
		   "[--json] [OPTIONS]\n"
		   "  --json          one JSON line per frame (the "
		   "interval's delta)\n"
		   "  --interval S    seconds between refreshes (default 1)\n"
		   "  --count N       stop after N frames (default: "
		   "never)\n" O1CTL_SOURCE_USAGE);
}

static int parse_value(int opt, const char *arg, struct top_opts *o)
{
	char *end;

	errno = 0;
	if (opt == 'i')
		o->interval_s = strtod(arg, &end);
	else
		o->count = strtol(arg, &end, 10);
	if (errno || *end || end == arg || o->count < 0 ||
	    !(o->interval_s > 0 && o->interval_s <= 3600)) {
		fprintf(stderr, "o1ctl top: bad --%s '%s'\n",
			opt == 'i' ? "interval" : "count", arg);
		return O1CTL_USAGE;
	}
	return -1;
}

static int parse(int argc, char **argv, struct top_opts *o)
{
	static const struct option longopts[] = {
	    {"interval", required_argument, NULL, 'i'},
	    {"count", required_argument, NULL, 'n'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    O1CTL_SOURCE_LONGOPTS,
	    {NULL, 0, NULL, 0},
	};
	int opt, r;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		r = o1ctl_source_option(&o->src, opt, optarg);
		if (r < 0)
			return O1CTL_USAGE;
		if (r > 0)
			continue;
		if (opt == 'j') {
			o->json = true;
			continue;
		}
		if (opt == 'i' || opt == 'n') {
			r = parse_value(opt, optarg, o);
			if (r >= 0)
				return r;
			continue;
		}
		usage(opt == 'h' ? stdout : stderr);
		return opt == 'h' ? 0 : 2;
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	return -1;
}

static void sleep_s(double s)
{
	struct timespec ts = {.tv_sec = (time_t)s,
			      .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int cmd_top(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	struct o1_metrics_snapshot a, b;
	struct top_opts o = {.interval_s = 1.0, .json = ctx->json};
	char src[PATH_MAX + 16];
	int rc, tty = isatty(STDOUT_FILENO);

	o1ctl_source_init(&o.src, ctx);
	rc = parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = snapshot(&o.src, &a, src, sizeof(src));
	if (rc)
		return rc;
	for (long n = 0; o.count == 0 || n < o.count; n++) {
		sleep_s(o.interval_s);
		rc = snapshot(&o.src, &b, src, sizeof(src));
		if (rc)
			return rc;
		if (o.json) {
			if (print_json(&a, &b, stdout))
				return O1CTL_FAIL;
			fflush(stdout);
			a = b;
			continue;
		}
		if (tty)
			fputs("\033[H\033[2J", stdout);
		else if (n)
			fputc('\n', stdout);
		print_frame(&a, &b, src, stdout);
		fflush(stdout);
		a = b;
	}
	return 0;
}

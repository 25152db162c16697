/* o1ctl stats (alias metrics): one snapshot of every metric, read from
 * the pinned maps or the fallback file, as text (counters, a percentile
 * table and a log2 bar chart per non-empty histogram, graph buckets and
 * context spans), as
 * JSON (--json) or in the Prometheus format (--prometheus). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "metrics/metrics_render.h"
#include "o1ctl.h"

static const char *const ctr_names[O1_METRICS_CTR__COUNT] = {
#define O1_METRICS_X(id, f, type, p, l, h) [O1_METRICS_CTR_##id] = #f,
    O1_METRICS_COUNTER_LIST(O1_METRICS_X)
#undef O1_METRICS_X
};

static const char *const hist_names[O1_METRICS_HIST__COUNT] = {
#define O1_METRICS_X(id, f, p, h) [O1_METRICS_HIST_##id] = #f,
    O1_METRICS_HIST_LIST(O1_METRICS_X)
#undef O1_METRICS_X
};

static void print_quantiles(const struct o1_metrics_hist *h, FILE *f)
{
	static const double qs[] = {0.5, 0.9, 0.99};
	double v;

	for (unsigned i = 0; i < 3; i++) {
		if (o1_metrics_hist_quantile_us(h, qs[i], &v) == 0)
			fprintf(f, " %10.1f", v);
		else
			fprintf(f, " %10s", "-");
	}
}

static void print_hist_row(const struct o1_metrics_hist *h, const char *name,
			   FILE *f)
{
	fprintf(f, "  %-14s %12" PRIu64 " %14" PRIu64, name, h->count,
		h->sum_us);
	print_quantiles(h, f);
	fprintf(f, " %10" PRIu64 "\n", h->max_us);
}

/* Log2 bars as libbpf-tools prints them, over the non-empty slot range. */
static void print_bars(const struct o1_metrics_hist *h, const char *name,
		       FILE *f)
{
	unsigned first = O1_METRICS_HIST_SLOTS, last = 0;
	uint64_t max = 0;

	for (unsigned i = 0; i < O1_METRICS_HIST_SLOTS; i++) {
		if (!h->slots[i])
			continue;
		first = first < i ? first : i;
		last = i;
		max = max > h->slots[i] ? max : h->slots[i];
	}
	if (!max)
		return;
	fprintf(f, "\n%s\n%22s : %-8s %s\n", name, "usecs", "count",
		"distribution");
	for (unsigned i = first; i <= last; i++) {
		uint64_t lo = o1_metrics_hist_slot_low(i);
		unsigned stars = (unsigned)(h->slots[i] * 40 / max);
		char range[48];

		if (i + 1 == O1_METRICS_HIST_SLOTS)
			snprintf(range, sizeof(range), "%" PRIu64 " -> ...",
				 lo);
		else
			snprintf(range, sizeof(range),
				 "%" PRIu64 " -> %" PRIu64, lo,
				 i ? 2 * lo - 1 : 1);
		fprintf(f, "%22s : %-8" PRIu64 " |%-40.*s|\n", range,
			h->slots[i], (int)stars,
			"****************************************");
	}
}

static void print_graphs(const struct o1_metrics_graphs *g, FILE *f)
{
	unsigned n = o1_metrics_graph_n_buckets(g);

	fprintf(f,
		"\ngraphs: %u buckets, oversize %" PRIu64
		", capture %.3f s, %" PRIu64 " bytes\n",
		n, g->oversize, (double)g->capture_us / 1e6, g->capture_bytes);
	if (n)
		fprintf(f, "  %8s %12s %12s %12s %12s\n", "batch", "hits",
			"misses", "fallbacks", "padded");
	for (unsigned i = 0; i < n; i++) {
		const struct o1_metrics_graph_bucket *b = &g->buckets[i];

		fprintf(f,
			"  %8" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64
			" %12" PRIu64 "\n",
			b->batch_size, b->hits, b->misses, b->fallbacks,
			b->padded_tokens);
	}
	n = o1_metrics_graph_n_spans(g);
	if (n)
		fprintf(f, "  %8s %12s\n", "context", "steps");
	for (unsigned i = 0; i < n; i++)
		fprintf(f, "  %8" PRIu64 " %12" PRIu64 "\n",
			g->spans[i].context_len, g->spans[i].steps);
}

static void print_text(const struct o1_metrics_snapshot *s, const char *src,
		       FILE *f)
{
	time_t start = (time_t)(s->info.start_unix_ns / 1000000000u);
	char when[32];

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&start));
	fprintf(f,
		"o1d metrics v%u via %s at %s (pid %" PRIu64
		", started %s)\n\ncounters\n",
		s->info.version, o1_metrics_backend_name(s->info.backend), src,
		s->info.pid, when);
	for (unsigned c = 0; c < O1_METRICS_CTR__COUNT; c++)
		fprintf(f, "  %-24s %14" PRIu64 "\n", ctr_names[c],
			s->ctr.v[c]);
	fprintf(f,
		"\nhistograms (us; p50..p99 interpolated in log2 slots, at "
		"most the max)\n  %-14s %12s %14s %10s %10s %10s %10s\n",
		"", "count", "sum", "p50", "p90", "p99", "max");
	for (unsigned h = 0; h < O1_METRICS_HIST__COUNT; h++)
		print_hist_row(&s->hist.h[h], hist_names[h], f);
	if (s->has_runq)
		print_hist_row(&s->runq, "runq", f);
	print_graphs(&s->graphs, f);
	for (unsigned h = 0; h < O1_METRICS_HIST__COUNT; h++)
		print_bars(&s->hist.h[h], hist_names[h], f);
	if (s->has_runq)
		print_bars(&s->runq, "runq", f);
}

static int print_json(const struct o1_metrics_snapshot *s, FILE *f)
{
	cJSON *j;
	char *text;
	int err = o1_metrics_render_json(s, &j);

	if (err)
		return err;
	text = cJSON_Print(j);
	cJSON_Delete(j);
	if (!text)
		return -1;
	fprintf(f, "%s\n", text);
	cJSON_free(text);
	return 0;
}

static void usage(FILE *f, const char *name)
{
	fprintf(f,
		"usage: o1ctl %s [--json | --prometheus] [OPTIONS]\n"
		"  --json          one JSON object\n"
		"  --prometheus    Prometheus text exposition "
		"format\n" O1CTL_SOURCE_USAGE,
		name);
}

enum format { TEXT, JSON, PROM };

static int parse(int argc, char **argv, struct o1ctl_source *src,
		 enum format *fmt)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"prometheus", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    O1CTL_SOURCE_LONGOPTS,
	    {NULL, 0, NULL, 0},
	};
	int opt, r;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		r = o1ctl_source_option(src, opt, optarg);
		if (r < 0)
			return O1CTL_USAGE;
		if (r > 0)
			continue;
		if ((opt == 'j' || opt == 'p') && *fmt != TEXT) {
			fprintf(stderr,
				"o1ctl %s: --json and --prometheus exclude "
				"each other\n",
				argv[0]);
			return O1CTL_USAGE;
		}
		if (opt == 'j' || opt == 'p')
			*fmt = opt == 'j' ? JSON : PROM;
		else {
			usage(opt == 'h' ? stdout : stderr, argv[0]);
			return opt == 'h' ? O1CTL_OK : O1CTL_USAGE;
		}
	}
	if (optind != argc) {
		usage(stderr, argv[0]);
		return O1CTL_USAGE;
	}
	return -1;
}

int cmd_metrics(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	struct o1_metrics_snapshot s;
	struct o1_metrics_reader *r;
	struct o1ctl_source src;
	enum format fmt = ctx->json ? JSON : TEXT;
	int rc, err;

	o1ctl_source_init(&src, ctx);
	rc = parse(argc, argv, &src, &fmt);
	if (rc >= 0)
		return rc;
	rc = o1ctl_source_open(&src, &r);
	if (rc)
		return rc;
	err = o1_metrics_reader_snapshot(r, &s);
	if (!err && fmt == TEXT)
		print_text(&s, o1_metrics_reader_path(r), stdout);
	else if (!err && fmt == JSON)
		err = print_json(&s, stdout);
	else if (!err)
		err = o1_metrics_render_prometheus(&s, stdout);
	o1_metrics_reader_close(r);
	if (err)
		fprintf(stderr, "o1ctl %s: reading or printing failed: %s\n",
			argv[0], o1_strerror(err));
	return err ? O1CTL_FAIL : O1CTL_OK;
}

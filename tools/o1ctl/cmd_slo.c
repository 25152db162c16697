/* o1ctl slo: the service-level objectives of [slo] measured over a window
 * (two metric snapshots window seconds apart, o1_metrics_snapshot_delta),
 * compared with the objectives and, with --baseline, with a stored
 * measurement (deltas printed). Exit 0 when every objective holds, 1 on a
 * breach (or, with --tolerance, a regression past the baseline), 2 for bad
 * arguments or a bad baseline file, 3/4/5 when the metrics cannot be read.
 *
 * Measures (over the window):
 * - success_rate: 1 - bad / finished, where finished = completed +
 *   cancelled + failed (every reason) and bad = failed for o1d's own
 *   reasons (engine, internal, draining, quota); client errors (invalid,
 *   context, tokenizer) and client cancels are finished, not bad;
 * - p99_ttft_ms, p99_itl_ms, p99_queue_wait_ms: 99th percentiles of the
 *   log2 histograms, interpolated inside a slot (o1_metrics_hist_quantile),
 *   so an estimate within the slot's factor-of-two bounds, and never above
 *   the largest value observed; each is printed with that range.
 * A measure with no data in the window (no request finished, an empty
 * histogram) is reported as such and is not a breach; an objective of 0
 * is not checked. With no data at all the verdict is "no data" (exit 0:
 * nothing breached, but nothing was checked either), never "ok". The
 * metrics read are the running daemon's (o1ctl_source_open): a dead
 * one's exit 3.
 *
 * The baseline file (--save) is JSON: {"version":1, "window_s":W,
 * "values":{"success_rate":x|null, "p99_ttft_ms":x|null, ...}}.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "o1ctl.h"

#define N_SLO	     4
#define BASELINE_MAX 65536
#define WINDOW_MAX_S 86400.0
#define NO_DATA	     (-1.0)

struct slo_opts {
	struct o1ctl_source src;
	double window_s;
	double tolerance; /* percent; < 0: regressions are only printed */
	const char *save, *baseline;
	bool json;
};

/* One measure: its value (NO_DATA), objective (0: none), baseline; a
 * latency's range [lo, hi]: the histogram slot its estimate lies in, hi
 * lowered to the largest value observed when clamped. */
struct slo_line {
	const char *name;
	bool higher_better;
	double value, objective, base;
	double lo, hi;
	bool clamped;
	bool has_base, breach, regressed;
};

struct slo_result {
	double window_s;
	uint64_t finished, bad;
	struct slo_line l[N_SLO];
};

static int snapshot(const struct o1ctl_source *src,
		    struct o1_metrics_snapshot *s)
{
	struct o1_metrics_reader *r;
	int err = o1ctl_source_open(src, &r);

	if (err)
		return err;
	err = o1_metrics_reader_snapshot(r, s);
	o1_metrics_reader_close(r);
	if (err)
		fprintf(stderr, "o1ctl slo: reading the metrics failed: %s\n",
			o1_strerror(err));
	return err ? O1CTL_FAIL : O1CTL_OK;
}

static struct slo_line p99_ms(const char *name, const struct o1_metrics_hist *h,
			      double objective)
{
	struct slo_line l = {.name = name, .objective = objective};
	struct o1_metrics_quantile e;

	l.value = NO_DATA;
	if (o1_metrics_hist_quantile(h, 0.99, &e))
		return l;
	l.value = e.value_us / 1000.0;
	l.lo = e.lo_us / 1000.0;
	l.hi = e.hi_us / 1000.0;
	l.clamped = e.clamped;
	return l;
}

static void measure(const struct o1_metrics_snapshot *d,
		    const struct o1_config *c, struct slo_result *r)
{
	const struct o1_metrics_counters *k = &d->ctr;
	uint64_t failed = 0;

	for (unsigned i = 0; i < O1_METRICS_FAIL__COUNT; i++)
		failed += k->v[O1_METRICS_CTR_FAILED_INVALID + i];
	r->bad = k->failed_engine + k->failed_internal + k->failed_draining +
		 k->failed_quota;
	r->finished = k->requests_completed + k->requests_cancelled + failed;
	r->l[0] = (struct slo_line){
	    .name = "success_rate",
	    .higher_better = true,
	    .value = r->finished ? 1.0 - (double)r->bad / (double)r->finished
				 : NO_DATA,
	    .objective = c->slo.success_rate};
	r->l[1] = p99_ms("p99_ttft_ms", &d->hist.ttft, c->slo.p99_ttft_ms);
	r->l[2] = p99_ms("p99_itl_ms", &d->hist.itl, c->slo.p99_itl_ms);
	r->l[3] = p99_ms("p99_queue_wait_ms", &d->hist.queue_wait,
			 c->slo.p99_queue_wait_ms);
}

/* Breach of the objective; regression past the baseline by more than
 * tol percent (tol < 0: never). */
static void judge(struct slo_line *l, double tol)
{
	double lim;

	if (l->value == NO_DATA)
		return;
	if (l->objective > 0)
		l->breach = l->higher_better ? l->value < l->objective
					     : l->value > l->objective;
	if (!l->has_base || l->base == NO_DATA || tol < 0)
		return;
	if (l->higher_better) {
		lim = l->base - (1.0 - l->base) * tol / 100.0;
		l->regressed = l->value < lim - 1e-9;
	} else {
		lim = l->base * (1.0 + tol / 100.0);
		l->regressed = l->value > lim + 1e-9;
	}
}

static int read_baseline(const char *path, struct slo_result *r)
{
	char *text = calloc(1, BASELINE_MAX + 1);
	FILE *f = fopen(path, "r");
	const cJSON *vals, *v;
	cJSON *root = NULL;
	size_t n = 0;
	int ret = O1CTL_USAGE;

	if (f && text)
		n = fread(text, 1, BASELINE_MAX, f);
	if (!f || !text) {
		fprintf(stderr, "o1ctl slo: baseline %s: %s\n", path,
			strerror(f ? ENOMEM : errno));
		goto out;
	}
	root = n < BASELINE_MAX ? cJSON_Parse(text) : NULL;
	vals = cJSON_GetObjectItemCaseSensitive(root, "values");
	if (!cJSON_IsObject(vals)) {
		fprintf(stderr,
			"o1ctl slo: baseline %s: not a file of o1ctl slo "
			"--save (%zu bytes, %s)\n",
			path, n,
			root ? "no \"values\" object" : "not JSON or too big");
		goto out;
	}
	for (int i = 0; i < N_SLO; i++) {
		v = cJSON_GetObjectItemCaseSensitive(vals, r->l[i].name);
		r->l[i].has_base = cJSON_IsNumber(v) || cJSON_IsNull(v);
		r->l[i].base = cJSON_IsNumber(v) ? v->valuedouble : NO_DATA;
	}
	ret = O1CTL_OK;
out:
	cJSON_Delete(root);
	free(text);
	if (f)
		fclose(f);
	return ret;
}

static cJSON *num_or_null(double v)
{
	return v == NO_DATA ? cJSON_CreateNull() : cJSON_CreateNumber(v);
}

static int save_baseline(const char *path, const struct slo_result *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *vals = cJSON_AddObjectToObject(o, "values");
	char *text;
	FILE *f;
	int ok;

	cJSON_AddNumberToObject(o, "version", 1);
	cJSON_AddNumberToObject(o, "window_s", r->window_s);
	cJSON_AddNumberToObject(o, "finished", (double)r->finished);
	cJSON_AddNumberToObject(o, "saved_unix", (double)time(NULL));
	for (int i = 0; i < N_SLO; i++)
		cJSON_AddItemToObject(vals, r->l[i].name,
				      num_or_null(r->l[i].value));
	text = cJSON_Print(o);
	cJSON_Delete(o);
	f = text ? fopen(path, "w") : NULL;
	ok = f && fprintf(f, "%s\n", text) > 0;
	if (f && fclose(f))
		ok = 0;
	if (!ok)
		fprintf(stderr, "o1ctl slo: cannot write baseline %s: %s\n",
			path, strerror(errno));
	cJSON_free(text);
	return ok ? O1CTL_OK : O1CTL_FAIL;
}

static void fmt(char *buf, size_t sz, double v, bool rate)
{
	if (v == NO_DATA)
		snprintf(buf, sz, "no data");
	else
		snprintf(buf, sz, rate ? "%.4f" : "%.2f", v);
}

static void print_line(const struct slo_line *l)
{
	bool rate = l->higher_better;
	char v[32], obj[40] = "none", base[80] = "";

	fmt(v, sizeof(v), l->value, rate);
	if (l->objective > 0)
		snprintf(obj, sizeof(obj), "%s %.*f",
			 rate ? ">=" : "<=", rate ? 4 : 0, l->objective);
	if (l->has_base && l->base != NO_DATA && l->value != NO_DATA)
		snprintf(base, sizeof(base), "  baseline %.*f (%+.*f%s)%s",
			 rate ? 4 : 2, l->base, rate ? 4 : 1,
			 rate	       ? l->value - l->base
			 : l->base > 0 ? (l->value - l->base) / l->base * 100
				       : 0.0,
			 rate ? "" : "%", l->regressed ? " REGRESSED" : "");
	else if (l->has_base)
		snprintf(base, sizeof(base), "  baseline %s",
			 l->base == NO_DATA ? "no data" : "-");
	printf("%-18s %10s  objective %-10s %-6s%s\n", l->name, v, obj,
	       l->breach ? "BREACH" : "ok", base);
	if (!rate && l->value != NO_DATA)
		printf("%18s in [%.2f, %.2f] (%s)\n", "", l->lo, l->hi,
		       l->clamped ? "a log2 slot, up to the largest value "
				    "observed"
				  : "a log2 slot's bounds");
}

static bool failed_any(const struct slo_result *r)
{
	for (int i = 0; i < N_SLO; i++)
		if (r->l[i].breach || r->l[i].regressed)
			return true;
	return false;
}

/* No measure had data: nothing was checked, which is not "ok". */
static bool no_data(const struct slo_result *r)
{
	for (int i = 0; i < N_SLO; i++)
		if (r->l[i].value != NO_DATA)
			return false;
	return true;
}

static void print_text(const struct slo_result *r)
{
	printf("window %.1f s: %llu requests finished, %llu failed by o1d\n",
	       r->window_s, (unsigned long long)r->finished,
	       (unsigned long long)r->bad);
	for (int i = 0; i < N_SLO; i++)
		print_line(&r->l[i]);
	if (failed_any(r))
		printf("slo: BREACH\n");
	else if (no_data(r))
		printf("slo: no data (no request finished in the window: "
		       "nothing checked)\n");
	else
		printf("slo: ok\n");
}

static void print_json(const struct slo_result *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *list = cJSON_AddArrayToObject(o, "slos");
	char *text;

	cJSON_AddBoolToObject(o, "ok", !failed_any(r));
	cJSON_AddBoolToObject(o, "no_data", no_data(r));
	cJSON_AddNumberToObject(o, "window_s", r->window_s);
	cJSON_AddNumberToObject(o, "finished", (double)r->finished);
	cJSON_AddNumberToObject(o, "failed", (double)r->bad);
	for (int i = 0; i < N_SLO; i++) {
		const struct slo_line *l = &r->l[i];
		cJSON *s = cJSON_CreateObject();

		cJSON_AddStringToObject(s, "name", l->name);
		cJSON_AddItemToObject(s, "value", num_or_null(l->value));
		cJSON_AddNumberToObject(s, "objective", l->objective);
		cJSON_AddBoolToObject(s, "breach", l->breach);
		if (!l->higher_better && l->value != NO_DATA) {
			cJSON_AddNumberToObject(s, "low", l->lo);
			cJSON_AddNumberToObject(s, "high", l->hi);
			cJSON_AddBoolToObject(s, "high_is_max", l->clamped);
		}
		if (l->has_base) {
			cJSON_AddItemToObject(s, "baseline",
					      num_or_null(l->base));
			cJSON_AddItemToObject(
			    s, "delta",
			    num_or_null(l->base == NO_DATA ||
						l->value == NO_DATA
					    ? NO_DATA
					    : l->value - l->base));
			cJSON_AddBoolToObject(s, "regressed", l->regressed);
		}
		cJSON_AddItemToArray(list, s);
	}
	text = cJSON_PrintUnformatted(o);
	printf("%s\n", text ? text : "{}");
	cJSON_free(text);
	cJSON_Delete(o);
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: o1ctl slo [--window S] [--save FILE] [--baseline FILE]\n"
	    "                 [--tolerance PCT] [--json] [source options]\n"
	    "  measures success rate and p99 TTFT, inter-token latency and\n"
	    "  queue wait over S seconds (default slo.window_s) and checks\n"
	    "  them against [slo]; exit 0: met, 1: breach, 2: usage.\n"
	    "  --save FILE      store this measurement as a baseline\n"
	    "  --baseline FILE  print deltas against a stored baseline\n"
	    "  --tolerance PCT  with --baseline: a latency above baseline\n"
	    "                   by more than PCT %%, or a success rate below\n"
	    "                   it by more than PCT %% of its error budget,\n"
	    "                   is a breach too\n" O1CTL_SOURCE_USAGE);
}

static int parse_num(const char *what, const char *arg, double lo, double hi,
		     double *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (*end || end == arg || !isfinite(v) || v < lo || v > hi) {
		fprintf(stderr, "o1ctl slo: %s '%s': want %g..%g\n", what, arg,
			lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse(int argc, char **argv, struct slo_opts *o)
{
	static const struct option longopts[] = {
	    O1CTL_SOURCE_LONGOPTS,
	    {"window", required_argument, NULL, 'w'},
	    {"save", required_argument, NULL, 's'},
	    {"baseline", required_argument, NULL, 'b'},
	    {"tolerance", required_argument, NULL, 't'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt, r;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		r = o1ctl_source_option(&o->src, opt, optarg);
		if (r < 0)
			return O1CTL_USAGE;
		if (r > 0)
			continue;
		if (opt == 'w' && !parse_num("--window", optarg, 0.01,
					     WINDOW_MAX_S, &o->window_s))
			continue;
		if (opt == 't' &&
		    !parse_num("--tolerance", optarg, 0, 1e6, &o->tolerance))
			continue;
		if (opt == 's' || opt == 'b') {
			*(opt == 's' ? &o->save : &o->baseline) = optarg;
			continue;
		}
		if (opt == 'j') {
			o->json = true;
			continue;
		}
		if (opt != 'h' && opt != 'w' && opt != 't')
			usage(stderr);
		if (opt == 'h')
			usage(stdout);
		return opt == 'h' ? O1CTL_OK : O1CTL_USAGE;
	}
	if (optind != argc) {
		usage(stderr);
		return O1CTL_USAGE;
	}
	return -1;
}

/* A baseline that cannot be read is said before the window is spent;
 * one that does not exist yet is made by --save. */
static int baseline_readable(const char *path)
{
	if (!path || access(path, R_OK) == 0)
		return O1CTL_OK;
	if (errno == ENOENT)
		fprintf(stderr,
			"o1ctl slo: baseline %s does not exist: measure one "
			"first with o1ctl slo --save %s (under representative "
			"traffic)\n",
			path, path);
	else
		fprintf(stderr, "o1ctl slo: baseline %s: %s\n", path,
			strerror(errno));
	return O1CTL_USAGE;
}

static void sleep_s(double s)
{
	struct timespec ts = {.tv_sec = (time_t)s,
			      .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int cmd_slo(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	struct slo_opts o = {.window_s = ctx->cfg.slo.window_s,
			     .tolerance = -1,
			     .json = ctx->json};
	struct o1_metrics_snapshot a, b, d;
	struct slo_result r = {0};
	int rc;

	o1ctl_source_init(&o.src, ctx);
	rc = parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = baseline_readable(o.baseline);
	if (rc)
		return rc;
	rc = snapshot(&o.src, &a);
	if (rc)
		return rc;
	sleep_s(o.window_s);
	rc = snapshot(&o.src, &b);
	if (rc)
		return rc;
	o1_metrics_snapshot_delta(&a, &b, &d);
	r.window_s = (double)(b.taken_ns - a.taken_ns) / 1e9;
	measure(&d, &ctx->cfg, &r);
	if (o.baseline) {
		rc = read_baseline(o.baseline, &r);
		if (rc)
			return rc;
	}
	for (int i = 0; i < N_SLO; i++)
		judge(&r.l[i], o.tolerance);
	if (o.save) {
		rc = save_baseline(o.save, &r);
		if (rc)
			return rc;
	}
	if (o.json)
		print_json(&r);
	else
		print_text(&r);
	return failed_any(&r) ? O1CTL_FAIL : O1CTL_OK;
}

/* Prometheus and JSON renderings of a snapshot, driven by the field tables
 * of metrics.h so a new counter shows up everywhere at once. Microsecond
 * values are printed as exact decimal seconds ("%llu.%06llu"). A
 * histogram's _count and +Inf bucket are the sum of its slots, so the
 * buckets stay consistent even when count ran ahead of them. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "metrics_render.h"
#include "metrics_writer.h"

struct ctr_desc {
	const char *field, *prom, *label, *help;
	int gauge;
};

static const struct ctr_desc ctr_descs[O1_METRICS_CTR__COUNT] = {
#define GAUGE	1
#define COUNTER 0
#define O1_METRICS_X(id, f, type, p, l, h)                                     \
	[O1_METRICS_CTR_##id] = {#f, p, l, h, type},
    O1_METRICS_COUNTER_LIST(O1_METRICS_X)
#undef O1_METRICS_X
#undef GAUGE
#undef COUNTER
};

struct hist_desc {
	const char *field, *prom, *help;
};

static const struct hist_desc hist_descs[O1_METRICS_HIST__COUNT] = {
#define O1_METRICS_X(id, f, p, h) [O1_METRICS_HIST_##id] = {#f, p, h},
    O1_METRICS_HIST_LIST(O1_METRICS_X)
#undef O1_METRICS_X
};

static const struct hist_desc runq_desc = {
    "runq", "run_queue_delay_seconds",
    "Time the daemon's threads waited runnable for a CPU (BPF program)"};

static void prom_head(FILE *f, const char *name, const char *type,
		      const char *help)
{
	fprintf(f, "# HELP o1_%s %s\n# TYPE o1_%s %s\n", name, help, name,
		type);
}

static void prom_counters(const struct o1_metrics_snapshot *s, FILE *f)
{
	const char *last = "";

	for (unsigned c = 0; c < O1_METRICS_CTR__COUNT; c++) {
		const struct ctr_desc *d = &ctr_descs[c];

		if (strcmp(d->prom, last) != 0)
			prom_head(f, d->prom, d->gauge ? "gauge" : "counter",
				  d->help);
		last = d->prom;
		fprintf(f, "o1_%s%s%s%s %" PRIu64 "\n", d->prom,
			*d->label ? "{" : "", d->label, *d->label ? "}" : "",
			s->ctr.v[c]);
	}
}

static void us_as_seconds(FILE *f, uint64_t us)
{
	fprintf(f, "%" PRIu64 ".%06" PRIu64, us / 1000000, us % 1000000);
}

static void prom_hist(const struct o1_metrics_hist *h,
		      const struct hist_desc *d, FILE *f)
{
	uint64_t cum = 0;

	prom_head(f, d->prom, "histogram", d->help);
	for (unsigned i = 0; i + 1 < O1_METRICS_HIST_SLOTS; i++) {
		cum += h->slots[i];
		fprintf(f, "o1_%s_bucket{le=\"", d->prom);
		us_as_seconds(f, (uint64_t)2 << i);
		fprintf(f, "\"} %" PRIu64 "\n", cum);
	}
	cum += h->slots[O1_METRICS_HIST_SLOTS - 1];
	fprintf(f, "o1_%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", d->prom, cum);
	fprintf(f, "o1_%s_sum ", d->prom);
	us_as_seconds(f, h->sum_us);
	fprintf(f, "\no1_%s_count %" PRIu64 "\n", d->prom, cum);
}

static void prom_graph_field(const struct o1_metrics_graphs *g, FILE *f,
			     const char *name, const char *help, size_t off)
{
	prom_head(f, name, "counter", help);
	for (unsigned i = 0; i < o1_metrics_graph_n_buckets(g); i++) {
		const char *b = (const char *)&g->buckets[i];
		uint64_t v;

		memcpy(&v, b + off, sizeof(v));
		fprintf(f, "o1_%s{batch=\"%" PRIu64 "\"} %" PRIu64 "\n", name,
			g->buckets[i].batch_size, v);
	}
}

static void prom_graphs(const struct o1_metrics_graphs *g, FILE *f)
{
	prom_graph_field(g, f, "graph_hits_total",
			 "Decode steps replayed from a captured graph",
			 offsetof(struct o1_metrics_graph_bucket, hits));
	prom_graph_field(g, f, "graph_misses_total",
			 "Decode steps whose bucket had no graph",
			 offsetof(struct o1_metrics_graph_bucket, misses));
	prom_graph_field(g, f, "graph_fallbacks_total",
			 "Graph replays that failed and ran eagerly",
			 offsetof(struct o1_metrics_graph_bucket, fallbacks));
	prom_graph_field(
	    g, f, "graph_padded_tokens_total",
	    "Padding rows added to reach a bucket's batch size",
	    offsetof(struct o1_metrics_graph_bucket, padded_tokens));
	prom_head(f, "graph_span_steps_total", "counter",
		  "Decode steps of bucket graphs by context span (the span's "
		  "longest context)");
	for (unsigned i = 0; i < o1_metrics_graph_n_spans(g); i++)
		fprintf(f,
			"o1_graph_span_steps_total{context=\"%" PRIu64
			"\"} %" PRIu64 "\n",
			g->spans[i].context_len, g->spans[i].steps);
	prom_head(f, "graph_oversize_total", "counter",
		  "Decode steps larger than every bucket (eager)");
	fprintf(f, "o1_graph_oversize_total %" PRIu64 "\n", g->oversize);
	prom_head(f, "graph_capture_seconds", "gauge",
		  "Time spent capturing graphs");
	fprintf(f, "o1_graph_capture_seconds ");
	us_as_seconds(f, g->capture_us);
	fputc('\n', f);
	prom_head(f, "graph_capture_bytes", "gauge",
		  "Device memory held by captured graphs");
	fprintf(f, "o1_graph_capture_bytes %" PRIu64 "\n", g->capture_bytes);
}

int o1_metrics_render_prometheus(const struct o1_metrics_snapshot *s, FILE *f)
{
	prom_head(f, "info", "gauge", "Metrics layout and publishing backend");
	fprintf(
	    f, "o1_info{version=\"%u\",backend=\"%s\",pid=\"%" PRIu64 "\"} 1\n",
	    s->info.version, o1_metrics_backend_name(s->info.backend),
	    s->info.pid);
	prom_head(f, "start_time_seconds", "gauge",
		  "Unix time the daemon opened its metrics");
	fprintf(f, "o1_start_time_seconds %" PRIu64 "\n",
		s->info.start_unix_ns / 1000000000u);
	prom_counters(s, f);
	for (unsigned h = 0; h < O1_METRICS_HIST__COUNT; h++)
		prom_hist(&s->hist.h[h], &hist_descs[h], f);
	if (s->has_runq)
		prom_hist(&s->runq, &runq_desc, f);
	prom_graphs(&s->graphs, f);
	return ferror(f) ? -EIO : 0;
}

/* ---- JSON ---- */

static int json_num(cJSON *o, const char *name, double v)
{
	return cJSON_AddNumberToObject(o, name, v) ? 0 : -ENOMEM;
}

static int json_hist(cJSON *parent, const struct o1_metrics_hist *h,
		     const char *name)
{
	static const double qs[] = {0.5, 0.9, 0.99};
	static const char *const qn[] = {"p50_us", "p90_us", "p99_us"};
	cJSON *o = cJSON_AddObjectToObject(parent, name);
	cJSON *slots;
	double v;
	int err;

	if (!o)
		return -ENOMEM;
	err = json_num(o, "count", (double)h->count);
	err = err ?: json_num(o, "sum_us", (double)h->sum_us);
	err = err ?: json_num(o, "max_us", (double)h->max_us);
	for (unsigned i = 0; i < 3 && !err; i++)
		if (o1_metrics_hist_quantile_us(h, qs[i], &v) == 0)
			err = json_num(o, qn[i], v);
	slots = cJSON_AddArrayToObject(o, "slots");
	for (unsigned i = 0; slots && !err && i < O1_METRICS_HIST_SLOTS; i++)
		if (!cJSON_AddItemToArray(
			slots, cJSON_CreateNumber((double)h->slots[i])))
			err = -ENOMEM;
	return err ? err : slots ? 0 : -ENOMEM;
}

/* A new object at the end of ARR, NULL without memory. */
static cJSON *json_push_object(cJSON *arr)
{
	cJSON *o = cJSON_CreateObject();

	if (o && !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int json_bucket(cJSON *arr, const struct o1_metrics_graph_bucket *b)
{
	cJSON *o = json_push_object(arr);
	int err = o ? 0 : -ENOMEM;

#define O1_METRICS_X(field, ty)                                                \
	err = err ?: json_num(o, #field, (double)b->field);
	O1_METRICS_GRAPH_BUCKET_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	return err;
}

static int json_span(cJSON *arr, const struct o1_metrics_graph_span *sp)
{
	cJSON *o = json_push_object(arr);
	int err = o ? 0 : -ENOMEM;

#define O1_METRICS_X(field, ty)                                                \
	err = err ?: json_num(o, #field, (double)sp->field);
	O1_METRICS_GRAPH_SPAN_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	return err;
}

static int json_graphs(cJSON *root, const struct o1_metrics_graphs *g)
{
	cJSON *o = cJSON_AddObjectToObject(root, "graphs");
	cJSON *arr = o ? cJSON_AddArrayToObject(o, "buckets") : NULL;
	cJSON *spans = o ? cJSON_AddArrayToObject(o, "spans") : NULL;
	int err = arr && spans ? 0 : -ENOMEM;

	err = err ?: json_num(o, "n_buckets", (double)g->n_buckets);
	err = err ?: json_num(o, "oversize", (double)g->oversize);
	err = err ?: json_num(o, "capture_us", (double)g->capture_us);
	err = err ?: json_num(o, "capture_bytes", (double)g->capture_bytes);
	for (unsigned i = 0; i < o1_metrics_graph_n_buckets(g) && !err; i++)
		err = json_bucket(arr, &g->buckets[i]);
	err = err ?: json_num(o, "n_spans", (double)g->n_spans);
	for (unsigned i = 0; i < o1_metrics_graph_n_spans(g) && !err; i++)
		err = json_span(spans, &g->spans[i]);
	return err;
}

static int json_info(cJSON *root, const struct o1_metrics_info *i)
{
	int err = cJSON_AddStringToObject(root, "backend",
					  o1_metrics_backend_name(i->backend))
		      ? 0
		      : -ENOMEM;

	err = err ?: json_num(root, "version", i->version);
	err = err ?: json_num(root, "pid", (double)i->pid);
	return err ?: json_num(root, "start_unix_ns", (double)i->start_unix_ns);
}

int o1_metrics_render_json(const struct o1_metrics_snapshot *s, cJSON **out)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *ctr = root ? cJSON_AddObjectToObject(root, "counters") : NULL;
	cJSON *hists =
	    root ? cJSON_AddObjectToObject(root, "histograms") : NULL;
	int err = ctr && hists ? 0 : -ENOMEM;

	err = err ?: json_info(root, &s->info);
	for (unsigned c = 0; c < O1_METRICS_CTR__COUNT && !err; c++)
		err = json_num(ctr, ctr_descs[c].field, (double)s->ctr.v[c]);
	for (unsigned h = 0; h < O1_METRICS_HIST__COUNT && !err; h++)
		err = json_hist(hists, &s->hist.h[h], hist_descs[h].field);
	if (!err && s->has_runq)
		err = json_hist(hists, &s->runq, runq_desc.field);
	err = err ?: json_graphs(root, &s->graphs);
	if (err) {
		cJSON_Delete(root);
		return err;
	}
	*out = root;
	return 0;
}

/* Reader side of the metrics: open, snapshot, delta and quantiles.
 * Values are copied by BPF_MAP_LOOKUP_ELEM from the pinned maps, or u64 by
 * u64 with relaxed atomic loads from the read-only file mapping; nothing
 * read is trusted beyond the geometry checked at open (slot indexes and
 * bucket counts come from this build). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "metrics_reader.h"

struct o1_metrics_reader {
	struct o1_metrics_maps maps;
};

static int open_auto(struct o1_metrics_reader *r, const char *dir,
		     const char *file)
{
	int err = o1_metrics_maps_open_bpf(&r->maps, dir);

	if (err == 0 || (err != -ENOENT && err != -ENOTDIR))
		return err;
	err = o1_metrics_maps_open_shm(&r->maps, file);
	if (err == -ENOENT)
		o1_debug("metrics: none published: no pins under %s/%s and no "
		       "file %s (is o1d running?)",
		       dir, O1_METRICS_PIN_SUBDIR, file);
	return err;
}

static int open_mode(struct o1_metrics_reader *r,
		     const struct o1_metrics_reader_opts *o)
{
	const char *dir = o->bpf_dir ? o->bpf_dir : O1_METRICS_DEFAULT_BPF_DIR;
	const char *file =
	    o->shm_path ? o->shm_path : O1_METRICS_DEFAULT_SHM_PATH;
	int err;

	switch (o->mode) {
	case O1_METRICS_MODE_AUTO:
		return open_auto(r, dir, file);
	case O1_METRICS_MODE_BPF:
		err = o1_metrics_maps_open_bpf(&r->maps, dir);
		break;
	case O1_METRICS_MODE_SHM:
		err = o1_metrics_maps_open_shm(&r->maps, file);
		break;
	default:
		o1_err("metrics: reader mode %d not supported", (int)o->mode);
		return -EINVAL;
	}
	if (err == -ENOENT)
		o1_debug("metrics: nothing published at %s%s",
		       o->mode == O1_METRICS_MODE_BPF ? dir : file,
		       o->mode == O1_METRICS_MODE_BPF
			   ? "/" O1_METRICS_PIN_SUBDIR
			   : "");
	return err;
}

int o1_metrics_reader_open(const struct o1_metrics_reader_opts *opts,
			   struct o1_metrics_reader **out)
{
	struct o1_metrics_reader_opts o = {0};
	struct o1_metrics_reader *r;
	int err;

	if (opts)
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	err = open_mode(r, &o);
	if (err) {
		free(r);
		return err;
	}
	*out = r;
	return 0;
}

void o1_metrics_reader_close(struct o1_metrics_reader *r)
{
	if (!r)
		return;
	o1_metrics_maps_close(&r->maps, false);
	free(r);
}

enum o1_metrics_backend
o1_metrics_reader_backend(const struct o1_metrics_reader *r)
{
	return r->maps.backend;
}

const char *o1_metrics_reader_path(const struct o1_metrics_reader *r)
{
	return r->maps.path;
}

int o1_metrics_reader_owner(const struct o1_metrics_reader *r, uint64_t *pid)
{
	return o1_metrics_maps_owner(&r->maps, pid);
}

int o1_metrics_reader_snapshot(struct o1_metrics_reader *r,
			       struct o1_metrics_snapshot *out)
{
	struct timespec ts;
	int err;

	err = o1_metrics_maps_read(&r->maps, O1_METRICS_R_INFO, &out->info);
	err = err
		  ?: o1_metrics_maps_read(&r->maps, O1_METRICS_R_COUNTERS,
					  &out->ctr);
	err = err
		  ?: o1_metrics_maps_read(&r->maps, O1_METRICS_R_HISTS,
					  &out->hist);
	err = err
		  ?: o1_metrics_maps_read(&r->maps, O1_METRICS_R_GRAPHS,
					  &out->graphs);
	memset(&out->runq, 0, sizeof(out->runq));
	out->has_runq = o1_metrics_maps_read_runq(&r->maps, &out->runq) == 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	out->taken_ns =
	    (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return err;
}

static uint64_t sub(uint64_t now, uint64_t before)
{
	return now >= before ? now - before : now;
}

static const char ctr_is_gauge[O1_METRICS_CTR__COUNT] = {
#define GAUGE	1
#define COUNTER 0
#define O1_METRICS_X(id, field, type, prom, label, help)                       \
	[O1_METRICS_CTR_##id] = type,
    O1_METRICS_COUNTER_LIST(O1_METRICS_X)
#undef O1_METRICS_X
#undef GAUGE
#undef COUNTER
};

static void hist_delta(const struct o1_metrics_hist *a,
		       const struct o1_metrics_hist *b,
		       struct o1_metrics_hist *out)
{
	out->count = sub(b->count, a->count);
	out->sum_us = sub(b->sum_us, a->sum_us);
	out->max_us = b->max_us; /* since start: a bound for the window too */
	for (unsigned i = 0; i < O1_METRICS_HIST_SLOTS; i++)
		out->slots[i] = sub(b->slots[i], a->slots[i]);
}

static void graphs_delta(const struct o1_metrics_graphs *a,
			 const struct o1_metrics_graphs *b,
			 struct o1_metrics_graphs *out)
{
	*out = *b;
	out->oversize = sub(b->oversize, a->oversize);
	for (unsigned i = 0; i < O1_METRICS_GRAPH_BUCKETS; i++) {
		const struct o1_metrics_graph_bucket *x = &a->buckets[i];
		const struct o1_metrics_graph_bucket *y = &b->buckets[i];

		out->buckets[i].hits = sub(y->hits, x->hits);
		out->buckets[i].misses = sub(y->misses, x->misses);
		out->buckets[i].fallbacks = sub(y->fallbacks, x->fallbacks);
		out->buckets[i].padded_tokens =
		    sub(y->padded_tokens, x->padded_tokens);
	}
	for (unsigned i = 0; i < O1_METRICS_GRAPH_SPANS; i++)
		out->spans[i].steps = sub(b->spans[i].steps, a->spans[i].steps);
}

void o1_metrics_snapshot_delta(const struct o1_metrics_snapshot *before,
			       const struct o1_metrics_snapshot *now,
			       struct o1_metrics_snapshot *out)
{
	struct o1_metrics_snapshot d = *now;

	for (unsigned c = 0; c < O1_METRICS_CTR__COUNT; c++)
		if (!ctr_is_gauge[c])
			d.ctr.v[c] = sub(now->ctr.v[c], before->ctr.v[c]);
	for (unsigned h = 0; h < O1_METRICS_HIST__COUNT; h++)
		hist_delta(&before->hist.h[h], &now->hist.h[h], &d.hist.h[h]);
	graphs_delta(&before->graphs, &now->graphs, &d.graphs);
	hist_delta(&before->runq, &now->runq, &d.runq);
	*out = d;
}

uint64_t o1_metrics_hist_total(const struct o1_metrics_hist *h)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < O1_METRICS_HIST_SLOTS; i++)
		n += h->slots[i];
	return n;
}

int o1_metrics_hist_quantile(const struct o1_metrics_hist *h, double q,
			     struct o1_metrics_quantile *out)
{
	uint64_t total = o1_metrics_hist_total(h);
	double rank, cum = 0, lo, hi, max = (double)h->max_us;
	unsigned i;

	if (!(q >= 0.0 && q <= 1.0))
		return -EINVAL;
	if (total == 0)
		return -ENODATA;
	rank = q * (double)total;
	if (rank < 1.0)
		rank = 1.0;
	for (i = 0; i < O1_METRICS_HIST_SLOTS - 1; i++) {
		if (cum + (double)h->slots[i] >= rank)
			break;
		cum += (double)h->slots[i];
	}
	lo = (double)o1_metrics_hist_slot_low(i);
	hi = i == 0 ? 2.0 : 2.0 * lo;
	out->clamped = h->max_us && max >= lo && max < hi;
	if (out->clamped)
		hi = max; /* nothing above it was seen */
	out->lo_us = lo;
	out->hi_us = hi;
	out->value_us = lo + (hi - lo) * (rank - cum) / (double)h->slots[i];
	return 0;
}

int o1_metrics_hist_quantile_us(const struct o1_metrics_hist *h, double q,
				double *out_us)
{
	struct o1_metrics_quantile e;
	int err = o1_metrics_hist_quantile(h, q, &e);

	if (!err)
		*out_us = e.value_us;
	return err;
}

/* Reading the metrics from another process: open the pinned maps (else the
 * fallback file) read-only, copy them into a snapshot, and derive rates and
 * percentile estimates from snapshots. Used by o1ctl and the sidecar. */
#ifndef O1_METRICS_READER_H
#define O1_METRICS_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "metrics_writer.h"

struct o1_metrics_reader_opts {
	size_t sz;		   /* sizeof(struct o1_metrics_reader_opts) */
	enum o1_metrics_mode mode; /* AUTO: pins, then file; BPF; SHM */
	const char *bpf_dir;	   /* borrowed; NULL: /sys/fs/bpf/o1d */
	const char *shm_path;	   /* borrowed; NULL: /dev/shm/o1d-metrics-v3 */
};

/* A copy of every region, taken field by field (see metrics.h). */
struct o1_metrics_snapshot {
	struct o1_metrics_info info;
	struct o1_metrics_counters ctr;
	struct o1_metrics_hists hist;
	struct o1_metrics_graphs graphs;
	struct o1_metrics_hist runq; /* run-queue delay (BPF program), or 0s */
	uint64_t has_runq;	     /* 1 when the o1_runq pin was read */
	uint64_t taken_ns;	     /* CLOCK_MONOTONIC when taken */
};

struct o1_metrics_reader;

/* Opens the published metrics. Returns -ENOENT (not logged but at debug:
 * the caller says what it looked for) when nothing is there,
 * -EACCES/-EPERM when they cannot be read, -O1_E_VERSION for another
 * layout. It opens what it finds, a dead writer's metrics too: see
 * o1_metrics_reader_owner. *out: caller owns, reader_close. */
int o1_metrics_reader_open(const struct o1_metrics_reader_opts *opts,
			   struct o1_metrics_reader **out);
void o1_metrics_reader_close(struct o1_metrics_reader *r);
enum o1_metrics_backend
o1_metrics_reader_backend(const struct o1_metrics_reader *r);
/* Pin directory or file being read; valid until reader_close. */
const char *o1_metrics_reader_path(const struct o1_metrics_reader *r);
/* The writer's pid as the metrics name it (*pid), and whether that writer
 * still runs: 1, 0 (its values are a dead daemon's, never current), or
 * -errno. Tells by the writer's owner lock (metrics/metrics_owner.h). */
int o1_metrics_reader_owner(const struct o1_metrics_reader *r, uint64_t *pid);
int o1_metrics_reader_snapshot(struct o1_metrics_reader *r,
			       struct o1_metrics_snapshot *out);

/* out = now - before for counters, histograms and graph counts; gauges,
 * info, bucket sizes and each histogram's max_us (since start: a bound
 * for the window as well) are now's. A field that went down (the daemon
 * restarted) counts from zero: now's value. */
void o1_metrics_snapshot_delta(const struct o1_metrics_snapshot *before,
			       const struct o1_metrics_snapshot *now,
			       struct o1_metrics_snapshot *out);

/* Observations in h: the sum of its slots (what quantiles are taken of). */
uint64_t o1_metrics_hist_total(const struct o1_metrics_hist *h);
/* A quantile estimate: value_us, interpolated linearly inside [lo_us,
 * hi_us], the power-of-two slot that holds the rank (the last slot is
 * taken as [2^31, 2^32) us), whose upper end is lowered to the largest
 * value observed when that lies inside the slot (clamped): an estimate is
 * never above what was observed. Displays show the range: the figure is
 * only known to lie in it. */
struct o1_metrics_quantile {
	double value_us;
	double lo_us, hi_us;
	bool clamped; /* hi_us is h->max_us, not the slot's bound */
};

/* Estimates the q-quantile (0 <= q <= 1) of h. -ENODATA when h is empty,
 * -EINVAL for q out of range. */
int o1_metrics_hist_quantile(const struct o1_metrics_hist *h, double q,
			     struct o1_metrics_quantile *out);
/* The same, the value only (microseconds). */
int o1_metrics_hist_quantile_us(const struct o1_metrics_hist *h, double q,
				double *out_us);

#endif

/* Reading the metrics from another process: open the pinned maps (else the
 * fallback file) read-only, copy them into a snapshot, and derive rates and
 * percentile estimates from snapshots. Used by o1ctl and the sidecar. */
#ifndef O1_METRICS_READER_H
#define O1_METRICS_READER_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "metrics_writer.h"

struct o1_metrics_reader_opts {
	size_t sz;		   /* sizeof(struct o1_metrics_reader_opts) */
	enum o1_metrics_mode mode; /* AUTO: pins, then file; BPF; SHM */
	const char *bpf_dir;	   /* borrowed; NULL: /sys/fs/bpf/o1d */
	const char *shm_path;	   /* borrowed; NULL: /dev/shm/o1d-metrics-v1 */
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

/* Opens the published metrics. Returns -ENOENT (one log line naming both
 * places) when neither exists, -EACCES/-EPERM when they cannot be read,
 * -O1_E_VERSION for another layout. *out: caller owns, reader_close. */
int o1_metrics_reader_open(const struct o1_metrics_reader_opts *opts,
			   struct o1_metrics_reader **out);
void o1_metrics_reader_close(struct o1_metrics_reader *r);
enum o1_metrics_backend
o1_metrics_reader_backend(const struct o1_metrics_reader *r);
/* Pin directory or file being read; valid until reader_close. */
const char *o1_metrics_reader_path(const struct o1_metrics_reader *r);
int o1_metrics_reader_snapshot(struct o1_metrics_reader *r,
			       struct o1_metrics_snapshot *out);

/* out = now - before for counters, histograms and graph counts; gauges,
 * info and bucket sizes are now's. A field that went down (the daemon
 * restarted) counts from zero: now's value. */
void o1_metrics_snapshot_delta(const struct o1_metrics_snapshot *before,
			       const struct o1_metrics_snapshot *now,
			       struct o1_metrics_snapshot *out);

/* Observations in h: the sum of its slots (what quantiles are taken of). */
uint64_t o1_metrics_hist_total(const struct o1_metrics_hist *h);
/* Estimates the q-quantile (0 <= q <= 1) in microseconds, interpolating
 * linearly inside the slot that holds it (the last slot is taken as
 * [2^31, 2^32) us). -ENODATA when h is empty, -EINVAL for q out of range. */
int o1_metrics_hist_quantile_us(const struct o1_metrics_hist *h, double q,
				double *out_us);

#endif

/* Text renderings of a metrics snapshot: the Prometheus exposition format
 * (o1ctl metrics --prometheus, the sidecar's GET /metrics) and JSON
 * (o1ctl --json). Both name fields as metrics.h and the BTF do. */
#ifndef O1_METRICS_RENDER_H
#define O1_METRICS_RENDER_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "metrics_reader.h"

/* Writes the Prometheus text format (version 0.0.4) to f: counters as
 * o1_*_total, gauges, histograms as o1_*_seconds with cumulative buckets
 * whose le bounds are the log2 slot bounds in seconds. Returns 0 or -EIO. */
int o1_metrics_render_prometheus(const struct o1_metrics_snapshot *s, FILE *f);

/* Builds a JSON object of s; *out is owned by the caller (cJSON_Delete).
 * Values above 2^53 lose precision (JSON numbers are doubles). */
int o1_metrics_render_json(const struct o1_metrics_snapshot *s, cJSON **out);

#endif

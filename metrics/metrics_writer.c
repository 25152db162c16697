/* Opening and closing the daemon's metric regions; the counting itself is
 * inline in metrics_writer.h. AUTO mode tries the pinned BPF maps first and
 * falls back to the shared-memory file; the choice is logged once. When
 * the maps are in use, a fallback file left by an earlier run is removed so
 * readers cannot mistake it for live data (never one a live writer holds).
 * A place a live o1d publishes at is never taken over (metrics_owner.h):
 * that fails with -EADDRINUSE in every mode, AUTO included. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "metrics_owner.h"
#include "metrics_writer.h"

const char *o1_metrics_backend_name(enum o1_metrics_backend b)
{
	switch (b) {
	case O1_METRICS_BACKEND_BPF:
		return "bpf";
	case O1_METRICS_BACKEND_SHM:
		return "shm";
	case O1_METRICS_BACKEND_ANON:
		return "anon";
	default:
		return "none";
	}
}

const char *o1_metrics_path(const struct o1_metrics *m)
{
	return m->maps.path;
}

static void opts_defaults(const struct o1_metrics_opts *in,
			  struct o1_metrics_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->gid = -1;
	if (in)
		memcpy(o, in, in->sz < sizeof(*o) ? in->sz : sizeof(*o));
	o->sz = sizeof(*o);
	if (!o->bpf_dir || !*o->bpf_dir)
		o->bpf_dir = O1_METRICS_DEFAULT_BPF_DIR;
	if (!o->shm_path || !*o->shm_path)
		o->shm_path = O1_METRICS_DEFAULT_SHM_PATH;
	if (!o->file_mode)
		o->file_mode = O1_METRICS_DEFAULT_MODE;
}

static int open_bpf(struct o1_metrics *m, const struct o1_metrics_opts *o,
		    const struct o1_metrics_perm *perm)
{
	int err = o1_metrics_maps_create_bpf(&m->maps, o->bpf_dir, perm);
	pid_t pid;

	if (err)
		return err;
	if (o1_metrics_owner_find(o->shm_path, &pid) == 0 &&
	    unlink(o->shm_path) == 0)
		o1_info("metrics: removed stale fallback file %s", o->shm_path);
	return 0;
}

static int open_backend(struct o1_metrics *m, const struct o1_metrics_opts *o)
{
	struct o1_metrics_perm perm = {.gid = o->gid, .mode = o->file_mode};
	int err;

	switch (o->mode) {
	case O1_METRICS_MODE_AUTO:
		err = open_bpf(m, o, &perm);
		if (!err || err == -EADDRINUSE)
			return err; /* a live o1d's pins: refuse, not fall back */
		o1_warn("metrics: pinned BPF maps under %s unavailable (%s); "
			"falling back to %s",
			o->bpf_dir, o1_strerror(err), o->shm_path);
		return o1_metrics_maps_create_shm(&m->maps, o->shm_path, &perm);
	case O1_METRICS_MODE_BPF:
		return open_bpf(m, o, &perm);
	case O1_METRICS_MODE_SHM:
		return o1_metrics_maps_create_shm(&m->maps, o->shm_path, &perm);
	case O1_METRICS_MODE_ANON:
		return o1_metrics_maps_create_anon(&m->maps);
	}
	o1_err("metrics: unknown mode %d", (int)o->mode);
	return -EINVAL;
}

int o1_metrics_open(const struct o1_metrics_opts *opts, struct o1_metrics **out)
{
	struct o1_metrics_opts o;
	struct o1_metrics *m;
	int err;

	opts_defaults(opts, &o);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	err = open_backend(m, &o);
	if (err) {
		if (err != -EADDRINUSE) /* the owner is logged already */
			o1_err("metrics: cannot open metrics (mode %d): %s",
			       (int)o.mode, o1_strerror(err));
		free(m);
		return err;
	}
	m->info = m->maps.base[O1_METRICS_R_INFO];
	m->ctr = m->maps.base[O1_METRICS_R_COUNTERS];
	m->hist = m->maps.base[O1_METRICS_R_HISTS];
	m->graphs = m->maps.base[O1_METRICS_R_GRAPHS];
	m->unpin_on_close = o.unpin_on_close;
	m->perm.gid = o.gid;
	m->perm.mode = o.file_mode;
	o1_info("metrics: publishing through %s at %s",
		o1_metrics_backend_name(m->maps.backend), m->maps.path);
	*out = m;
	return 0;
}

void o1_metrics_close(struct o1_metrics *m)
{
	if (!m)
		return;
	o1_metrics_maps_close(&m->maps, m->unpin_on_close);
	free(m);
}

void o1_metrics_unpublish_on_close(struct o1_metrics *m)
{
	if (m)
		m->unpin_on_close = true;
}

int o1_metrics_graph_set_buckets(struct o1_metrics *m, const uint32_t *sizes,
				 unsigned n)
{
	if (n > O1_METRICS_GRAPH_BUCKETS) {
		o1_err("metrics: %u graph buckets, at most %u are recorded", n,
		       O1_METRICS_GRAPH_BUCKETS);
		return -EINVAL;
	}
	for (unsigned i = 0; i < O1_METRICS_GRAPH_BUCKETS; i++)
		__atomic_store_n(&m->graphs->buckets[i].batch_size,
				 i < n ? sizes[i] : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&m->graphs->n_buckets, n, __ATOMIC_RELEASE);
	return 0;
}

int o1_metrics_graph_set_spans(struct o1_metrics *m, const uint32_t *lens,
			       unsigned n)
{
	if (n > O1_METRICS_GRAPH_SPANS) {
		o1_err("metrics: %u context spans, at most %u are recorded", n,
		       O1_METRICS_GRAPH_SPANS);
		return -EINVAL;
	}
	for (unsigned i = 0; i < O1_METRICS_GRAPH_SPANS; i++)
		__atomic_store_n(&m->graphs->spans[i].context_len,
				 i < n ? lens[i] : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&m->graphs->n_spans, n, __ATOMIC_RELEASE);
	return 0;
}

enum o1_metrics_fail o1_metrics_fail_reason(int err)
{
	switch (-err) {
	case EINVAL:
	case O1_E_FORMAT:
	case O1_E_BOUNDS:
	case O1_E_PROTOCOL:
	case O1_E_UNSUPPORTED:
	case O1_E_NO_DEVOUT: /* asked for what its connection lacks */
	case O1_E_GRAMMAR:   /* its grammar refused, or a dead end */
		return O1_METRICS_FAIL_INVALID;
	case O1_E_CONTEXT:
		return O1_METRICS_FAIL_CONTEXT;
	case O1_E_QUOTA:
	case O1_E_STALLED: /* a per-client limit: how long it may not read */
		return O1_METRICS_FAIL_QUOTA;
	case O1_E_TOKENIZER:
	case O1_E_NO_TOKENIZER:
		return O1_METRICS_FAIL_TOKENIZER;
	case O1_E_DRAINING:
		return O1_METRICS_FAIL_DRAINING;
	case O1_E_CUDA:
	case ENOMEM:
		return O1_METRICS_FAIL_ENGINE;
	default:
		return O1_METRICS_FAIL_INTERNAL;
	}
}

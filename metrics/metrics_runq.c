/* Loading the run-queue delay program from its bpftool skeleton, and
 * pinning its histogram map as <bpf_dir>/v3/o1_runq with the metrics
 * permissions. The program only counts threads of the process given at
 * start (read-only data set before load). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "common/error.h"
#include "common/log.h"
#include "metrics_runq.h"
#include "runqlat.skel.h"

struct o1_metrics_runq {
	struct runqlat *skel;
	char pin[PATH_MAX];
};

static int runq_load(struct o1_metrics_runq *q, pid_t tgid)
{
	int err;

	q->skel = runqlat__open();
	if (!q->skel) {
		o1_err("metrics: opening the run-queue program: %s",
		       strerror(errno));
		return -errno;
	}
	q->skel->rodata->targ_tgid = (uint32_t)tgid;
	err = runqlat__load(q->skel);
	if (err) {
		o1_err("metrics: loading the run-queue program: %s",
		       strerror(-err));
		return err;
	}
	if (bpf_map__value_size(q->skel->maps.o1_runq) !=
	    sizeof(struct o1_metrics_hist)) {
		o1_err("metrics: run-queue histogram is %u bytes, want %zu",
		       bpf_map__value_size(q->skel->maps.o1_runq),
		       sizeof(struct o1_metrics_hist));
		return -O1_E_VERSION;
	}
	err = runqlat__attach(q->skel);
	if (err)
		o1_err("metrics: attaching the run-queue program: %s",
		       strerror(-err));
	return err;
}

static int runq_pin(struct o1_metrics_runq *q, const struct o1_metrics *m)
{
	int n = snprintf(q->pin, sizeof(q->pin), "%s/%s", m->maps.path,
			 O1_METRICS_RUNQ_PIN);
	int err;

	if (n < 0 || (size_t)n >= sizeof(q->pin))
		return -ENAMETOOLONG;
	unlink(q->pin);
	err = bpf_map__pin(q->skel->maps.o1_runq, q->pin);
	if (err) {
		o1_err("metrics: pinning %s: %s", q->pin, strerror(-err));
		q->pin[0] = '\0';
		return err;
	}
	return o1_metrics_set_perm(q->pin, &m->perm);
}

int o1_metrics_runq_start(struct o1_metrics *m, pid_t tgid,
			  struct o1_metrics_runq **out)
{
	struct o1_metrics_runq *q;
	int err;

	*out = NULL;
	if (m->maps.backend != O1_METRICS_BACKEND_BPF) {
		o1_err("metrics: the run-queue program needs the bpf backend; "
		       "metrics are in %s at %s",
		       o1_metrics_backend_name(m->maps.backend), m->maps.path);
		return -O1_E_UNSUPPORTED;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	err = runq_load(q, tgid);
	err = err ?: runq_pin(q, m);
	if (err) {
		o1_metrics_runq_stop(q);
		return err;
	}
	o1_info("metrics: run-queue delay of pid %d in %s", (int)tgid, q->pin);
	*out = q;
	return 0;
}

void o1_metrics_runq_stop(struct o1_metrics_runq *q)
{
	if (!q)
		return;
	if (q->pin[0])
		unlink(q->pin);
	runqlat__destroy(q->skel);
	free(q);
}

/* The optional BPF program (runqlat.bpf.c): run-queue delay of the
 * daemon's threads, from the sched_wakeup/sched_switch tracepoints, into a
 * struct o1_metrics_hist kept in a BPF map pinned as <bpf_dir>/v3/o1_runq
 * beside the other metrics. Built with -DO1_BPF_PROGS=ON (clang with the
 * BPF target and bpftool); otherwise o1_metrics_runq_start returns
 * -O1_E_UNSUPPORTED. Loaded only when the configuration asks for it. */
#ifndef O1_METRICS_RUNQ_H
#define O1_METRICS_RUNQ_H

#include <sys/types.h>

#include "metrics_writer.h"

struct o1_metrics_runq;

/* Loads and attaches the program for the threads of process tgid and pins
 * its histogram next to m's maps (m must use the bpf backend, else
 * -O1_E_UNSUPPORTED). *out: caller owns, o1_metrics_runq_stop. */
int o1_metrics_runq_start(struct o1_metrics *m, pid_t tgid,
			  struct o1_metrics_runq **out);
/* Detaches, unpins and frees. Accepts NULL. */
void o1_metrics_runq_stop(struct o1_metrics_runq *q);

#endif

/* o1_metrics_runq_* when the BPF program is not built (O1_BPF_PROGS=OFF):
 * starting it is a configuration error, reported once. */
#include <stddef.h>

#include "common/error.h"
#include "common/log.h"
#include "metrics_runq.h"

int o1_metrics_runq_start(struct o1_metrics *m, pid_t tgid,
			  struct o1_metrics_runq **out)
{
	(void)m;
	(void)tgid;
	*out = NULL;
	o1_err("metrics: the run-queue BPF program is not built in (configure "
	       "with -DO1_BPF_PROGS=ON)");
	return -O1_E_UNSUPPORTED;
}

void o1_metrics_runq_stop(struct o1_metrics_runq *q)
{
	(void)q;
}

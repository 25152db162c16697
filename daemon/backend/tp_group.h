/* Tensor-parallel groups: the all-reduce that joins N rank backends, as
 * the struct o1_tp_link each rank gets (backend.h), behind one ops table
 * per backend kind.
 *
 * - CPU (tp_group_cpu.c): an in-process all-reduce over the ranks' host
 *   buffers. Each sum is two barriers: every rank publishes its buffer,
 *   then rank r adds elements [r n / N, (r + 1) n / N) of all buffers in
 *   rank order 0, 1, ..., N - 1 into a shared result, then every rank
 *   copies the result. The order of the additions is fixed, so every rank
 *   gets the same bits on every run: the CPU reference of the sharding,
 *   not a product path.
 * - CUDA (tp_group_nccl.c, built with NCCL only): one NCCL communicator
 *   per rank (ncclCommInitAll over the devices), SUM is ncclAllReduce
 *   (ncclFloat, ncclSum, in place) on the rank's stream, so it can be
 *   captured in the rank's CUDA graphs.
 *
 * A failed rank poisons the group (link FAIL): every rank blocked in a
 * SUM or WAIT returns -ECANCELED, and so does every later call; a group is
 * not reused after that (the tensor-parallel backend stops).
 */
#ifndef O1_TP_GROUP_H
#define O1_TP_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

struct o1_tp_group_ops {
	const char *name;
	/* N ranks (1 .. O1_BACKEND_DEVICES_MAX), rank r on DEVICES[r]; SUMs
	 * of at most MAX_FLOATS. NCCL's NVLink multicast is switched off
	 * (NCCL_NVLS_ENABLE=0) before any communicator exists. */
	int (*create)(uint32_t n, const uint32_t *devices, uint64_t max_floats,
		      void **group);
	/* Rank R's link; valid until destroy. */
	void (*link)(void *group, uint32_t r, struct o1_tp_link *out);
	bool (*failed)(const void *group);
	/* Releases rank R's part (its communicator), on rank R's thread
	 * after its backend is destroyed; every rank at once, since NCCL's
	 * finalization waits for the peers. A failed group's parts are
	 * aborted instead. NULL: nothing per rank. */
	void (*rank_fini)(void *group, uint32_t r);
	/* Once every rank is finished. Accepts NULL. */
	void (*destroy)(void *group);
};

extern const struct o1_tp_group_ops o1_tp_group_cpu_ops;
#ifdef O1_WITH_NCCL
extern const struct o1_tp_group_ops o1_tp_group_nccl_ops;
#endif

#endif

/* The CUDA tensor-parallel group (tp_group.h) over NCCL: one communicator
 * per rank from ncclCommInitAll, SUM = ncclAllReduce(ncclFloat, ncclSum)
 * in place on the rank's stream (graph-capturable: NCCL >= 2.9; >= 2.14
 * here for ncclCommFinalize).
 *
 * Failure (link FAIL, an NCCL async error, a CUDA error while waiting)
 * sets the group's atomic flag. A rank never waits on its stream with
 * cudaStreamSynchronize: WAIT polls cudaStreamQuery and the flag, and
 * once the flag is set the rank aborts its own communicator
 * (ncclCommAbort releases kernels waiting on peers) and drains its stream.
 * Each communicator is only touched by its rank's thread once the ranks
 * run (NCCL allows one thread at a time per communicator); the caller's
 * thread creates them all before any rank starts and frees the group
 * after every rank's rank_fini. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/error.h"
#include "common/log.h"
#include "tp_group.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "NCCL 2.14 or later is needed (ncclCommFinalize, graph capture)"
#endif

struct nccl_group;

struct nccl_rank {
	struct nccl_group *g;
	uint32_t r;
	int device;
	ncclComm_t comm; /* NULL once aborted or destroyed */
};

struct nccl_group {
	uint32_t n;
	atomic_bool failed;
	struct nccl_rank ranks[O1_BACKEND_DEVICES_MAX];
};

static int nccl_check(ncclResult_t r, const char *what, uint32_t rank)
{
	if (r == ncclSuccess)
		return 0;
	o1_err("nccl: %s (rank %u): %s", what, rank, ncclGetErrorString(r));
	return -O1_E_CUDA;
}

static void abort_rank(struct nccl_rank *k)
{
	if (k->comm)
		ncclCommAbort(k->comm);
	k->comm = NULL;
}

static int nccl_sum(void *ctx, float *buf, uint64_t n, void *stream)
{
	struct nccl_rank *k = ctx;

	if (atomic_load(&k->g->failed) || !k->comm)
		return -ECANCELED;
	return nccl_check(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum,
					k->comm, (cudaStream_t)stream),
			  "all-reduce", k->r);
}

static void nccl_fail(void *ctx)
{
	atomic_store(&((struct nccl_rank *)ctx)->g->failed, true);
}

/* Has the group failed? Reads this rank's NCCL async error too. */
static bool poll_failed(struct nccl_rank *k)
{
	ncclResult_t ae = ncclSuccess;

	if (k->comm && ncclCommGetAsyncError(k->comm, &ae) == ncclSuccess &&
	    ae != ncclSuccess && ae != ncclInProgress) {
		o1_err("nccl: rank %u: %s", k->r, ncclGetErrorString(ae));
		atomic_store(&k->g->failed, true);
	}
	return atomic_load(&k->g->failed);
}

static int nccl_wait(void *ctx, void *stream)
{
	struct nccl_rank *k = ctx;
	cudaError_t e;

	while ((e = cudaStreamQuery((cudaStream_t)stream)) == cudaErrorNotReady)
		if (poll_failed(k)) {
			abort_rank(k);
			cudaStreamSynchronize((cudaStream_t)stream);
			cudaGetLastError();
			return -ECANCELED;
		}
	if (e != cudaSuccess) {
		o1_err("nccl: rank %u: waiting for its stream: %s", k->r,
		       cudaGetErrorString(e));
		atomic_store(&k->g->failed, true);
		abort_rank(k);
		return -O1_E_CUDA;
	}
	/* A cudaErrorNotReady of the polls must not be taken for the error
	 * of a later launch (O1_CUDA_LAUNCHED reads cudaGetLastError). */
	cudaGetLastError();
	return 0;
}

static void nccl_link(void *group, uint32_t r, struct o1_tp_link *out)
{
	struct nccl_group *g = group;

	*out =
	    (struct o1_tp_link){nccl_sum, nccl_wait, nccl_fail, &g->ranks[r]};
}

static bool nccl_failed(const void *group)
{
	return atomic_load(&((struct nccl_group *)group)->failed);
}

static void nccl_rank_fini(void *group, uint32_t r)
{
	struct nccl_group *g = group;
	struct nccl_rank *k = &g->ranks[r];

	if (!k->comm)
		return;
	if (atomic_load(&g->failed) ||
	    nccl_check(ncclCommFinalize(k->comm), "finalize", r)) {
		abort_rank(k);
		return;
	}
	nccl_check(ncclCommDestroy(k->comm), "destroy", r);
	k->comm = NULL;
}

static void nccl_destroy(void *group)
{
	struct nccl_group *g = group;

	if (!g)
		return;
	for (uint32_t r = 0; r < g->n; r++)
		abort_rank(&g->ranks[r]);
	free(g);
}

/* Distinct, existing devices and a recent enough library. */
static int check_setup(uint32_t n, const uint32_t *devices)
{
	int count = 0, version = 0;

	if (cudaGetDeviceCount(&count) != cudaSuccess) {
		cudaGetLastError();
		count = 0;
	}
	for (uint32_t r = 0; r < n; r++)
		for (uint32_t q = 0; q <= r; q++)
			if (devices[r] >= (uint32_t)count ||
			    (q < r && devices[q] == devices[r])) {
				o1_err("tensor parallel: rank %u on cuda:%u: "
				       "%s (%d devices)",
				       r, devices[r],
				       devices[r] >= (uint32_t)count
					   ? "no such device"
					   : "already another rank's",
				       count);
				return -O1_E_CONFIG;
			}
	if (ncclGetVersion(&version) != ncclSuccess ||
	    version < NCCL_VERSION(2, 14, 0)) {
		o1_err("nccl: library version %d, 2.14 or later needed",
		       version);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

static int nccl_create(uint32_t n, const uint32_t *devices, uint64_t max_floats,
		       void **group)
{
	ncclComm_t comms[O1_BACKEND_DEVICES_MAX];
	int devs[O1_BACKEND_DEVICES_MAX];
	struct nccl_group *g;
	int err;

	(void)max_floats;
	/* NVLink multicast (NVLS) stays off: it can take a shared host's
	 * GPUs out of service. Before any communicator exists. Connections
	 * are made at init rather than at a collective's first use, so that
	 * NCCL allocates nothing in the token loop (unless told otherwise). */
	setenv("NCCL_NVLS_ENABLE", "0", 1);
	setenv("NCCL_RUNTIME_CONNECT", "0", 0);
	if (!n || n > O1_BACKEND_DEVICES_MAX)
		return -EINVAL;
	err = check_setup(n, devices);
	if (err)
		return err;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->n = n;
	for (uint32_t r = 0; r < n; r++)
		devs[r] = (int)devices[r];
	err = nccl_check(ncclCommInitAll(comms, (int)n, devs), "init", 0);
	for (uint32_t r = 0; r < n; r++)
		g->ranks[r] =
		    (struct nccl_rank){g, r, devs[r], err ? NULL : comms[r]};
	if (err) {
		free(g);
		return err;
	}
	*group = g;
	return 0;
}

const struct o1_tp_group_ops o1_tp_group_nccl_ops = {
    .name = "nccl",
    .create = nccl_create,
    .link = nccl_link,
    .failed = nccl_failed,
    .rank_fini = nccl_rank_fini,
    .destroy = nccl_destroy,
};

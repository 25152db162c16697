/* The CUDA backend's device outputs (cuda_private.h).
 *
 * Device outputs (cfg.devout_areas): each area is its own cudaMalloc made
 * at create (a CUDA IPC handle maps a whole allocation, so a client sees
 * its area and nothing else) with an interprocess event. A step's devout
 * entries are served right after the LM head of the chunk holding their
 * row (after the graph launch for a bucket step: outside the graph): per
 * entry an async copy of the 4-byte stamp from a pinned staging slot,
 * then a device-to-device copy of the row; then each touched area's event
 * is recorded. All on the one stream, before the step's synchronization,
 * so the staging slots are not reused while a copy may read them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "cuda_private.h"
#include "kernels/cuda_util.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == O1_BACKEND_IPC_HANDLE_BYTES,
	       "IPC memory handle size");
_Static_assert(sizeof(cudaIpcEventHandle_t) == O1_BACKEND_IPC_HANDLE_BYTES,
	       "IPC event handle size");

/* One devout entry whose row sits at LOCAL in the device logits: the
 * stamp (from staging slot I), then the row. */
static int devout_copy(struct cuda_state *s, const struct o1_step_devout *e,
		       uint32_t i, uint32_t local)
{
	const struct cuda_devout *a = &s->devout[e->area];
	uint32_t r = e->seq & (a->desc.rows - 1);
	uint8_t *base = a->base;
	int err;

	s->stamp_host[i] = e->seq;
	err = O1_CUDA_CHECK(cudaMemcpyAsync(
	    base + a->desc.stamps_off + (uint64_t)r * 4, &s->stamp_host[i], 4,
	    cudaMemcpyHostToDevice, s->stream));
	return err ? err
		   : O1_CUDA_CHECK(cudaMemcpyAsync(
			 base + (uint64_t)r * a->desc.row_stride_bytes,
			 s->logits + (size_t)local * s->d.vocab_size,
			 (size_t)s->d.vocab_size * sizeof(float),
			 cudaMemcpyDeviceToDevice, s->stream));
}

/* Serves the entries whose rows are [C, C + N) of the step's logits rows,
 * now in the device logits; marks their areas in *TOUCHED. Must run
 * before anything changes the device logits. */
int o1_cuda_devout_rows(struct cuda_state *s, const struct o1_step *st,
			uint32_t c, uint32_t n, uint64_t *touched)
{
	int err = 0;

	for (uint32_t i = 0; !err && i < st->n_devout; i++) {
		const struct o1_step_devout *e = &st->devout[i];

		if (e->row < c || e->row - c >= n)
			continue;
		err = devout_copy(s, e, i, e->row - c);
		*touched |= 1ull << e->area;
	}
	return err;
}

/* Records the event of every area the step wrote. */
int o1_cuda_devout_record(struct cuda_state *s, uint64_t touched)
{
	int err = 0;

	for (uint32_t a = 0; !err && a < s->cfg.devout_areas; a++)
		if (touched & (1ull << a))
			err = O1_CUDA_CHECK(
			    cudaEventRecord(s->devout[a].ev, s->stream));
	return err;
}

void o1_cuda_devout_free(struct cuda_state *s)
{
	for (uint32_t i = 0; s->devout && i < s->cfg.devout_areas; i++) {
		if (s->devout[i].ev)
			cudaEventDestroy(s->devout[i].ev);
		cudaFree(s->devout[i].base);
	}
	free(s->devout);
	cudaFreeHost(s->stamp_host);
}

/* Area I: one allocation (rows, then stamps set to UINT32_MAX: never
 * written), its interprocess event and both IPC handles. */
static int alloc_area(struct cuda_state *s, uint32_t i, const char *bus)
{
	struct cuda_devout *a = &s->devout[i];
	struct o1_backend_devout *d = &a->desc;
	uint64_t rows = s->cfg.devout_rows;
	int err;

	d->rows = (uint32_t)rows;
	d->row_floats = s->d.vocab_size;
	d->row_stride_bytes =
	    (uint32_t)((s->d.vocab_size * 4ull + ALIGN_BYTES - 1) /
		       ALIGN_BYTES * ALIGN_BYTES);
	d->stamps_off = rows * d->row_stride_bytes;
	d->area_bytes = (d->stamps_off + rows * 4 + ALIGN_BYTES - 1) /
			ALIGN_BYTES * ALIGN_BYTES;
	memcpy(d->pci_bus_id, bus, sizeof(d->pci_bus_id));
	err =
	    o1_cuda_dev_alloc(&a->base, d->area_bytes, "a device output area");
	err = err ? err
		  : O1_CUDA_CHECK(
			cudaMemsetAsync(a->base, 0, d->stamps_off, s->stream));
	err = err ? err
		  : O1_CUDA_CHECK(
			cudaMemsetAsync((uint8_t *)a->base + d->stamps_off,
					0xff, rows * 4, s->stream));
	err =
	    err ? err
		: O1_CUDA_CHECK(cudaEventCreateWithFlags(
		      &a->ev, cudaEventInterprocess | cudaEventDisableTiming));
	err = err ? err
		  : O1_CUDA_CHECK(cudaIpcGetMemHandle(
			(cudaIpcMemHandle_t *)d->mem_handle, a->base));
	return err ? err
		   : O1_CUDA_CHECK(cudaIpcGetEventHandle(
			 (cudaIpcEventHandle_t *)d->event_handle, a->ev));
}

int o1_cuda_devout_alloc(struct cuda_state *s)
{
	char bus[16] = {0};
	int dev, err;

	if (!s->cfg.devout_areas)
		return 0;
	s->devout = calloc(s->cfg.devout_areas, sizeof(*s->devout));
	if (!s->devout)
		return -ENOMEM;
	err = o1_cuda_host_alloc((void **)&s->stamp_host,
				 s->cfg.max_batch_tokens * sizeof(uint32_t),
				 "device output stamps");
	err = err ? err : O1_CUDA_CHECK(cudaGetDevice(&dev));
	err = err ? err
		  : O1_CUDA_CHECK(
			cudaDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev));
	for (uint32_t i = 0; !err && i < s->cfg.devout_areas; i++)
		err = alloc_area(s, i, bus);
	if (!err)
		o1_info("cuda backend: %u device output areas of %u rows "
			"(%.1f MiB each)",
			s->cfg.devout_areas, s->cfg.devout_rows,
			s->devout[0].desc.area_bytes / 1048576.0);
	return err ? err : O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

int o1_cuda_devout_get(const void *state, uint32_t area,
		       struct o1_backend_devout *out)
{
	const struct cuda_state *s = state;

	*out = s->devout[area].desc;
	return 0;
}

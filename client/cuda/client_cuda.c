/* libo1client-cuda: maps a connection's device output area (CUDA IPC)
 * and hands out device pointers to its rows.
 *
 * The handles come from the daemon's welcome through
 * o1_client_device_output; this library never talks to the daemon. The
 * area's geometry was checked by libo1client (o1_wire_devout_check) and
 * is copied here once, so every row and stamp address stays inside the
 * mapping whatever a later event says: a row index is dev_seq masked by
 * rows - 1. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "o1/client_cuda.h"

struct o1_cuda_output {
	int device;
	uint8_t *base; /* the mapped area */
	cudaEvent_t ev;
	uint32_t *stamp_host; /* pinned, for o1_cuda_output_check */
	struct o1_device_output d;
};

static __thread char last_error[256];

static int fail(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err;
}

const char *o1_cuda_last_error(void)
{
	return last_error;
}

static int cuda_fail(cudaError_t e, const char *what)
{
	return fail(-EIO, "%s: %s", what, cudaGetErrorString(e));
}

static int pick_device(const struct o1_cuda_output_opts *opts,
		       const struct o1_device_output *d, int *dev)
{
	struct o1_cuda_output_opts o = {.sz = sizeof(o), .device = -1};
	cudaError_t e;

	if (opts)
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	if (o.device >= 0) {
		*dev = o.device;
		return 0;
	}
	e = cudaDeviceGetByPCIBusId(dev, d->pci_bus_id);
	return e ? cuda_fail(e, "the daemon's device") : 0;
}

/* Opens the handles on the current device (o->device). */
static int map_area(struct o1_cuda_output *o)
{
	cudaIpcMemHandle_t mh;
	cudaIpcEventHandle_t eh;
	cudaError_t e;

	_Static_assert(sizeof(mh) == sizeof(o->d.mem_handle), "mem handle");
	_Static_assert(sizeof(eh) == sizeof(o->d.event_handle), "ev handle");
	memcpy(&mh, o->d.mem_handle, sizeof(mh));
	memcpy(&eh, o->d.event_handle, sizeof(eh));
	e = cudaIpcOpenMemHandle((void **)&o->base, mh,
				 cudaIpcMemLazyEnablePeerAccess);
	if (e) {
		o->base = NULL;
		return cuda_fail(e, "cudaIpcOpenMemHandle");
	}
	e = cudaIpcOpenEventHandle(&o->ev, eh);
	if (e) {
		o->ev = NULL;
		return cuda_fail(e, "cudaIpcOpenEventHandle");
	}
	e = cudaMallocHost((void **)&o->stamp_host, sizeof(uint32_t));
	if (e) {
		o->stamp_host = NULL;
		return cuda_fail(e, "cudaMallocHost");
	}
	return 0;
}

int o1_cuda_output_open(const struct o1_client *c,
			const struct o1_cuda_output_opts *opts,
			struct o1_cuda_output **out)
{
	struct o1_cuda_output *o;
	int prev = -1, ret;
	cudaError_t e;

	if (!c || !out || (opts && opts->sz < sizeof(size_t)))
		return fail(-EINVAL, "bad arguments");
	o = calloc(1, sizeof(*o));
	if (!o)
		return fail(-ENOMEM, "out of memory");
	o->d.sz = sizeof(o->d);
	ret = o1_client_device_output(c, &o->d);
	if (ret) {
		fail(ret, "%s", o1_last_error());
		goto free_o;
	}
	ret = pick_device(opts, &o->d, &o->device);
	if (ret)
		goto free_o;
	e = cudaGetDevice(&prev);
	if (!e)
		e = cudaSetDevice(o->device);
	if (e) {
		ret = cuda_fail(e, "cudaSetDevice");
		goto free_o;
	}
	ret = map_area(o);
	cudaSetDevice(prev);
	if (ret)
		goto free_o;
	*out = o;
	return 0;
free_o:
	o1_cuda_output_close(o);
	return ret;
}

void o1_cuda_output_close(struct o1_cuda_output *o)
{
	if (!o)
		return;
	if (o->ev)
		cudaEventDestroy(o->ev);
	if (o->base)
		cudaIpcCloseMemHandle(o->base);
	if (o->stamp_host)
		cudaFreeHost(o->stamp_host);
	free(o);
}

static int check_event(const struct o1_cuda_output *o,
		       const struct o1_event *ev)
{
	if (!o || !ev)
		return fail(-EINVAL, "bad arguments");
	if (ev->type != O1_EVENT_TOKEN || ev->n_ids != 1 ||
	    !(ev->has_logprobs & O1_TOKEN_HAS_DEVICE))
		return fail(-EINVAL, "not a TOKEN with a device row");
	return 0;
}

static uint32_t row_of(const struct o1_cuda_output *o, uint32_t seq)
{
	return seq & (o->d.rows - 1);
}

int o1_cuda_output_row(struct o1_cuda_output *o, const struct o1_event *ev,
		       cudaStream_t stream, const float **row)
{
	int ret = check_event(o, ev);
	cudaError_t e;

	if (ret)
		return ret;
	if (!row)
		return fail(-EINVAL, "bad arguments");
	e = cudaStreamWaitEvent(stream, o->ev, 0);
	if (e)
		return cuda_fail(e, "cudaStreamWaitEvent");
	*row = (const float *)(o->base + (uint64_t)row_of(o, ev->dev_seq) *
					     o->d.row_stride_bytes);
	return 0;
}

int o1_cuda_output_check(struct o1_cuda_output *o, const struct o1_event *ev,
			 cudaStream_t stream)
{
	int ret = check_event(o, ev);
	uint64_t off;
	cudaError_t e;

	if (ret)
		return ret;
	off = o->d.stamps_off + (uint64_t)row_of(o, ev->dev_seq) * 4;
	e = cudaMemcpyAsync(o->stamp_host, o->base + off, sizeof(uint32_t),
			    cudaMemcpyDeviceToHost, stream);
	if (!e)
		e = cudaStreamSynchronize(stream);
	if (e)
		return cuda_fail(e, "reading the row's stamp");
	if (*o->stamp_host != ev->dev_seq)
		return fail(-ESTALE,
			    "row %u of token %u was overwritten (stamp %u): "
			    "the reader fell %u rows behind",
			    row_of(o, ev->dev_seq), ev->dev_seq, *o->stamp_host,
			    o->d.rows);
	return 0;
}

uint32_t o1_cuda_output_rows(const struct o1_cuda_output *o)
{
	return o ? o->d.rows : 0;
}

uint32_t o1_cuda_output_row_floats(const struct o1_cuda_output *o)
{
	return o ? o->d.row_floats : 0;
}

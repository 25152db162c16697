/* libo1client-cuda: a connection's device output area, mapped through CUDA
 * IPC, so that a GPU program reads the daemon's logits where the daemon
 * wrote them, with no copy through host memory.
 *
 * A separate library (it links the CUDA runtime), used beside libo1client:
 * connect with O1_CONNECT_DEVICE_OUT, open the area once, submit with
 * O1_FLAG_DEVICE_LOGITS, and for each TOKEN event (O1_TOKEN_HAS_DEVICE)
 * ask for its row:
 *
 *   o1_cuda_output_row(out, &ev, stream, &row);  // stream waits, row ptr
 *   ... kernels on stream read row[0 .. row_floats) ...
 *   o1_cuda_output_check(out, &ev, stream);      // after those reads
 *
 * The area is a ring of rows the daemon does not wait on: the row of a
 * token is overwritten rows tokens later (all requests of the connection
 * share the ring). o1_cuda_output_check tells whether what the stream
 * read was still the token's row: the daemon sets a row's stamp to the
 * new sequence number before it overwrites the row, and the check reads
 * the stamp after the caller's reads, in stream order.
 *
 * Thread safety: as libo1client (one handle per thread, or a lock).
 * Errors: 0 or a negative code (-errno, o1d codes such as
 * O1_CLIENT_E_NO_DEVOUT, -ESTALE for a lapped row); o1_cuda_last_error()
 * has the details. Options structs start with size_t sz. */
#ifndef O1_CLIENT_CUDA_H
#define O1_CLIENT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "o1/client.h"

#ifdef __cplusplus
extern "C" {
#endif

struct o1_cuda_output;

struct o1_cuda_output_opts {
	size_t sz;
	int device; /* CUDA device to map the area on; -1: the daemon's
		     * (found by its PCI bus id) */
};

/* Maps the device output area of C (its welcome carried the handles) on
 * the device opts names, leaving the caller's current device as it was.
 * opts may be NULL (device -1). *out is yours until
 * o1_cuda_output_close; it does not depend on C staying open. Returns 0,
 * O1_CLIENT_E_NO_DEVOUT, -EINVAL, -ENOMEM or -EIO (a CUDA call failed:
 * see o1_cuda_last_error). */
int o1_cuda_output_open(const struct o1_client *c,
			const struct o1_cuda_output_opts *opts,
			struct o1_cuda_output **out);
/* Unmaps. Accepts NULL. Device pointers from it become invalid. */
void o1_cuda_output_close(struct o1_cuda_output *o);
/* For a TOKEN event with O1_TOKEN_HAS_DEVICE: makes STREAM wait for the
 * daemon's writes (the area's interprocess event) and sets *row to the
 * token's logits row on the device (row_floats floats). Returns 0,
 * -EINVAL (NULL arguments, not such an event) or -EIO. */
int o1_cuda_output_row(struct o1_cuda_output *o, const struct o1_event *ev,
		       cudaStream_t stream, const float **row);
/* Call once the reads of ev's row were enqueued on STREAM: reads the
 * row's stamp after them (and waits for STREAM). Returns 0 when the row
 * read was ev's, -ESTALE when the ring lapped it, -EINVAL or -EIO. */
int o1_cuda_output_check(struct o1_cuda_output *o, const struct o1_event *ev,
			 cudaStream_t stream);
/* The ring's geometry: rows, and floats per row (the vocabulary). */
uint32_t o1_cuda_output_rows(const struct o1_cuda_output *o);
uint32_t o1_cuda_output_row_floats(const struct o1_cuda_output *o);
/* Details of this thread's last error in this library ("" if none). */
const char *o1_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif

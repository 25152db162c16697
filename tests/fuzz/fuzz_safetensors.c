/* libFuzzer harness for the safetensors header parser: any image either
 * fails cleanly or yields tensors that lie inside the image, have the byte
 * size their shape and dtype imply, and are found again by name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

static uint64_t elements(const struct o1_st_tensor *t)
{
	uint64_t n = 1;

	for (uint32_t i = 0; i < t->n_dims; i++)
		n *= t->shape[i];
	return n;
}

static void check_tensor(const struct o1_safetensors *st,
			 const struct o1_st_tensor *t, const uint8_t *data,
			 size_t size)
{
	const uint8_t *p = t->data;
	uint32_t esize = t->dtype == O1_DTYPE_F32 ? 4 : 2;
	volatile uint8_t sink;

	if (p < data || t->n_bytes > size ||
	    p - data > (ptrdiff_t)(size - t->n_bytes) ||
	    elements(t) * esize != t->n_bytes || t->n_dims > O1_ST_MAX_DIMS ||
	    o1_safetensors_find(st, t->name) != t)
		abort();
	if (t->n_bytes) {
		sink = p[0];
		sink = p[t->n_bytes - 1];
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct o1_safetensors *st;

	if (o1_safetensors_open_memory(data, size, &st) != 0)
		return 0;
	for (uint64_t i = 0; i < o1_safetensors_n_tensors(st); i++)
		check_tensor(st, o1_safetensors_tensor(st, i), data, size);
	o1_safetensors_close(st);
	return 0;
}

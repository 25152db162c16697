/* Device code the attention kernels share (attention.cu's row kernel,
 * attention_decode.cu): where a row of a batch belongs. */
#ifndef O1_ATTENTION_DEV_H
#define O1_ATTENTION_DEV_H

#include <stdint.h>

/* The sequence of batch row ROW: the last S of N with q_off[S] <= ROW
 * (q_off ascending, q_off[0] = 0; attention.h's batch). */
static inline __device__ uint32_t attn_seq_of_row(const uint32_t *q_off,
						  uint32_t n, uint32_t row)
{
	uint32_t lo = 0, hi = n;

	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;

		if (q_off[mid] <= row)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

#endif

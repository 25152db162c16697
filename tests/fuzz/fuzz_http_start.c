/* libFuzzer harness for the sidecar's first-bytes check
 * (o1_sidecar_request_start): any first 16 bytes of a connection, judged
 * against a second statement of the rule written as a scan over the
 * bytes' classes, and every prefix of an accepted start is accepted too
 * (a peek that returns fewer bytes must never refuse a request that more
 * bytes would have let through). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "tools/sidecar/sidecar_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The rule as a state machine: 0 empty lines, 1 method letters, 2 the
 * space seen. */
static bool oracle(const uint8_t *b, size_t n)
{
	size_t letters = 0;
	int state = 0;

	for (size_t k = 0; k < n; k++) {
		bool upper = b[k] >= 'A' && b[k] <= 'Z';

		if (state == 0 && (b[k] == '\r' || b[k] == '\n'))
			continue;
		if (state <= 1 && upper) {
			state = 1;
			if (++letters > O1_SIDECAR_START_BYTES - 2)
				return false;
			continue;
		}
		if (state == 1 && b[k] == ' ')
			return true; /* the method's end: the rest is the URI */
		return false;
	}
	return true; /* a prefix of a request start */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n = size < O1_SIDECAR_START_BYTES ? size
						 : O1_SIDECAR_START_BYTES;
	bool got = o1_sidecar_request_start(data, n);

	if (got != oracle(data, n))
		abort();
	for (size_t k = 0; got && k < n; k++)
		if (!o1_sidecar_request_start(data, k))
			abort();
	return 0;
}

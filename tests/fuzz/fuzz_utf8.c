/* libFuzzer harness for common/utf8: on any bytes, the decoders, the
 * byte-at-a-time form and the whole-buffer check agree with each other.
 * Every character the strict decoder takes encodes back to the same bytes,
 * and is also taken by the surrogate-passing decoder; where valid() says
 * the input is bad, the strict walk stops at the same offset. Nothing
 * reads past the input (ASan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The character at S by o1_utf8_lead_len and o1_utf8_cont_ok. */
static size_t stream_len(const uint8_t *s, size_t len)
{
	size_t n = o1_utf8_lead_len(s[0]);

	if (!n || n > len)
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!o1_utf8_cont_ok(s[0], i, s[i]))
			return 0;
	return n;
}

/* Checks the character at S; returns its strict length (0: none). */
static size_t check_at(const uint8_t *s, size_t len)
{
	uint8_t enc[O1_UTF8_MAX_BYTES];
	uint32_t cp = 0, cp2 = 0;
	size_t n = o1_utf8_decode(s, len, &cp);
	size_t n2 = o1_utf8_decode_surrogates(s, len, &cp2);

	if (n != stream_len(s, len))
		abort();
	if (!n) {
		if (n2 && (n2 != 3 || cp2 < 0xd800 || cp2 > 0xdfff))
			abort();
		return 0;
	}
	if (n2 != n || cp2 != cp || cp > O1_UTF8_MAX_CP ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		abort();
	if (o1_utf8_encode(cp, enc) != n || memcmp(enc, s, n))
		abort();
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t i = 0, bad = size + 1;
	bool ok = o1_utf8_valid(data, size, &bad);

	while (i < size) {
		size_t n = check_at(data + i, size - i);

		if (!n)
			break;
		i += n;
	}
	if (ok != (i == size) || (!ok && bad != i))
		abort();
	for (size_t k = i + 1; k < size; k++)
		check_at(data + k, size - k);
	return 0;
}

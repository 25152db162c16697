/* Byte-level input checks (see sidecar_input.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/utf8.h"
#include "sidecar_input.h"

/* The offset of the first \u0000 escape inside a JSON string of
 * S[0, N), or N. Outside strings a backslash means nothing; inside, it
 * escapes the next byte. */
static size_t nul_escape(const char *s, size_t n)
{
	bool in = false;

	for (size_t i = 0; i < n; i++) {
		if (!in) {
			in = s[i] == '"';
			continue;
		}
		if (s[i] == '"') {
			in = false;
		} else if (s[i] == '\\' && i + 1 < n) {
			if (s[i + 1] == 'u' && i + 6 <= n &&
			    !memcmp(s + i + 2, "0000", 4))
				return i;
			i++;
		}
	}
	return n;
}

int o1_sidecar_body_check(const char *body, size_t len, char *why, size_t cap)
{
	const char *nul = memchr(body, 0, len);
	size_t at;

	if (nul) {
		snprintf(why, cap, "the body holds a NUL byte at offset %zu",
			 (size_t)(nul - body));
		return -EINVAL;
	}
	if (!o1_utf8_valid(body, len, &at)) {
		snprintf(why, cap,
			 "the body is not UTF-8 (a bad byte at offset %zu)",
			 at);
		return -EINVAL;
	}
	at = nul_escape(body, len);
	if (at < len) {
		snprintf(why, cap,
			 "a string holds \\u0000 (offset %zu): NUL characters "
			 "are not accepted",
			 at);
		return -EINVAL;
	}
	return 0;
}

void o1_sidecar_utf8_clean(const char *in, char *out, size_t cap)
{
	const uint8_t *p = (const uint8_t *)in;
	size_t n = strlen(in), o = 0;

	for (size_t i = 0; i < n;) {
		size_t k = o1_utf8_decode(p + i, n - i, NULL);
		const char *src = k ? in + i : "\xef\xbf\xbd";
		size_t len = k ? k : 3;

		if (o + len >= cap)
			break;
		memcpy(out + o, src, len);
		o += len;
		i += k ? k : 1;
	}
	out[o] = 0;
}

static bool is_method_char(uint8_t c)
{
	return c >= 'A' && c <= 'Z';
}

bool o1_sidecar_request_start(const uint8_t *b, size_t n)
{
	size_t i = 0, j;

	while (i < n && (b[i] == '\r' || b[i] == '\n'))
		i++;
	for (j = i; j < n && is_method_char(b[j]); j++)
		;
	if (j - i >= O1_SIDECAR_START_BYTES - 1)
		return false;
	return j == n || (b[j] == ' ' && j > i);
}

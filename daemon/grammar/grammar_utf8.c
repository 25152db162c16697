/* UTF-8 for the grammar compiler: code point ranges as byte sequence
 * patterns, so a class over code points becomes byte edges that accept
 * exactly the UTF-8 forms of its members (the splitting RE2 and Rust's
 * utf8-ranges describe: a range is cut where the encoded length changes,
 * then where the continuation bytes stop covering their full 0x80-0xBF
 * span, until each piece is a product of per-byte ranges).
 */
#include "grammar/grammar_int.h"

int gr_utf8_put(uint32_t cp, uint8_t *out)
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xc0 | (cp >> 6));
		out[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xe0 | (cp >> 12));
		out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (uint8_t)(0xf0 | (cp >> 18));
	out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

int gr_utf8_get(const uint8_t *s, size_t len, uint32_t *cp)
{
	static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
	int n;
	uint32_t c;

	if (!len)
		return 0;
	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, c = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, c = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, c = s[0] & 0x07;
	else
		return 0;
	if ((size_t)n > len)
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min_cp[n] || c > GR_MAX_CP || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

static int emit(uint32_t lo, uint32_t hi, struct gutf8_seq *out, int n,
		int cap)
{
	uint8_t a[4], b[4];
	int len = gr_utf8_put(lo, a);

	gr_utf8_put(hi, b);
	if (n >= cap)
		return -1;
	out[n].n = (uint8_t)len;
	for (int i = 0; i < len; i++) {
		out[n].lo[i] = a[i];
		out[n].hi[i] = b[i];
	}
	return n + 1;
}

static int split(uint32_t lo, uint32_t hi, struct gutf8_seq *out, int n,
		 int cap)
{
	static const uint32_t len_max[3] = {0x7f, 0x7ff, 0xffff};
	int len;

	if (n < 0 || lo > hi)
		return n;
	for (int i = 0; i < 3; i++) {
		if (lo <= len_max[i] && hi > len_max[i])
			return split(len_max[i] + 1, hi, out,
				     split(lo, len_max[i], out, n, cap), cap);
	}
	len = lo < 0x80 ? 1 : lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
	for (int i = 1; i < len; i++) {
		uint32_t m = (1u << (6 * i)) - 1;

		if ((lo & ~m) == (hi & ~m))
			continue;
		if (lo & m)
			return split((lo | m) + 1, hi, out,
				     split(lo, lo | m, out, n, cap), cap);
		if ((hi & m) != m)
			return split(hi & ~m, hi, out,
				     split(lo, (hi & ~m) - 1, out, n, cap),
				     cap);
	}
	return emit(lo, hi, out, n, cap);
}

int gr_utf8_split(uint32_t lo, uint32_t hi, struct gutf8_seq *out, int cap)
{
	return split(lo, hi, out, 0, cap);
}

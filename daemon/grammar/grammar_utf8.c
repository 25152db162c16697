/* UTF-8 for the grammar compiler: code point ranges as byte sequence
 * patterns, so a class over code points becomes byte edges that accept
 * exactly the UTF-8 forms of its members (the splitting RE2 and Rust's
 * utf8-ranges describe: a range is cut where the encoded length changes,
 * then where the continuation bytes stop covering their full 0x80-0xBF
 * span, until each piece is a product of per-byte ranges).
 */
#include "common/utf8.h"
#include "grammar/grammar_int.h"

static int emit(uint32_t lo, uint32_t hi, struct gutf8_seq *out, int n,
		int cap)
{
	uint8_t a[4], b[4];
	int len = (int)o1_utf8_encode(lo, a);

	o1_utf8_encode(hi, b);
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

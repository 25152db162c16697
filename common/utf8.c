/* UTF-8 (see utf8.h). The rules are the Unicode standard's table of
 * well-formed byte sequences: the lead byte fixes the length, and only the
 * second byte's range depends on the lead (E0 and F0 cut off overlong
 * forms, ED the surrogates, F4 what lies above U+10FFFF). */
#include "utf8.h"

size_t o1_utf8_encode(uint32_t cp, void *out)
{
	uint8_t *o = out;

	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uint8_t)(0xc0 | cp >> 6);
		o[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uint8_t)(0xe0 | cp >> 12);
		o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	if (cp > O1_UTF8_MAX_CP)
		return 0;
	o[0] = (uint8_t)(0xf0 | cp >> 18);
	o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

size_t o1_utf8_lead_len(uint8_t b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xc2 && b <= 0xdf)
		return 2;
	if (b >= 0xe0 && b <= 0xef)
		return 3;
	if (b >= 0xf0 && b <= 0xf4)
		return 4;
	return 0;
}

bool o1_utf8_cont_ok(uint8_t lead, size_t i, uint8_t b)
{
	uint8_t lo = 0x80, hi = 0xbf;

	if (i == 1) {
		if (lead == 0xe0)
			lo = 0xa0; /* overlong below U+0800 */
		else if (lead == 0xed)
			hi = 0x9f; /* surrogates */
		else if (lead == 0xf0)
			lo = 0x90; /* overlong below U+10000 */
		else if (lead == 0xf4)
			hi = 0x8f; /* above U+10FFFF */
	}
	return b >= lo && b <= hi;
}

/* The decoder behind both entry points; SURROGATES widens ED's second
 * byte to the whole continuation range. */
static size_t decode(const uint8_t *s, size_t len, bool surrogates,
		     uint32_t *cp)
{
	size_t n = len ? o1_utf8_lead_len(s[0]) : 0;
	uint32_t c;

	if (!n || n > len)
		return 0;
	c = n == 1 ? s[0] : s[0] & (0x7fu >> n);
	for (size_t i = 1; i < n; i++) {
		bool ok = o1_utf8_cont_ok(s[0], i, s[i]) ||
			  (surrogates && s[0] == 0xed && s[i] >= 0x80 &&
			   s[i] <= 0xbf);

		if (!ok)
			return 0;
		c = c << 6 | (s[i] & 0x3fu);
	}
	if (cp)
		*cp = c;
	return n;
}

size_t o1_utf8_decode(const void *s, size_t len, uint32_t *cp)
{
	return decode(s, len, false, cp);
}

size_t o1_utf8_decode_surrogates(const void *s, size_t len, uint32_t *cp)
{
	return decode(s, len, true, cp);
}

bool o1_utf8_valid(const void *s, size_t n, size_t *bad)
{
	const uint8_t *p = s;

	for (size_t i = 0; i < n;) {
		size_t k = decode(p + i, n - i, false, NULL);

		if (!k) {
			if (bad)
				*bad = i;
			return false;
		}
		i += k;
	}
	return true;
}

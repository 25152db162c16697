/* Strings as Python sees them: UTF-8 text indexed by code point, Python's
 * whitespace set (str.isspace), case mapping, find and replace.
 *
 * Invalid UTF-8 never fails: a byte that does not start a valid sequence is
 * taken as one code point of its own value, so lengths and offsets stay
 * consistent. Case mapping covers Latin (ASCII, Latin-1, Extended-A),
 * Greek, Cyrillic, Armenian and fullwidth Latin, one code point to one
 * (plus German sharp s to "SS"); other scripts pass unchanged.
 */
#include <string.h>

#include "common/utf8.h"
#include "template/jinja_int.h"

uint32_t ju_next(struct jstr s, size_t *i)
{
	uint32_t cp;
	size_t n = o1_utf8_decode_surrogates(s.p + *i, s.n - *i, &cp);

	if (!n) {
		(*i)++;
		return (unsigned char)s.p[*i - 1];
	}
	*i += n;
	return cp;
}

size_t ju_len(struct jstr s)
{
	size_t n = 0, i = 0;

	while (i < s.n) {
		ju_next(s, &i);
		n++;
	}
	return n;
}

size_t ju_offset(struct jstr s, size_t cp_index)
{
	size_t i = 0;

	while (cp_index-- && i < s.n)
		ju_next(s, &i);
	return i;
}

/* Python's str.isspace: White_Space plus the separators \x1c-\x1f. */
bool ju_isspace(uint32_t cp)
{
	if (cp < 0x80)
		return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) ||
		       (cp >= 0x1c && cp <= 0x1f);
	return cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
	       cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

static bool in_chars(uint32_t cp, const struct jstr *chars)
{
	size_t i = 0;

	if (!chars)
		return ju_isspace(cp);
	while (i < chars->n)
		if (ju_next(*chars, &i) == cp)
			return true;
	return false;
}

struct jstr ju_strip(struct jstr s, struct jstr *chars, bool left, bool right)
{
	size_t start = 0, end = s.n, i = 0;

	if (left) {
		while (i < s.n) {
			size_t j = i;

			if (!in_chars(ju_next(s, &j), chars))
				break;
			i = j;
		}
		start = i;
	}
	if (right) {
		end = start;
		for (i = start; i < s.n;)
			if (!in_chars(ju_next(s, &i), chars))
				end = i;
	}
	return (struct jstr){s.p + start, end - start};
}

/* Pairs where upper = lower - 1, alternating from an even upper. */
static bool alternating(uint32_t cp)
{
	return (cp >= 0x100 && cp <= 0x12f) || (cp >= 0x132 && cp <= 0x137) ||
	       (cp >= 0x14a && cp <= 0x177) || (cp >= 0x460 && cp <= 0x481) ||
	       (cp >= 0x48a && cp <= 0x4bf) || (cp >= 0x4d0 && cp <= 0x52f);
}

/* Pairs starting from an odd upper. */
static bool alternating_odd(uint32_t cp)
{
	return (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e) ||
	       (cp >= 0x4c1 && cp <= 0x4ce);
}

static uint32_t to_lower(uint32_t cp)
{
	if (cp < 0x80)
		return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
	if ((cp >= 0xc0 && cp <= 0xde && cp != 0xd7) ||
	    (cp >= 0x391 && cp <= 0x3ab && cp != 0x3a2) ||
	    (cp >= 0x410 && cp <= 0x42f) || (cp >= 0xff21 && cp <= 0xff3a))
		return cp + 32;
	if (cp >= 0x400 && cp <= 0x40f)
		return cp + 80;
	if (cp >= 0x531 && cp <= 0x556)
		return cp + 48;
	if (alternating(cp))
		return cp % 2 ? cp : cp + 1;
	if (alternating_odd(cp))
		return cp % 2 ? cp + 1 : cp;
	switch (cp) {
	case 0x178: return 0xff;
	case 0x386: return 0x3ac;
	case 0x388: case 0x389: case 0x38a: return cp + 37;
	case 0x38c: return 0x3cc;
	case 0x38e: case 0x38f: return cp + 63;
	default: return cp;
	}
}

static uint32_t to_upper(uint32_t cp)
{
	if (cp < 0x80)
		return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
	if ((cp >= 0xe0 && cp <= 0xfe && cp != 0xf7) ||
	    (cp >= 0x3b1 && cp <= 0x3cb && cp != 0x3c2) ||
	    (cp >= 0x430 && cp <= 0x44f) || (cp >= 0xff41 && cp <= 0xff5a))
		return cp - 32;
	if (cp >= 0x450 && cp <= 0x45f)
		return cp - 80;
	if (cp >= 0x561 && cp <= 0x586)
		return cp - 48;
	if (alternating(cp))
		return cp % 2 ? cp - 1 : cp;
	if (alternating_odd(cp))
		return cp % 2 ? cp : cp - 1;
	switch (cp) {
	case 0xb5: return 0x39c;
	case 0xff: return 0x178;
	case 0x131: return 'I';
	case 0x17f: return 'S';
	case 0x3c2: return 0x3a3;
	case 0x3ac: return 0x386;
	case 0x3ad: case 0x3ae: case 0x3af: return cp - 37;
	case 0x3cc: return 0x38c;
	case 0x3cd: case 0x3ce: return cp - 63;
	default: return cp;
	}
}

static bool cased(uint32_t cp)
{
	return to_lower(cp) != cp || to_upper(cp) != cp || cp == 0xdf;
}

/* UPPER: 0 lower, 1 upper, 2 title case (German sharp s: "SS" / "Ss"). */
static void put_cp(struct jctx *c, const struct jnode *at, struct jbuf *b,
		   uint32_t cp, int upper)
{
	char enc[4];

	if (upper && cp == 0xdf) {
		jbuf_put(c, at, b, upper == 2 ? "Ss" : "SS", 2);
		return;
	}
	cp = upper ? to_upper(cp) : to_lower(cp);
	jbuf_put(c, at, b, enc, o1_utf8_encode(cp, enc));
}

/* How code point number K (preceded by PREV) is cased, as put_cp's
 * UPPER. */
static int wants_upper(enum ju_case how, size_t k, uint32_t prev)
{
	switch (how) {
	case JU_UPPER:
		return 1;
	case JU_LOWER:
		return 0;
	case JU_CAPITALIZE:
		return k == 0 ? 2 : 0;
	default: /* JU_TITLE: after a character without case */
		return k == 0 || !cased(prev) ? 2 : 0;
	}
}

struct jstr ju_case(struct jctx *c, const struct jnode *at, struct jstr s,
		    enum ju_case how)
{
	struct jbuf b = {0};
	uint32_t prev = 0;
	size_t i = 0;

	for (size_t k = 0; i < s.n; k++) {
		uint32_t cp = ju_next(s, &i);

		put_cp(c, at, &b, cp, wants_upper(how, k, prev));
		prev = cp;
	}
	return jbuf_str(&b);
}

ptrdiff_t ju_find(struct jstr hay, struct jstr needle, size_t start)
{
	const char *p;

	if (start > hay.n)
		return -1;
	if (!needle.n)
		return (ptrdiff_t)start;
	p = memmem(hay.p + start, hay.n - start, needle.p, needle.n);
	return p ? p - hay.p : -1;
}

/* Python's replace with an empty OLD: NEW before every character and at
 * the end, COUNT times at most. */
static void replace_empty(struct jctx *c, const struct jnode *at,
			  struct jbuf *b, struct jstr s, struct jstr new_,
			  int64_t count)
{
	size_t i = 0;

	while (i <= s.n) {
		size_t j = i;

		if (count-- != 0)
			jbuf_put(c, at, b, new_.p, new_.n);
		if (i == s.n)
			break;
		ju_next(s, &j);
		jbuf_put(c, at, b, s.p + i, j - i);
		i = j;
	}
}

struct jstr ju_replace(struct jctx *c, const struct jnode *at, struct jstr s,
		       struct jstr old, struct jstr new_, int64_t count)
{
	struct jbuf b = {0};
	size_t i = 0;
	ptrdiff_t hit;

	if (!old.n) {
		replace_empty(c, at, &b, s, new_, count);
		return jbuf_str(&b);
	}
	while (count-- != 0 && (hit = ju_find(s, old, i)) >= 0) {
		jbuf_put(c, at, &b, s.p + i, (size_t)hit - i);
		jbuf_put(c, at, &b, new_.p, new_.n);
		i = (size_t)hit + old.n;
	}
	jbuf_put(c, at, &b, s.p + i, s.n - i);
	return jbuf_str(&b);
}

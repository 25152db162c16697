/* Number bounds and string formats for the JSON Schema compiler.
 *
 * A bounded number is written in plain decimal (no exponent): sign,
 * integer part, optional fraction. Its grammar splits on the sign (a
 * negative number's magnitude is bounded the other way round, and -0 is
 * left out), then on the integer part: integer parts strictly inside the
 * bounds take any fraction, an integer part equal to a bound takes the
 * fractions on the right side of the bound's fraction. Fractions are
 * compared digit by digit as decimals (so "5" and "50" are equal), with
 * the recursion on the first digit: digits strictly between the bounds'
 * digits leave the rest free, a digit equal to a bound's digit carries
 * that bound on to the rest. Bounds are read as the shortest decimal that
 * gives the double back (1.1, not 1.1000000000000001).
 *
 * Digits are capped (grammar_schema_int.h) so that a model cannot write
 * them forever: an integer part without an upper bound stops at
 * max(GS_INT_DIGITS, the lower bound's digits); a fraction has at most
 * ROOM digits, max(GS_FRAC_DIGITS, 1 + the longest bound fraction), so
 * that between two distinct bounds a fraction always fits (a and b with
 * L digits have a + 5e-(L+1) strictly between them).
 *
 * Formats follow RFC 3339 (date with the days of each month and leap
 * years, time, date-time), RFC 4122's textual uuid, dotted-quad ipv4 and
 * a dot-atom email address (RFC 5321 without quoted local parts or
 * address literals). Two RFC 3339 corners are left out rather than let
 * through wrongly: year 0000 (which ISO 8601 admits only by agreement,
 * and validators refuse), and leap seconds other than 23:59:60 in UTC
 * (one at another minute, or under an offset, is valid only at the
 * matching local time, which this grammar does not work out). A time's
 * fraction of a second has 1 to 9 digits: RFC 3339 sets no limit, but
 * nanoseconds are the finest any clock or date library keeps (a tenth
 * digit is noise to every reader), and without a cap a model could write
 * digits until max_tokens, as the number caps above prevent elsewhere.
 */
#include "grammar/grammar_schema_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#define FRAC_MAX 40

/* A bound: |value| = ip.fp, ip < 10^18, fp without trailing zeros. */
struct dec {
	bool set, strict, neg;
	double value;
	uint64_t ip;
	char fp[FRAC_MAX + 1];
};

/* X as a decimal; false when it needs more digits than are kept. */
static bool to_dec(double x, struct dec *d)
{
	char txt[40], digits[48];
	const char *p, *e;
	int n = 0, int_digits = -1, point, k = 0;

	gs_json_number(x, txt);
	d->neg = txt[0] == '-';
	d->value = x;
	e = strpbrk(txt, "eE");
	for (p = txt + d->neg; *p && p != e; p++) {
		if (*p == '.')
			int_digits = n;
		else if (n < 40)
			digits[n++] = *p;
	}
	point = (int_digits < 0 ? n : int_digits) + (e ? atoi(e + 1) : 0);
	d->ip = 0;
	for (int i = 0; i < point; i++) {
		if (d->ip >= 100000000000000000ull)
			return false;
		d->ip = d->ip * 10 + (uint64_t)(i < n ? digits[i] - '0' : 0);
	}
	for (int i = point < 0 ? point : 0; i < 0; i++)
		if (k < FRAC_MAX)
			d->fp[k++] = '0';
	for (int i = point > 0 ? point : 0; i < n; i++) {
		if (k >= FRAC_MAX)
			return false;
		d->fp[k++] = digits[i];
	}
	while (k && d->fp[k - 1] == '0')
		k--;
	d->fp[k] = 0;
	return true;
}

static void put_frac(struct gbuf *b, bool *first, const char *piece)
{
	gb_put(b, *first ? "" : " | ");
	gb_put(b, piece);
	*first = false;
}

/* ATOM repeated MIN to MAX times (MAX 0: the empty string). */
static void reps(struct gbuf *b, const char *atom, int min, int max)
{
	if (!max)
		gb_put(b, "\"\"");
	else
		gb_printf(b, "%s{%d,%d}", atom, min, max);
}

static bool frac(struct gbuf *b, const char *lo, bool ls, const char *hi,
		 bool hs, bool nonempty, int room);

/* D starting with digit C, then the rest (ROOM digits at most) within
 * LO..HI. */
static void frac_digit(struct gbuf *b, bool *first, int c, const char *lo,
		       bool ls, const char *hi, bool hs, int room)
{
	struct gbuf t = {0};

	if (frac(&t, lo, ls, hi, hs, false, room)) {
		gb_printf(b, "%s\"%d\" ", *first ? "" : " | ", c);
		gb_putn(b, t.p, t.n);
		*first = false;
	}
	b->oom |= t.oom;
	free(t.p);
}

/* Fraction digit strings D of at most ROOM digits with LO < 0.D < HI
 * (<= unless strict): NULL is no bound, "" a bound of 0 from here on (a
 * non-empty bound is above 0: fractions carry no trailing zeros).
 * NONEMPTY leaves D = "" out. False when no D qualifies. */
static bool frac(struct gbuf *b, const char *lo, bool ls, const char *hi,
		 bool hs, bool nonempty, int room)
{
	bool lo_none = !lo || (!*lo && !ls), lo_pos = lo && !*lo && ls;
	int l = lo_none ? -1 : lo_pos ? 0 : lo[0] - '0';
	int h = !hi ? 10 : hi[0] - '0';
	bool first = true;

	if (hi && !*hi) { /* only zeros are left, D <= 0 */
		if (hs || !lo_none || (nonempty && !room))
			return false;
		reps(b, "\"0\"", nonempty, room);
		return true;
	}
	if (!room) { /* D = "": 0, below HI (not "" here) */
		if (nonempty || !lo_none)
			return false;
		gb_put(b, "\"\"");
		return true;
	}
	if (lo_none && !hi) {
		reps(b, "[0-9]", nonempty, room);
		return true;
	}
	gb_put(b, "(");
	if (!nonempty && lo_none)
		put_frac(b, &first, "\"\"");
	if (l + 1 <= h - 1) {
		gb_printf(b, "%s[%d-%d] ", first ? "" : " | ", l + 1, h - 1);
		reps(b, "[0-9]", 0, room - 1);
		first = false;
	}
	/* a positive lower bound recurses on "0": ROOM ends it */
	if (l >= 0 && l == h) {
		frac_digit(b, &first, l, lo_pos ? "" : lo + 1, ls, hi + 1, hs,
			   room - 1);
	} else {
		if (l >= 0 && l < h)
			frac_digit(b, &first, l, lo_pos ? "" : lo + 1, ls, NULL,
				   false, room - 1);
		if (hi && h > l)
			frac_digit(b, &first, h, NULL, false, hi + 1, hs,
				   room - 1);
	}
	gb_put(b, ")");
	if (first) { /* nothing: take the "(" ")" back */
		b->n -= 2;
		b->p[b->n] = 0;
	}
	return !first;
}

/* What follows an integer part: nothing (a zero fraction) or "." and
 * digits, the fraction within the bounds; false when none qualifies. */
static bool tail_frac(struct gbuf *b, const char *lo, bool ls, const char *hi,
		      bool hs, int room)
{
	struct gbuf t = {0};
	bool zero = (!lo || (!*lo && !ls)) && (!hi || *hi || !hs);
	bool some = frac(&t, lo, ls, hi, hs, true, room);

	if (some) {
		gb_put(b, "(\".\" ");
		gb_putn(b, t.p, t.n);
		gb_put(b, zero ? ")?" : ")");
	}
	b->oom |= t.oom;
	free(t.p);
	return some || zero;
}

/* Integer part IP, then its fraction; appended as an alternative. */
static void at_ip(struct gbuf *b, bool *first, uint64_t ip, const char *lo,
		  bool ls, const char *hi, bool hs, int room)
{
	struct gbuf t = {0};

	gb_printf(&t, "\"%llu\" ", (unsigned long long)ip);
	if (tail_frac(&t, lo, ls, hi, hs, room)) {
		gb_put(b, *first ? "" : " | ");
		gb_putn(b, t.p, t.n);
		*first = false;
	}
	b->oom |= t.oom;
	free(t.p);
}

/* Magnitudes ip(.fp)? between LO and HI (each may be unset: >= 0, or
 * no upper bound), fractions of ROOM digits at most. False when there
 * are none. */
static bool magnitudes(struct gbuf *b, const struct dec *lo,
		       const struct dec *hi, int room)
{
	uint64_t a = lo->set ? lo->ip + 1 : 0;
	bool first = true;

	gb_put(b, "(");
	if (lo->set && hi->set && lo->ip == hi->ip) {
		at_ip(b, &first, lo->ip, lo->fp, lo->strict, hi->fp, hi->strict,
		      room);
	} else {
		if (!hi->set || (hi->ip > 0 && a <= hi->ip - 1)) {
			gs_int_range(b, true, (int64_t)a, hi->set,
				     hi->set ? (int64_t)hi->ip - 1 : 0);
			gb_printf(b, " (\".\" [0-9]{1,%d})?", room);
			first = false;
		}
		if (lo->set)
			at_ip(b, &first, lo->ip, lo->fp, lo->strict, NULL,
			      false, room);
		if (hi->set)
			at_ip(b, &first, hi->ip, NULL, false, hi->fp,
			      hi->strict, room);
	}
	gb_put(b, ")");
	return !first;
}

/* The tighter of KEY (inclusive) and XKEY (exclusive) into *D. */
static int bound(struct gsc *c, const cJSON *s, const char *key,
		 const char *xkey, bool lower, const char *path, struct dec *d)
{
	const char *keys[2] = {key, xkey};

	for (int i = 0; i < 2; i++) {
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, keys[i]);
		struct dec x = {.set = true, .strict = i == 1};
		double v;

		if (!k)
			continue;
		if (!cJSON_IsNumber(k) || !isfinite(k->valuedouble))
			return gs_fail(c, -O1_E_FORMAT, path,
				       "'%s' must be a number", keys[i]);
		v = k->valuedouble;
		if (!to_dec(v, &x))
			return gs_fail(c, -O1_E_UNSUPPORTED, path,
				       "'%s' needs more than 17 integer or "
				       "%d fraction digits",
				       keys[i], FRAC_MAX);
		if (!d->set || (lower ? v > d->value : v < d->value) ||
		    (v == d->value && x.strict))
			*d = x;
	}
	return 0;
}

int gs_number_range(struct gsc *c, const cJSON *s, const char *path,
		    struct gbuf *e)
{
	struct dec lo = {0}, hi = {0}, mlo, mhi;
	bool first = true;
	int rc = bound(c, s, "minimum", "exclusiveMinimum", true, path, &lo);
	int room = GS_FRAC_DIGITS;

	rc = rc ?: bound(c, s, "maximum", "exclusiveMaximum", false, path,
			 &hi);
	if (rc)
		return rc;
	if ((int)strlen(lo.fp) + 1 > room)
		room = (int)strlen(lo.fp) + 1;
	if ((int)strlen(hi.fp) + 1 > room)
		room = (int)strlen(hi.fp) + 1;
	if (lo.set && hi.set &&
	    (lo.value > hi.value ||
	     (lo.value == hi.value && (lo.strict || hi.strict))))
		return GS_NOTHING;
	gb_put(e, "(");
	/* x < 0: -M with M > 0, M above |hi| when hi < 0, below |lo| */
	if (!lo.set || lo.neg) {
		struct gbuf t = {0};

		mlo = hi.set && hi.neg ? hi : (struct dec){.set = true,
							     .strict = true};
		mhi = lo.set ? lo : (struct dec){0};
		if (magnitudes(&t, &mlo, &mhi, room)) {
			gb_put(e, "\"-\" ");
			gb_putn(e, t.p, t.n);
			first = false;
		}
		e->oom |= t.oom;
		free(t.p);
	}
	/* x >= 0 */
	if (!hi.set || !hi.neg) {
		struct gbuf t = {0};

		mlo = lo.set && !lo.neg ? lo : (struct dec){0};
		if (magnitudes(&t, &mlo, &hi, room)) {
			gb_put(e, first ? "" : " | ");
			gb_putn(e, t.p, t.n);
			first = false;
		}
		e->oom |= t.oom;
		free(t.p);
	}
	gb_put(e, ")");
	return first ? GS_NOTHING : 0;
}

static const struct {
	const char *name, *grammar;
} formats[] = {
	{"date", "fmt-date"},
	{"time", "fmt-time"},
	{"date-time", "fmt-date [Tt] fmt-time"},
	{"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
		 "\"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}"},
	{"ipv4", "fmt-octet \".\" fmt-octet \".\" fmt-octet \".\" fmt-octet"},
	{"email", "fmt-atom ( \".\" fmt-atom )* \"@\" fmt-label "
		  "( \".\" fmt-label )+"},
};

static const char format_rules[] =
	"fmt-date ::= fmt-year \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" "
	"| \"08\" | \"10\" | \"12\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | "
	"\"3\" [01] ) | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" ( \"0\" "
	"[1-9] | [12] [0-9] | \"30\" ) | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] "
	"| \"2\" [0-8] ) ) | fmt-leap \"-02-29\"\n"
	"fmt-year ::= [1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] "
	"[0-9] | \"000\" [1-9]\n"
	"fmt-leap ::= [0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) "
	"| ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\"\n"
	"fmt-time ::= ( ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" "
	"[0-5] [0-9] ( \".\" [0-9]{1,9} )? ( [Zz] | [+-] ( [01] [0-9] | "
	"\"2\" [0-3] ) \":\" [0-5] [0-9] ) ) | \"23:59:60\" ( \".\" "
	"[0-9]{1,9} )? "
	"( [Zz] | [+-] \"00:00\" )\n"
	"fmt-octet ::= [0-9] | [1-9] [0-9] | \"1\" [0-9]{2} | \"2\" [0-4] "
	"[0-9] | \"25\" [0-5]\n"
	"fmt-atom ::= [A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+\n"
	"fmt-label ::= [A-Za-z0-9] ( [A-Za-z0-9\\-]* [A-Za-z0-9] )?\n";

int gs_format(struct gsc *c, const cJSON *fmt, const char *path,
	      struct gbuf *e)
{
	const char *name = cJSON_GetStringValue(fmt);

	if (!name)
		return gs_fail(c, -O1_E_FORMAT, path,
			       "'format' must be a string");
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		if (strcmp(name, formats[i].name))
			continue;
		if (!c->formats_used)
			gb_put(&c->rules, format_rules);
		c->formats_used = true;
		gb_printf(e, "\"\\\"\" %s \"\\\"\"", formats[i].grammar);
		return 0;
	}
	return gs_fail(c, -O1_E_UNSUPPORTED, path,
		       "format '%.40s' is not supported", name);
}

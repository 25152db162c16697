/* Internals of the JSON Schema compiler (grammar_schema*.c,
 * grammar_regex.c): a growing text buffer, the canonical JSON writer, and
 * the pieces of grammar text they share. A buffer that failed to grow
 * keeps failing (oom set) so callers check once at the end.
 */
#ifndef O1_GRAMMAR_SCHEMA_INT_H
#define O1_GRAMMAR_SCHEMA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "grammar/grammar_int.h"
#include "grammar/grammar_schema.h"

struct gbuf {
	char *p;
	size_t n, cap;
	bool oom;
};

void gb_putn(struct gbuf *b, const char *s, size_t n);
void gb_put(struct gbuf *b, const char *s);
void gb_printf(struct gbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A grammar literal "..." matching exactly the N bytes at S (UTF-8). */
void gb_lit(struct gbuf *b, const char *s, size_t n);
/* A grammar expression matching the canonical JSON escape of every code
 * point in the ranges (the inside of a JSON string). */
void gb_cpset(struct gbuf *b, const struct gcp_range *r, uint32_t n);

/* Canonical compact JSON of V (grammar_schema.h says which form).
 * -O1_E_FORMAT for a string that is not valid UTF-8 or a number that is
 * not finite. */
int gs_json_write(struct gbuf *b, const cJSON *v);
/* The canonical text of a number. */
void gs_json_number(double x, char out[40]);

/* Digit caps where a schema leaves a number unbounded, so that a model
 * cannot write digits until max_tokens: an integer part of at most
 * GS_INT_DIGITS digits (or as many as a one-sided bound has), at most
 * GS_FRAC_DIGITS fraction digits (more where a bound's fraction needs
 * them) and GS_EXP_DIGITS exponent digits (a double's exponent has 3). */
#define GS_INT_DIGITS  16
#define GS_FRAC_DIGITS 16
#define GS_EXP_DIGITS  3

/* Integers in [LO, HI] (each optional) in canonical decimal, no "-0".
 * A missing bound stops at the larger of GS_INT_DIGITS digits and the
 * other bound's digit count. */
void gs_int_range(struct gbuf *b, bool has_lo, int64_t lo, bool has_hi,
		  int64_t hi);

/* The inside of a JSON string whose value matches ECMA-262 regex RE (the
 * subset in docs/GRAMMAR.md), as a grammar expression. -O1_E_UNSUPPORTED
 * or -O1_E_FORMAT with the reason in WHY. */
int gr_regex(const char *re, size_t len, struct gbuf *out, char *why,
	     size_t why_len);

/* The compiler's state (grammar_schema.c). Rule s<id> is the grammar of
 * the schema node map[id].node, at JSON pointer map[id].path. Merged
 * schemas (allOf, a $ref or anyOf beside other keywords) are new cJSON
 * trees owned here; their $refs still point into DOC. */
struct gs_rule {
	const cJSON *node;
	char *path;
	bool nothing; /* matches no value */
};

struct gsc {
	const cJSON *doc;
	const char *base; /* the root's $id, or NULL */
	struct o1_grammar_schema_opts o;
	struct o1_grammar_error *err;
	struct gbuf rules;
	struct gs_rule *map;
	uint32_t n_map, cap_map;
	cJSON **owned;
	uint32_t n_owned, cap_owned;
	uint32_t n_sets;   /* k<set>- and t<set>- rule families */
	bool formats_used; /* the fmt- rules are written */
	int depth;
};

/* Returned by generators for a schema that matches no value at all. */
#define GS_NOTHING 1

int gs_fail(struct gsc *c, int code, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The node a "$ref" names (a "#..." JSON pointer within the document). */
int gs_resolve(struct gsc *c, const char *ref, const char *path,
	       const cJSON **out);
/* Keeps TREE until the compiler is done; returns it (NULL stays NULL). */
cJSON *gs_own(struct gsc *c, cJSON *tree);
/* One schema for both A and B (allOf of two): a new tree, owned. */
int gs_merge(struct gsc *c, const cJSON *a, const cJSON *b,
	     const char *path, cJSON **out);
/* Number bounds (minimum, maximum, exclusive*) on type number, and the
 * string formats (grammar_schema_num.c). */
int gs_number_range(struct gsc *c, const cJSON *s, const char *path,
		    struct gbuf *e);
int gs_format(struct gsc *c, const cJSON *fmt, const char *path,
	      struct gbuf *e);
/* A canonical JSON string (with quotes) for S: raw JSON text. */
int gs_json_string(struct gbuf *b, const char *s);

/* Names of the shared rules the compiler emits. */
#define GS_CHAR	 "json-char"  /* one character of a string, any escape */
#define GS_CCHAR "json-cchar" /* one character, canonical escape only */

#endif

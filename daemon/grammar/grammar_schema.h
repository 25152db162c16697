/* JSON Schema (draft 2020-12) -> grammar text (grammar.h), for structured
 * output: every text the grammar accepts is JSON that the schema
 * validates, written in one canonical form. docs/GRAMMAR.md lists the
 * keywords one by one; in short:
 *
 *   type (one or a list), enum, const, properties, required,
 *   additionalProperties (false or a schema), items (a schema or false),
 *   prefixItems, minItems, maxItems, minLength, maxLength, pattern (a
 *   regex subset: docs/GRAMMAR.md), format (date, time, date-time, uuid,
 *   email, ipv4), minimum, maximum, exclusiveMinimum, exclusiveMaximum
 *   (integer bounds on integers and numbers; numbers also take decimal
 *   bounds), anyOf, oneOf (both as alternatives: oneOf's "only one" is
 *   not checked), allOf (merged keyword by keyword), $ref to "#..." JSON
 *   pointers within the schema (recursion included), $defs/definitions;
 *   annotations ($schema, $id at the root, $comment, title, description,
 *   default, examples, deprecated, readOnly, writeOnly) are ignored.
 *
 * Anything else is refused with -O1_E_UNSUPPORTED and the keyword and its
 * place named: a schema is never silently loosened.
 *
 * The canonical form: no whitespace (or up to ws_max blanks between
 * tokens), object members in the order of `properties` (additional
 * members after them), enum and const values and pattern text with the
 * escapes a JSON serializer writes (\" \\ \b \f \n \r \t, \u00xx for other
 * control characters, everything else raw), numbers in an enum as the
 * shortest decimal that reads back (integers without a fraction), object
 * members of an enum or const value sorted by key. Bounded numbers are
 * written without an exponent. Digits are capped (at most 16 integer
 * digits unless a one-sided bound has more, 16 fraction digits unless a
 * bound's fraction needs more, 3 exponent digits), so a model cannot
 * write digits until max_tokens. A `$schema` other than a JSON Schema draft
 * (a custom metaschema) is refused.
 */
#ifndef O1_GRAMMAR_SCHEMA_H
#define O1_GRAMMAR_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

struct o1_grammar_schema_opts {
	size_t sz;	 /* sizeof(struct o1_grammar_schema_opts) */
	uint32_t ws_max; /* blanks allowed between tokens: 0 = compact */
	bool formats_as_annotations; /* do not enforce `format` (the
				      * draft's default for validators) */
};

/* Grammar text for JSON SCHEMA (LEN bytes) into *TEXT (malloc'd,
 * NUL-terminated, *TEXT_LEN bytes). OPTS may be NULL (compact, formats
 * enforced). -O1_E_FORMAT for text that is not JSON or a schema that is
 * malformed or can match nothing, -O1_E_UNSUPPORTED for a keyword outside
 * the subset, -O1_E_BOUNDS past the size limits; *ERR says which and
 * where (LINE 0, COL 0; the message names the JSON pointer). */
int o1_grammar_from_schema(const char *schema, size_t len,
			   const struct o1_grammar_schema_opts *opts,
			   struct o1_grammar_error *err, char **text,
			   size_t *text_len);

/* The same compiled: schema errors as above, and grammar errors (a
 * recursion without a base case, a grammar too large) told in terms of
 * the schema's JSON pointers. */
int o1_grammar_compile_schema(const char *schema, size_t len,
			      const struct o1_grammar_schema_opts *opts,
			      struct o1_grammar_error *err,
			      struct o1_grammar **out);

/* INSTANCE (JSON text, ILEN bytes) written in the canonical form the
 * grammars of SCHEMA use: compact, escapes and numbers as above, the
 * members of every object in the order of their names' first appearance
 * in a `properties` (or `required`) list of SCHEMA, the others sorted by
 * key. *OUT is malloc'd. -O1_E_FORMAT when either text is not JSON. */
int o1_grammar_schema_canonical(const char *schema, size_t slen,
				const char *instance, size_t ilen, char **out,
				size_t *out_len);

/* Grammar text for any JSON object (response_format json_object). */
int o1_grammar_json_object(const struct o1_grammar_schema_opts *opts,
			   char **text, size_t *text_len);

#endif

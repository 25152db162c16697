/* UTF-8: encoding, decoding and validation, one statement of the rules for
 * the tokenizer, the chat template, the grammar compiler and the sidecar.
 *
 * Well-formed means the Unicode standard's table of well-formed byte
 * sequences (table 3-7): no overlong forms, no surrogates (U+D800-DFFF),
 * nothing above U+10FFFF, no lead byte cut short. The one relaxation,
 * o1_utf8_decode_surrogates, accepts the three-byte forms of surrogates as
 * Python's "surrogatepass" does, since a template's "\ud800" literal makes
 * such a string and Python counts it as one character. Nothing here reads
 * past the LEN bytes it is given.
 */
#ifndef O1_UTF8_H
#define O1_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { O1_UTF8_MAX_BYTES = 4 };
#define O1_UTF8_MAX_CP 0x10ffffu

/* Writes the UTF-8 form of CP to OUT (room for O1_UTF8_MAX_BYTES) and
 * returns its length, 1-4; 0 (nothing written) above U+10FFFF. Surrogates
 * get their three-byte form: callers that must not emit them check CP. */
size_t o1_utf8_encode(uint32_t cp, void *out);

/* The length of the character a lead byte B starts (1-4), 0 when B never
 * starts a well-formed one (a continuation byte, C0, C1, F5-FF). */
size_t o1_utf8_lead_len(uint8_t b);

/* Whether B is well-formed as byte I (1-3) of a character whose lead byte
 * is LEAD (o1_utf8_lead_len(LEAD) > I): the byte-at-a-time form of the
 * rules, for decoders that see a stream in pieces. */
bool o1_utf8_cont_ok(uint8_t lead, size_t i, uint8_t b);

/* Decodes the character at S (LEN bytes there): its length 1-4 with its
 * code point in *CP (CP may be NULL), or 0 (*CP unset) when the bytes there
 * do not start a well-formed character, LEN == 0 included. */
size_t o1_utf8_decode(const void *s, size_t len, uint32_t *cp);

/* o1_utf8_decode that also accepts a surrogate's three-byte form
 * (ED A0-BF 80-BF), as Python's surrogatepass. */
size_t o1_utf8_decode_surrogates(const void *s, size_t len, uint32_t *cp);

/* Whether S[0, N) is well-formed UTF-8; when not and BAD is given, *BAD is
 * the offset of the first byte that does not start a well-formed
 * character. */
bool o1_utf8_valid(const void *s, size_t n, size_t *bad);

#endif

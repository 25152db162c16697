/* Byte-level checks of what an HTTP client sends, before any of it is
 * parsed or echoed: a request body must be UTF-8 (RFC 8259), hold no NUL
 * byte, and no JSON string in it may hold \u0000 (C strings end there: a
 * message would be cut silently); text echoed back in JSON (an error
 * naming a model or a path) is made valid UTF-8 first; the first bytes of
 * a connection must start a request line. Pure functions. */
#ifndef O1_SIDECAR_INPUT_H
#define O1_SIDECAR_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of a connection's start that o1_sidecar_request_start judges:
 * the longest method and its space fit. */
#define O1_SIDECAR_START_BYTES 16

/* 0 when BODY[0, LEN) passes the checks above (UTF-8 as common/utf8.h), else
 * -EINVAL with a sentence in WHY (CAP bytes) naming the offset. */
int o1_sidecar_body_check(const char *body, size_t len, char *why, size_t cap);
/* Copies the NUL-terminated IN into OUT (CAP > 0 bytes, always
 * terminated), each byte that is not part of a well-formed character
 * replaced by U+FFFD, never cutting a character. */
void o1_sidecar_utf8_clean(const char *in, char *out, size_t cap);
/* Whether B[0, N) (N <= O1_SIDECAR_START_BYTES) can start a request:
 * empty lines, then 1 to 14 method letters (uppercase, as every HTTP
 * method is sent) and a space, or a prefix of that. Anything else (binary
 * garbage, a TLS hello) is answered 400 at once. */
bool o1_sidecar_request_start(const uint8_t *b, size_t n);

#endif

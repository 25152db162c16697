/* What the request parsers (sidecar_request.c, sidecar_tools.c) share to
 * read a body's members and refuse one. Internal: static, short names. */
#ifndef O1_SIDECAR_FIELDS_H
#define O1_SIDECAR_FIELDS_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "sidecar_request.h"

/* Refuses the request for PARAM (OpenAI's "param"; "" when none), ERR's
 * message from FMT; returns -EINVAL. */
static inline int bad(struct o1_sidecar_req_error *err, const char *param,
		      const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static inline int bad(struct o1_sidecar_req_error *err, const char *param,
		      const char *fmt, ...)
{
	va_list ap;

	snprintf(err->param, sizeof(err->param), "%s", param);
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* OBJ's member NAME, or NULL where it is absent or null (clients send
 * null for a parameter they leave at its default). */
static inline const cJSON *field(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return cJSON_IsNull(v) ? NULL : v;
}

#endif

/* OpenAI's response_format in a request body, as grammar text for o1d's
 * grammar engine (daemon/grammar): "text" (none), "json_object" (any JSON
 * object) and "json_schema" (json_schema.schema through the JSON Schema
 * compiler; a keyword outside its subset is refused by name, strict or
 * not: a schema is never loosened). */
#ifndef O1_SIDECAR_FORMAT_H
#define O1_SIDECAR_FORMAT_H

#include <cjson/cJSON.h>

#include "sidecar_request.h"

/* Reads ROOT's response_format into R->grammar (owned, NULL for none).
 * Returns 0, -EINVAL (ERR says why, param "response_format") or -ENOMEM. */
int o1_sidecar_format_parse(const cJSON *root, struct o1_sidecar_request *r,
			    struct o1_sidecar_req_error *err);

#endif

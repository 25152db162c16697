/* response_format -> grammar text (sidecar_format.h). The schema object
 * is printed back to JSON for the compiler (cJSON keeps member order, so
 * `properties` order, the grammar's member order, survives). */
#include "sidecar_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_schema.h"

static int refuse(struct o1_sidecar_req_error *err, const char *msg)
{
	snprintf(err->param, sizeof(err->param), "response_format");
	snprintf(err->message, sizeof(err->message), "response_format: %.200s",
		 msg);
	return -EINVAL;
}

static int from_schema(const cJSON *js, struct o1_sidecar_request *r,
		       struct o1_sidecar_req_error *err)
{
	const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
	struct o1_grammar_error gerr;
	char *text;
	int ret;

	if (!cJSON_IsObject(js))
		return refuse(err, "'json_schema' must be an object");
	if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
		return refuse(err, "'json_schema.schema' must be a JSON "
				   "Schema (an object)");
	text = cJSON_PrintUnformatted(schema);
	if (!text)
		return -ENOMEM;
	ret = o1_grammar_from_schema(text, strlen(text), NULL, &gerr,
				     &r->grammar, &r->grammar_len);
	free(text);
	if (ret == -ENOMEM)
		return ret;
	return ret ? refuse(err, gerr.msg) : 0;
}

int o1_sidecar_format_parse(const cJSON *root, struct o1_sidecar_request *r,
			    struct o1_sidecar_req_error *err)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(root,
							  "response_format");
	const char *type;

	if (!f || cJSON_IsNull(f))
		return 0;
	type = cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(f, "type"));
	if (!cJSON_IsObject(f) || !type)
		return refuse(err, "must be an object with a 'type'");
	if (!strcmp(type, "text"))
		return 0;
	if (!strcmp(type, "json_object"))
		return o1_grammar_json_object(NULL, &r->grammar,
					      &r->grammar_len);
	if (!strcmp(type, "json_schema"))
		return from_schema(
			cJSON_GetObjectItemCaseSensitive(f, "json_schema"), r,
			err);
	return refuse(err, "'type' must be text, json_object or json_schema");
}

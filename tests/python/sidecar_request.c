/* Reads a chat request body on stdin and prints what the sidecar's
 * request parser (tools/sidecar/sidecar_request.h) says of it, as JSON
 * {"ok": bool, "param": str, "message": str}: the reference the Python
 * client's checks of tool names are held against (test_tool_names.py).
 * usage: o1_py_sidecar_request < body.json */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "sidecar_request.h"

int main(void)
{
	static char body[1 << 20];
	size_t n = fread(body, 1, sizeof(body), stdin);
	struct o1_sidecar_request req = {0};
	struct o1_sidecar_req_error err = {{0}, {0}};
	int rc = o1_sidecar_request_parse(body, n, O1_SIDECAR_CHAT, &req, &err);
	cJSON *out = cJSON_CreateObject();
	char *s;

	o1_sidecar_request_fini(&req);
	if (rc && rc != -EINVAL) /* refused is an answer; -ENOMEM not */
		return 1;
	if (!out || !cJSON_AddBoolToObject(out, "ok", rc == 0) ||
	    !cJSON_AddStringToObject(out, "param", err.param) ||
	    !cJSON_AddStringToObject(out, "message", err.message))
		return 1;
	s = cJSON_PrintUnformatted(out);
	cJSON_Delete(out);
	if (!s)
		return 1;
	puts(s);
	free(s);
	return 0;
}

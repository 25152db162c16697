/* o1ctl health: an exit code for scripts (admin op "status"): 0 when o1d
 * answers, has its model loaded, every graph captured, its warm-up
 * generation done ("ready") and is not draining; 6 when it answers
 * but is not serving; 3, 4, 5 when it cannot be asked (see o1ctl help).
 * Prints one line (or one JSON object with --json). */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

static const char *why_not(const cJSON *r)
{
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "model_loaded")))
		return "no model loaded";
	if (!cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "draining")))
		return "draining";
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "warmup_ok")))
		return "warm-up generation not done";
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ready")))
		return "graphs not captured";
	return NULL;
}

int cmd_health(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	cJSON *r = NULL, *out;
	int json = 0;
	int ret = o1ctl_admin(ctx, argc, argv,
			      "usage: o1ctl health [--socket PATH] [--json]\n"
			      "  exit 0: serving; 6: answers but has no model "
			      "or is draining;\n  3/4/5: not running, "
			      "permission denied, version mismatch\n",
			      "{\"op\":\"status\"}", &r, &json);
	const char *why;

	if (ret || !r)
		return ret;
	why = why_not(r);
	if (json) {
		out = cJSON_CreateObject();
		cJSON_AddBoolToObject(out, "healthy", why == NULL);
		cJSON_AddStringToObject(out, "reason", why ? why : "serving");
		cJSON_AddItemReferenceToObject(out, "status", r);
		o1ctl_admin_print_json(out);
		cJSON_Delete(out);
	} else {
		printf("%s\n", why ? why : "ok");
	}
	cJSON_Delete(r);
	return why ? O1CTL_UNHEALTHY : O1CTL_OK;
}

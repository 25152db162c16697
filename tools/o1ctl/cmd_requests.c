/* o1ctl requests: one line per request the daemon holds (admin op
 * "requests"). */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void print(const cJSON *r)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(r, "requests");
	const cJSON *q;

	printf("%10s %20s %8s %6s %-9s %7s %9s %10s\n", "client", "req_id",
	       "pid", "uid", "phase", "prompt", "generated", "age_ms");
	cJSON_ArrayForEach(q, list)
	{
		const cJSON *ph = cJSON_GetObjectItemCaseSensitive(q, "phase");

		printf("%10.0f %20.0f %8.0f %6.0f %-9s %7.0f %9.0f %10.0f\n",
		       num(q, "client"), num(q, "req_id"), num(q, "pid"),
		       num(q, "uid"),
		       cJSON_IsString(ph) ? ph->valuestring : "?",
		       num(q, "prompt_tokens"), num(q, "generated"),
		       num(q, "age_ms"));
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "truncated")))
		printf("(list truncated)\n");
}

int cmd_requests(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	cJSON *r = NULL;
	int json = 0;
	int ret = o1ctl_admin(
	    ctx, argc, argv, "usage: o1ctl requests [--socket PATH] [--json]\n",
	    "{\"op\":\"requests\"}", &r, &json);

	if (ret || !r)
		return ret;
	if (json) {
		o1ctl_admin_print_json(r);
	} else {
		print(r);
	}
	cJSON_Delete(r);
	return 0;
}

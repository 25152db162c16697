/* o1ctl reload: what SIGHUP does, through the admin op "reload": o1d
 * reads its configuration again (the same -c file and --set overrides it
 * started with), applies what can change at run time and says which
 * changed sections need a restart. */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

static void print_list(const cJSON *r, const char *key, const char *title)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(r, key);
	const cJSON *x;
	int n = 0;

	printf("%s:", title);
	cJSON_ArrayForEach(x, list)
	{
		if (cJSON_IsString(x))
			printf("%s%s", n++ ? ", " : " ", x->valuestring);
	}
	printf("%s\n", n ? "" : " (nothing)");
}

int cmd_reload(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	cJSON *r = NULL;
	int json = 0;
	int ret = o1ctl_admin(ctx, argc, argv,
			      "usage: o1ctl reload [--socket PATH] [--json]\n",
			      "{\"op\":\"reload\"}", &r, &json);

	if (ret || !r)
		return ret;
	if (json) {
		o1ctl_admin_print_json(r);
	} else {
		print_list(r, "reloaded", "reloaded");
		print_list(r, "not_reloaded",
			   "changed but not reloaded (restart o1d)");
	}
	cJSON_Delete(r);
	return O1CTL_OK;
}

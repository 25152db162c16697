/* o1ctl drain: new submissions are refused (FINAL -O1_E_DRAINING) while
 * in-flight requests finish (admin op "drain"); o1ctl resume undoes it. */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

int cmd_drain(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	cJSON *r = NULL;
	int json = 0;
	int ret = o1ctl_admin(ctx, argc, argv,
			      "usage: o1ctl drain [--socket PATH] [--json]\n",
			      "{\"op\":\"drain\"}", &r, &json);

	if (!ret && r && json)
		o1ctl_admin_print_json(r);
	else if (!ret && r)
		printf("o1d: draining\n");
	cJSON_Delete(r);
	return ret;
}

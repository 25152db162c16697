/* o1ctl resume: accept submissions again after o1ctl drain (admin op
 * "resume"); not after SIGTERM. */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

int cmd_resume(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	cJSON *r = NULL;
	int json = 0;
	int ret = o1ctl_admin(ctx, argc, argv,
			      "usage: o1ctl resume [--socket PATH] [--json]\n",
			      "{\"op\":\"resume\"}", &r, &json);

	if (!ret && r && json)
		o1ctl_admin_print_json(r);
	else if (!ret && r)
		printf("o1d: accepting requests\n");
	cJSON_Delete(r);
	return ret;
}

/* o1ctl resume: accept submissions again after o1ctl drain (admin op
 * "resume"); not after SIGTERM. */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

int cmd_resume(int argc, char **argv)
{
	cJSON *r = NULL;
	int json = 0;
	int ret =
	    o1ctl_admin(argc, argv, "usage: o1ctl resume [--socket PATH]\n",
			"{\"op\":\"resume\"}", &r, &json);

	if (!ret && r)
		printf("o1d: accepting requests\n");
	cJSON_Delete(r);
	return ret;
}

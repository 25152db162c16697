/* o1ctl drain: new submissions are refused (FINAL -O1_E_DRAINING) while
 * in-flight requests finish (admin op "drain"); o1ctl resume undoes it. */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

int cmd_drain(int argc, char **argv)
{
	cJSON *r = NULL;
	int json = 0;
	int ret =
	    o1ctl_admin(argc, argv, "usage: o1ctl drain [--socket PATH]\n",
			"{\"op\":\"drain\"}", &r, &json);

	if (!ret && r)
		printf("o1d: draining\n");
	cJSON_Delete(r);
	return ret;
}

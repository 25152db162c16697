/* o1ctl config: o1d's effective configuration (admin op "config"): the
 * INI text of o1_config_dump, which loads back as o1d's -c file; with
 * --json, the reply object ({"config": TEXT, ...}). */
#include <stdio.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

int cmd_config(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	cJSON *r = NULL;
	int json = 0;
	int ret = o1ctl_admin(ctx, argc, argv,
			      "usage: o1ctl config [--socket PATH] [--json]\n",
			      "{\"op\":\"config\"}", &r, &json);
	const cJSON *text;

	if (ret || !r)
		return ret;
	text = cJSON_GetObjectItemCaseSensitive(r, "config");
	if (json)
		o1ctl_admin_print_json(r);
	else if (cJSON_IsString(text))
		fputs(text->valuestring, stdout);
	else
		fprintf(stderr, "o1ctl config: the reply has no config\n");
	ret = json || cJSON_IsString(text) ? O1CTL_OK : O1CTL_FAIL;
	cJSON_Delete(r);
	return ret;
}

/* o1ctl cancel CLIENT REQ_ID: cancels one request (admin op "cancel");
 * its client still gets the FINAL (CANCELLED). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

int cmd_cancel(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "usage: o1ctl cancel CLIENT REQ_ID [--socket PATH] [--json]\n"
	    "  CLIENT and REQ_ID as o1ctl requests lists them\n";
	uint64_t client, id;
	char req[128];
	cJSON *r = NULL;
	int json = 0, ret;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("%s", usage);
			return 0;
		}
	if (!o1ctl_admin_arg(argc, argv, 1) || o1ctl_admin_arg(argc, argv, 2) ||
	    o1ctl_parse_uint("cancel", "CLIENT", o1ctl_admin_arg(argc, argv, 0),
			     0, UINT64_MAX, &client) ||
	    o1ctl_parse_uint("cancel", "REQ_ID", o1ctl_admin_arg(argc, argv, 1),
			     0, UINT64_MAX, &id)) {
		fprintf(stderr, "%s", usage);
		return O1CTL_USAGE;
	}
	snprintf(req, sizeof(req),
		 "{\"op\":\"cancel\",\"client\":%" PRIu64 ",\"req_id\":%" PRIu64
		 "}",
		 client, id);
	ret = o1ctl_admin(ctx, argc, argv, usage, req, &r, &json);
	if (!ret && r && json)
		o1ctl_admin_print_json(r);
	else if (!ret && r)
		printf("cancelled client %" PRIu64 " request %" PRIu64 "\n",
		       client, id);
	cJSON_Delete(r);
	return ret;
}

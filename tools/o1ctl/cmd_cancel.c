/* o1ctl cancel CLIENT REQ_ID: cancels one request (admin op "cancel");
 * its client still gets the FINAL (CANCELLED). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

static int parse_u64(const char *s, unsigned long long *out)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -1;
	*out = strtoull(s, &end, 10);
	return *end ? -1 : 0;
}

int cmd_cancel(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	static const char usage[] =
	    "usage: o1ctl cancel CLIENT REQ_ID [--socket PATH] [--json]\n"
	    "  CLIENT and REQ_ID as o1ctl requests lists them\n";
	unsigned long long client, id;
	char req[128];
	cJSON *r = NULL;
	int json = 0, ret;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("%s", usage);
			return 0;
		}
	if (parse_u64(o1ctl_admin_arg(argc, argv, 0), &client) ||
	    parse_u64(o1ctl_admin_arg(argc, argv, 1), &id) ||
	    o1ctl_admin_arg(argc, argv, 2)) {
		fprintf(stderr, "%s", usage);
		return O1CTL_USAGE;
	}
	snprintf(req, sizeof(req),
		 "{\"op\":\"cancel\",\"client\":%llu,\"req_id\":%llu}", client,
		 id);
	ret = o1ctl_admin(ctx, argc, argv, usage, req, &r, &json);
	if (!ret && r && json)
		o1ctl_admin_print_json(r);
	else if (!ret && r)
		printf("cancelled client %llu request %llu\n", client, id);
	cJSON_Delete(r);
	return ret;
}

/* o1ctl inject FAULT on|off [PARAM]: switches one of o1d's injected faults
 * (admin op "inject"; daemon/o1d/faults.h lists them). o1d refuses unless
 * its config has [faults] enabled = true, and only admin uids may ask.
 * Exit 0 when applied, 1 when refused, 2 for bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "o1ctl.h"
#include "o1ctl_admin.h"

static const char usage[] =
    "usage: o1ctl inject FAULT on|off [PARAM] [--socket PATH] [--json]\n"
    "  latency [MS]        every engine step sleeps MS first (50)\n"
    "  step_fail [N]       every N-th step fails with EIO (1: each)\n"
    "  stall [CLIENT]      hold events of CLIENT (0: all): backpressure\n"
    "  kv_exhaust [PAGES]  hold PAGES free KV pages (0: all free)\n"
    "  graph_replay [N]    every N-th CUDA graph replay fails (1: each):\n"
    "                      the step runs eagerly, counted as a fallback\n"
    "                      (o1ctl status, metrics); CUDA with graphs only\n"
    "  o1d must run with [faults] enabled = true (test deployments)\n";

static int build(int argc, char **argv, char *req, size_t sz)
{
	const char *fault = o1ctl_admin_arg(argc, argv, 0);
	const char *state = o1ctl_admin_arg(argc, argv, 1);
	const char *param = o1ctl_admin_arg(argc, argv, 2);
	unsigned long long p = 0;
	char *end = NULL;

	if (!fault || !state || o1ctl_admin_arg(argc, argv, 3) ||
	    (strcmp(state, "on") && strcmp(state, "off")) ||
	    strspn(fault, "abcdefghijklmnopqrstuvwxyz_") != strlen(fault))
		return -1;
	if (param) {
		p = strtoull(param, &end, 10);
		if (*end || !*param || p > 4294967295ull)
			return -1;
	}
	snprintf(
	    req, sz,
	    "{\"op\":\"inject\",\"fault\":\"%s\",\"on\":%s,\"param\":%llu}",
	    fault, strcmp(state, "on") ? "false" : "true", p);
	return 0;
}

int cmd_inject(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	char req[256];
	cJSON *r = NULL;
	int json = 0, ret;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage, stdout);
			return O1CTL_OK;
		}
	if (build(argc, argv, req, sizeof(req))) {
		fputs(usage, stderr);
		return O1CTL_USAGE;
	}
	ret = o1ctl_admin(ctx, argc, argv, usage, req, &r, &json);
	if (ret || !r)
		return ret;
	if (json)
		o1ctl_admin_print_json(r);
	else
		printf("o1d: %s %s\n", o1ctl_admin_arg(argc, argv, 0),
		       o1ctl_admin_arg(argc, argv, 1));
	cJSON_Delete(r);
	return O1CTL_OK;
}

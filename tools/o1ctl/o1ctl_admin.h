/* o1ctl's admin-connection helper: the subcommands status, requests,
 * cancel, drain, resume, reload, health and config send one JSON request
 * (daemon/o1d/admin.h) over the control socket and read the reply. */
#ifndef O1CTL_ADMIN_H
#define O1CTL_ADMIN_H

#include <cjson/cJSON.h>

#include "o1ctl.h"

/* Parses "--socket PATH" (default ctx->socket) and "--json" (default
 * ctx->json) from argv; sends REQ; on success *reply is the parsed reply
 * with "ok": true (print it raw when *json). Prints one line naming the
 * socket and the cause on failure and returns the exit code (enum
 * o1ctl_exit): o1d not running, permission denied, version mismatch
 * (connection refused by version, or a reply of another admin_version),
 * refused request, usage. */
int o1ctl_admin(const struct o1ctl_ctx *ctx, int argc, char **argv,
		const char *usage, const char *req, cJSON **reply, int *json);
/* The first positional argument after the options, or NULL. */
const char *o1ctl_admin_arg(int argc, char **argv, int i);
/* Prints the reply as one line of JSON. */
void o1ctl_admin_print_json(const cJSON *reply);

#endif

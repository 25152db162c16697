/* o1ctl's admin-connection helper: the subcommands status, requests,
 * cancel, drain and resume send one JSON request (daemon/o1d/admin.h)
 * over the control socket and read the reply. */
#ifndef O1CTL_ADMIN_H
#define O1CTL_ADMIN_H

#include <cjson/cJSON.h>

/* Parses "--socket PATH" (default $O1D_SOCKET, else /run/o1d/o1d.sock)
 * and "--json" from argv; sends REQ; on success *reply is the parsed
 * reply with "ok": true (print it raw when *json). Prints errors and
 * returns the exit code: 0, 1 (daemon or request failed), 2 (usage). */
int o1ctl_admin(int argc, char **argv, const char *usage, const char *req,
		cJSON **reply, int *json);
/* The first positional argument after the options, or NULL. */
const char *o1ctl_admin_arg(int argc, char **argv, int i);

#endif

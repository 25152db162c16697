/* See o1ctl_admin.h. Options are scanned by hand (positional arguments of
 * cancel stay where they are). Connection errors map to the exit codes of
 * o1ctl.h with a message an operator can act on. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "o1d/admin.h"
#include "common/error.h"
#include "o1ctl_admin.h"

#define REPLY_MAX 65537

static int parse(int argc, char **argv, const char **sock, int *json)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			*json = 1;
		else if (!strcmp(argv[i], "--socket") && i + 1 < argc)
			*sock = argv[++i];
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return 1;
		else if (argv[i][0] == '-')
			return -1;
	}
	return 0;
}

const char *o1ctl_admin_arg(int argc, char **argv, int n)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--socket")) {
			i++;
			continue;
		}
		if (argv[i][0] != '-' && n-- == 0)
			return argv[i];
	}
	return NULL;
}

void o1ctl_admin_print_json(const cJSON *reply)
{
	char *text = cJSON_PrintUnformatted(reply);

	printf("%s\n", text ? text : "{}");
	cJSON_free(text);
}

static int connect_error(const char *sock, int err)
{
	const char *why;

	switch (-err) {
	case ENOENT:
		why = "o1d is not running (no socket there; see --socket, "
		      "-c)";
		break;
	case ECONNREFUSED:
		why = "o1d is not running (nobody listens on the socket)";
		break;
	case EACCES:
	case EPERM:
		why = "permission denied (socket mode, or not one of "
		      "ipc.admin_uids)";
		break;
	case O1_E_VERSION:
	case EPROTO:
		why = "version mismatch (o1d speaks another wire protocol: "
		      "update o1ctl or o1d)";
		break;
	default:
		why = o1_strerror(err);
	}
	fprintf(stderr, "o1ctl: cannot reach o1d at %s: %s\n", sock, why);
	return o1ctl_exit_code(err);
}

static int check_version(const char *sock, const cJSON *reply)
{
	const cJSON *v =
	    cJSON_GetObjectItemCaseSensitive(reply, "admin_version");

	if (cJSON_IsNumber(v) && v->valuedouble == O1_ADMIN_VERSION)
		return O1CTL_OK;
	fprintf(stderr,
		"o1ctl: version mismatch: o1d at %s speaks admin protocol "
		"%s%.0f, this o1ctl %d: update o1ctl or o1d\n",
		sock, cJSON_IsNumber(v) ? "" : "(unversioned) ",
		cJSON_IsNumber(v) ? v->valuedouble : 0.0, O1_ADMIN_VERSION);
	return O1CTL_VERSION;
}

static int call(const char *sock, const char *req, cJSON **reply)
{
	char *buf = malloc(REPLY_MAX);
	int fd, n, rc;

	*reply = NULL;
	if (!buf)
		return O1CTL_FAIL;
	n = o1_admin_connect(sock, &fd);
	if (n) {
		free(buf);
		return connect_error(sock, n);
	}
	n = o1_admin_call(fd, req, buf, REPLY_MAX);
	close(fd);
	*reply = n > 0 ? cJSON_Parse(buf) : NULL;
	free(buf);
	if (!*reply) {
		fprintf(stderr, "o1ctl: no valid reply from o1d at %s (%s)\n",
			sock, n < 0 ? o1_strerror(n) : "not JSON");
		return O1CTL_FAIL;
	}
	rc = check_version(sock, *reply);
	if (rc) {
		cJSON_Delete(*reply);
		*reply = NULL;
	}
	return rc;
}

int o1ctl_admin(const struct o1ctl_ctx *ctx, int argc, char **argv,
		const char *usage, const char *req, cJSON **reply, int *json)
{
	const char *sock = ctx->socket;
	const cJSON *err;
	int ret;

	*json = ctx->json;
	ret = parse(argc, argv, &sock, json);
	if (ret) {
		fprintf(ret > 0 ? stdout : stderr, "%s", usage);
		return ret > 0 ? O1CTL_OK : O1CTL_USAGE;
	}
	ret = call(sock, req, reply);
	if (ret)
		return ret;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(*reply, "ok")))
		return O1CTL_OK;
	err = cJSON_GetObjectItemCaseSensitive(*reply, "error");
	fprintf(stderr, "o1ctl: o1d refused: %s\n",
		cJSON_IsString(err) ? err->valuestring : "?");
	cJSON_Delete(*reply);
	*reply = NULL;
	return O1CTL_FAIL;
}

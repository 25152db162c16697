/* See o1ctl_admin.h. Options are scanned by hand (positional arguments of
 * cancel stay where they are). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "error.h"
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

static int call(const char *sock, const char *req, cJSON **reply)
{
	char *buf = malloc(REPLY_MAX);
	int fd, n = -1;

	if (!buf)
		return 1;
	n = o1_admin_connect(sock, &fd);
	if (n) {
		fprintf(stderr, "o1ctl: cannot reach o1d at %s: %s%s\n", sock,
			o1_strerror(n),
			n == -EACCES || n == -EPERM ? " (not an admin uid)"
						    : "");
		free(buf);
		return 1;
	}
	n = o1_admin_call(fd, req, buf, REPLY_MAX);
	close(fd);
	*reply = n > 0 ? cJSON_Parse(buf) : NULL;
	if (!*reply)
		fprintf(stderr, "o1ctl: no valid reply from o1d (%s)\n",
			n < 0 ? o1_strerror(n) : "not JSON");
	free(buf);
	return *reply ? 0 : 1;
}

int o1ctl_admin(int argc, char **argv, const char *usage, const char *req,
		cJSON **reply, int *json)
{
	const char *sock = getenv("O1D_SOCKET");
	const cJSON *err;
	int ret = parse(argc, argv, &sock, json);

	if (ret) {
		fprintf(ret > 0 ? stdout : stderr, "%s", usage);
		return ret > 0 ? 0 : 2;
	}
	if (!sock || !*sock)
		sock = "/run/o1d/o1d.sock";
	if (call(sock, req, reply))
		return 1;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(*reply, "ok")))
		return 0;
	err = cJSON_GetObjectItemCaseSensitive(*reply, "error");
	fprintf(stderr, "o1ctl: o1d refused: %s\n",
		cJSON_IsString(err) ? err->valuestring : "?");
	cJSON_Delete(*reply);
	*reply = NULL;
	return 1;
}

/* sd_notify (see notify.h): NOTIFY_SOCKET is a path or, starting with
 * '@', an abstract socket name; the state goes in one datagram. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "notify.h"

int o1_notify_send(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t len;
	socklen_t alen;
	int fd, err = 0;

	if (!path || !*path)
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(a.sun_path)) {
		o1_warn("NOTIFY_SOCKET '%s' is not a socket path", path);
		return -EINVAL;
	}
	memcpy(a.sun_path, path, len);
	if (path[0] == '@')
		a.sun_path[0] = 0;
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		   (struct sockaddr *)&a, alen) < 0) {
		err = -errno;
		o1_warn("sd_notify %s to %s: %s", state, path, strerror(-err));
	}
	close(fd);
	return err ? err : 1;
}

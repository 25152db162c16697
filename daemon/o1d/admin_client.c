/* The admin protocol's client side (see admin.h): a SOCK_SEQPACKET
 * connection, the hello/welcome exchange, then one reply per message. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin.h"
#include "common/error.h"
#include "shm/wire.h"

static int hello(int fd)
{
	struct o1_wire_hello h = {
	    .magic = O1_HELLO_MAGIC,
	    .version = O1_WIRE_VERSION,
	    .flags = O1_HELLO_ADMIN,
	};
	struct o1_wire_welcome w;
	ssize_t n;

	snprintf(h.name, sizeof(h.name), "o1-admin");
	if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != sizeof(h))
		return -errno;
	n = recv(fd, &w, sizeof(w), 0);
	if (n < 0)
		return -errno;
	if (n < (ssize_t)offsetof(struct o1_wire_welcome, client_id) ||
	    w.magic != O1_WELCOME_MAGIC)
		return -EPROTO;
	/* a daemon of another protocol version answers a shorter refusal */
	if (w.version != O1_WIRE_VERSION)
		return w.status ? w.status : -O1_E_VERSION;
	return n == sizeof(w) ? w.status : -EPROTO;
}

int o1_admin_connect(const char *path, int *fd)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int s, err;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	err = connect(s, (struct sockaddr *)&a, sizeof(a)) ? -errno : 0;
	if (!err)
		err = hello(s);
	if (err) {
		close(s);
		return err;
	}
	*fd = s;
	return 0;
}

int o1_admin_call(int fd, const char *req, char *reply, size_t cap)
{
	size_t len = strlen(req);
	ssize_t n;

	if (!cap || len > O1_ADMIN_MSG_MAX)
		return -EINVAL;
	if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		return -errno;
	n = recv(fd, reply, cap - 1, 0);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	reply[n] = 0;
	return (int)n;
}

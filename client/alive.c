/* Noticing that the daemon is gone, and the fd an event loop polls.
 *
 * The control socket carries nothing after the welcome unless the hello
 * set O1_HELLO_WAKE_SOCKET: then each wake-up of our completion doorbell
 * brings one byte, which we read and drop. End of file (or a reset) on it
 * means the daemon's end closed: gone, for good, until a reconnect. The
 * socket is read only where a call found nothing to do, and at most every
 * ALIVE_CHECK_NS when nothing forces it, so the hot path stays free of
 * system calls.
 *
 * o1_client_fd (pollable handles): o1_client_poll that finds the ring
 * empty reads the pending bytes, sets NEED_WAKEUP on the completion ring
 * (o1_doorbell_prepare: a full fence) and looks once more; the daemon
 * publishes, then sees NEED_WAKEUP and sends a byte. Either the second
 * look finds the event or the byte makes the fd readable: the pairing of
 * shm/doorbell.h. Taking an event clears NEED_WAKEUP again, so a busy
 * reader costs the daemon no wake-ups.
 *
 * Once the daemon is gone and its last events are taken, the region is
 * unmapped (every call then finds no region: O1_CLIENT_E_DAEMON_GONE);
 * the socket stays open, so the fd a caller registered is not reused
 * under it, until o1_client_close or o1_client_reconnect. */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "shm/doorbell.h"

#define ALIVE_CHECK_NS 100000000ull

_Static_assert(O1_CLIENT_E_DAEMON_GONE == -ECONNRESET, "client.h");

/* Reads the socket dry without waiting: wake-up bytes are dropped, end of
 * file or an error means the daemon is gone. */
static void read_socket(struct o1_client *c)
{
	char buf[64];
	ssize_t n;

	do
		n = recv(c->sock, buf, sizeof(buf), MSG_DONTWAIT);
	while (n > 0 || (n < 0 && errno == EINTR));
	if (n == 0 || errno != EAGAIN)
		c->gone = 1;
}

int o1_client_gone_error(struct o1_client *c)
{
	if (c->base)
		munmap(c->base, c->map_bytes);
	c->base = NULL;
	if (c->efd >= 0)
		close(c->efd);
	c->efd = -1;
	free(c->ends);
	c->ends = NULL;
	c->gone = 1;
	return o1_client_fail(O1_CLIENT_E_DAEMON_GONE, "the daemon is gone");
}

int o1_client_gone(struct o1_client *c, int force)
{
	uint64_t now;

	if (!c->base || c->gone)
		return 1;
	now = o1_client_now_ns();
	if (!force && now - c->alive_at_ns < ALIVE_CHECK_NS)
		return 0;
	c->alive_at_ns = now;
	read_socket(c);
	return c->gone;
}

void o1_client_busy(struct o1_client *c)
{
	if (!c->fd_armed)
		return;
	c->fd_armed = 0;
	o1_doorbell_cancel(o1_region_cq_ctrl(c->base, &c->l));
}

int o1_client_idle(struct o1_client *c, struct o1_event *ev)
{
	int pollable = !!(c->o.flags & O1_CONNECT_POLLABLE), ret;

	if (pollable && !c->gone) {
		read_socket(c);
		o1_doorbell_prepare(o1_region_cq_ctrl(c->base, &c->l));
		c->fd_armed = 1;
	} else if (!o1_client_gone(c, 0)) {
		return 0;
	}
	/* what came before the wake-up was asked for, or before the end */
	ret = o1_client_take(c, ev);
	if (ret) {
		o1_client_busy(c);
		return ret;
	}
	return c->gone ? o1_client_gone_error(c) : 0;
}

int o1_client_fd(struct o1_client *c)
{
	if (!c || !(c->o.flags & O1_CONNECT_POLLABLE))
		return o1_client_fail(-EINVAL, "connected without "
					       "O1_CONNECT_POLLABLE");
	if (!c->base || c->gone)
		return o1_client_fail(O1_CLIENT_E_DAEMON_GONE,
				      "the daemon is gone");
	return c->sock;
}

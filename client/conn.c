/* Connecting: the SOCK_SEQPACKET handshake, checking the welcome and the
 * descriptors that came with it, mapping and checking the region. The
 * daemon is trusted more than clients are, but a wrong welcome (bad
 * magic, version, fd count or region header) is still refused cleanly. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "common/error.h"

#define MAX_FDS 4

_Static_assert(sizeof(((struct o1_device_output *)0)->mem_handle) ==
		       O1_DEVOUT_HANDLE_BYTES &&
		   sizeof(((struct o1_device_output *)0)->event_handle) ==
		       O1_DEVOUT_HANDLE_BYTES &&
		   sizeof(((struct o1_device_output *)0)->pci_bus_id) ==
		       O1_DEVOUT_BUS_ID_MAX,
	       "device output description");

static __thread char last_error[256];

int o1_client_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err;
}

const char *o1_last_error(void)
{
	return last_error;
}

const char *o1_client_strerror(int err)
{
	return o1_strerror(err);
}

uint64_t o1_client_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int open_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return o1_client_fail(-ENAMETOOLONG, "socket path too long: %s",
				      path);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return o1_client_fail(-errno, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ret = -errno;
		close(fd);
		return o1_client_fail(ret, "cannot connect to %s: %s", path,
				      strerror(-ret));
	}
	return fd;
}

static int send_hello(struct o1_client *c)
{
	struct o1_wire_hello h = {
	    .magic = O1_HELLO_MAGIC,
	    .version = O1_WIRE_VERSION,
	    .sq_entries = c->o.sq_entries,
	    .cq_entries = c->o.cq_entries,
	    .arena_bytes = c->o.arena_bytes,
	    .flags =
		c->o.flags & O1_CONNECT_DEVICE_OUT ? O1_HELLO_DEVICE_OUT : 0,
	};

	memcpy(h.name, c->name, sizeof(h.name));
	if (send(c->sock, &h, sizeof(h), MSG_NOSIGNAL) != sizeof(h))
		return o1_client_fail(-errno, "cannot send hello: %s",
				      strerror(errno));
	return 0;
}

/* Collects the descriptors of a message; returns how many (may exceed
 * max, in which case all are closed and -O1_E_PROTOCOL returned). */
static int take_fds(struct msghdr *mh, int *fds, int max)
{
	struct cmsghdr *cm;
	int n = 0, bad = 0;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int got[k > 0 ? k : 1];

		memcpy(got, CMSG_DATA(cm), (size_t)k * sizeof(int));
		for (int i = 0; i < k; i++) {
			if (n < max)
				fds[n++] = got[i];
			else {
				close(got[i]);
				bad = 1;
			}
		}
	}
	if (bad || (mh->msg_flags & MSG_CTRUNC)) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		return -O1_E_PROTOCOL;
	}
	return n;
}

static int check_welcome(const struct o1_wire_welcome *w, ssize_t len,
			 int n_fds, int asked)
{
	/* The version first: an older daemon's welcome is shorter. */
	if (len < (ssize_t)offsetof(struct o1_wire_welcome, status) ||
	    w->magic != O1_WELCOME_MAGIC)
		return o1_client_fail(-O1_E_PROTOCOL,
				      "bad welcome: %zd bytes, magic 0x%08x",
				      len, len >= 4 ? w->magic : 0);
	if (w->version != O1_WIRE_VERSION)
		return o1_client_fail(-O1_E_VERSION,
				      "daemon speaks protocol %u, we speak %u",
				      w->version, O1_WIRE_VERSION);
	if (len != sizeof(*w))
		return o1_client_fail(-O1_E_PROTOCOL, "bad welcome: %zd bytes",
				      len);
	if (w->status)
		return o1_client_fail(w->status, "daemon refused us: %s",
				      o1_strerror(w->status));
	if (o1_wire_devout_check(&w->devout, w->vocab_size) ||
	    (!asked && w->devout.rows))
		return o1_client_fail(-O1_E_PROTOCOL,
				      "bad device output area in the welcome");
	if (w->n_fds < 1 || w->n_fds > 2 || w->n_fds != n_fds)
		return o1_client_fail(-O1_E_PROTOCOL,
				      "welcome announces %u fds, %d arrived",
				      w->n_fds, n_fds);
	return 0;
}

/* recvmsg that sees through a reset. When a SOCK_SEQPACKET peer closes
 * with data of ours still unread (the daemon refuses a connection before
 * our hello reached it), the kernel sets ECONNRESET on our socket and
 * reports it once, ahead of the messages already queued to us. The
 * daemon queues its refusal before it closes, so a second, non-blocking
 * read returns that refusal; with nothing queued the reset stands. */
static ssize_t recv_past_reset(int sock, struct msghdr *mh, int flags)
{
	size_t controllen = mh->msg_controllen;
	ssize_t len = recvmsg(sock, mh, flags | MSG_CMSG_CLOEXEC);

	if (len >= 0 || errno != ECONNRESET)
		return len;
	mh->msg_controllen = controllen;
	mh->msg_flags = 0;
	len = recvmsg(sock, mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (len <= 0) {
		errno = ECONNRESET;
		return -1;
	}
	return len;
}

static int recv_welcome(struct o1_client *c, int flags, int *fds, int *n_fds)
{
	union {
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = &c->w, .iov_len = sizeof(c->w)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cm.buf,
			    .msg_controllen = sizeof(cm.buf)};
	ssize_t len = recv_past_reset(c->sock, &mh, flags);
	int n, ret;

	if (len < 0)
		return o1_client_fail(-errno, "no welcome: %s",
				      strerror(errno));
	if (len == 0)
		return o1_client_fail(-ECONNRESET, "daemon hung up");
	n = take_fds(&mh, fds, 2);
	if (n < 0)
		return o1_client_fail(n, "welcome carried too many fds");
	ret = check_welcome(&c->w, len, n,
			    !!(c->o.flags & O1_CONNECT_DEVICE_OUT));
	if (ret) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		return ret;
	}
	*n_fds = n;
	return 0;
}

int o1_client_attach(struct o1_client *c, int memfd)
{
	uint16_t flags;
	struct stat st;
	int ret;

	if (fstat(memfd, &st) != 0 || (uint64_t)st.st_size < c->w.region_bytes)
		return o1_client_fail(-O1_E_PROTOCOL, "region fd too small");
	c->map_bytes = c->w.region_bytes;
	c->base = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		       memfd, 0);
	if (c->base == MAP_FAILED) {
		c->base = NULL;
		return o1_client_fail(-errno, "mmap region: %s",
				      strerror(errno));
	}
	ret = o1_region_check(c->base, c->map_bytes, &c->l, &flags);
	if (ret)
		return o1_client_fail(ret, "bad region header: %s",
				      o1_strerror(ret));
	if (!!(flags & O1_REGION_EVENTFD) != (c->efd >= 0))
		return o1_client_fail(-O1_E_PROTOCOL,
				      "region doorbell mode and fds disagree");
	c->ends = calloc(c->l.sq_entries, sizeof(*c->ends));
	if (!c->ends)
		return o1_client_fail(-ENOMEM, "out of memory");
	c->arena_head = c->arena_tail = 0;
	c->reclaimed = 0;
	c->inflight = 0;
	return o1_region_rings(c->base, &c->l, &c->sq, &c->cq);
}

void o1_client_detach(struct o1_client *c)
{
	if (c->base)
		munmap(c->base, c->map_bytes);
	c->base = NULL;
	if (c->efd >= 0)
		close(c->efd);
	if (c->sock >= 0)
		close(c->sock);
	c->efd = c->sock = -1;
	free(c->ends);
	c->ends = NULL;
}

/* The hello could not be sent (err) because the daemon had already
 * refused the connection and closed it: the refusal it queued before
 * closing says why. Without one, err stands. */
static int late_refusal(struct o1_client *c, int err)
{
	char why[sizeof(last_error)];
	int fds[2], n = 0, ret;

	memcpy(why, last_error, sizeof(why));
	ret = recv_welcome(c, MSG_DONTWAIT, fds, &n);
	if (ret && ret != -EAGAIN && ret != -ECONNRESET)
		return ret;
	for (int i = 0; i < n; i++)
		close(fds[i]);
	memcpy(last_error, why, sizeof(why));
	return err;
}

static int handshake(struct o1_client *c)
{
	int fds[2], n = 0, ret;

	c->sock = open_socket(c->path);
	if (c->sock < 0)
		return c->sock;
	ret = send_hello(c);
	if (ret == -EPIPE || ret == -ECONNRESET)
		ret = late_refusal(c, ret);
	else if (!ret)
		ret = recv_welcome(c, 0, fds, &n);
	if (ret)
		goto detach;
	c->efd = n == 2 ? fds[1] : -1;
	ret = o1_client_attach(c, fds[0]);
	close(fds[0]);
	if (ret)
		goto detach;
	return 0;
detach:
	o1_client_detach(c);
	return ret;
}

static int copy_opts(struct o1_client *c, const struct o1_client_opts *in)
{
	size_t n = in->sz < sizeof(c->o) ? in->sz : sizeof(c->o);
	const char *path;

	memcpy(&c->o, in, n);
	c->o.sz = sizeof(c->o);
	path = c->o.socket_path ? c->o.socket_path : getenv("O1D_SOCKET");
	c->path = strdup(path ? path : "/run/o1d/o1d.sock");
	if (!c->path)
		return -ENOMEM;
	snprintf(c->name, sizeof(c->name), "%s",
		 c->o.name ? c->o.name : "o1client");
	c->o.socket_path = c->path;
	c->o.name = NULL;
	c->spin_ns = (c->o.spin_us ? c->o.spin_us : 20) * 1000ull;
	return 0;
}

int o1_client_connect(const struct o1_client_opts *opts, struct o1_client **out)
{
	struct o1_client *c;
	int ret;

	if (!opts || !out || opts->sz < offsetof(struct o1_client_opts, name))
		return o1_client_fail(-EINVAL, "bad options");
	c = calloc(1, sizeof(*c));
	if (!c)
		return o1_client_fail(-ENOMEM, "out of memory");
	c->sock = c->efd = -1;
	ret = copy_opts(c, opts);
	if (!ret)
		ret = handshake(c);
	if (ret) {
		o1_client_close(c);
		return ret;
	}
	*out = c;
	return 0;
}

void o1_client_close(struct o1_client *c)
{
	if (!c)
		return;
	o1_client_detach(c);
	free(c->path);
	free(c);
}

int o1_client_reconnect(struct o1_client *c, int timeout_ms)
{
	uint64_t end = o1_client_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct timespec pause = {.tv_nsec = 20000000};
	int ret;

	o1_client_detach(c);
	for (;;) {
		ret = handshake(c);
		if (ret == 0 || (ret != -ENOENT && ret != -ECONNREFUSED) ||
		    o1_client_now_ns() >= end)
			return ret;
		nanosleep(&pause, NULL);
	}
}

int o1_client_device_output(const struct o1_client *c,
			    struct o1_device_output *out)
{
	const struct o1_wire_devout *d;
	struct o1_device_output o = {.sz = sizeof(o)};

	if (!c || !out || out->sz < offsetof(struct o1_device_output, rows))
		return o1_client_fail(-EINVAL, "bad arguments");
	if (!(c->o.flags & O1_CONNECT_DEVICE_OUT))
		return o1_client_fail(-EINVAL, "connected without "
					       "O1_CONNECT_DEVICE_OUT");
	if (!c->base)
		return o1_client_fail(-ECONNRESET, "not connected");
	d = &c->w.devout;
	if (!d->rows)
		return o1_client_fail(
		    d->status ? d->status : -O1_E_NO_DEVOUT,
		    "no device output area: %s",
		    o1_strerror(d->status ? d->status : -O1_E_NO_DEVOUT));
	o.area = d->area;
	o.rows = d->rows;
	o.row_floats = d->row_floats;
	o.row_stride_bytes = d->row_stride_bytes;
	o.stamps_off = d->stamps_off;
	o.area_bytes = d->area_bytes;
	memcpy(o.pci_bus_id, d->pci_bus_id, sizeof(o.pci_bus_id));
	memcpy(o.mem_handle, d->mem_handle, sizeof(o.mem_handle));
	memcpy(o.event_handle, d->event_handle, sizeof(o.event_handle));
	memcpy(out, &o, out->sz < sizeof(o) ? out->sz : sizeof(o));
	out->sz = out->sz < sizeof(o) ? out->sz : sizeof(o);
	return 0;
}

unsigned o1_client_inflight(const struct o1_client *c)
{
	return c->inflight;
}

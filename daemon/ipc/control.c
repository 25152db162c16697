/* Control socket: listener, credentials, handshake messages and region
 * memfds. The memfd is sealed (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
 * before it leaves the daemon, so a client can never truncate memory the
 * daemon has mapped (which would turn daemon reads into SIGBUS). */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"

static int fill_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		o1_err("ipc: socket path too long (%zu bytes, max %zu): %s",
		       strlen(path), sizeof(sa->sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa->sun_path, path);
	return 0;
}

/* Removes path only when it is a socket (left by a dead daemon). */
static int remove_stale(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		o1_err("ipc: %s exists and is not a socket", path);
		return -EEXIST;
	}
	return unlink(path) == 0 ? 0 : -errno;
}

int o1_ipc_listen(const char *path, uint32_t mode, int *out_fd)
{
	struct sockaddr_un sa;
	int fd, ret;

	ret = fill_addr(path, &sa);
	if (ret)
		return ret;
	ret = remove_stale(path);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(path, mode) != 0 || listen(fd, 128) != 0) {
		ret = -errno;
		o1_err("ipc: cannot listen on %s: %s", path, strerror(-ret));
		goto close_fd;
	}
	*out_fd = fd;
	return 0;
close_fd:
	close(fd);
	return ret;
}

static int in_list(uint32_t v, const uint32_t *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] == v)
			return 1;
	return 0;
}

static int groups_allowed(int fd, const struct o1_ipc_opts *o)
{
	gid_t groups[64];
	socklen_t len = sizeof(groups);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
		return 0;
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (in_list(groups[i], o->allowed_gids, o->n_allowed_gids))
			return 1;
	return 0;
}

int o1_ipc_admin_check(const struct o1_ipc_opts *o, const struct ucred *cred)
{
	if (!o->n_admin_uids)
		return cred->uid == geteuid() || cred->uid == 0 ? 0 : -EACCES;
	return in_list(cred->uid, o->admin_uids, o->n_admin_uids) ? 0 : -EACCES;
}

int o1_ipc_peer_check(int fd, const struct o1_ipc_opts *o, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0)
		return -errno;
	if (!o->n_allowed_uids && !o->n_allowed_gids)
		return cred->uid == geteuid() || cred->uid == 0 ? 0 : -EACCES;
	if (in_list(cred->uid, o->allowed_uids, o->n_allowed_uids) ||
	    in_list(cred->gid, o->allowed_gids, o->n_allowed_gids) ||
	    (o->n_allowed_gids && groups_allowed(fd, o)))
		return 0;
	return -EACCES;
}

/* Closes any descriptors that arrived with a message; returns how many. */
static int drop_fds(struct msghdr *mh)
{
	struct cmsghdr *c;
	int n = 0;

	for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int fds[k ? k : 1];

		memcpy(fds, CMSG_DATA(c), k * sizeof(int));
		for (size_t i = 0; i < k; i++, n++)
			close(fds[i]);
	}
	return n;
}

int o1_ipc_recv_hello(int fd, struct o1_wire_hello *out)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct o1_wire_hello h;
	struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cm.buf,
			    .msg_controllen = sizeof(cm.buf)};
	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return errno == EAGAIN ? -EAGAIN : -errno;
	if (n == 0)
		return -ECONNRESET;
	if (drop_fds(&mh) || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ||
	    n != sizeof(h) || h.magic != O1_HELLO_MAGIC ||
	    (h.flags & ~O1_HELLO_FLAGS_ALL) || h.pad) {
		o1_warn("ipc: bad hello: %zd bytes, magic 0x%08x, flags 0x%x",
			n, n >= 4 ? h.magic : 0, (unsigned)mh.msg_flags);
		return -O1_E_PROTOCOL;
	}
	if (h.version != O1_WIRE_VERSION) {
		o1_warn("ipc: client protocol version %u, daemon speaks %u",
			h.version, O1_WIRE_VERSION);
		return -O1_E_VERSION;
	}
	h.name[O1_NAME_MAX - 1] = 0;
	*out = h;
	return 0;
}

int o1_ipc_discard(int fd)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	char data[64];
	struct iovec iov = {.iov_base = data, .iov_len = sizeof(data)};
	struct msghdr mh;
	ssize_t n;
	int got = 0;

	for (int i = 0; i < 8; i++) {
		mh = (struct msghdr){.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = cm.buf,
				     .msg_controllen = sizeof(cm.buf)};
		n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && got && errno == EAGAIN)
			break;
		if (n < 0)
			return -errno;
		if (n == 0)
			return got ? got : -ECONNRESET;
		drop_fds(&mh);
		got++;
	}
	return got;
}

int o1_ipc_region_create(const struct o1_region_layout *l, uint16_t flags,
			 uint32_t client_id, int *memfd, void **base)
{
	void *p;
	int fd, ret;

	fd = memfd_create("o1d-client", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, l->total_bytes) != 0) {
		ret = -errno;
		goto close_fd;
	}
	p = mmap(NULL, l->total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto close_fd;
	}
	o1_region_format(p, l, flags, client_id);
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		ret = -errno;
		goto unmap;
	}
	*memfd = fd;
	*base = p;
	return 0;
unmap:
	munmap(p, l->total_bytes);
close_fd:
	close(fd);
	o1_err("ipc: cannot create a %u-byte region: %s", l->total_bytes,
	       strerror(-ret));
	return ret;
}

int o1_ipc_send_welcome(int fd, const struct o1_wire_welcome *w, const int *fds,
			int n_fds)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = (void *)w, .iov_len = sizeof(*w)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;

	if (n_fds < 0 || n_fds > 2)
		return -EINVAL;
	if (n_fds) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(*w))
		return -errno;
	return 0;
}

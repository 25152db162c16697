/* Control socket: listener, credentials, handshake messages and region
 * memfds. One daemon per socket path: a path is taken over only when no
 * one listens there (a socket left by a dead daemon), never from a live
 * owner, and the check and the bind happen under a lock on the directory. The memfd is sealed (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
 * before it leaves the daemon, so a client can never truncate memory the
 * daemon has mapped (which would turn daemon reads into SIGBUS). */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
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

/* Whether someone listens at path (see control.h). A connect that
 * succeeds, or finds the backlog full, or a socket of another type bound
 * there, means a live owner; ECONNREFUSED means a socket file nobody is
 * bound to. A listener whose process (SO_PEERCRED: the one that called
 * listen) is gone is not an owner: a SIGKILLed daemon's io_uring keeps its
 * listener open for a moment after the process died. The probe connection
 * is closed at once: the owner sees a hang-up before any hello. */
static int probe(const char *path, const struct sockaddr_un *sa, pid_t *pid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct stat st;
	int fd, ret;

	*pid = 0;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		o1_err("ipc: %s exists and is not a socket", path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0) {
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
			*pid = cred.pid;
		ret = *pid > 0 && kill(*pid, 0) != 0 && errno == ESRCH ? 0 : 1;
	} else if (errno == ECONNREFUSED || errno == ENOENT) {
		ret = 0;
	} else if (errno == EAGAIN || errno == EPROTOTYPE) {
		ret = 1;
	} else {
		ret = -errno;
		o1_err("ipc: cannot tell whether a daemon serves on %s: %s",
		       path, strerror(-ret));
	}
	close(fd);
	return ret;
}

static void log_owner(const char *path, pid_t pid)
{
	if (pid > 0)
		o1_err("another o1d (pid %d) is serving on %s; stop it or set "
		       "ipc.socket",
		       (int)pid, path);
	else
		o1_err("another process is listening on %s; stop it or set "
		       "ipc.socket",
		       path);
}

/* Removes path only when it is a socket nobody listens on (left by a dead
 * daemon); a live owner's is left alone: -EADDRINUSE. */
static int remove_stale(const char *path, const struct sockaddr_un *sa)
{
	pid_t pid;
	int ret = probe(path, sa, &pid);

	if (ret == 1) {
		log_owner(path, pid);
		return -EADDRINUSE;
	}
	if (ret < 0)
		return ret;
	if (unlink(path) != 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int o1_ipc_probe(const char *path, pid_t *pid)
{
	struct sockaddr_un sa;
	int ret = fill_addr(path, &sa);

	*pid = 0;
	return ret ? ret : probe(path, &sa, pid);
}

/* The directory that holds path, into dir (cap bytes). */
static void parent_dir(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	int n = slash ? (int)(slash - path) : 0;

	if (!slash)
		snprintf(dir, cap, ".");
	else
		snprintf(dir, cap, "%.*s", n ? n : 1, path);
}

static int check_dir(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct stat st;
	int err = 0;

	parent_dir(path, dir, sizeof(dir));
	if (stat(dir, &st) != 0)
		err = -errno;
	if (err == -ENOENT)
		o1_err("ipc.socket %s: directory %s does not exist: systemd's "
		       "RuntimeDirectory makes it, or set ipc.socket",
		       path, dir);
	else if (err)
		o1_err("ipc.socket %s: cannot reach directory %s: %s", path,
		       dir, strerror(-err));
	else if (!S_ISDIR(st.st_mode))
		err = -ENOTDIR;
	if (err == -ENOTDIR)
		o1_err("ipc.socket %s: %s is not a directory", path, dir);
	if (err)
		return err;
	if (access(dir, W_OK | X_OK) != 0) {
		err = -errno;
		o1_err("ipc.socket %s: cannot create a socket in %s (%s): run "
		       "o1d as a user who may, or set ipc.socket",
		       path, dir, strerror(-err));
	}
	return err;
}

int o1_ipc_socket_check(const char *path)
{
	struct sockaddr_un sa;
	pid_t pid;
	int ret;

	if (!path || !*path) {
		o1_err("ipc.socket is empty: set the control socket's path");
		return -O1_E_CONFIG;
	}
	ret = fill_addr(path, &sa);
	if (!ret)
		ret = check_dir(path);
	if (!ret)
		ret = probe(path, &sa, &pid);
	if (ret == 1) {
		log_owner(path, pid);
		return -EADDRINUSE;
	}
	return ret;
}

/* An exclusive flock on path's directory, so that two daemons starting at
 * once cannot both find the path free and one unlink the other's fresh
 * socket. Held only while the listener is made; waits up to about 5 s for
 * a holder that is not an o1d doing the same, then goes on without (-1). */
static int lock_dir(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct timespec pause = {0, 10 * 1000 * 1000};
	int fd;

	parent_dir(path, dir, sizeof(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (int i = 0; i < 500; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK)
			break;
		nanosleep(&pause, NULL);
	}
	o1_warn("ipc: could not lock %s; making the socket without", dir);
	close(fd);
	return -1;
}

static void unlock_dir(int fd)
{
	if (fd >= 0)
		close(fd); /* drops the flock */
}

int o1_ipc_listen(const char *path, uint32_t mode, int *out_fd)
{
	struct sockaddr_un sa;
	int fd, ret, lock;

	ret = fill_addr(path, &sa);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	lock = lock_dir(path);
	ret = remove_stale(path, &sa);
	if (ret)
		goto close_fd;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(path, mode) != 0 || listen(fd, 128) != 0) {
		ret = -errno;
		o1_err("ipc: cannot listen on %s: %s", path, strerror(-ret));
		goto close_fd;
	}
	unlock_dir(lock);
	*out_fd = fd;
	return 0;
close_fd:
	unlock_dir(lock);
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

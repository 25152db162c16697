/* Test helpers (see ipc_harness.h). Plain POSIX, no cmocka: failures return
 * an error and the test asserts on it. */
#include "ipc_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/doorbell.h"

int server_start(struct test_server *s, const char *binary,
		 const char *const *args)
{
	const char *argv[32];
	char line[256];
	int pipefd[2], n = 0;

	if (!s->dir[0]) { /* a restart keeps the directory and the path */
		strcpy(s->dir, "/tmp/o1ipc.XXXXXX");
		if (!mkdtemp(s->dir))
			return -1;
	} else if (mkdir(s->dir, 0700) && errno != EEXIST) {
		return -1;
	}
	if (pipe(pipefd))
		return -1;
	snprintf(s->path, sizeof(s->path), "%s/o1d.sock", s->dir);
	argv[n++] = binary;
	argv[n++] = "--socket";
	argv[n++] = s->path;
	for (int i = 0; args && args[i] && n < 28; i++)
		argv[n++] = args[i];
	if (getenv("O1_TEST_FRONTS")) { /* the same tests, sharded */
		argv[n++] = "--fronts";
		argv[n++] = getenv("O1_TEST_FRONTS");
	}
	argv[n] = NULL;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		/* Dies with the test, even when an assertion ends it early. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (s->log[0]) {
			int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC,
				      0600);

			if (fd < 0)
				_exit(126);
			dup2(fd, 2);
			close(fd);
		}
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		close(pipefd[1]);
		execv(binary, (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	s->out = fdopen(pipefd[0], "r");
	if (!s->out || !fgets(line, sizeof(line), s->out) ||
	    strcmp(line, "ready\n"))
		return -1;
	return 0;
}

int server_stats(struct test_server *s, struct server_stats *st)
{
	char line[512];

	kill(s->pid, SIGHUP);
	if (!fgets(line, sizeof(line), s->out))
		return -1;
	if (sscanf(line,
		   "stats connected=%llu total=%llu refused=%llu deaths=%llu "
		   "violations=%llu kicked=%llu requests=%llu pings=%llu "
		   "sleeps=%llu futex=%d wake_spin=%llu wake_spin_ns=%llu "
		   "wake_sleep=%llu wake_sleep_ns=%llu wake_invalid=%llu "
		   "observed=%llu observed_max_ns=%llu wake_empty=%llu "
		   "storms=%llu evicted=%llu uid_refused=%llu ticks=%llu "
		   "cq_full=%llu room_wakes=%llu tick_refills=%llu",
		   &st->connected, &st->total, &st->refused, &st->deaths,
		   &st->violations, &st->kicked, &st->requests, &st->pings,
		   &st->sleeps, &st->futex, &st->wake_spin, &st->wake_spin_ns,
		   &st->wake_sleep, &st->wake_sleep_ns, &st->wake_invalid,
		   &st->observed, &st->observed_max_ns, &st->wake_empty,
		   &st->storms, &st->evicted, &st->uid_refused, &st->ticks,
		   &st->cq_full, &st->room_wakes, &st->tick_refills) != 25)
		return -1;
	return 0;
}

int server_wait(struct test_server *s,
		int (*pred)(const struct server_stats *, void *), void *arg,
		struct server_stats *st)
{
	/* 20 s at least: generous for a loaded machine under ASan, where
	 * other front threads publish their counters at a 100 ms tick */
	for (int i = 0; i < 2000; i++) {
		if (server_stats(s, st))
			return -1;
		if (pred(st, arg))
			return 0;
		usleep(10000);
	}
	return -1;
}

int server_stop(struct test_server *s)
{
	int status;

	kill(s->pid, SIGTERM);
	if (waitpid(s->pid, &status, 0) != s->pid)
		return -1;
	if (s->out)
		fclose(s->out);
	s->out = NULL;
	rmdir(s->dir);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void raw_hello(struct o1_wire_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->magic = O1_HELLO_MAGIC;
	h->version = O1_WIRE_VERSION;
	strcpy(h->name, "raw");
}

static int send_with_fds(int sock, const void *buf, size_t len, const int *fds,
			 int n)
{
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr a;
	} cm;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;

	if (n) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	}
	return sendmsg(sock, &mh, 0) == (ssize_t)len ? 0 : -1;
}

static int recv_welcome(struct raw_client *r, int *fds, int *n)
{
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr a;
	} cm;
	struct iovec iov = {.iov_base = &r->w, .iov_len = sizeof(r->w)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cm.b,
			    .msg_controllen = sizeof(cm.b)};
	struct cmsghdr *c;

	*n = 0;
	if (recvmsg(r->sock, &mh, 0) != sizeof(r->w))
		return -1;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

		memcpy(fds + *n, CMSG_DATA(c), k * sizeof(int));
		*n += k;
	}
	return 0;
}

int raw_connect(struct raw_client *r, const char *path,
		const struct o1_wire_hello *hello, const int *send_fds,
		int n_send_fds)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint16_t flags;
	int fds[8], n;

	memset(r, 0, sizeof(*r));
	r->memfd = r->efd = -1;
	strcpy(sa.sun_path, path);
	r->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (r->sock < 0 ||
	    connect(r->sock, (struct sockaddr *)&sa, sizeof(sa)) ||
	    send_with_fds(r->sock, hello, sizeof(*hello), send_fds,
			  n_send_fds) ||
	    recv_welcome(r, fds, &n))
		return -1000;
	if (r->w.status)
		return n == 0 ? r->w.status : -1000;
	if (n == 0 && r->w.n_fds == 0)
		return 1; /* admin connection */
	if (n != r->w.n_fds || n < 1)
		return -1000;
	r->memfd = fds[0];
	r->efd = n == 2 ? fds[1] : -1;
	r->base = mmap(NULL, r->w.region_bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED, r->memfd, 0);
	if (r->base == MAP_FAILED ||
	    o1_region_check(r->base, r->w.region_bytes, &r->l, &flags))
		return -1000;
	return 0;
}

void raw_close(struct raw_client *r)
{
	if (r->base && r->base != MAP_FAILED)
		munmap(r->base, r->w.region_bytes);
	if (r->memfd >= 0)
		close(r->memfd);
	if (r->efd >= 0)
		close(r->efd);
	if (r->sock >= 0)
		close(r->sock);
	memset(r, 0, sizeof(*r));
	r->sock = r->memfd = r->efd = -1;
}

void raw_ring(struct raw_client *r)
{
	o1_doorbell_ring(o1_region_sq_ctrl(r->base, &r->l), r->efd);
}

int raw_hung_up(struct raw_client *r, int ms)
{
	struct pollfd p = {.fd = r->sock, .events = POLLIN | POLLRDHUP};
	char b;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	return recv(r->sock, &b, 1, MSG_DONTWAIT) == 0;
}

/* libo1client tests, linked against the shared library (so only the
 * exported API is reachable): a fake daemon sends broken welcomes (missing
 * or extra fds, bad version, bad region) or refuses before reading the
 * hello; against the test server: token
 * ids and stop ids, cancellation, arena and ring exhaustion and reuse,
 * argument errors, and reconnecting after a daemon restart. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "tests/ipc/ipc_harness.h"
#include "o1/client.h"
#include "shm/region.h"
#include "shm/wire.h"

static struct o1_client *connect_to(const char *path, uint32_t sq,
				    uint32_t arena)
{
	struct o1_client_opts o = {.sz = sizeof(o),
				   .socket_path = path,
				   .sq_entries = sq,
				   .arena_bytes = arena};
	struct o1_client *c = NULL;

	if (o1_client_connect(&o, &c))
		fail_msg("connect: %s", o1_last_error());
	return c;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static int delay_hello;

/* Interposes the library's send: with delay_hello set, a hello waits until
 * the peer has closed, so that it fails with EPIPE (the late-hello order,
 * otherwise a rare race). */
ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	const struct o1_wire_hello *h = buf;
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};

	if (delay_hello && len == sizeof(*h) && h->magic == O1_HELLO_MAGIC)
		poll(&p, 1, 2000);
	return sendto(fd, buf, len, flags, NULL, 0);
}

enum fake_mode {
	FAKE_NO_FDS,
	FAKE_THREE_FDS,
	FAKE_VERSION,
	FAKE_SMALL,
	FAKE_MAGIC,
	FAKE_REFUSE /* refuses and closes at once, hello unread or unsent */
};

struct fake {
	char path[108];
	int lfd;
	enum fake_mode mode;
};

static int make_memfd(size_t bytes, int good_header)
{
	struct o1_region_layout l;
	int fd = memfd_create("fake", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)bytes))
		return -1;
	if (o1_region_layout(4, 4, 4096, &l))
		return -1;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	o1_region_format(p, &l, 0, 1);
	if (!good_header)
		((struct o1_region_hdr *)p)->magic = 0;
	munmap(p, bytes);
	return fd;
}

static void *fake_daemon(void *arg)
{
	struct fake *f = arg;
	union {
		char b[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr a;
	} cm;
	struct o1_wire_welcome w = {
	    .magic = O1_WELCOME_MAGIC, .version = O1_WIRE_VERSION, .n_fds = 1};
	struct o1_wire_hello h;
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;
	int fd = accept(f->lfd, NULL, NULL), fds[3], n = 0;
	struct o1_region_layout l;

	if (fd >= 0 && f->mode == FAKE_REFUSE) {
		w.status = -O1_E_QUOTA;
		w.n_fds = 0;
		send(fd, &w, sizeof(w), MSG_NOSIGNAL);
		close(fd);
		return NULL;
	}
	if (fd < 0 || recv(fd, &h, sizeof(h), 0) != sizeof(h))
		return NULL;
	o1_region_layout(4, 4, 4096, &l);
	w.region_bytes = l.total_bytes;
	if (f->mode == FAKE_THREE_FDS)
		for (n = 0; n < 3; n++)
			fds[n] = make_memfd(l.total_bytes, 1);
	else if (f->mode == FAKE_SMALL)
		fds[n++] = make_memfd(4096, 1);
	else if (f->mode == FAKE_MAGIC || f->mode == FAKE_VERSION)
		fds[n++] = make_memfd(l.total_bytes, f->mode != FAKE_MAGIC);
	if (f->mode == FAKE_VERSION)
		w.version = 7;
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
	sendmsg(fd, &mh, 0);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	close(fd);
	return NULL;
}

static int run_fake(enum fake_mode mode)
{
	struct fake f = {.mode = mode};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct o1_client_opts o = {.sz = sizeof(o)};
	struct o1_client *c = NULL;
	pthread_t t;
	int ret;

	snprintf(f.path, sizeof(f.path), "/tmp/o1fake.%d.sock", (int)getpid());
	unlink(f.path);
	strcpy(sa.sun_path, f.path);
	f.lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_int_equal(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f.lfd, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, fake_daemon, &f), 0);
	o.socket_path = f.path;
	ret = o1_client_connect(&o, &c);
	pthread_join(t, NULL);
	close(f.lfd);
	unlink(f.path);
	assert_null(c);
	return ret;
}

static void test_bad_welcomes(void **state)
{
	int before = open_fds();

	(void)state;
	assert_int_equal(run_fake(FAKE_NO_FDS), -O1_E_PROTOCOL);
	assert_non_null(strstr(o1_last_error(), "fds"));
	assert_int_equal(run_fake(FAKE_THREE_FDS), -O1_E_PROTOCOL);
	assert_int_equal(run_fake(FAKE_VERSION), -O1_E_VERSION);
	assert_int_equal(run_fake(FAKE_SMALL), -O1_E_PROTOCOL);
	assert_int_equal(run_fake(FAKE_MAGIC), -O1_E_FORMAT);
	assert_int_equal(open_fds(), before); /* nothing leaked */
}

/* A daemon that refuses and closes before reading the hello: the client
 * sees a reset (hello unread) or a failed send (hello too late), and must
 * still report the refusal it was sent, every time. */
static void test_early_refusal(void **state)
{
	int before = open_fds(), ret;

	(void)state;
	for (int i = 0; i < 50; i++) {
		ret = run_fake(FAKE_REFUSE);
		if (ret != -O1_E_QUOTA)
			fail_msg("try %d: %d (%s)", i, ret, o1_last_error());
		assert_non_null(strstr(o1_last_error(), "quota exceeded"));
	}
	delay_hello = 1;
	assert_int_equal(run_fake(FAKE_REFUSE), -O1_E_QUOTA);
	assert_non_null(strstr(o1_last_error(), "quota exceeded"));
	delay_hello = 0;
	assert_int_equal(open_fds(), before);
}

static void test_no_daemon(void **state)
{
	struct o1_client_opts o = {.sz = sizeof(o),
				   .socket_path = "/nonexistent/o1d.sock"};
	struct o1_client *c = NULL;

	(void)state;
	assert_int_equal(o1_client_connect(&o, &c), -ENOENT);
	assert_non_null(strstr(o1_last_error(), "/nonexistent/o1d.sock"));
	o.sz = 4;
	assert_int_equal(o1_client_connect(&o, &c), -EINVAL);
	o1_client_close(NULL);
}

/* The shared library exports the map's symbols, versioned, and nothing
 * else (the rings and the decoder stay internal). */
static void test_exports(void **state)
{
	void *h = dlopen(O1_CLIENT_SO, RTLD_NOW | RTLD_LOCAL);

	(void)state;
	assert_non_null(h);
	assert_non_null(dlvsym(h, "o1_client_connect", "O1CLIENT_0.1"));
	assert_non_null(dlvsym(h, "o1_last_error", "O1CLIENT_0.1"));
	assert_non_null(dlsym(h, "o1_client_generate"));
	assert_non_null(dlvsym(h, "o1_client_fd", "O1CLIENT_0.5"));
	assert_null(dlsym(h, "o1_ring_claim"));
	assert_null(dlsym(h, "o1_wire_decode_ev"));
	assert_null(dlsym(h, "o1_client_fail"));
	assert_null(dlsym(h, "o1_strerror"));
	dlclose(h);
}

static void start(struct test_server *s)
{
	memset(s, 0, sizeof(*s));
	assert_int_equal(server_start(s, O1_TEST_SERVER, NULL), 0);
}

static void test_ids_and_stops(void **state)
{
	const uint32_t ids[] = {1, 2, 3}, stops[] = {8};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 11,
				    .ids = ids,
				    .n_ids = 3,
				    .max_tokens = 10,
				    .stop_ids = stops,
				    .n_stop_ids = 1};
	const char *strs[] = {"end", "stop"};
	struct test_server s;
	struct o1_client *c;
	struct o1_event ev;
	int n = 0;

	(void)state;
	start(&s);
	c = connect_to(s.path, 0, 0);
	so.stop_strings = strs;
	so.n_stop_strings = 2;
	assert_int_equal(o1_client_submit(c, &so), 0);
	assert_int_equal(o1_client_inflight(c), 1);
	while (o1_client_wait(c, &ev, 2000000000ll) == 1 &&
	       ev.type == O1_EVENT_TOKEN)
		assert_int_equal(ev.ids[0], 6 + n++); /* bytes of ids sum 6 */
	assert_int_equal(ev.type, O1_EVENT_FINAL);
	assert_int_equal(ev.finish, O1_FINISH_REASON_STOP);
	assert_int_equal(ev.prompt_tokens, 3);
	assert_int_equal(ev.generated_tokens, 2);
	assert_int_equal(n, 2);
	assert_int_equal(o1_client_inflight(c), 0);
	/* An odd-length text prompt before the stop ids: "a" (97) stops at
	 * 99, after two tokens. */
	so.ids = NULL;
	so.text = "a";
	so.text_len = 1;
	so.stop_ids = (const uint32_t[]){99};
	assert_int_equal(o1_client_generate(c, &so, NULL, NULL, &ev), 0);
	assert_int_equal(ev.finish, O1_FINISH_REASON_STOP);
	assert_int_equal(ev.generated_tokens, 2);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

/* n_logprobs 16: each token is followed by 14 + 2 alternatives, then
 * their texts (TOP_TEXT: the test server's are the ids in decimal). */
static void test_logprobs(void **state)
{
	struct o1_sampling sp = {.sz = sizeof(sp), .n_logprobs = 16};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 8,
				    .text = "abc",
				    .text_len = 3,
				    .max_tokens = 3,
				    .sampling = &sp};
	struct test_server s;
	struct o1_client *c;
	struct o1_event ev;
	uint32_t tok = 0, seen = 0, tokens = 0, texts = 0;

	(void)state;
	start(&s);
	c = connect_to(s.path, 0, 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	do {
		assert_int_equal(o1_client_wait(c, &ev, 2000000000ll), 1);
		if (ev.type == O1_EVENT_TOKEN) {
			assert_int_equal(seen, tokens ? 16 : 0);
			tok = ev.ids[0];
			tokens++;
			seen = 0;
		} else if (ev.type == O1_EVENT_LOGPROBS) {
			assert_int_equal(ev.position, tokens - 1);
			assert_int_equal(ev.n_top, seen ? 2 : 14);
			for (uint32_t k = 0; k < ev.n_top; k++) {
				assert_int_equal(ev.top_ids[k],
						 (tok + seen + k + 1) % 1000);
				assert_float_equal(ev.top_logprobs[k],
						   -0.25f * (seen + k + 1),
						   1e-6);
			}
			seen += ev.n_top;
		} else if (ev.type == O1_EVENT_TOP_TEXT) {
			assert_int_equal(seen, 16);
			assert_int_equal(ev.position, tokens - 1);
			assert_int_equal(ev.top_first, 0);
			assert_int_equal(ev.n_top, 16);
			for (uint32_t k = 0; k < ev.n_top; k++) {
				char want[8];
				int n = snprintf(want, sizeof(want), "%u",
						 (tok + k + 1) % 1000);

				assert_int_equal(ev.top_len[k], n);
				assert_int_equal(ev.top_cut[k], 0);
				assert_memory_equal(
				    ev.top_text + ev.top_off[k], want,
				    (size_t)n);
			}
			texts++;
		}
	} while (ev.type != O1_EVENT_FINAL);
	assert_int_equal(texts, 3);
	assert_int_equal(tokens, 3);
	assert_int_equal(seen, 16);
	sp.n_logprobs = 21; /* above the protocol's limit */
	so.req_id = 9;
	assert_int_equal(o1_client_generate(c, &so, NULL, NULL, &ev), 0);
	assert_int_equal(ev.error, -O1_E_BOUNDS);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

static int cancel_at_first(void *arg, const struct o1_event *ev)
{
	(void)ev;
	++*(int *)arg;
	return 1;
}

static void test_cancel(void **state)
{
	struct o1_submit_opts so = {
	    .sz = sizeof(so), .req_id = 3, .text = "hold on", .text_len = 7};
	struct test_server s;
	struct o1_client *c;
	struct o1_event ev;
	int calls = 0;

	(void)state;
	start(&s);
	c = connect_to(s.path, 0, 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	assert_int_equal(o1_client_wait(c, &ev, 50000000), -ETIMEDOUT);
	assert_int_equal(o1_client_wait(c, &ev, 0), -ETIMEDOUT);
	assert_int_equal(o1_client_poll(c, &ev), 0);
	assert_int_equal(o1_client_cancel(c, 3), 0);
	assert_int_equal(o1_client_wait(c, &ev, 2000000000ll), 1);
	assert_int_equal(ev.type, O1_EVENT_FINAL);
	assert_int_equal(ev.finish, O1_FINISH_REASON_CANCELLED);
	so.text = "long text";
	so.text_len = 9;
	so.max_tokens = 1000;
	assert_int_equal(
	    o1_client_generate(c, &so, cancel_at_first, &calls, &ev), 0);
	assert_int_equal(calls, 1);
	assert_int_equal(ev.finish, O1_FINISH_REASON_CANCELLED);
	assert_true(ev.generated_tokens < 1000);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

/* With the daemon stopped, the ring and the arena fill up; once it runs
 * again their space comes back and wraps around. */
static void test_exhaustion_and_reuse(void **state)
{
	static char text[3000];
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .text = text,
				    .text_len = sizeof(text),
				    .max_tokens = 1};
	struct test_server s;
	struct o1_client *c;
	struct o1_event ev;

	(void)state;
	memset(text, 'x', sizeof(text));
	start(&s);
	c = connect_to(s.path, 4, 4096);
	kill(s.pid, SIGSTOP);
	assert_int_equal(o1_client_submit(c, &so), 0);
	assert_int_equal(o1_client_submit(c, &so), -EAGAIN); /* arena */
	assert_non_null(strstr(o1_last_error(), "arena"));
	so.text_len = 100;
	for (int i = 0; i < 3; i++)
		assert_int_equal(o1_client_submit(c, &so), 0);
	assert_int_equal(o1_client_submit(c, &so), -EAGAIN); /* ring */
	so.text_len = 5000;
	assert_int_equal(o1_client_submit(c, &so), -E2BIG);
	kill(s.pid, SIGCONT);
	for (int i = 0; i < 4; i++) {
		do
			assert_int_equal(o1_client_wait(c, &ev, 2000000000ll),
					 1);
		while (ev.type != O1_EVENT_FINAL);
	}
	so.text_len = sizeof(text);
	for (int i = 0; i < 20; i++) { /* 20 x 3000 bytes through 4 KiB */
		assert_int_equal(o1_client_submit(c, &so), 0);
		do
			assert_int_equal(o1_client_wait(c, &ev, 2000000000ll),
					 1);
		while (ev.type != O1_EVENT_FINAL);
		assert_int_equal(ev.prompt_tokens, sizeof(text));
	}
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

static void test_argument_errors(void **state)
{
	const char *empty[] = {""};
	struct o1_submit_opts so = {
	    .sz = sizeof(so), .text = "a", .text_len = 0};
	struct test_server s;
	struct o1_client *c;

	(void)state;
	start(&s);
	c = connect_to(s.path, 0, 0);
	assert_int_equal(o1_client_submit(c, &so), -EINVAL);
	so.text_len = 1;
	so.stop_strings = empty;
	so.n_stop_strings = 1;
	assert_int_equal(o1_client_submit(c, &so), -EINVAL);
	assert_non_null(strstr(o1_last_error(), "stop string"));
	so.n_stop_strings = 0;
	so.text = "hold";
	so.text_len = 4;
	assert_int_equal(o1_client_submit(c, &so), 0);
	assert_int_equal(o1_client_ping(c, NULL), -EBUSY);
	assert_non_null(strstr(o1_client_strerror(-O1_E_QUOTA), "quota"));
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

static void test_reconnect(void **state)
{
	struct o1_submit_opts so = {
	    .sz = sizeof(so), .req_id = 1, .text = "hold", .text_len = 4};
	struct test_server s;
	struct o1_client *c;
	struct o1_event ev;
	uint64_t rtt;

	(void)state;
	start(&s);
	c = connect_to(s.path, 0, 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	assert_int_equal(server_stop(&s), 0);
	assert_int_equal(o1_client_wait(c, &ev, 2000000000ll), -ECONNRESET);
	assert_int_equal(server_start(&s, O1_TEST_SERVER, NULL), 0);
	assert_int_equal(o1_client_reconnect(c, 2000), 0);
	assert_int_equal(o1_client_inflight(c), 0);
	assert_int_equal(o1_client_ping(c, &rtt), 0);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

static struct o1_client *connect_flags(const char *path, uint32_t flags)
{
	struct o1_client_opts o = {
	    .sz = sizeof(o), .socket_path = path, .flags = flags};
	struct o1_client *c = NULL;

	if (o1_client_connect(&o, &c))
		fail_msg("connect: %s", o1_last_error());
	return c;
}

/* Takes what o1_client_poll has; waits on the fd (5 s at most) when it
 * has nothing, as an event loop would. Returns the events until FINAL. */
static int loop_until_final(struct o1_client *c, int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct o1_event ev;
	int n = 0, ret;

	for (;;) {
		while ((ret = o1_client_poll(c, &ev)) == 1) {
			n++;
			if (ev.type == O1_EVENT_FINAL)
				return n;
		}
		assert_int_equal(ret, 0);
		if (poll(&p, 1, 5000) != 1)
			fail_msg("no wake-up on the fd after %d events", n);
	}
}

/* O1_CONNECT_POLLABLE: the fd wakes an event loop for every stream, and
 * is not readable while nothing is coming; without the flag there is no
 * fd (-EINVAL). */
static void test_pollable_fd(void **state)
{
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 1,
				    .text = "abc",
				    .text_len = 3,
				    .max_tokens = 200};
	struct pollfd p = {.events = POLLIN};
	struct test_server s;
	struct o1_client *c, *plain;
	struct o1_event ev;

	(void)state;
	start(&s);
	c = connect_flags(s.path, O1_CONNECT_POLLABLE);
	plain = connect_to(s.path, 0, 0);
	assert_int_equal(o1_client_fd(plain), -EINVAL);
	p.fd = o1_client_fd(c);
	assert_true(p.fd >= 0);
	for (int round = 0; round < 3; round++) {
		so.req_id = (uint64_t)round;
		assert_int_equal(o1_client_submit(c, &so), 0);
		assert_int_equal(loop_until_final(c, p.fd), 201);
	}
	assert_int_equal(o1_client_poll(c, &ev), 0);
	assert_int_equal(poll(&p, 1, 100), 0); /* nothing is coming */
	assert_int_equal(o1_client_ping(c, NULL), 0);
	o1_client_close(plain);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

/* SIGKILLs the server and reaps it (its socket path stays reusable). */
static void crash(struct test_server *s)
{
	int status;

	kill(s->pid, SIGKILL);
	assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
	fclose(s->out);
	s->out = NULL;
}

static void expect_gone_everywhere(struct o1_client *c)
{
	struct o1_submit_opts so = {
	    .sz = sizeof(so), .req_id = 9, .text = "abc", .text_len = 3};
	struct o1_client_limits lim = {.sz = sizeof(lim)};
	struct o1_event ev;

	assert_int_equal(o1_client_poll(c, &ev), O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(o1_client_wait(c, &ev, -1), O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(o1_client_submit(c, &so), O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(o1_client_cancel(c, 9), O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(o1_client_ping(c, NULL), O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(o1_client_generate(c, &so, NULL, NULL, &ev),
			 O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(o1_client_limits(c, &lim), O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(o1_client_check(c, &so, NULL),
			 O1_CLIENT_E_DAEMON_GONE);
	assert_non_null(strstr(o1_client_strerror(O1_CLIENT_E_DAEMON_GONE),
			       "daemon is gone"));
}

/* The daemon crashes with a finished stream unread: the fd wakes the
 * event loop, o1_client_poll hands out the events published before the
 * crash and then O1_CLIENT_E_DAEMON_GONE, as every call does from then
 * on; a client that only polls (no fd, no wait) learns it too. The fd
 * stays open until close or reconnect, which starts over. */
static void test_daemon_gone(void **state)
{
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 4,
				    .text = "abc",
				    .text_len = 3,
				    .max_tokens = 5};
	struct pollfd p = {.events = POLLIN};
	struct o1_client *c, *plain, *other;
	struct test_server s;
	struct o1_event ev;
	int n = 0, ret;

	(void)state;
	start(&s);
	c = connect_flags(s.path, O1_CONNECT_POLLABLE);
	plain = connect_to(s.path, 0, 0);
	other = connect_to(s.path, 0, 0);
	p.fd = o1_client_fd(c);
	so.max_tokens = 2;
	assert_int_equal(o1_client_submit(c, &so), 0);
	/* three tokens longer, submitted later: once its FINAL is read,
	 * c's (posted passes before, one token a pass) is published too */
	so.max_tokens = 5;
	assert_int_equal(o1_client_generate(other, &so, NULL, NULL, &ev), 0);
	assert_int_equal(ev.generated_tokens, 5);
	crash(&s);
	assert_int_equal(poll(&p, 1, 5000), 1);
	while ((ret = o1_client_poll(c, &ev)) == 1)
		n++;
	assert_int_equal(n, 3); /* 2 tokens and the FINAL */
	assert_int_equal(ret, O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(o1_client_fd(c), O1_CLIENT_E_DAEMON_GONE);
	assert_true(fcntl(p.fd, F_GETFD) >= 0);
	expect_gone_everywhere(c);
	for (int i = 0; i < 5000 && !(ret = o1_client_poll(plain, &ev)); i++)
		usleep(1000);
	assert_int_equal(ret, O1_CLIENT_E_DAEMON_GONE);
	expect_gone_everywhere(plain);
	assert_int_equal(o1_client_wait(other, &ev, -1), O1_CLIENT_E_DAEMON_GONE);
	assert_int_equal(server_start(&s, O1_TEST_SERVER, NULL), 0);
	assert_int_equal(o1_client_reconnect(c, 2000), 0);
	assert_true(o1_client_fd(c) >= 0);
	assert_int_equal(o1_client_ping(c, NULL), 0);
	so.req_id = 5;
	assert_int_equal(o1_client_submit(c, &so), 0);
	assert_int_equal(loop_until_final(c, o1_client_fd(c)), 6);
	o1_client_close(other);
	o1_client_close(plain);
	o1_client_close(c);
	assert_int_equal(server_stop(&s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exports),
	    cmocka_unit_test(test_bad_welcomes),
	    cmocka_unit_test(test_early_refusal),
	    cmocka_unit_test(test_no_daemon),
	    cmocka_unit_test(test_ids_and_stops),
	    cmocka_unit_test(test_logprobs),
	    cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_exhaustion_and_reuse),
	    cmocka_unit_test(test_argument_errors),
	    cmocka_unit_test(test_reconnect),
	    cmocka_unit_test(test_pollable_fd),
	    cmocka_unit_test(test_daemon_gone),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Control-socket plumbing on its own: listener errors (long path, missing
 * directory, a non-socket in the way, a live socket left alone, a stale
 * one replaced), the start-up socket check, peer
 * credential checks against allow lists, malformed hello messages, and
 * the sealed region memfd. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipc/control.h"
#include "common/error.h"
#include "ipc/front.h"

static void test_listen_errors(void **state)
{
	char dir[] = "/tmp/o1ctl.XXXXXX", path[256], lng[300];
	struct stat st;
	int fd = -1, fd2 = -1;
	pid_t pid;

	(void)state;
	assert_non_null(mkdtemp(dir));
	memset(lng, 'a', sizeof(lng) - 1);
	lng[0] = '/';
	lng[sizeof(lng) - 1] = 0;
	assert_int_equal(o1_ipc_listen(lng, 0660, &fd), -ENAMETOOLONG);
	snprintf(path, sizeof(path), "%s/missing/o1d.sock", dir);
	assert_int_equal(o1_ipc_listen(path, 0660, &fd), -ENOENT);
	snprintf(path, sizeof(path), "%s/file", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	assert_int_equal(o1_ipc_listen(path, 0660, &fd), -EEXIST);
	unlink(path);
	snprintf(path, sizeof(path), "%s/o1d.sock", dir);
	assert_int_equal(o1_ipc_listen(path, 0640, &fd), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	/* A live listener's socket is left alone... */
	assert_int_equal(o1_ipc_listen(path, 0660, &fd2), -EADDRINUSE);
	assert_int_equal(o1_ipc_probe(path, &pid), 1);
	assert_int_equal(pid, getpid());
	assert_int_equal(o1_ipc_socket_check(path), -EADDRINUSE);
	/* ...one left behind by a dead daemon is replaced. */
	close(fd);
	assert_int_equal(o1_ipc_probe(path, &pid), 0);
	assert_int_equal(o1_ipc_socket_check(path), 0);
	assert_int_equal(o1_ipc_listen(path, 0660, &fd2), 0);
	close(fd2);
	unlink(path);
	assert_int_equal(o1_ipc_probe(path, &pid), 0);
	rmdir(dir);
}

/* The start-up check names a missing directory, a file in the way and an
 * empty path before anything is loaded. */
static void test_socket_check(void **state)
{
	char dir[] = "/tmp/o1ctl.XXXXXX", path[256];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/missing/o1d.sock", dir);
	assert_int_equal(o1_ipc_socket_check(path), -ENOENT);
	assert_int_equal(o1_ipc_socket_check(""), -O1_E_CONFIG);
	snprintf(path, sizeof(path), "%s/file", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	assert_int_equal(o1_ipc_socket_check(path), -EEXIST);
	snprintf(path, sizeof(path), "%s/file/o1d.sock", dir);
	assert_int_equal(o1_ipc_socket_check(path), -ENOTDIR);
	snprintf(path, sizeof(path), "%s/file", dir);
	unlink(path);
	rmdir(dir);
}

static void test_peer_check(void **state)
{
	uint32_t other = getuid() + 1, mine = getuid(), gid = getgid();
	struct o1_ipc_opts o = {.sz = sizeof(o)};
	struct ucred cred;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(o1_ipc_peer_check(sv[0], &o, &cred), 0);
	assert_int_equal(cred.pid, getpid());
	o.allowed_uids = &other;
	o.n_allowed_uids = 1;
	assert_int_equal(o1_ipc_peer_check(sv[0], &o, &cred), -EACCES);
	o.allowed_uids = &mine;
	assert_int_equal(o1_ipc_peer_check(sv[0], &o, &cred), 0);
	o.allowed_uids = &other;
	o.allowed_gids = &gid;
	o.n_allowed_gids = 1;
	assert_int_equal(o1_ipc_peer_check(sv[0], &o, &cred), 0);
	close(sv[0]);
	close(sv[1]);
}

static void test_bad_hellos(void **state)
{
	struct o1_wire_hello h, out;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(o1_ipc_recv_hello(sv[0], &out), -EAGAIN);
	memset(&h, 0, sizeof(h));
	h.magic = O1_HELLO_MAGIC;
	h.version = O1_WIRE_VERSION;
	assert_int_equal(send(sv[1], &h, 10, 0), 10); /* short */
	assert_int_equal(o1_ipc_recv_hello(sv[0], &out), -O1_E_PROTOCOL);
	h.flags = 0x80; /* unknown flag */
	assert_int_equal(send(sv[1], &h, sizeof(h), 0), (int)sizeof(h));
	assert_int_equal(o1_ipc_recv_hello(sv[0], &out), -O1_E_PROTOCOL);
	h.flags = 0;
	memset(h.name, 'n', sizeof(h.name)); /* unterminated name */
	assert_int_equal(send(sv[1], &h, sizeof(h), 0), (int)sizeof(h));
	assert_int_equal(o1_ipc_recv_hello(sv[0], &out), 0);
	assert_int_equal(strlen(out.name), O1_NAME_MAX - 1);
	close(sv[1]);
	assert_int_equal(o1_ipc_recv_hello(sv[0], &out), -ECONNRESET);
	close(sv[0]);
}

static void test_region_memfd(void **state)
{
	struct o1_region_layout l, c;
	uint16_t flags;
	void *base;
	int fd;

	(void)state;
	assert_int_equal(o1_region_layout(8, 16, 8192, &l), 0);
	assert_int_equal(o1_ipc_region_create(&l, 0, 42, &fd, &base), 0);
	assert_int_equal(o1_region_check(base, l.total_bytes, &c, &flags), 0);
	assert_int_equal(((struct o1_region_hdr *)base)->client_id, 42);
	assert_int_equal(fcntl(fd, F_GET_SEALS),
			 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	assert_int_equal(ftruncate(fd, 4096), -1);
	assert_int_equal(errno, EPERM);
	munmap(base, l.total_bytes);
	close(fd);
}

/* The area table: bad descriptions refused at create, uid binding, release
 * of -1 and of a free area harmless. */
static void test_devout_table(void **state)
{
	struct o1_wire_devout d[3];
	struct o1_ipc_server srv;

	(void)state;
	memset(d, 0, sizeof(d));
	for (int i = 0; i < 3; i++) {
		d[i].rows = 4;
		d[i].row_floats = 10;
		d[i].row_stride_bytes = 256;
		d[i].stamps_off = 1024;
		d[i].area_bytes = 1040;
	}
	memset(&srv, 0, sizeof(srv));
	srv.o.devout_areas = d;
	srv.o.n_devout_areas = 3;
	d[1].rows = 3;
	assert_int_equal(o1_ipc_devout_init(&srv), -O1_E_CONFIG);
	free(srv.devout);
	d[1].rows = 4;
	memset(&srv, 0, sizeof(srv));
	srv.o.devout_areas = d;
	srv.o.n_devout_areas = 3;
	assert_int_equal(o1_ipc_devout_init(&srv), 0);
	assert_int_equal(srv.devout[2].desc.area, 2);
	assert_int_equal(o1_ipc_devout_claim(&srv, 100), 0);
	assert_int_equal(o1_ipc_devout_claim(&srv, 200), 1);
	o1_ipc_devout_release(&srv, 0);
	o1_ipc_devout_release(&srv, -1);
	o1_ipc_devout_release(&srv, 7);
	/* uid 200 skips area 0 (bound to 100) and takes the fresh one */
	assert_int_equal(o1_ipc_devout_claim(&srv, 200), 2);
	assert_int_equal(o1_ipc_devout_claim(&srv, 300), -O1_E_NO_DEVOUT);
	o1_ipc_devout_release(&srv, 1);
	assert_int_equal(o1_ipc_devout_claim(&srv, 300), -O1_E_NO_DEVOUT);
	assert_int_equal(o1_ipc_devout_claim(&srv, 100), 0);
	assert_int_equal(o1_ipc_devout_claim(&srv, 200), 1);
	free(srv.devout);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_listen_errors),
	    cmocka_unit_test(test_socket_check),
	    cmocka_unit_test(test_peer_check),
	    cmocka_unit_test(test_bad_hellos),
	    cmocka_unit_test(test_region_memfd),
	    cmocka_unit_test(test_devout_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

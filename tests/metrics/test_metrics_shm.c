/* Metrics through the shared-memory fallback file: a child process writes,
 * this one reads live; AUTO mode falls back when bpf_dir is not on bpffs;
 * concurrent writers lose no count; permissions; atomic replacement;
 * unlink on close; malformed files are refused with the right error; the
 * per-socket default path. Runs
 * everywhere (no privilege needed). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "metrics/metrics_reader.h"
#include "metrics/metrics_writer.h"
#include "tests/common/test_util.h"

static char tmpdir[64];
static char path[128];	 /* the fallback file */
static char notbpf[128]; /* a directory that is not on bpffs */

static int setup(void **state)
{
	(void)state;
	o1_test_dir_make(tmpdir, sizeof(tmpdir), "shm");
	snprintf(path, sizeof(path), "%s/metrics", tmpdir);
	snprintf(notbpf, sizeof(notbpf), "%s/notbpf", tmpdir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return o1_test_dir_remove(tmpdir);
}

static struct o1_metrics *writer(enum o1_metrics_mode mode, bool unlink_it)
{
	struct o1_metrics_opts o = {.sz = sizeof(o),
				    .mode = mode,
				    .bpf_dir = notbpf,
				    .shm_path = path,
				    .gid = -1,
				    .file_mode = 0640,
				    .unpin_on_close = unlink_it};
	struct o1_metrics *m = NULL;

	assert_int_equal(o1_metrics_open(&o, &m), 0);
	return m;
}

static struct o1_metrics_reader *reader(enum o1_metrics_mode mode)
{
	struct o1_metrics_reader_opts o = {
	    .sz = sizeof(o), .mode = mode, .bpf_dir = notbpf, .shm_path = path};
	struct o1_metrics_reader *r = NULL;

	assert_int_equal(o1_metrics_reader_open(&o, &r), 0);
	return r;
}

static void child(int up, int down)
{
	struct o1_metrics *m;
	char c = 0;

	alarm(30);
	m = writer(O1_METRICS_MODE_SHM, false);
	o1_metrics_add(m, O1_METRICS_CTR_REQUESTS_COMPLETED, 11);
	o1_metrics_observe_us(m, O1_METRICS_HIST_E2E, 250000);
	if (write(up, &c, 1) != 1 || read(down, &c, 1) != 1)
		_exit(2);
	o1_metrics_add(m, O1_METRICS_CTR_REQUESTS_COMPLETED, 4);
	o1_metrics_set(m, O1_METRICS_CTR_CLIENTS_CONNECTED, 3);
	if (write(up, &c, 1) != 1 || read(down, &c, 1) != 1)
		_exit(3);
	o1_metrics_close(m);
	_exit(0);
}

static void test_cross_process(void **state)
{
	struct o1_metrics_snapshot s;
	struct o1_metrics_reader *r;
	int up[2], down[2], status;
	struct stat st;
	char c = 0;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	if (pid == 0)
		child(up[1], down[0]);
	assert_int_equal(read(up[0], &c, 1), 1);
	r = reader(O1_METRICS_MODE_AUTO);
	assert_int_equal(o1_metrics_reader_backend(r), O1_METRICS_BACKEND_SHM);
	assert_string_equal(o1_metrics_reader_path(r), path);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.info.pid, pid);
	assert_int_equal(s.info.backend, O1_METRICS_BACKEND_SHM);
	assert_int_equal(s.ctr.requests_completed, 11);
	assert_int_equal(s.hist.e2e.count, 1);
	assert_int_equal(s.hist.e2e.sum_us, 250000);
	assert_int_equal(s.hist.e2e.slots[17], 1);
	assert_int_equal(write(down[1], &c, 1), 1);
	assert_int_equal(read(up[0], &c, 1), 1);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.requests_completed, 15);
	assert_int_equal(s.ctr.clients_connected, 3);
	assert_int_equal(write(down[1], &c, 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	o1_metrics_reader_close(r);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	assert_int_equal((size_t)st.st_size, o1_metrics_file_size());
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
}

/* AUTO falls back when bpf_dir is an ordinary directory; BPF mode fails. */
static void test_auto_fallback(void **state)
{
	struct o1_metrics_opts o = {.sz = sizeof(o),
				    .mode = O1_METRICS_MODE_BPF,
				    .bpf_dir = notbpf,
				    .shm_path = path};
	struct o1_metrics *m;

	(void)state;
	assert_int_equal(mkdir(notbpf, 0755), 0);
	assert_int_equal(o1_metrics_open(&o, &m), -ENOTSUP);
	m = writer(O1_METRICS_MODE_AUTO, false);
	assert_int_equal(m->info->backend, O1_METRICS_BACKEND_SHM);
	assert_string_equal(o1_metrics_path(m), path);
	o1_metrics_close(m);
}

enum { THREADS = 4, ADDS = 200000 };

static void *adder(void *arg)
{
	struct o1_metrics *m = arg;

	for (unsigned i = 0; i < ADDS; i++) {
		o1_metrics_add(m, O1_METRICS_CTR_TOKENS_GENERATED, 1);
		o1_metrics_observe_us(m, O1_METRICS_HIST_ITL, i & 1023);
	}
	return NULL;
}

static void test_concurrent_adds(void **state)
{
	struct o1_metrics *m = writer(O1_METRICS_MODE_SHM, false);
	struct o1_metrics_reader *r = reader(O1_METRICS_MODE_SHM);
	struct o1_metrics_snapshot s;
	pthread_t t[THREADS];

	(void)state;
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, adder, m), 0);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.tokens_generated, THREADS * ADDS);
	assert_int_equal(s.hist.itl.count, THREADS * ADDS);
	assert_int_equal(o1_metrics_hist_total(&s.hist.itl), THREADS * ADDS);
	assert_int_equal(s.hist.itl.sum_us,
			 (uint64_t)THREADS * (ADDS / 1024) * (1023 * 1024 / 2) +
			     (uint64_t)THREADS *
				 ((ADDS % 1024) * (ADDS % 1024 - 1) / 2));
	o1_metrics_reader_close(r);
	o1_metrics_close(m);
}

/* A new writer replaces the file atomically; close unlinks on request. */
/* A live writer's file is never taken: a second writer gets -EADDRINUSE
 * (even in this process: the owner lock is per open file); once the first
 * is gone its file is replaced, and a writer removes only its own file. */
static void test_replace_and_unlink(void **state)
{
	struct o1_metrics_opts o = {.sz = sizeof(o),
				    .mode = O1_METRICS_MODE_SHM,
				    .shm_path = path,
				    .gid = -1};
	struct o1_metrics *a = writer(O1_METRICS_MODE_SHM, false);
	struct o1_metrics_reader *r;
	struct o1_metrics_snapshot s;
	struct o1_metrics *b = NULL;
	char other[300];

	(void)state;
	o1_metrics_add(a, O1_METRICS_CTR_STEPS, 9);
	assert_int_equal(o1_metrics_open(&o, &b), -EADDRINUSE);
	assert_null(b);
	o.mode = O1_METRICS_MODE_AUTO; /* no fallback from a live owner */
	o.bpf_dir = notbpf;
	assert_int_equal(o1_metrics_open(&o, &b), -EADDRINUSE);
	r = reader(O1_METRICS_MODE_SHM);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.steps, 9);
	o1_metrics_reader_close(r);
	o1_metrics_close(a); /* the file stays: unpin_on_close false */
	b = writer(O1_METRICS_MODE_SHM, true);
	r = reader(O1_METRICS_MODE_SHM);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.steps, 0);
	o1_metrics_add(b, O1_METRICS_CTR_STEPS, 2);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.steps, 2);
	o1_metrics_reader_close(r);
	o1_metrics_close(b);
	assert_int_equal(access(path, F_OK), -1);
	/* a file put over ours by someone else is not ours to remove */
	b = writer(O1_METRICS_MODE_SHM, true);
	snprintf(other, sizeof(other), "%s.other", path);
	close(open(other, O_CREAT | O_WRONLY, 0600));
	assert_int_equal(rename(other, path), 0);
	o1_metrics_close(b);
	assert_int_equal(access(path, F_OK), 0);
	unlink(path);
}

static void write_file(const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static int open_err(void)
{
	struct o1_metrics_reader_opts o = {.sz = sizeof(o),
					   .mode = O1_METRICS_MODE_AUTO,
					   .bpf_dir = notbpf,
					   .shm_path = path};
	struct o1_metrics_reader *r = NULL;
	int err = o1_metrics_reader_open(&o, &r);

	assert_null(r);
	return err;
}

/* FNV-1a 64 reference values: "" 0xcbf29ce484222325, "a"
 * 0xaf63dc4c8601ec8c, "foobar" 0x85944171f73967e8. */
static void test_path_for_socket(void **state)
{
	char a[128], b[128], small[24];

	(void)state;
	assert_int_equal(o1_metrics_shm_path_for(NULL, "a", a, sizeof(a)), 0);
	assert_string_equal(a, "/dev/shm/o1d-metrics-v3-af63dc4c8601ec8c");
	assert_int_equal(o1_metrics_shm_path_for("", "foobar", b, sizeof(b)),
			 0);
	assert_string_equal(b, "/dev/shm/o1d-metrics-v3-85944171f73967e8");
	assert_int_equal(o1_metrics_shm_path_for(NULL, "", a, sizeof(a)), 0);
	assert_string_equal(a, "/dev/shm/o1d-metrics-v3-cbf29ce484222325");
	assert_int_equal(o1_metrics_shm_path_for("/x/y", "a", a, sizeof(a)), 0);
	assert_string_equal(a, "/x/y");
	assert_int_equal(
	    o1_metrics_shm_path_for(NULL, "a", small, sizeof(small)),
	    -ENAMETOOLONG);
}

static void test_bad_files(void **state)
{
	size_t len = o1_metrics_file_size();
	char *buf = calloc(1, len);
	struct o1_metrics_info *info = (struct o1_metrics_info *)buf;

	(void)state;
	unlink(path);
	assert_int_equal(open_err(), -ENOENT);
	write_file(buf, 100);
	assert_int_equal(open_err(), -O1_E_VERSION);
	write_file(buf, len);
	assert_int_equal(open_err(), -O1_E_FORMAT);
	info->magic = O1_METRICS_MAGIC;
	info->version = O1_METRICS_VERSION + 1;
	write_file(buf, len);
	assert_int_equal(open_err(), -O1_E_VERSION);
	info->version = O1_METRICS_VERSION;
	info->n_counters = O1_METRICS_CTR__COUNT;
	info->n_hists = O1_METRICS_HIST__COUNT;
	info->hist_slots = O1_METRICS_HIST_SLOTS + 1;
	info->graph_buckets = O1_METRICS_GRAPH_BUCKETS;
	write_file(buf, len);
	assert_int_equal(open_err(), -O1_E_VERSION);
	info->hist_slots = O1_METRICS_HIST_SLOTS;
	write_file(buf, len); /* a version 3 file without its span count */
	assert_int_equal(open_err(), -O1_E_VERSION);
	info->graph_spans = O1_METRICS_GRAPH_SPANS;
	write_file(buf, len);
	o1_metrics_reader_close(reader(O1_METRICS_MODE_SHM));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cross_process),
	    cmocka_unit_test(test_auto_fallback),
	    cmocka_unit_test(test_concurrent_adds),
	    cmocka_unit_test(test_replace_and_unlink),
	    cmocka_unit_test(test_bad_files),
	    cmocka_unit_test(test_path_for_socket),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

/* Metrics through pinned BPF maps: a child process creates, pins and writes
 * the maps; this process reads them through the pins while the child is
 * alive and after it exits; the real `bpftool map dump pinned -j` finds the
 * named fields with the values written; permissions, stale pins, unpin on
 * close, a foreign map in place of ours, and a reader of another group.
 * Needs root and a bpf filesystem (mounted privately when /sys/fs/bpf is
 * not one, see bpffs.h); exits 77 otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
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

#include <bpf/bpf.h>
#include <cjson/cJSON.h>

#include "bpffs.h"
#include "common/error.h"
#include "metrics/metrics_reader.h"
#include "metrics/metrics_writer.h"
#include "tests/common/test_util.h"

#define TEST_GID 4242

static char base[PATH_MAX];    /* a fresh directory on bpffs */
static char dir[PATH_MAX + 8]; /* base/o1d: the bpf_dir under test */
static char shm[PATH_MAX];     /* fallback path, must stay unused */

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "%s/o1d", base);
	snprintf(shm, sizeof(shm), "/tmp/o1-test-bpf-shm-%d", (int)getpid());
	return 0;
}

static struct o1_metrics_opts writer_opts(bool unpin)
{
	struct o1_metrics_opts o = {
	    .sz = sizeof(o),
	    .mode = O1_METRICS_MODE_BPF,
	    .bpf_dir = dir,
	    .shm_path = shm,
	    .gid = TEST_GID,
	    .file_mode = 0640,
	    .unpin_on_close = unpin,
	};
	return o;
}

static struct o1_metrics_reader *reader(enum o1_metrics_mode mode)
{
	struct o1_metrics_reader_opts o = {
	    .sz = sizeof(o), .mode = mode, .bpf_dir = dir, .shm_path = shm};
	struct o1_metrics_reader *r = NULL;

	assert_int_equal(o1_metrics_reader_open(&o, &r), 0);
	return r;
}

static void write_round(struct o1_metrics *m, unsigned k)
{
	static const uint32_t sizes[] = {1, 2, 4, 8, 16};
	static const uint32_t lens[] = {1024, 4096, 32768};

	o1_metrics_add(m, O1_METRICS_CTR_REQUESTS_SUBMITTED, 7 * k);
	o1_metrics_add(m, O1_METRICS_CTR_TOKENS_GENERATED, 1000 * k);
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_TOTAL, 512);
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_USED, 100 + k);
	o1_metrics_fail(m, O1_METRICS_FAIL_QUOTA);
	o1_metrics_observe_us(m, O1_METRICS_HIST_STEP, 3000);
	o1_metrics_graph_set_buckets(m, sizes, 5);
	o1_metrics_graph_hit(m, 3, 2);
	o1_metrics_graph_set_spans(m, lens, 3);
	o1_metrics_graph_add_span(m, 1, 3 * k);
}

/* Child: writes round 1, reports, waits, writes round 2, reports, exits. */
static void child_writer(int to_parent, int from_parent)
{
	struct o1_metrics_opts o = writer_opts(false);
	struct o1_metrics *m;
	char c = 1;

	alarm(30); /* never outlive a parent that failed an assertion */
	if (o1_metrics_open(&o, &m) != 0)
		_exit(1);
	write_round(m, 1);
	if (write(to_parent, &c, 1) != 1 || read(from_parent, &c, 1) != 1)
		_exit(2);
	write_round(m, 2);
	if (write(to_parent, &c, 1) != 1 || read(from_parent, &c, 1) != 1)
		_exit(3);
	o1_metrics_close(m);
	_exit(0);
}

static void check_round(struct o1_metrics_reader *r, unsigned k, pid_t pid)
{
	struct o1_metrics_snapshot s;

	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.info.backend, O1_METRICS_BACKEND_BPF);
	assert_int_equal(s.info.pid, pid);
	assert_int_equal(s.ctr.requests_submitted, 7 * k * (k + 1) / 2);
	assert_int_equal(s.ctr.tokens_generated, 1000 * k * (k + 1) / 2);
	assert_int_equal(s.ctr.kv_pages_used, 100 + k);
	assert_int_equal(s.ctr.failed_quota, k);
	assert_int_equal(s.hist.step.count, k);
	assert_int_equal(s.hist.step.slots[11], k);
	assert_int_equal(s.graphs.buckets[3].batch_size, 8);
	assert_int_equal(s.graphs.buckets[3].hits, k);
	assert_int_equal(s.graphs.n_spans, 3);
	assert_int_equal(s.graphs.spans[2].context_len, 32768);
	assert_int_equal(s.graphs.spans[1].steps, 3 * k * (k + 1) / 2);
}

static void check_perm(const char *path, unsigned mode)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, mode);
	assert_int_equal(st.st_gid, TEST_GID);
}

static void test_cross_process(void **state)
{
	int up[2], down[2], status;
	struct o1_metrics_reader *r;
	char c = 0, pin[PATH_MAX + 32];
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		child_writer(up[1], down[0]);
	assert_int_equal(read(up[0], &c, 1), 1);
	r = reader(O1_METRICS_MODE_AUTO);
	assert_int_equal(o1_metrics_reader_backend(r), O1_METRICS_BACKEND_BPF);
	check_round(r, 1, pid);
	assert_int_equal(write(down[1], &c, 1), 1);
	assert_int_equal(read(up[0], &c, 1), 1);
	check_round(r, 2, pid); /* live, through the same mapping */
	assert_int_equal(write(down[1], &c, 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	check_round(r, 2, pid); /* the pins keep the maps after exit */
	o1_metrics_reader_close(r);
	snprintf(pin, sizeof(pin), "%s/" O1_METRICS_PIN_SUBDIR "/o1_counters", dir);
	check_perm(pin, 0640);
	snprintf(pin, sizeof(pin), "%s/" O1_METRICS_PIN_SUBDIR, dir);
	check_perm(pin, 0750);
	assert_int_equal(access(shm, F_OK), -1);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
}

/* Runs bpftool on one pin and returns the parsed "formatted" value. */
static cJSON *bpftool_dump(const char *map, cJSON **root)
{
	char cmd[PATH_MAX + 128], buf[65536];
	cJSON *entry, *fmt;

	snprintf(cmd, sizeof(cmd),
		 "bpftool map dump pinned %s/" O1_METRICS_PIN_SUBDIR
		 "/%s -j 2>/dev/null", dir, map);
	assert_int_equal(o1_test_run(cmd, buf, sizeof(buf)), 0);
	*root = cJSON_Parse(buf);
	assert_non_null(*root);
	assert_int_equal(cJSON_GetArraySize(*root), 1);
	entry = cJSON_GetArrayItem(*root, 0);
	fmt = cJSON_GetObjectItem(entry, "formatted");
	assert_non_null(fmt);
	assert_int_equal(cJSON_GetObjectItem(fmt, "key")->valuedouble, 0);
	return cJSON_GetObjectItem(fmt, "value");
}

static double field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItem(o, name);

	assert_non_null(v);
	assert_true(cJSON_IsNumber(v));
	return v->valuedouble;
}

static void test_bpftool_dump(void **state)
{
	cJSON *root, *v, *step, *bucket, *span;

	(void)state;
	if (system("bpftool version >/dev/null 2>&1") != 0)
		skip();
	v = bpftool_dump("o1_counters", &root);
	assert_int_equal(field(v, "requests_submitted"), 21);
	assert_int_equal(field(v, "tokens_generated"), 3000);
	assert_int_equal(field(v, "kv_pages_total"), 512);
	assert_int_equal(field(v, "kv_pages_used"), 102);
	assert_int_equal(field(v, "failed_quota"), 2);
	assert_int_equal(field(v, "steps"), 0);
	assert_int_equal(cJSON_GetArraySize(v), O1_METRICS_CTR__COUNT);
	cJSON_Delete(root);
	v = bpftool_dump("o1_hist", &root);
	step = cJSON_GetObjectItem(v, "step");
	assert_non_null(step);
	assert_int_equal(field(step, "count"), 2);
	assert_int_equal(field(step, "sum_us"), 6000);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(step, "slots")),
			 O1_METRICS_HIST_SLOTS);
	assert_int_equal(
	    cJSON_GetArrayItem(cJSON_GetObjectItem(step, "slots"), 11)
		->valuedouble,
	    2);
	cJSON_Delete(root);
	v = bpftool_dump("o1_graphs", &root);
	assert_int_equal(field(v, "n_buckets"), 5);
	bucket = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "buckets"), 3);
	assert_int_equal(field(bucket, "batch_size"), 8);
	assert_int_equal(field(bucket, "hits"), 2);
	assert_int_equal(field(bucket, "padded_tokens"), 4);
	assert_int_equal(field(v, "n_spans"), 3);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(v, "spans")),
			 O1_METRICS_GRAPH_SPANS);
	span = cJSON_GetArrayItem(cJSON_GetObjectItem(v, "spans"), 1);
	assert_int_equal(field(span, "context_len"), 4096);
	assert_int_equal(field(span, "steps"), 9);
	cJSON_Delete(root);
	v = bpftool_dump("o1_info", &root);
	assert_int_equal(field(v, "magic"), O1_METRICS_MAGIC);
	assert_int_equal(field(v, "version"), O1_METRICS_VERSION);
	cJSON_Delete(root);
}

/* A second writer replaces the pins; a reader then sees fresh maps. With
 * unpin_on_close the pins and v3/ go away. */
static void test_stale_and_unpin(void **state)
{
	struct o1_metrics_opts o = writer_opts(true);
	struct o1_metrics_snapshot s;
	struct o1_metrics_reader *r;
	char path[PATH_MAX + 32];
	struct o1_metrics *m;

	(void)state;
	assert_int_equal(o1_metrics_open(&o, &m), 0);
	r = reader(O1_METRICS_MODE_BPF);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.requests_submitted, 0);
	assert_int_equal(s.info.pid, getpid());
	o1_metrics_add(m, O1_METRICS_CTR_STEPS, 5);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.steps, 5);
	o1_metrics_close(m);
	/* the reader's mapping outlives the pins */
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.steps, 5);
	o1_metrics_reader_close(r);
	snprintf(path, sizeof(path), "%s/" O1_METRICS_PIN_SUBDIR "/o1_info", dir);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/" O1_METRICS_PIN_SUBDIR, dir);
	assert_int_equal(access(path, F_OK), -1);
}

/* A map of another shape pinned where ours go is refused, not misread. */
/* Pins a live writer holds are never replaced, in bpf or auto mode (the
 * owner lock is per open directory, so even a second writer in this
 * process is refused); once it closed, they are. */
static void test_live_owner(void **state)
{
	struct o1_metrics_opts o = writer_opts(false);
	struct o1_metrics *a, *b = NULL;
	struct o1_metrics_snapshot s;
	struct o1_metrics_reader *r;

	(void)state;
	assert_int_equal(o1_metrics_open(&o, &a), 0);
	o1_metrics_add(a, O1_METRICS_CTR_STEPS, 3);
	assert_int_equal(o1_metrics_open(&o, &b), -EADDRINUSE);
	o.mode = O1_METRICS_MODE_AUTO;
	assert_int_equal(o1_metrics_open(&o, &b), -EADDRINUSE);
	assert_null(b);
	assert_int_not_equal(access(shm, F_OK), 0); /* no fallback file */
	r = reader(O1_METRICS_MODE_BPF);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.steps, 3);
	o1_metrics_reader_close(r);
	o1_metrics_close(a);
	o = writer_opts(true);
	assert_int_equal(o1_metrics_open(&o, &b), 0);
	r = reader(O1_METRICS_MODE_BPF);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	assert_int_equal(s.ctr.steps, 0);
	o1_metrics_reader_close(r);
	o1_metrics_close(b);
}

static void test_foreign_map(void **state)
{
	struct o1_metrics_reader_opts ro = {
	    .sz = sizeof(ro), .mode = O1_METRICS_MODE_BPF, .bpf_dir = dir};
	struct o1_metrics_opts o = writer_opts(false);
	struct o1_metrics_reader *r = NULL;
	char path[PATH_MAX + 32];
	struct o1_metrics *m;
	int fd;

	(void)state;
	assert_int_equal(o1_metrics_open(&o, &m), 0);
	o1_metrics_close(m);
	snprintf(path, sizeof(path), "%s/" O1_METRICS_PIN_SUBDIR "/o1_hist", dir);
	assert_int_equal(unlink(path), 0);
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "o1_hist", 4, 8, 1, NULL);
	assert_true(fd >= 0);
	assert_int_equal(bpf_obj_pin(fd, path), 0);
	close(fd);
	assert_int_equal(o1_metrics_reader_open(&ro, &r), -O1_E_VERSION);
	assert_null(r);
	ro.bpf_dir = "/nonexistent-o1";
	ro.shm_path = "/nonexistent-o1-file";
	ro.mode = O1_METRICS_MODE_AUTO;
	assert_int_equal(o1_metrics_reader_open(&ro, &r), -ENOENT);
}

/* A pin that cannot be made (a directory in its place) fails BPF mode
 * without leaving our other pins behind; AUTO then uses the file. */
static void test_pin_failure(void **state)
{
	struct o1_metrics_opts o = writer_opts(true);
	char path[PATH_MAX + 32];
	struct o1_metrics *m;

	(void)state;
	snprintf(path, sizeof(path), "%s/" O1_METRICS_PIN_SUBDIR, dir);
	mkdir(path, 0750);
	snprintf(path, sizeof(path), "%s/" O1_METRICS_PIN_SUBDIR "/o1_counters", dir);
	unlink(path); /* an earlier test's pin */
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(o1_metrics_open(&o, &m), -EEXIST);
	snprintf(path, sizeof(path), "%s/" O1_METRICS_PIN_SUBDIR "/o1_info", dir);
	assert_int_equal(access(path, F_OK), -1);
	o.mode = O1_METRICS_MODE_AUTO;
	assert_int_equal(o1_metrics_open(&o, &m), 0);
	assert_int_equal(m->info->backend, O1_METRICS_BACKEND_SHM);
	o1_metrics_close(m);
	assert_int_equal(access(shm, F_OK), -1);
	snprintf(path, sizeof(path), "%s/" O1_METRICS_PIN_SUBDIR "/o1_counters", dir);
	assert_int_equal(rmdir(path), 0);
}

/* A process of the metrics group reads; one of another group cannot. */
static int read_as(gid_t gid)
{
	struct o1_metrics_reader_opts o = {
	    .sz = sizeof(o), .mode = O1_METRICS_MODE_BPF, .bpf_dir = dir};
	struct o1_metrics_reader *r;
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(gid) < 0 ||
		    setuid(65534) < 0)
			_exit(100);
		_exit(-o1_metrics_reader_open(&o, &r) & 0xff);
	}
	waitpid(pid, &status, 0);
	return WEXITSTATUS(status);
}

static void test_group_permissions(void **state)
{
	struct o1_metrics_opts o = writer_opts(true);
	struct o1_metrics *m;
	int rc;

	(void)state;
	assert_int_equal(o1_metrics_open(&o, &m), 0);
	rc = read_as(TEST_GID);
	if (rc == EPERM) {
		/* kernels before 6.5 with unprivileged_bpf_disabled refuse
		 * BPF_OBJ_GET to unprivileged users whatever the mode */
		o1_metrics_close(m);
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(read_as(TEST_GID + 1), EACCES);
	o1_metrics_close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cross_process),
	    cmocka_unit_test(test_bpftool_dump),
	    cmocka_unit_test(test_stale_and_unpin),
	    cmocka_unit_test(test_live_owner),
	    cmocka_unit_test(test_foreign_map),
	    cmocka_unit_test(test_pin_failure),
	    cmocka_unit_test(test_group_permissions),
	};
	int err = bpffs_setup(base, sizeof(base)), rc;

	if (err) {
		fprintf(stderr, "no bpf filesystem usable (%s): skipped\n",
			strerror(-err));
		return 77;
	}
	rc = cmocka_run_group_tests(tests, setup, NULL);
	bpffs_cleanup();
	return rc;
}

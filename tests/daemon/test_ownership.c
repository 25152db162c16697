/* One o1d per socket and per metrics location, with real processes (CPU
 * backend, the tiny model made by o1model):
 * - a second o1d on a live daemon's socket refuses with the owner's pid,
 *   exits 1 before loading a model, and leaves the live socket (same
 *   inode), its service and its clean exit alone;
 * - a socket left by a SIGKILLed daemon is taken over;
 * - two daemons on different sockets sharing metrics.bpf_dir (root and a
 *   bpffs only, else skipped) or metrics.shm_path: the second refuses
 *   naming the first's pid, the first's pins or file still describe it;
 *   after a SIGKILL the next daemon takes the stale ones over;
 * - a start that fails after the metrics were published leaves no pins or
 *   file behind;
 * - o1ctl never shows a dead daemon's metrics: after a SIGKILL, stats, top
 *   and slo exit 3 naming the dead pid; given a live daemon's socket it
 *   reads that daemon's metrics (asked over the admin socket) even when a
 *   dead daemon's pins lie where the configuration points; a daemon that
 *   publishes nothing is said so; slo over a window without traffic says
 *   "no data", not "ok".
 * argv: o1d o1model o1ctl */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "daemon_harness.h"
#include "tests/common/test_util.h"
#include "metrics/metrics_reader.h"
#include "tests/metrics/bpffs.h"

static const char *o1d_bin, *o1model_bin, *o1ctl_bin;

/* a: the first daemon (its folder holds the model), b: the second */
struct pair {
	struct daemon_proc a, b;
	char bpf[4096];
};

static int setup(void **state)
{
	static struct pair p;

	if (harness_init(&p.a, o1model_bin))
		return -1;
	*state = &p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	if (p->b.pid > 0)
		daemon_stop(&p->b);
	harness_fini(&p->a);
	return 0;
}

/* After each test: no daemon left, B a copy of A with its own log. */
static int reset(void **state)
{
	struct pair *p = *state;

	if (p->a.pid > 0)
		daemon_stop(&p->a);
	if (p->b.pid > 0)
		daemon_stop(&p->b);
	p->b = p->a;
	snprintf(p->b.log, sizeof(p->b.log), "%s/o1d-b.log", p->a.dir);
	if (p->bpf[0]) {
		bpffs_cleanup();
		p->bpf[0] = 0;
	}
	return 0;
}

static ino_t inode_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_ino;
}

/* The line o1d's log must hold, with the pid filled in. */
static void assert_log(const char *log, const char *fmt, pid_t pid,
		       const char *path)
{
	char line[8800];

	snprintf(line, sizeof(line), fmt, (int)pid, path);
	if (!log_has(log, line))
		fail_msg("%s lacks \"%s\"", log, line);
}

/* A greedy request answered through SOCKET. */
static void assert_serves(const char *socket)
{
	struct result r;
	struct spec s;

	spec_make(&s, 1);
	s.temperature = 0;
	assert_int_equal(spec_run(socket, &s, &r), 0);
	assert_int_equal(r.finals, 1);
	assert_int_equal(r.error, 0);
}

static void kill9(struct daemon_proc *d)
{
	int status;

	assert_int_equal(kill(d->pid, SIGKILL), 0);
	assert_int_equal(waitpid(d->pid, &status, 0), d->pid);
	d->pid = 0;
}

static void test_second_daemon_refused(void **state)
{
	struct pair *p = *state;
	ino_t ino;

	assert_int_equal(daemon_start(&p->a, o1d_bin, NULL), 0);
	ino = inode_of(p->a.socket);
	assert_int_not_equal(daemon_start(&p->b, o1d_bin, NULL), 0);
	assert_int_equal(p->b.exit_status, 1);
	assert_log(p->b.log,
		   "another o1d (pid %d) is serving on %s; stop it or set "
		   "ipc.socket",
		   p->a.pid, p->a.socket);
	assert_false(log_has(p->b.log, "kv:")); /* no model loaded */
	assert_int_equal(inode_of(p->a.socket), ino);
	assert_serves(p->a.socket);
	assert_int_equal(daemon_stop(&p->a), 0);
	assert_int_not_equal(access(p->a.socket, F_OK), 0);
}

static void test_stale_socket_taken_over(void **state)
{
	struct pair *p = *state;

	assert_int_equal(daemon_start(&p->a, o1d_bin, NULL), 0);
	kill9(&p->a);
	assert_int_equal(access(p->a.socket, F_OK), 0); /* left behind */
	assert_int_equal(daemon_start(&p->b, o1d_bin, NULL), 0);
	assert_serves(p->b.socket);
	assert_int_equal(daemon_stop(&p->b), 0);
}

/* The pid in the metrics at DIR (bpf) or FILE (shm). */
static pid_t metrics_pid(const char *dir, const char *file)
{
	struct o1_metrics_reader_opts o = {
	    .sz = sizeof(o),
	    .mode = dir ? O1_METRICS_MODE_BPF : O1_METRICS_MODE_SHM,
	    .bpf_dir = dir,
	    .shm_path = file};
	struct o1_metrics_snapshot s;
	struct o1_metrics_reader *r;

	assert_int_equal(o1_metrics_reader_open(&o, &r), 0);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	o1_metrics_reader_close(r);
	return (pid_t)s.info.pid;
}

static void second_socket(struct pair *p)
{
	snprintf(p->b.socket, sizeof(p->b.socket), "%s/o1d-b.sock", p->a.dir);
}

static void test_shared_bpf_dir(void **state)
{
	struct pair *p = *state;
	char dir[4200], set[4300], pins[4400];
	const char *sets[] = {"metrics.enabled=true", "metrics.mode=bpf", set,
			      NULL};

	if (bpffs_setup(p->bpf, sizeof(p->bpf)) != 0)
		skip();
	snprintf(dir, sizeof(dir), "%s/o1d", p->bpf);
	snprintf(set, sizeof(set), "metrics.bpf_dir=%s", dir);
	snprintf(pins, sizeof(pins), "%s/" O1_METRICS_PIN_SUBDIR, dir);
	second_socket(p);
	assert_int_equal(daemon_start(&p->a, o1d_bin, sets), 0);
	for (int mode = 0; mode < 2; mode++) {
		sets[1] = mode ? "metrics.mode=auto" : "metrics.mode=bpf";
		assert_int_not_equal(daemon_start(&p->b, o1d_bin, sets), 0);
		assert_int_equal(p->b.exit_status, 1);
		assert_log(p->b.log,
			   "another o1d (pid %d) publishes metrics under %s; "
			   "stop it or set metrics.bpf_dir",
			   p->a.pid, pins);
		assert_int_equal(metrics_pid(dir, NULL), p->a.pid);
	}
	assert_serves(p->a.socket);
	kill9(&p->a);
	assert_int_equal(daemon_start(&p->b, o1d_bin, sets), 0);
	assert_int_equal(metrics_pid(dir, NULL), p->b.pid);
	assert_int_equal(daemon_stop(&p->b), 0);
}

static void test_shared_shm_path(void **state)
{
	struct pair *p = *state;
	char file[256], set[300];
	const char *sets[] = {"metrics.enabled=true", "metrics.mode=shm", set,
			      NULL};

	snprintf(file, sizeof(file), "%s/metrics.shm", p->a.dir);
	snprintf(set, sizeof(set), "metrics.shm_path=%s", file);
	second_socket(p);
	assert_int_equal(daemon_start(&p->a, o1d_bin, sets), 0);
	assert_int_not_equal(daemon_start(&p->b, o1d_bin, sets), 0);
	assert_int_equal(p->b.exit_status, 1);
	assert_log(p->b.log,
		   "another o1d (pid %d) publishes metrics at %s; stop it or "
		   "set metrics.shm_path",
		   p->a.pid, file);
	assert_int_equal(metrics_pid(NULL, file), p->a.pid);
	assert_serves(p->a.socket);
	kill9(&p->a);
	assert_int_equal(daemon_start(&p->b, o1d_bin, sets), 0);
	assert_int_equal(metrics_pid(NULL, file), p->b.pid);
	assert_int_equal(daemon_stop(&p->b), 0);
}

/* A start that fails after the metrics were published (refine's review
 * template is read after them) removes them: no file, no pins. */
static void test_failed_start_leaves_nothing(void **state)
{
	struct pair *p = *state;
	char file[256], set[300], dir[4200], bpf_set[4300], pin[4400];
	const char *sets[] = {"metrics.enabled=true", "metrics.mode=shm", set,
			      "refine.review_template=/nonexistent/o1", NULL};

	snprintf(file, sizeof(file), "%s/metrics.shm", p->a.dir);
	snprintf(set, sizeof(set), "metrics.shm_path=%s", file);
	assert_int_not_equal(daemon_start(&p->a, o1d_bin, sets), 0);
	assert_int_equal(p->a.exit_status, 1);
	assert_true(log_has(p->a.log, "publishing through shm"));
	assert_int_not_equal(access(file, F_OK), 0);
	if (bpffs_setup(p->bpf, sizeof(p->bpf)) != 0)
		return; /* the bpf half needs root and a bpffs */
	snprintf(dir, sizeof(dir), "%s/o1d", p->bpf);
	snprintf(bpf_set, sizeof(bpf_set), "metrics.bpf_dir=%s", dir);
	snprintf(pin, sizeof(pin), "%s/" O1_METRICS_PIN_SUBDIR "/o1_info", dir);
	sets[1] = "metrics.mode=bpf";
	sets[2] = bpf_set;
	assert_int_not_equal(daemon_start(&p->a, o1d_bin, sets), 0);
	assert_int_equal(p->a.exit_status, 1);
	assert_true(log_has(p->a.log, "publishing through bpf"));
	assert_int_not_equal(access(pin, F_OK), 0);
}

/* o1ctl ARGS (stdout and stderr into OUT); its exit code. */
static int o1ctl(const char *args, char *out, size_t cap)
{
	char cmd[9000];

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", o1ctl_bin, args);
	return o1_test_run(cmd, out, cap);
}

/* The pid o1ctl ARGS stats --json OPTS reports. */
static long stats_pid(const char *args, const char *opts)
{
	static char out[1 << 16];
	char a[8600];
	const cJSON *v;
	cJSON *j;
	long pid;

	snprintf(a, sizeof(a), "%s stats --json %s", args, opts);
	assert_int_equal(o1ctl(a, out, sizeof(out)), 0);
	j = cJSON_Parse(out);
	assert_non_null(j);
	v = cJSON_GetObjectItemCaseSensitive(j, "pid");
	assert_true(cJSON_IsNumber(v));
	pid = (long)v->valuedouble;
	cJSON_Delete(j);
	return pid;
}

/* stats, top and slo with ARGS exit 3 naming PID as not running. */
static void assert_dead(const char *args, pid_t pid)
{
	static const char *const cmds[] = {
	    "stats", "top --count 1 --interval 0.1", "slo --window 0.1"};
	char out[8192], a[8600], want[128];

	snprintf(want, sizeof(want),
		 "metrics are from pid %d, which is not running", (int)pid);
	for (int i = 0; i < 3; i++) {
		snprintf(a, sizeof(a), "%s %s", args, cmds[i]);
		assert_int_equal(o1ctl(a, out, sizeof(out)), 3);
		if (!strstr(out, want))
			fail_msg("o1ctl %s: \"%s\" lacks \"%s\"", a, out,
				 want);
	}
}

/* shm mode on the default per-socket file: live, then SIGKILLed. */
static void test_o1ctl_after_kill_shm(void **state)
{
	struct pair *p = *state;
	const char *sets[] = {"metrics.enabled=true", "metrics.mode=shm",
			      NULL};
	char plain[300], shm[300];
	pid_t pid;

	assert_int_equal(daemon_start(&p->a, o1d_bin, sets), 0);
	assert_serves(p->a.socket);
	snprintf(plain, sizeof(plain), "--socket %s", p->a.socket);
	snprintf(shm, sizeof(shm), "--set metrics.mode=shm --socket %s",
		 p->a.socket);
	assert_int_equal(stats_pid(plain, ""), p->a.pid);
	assert_int_equal(stats_pid(shm, ""), p->a.pid);
	pid = p->a.pid;
	kill9(&p->a);
	assert_dead(plain, pid);
	assert_dead(shm, pid);
}

/* bpf: a dead daemon's pins where the configuration points, and a live
 * daemon that publishes through its own file: o1ctl given the live one's
 * socket reads the live one, whether it asks it or, with the source named
 * (--source auto), skips the dead pins for the live file. */
static void test_o1ctl_after_kill_bpf(void **state)
{
	struct pair *p = *state;
	char dir[4200], set[4300], cfg[4400], args[9000];
	const char *sets_a[] = {"metrics.enabled=true", "metrics.mode=bpf", set,
				NULL};
	const char *sets_b[] = {"metrics.enabled=true", "metrics.mode=shm",
				NULL};
	pid_t pid;

	if (bpffs_setup(p->bpf, sizeof(p->bpf)) != 0)
		skip();
	snprintf(dir, sizeof(dir), "%s/o1d", p->bpf);
	snprintf(set, sizeof(set), "metrics.bpf_dir=%s", dir);
	snprintf(cfg, sizeof(cfg), "--set metrics.bpf_dir=%s", dir);
	assert_int_equal(daemon_start(&p->a, o1d_bin, sets_a), 0);
	snprintf(args, sizeof(args), "%s --socket %s", cfg, p->a.socket);
	assert_int_equal(stats_pid(args, ""), p->a.pid);
	pid = p->a.pid;
	kill9(&p->a);
	assert_dead(args, pid);
	second_socket(p);
	assert_int_equal(daemon_start(&p->b, o1d_bin, sets_b), 0);
	snprintf(args, sizeof(args), "%s --socket %s", cfg, p->b.socket);
	assert_int_equal(stats_pid(args, ""), p->b.pid);
	assert_int_equal(stats_pid(args, "--source auto"), p->b.pid);
	assert_int_equal(daemon_stop(&p->b), 0);
}

/* A live daemon that publishes nothing, and slo without traffic. */
static void test_o1ctl_no_metrics(void **state)
{
	struct pair *p = *state;
	const char *sets[] = {"metrics.enabled=true", "metrics.mode=shm",
			      NULL};
	char out[8192], args[512];

	assert_int_equal(daemon_start(&p->a, o1d_bin, NULL), 0);
	snprintf(args, sizeof(args), "--socket %s stats", p->a.socket);
	assert_int_equal(o1ctl(args, out, sizeof(out)), 3);
	assert_non_null(strstr(out, "publishes no metrics"));
	assert_int_equal(daemon_stop(&p->a), 0);
	assert_int_equal(daemon_start(&p->a, o1d_bin, sets), 0);
	snprintf(args, sizeof(args), "--socket %s slo --window 0.2",
		 p->a.socket);
	assert_int_equal(o1ctl(args, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "slo: no data"));
	assert_null(strstr(out, "slo: ok"));
	assert_int_equal(daemon_stop(&p->a), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_second_daemon_refused, reset,
					    reset),
	    cmocka_unit_test_setup_teardown(test_stale_socket_taken_over,
					    reset, reset),
	    cmocka_unit_test_setup_teardown(test_shared_bpf_dir, reset,
					    reset),
	    cmocka_unit_test_setup_teardown(test_shared_shm_path, reset,
					    reset),
	    cmocka_unit_test_setup_teardown(test_failed_start_leaves_nothing,
					    reset, reset),
	    cmocka_unit_test_setup_teardown(test_o1ctl_after_kill_shm, reset,
					    reset),
	    cmocka_unit_test_setup_teardown(test_o1ctl_after_kill_bpf, reset,
					    reset),
	    cmocka_unit_test_setup_teardown(test_o1ctl_no_metrics, reset,
					    reset),
	};

	if (argc < 4) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1CTL\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	o1ctl_bin = argv[3];
	return cmocka_run_group_tests(tests, setup, teardown);
}

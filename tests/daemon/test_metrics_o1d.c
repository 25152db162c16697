/* o1d's metrics and o1ctl against a real daemon (CPU backend, the tiny
 * model made by o1model):
 * - BPF mode on a bpffs folder (tests/metrics/bpffs.h; skipped without root
 *   or bpftool): a known number of greedy requests with known prompt and
 *   generated token counts, then the pinned maps read by the real
 *   `bpftool map dump pinned ... -j` hold exactly those counts under their
 *   BTF field names, and `o1ctl stats --json` (given the same config
 *   file) reports the same values, the IPC wake-up histogram included
 *   (one sample per submission);
 * - shm mode with the default per-socket file: the same requests give the
 *   same o1ctl output; the file gets metrics.gid and file_mode;
 *   unpin_on_exit removes it; an unknown group or a bpf_dir off bpffs in
 *   bpf mode stops start-up with a line naming it;
 * - o1ctl health/reload/config/drain against the daemon, its exit codes
 *   for a daemon not running, permission denied (run as nobody) and a
 *   version mismatch (a fake daemon answering another admin_version or
 *   refusing the wire version).
 * argv: o1d o1model o1ctl */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/metrics/bpffs.h"
#include "config/config.h"
#include "common/error.h"
#include "daemon_harness.h"
#include "metrics/metrics_map.h"
#include "tests/common/test_util.h"
#include "shm/wire.h"

#define N_REQ 6

static const char *o1d_bin, *o1ctl_bin;

struct expect {
	uint64_t prompt, generated;
};

/* After each test, failed or not: no daemon left holding ctest's pipe. */
static int stop_daemon(void **state)
{
	struct daemon_proc *d = *state;

	harness_stop(state);
	d->config[0] = 0;
	return 0;
}

static void write_config(struct daemon_proc *d, const char *text)
{
	FILE *f;

	snprintf(d->config, sizeof(d->config), "%s/o1d.ini", d->dir);
	f = fopen(d->config, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* N_REQ greedy requests that ignore EOS: each generates max_tokens. */
static void run_requests(const struct daemon_proc *d, struct expect *e)
{
	struct kv_status st;
	struct result r;
	struct spec s;

	memset(e, 0, sizeof(*e));
	for (unsigned i = 0; i < N_REQ; i++) {
		spec_make(&s, i);
		s.temperature = 0;
		s.ignore_eos = true;
		assert_int_equal(spec_run(d->socket, &s, &r), 0);
		assert_int_equal(r.finals, 1);
		assert_int_equal(r.generated, s.max_tokens);
		assert_int_equal(r.prompt_tokens, s.n_ids);
		e->prompt += s.n_ids;
		e->generated += s.max_tokens;
	}
	assert_int_equal(admin_wait_idle(d->socket, 5000, &st), 0);
}

/* Runs o1ctl with ARGS; its stdout goes to OUT. Returns the exit code. */
static int o1ctl(const char *args, char *out, size_t cap)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null", o1ctl_bin, args);
	return o1_test_run(cmd, out, cap);
}

static cJSON *stats_json(const struct daemon_proc *d)
{
	static char out[1 << 16];
	char args[512];
	cJSON *j;

	snprintf(args, sizeof(args), "-c %s --socket %s stats --json",
		 d->config, d->socket);
	assert_int_equal(o1ctl(args, out, sizeof(out)), 0);
	j = cJSON_Parse(out);
	assert_non_null(j);
	return j;
}

static double field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsNumber(v))
		fail_msg("no number '%s'", name);
	return v->valuedouble;
}

static double hist_count(const cJSON *hists, const char *name)
{
	return field(cJSON_GetObjectItemCaseSensitive(hists, name), "count");
}

/* Named counters equal what was sent. */
static void check_counters(const cJSON *c, const struct expect *e)
{
	assert_int_equal(field(c, "requests_submitted"), N_REQ);
	assert_int_equal(field(c, "requests_completed"), N_REQ);
	assert_int_equal(field(c, "requests_cancelled"), 0);
	assert_int_equal(field(c, "failed_invalid"), 0);
	assert_int_equal(field(c, "tokens_prompt"), e->prompt);
	assert_int_equal(field(c, "tokens_generated"), e->generated);
	assert_int_equal(field(c, "preemptions"), 0);
	assert_int_equal(field(c, "requests_running"), 0);
	assert_true(field(c, "steps") > 0);
	assert_true(field(c, "kv_pages_total") > 0);
}

/* One first token and one end per request, the rest inter-token; one
 * wake-up sample per submission, each under the 10 s clamp. */
static void check_hists(const cJSON *h, const cJSON *c, const struct expect *e)
{
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(h, "wakeup");

	assert_int_equal(hist_count(h, "wakeup"), N_REQ);
	assert_true(field(w, "sum_us") < N_REQ * 10e6);
	assert_int_equal(hist_count(h, "ttft"), N_REQ);
	assert_int_equal(hist_count(h, "e2e"), N_REQ);
	assert_int_equal(hist_count(h, "queue_wait"), N_REQ);
	assert_int_equal(hist_count(h, "itl"), e->generated - N_REQ);
	assert_int_equal(hist_count(h, "step"), field(c, "steps"));
}

/* The first field of A that differs in B, or NULL; skipped: those that
 * move at idle (wake-ups) and, across runs (ACROSS), the client counts
 * (a client's hang-up may race its FINAL). */
static const char *diff_counters(const cJSON *a, const cJSON *b, bool across)
{
	const cJSON *x, *y;

	if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
		return "(number of fields)";
	cJSON_ArrayForEach(x, a)
	{
		if (!strncmp(x->string, "wake_", 5) ||
		    (across && !strncmp(x->string, "client", 6)))
			continue;
		y = cJSON_GetObjectItemCaseSensitive(b, x->string);
		if (!cJSON_IsNumber(y) || y->valuedouble != x->valuedouble)
			return x->string;
	}
	return NULL;
}

static void same_counters(const cJSON *a, const cJSON *b, bool across)
{
	const char *name = diff_counters(a, b, across);

	if (name)
		fail_msg("counter %s differs", name);
}

static void same_hist_counts(const cJSON *a, const cJSON *b)
{
	const cJSON *x;

	cJSON_ArrayForEach(x, a)
	{
		if (strcmp(x->string, "wakeup") &&
		    hist_count(b, x->string) != field(x, "count"))
			fail_msg("histogram %s differs", x->string);
	}
}

/* bpftool on one pin: the "formatted" value (BTF names). */
static cJSON *bpftool_dump(const char *dir, const char *map, cJSON **root)
{
	static char buf[1 << 17];
	char cmd[4400];
	cJSON *entry, *fmt;

	snprintf(cmd, sizeof(cmd),
		 "bpftool map dump pinned %s/" O1_METRICS_PIN_SUBDIR
		 "/%s -j 2>/dev/null", dir, map);
	assert_int_equal(o1_test_run(cmd, buf, sizeof(buf)), 0);
	*root = cJSON_Parse(buf);
	assert_non_null(*root);
	assert_int_equal(cJSON_GetArraySize(*root), 1);
	entry = cJSON_GetArrayItem(*root, 0);
	fmt = cJSON_GetObjectItemCaseSensitive(entry, "formatted");
	assert_non_null(fmt);
	return cJSON_GetObjectItemCaseSensitive(fmt, "value");
}

static cJSON *bpf_json; /* o1ctl stats --json of the BPF run, or NULL */

static cJSON *ctrs(const cJSON *stats)
{
	return cJSON_GetObjectItemCaseSensitive(stats, "counters");
}

/* The client counts reach the maps every 100 ms: read o1ctl, bpftool,
 * o1ctl again until the three agree (the values have settled). */
static cJSON *settled(const struct daemon_proc *d, const char *dir,
		      cJSON **croot, cJSON **c)
{
	cJSON *before, *after = NULL;

	for (int i = 0; i < 50; i++) {
		before = stats_json(d);
		*c = bpftool_dump(dir, "o1_counters", croot);
		after = stats_json(d);
		if (!diff_counters(ctrs(before), ctrs(after), false) &&
		    !diff_counters(*c, ctrs(after), false)) {
			cJSON_Delete(before);
			break;
		}
		cJSON_Delete(before);
		cJSON_Delete(after);
		cJSON_Delete(*croot);
		after = NULL;
		usleep(50000);
	}
	if (!after)
		fail_msg("o1ctl and bpftool never agreed");
	return after;
}

static void check_bpftool(const char *dir, const cJSON *stats, const cJSON *c,
			  const struct expect *e)
{
	cJSON *hroot, *h;

	h = bpftool_dump(dir, "o1_hist", &hroot);
	check_counters(c, e);
	check_hists(h, c, e);
	same_counters(c, ctrs(stats), false);
	same_hist_counts(h,
			 cJSON_GetObjectItemCaseSensitive(stats, "histograms"));
	assert_int_equal(
	    field(cJSON_GetObjectItemCaseSensitive(h, "ttft"), "sum_us"),
	    field(cJSON_GetObjectItemCaseSensitive(
		      cJSON_GetObjectItemCaseSensitive(stats, "histograms"),
		      "ttft"),
		  "sum_us"));
	cJSON_Delete(hroot);
}

static void test_bpf(void **state)
{
	struct daemon_proc *d = *state;
	static const char *const sets[] = {"metrics.enabled=true", NULL};
	char base[4096], dir[4200], ini[4400], pin[4400];
	struct expect e;
	cJSON *stats, *croot, *c;

	if (system("bpftool version >/dev/null 2>&1") != 0 ||
	    bpffs_setup(base, sizeof(base)) != 0)
		skip();
	snprintf(dir, sizeof(dir), "%s/o1d", base);
	snprintf(ini, sizeof(ini), "[metrics]\nmode = bpf\nbpf_dir = %s\n",
		 dir);
	write_config(d, ini);
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_true(log_has(d->log, "publishing through bpf"));
	run_requests(d, &e);
	stats = settled(d, dir, &croot, &c);
	assert_string_equal(
	    cJSON_GetObjectItemCaseSensitive(stats, "backend")->valuestring,
	    "bpf");
	check_counters(ctrs(stats), &e);
	check_hists(cJSON_GetObjectItemCaseSensitive(stats, "histograms"),
		    ctrs(stats), &e);
	check_bpftool(dir, stats, c, &e);
	cJSON_Delete(croot);
	assert_int_equal(daemon_stop(d), 0);
	snprintf(pin, sizeof(pin), "%s/" O1_METRICS_PIN_SUBDIR "/o1_counters", dir);
	assert_int_equal(access(pin, F_OK), 0); /* unpin_on_exit = false */
	bpffs_cleanup();
	bpf_json = stats;
}

static void test_shm(void **state)
{
	struct daemon_proc *d = *state;
	static const char *const sets[] = {"metrics.enabled=true", NULL};
	char path[256];
	struct expect e;
	struct stat sb;
	cJSON *stats, *c;

	write_config(d, "[metrics]\nmode = shm\nunpin_on_exit = true\n"
			"gid = 4242\nfile_mode = 0604\n");
	assert_int_equal(
	    o1_metrics_shm_path_for(NULL, d->socket, path, sizeof(path)), 0);
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_true(log_has(d->log, path));
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0604);
	if (geteuid() == 0)
		assert_int_equal(sb.st_gid, 4242);
	run_requests(d, &e);
	stats = stats_json(d);
	c = cJSON_GetObjectItemCaseSensitive(stats, "counters");
	assert_string_equal(
	    cJSON_GetObjectItemCaseSensitive(stats, "backend")->valuestring,
	    "shm");
	check_counters(c, &e);
	check_hists(cJSON_GetObjectItemCaseSensitive(stats, "histograms"), c,
		    &e);
	if (bpf_json) {
		/* the same requests, the same o1ctl output */
		same_counters(
		    cJSON_GetObjectItemCaseSensitive(bpf_json, "counters"), c,
		    true);
		same_hist_counts(
		    cJSON_GetObjectItemCaseSensitive(bpf_json, "histograms"),
		    cJSON_GetObjectItemCaseSensitive(stats, "histograms"));
	}
	assert_int_equal(daemon_stop(d), 0);
	assert_int_not_equal(access(path, F_OK), 0); /* unpin_on_exit */
	cJSON_Delete(stats);
	cJSON_Delete(bpf_json);
	bpf_json = NULL;
}

/* Bad metrics settings stop start-up with one line that names them. */
static void test_bad_metrics_config(void **state)
{
	struct daemon_proc *d = *state;
	static const char *const group[] = {
	    "metrics.enabled=true", "metrics.gid=no-such-group-o1", NULL};
	static const char *const bpf[] = {"metrics.enabled=true",
					  "metrics.mode=bpf",
					  "metrics.bpf_dir=/tmp", NULL};

	assert_int_not_equal(daemon_start(d, o1d_bin, group), 0);
	assert_true(log_has(d->log, "metrics.gid 'no-such-group-o1'"));
	assert_int_not_equal(daemon_start(d, o1d_bin, bpf), 0);
	assert_true(log_has(d->log, "/tmp"));
	assert_true(log_has(d->log, "start-up failed"));
}

static void write_reload_config(struct daemon_proc *d, const char *level,
				unsigned pages)
{
	char ini[256];

	snprintf(ini, sizeof(ini), "[log]\nlevel = %s\n[kv]\npages = %u\n",
		 level, pages);
	write_config(d, ini);
}

static int ctl(const struct daemon_proc *d, const char *cmd, char *out,
	       size_t cap)
{
	char args[512];

	snprintf(args, sizeof(args), "--socket %s %s", d->socket, cmd);
	return o1ctl(args, out, cap);
}

static bool list_has(const cJSON *r, const char *key, const char *what)
{
	const cJSON *x;

	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, key))
	{
		if (cJSON_IsString(x) && !strcmp(x->valuestring, what))
			return true;
	}
	return false;
}

static void check_reload(struct daemon_proc *d)
{
	static char out[65536];
	struct o1_config c;
	char err[256];
	cJSON *r;

	write_config(d, "[log]\nlevel = debug\n[kv]\npages = 77\n"
			"[scheduler]\nmax_batch_tokens = 4096\n"
			"max_running = 3\nprefill_chunk_tokens = 64\n"
			"[cuda]\nautotune_ms = 5\n");
	assert_int_equal(ctl(d, "reload --json", out, sizeof(out)), 0);
	r = cJSON_Parse(out);
	assert_non_null(r);
	assert_true(list_has(r, "reloaded", "log.level"));
	assert_true(list_has(r, "not_reloaded", "kv"));
	assert_true(list_has(r, "not_reloaded", "cuda")); /* read at load */
	assert_false(list_has(r, "not_reloaded", "ipc"));
	cJSON_Delete(r);
	/* the effective config: the new level, the old page count */
	assert_int_equal(ctl(d, "config", out, sizeof(out)), 0);
	assert_int_equal(o1_config_init_defaults(&c), 0);
	assert_int_equal(
	    o1_config_load_string(&c, out, "reply", err, sizeof(err)), 0);
	assert_int_equal(c.log.level, O1_LOG_DEBUG);
	assert_int_equal(c.kv.pages, 64);
	assert_int_equal(c.scheduler.max_batch_tokens, 2048); /* capped */
	assert_int_equal(c.scheduler.max_running, 3);
	assert_int_equal(c.scheduler.prefill_chunk_tokens, 64);
	assert_string_equal(c.ipc.socket, d->socket);
	write_config(d, "[kv]\npages = lots\n");
	assert_int_equal(ctl(d, "reload", out, sizeof(out)), 1);
	assert_int_equal(ctl(d, "health", out, sizeof(out)), 0);
}

/* o1ctl as nobody: the socket (0660, root's) refuses it. */
static int run_as_nobody(const char *sock)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(99);
		execl(o1ctl_bin, o1ctl_bin, "--socket", sock, "status",
		      (char *)NULL);
		_exit(98);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_admin_commands(void **state)
{
	struct daemon_proc *d = *state;
	char out[8192], args[512];
	cJSON *r;

	write_reload_config(d, "info", 64);
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(ctl(d, "health", out, sizeof(out)), 0);
	assert_int_equal(ctl(d, "health --json", out, sizeof(out)), 0);
	r = cJSON_Parse(out);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "healthy")));
	cJSON_Delete(r);
	assert_int_equal(ctl(d, "drain", out, sizeof(out)), 0);
	assert_int_equal(ctl(d, "health", out, sizeof(out)), 6);
	assert_non_null(strstr(out, "draining"));
	assert_int_equal(ctl(d, "resume", out, sizeof(out)), 0);
	assert_int_equal(ctl(d, "status --json", out, sizeof(out)), 0);
	r = cJSON_Parse(out);
	assert_int_equal(field(r, "admin_version"), 1);
	cJSON_Delete(r);
	/* global --json before the command, -c from anywhere */
	snprintf(args, sizeof(args), "--json -c %s --socket %s requests",
		 d->config, d->socket);
	assert_int_equal(o1ctl(args, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "\"requests\":[]"));
	check_reload(d);
	if (geteuid() == 0) {
		int rc = run_as_nobody(d->socket);

		if (rc < 98) /* 98, 99: nobody cannot run o1ctl here */
			assert_int_equal(rc, 4);
	}
	assert_int_equal(daemon_stop(d), 0);
	assert_int_equal(ctl(d, "health", out, sizeof(out)), 3);
	assert_int_equal(ctl(d, "stats", out, sizeof(out)), 3);
	assert_int_equal(ctl(d, "bogus", out, sizeof(out)), 2);
}

/* A request the ipc loop refuses itself (draining) is counted: submitted
 * and failed_draining, so o1ctl slo's success rate sees it; after resume
 * the next one completes. */
static void test_refused_counted(void **state)
{
	struct daemon_proc *d = *state;
	static const char *const sets[] = {"metrics.enabled=true", NULL};
	char out[8192];
	struct result r;
	struct spec s;
	cJSON *stats, *c;

	write_config(d, "[metrics]\nmode = shm\nunpin_on_exit = true\n");
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_int_equal(ctl(d, "drain", out, sizeof(out)), 0);
	spec_make(&s, 3);
	assert_int_equal(spec_run(d->socket, &s, &r), 0);
	assert_int_equal(r.finals, 1);
	assert_int_equal(r.error, -O1_E_DRAINING);
	assert_int_equal(ctl(d, "resume", out, sizeof(out)), 0);
	s.ignore_eos = true;
	assert_int_equal(spec_run(d->socket, &s, &r), 0);
	assert_int_equal(r.error, 0);
	stats = stats_json(d);
	c = cJSON_GetObjectItemCaseSensitive(stats, "counters");
	assert_int_equal(field(c, "requests_submitted"), 2);
	assert_int_equal(field(c, "failed_draining"), 1);
	assert_int_equal(field(c, "requests_completed"), 1);
	cJSON_Delete(stats);
	assert_int_equal(daemon_stop(d), 0);
}

/* A fake o1d: accepts one admin connection, answers its hello with
 * WELCOME_STATUS, then one request with REPLY. */
struct fake {
	int lfd;
	int welcome_status;
	const char *reply;
};

static void *fake_serve(void *arg)
{
	struct fake *f = arg;
	struct o1_wire_welcome w = {.magic = O1_WELCOME_MAGIC,
				    .version = O1_WIRE_VERSION,
				    .status = f->welcome_status};
	struct o1_wire_hello h;
	char req[4096];
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	if (recv(fd, &h, sizeof(h), 0) == sizeof(h) &&
	    send(fd, &w, sizeof(w), MSG_NOSIGNAL) == sizeof(w) &&
	    !f->welcome_status && recv(fd, req, sizeof(req), 0) > 0)
		send(fd, f->reply, strlen(f->reply), MSG_NOSIGNAL);
	close(fd);
	return NULL;
}

static int fake_run(const struct daemon_proc *d, int status, const char *reply)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct fake f = {.welcome_status = status, .reply = reply};
	char args[512], out[4096];
	pthread_t t;
	int rc;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s/fake.sock", d->dir);
	unlink(a.sun_path);
	f.lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_true(f.lfd >= 0);
	assert_int_equal(bind(f.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f.lfd, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, fake_serve, &f), 0);
	snprintf(args, sizeof(args), "--socket %s status", a.sun_path);
	rc = o1ctl(args, out, sizeof(out));
	pthread_join(t, NULL);
	close(f.lfd);
	unlink(a.sun_path);
	return rc;
}

static void test_version_mismatch(void **state)
{
	struct daemon_proc *d = *state;

	assert_int_equal(fake_run(d, 0, "{\"ok\":true,\"admin_version\":99}"),
			 5);
	assert_int_equal(fake_run(d, 0, "{\"ok\":true}"), 5);
	assert_int_equal(fake_run(d, -O1_E_VERSION, ""), 5);
	assert_int_equal(fake_run(d, -EACCES, ""), 4);
	assert_int_equal(fake_run(d, 0, "{\"ok\":true,\"admin_version\":1}"),
			 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_bpf, stop_daemon),
	    cmocka_unit_test_teardown(test_shm, stop_daemon),
	    cmocka_unit_test_teardown(test_bad_metrics_config, stop_daemon),
	    cmocka_unit_test_teardown(test_admin_commands, stop_daemon),
	    cmocka_unit_test_teardown(test_refused_counted, stop_daemon),
	    cmocka_unit_test_teardown(test_version_mismatch, stop_daemon),
	};

	if (argc < 4) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1CTL\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	harness_o1model = argv[2];
	o1ctl_bin = argv[3];
	return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}

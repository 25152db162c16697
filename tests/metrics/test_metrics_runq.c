/* The optional run-queue delay program. Built without it (O1_BPF_PROGS
 * off): starting it is refused with -O1_E_UNSUPPORTED. Built with it, as
 * root with bpffs: it refuses the shm backend; attached to this process,
 * two threads ping-ponging through pipes produce wake-ups whose delays a
 * reader finds in the o1_runq pin (count, slots, sum consistent); bpftool
 * prints the histogram's named fields and the Prometheus rendering has
 * it; stop removes the pin. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bpffs.h"
#include "common/error.h"
#include "metrics/metrics_reader.h"
#include "metrics/metrics_render.h"
#include "metrics/metrics_runq.h"
#include "tests/common/test_util.h"

static struct o1_metrics *open_mode(enum o1_metrics_mode mode, const char *dir,
				    const char *shm)
{
	struct o1_metrics_opts o = {.sz = sizeof(o),
				    .mode = mode,
				    .bpf_dir = dir,
				    .shm_path = shm,
				    .gid = -1,
				    .unpin_on_close = true};
	struct o1_metrics *m;

	assert_int_equal(o1_metrics_open(&o, &m), 0);
	return m;
}

static void test_refused_without_bpf(void **state)
{
	char shm[64];
	struct o1_metrics *m;
	struct o1_metrics_runq *q = (void *)1;

	(void)state;
	snprintf(shm, sizeof(shm), "/tmp/o1-test-runq-%d", (int)getpid());
	m = open_mode(O1_METRICS_MODE_SHM, NULL, shm);
	assert_int_equal(o1_metrics_runq_start(m, getpid(), &q),
			 -O1_E_UNSUPPORTED);
	assert_null(q);
	o1_metrics_close(m);
	o1_metrics_runq_stop(NULL);
}

static int ping[2], pong[2];

static void *ponger(void *arg)
{
	char c;

	(void)arg;
	while (read(ping[0], &c, 1) == 1 && c)
		if (write(pong[1], &c, 1) != 1)
			break;
	return NULL;
}

static void ping_pong(unsigned rounds)
{
	pthread_t t;
	char c = 1;

	assert_int_equal(pipe(ping), 0);
	assert_int_equal(pipe(pong), 0);
	assert_int_equal(pthread_create(&t, NULL, ponger, NULL), 0);
	for (unsigned i = 0; i < rounds; i++) {
		assert_int_equal(write(ping[1], &c, 1), 1);
		assert_int_equal(read(pong[0], &c, 1), 1);
	}
	c = 0;
	assert_int_equal(write(ping[1], &c, 1), 1);
	pthread_join(t, NULL);
	close(ping[0]);
	close(ping[1]);
	close(pong[0]);
	close(pong[1]);
}

static int bpftool_has_slots(const char *pin)
{
	char cmd[4400], buf[16384];

	snprintf(cmd, sizeof(cmd), "bpftool map dump pinned %s -j 2>&1", pin);
	o1_test_run(cmd, buf, sizeof(buf));
	return strstr(buf, "\"sum_us\"") && strstr(buf, "\"slots\"");
}

static int prometheus_has_runq(const struct o1_metrics_snapshot *s)
{
	char *buf = NULL, line[96];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int found;

	assert_int_equal(o1_metrics_render_prometheus(s, f), 0);
	fclose(f);
	snprintf(line, sizeof(line),
		 "\no1_run_queue_delay_seconds_count %" PRIu64 "\n",
		 o1_metrics_hist_total(&s->runq));
	found = strstr(buf, line) != NULL;
	free(buf);
	return found;
}

static void test_runq_delays(void **state)
{
	char base[4096], dir[4200], pin[4300];
	struct o1_metrics_reader_opts ro = {.sz = sizeof(ro),
					    .mode = O1_METRICS_MODE_BPF};
	struct o1_metrics_snapshot s;
	struct o1_metrics_reader *r;
	struct o1_metrics_runq *q;
	struct o1_metrics *m;
	int err;

	(void)state;
#ifndef O1_HAVE_BPF_PROGS
	skip();
#endif
	err = bpffs_setup(base, sizeof(base));
	if (err)
		skip();
	snprintf(dir, sizeof(dir), "%s/o1d", base);
	snprintf(pin, sizeof(pin), "%s/v1/o1_runq", dir);
	m = open_mode(O1_METRICS_MODE_BPF, dir, NULL);
	err = o1_metrics_runq_start(m, getpid(), &q);
	if (err == -EPERM || err == -EINVAL) {
		o1_metrics_close(m);
		bpffs_cleanup();
		skip(); /* tracing programs not allowed here */
	}
	assert_int_equal(err, 0);
	ping_pong(2000);
	ro.bpf_dir = dir;
	assert_int_equal(o1_metrics_reader_open(&ro, &r), 0);
	assert_int_equal(o1_metrics_reader_snapshot(r, &s), 0);
	o1_metrics_reader_close(r);
	assert_int_equal(s.has_runq, 1);
	assert_true(s.runq.count >= 1000);
	assert_true(o1_metrics_hist_total(&s.runq) <= s.runq.count);
	assert_true(o1_metrics_hist_total(&s.runq) + 16 >= s.runq.count);
	assert_true(s.runq.sum_us < s.runq.count * 1000000);
	assert_true(prometheus_has_runq(&s));
	if (system("bpftool version >/dev/null 2>&1") == 0)
		assert_true(bpftool_has_slots(pin));
	o1_metrics_runq_stop(q);
	assert_int_equal(access(pin, F_OK), -1);
	o1_metrics_close(m);
	bpffs_cleanup();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refused_without_bpf),
	    cmocka_unit_test(test_runq_delays),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

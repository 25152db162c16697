/* o1ctl's metrics commands as a separate process: `metrics --json` reports
 * exactly what a writer counted, `--prometheus` and the text view carry
 * the same values, `top` computes rates from two snapshots, errors and
 * usage mistakes give the documented exit codes, and (as root with bpffs)
 * the pinned maps and the fallback file give the same JSON.
 * argv[1] is the o1ctl binary. */
#include <errno.h>
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

#include <cjson/cJSON.h>

#include "tests/metrics/bpffs.h"
#include "metrics/metrics_writer.h"
#include "tests/common/test_util.h"

static const char *o1ctl;
static char tmpdir[64];
static char shm[128];
static char out[1 << 20];

static int setup(void **state)
{
	(void)state;
	o1_test_dir_make(tmpdir, sizeof(tmpdir), "o1ctl");
	snprintf(shm, sizeof(shm), "%s/metrics", tmpdir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return o1_test_dir_remove(tmpdir);
}

/* Runs o1ctl with args; stdout lands in out, stderr in tmpdir/stderr.
 * Returns the exit status. */
static int run(const char *args)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s %s 2>%s/stderr", o1ctl, args, tmpdir);
	return o1_test_run(cmd, out, sizeof(out));
}

static int stderr_has(const char *text)
{
	char path[160], buf[4096] = {0};
	FILE *f;

	snprintf(path, sizeof(path), "%s/stderr", tmpdir);
	f = fopen(path, "r");
	if (!f)
		return 0;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	return strstr(buf, text) != NULL;
}

static struct o1_metrics *writer(enum o1_metrics_mode mode, const char *dir)
{
	struct o1_metrics_opts o = {.sz = sizeof(o),
				    .mode = mode,
				    .bpf_dir = dir,
				    .shm_path = shm,
				    .gid = -1,
				    .unpin_on_close = true};
	static const uint32_t sizes[] = {1, 2, 4};
	static const uint32_t lens[] = {1024, 16384};
	struct o1_metrics *m;

	assert_int_equal(o1_metrics_open(&o, &m), 0);
	for (unsigned c = 0; c < O1_METRICS_CTR__COUNT; c++)
		o1_metrics_add(m, c, 100 + c);
	for (unsigned h = 0; h < O1_METRICS_HIST__COUNT; h++)
		for (unsigned v = 0; v < 50; v++)
			o1_metrics_observe_us(m, h, (uint64_t)v * v * (h + 1));
	o1_metrics_graph_set_buckets(m, sizes, 3);
	o1_metrics_graph_hit(m, 1, 1);
	o1_metrics_graph_miss(m, 2);
	o1_metrics_graph_capture(m, 2500, 1 << 20);
	o1_metrics_graph_set_spans(m, lens, 2);
	o1_metrics_graph_add_span(m, 1, 6);
	return m;
}

static cJSON *metrics_json(const char *args)
{
	char a[512];
	cJSON *j;

	if (snprintf(a, sizeof(a), "metrics --json %s", args) >= (int)sizeof(a))
		fail_msg("metrics_json: arguments longer than %zu bytes",
			 sizeof(a));
	assert_int_equal(run(a), 0);
	j = cJSON_Parse(out);
	assert_non_null(j);
	return j;
}

static void test_json(void **state)
{
	static const char *const names[] = {
#define O1_METRICS_X(id, f, type, p, l, h) #f,
	    O1_METRICS_COUNTER_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	};
	struct o1_metrics *m = writer(O1_METRICS_MODE_SHM, NULL);
	char args[256];
	cJSON *j, *c, *h, *b;

	(void)state;
	snprintf(args, sizeof(args), "--source shm --shm %s", shm);
	j = metrics_json(args);
	assert_string_equal(cJSON_GetObjectItem(j, "backend")->valuestring,
			    "shm");
	assert_int_equal(cJSON_GetObjectItem(j, "pid")->valuedouble, getpid());
	c = cJSON_GetObjectItem(j, "counters");
	for (unsigned i = 0; i < O1_METRICS_CTR__COUNT; i++)
		assert_int_equal(cJSON_GetObjectItem(c, names[i])->valuedouble,
				 m->ctr->v[i]);
	h = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "histograms"), "itl");
	assert_int_equal(cJSON_GetObjectItem(h, "count")->valuedouble, 50);
	assert_int_equal(cJSON_GetObjectItem(h, "sum_us")->valuedouble,
			 m->hist->itl.sum_us);
	assert_non_null(cJSON_GetObjectItem(h, "p99_us"));
	b = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(j, "graphs"), "buckets"),
	    1);
	assert_int_equal(cJSON_GetObjectItem(b, "batch_size")->valuedouble, 2);
	assert_int_equal(cJSON_GetObjectItem(b, "hits")->valuedouble, 1);
	b = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(j, "graphs"), "spans"), 1);
	assert_int_equal(cJSON_GetObjectItem(b, "context_len")->valuedouble,
			 16384);
	assert_int_equal(cJSON_GetObjectItem(b, "steps")->valuedouble, 6);
	cJSON_Delete(j);
	/* AUTO finds the file when no pins exist under --dir */
	snprintf(args, sizeof(args), "--dir %s/none --shm %s", tmpdir, shm);
	j = metrics_json(args);
	assert_string_equal(cJSON_GetObjectItem(j, "backend")->valuestring,
			    "shm");
	cJSON_Delete(j);
	o1_metrics_close(m);
}

static void test_prometheus_and_text(void **state)
{
	struct o1_metrics *m = writer(O1_METRICS_MODE_SHM, NULL);
	char args[256], line[128];

	(void)state;
	snprintf(args, sizeof(args),
		 "metrics --prometheus --source shm "
		 "--shm %s",
		 shm);
	assert_int_equal(run(args), 0);
	snprintf(line, sizeof(line), "\no1_requests_submitted_total %u\n",
		 100 + O1_METRICS_CTR_REQUESTS_SUBMITTED);
	assert_non_null(strstr(out, line));
	assert_non_null(strstr(out, "\no1_graph_hits_total{batch=\"2\"} 1\n"));
	assert_non_null(
	    strstr(out, "\no1_graph_span_steps_total{context=\"16384\"} 6\n"));
	snprintf(args, sizeof(args), "metrics --source shm --shm %s", shm);
	assert_int_equal(run(args), 0);
	snprintf(line, sizeof(line), "\n  %-24s %14u\n", "steps",
		 100 + O1_METRICS_CTR_STEPS);
	assert_non_null(strstr(out, line));
	assert_non_null(strstr(out, "via shm at "));
	assert_non_null(strstr(out, "\nttft\n"));
	assert_non_null(strstr(out, " : count    distribution\n"));
	assert_non_null(strstr(out, "graphs: 3 buckets"));
	assert_non_null(strstr(out, "\n   context        steps\n"));
	assert_non_null(strstr(out, "\n      1024            0\n"));
	assert_non_null(strstr(out, "\n     16384            6\n"));
	o1_metrics_close(m);
}

static volatile int adding;

static void *add_tokens(void *arg)
{
	struct o1_metrics *m = arg;

	while (adding) {
		o1_metrics_add(m, O1_METRICS_CTR_TOKENS_GENERATED, 10);
		o1_metrics_observe_us(m, O1_METRICS_HIST_ITL, 2000);
		usleep(1000);
	}
	return NULL;
}

static void test_top(void **state)
{
	struct o1_metrics *m = writer(O1_METRICS_MODE_SHM, NULL);
	char args[256], *p;
	pthread_t t;
	double rate;

	(void)state;
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_TOTAL, 512);
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_USED, 128);
	adding = 1;
	assert_int_equal(pthread_create(&t, NULL, add_tokens, m), 0);
	snprintf(args, sizeof(args),
		 "top --count 2 --interval 0.2 --source shm --shm %s", shm);
	assert_int_equal(run(args), 0);
	adding = 0;
	pthread_join(t, NULL);
	p = strstr(out, "o1d top");
	assert_non_null(p);
	assert_non_null(strstr(p + 1, "o1d top")); /* two frames */
	p = strstr(out, "tokens/s    generated ");
	assert_non_null(p);
	rate = strtod(p + 22, NULL);
	assert_true(rate > 100 && rate < 20000); /* ~10 per ms at most */
	assert_non_null(strstr(out, "used 128 / 512 (25.0%)"));
	/* graph counts did not move during the interval */
	assert_non_null(strstr(out, "graphs      hit rate -"));
	p = strstr(out, "\n  itl ");
	assert_non_null(p);
	assert_non_null(
	    strstr(p, "     1.536 ")); /* mid-slot of [1024, 2048) us */
	o1_metrics_close(m);
}

/* top --json: one line per frame, the interval's delta. */
static void test_top_json(void **state)
{
	struct o1_metrics *m = writer(O1_METRICS_MODE_SHM, NULL);
	char args[256], *line2;
	cJSON *a, *b, *ctr;

	(void)state;
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_TOTAL, 512);
	o1_metrics_add(m, O1_METRICS_CTR_STEPS, 1000);
	snprintf(args, sizeof(args),
		 "--json top --count 2 --interval 0.1 --source shm --shm %s",
		 shm);
	assert_int_equal(run(args), 0);
	line2 = strchr(out, '\n');
	assert_non_null(line2);
	*line2++ = 0;
	a = cJSON_Parse(out);
	b = cJSON_Parse(line2);
	assert_non_null(a);
	assert_non_null(b);
	assert_true(cJSON_GetObjectItem(a, "interval_s")->valuedouble >= 0.1);
	ctr = cJSON_GetObjectItem(a, "counters");
	/* a counter that did not move counts 0; a gauge keeps its value */
	assert_int_equal(cJSON_GetObjectItem(ctr, "steps")->valuedouble, 0);
	assert_int_equal(
	    cJSON_GetObjectItem(ctr, "kv_pages_total")->valuedouble, 512);
	cJSON_Delete(a);
	cJSON_Delete(b);
	o1_metrics_close(m);
}

static void test_errors(void **state)
{
	char args[256];

	(void)state;
	snprintf(args, sizeof(args), "metrics --dir %s/none --shm %s/none",
		 tmpdir, tmpdir);
	assert_int_equal(run(args), 3); /* not running */
	assert_true(stderr_has("is o1d running?"));
	assert_int_equal(run("--set metrics.shm_path=relative stats"), 2);
	assert_int_equal(run("stats --json --prometheus"), 2);
	assert_int_equal(run("metrics --json --prometheus"), 2);
	assert_int_equal(run("metrics --source nfs"), 2);
	assert_int_equal(run("metrics extra"), 2);
	assert_int_equal(run("top --interval 0"), 2);
	assert_int_equal(run("top --count -3"), 2);
	assert_int_equal(run("frobnicate"), 2);
	assert_int_equal(run("help"), 0);
	assert_non_null(strstr(out, "metrics"));
}

/* Pinned maps and the fallback file, holding the same counts, give the
 * same JSON apart from the backend and start time. */
static void test_bpf_same_as_shm(void **state)
{
	char base[4096], dir[4200], args[4400];
	struct o1_metrics *a, *b;
	cJSON *ja, *jb;

	(void)state;
	if (bpffs_setup(base, sizeof(base)) != 0)
		skip();
	snprintf(dir, sizeof(dir), "%s/o1d", base);
	a = writer(O1_METRICS_MODE_BPF, dir);
	snprintf(args, sizeof(args), "--source bpf --dir %s", dir);
	ja = metrics_json(args);
	o1_metrics_close(a);
	b = writer(O1_METRICS_MODE_SHM, dir);
	snprintf(args, sizeof(args), "--dir %s --shm %s", dir, shm);
	jb = metrics_json(args); /* AUTO: the pins are gone, the file is read */
	o1_metrics_close(b);
	bpffs_cleanup();
	assert_string_equal(cJSON_GetObjectItem(ja, "backend")->valuestring,
			    "bpf");
	assert_string_equal(cJSON_GetObjectItem(jb, "backend")->valuestring,
			    "shm");
	cJSON_DeleteItemFromObject(ja, "backend");
	cJSON_DeleteItemFromObject(jb, "backend");
	cJSON_DeleteItemFromObject(ja, "start_unix_ns");
	cJSON_DeleteItemFromObject(jb, "start_unix_ns");
	assert_true(cJSON_Compare(ja, jb, 1));
	cJSON_Delete(ja);
	cJSON_Delete(jb);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_prometheus_and_text),
	    cmocka_unit_test(test_top),
	    cmocka_unit_test(test_top_json),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_bpf_same_as_shm),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH-TO-O1CTL\n", argv[0]);
		return 2;
	}
	o1ctl = argv[1];
	return cmocka_run_group_tests(tests, setup, teardown);
}

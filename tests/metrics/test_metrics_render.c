/* Renderings of a known snapshot: the Prometheus text checked line by line
 * (grammar, one HELP/TYPE per family before its samples, counter names,
 * cumulative buckets with increasing le, exact values) and with promtool
 * when installed; the JSON rendering's fields and values. */
#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics/metrics_render.h"

static struct o1_metrics_snapshot snap;

static int setup(void **state)
{
	(void)state;
	snap.info.magic = O1_METRICS_MAGIC;
	snap.info.version = O1_METRICS_VERSION;
	snap.info.backend = O1_METRICS_BACKEND_SHM;
	snap.info.pid = 4321;
	snap.info.start_unix_ns = 1700000000123456789ull;
	snap.ctr.requests_submitted = 5;
	snap.ctr.failed_context = 2;
	snap.ctr.kv_pages_used = 7;
	snap.hist.ttft.count = 3;
	snap.hist.ttft.sum_us = 17;
	snap.hist.ttft.slots[0] = 1;
	snap.hist.ttft.slots[3] = 2;
	snap.hist.step.count = 1;
	snap.hist.step.sum_us = 3000000123;
	snap.hist.step.slots[O1_METRICS_HIST_SLOTS - 1] = 1;
	snap.graphs.n_buckets = 2;
	snap.graphs.buckets[0].batch_size = 1;
	snap.graphs.buckets[1].batch_size = 2;
	snap.graphs.buckets[1].hits = 5;
	snap.graphs.buckets[1].padded_tokens = 3;
	snap.graphs.capture_us = 1500000;
	snap.graphs.n_spans = 2;
	snap.graphs.spans[0].context_len = 1024;
	snap.graphs.spans[0].steps = 9;
	snap.graphs.spans[1].context_len = 8192;
	snap.graphs.spans[2].steps = 4; /* past n_spans: not rendered */
	return 0;
}

static char *render(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(o1_metrics_render_prometheus(&snap, f), 0);
	fclose(f);
	return buf;
}

static int count_lines(const char *text, const char *line)
{
	size_t n = strlen(line);
	int count = 0;

	for (const char *p = text; (p = strstr(p, line)); p += n)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			count++;
	return count;
}

/* Family of a sample name: histogram samples drop their suffix. */
static void family(const char *name, char *out, size_t sz)
{
	static const char *const sfx[] = {"_bucket", "_sum", "_count"};
	size_t n = strlen(name);

	snprintf(out, sz, "%s", name);
	for (unsigned i = 0; i < 3; i++) {
		size_t k = strlen(sfx[i]);

		if (n > k && strcmp(name + n - k, sfx[i]) == 0 &&
		    strstr(name, "_seconds")) {
			out[n - k] = '\0';
			return;
		}
	}
}

/* Every line is a comment of the exposition format or a sample whose
 * family was typed (once) before it. */
static void test_prometheus_grammar(void **state)
{
	char *text = render(), *save = NULL, typed[8192] = " ";
	regex_t sample, type;
	regmatch_t mt[3];
	int samples = 0;

	(void)state;
	assert_int_equal(
	    regcomp(&sample,
		    "^(o1_[a-z0-9_]+)(\\{[a-z]+=\"[^\"]*\"(,[a-z]+="
		    "\"[^\"]*\")*\\})? [0-9]+(\\.[0-9]+)?$",
		    REG_EXTENDED),
	    0);
	assert_int_equal(regcomp(&type,
				 "^# TYPE (o1_[a-z0-9_]+) "
				 "(counter|gauge|histogram)$",
				 REG_EXTENDED),
			 0);
	for (char *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		char name[128], fam[130], key[134];

		if (regexec(&type, l, 3, mt, 0) == 0) {
			snprintf(key, sizeof(key), " %.*s ",
				 (int)(mt[1].rm_eo - mt[1].rm_so),
				 l + mt[1].rm_so);
			assert_null(strstr(typed, key)); /* typed once */
			strcat(typed, key + 1);
			if (strcmp(l + mt[2].rm_so, "counter") == 0)
				assert_non_null(strstr(key, "_total "));
			continue;
		}
		if (strncmp(l, "# HELP o1_", 10) == 0)
			continue;
		assert_int_equal(regexec(&sample, l, 3, mt, 0), 0);
		snprintf(name, sizeof(name), "%.*s",
			 (int)(mt[1].rm_eo - mt[1].rm_so), l);
		family(name, fam, sizeof(fam));
		snprintf(key, sizeof(key), " %s ", fam);
		assert_non_null(strstr(typed, key));
		samples++;
	}
	assert_true(samples >
		    O1_METRICS_CTR__COUNT +
			O1_METRICS_HIST__COUNT * O1_METRICS_HIST_SLOTS);
	regfree(&sample);
	regfree(&type);
	free(text);
}

static void test_prometheus_values(void **state)
{
	char *t = render();

	(void)state;
	assert_int_equal(count_lines(t, "o1_requests_submitted_total 5"), 1);
	assert_int_equal(
	    count_lines(t, "o1_requests_failed_total{reason=\"context\"} 2"),
	    1);
	assert_int_equal(
	    count_lines(t, "o1_requests_failed_total{reason=\"quota\"} 0"), 1);
	assert_int_equal(count_lines(t, "# TYPE o1_requests_failed_total "
					"counter"),
			 1);
	assert_int_equal(count_lines(t, "# TYPE o1_kv_pages_used gauge"), 1);
	assert_int_equal(count_lines(t, "o1_kv_pages_used 7"), 1);
	assert_int_equal(count_lines(t, "# TYPE o1_time_to_first_token_seconds "
					"histogram"),
			 1);
	assert_int_equal(count_lines(t, "o1_time_to_first_token_seconds_bucket"
					"{le=\"0.000002\"} 1"),
			 1);
	assert_int_equal(count_lines(t, "o1_time_to_first_token_seconds_bucket"
					"{le=\"0.000008\"} 1"),
			 1);
	assert_int_equal(count_lines(t, "o1_time_to_first_token_seconds_bucket"
					"{le=\"0.000016\"} 3"),
			 1);
	assert_int_equal(count_lines(t, "o1_time_to_first_token_seconds_bucket"
					"{le=\"+Inf\"} 3"),
			 1);
	assert_int_equal(count_lines(t, "o1_time_to_first_token_seconds_sum "
					"0.000017"),
			 1);
	assert_int_equal(
	    count_lines(t, "o1_time_to_first_token_seconds_count 3"), 1);
	/* a value in the clamped last slot only reaches +Inf */
	assert_int_equal(count_lines(t, "o1_step_duration_seconds_bucket"
					"{le=\"2147.483648\"} 0"),
			 1);
	assert_int_equal(count_lines(t, "o1_step_duration_seconds_bucket"
					"{le=\"+Inf\"} 1"),
			 1);
	assert_int_equal(count_lines(t, "o1_step_duration_seconds_sum "
					"3000.000123"),
			 1);
	assert_int_equal(count_lines(t, "o1_graph_hits_total{batch=\"2\"} 5"),
			 1);
	assert_int_equal(count_lines(t, "o1_graph_hits_total{batch=\"1\"} 0"),
			 1);
	assert_null(strstr(t, "batch=\"0\""));
	assert_int_equal(count_lines(t, "o1_graph_padded_tokens_total"
					"{batch=\"2\"} 3"),
			 1);
	assert_int_equal(count_lines(t, "o1_graph_capture_seconds 1.500000"),
			 1);
	assert_int_equal(count_lines(t, "o1_graph_span_steps_total"
					"{context=\"1024\"} 9"),
			 1);
	assert_int_equal(count_lines(t, "o1_graph_span_steps_total"
					"{context=\"8192\"} 0"),
			 1);
	assert_null(strstr(t, "context=\"0\""));
	assert_int_equal(count_lines(t, "o1_info{version=\"3\",backend=\"shm\","
					"pid=\"4321\"} 1"),
			 1);
	assert_int_equal(count_lines(t, "o1_start_time_seconds 1700000000"), 1);
	free(t);
}

/* Buckets of each histogram: le strictly increasing, counts cumulative. */
static void test_prometheus_buckets(void **state)
{
	char *t = render(), *save = NULL;
	char fam[128] = "";
	double last_le = -1;
	unsigned long long last = 0;

	(void)state;
	for (char *l = strtok_r(t, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		char *b = strstr(l, "_bucket{le=\""), *end;
		unsigned long long v;
		double le;

		if (!b)
			continue;
		if (strlen(fam) != (size_t)(b - l) ||
		    strncmp(l, fam, (size_t)(b - l)) != 0) {
			snprintf(fam, sizeof(fam), "%.*s", (int)(b - l), l);
			last_le = -1;
			last = 0;
		}
		le = strncmp(b + 12, "+Inf", 4) == 0 ? 1e300
						     : strtod(b + 12, &end);
		v = strtoull(strstr(b, "} ") + 2, NULL, 10);
		assert_true(le > last_le);
		assert_true(v >= last);
		last_le = le;
		last = v;
	}
	free(t);
}

static void test_promtool(void **state)
{
	char path[] = "/tmp/o1-test-prom-XXXXXX", cmd[128];
	char *t = render();
	FILE *f;
	int fd;

	(void)state;
	if (system("promtool --version >/dev/null 2>&1") != 0) {
		free(t);
		skip();
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs(t, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
	assert_int_equal(system(cmd), 0);
	unlink(path);
	free(t);
}

/* Counts past the tables (a damaged or foreign file) render the tables
 * only. */
static void test_counts_clamped(void **state)
{
	struct o1_metrics_graphs keep = snap.graphs;
	char *t;
	int n = 0;

	(void)state;
	snap.graphs.n_buckets = UINT64_MAX;
	snap.graphs.n_spans = 1000;
	t = render();
	for (const char *p = t; (p = strstr(p, "\no1_graph_span_steps_total{"));
	     p++)
		n++;
	assert_int_equal(n, O1_METRICS_GRAPH_SPANS);
	n = 0;
	for (const char *p = t; (p = strstr(p, "\no1_graph_hits_total{")); p++)
		n++;
	assert_int_equal(n, O1_METRICS_GRAPH_BUCKETS);
	free(t);
	snap.graphs = keep;
}

static void test_json(void **state)
{
	cJSON *j, *h, *g;

	(void)state;
	assert_int_equal(o1_metrics_render_json(&snap, &j), 0);
	assert_string_equal(cJSON_GetObjectItem(j, "backend")->valuestring,
			    "shm");
	assert_int_equal(cJSON_GetObjectItem(j, "pid")->valuedouble, 4321);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "counters")),
			 O1_METRICS_CTR__COUNT);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "counters"),
					     "failed_context")
			     ->valuedouble,
			 2);
	h = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "histograms"), "ttft");
	assert_non_null(h);
	assert_int_equal(cJSON_GetObjectItem(h, "count")->valuedouble, 3);
	assert_int_equal(cJSON_GetObjectItem(h, "sum_us")->valuedouble, 17);
	/* ranks 1.5, 2.7, 2.97 of 3: slot 3 = [8, 16) holds ranks 2 and 3 */
	assert_float_equal(cJSON_GetObjectItem(h, "p50_us")->valuedouble, 10.0,
			   1e-9);
	assert_float_equal(cJSON_GetObjectItem(h, "p90_us")->valuedouble, 14.8,
			   1e-9);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(h, "slots")),
			 O1_METRICS_HIST_SLOTS);
	h = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "histograms"),
				"queue_wait");
	assert_null(cJSON_GetObjectItem(h, "p50_us")); /* empty */
	g = cJSON_GetObjectItem(j, "graphs");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(g, "buckets")),
			 2);
	assert_int_equal(
	    cJSON_GetObjectItem(
		cJSON_GetArrayItem(cJSON_GetObjectItem(g, "buckets"), 1),
		"hits")
		->valuedouble,
	    5);
	assert_int_equal(cJSON_GetObjectItem(g, "n_spans")->valuedouble, 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(g, "spans")),
			 2);
	h = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "spans"), 0);
	assert_int_equal(cJSON_GetObjectItem(h, "context_len")->valuedouble,
			 1024);
	assert_int_equal(cJSON_GetObjectItem(h, "steps")->valuedouble, 9);
	cJSON_Delete(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prometheus_grammar),
	    cmocka_unit_test(test_prometheus_values),
	    cmocka_unit_test(test_prometheus_buckets),
	    cmocka_unit_test(test_promtool),
	    cmocka_unit_test(test_counts_clamped),
	    cmocka_unit_test(test_json),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}

/* The alerting rules of config/o1d-alerts.yml: every metric name and
 * histogram bound they use is one o1d's renderer emits; each SLO's bound
 * and budget follow the [slo] defaults; every alert has an expression, a
 * duration, a severity and a summary. With the argument "promtool":
 * `promtool check rules` and `promtool test rules` (o1d-alerts.test.yml)
 * pass; exit 77 when promtool is not installed. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "config/config.h"
#include "metrics/metrics_reader.h"
#include "metrics/metrics_render.h"

#define RULES	   O1_SOURCE_DIR "/config/o1d-alerts.yml"
#define RULES_TEST O1_SOURCE_DIR "/config/o1d-alerts.test.yml"

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return text;
}

/* What the renderer prints for a snapshot with one observation in every
 * histogram slot (so every bucket line is there). */
static char *rendered(void)
{
	struct o1_metrics_snapshot s;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	memset(&s, 0, sizeof(s));
	for (int h = 0; h < O1_METRICS_HIST__COUNT; h++)
		for (int i = 0; i < O1_METRICS_HIST_SLOTS; i++)
			s.hist.h[h].slots[i] = 1;
	f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(o1_metrics_render_prometheus(&s, f), 0);
	fclose(f);
	return text;
}

/* Whether NAME (n bytes) starts a sample line of the rendering. */
static bool emitted(const char *prom, const char *name, size_t n)
{
	for (const char *l = prom; l && *l; l = strchr(l, '\n')) {
		l += *l == '\n';
		if (!strncmp(l, name, n) && (l[n] == '{' || l[n] == ' '))
			return true;
	}
	return false;
}

/* Every o1_* word of the rules is a metric the renderer emits; returns
 * how many were checked. */
static int check_names(const char *rules, const char *prom)
{
	int n = 0;

	for (const char *p = rules; (p = strstr(p, "o1_")); p++) {
		size_t len = 0;

		if (p > rules && (isalnum((unsigned char)p[-1]) ||
				  p[-1] == '_' || p[-1] == ':'))
			continue;
		while (isalnum((unsigned char)p[len]) || p[len] == '_')
			len++;
		if (!emitted(prom, p, len))
			fail_msg("o1d-alerts.yml uses %.*s, which o1d does not "
				 "emit",
				 (int)len, p);
		n++;
	}
	return n;
}

/* Every `_bucket{le="X"}` of the rules is a bucket line the renderer
 * prints. */
static int check_bounds(const char *rules, const char *prom)
{
	int n = 0;

	for (const char *p = rules; (p = strstr(p, "_bucket{le=\"")); p++) {
		const char *start = p, *end = strchr(p, '}');
		char needle[256];

		while (start > rules &&
		       (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
			start--;
		assert_non_null(end);
		snprintf(needle, sizeof(needle), "\n%.*s ",
			 (int)(end + 1 - start), start);
		if (!strstr(prom, needle))
			fail_msg("o1d-alerts.yml: no bucket %s in o1d's output",
				 needle + 1);
		n++;
	}
	return n;
}

/* The bucket bound at or above MS milliseconds, as the renderer prints
 * it (2^k us in seconds). */
static void bound(uint32_t ms, char *out, size_t sz)
{
	uint64_t us = 2;

	while (us < (uint64_t)ms * 1000)
		us <<= 1;
	snprintf(out, sz, "%llu.%06llu", (unsigned long long)(us / 1000000),
		 (unsigned long long)(us % 1000000));
}

static void check_slo_bound(const char *rules, const char *metric, uint32_t ms)
{
	char b[32], needle[128];

	bound(ms, b, sizeof(b));
	snprintf(needle, sizeof(needle), "o1_%s_bucket{le=\"%s\"}", metric, b);
	if (!strstr(rules, needle))
		fail_msg("o1d-alerts.yml lacks %s (objective %u ms)", needle,
			 ms);
}

static void test_names_and_bounds(void **state)
{
	char *rules = read_all(RULES), *prom = rendered();
	struct o1_config c;
	char budget[32];

	(void)state;
	assert_int_equal(o1_config_init_defaults(&c), 0);
	assert_true(check_names(rules, prom) >= 50);
	assert_true(check_bounds(rules, prom) >= 21);
	check_slo_bound(rules, "time_to_first_token_seconds",
			c.slo.p99_ttft_ms);
	check_slo_bound(rules, "inter_token_latency_seconds", c.slo.p99_itl_ms);
	check_slo_bound(rules, "queue_wait_seconds", c.slo.p99_queue_wait_ms);
	snprintf(budget, sizeof(budget), "* %g)", 1.0 - c.slo.success_rate);
	assert_non_null(strstr(rules, budget));
	assert_null(strchr(rules, '\t'));
	free(rules);
	free(prom);
}

/* The text of one rule: from its "- alert:"/"- record:" line to the next
 * rule or group. */
static size_t rule_len(const char *r)
{
	const char *a = strstr(r + 1, "\n      - "),
		   *g = strstr(r + 1, "\n  - name:");

	if (g && (!a || g < a))
		a = g;
	return a ? (size_t)(a - r) : strlen(r);
}

static bool has(const char *r, size_t n, const char *what)
{
	const char *p = strstr(r, what);

	return p && p < r + n;
}

static void test_structure(void **state)
{
	char *rules = read_all(RULES);
	int alerts = 0, records = 0, groups = 0;

	(void)state;
	assert_true(!strncmp(rules, "#", 1) && strstr(rules, "\ngroups:\n"));
	for (const char *g = rules; (g = strstr(g, "\n  - name: ")); g++) {
		groups++;
		assert_true(
		    !strncmp(strchr(g + 1, '\n'), "\n    rules:\n", 12));
	}
	for (const char *r = rules; (r = strstr(r, "\n      - ")); r++) {
		size_t n = rule_len(r);

		assert_true(has(r, n, "\n        expr: "));
		if (has(r, n, "- record: o1:")) {
			records++;
			continue;
		}
		assert_true(has(r, n, "- alert: O1d"));
		assert_true(has(r, n, "\n        for: "));
		assert_true(has(r, n, "\n          severity: "));
		assert_true(has(r, n, "\n          slo: "));
		assert_true(has(r, n, "\n          summary: "));
		assert_true(has(r, n, " and\n"));
		alerts++;
	}
	assert_int_equal(groups, 4);	 /* one per SLO */
	assert_int_equal(alerts, 4 * 4); /* four burn-rate tiers each */
	assert_int_equal(records, 4 * 7);
	free(rules);
}

static int run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int promtool(void)
{
	if (run("command -v promtool >/dev/null 2>&1")) {
		fprintf(stderr, "promtool not installed (Debian: prometheus): "
				"skipped\n");
		return 77;
	}
	if (run("promtool check rules " RULES)) {
		fprintf(stderr, "promtool check rules %s failed\n", RULES);
		return 1;
	}
	if (run("cd " O1_SOURCE_DIR "/config && promtool test rules "
		"o1d-alerts.test.yml")) {
		fprintf(stderr, "promtool test rules %s failed\n", RULES_TEST);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_and_bounds),
	    cmocka_unit_test(test_structure),
	};

	if (argc > 1 && !strcmp(argv[1], "promtool"))
		return promtool();
	return cmocka_run_group_tests(tests, NULL, NULL);
}

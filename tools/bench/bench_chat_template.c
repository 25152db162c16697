/* bench_chat_template: parse and render time of chat templates on one
 * core.
 *
 * usage: bench_chat_template [--messages N] [--ms M] TEMPLATES...
 * Each TEMPLATES argument is a .jinja file or a JSON list of
 * {"name", "template"} (../shared/testdata/chat/templates.json). Every
 * template is parsed, then renders a conversation of N messages (default
 * 20: a system message, then user and assistant turns of about 200 bytes)
 * with one tool, each repeated for M ms (default 250); the best time of
 * one parse and the best and median time of one render, in this thread's
 * CPU time, are reported for each, and the largest template's figures
 * last (issue 22's target: a render well under 1 ms). A template that
 * raises for this conversation is reported as such. Exits 77 when a file
 * is missing.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/file.h"
#include "template/jinja.h"

static const char turn[] =
    "This is a moderately long message with some words in it, about two "
    "hundred bytes long, standing for one turn of a real conversation. "
    "It goes on a little more here, with a number: 42.";

static double window_ns = 2.5e8;

/* Render times of the template being timed (the first MAX_SAMPLES). */
#define MAX_SAMPLES (1 << 16)
static double samples[MAX_SAMPLES];

/* The largest template that rendered, for the summary line. */
static struct {
	char name[64];
	size_t bytes;
	double parse_ns, best_ns, median_ns;
} largest;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static cJSON *conversation(int n)
{
	cJSON *v = cJSON_CreateObject(), *msgs, *tools;

	msgs = cJSON_AddArrayToObject(v, "messages");
	for (int i = 0; i < n; i++) {
		cJSON *m = cJSON_CreateObject();

		cJSON_AddStringToObject(m, "role",
					!i       ? "system"
					: i % 2 ? "user"
						: "assistant");
		cJSON_AddStringToObject(m, "content", turn);
		cJSON_AddItemToArray(msgs, m);
	}
	tools = cJSON_Parse(
	    "[{\"type\": \"function\", \"function\": {\"name\": "
	    "\"get_weather\", \"description\": \"Current weather\", "
	    "\"parameters\": {\"type\": \"object\", \"properties\": "
	    "{\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]");
	cJSON_AddItemToObject(v, "tools", tools);
	cJSON_AddBoolToObject(v, "add_generation_prompt", 1);
	cJSON_AddStringToObject(v, "bos_token", "<s>");
	cJSON_AddStringToObject(v, "eos_token", "</s>");
	return v;
}

/* Best CPU time of one parse and one render of SRC; false when it does
 * not parse or render (ERR says why). */
static bool time_one(const char *src, const cJSON *vars, double *parse_ns,
		     double *render_ns, double *median_ns,
		     struct o1_jinja_error *err)
{
	size_t n = 0;
	struct o1_jinja *t = NULL;
	double start = cpu_ns(), t0, best_p = 1e18, best_r = 1e18;
	char *out;
	size_t len;

	while (!t || cpu_ns() - start < window_ns) {
		o1_jinja_destroy(t);
		t0 = cpu_ns();
		if (o1_jinja_parse(src, strlen(src), &t, err))
			return false;
		if (cpu_ns() - t0 < best_p)
			best_p = cpu_ns() - t0;
	}
	start = cpu_ns();
	while (best_r > 1e17 || cpu_ns() - start < window_ns) {
		t0 = cpu_ns();
		if (o1_jinja_render(t, vars, NULL, &out, &len, err)) {
			o1_jinja_destroy(t);
			return false;
		}
		t0 = cpu_ns() - t0;
		if (n < MAX_SAMPLES)
			samples[n++] = t0;
		if (t0 < best_r)
			best_r = t0;
		free(out);
	}
	o1_jinja_destroy(t);
	*parse_ns = best_p;
	*render_ns = best_r;
	qsort(samples, n, sizeof(samples[0]), cmp_double);
	*median_ns = samples[n / 2];
	return true;
}

static void bench(const char *name, const char *src, const cJSON *vars)
{
	struct o1_jinja_error err;
	double p, r, m;

	if (!name || !src) {
		printf("(an entry without name or template)\n");
		return;
	}
	if (!time_one(src, vars, &p, &r, &m, &err)) {
		printf("%-28s %6zu bytes  %s at %u:%u: %s\n", name, strlen(src),
		       err.kind == O1_JINJA_ERR_RAISED ? "raises" : "fails",
		       err.line, err.col, err.msg);
		return;
	}
	printf("%-28s %6zu bytes  parse %8.1f us  render %8.1f us "
	       "(median %.1f)\n",
	       name, strlen(src), p / 1e3, r / 1e3, m / 1e3);
	if (strlen(src) > largest.bytes) {
		snprintf(largest.name, sizeof(largest.name), "%s", name);
		largest.bytes = strlen(src);
		largest.parse_ns = p;
		largest.best_ns = r;
		largest.median_ns = m;
	}
}

static int bench_file(const char *path, const cJSON *vars)
{
	char *text;
	size_t len;
	cJSON *list, *it;

	if (access(path, R_OK))
		return 77;
	if (o1_file_read(path, 64u << 20, &text, &len))
		return 1;
	list = cJSON_Parse(text);
	if (!cJSON_IsArray(list)) {
		bench(path, text, vars);
	} else {
		cJSON_ArrayForEach(it, list)
		bench(cJSON_GetStringValue(cJSON_GetObjectItem(it, "name")),
		      cJSON_GetStringValue(cJSON_GetObjectItem(it, "template")),
		      vars);
	}
	cJSON_Delete(list);
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 20, i = 1, ret = 0;
	cJSON *vars;

	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--messages"))
			n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--ms"))
			window_ns = atof(argv[i + 1]) * 1e6;
		else
			n = 0;
	}
	if (i >= argc || n < 1 || window_ns < 0) {
		fprintf(stderr, "usage: bench_chat_template [--messages N] "
				"[--ms M] TEMPLATES...\n");
		return 2;
	}
	vars = conversation(n);
	printf("%d messages of %zu bytes, best of repeated runs, one core\n",
	       n, strlen(turn));
	for (; i < argc && !ret; i++)
		ret = bench_file(argv[i], vars);
	if (!ret && largest.bytes)
		printf("largest: %s, %zu bytes: parse %.1f us, render %.1f us "
		       "best, %.1f us median (%d messages, one tool)\n",
		       largest.name, largest.bytes, largest.parse_ns / 1e3,
		       largest.best_ns / 1e3, largest.median_ns / 1e3, n);
	cJSON_Delete(vars);
	return ret;
}

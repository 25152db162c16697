/* The graph_replay fault end to end: a real o1d on the CUDA backend (the
 * tiny model from o1model make, graphs on, buckets 1,2,4,8, [faults]
 * enabled, metrics in shm), o1ctl and libo1client clients.
 *
 * test_graph_replay: greedy probe requests run one at a time give the
 * reference ids (decode steps replayed from bucket 1's graph). Under load
 * (4 client threads of greedy requests), `o1ctl inject graph_replay on`
 * makes the fallbacks rise while the hits stop (admin status, o1ctl status
 * and the metrics all show it); with the load stopped the probes, now run
 * eagerly after each failed replay, give the reference ids again (eager
 * and graph bucket steps are bitwise equal by design). `on 2` fails every
 * other replay (both counters move); `off` brings the hits back, the
 * probes again equal the reference and `o1ctl slo` is back within
 * tolerance of the baseline saved before the fault. Every load request
 * got exactly one FINAL with all its tokens and no error. Only probes run
 * alone are compared: under load a sequence's rows land in mixed prefill
 * steps or other buckets depending on timing, whose products round
 * differently (graph replay does not change that). Probes are shorter
 * than a KV page, so the prefix cache never serves them.
 * test_refused_without_graphs: graphs off on CUDA: graph_replay refused
 * with the reason, status counts no graph step.
 * argv: o1d o1model o1ctl. Exit 77 without a CUDA device. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kernels/cuda_util.h"
#include "tests/daemon/daemon_harness.h"

#define LOAD_THREADS	4
#define PROBES		6
#define PROBE_TOKENS	32
#define RECOVER_WINDOWS 3

static const char *o1d_bin, *o1ctl_bin;

struct graphs {
	double hits, misses, fallbacks;
};

/* "o1ctl ARGS" against D (socket and metrics) with stdout into OUT (may
 * be NULL); its exit code. */
static int o1ctl(const struct daemon_proc *d, const char *args, char *out,
		 size_t cap)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "%s --socket %s --set metrics.mode=shm --set "
		 "metrics.shm_path=%s/m.shm %s",
		 o1ctl_bin, d->socket, d->dir, args);
	return harness_run(cmd, out, cap);
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static cJSON *status(const struct daemon_proc *d)
{
	char buf[16384];
	cJSON *o;

	assert_int_equal(
	    admin_send(d->socket, "{\"op\":\"status\"}", buf, sizeof(buf)), 0);
	o = cJSON_Parse(buf);
	assert_non_null(o);
	return o;
}

/* Admin status's graph counters. */
static struct graphs graphs_now(const struct daemon_proc *d)
{
	cJSON *st = status(d);
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(st, "graphs");
	struct graphs r = {num(g, "hits"), num(g, "misses"),
			   num(g, "fallbacks")};

	cJSON_Delete(st);
	assert_true(r.hits >= 0 && r.misses >= 0 && r.fallbacks >= 0);
	return r;
}

/* The fallbacks summed over the buckets of `o1ctl stats --json`. */
static double metric_fallbacks(const struct daemon_proc *d)
{
	static char out[1 << 17];
	const cJSON *b;
	double sum = 0;
	cJSON *o;

	assert_int_equal(o1ctl(d, "stats --json", out, sizeof(out)), 0);
	o = cJSON_Parse(out);
	assert_non_null(o);
	cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(
				  cJSON_GetObjectItemCaseSensitive(o, "graphs"),
				  "buckets")) sum += num(b, "fallbacks");
	cJSON_Delete(o);
	return sum;
}

/* The metrics' bucket steps (hits, misses and fallbacks summed over the
 * buckets) equal their steps by context span once the daemon is idle: polls
 * `o1ctl stats --json` until they do (the engine publishes after a step),
 * then checks the spans' lengths ascend. */
static void check_span_steps(const struct daemon_proc *d)
{
	static char out[1 << 17];
	double buckets = -1, spans = -2, last_len = 0;
	const cJSON *b;

	for (int i = 0; i < 200 && buckets != spans; i++) {
		cJSON *o, *g;

		if (i)
			usleep(50000);
		assert_int_equal(o1ctl(d, "stats --json", out, sizeof(out)), 0);
		o = cJSON_Parse(out);
		assert_non_null(o);
		g = cJSON_GetObjectItemCaseSensitive(o, "graphs");
		buckets = spans = last_len = 0;
		cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(
					  g, "buckets")) buckets +=
		    num(b, "hits") + num(b, "misses") + num(b, "fallbacks");
		assert_true(num(g, "n_spans") >= 1);
		cJSON_ArrayForEach(b,
				   cJSON_GetObjectItemCaseSensitive(g, "spans"))
		{
			assert_true(num(b, "context_len") > last_len);
			last_len = num(b, "context_len");
			spans += num(b, "steps");
		}
		cJSON_Delete(o);
	}
	fprintf(stderr, "metrics: %.0f bucket steps, %.0f by span\n", buckets,
		spans);
	assert_true(buckets > 0);
	assert_true(buckets == spans);
}

static int inject(const struct daemon_proc *d, const char *what)
{
	char args[128];

	snprintf(args, sizeof(args), "inject %s", what);
	return o1ctl(d, args, NULL, 0);
}

/* Polls admin status until the hits (HITS) or the fallbacks pass ABOVE,
 * up to 10 s; the counters then. */
static struct graphs wait_above(const struct daemon_proc *d, bool hits,
				double above)
{
	struct graphs g = graphs_now(d);

	for (int i = 0; i < 1000 && (hits ? g.hits : g.fallbacks) <= above;
	     i++) {
		usleep(10000);
		g = graphs_now(d);
	}
	if ((hits ? g.hits : g.fallbacks) <= above)
		fail_msg("%s stuck at %.0f", hits ? "hits" : "fallbacks",
			 above);
	return g;
}

/* ---- load: greedy requests on LOAD_THREADS client threads ---- */

struct load;

struct worker {
	struct load *l;
	unsigned id;
};

struct load {
	const char *socket;
	atomic_bool stop;
	atomic_uint sent, ok, bad;
	pthread_t t[LOAD_THREADS];
	struct worker w[LOAD_THREADS];
};

/* Greedy requests until stopped; each must get one FINAL, no error and
 * all its tokens. */
static void *load_main(void *arg)
{
	struct worker *w = arg;
	struct load *l = w->l;
	struct result r;
	struct spec s;

	for (unsigned k = 0; !atomic_load(&l->stop); k++) {
		spec_make(&s, w->id * 1000 + k);
		s.temperature = 0;
		s.ignore_eos = true;
		s.max_tokens = 24;
		atomic_fetch_add(&l->sent, 1);
		if (!spec_run(l->socket, &s, &r) && r.finals == 1 && !r.error &&
		    r.generated == s.max_tokens && r.n_ids == s.max_tokens)
			atomic_fetch_add(&l->ok, 1);
		else
			atomic_fetch_add(&l->bad, 1);
	}
	return NULL;
}

static void load_start(struct load *l, const char *socket)
{
	memset(l, 0, sizeof(*l));
	l->socket = socket;
	for (unsigned i = 0; i < LOAD_THREADS; i++) {
		l->w[i] = (struct worker){.l = l, .id = i};
		assert_int_equal(
		    pthread_create(&l->t[i], NULL, load_main, &l->w[i]), 0);
	}
}

static void load_stop(struct load *l, const struct daemon_proc *d)
{
	struct kv_status kv;

	atomic_store(&l->stop, true);
	for (unsigned i = 0; i < LOAD_THREADS; i++)
		pthread_join(l->t[i], NULL);
	fprintf(stderr, "load: %u sent, %u complete, %u bad\n",
		atomic_load(&l->sent), atomic_load(&l->ok),
		atomic_load(&l->bad));
	assert_int_equal(atomic_load(&l->bad), 0);
	assert_int_equal(atomic_load(&l->ok), atomic_load(&l->sent));
	assert_true(atomic_load(&l->sent) > 0);
	assert_int_equal(admin_wait_idle(d->socket, 10000, &kv), 0);
}

/* ---- probes: greedy, run alone, shorter than a KV page ---- */

static void probe_spec(struct spec *s, unsigned i)
{
	memset(s, 0, sizeof(*s));
	s->n_ids = 3 + i * 2; /* 3 .. 13 < 16 */
	for (uint32_t j = 0; j < s->n_ids; j++)
		s->ids[j] = (i * 131 + j * 29 + 7) % 490;
	s->max_tokens = PROBE_TOKENS;
	s->ignore_eos = true;
}

/* Runs the probes one at a time; with REF, each must equal it. */
static void run_probes(const struct daemon_proc *d, struct result *out,
		       const struct result *ref, const char *what)
{
	struct spec s;
	char label[64];

	for (unsigned i = 0; i < PROBES; i++) {
		probe_spec(&s, i);
		assert_int_equal(spec_run(d->socket, &s, &out[i]), 0);
		assert_int_equal(out[i].finals, 1);
		assert_int_equal(out[i].error, 0);
		assert_int_equal(out[i].n_ids, PROBE_TOKENS);
		snprintf(label, sizeof(label), "%s probe %u", what, i);
		if (ref)
			assert_int_equal(result_same(&out[i], &ref[i], label),
					 0);
	}
}

static void start_cuda(struct daemon_proc *d, bool graphs)
{
	char shm[256];
	const char *sets[] = {"backend.device=cuda:0",
			      graphs ? "graphs.enabled=true"
				     : "graphs.enabled=false",
			      "graphs.buckets=1,2,4,8",
			      "scheduler.max_running=8",
			      "kv.pages=512",
			      "faults.enabled=true",
			      "metrics.enabled=true",
			      "metrics.mode=shm",
			      shm,
			      NULL};
	cJSON *st;

	snprintf(shm, sizeof(shm), "metrics.shm_path=%s/m.shm", d->dir);
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	st = status(d);
	assert_string_equal(
	    cJSON_GetObjectItemCaseSensitive(st, "backend")->valuestring,
	    "cuda");
	assert_true(
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "ready")));
	assert_true(num(st, "graphs_total") == (graphs ? 4 : 0));
	assert_true(num(st, "graphs_captured") == (graphs ? 4 : 0));
	cJSON_Delete(st);
}

/* slo over a window of load (args), its exit code. */
static int slo(const struct daemon_proc *d, const char *args)
{
	char cmd[512], out[8192];

	snprintf(cmd, sizeof(cmd), "slo %s", args);
	return o1ctl(d, cmd, out, sizeof(out));
}

/* The fallbacks on o1ctl status's graphs line; -1 without one. */
static double status_text_fallbacks(const char *out)
{
	const char *line = strstr(out, "graphs:     ");
	double hits, misses, fb;

	if (!line || sscanf(line, "graphs: %lf hits, %lf misses, %lf fallbacks",
			    &hits, &misses, &fb) != 3)
		return -1;
	return fb;
}

/* The fallbacks column of `o1ctl stats`'s graph table, summed. */
static double stats_text_fallbacks(const struct daemon_proc *d)
{
	static char out[1 << 16];
	double batch, hits, misses, fb, padded, sum = 0;
	const char *p;

	assert_int_equal(o1ctl(d, "stats", out, sizeof(out)), 0);
	p = strstr(out, "fallbacks");
	assert_non_null(p);
	for (p = strchr(p, '\n');
	     p && sscanf(p + 1, "%lf %lf %lf %lf %lf", &batch, &hits, &misses,
			 &fb, &padded) == 5;
	     p = strchr(p + 1, '\n'))
		sum += fb;
	return sum;
}

/* On under load: fallbacks rise, hits stop; every view shows it. */
static void fault_on(const struct daemon_proc *d, struct graphs g0)
{
	struct graphs g1, g2;
	char out[4096];

	assert_int_equal(inject(d, "graph_replay on"), 0);
	wait_above(d, false, g0.fallbacks);
	usleep(200000); /* a step in flight at the switch may still replay */
	g1 = graphs_now(d);
	sleep(1);
	g2 = graphs_now(d);
	fprintf(stderr,
		"fault on, 1 s of load: hits %.0f -> %.0f, "
		"fallbacks %.0f -> %.0f\n",
		g1.hits, g2.hits, g1.fallbacks, g2.fallbacks);
	assert_true(g2.hits == g1.hits);
	assert_true(g2.fallbacks > g1.fallbacks + 10);
	assert_true(g2.misses == g0.misses);
	assert_true(metric_fallbacks(d) > 0);
	assert_int_equal(o1ctl(d, "status", out, sizeof(out)), 0);
	assert_true(status_text_fallbacks(out) >= g2.fallbacks);
	assert_true(stats_text_fallbacks(d) > 0);
}

/* on 2 under load: every other replay fails, both counters move. */
static void fault_every_other(const struct daemon_proc *d)
{
	struct graphs g1, g2;
	cJSON *st;

	assert_int_equal(inject(d, "graph_replay on 2"), 0);
	usleep(200000);
	g1 = graphs_now(d);
	sleep(1);
	g2 = graphs_now(d);
	fprintf(stderr, "every 2nd replay fails: +%.0f hits, +%.0f fallbacks\n",
		g2.hits - g1.hits, g2.fallbacks - g1.fallbacks);
	assert_true(g2.hits > g1.hits + 5);
	assert_true(g2.fallbacks > g1.fallbacks + 5);
	st = status(d);
	assert_true(
	    num(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(st, "faults"), "on"),
		"graph_replay") == 2);
	cJSON_Delete(st);
}

/* Off under load: hits rise again, no more fallbacks. */
static void fault_off(const struct daemon_proc *d)
{
	struct graphs g1, g2;

	assert_int_equal(inject(d, "graph_replay off"), 0);
	usleep(200000);
	g1 = graphs_now(d);
	sleep(1);
	g2 = graphs_now(d);
	fprintf(stderr, "fault off: +%.0f hits, +%.0f fallbacks\n",
		g2.hits - g1.hits, g2.fallbacks - g1.fallbacks);
	assert_true(g2.hits > g1.hits + 10);
	assert_true(g2.fallbacks == g1.fallbacks);
}

static void test_graph_replay(void **state)
{
	static struct result ref[PROBES], got[PROBES];
	struct daemon_proc *d = *state;
	char base[256], check[256];
	struct graphs g0, g1, g2;
	struct load l;
	unsigned win;

	start_cuda(d, true);
	g0 = graphs_now(d);
	run_probes(d, ref, NULL, "reference");
	g1 = graphs_now(d);
	assert_true(g1.hits >= g0.hits + PROBES * (PROBE_TOKENS - 1));
	assert_true(g1.fallbacks == 0);

	load_start(&l, d->socket);
	wait_above(d, true, g1.hits + 50);
	snprintf(base, sizeof(base), "--window 2 --save %s/gbase.json", d->dir);
	assert_int_equal(slo(d, base), 0);
	fault_on(d, graphs_now(d));
	load_stop(&l, d);

	g1 = graphs_now(d);
	run_probes(d, got, ref, "fault on");
	g2 = graphs_now(d);
	assert_true(g2.hits == g1.hits);
	assert_true(g2.fallbacks >= g1.fallbacks + PROBES * (PROBE_TOKENS - 1));

	load_start(&l, d->socket);
	fault_every_other(d);
	fault_off(d);
	snprintf(check, sizeof(check),
		 "--window 2 --baseline %s/gbase.json --tolerance 400", d->dir);
	for (win = 1; win <= RECOVER_WINDOWS; win++)
		if (!slo(d, check))
			break;
	fprintf(stderr, "slo back at baseline after %u window(s)\n", win);
	assert_true(win <= RECOVER_WINDOWS);
	load_stop(&l, d);

	g1 = graphs_now(d);
	run_probes(d, got, ref, "fault off");
	g2 = graphs_now(d);
	assert_true(g2.fallbacks == g1.fallbacks);
	assert_true(g2.hits >= g1.hits + PROBES * (PROBE_TOKENS - 1));
	check_span_steps(d);
	assert_int_equal(daemon_stop(d), 0);
}

static void test_refused_without_graphs(void **state)
{
	struct daemon_proc *d = *state;
	static struct result r[PROBES];
	char out[4096];
	struct graphs g;

	start_cuda(d, false);
	assert_int_equal(
	    o1ctl(d, "inject graph_replay on 2>&1", out, sizeof(out)), 1);
	assert_non_null(
	    strstr(out, "graph_replay needs the CUDA backend with graphs"));
	run_probes(d, r, NULL, "graphs off");
	g = graphs_now(d);
	assert_true(g.hits == 0 && g.misses == 0 && g.fallbacks == 0);
	assert_int_equal(daemon_stop(d), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_graph_replay, harness_stop),
	    cmocka_unit_test_teardown(test_refused_without_graphs,
				      harness_stop),
	};

	if (argc < 4) {
		fprintf(stderr, "usage: %s O1D O1MODEL O1CTL\n", argv[0]);
		return 2;
	}
	o1d_bin = argv[1];
	harness_o1model = argv[2];
	o1ctl_bin = argv[3];
	if (o1_cuda_probe() != 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}

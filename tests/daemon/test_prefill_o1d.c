/* Chunked prefill end to end: o1d on the CPU backend with the tiny model,
 * four streams generating on one connection when two long prompts (300 and
 * 700 tokens) arrive mid-stream. With scheduler.prefill_chunk_tokens 7
 * and no per-row allowance (odd, so chunks end anywhere in a 16-token
 * page) each long prompt is prefilled over many steps beside the
 * streams' decode rows; every request's ids must equal `o1model run`'s
 * (which prefills in one step up to 512 tokens), and the streams must
 * keep getting tokens while the long prompts prefill. Then a third
 * prompt sharing 320 tokens with the 700-token one: its cached pages are
 * skipped, the rest chunked, its ids exact too. The same run again on a
 * pool too small for everything (preemption by recompute while prompts
 * are half prefilled), with the default 2 tokens per decode row (8 a
 * step beside the four streams).
 * argv: o1d o1model */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_harness.h"
#include "o1/client.h"

#define N_STREAMS  4
#define N_LONG	   3
#define N_REQS	   (N_STREAMS + N_LONG)
#define LONG_MAX   700
#define STREAM_GEN 200
#define LONG_GEN   12
#define VOCAB_USED 490 /* ids below the tiny model's vocabulary */

static const char *o1d_bin, *o1model_bin;

/* One request: its prompt, sampling and o1model run's ids. */
struct req {
	uint32_t ids[LONG_MAX];
	uint32_t n_ids, max_tokens, top_k;
	float temperature;
	uint64_t seed;
	struct result ref;
};

static struct req reqs[N_REQS];
static struct daemon_proc dp;

/* o1model run's ids for R into R->ref (stops at EOS, as o1d does). */
static int reference(const char *model, struct req *r)
{
	size_t cap = 512 + (size_t)r->n_ids * 8;
	char *cmd = malloc(cap), *p = cmd, line[8192];
	FILE *f;
	uint32_t n = 0;
	int ok;

	if (!cmd)
		return -1;
	p += sprintf(p,
		     "%s run %s --ids-only --threads 2 --max-tokens %u "
		     "--temperature %g --top-k %u --seed %llu --ids \"",
		     o1model_bin, model, r->max_tokens, r->temperature,
		     r->top_k, (unsigned long long)r->seed);
	for (uint32_t i = 0; i < r->n_ids; i++)
		p += sprintf(p, "%s%u", i ? " " : "", r->ids[i]);
	sprintf(p, "\" 2>/dev/null");
	f = popen(cmd, "r");
	free(cmd);
	ok = f && fgets(line, sizeof(line), f);
	for (char *t = ok ? strtok(line, " \n") : NULL; t && n < SPEC_GEN_MAX;
	     t = strtok(NULL, " \n"))
		r->ref.ids[n++] = (uint32_t)strtoul(t, NULL, 10);
	r->ref.n_ids = n;
	return f && pclose(f) == 0 && ok ? 0 : -1;
}

/* Stream candidate I: a short prompt, greedy or seeded sampling. */
static void make_stream(struct req *r, uint32_t i)
{
	memset(r, 0, sizeof(*r));
	r->n_ids = 3 + i % 5;
	for (uint32_t j = 0; j < r->n_ids; j++)
		r->ids[j] = (i * 37 + j * 11 + 5) % VOCAB_USED;
	r->max_tokens = STREAM_GEN;
	r->temperature = i % 2 ? 0.8f : 0.0f;
	r->top_k = i % 2 ? 40 : 0;
	r->seed = 77 + i;
}

/* Long prompt K: N ids, the first SHARED the same for every K. */
static void make_long(struct req *r, uint32_t k, uint32_t n, uint32_t shared)
{
	memset(r, 0, sizeof(*r));
	r->n_ids = n;
	for (uint32_t j = 0; j < n; j++)
		r->ids[j] = j < shared ? (j * 7 + 3) % VOCAB_USED
				       : (j * 13 + k * 101 + 1) % VOCAB_USED;
	r->max_tokens = LONG_GEN;
	r->temperature = k == 1 ? 0.7f : 0.0f;
	r->seed = 900 + k;
}

/* The tiny model, the streams (the first candidates whose reference runs
 * its full length, so they are still generating when the long prompts
 * come) and the long prompts, with their references. */
static int setup(void **state)
{
	uint32_t n = 0;

	if (harness_init(&dp, o1model_bin))
		return -1;
	for (uint32_t i = 0; n < N_STREAMS && i < 64; i++) {
		make_stream(&reqs[n], i);
		if (reference(dp.model, &reqs[n]))
			return -1;
		n += reqs[n].ref.n_ids == STREAM_GEN;
	}
	if (n < N_STREAMS)
		return -1;
	make_long(&reqs[N_STREAMS], 0, 300, 0);
	make_long(&reqs[N_STREAMS + 1], 1, 700, 320);
	make_long(&reqs[N_STREAMS + 2], 2, 500, 320);
	for (uint32_t k = 0; k < N_LONG; k++)
		if (reference(dp.model, &reqs[N_STREAMS + k]))
			return -1;
	*state = &dp;
	return 0;
}

static int teardown(void **state)
{
	harness_fini(*state);
	return 0;
}

static int submit(struct o1_client *c, uint32_t k)
{
	const struct req *r = &reqs[k];
	struct o1_sampling smp = {.sz = sizeof(smp),
				  .temperature = r->temperature,
				  .top_k = r->top_k,
				  .top_p = 1.0f,
				  .seed = r->seed};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = k,
				    .ids = r->ids,
				    .n_ids = r->n_ids,
				    .sampling = &smp,
				    .max_tokens = r->max_tokens};

	return o1_client_submit(c, &so);
}

/* What the run saw: each request's events, and the streams' token
 * counts when the long prompts were submitted and when the first of them
 * got its first token. */
struct run {
	struct result res[N_REQS];
	uint32_t at_submit[N_STREAMS], at_first[N_STREAMS];
	bool long_sent, long_started;
};

static void on_event(struct o1_client *c, struct run *run,
		     const struct o1_event *ev)
{
	assert_true(ev->req_id < N_REQS);
	result_add_event(&run->res[ev->req_id], ev);
	if (!run->long_sent) {
		bool all = true;

		for (uint32_t k = 0; k < N_STREAMS; k++)
			all &= run->res[k].n_ids >= 10;
		if (!all)
			return;
		for (uint32_t k = 0; k < N_STREAMS; k++)
			run->at_submit[k] = run->res[k].n_ids;
		for (uint32_t k = 0; k < 2; k++)
			assert_int_equal(submit(c, N_STREAMS + k), 0);
		run->long_sent = true;
	} else if (!run->long_started && ev->type == O1_EVENT_TOKEN &&
		   ev->req_id >= N_STREAMS) {
		for (uint32_t k = 0; k < N_STREAMS; k++)
			run->at_first[k] = run->res[k].n_ids;
		run->long_started = true;
	}
}

/* The streams, then the first two long prompts mid-stream, all on one
 * connection; every request exact, and the streams went on generating
 * while the long prompts prefilled (300 tokens at 7 or 8 a step: over 37
 * steps, one token each, however slow the reader). */
static void run_mid_stream(struct daemon_proc *d)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = d->socket};
	struct o1_client *c;
	struct o1_event ev;
	struct run *run = calloc(1, sizeof(*run));
	uint32_t finals = 0;
	char what[32];

	assert_non_null(run);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	for (uint32_t k = 0; k < N_STREAMS; k++)
		assert_int_equal(submit(c, k), 0);
	while (finals < N_STREAMS + 2) {
		assert_int_equal(o1_client_wait(c, &ev, 60000000000ll), 1);
		finals += ev.type == O1_EVENT_FINAL;
		on_event(c, run, &ev);
	}
	o1_client_close(c);
	for (uint32_t k = 0; k < N_STREAMS + 2; k++) {
		snprintf(what, sizeof(what), "request %u", k);
		assert_int_equal(result_same(&run->res[k], &reqs[k].ref, what),
				 0);
	}
	assert_true(run->long_started);
	for (uint32_t k = 0; k < N_STREAMS; k++)
		assert_true(run->at_first[k] >= run->at_submit[k] + 20 ||
			    run->at_first[k] == STREAM_GEN);
	free(run);
}

/* One request alone on its own connection; exact. */
static void run_one(struct daemon_proc *d, uint32_t k)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = d->socket};
	struct o1_client *c;
	struct o1_event ev;
	struct result r = {0};

	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(submit(c, k), 0);
	while (!r.finals) {
		assert_int_equal(o1_client_wait(c, &ev, 60000000000ll), 1);
		result_add_event(&r, &ev);
	}
	o1_client_close(c);
	assert_int_equal(result_same(&r, &reqs[k].ref, "shared prefix"), 0);
}

static void test_chunked_mid_stream(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"scheduler.prefill_chunk_tokens=7",
			      "scheduler.prefill_tokens_per_decode=0",
			      "scheduler.max_batch_tokens=64", NULL};
	struct kv_status a, b;

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	run_mid_stream(d);
	assert_int_equal(admin_wait_idle(d->socket, 10000, &a), 0);
	/* 500 tokens, the first 320 (20 pages) cached by the 700 */
	run_one(d, N_STREAMS + 2);
	assert_int_equal(admin_wait_idle(d->socket, 10000, &b), 0);
	assert_int_equal(b.prefix_hits - a.prefix_hits, 20);
	assert_int_equal(daemon_stop(d), 0);
}

/* 70 pages of 16 tokens for about 140 pages of work: streams and half
 * prefilled prompts are preempted and recomputed, still exact. */
static void test_chunked_preempted(void **state)
{
	struct daemon_proc *d = *state;
	const char *sets[] = {"scheduler.prefill_chunk_tokens=7",
			      "scheduler.max_batch_tokens=64",
			      "kv.pages=70",
			      "kv.page_tokens=16",
			      "model.max_context_tokens=1024",
			      NULL};
	struct kv_status st;

	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	run_mid_stream(d);
	assert_int_equal(admin_wait_idle(d->socket, 10000, &st), 0);
	assert_true(st.preemptions > 0);
	assert_int_equal(daemon_stop(d), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_chunked_mid_stream, harness_stop),
	    cmocka_unit_test_teardown(test_chunked_preempted, harness_stop),
	};

	if (argc < 3) {
		fprintf(stderr, "usage: test_prefill_o1d O1D O1MODEL\n");
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* o1d self-refinement and token confidence end to end on the CPU backend:
 * a real daemon, the tiny random model (ChatML) and a bigram demo model,
 * both made by o1model at test time.
 *
 * What is checked, independently of the daemon's code:
 * - each round's prompt is the chat template applied to the conversation,
 *   the previous round's answer (assistant) and the shipped review text
 *   (user): the test renders and tokenizes it itself; the token count
 *   equals the daemon's, and the logits of exactly those ids (o1model run
 *   --dump-logits) give every streamed token's logprob and entropy and
 *   each round's summary (so a different prompt could not pass);
 * - the prefix cache serves each round the longest page-aligned prefix
 *   shared with an earlier round's KV (recomputed here), summed in the
 *   FINAL and no more than the admin prefix-hit counter;
 * - the loop stops on every asked round, on a repeated answer, on the
 *   confidence threshold, and on cancel (one FINAL in every case); drain
 *   refuses refinement requests; refine_steps above the config bound and
 *   without a chat prompt are refused.
 * argv: o1d o1model */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer/chat_template.h"
#include "common/error.h"
#include "daemon_harness.h"
#include "model/model.h"
#include "o1/client.h"
#include "tokenizer/tokenizer.h"

#define MAX_ROUNDS O1_REFINE_MAX_ROUNDS
#define GEN_MAX	   64
#define IDS_MAX	   1024
#define PAGE	   16
#define TOL	   2e-3f

static const char *o1d_bin, *o1model_bin;
static const char conv[] = "system\0Be brief.\0user\0What is two plus two?";
static const char demo_text[] =
    "Two plus two is four.\n\nThe answer is four.\n\n"
    "Four is the sum of two and two.\n";

struct round_rec {
	uint32_t ids[GEN_MAX];
	float lp[GEN_MAX], ent[GEN_MAX];
	uint32_t n;
	bool reported;
	struct o1_event ev; /* its ROUND */
};

struct run {
	struct round_rec r[MAX_ROUNDS];
	uint32_t n_rounds; /* rounds with a TOKEN or a ROUND */
	struct o1_trace trace;
	struct o1_event final;
	int finals, after_final;
	bool bad_order, bad_conf;
};

struct fixture {
	struct daemon_proc d;
	char demo[160];
	char review[1024];
};

static struct fixture fx;

/* ---- the daemon side ---- */

static void on_token(struct run *out, const struct o1_event *ev)
{
	struct round_rec *rr;

	if (ev->round >= MAX_ROUNDS || ev->round + 1 < out->n_rounds ||
	    ev->round > out->n_rounds) {
		out->bad_order = true;
		return;
	}
	if (ev->round == out->n_rounds)
		out->n_rounds++;
	rr = &out->r[ev->round];
	if (rr->reported)
		out->bad_order = true;
	if (!ev->n_ids)
		return;
	if (ev->has_logprobs != (O1_TOKEN_HAS_LOGPROB | O1_TOKEN_HAS_ENTROPY))
		out->bad_conf = true;
	if (rr->n < GEN_MAX) {
		rr->ids[rr->n] = ev->ids[0];
		rr->lp[rr->n] = ev->logprobs[0];
		rr->ent[rr->n++] = ev->entropy;
	}
}

static void on_round(struct run *out, const struct o1_event *ev)
{
	if (ev->round >= MAX_ROUNDS || ev->round + 1 < out->n_rounds ||
	    ev->round > out->n_rounds || out->r[ev->round].reported) {
		out->bad_order = true;
		return;
	}
	if (ev->round == out->n_rounds)
		out->n_rounds++;
	out->r[ev->round].reported = true;
	out->r[ev->round].ev = *ev;
}

static void take(struct run *out, const struct o1_event *ev)
{
	if (out->finals) {
		out->after_final++;
		return;
	}
	if (o1_trace_add(&out->trace, ev))
		out->bad_order = true;
	if (ev->type == O1_EVENT_TOKEN)
		on_token(out, ev);
	else if (ev->type == O1_EVENT_ROUND)
		on_round(out, ev);
	else if (ev->type == O1_EVENT_FINAL) {
		out->final = *ev;
		out->finals++;
	}
}

/* One chat request with refine_steps STEPS; cancelled once the ROUND of
 * round CANCEL_AT arrived (-1: never). */
static void run_refine(const char *socket, uint32_t steps, uint32_t max_tokens,
		       uint32_t flags, int cancel_at, struct run *out)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = socket};
	struct o1_submit_opts so = {
	    .sz = sizeof(so),
	    .req_id = 42,
	    .text = conv,
	    .text_len = sizeof(conv) - 1,
	    .max_tokens = max_tokens,
	    .flags = O1_FLAG_CHAT | O1_FLAG_CONFIDENCE | flags,
	    .refine_steps = steps,
	};
	struct o1_client *c;
	struct o1_event ev;

	memset(out, 0, sizeof(*out));
	o1_trace_init(&out->trace);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	while (!out->finals) {
		assert_int_equal(o1_client_wait(c, &ev, 60000000000ll), 1);
		take(out, &ev);
		if (ev.type == O1_EVENT_ROUND && (int)ev.round == cancel_at)
			assert_int_equal(o1_client_cancel(c, 42), 0);
	}
	for (int i = 0; i < 20; i++) {
		if (o1_client_poll(c, &ev) == 1)
			take(out, &ev);
		usleep(1000);
	}
	o1_client_close(c);
	assert_false(out->bad_order);
	assert_false(out->bad_conf);
	assert_int_equal(out->finals, 1);
	assert_int_equal(out->after_final, 0);
	assert_true(out->trace.done);
}

/* ---- the independent side ---- */

struct ref_model {
	struct o1_model *m;
	struct o1_tokenizer *t;
	struct o1_chat_template *ct;
};

static void ref_open(const char *path, struct ref_model *rm)
{
	assert_int_equal(o1_model_open(path, &rm->m), 0);
	assert_int_equal(o1_tokenizer_create(rm->m->vocab, &rm->t), 0);
	assert_int_equal(
	    o1_chat_template_load(rm->m->vocab, path, NULL, &rm->ct), 0);
}

static void ref_close(struct ref_model *rm)
{
	o1_chat_template_destroy(rm->ct);
	o1_tokenizer_destroy(rm->t);
	o1_model_close(rm->m);
}

/* The prompt of round R: conv, then (R > 0) PREV as the assistant's turn
 * and the review as the user's; rendered and tokenized as a chat. */
static uint32_t round_prompt(struct ref_model *rm, const char *prev,
			     int32_t *ids)
{
	struct o1_chat_message msg[4] = {{"system", "Be brief."},
					 {"user", "What is two plus two?"},
					 {"assistant", prev},
					 {"user", fx.review}};
	static char buf[16384];
	int len, n;

	len = o1_chat_template_render(rm->ct, msg, prev ? 4 : 2, true, buf,
				      sizeof(buf), NULL);
	assert_true(len > 0 && len < (int)sizeof(buf));
	n = o1_tokenizer_encode(rm->t, buf, (size_t)len,
				O1_ENCODE_PARSE_SPECIAL, ids,
				IDS_MAX - GEN_MAX);
	assert_true(n > 0);
	return (uint32_t)n;
}

/* Logits of every position of IDS (o1model run --dump-logits). */
static float *ref_logits(const char *model, const int32_t *ids, uint32_t n,
			 uint32_t vocab)
{
	static char cmd[16384];
	char path[128];
	char *p = cmd;
	float *l = malloc((size_t)n * vocab * sizeof(float));
	FILE *f;

	snprintf(path, sizeof(path), "%s/logits.bin", fx.d.dir);
	p += sprintf(p,
		     "%s run %s --ids-only --threads 2 --max-tokens 0 "
		     "--dump-logits %s --ids \"",
		     o1model_bin, model, path);
	for (uint32_t i = 0; i < n; i++)
		p += sprintf(p, "%s%d", i ? " " : "", ids[i]);
	sprintf(p, "\" >/dev/null 2>&1");
	assert_non_null(l);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(l, sizeof(float), (size_t)n * vocab, f),
			 (size_t)n * vocab);
	fclose(f);
	return l;
}

/* log-softmax at ID and entropy of one row of logits. */
static void row_conf(const float *row, uint32_t vocab, uint32_t id, float *lp,
		     float *ent)
{
	double mx = row[0], sum = 0, h = 0, lse;

	for (uint32_t i = 1; i < vocab; i++)
		mx = row[i] > mx ? row[i] : mx;
	for (uint32_t i = 0; i < vocab; i++)
		sum += exp(row[i] - mx);
	lse = mx + log(sum);
	for (uint32_t i = 0; i < vocab; i++) {
		double l = row[i] - lse;

		h -= exp(l) * l;
	}
	*lp = (float)(row[id] - lse);
	*ent = (float)h;
}

/* Round RR's streamed confidence and its summary against the logits of
 * PROMPT + its tokens. */
static void check_conf(const char *model, struct ref_model *rm,
		       const int32_t *prompt, uint32_t n_prompt,
		       const struct round_rec *rr)
{
	static int32_t ids[IDS_MAX];
	uint32_t vocab = rm->m->desc.vocab_size, n = n_prompt + rr->n - 1;
	double sum_lp = 0, sum_ent = 0;
	float min_lp = 0, lp, ent;
	float *l;

	assert_true(rr->n >= 1);
	memcpy(ids, prompt, n_prompt * sizeof(int32_t));
	for (uint32_t k = 0; k + 1 < rr->n; k++)
		ids[n_prompt + k] = (int32_t)rr->ids[k];
	l = ref_logits(model, ids, n, vocab);
	for (uint32_t k = 0; k < rr->n; k++) {
		row_conf(l + (size_t)(n_prompt - 1 + k) * vocab, vocab,
			 rr->ids[k], &lp, &ent);
		if (fabsf(lp - rr->lp[k]) > TOL ||
		    fabsf(ent - rr->ent[k]) > TOL)
			fail_msg(
			    "round %u token %u (id %u): logprob %g entropy "
			    "%g, recomputed %g %g",
			    rr->ev.round, k, rr->ids[k], rr->lp[k], rr->ent[k],
			    lp, ent);
		sum_lp += lp;
		sum_ent += ent;
		min_lp = k == 0 || lp < min_lp ? lp : min_lp;
	}
	free(l);
	assert_int_equal(rr->ev.generated_tokens, rr->n);
	assert_true(fabsf(rr->ev.mean_logprob - (float)(sum_lp / rr->n)) < TOL);
	assert_true(fabsf(rr->ev.min_logprob - min_lp) < TOL);
	assert_true(fabsf(rr->ev.mean_entropy - (float)(sum_ent / rr->n)) <
		    TOL);
}

static uint32_t common_prefix(const int32_t *a, uint32_t na, const int32_t *b,
			      uint32_t nb)
{
	uint32_t i = 0;

	while (i < na && i < nb && a[i] == b[i])
		i++;
	return i;
}

/* Checks every round of RUN on MODEL: prompts, confidence, prefix reuse;
 * returns the sum of the cached tokens. */
static uint32_t check_rounds(const char *model, const struct run *run)
{
	static int32_t seqs[MAX_ROUNDS][IDS_MAX];
	uint32_t lens[MAX_ROUNDS], sum_prompt = 0, sum_gen = 0, sum_cached = 0;
	struct ref_model rm;

	ref_open(model, &rm);
	for (uint32_t r = 0; r < run->n_rounds; r++) {
		const struct round_rec *rr = &run->r[r];
		const char *prev = r ? run->trace.rounds[r - 1].text : NULL;
		uint32_t n, best = 0;

		assert_true(rr->reported);
		n = round_prompt(&rm, r ? (prev ? prev : "") : NULL, seqs[r]);
		assert_int_equal(rr->ev.prompt_tokens, n);
		check_conf(model, &rm, seqs[r], n, rr);
		for (uint32_t p = 0; p < r; p++) {
			uint32_t c =
			    common_prefix(seqs[p], lens[p], seqs[r], n);

			best = c > best ? c : best;
		}
		if (best > n - 1)
			best = n - 1;
		assert_int_equal(rr->ev.cached_tokens, best / PAGE * PAGE);
		for (uint32_t k = 0; k < rr->n; k++)
			seqs[r][n + k] = (int32_t)rr->ids[k];
		lens[r] = n + rr->n - 1; /* the last token was never computed */
		sum_prompt += n;
		sum_gen += rr->n;
		sum_cached += rr->ev.cached_tokens;
		assert_int_equal(run->trace.rounds[r].text_len,
				 rr->ev.text_bytes);
	}
	ref_close(&rm);
	assert_int_equal(run->final.rounds, run->n_rounds);
	assert_int_equal(run->final.prompt_tokens, sum_prompt);
	assert_int_equal(run->final.generated_tokens, sum_gen);
	assert_int_equal(run->final.cached_tokens, sum_cached);
	return sum_cached;
}

/* The answers of consecutive rounds differ, except (REPEAT) the last. */
static void check_stop_rule(const struct run *run)
{
	const struct o1_trace *t = &run->trace;
	uint32_t last = run->n_rounds - 1;

	for (uint32_t r = 1; r < run->n_rounds; r++) {
		bool same =
		    t->rounds[r].text_len == t->rounds[r - 1].text_len &&
		    (!t->rounds[r].text_len ||
		     !memcmp(t->rounds[r].text, t->rounds[r - 1].text,
			     t->rounds[r].text_len));

		assert_int_equal(same,
				 r == last && t->stop == O1_REFINE_STOP_REPEAT);
	}
	for (uint32_t r = 0; r < last; r++)
		assert_int_equal(run->r[r].ev.refine_stop, O1_REFINE_STOP_NONE);
	assert_int_equal(run->r[last].ev.refine_stop, t->stop);
	assert_int_equal(run->final.refine_stop, t->stop);
}

/* ---- tests ---- */

/* Admin status number KEY. */
static double status_num(const char *key)
{
	char buf[8192];
	cJSON *o, *v;
	double x;

	assert_int_equal(
	    admin_send(fx.d.socket, "{\"op\":\"status\"}", buf, sizeof(buf)),
	    0);
	o = cJSON_Parse(buf);
	v = cJSON_GetObjectItemCaseSensitive(o, key);
	assert_true(cJSON_IsNumber(v));
	x = v->valuedouble;
	cJSON_Delete(o);
	return x;
}

static void start(const char *model, const char *threshold,
		  const char *max_steps)
{
	char s1[96], s2[96], s3[256], s4[200];
	const char *sets[] = {s1, s2, s3, "kv.page_tokens=16", s4, NULL};

	snprintf(s1, sizeof(s1), "refine.confidence_threshold=%s", threshold);
	snprintf(s2, sizeof(s2), "refine.max_steps=%s", max_steps);
	snprintf(s3, sizeof(s3),
		 "refine.review_template=" O1_SOURCE_DIR
		 "/config/refine_review.txt");
	snprintf(s4, sizeof(s4), "model.path=%s", model);
	assert_int_equal(daemon_start(&fx.d, o1d_bin, sets), 0);
}

static void expect_idle(void)
{
	struct kv_status st;

	assert_int_equal(admin_wait_idle(fx.d.socket, 5000, &st), 0);
	assert_int_equal(st.pages_free + st.pages_cached, st.pages_total);
}

/* Three asked rounds on the random model: every round runs (or the loop
 * stops on a repeat), each checked against the reference. */
static void test_rounds(void **state)
{
	struct kv_status st;
	static struct run run, again;
	uint32_t cached;

	(void)state;
	start(fx.d.model, "0", "3");
	run_refine(fx.d.socket, 3, 12, O1_FLAG_IGNORE_EOS, -1, &run);
	assert_int_equal(run.final.finish, O1_FINISH_REASON_LENGTH);
	assert_true(run.trace.stop == O1_REFINE_STOP_STEPS ||
		    run.trace.stop == O1_REFINE_STOP_REPEAT);
	if (run.trace.stop == O1_REFINE_STOP_STEPS)
		assert_int_equal(run.n_rounds, 4);
	check_stop_rule(&run);
	cached = check_rounds(fx.d.model, &run);
	assert_true(cached >= PAGE * (run.n_rounds - 1));
	assert_int_equal(admin_status(fx.d.socket, &st), 0);
	assert_true(st.prefix_hits * PAGE >= cached);
	assert_true(status_num("refine_rounds") == run.n_rounds - 1);
	assert_true(status_num("refine_cached_tokens") ==
		    cached - run.r[0].ev.cached_tokens);
	/* again: round 0 now finds the first run's pages, which count as
	 * cached for the request but not as saved by refinement */
	run_refine(fx.d.socket, 3, 12, O1_FLAG_IGNORE_EOS, -1, &again);
	assert_true(again.r[0].ev.cached_tokens > 0);
	assert_int_equal(again.n_rounds, run.n_rounds);
	assert_true(status_num("refine_rounds") == 2 * (run.n_rounds - 1));
	assert_true(status_num("refine_cached_tokens") ==
		    cached - run.r[0].ev.cached_tokens +
			again.final.cached_tokens -
			again.r[0].ev.cached_tokens);
	o1_trace_free(&again.trace);
	assert_true(fabsf(run.final.mean_logprob -
			  run.r[run.n_rounds - 1].ev.mean_logprob) < 1e-6f);
	assert_int_equal(run.final.conf_tokens, run.r[run.n_rounds - 1].n);
	o1_trace_free(&run.trace);
	expect_idle();
	assert_int_equal(daemon_stop(&fx.d), 0);
}

/* The bigram model answers the same whatever precedes "assistant\n":
 * round 1 repeats round 0 and ends the loop. */
static void test_repeat(void **state)
{
	struct run run;

	(void)state;
	start(fx.demo, "0", "4");
	run_refine(fx.d.socket, 4, 16, 0, -1, &run);
	assert_int_equal(run.n_rounds, 2);
	assert_int_equal(run.trace.stop, O1_REFINE_STOP_REPEAT);
	check_stop_rule(&run);
	check_rounds(fx.demo, &run);
	assert_true(run.trace.rounds[0].text_len > 0);
	o1_trace_free(&run.trace);
	expect_idle();
	assert_int_equal(daemon_stop(&fx.d), 0);
}

/* A threshold every answer passes: the first answer ends the loop. */
static void test_confident(void **state)
{
	struct run run;

	(void)state;
	start(fx.d.model, "-100", "4");
	run_refine(fx.d.socket, 4, 6, O1_FLAG_IGNORE_EOS, -1, &run);
	assert_int_equal(run.n_rounds, 1);
	assert_int_equal(run.final.rounds, 1);
	assert_int_equal(run.trace.stop, O1_REFINE_STOP_CONFIDENT);
	check_rounds(fx.d.model, &run);
	o1_trace_free(&run.trace);
	expect_idle();
	assert_int_equal(daemon_stop(&fx.d), 0);
}

/* A client that goes away during round 1: the daemon frees the request
 * (checked by the caller: idle, every page free or cached). */
static void hang_up_mid_refinement(void)
{
	struct o1_client_opts co = {.sz = sizeof(co),
				    .socket_path = fx.d.socket};
	struct o1_submit_opts so = {
	    .sz = sizeof(so),
	    .req_id = 9,
	    .text = conv,
	    .text_len = sizeof(conv) - 1,
	    .max_tokens = 200,
	    .flags = O1_FLAG_CHAT | O1_FLAG_IGNORE_EOS,
	    .refine_steps = 4,
	};
	struct o1_client *c;
	struct o1_event ev;

	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	do
		assert_int_equal(o1_client_wait(c, &ev, 60000000000ll), 1);
	while (ev.type != O1_EVENT_ROUND);
	o1_client_close(c);
}

/* Cancel during round 1: its ROUND says CANCELLED, one FINAL. */
static void test_cancel(void **state)
{
	struct run run;

	(void)state;
	start(fx.d.model, "0", "4");
	run_refine(fx.d.socket, 4, 200, O1_FLAG_IGNORE_EOS, 0, &run);
	assert_int_equal(run.final.finish, O1_FINISH_REASON_CANCELLED);
	assert_int_equal(run.trace.stop, O1_REFINE_STOP_CANCELLED);
	assert_int_equal(run.n_rounds, 2);
	assert_true(run.r[1].reported);
	assert_int_equal(run.r[1].ev.refine_stop, O1_REFINE_STOP_CANCELLED);
	assert_int_equal(run.final.rounds, 2);
	assert_true(run.r[1].n < 200);
	o1_trace_free(&run.trace);
	expect_idle();
	hang_up_mid_refinement();
	expect_idle();
	assert_int_equal(daemon_stop(&fx.d), 0);
}

/* Refused: above refine.max_steps, while draining; the decoder refuses
 * refine_steps without a chat prompt (the client sees a FINAL or an
 * ERROR, never a ROUND). */
static void test_refused(void **state)
{
	struct o1_client_opts co = {.sz = sizeof(co)};
	struct o1_submit_opts so = {.sz = sizeof(so),
				    .req_id = 5,
				    .text = "hello",
				    .text_len = 5,
				    .max_tokens = 4,
				    .refine_steps = 1};
	struct o1_client *c;
	struct o1_event ev;
	char buf[1024];
	struct run run;

	(void)state;
	start(fx.d.model, "0", "2");
	run_refine(fx.d.socket, 3, 4, 0, -1, &run);
	assert_int_equal(run.final.finish, O1_FINISH_REASON_ERROR);
	assert_int_equal(run.final.error, -O1_E_BOUNDS);
	assert_int_equal(run.n_rounds, 0);
	assert_int_equal(run.final.rounds, 0);
	assert_true(log_has(fx.d.log, "refine_steps 3 above refine.max_steps"));
	assert_int_equal(
	    admin_send(fx.d.socket, "{\"op\":\"drain\"}", buf, sizeof(buf)), 0);
	run_refine(fx.d.socket, 2, 4, 0, -1, &run);
	assert_int_equal(run.final.error, -O1_E_DRAINING);
	assert_int_equal(run.n_rounds, 0);
	assert_int_equal(
	    admin_send(fx.d.socket, "{\"op\":\"resume\"}", buf, sizeof(buf)),
	    0);
	co.socket_path = fx.d.socket;
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, &so), 0);
	assert_int_equal(o1_client_wait(c, &ev, 10000000000ll), 1);
	assert_true(ev.type == O1_EVENT_ERROR || ev.type == O1_EVENT_FINAL);
	assert_int_equal(ev.error, -O1_E_FORMAT);
	o1_client_close(c);
	assert_int_equal(daemon_stop(&fx.d), 0);
}

static int setup(void **state)
{
	char cmd[512], path[160];
	FILE *f;
	size_t n;

	(void)state;
	if (harness_init(&fx.d, o1model_bin))
		return -1;
	snprintf(path, sizeof(path), "%s/demo.txt", fx.d.dir);
	snprintf(fx.demo, sizeof(fx.demo), "%s/demo.gguf", fx.d.dir);
	f = fopen(path, "w");
	if (!f || fputs(demo_text, f) < 0 || fclose(f))
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "%s make --preset demo --from-text %s --out %s >/dev/null "
		 "2>&1",
		 o1model_bin, path, fx.demo);
	if (system(cmd))
		return -1;
	f = fopen(O1_SOURCE_DIR "/config/refine_review.txt", "r");
	if (!f)
		return -1;
	n = fread(fx.review, 1, sizeof(fx.review) - 1, f);
	fclose(f);
	while (n && (fx.review[n - 1] == '\n' || fx.review[n - 1] == ' '))
		n--;
	fx.review[n] = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	harness_fini(&fx.d);
	return 0;
}

/* A failed test leaves its daemon running: stop it. */
static int stop_left(void **state)
{
	(void)state;
	if (fx.d.pid > 0)
		daemon_stop(&fx.d);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_rounds, stop_left),
	    cmocka_unit_test_teardown(test_repeat, stop_left),
	    cmocka_unit_test_teardown(test_confident, stop_left),
	    cmocka_unit_test_teardown(test_cancel, stop_left),
	    cmocka_unit_test_teardown(test_refused, stop_left),
	};

	if (argc < 3) {
		fprintf(stderr, "usage: test_refine O1D O1MODEL\n");
		return 2;
	}
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* Self-refinement through o1-sidecar (argv: o1d, o1model, o1-sidecar):
 * o1d serves the tiny model on the CPU with refine.max_steps 3 and a
 * confidence threshold no answer reaches (so the loop runs until a repeat
 * or the asked rounds). Checked:
 * - a chat completion with refine_steps has a refinement_trace equal,
 *   round by round (text, prompt/cached/generated tokens, confidence,
 *   finish), to the o1_trace libo1client assembles for the same request
 *   (greedy: runs every round; seeded sampling: stops on a repeat), the
 *   same stop reason, the last round's text as the message,
 *   the FINAL's totals as usage and its summary as o1_confidence; the
 *   prefix cache served the later rounds (cached tokens > 0);
 * - streamed, every chunk carries o1_round (never decreasing), the deltas
 *   of each round join to that round's text, the finishing chunk has
 *   o1_confidence and the last chunk before [DONE] the trace and usage;
 * - a plain request has o1_confidence and no trace; logprobs of a
 *   refinement are the last round's, each with its alternatives;
 * - refine_steps over the daemon's bound, over 16, not an integer, or on
 *   /v1/completions is a 400 naming refine_steps. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <o1/client.h>

#include "sidecar_harness.h"
#include "tests/common/test_util.h"

#define STEPS 3

static struct proc side;

static const char packed[] =
    "system\0You answer.\0user\0What does the daemon do?";
static const char chat_body[] =
    "{\"model\":\"default\",\"messages\":[{\"role\":\"system\","
    "\"content\":\"You answer.\"},{\"role\":\"user\",\"content\":"
    "\"What does the daemon do?\"}],\"max_tokens\":24%s}";
/* greedy, refining: what most requests here add */
#define REFINE ",\"temperature\":0,\"refine_steps\":"

/* A JSON float rendered from a float: exactly that float again. */
static void float_equal(const cJSON *j, const char *path, float want)
{
	float got = (float)json_num(j, path);

	if (got != want)
		fail_msg("%s: %.9g, libo1client %.9g", path, got, want);
}

static cJSON *chat(const char *extra)
{
	char body[1024], *out;
	cJSON *j;
	int code;

	snprintf(body, sizeof(body), chat_body, extra);
	code = http_to(&side, "POST", "/v1/chat/completions", body, &out);
	if (code != 200)
		fail_msg("%d: %s", code, out);
	j = cJSON_Parse(out);
	if (!j)
		fail_msg("not JSON: %s", out);
	free(out);
	return j;
}

static int on_event(void *arg, const struct o1_event *ev)
{
	assert_int_equal(o1_trace_add(arg, ev), 0);
	return 0;
}

/* The same request straight through libo1client; SAMPLING NULL: greedy. */
static void reference(const struct o1_sampling *sampling, struct o1_trace *t,
		      struct o1_event *final)
{
	struct o1_client_opts co = {.sz = sizeof(co), .socket_path = sock};
	struct o1_submit_opts o = {.sz = sizeof(o),
				   .req_id = 1,
				   .text = packed,
				   .text_len = sizeof(packed) - 1,
				   .sampling = sampling,
				   .max_tokens = 24,
				   .flags = O1_FLAG_CHAT,
				   .refine_steps = STEPS};
	struct o1_client *c;

	o1_trace_init(t);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_generate(c, &o, on_event, t, final), 0);
	assert_int_equal(final->error, 0);
	assert_int_equal(o1_trace_add(t, final), 0);
	o1_client_close(c);
}

static const char *stop_name(enum o1_refine_stop_reason r)
{
	static const char *const n[] = {"none",	  "steps", "confident",
					"repeat", "limit", "cancelled",
					"error"};

	return n[r];
}

static void check_round(const cJSON *r, const struct o1_trace_round *t)
{
	print_message("round %u: %u+%u tokens (%u cached), mean logprob "
		      "%.4f: %s\n",
		      t->round, t->prompt_tokens, t->generated_tokens,
		      t->cached_tokens, t->mean_logprob, t->text);
	assert_int_equal(json_num(r, "index"), t->round);
	assert_string_equal(json_str(r, "text"), t->text);
	assert_int_equal(json_num(r, "tokens.prompt"), t->prompt_tokens);
	assert_int_equal(json_num(r, "tokens.cached"), t->cached_tokens);
	assert_int_equal(json_num(r, "tokens.generated"), t->generated_tokens);
	float_equal(r, "confidence.mean_logprob", t->mean_logprob);
	float_equal(r, "confidence.min_logprob", t->min_logprob);
	float_equal(r, "confidence.mean_entropy", t->mean_entropy);
	assert_true(json_num(r, "latency_ms") > 0);
	assert_string_equal(json_str(r, "finish_reason"),
			    t->finish == O1_FINISH_REASON_LENGTH ? "length"
								 : "stop");
}

static void check_trace(const cJSON *j, const struct o1_trace *t)
{
	const cJSON *tr = json_at(j, "refinement_trace");

	assert_true(cJSON_IsArray(tr));
	assert_int_equal(cJSON_GetArraySize(tr), t->n_rounds);
	for (uint32_t i = 0; i < t->n_rounds; i++)
		check_round(cJSON_GetArrayItem(tr, (int)i), &t->rounds[i]);
	assert_string_equal(json_str(j, "refinement_stop_reason"),
			    stop_name(t->stop));
}

static void check_confidence(const cJSON *c, const struct o1_event *final)
{
	float_equal(c, "o1_confidence.mean_logprob", final->mean_logprob);
	float_equal(c, "o1_confidence.min_logprob", final->min_logprob);
	float_equal(c, "o1_confidence.mean_entropy", final->mean_entropy);
	assert_int_equal(json_num(c, "o1_confidence.tokens"),
			 final->conf_tokens);
}

/* The sidecar's answer to EXTRA (refine_steps and sampling) against
 * libo1client's trace of the same request. */
static void compare(const char *extra, const struct o1_sampling *sampling,
		    enum o1_refine_stop_reason want_stop)
{
	struct o1_event final;
	struct o1_trace t;
	cJSON *warm, *j;

	/* the first run fills the prefix cache for the two compared ones */
	warm = chat(extra);
	assert_true(cJSON_GetArraySize(json_at(warm, "refinement_trace")) >= 2);
	assert_true(json_num(warm, "refinement_trace.1.tokens.cached") > 0);
	cJSON_Delete(warm);
	reference(sampling, &t, &final);
	j = chat(extra);
	print_message("%s: %u rounds, stop %s\n", extra, t.n_rounds,
		      stop_name(t.stop));
	assert_true(t.n_rounds >= 2 && t.n_rounds <= STEPS + 1);
	assert_int_equal(t.stop, want_stop);
	if (want_stop == O1_REFINE_STOP_STEPS)
		assert_int_equal(t.n_rounds, STEPS + 1);
	else /* a repeat: the last answer equals the one before */
		assert_string_equal(t.rounds[t.n_rounds - 1].text,
				    t.rounds[t.n_rounds - 2].text);
	check_trace(j, &t);
	assert_string_equal(json_str(j, "choices.0.message.content"),
			    t.rounds[t.n_rounds - 1].text);
	assert_int_equal(json_num(j, "usage.prompt_tokens"),
			 final.prompt_tokens);
	assert_int_equal(json_num(j, "usage.completion_tokens"),
			 final.generated_tokens);
	assert_int_equal(
	    json_num(j, "usage.prompt_tokens_details.cached_tokens"),
	    final.cached_tokens);
	check_confidence(json_at(j, "choices.0"), &final);
	cJSON_Delete(j);
	o1_trace_free(&t);
}

/* Greedy: each round's answer differs, every asked round runs. */
static void test_trace_equals_client(void **state)
{
	(void)state;
	compare(REFINE "3", NULL, O1_REFINE_STOP_STEPS);
}

/* Seeded sampling (the parameters reach every round): an answer repeats
 * the previous one and ends the loop. */
static void test_trace_sampled(void **state)
{
	struct o1_sampling s = {
	    .sz = sizeof(s), .temperature = 0.8f, .top_p = 1, .seed = 2};

	(void)state;
	compare(",\"refine_steps\":3,\"temperature\":0.8,\"seed\":2", &s,
		O1_REFINE_STOP_REPEAT);
}

/* One SSE chunk: o1_round on choice chunks, deltas joined per round. */
static void stream_chunk(const cJSON *j, char rounds[][4096], int *last_round,
			 bool *confident)
{
	const cJSON *c = cJSON_GetArrayItem(json_at(j, "choices"), 0);
	int r;

	if (!c)
		return;
	r = (int)json_num(j, "o1_round");
	assert_true(r >= *last_round && r <= STEPS);
	*last_round = r;
	strncat(rounds[r], json_str(c, "delta.content"),
		4096 - strlen(rounds[r]) - 1);
	if (cJSON_IsString(cJSON_GetObjectItem(c, "finish_reason")))
		*confident =
		    cJSON_IsObject(cJSON_GetObjectItem(c, "o1_confidence"));
}

static void test_stream(void **state)
{
	static char rounds[STEPS + 1][4096];
	char body[1024], *out, *line, *save, *prev = NULL;
	bool confident = false;
	int last_round = 0;
	cJSON *whole, *j;

	(void)state;
	memset(rounds, 0, sizeof(rounds));
	whole = chat(REFINE "3");
	snprintf(body, sizeof(body), chat_body,
		 REFINE "3,\"stream\":true,\"stream_options\":"
			"{\"include_usage\":true}");
	assert_int_equal(
	    http_to(&side, "POST", "/v1/chat/completions", body, &out), 200);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		assert_int_equal(strncmp(line, "data: ", 6), 0);
		if (!strcmp(line + 6, "[DONE]"))
			break;
		j = cJSON_Parse(line + 6);
		assert_non_null(j);
		stream_chunk(j, rounds, &last_round, &confident);
		cJSON_Delete(j);
		prev = line + 6;
	}
	assert_non_null(line); /* [DONE] came */
	assert_true(confident);
	assert_non_null(prev);
	j = cJSON_Parse(prev); /* the last chunk before [DONE] */
	assert_int_equal(
	    cJSON_GetArraySize(json_at(j, "refinement_trace")),
	    cJSON_GetArraySize(json_at(whole, "refinement_trace")));
	assert_int_equal(last_round + 1,
			 cJSON_GetArraySize(json_at(j, "refinement_trace")));
	for (int i = 0; i <= last_round; i++) {
		char path[64];

		snprintf(path, sizeof(path), "refinement_trace.%d.text", i);
		assert_string_equal(rounds[i], json_str(j, path));
		assert_string_equal(rounds[i], json_str(whole, path));
	}
	assert_string_equal(json_str(j, "refinement_stop_reason"),
			    json_str(whole, "refinement_stop_reason"));
	assert_int_equal(json_num(j, "usage.completion_tokens"),
			 json_num(whole, "usage.completion_tokens"));
	cJSON_Delete(j);
	cJSON_Delete(whole);
	free(out);
}

static void test_plain_has_confidence(void **state)
{
	cJSON *j = chat(",\"temperature\":0");

	(void)state;
	assert_null(cJSON_GetObjectItem(j, "refinement_trace"));
	assert_true(json_num(j, "choices.0.o1_confidence.tokens") > 0);
	assert_true(json_num(j, "choices.0.o1_confidence.mean_logprob") <= 0);
	assert_true(json_num(j, "choices.0.o1_confidence.mean_entropy") >= 0);
	cJSON_Delete(j);
}

/* logprobs of a refinement: the last round's tokens, each with its
 * alternatives (LOGPROBS positions count over all rounds). */
static void test_logprobs(void **state)
{
	cJSON *j = chat(REFINE "3,\"logprobs\":true,\"top_logprobs\":2");
	const cJSON *tr = json_at(j, "refinement_trace");
	const cJSON *lp = json_at(j, "choices.0.logprobs.content"), *e;
	char path[64];

	(void)state;
	snprintf(path, sizeof(path), "%d.tokens.generated",
		 cJSON_GetArraySize(tr) - 1);
	assert_int_equal(cJSON_GetArraySize(lp), json_num(tr, path));
	cJSON_ArrayForEach(e, lp)
	{
		assert_int_equal(cJSON_GetArraySize(json_at(e, "top_logprobs")),
				 2);
		assert_true(json_num(e, "logprob") >=
			    json_num(e, "top_logprobs.0.logprob") - 1e-4);
	}
	cJSON_Delete(j);
}

static void expect_400(const char *path, const char *body, const char *says)
{
	char *out;
	int code = http_to(&side, "POST", path, body, &out);
	cJSON *j = cJSON_Parse(out);

	if (code != 400 || !j || !strstr(out, says))
		fail_msg("%s %s: %d %s", path, body, code, out);
	assert_string_equal(json_str(j, "error.param"), "refine_steps");
	assert_string_equal(json_str(j, "error.type"), "invalid_request_error");
	cJSON_Delete(j);
	free(out);
}

static void test_refused(void **state)
{
	char body[1024];

	(void)state;
	snprintf(body, sizeof(body), chat_body, REFINE "4");
	expect_400("/v1/chat/completions", body, "refine.max_steps");
	snprintf(body, sizeof(body), chat_body, REFINE "4,\"stream\":true");
	expect_400("/v1/chat/completions", body, "refine.max_steps");
	snprintf(body, sizeof(body), chat_body, REFINE "17");
	expect_400("/v1/chat/completions", body, "allowed: 0 to 16");
	snprintf(body, sizeof(body), chat_body, REFINE "true");
	expect_400("/v1/chat/completions", body, "integer");
	expect_400("/v1/completions",
		   "{\"model\":\"default\",\"prompt\":\"The daemon\","
		   "\"refine_steps\":1}",
		   "chat conversations only");
}

static int setup(void **state)
{
	(void)state;
	harness_preset = "tiny"; /* answers depend on the whole context */
	daemon_sets[0] = "refine.max_steps=3";
	daemon_sets[1] = "refine.confidence_threshold=0";
	if (harness_setup(o1d_bin, o1model_bin, sidecar_bin))
		return -1;
	start_sidecar(&side, "refine", NULL);
	return 0;
}

static int teardown(void **state)
{
	struct proc *const sidecars[] = {&side};

	(void)state;
	return harness_teardown(sidecars, 1);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_trace_equals_client),
	    cmocka_unit_test(test_trace_sampled),
	    cmocka_unit_test(test_stream),
	    cmocka_unit_test(test_plain_has_confidence),
	    cmocka_unit_test(test_logprobs),
	    cmocka_unit_test(test_refused),
	};

	if (harness_args(argc, argv, 0, 0, NULL))
		return 2;
	return cmocka_run_group_tests(tests, setup, teardown);
}

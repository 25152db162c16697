/* Sampling in the backend, end to end: o1d on the CPU backend with
 * backend.sample_in_backend off, on, and on with room for only a few
 * penalty entries per step (penalised sequences then sampled on the host
 * in steps that return the logits too) must stream the same events, byte
 * for byte, for greedy, seeded, top-k/top-p/min-p, penalised and
 * logprobs requests submitted together: ids, text, per-token logprob and
 * entropy, the LOGPROBS alternatives, and the FINAL's finish, counts and
 * confidence summary. Admin status says which mode runs.
 * argv: o1d o1model */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_harness.h"
#include "o1/client.h"

#define N_REQS	 10
#define LOG_CAP	 65536
#define PROMPT_N 40

static const char *o1d_bin;

/* What a request streamed, minus timings and cache counts. */
struct trace {
	unsigned char log[LOG_CAP];
	size_t len;
	int finals;
	uint32_t tokens;
};

static void put(struct trace *t, const void *p, size_t n)
{
	assert_true(t->len + n <= LOG_CAP);
	memcpy(t->log + t->len, p, n);
	t->len += n;
}

static void record(struct trace *t, const struct o1_event *ev)
{
	put(t, &ev->type, sizeof(ev->type));
	switch (ev->type) {
	case O1_EVENT_TOKEN:
		put(t, &ev->n_ids, sizeof(ev->n_ids));
		put(t, ev->ids, ev->n_ids * sizeof(ev->ids[0]));
		put(t, &ev->has_logprobs, sizeof(ev->has_logprobs));
		put(t, ev->logprobs, ev->n_ids * sizeof(ev->logprobs[0]));
		put(t, &ev->entropy, sizeof(ev->entropy));
		put(t, ev->text, ev->text_len);
		t->tokens += ev->n_ids;
		break;
	case O1_EVENT_LOGPROBS:
		put(t, &ev->position, sizeof(ev->position));
		put(t, &ev->n_top, sizeof(ev->n_top));
		put(t, ev->top_ids, ev->n_top * sizeof(ev->top_ids[0]));
		put(t, ev->top_logprobs,
		    ev->n_top * sizeof(ev->top_logprobs[0]));
		break;
	case O1_EVENT_TOP_TEXT: /* the alternatives' bytes, in order */
		put(t, &ev->position, sizeof(ev->position));
		put(t, &ev->top_first, sizeof(ev->top_first));
		for (uint32_t i = 0; i < ev->n_top; i++)
			put(t, ev->top_text + ev->top_off[i], ev->top_len[i]);
		break;
	case O1_EVENT_FINAL:
		put(t, &ev->finish, sizeof(ev->finish));
		put(t, &ev->error, sizeof(ev->error));
		put(t, &ev->prompt_tokens, sizeof(ev->prompt_tokens));
		put(t, &ev->generated_tokens, sizeof(ev->generated_tokens));
		put(t, &ev->mean_logprob, sizeof(ev->mean_logprob));
		put(t, &ev->min_logprob, sizeof(ev->min_logprob));
		put(t, &ev->mean_entropy, sizeof(ev->mean_entropy));
		put(t, &ev->conf_tokens, sizeof(ev->conf_tokens));
		t->finals++;
		break;
	default:
		fail_msg("unexpected event %d", ev->type);
	}
}

/* Request I: every sampling path, a prompt with repeats. */
static void request(unsigned i, struct o1_sampling *s, uint32_t *ids,
		    size_t *n_ids)
{
	*s = (struct o1_sampling){.sz = sizeof(*s), .seed = 40 + i};
	s->temperature = i < 2 ? 0 : 0.7f + 0.1f * (float)(i % 4);
	s->top_k = i == 3 || i == 9 ? 12 : i == 8 ? 1 : 0;
	s->top_p = i == 4 || i == 9 ? 0.85f : 1;
	s->min_p = i == 5 || i == 9 ? 0.05f : 0;
	s->repeat_penalty = i == 1 || i == 6 || i == 9 ? 1.3f : 1;
	s->presence_penalty = i == 7 || i == 9 ? 0.6f : 0;
	s->frequency_penalty = i == 7 ? 0.4f : i == 6 ? 0.2f : 0;
	s->n_logprobs = i % 3 == 0 ? 4 : i == 7 ? 20 : 0;
	*n_ids = 8 + (i * 5) % PROMPT_N;
	for (size_t j = 0; j < *n_ids; j++)
		ids[j] = (uint32_t)((i * 37 + (j % 11) * 53) % 480);
}

/* Submits every request on one client and collects their events. */
static void run_all(const char *socket, struct trace *tr)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = socket, .name = "sampling"};
	struct o1_client *c;
	struct o1_event ev;
	uint32_t ids[N_REQS][PROMPT_N + 8], stop = 3;
	struct o1_sampling smp[N_REQS];
	int done = 0, err = 0;

	memset(tr, 0, N_REQS * sizeof(*tr));
	assert_int_equal(o1_client_connect(&co, &c), 0);
	for (unsigned i = 0; i < N_REQS; i++) {
		size_t n;
		struct o1_submit_opts so = {
		    .sz = sizeof(so),
		    .req_id = i,
		    .ids = ids[i],
		    .sampling = &smp[i],
		    .max_tokens = 12 + i,
		    .stop_ids = &stop,
		    .n_stop_ids = i == 2,
		    .flags =
			O1_FLAG_CONFIDENCE | (i % 2 ? O1_FLAG_IGNORE_EOS : 0)};

		request(i, &smp[i], ids[i], &n);
		so.n_ids = n;
		assert_int_equal(o1_client_submit(c, &so), 0);
	}
	while (!err && done < N_REQS) {
		err = o1_client_wait(c, &ev, 60000000000ll);
		assert_true(err >= 0);
		if (err == 1) {
			assert_true(ev.req_id < N_REQS);
			record(&tr[ev.req_id], &ev);
			done += ev.type == O1_EVENT_FINAL;
			err = 0;
		}
	}
	o1_client_close(c);
}

static bool status_sampling(const char *socket)
{
	char buf[8192];
	cJSON *o;
	bool on;

	assert_int_equal(
	    admin_send(socket, "{\"op\":\"status\"}", buf, sizeof(buf)), 0);
	o = cJSON_Parse(buf);
	assert_non_null(o);
	assert_true(cJSON_IsBool(
	    cJSON_GetObjectItemCaseSensitive(o, "sample_in_backend")));
	on = cJSON_IsTrue(
	    cJSON_GetObjectItemCaseSensitive(o, "sample_in_backend"));
	cJSON_Delete(o);
	return on;
}

static void run_mode(struct daemon_proc *d, const char *const *sets,
		     bool want_on, struct trace *tr)
{
	assert_int_equal(daemon_start(d, o1d_bin, sets), 0);
	assert_int_equal(status_sampling(d->socket), want_on);
	run_all(d->socket, tr);
	assert_int_equal(daemon_stop(d), 0);
}

static void test_backend_equals_host(void **state)
{
	static struct trace host[N_REQS], tr[N_REQS];
	static const char *const off[] = {"backend.sample_in_backend=off",
					  NULL};
	static const char *const deflt[] = {NULL};
	static const char *const on[] = {"backend.sample_in_backend=on", NULL};
	static const char *const tight[] = {"backend.sample_in_backend=on",
					    "backend.sample_penalty_entries=30",
					    NULL};
	const char *const *const modes[] = {deflt, on, tight};
	struct daemon_proc *d = *state;

	run_mode(d, off, false, host);
	for (int i = 0; i < N_REQS; i++) {
		assert_int_equal(host[i].finals, 1);
		assert_true(host[i].tokens > 0);
	}
	for (int m = 0; m < 3; m++) {
		/* auto is off on the CPU backend */
		run_mode(d, modes[m], m > 0, tr);
		for (int i = 0; i < N_REQS; i++) {
			if (tr[i].len != host[i].len ||
			    memcmp(tr[i].log, host[i].log, tr[i].len))
				fail_msg("mode %d request %d: events differ "
					 "(%zu bytes, host %zu)",
					 m, i, tr[i].len, host[i].len);
		}
	}
	assert_true(log_has(d->log, "sampling in the cpu backend, 30 "
				    "penalty entries per step"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_backend_equals_host),
	};

	if (argc < 3)
		return 77;
	o1d_bin = argv[1];
	harness_o1model = argv[2];
	return cmocka_run_group_tests(tests, harness_setup, harness_teardown);
}

/* o1bench run --long: long prompts arriving while the streams decode.
 *
 * A thread of its own waits until every stream has had its first token
 * (the streams are decoding), --long-after-ms more and as many
 * inter-token samples as streams (their undisturbed inter-token times
 * accumulate, however slow the machine), then submits N cold prompts of
 * P words at once on its own connection, each asking for one new token, and
 * reads them to their FINALs. The phase it publishes (before the
 * submission, during it: until every long prompt has its first token,
 * after) sorts the streams' inter-token samples, so one run gives the
 * token interval with and without long prompts arriving, and the long
 * prompts' TTFT.
 *
 * Invariants: phase only grows (BEFORE, DURING, AFTER), written by this
 * thread alone (release), read by the stream threads (acquire); the
 * samples and counts here are this thread's until o1bench_long_join. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_long.h"
#include "o1/client.h"
#include "o1bench.h"

/* The prompts: "long K: " then the words of the streams' prompt text,
 * repeated to P words, K making each one cold (no prefix-cache hit). */
static char *long_prompt(const struct o1bench_long *l, long k)
{
	static const char *const words[] = {
	    "the",    "daemon", "keeps",  "one",   "model", "in",
	    "memory", "and",	"serves", "every", "local", "client"};
	char *s = malloc((size_t)l->words * 8 + 32);
	size_t at;

	if (!s)
		return NULL;
	at = (size_t)sprintf(s, "long %ld:", k);
	for (long i = 0; i < l->words; i++)
		at += (size_t)sprintf(s + at, " %s", words[i % 12]);
	return s;
}

static void note(struct o1bench_long *l, const char *what, int err,
		 const char *detail)
{
	if (!l->first_error[0])
		snprintf(l->first_error, sizeof(l->first_error),
			 "long prompts, %s: %s%s%s", what,
			 o1_client_strerror(err), *detail ? ": " : "", detail);
}

/* Submits every long prompt; T0 gets each one's submit time. */
static int submit_all(struct o1bench_long *l, struct o1_client *c, uint64_t *t0)
{
	struct o1_sampling sp = {.sz = sizeof(sp)};

	for (long k = 0; k < l->n; k++) {
		char *text = long_prompt(l, k);
		struct o1_submit_opts o = {.sz = sizeof(o),
					   .req_id = (uint64_t)k + 1,
					   .sampling = &sp,
					   .max_tokens = 1,
					   .flags = O1_FLAG_ADD_BOS};
		int err;

		if (!text)
			return -ENOMEM;
		o.text = text;
		o.text_len = strlen(text);
		t0[k] = o1bench_now_ns();
		err = o1_client_submit(c, &o);
		free(text);
		if (err) {
			note(l, "submit", err, o1_last_error());
			return err;
		}
	}
	return 0;
}

/* Reads until every long prompt has its FINAL: TTFT at its first TOKEN
 * (or its FINAL, when it failed first), AFTER once each has one. */
static int read_all(struct o1bench_long *l, struct o1_client *c,
		    const uint64_t *t0, bool *seen)
{
	long finals = 0;

	while (finals < l->n) {
		struct o1_event ev;
		int err = o1_client_wait(c, &ev, -1);
		long k;

		if (err < 0) {
			note(l, "transport", err, o1_last_error());
			return err;
		}
		k = (long)ev.req_id - 1;
		if (k < 0 || k >= l->n ||
		    (ev.type != O1_EVENT_TOKEN && ev.type != O1_EVENT_FINAL))
			continue;
		if (!seen[k]) {
			seen[k] = true;
			l->ttft[l->n_ttft++] = o1bench_now_ns() - t0[k];
			if (l->n_ttft == l->n)
				atomic_store_explicit(&l->phase,
						      O1BENCH_LONG_AFTER,
						      memory_order_release);
		}
		if (ev.type != O1_EVENT_FINAL)
			continue;
		finals++;
		l->done++;
		if (ev.finish == O1_FINISH_REASON_ERROR ||
		    ev.finish == O1_FINISH_REASON_CANCELLED) {
			l->errors++;
			note(l, "request", ev.error, ev.message);
		}
	}
	return 0;
}

/* Waits until every stream decodes, then AFTER_MS and a sample of the
 * token interval a stream; false (noted) when the streams ended first. */
static bool wait_streams(struct o1bench_long *l)
{
	uint64_t end = 0;

	while (!atomic_load(&l->streams_done)) {
		if (!end && atomic_load(l->first_tokens) >= l->streams)
			end = o1bench_now_ns() +
			      (uint64_t)l->after_ms * 1000000ull;
		if (end && o1bench_now_ns() >= end &&
		    atomic_load(l->before_gaps) >= l->streams)
			return true;
		o1bench_sleep_ms(1);
	}
	note(l, "not sent", -ECANCELED,
	     "the streams ended first (give them more --max-tokens)");
	return false;
}

static void *long_main(void *arg)
{
	struct o1bench_long *l = arg;
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = l->socket, .name = "o1bench-long"};
	uint64_t *t0 = calloc((size_t)l->n, sizeof(*t0));
	bool *seen = calloc((size_t)l->n, sizeof(*seen));
	struct o1_client *c = NULL;
	int err = t0 && seen ? o1_client_connect(&co, &c) : -ENOMEM;

	if (err)
		note(l, "connect", err, t0 ? o1_last_error() : "");
	if (!err && !wait_streams(l))
		err = -ECANCELED;
	if (!err) {
		atomic_store_explicit(&l->phase, O1BENCH_LONG_DURING,
				      memory_order_release);
		err = submit_all(l, c, t0);
	}
	if (!err)
		read_all(l, c, t0, seen);
	atomic_store_explicit(&l->phase, O1BENCH_LONG_AFTER,
			      memory_order_release);
	o1_client_close(c);
	free(t0);
	free(seen);
	return NULL;
}

int o1bench_long_start(struct o1bench_long *l)
{
	int err;

	l->ttft = calloc((size_t)l->n, sizeof(*l->ttft));
	if (!l->ttft)
		return -ENOMEM;
	atomic_init(&l->phase, O1BENCH_LONG_BEFORE);
	atomic_init(&l->streams_done, 0);
	err = -pthread_create(&l->thread, NULL, long_main, l);
	l->started = !err;
	return err;
}

int o1bench_long_phase(const struct o1bench_long *l)
{
	return atomic_load_explicit(&l->phase, memory_order_acquire);
}

void o1bench_long_join(struct o1bench_long *l)
{
	atomic_store(&l->streams_done, 1);
	if (l->started)
		pthread_join(l->thread, NULL);
	l->started = 0;
}

void o1bench_long_fini(struct o1bench_long *l)
{
	free(l->ttft);
	l->ttft = NULL;
}

/* Refinement traces: a request's per-round answers rebuilt from its
 * TOKEN events (the wire carries each round's text only there) and its
 * ROUND and FINAL events.
 *
 * Invariants: rounds arrive in order, so rounds[n_rounds - 1] is the one
 * TOKENs are appended to; every text is NUL-terminated (or NULL while a
 * round has no text), allocated here and freed by o1_trace_free. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "o1/client.h"

void o1_trace_init(struct o1_trace *t)
{
	memset(t, 0, sizeof(*t));
}

/* The round R, opening it (and only it) when it is the next one. */
static struct o1_trace_round *round_at(struct o1_trace *t, uint32_t r)
{
	if (r >= O1_REFINE_MAX_ROUNDS || r > t->n_rounds)
		return NULL;
	if (r + 1 < t->n_rounds)
		return NULL; /* an older round: out of order */
	if (r == t->n_rounds) {
		t->rounds[r].round = r;
		t->n_rounds++;
	}
	return &t->rounds[r];
}

static int append(struct o1_trace_round *tr, const char *text, size_t len)
{
	char *p;

	if (!len)
		return 0;
	p = realloc(tr->text, tr->text_len + len + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p + tr->text_len, text, len);
	tr->text_len += len;
	p[tr->text_len] = 0;
	tr->text = p;
	return 0;
}

static void fill_round(struct o1_trace_round *tr, const struct o1_event *ev)
{
	tr->prompt_tokens = ev->prompt_tokens;
	tr->cached_tokens = ev->cached_tokens;
	tr->generated_tokens = ev->generated_tokens;
	tr->mean_logprob = ev->mean_logprob;
	tr->min_logprob = ev->min_logprob;
	tr->mean_entropy = ev->mean_entropy;
	tr->latency_ns = ev->latency_ns;
	tr->finish = ev->finish;
	tr->stop = ev->refine_stop;
	tr->complete = 1;
}

int o1_trace_add(struct o1_trace *t, const struct o1_event *ev)
{
	struct o1_trace_round *tr;

	switch (ev->type) {
	case O1_EVENT_TOKEN:
		tr = round_at(t, ev->round);
		if (!tr || tr->complete)
			return -EINVAL;
		return append(tr, ev->text, ev->text_len);
	case O1_EVENT_ROUND:
		tr = round_at(t, ev->round);
		if (!tr || tr->complete)
			return -EINVAL;
		fill_round(tr, ev);
		return 0;
	case O1_EVENT_FINAL:
		t->stop = ev->refine_stop;
		t->done = 1;
		return 0;
	default:
		return 0;
	}
}

void o1_trace_free(struct o1_trace *t)
{
	for (uint32_t i = 0; i < O1_REFINE_MAX_ROUNDS; i++) {
		free(t->rounds[i].text);
		t->rounds[i].text = NULL;
		t->rounds[i].text_len = 0;
	}
}

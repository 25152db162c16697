/* The scheduler (see scheduler.h). Sequence i is the state of request slot
 * i. Lists hold slot indices: running (admission order, newest last),
 * resume (preempted, FIFO) and waiting (arrival order). A sequence is in
 * at most one list; it is in none once its FINAL is produced.
 *
 * Invariants of a listed sequence:
 * - tokens[0, n_tokens) are the prompt then the generated tokens;
 *   n_computed <= n_tokens positions have their KV in table's pages, and
 *   at least one token is always left to compute (n_computed < n_tokens);
 * - pages [0, n_keyed) of the table are listed in the prefix cache (or
 *   were found there), last_key being the key of page n_keyed - 1 (the
 *   salt when n_keyed = 0);
 * - hold[0, n_hold) is decoded text not yet sent: it may be the start of a
 *   stop string.
 * - n_conf, sum_lp, sum_ent, min_lp summarize the tokens sampled in the
 *   current round; round_sent says its ROUND event went out.
 * - Refining (refine_steps > 0): answer[0, n_answer) is the text sent in
 *   the current round (answer_cut: some did not fit), prev[0, n_prev) the
 *   previous round's answer (NUL-terminated), which a round > 0 prompt
 *   quotes as the assistant's turn.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "metrics_writer.h"
#include "prefix_cache.h"
#include "sampling.h"
#include "scheduler.h"
#include "threads.h"

#define HOLD_CAP     2048
#define TEXT_PER_EV  44 /* text bytes per event, leaving room for a cut */
#define OUT_NEED     (1 + HOLD_CAP / TEXT_PER_EV + 1 + 2 + O1_REQ_FINAL_RESERVE)
#define N_FAIR	     1024
#define CHAT_MAX_MSG 64

/* The review instruction when none is configured (config/refine_review.txt
 * ships the same text). */
static const char default_review[] =
    "Review your previous answer carefully. If it is correct and complete, "
    "repeat it unchanged. Otherwise write only the corrected answer.";

_Static_assert(OUT_NEED < O1_REQ_OUT_ENTRIES, "out ring too small");

enum seq_list { IN_NONE, IN_WAITING, IN_RESUME, IN_RUNNING };

struct seq {
	struct o1_req *req;
	int32_t *tokens; /* max_context + 1 */
	uint32_t n_tokens, n_prompt, n_computed;
	uint32_t *pages;
	struct o1_block_table table;
	struct o1_sampler *sampler;
	struct o1_detok detok;
	char hold[HOLD_CAP];
	uint32_t n_hold;
	uint32_t n_keyed;
	uint64_t last_key, salt;
	uint64_t last_token_ns;
	enum seq_list list;
	bool admitted_once;
	bool no_text;
	/* confidence of the current round */
	double sum_lp, sum_ent;
	float min_lp;
	uint32_t n_conf;
	/* refinement */
	uint32_t refine_steps, round, rounds_sent;
	uint32_t prompt_total, cached_round, cached_total;
	uint64_t round_start_ns;
	char *answer, *prev; /* answer_cap + 1 bytes each, when refining */
	uint32_t n_answer, n_prev;
	bool answer_cut, round_sent;
	enum o1_refine_stop stop;
	/* device logits of the token being streamed (on_token) */
	bool dev;
	uint32_t dev_seq;
};

struct batch_ent {
	uint32_t slot;
	uint32_t n;
	bool samples;
	bool host;	  /* sampled on the host, from the step's logits */
	bool dev;	  /* its row goes to a device output area */
	uint32_t dev_seq; /* at this sequence number */
	int err;	  /* of the sampling, then smp is the token */
	struct o1_sampling_out smp;
};

struct o1_sched {
	struct o1_sched_opts o;
	uint32_t lim_batch, lim_running, lim_chunk; /* current knobs */
	uint32_t page_tokens;
	struct o1_prefix_cache *cache;
	struct seq *seqs;
	uint32_t *running, n_running;
	uint32_t *resume, n_resume;
	uint32_t *waiting, n_waiting;
	uint32_t served[N_FAIR];
	struct batch_ent *batch;
	struct o1_step_seq *step_seqs;
	uint32_t n_batch;
	float *logits;
	struct o1_step_devout *devout; /* max_running entries per step */
	uint32_t *devout_seq;	       /* next sequence number per area */
	struct o1_threads *samplers;   /* NULL: sampling on the engine thread */
	/* sample_in_backend: max_running rows and results, the penalties */
	struct o1_sample_row *rows;
	struct o1_sample_result *results;
	struct o1_sample_penalty *pens; /* sample_pens entries */
	uint32_t n_pens;		/* used this step */
	char *chat_buf;
	size_t chat_cap;
	char *review;
	uint32_t answer_cap;
	struct o1_sched_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void count(struct o1_sched *s, enum o1_metrics_ctr c, uint64_t n)
{
	if (s->o.metrics)
		o1_metrics_add(s->o.metrics, c, n);
}

void o1_sched_set_metrics(struct o1_sched *s, struct o1_metrics *m)
{
	s->o.metrics = m;
}

static void observe(struct o1_sched *s, enum o1_metrics_hist_id h, uint64_t ns)
{
	if (s->o.metrics)
		o1_metrics_observe_us(s->o.metrics, h, ns / 1000);
}

static int alloc_seqs(struct o1_sched *s)
{
	uint32_t n_pages =
	    (s->o.max_context + 1 + s->page_tokens - 1) / s->page_tokens;

	s->seqs = calloc(s->o.n_slots, sizeof(struct seq));
	if (!s->seqs)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->o.n_slots; i++) {
		struct seq *q = &s->seqs[i];

		q->tokens =
		    malloc(((size_t)s->o.max_context + 1) * sizeof(int32_t));
		q->pages = malloc((size_t)n_pages * sizeof(uint32_t));
		if (!q->tokens || !q->pages)
			return -ENOMEM;
		o1_kv_table_init(&q->table, q->pages, n_pages);
		if (!s->o.max_refine_steps)
			continue;
		q->answer = malloc((size_t)s->answer_cap + 1);
		q->prev = malloc((size_t)s->answer_cap + 1);
		if (!q->answer || !q->prev)
			return -ENOMEM;
	}
	return 0;
}

static int alloc_lists(struct o1_sched *s)
{
	size_t n = s->o.n_slots;

	s->running = malloc(n * sizeof(uint32_t));
	s->resume = malloc(n * sizeof(uint32_t));
	s->waiting = malloc(n * sizeof(uint32_t));
	s->batch = malloc(s->o.max_running * sizeof(*s->batch));
	s->step_seqs = malloc(s->o.max_running * sizeof(*s->step_seqs));
	s->logits =
	    malloc((size_t)s->o.max_running * s->o.vocab_size * sizeof(float));
	s->devout = malloc(s->o.max_running * sizeof(*s->devout));
	s->devout_seq = calloc(s->o.devout_areas + 1, sizeof(uint32_t));
	if (!s->devout || !s->devout_seq)
		return -ENOMEM;
	if (s->o.sample_in_backend) {
		s->rows = malloc(s->o.max_running * sizeof(*s->rows));
		s->results = malloc(s->o.max_running * sizeof(*s->results));
		s->pens =
		    malloc(((size_t)s->o.sample_pens + 1) * sizeof(*s->pens));
		if (!s->rows || !s->results || !s->pens)
			return -ENOMEM;
	}
	s->chat_cap = (size_t)s->o.max_prompt_bytes * 2 + 4096;
	s->chat_buf = malloc(s->chat_cap);
	s->review =
	    strdup(s->o.refine_review ? s->o.refine_review : default_review);
	if (!s->review)
		return -ENOMEM;
	if (!s->running || !s->resume || !s->waiting || !s->batch ||
	    !s->step_seqs || !s->logits || !s->chat_buf)
		return -ENOMEM;
	return 0;
}

/* The sampling pool: sampler_threads, or min(online CPUs, 8) for 0. */
static int make_samplers(struct o1_sched *s)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t n = s->o.sampler_threads;

	if (!n)
		n = cpus < 1 ? 1 : cpus > 8 ? 8 : (uint32_t)cpus;
	if (n > 256) {
		o1_err("scheduler: sampler_threads %u above 256", n);
		return -O1_E_CONFIG;
	}
	s->o.sampler_threads = n;
	return n > 1 ? o1_threads_create(n, &s->samplers) : 0;
}

int o1_sched_create(const struct o1_sched_opts *o, struct o1_sched **out)
{
	struct o1_sched *s;
	int err;

	if (!o->pool || !o->step || !o->vocab_size || !o->max_context ||
	    !o->max_batch_tokens || !o->max_running ||
	    !o->prefill_chunk_tokens || !o->n_slots) {
		o1_err("scheduler: incomplete options (vocab %u, context %u, "
		       "batch %u, running %u, chunk %u, slots %u)",
		       o->vocab_size, o->max_context, o->max_batch_tokens,
		       o->max_running, o->prefill_chunk_tokens, o->n_slots);
		return -O1_E_CONFIG;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *o;
	s->lim_batch = o->max_batch_tokens;
	s->lim_running = o->max_running;
	s->lim_chunk = o->prefill_chunk_tokens;
	s->page_tokens = o1_kv_pool_layout(o->pool)->page_tokens;
	s->answer_cap = o->max_prompt_bytes;
	s->o.refine_review = NULL; /* borrowed: the copy is s->review */
	err = alloc_seqs(s);
	if (!err)
		err = alloc_lists(s);
	if (!err)
		err = o1_prefix_cache_create(o->pool, &s->cache);
	if (!err)
		err = make_samplers(s);
	if (err) {
		o1_sched_destroy(s);
		return err;
	}
	*out = s;
	return 0;
}

void o1_sched_destroy(struct o1_sched *s)
{
	if (!s)
		return;
	o1_prefix_cache_destroy(s->cache);
	o1_threads_destroy(s->samplers);
	for (uint32_t i = 0; s->seqs && i < s->o.n_slots; i++) {
		o1_kv_table_fini(s->o.pool, &s->seqs[i].table);
		o1_sampling_destroy(s->seqs[i].sampler);
		free(s->seqs[i].tokens);
		free(s->seqs[i].pages);
		free(s->seqs[i].answer);
		free(s->seqs[i].prev);
	}
	free(s->seqs);
	free(s->running);
	free(s->resume);
	free(s->waiting);
	free(s->batch);
	free(s->step_seqs);
	free(s->logits);
	free(s->devout);
	free(s->devout_seq);
	free(s->rows);
	free(s->results);
	free(s->pens);
	free(s->chat_buf);
	free(s->review);
	free(s);
}

void o1_sched_set_limits(struct o1_sched *s, uint32_t max_batch_tokens,
			 uint32_t max_running, uint32_t prefill_chunk_tokens)
{
	s->lim_batch =
	    max_batch_tokens && max_batch_tokens < s->o.max_batch_tokens
		? max_batch_tokens
		: s->o.max_batch_tokens;
	s->lim_running = max_running && max_running < s->o.max_running
			     ? max_running
			     : s->o.max_running;
	s->lim_chunk = prefill_chunk_tokens ? prefill_chunk_tokens
					    : s->o.prefill_chunk_tokens;
}

/* ---- lists ---- */

static void list_remove(uint32_t *list, uint32_t *n, uint32_t slot)
{
	for (uint32_t i = 0; i < *n; i++)
		if (list[i] == slot) {
			memmove(list + i, list + i + 1,
				(*n - i - 1) * sizeof(uint32_t));
			(*n)--;
			return;
		}
}

static void unlist(struct o1_sched *s, struct seq *q)
{
	uint32_t slot = q->req->index;

	if (q->list == IN_RUNNING)
		list_remove(s->running, &s->n_running, slot);
	else if (q->list == IN_RESUME)
		list_remove(s->resume, &s->n_resume, slot);
	else if (q->list == IN_WAITING)
		list_remove(s->waiting, &s->n_waiting, slot);
	q->list = IN_NONE;
}

/* ---- events ---- */

/* The confidence summary of the current round. */
static void conf_get(const struct seq *q, float *mean_lp, float *min_lp,
		     float *mean_ent)
{
	*mean_lp = q->n_conf ? (float)(q->sum_lp / q->n_conf) : 0.0f;
	*min_lp = q->n_conf ? q->min_lp : 0.0f;
	*mean_ent = q->n_conf ? (float)(q->sum_ent / q->n_conf) : 0.0f;
}

static void conf_add(struct seq *q, const struct o1_sampling_out *smp)
{
	if (!q->n_conf || smp->logprob < q->min_lp)
		q->min_lp = smp->logprob;
	q->sum_lp += smp->logprob;
	q->sum_ent += smp->entropy;
	q->n_conf++;
}

static void conf_reset(struct seq *q)
{
	q->sum_lp = q->sum_ent = 0.0;
	q->min_lp = 0.0f;
	q->n_conf = 0;
}

/* The ROUND event of the current round (stop filled by the caller). */
static void make_round(const struct seq *q, enum o1_finish_reason reason,
		       union o1_wire_entry *ev)
{
	struct o1_wire_round *w = &ev->round;

	memset(ev, 0, sizeof(*ev));
	w->op = O1_EV_ROUND;
	w->round = (uint8_t)q->round;
	w->reason = (uint8_t)reason;
	w->prompt_tokens = q->n_prompt;
	w->req_id = q->req->req_id;
	w->generated_tokens = q->n_conf;
	w->cached_tokens = q->cached_round;
	conf_get(q, &w->mean_logprob, &w->min_logprob, &w->mean_entropy);
	w->text_bytes = q->n_answer;
	w->latency_ns = now_ns() - q->round_start_ns;
}

static void push_round(struct o1_sched *s, struct seq *q,
		       union o1_wire_entry *ev, enum o1_refine_stop stop)
{
	ev->round.stop = (uint8_t)stop;
	q->cached_total += q->cached_round;
	if (ev->round.round)
		s->st.refine_cached_tokens += q->cached_round;
	q->round_sent = true;
	q->rounds_sent++;
	o1_req_out_push(q->req, ev);
}

static enum o1_refine_stop stop_of(enum o1_finish_reason reason)
{
	return reason == O1_FINISH_CANCELLED ? O1_REFINE_CANCELLED
					     : O1_REFINE_ERROR;
}

static void push_final(struct o1_sched *s, struct seq *q,
		       enum o1_finish_reason reason, int error)
{
	union o1_wire_entry ev = {0};
	struct o1_req *r = q->req;
	uint32_t gen =
	    atomic_load_explicit(&r->generated, memory_order_relaxed);

	if (q->refine_steps && !q->round_sent) {
		make_round(q, reason, &ev);
		q->stop = stop_of(reason);
		push_round(s, q, &ev, q->stop);
		memset(&ev, 0, sizeof(ev));
	}
	ev.final.op = O1_EV_FINAL;
	ev.final.reason = (uint8_t)reason;
	ev.final.error = error;
	ev.final.req_id = r->req_id;
	ev.final.prompt_tokens = q->prompt_total;
	ev.final.generated_tokens = gen;
	conf_get(q, &ev.final.mean_logprob, &ev.final.min_logprob,
		 &ev.final.mean_entropy);
	ev.final.conf_tokens = q->n_conf;
	ev.final.rounds = (uint8_t)q->rounds_sent;
	ev.final.refine_stop = (uint8_t)q->stop;
	ev.final.cached_tokens =
	    q->cached_total + (q->round_sent ? 0 : q->cached_round);
	if (reason == O1_FINISH_ERROR && s->o.metrics)
		o1_metrics_fail(s->o.metrics, o1_metrics_fail_reason(error));
	else if (reason == O1_FINISH_CANCELLED && error && s->o.metrics)
		o1_metrics_fail(s->o.metrics, O1_METRICS_FAIL_DRAINING);
	else if (reason == O1_FINISH_CANCELLED)
		count(s, O1_METRICS_CTR_REQUESTS_CANCELLED, 1);
	else
		count(s, O1_METRICS_CTR_REQUESTS_COMPLETED, 1);
	observe(s, O1_METRICS_HIST_E2E, now_ns() - r->submit_ns);
	atomic_store_explicit(&r->phase, O1_REQ_FINISHED, memory_order_relaxed);
	q->req = NULL;
	o1_req_out_push(r, &ev); /* the last touch of the slot */
}

/* Releases everything Q holds and produces its FINAL. */
static void finish(struct o1_sched *s, struct seq *q,
		   enum o1_finish_reason reason, int error)
{
	unlist(s, q);
	o1_kv_table_fini(s->o.pool, &q->table);
	o1_sampling_destroy(q->sampler);
	q->sampler = NULL;
	push_final(s, q, reason, error);
}

/* Text events: LEN bytes cut at character boundaries; the first event
 * carries the token of SMP (when not NULL) and its confidence. */
static void push_text(struct seq *q, const struct o1_sampling_out *smp,
		      const char *text, uint32_t len)
{
	bool conf = q->req->params.flags & O1_SUBMIT_CONFIDENCE;
	uint32_t off = 0;

	do {
		union o1_wire_entry ev = {0};
		uint32_t cut =
		    len - off < TEXT_PER_EV ? len - off : TEXT_PER_EV;

		while (off + cut < len && cut > 0 &&
		       ((uint8_t)text[off + cut] & 0xc0) == 0x80)
			cut--;
		ev.token.op = O1_EV_TOKEN;
		ev.token.req_id = q->req->req_id;
		ev.token.round = (uint8_t)q->round;
		if (smp) {
			ev.token.n_ids = 1;
			ev.token.ids[0] = (uint32_t)smp->id;
			ev.token.has_logprobs =
			    (smp->n_top || conf ? O1_TOKEN_LOGPROB : 0) |
			    (conf ? O1_TOKEN_ENTROPY : 0);
			ev.token.logprobs[0] = smp->logprob;
			ev.token.entropy = conf ? smp->entropy : 0.0f;
			ev.token.has_logprobs |= q->dev ? O1_TOKEN_DEVICE : 0;
			ev.token.dev_seq = q->dev ? q->dev_seq : 0;
			smp = NULL;
		}
		ev.token.text_len = (uint8_t)cut;
		memcpy(ev.token.text, text + off, cut);
		o1_req_out_push(q->req, &ev);
		off += cut;
	} while (off < len);
}

static void push_logprobs(struct seq *q, const struct o1_sampling_out *smp,
			  uint32_t position)
{
	for (uint32_t at = 0; at < smp->n_top; at += O1_WIRE_TOP_PER) {
		union o1_wire_entry ev = {0};
		uint32_t n = smp->n_top - at < O1_WIRE_TOP_PER
				 ? smp->n_top - at
				 : O1_WIRE_TOP_PER;

		ev.logprobs.op = O1_EV_LOGPROBS;
		ev.logprobs.n = (uint8_t)n;
		ev.logprobs.position = position;
		ev.logprobs.req_id = q->req->req_id;
		for (uint32_t i = 0; i < n; i++) {
			ev.logprobs.ids[i] = (uint32_t)smp->top_id[at + i];
			ev.logprobs.logprobs[i] = smp->top_lp[at + i];
		}
		o1_req_out_push(q->req, &ev);
	}
}

/* ---- stop strings ---- */

/* Earliest match of any stop string in the held text, or -1. */
static int stop_match(const struct seq *q)
{
	const struct o1_req *r = q->req;
	int best = -1;

	for (uint32_t off = 0; off < r->stop_str_bytes;) {
		uint32_t len = r->stop_str[off];
		const char *str = (const char *)r->stop_str + off + 1;

		for (uint32_t at = 0; at + len <= q->n_hold; at++)
			if (memcmp(q->hold + at, str, len) == 0) {
				if (best < 0 || (int)at < best)
					best = (int)at;
				break;
			}
		off += 1 + len;
	}
	return best;
}

/* Bytes at the end of the held text that start some stop string. */
static uint32_t stop_prefix(const struct seq *q)
{
	const struct o1_req *r = q->req;
	uint32_t keep = 0;

	for (uint32_t off = 0; off < r->stop_str_bytes;) {
		uint32_t len = r->stop_str[off];
		const char *str = (const char *)r->stop_str + off + 1;

		for (uint32_t k = len - 1; k > keep; k--)
			if (k <= q->n_hold &&
			    memcmp(q->hold + q->n_hold - k, str, k) == 0) {
				keep = k;
				break;
			}
		off += 1 + len;
	}
	return keep;
}

/* How much of the held text may go out now; *stopped on a match. */
static uint32_t releasable(const struct seq *q, bool *stopped)
{
	int at;
	uint32_t cut;

	*stopped = false;
	if (!q->req->n_stop_str)
		return q->n_hold;
	at = stop_match(q);
	if (at >= 0) {
		*stopped = true;
		return (uint32_t)at;
	}
	cut = q->n_hold - stop_prefix(q);
	while (cut > 0 && cut < q->n_hold &&
	       ((uint8_t)q->hold[cut] & 0xc0) == 0x80)
		cut--;
	return cut;
}

/* Appends the text of ID (and, at the end, the detokenizer's leftovers)
 * to the held text. */
static void hold_append(struct o1_sched *s, struct seq *q, int32_t id, bool end)
{
	int n = 0;

	if (q->no_text || !s->o.tok)
		return;
	if (id >= 0)
		n = o1_tokenizer_decode_step(s->o.tok, &q->detok, id,
					     q->hold + q->n_hold,
					     HOLD_CAP - q->n_hold);
	if (n > 0)
		q->n_hold += (uint32_t)n;
	else if (n < 0)
		o1_warn("request %llu: token %d not decoded (%s)",
			(unsigned long long)q->req->req_id, id, o1_strerror(n));
	if (end) {
		n = o1_tokenizer_decode_flush(&q->detok, q->hold + q->n_hold,
					      HOLD_CAP - q->n_hold);
		if (n > 0)
			q->n_hold += (uint32_t)n;
	}
}

/* Keeps the text sent in this round for the next round's prompt. */
static void answer_append(struct o1_sched *s, struct seq *q, const char *text,
			  uint32_t len)
{
	if (!q->refine_steps)
		return;
	if (len > s->answer_cap - q->n_answer) {
		q->answer_cut = true;
		return;
	}
	memcpy(q->answer + q->n_answer, text, len);
	q->n_answer += len;
}

static void emit(struct o1_sched *s, struct seq *q,
		 const struct o1_sampling_out *smp, uint32_t pos, bool end,
		 bool *stopped)
{
	uint32_t out = releasable(q, stopped);

	if (end && !*stopped)
		out = q->n_hold;
	push_text(q, smp, q->hold, out);
	answer_append(s, q, q->hold, out);
	if (smp->n_top)
		push_logprobs(q, smp, pos);
	memmove(q->hold, q->hold + out, q->n_hold - out);
	q->n_hold -= out;
}

static enum o1_finish_reason wire_reason(enum o1_sampling_end f)
{
	return f == O1_SAMPLING_EOS	  ? O1_FINISH_EOS
	       : f == O1_SAMPLING_STOP_ID ? O1_FINISH_STOP
					  : O1_FINISH_LENGTH;
}

static void round_end(struct o1_sched *s, struct seq *q,
		      enum o1_finish_reason reason);

/* A sampled token (B's, sampled by sample_task): record, stream, maybe
 * finish. */
static void on_token(struct o1_sched *s, struct seq *q,
		     const struct batch_ent *b)
{
	struct o1_req *r = q->req;
	struct o1_sampling_out smp = b->smp;
	uint64_t now = now_ns();
	uint32_t pos;
	bool end, stopped;

	if (b->err) {
		finish(s, q, O1_FINISH_ERROR, b->err);
		return;
	}
	q->dev = b->dev;
	q->dev_seq = b->dev_seq;
	pos = atomic_fetch_add_explicit(&r->generated, 1, memory_order_relaxed);
	q->tokens[q->n_tokens++] = smp.id;
	conf_add(q, &smp);
	count(s, O1_METRICS_CTR_TOKENS_GENERATED, 1);
	observe(s, pos ? O1_METRICS_HIST_ITL : O1_METRICS_HIST_TTFT,
		now - (pos ? q->last_token_ns : r->submit_ns));
	q->last_token_ns = now;
	if (smp.end == O1_SAMPLING_GO && q->n_tokens >= s->o.max_context)
		smp.end = O1_SAMPLING_LENGTH;
	end = smp.end != O1_SAMPLING_GO;
	/* EOS and stop ids end the text: theirs is not sent */
	hold_append(s, q,
		    smp.end == O1_SAMPLING_EOS || smp.end == O1_SAMPLING_STOP_ID
			? -1
			: smp.id,
		    end);
	emit(s, q, &smp, pos, end, &stopped);
	if (!stopped && !end)
		return;
	if (q->refine_steps)
		round_end(s, q,
			  stopped ? O1_FINISH_STOP : wire_reason(smp.end));
	else
		finish(s, q, stopped ? O1_FINISH_STOP : wire_reason(smp.end),
		       0);
}

/* ---- admission of a new request ---- */

/* Splits the CHAT prompt copied at BUF (N bytes, NUL at BUF[N]) into
 * messages: "role\0content\0role\0content..." (a final NUL is
 * optional); text without any NUL is one user message. */
static int chat_split(const struct o1_req *r, char *buf, size_t n,
		      struct o1_chat_message *msg, size_t *n_msg)
{
	char *p = buf, *end = buf + n;

	*n_msg = 0;
	if (!memchr(buf, 0, n)) {
		msg[(*n_msg)++] = (struct o1_chat_message){"user", buf};
		return 0;
	}
	while (p < end) {
		char *role = p, *nul = memchr(p, 0, (size_t)(end - p));

		if (!nul || *n_msg == CHAT_MAX_MSG) {
			o1_warn("request %llu: chat prompt of %zu bytes: %s at "
				"byte %zu",
				(unsigned long long)r->req_id, n,
				nul ? "more than 64 messages"
				    : "a role without content",
				(size_t)(p - buf));
			return nul ? -O1_E_BOUNDS : -O1_E_FORMAT;
		}
		msg[*n_msg].role = role;
		msg[(*n_msg)++].content = nul + 1;
		nul = memchr(nul + 1, 0, (size_t)(end - nul - 1));
		p = nul ? nul + 1 : end + 1;
	}
	return 0;
}

/* Renders the CHAT prompt of Q's request into chat_buf (for a refinement
 * round, followed by the previous answer and the review instruction); *len
 * gets its length. */
static int render_chat(struct o1_sched *s, const struct seq *q, size_t *len)
{
	const struct o1_req *r = q->req;
	struct o1_chat_message msg[CHAT_MAX_MSG + 2];
	size_t n = r->prompt_bytes, n_msg, cap;
	char *out = s->chat_buf + n + 1;
	struct o1_jinja_error err;
	int ret;

	if (!s->o.chat) {
		o1_warn("request %llu: chat asked, but there is no chat "
			"template: send a prompt (completions), or set "
			"model.chat_template",
			(unsigned long long)r->req_id);
		return -O1_E_UNSUPPORTED;
	}
	memcpy(s->chat_buf, r->prompt, n);
	s->chat_buf[n] = 0;
	ret = chat_split(r, s->chat_buf, n, msg, &n_msg);
	if (ret)
		return ret;
	if (q->round) {
		msg[n_msg++] = (struct o1_chat_message){"assistant", q->prev};
		msg[n_msg++] = (struct o1_chat_message){"user", s->review};
	}
	cap = s->chat_cap - n - 1;
	ret = o1_chat_template_render(s->o.chat, msg, n_msg, true, out, cap,
				      &err);
	if (ret < 0)
		o1_warn("request %llu: the chat template failed at %u:%u: %s",
			(unsigned long long)r->req_id, err.line, err.col,
			err.msg);
	if (ret >= 0 && (size_t)ret >= cap) {
		o1_warn("request %llu: rendered chat prompt of %d bytes "
			"exceeds %zu",
			(unsigned long long)r->req_id, ret, cap);
		ret = -O1_E_BOUNDS;
	}
	if (ret < 0)
		return ret;
	memmove(s->chat_buf, out, (size_t)ret + 1);
	*len = (size_t)ret;
	return 0;
}

static int tokenize(struct o1_sched *s, struct seq *q)
{
	const struct o1_req *r = q->req;
	const char *text = (const char *)r->prompt;
	size_t len = r->prompt_bytes;
	unsigned flags = 0;
	int n, err;

	if (r->params.prompt_kind == O1_PROMPT_IDS) {
		uint32_t bos =
		    (r->params.flags & O1_SUBMIT_ADD_BOS) && s->o.bos_id >= 0;
		uint32_t np = r->prompt_bytes / 4;

		if (np + bos >= s->o.max_context)
			return -O1_E_CONTEXT;
		if (bos)
			q->tokens[0] = s->o.bos_id;
		memcpy(q->tokens + bos, r->prompt, (size_t)np * 4);
		for (uint32_t i = 0; i < np + bos; i++)
			if ((uint32_t)q->tokens[i] >= s->o.vocab_size)
				return -O1_E_BOUNDS;
		q->n_tokens = np + bos;
		return 0;
	}
	if (!s->o.tok)
		return -O1_E_UNSUPPORTED;
	if (r->params.flags & O1_SUBMIT_CHAT) {
		err = render_chat(s, q, &len);
		if (err)
			return err;
		text = s->chat_buf;
		/* the template wrote BOS where the model wants one */
		flags = O1_ENCODE_PARSE_SPECIAL;
	} else if (r->params.flags & O1_SUBMIT_ADD_BOS) {
		flags = O1_ENCODE_ADD_SPECIAL;
	}
	n = o1_tokenizer_encode(s->o.tok, text, len, flags, q->tokens,
				s->o.max_context);
	if (n < 0)
		return n;
	if (n == 0)
		return -O1_E_TOKENIZER;
	if ((uint32_t)n >= s->o.max_context)
		return -O1_E_CONTEXT;
	q->n_tokens = (uint32_t)n;
	return 0;
}

static int make_sampler(struct o1_sched *s, struct seq *q)
{
	const struct o1_req *r = q->req;
	const struct o1_wire_submit *w = &r->params;
	struct o1_sampling_req p = {
	    .temperature = w->temperature,
	    .top_p = w->top_p,
	    .min_p = w->min_p,
	    .repeat_penalty = w->repeat_penalty,
	    .presence_penalty = w->presence_penalty,
	    .frequency_penalty = w->frequency_penalty,
	    .top_k = w->top_k,
	    .n_logprobs = w->n_logprobs,
	    .max_tokens = w->max_tokens,
	    .seed = w->seed,
	    .eos_id = s->o.eos_id,
	    .ignore_eos = w->flags & O1_SUBMIT_IGNORE_EOS,
	    .stop_ids = r->stop_ids,
	    .n_stop_ids = r->n_stop_ids,
	};

	return o1_sampling_create(&p, s->o.vocab_size, q->tokens, q->n_tokens,
				  &q->sampler);
}

static uint32_t pages_for(const struct o1_sched *s, uint32_t tokens)
{
	return (tokens + s->page_tokens - 1) / s->page_tokens;
}

void o1_sched_add(struct o1_sched *s, struct o1_req *r)
{
	struct seq *q = &s->seqs[r->index];
	int err;

	memset(&q->detok, 0, sizeof(q->detok));
	q->req = r;
	q->n_tokens = q->n_computed = q->n_keyed = q->n_hold = 0;
	q->admitted_once = false;
	q->list = IN_NONE;
	q->no_text = r->params.flags & O1_SUBMIT_NO_TEXT;
	conf_reset(q);
	q->refine_steps = q->round = q->rounds_sent = 0;
	q->cached_round = q->cached_total = q->n_answer = q->n_prev = 0;
	q->answer_cut = q->round_sent = false;
	q->stop = O1_REFINE_NONE;
	q->round_start_ns = r->submit_ns;
	q->salt = o1_prefix_cache_salt(s->o.salt_secret, (uint32_t)r->uid);
	q->last_key = q->salt;
	o1_tokenizer_decode_init(&q->detok, O1_DECODE_SKIP_SPECIAL);
	err = tokenize(s, q);
	if (!err && pages_for(s, q->n_tokens + 1) >
			o1_kv_pool_layout(s->o.pool)->n_pages) {
		o1_warn("request %llu: %u prompt tokens need more KV pages "
			"than the pool has (%u)",
			(unsigned long long)r->req_id, q->n_tokens,
			o1_kv_pool_layout(s->o.pool)->n_pages);
		err = -O1_E_CONTEXT;
	}
	if (err == -O1_E_CONTEXT)
		o1_info("request %llu: prompt over the context limit of %u "
			"tokens",
			(unsigned long long)r->req_id, s->o.max_context);
	q->n_prompt = q->prompt_total = q->n_tokens;
	atomic_store_explicit(&r->n_prompt, q->n_prompt, memory_order_relaxed);
	if (!err && r->params.refine_steps > s->o.max_refine_steps) {
		o1_warn("request %llu: refine_steps %u above "
			"refine.max_steps %u",
			(unsigned long long)r->req_id, r->params.refine_steps,
			s->o.max_refine_steps);
		err = -O1_E_BOUNDS;
	}
	if (!err && (r->params.flags & O1_SUBMIT_DEVICE_LOGITS) &&
	    (r->devout_area < 0 ||
	     (uint32_t)r->devout_area >= s->o.devout_areas))
		err = -O1_E_NO_DEVOUT;
	if (!err)
		err = make_sampler(s, q);
	if (err) {
		o1_info("request %llu of client %u refused: %s",
			(unsigned long long)r->req_id, r->client_id,
			o1_strerror(err));
		finish(s, q, O1_FINISH_ERROR, err);
		return;
	}
	count(s, O1_METRICS_CTR_TOKENS_PROMPT, q->n_prompt);
	q->refine_steps = r->params.refine_steps;
	q->list = IN_WAITING;
	s->waiting[s->n_waiting++] = r->index;
	atomic_store_explicit(&r->phase, O1_REQ_WAITING, memory_order_relaxed);
}

/* ---- prefix cache ---- */

static void match_prefix(struct o1_sched *s, struct seq *q)
{
	uint32_t P = s->page_tokens, full = (q->n_tokens - 1) / P;
	uint32_t hits = 0;

	if (!s->o.prefix_cache)
		return;
	while (q->n_keyed < full) {
		const int32_t *t = q->tokens + (size_t)q->n_keyed * P;
		uint64_t key = o1_prefix_cache_key(q->last_key, t, P);
		uint32_t page;

		if (o1_prefix_cache_lookup(s->cache, key, q->last_key, t,
					   &page) ||
		    o1_kv_table_share(s->o.pool, &q->table, page))
			break;
		q->last_key = key;
		q->n_keyed++;
		hits++;
	}
	q->n_computed = q->n_keyed * P;
	s->st.prefix_hits += hits;
	s->st.prefix_misses += full - hits;
	count(s, O1_METRICS_CTR_PREFIX_HITS, hits);
	count(s, O1_METRICS_CTR_PREFIX_MISSES, full - hits);
}

/* Lists the pages Q filled completely since the last call. */
static void key_pages(struct o1_sched *s, struct seq *q)
{
	uint32_t P = s->page_tokens;

	if (!s->o.prefix_cache)
		return;
	while ((q->n_keyed + 1) * P <= q->n_computed) {
		const int32_t *t = q->tokens + (size_t)q->n_keyed * P;
		uint64_t key = o1_prefix_cache_key(q->last_key, t, P);

		o1_prefix_cache_insert(s->cache, key, q->last_key, t,
				       q->table.pages[q->n_keyed]);
		q->last_key = key;
		q->n_keyed++;
	}
}

static void reset_kv(struct o1_sched *s, struct seq *q)
{
	o1_kv_table_fini(s->o.pool, &q->table);
	q->n_computed = 0;
	q->n_keyed = 0;
	q->last_key = q->salt;
}

/* ---- refinement rounds ---- */

/* Why the loop ends after the current round, or NONE. */
static enum o1_refine_stop round_verdict(const struct o1_sched *s,
					 const struct seq *q)
{
	float mean_lp, min_lp, mean_ent;

	conf_get(q, &mean_lp, &min_lp, &mean_ent);
	if (q->n_conf && mean_lp >= s->o.refine_threshold)
		return O1_REFINE_CONFIDENT;
	if (q->round && q->n_answer == q->n_prev &&
	    memcmp(q->answer, q->prev, q->n_answer) == 0)
		return O1_REFINE_REPEAT;
	if (q->round >= q->refine_steps)
		return O1_REFINE_STEPS;
	if (q->answer_cut)
		return O1_REFINE_LIMIT;
	return O1_REFINE_NONE;
}

/* Makes the next round's prompt and sampler; the answer becomes prev. */
static int next_round(struct o1_sched *s, struct seq *q)
{
	char *t = q->prev;
	int err;

	q->prev = q->answer;
	q->answer = t;
	q->n_prev = q->n_answer;
	q->prev[q->n_prev] = 0;
	q->n_answer = 0;
	q->round++;
	err = tokenize(s, q);
	if (!err && pages_for(s, q->n_tokens + 1) >
			o1_kv_pool_layout(s->o.pool)->n_pages)
		err = -O1_E_CONTEXT;
	if (err) {
		o1_info("request %llu: refinement round %u not run: %s",
			(unsigned long long)q->req->req_id, q->round,
			o1_strerror(err));
		return err;
	}
	o1_sampling_destroy(q->sampler);
	q->sampler = NULL;
	return make_sampler(s, q);
}

/* Puts Q, with its new prompt, first in line again. */
static void requeue(struct o1_sched *s, struct seq *q)
{
	reset_kv(s, q);
	unlist(s, q);
	memset(&q->detok, 0, sizeof(q->detok));
	o1_tokenizer_decode_init(&q->detok, O1_DECODE_SKIP_SPECIAL);
	q->n_hold = 0;
	q->n_prompt = q->n_tokens;
	q->prompt_total += q->n_prompt;
	q->cached_round = 0;
	q->round_sent = false;
	q->round_start_ns = now_ns();
	conf_reset(q);
	atomic_store_explicit(&q->req->n_prompt, q->n_prompt,
			      memory_order_relaxed);
	count(s, O1_METRICS_CTR_TOKENS_PROMPT, q->n_prompt);
	s->st.refine_rounds++;
	q->list = IN_RESUME;
	s->resume[s->n_resume++] = q->req->index;
	atomic_store_explicit(&q->req->phase, O1_REQ_WAITING,
			      memory_order_relaxed);
}

/* The current round ended with REASON: report it, then run the next one
 * or finish. */
static void round_end(struct o1_sched *s, struct seq *q,
		      enum o1_finish_reason reason)
{
	enum o1_refine_stop stop = round_verdict(s, q);
	union o1_wire_entry ev;
	int err = 0;

	make_round(q, reason, &ev);
	if (stop == O1_REFINE_NONE) {
		err = next_round(s, q);
		if (err)
			stop = err == -O1_E_BOUNDS || err == -O1_E_CONTEXT
				   ? O1_REFINE_LIMIT
				   : O1_REFINE_ERROR;
	}
	push_round(s, q, &ev, stop);
	if (stop == O1_REFINE_NONE) {
		requeue(s, q);
		return;
	}
	q->stop = stop;
	if (stop == O1_REFINE_ERROR)
		finish(s, q, O1_FINISH_ERROR, err);
	else
		finish(s, q, reason, 0);
}

/* ---- preemption ---- */

static void preempt(struct o1_sched *s, struct seq *q)
{
	o1_info("preempting request %llu (client %u): %u tokens to "
		"recompute",
		(unsigned long long)q->req->req_id, q->req->client_id,
		q->n_tokens);
	reset_kv(s, q);
	unlist(s, q);
	q->list = IN_RESUME;
	s->resume[s->n_resume++] = q->req->index;
	s->st.preemptions++;
	count(s, O1_METRICS_CTR_PREEMPTIONS, 1);
	atomic_store_explicit(&q->req->phase, O1_REQ_WAITING,
			      memory_order_relaxed);
}

/* Covers [0, n) in Q's table, evicting cached pages, then preempting the
 * newest running sequences (Q itself last). Returns 0, or -ENOSPC when Q
 * was preempted or (PREEMPT false) no page could be found. */
static int reserve(struct o1_sched *s, struct seq *q, uint32_t n,
		   bool may_preempt)
{
	for (;;) {
		int err = o1_kv_table_reserve(s->o.pool, &q->table, n);
		uint32_t need;
		struct seq *victim;

		if (err != -ENOSPC)
			return err;
		need = pages_for(s, n) - q->table.n_pages;
		if (o1_prefix_cache_evict(s->cache, need))
			continue;
		if (!may_preempt || !s->n_running)
			return -ENOSPC;
		victim = &s->seqs[s->running[s->n_running - 1]];
		preempt(s, victim);
		if (victim == q)
			return -ENOSPC;
	}
}

/* ---- one step ---- */

static bool out_room(struct seq *q)
{
	return o1_req_out_free(q->req) >= OUT_NEED;
}

/* Tokens of Q to compute this step (0: none); samples when it reaches
 * the end of the known tokens, which needs room in the out ring. */
static uint32_t plan(const struct o1_sched *s, struct seq *q, uint32_t budget,
		     bool *samples)
{
	uint32_t left = q->n_tokens - q->n_computed;
	uint32_t n = left < budget ? left : budget;

	if (left > 1 && n > s->lim_chunk)
		n = s->lim_chunk;
	*samples = n == left;
	if (*samples && !out_room(q)) {
		n--;
		*samples = false;
	}
	return n;
}

static void batch_add(struct o1_sched *s, struct seq *q, uint32_t n,
		      bool samples)
{
	struct batch_ent *b = &s->batch[s->n_batch];
	struct o1_step_seq *ss = &s->step_seqs[s->n_batch];

	b->slot = q->req->index;
	b->n = n;
	b->samples = samples;
	b->host = samples && !s->o.sample_in_backend;
	ss->tokens = q->tokens + q->n_computed;
	ss->n_tokens = n;
	ss->start_pos = q->n_computed;
	ss->pages = q->table.pages;
	ss->n_pages = q->table.n_pages;
	ss->all_logits = false;
	s->n_batch++;
}

static void schedule_running(struct o1_sched *s, uint32_t *budget)
{
	for (uint32_t i = 0; i < s->n_running; i++) {
		struct seq *q = &s->seqs[s->running[i]];
		bool samples;
		uint32_t n;

		if (s->n_batch == s->lim_running || !*budget)
			return;
		n = plan(s, q, *budget, &samples);
		if (!n)
			continue;
		if (reserve(s, q, q->n_computed + n, true)) {
			if (q->list != IN_RUNNING)
				return; /* Q itself was preempted: the last */
			continue;
		}
		batch_add(s, q, n, samples);
		*budget -= n;
	}
}

/* The next request to admit: resumed ones first, else the oldest request
 * of the least-served client. */
static uint32_t pick(const struct o1_sched *s, uint32_t **list, uint32_t **n)
{
	uint32_t best = 0, best_served = UINT32_MAX;

	if (s->n_resume) {
		*list = (uint32_t *)s->resume;
		*n = (uint32_t *)&s->n_resume;
		return 0;
	}
	for (uint32_t i = 0; i < s->n_waiting; i++) {
		uint32_t c = s->seqs[s->waiting[i]].req->client_id;

		if (s->served[c % N_FAIR] < best_served) {
			best_served = s->served[c % N_FAIR];
			best = i;
		}
	}
	*list = (uint32_t *)s->waiting;
	*n = (uint32_t *)&s->n_waiting;
	return best;
}

static bool try_admit(struct o1_sched *s, struct seq *q, uint32_t *budget)
{
	uint32_t avail, need, n;
	bool samples;

	match_prefix(s, q);
	need = pages_for(s, q->n_tokens + 1) - q->table.n_pages;
	avail = o1_kv_pool_free_pages(s->o.pool) +
		o1_prefix_cache_evictable(s->cache);
	n = plan(s, q, *budget, &samples);
	if (need > avail || !n || reserve(s, q, q->n_computed + n, false)) {
		reset_kv(s, q);
		return false;
	}
	if (!q->admitted_once)
		observe(s, O1_METRICS_HIST_QUEUE_WAIT,
			now_ns() - q->req->submit_ns);
	q->cached_round = q->n_keyed * s->page_tokens;
	q->admitted_once = true;
	batch_add(s, q, n, samples);
	*budget -= n;
	return true;
}

static void admit(struct o1_sched *s, uint32_t *budget)
{
	while (s->n_batch < s->lim_running && *budget &&
	       s->n_running < s->lim_running && (s->n_resume || s->n_waiting)) {
		uint32_t *list, *n;
		uint32_t at = pick(s, &list, &n);
		uint32_t slot = list[at];
		struct seq *q = &s->seqs[slot];

		if (!try_admit(s, q, budget))
			return;
		list_remove(list, n, slot);
		q->list = IN_RUNNING;
		s->running[s->n_running++] = slot;
		s->served[q->req->client_id % N_FAIR]++;
		atomic_store_explicit(&q->req->phase, O1_REQ_RUNNING,
				      memory_order_relaxed);
	}
}

static void reap(struct o1_sched *s, uint32_t *list, uint32_t *n)
{
	for (uint32_t i = 0; i < *n;) {
		struct seq *q = &s->seqs[list[i]];
		int c =
		    atomic_load_explicit(&q->req->cancel, memory_order_relaxed);

		if (c == O1_REQ_RUN) {
			i++;
			continue;
		}
		finish(s, q, O1_FINISH_CANCELLED,
		       c == O1_REQ_DRAIN ? -O1_E_DRAINING : 0);
	}
}

/* Samples batch entry TASK from its logits row, or records the sample
 * the backend drew: touches only that sequence's sampler and the entry,
 * so tasks run on any thread. */
static void sample_task(void *arg, uint32_t task, uint32_t worker)
{
	struct o1_sched *s = arg;
	struct batch_ent *b = &s->batch[task];
	struct o1_sampler *smp = s->seqs[b->slot].sampler;

	(void)worker;
	if (b->host)
		b->err = o1_sampling_next(
		    smp, s->logits + (size_t)task * s->o.vocab_size, &b->smp);
	else if (b->samples)
		b->err = o1_sampling_accept(smp, &s->results[task], &b->smp);
}

/* Samples every sequence of the step (in parallel when several are
 * sampled on the host), then records and streams them in batch order, as
 * serial sampling would. */
static void after_step(struct o1_sched *s)
{
	uint32_t n_host = 0;

	for (uint32_t i = 0; i < s->n_batch; i++)
		n_host += s->batch[i].host;
	if (n_host > 1 && s->samplers)
		o1_threads_run(s->samplers, s->n_batch, sample_task, s);
	else
		for (uint32_t i = 0; i < s->n_batch; i++)
			sample_task(s, i, 0);
	for (uint32_t i = 0; i < s->n_batch; i++) {
		struct seq *q = &s->seqs[s->batch[i].slot];

		q->n_computed += s->batch[i].n;
		key_pages(s, q);
		if (s->batch[i].samples)
			on_token(s, q, &s->batch[i]);
	}
}

static void update_gauges(struct o1_sched *s)
{
	const struct o1_kv_layout *l = o1_kv_pool_layout(s->o.pool);

	s->st.running = s->n_running;
	s->st.waiting = s->n_waiting + s->n_resume;
	s->st.pages_total = l->n_pages;
	s->st.pages_free = o1_kv_pool_free_pages(s->o.pool);
	s->st.pages_cached = o1_prefix_cache_evictable(s->cache);
	if (!s->o.metrics)
		return;
	o1_metrics_set(s->o.metrics, O1_METRICS_CTR_REQUESTS_RUNNING,
		       s->st.running);
	o1_metrics_set(s->o.metrics, O1_METRICS_CTR_REQUESTS_WAITING,
		       s->st.waiting);
	o1_metrics_set(s->o.metrics, O1_METRICS_CTR_KV_PAGES_TOTAL,
		       s->st.pages_total);
	o1_metrics_set(s->o.metrics, O1_METRICS_CTR_KV_PAGES_USED,
		       s->st.pages_total - s->st.pages_free -
			   s->st.pages_cached);
	o1_metrics_set(s->o.metrics, O1_METRICS_CTR_KV_PAGES_CACHED,
		       s->st.pages_cached);
}

/* The step's device output entries: every sampled row of a request
 * asking for device logits, at its area's next sequence number. */
static void plan_devout(struct o1_sched *s, struct o1_step *step)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->n_batch; i++) {
		struct batch_ent *b = &s->batch[i];
		const struct o1_req *r = s->seqs[b->slot].req;

		b->dev =
		    b->samples && (r->params.flags & O1_SUBMIT_DEVICE_LOGITS);
		if (!b->dev)
			continue;
		b->dev_seq = s->devout_seq[r->devout_area]++;
		s->devout[n++] =
		    (struct o1_step_devout){.row = i,
					    .area = (uint32_t)r->devout_area,
					    .seq = b->dev_seq};
	}
	step->devout = n ? s->devout : NULL;
	step->n_devout = n;
}

/* Sampling in the backend: batch entry I's row, a greedy one (result
 * ignored) when it does not sample or is sampled on the host because its
 * penalty list does not fit the room left. */
static void sample_row(struct o1_sched *s, uint32_t i)
{
	struct batch_ent *b = &s->batch[i];
	struct o1_sample_row *r = &s->rows[i];
	uint32_t n;

	if (b->samples &&
	    !o1_sampling_row(s->seqs[b->slot].sampler, r, s->pens + s->n_pens,
			     s->o.sample_pens - s->n_pens, &n)) {
		r->pen_off = s->n_pens;
		s->n_pens += n;
		return;
	}
	b->host = b->samples;
	*r = (struct o1_sample_row){.top_p = 1, .repetition_penalty = 1};
}

/* Asks STEP for samples; returns whether it needs the logits too. */
static bool ask_samples(struct o1_sched *s, struct o1_step *step)
{
	bool host = false;

	s->n_pens = 0;
	for (uint32_t i = 0; i < s->n_batch; i++) {
		sample_row(s, i);
		host |= s->batch[i].host;
	}
	step->sample_rows = s->rows;
	step->pens = s->pens;
	step->n_pens = s->n_pens;
	step->samples = s->results;
	return host;
}

static int run_batch(struct o1_sched *s)
{
	struct o1_step step = {.seqs = s->step_seqs,
			       .n_seqs = s->n_batch,
			       .logits = s->logits,
			       .logits_rows = s->n_batch};
	uint64_t t0;
	int err;

	plan_devout(s, &step);
	if (s->o.sample_in_backend && !ask_samples(s, &step))
		step.logits = NULL;
	t0 = now_ns();
	err = s->o.step(s->o.step_ctx, &step);

	observe(s, O1_METRICS_HIST_STEP, now_ns() - t0);
	count(s, O1_METRICS_CTR_STEPS, 1);
	s->st.steps++;
	if (!err)
		return 0;
	o1_err("engine step of %u sequences failed: %s; failing them",
	       s->n_batch, o1_strerror(err));
	for (uint32_t i = 0; i < s->n_batch; i++)
		finish(s, &s->seqs[s->batch[i].slot], O1_FINISH_ERROR, err);
	return err;
}

int o1_sched_step(struct o1_sched *s)
{
	uint32_t budget = s->lim_batch;
	int err = 0;

	reap(s, s->running, &s->n_running);
	reap(s, s->resume, &s->n_resume);
	reap(s, s->waiting, &s->n_waiting);
	s->n_batch = 0;
	schedule_running(s, &budget);
	admit(s, &budget);
	if (s->n_batch)
		err = run_batch(s);
	if (s->n_batch && !err)
		after_step(s);
	update_gauges(s);
	return err ? err : (int)s->n_batch;
}

void o1_sched_fail_all(struct o1_sched *s)
{
	while (s->n_running)
		finish(s, &s->seqs[s->running[0]], O1_FINISH_CANCELLED,
		       -O1_E_DRAINING);
	while (s->n_resume)
		finish(s, &s->seqs[s->resume[0]], O1_FINISH_CANCELLED,
		       -O1_E_DRAINING);
	while (s->n_waiting)
		finish(s, &s->seqs[s->waiting[0]], O1_FINISH_CANCELLED,
		       -O1_E_DRAINING);
	update_gauges(s);
}

uint32_t o1_sched_active(const struct o1_sched *s)
{
	return s->n_running + s->n_resume + s->n_waiting;
}

void o1_sched_stats(const struct o1_sched *s, struct o1_sched_stats *out)
{
	*out = s->st;
}

/* The scheduler (see scheduler.h). Sequence i is the state of request slot
 * i. Lists hold slot indices: running (admission order, newest last),
 * resume (preempted or unparked, FIFO), waiting (arrival order) and parked
 * (out ring full, parking order). A sequence is in at most one list; it is
 * in none once its FINAL is produced.
 *
 * Invariants of a listed sequence:
 * - tokens[0, n_tokens) are the prompt then the generated tokens;
 *   n_computed <= n_tokens positions have their KV in table's pages, and
 *   at least one token is always left to compute (n_computed < n_tokens);
 * - pages [0, n_keyed) of the table are listed in the prefix cache (or
 *   were found there), last_key being the key of page n_keyed - 1 (the
 *   salt when n_keyed = 0);
 * - out is the sequence's output stream (seq_output.h: held text, stop
 *   strings, events, the round's counts) and refine its refinement state
 *   (refine.h); both answer verdicts and never call back in here;
 * - a sequence in resume or waiting has room in its out ring (only running
 *   ones produce events), so admission never waits on a reader; one
 *   without room is parked instead;
 * - only parked and resumed sequences hold pages without running, and a
 *   resumed one holding pages (unparked) skips the prefix match: its table
 *   already covers n_computed;
 * - share counts every listed sequence as held by its client and every
 *   running one as running (client_share.h).
 *
 * The scheduler keeps the lists, the pages, the sampler and the metrics;
 * prompt.c makes the tokens a round starts from.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_share.h"
#include "common/error.h"
#include "common/log.h"
#include "kernels/threads.h"
#include "metrics/metrics_writer.h"
#include "metrics_batch.h"
#include "prefill_budget.h"
#include "prefix_cache.h"
#include "prompt.h"
#include "refine.h"
#include "sampler/sampler.h"
#include "scheduler.h"
#include "seq_output.h"

#define N_FAIR 1024

enum seq_list { IN_NONE, IN_WAITING, IN_RESUME, IN_RUNNING, IN_PARKED };

struct seq {
	struct o1_req *req;
	int32_t *tokens; /* max_context + 1 */
	uint32_t n_tokens, n_computed;
	uint32_t *pages;
	struct o1_block_table table;
	struct o1_sampler *sampler;
	struct o1_seq_output out;
	struct o1_refine refine;
	uint32_t n_keyed;
	uint64_t last_key, salt;
	uint64_t last_token_ns;
	uint64_t idle_ns;   /* parked: when its reader last took something */
	uint32_t idle_tail; /* parked: the out ring's tail then */
	uint64_t visit;	    /* the stamp of the last pass that planned it */
	enum seq_list list;
	bool admitted_once;
};

struct batch_ent {
	uint32_t slot;
	uint32_t n;
	bool prefill; /* n counts against the step's prefill budget */
	uint32_t took, took_whole; /* what it took from prefill_left,
				    * whole_left (given back by unbatch) */
	bool samples;
	bool host;	  /* sampled on the host, from the step's logits */
	bool dev;	  /* its row goes to a device output area */
	uint32_t dev_seq; /* at this sequence number */
	int err;	  /* of the sampling, then smp is the token */
	struct o1_sampler_out smp;
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
	uint32_t *parked, n_parked;
	uint32_t served[N_FAIR];
	struct o1_client_share *share;
	uint64_t stamp;	  /* the current scheduling pass (see visited) */
	/* this step's budgets: tokens left, prefill tokens left (the step
	 * carries min of the two at most in prefill chunks), and what a
	 * prompt admitted whole may still take (prefill_whole_ratio) */
	uint32_t left, prefill_left, whole_left;
	uint64_t wake_ns; /* the earliest stall deadline; 0: none */
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
	uint32_t *masks;		/* sample_masks token bitmasks */
	uint32_t n_masks, mask_words;	/* used this step; words of one */
	struct o1_prompt *prompt;
	uint32_t answer_cap;
	struct o1_sched_stats st;
	struct o1_metrics_batch step_metrics; /* the step's tokens */
	struct o1_prefill_budget pb;	      /* prefill_time_ratio's */
	double whole_ratio; /* max(prefill_whole_ratio, prefill_time_ratio) */
	double burst_ratio; /* a burst's chunks': the same, or of
			     * prefill_burst_ratio */
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

/* Q's answer buffers (when requests may refine): the stream's current
 * answer and the previous one, trading places each round. */
static int alloc_answers(struct o1_sched *s, struct seq *q)
{
	char *answer = NULL, *prev = NULL;

	if (s->o.max_refine_steps) {
		answer = malloc((size_t)s->answer_cap + 1);
		prev = malloc((size_t)s->answer_cap + 1);
	}
	o1_seq_output_init(&q->out, answer, s->answer_cap);
	o1_refine_init(&q->refine, prev);
	if (s->o.max_refine_steps && (!answer || !prev))
		return -ENOMEM;
	return 0;
}

static int alloc_seqs(struct o1_sched *s)
{
	uint32_t n_pages =
	    (s->o.max_context + 1 + s->page_tokens - 1) / s->page_tokens;
	int err;

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
		err = alloc_answers(s, q);
		if (err)
			return err;
	}
	return 0;
}

static int alloc_lists(struct o1_sched *s)
{
	size_t n = s->o.n_slots;

	s->running = malloc(n * sizeof(uint32_t));
	s->resume = malloc(n * sizeof(uint32_t));
	s->waiting = malloc(n * sizeof(uint32_t));
	s->parked = malloc(n * sizeof(uint32_t));
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
		s->mask_words = o1_sample_mask_words(s->o.vocab_size);
		s->masks = malloc(((size_t)s->o.sample_masks * s->mask_words +
				   1) *
				  sizeof(*s->masks));
		if (!s->rows || !s->results || !s->pens || !s->masks)
			return -ENOMEM;
	}
	if (!s->running || !s->resume || !s->waiting || !s->parked ||
	    !s->batch || !s->step_seqs || !s->logits)
		return -ENOMEM;
	return o1_client_share_create(s->o.n_slots, &s->share);
}

static int make_prompt(struct o1_sched *s)
{
	struct o1_prompt_opts p = {
	    .tok = s->o.tok,
	    .chat = s->o.chat,
	    .review = s->o.refine_review,
	    .vocab_size = s->o.vocab_size,
	    .max_context = s->o.max_context,
	    .max_prompt_bytes = s->o.max_prompt_bytes,
	    .bos_id = s->o.bos_id,
	};

	return o1_prompt_create(&p, &s->prompt);
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
	o1_prefill_budget_init(&s->pb, o->prefill_time_ratio, s->page_tokens);
	s->whole_ratio = o->prefill_whole_ratio > o->prefill_time_ratio
			     ? o->prefill_whole_ratio
			     : o->prefill_time_ratio;
	s->burst_ratio = !(o->prefill_burst_ratio > 0) ? s->whole_ratio
			 : o->prefill_burst_ratio > o->prefill_time_ratio
			     ? o->prefill_burst_ratio
			     : o->prefill_time_ratio;
	s->answer_cap = o->max_prompt_bytes;
	err = alloc_seqs(s);
	if (!err)
		err = alloc_lists(s);
	if (!err)
		err = make_prompt(s);
	s->o.refine_review = NULL; /* borrowed: prompt.c keeps a copy */
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
	o1_client_share_destroy(s->share);
	o1_threads_destroy(s->samplers);
	for (uint32_t i = 0; s->seqs && i < s->o.n_slots; i++) {
		o1_kv_table_fini(s->o.pool, &s->seqs[i].table);
		o1_sampler_destroy(s->seqs[i].sampler);
		free(s->seqs[i].tokens);
		free(s->seqs[i].pages);
		free(s->seqs[i].out.answer);
		free(s->seqs[i].refine.prev);
	}
	free(s->seqs);
	free(s->running);
	free(s->resume);
	free(s->waiting);
	free(s->parked);
	free(s->batch);
	free(s->step_seqs);
	free(s->logits);
	free(s->devout);
	free(s->devout_seq);
	free(s->rows);
	free(s->results);
	free(s->pens);
	free(s->masks);
	o1_prompt_destroy(s->prompt);
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

/* List L and its count (NULL for IN_NONE). */
static uint32_t *list_of(struct o1_sched *s, enum seq_list l, uint32_t **n)
{
	switch (l) {
	case IN_WAITING:
		*n = &s->n_waiting;
		return s->waiting;
	case IN_RESUME:
		*n = &s->n_resume;
		return s->resume;
	case IN_RUNNING:
		*n = &s->n_running;
		return s->running;
	case IN_PARKED:
		*n = &s->n_parked;
		return s->parked;
	default:
		*n = NULL;
		return NULL;
	}
}

static void unlist(struct o1_sched *s, struct seq *q)
{
	uint32_t *n, *list = list_of(s, q->list, &n);

	if (list)
		list_remove(list, n, q->req->index);
	if (q->list == IN_RUNNING)
		o1_client_share_run(s->share, q->req->client_id, -1);
	q->list = IN_NONE;
}

/* Appends Q (in no list) to list L. */
static void enlist(struct o1_sched *s, struct seq *q, enum seq_list l)
{
	uint32_t *n, *list = list_of(s, l, &n);

	list[(*n)++] = q->req->index;
	q->list = l;
	if (l == IN_RUNNING)
		o1_client_share_run(s->share, q->req->client_id, 1);
}

static bool holds_kv(const struct seq *q)
{
	return q->table.n_pages > 0;
}

/* Parks Q (in no list): it waits for its reader, keeping its pages, until
 * its stall deadline. */
static void park(struct o1_sched *s, struct seq *q)
{
	uint64_t limit = (uint64_t)s->o.stall_timeout_ms * 1000000ull;

	q->idle_ns = now_ns();
	q->idle_tail =
	    atomic_load_explicit(&q->req->out_tail, memory_order_acquire);
	enlist(s, q, IN_PARKED);
	if (limit && (!s->wake_ns || q->idle_ns + limit < s->wake_ns))
		s->wake_ns = q->idle_ns + limit;
}

/* Puts Q (in no list, not running) in line again: resumed when its out
 * ring has room, parked otherwise. */
static void line_up(struct o1_sched *s, struct seq *q)
{
	if (o1_seq_output_room(&q->out))
		enlist(s, q, IN_RESUME);
	else
		park(s, q);
	atomic_store_explicit(&q->req->phase, O1_REQ_WAITING,
			      memory_order_relaxed);
}

/* ---- the end of a sequence ---- */

/* Produces Q's ROUND (its stop STOP) and counts its cached tokens. */
static void report_round(struct o1_sched *s, struct seq *q,
			 enum o1_finish_reason reason, enum o1_refine_stop stop)
{
	union o1_wire_entry ev;

	o1_seq_output_round(&q->out, reason, now_ns(), &ev);
	s->st.refine_cached_tokens +=
	    o1_seq_output_push_round(&q->out, &ev, stop);
}

static void count_final(struct o1_sched *s, enum o1_finish_reason reason,
			int error)
{
	if (reason == O1_FINISH_ERROR && s->o.metrics)
		o1_metrics_fail(s->o.metrics, o1_metrics_fail_reason(error));
	else if (reason == O1_FINISH_CANCELLED)
		count(s, O1_METRICS_CTR_REQUESTS_CANCELLED, 1);
	else
		count(s, O1_METRICS_CTR_REQUESTS_COMPLETED, 1);
}

/* Releases everything Q holds and produces its FINAL (after the ROUND of
 * a refinement round it cuts short). */
static void finish(struct o1_sched *s, struct seq *q,
		   enum o1_finish_reason reason, int error)
{
	struct o1_req *r = q->req;
	bool held = q->list != IN_NONE;

	unlist(s, q);
	if (held)
		o1_client_share_drop(s->share, r->client_id);
	o1_kv_table_fini(s->o.pool, &q->table);
	o1_sampler_destroy(q->sampler);
	q->sampler = NULL;
	if (q->refine.steps && !q->out.round_sent)
		report_round(s, q, reason, o1_refine_stop_cut(reason));
	count_final(s, reason, error);
	observe(s, O1_METRICS_HIST_E2E, now_ns() - r->submit_ns);
	atomic_store_explicit(&r->phase, O1_REQ_FINISHED, memory_order_relaxed);
	q->req = NULL;
	o1_seq_output_final(&q->out, reason, error); /* the last touch */
}

static void round_end(struct o1_sched *s, struct seq *q,
		      enum o1_finish_reason reason);

/* A sampled token (B's, sampled by sample_task) at NOW (the step's end):
 * record, stream, maybe finish. Its counter and latency go to the step's
 * metrics batch (published once the step's rows are streamed), and the
 * request's count is stored, not added atomically (the engine is its
 * only writer): per row, locked adds on lines other threads read cost
 * more than the rest of the row (issue 17). */
static void on_token(struct o1_sched *s, struct seq *q,
		     const struct batch_ent *b, uint64_t now)
{
	struct o1_req *r = q->req;
	struct o1_seq_token t = {
	    .smp = &b->smp, .dev = b->dev, .dev_seq = b->dev_seq};
	enum o1_finish_reason reason;

	if (b->err) {
		finish(s, q, O1_FINISH_ERROR, b->err);
		return;
	}
	t.pos = atomic_load_explicit(&r->generated, memory_order_relaxed);
	atomic_store_explicit(&r->generated, t.pos + 1, memory_order_relaxed);
	q->tokens[q->n_tokens++] = b->smp.id;
	t.full = q->n_tokens >= s->o.max_context;
	o1_metrics_batch_add(&s->step_metrics, O1_METRICS_CTR_TOKENS_GENERATED,
			     1);
	o1_metrics_batch_observe_us(
	    &s->step_metrics,
	    t.pos ? O1_METRICS_HIST_ITL : O1_METRICS_HIST_TTFT,
	    (now - (t.pos ? q->last_token_ns : r->submit_ns)) / 1000);
	q->last_token_ns = now;
	if (o1_seq_output_token(&q->out, &t, &reason) == O1_SEQ_GO)
		return;
	if (q->refine.steps)
		round_end(s, q, reason);
	else
		finish(s, q, reason, 0);
}

/* ---- admission of a new request ---- */

_Static_assert(O1_REQ_STOP_IDS <= O1_SAMPLER_MAX_STOP_IDS,
	       "every stop id of a request reaches its sampler");

/* The sampler of Q's request, with its prompt recorded (penalties) and
 * its grammar (a compiled one: the engine gets no other). */
static int make_sampler(struct o1_sched *s, struct seq *q)
{
	const struct o1_req *r = q->req;
	const struct o1_wire_submit *w = &r->params;
	struct o1_sampler_params p = {
	    .temperature = w->temperature,
	    .top_k = w->top_k,
	    .top_p = w->top_p,
	    .min_p = w->min_p,
	    .repetition_penalty = w->repeat_penalty,
	    .presence_penalty = w->presence_penalty,
	    .frequency_penalty = w->frequency_penalty,
	    .seed = w->seed,
	    .n_logprobs = w->n_logprobs,
	    .max_tokens = w->max_tokens,
	    .eos_id = s->o.eos_id,
	    .ignore_eos = w->flags & O1_SUBMIT_IGNORE_EOS,
	    .n_stop_ids = r->n_stop_ids,
	};
	int err;

	for (uint32_t i = 0; i < r->n_stop_ids; i++)
		p.stop_ids[i] = (int32_t)r->stop_ids[i];
	err = o1_sampler_create(&p, s->o.vocab_size, &q->sampler);
	if (!err)
		err = o1_sampler_add_prompt(q->sampler, q->tokens, q->n_tokens);
	/* structured output: a matcher at the grammar's start, each round;
	 * the sampler then samples on the host (o1_sampler_row refuses) */
	if (!err && r->grammar)
		err = o1_gentry_constrain(r->grammar, q->sampler);
	return err;
}

static uint32_t pages_for(const struct o1_sched *s, uint32_t tokens)
{
	return (tokens + s->page_tokens - 1) / s->page_tokens;
}

static bool fits_pool(const struct o1_sched *s, const struct seq *q)
{
	return pages_for(s, q->n_tokens + 1) <=
	       o1_kv_pool_layout(s->o.pool)->n_pages;
}

/* Q's state for request R, before its prompt is known. */
static void seq_start(struct o1_sched *s, struct seq *q, struct o1_req *r)
{
	q->req = r;
	q->n_tokens = q->n_computed = q->n_keyed = 0;
	q->admitted_once = false;
	q->list = IN_NONE;
	q->salt = o1_prefix_cache_salt(s->o.salt_secret, (uint32_t)r->uid);
	q->last_key = q->salt;
	o1_seq_output_start(&q->out, r, s->o.tok, r->submit_ns);
	o1_refine_start(&q->refine, 0);
}

/* Q's first prompt, as tokens that leave room in the context and fit
 * the pool. */
static int first_prompt(struct o1_sched *s, struct seq *q)
{
	struct o1_req *r = q->req;
	int err =
	    o1_prompt_tokenize(s->prompt, r, NULL, q->tokens, &q->n_tokens);

	if (!err && !fits_pool(s, q)) {
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
	o1_seq_output_prompt(&q->out, q->n_tokens);
	atomic_store_explicit(&r->n_prompt, q->n_tokens, memory_order_relaxed);
	return err;
}

/* What R asks for beyond its prompt that this daemon cannot give. */
static int check_asks(const struct o1_sched *s, const struct o1_req *r)
{
	if (r->params.refine_steps > s->o.max_refine_steps) {
		o1_warn("request %llu: refine_steps %u above "
			"refine.max_steps %u",
			(unsigned long long)r->req_id, r->params.refine_steps,
			s->o.max_refine_steps);
		return -O1_E_BOUNDS;
	}
	if ((r->params.flags & O1_SUBMIT_DEVICE_LOGITS) &&
	    (r->devout_area < 0 ||
	     (uint32_t)r->devout_area >= s->o.devout_areas))
		return -O1_E_NO_DEVOUT;
	return 0;
}

void o1_sched_add(struct o1_sched *s, struct o1_req *r)
{
	struct seq *q = &s->seqs[r->index];
	int err;

	seq_start(s, q, r);
	err = first_prompt(s, q);
	if (!err)
		err = check_asks(s, r);
	if (!err)
		err = make_sampler(s, q);
	if (err) {
		o1_info("request %llu of client %u refused: %s",
			(unsigned long long)r->req_id, r->client_id,
			o1_strerror(err));
		o1_seq_output_error(&q->out, err, o1_prompt_why(s->prompt));
		finish(s, q, O1_FINISH_ERROR, err);
		return;
	}
	count(s, O1_METRICS_CTR_TOKENS_PROMPT, q->n_tokens);
	o1_refine_start(&q->refine, r->params.refine_steps);
	o1_client_share_hold(s->share, r->client_id);
	enlist(s, q, IN_WAITING);
	atomic_store_explicit(&r->phase, O1_REQ_WAITING, memory_order_relaxed);
}

/* ---- prefix cache ---- */

/* Shares the cached pages of Q's prefix into its table; returns how many
 * (counted by count_prefix once Q is admitted, so failed admissions count
 * nothing). */
static uint32_t match_prefix(struct o1_sched *s, struct seq *q)
{
	uint32_t P = s->page_tokens, full = (q->n_tokens - 1) / P;
	uint32_t hits = 0;

	if (!s->o.prefix_cache)
		return 0;
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
	return hits;
}

static void count_prefix(struct o1_sched *s, const struct seq *q,
			 uint32_t hits)
{
	uint32_t full = (q->n_tokens - 1) / s->page_tokens;

	if (!s->o.prefix_cache)
		return;
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

/* Makes the next round's prompt (quoting the answer just sent) and
 * sampler. */
static int next_round(struct o1_sched *s, struct seq *q)
{
	const char *prev = o1_refine_next(&q->refine, &q->out);
	int err = o1_prompt_tokenize(s->prompt, q->req, prev, q->tokens,
				     &q->n_tokens);

	if (!err && !fits_pool(s, q))
		err = -O1_E_CONTEXT;
	if (err) {
		o1_info("request %llu: refinement round %u not run: %s",
			(unsigned long long)q->req->req_id, q->out.round + 1,
			o1_strerror(err));
		return err;
	}
	o1_sampler_destroy(q->sampler);
	q->sampler = NULL;
	return make_sampler(s, q);
}

/* Puts Q, with its new prompt, first in line again. */
static void requeue(struct o1_sched *s, struct seq *q)
{
	reset_kv(s, q);
	unlist(s, q);
	o1_seq_output_next_round(&q->out, q->n_tokens, now_ns());
	atomic_store_explicit(&q->req->n_prompt, q->n_tokens,
			      memory_order_relaxed);
	count(s, O1_METRICS_CTR_TOKENS_PROMPT, q->n_tokens);
	s->st.refine_rounds++;
	line_up(s, q);
}

/* The current round ended with REASON: report it, then run the next one
 * or finish. */
static void round_end(struct o1_sched *s, struct seq *q,
		      enum o1_finish_reason reason)
{
	enum o1_refine_stop stop;
	union o1_wire_entry ev;
	int err = 0;

	o1_seq_output_round(&q->out, reason, now_ns(), &ev);
	if (o1_refine_judge(&q->refine, &q->out, s->o.refine_threshold,
			    &stop) == O1_REFINE_ROUND_OVER) {
		err = next_round(s, q);
		if (err)
			stop = o1_refine_stop_failed(err);
	}
	s->st.refine_cached_tokens +=
	    o1_seq_output_push_round(&q->out, &ev, stop);
	if (stop == O1_REFINE_NONE)
		requeue(s, q);
	else if (stop == O1_REFINE_ERROR)
		finish(s, q, O1_FINISH_ERROR, err);
	else
		finish(s, q, reason, 0);
}

/* ---- preemption ---- */

static void preempt(struct o1_sched *s, struct seq *q)
{
	o1_debug("preempting request %llu (client %u): %u tokens to "
		"recompute",
		(unsigned long long)q->req->req_id, q->req->client_id,
		q->n_tokens);
	reset_kv(s, q);
	unlist(s, q);
	s->st.preemptions++;
	count(s, O1_METRICS_CTR_PREEMPTIONS, 1);
	line_up(s, q);
}

/* Pages that sequences other than Q hold without running (parked or
 * resumed): what release_idle can give back at most. */
static uint32_t idle_pages(const struct o1_sched *s, const struct seq *q)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->n_parked; i++)
		n += s->seqs[s->parked[i]].table.n_pages;
	for (uint32_t i = 0; i < s->n_resume; i++)
		if (&s->seqs[s->resume[i]] != q)
			n += s->seqs[s->resume[i]].table.n_pages;
	return n;
}

/* Takes the pages of one sequence other than Q that holds them without
 * running: the longest parked first, then resumed ones (recomputed when
 * they run; pages listed in the prefix cache stay there, evictable).
 * Returns whether there was one. */
static bool release_idle(struct o1_sched *s, const struct seq *q)
{
	static const enum seq_list order[] = {IN_PARKED, IN_RESUME};

	for (uint32_t k = 0; k < 2; k++) {
		uint32_t *n, *list = list_of(s, order[k], &n);

		for (uint32_t i = 0; i < *n; i++) {
			struct seq *v = &s->seqs[list[i]];

			if (v == q || !holds_kv(v))
				continue;
			o1_debug("request %llu (client %u) waits for %s: its "
				 "%u pages go to others",
				 (unsigned long long)v->req->req_id,
				 v->req->client_id,
				 k ? "a running slot" : "its reader",
				 v->table.n_pages);
			reset_kv(s, v);
			s->st.preemptions++;
			count(s, O1_METRICS_CTR_PREEMPTIONS, 1);
			return true;
		}
	}
	return false;
}

/* Fills the share's page counts: every listed sequence's pages. */
static void count_pages(struct o1_sched *s)
{
	static const enum seq_list lists[] = {IN_RUNNING, IN_PARKED, IN_RESUME};

	o1_client_share_clear_pages(s->share);
	for (uint32_t k = 0; k < 3; k++) {
		uint32_t *n, *list = list_of(s, lists[k], &n);

		for (uint32_t i = 0; i < *n; i++) {
			const struct seq *q = &s->seqs[list[i]];

			o1_client_share_add_pages(s->share, q->req->client_id,
						  q->table.n_pages);
		}
	}
}

/* The newest running sequence whose client has the most pages (PAGES) or
 * running sequences, skipping client SKIP; NULL when none. Call
 * count_pages first for PAGES. */
static struct seq *victim(struct o1_sched *s, bool pages, uint32_t skip,
			  uint32_t *most)
{
	struct seq *v = NULL;

	*most = 0;
	for (uint32_t i = s->n_running; i-- > 0;) {
		struct seq *q = &s->seqs[s->running[i]];
		uint32_t c = q->req->client_id;
		uint32_t k = pages ? o1_client_share_pages(s->share, c)
				   : o1_client_share_running(s->share, c);

		if (c != skip && k > *most) {
			*most = k;
			v = q;
		}
	}
	return v;
}

/* Takes Q out of this step's batch, if it is in, giving back its tokens
 * to the step's budgets. */
static void unbatch(struct o1_sched *s, const struct seq *q)
{
	for (uint32_t i = 0; i < s->n_batch; i++) {
		if (s->batch[i].slot != q->req->index)
			continue;
		s->left += s->batch[i].n;
		s->prefill_left += s->batch[i].took;
		s->whole_left += s->batch[i].took_whole;
		s->n_batch--;
		memmove(s->batch + i, s->batch + i + 1,
			(s->n_batch - i) * sizeof(*s->batch));
		memmove(s->step_seqs + i, s->step_seqs + i + 1,
			(s->n_batch - i) * sizeof(*s->step_seqs));
		return;
	}
}

/* Covers [0, n) in Q's table: evicts cached pages, takes the pages of
 * sequences that wait (release_idle), then, when Q RUNS (false: Q is
 * being admitted and preempts nobody), preempts the newest running
 * sequence of the client holding the most pages (Q itself maybe; one
 * already batched leaves the batch). Returns 0, or -ENOSPC when Q was
 * preempted or no page could be found. */
static int reserve(struct o1_sched *s, struct seq *q, uint32_t n, bool runs)
{
	for (;;) {
		int err = o1_kv_table_reserve(s->o.pool, &q->table, n);
		uint32_t need, most;
		struct seq *v;

		if (err != -ENOSPC)
			return err;
		need = pages_for(s, n) - q->table.n_pages;
		if (o1_prefix_cache_evict(s->cache, need) ||
		    release_idle(s, q))
			continue;
		if (!runs)
			return -ENOSPC;
		count_pages(s);
		v = victim(s, true, UINT32_MAX, &most);
		if (!v)
			v = q;
		unbatch(s, v);
		preempt(s, v);
		if (v == q)
			return -ENOSPC;
	}
}

/* ---- parked sequences ---- */

/* Parked sequences whose reader made room go back in line with the pages
 * they kept; those whose reader took nothing for stall_timeout_ms get
 * their FINAL (-O1_E_STALLED). Sets wake_ns to the next deadline. */
static void check_parked(struct o1_sched *s)
{
	uint64_t now = now_ns();
	uint64_t limit = (uint64_t)s->o.stall_timeout_ms * 1000000ull;

	s->wake_ns = 0;
	for (uint32_t i = 0; i < s->n_parked;) {
		struct seq *q = &s->seqs[s->parked[i]];
		uint32_t tail = atomic_load_explicit(&q->req->out_tail,
						     memory_order_acquire);

		if (tail != q->idle_tail) {
			q->idle_tail = tail;
			q->idle_ns = now;
		}
		if (o1_seq_output_room(&q->out)) {
			unlist(s, q);
			enlist(s, q, IN_RESUME);
		} else if (limit && now - q->idle_ns >= limit) {
			o1_info("request %llu (client %u): nothing read from "
				"its stream for %u ms; cancelled",
				(unsigned long long)q->req->req_id,
				q->req->client_id, s->o.stall_timeout_ms);
			s->st.stalled++;
			finish(s, q, O1_FINISH_ERROR, -O1_E_STALLED);
		} else {
			if (limit && (!s->wake_ns || q->idle_ns + limit <
							 s->wake_ns))
				s->wake_ns = q->idle_ns + limit;
			i++;
		}
	}
}

uint64_t o1_sched_wake_ns(const struct o1_sched *s)
{
	return s->wake_ns;
}

/* ---- one step ---- */

/* Whether Q's next piece is a decode row: its last token alone is left
 * to compute (a prompt fully cached but its last token counts too). */
static bool decodes(const struct seq *q)
{
	return q->n_tokens - q->n_computed == 1;
}

/* What Q may compute this step: a decode row draws on the step's tokens
 * alone, a prefill chunk on the prefill budget as well, and a prompt
 * admitted now that fits the whole-prompt budget goes in whole (one slower
 * step, not a run of them; a long prompt's last chunk is not one). */
static uint32_t budget_for(const struct o1_sched *s, const struct seq *q)
{
	uint32_t rest = q->n_tokens - q->n_computed;

	if (decodes(q))
		return s->left;
	if (q->list != IN_RUNNING && rest <= s->whole_left && rest <= s->left)
		return rest; /* admitted whole: never a long prompt's tail */
	return s->prefill_left < s->left ? s->prefill_left : s->left;
}

/* Tokens of Q to compute this step (0: none); samples when it reaches
 * the end of the known tokens, which needs room in the out ring. */
static uint32_t plan(const struct o1_sched *s, struct seq *q, bool *samples)
{
	uint32_t left = q->n_tokens - q->n_computed;
	uint32_t budget = budget_for(s, q);
	uint32_t n = left < budget ? left : budget;

	*samples = n == left;
	if (*samples && !o1_seq_output_room(&q->out)) {
		n--;
		*samples = false;
	}
	return n;
}

/* Adds Q's next N tokens to the step and takes them from its budgets. */
static void batch_add(struct o1_sched *s, struct seq *q, uint32_t n,
		      bool samples)
{
	struct batch_ent *b = &s->batch[s->n_batch];
	struct o1_step_seq *ss = &s->step_seqs[s->n_batch];

	b->slot = q->req->index;
	b->n = n;
	b->prefill = !decodes(q);
	b->samples = samples;
	b->host = samples && !s->o.sample_in_backend;
	ss->tokens = q->tokens + q->n_computed;
	ss->n_tokens = n;
	ss->start_pos = q->n_computed;
	ss->pages = q->table.pages;
	ss->n_pages = q->table.n_pages;
	ss->all_logits = false;
	s->n_batch++;
	s->left -= n;
	/* a prompt that goes in whole may take more than the chunk budget */
	b->took = !b->prefill ? 0 : n < s->prefill_left ? n : s->prefill_left;
	b->took_whole = !b->prefill ? 0 : n < s->whole_left ? n : s->whole_left;
	s->prefill_left -= b->took;
	s->whole_left -= b->took_whole;
}

/* The running sequences visited by the current pass: a prefix of the
 * list (it keeps its order when sequences leave it). */
static uint32_t visited(const struct o1_sched *s)
{
	uint32_t i = 0;

	while (i < s->n_running &&
	       s->seqs[s->running[i]].visit == s->stamp)
		i++;
	return i;
}

/* One pass over the running sequences, oldest first, batching those that
 * decode (DECODE) or those that prefill (!DECODE) while the budgets last;
 * a decode row whose out ring has no room is parked instead. A
 * preemption (reserve) may remove any running sequence, so the place to
 * go on from is found again after one. */
static void schedule_pass(struct o1_sched *s, bool decode)
{
	uint32_t i = 0;

	s->stamp++;
	while (i < s->n_running && s->n_batch < s->lim_running && s->left) {
		struct seq *q = &s->seqs[s->running[i]];
		uint32_t before = s->n_running, n;
		bool samples;

		q->visit = s->stamp;
		if (decodes(q) != decode) {
			i++;
			continue;
		}
		n = plan(s, q, &samples);
		if (!n && !decode)
			return; /* the prefill budget is spent */
		if (!n) {
			unlist(s, q);
			park(s, q);
			continue;
		}
		if (!reserve(s, q, q->n_computed + n, true))
			batch_add(s, q, n, samples);
		i = s->n_running == before ? i + 1 : visited(s);
	}
}

/* Whether a sequence that held its pages waits to decode again (parked,
 * its reader made room): it comes back this step, as a decode row. */
static bool decode_resumes(const struct o1_sched *s)
{
	for (uint32_t i = 0; i < s->n_resume; i++)
		if (decodes(&s->seqs[s->resume[i]]))
			return true;
	return false;
}

/* Where the next prompt chunk starts: the oldest running sequence still
 * prefilling goes first (0: only admissions prefill this step). */
static uint32_t prefill_ctx(const struct o1_sched *s)
{
	for (uint32_t i = 0; i < s->n_running; i++) {
		const struct seq *q = &s->seqs[s->running[i]];

		if (!decodes(q))
			return q->n_computed;
	}
	return 0;
}

/* The decode rows the time budget is relative to: this step's, or, while
 * requests wait to join them, as many as will run once they have (at most
 * max_running). The streams' interval rises to that step's time as the
 * batch fills whatever the budget does; a budget relative to a batch still
 * filling (a few rows, a short step) held the prompts that fill it to a
 * few tokens a step: on tools/bench/sched_sim's modelled H200, 256 cold
 * streams at ratio 0.5 ran at 5,031 tok/s (TTFT p50 5.2 s) before, 7,804
 * (1.9 s) with this alone (docs/PERFORMANCE.md). */
static uint32_t budget_rows(const struct o1_sched *s)
{
	uint32_t rows = s->n_batch ? s->n_batch : 1;
	uint64_t joining =
	    (uint64_t)s->n_running + s->n_waiting + s->n_resume;

	if (joining > rows) /* n_batch <= lim_running */
		rows = joining < s->lim_running ? (uint32_t)joining
						: s->lim_running;
	return rows;
}

/* Whether the requests waiting for their first token (to start, to
 * resume, or admitted with their prompt still going in) are a burst: at
 * least a BURST_SHARE-th of max_running. A burst's prompts get the
 * whole-prompt ratio's budget, not the time ratio's: at 0.15 a step's
 * time, 256 new prompts just too long to go in whole (~430 tokens at 256
 * rows of llama3-8b) took ~60 tokens a step, 30 s to enter (on the H200,
 * 256 cold 510-token prompts ran at 1,120 tok/s, TTFT p50 20.6 s), while
 * shorter ones went in whole. Counting only those not yet admitted ended
 * the burst once most had their first chunk (2,876 tok/s, TTFT p50 3.3 s
 * on the H200). A few long prompts beside many streams (8 of 8,192 tokens
 * beside 64: issue 17's stall case) are no burst, and keep the time ratio.
 * tools/bench/sched_sim, docs/PERFORMANCE.md. */
#define BURST_SHARE 4

static bool burst(const struct o1_sched *s)
{
	uint64_t first = (uint64_t)s->n_waiting + s->n_resume;

	for (uint32_t i = 0; i < s->n_running; i++)
		first += !decodes(&s->seqs[s->running[i]]);
	return first * BURST_SHARE >= s->lim_running;
}

/* Plans the running sequences (see scheduler.h): every decode row first,
 * then prefill chunks, oldest first, within the prefill budget: with
 * decode rows the larger of prefill_chunk_tokens and prefill_per_decode
 * per row, or with prefill_time_ratio what of that fits the step's time
 * target (prefill_burst_ratio's in a burst); else the whole step (a
 * prompt with nobody waiting on a next token goes fastest in the fewest,
 * largest steps). */
static void schedule_running(struct o1_sched *s)
{
	uint64_t per_rows;
	uint32_t cap;

	s->prefill_left = s->left;
	schedule_pass(s, true);
	per_rows = (uint64_t)s->o.prefill_per_decode * s->n_batch;
	cap = per_rows > s->lim_chunk ? (uint32_t)per_rows : s->lim_chunk;
	s->whole_left = s->prefill_left;
	if (s->n_batch || decode_resumes(s)) {
		uint32_t rows = budget_rows(s), ctx = prefill_ctx(s);

		s->prefill_left = o1_prefill_budget_tokens_at(
		    &s->pb, burst(s) ? s->burst_ratio : s->pb.ratio, rows,
		    s->n_batch, ctx, cap);
		s->whole_left = o1_prefill_budget_tokens_at(
		    &s->pb, s->whole_ratio, rows, s->n_batch, ctx, cap);
		/* a step of decode rows alone measures their time afresh */
		if (s->n_batch && o1_prefill_budget_stale(&s->pb, s->n_batch))
			s->prefill_left = s->whole_left = 0;
	}
	schedule_pass(s, false);
}

/* An admission candidate, as pick() ranks it. */
struct cand {
	struct seq *q;
	bool above;	 /* its client runs its fair share or more */
	bool fresh;	 /* from the waiting list */
	uint32_t served; /* its client's admissions so far */
};

/* Whether A goes before BEST (taken in list order, so the first of equals
 * wins): clients below their running share first, then resumed sequences
 * (in order), then new ones of the least-served client (oldest first). */
static bool better(const struct cand *a, const struct cand *best)
{
	if (!best->q)
		return true;
	if (a->above != best->above)
		return !a->above;
	if (a->fresh != best->fresh)
		return !a->fresh;
	return a->fresh && a->served < best->served;
}

/* The next sequence to admit (see better), among those whose client runs
 * fewer than max_running_per_client (and, with DECODE_ONLY, those that
 * only decode); NULL when none. */
static struct seq *pick(const struct o1_sched *s, bool decode_only)
{
	uint32_t fair = o1_client_share_fair(s->share, s->lim_running);
	uint32_t cap = s->o.max_running_per_client ? s->o.max_running_per_client
						   : UINT32_MAX;
	struct cand best = {0};

	for (uint32_t k = 0; k < 2; k++) {
		const uint32_t *list = k ? s->waiting : s->resume;
		uint32_t n = k ? s->n_waiting : s->n_resume;

		for (uint32_t i = 0; i < n; i++) {
			struct seq *q = &s->seqs[list[i]];
			uint32_t c = q->req->client_id;
			uint32_t run = o1_client_share_running(s->share, c);
			struct cand a = {q, run >= fair, k == 1,
					 s->served[c % N_FAIR]};

			if (run < cap && (!decode_only || decodes(q)) &&
			    better(&a, &best))
				best = a;
		}
	}
	return best.q;
}

/* The running set is full and Q's client runs less than its fair share:
 * the client running the most, when above its share, gives up its newest
 * sequence. */
static void share_slots(struct o1_sched *s, const struct seq *q)
{
	uint32_t fair = o1_client_share_fair(s->share, s->lim_running);
	uint32_t c = q->req->client_id, most;
	struct seq *v;

	if (o1_client_share_running(s->share, c) >= fair)
		return;
	v = victim(s, false, c, &most);
	if (v && most > fair)
		preempt(s, v);
}

/* The pool cannot take Q's prompt and Q's client, given it, stays within
 * its page share: the clients holding the most pages, while above their
 * share, give up their newest running sequences. Counts Q's prompt as
 * uncached (it may find some pages cached: then it preempts more than it
 * had to, never less). */
static void share_pages(struct o1_sched *s, const struct seq *q)
{
	uint32_t total = o1_kv_pool_layout(s->o.pool)->n_pages;
	uint32_t fair = o1_client_share_fair(s->share, total);
	uint32_t need = pages_for(s, q->n_tokens + 1) - q->table.n_pages;
	uint32_t c = q->req->client_id, most;

	for (;;) {
		struct seq *v;
		uint32_t avail = o1_kv_pool_free_pages(s->o.pool) +
				 o1_prefix_cache_evictable(s->cache) +
				 idle_pages(s, q);

		if (need <= avail)
			return;
		count_pages(s);
		if (o1_client_share_pages(s->share, c) + need > fair)
			return;
		v = victim(s, true, c, &most);
		if (!v || most <= fair)
			return;
		preempt(s, v);
	}
}

/* Before anything is batched: makes room for the next admission when its
 * client is below its share (see scheduler.h). Returns that sequence, to
 * be admitted first (its room is not given to the sequences preempted
 * for it), or NULL. */
static struct seq *rebalance(struct o1_sched *s)
{
	struct seq *q = pick(s, false);

	if (!q)
		return NULL;
	if (s->n_running >= s->lim_running)
		share_slots(s, q);
	share_pages(s, q);
	return q;
}

/* Starts Q with this step: its cached prefix unless it kept pages, then
 * the pages of its first piece. Counts nothing unless it starts. */
static bool try_admit(struct o1_sched *s, struct seq *q)
{
	bool kept = holds_kv(q);
	uint32_t avail, need, n, hits = 0;
	bool samples;

	if (!kept)
		hits = match_prefix(s, q);
	need = pages_for(s, q->n_tokens + 1) - q->table.n_pages;
	avail = o1_kv_pool_free_pages(s->o.pool) +
		o1_prefix_cache_evictable(s->cache) + idle_pages(s, q);
	n = plan(s, q, &samples);
	if (need > avail || !n || reserve(s, q, q->n_computed + n, false)) {
		if (!kept)
			reset_kv(s, q);
		return false;
	}
	if (!q->admitted_once)
		observe(s, O1_METRICS_HIST_QUEUE_WAIT,
			now_ns() - q->req->submit_ns);
	if (!kept) {
		count_prefix(s, q, hits);
		q->out.cached_round = q->n_keyed * s->page_tokens;
	}
	o1_debug("%s request %llu (client %u): %u tokens, %u from the prefix "
		 "cache, %u this step",
		 q->admitted_once ? "resuming" : "admitting",
		 (unsigned long long)q->req->req_id, q->req->client_id,
		 q->n_tokens, kept ? 0 : hits * s->page_tokens, n);
	q->admitted_once = true;
	batch_add(s, q, n, samples);
	return true;
}

/* The next sequence to admit: *FIRST (rebalance's, taken once) while it
 * waits, else pick's; with DECODE_ONLY one that decodes. */
static struct seq *next_admission(const struct o1_sched *s,
				  struct seq **first, bool decode_only)
{
	struct seq *q = *first;

	*first = NULL;
	if (q && (q->list == IN_WAITING || q->list == IN_RESUME) &&
	    (!decode_only || decodes(q)))
		return q;
	return pick(s, decode_only);
}

/* Admits sequences while the budgets last, FIRST (rebalance's, or NULL)
 * first. Once the prefill budgets are spent, or a prompt could not start,
 * only sequences that decode (parked ones back with their pages) may
 * still come in: a prompt never holds them up. */
static void admit(struct o1_sched *s, struct seq *first)
{
	bool decode_only = false;

	while (s->n_batch < s->lim_running && s->left &&
	       s->n_running < s->lim_running) {
		struct seq *q;

		decode_only |= !s->prefill_left && !s->whole_left;
		q = next_admission(s, &first, decode_only);
		if (!q)
			return;
		if (!try_admit(s, q)) {
			if (decodes(q))
				return;
			decode_only = true;
			continue;
		}
		unlist(s, q);
		enlist(s, q, IN_RUNNING);
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
		if (c == O1_REQ_DRAIN)
			finish(s, q, O1_FINISH_ERROR, -O1_E_DRAINING);
		else
			finish(s, q, O1_FINISH_CANCELLED, 0);
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
		b->err = o1_sampler_sample(
		    smp, s->logits + (size_t)task * s->o.vocab_size, &b->smp);
	else if (b->samples)
		b->err = o1_sampler_accept(smp, &s->results[task], &b->smp);
}

/* Samples every sequence of the step (in parallel when several are
 * sampled on the host), then records and streams them in batch order, as
 * serial sampling would. */
static void after_step(struct o1_sched *s)
{
	uint32_t n_host = 0;
	uint64_t now = now_ns();

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
			on_token(s, q, &s->batch[i], now);
	}
	o1_metrics_batch_flush(&s->step_metrics, s->o.metrics);
}

static void update_gauges(struct o1_sched *s)
{
	const struct o1_kv_layout *l = o1_kv_pool_layout(s->o.pool);

	s->st.running = s->n_running;
	s->st.waiting = s->n_waiting + s->n_resume;
	s->st.parked = s->n_parked;
	s->st.pages_total = l->n_pages;
	s->st.pages_free = o1_kv_pool_free_pages(s->o.pool);
	s->st.pages_cached = o1_prefix_cache_evictable(s->cache);
	if (!s->o.metrics)
		return;
	o1_metrics_set(s->o.metrics, O1_METRICS_CTR_REQUESTS_RUNNING,
		       s->st.running);
	/* parked: waiting for their reader */
	o1_metrics_set(s->o.metrics, O1_METRICS_CTR_REQUESTS_WAITING,
		       s->st.waiting + s->st.parked);
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
 * penalty list or its token mask does not fit the room left (or its
 * grammar allows nothing: the host path says so). */
static void sample_row(struct o1_sched *s, uint32_t i)
{
	struct batch_ent *b = &s->batch[i];
	struct o1_sample_row *r = &s->rows[i];
	uint32_t *mask = s->n_masks < s->o.sample_masks
			     ? s->masks + (size_t)s->n_masks * s->mask_words
			     : NULL;
	uint32_t n;

	if (b->samples &&
	    !o1_sampler_row_masked(s->seqs[b->slot].sampler, r,
				   s->pens + s->n_pens,
				   s->o.sample_pens - s->n_pens, &n, mask)) {
		r->pen_off = s->n_pens;
		s->n_pens += n;
		if (r->mask)
			r->mask = ++s->n_masks;
		return;
	}
	b->host = b->samples;
	*r = (struct o1_sample_row){.top_p = 1, .repetition_penalty = 1};
}

/* Computes the next token's mask of batch entry TASK's sampler (a no-op
 * unless it samples under a grammar): one sequence's state, any thread. */
static void mask_task(void *arg, uint32_t task, uint32_t worker)
{
	struct o1_sched *s = arg;
	struct batch_ent *b = &s->batch[task];

	(void)worker;
	if (b->samples) /* an error shows again when the row is made */
		(void)o1_sampler_prepare(s->seqs[b->slot].sampler);
}

/* The step's token masks, ahead of the rows: in parallel when several
 * sequences are constrained (each mask costs tens of microseconds at a
 * vocabulary of 128k), else where the row is made. */
static void prepare_masks(struct o1_sched *s)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->n_batch && n < 2; i++)
		n += s->batch[i].samples &&
		     o1_sampler_constrained(s->seqs[s->batch[i].slot].sampler);
	if (n > 1 && s->samplers && s->o.sample_masks)
		o1_threads_run(s->samplers, s->n_batch, mask_task, s);
}

/* Asks STEP for samples; returns whether it needs the logits too. */
static bool ask_samples(struct o1_sched *s, struct o1_step *step)
{
	bool host = false;

	s->n_pens = 0;
	s->n_masks = 0;
	prepare_masks(s);
	for (uint32_t i = 0; i < s->n_batch; i++) {
		sample_row(s, i);
		host |= s->batch[i].host;
	}
	step->sample_rows = s->rows;
	step->pens = s->pens;
	step->n_pens = s->n_pens;
	step->samples = s->results;
	step->masks = s->n_masks ? s->masks : NULL;
	step->n_masks = s->n_masks;
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

static uint64_t clock_of(const struct o1_sched *s)
{
	return s->o.clock_ns ? s->o.clock_ns(s->o.step_ctx) : now_ns();
}

/* Teaches the prefill budget the step's time NS: its forward pass
 * (FORWARD_NS, logged apart so that a slow step shows which half it was)
 * and the host work after it (sampling, page keys), which the streams
 * wait on too. */
static void observe_step(struct o1_sched *s, uint64_t ns, uint64_t forward_ns)
{
	uint32_t rows = 0, tokens = 0, big = 0, ctx = 0;

	if (!s->pb.ratio)
		return;
	for (uint32_t i = 0; i < s->n_batch; i++) {
		const struct batch_ent *b = &s->batch[i];

		if (!b->prefill) {
			rows++;
			continue;
		}
		tokens += b->n;
		if (b->n > big) {
			big = b->n;
			ctx = s->step_seqs[i].start_pos;
		}
	}
	if (rows && tokens && o1_log_get_level() >= O1_LOG_DEBUG)
		o1_debug("prefill budget: %u decode rows + %u prompt tokens "
			 "(at %u, %u running, %u waiting): %.1f us (forward "
			 "%.1f us, estimated %.1f us)",
			 rows, tokens, ctx, s->n_running, s->n_waiting,
			 (double)ns / 1e3, (double)forward_ns / 1e3,
			 o1_prefill_budget_predict_ns(&s->pb, rows, tokens,
						      ctx) / 1e3);
	o1_prefill_budget_observe(&s->pb, rows, tokens, ctx, ns);
}

int o1_sched_step(struct o1_sched *s)
{
	struct seq *first;
	uint64_t t0 = 0, t1 = 0;
	int err = 0;

	reap(s, s->running, &s->n_running);
	reap(s, s->resume, &s->n_resume);
	reap(s, s->waiting, &s->n_waiting);
	reap(s, s->parked, &s->n_parked);
	check_parked(s);
	s->n_batch = 0;
	s->left = s->lim_batch;
	first = rebalance(s);
	schedule_running(s);
	admit(s, first);
	if (s->n_batch && s->pb.ratio)
		t0 = clock_of(s);
	if (s->n_batch)
		err = run_batch(s);
	if (s->n_batch && s->pb.ratio)
		t1 = clock_of(s);
	if (s->n_batch && !err) {
		after_step(s);
		if (s->pb.ratio)
			observe_step(s, clock_of(s) - t0, t1 - t0);
	}
	update_gauges(s);
	return err ? err : (int)s->n_batch;
}

/* ERROR, not CANCELLED: the wire carries an error code with reason ERROR
 * only (libo1client refuses any other FINAL as a bad event). */
void o1_sched_fail_all(struct o1_sched *s)
{
	static const enum seq_list lists[] = {IN_RUNNING, IN_RESUME,
					      IN_WAITING, IN_PARKED};

	for (uint32_t k = 0; k < 4; k++) {
		uint32_t *n, *list = list_of(s, lists[k], &n);

		while (*n)
			finish(s, &s->seqs[list[0]], O1_FINISH_ERROR,
			       -O1_E_DRAINING);
	}
	update_gauges(s);
}

uint32_t o1_sched_active(const struct o1_sched *s)
{
	return s->n_running + s->n_resume + s->n_waiting + s->n_parked;
}

void o1_sched_stats(const struct o1_sched *s, struct o1_sched_stats *out)
{
	*out = s->st;
}

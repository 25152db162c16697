/* The scheduler and the prefix cache with a fake backend whose KV is the
 * token ids themselves: a step writes each new token into its page slot
 * and answers, for the last position, the token hash(every token read
 * back through the block table) % vocab. A wrong page (bad sharing, a bad
 * preemption resume, a lost chunk) changes the answer, so every stream is
 * checked against next = hash(prefix) computed here. The fake also fails
 * the test when a step writes into a page someone else holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "o1d/prefix_cache.h"
#include "o1d/scheduler.h"

#define VOCAB 97
#define P     4

#define DEV_AREAS 2
#define DEV_SEQS  512

struct fake {
	struct o1_kv_pool *pool;
	int32_t *kv; /* n_pages x P */
	uint32_t steps, max_seqs, max_tokens;
	uint32_t last_tokens; /* new tokens in the last step */
	uint32_t last_prompt; /* of those, in rows of more than one */
	/* device output entries seen: the argmax of the row each (area,
	 * seq) named, -1 for none yet */
	int32_t dev_tok[DEV_AREAS][DEV_SEQS];
	uint32_t dev_entries;
	uint32_t devout_areas; /* the scheduler's */
	/* the fake clock (prefill_time_ratio): a step advances it by
	 * fake_cost's time, the last step's in last_ns */
	uint64_t now, last_ns;
};

/* Scheduler options a test turns on (all 0: off, or the default). */
struct env_knobs {
	uint32_t devout_areas;
	uint32_t cap;	     /* max_running_per_client */
	uint32_t stall_ms;   /* stall_timeout_ms */
	uint32_t chunk;	     /* prefill_chunk_tokens (0: 5) */
	uint32_t per_decode; /* prefill_per_decode */
	double time_ratio;   /* prefill_time_ratio, on the fake clock */
	double whole_ratio;  /* prefill_whole_ratio */
};

/* A step's time on the fake clock (ns): decode rows (one token) cost
 * 60 us plus 10 us a row; prompt chunks 20 us when any (a mixed step's
 * fixed cost) plus 2 us a token. */
static uint64_t fake_cost(const struct o1_step *st)
{
	uint64_t rows = 0, tokens = 0;

	for (uint32_t s = 0; s < st->n_seqs; s++) {
		if (st->seqs[s].n_tokens == 1)
			rows++;
		else
			tokens += st->seqs[s].n_tokens;
	}
	return 60000 + 10000 * rows + (tokens ? 20000 + 2000 * tokens : 0);
}

static uint64_t fake_clock(void *ctx)
{
	return ((struct fake *)ctx)->now;
}

/* Records the step's device output entries: each names a row of this
 * step and an area, and no (area, seq) comes twice. */
static void fake_devout(struct fake *f, const struct o1_step *st)
{
	for (uint32_t i = 0; i < st->n_devout; i++) {
		const struct o1_step_devout *d = &st->devout[i];
		const float *row = st->logits + (size_t)d->row * VOCAB;
		int32_t best = 0;

		assert_true(d->row < st->n_seqs);
		assert_true(d->area < f->devout_areas);
		assert_true(d->seq < DEV_SEQS);
		assert_int_equal(f->dev_tok[d->area][d->seq], -1);
		for (int32_t v = 1; v < VOCAB; v++)
			if (row[v] > row[best])
				best = v;
		f->dev_tok[d->area][d->seq] = best;
		f->dev_entries++;
	}
}

static uint32_t mix(uint32_t h, int32_t t)
{
	return (h ^ (uint32_t)t) * 16777619u + 7;
}

static int fake_step(void *ctx, const struct o1_step *st)
{
	struct fake *f = ctx;
	uint32_t total = 0, prompt = 0;

	f->steps++;
	for (uint32_t s = 0; s < st->n_seqs; s++) {
		const struct o1_step_seq *q = &st->seqs[s];
		uint32_t end = q->start_pos + q->n_tokens, h = 2166136261u;
		float *row = st->logits + (size_t)s * VOCAB;

		total += q->n_tokens;
		prompt += q->n_tokens > 1 ? q->n_tokens : 0;
		assert_true(end <= q->n_pages * P);
		for (uint32_t i = 0; i < q->n_tokens; i++) {
			uint32_t pos = q->start_pos + i;
			uint32_t page = q->pages[pos / P];

			assert_int_equal(o1_kv_pool_refs(f->pool, page), 1);
			f->kv[page * P + pos % P] = q->tokens[i];
		}
		for (uint32_t pos = 0; pos < end; pos++)
			h = mix(h, f->kv[q->pages[pos / P] * P + pos % P]);
		for (uint32_t v = 0; v < VOCAB; v++)
			row[v] = 0;
		row[h % VOCAB] = 1;
	}
	assert_true(st->n_seqs <= f->max_seqs);
	assert_true(total <= f->max_tokens);
	f->last_tokens = total;
	f->last_prompt = prompt;
	f->last_ns = fake_cost(st);
	f->now += f->last_ns;
	fake_devout(f, st);
	return 0;
}

/* The expected continuation of ids[0, n) (n grows). */
static int32_t expect_next(const int32_t *ids, uint32_t n)
{
	uint32_t h = 2166136261u;

	for (uint32_t i = 0; i < n; i++)
		h = mix(h, ids[i]);
	return (int32_t)(h % VOCAB);
}

struct env {
	struct fake f;
	struct o1_sched *s;
	struct o1_req *reqs;
	uint32_t n_reqs;
};

/* The fake backend and a scheduler over it with the knobs K. */
static void env_init_with(struct env *e, uint32_t pages, uint32_t n_reqs,
			  uint32_t ctx, uint32_t batch, uint32_t running,
			  const struct env_knobs *k)
{
	struct o1_kv_layout l = {pages, 1, 1, P, 1};
	struct o1_sched_opts o = {
	    .step = fake_step,
	    .vocab_size = VOCAB,
	    .max_context = ctx,
	    .max_batch_tokens = batch,
	    .max_running = running,
	    .prefill_chunk_tokens = k->chunk ? k->chunk : 5,
	    .prefill_per_decode = k->per_decode,
	    .prefill_time_ratio = k->time_ratio,
	    .prefill_whole_ratio = k->whole_ratio,
	    .clock_ns = k->time_ratio > 0 ? fake_clock : NULL,
	    .n_slots = n_reqs,
	    .max_prompt_bytes = 4096,
	    .salt_secret = 12345,
	    .prefix_cache = true,
	    .bos_id = -1,
	    .eos_id = -1,
	    .devout_areas = k->devout_areas,
	    .max_running_per_client = k->cap,
	    .stall_timeout_ms = k->stall_ms,
	};

	memset(e, 0, sizeof(*e));
	memset(e->f.dev_tok, 0xff, sizeof(e->f.dev_tok));
	assert_int_equal(o1_kv_pool_create(&l, &e->f.pool), 0);
	e->f.kv = calloc((size_t)pages * P, sizeof(int32_t));
	e->f.max_seqs = running;
	e->f.max_tokens = batch;
	e->f.devout_areas = k->devout_areas;
	o.pool = e->f.pool;
	o.step_ctx = &e->f;
	assert_int_equal(o1_sched_create(&o, &e->s), 0);
	e->reqs = calloc(n_reqs, sizeof(struct o1_req));
	e->n_reqs = n_reqs;
	for (uint32_t i = 0; i < n_reqs; i++) {
		e->reqs[i].index = i;
		e->reqs[i].prompt = malloc(4096);
	}
}

static void env_init(struct env *e, uint32_t pages, uint32_t n_reqs,
		     uint32_t ctx, uint32_t batch, uint32_t running)
{
	env_init_with(e, pages, n_reqs, ctx, batch, running,
		      &(struct env_knobs){0});
}

static void env_fini(struct env *e)
{
	const struct o1_kv_layout *l = o1_kv_pool_layout(e->f.pool);

	assert_int_equal(o1_sched_active(e->s), 0);
	o1_sched_destroy(e->s);
	assert_int_equal(o1_kv_pool_free_pages(e->f.pool), l->n_pages);
	for (uint32_t i = 0; i < e->n_reqs; i++)
		free(e->reqs[i].prompt);
	free(e->reqs);
	free(e->f.kv);
	o1_kv_pool_destroy(e->f.pool);
}

static struct o1_req *submit_flags(struct env *e, uint32_t slot,
				   uint32_t client, uid_t uid,
				   const int32_t *ids, uint32_t n,
				   uint32_t max_tokens, uint16_t flags);

static struct o1_req *submit(struct env *e, uint32_t slot, uint32_t client,
			     uid_t uid, const int32_t *ids, uint32_t n,
			     uint32_t max_tokens)
{
	return submit_flags(e, slot, client, uid, ids, n, max_tokens, 0);
}

/* A request with extra submit FLAGS (devout_area is left as the caller
 * set it). */
static struct o1_req *submit_flags(struct env *e, uint32_t slot,
				   uint32_t client, uid_t uid,
				   const int32_t *ids, uint32_t n,
				   uint32_t max_tokens, uint16_t flags)
{
	struct o1_req *r = &e->reqs[slot];
	int32_t area = r->devout_area;

	r->client_id = client;
	r->uid = uid;
	r->req_id = 1000 + slot;
	memset(&r->params, 0, sizeof(r->params));
	r->params.prompt_kind = O1_PROMPT_IDS;
	r->params.max_tokens = max_tokens;
	r->params.top_p = 1;
	r->params.repeat_penalty = 1;
	r->params.flags = O1_SUBMIT_NO_TEXT | flags;
	r->devout_area = area;
	memcpy(r->prompt, ids, n * 4);
	r->prompt_bytes = n * 4;
	atomic_store(&r->cancel, 0);
	atomic_store(&r->generated, 0);
	atomic_store(&r->out_head, 0);
	atomic_store(&r->out_tail, 0);
	o1_sched_add(e->s, r);
	return r;
}

/* What the consumer saw of one request. */
struct seen {
	int32_t ids[256];
	uint32_t n, finals;
	int reason, error;
	uint32_t dev_seq[256]; /* TOKENs with O1_TOKEN_DEVICE */
	uint32_t n_dev;
};

/* Reads at most MAX of R's events into S. */
static void consume_n(struct o1_req *r, struct seen *s, uint32_t max)
{
	uint32_t tail = atomic_load(&r->out_tail);

	while (max-- && tail != atomic_load(&r->out_head)) {
		const union o1_wire_entry *ev =
		    &r->out[tail & (O1_REQ_OUT_ENTRIES - 1)];

		union o1_wire_entry dec;
		const char *why = "";

		assert_int_equal(s->finals, 0); /* nothing after a FINAL */
		/* what the client library would take from the ring */
		if (o1_wire_decode_ev(ev, &dec, &why))
			fail_msg("event %u refused by the client: %s", ev->op,
				 why);
		assert_int_equal(ev->token.req_id, r->req_id);
		if (ev->op == O1_EV_TOKEN && ev->token.n_ids) {
			assert_true(s->n < 256);
			s->ids[s->n++] = (int32_t)ev->token.ids[0];
			if (ev->token.has_logprobs & O1_TOKEN_DEVICE)
				s->dev_seq[s->n_dev++] = ev->token.dev_seq;
			else
				assert_int_equal(ev->token.dev_seq, 0);
		} else if (ev->op == O1_EV_FINAL) {
			s->finals++;
			s->reason = ev->final.reason;
			s->error = ev->final.error;
		}
		atomic_store(&r->out_tail, ++tail);
	}
}

static void consume(struct o1_req *r, struct seen *s)
{
	consume_n(r, s, UINT32_MAX);
}

static void run_all(struct env *e, struct seen *seen, uint32_t max_steps)
{
	for (uint32_t i = 0; i < max_steps && o1_sched_active(e->s); i++) {
		assert_true(o1_sched_step(e->s) >= 0);
		for (uint32_t k = 0; k < e->n_reqs; k++)
			consume(&e->reqs[k], &seen[k]);
	}
	for (uint32_t k = 0; k < e->n_reqs; k++)
		consume(&e->reqs[k], &seen[k]);
	assert_int_equal(o1_sched_active(e->s), 0);
}

static void check_stream(const int32_t *prompt, uint32_t n,
			 const struct seen *s, uint32_t max_tokens)
{
	int32_t all[512];

	assert_int_equal(s->finals, 1);
	assert_int_equal(s->reason, O1_FINISH_LENGTH);
	assert_int_equal(s->n, max_tokens);
	memcpy(all, prompt, n * 4);
	for (uint32_t i = 0; i < s->n; i++) {
		assert_int_equal(s->ids[i], expect_next(all, n + i));
		all[n + i] = s->ids[i];
	}
}

static void make_prompt(int32_t *ids, uint32_t n, uint32_t seed,
			uint32_t shared)
{
	for (uint32_t i = 0; i < n; i++)
		ids[i] = (int32_t)((i < shared ? i * 13 : seed * 31 + i * 7) %
				   VOCAB);
}

/* 24 requests from 4 clients, a shared 9-token prefix on half of them,
 * on a 24-page pool (4 tokens a page): preemption, prefix hits and
 * chunked prefill all happen; every stream must be exact. */
static void test_streams_exact(void **state)
{
	struct env e;
	struct seen seen[24] = {0};
	int32_t prompts[24][40];
	uint32_t lens[24], maxt[24];
	struct o1_sched_stats st;

	(void)state;
	env_init(&e, 24, 24, 64, 16, 8);
	for (uint32_t i = 0; i < 24; i++) {
		lens[i] = 3 + (i * 5) % 30;
		maxt[i] = 2 + (i * 3) % 17;
		make_prompt(prompts[i], lens[i], i, i % 2 ? 9 : 0);
		submit(&e, i, i % 4, 1000, prompts[i], lens[i], maxt[i]);
	}
	run_all(&e, seen, 10000);
	for (uint32_t i = 0; i < 24; i++)
		check_stream(prompts[i], lens[i], &seen[i], maxt[i]);
	o1_sched_stats(e.s, &st);
	assert_true(st.preemptions > 0);
	assert_true(st.prefix_hits > 0);
	assert_int_equal(st.running + st.waiting, 0);
	env_fini(&e);
}

/* The same prompt again hits its full pages; another uid does not. */
static void test_prefix_salt(void **state)
{
	struct env e;
	struct seen seen[3] = {0};
	int32_t p[18];
	struct o1_sched_stats a, b, c;

	(void)state;
	env_init(&e, 64, 3, 64, 64, 4);
	make_prompt(p, 18, 5, 0);
	submit(&e, 0, 1, 1000, p, 18, 3);
	run_all(&e, seen, 100);
	o1_sched_stats(e.s, &a);
	assert_int_equal(a.prefix_hits, 0);
	assert_int_equal(a.prefix_misses, 4); /* (18 - 1) / 4 full pages */
	submit(&e, 1, 2, 1000, p, 18, 3);
	run_all(&e, seen, 100);
	o1_sched_stats(e.s, &b);
	assert_int_equal(b.prefix_hits, 4);
	submit(&e, 2, 3, 2000, p, 18, 3);
	run_all(&e, seen, 100);
	o1_sched_stats(e.s, &c);
	assert_int_equal(c.prefix_hits, 4);
	assert_int_equal(c.prefix_misses, 8);
	for (int i = 0; i < 3; i++)
		check_stream(p, 18, &seen[i], 3);
	env_fini(&e);
}

/* A consumer that does not read: the sequence stops at a full out ring
 * and resumes, losing nothing, once the ring is read. */
static void test_backpressure(void **state)
{
	struct env e;
	struct seen seen[1] = {0};
	int32_t p[3] = {1, 2, 3};
	struct o1_req *r;
	uint32_t before;

	(void)state;
	env_init(&e, 64, 1, 250, 16, 1);
	r = submit(&e, 0, 1, 1000, p, 3, 200);
	for (int i = 0; i < 400; i++)
		o1_sched_step(e.s);
	before = atomic_load(&r->generated);
	assert_true(before < 200);
	assert_true(o1_req_out_free(r) >= 1); /* room for the FINAL */
	assert_int_equal(o1_sched_step(e.s), 0);
	run_all(&e, seen, 1000);
	check_stream(p, 3, &seen[0], 200);
	env_fini(&e);
}

/* Context: a prompt at the limit fails typed; generation stops at it. */
static void test_context_and_cancel(void **state)
{
	struct env e;
	struct seen seen[3] = {0};
	int32_t p[20];

	(void)state;
	env_init(&e, 64, 3, 20, 16, 4);
	make_prompt(p, 20, 1, 0);
	submit(&e, 0, 1, 1000, p, 20, 5);
	submit(&e, 1, 1, 1000, p, 16, 50);
	submit(&e, 2, 1, 1000, p, 4, 100);
	o1_sched_step(e.s);
	atomic_store(&e.reqs[2].cancel, O1_REQ_CANCEL);
	run_all(&e, seen, 100);
	assert_int_equal(seen[0].finals, 1);
	assert_int_equal(seen[0].reason, O1_FINISH_ERROR);
	assert_int_equal(seen[0].error, -O1_E_CONTEXT);
	assert_int_equal(seen[1].finals, 1);
	assert_int_equal(seen[1].reason, O1_FINISH_LENGTH);
	assert_int_equal(seen[1].n, 4); /* 16 + 4 = the context of 20 */
	assert_int_equal(seen[2].finals, 1);
	assert_int_equal(seen[2].reason, O1_FINISH_CANCELLED);
	env_fini(&e);
}

static void step_some(struct env *e, struct seen *seen, const bool *reads);

/* The drain deadline: o1_sched_fail_all ends running, waiting and parked
 * requests each with one FINAL, ERROR -O1_E_DRAINING (consume checks it
 * decodes as the client's library would), and frees every page. */
static void test_fail_all(void **state)
{
	struct env e;
	struct seen seen[4] = {0};
	bool reads[4] = {true, true, false, true};
	struct o1_sched_stats st;
	int32_t p[40];

	(void)state;
	env_init(&e, 256, 4, 250, 16, 3);
	make_prompt(p, 40, 3, 0);
	submit(&e, 0, 1, 1000, p, 4, 200);
	submit(&e, 1, 2, 1000, p, 40, 200);
	submit(&e, 2, 3, 1000, p, 6, 200);
	for (int i = 0; i < 150; i++)
		step_some(&e, seen, reads);
	o1_sched_stats(e.s, &st);
	assert_int_equal(st.running, 2);
	assert_int_equal(st.parked, 1);
	submit(&e, 3, 4, 1000, p, 8, 200);
	assert_int_equal(atomic_load(&e.reqs[3].phase), O1_REQ_WAITING);
	o1_sched_fail_all(e.s);
	for (uint32_t k = 0; k < 4; k++) {
		consume(&e.reqs[k], &seen[k]);
		assert_int_equal(seen[k].finals, 1);
		assert_int_equal(seen[k].reason, O1_FINISH_ERROR);
		assert_int_equal(seen[k].error, -O1_E_DRAINING);
	}
	assert_true(seen[2].n > 0 && seen[2].n < 200);
	env_fini(&e);
}

static void test_prefix_cache_lru(void **state)
{
	struct o1_kv_layout l = {4, 1, 1, P, 1};
	struct o1_kv_pool *pool;
	struct o1_prefix_cache *c;
	int32_t t[3][P] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 9, 9, 9}};
	uint32_t pg[3], got;
	uint64_t k[3];

	(void)state;
	assert_int_equal(o1_kv_pool_create(&l, &pool), 0);
	assert_int_equal(o1_prefix_cache_create(pool, &c), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(o1_kv_pool_alloc(pool, &pg[i]), 0);
		k[i] = o1_prefix_cache_key(i ? k[i - 1] : 77, t[i], P);
		assert_int_equal(o1_prefix_cache_insert(
				     c, k[i], i ? k[i - 1] : 77, t[i], pg[i]),
				 0);
	}
	assert_int_equal(o1_prefix_cache_insert(c, k[0], 77, t[0], pg[0]),
			 -EEXIST);
	assert_int_equal(o1_prefix_cache_evictable(c), 0);
	for (int i = 0; i < 3; i++)
		o1_kv_pool_put(pool, pg[i]);
	assert_int_equal(o1_prefix_cache_evictable(c), 3);
	/* wrong parent or tokens: no hit even with the right key */
	assert_int_equal(o1_prefix_cache_lookup(c, k[1], 78, t[1], &got),
			 -ENOENT);
	assert_int_equal(o1_prefix_cache_lookup(c, k[1], k[0], t[2], &got),
			 -ENOENT);
	/* a hit makes page 0 the most recent: 1 then 2 go first */
	assert_int_equal(o1_prefix_cache_lookup(c, k[0], 77, t[0], &got), 0);
	assert_int_equal(got, pg[0]);
	assert_int_equal(o1_prefix_cache_evict(c, 1), 1);
	assert_int_equal(o1_kv_pool_refs(pool, pg[1]), 0);
	assert_int_equal(o1_kv_pool_refs(pool, pg[0]), 1);
	assert_int_equal(o1_prefix_cache_evict(c, 5), 2);
	assert_int_equal(o1_prefix_cache_size(c), 0);
	assert_int_equal(o1_kv_pool_free_pages(pool), 4);
	assert_int_not_equal(o1_prefix_cache_salt(1, 1000),
			     o1_prefix_cache_salt(1, 1001));
	o1_prefix_cache_destroy(c);
	o1_kv_pool_destroy(pool);
}

/* Device logits: every sampled token of a device request gets a step
 * entry naming the row it was sampled from (the fake checks each row's
 * argmax is the token the TOKEN carries), at its area's next sequence
 * number: consecutive per area across requests and clients, unused by
 * others. A request naming no area of the backend gets one FINAL
 * -O1_E_NO_DEVOUT; ordinary requests get no entries. */
static void test_device_logits(void **state)
{
	static const int32_t area_of[6] = {0, 1, 0, -1, 5, 1};
	struct env e;
	struct seen seen[6] = {0};
	int32_t prompts[6][20];
	uint32_t used[DEV_AREAS] = {0}, tokens = 0;

	(void)state;
	env_init_with(&e, 64, 6, 64, 16, 4,
		      &(struct env_knobs){.devout_areas = DEV_AREAS});
	for (uint32_t i = 0; i < 6; i++) {
		make_prompt(prompts[i], 5 + i, i, 0);
		e.reqs[i].devout_area = area_of[i];
		submit_flags(&e, i, i % 3, 1000, prompts[i], 5 + i, 7 + i,
			     i == 3 ? 0 : O1_SUBMIT_DEVICE_LOGITS);
	}
	run_all(&e, seen, 10000);
	for (uint32_t i = 0; i < 6; i++) {
		if (i == 4) { /* area 5: the backend has 2 */
			assert_int_equal(seen[i].finals, 1);
			assert_int_equal(seen[i].error, -O1_E_NO_DEVOUT);
			assert_int_equal(seen[i].n, 0);
			continue;
		}
		check_stream(prompts[i], 5 + i, &seen[i], 7 + i);
		assert_int_equal(seen[i].n_dev, i == 3 ? 0 : seen[i].n);
		for (uint32_t k = 0; k < seen[i].n_dev; k++) {
			uint32_t q = seen[i].dev_seq[k];

			assert_true(q < DEV_SEQS);
			assert_int_equal(e.f.dev_tok[area_of[i]][q],
					 seen[i].ids[k]);
			used[area_of[i]]++;
		}
		tokens += seen[i].n_dev;
	}
	assert_int_equal(e.f.dev_entries, tokens);
	for (uint32_t a = 0; a < DEV_AREAS; a++)
		for (uint32_t q = 0; q < DEV_SEQS; q++)
			assert_int_equal(e.f.dev_tok[a][q] >= 0, q < used[a]);
	env_fini(&e);
}

/* One step; then the requests READS marks (NULL: all) are read. */
static void step_some(struct env *e, struct seen *seen, const bool *reads)
{
	assert_true(o1_sched_step(e->s) >= 0);
	for (uint32_t k = 0; k < e->n_reqs; k++)
		if (!reads || reads[k])
			consume(&e->reqs[k], &seen[k]);
}

/* The ids S saw are the exact continuation of PROMPT (however many). */
static void check_ids(const int32_t *prompt, uint32_t n, const struct seen *s)
{
	int32_t all[512];

	memcpy(all, prompt, n * 4);
	for (uint32_t i = 0; i < s->n; i++) {
		assert_int_equal(s->ids[i], expect_next(all, n + i));
		all[n + i] = s->ids[i];
	}
}

static uint32_t running_of(const struct env *e, uint32_t client)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < e->n_reqs; k++)
		n += e->reqs[k].client_id == client &&
		     atomic_load(&e->reqs[k].phase) == O1_REQ_RUNNING;
	return n;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000L};

	nanosleep(&ts, NULL);
}

/* Two requests whose reader never reads fill their out rings: they leave
 * the running set (parked) keeping their pages, so with max_running 2
 * another client's request runs to the end beside them; once read they
 * finish exact, never recomputed. Before parking, both held the two
 * running slots until read. */
static void test_park_frees_slots(void **state)
{
	struct env e;
	struct seen seen[3] = {0};
	bool reads[3] = {false, false, true};
	int32_t p[3][12];
	struct o1_sched_stats st;
	int i;

	(void)state;
	env_init(&e, 256, 3, 250, 16, 2);
	for (uint32_t k = 0; k < 3; k++)
		make_prompt(p[k], 12, k, 0);
	submit(&e, 0, 1, 1000, p[0], 12, 200);
	submit(&e, 1, 1, 1000, p[1], 12, 200);
	for (i = 0; i < 1000; i++) {
		step_some(&e, seen, reads);
		o1_sched_stats(e.s, &st);
		if (st.parked == 2)
			break;
	}
	assert_int_equal(st.parked, 2);
	assert_int_equal(st.running, 0);
	assert_int_equal(o1_sched_step(e.s), 0); /* nothing runnable */
	submit(&e, 2, 2, 1000, p[2], 12, 30);
	for (i = 0; i < 200 && !seen[2].finals; i++)
		step_some(&e, seen, reads);
	check_stream(p[2], 12, &seen[2], 30);
	assert_true(atomic_load(&e.reqs[0].generated) < 200);
	run_all(&e, seen, 10000);
	check_stream(p[0], 12, &seen[0], 200);
	check_stream(p[1], 12, &seen[1], 200);
	o1_sched_stats(e.s, &st);
	assert_int_equal(st.preemptions, 0);
	env_fini(&e);
}

/* Parked sequences keep their pages only while nobody needs them: on a
 * 44-page pool two unread streams park holding 40 (79 tokens each), and
 * a 20-token prompt (6 pages) takes theirs; they are recomputed, exact,
 * once read. */
static void test_park_gives_up_pages(void **state)
{
	struct env e;
	struct seen seen[3] = {0};
	bool reads[3] = {false, false, true};
	int32_t p[3][20];
	struct o1_sched_stats st;
	int i;

	(void)state;
	env_init(&e, 44, 3, 250, 16, 4);
	for (uint32_t k = 0; k < 3; k++)
		make_prompt(p[k], k == 2 ? 20 : 3, k, 0);
	submit(&e, 0, 1, 1000, p[0], 3, 150);
	submit(&e, 1, 1, 1000, p[1], 3, 150);
	for (i = 0; i < 1000; i++) {
		step_some(&e, seen, reads);
		o1_sched_stats(e.s, &st);
		if (st.parked == 2)
			break;
	}
	assert_int_equal(st.parked, 2);
	assert_true(st.pages_free < 6);
	assert_int_equal(st.preemptions, 0);
	submit(&e, 2, 2, 1000, p[2], 20, 10);
	for (i = 0; i < 100 && !seen[2].finals; i++)
		step_some(&e, seen, reads);
	check_stream(p[2], 20, &seen[2], 10);
	o1_sched_stats(e.s, &st);
	assert_true(st.preemptions > 0);
	run_all(&e, seen, 10000);
	check_stream(p[0], 3, &seen[0], 150);
	check_stream(p[1], 3, &seen[1], 150);
	env_fini(&e);
}

/* max_running_per_client 1: whatever it asks, a client never has two
 * sequences running, and the others' requests are not held up by it. */
static void test_share_cap(void **state)
{
	struct env e;
	struct seen seen[5] = {0};
	int32_t p[5][10];
	uint32_t most = 0;

	(void)state;
	env_init_with(&e, 256, 5, 64, 32, 4, &(struct env_knobs){.cap = 1});
	for (uint32_t k = 0; k < 5; k++) {
		make_prompt(p[k], 10, k, 0);
		submit(&e, k, k < 4 ? 1 : 2, 1000, p[k], 10, 8);
	}
	for (int i = 0; i < 1000 && o1_sched_active(e.s); i++) {
		step_some(&e, seen, NULL);
		assert_true(running_of(&e, 1) <= 1);
		if (running_of(&e, 2) > most)
			most = running_of(&e, 2);
	}
	assert_int_equal(most, 1);
	assert_true(seen[4].finals == 1);
	for (uint32_t k = 0; k < 5; k++)
		check_stream(p[k], 10, &seen[k], 8);
	env_fini(&e);
}

/* Fair share of running slots: a client that fills the running set
 * (max_running 2) gives up its newest sequence as soon as a second client
 * asks: that one runs within two steps, and every stream stays exact
 * (the preempted one is recomputed). */
static void test_fair_share_preempts(void **state)
{
	struct env e;
	struct seen seen[3] = {0};
	int32_t p[3][10];
	struct o1_sched_stats st;

	(void)state;
	env_init(&e, 256, 3, 128, 32, 2);
	for (uint32_t k = 0; k < 3; k++)
		make_prompt(p[k], 10, k, 0);
	submit(&e, 0, 1, 1000, p[0], 10, 60);
	submit(&e, 1, 1, 1000, p[1], 10, 60);
	for (int i = 0; i < 4; i++)
		step_some(&e, seen, NULL);
	assert_int_equal(running_of(&e, 1), 2);
	submit(&e, 2, 2, 1000, p[2], 10, 5);
	step_some(&e, seen, NULL);
	step_some(&e, seen, NULL);
	assert_true(seen[2].n > 0);
	assert_int_equal(running_of(&e, 1), 1);
	o1_sched_stats(e.s, &st);
	assert_int_equal(st.preemptions, 1);
	run_all(&e, seen, 10000);
	for (uint32_t k = 0; k < 3; k++)
		check_stream(p[k], 10, &seen[k], k < 2 ? 60 : 5);
	env_fini(&e);
}

/* Whether request R, once running, was sent back to wait; updates *RAN. */
static bool went_back(const struct o1_req *r, bool *ran)
{
	int ph = atomic_load(&r->phase);

	if (ph == O1_REQ_RUNNING)
		*ran = true;
	return *ran && ph == O1_REQ_WAITING;
}

/* Fair share of pages at admission: a client holding 18 of 20 pages with
 * one running stream, just after it took a page (so it needs none for
 * three steps), gives it up when another client's 8-token prompt (3
 * pages, within its share of 10) does not fit: that one starts in the
 * next step, and both streams stay exact. */
static void test_page_share(void **state)
{
	struct env e;
	struct seen seen[2] = {0};
	int32_t a[40], b[8];
	struct o1_sched_stats st;
	uint32_t last = 20;

	(void)state;
	env_init(&e, 20, 2, 128, 32, 8);
	make_prompt(a, 40, 1, 0);
	make_prompt(b, 8, 2, 0);
	submit(&e, 0, 1, 1000, a, 40, 40);
	for (int i = 0; i < 200; i++) {
		step_some(&e, seen, NULL);
		o1_sched_stats(e.s, &st);
		if (st.pages_free + st.pages_cached <= 2 &&
		    st.pages_free < last)
			break;
		last = st.pages_free;
	}
	assert_true(st.pages_free + st.pages_cached <= 2);
	submit(&e, 1, 2, 1000, b, 8, 6);
	step_some(&e, seen, NULL);
	assert_int_equal(atomic_load(&e.reqs[1].phase), O1_REQ_RUNNING);
	run_all(&e, seen, 10000);
	check_stream(a, 40, &seen[0], 40);
	check_stream(b, 8, &seen[1], 6);
	env_fini(&e);
}

/* Fair share of pages when a running stream needs one: the client
 * holding the most pages gives up its newest sequence, not the client
 * whose sequence is newest overall. A 40-token prompt (client 1) and a
 * 4-token one (client 2, admitted after it) outgrow a 20-page pool:
 * client 2's stream is never sent back, client 1's is (and stays exact). */
static void test_page_victim(void **state)
{
	struct env e;
	struct seen seen[2] = {0};
	int32_t a[40], b[4];
	struct o1_sched_stats st;
	bool ran = false;

	(void)state;
	env_init(&e, 20, 2, 128, 32, 8);
	make_prompt(a, 40, 1, 0);
	make_prompt(b, 4, 2, 0);
	submit(&e, 0, 1, 1000, a, 40, 30);
	submit(&e, 1, 2, 1000, b, 4, 30);
	for (int i = 0; i < 10000 && o1_sched_active(e.s); i++) {
		step_some(&e, seen, NULL);
		assert_false(went_back(&e.reqs[1], &ran));
	}
	o1_sched_stats(e.s, &st);
	assert_true(st.preemptions > 0);
	check_stream(a, 40, &seen[0], 30);
	check_stream(b, 4, &seen[1], 30);
	env_fini(&e);
}

/* stall_timeout_ms 1: a parked stream whose reader took nothing for that
 * long gets one FINAL, ERROR -O1_E_STALLED, after an exact prefix; one
 * whose reader took anything since is not cancelled; a stream read all
 * along finishes. The deadline is what o1_sched_wake_ns reports. */
static void test_stall_deadline(void **state)
{
	struct env e;
	struct seen seen[3] = {0};
	bool reads[3] = {false, false, true};
	int32_t p[3][6];
	struct o1_sched_stats st;
	struct timespec now;
	uint64_t wake;
	int i;

	(void)state;
	env_init_with(&e, 256, 3, 250, 16, 4,
		      &(struct env_knobs){.stall_ms = 1});
	for (uint32_t k = 0; k < 3; k++) {
		make_prompt(p[k], 6, k, 0);
		submit(&e, k, k + 1, 1000, p[k], 6, k == 2 ? 20 : 200);
	}
	for (i = 0; i < 1000; i++) {
		step_some(&e, seen, reads);
		o1_sched_stats(e.s, &st);
		if (st.parked == 2)
			break;
	}
	assert_int_equal(st.parked, 2);
	clock_gettime(CLOCK_MONOTONIC, &now);
	wake = o1_sched_wake_ns(e.s);
	assert_true(wake > 0);
	assert_true(wake <= (uint64_t)now.tv_sec * 1000000000ull +
				(uint64_t)now.tv_nsec + 1000000);
	sleep_ms(5);
	/* reader 1 takes one event: progress, not a stall */
	consume_n(&e.reqs[1], &seen[1], 1);
	step_some(&e, seen, reads);
	o1_sched_stats(e.s, &st);
	assert_int_equal(st.stalled, 1);
	assert_int_not_equal(atomic_load(&e.reqs[1].phase), O1_REQ_FINISHED);
	consume(&e.reqs[0], &seen[0]);
	assert_int_equal(seen[0].finals, 1);
	assert_int_equal(seen[0].reason, O1_FINISH_ERROR);
	assert_int_equal(seen[0].error, -O1_E_STALLED);
	assert_true(seen[0].n > 0 && seen[0].n < 200);
	check_ids(p[0], 6, &seen[0]);
	run_all(&e, seen, 10000);
	check_stream(p[2], 6, &seen[2], 20);
	assert_int_equal(seen[1].finals, 1);
	check_ids(p[1], 6, &seen[1]);
	env_fini(&e);
}

/* An admission that fails (the pool is short) counts nothing: the prefix
 * counters move once, when the request starts, however many steps it
 * waited. */
static void test_blocked_admission_counts_nothing(void **state)
{
	struct env e;
	struct seen seen[3] = {0};
	int32_t a[18], b[40];
	struct o1_sched_stats before, st;
	int blocked = 0;

	(void)state;
	env_init(&e, 12, 3, 64, 32, 4);
	make_prompt(a, 18, 1, 0);
	make_prompt(b, 40, 2, 0);
	submit(&e, 0, 1, 1000, a, 18, 2);
	run_all(&e, seen, 100);
	submit(&e, 1, 1, 1000, b, 40, 6);
	while (!seen[1].n) /* b's prefill holds its pages */
		step_some(&e, seen, NULL);
	submit(&e, 2, 1, 1000, a, 18, 2);
	step_some(&e, seen, NULL);
	o1_sched_stats(e.s, &before);
	while (atomic_load(&e.reqs[2].phase) == O1_REQ_WAITING) {
		o1_sched_stats(e.s, &st);
		assert_int_equal(st.prefix_hits, before.prefix_hits);
		assert_int_equal(st.prefix_misses, before.prefix_misses);
		step_some(&e, seen, NULL);
		assert_true(++blocked < 100);
	}
	assert_true(blocked > 2);
	o1_sched_stats(e.s, &st);
	assert_int_equal(st.prefix_hits + st.prefix_misses,
			 before.prefix_hits + before.prefix_misses + 4);
	run_all(&e, seen, 1000);
	check_stream(a, 18, &seen[2], 2);
	check_stream(b, 40, &seen[1], 6);
	env_fini(&e);
}

/* One step of the budget test: every stream of DEC gets exactly one
 * token, and the step's tokens besides its decode rows (streams that had
 * tokens and got one more: nothing is preempted here), its prefill, stay
 * within B. */
static void budget_step(struct env *e, struct seen *seen, const bool *reads,
			const uint32_t *dec, uint32_t n_dec, uint32_t b)
{
	uint32_t before[8], rows = 0;

	assert_true(e->n_reqs <= 8);
	for (uint32_t k = 0; k < e->n_reqs; k++)
		before[k] = atomic_load(&e->reqs[k].generated);
	step_some(e, seen, reads);
	for (uint32_t k = 0; k < n_dec; k++)
		assert_int_equal(atomic_load(&e->reqs[dec[k]].generated),
				 before[dec[k]] + 1);
	for (uint32_t k = 0; k < e->n_reqs; k++)
		rows += before[k] &&
			atomic_load(&e->reqs[k].generated) > before[k];
	assert_true(e->f.last_tokens - rows <= b);
}

/* Chunked prefill within the step budget (prefill_chunk_tokens B = 6,
 * max_batch_tokens 32): a lone 100-token prompt takes whole steps of 32
 * (nobody waits on a decode row). Then four streams decode, one of them
 * unread until it parks, and two long prompts (300 and 100 tokens)
 * arrive: every step gives each decoding stream its token and carries at
 * most B prefill tokens; the parked stream comes back the step after it
 * is read, the prompts still prefilling. Every stream stays exact, and
 * nothing is preempted. */
static void test_prefill_budget(void **state)
{
	struct env e;
	struct seen seen[7] = {0};
	bool reads[7] = {true, true, true, false, true, true, true};
	int32_t p[7][300];
	uint32_t dec[4] = {0, 1, 2, 3}, lens[7] = {3, 3, 3, 3, 300, 100, 100};
	uint32_t maxt[7] = {250, 250, 250, 240, 5, 5, 5};
	struct o1_sched_stats st;
	int i;

	(void)state;
	env_init_with(&e, 1024, 7, 400, 32, 8, &(struct env_knobs){.chunk = 6});
	for (uint32_t k = 0; k < 7; k++)
		make_prompt(p[k], lens[k], k, 0);
	submit(&e, 6, 6, 1000, p[6], 100, 5);
	for (i = 0; i < 3; i++) {
		step_some(&e, seen, reads);
		assert_int_equal(e.f.last_tokens, 32);
	}
	for (uint32_t k = 0; k < 4; k++)
		submit(&e, k, k, 1000, p[k], 3, maxt[k]);
	step_some(&e, seen, reads); /* 6's last 4 tokens, four prompts */
	assert_int_equal(e.f.last_tokens, 16);
	for (i = 0; i < 300; i++) {
		budget_step(&e, seen, reads, dec, 3, 6);
		o1_sched_stats(e.s, &st);
		if (st.parked)
			break;
	}
	assert_int_equal(st.parked, 1);
	submit(&e, 4, 4, 1000, p[4], 300, 5);
	submit(&e, 5, 5, 1000, p[5], 100, 5);
	for (i = 0; i < 10; i++)
		budget_step(&e, seen, reads, dec, 3, 6);
	reads[3] = true;
	consume(&e.reqs[3], &seen[3]);
	for (i = 0; i < 10; i++)
		budget_step(&e, seen, reads, dec, 4, 6);
	assert_int_equal(seen[4].n, 0); /* still prefilling */
	for (i = 0; i < 1000 && !seen[5].n; i++)
		budget_step(&e, seen, reads, dec, 4, 6);
	assert_true(seen[4].finals == 1); /* first come, first served */
	run_all(&e, seen, 1000);
	for (uint32_t k = 0; k < 7; k++)
		check_stream(p[k], lens[k], &seen[k], maxt[k]);
	o1_sched_stats(e.s, &st);
	assert_int_equal(st.preemptions, 0);
	env_fini(&e);
}

/* prefill_per_decode 2 beside prefill_chunk_tokens 3: with six streams
 * decoding, a 200-token prompt is prefilled 12 tokens a step (2 per
 * decode row), never more, the streams getting their token every step. */
static void test_prefill_per_decode(void **state)
{
	struct env e;
	struct seen seen[7] = {0};
	int32_t p[7][200];
	uint32_t dec[6] = {0, 1, 2, 3, 4, 5}, full = 0;
	int i;

	(void)state;
	env_init_with(&e, 1024, 7, 400, 64, 8,
		      &(struct env_knobs){.chunk = 3, .per_decode = 2});
	for (uint32_t k = 0; k < 7; k++)
		make_prompt(p[k], k < 6 ? 3 : 200, k, 0);
	for (uint32_t k = 0; k < 6; k++)
		submit(&e, k, k, 1000, p[k], 3, 100);
	step_some(&e, seen, NULL);
	submit(&e, 6, 6, 1000, p[6], 200, 4);
	for (i = 0; i < 100 && !seen[6].n; i++) {
		budget_step(&e, seen, NULL, dec, 6, 12);
		full += e.f.last_tokens == 6 + 12;
	}
	assert_int_equal(seen[6].n, 1);
	assert_int_equal(full, 200 / 12);
	run_all(&e, seen, 1000);
	for (uint32_t k = 0; k < 7; k++)
		check_stream(p[k], k < 6 ? 3 : 200, &seen[k], k < 6 ? 100 : 4);
	env_fini(&e);
}

/* The prefill budget by time (prefill_time_ratio 1, on the fake clock of
 * fake_cost): six streams decode (a step of 120 us), then a 300-token
 * prompt arrives. Its first chunk is the token cap (64: nothing measured
 * yet); from then on the budget learnt from the steps' times brings the
 * steps down to 2 x 120 us, the (120 - 20) / 2 = 50 tokens that fit, and
 * holds them there, the streams getting a token every step. Alone, a
 * prompt takes whole steps (max_batch_tokens). Every stream stays exact. */
static void test_prefill_time_budget(void **state)
{
	struct env e;
	struct seen seen[8] = {0};
	int32_t p[8][500];
	uint32_t dec[6] = {0, 1, 2, 3, 4, 5}, n = 0;
	int i;

	(void)state;
	env_init_with(&e, 1024, 8, 600, 128, 8,
		      &(struct env_knobs){.chunk = 64, .time_ratio = 1.0});
	for (uint32_t k = 0; k < 8; k++)
		make_prompt(p[k], k < 6 ? 3 : 500, k, 0);
	for (uint32_t k = 0; k < 6; k++)
		submit(&e, k, k, 1000, p[k], 3, 100);
	for (i = 0; i < 3; i++)
		step_some(&e, seen, NULL);
	assert_int_equal(e.f.last_tokens, 6);
	assert_int_equal(e.f.last_ns, 120000);
	submit(&e, 6, 6, 1000, p[6], 500, 4);
	budget_step(&e, seen, NULL, dec, 6, 64);
	assert_int_equal(e.f.last_tokens, 6 + 64);
	for (i = 0; i < 4; i++)
		budget_step(&e, seen, NULL, dec, 6, 64);
	for (; i < 200 && !seen[6].n; i++, n++) {
		budget_step(&e, seen, NULL, dec, 6, 64);
		if (seen[6].n) /* the prompt's last chunk */
			break;
		assert_in_range(e.f.last_tokens - 6, 48, 51);
		assert_in_range(e.f.last_ns, 232000, 242000);
	}
	assert_int_equal(seen[6].n, 1);
	assert_true(n >= 2);
	run_all(&e, seen, 1000);
	submit(&e, 7, 7, 1000, p[7], 500, 4);
	step_some(&e, seen, NULL);
	assert_int_equal(e.f.last_tokens, 128);
	run_all(&e, seen, 1000);
	for (uint32_t k = 0; k < 8; k++)
		check_stream(p[k], k < 6 ? 3 : 500, &seen[k], k < 6 ? 100 : 4);
	env_fini(&e);
}

/* The time budget is relative to the batch that will run once the
 * waiting prompts joined it, not to the few rows decoding while it fills
 * (fake_cost: a decode step of 1 row 70 us, of 8 rows 140 us; a prompt
 * token 2 us, 20 us a mixed step). Eight streams decode to their ends,
 * two steps apart (the estimator learns 8 rows down to 1), then one alone,
 * then seven
 * 200-token prompts arrive beside it (40 new tokens each, so all eight
 * stay running until the last prompt is in): ratio 1 lets each mixed
 * step carry
 * (140 - 20) / 2 = 60 prompt tokens while they wait, where the lone row's
 * 70 us would let (70 - 20) / 2 = 25 through. Every stream stays exact. */
static void test_prefill_time_budget_joining(void **state)
{
	struct env e;
	struct seen seen[16] = {0};
	int32_t p[16][200];
	uint32_t mixed = 0, fresh = 0;

	(void)state;
	env_init_with(&e, 1024, 16, 600, 128, 8,
		      &(struct env_knobs){.chunk = 64, .time_ratio = 1.0});
	for (uint32_t k = 0; k < 16; k++)
		make_prompt(p[k], k < 9 ? 3 : 200, k, 0);
	for (uint32_t k = 0; k < 8; k++)
		submit(&e, k, k, 1000, p[k], 3, 20 + 2 * k);
	run_all(&e, seen, 1000);
	submit(&e, 8, 8, 1000, p[8], 3, 200);
	for (int i = 0; i < 4; i++)
		step_some(&e, seen, NULL);
	assert_int_equal(e.f.last_tokens, 1);
	assert_int_equal(e.f.last_ns, 70000);
	for (uint32_t k = 9; k < 16; k++) /* decoding till all are in */
		submit(&e, k, k, 1000, p[k], 200, 40);
	for (int i = 0; i < 100; i++) {
		uint32_t left = 0;

		for (uint32_t k = 9; k < 16; k++)
			left += !seen[k].n;
		if (!left)
			break;
		step_some(&e, seen, NULL);
		/* the first step measures a token's cost (the cap, 64);
		 * the last prompt's last chunk is what is left of it; a
		 * step without prompt tokens measures a decode time last
		 * measured 32 steps ago (O1_PREFILL_STALE_STEPS) */
		if (i >= 1 && left >= 2 && !e.f.last_prompt)
			fresh++;
		else if (i >= 1 && left >= 2) {
			assert_in_range(e.f.last_prompt, 56, 64);
			mixed++;
		}
	}
	assert_true(mixed >= 5);
	assert_true(fresh <= 2);
	run_all(&e, seen, 2000);
	for (uint32_t k = 0; k < 16; k++)
		check_stream(p[k], k < 9 ? 3 : 200, &seen[k],
			     k < 8 ? 20 + 2 * k : k == 8 ? 200 : 40);
	env_fini(&e);
}

/* A prompt that fits the whole-prompt budget goes in whole beside a long
 * one's chunks (prefill_time_ratio 1, prefill_whole_ratio 3, fake_cost;
 * max_running 12: the two prompts are no burst, test_prefill_burst):
 * six streams decode, a 500-token prompt goes on at its ~50 tokens a
 * step (approached from above: the first chunk is the token cap, and
 * small steps' samples weigh their tokens; prefill_chunk_tokens 128, the
 * most either budget gives), and a
 * 60-token prompt arriving then is computed in the next step
 * beside the long one's chunk, its first token out of it, where at the
 * chunk budget alone it would have waited for the long prompt to end (the
 * long prompt's own rest goes in whole too, once it fits). Every stream
 * stays exact. */
static void test_prefill_whole_prompt(void **state)
{
	struct env e;
	struct seen seen[8] = {0};
	int32_t p[8][500];
	uint32_t dec[6] = {0, 1, 2, 3, 4, 5};

	(void)state;
	env_init_with(&e, 1024, 8, 600, 160, 12,
		      &(struct env_knobs){.chunk = 128,
					  .time_ratio = 1.0,
					  .whole_ratio = 3.0});
	for (uint32_t k = 0; k < 8; k++)
		make_prompt(p[k], k < 6 ? 3 : k == 6 ? 500 : 60, k, 0);
	for (uint32_t k = 0; k < 6; k++)
		submit(&e, k, k, 1000, p[k], 3, 100);
	for (int i = 0; i < 3; i++)
		step_some(&e, seen, NULL);
	submit(&e, 6, 6, 1000, p[6], 500, 4);
	for (int i = 0; i < 5; i++)
		budget_step(&e, seen, NULL, dec, 6, 128);
	assert_in_range(e.f.last_prompt, 48, 56);
	submit(&e, 7, 7, 1000, p[7], 60, 4);
	budget_step(&e, seen, NULL, dec, 6, 128);
	assert_int_equal(seen[7].n, 1);
	assert_in_range(e.f.last_prompt, 60 + 40, 60 + 56);
	assert_int_equal(seen[6].n, 0);
	run_all(&e, seen, 1000);
	for (uint32_t k = 0; k < 8; k++)
		check_stream(p[k], k < 6 ? 3 : k == 6 ? 500 : 60, &seen[k],
			     k < 6 ? 100 : 4);
	env_fini(&e);
}

/* A burst (requests waiting for their first token, to start or admitted
 * with their prompt still going in, at least a quarter of max_running)
 * gets the whole-prompt ratio's budget, not the time ratio's (fake_cost;
 * prefill_time_ratio 0.5, prefill_whole_ratio 1, max_running 8): four
 * streams decode (100 us a step); a 500-token prompt alone (one waits: no
 * burst) settles at the time ratio's ~17 prompt tokens a step (steps of
 * ~1.5 x 100 us: the mixed step's fixed 20 us is learnt as part of a
 * token's cost); then three more arrive and are admitted as the budget
 * lets them start (the rest of a step's budget after one prompt's last
 * chunk starts the next): while two or more of the four have no first
 * token the steps carry the whole ratio's 30-46 (up to ~2 x 100 us),
 * whether they wait or already run (counting only those waiting, two
 * with one waiting were no burst), and once one is left, the time
 * ratio's again; a few steps without prompt tokens measure the decode
 * time afresh (O1_PREFILL_STALE_STEPS). Every decoding stream gets its token every step, and
 * every stream stays exact. */
static void test_prefill_burst(void **state)
{
	struct env e;
	struct seen seen[8] = {0};
	int32_t p[8][500];
	uint32_t dec[4] = {0, 1, 2, 3}, crowd = 0, admitted = 0, after = 0;
	uint32_t fresh = 0;
	int i;

	(void)state;
	env_init_with(&e, 1024, 8, 600, 160, 8,
		      &(struct env_knobs){.chunk = 128,
					  .time_ratio = 0.5,
					  .whole_ratio = 1.0});
	for (uint32_t k = 0; k < 8; k++)
		make_prompt(p[k], k < 4 ? 3 : 500, k, 0);
	for (uint32_t k = 0; k < 4; k++)
		submit(&e, k, k, 1000, p[k], 3, 200);
	for (i = 0; i < 3; i++)
		step_some(&e, seen, NULL);
	submit(&e, 4, 4, 1000, p[4], 500, 4);
	for (i = 0; i < 12; i++) {
		budget_step(&e, seen, NULL, dec, 4, 128);
		if (i >= 8) { /* settled */
			assert_in_range(e.f.last_prompt, 14, 20);
			assert_in_range(e.f.last_ns, 145000, 160000);
		}
	}
	for (uint32_t k = 5; k < 8; k++)
		submit(&e, k, k, 1000, p[k], 500, 4);
	for (i = 0; i < 80 && !seen[7].n; i++) {
		struct o1_sched_stats st;
		uint32_t first = 0;

		o1_sched_stats(e.s, &st);
		for (uint32_t k = 4; k < 8; k++)
			first += !seen[k].n;
		budget_step(&e, seen, NULL, dec, 4, 128);
		if (!e.f.last_prompt) { /* decode time measured afresh */
			fresh++;
		} else if (first >= 2 && i >= 1) { /* the burst */
			assert_in_range(e.f.last_prompt, 30, 46);
			assert_in_range(e.f.last_ns, 180000, 220000);
			crowd++;
			admitted += st.waiting < 2;
		} else if (first == 1 && !seen[7].n) {
			assert_in_range(e.f.last_prompt, 12, 24);
			after++;
		}
	}
	assert_true(crowd >= 3);
	assert_true(admitted >= 3); /* a burst of those admitted, mostly */
	assert_true(after >= 3);
	assert_true(fresh <= 3);
	run_all(&e, seen, 2000);
	for (uint32_t k = 0; k < 8; k++)
		check_stream(p[k], k < 4 ? 3 : 500, &seen[k], k < 4 ? 200 : 4);
	env_fini(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_streams_exact),
	    cmocka_unit_test(test_prefix_salt),
	    cmocka_unit_test(test_backpressure),
	    cmocka_unit_test(test_context_and_cancel),
	    cmocka_unit_test(test_fail_all),
	    cmocka_unit_test(test_prefix_cache_lru),
	    cmocka_unit_test(test_device_logits),
	    cmocka_unit_test(test_park_frees_slots),
	    cmocka_unit_test(test_park_gives_up_pages),
	    cmocka_unit_test(test_share_cap),
	    cmocka_unit_test(test_fair_share_preempts),
	    cmocka_unit_test(test_page_share),
	    cmocka_unit_test(test_page_victim),
	    cmocka_unit_test(test_stall_deadline),
	    cmocka_unit_test(test_blocked_admission_counts_nothing),
	    cmocka_unit_test(test_prefill_budget),
	    cmocka_unit_test(test_prefill_per_decode),
	    cmocka_unit_test(test_prefill_time_budget),
	    cmocka_unit_test(test_prefill_time_budget_joining),
	    cmocka_unit_test(test_prefill_whole_prompt),
	    cmocka_unit_test(test_prefill_burst),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

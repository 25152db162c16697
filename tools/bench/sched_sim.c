/* sched_sim: o1d's scheduler (daemon/o1d/scheduler.c itself, with the
 * prefix cache, the client shares and the prefill budget) driven on a
 * simulated clock by a model of the device's step time, so that a
 * scheduling policy can be tried on both of issue 17's workloads in a
 * second on any machine, before device time is spent on it
 * (docs/PERFORMANCE.md, "The scheduler on a modelled H200";
 * tools/bench/sched_sim_table.sh makes its table).
 *
 *   sched_sim [--preset llama3-8b|llama3-8b-4l] [--ratio R] [--whole R]
 *             [--burst R]
 *             [--chunk N] [--per-decode N] [--batch-tokens N]
 *             [--running N] [--only tput|long|sep] [--seed N] [--trace]
 *             [throughput options] [long-prompt options] [model options]
 *
 * --ratio, --whole and --burst are scheduler.prefill_time_ratio (0),
 * prefill_whole_ratio (0.6) and prefill_burst_ratio (auto: the whole
 * ratio); --chunk, --per-decode, --batch-tokens and
 * --running the other scheduler settings (o1d's defaults). Two runs, one
 * line each (--only: one of them):
 * - tput: --streams C closed-loop streams (256) over --clients clients
 *   (16, as o1bench's connections) run --requests R requests (512) of
 *   --prompt P prompt tokens (200, o1bench's 128 words) and --gen G new
 *   tokens (128); cold (every prompt its own) unless --shared. --rounds N
 *   (2) runs it N times in one scheduler and prints each (the first
 *   teaches the estimates, as earlier traffic does in a running o1d).
 *   Prints tok/s (every generated token over the round), ITL p50 / p99
 *   and TTFT p50, as `o1bench run` does.
 * - long: after the throughput rounds, --long-streams S streams (64)
 *   generating --long-gen G tokens (1,024); --long-after-ms T (1,000)
 *   after every stream has its first token (and each an interval),
 *   --long N cold prompts (8) of --long-prompt L tokens (8,180) arrive at
 *   once, 1 new token each: o1bench --long's timing. Prints the streams'
 *   ITL p50 / p99 before them and during them (until every long prompt
 *   has its first token), the ratio p99 during / p50 before (issue 17
 *   item 5 asks <= 2), the same streams' p50 in the same window in a
 *   second run without the long prompts (their contexts grow meanwhile)
 *   and the ratio to it, and the long prompts' TTFT p50 / max.
 * Each run's scheduler first plays o1d's warm-up (one request of 4 new
 * tokens): a fresh daemon's estimates are that request's (a decode step
 * of one row), not none.
 * - sep (--only sep): prefill_sep.sh's order in one scheduler: the long
 *   run first (not printed), then one throughput round, printed as tput's
 *   (what an o1d that served long prompts then does with 256 new cold
 *   streams: its estimates learned on the long run).
 *
 * The step model (ns; each term from a measurement on the H200, see the
 * presets; --preset first, the overrides after): base + token x M' + row
 * x (sequences: the LM head's rows) + decode attention x (context
 * positions read by the decode rows) + prefill attention x (query-key
 * pairs of the prompt chunks) + host x sequences (the engine's own work
 * a row) + eager when the step carries prompt tokens (no graph). M' is
 * the step's tokens rounded up as cuda_forward.c's blas_rows does (16 /
 * 64 / 128 above 4, 256, 1,024). Overrides: --base-us, --token-ns,
 * --row-ns, --dattn-ps, --pattn-ps, --host-ns, --eager-us; --jitter S
 * (the presets' 0.15) multiplies each step's time by a log-normal factor
 * of median 1 and sigma S (a real device's steps vary, and the budget
 * learns from what it measures). --trace: a line a step on stderr.
 *
 * Deterministic: the same arguments (seed included) give the same
 * figures. Not a device: what the model leaves out (a product's speed
 * changing with its shape beyond the linear term, the sampling kernel,
 * the front loop's delivery) is not here; the presets reproduce the
 * measured steps within ~10% (PERFORMANCE.md has the comparison). */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kv_pool.h"
#include "common/error.h"
#include "common/log.h"
#include "common/prng.h"
#include "o1d/request.h"
#include "o1d/scheduler.h"

#define VOCAB	  256 /* ids of the made-up tokens; no specials */
#define PAGE	  16
#define MAX_CTX	  8192
#define N_PAGES	  60000 /* an H200 holds ~50k llama3-8b pages beside it */
#define MAX_SLOTS 1024
#define ID_BYTES  4

struct model {
	double base_us, token_ns, row_ns, dattn_ps, pattn_ps, host_ns, eager_us,
	    jitter;
};

/* Whole llama3-8b, bf16, one H200 (docs/PERFORMANCE.md, sixth session):
 * a 1-row step 4.11 ms; 256 rows at ~190 positions 12.1 ms; a cold
 * 2,048-token prompt 57.9 ms to its first token; a 128-token prompt 6.7
 * ms. Decode attention 54-64 ns a position read (bench_decode_attn at
 * 64-256 rows of 1,024 positions, 32 layers); prefill attention at ~350
 * TFLOP/s (4 x 128 x 32 heads x 32 layers flops a pair); host 0.7 us a row
 * (host_step.sh on the H200). Jitter 0.15: o1d's decode intervals on the
 * H200 had p99 / p50 1.26-1.55 (a log-normal of sigma 0.1-0.19), and with
 * it the 4-layer cut's long-prompt runs come out as measured. */
static const struct model llama3_8b = {
    .base_us = 4000,
    .token_ns = 24000,
    .row_ns = 1500,
    .dattn_ps = 60000,
    .pattn_ps = 1500,
    .host_ns = 700,
    .eager_us = 300,
    .jitter = 0.15,
};

/* llama3-8b cut to 4 layers (the fifth and sixth sessions' long-prompt
 * runs): 1 row 0.808 ms, 256 rows 2.376 ms, lone 2k TTFT 5.9-7.2 ms;
 * the layers' terms an eighth of the whole model's, the head's the same. */
static const struct model llama3_8b_4l = {
    .base_us = 780,
    .token_ns = 3000,
    .row_ns = 1500,
    .dattn_ps = 7500,
    .pattn_ps = 190,
    .host_ns = 700,
    .eager_us = 60,
    .jitter = 0.15,
};

struct args {
	struct model m;
	double ratio, whole, burst; /* burst 0: auto */
	uint32_t chunk, per_decode, batch_tokens, running;
	uint32_t streams, clients, requests, prompt, gen, rounds;
	bool shared, trace;
	uint64_t seed;
	uint32_t long_streams, long_gen, n_long, long_prompt;
	double long_after_ms;
	int only; /* 0 both, 1 tput, 2 long, 3 sep */
};

/* ---- the simulated device ---- */

struct sim {
	const struct model *m;
	bool trace;    /* a line a step on stderr */
	double jitter; /* sigma of a step's log-normal factor, 0: none */
	uint64_t rng[4];
	uint64_t now; /* ns */
	uint64_t steps;
};

static uint32_t padded_rows(uint32_t m)
{
	uint32_t g = m <= 4 ? 1 : m <= 256 ? 16 : m <= 1024 ? 64 : 128;

	return (m + g - 1) / g * g;
}

static uint64_t step_ns(const struct model *m, const struct o1_step *st)
{
	uint64_t tokens = 0, dctx = 0, pairs = 0;
	bool prompt = false;
	double ns;

	for (uint32_t i = 0; i < st->n_seqs; i++) {
		const struct o1_step_seq *q = &st->seqs[i];
		uint64_t n = q->n_tokens, s = q->start_pos;

		tokens += n;
		if (n == 1) {
			dctx += s + 1;
		} else {
			prompt = true;
			pairs += n * s + n * (n + 1) / 2;
		}
	}
	ns = m->base_us * 1e3 + m->token_ns * padded_rows((uint32_t)tokens) +
	     m->row_ns * st->n_seqs + m->dattn_ps * 1e-3 * (double)dctx +
	     m->pattn_ps * 1e-3 * (double)pairs + m->host_ns * st->n_seqs +
	     (prompt ? m->eager_us * 1e3 : 0);
	return (uint64_t)ns;
}

/* The model's time (ms) of a step of ROWS decode rows at context CTX, or
 * of one prompt of TOKENS from position 0: the calibration points. */
static double shape_ms(const struct model *m, uint32_t rows, uint32_t ctx,
		       uint32_t tokens)
{
	static int32_t zero[2048];
	struct o1_step_seq q[256];
	struct o1_step st = {.seqs = q, .n_seqs = tokens ? 1 : rows};

	for (uint32_t i = 0; i < st.n_seqs; i++)
		q[i] = (struct o1_step_seq){.tokens = zero,
					    .n_tokens = tokens ? tokens : 1,
					    .start_pos = tokens ? 0 : ctx};
	return (double)step_ns(m, &st) / 1e6;
}

/* A made-up next token: a hash of the row's last token and position. */
static int32_t next_token(const struct o1_step_seq *q, uint32_t t)
{
	uint64_t h = (uint64_t)(uint32_t)q->tokens[t] * 0x9e3779b97f4a7c15ull +
		     (q->start_pos + t) * 0xbf58476d1ce4e5b9ull;

	return (int32_t)((h >> 17) % VOCAB);
}

/* NS times a log-normal factor of median 1 (--jitter: a real device's
 * steps vary, and the prefill budget learns from noisy times). */
static uint64_t jittered(struct sim *s, uint64_t ns)
{
	double u1, u2;

	if (!s->jitter)
		return ns;
	u1 = o1_prng_uniform(s->rng);
	u2 = o1_prng_uniform(s->rng);
	return (uint64_t)((double)ns * exp(s->jitter * sqrt(-2 * log(1 - u1)) *
					   cos(2 * M_PI * u2)));
}

static int sim_step(void *ctx, const struct o1_step *st)
{
	struct sim *s = ctx;
	uint32_t row = 0;

	for (uint32_t i = 0; i < st->n_seqs; i++) {
		const struct o1_step_seq *q = &st->seqs[i];
		uint32_t first = q->all_logits ? 0 : q->n_tokens - 1;

		for (uint32_t t = first; t < q->n_tokens; t++, row++) {
			struct o1_sample_result *r = &st->samples[row];

			memset(r, 0, sizeof(*r));
			r->id = next_token(q, t);
			r->n_top = st->sample_rows[row].n_logprobs;
		}
	}
	if (s->trace) {
		uint32_t rows = 0, tokens = 0;

		for (uint32_t i = 0; i < st->n_seqs; i++)
			if (st->seqs[i].n_tokens == 1)
				rows++;
			else
				tokens += st->seqs[i].n_tokens;
		fprintf(stderr,
			"step %llu at %.3f ms: %u decode rows, %u "
			"prompt tokens, %.3f ms\n",
			(unsigned long long)s->steps, (double)s->now / 1e6,
			rows, tokens, (double)step_ns(s->m, st) / 1e6);
	}
	s->now += jittered(s, step_ns(s->m, st));
	s->steps++;
	return 0;
}

static uint64_t sim_clock(void *ctx)
{
	return ((struct sim *)ctx)->now;
}

/* ---- requests and what their clients see ---- */

struct stream {
	uint32_t slot;	    /* its request's, or UINT32_MAX: idle */
	uint64_t submit_ns; /* of its request */
	uint64_t last_ns;   /* its last token, 0: none yet */
	bool is_long;
};

struct samples {
	uint64_t *v;
	size_t n, cap;
};

static void push(struct samples *s, uint64_t v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 4096;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v) {
			fprintf(stderr, "sched_sim: out of memory\n");
			exit(1);
		}
	}
	s->v[s->n++] = v;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Percentile P (0..100) in ms, nearest rank; 0 for none. */
static double pct_ms(struct samples *s, double p)
{
	size_t i;

	if (!s->n)
		return 0;
	qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
	i = (size_t)(p / 100.0 * (double)s->n + 0.999999);
	i = i ? i - 1 : 0;
	return (double)s->v[i < s->n ? i : s->n - 1] / 1e6;
}

struct world {
	const struct args *a;
	struct sim sim;
	struct o1_kv_pool *pool;
	struct o1_sched *s;
	struct o1_req *reqs;
	uint32_t *free_slots, n_free;
	struct stream *st; /* by stream index */
	uint64_t req_seq;
	uint64_t tokens;
};

static void warm_up(struct world *w);

/* The world of a run, warmed up as o1d starts (warm_up). */
static int world_init(struct world *w, const struct args *a)
{
	struct o1_kv_layout l = {N_PAGES, 1, 1, PAGE, 1};
	struct o1_sched_opts o = {
	    .step = sim_step,
	    .step_ctx = &w->sim,
	    .vocab_size = VOCAB,
	    .max_context = MAX_CTX,
	    .max_batch_tokens = a->batch_tokens,
	    .max_running = a->running,
	    .prefill_chunk_tokens = a->chunk,
	    .prefill_per_decode = a->per_decode,
	    .prefill_time_ratio = a->ratio,
	    .prefill_whole_ratio = a->whole,
	    .prefill_burst_ratio = a->burst,
	    .clock_ns = sim_clock,
	    .n_slots = MAX_SLOTS,
	    .max_prompt_bytes = MAX_CTX * ID_BYTES,
	    .salt_secret = 12345,
	    .prefix_cache = true,
	    .bos_id = -1,
	    .eos_id = -1,
	    .sampler_threads = 1,
	    .sample_in_backend = true,
	    .stall_timeout_ms = 0,
	};
	int err;

	memset(w, 0, sizeof(*w));
	w->a = a;
	w->sim.m = &a->m;
	w->sim.trace = a->trace;
	w->sim.jitter = a->m.jitter;
	o1_prng_seed(w->sim.rng, a->seed);
	err = o1_kv_pool_create(&l, &w->pool);
	if (err)
		return err;
	o.pool = w->pool;
	err = o1_sched_create(&o, &w->s);
	if (err)
		return err;
	w->reqs = calloc(MAX_SLOTS, sizeof(*w->reqs));
	w->free_slots = malloc(MAX_SLOTS * sizeof(uint32_t));
	w->st = calloc(MAX_SLOTS, sizeof(*w->st));
	if (!w->reqs || !w->free_slots || !w->st)
		return -ENOMEM;
	for (uint32_t i = 0; i < MAX_SLOTS; i++) {
		w->reqs[i].index = i;
		w->reqs[i].devout_area = -1;
		w->reqs[i].prompt = malloc(MAX_CTX * ID_BYTES);
		if (!w->reqs[i].prompt)
			return -ENOMEM;
		w->free_slots[w->n_free++] = MAX_SLOTS - 1 - i;
		w->st[i].slot = UINT32_MAX;
	}
	warm_up(w);
	return 0;
}

static void world_fini(struct world *w)
{
	o1_sched_destroy(w->s);
	for (uint32_t i = 0; w->reqs && i < MAX_SLOTS; i++)
		free(w->reqs[i].prompt);
	free(w->reqs);
	free(w->free_slots);
	free(w->st);
	o1_kv_pool_destroy(w->pool);
}

/* Stream K submits a request of N prompt tokens (cold: made from a
 * request counter, so no two share a page; shared: one text for all)
 * for GEN new tokens, from client CLIENT. */
static void submit(struct world *w, uint32_t k, uint32_t client, uint32_t n,
		   uint32_t gen, bool shared)
{
	uint32_t slot = w->free_slots[--w->n_free];
	struct o1_req *r = &w->reqs[slot];
	uint32_t *ids = (uint32_t *)r->prompt;
	uint64_t seq = ++w->req_seq;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t h = (shared ? 0 : seq) * 0x9e3779b97f4a7c15ull +
			     i * 0xbf58476d1ce4e5b9ull;

		ids[i] = (uint32_t)((h >> 23) % VOCAB);
	}
	r->client_id = client + 1;
	r->uid = 1000;
	r->req_id = seq;
	r->submit_ns = w->sim.now;
	memset(&r->params, 0, sizeof(r->params));
	r->params.prompt_kind = O1_PROMPT_IDS;
	r->params.max_tokens = gen;
	r->params.top_p = 1;
	r->params.repeat_penalty = 1;
	r->params.flags = O1_SUBMIT_NO_TEXT;
	r->prompt_bytes = n * ID_BYTES;
	atomic_store(&r->cancel, 0);
	atomic_store(&r->generated, 0);
	atomic_store(&r->out_head, 0);
	atomic_store(&r->out_tail, 0);
	w->st[k].slot = slot;
	w->st[k].submit_ns = w->sim.now;
	w->st[k].last_ns = 0;
	o1_sched_add(w->s, r);
}

/* What a stream's client does with each token: FIRST, with the time
 * since the submission, or the interval since its previous token. */
struct taker {
	void (*token)(void *ctx, struct world *w, uint32_t k, bool first,
		      uint64_t gap);
	void *ctx;
};

/* Stream K's client takes its request's events after a step; true at the
 * FINAL (the slot freed). */
static bool take(struct world *w, uint32_t k, const struct taker *t)
{
	struct stream *s = &w->st[k];
	struct o1_req *r = &w->reqs[s->slot];
	uint32_t tail = atomic_load(&r->out_tail);
	bool final = false;

	while (tail != atomic_load(&r->out_head)) {
		const union o1_wire_entry *ev =
		    &r->out[tail & (O1_REQ_OUT_ENTRIES - 1)];

		if (ev->op == O1_EV_TOKEN && ev->token.n_ids) {
			bool first = !s->last_ns;

			if (t->token)
				t->token(t->ctx, w, k, first,
					 first ? w->sim.now - s->submit_ns
					       : w->sim.now - s->last_ns);
			s->last_ns = w->sim.now;
			w->tokens++;
		} else if (ev->op == O1_EV_FINAL) {
			if (ev->final.reason != O1_FINISH_LENGTH) {
				fprintf(stderr,
					"sched_sim: a request ended with "
					"reason %u error %d\n",
					ev->final.reason, ev->final.error);
				exit(1);
			}
			final = true;
		}
		atomic_store(&r->out_tail, ++tail);
	}
	if (final) {
		w->free_slots[w->n_free++] = s->slot;
		s->slot = UINT32_MAX;
	}
	return final;
}

/* One step; false when the scheduler had nothing to run. */
static bool step(struct world *w)
{
	int n = o1_sched_step(w->s);

	if (n < 0) {
		fprintf(stderr, "sched_sim: step failed: %s\n", o1_strerror(n));
		exit(1);
	}
	return n > 0;
}

/* ---- the throughput run ---- */

struct tput {
	struct samples itl, ttft;
};

static void tput_token(void *ctx, struct world *w, uint32_t k, bool first,
		       uint64_t gap)
{
	struct tput *t = ctx;

	(void)w, (void)k;
	push(first ? &t->ttft : &t->itl, gap);
}

/* Round ROUND of the closed-loop throughput run in W (its line unless
 * QUIET). */
static int run_tput(struct world *w, uint32_t round, bool quiet)
{
	const struct args *a = w->a;
	struct tput t = {0};
	struct taker tk = {tput_token, &t};
	uint32_t submitted = 0, finished = 0, n = a->streams;
	uint64_t t0 = w->sim.now, tokens0 = w->tokens, steps0 = w->sim.steps;

	for (uint32_t k = 0; k < n && submitted < a->requests; k++, submitted++)
		submit(w, k, k % a->clients, a->prompt, a->gen, a->shared);
	while (finished < submitted) {
		if (!step(w)) {
			fprintf(stderr, "sched_sim: nothing runnable\n");
			return -EINVAL;
		}
		for (uint32_t k = 0; k < n; k++) {
			if (w->st[k].slot == UINT32_MAX || !take(w, k, &tk))
				continue;
			finished++;
			if (submitted < a->requests) {
				submit(w, k, k % a->clients, a->prompt, a->gen,
				       a->shared);
				submitted++;
			}
		}
	}
	if (!quiet)
		printf(
		    "tput round=%u streams=%u requests=%u prompt=%u gen=%u %s "
		    "ratio=%g tok_s=%.0f itl_p50_ms=%.2f itl_p99_ms=%.2f "
		    "p99_over_p50=%.2f ttft_p50_ms=%.1f steps=%llu "
		    "sim_s=%.2f\n",
		    round, a->streams, a->requests, a->prompt, a->gen,
		    a->shared ? "shared" : "cold", a->ratio,
		    (double)(w->tokens - tokens0) /
			((double)(w->sim.now - t0) / 1e9),
		    pct_ms(&t.itl, 50), pct_ms(&t.itl, 99),
		    pct_ms(&t.itl, 99) / pct_ms(&t.itl, 50),
		    pct_ms(&t.ttft, 50),
		    (unsigned long long)(w->sim.steps - steps0),
		    (double)(w->sim.now - t0) / 1e9);
	free(t.itl.v);
	free(t.ttft.v);
	return 0;
}

/* o1d's warm-up (warmup.c): one request of a 2-token prompt for 4 new
 * tokens through the scheduler, before any client's. It is what a fresh
 * daemon's estimator has measured (a decode step of one row) when the
 * first requests arrive. */
static void warm_up(struct world *w)
{
	static const struct taker none = {NULL, NULL};

	submit(w, 0, 0, 2, 4, false);
	while (w->st[0].slot != UINT32_MAX) {
		if (!step(w)) {
			fprintf(stderr, "sched_sim: warm-up not runnable\n");
			exit(1);
		}
		take(w, 0, &none);
	}
	w->tokens = 0;
}

/* The throughput rounds (none with --only long: a fresh daemon). */
static int run_tput_rounds(struct world *w, bool quiet)
{
	int err = 0;

	for (uint32_t r = 0; !err && w->a->only != 2 && r < w->a->rounds; r++)
		err = run_tput(w, r, quiet);
	return err;
}

/* ---- the long-prompt run ---- */

enum { BEFORE, DURING, AFTER };

/* One pass of the long-prompt run. With n_long 0 and a window (the
 * baseline: the same streams without the long prompts), the intervals
 * that end inside [lo, hi) are the "during" samples. */
struct longrun {
	uint32_t n_long;
	uint64_t lo, hi; /* the long prompts' window (ns) */
	int phase;
	uint32_t firsts;      /* streams with their first token */
	uint64_t firsts_ns;   /* when the last of them came */
	uint32_t firsts_long; /* long prompts with their first token */
	uint32_t gapped;      /* streams with a token interval */
	bool *has_gap;
	struct samples before, during, ttft;
};

static void long_token(void *ctx, struct world *w, uint32_t k, bool first,
		       uint64_t gap)
{
	struct longrun *l = ctx;

	if (w->st[k].is_long) {
		if (first) {
			push(&l->ttft, gap);
			if (++l->firsts_long == l->n_long) {
				l->phase = AFTER;
				l->hi = w->sim.now;
			}
		}
		return;
	}
	if (first) {
		if (++l->firsts == w->a->long_streams)
			l->firsts_ns = w->sim.now;
		return;
	}
	if (!l->has_gap[k]) {
		l->has_gap[k] = true;
		l->gapped++;
	}
	if (!l->n_long && l->hi) { /* the baseline */
		if (w->sim.now >= l->lo && w->sim.now < l->hi)
			push(&l->during, gap);
		return;
	}
	if (l->phase == BEFORE)
		push(&l->before, gap);
	else if (l->phase == DURING)
		push(&l->during, gap);
}

static void longrun_free(struct longrun *l)
{
	free(l->before.v);
	free(l->during.v);
	free(l->ttft.v);
	free(l->has_gap);
}

/* The streams of the long-prompt run in W, and L->n_long long prompts
 * once they decode (o1bench --long's timing: every stream had its first
 * token --long-after-ms ago, and an interval). */
static int run_long(struct world *w, struct longrun *l)
{
	const struct args *a = w->a;
	struct taker tk = {long_token, l};
	uint32_t n = a->long_streams, live = 0;

	l->has_gap = calloc(n + a->n_long, sizeof(bool));
	if (!l->has_gap)
		return -ENOMEM;
	for (uint32_t k = 0; k < n; k++, live++)
		submit(w, k, k % a->clients, a->prompt, a->long_gen, false);
	while (live) {
		if (!step(w)) {
			fprintf(stderr, "sched_sim: nothing runnable\n");
			return -EINVAL;
		}
		for (uint32_t k = 0; k < n + l->n_long; k++)
			if (w->st[k].slot != UINT32_MAX && take(w, k, &tk))
				live--;
		if (l->phase == BEFORE && l->firsts == n &&
		    w->sim.now - l->firsts_ns >= a->long_after_ms * 1e6 &&
		    l->gapped == n && l->n_long) {
			for (uint32_t i = 0; i < l->n_long; i++, live++) {
				w->st[n + i].is_long = true;
				submit(w, n + i, (n + i) % a->clients,
				       a->long_prompt, 1, false);
			}
			l->phase = DURING;
			l->lo = w->sim.now;
		}
	}
	for (uint32_t k = 0; k < n + l->n_long; k++)
		w->st[k].is_long = false;
	return 0;
}

/* The long-prompt run after the throughput rounds (as o1d would have
 * learnt from them), then the same again without the long prompts: the
 * streams' intervals in the same window are what they would have been
 * without them (their contexts grow meanwhile: a long window alone makes
 * the steps slower than before it). */
static int run_tput_rounds(struct world *w, bool quiet);

static int run_long_both(const struct args *a)
{
	struct longrun l = {.n_long = a->n_long}, base = {0};
	struct world w, wb;
	int err = world_init(&w, a);

	if (!err)
		err = run_tput_rounds(&w, true);
	if (!err)
		err = run_long(&w, &l);
	world_fini(&w);
	base.lo = l.lo;
	base.hi = l.hi;
	if (!err)
		err = world_init(&wb, a);
	if (!err)
		err = run_tput_rounds(&wb, true);
	if (!err)
		err = run_long(&wb, &base);
	if (!err)
		world_fini(&wb);
	if (!err)
		printf("long streams=%u gen=%u long=%u x %u ratio=%g "
		       "before_p50_ms=%.2f before_p99_ms=%.2f "
		       "during_p50_ms=%.2f during_p99_ms=%.2f "
		       "during_p99_over_before_p50=%.2f "
		       "without_p50_ms=%.2f during_p99_over_without_p50=%.2f "
		       "long_ttft_p50_ms=%.1f long_ttft_max_ms=%.1f "
		       "n_during=%zu\n",
		       a->long_streams, a->long_gen, a->n_long, a->long_prompt,
		       a->ratio, pct_ms(&l.before, 50), pct_ms(&l.before, 99),
		       pct_ms(&l.during, 50), pct_ms(&l.during, 99),
		       pct_ms(&l.during, 99) / pct_ms(&l.before, 50),
		       pct_ms(&base.during, 50),
		       pct_ms(&l.during, 99) / pct_ms(&base.during, 50),
		       pct_ms(&l.ttft, 50), pct_ms(&l.ttft, 100), l.during.n);
	longrun_free(&l);
	longrun_free(&base);
	return err;
}

/* --only sep: the long run, then a throughput round in the same
 * scheduler (prefill_sep.sh's order). */
static int run_sep(const struct args *a)
{
	struct longrun l = {.n_long = a->n_long};
	struct world w;
	int err = world_init(&w, a);

	if (!err)
		err = run_long(&w, &l);
	if (!err)
		err = run_tput(&w, 0, false);
	world_fini(&w);
	longrun_free(&l);
	return err;
}

/* ---- arguments ---- */

static void usage(void)
{
	fprintf(stderr,
		"usage: sched_sim [--preset llama3-8b|llama3-8b-4l] "
		"[--ratio R] [--whole R] [--burst R] [--chunk N]\n"
		"  [--per-decode N] [--batch-tokens N] [--running N] "
		"[--only tput|long|sep]\n"
		"  [--streams C] [--clients N] [--requests R] [--rounds N] "
		"[--prompt P] "
		"[--gen G] [--shared] [--trace]\n"
		"  [--long-streams S] [--long-gen G] [--long N] "
		"[--long-prompt L] [--long-after-ms T]\n"
		"  [--base-us X] [--token-ns X] [--row-ns X] [--dattn-ps X]\n"
		"  [--pattn-ps X] [--host-ns X] [--eager-us X] [--jitter S] "
		"[--seed N]\n");
	exit(2);
}

static double num(const char *opt, const char *v, double lo, double hi)
{
	char *end;
	double x;

	if (!v)
		usage();
	x = strtod(v, &end);
	if (*end || end == v || !(x >= lo && x <= hi)) {
		fprintf(stderr, "sched_sim: %s wants a number in [%g, %g]\n",
			opt, lo, hi);
		exit(2);
	}
	return x;
}

static void parse(int argc, char **argv, struct args *a)
{
	*a = (struct args){
	    .m = llama3_8b,
	    .whole = 0.6,
	    .burst = 0,
	    .chunk = 2048,
	    .batch_tokens = 2048,
	    .running = 256,
	    .streams = 256,
	    .clients = 16,
	    .requests = 512,
	    .prompt = 200,
	    .gen = 128,
	    .rounds = 2,
	    .long_streams = 64,
	    .long_gen = 1024,
	    .n_long = 8,
	    .long_prompt = 8180,
	    .long_after_ms = 1000,
	};
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--shared") || !strcmp(o, "--trace")) {
			*(o[2] == 's' ? &a->shared : &a->trace) = true;
			continue;
		}
		i++;
		if (!strcmp(o, "--preset")) {
			if (!v)
				usage();
			if (!strcmp(v, "llama3-8b"))
				a->m = llama3_8b;
			else if (!strcmp(v, "llama3-8b-4l"))
				a->m = llama3_8b_4l;
			else
				usage();
		} else if (!strcmp(o, "--only")) {
			if (!v)
				usage();
			a->only = !strcmp(v, "tput")   ? 1
				  : !strcmp(v, "long") ? 2
				  : !strcmp(v, "sep")  ? 3
						       : (usage(), 0);
		} else if (!strcmp(o, "--ratio")) {
			a->ratio = num(o, v, 0, 16);
		} else if (!strcmp(o, "--whole")) {
			a->whole = num(o, v, 0, 16);
		} else if (!strcmp(o, "--burst")) {
			a->burst = num(o, v, 0.01, 16);
		} else if (!strcmp(o, "--chunk")) {
			a->chunk = (uint32_t)num(o, v, 1, 1 << 20);
		} else if (!strcmp(o, "--per-decode")) {
			a->per_decode = (uint32_t)num(o, v, 0, 64);
		} else if (!strcmp(o, "--batch-tokens")) {
			a->batch_tokens = (uint32_t)num(o, v, 1, 1 << 20);
		} else if (!strcmp(o, "--running")) {
			a->running = (uint32_t)num(o, v, 1, MAX_SLOTS / 2);
		} else if (!strcmp(o, "--streams")) {
			a->streams = (uint32_t)num(o, v, 1, MAX_SLOTS / 2);
		} else if (!strcmp(o, "--clients")) {
			a->clients = (uint32_t)num(o, v, 1, 1024);
		} else if (!strcmp(o, "--requests")) {
			a->requests = (uint32_t)num(o, v, 1, 1e7);
		} else if (!strcmp(o, "--rounds")) {
			a->rounds = (uint32_t)num(o, v, 1, 100);
		} else if (!strcmp(o, "--prompt")) {
			a->prompt = (uint32_t)num(o, v, 1, MAX_CTX / 2);
		} else if (!strcmp(o, "--gen")) {
			a->gen = (uint32_t)num(o, v, 1, MAX_CTX / 2);
		} else if (!strcmp(o, "--long-streams")) {
			a->long_streams = (uint32_t)num(o, v, 1, MAX_SLOTS / 4);
		} else if (!strcmp(o, "--long-gen")) {
			a->long_gen = (uint32_t)num(o, v, 2, MAX_CTX / 2);
		} else if (!strcmp(o, "--long")) {
			a->n_long = (uint32_t)num(o, v, 0, MAX_SLOTS / 4);
		} else if (!strcmp(o, "--long-prompt")) {
			a->long_prompt = (uint32_t)num(o, v, 1, MAX_CTX - 2);
		} else if (!strcmp(o, "--long-after-ms")) {
			a->long_after_ms = num(o, v, 0, 1e7);
		} else if (!strcmp(o, "--jitter")) {
			a->m.jitter = num(o, v, 0, 2);
		} else if (!strcmp(o, "--seed")) {
			a->seed = (uint64_t)num(o, v, 0, 1e15);
		} else if (!strcmp(o, "--base-us")) {
			a->m.base_us = num(o, v, 0, 1e6);
		} else if (!strcmp(o, "--token-ns")) {
			a->m.token_ns = num(o, v, 0, 1e7);
		} else if (!strcmp(o, "--row-ns")) {
			a->m.row_ns = num(o, v, 0, 1e7);
		} else if (!strcmp(o, "--dattn-ps")) {
			a->m.dattn_ps = num(o, v, 0, 1e8);
		} else if (!strcmp(o, "--pattn-ps")) {
			a->m.pattn_ps = num(o, v, 0, 1e8);
		} else if (!strcmp(o, "--host-ns")) {
			a->m.host_ns = num(o, v, 0, 1e7);
		} else if (!strcmp(o, "--eager-us")) {
			a->m.eager_us = num(o, v, 0, 1e6);
		} else {
			usage();
		}
	}
}

int main(int argc, char **argv)
{
	struct world w;
	struct args a;
	int err = 0;

	parse(argc, argv, &a);
	o1_log_set_level(O1_LOG_WARN);
	printf("# sched_sim: base_us=%g token_ns=%g row_ns=%g dattn_ps=%g "
	       "pattn_ps=%g host_ns=%g eager_us=%g jitter=%g seed=%llu "
	       "ratio=%g whole=%g chunk=%u per_decode=%u batch_tokens=%u "
	       "running=%u\n",
	       a.m.base_us, a.m.token_ns, a.m.row_ns, a.m.dattn_ps,
	       a.m.pattn_ps, a.m.host_ns, a.m.eager_us, a.m.jitter,
	       (unsigned long long)a.seed, a.ratio, a.whole, a.chunk,
	       a.per_decode, a.batch_tokens, a.running);
	printf("# the model's steps: 1 row at 128 %.2f ms, 64 rows at 700 "
	       "%.2f ms, 256 rows at 144 %.2f ms, a 128-token prompt %.2f ms, "
	       "a 2,048-token prompt %.2f ms\n",
	       shape_ms(&a.m, 1, 128, 0), shape_ms(&a.m, 64, 700, 0),
	       shape_ms(&a.m, 256, 144, 0), shape_ms(&a.m, 0, 0, 128),
	       shape_ms(&a.m, 0, 0, 2048));
	if (a.only == 3) {
		err = run_sep(&a);
	} else if (a.only != 2) {
		err = world_init(&w, &a);
		if (!err)
			err = run_tput_rounds(&w, false);
		world_fini(&w);
	}
	if (!err && (a.only == 0 || a.only == 2))
		err = run_long_both(&a);
	if (err)
		fprintf(stderr, "sched_sim: %s\n", o1_strerror(err));
	return err ? 1 : 0;
}

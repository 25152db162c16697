/* Parallel sampling in the scheduler: the same requests (seeded sampling
 * with temperature, top-k, top-p, min-p, penalties, logprobs and the
 * confidence terms) run through the scheduler with sampler_threads 1 (on
 * the engine thread), 4 and the default must give byte-identical event
 * streams, in the same order. So must sampling in the backend (the fake
 * backend then runs o1_sample_rows over its logits): with room for every
 * penalty list (no logits come back), and with room for few, so that
 * some sequences are sampled on the host in steps that return both. The
 * fake backend answers, for each sequence, pseudo-random logits seeded by
 * a hash of the whole sequence, over a vocabulary that is not a multiple
 * of the sampler's lanes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "kernels/sample.h"
#include "o1d/scheduler.h"

#define VOCAB	 3001
#define P	 4
#define N_REQS	 12
#define MAX_TOK	 40
#define MAX_EVS	 (4 * MAX_TOK + 8)
#define N_EVENTS (N_REQS * MAX_EVS)

static uint32_t mix(uint32_t h, uint32_t t)
{
	return (h ^ t) * 16777619u + 7;
}

struct fake {
	int32_t *kv;	  /* the token ids, by KV slot */
	float *logits;	  /* when the step brings none */
	void *scratch;	  /* o1_sample_scratch_bytes(VOCAB) */
	uint32_t sampled; /* steps that asked for samples */
	uint32_t both;	  /* of those, steps that asked for logits too */
};

/* Logits in [-6, 6) from a hash of the sequence's tokens; the KV is the
 * token ids, read back through the block table. Samples them when
 * asked. */
static int fake_step(void *ctx, const struct o1_step *st)
{
	struct fake *f = ctx;
	int32_t *kv = f->kv;
	float *logits = st->logits ? st->logits : f->logits;

	for (uint32_t s = 0; s < st->n_seqs; s++) {
		const struct o1_step_seq *q = &st->seqs[s];
		uint32_t end = q->start_pos + q->n_tokens, h = 2166136261u;
		float *row = logits + (size_t)s * VOCAB;

		for (uint32_t i = 0; i < q->n_tokens; i++) {
			uint32_t pos = q->start_pos + i;

			kv[q->pages[pos / P] * P + pos % P] = q->tokens[i];
		}
		for (uint32_t pos = 0; pos < end; pos++)
			h = mix(h,
				(uint32_t)kv[q->pages[pos / P] * P + pos % P]);
		for (uint32_t v = 0; v < VOCAB; v++) {
			h = mix(h, v);
			row[v] = (float)(h >> 8) / (float)(1u << 24) * 12 - 6;
		}
	}
	if (!st->samples)
		return 0;
	f->sampled++;
	f->both += st->logits != NULL;
	return o1_sample_rows(st->samples, logits, st->n_seqs, VOCAB,
			      st->sample_rows, st->pens, f->scratch);
}

/* How the requests are sampled: threads, and in the backend with room
 * for PENS penalty entries per step. */
struct mode {
	uint32_t threads;
	bool backend;
	uint32_t pens;
};

/* Request I's sampling parameters: every path of the sampler. */
static void params(struct o1_wire_submit *w, uint32_t i)
{
	memset(w, 0, sizeof(*w));
	w->prompt_kind = O1_PROMPT_IDS;
	w->flags = O1_SUBMIT_NO_TEXT | O1_SUBMIT_CONFIDENCE;
	w->max_tokens = MAX_TOK;
	w->temperature = i % 6 ? 0.5f + 0.1f * (float)(i % 5) : 0;
	w->top_p = i % 3 == 1 ? 0.9f : 1;
	w->min_p = i % 4 == 2 ? 0.05f : 0;
	w->top_k = i % 5 == 3 ? 40 : 0;
	w->repeat_penalty = i % 2 ? 1.2f : 1;
	w->presence_penalty = i % 7 == 4 ? 0.5f : 0;
	w->frequency_penalty = i % 7 == 5 ? 0.3f : 0;
	w->n_logprobs = i % 3 == 2 ? 5 : 0;
	w->seed = 100 + i;
}

/* Runs the requests sampled as M says; EV gets every event of request i
 * at [i * MAX_EVS, ...), N their counts; F counts the sampled steps. */
static void run(const struct mode *m, union o1_wire_entry *ev, uint32_t *n,
		struct fake *f)
{
	struct o1_kv_layout l = {256, 1, 1, P, 1};
	struct o1_kv_pool *pool;
	struct o1_sched *s;
	struct o1_req *reqs = calloc(N_REQS, sizeof(*reqs));
	struct o1_sched_opts o = {
	    .step = fake_step,
	    .step_ctx = f,
	    .vocab_size = VOCAB,
	    .max_context = 64,
	    .max_batch_tokens = 64,
	    .max_running = 8,
	    .prefill_chunk_tokens = 16,
	    .n_slots = N_REQS,
	    .max_prompt_bytes = 4096,
	    .salt_secret = 1,
	    .bos_id = -1,
	    .eos_id = -1,
	    .sampler_threads = m->threads,
	    .sample_in_backend = m->backend,
	    .sample_pens = m->pens,
	};

	*f = (struct fake){
	    .kv = calloc(256 * P, sizeof(int32_t)),
	    .logits = malloc(8 * VOCAB * sizeof(float)),
	    .scratch = aligned_alloc(64, o1_sample_scratch_bytes(VOCAB)),
	};
	assert_true(f->kv && f->logits && f->scratch);
	assert_non_null(reqs);
	assert_int_equal(o1_kv_pool_create(&l, &pool), 0);
	o.pool = pool;
	assert_int_equal(o1_sched_create(&o, &s), 0);
	memset(n, 0, N_REQS * sizeof(*n));
	for (uint32_t i = 0; i < N_REQS; i++) {
		struct o1_req *r = &reqs[i];
		int32_t prompt[5] = {1, 2, 3, (int32_t)i, (int32_t)(7 * i)};

		r->index = i;
		r->req_id = 500 + i;
		r->prompt = malloc(sizeof(prompt));
		memcpy(r->prompt, prompt, sizeof(prompt));
		r->prompt_bytes = sizeof(prompt);
		params(&r->params, i);
		o1_sched_add(s, r);
	}
	for (int step = 0; step < 10000 && o1_sched_active(s); step++) {
		assert_true(o1_sched_step(s) >= 0);
		for (uint32_t i = 0; i < N_REQS; i++) {
			struct o1_req *r = &reqs[i];
			uint32_t t = atomic_load(&r->out_tail);

			for (; t != atomic_load(&r->out_head); t++) {
				assert_true(n[i] < MAX_EVS);
				ev[i * MAX_EVS + n[i]++] =
				    r->out[t & (O1_REQ_OUT_ENTRIES - 1)];
			}
			atomic_store(&r->out_tail, t);
		}
	}
	assert_int_equal(o1_sched_active(s), 0);
	o1_sched_destroy(s);
	o1_kv_pool_destroy(pool);
	for (uint32_t i = 0; i < N_REQS; i++)
		free(reqs[i].prompt);
	free(reqs);
	free(f->kv);
	free(f->logits);
	free(f->scratch);
}

static void test_serial_equals_parallel(void **state)
{
	union o1_wire_entry *a = calloc(N_EVENTS, sizeof(*a));
	union o1_wire_entry *b = calloc(N_EVENTS, sizeof(*b));
	uint32_t na[N_REQS], nb[N_REQS];
	uint32_t distinct = 0;
	struct fake f;
	const struct mode serial = {1, false, 0};
	const struct mode modes[] = {
	    {4, false, 0},
	    {0, false, 0},
	    {1, true, 8 * (MAX_TOK + 5)}, /* room for every list */
	    {4, true, 12},		  /* lists of 5 to 45: few fit */
	    {1, true, 0},		  /* penalised ones on the host */
	};

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	run(&serial, a, na, &f);
	assert_int_equal(f.sampled, 0);
	for (uint32_t i = 0; i < N_REQS; i++) {
		/* every request streamed MAX_TOK tokens and one FINAL */
		assert_true(na[i] > MAX_TOK);
		assert_int_equal(a[i * MAX_EVS + na[i] - 1].token.op,
				 O1_EV_FINAL);
		distinct += i && a[i * MAX_EVS].token.ids[0] !=
				     a[(i - 1) * MAX_EVS].token.ids[0];
	}
	assert_true(distinct > N_REQS / 2); /* the streams differ */
	for (size_t t = 0; t < sizeof(modes) / sizeof(modes[0]); t++) {
		memset(b, 0, N_EVENTS * sizeof(*b));
		run(&modes[t], b, nb, &f);
		assert_memory_equal(na, nb, sizeof(na));
		assert_memory_equal(a, b, N_EVENTS * sizeof(*a));
		if (!modes[t].backend)
			continue;
		/* every step sampled in the backend; logits only came back
		 * for sequences whose penalties did not fit */
		assert_true(f.sampled > MAX_TOK);
		if (t == 2)
			assert_int_equal(f.both, 0);
		else
			assert_true(f.both > 0 && f.both <= f.sampled);
	}
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_serial_equals_parallel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

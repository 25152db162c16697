/* o1_sample_rows (kernels/sample.c): the definition on small rows (greedy
 * ties and NaN, the draw at both ends of U, each penalty, logprobs and the
 * top-n against double arithmetic), then batches of rows against
 * o1_sampler_sample over a sweep of vocabulary sizes, sampling modes and
 * rows (random, ties, NaN, -inf, +inf, all NaN, all -inf, one peak),
 * with prompts and penalties: the ids, logprob and entropy bits, top-n
 * and finish must be equal token after token, every row of a batch
 * reading its own penalty entries. Bad parameters are refused with
 * -EINVAL and nothing written; the sampler's penalty list, -ENOSPC
 * without a draw, and results outside the vocabulary refused. Token masks
 * (o1_sample_rows_masked): every mode over random masks equals
 * o1_sample_rows on the masked copy (refused tokens at -inf) bit for bit;
 * only the lowest logit allowed is drawn in every mode; no refused token
 * on all -inf rows; nothing allowed is id -1; a mask index past the
 * masks, -EINVAL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "common/error.h"
#include "kernels/sample.h"
#include "sampler/sampler.h"

#define V	   8
#define STEPS	   5
#define REQS	   3
#define PROMPT_MAX 24

static const float logits8[V] = {1.0f,	2.5f, 0.3f, 2.0f,
				 -1.0f, 1.8f, 0.0f, 2.5f};

static struct o1_sample_row greedy_row(void)
{
	return (struct o1_sample_row){.top_p = 1, .repetition_penalty = 1};
}

static int sample1(const float *l, uint32_t vocab,
		   const struct o1_sample_row *row,
		   const struct o1_sample_penalty *pens,
		   struct o1_sample_result *out)
{
	void *scratch = aligned_alloc(64, o1_sample_scratch_bytes(vocab));
	int err;

	assert_non_null(scratch);
	err = o1_sample_rows(out, l, 1, vocab, row, pens, scratch);
	free(scratch);
	return err;
}

static int32_t sample_id(const float *l, const struct o1_sample_row *row,
			 const struct o1_sample_penalty *pens)
{
	struct o1_sample_result out;

	assert_int_equal(sample1(l, V, row, pens, &out), 0);
	return out.id;
}

static void test_greedy(void **state)
{
	struct o1_sample_row r = greedy_row();
	float l[V];

	(void)state;
	assert_int_equal(sample_id(logits8, &r, NULL), 1); /* 1 and 7 tie */
	r.temperature = 3, r.top_k = 1;			   /* also greedy */
	assert_int_equal(sample_id(logits8, &r, NULL), 1);
	memcpy(l, logits8, sizeof(l));
	l[0] = NAN, l[1] = NAN;
	r = greedy_row();
	assert_int_equal(sample_id(l, &r, NULL), 7); /* NaN never wins */
	for (int i = 0; i < V; i++)
		l[i] = NAN;
	assert_int_equal(sample_id(l, &r, NULL), 0);
}

/* A NaN at the head of a 16-wide group must not hide that lane for the
 * rest of its block (the vectorised maximum once started from the first
 * group); rows long enough for the vector path, NaN in several lanes. */
static void test_greedy_nan_lanes(void **state)
{
	struct o1_sample_row r = greedy_row();
	struct o1_sample_result out;
	static float l[3000];

	(void)state;
	for (uint32_t n = 32; n <= 3000; n += 61) {
		for (uint32_t i = 0; i < n; i++)
			l[i] = -1;
		l[0] = NAN, l[3] = 1;
		for (uint32_t i = 17; i < n; i += 16 * 7)
			l[i - 1] = NAN; /* heads of later groups too */
		l[n - 1 - (n > 40) * 7] = 5; /* the best, behind NaN lanes */
		assert_int_equal(sample1(l, n, &r, NULL, &out), 0);
		assert_int_equal(out.id, (int32_t)(n - 1 - (n > 40) * 7));
	}
	for (uint32_t i = 0; i < 64; i++)
		l[i] = -1;
	l[0] = NAN, l[3] = 1, l[16] = 5; /* the case found by test_sample_cuda */
	assert_int_equal(sample1(l, 64, &r, NULL, &out), 0);
	assert_int_equal(out.id, 16);
}

/* U = 0 draws the first kept token, U just below 1 the last. */
static void test_draw_ends(void **state)
{
	struct o1_sample_row r = greedy_row();
	const double top = 1 - 0x1.0p-53;

	(void)state;
	r.temperature = 1, r.top_k = 3; /* kept: 1, 7, 3 */
	assert_int_equal(sample_id(logits8, &r, NULL), 1);
	r.u = top;
	assert_int_equal(sample_id(logits8, &r, NULL), 3);
	r.top_k = 0; /* every token in id order */
	r.u = 0;
	assert_int_equal(sample_id(logits8, &r, NULL), 0);
	r.u = top;
	assert_int_equal(sample_id(logits8, &r, NULL), 7);
	r.top_p = 0.6f; /* 1 and 7 hold 0.56 of the mass, 3 crosses */
	assert_int_equal(sample_id(logits8, &r, NULL), 3);
	r.top_p = 0.5f; /* 3 stays out */
	assert_int_equal(sample_id(logits8, &r, NULL), 7);
	r.top_p = 1, r.min_p = 0.45f; /* p >= 0.45 p_max: 1, 7, 3, 5 */
	assert_int_equal(sample_id(logits8, &r, NULL), 5);
}

static void test_penalties(void **state)
{
	struct o1_sample_row r = greedy_row();
	struct o1_sample_penalty pens[] = {
	    {6, 0, 1}, {1, 0, 1}, {7, 1, 0}, {1, 1, 1}, {7, 1, 0}};
	struct o1_sample_result out;

	(void)state;
	r.repetition_penalty = 2, r.pen_off = 1, r.n_pen = 1; /* 1: 1.25 */
	assert_int_equal(sample_id(logits8, &r, pens), 7);
	r = greedy_row();
	r.presence_penalty = 1, r.pen_off = 3, r.n_pen = 2; /* 1, 7: 1.5 */
	assert_int_equal(sample_id(logits8, &r, pens), 3);
	r.presence_penalty = 0, r.frequency_penalty = 0.6f; /* 1.9 */
	assert_int_equal(sample_id(logits8, &r, pens), 3);
	r.frequency_penalty = 0.4f; /* 2.1 */
	assert_int_equal(sample_id(logits8, &r, pens), 1);
	/* prompt-only tokens take repetition, not frequency or presence */
	r = greedy_row();
	r.presence_penalty = 5, r.frequency_penalty = 5;
	r.pen_off = 1, r.n_pen = 1;
	assert_int_equal(sample_id(logits8, &r, pens), 1);
	/* logprobs describe the raw row, before penalties */
	r = greedy_row();
	r.repetition_penalty = 4, r.pen_off = 1, r.n_pen = 1;
	assert_int_equal(sample1(logits8, V, &r, pens, &out), 0);
	assert_int_equal(out.id, 7);
	{
		double z = 0;

		for (int i = 0; i < V; i++)
			z += exp(logits8[i] - 2.5);
		assert_float_equal(out.logprob, -log(z), 1e-6);
	}
}

static void test_describe(void **state)
{
	struct o1_sample_row r = greedy_row();
	struct o1_sample_result out;
	double z = 0, zl = 0, ent;
	const int32_t want[5] = {1, 7, 3, 5, 0};

	(void)state;
	for (int i = 0; i < V; i++) {
		z += exp(logits8[i] - 2.5);
		zl += exp(logits8[i] - 2.5) * (logits8[i] - 2.5);
	}
	ent = log(z) - zl / z;
	r.n_logprobs = 5;
	assert_int_equal(sample1(logits8, V, &r, NULL, &out), 0);
	assert_int_equal(out.n_top, 5);
	for (int j = 0; j < 5; j++) {
		assert_int_equal(out.top_id[j], want[j]);
		assert_float_equal(out.top_logprob[j],
				   logits8[want[j]] - 2.5 - log(z), 1e-6);
	}
	assert_float_equal(out.entropy, ent, 1e-6);
	r.n_logprobs = 20; /* more than the vocabulary: all of it */
	assert_int_equal(sample1(logits8, V, &r, NULL, &out), 0);
	assert_int_equal(out.n_top, V);
}

/* Every refused parameter: -EINVAL and OUT untouched, also for a good
 * row batched before the bad one. */
static void test_bad_params(void **state)
{
	struct o1_sample_penalty pens[2] = {{1, 0, 1}, {V, 0, 1}};
	struct o1_sample_result out[2], before[2];
	struct o1_sample_row rows[2];
	float l[2 * V];
	void *scratch = aligned_alloc(64, o1_sample_scratch_bytes(V));

	(void)state;
	assert_non_null(scratch);
	memcpy(l, logits8, sizeof(logits8));
	memcpy(l + V, logits8, sizeof(logits8));
	memset(before, 0xab, sizeof(before));
	for (int c = 0; c < 17; c++) {
		struct o1_sample_row *r = &rows[1];
		const struct o1_sample_penalty *p = pens;

		rows[0] = rows[1] = greedy_row();
		r->temperature = 1;
		switch (c) {
		case 0:
			r->temperature = -1;
			break;
		case 1:
			r->temperature = NAN;
			break;
		case 2:
			r->temperature = INFINITY;
			break;
		case 3:
			r->top_p = -0.1f;
			break;
		case 4:
			r->top_p = 1.1f;
			break;
		case 5:
			r->top_p = NAN;
			break;
		case 6:
			r->min_p = -0.1f;
			break;
		case 7:
			r->min_p = 1.5f;
			break;
		case 8:
			r->repetition_penalty = -1;
			break;
		case 9:
			r->repetition_penalty = NAN;
			break;
		case 10:
			r->presence_penalty = INFINITY;
			break;
		case 11:
			r->frequency_penalty = NAN;
			break;
		case 12:
			r->n_logprobs = O1_SAMPLE_MAX_TOP + 1;
			break;
		case 13:
			r->pen_off = 1, r->n_pen = 1;
			break; /* id V */
		case 14:
			r->n_pen = 1, p = NULL;
			break;
		case 15:
			pens[0].id = -1, r->n_pen = 1;
			break;
		case 16:
			r->repetition_penalty = 2, r->n_pen = 1;
			break;
		}
		memcpy(out, before, sizeof(out));
		if (c == 16) { /* the good control: both rows sampled */
			pens[0].id = 1;
			assert_int_equal(
			    o1_sample_rows(out, l, 2, V, rows, p, scratch), 0);
			assert_int_equal(out[0].id, 1);
			continue;
		}
		assert_int_equal(o1_sample_rows(out, l, 2, V, rows, p, scratch),
				 -EINVAL);
		assert_memory_equal(out, before, sizeof(out));
	}
	assert_int_equal(o1_sample_rows(out, l, 1, 0, rows, NULL, scratch),
			 -EINVAL);
	free(scratch);
}

/* Masked rows against the reference on the masked copy. */
static void test_masked(void **state)
{
	const uint32_t v = 1000, words = o1_sample_mask_words(v);
	static const struct o1_sample_row modes[] = {
	    {.top_p = 1, .repetition_penalty = 1, .n_logprobs = 5},
	    {.temperature = 0.8f, .top_p = 1, .repetition_penalty = 1},
	    {.temperature = 1, .top_k = 40, .top_p = 1,
	     .repetition_penalty = 1, .n_logprobs = 3},
	    {.temperature = 1, .top_p = 0.9f, .repetition_penalty = 1},
	    {.temperature = 1.2f, .top_p = 1, .min_p = 0.05f,
	     .repetition_penalty = 1, .n_logprobs = 20},
	    {.temperature = 1, .top_k = 400, .top_p = 1,
	     .repetition_penalty = 1},
	    {.temperature = 1, .top_p = 1, .repetition_penalty = 1.3f,
	     .presence_penalty = 0.5f, .n_pen = 3},
	};
	const struct o1_sample_penalty pens[3] = {{5, 1, 0}, {17, 0, 1},
						  {900, 2, 1}};
	float *l = malloc(v * sizeof(float)), *lm = malloc(v * sizeof(float));
	uint32_t *mask = malloc(words * 4);
	void *scratch = aligned_alloc(64, o1_sample_scratch_bytes(v));
	uint64_t x = 99;

	(void)state;
	assert_true(l && lm && mask && scratch);
	for (int round = 0; round < 40; round++) {
		uint32_t lo = 0;

		for (uint32_t i = 0; i < v; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			l[i] = (float)((x >> 40) % 2000) / 200.0f - 5;
			lo = l[i] < l[lo] ? i : lo;
		}
		for (uint32_t w = 0; w < words; w++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			mask[w] = round % 4 == 3 ? 0 : (uint32_t)(x >> 32);
		}
		if (round % 4 == 2) { /* only the lowest logit */
			memset(mask, 0, words * 4);
			mask[lo / 32] = 1u << (lo % 32);
		}
		for (uint32_t i = 0; i < v; i++)
			lm[i] = mask[i / 32] >> (i % 32) & 1 ? l[i] : -INFINITY;
		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
			struct o1_sample_row r = modes[m];
			struct o1_sample_result got, want;

			r.u = (double)(round * 7 + (int)m) / 300.0;
			r.mask = 1;
			assert_int_equal(o1_sample_rows_masked(&got, l, 1, v, &r,
							       pens, mask, 1,
							       scratch),
					 0);
			if (round % 4 == 3) {
				assert_int_equal(got.id, O1_SAMPLE_NO_TOKEN);
				assert_true(got.logprob == -INFINITY);
				assert_int_equal(got.n_top, 0);
				continue;
			}
			r.mask = 0;
			assert_int_equal(o1_sample_rows(&want, lm, 1, v, &r,
							pens, scratch),
					 0);
			assert_memory_equal(&got, &want, sizeof(got));
			assert_true(mask[got.id / 32] >> (got.id % 32) & 1);
			if (round % 4 == 2)
				assert_int_equal(got.id, (int32_t)lo);
		}
	}
	free(l), free(lm), free(mask), free(scratch);
}

/* Rows whose allowed tokens are all -inf answer an allowed one; a mask
 * index past the masks is refused. */
static void test_masked_degenerate(void **state)
{
	float l[V];
	uint32_t mask = 0x90; /* tokens 4 and 7 */
	struct o1_sample_row r = greedy_row();
	struct o1_sample_result out;
	void *scratch = aligned_alloc(64, o1_sample_scratch_bytes(V));

	(void)state;
	assert_non_null(scratch);
	for (int i = 0; i < V; i++)
		l[i] = -INFINITY;
	l[0] = 3; /* refused */
	r.mask = 1;
	assert_int_equal(
	    o1_sample_rows_masked(&out, l, 1, V, &r, NULL, &mask, 1, scratch),
	    0);
	assert_int_equal(out.id, 4);
	r.temperature = 1, r.u = 0.999;
	assert_int_equal(
	    o1_sample_rows_masked(&out, l, 1, V, &r, NULL, &mask, 1, scratch),
	    0);
	assert_int_equal(out.id, 4);
	r.top_k = 5;
	assert_int_equal(
	    o1_sample_rows_masked(&out, l, 1, V, &r, NULL, &mask, 1, scratch),
	    0);
	assert_int_equal(out.id, 4);
	r.mask = 2;
	assert_int_equal(
	    o1_sample_rows_masked(&out, l, 1, V, &r, NULL, &mask, 1, scratch),
	    -EINVAL);
	assert_int_equal(
	    o1_sample_rows_masked(&out, l, 1, V, &r, NULL, NULL, 1, scratch),
	    -EINVAL);
	r.mask = 1;
	assert_int_equal(o1_sample_rows(&out, l, 1, V, &r, NULL, scratch),
			 -EINVAL);
	free(scratch);
}

static void test_scratch_bytes(void **state)
{
	const uint32_t vocabs[] = {1, 17, 1024, 151936};
	struct o1_sample_row r = greedy_row();

	(void)state;
	for (int v = 0; v < 4; v++) {
		size_t all = o1_sample_scratch_bytes(vocabs[v]);

		assert_true(all % 64 == 0);
		r = greedy_row();
		assert_int_equal(o1_sample_row_scratch_bytes(&r, vocabs[v]), 0);
		for (int m = 0; m < 6; m++) {
			size_t b;

			r = greedy_row();
			r.temperature = m ? 1.0f : 0;
			r.repetition_penalty = m == 0 ? 1.1f : 1;
			r.top_k = m == 2 ? 40 : m == 3 ? 1000 : 0;
			r.top_p = m == 4 ? 0.9f : 1;
			r.min_p = m == 5 ? 0.1f : 0;
			b = o1_sample_row_scratch_bytes(&r, vocabs[v]);
			assert_true(b > 0 && b <= all && b % 64 == 0);
		}
	}
}

/* ---- batches against the sampler ---- */

struct mode {
	float t, top_p, min_p, rep, pres, freq;
	uint32_t top_k, n_lp;
};

static const struct mode modes[] = {
    {0, 1, 0, 1, 0, 0, 0, 0},
    {0, 1, 0, 1, 0, 0, 0, 5},
    {0, 1, 0, 1.3f, 0.4f, 0.2f, 0, 3},
    {2, 1, 0, 1, 0, 0, 1, 0},
    {0.8f, 1, 0, 1, 0, 0, 0, 0},
    {1, 1, 0, 1, 0, 0, 40, 20},
    {1.1f, 1, 0, 1, 0, 0, 300, 1},
    {0.9f, 0.9f, 0, 1, 0, 0, 0, 2},
    {0.7f, 1, 0.05f, 1, 0, 0, 0, 0},
    {1.2f, 0.95f, 0.02f, 1, 0, 0, 0, 4},
    {1, 0.8f, 0.1f, 1.2f, 0.5f, 0.3f, 50, 5},
    {1, 1, 0, 0.8f, -0.5f, -0.2f, 0, 0},
    {0.5f, 0, 0, 0, 0, 0, 100000, 0},
    {1.5f, 0.6f, 0, 1.1f, 0, 0.7f, 0, 1},
};
#define N_MODES (sizeof(modes) / sizeof(modes[0]))

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return *x >> 33;
}

/* Row kinds: random, integer ties, some NaN, some -inf, one +inf, all
 * NaN, all -inf, one peak. */
static void fill(float *l, uint32_t v, int kind, uint64_t seed)
{
	for (uint32_t i = 0; i < v; i++) {
		float u = 0;

		for (int j = 0; j < 4; j++)
			u += (float)lcg(&seed) / (float)(1u << 31);
		l[i] = (u - 2.0f) * 4.0f;
		if (kind == 1)
			l[i] = roundf(l[i] / 3);
		if (kind == 2 && lcg(&seed) % 20 == 0)
			l[i] = NAN;
		if (kind == 3 && lcg(&seed) % 5 == 0)
			l[i] = -INFINITY;
		if (kind == 5)
			l[i] = NAN;
		if (kind == 6)
			l[i] = -INFINITY;
		if (kind == 7)
			l[i] = 0;
	}
	if (kind == 4)
		l[lcg(&seed) % v] = INFINITY;
	if (kind == 7)
		l[lcg(&seed) % v] = 40;
}

static void make_pair(const struct mode *m, uint32_t v, uint64_t seed,
		      struct o1_sampler **a, struct o1_sampler **b)
{
	struct o1_sampler_params p;
	int32_t prompt[PROMPT_MAX];
	uint32_t n = v < PROMPT_MAX ? v : PROMPT_MAX;
	uint64_t x = seed;

	o1_sampler_params_init(&p);
	p.temperature = m->t, p.top_p = m->top_p, p.min_p = m->min_p;
	p.repetition_penalty = m->rep, p.presence_penalty = m->pres;
	p.frequency_penalty = m->freq, p.top_k = m->top_k;
	p.n_logprobs = m->n_lp, p.seed = seed, p.eos_id = 2;
	p.max_tokens = STEPS;
	for (uint32_t i = 0; i < n; i++)
		prompt[i] = (int32_t)(lcg(&x) % (n / 2 + 1)); /* repeats */
	assert_int_equal(o1_sampler_create(&p, v, a), 0);
	assert_int_equal(o1_sampler_create(&p, v, b), 0);
	assert_int_equal(o1_sampler_add_prompt(*a, prompt, n), 0);
	assert_int_equal(o1_sampler_add_prompt(*b, prompt, n), 0);
}

static void assert_same(const struct o1_sampler_out *x, const struct o1_sampler_out *y)
{
	assert_int_equal(x->id, y->id);
	assert_memory_equal(&x->logprob, &y->logprob, sizeof(float));
	assert_memory_equal(&x->entropy, &y->entropy, sizeof(float));
	assert_int_equal(x->n_top, y->n_top);
	assert_memory_equal(x->top, y->top, x->n_top * sizeof(x->top[0]));
	assert_int_equal(x->end, y->end);
}

struct batch {
	uint32_t v;
	float *l;
	struct o1_sample_row rows[REQS];
	struct o1_sample_penalty *pens;
	uint32_t cap;
	struct o1_sample_result res[REQS];
	void *scratch;
};

/* One step of REQS requests: A samples on its own, B's rows go through
 * one o1_sample_rows call; the tokens must be the same. */
static void step(struct batch *b, struct o1_sampler **a, struct o1_sampler **s,
		 int t, uint64_t seed)
{
	uint32_t off = 0, n;
	struct o1_sampler_out oa, ob;

	for (int r = 0; r < REQS; r++) {
		fill(b->l + (size_t)r * b->v, b->v, (t + 3 * r) % 8,
		     seed + 7 * t + r);
		assert_int_equal(o1_sampler_row(s[r], &b->rows[r],
						b->pens + off, b->cap - off,
						&n),
				 0);
		assert_int_equal(b->rows[r].n_pen, n);
		b->rows[r].pen_off = off;
		off += n;
	}
	assert_int_equal(o1_sample_rows(b->res, b->l, REQS, b->v, b->rows,
					b->pens, b->scratch),
			 0);
	for (int r = 0; r < REQS; r++) {
		assert_int_equal(
		    o1_sampler_sample(a[r], b->l + (size_t)r * b->v, &oa), 0);
		assert_int_equal(o1_sampler_accept(s[r], &b->res[r], &ob), 0);
		assert_true(oa.id >= 0 && (uint32_t)oa.id < b->v);
		assert_same(&oa, &ob);
	}
}

static void run_vocab(uint32_t v, int modes_step)
{
	struct batch b = {.v = v, .cap = REQS * (PROMPT_MAX + STEPS)};
	struct o1_sampler *a[REQS], *s[REQS];

	b.l = malloc((size_t)REQS * v * sizeof(float));
	b.pens = malloc(b.cap * sizeof(*b.pens));
	b.scratch = aligned_alloc(64, o1_sample_scratch_bytes(v));
	assert_true(b.l && b.pens && b.scratch);
	for (size_t m = 0; m < N_MODES; m += modes_step) {
		for (int r = 0; r < REQS; r++)
			make_pair(&modes[(m + 5 * r) % N_MODES], v,
				  1000 + m * 10 + r, &a[r], &s[r]);
		for (int t = 0; t < STEPS; t++)
			step(&b, a, s, t, v + m);
		for (int r = 0; r < REQS; r++) {
			assert_int_equal(o1_sampler_generated(a[r]), STEPS);
			o1_sampler_destroy(a[r]);
			o1_sampler_destroy(s[r]);
		}
	}
	free(b.l);
	free(b.pens);
	free(b.scratch);
}

static void test_against_sampler(void **state)
{
	const uint32_t vocabs[] = {1, 2, 7, 16, 17, 255, 1024, 1041, 5003};

	(void)state;
	for (size_t v = 0; v < sizeof(vocabs) / sizeof(vocabs[0]); v++)
		run_vocab(vocabs[v], 1);
}

static void test_against_sampler_large(void **state)
{
	(void)state;
	run_vocab(32003, 1);
	run_vocab(151936, 3);
}

/* ---- the sampler's side: rows, penalty lists, accept ---- */

static struct o1_sample_result result(int32_t id)
{
	struct o1_sample_result r;

	memset(&r, 0, sizeof(r));
	r.id = id;
	return r;
}

static void test_penalty_list(void **state)
{
	struct o1_sampler_params p;
	struct o1_sampler *s;
	struct o1_sample_row row;
	struct o1_sample_penalty pens[4];
	struct o1_sample_result r;
	struct o1_sampler_out out;
	const int32_t prompt[] = {3, 3, 5}, gen[] = {5, 7, 7};
	uint32_t n = 99;

	(void)state;
	o1_sampler_params_init(&p);
	p.frequency_penalty = 0.5f;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_add_prompt(s, prompt, 3), 0);
	for (int i = 0; i < 3; i++) {
		r = result(gen[i]);
		assert_int_equal(o1_sampler_accept(s, &r, &out), 0);
		assert_int_equal(out.id, gen[i]);
	}
	assert_int_equal(o1_sampler_row(s, &row, pens, 2, &n), -ENOSPC);
	assert_int_equal(n, 99);
	assert_int_equal(o1_sampler_row(s, &row, pens, 4, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(row.n_pen, 3);
	assert_int_equal(row.pen_off, 0);
	assert_int_equal(pens[0].id, 3);
	assert_int_equal(pens[0].count, 0);
	assert_int_equal(pens[0].in_prompt, 1);
	assert_int_equal(pens[1].id, 5);
	assert_int_equal(pens[1].count, 1);
	assert_int_equal(pens[1].in_prompt, 1);
	assert_int_equal(pens[2].id, 7);
	assert_int_equal(pens[2].count, 2);
	assert_int_equal(pens[2].in_prompt, 0);
	o1_sampler_destroy(s);
	/* no penalty on: no entries, no room needed */
	o1_sampler_params_init(&p);
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_add_prompt(s, prompt, 3), 0);
	assert_int_equal(o1_sampler_row(s, &row, NULL, 0, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(row.n_pen, 0);
	o1_sampler_destroy(s);
}

/* -ENOSPC draws nothing: the next row's U is a fresh sampler's first. */
static void test_nospc_keeps_prng(void **state)
{
	struct o1_sampler_params p;
	struct o1_sampler *s, *fresh;
	struct o1_sample_row row, want;
	struct o1_sample_penalty pens[2];
	const int32_t prompt[] = {1, 2};
	uint32_t n;

	(void)state;
	o1_sampler_params_init(&p);
	p.temperature = 1, p.repetition_penalty = 1.2f, p.seed = 77;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_create(&p, V, &fresh), 0);
	assert_int_equal(o1_sampler_add_prompt(s, prompt, 2), 0);
	assert_int_equal(o1_sampler_row(s, &row, pens, 1, &n), -ENOSPC);
	assert_int_equal(o1_sampler_row(s, &row, pens, 2, &n), 0);
	assert_int_equal(o1_sampler_row(fresh, &want, NULL, 0, &n), 0);
	assert_true(row.u > 0 && row.u < 1);
	assert_memory_equal(&row.u, &want.u, sizeof(double));
	assert_int_equal(o1_sampler_row(s, &row, pens, 2, &n), 0);
	assert_memory_not_equal(&row.u, &want.u, sizeof(double));
	o1_sampler_destroy(s);
	o1_sampler_destroy(fresh);
}

static void test_accept_bounds(void **state)
{
	struct o1_sampler_params p;
	struct o1_sampler *s;
	struct o1_sample_result r;
	struct o1_sampler_out out;

	(void)state;
	o1_sampler_params_init(&p);
	p.max_tokens = 2;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	r = result(V);
	assert_int_equal(o1_sampler_accept(s, &r, &out), -O1_E_BOUNDS);
	r = result(-1);
	assert_int_equal(o1_sampler_accept(s, &r, &out), -O1_E_BOUNDS);
	r = result(1), r.n_top = O1_SAMPLE_MAX_TOP + 1;
	assert_int_equal(o1_sampler_accept(s, &r, &out), -O1_E_BOUNDS);
	r = result(1), r.n_top = 1, r.top_id[0] = V;
	assert_int_equal(o1_sampler_accept(s, &r, &out), -O1_E_BOUNDS);
	assert_int_equal(o1_sampler_generated(s), 0);
	r = result(1), r.n_top = 1, r.top_id[0] = 4, r.top_logprob[0] = -2;
	r.logprob = -1.5f, r.entropy = 0.25f;
	assert_int_equal(o1_sampler_accept(s, &r, &out), 0);
	assert_int_equal(out.end, O1_SAMPLER_CONTINUE);
	assert_int_equal(out.top[0].id, 4);
	assert_float_equal(out.top[0].logprob, -2, 0);
	assert_float_equal(out.logprob, -1.5f, 0);
	assert_float_equal(out.entropy, 0.25f, 0);
	assert_int_equal(o1_sampler_accept(s, &r, &out), 0);
	assert_int_equal(out.end, O1_SAMPLER_END_LENGTH);
	o1_sampler_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_greedy),
	    cmocka_unit_test(test_greedy_nan_lanes),
	    cmocka_unit_test(test_draw_ends),
	    cmocka_unit_test(test_penalties),
	    cmocka_unit_test(test_describe),
	    cmocka_unit_test(test_bad_params),
	    cmocka_unit_test(test_scratch_bytes),
	    cmocka_unit_test(test_masked),
	    cmocka_unit_test(test_masked_degenerate),
	    cmocka_unit_test(test_against_sampler),
	    cmocka_unit_test(test_against_sampler_large),
	    cmocka_unit_test(test_penalty_list),
	    cmocka_unit_test(test_nospc_keeps_prng),
	    cmocka_unit_test(test_accept_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The sampler at real vocabulary sizes (151,936 and an odd 32,003) against
 * a plain reference written here from sampler.h: penalties on every
 * token, a full sort, exp in double, the same PRNG (xoshiro256** seeded
 * through splitmix64) and draw rule. For every mode the ids must be
 * equal call after call; logprob, entropy and the top-n must match the
 * reference's double log-softmax to 2e-5. Degenerate rows (all NaN, all
 * -inf) give an id in range in every mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "common/prng.h"
#include "sampler/sampler.h"

#define CALLS 12

struct ref {
	struct o1_sampler_params p;
	uint32_t v;
	uint64_t rng[4];
	uint32_t *counts;
	uint8_t *in_prompt;
	float *w;
	uint32_t *order;
};

static int desc(const void *a, const void *b, void *keys)
{
	const float *l = keys;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (l[x] != l[y])
		return l[x] > l[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

static uint32_t ref_draw(struct ref *r)
{
	const struct o1_sampler_params *p = &r->p;
	uint32_t n = r->v, keep;
	bool sort = (p->top_p > 0 && p->top_p < 1) || p->min_p > 0 ||
		    (p->top_k && p->top_k < n);
	double mass = 0, kept = 0, u, acc = 0, mx = -INFINITY;

	for (uint32_t i = 0; i < n; i++)
		r->order[i] = i;
	if (sort)
		qsort_r(r->order, n, sizeof(uint32_t), desc, r->w);
	if (p->top_k && p->top_k < n)
		n = p->top_k;
	for (uint32_t i = 0; i < n; i++)
		mx = r->w[r->order[i]] > mx ? r->w[r->order[i]] : mx;
	for (uint32_t i = 0; i < n; i++)
		mass += exp(r->w[r->order[i]] - mx);
	for (keep = 0; keep < n; keep++) {
		double e = exp(r->w[r->order[keep]] - mx);

		if (keep && p->top_p > 0 && p->top_p < 1 &&
		    !(kept / mass < p->top_p))
			break;
		if (keep && e < p->min_p)
			break;
		kept += e;
	}
	u = o1_prng_uniform(r->rng) * kept;
	for (uint32_t i = 0; i < keep; i++) {
		acc += exp(r->w[r->order[i]] - mx);
		if (u < acc)
			return r->order[i];
	}
	return r->order[keep - 1];
}

static uint32_t ref_sample(struct ref *r, const float *l)
{
	const struct o1_sampler_params *p = &r->p;
	uint32_t id = 0;

	for (uint32_t i = 0; i < r->v; i++) {
		float x = l[i];

		if (p->repetition_penalty != 1 &&
		    (r->in_prompt[i] || r->counts[i]))
			x = x > 0 ? x / p->repetition_penalty
				  : x * p->repetition_penalty;
		if (r->counts[i]) {
			x = x - p->frequency_penalty * (float)r->counts[i];
			x = x - p->presence_penalty;
		}
		r->w[i] = x;
	}
	if (p->temperature == 0) {
		for (uint32_t i = 1; i < r->v; i++)
			id = r->w[i] > r->w[id] ? i : id;
	} else {
		for (uint32_t i = 0; i < r->v; i++)
			r->w[i] = r->w[i] / p->temperature;
		id = ref_draw(r);
	}
	r->counts[id]++;
	return id;
}

/* Checks logprob, entropy and top-n of OUT against L in double. */
static void check_describe(const float *l, uint32_t v, uint32_t n_top,
			   const struct o1_sampler_out *out)
{
	double mx = -INFINITY, z = 0, zl = 0, lse;

	for (uint32_t i = 0; i < v; i++)
		mx = l[i] > mx ? l[i] : mx;
	for (uint32_t i = 0; i < v; i++)
		z += exp(l[i] - mx), zl += exp(l[i] - mx) * (l[i] - mx);
	lse = mx + log(z);
	assert_true(fabs(out->logprob - (l[out->id] - lse)) < 2e-5);
	assert_true(fabs(out->entropy - (log(z) - zl / z)) < 2e-5);
	assert_int_equal(out->n_top, n_top);
	for (uint32_t j = 0; j < n_top; j++) {
		uint32_t above = 0;

		for (uint32_t i = 0; i < v; i++)
			above += l[i] > l[out->top[j].id];
		assert_int_equal(above, j); /* distinct random logits */
		assert_true(fabs(out->top[j].logprob -
				 (l[out->top[j].id] - lse)) < 2e-5);
	}
}

static void fill(float *l, uint32_t v, uint64_t seed)
{
	for (uint32_t i = 0; i < v; i++)
		l[i] = (float)((o1_prng_splitmix64(&seed) >> 40) /
			       (double)(1 << 24)) *
			   8 -
		       4;
	for (int j = 0; j < 4; j++)
		l[o1_prng_splitmix64(&seed) % v] += 0.5f;
}

static void run_mode(const struct o1_sampler_params *p, uint32_t v)
{
	float *l = malloc(v * sizeof(float));
	struct ref r = {.p = *p, .v = v};
	struct o1_sampler *s;
	struct o1_sampler_out out;
	int32_t prompt[64];
	uint64_t x = p->seed;

	r.counts = calloc(v, sizeof(uint32_t));
	r.in_prompt = calloc(v, 1);
	r.w = malloc(v * sizeof(float));
	r.order = malloc(v * sizeof(uint32_t));
	assert_true(l && r.counts && r.in_prompt && r.w && r.order);
	for (int i = 0; i < 4; i++)
		r.rng[i] = o1_prng_splitmix64(&x);
	for (int i = 0; i < 64; i++) {
		prompt[i] = (int32_t)(o1_prng_splitmix64(&x) % v);
		r.in_prompt[prompt[i]] = 1;
	}
	assert_int_equal(o1_sampler_create(p, v, &s), 0);
	assert_int_equal(o1_sampler_add_prompt(s, prompt, 64), 0);
	for (int c = 0; c < CALLS; c++) {
		fill(l, v, 1000 + (uint64_t)c % 3);
		assert_int_equal(o1_sampler_sample(s, l, &out), 0);
		assert_int_equal(out.id, ref_sample(&r, l));
		check_describe(l, v, p->n_logprobs, &out);
	}
	o1_sampler_destroy(s);
	free(l), free(r.counts), free(r.in_prompt), free(r.w), free(r.order);
}

static void test_modes(void **state)
{
	static const uint32_t vocabs[2] = {151936, 32003};
	struct o1_sampler_params p;

	(void)state;
	for (int v = 0; v < 2; v++) {
		for (int m = 0; m < 8; m++) {
			o1_sampler_params_init(&p);
			p.seed = 77 + (uint64_t)m;
			p.temperature = m ? 0.8f : 0;
			p.top_k = m == 2 ? 40 : m == 7 ? 300 : 0;
			p.top_p = m == 2 ? 0.95f : m == 3 ? 0.9f : 1;
			p.min_p = m == 4 ? 0.05f : m == 7 ? 0.01f : 0;
			if (m == 5 || m == 0) {
				p.repetition_penalty = 1.3f;
				p.presence_penalty = 0.5f;
				p.frequency_penalty = 0.2f;
			}
			p.n_logprobs = m == 6 || m == 0 ? 5 : 0;
			run_mode(&p, vocabs[v]);
		}
	}
}

/* Logits all NaN or all -inf: every mode answers an id in range. */
static void test_degenerate(void **state)
{
	const uint32_t v = 1000;
	float *l = malloc(v * sizeof(float));
	struct o1_sampler_params p;
	struct o1_sampler *s;
	struct o1_sampler_out out;

	(void)state;
	assert_non_null(l);
	for (int m = 0; m < 10; m++) {
		for (uint32_t i = 0; i < v; i++)
			l[i] = m % 2 ? NAN : -INFINITY;
		o1_sampler_params_init(&p);
		p.temperature = m < 2 ? 0 : 1;
		p.top_k = m / 2 == 2 ? 5 : 0;
		p.top_p = m / 2 == 3 ? 0.5f : 1;
		p.min_p = m / 2 == 4 ? 0.1f : 0;
		p.n_logprobs = 3;
		assert_int_equal(o1_sampler_create(&p, v, &s), 0);
		assert_int_equal(o1_sampler_sample(s, l, &out), 0);
		assert_true(out.id >= 0 && (uint32_t)out.id < v);
		assert_true(out.n_top <= 3);
		o1_sampler_destroy(s);
	}
	free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_modes),
	    cmocka_unit_test(test_degenerate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

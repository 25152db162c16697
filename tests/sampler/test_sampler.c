/* Sampler: chi-square goodness of fit of 20000 seeded draws against the
 * distribution sampler.h specifies (computed here independently, in
 * double) for temperature, top-k, top-p, min-p and all together; seeds
 * reproduce; each penalty moves the greedy choice exactly where its
 * definition says; logprobs, entropy, top-n and the stop reasons. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "common/error.h"
#include "sampler/sampler.h"

#define V     8
#define DRAWS 20000

static const float logits8[V] = {1.0f,	2.5f, 0.3f, 2.0f,
				 -1.0f, 1.8f, 0.0f, 2.5f};

/* Expected distribution, straight from the definition. */
static void expected(const struct o1_sampler_params *p, double *prob)
{
	int ord[V];
	double e[V], mass = 0, kept = 0, l[V];
	int n = V, keep;

	for (int i = 0; i < V; i++)
		l[i] = logits8[i] / p->temperature, ord[i] = i;
	for (int i = 0; i < V; i++) /* selection sort, desc, ties by id */
		for (int j = i + 1; j < V; j++)
			if (l[ord[j]] > l[ord[i]] ||
			    (l[ord[j]] == l[ord[i]] && ord[j] < ord[i])) {
				int t = ord[i];

				ord[i] = ord[j], ord[j] = t;
			}
	if (p->top_k && p->top_k < V)
		n = p->top_k;
	for (int i = 0; i < n; i++)
		e[i] = exp(l[ord[i]] - l[ord[0]]), mass += e[i];
	for (keep = 0; keep < n; keep++) {
		if (keep && p->top_p < 1 && kept / mass >= p->top_p)
			break;
		if (keep && e[keep] < p->min_p)
			break;
		kept += e[keep];
	}
	memset(prob, 0, V * sizeof(double));
	for (int i = 0; i < keep; i++)
		prob[ord[i]] = e[i] / kept;
}

/* Critical chi-square values at p = 0.001 for 1..7 degrees of freedom. */
static const double chi2_crit[8] = {0,	   10.83, 13.82, 16.27,
				    18.47, 20.52, 22.46, 24.32};

static void check_fit(const struct o1_sampler_params *p)
{
	struct o1_sampler *s;
	struct o1_sampler_out out;
	double prob[V], chi2 = 0;
	int count[V] = {0}, df = -1;

	expected(p, prob);
	assert_int_equal(o1_sampler_create(p, V, &s), 0);
	for (int i = 0; i < DRAWS; i++) {
		assert_int_equal(o1_sampler_sample(s, logits8, &out), 0);
		assert_true(out.id >= 0 && out.id < V);
		count[out.id]++;
	}
	for (int i = 0; i < V; i++) {
		if (prob[i] == 0) {
			assert_int_equal(count[i], 0);
			continue;
		}
		chi2 += pow(count[i] - DRAWS * prob[i], 2) / (DRAWS * prob[i]);
		df++;
	}
	if (df > 0 && chi2 > chi2_crit[df]) {
		print_error("chi2 %.2f > %.2f (df %d)\n", chi2, chi2_crit[df],
			    df);
		fail();
	}
	o1_sampler_destroy(s);
}

static struct o1_sampler_params base(float t)
{
	struct o1_sampler_params p;

	o1_sampler_params_init(&p);
	p.temperature = t;
	p.seed = 1234;
	return p;
}

static void test_distributions(void **state)
{
	struct o1_sampler_params p = base(0.7f);

	(void)state;
	check_fit(&p);
	p = base(1.0f), p.top_k = 3; /* ties at 2.5: ids 1 and 7, then 3 */
	check_fit(&p);
	p = base(1.0f), p.top_p = 0.8f;
	check_fit(&p);
	p = base(1.5f), p.min_p = 0.3f;
	check_fit(&p);
	p = base(1.3f), p.top_k = 6, p.top_p = 0.9f, p.min_p = 0.1f;
	check_fit(&p);
	p = base(1.0f), p.top_k = 300; /* k above the vocabulary */
	check_fit(&p);
}

static void test_greedy(void **state)
{
	struct o1_sampler_params p = base(0);
	struct o1_sampler *s;
	struct o1_sampler_out out;

	(void)state;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_sample(s, logits8, &out), 0);
	assert_int_equal(out.id, 1); /* ties 1 and 7: lowest id */
	o1_sampler_destroy(s);
	p = base(2.0f), p.top_k = 1;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_sample(s, logits8, &out), 0);
	assert_int_equal(out.id, 1);
	o1_sampler_destroy(s);
}

static void run_ids(const struct o1_sampler_params *p, int32_t *ids, int n)
{
	struct o1_sampler *s;
	struct o1_sampler_out out;

	assert_int_equal(o1_sampler_create(p, V, &s), 0);
	for (int i = 0; i < n; i++) {
		assert_int_equal(o1_sampler_sample(s, logits8, &out), 0);
		ids[i] = out.id;
	}
	o1_sampler_destroy(s);
}

static void test_seed(void **state)
{
	struct o1_sampler_params p = base(1.0f);
	int32_t a[200], b[200], c[200];

	(void)state;
	run_ids(&p, a, 200);
	run_ids(&p, b, 200);
	p.seed = 1235;
	run_ids(&p, c, 200);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_not_equal(a, c, sizeof(a));
}

/* Greedy picks over 2-3 logits, with prompt PROMPT (n) and penalties. */
static void greedy_seq(const float *l, uint32_t v, const int32_t *prompt,
		       uint32_t n, float rep, float freq, float pres,
		       int32_t *ids, int count)
{
	struct o1_sampler_params p = base(0);
	struct o1_sampler *s;
	struct o1_sampler_out out;

	p.repetition_penalty = rep, p.frequency_penalty = freq;
	p.presence_penalty = pres;
	assert_int_equal(o1_sampler_create(&p, v, &s), 0);
	assert_int_equal(o1_sampler_add_prompt(s, prompt, n), 0);
	for (int i = 0; i < count; i++) {
		assert_int_equal(o1_sampler_sample(s, l, &out), 0);
		ids[i] = out.id;
	}
	o1_sampler_destroy(s);
}

static void test_repetition(void **state)
{
	const float pos[2] = {2.0f, 1.5f}, neg[2] = {-1.0f, -1.4f};
	const int32_t prompt[1] = {0};
	int32_t id[1];

	(void)state;
	greedy_seq(pos, 2, prompt, 1, 1.5f, 0, 0, id, 1); /* 2/1.5 < 1.5 */
	assert_int_equal(id[0], 1);
	greedy_seq(pos, 2, prompt, 1, 1.3f, 0, 0, id, 1); /* 2/1.3 > 1.5 */
	assert_int_equal(id[0], 0);
	greedy_seq(neg, 2, prompt, 1, 1.5f, 0, 0, id, 1); /* -1.5 < -1.4 */
	assert_int_equal(id[0], 1);
	greedy_seq(neg, 2, prompt, 1, 1.3f, 0, 0, id, 1); /* -1.3 > -1.4 */
	assert_int_equal(id[0], 0);
	greedy_seq(pos, 2, prompt, 0, 1.5f, 0, 0, id, 1); /* no prompt */
	assert_int_equal(id[0], 0);
}

static void test_frequency_presence(void **state)
{
	const float l2[2] = {1.0f, 0.75f}, l3[3] = {1.0f, 0.8f, 0.6f};
	const int32_t prompt[3] = {0, 0, 0};
	/* 1 - 0.1k vs 0.75 - 0.1j for k zeros and j ones generated */
	const int32_t want_f[6] = {0, 0, 0, 1, 0, 1};
	/* 1 then 0.7; 0.8 then 0.5; 0.6 */
	const int32_t want_p[5] = {0, 1, 0, 0, 0};
	int32_t ids[6];

	(void)state;
	greedy_seq(l2, 2, prompt, 3, 1, 0.1f, 0, ids, 6);
	assert_memory_equal(ids, want_f, sizeof(want_f));
	greedy_seq(l3, 3, prompt, 3, 1, 0, 0.3f, ids, 5);
	assert_memory_equal(ids, want_p, sizeof(want_p));
}

static void test_logprobs(void **state)
{
	const float l[4] = {0, logf(2), logf(4), -INFINITY};
	struct o1_sampler_params p = base(0);
	struct o1_sampler *s;
	struct o1_sampler_out out;
	double h = -(1 / 7.0 * log(1 / 7.0) + 2 / 7.0 * log(2 / 7.0) +
		     4 / 7.0 * log(4 / 7.0));

	(void)state;
	p.n_logprobs = 3;
	assert_int_equal(o1_sampler_create(&p, 4, &s), 0);
	assert_int_equal(o1_sampler_sample(s, l, &out), 0);
	assert_int_equal(out.id, 2);
	assert_true(fabs(out.logprob - log(4 / 7.0)) < 1e-6);
	assert_true(fabs(out.entropy - h) < 1e-6);
	assert_int_equal(out.n_top, 3);
	assert_int_equal(out.top[0].id, 2);
	assert_int_equal(out.top[1].id, 1);
	assert_int_equal(out.top[2].id, 0);
	assert_true(fabs(out.top[2].logprob - log(1 / 7.0)) < 1e-6);
	o1_sampler_destroy(s);
}

static void test_stops(void **state)
{
	struct o1_sampler_params p = base(0);
	struct o1_sampler *s;
	struct o1_sampler_out out;

	(void)state;
	p.eos_id = 1;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_sample(s, logits8, &out), 0);
	assert_int_equal(out.end, O1_SAMPLER_END_EOS);
	o1_sampler_destroy(s);
	p.ignore_eos = true, p.max_tokens = 2;
	p.n_stop_ids = 1, p.stop_ids[0] = 7;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_sample(s, logits8, &out), 0);
	assert_int_equal(out.end, O1_SAMPLER_CONTINUE);
	assert_int_equal(o1_sampler_sample(s, logits8, &out), 0);
	assert_int_equal(out.end, O1_SAMPLER_END_LENGTH);
	assert_int_equal(o1_sampler_generated(s), 2);
	o1_sampler_destroy(s);
	p.max_tokens = 0, p.stop_ids[0] = 1;
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_sample(s, logits8, &out), 0);
	assert_int_equal(out.end, O1_SAMPLER_END_STOP_ID);
	o1_sampler_destroy(s);
}

static void test_bad_params(void **state)
{
	struct o1_sampler_params p = base(-1);
	struct o1_sampler *s;
	const int32_t bad[1] = {V};

	(void)state;
	assert_int_equal(o1_sampler_create(&p, V, &s), -O1_E_CONFIG);
	p = base(1), p.top_p = 1.5f;
	assert_int_equal(o1_sampler_create(&p, V, &s), -O1_E_CONFIG);
	p = base(1), p.n_logprobs = O1_SAMPLER_MAX_LOGPROBS + 1;
	assert_int_equal(o1_sampler_create(&p, V, &s), -O1_E_CONFIG);
	p = base(1), p.temperature = NAN;
	assert_int_equal(o1_sampler_create(&p, V, &s), -O1_E_CONFIG);
	p = base(1);
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_sampler_add_prompt(s, bad, 1), -O1_E_BOUNDS);
	o1_sampler_destroy(s);
	o1_sampler_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_distributions),
	    cmocka_unit_test(test_greedy),
	    cmocka_unit_test(test_seed),
	    cmocka_unit_test(test_repetition),
	    cmocka_unit_test(test_frequency_presence),
	    cmocka_unit_test(test_logprobs),
	    cmocka_unit_test(test_stops),
	    cmocka_unit_test(test_bad_params),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

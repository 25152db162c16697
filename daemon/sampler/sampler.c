/* The sampler (see sampler.h for the exact processing order). State per
 * request: the PRNG, a generated-count and a prompt-seen flag per token,
 * and two vocab-sized scratch arrays, all allocated at create. */
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

struct o1_sampler {
	struct o1_sampler_params p;
	uint32_t vocab;
	uint64_t rng[4];
	uint32_t n_generated;
	uint32_t *counts;   /* generated occurrences per token */
	uint8_t *in_prompt; /* 1 if the token is in the prompt */
	float *work;	    /* processed logits */
	uint32_t *order;    /* candidate ids */
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* xoshiro256**: a uniform double in [0, 1). */
static double next_uniform(uint64_t *s)
{
	uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return (r >> 11) * 0x1.0p-53;
}

void o1_sampler_params_init(struct o1_sampler_params *p)
{
	memset(p, 0, sizeof(*p));
	p->top_p = 1.0f;
	p->repetition_penalty = 1.0f;
	p->eos_id = -1;
}

static int check_params(const struct o1_sampler_params *p, uint32_t vocab)
{
	if (!(p->temperature >= 0) || !(p->top_p >= 0 && p->top_p <= 1) ||
	    !(p->min_p >= 0 && p->min_p <= 1) ||
	    !(p->repetition_penalty >= 0) || !isfinite(p->presence_penalty) ||
	    !isfinite(p->frequency_penalty) || !isfinite(p->temperature) ||
	    p->n_logprobs > O1_SAMPLER_MAX_LOGPROBS ||
	    p->n_stop_ids > O1_SAMPLER_MAX_STOP_IDS || !vocab) {
		o1_err("sampler: bad parameters: temperature %g top_p %g "
		       "min_p %g repetition %g presence %g frequency %g "
		       "logprobs %u stop ids %u vocab %u",
		       p->temperature, p->top_p, p->min_p,
		       p->repetition_penalty, p->presence_penalty,
		       p->frequency_penalty, p->n_logprobs, p->n_stop_ids,
		       vocab);
		return -O1_E_CONFIG;
	}
	return 0;
}

int o1_sampler_create(const struct o1_sampler_params *p, uint32_t vocab,
		      struct o1_sampler **out)
{
	struct o1_sampler *s;
	uint64_t x = p->seed;
	int err = check_params(p, vocab);

	if (err)
		return err;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = *p;
	s->vocab = vocab;
	for (int i = 0; i < 4; i++)
		s->rng[i] = splitmix64(&x);
	s->counts = calloc(vocab, sizeof(*s->counts));
	s->in_prompt = calloc(vocab, 1);
	s->work = malloc(vocab * sizeof(float));
	s->order = malloc(vocab * sizeof(uint32_t));
	if (!s->counts || !s->in_prompt || !s->work || !s->order) {
		o1_sampler_destroy(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void o1_sampler_destroy(struct o1_sampler *s)
{
	if (!s)
		return;
	free(s->counts);
	free(s->in_prompt);
	free(s->work);
	free(s->order);
	free(s);
}

int o1_sampler_add_prompt(struct o1_sampler *s, const int32_t *ids, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (ids[i] < 0 || (uint32_t)ids[i] >= s->vocab) {
			o1_err("sampler: prompt id %d at %u outside the "
			       "vocabulary of %u",
			       ids[i], i, s->vocab);
			return -O1_E_BOUNDS;
		}
		s->in_prompt[ids[i]] = 1;
	}
	return 0;
}

uint32_t o1_sampler_generated(const struct o1_sampler *s)
{
	return s->n_generated;
}

static void apply_penalties(struct o1_sampler *s, float *l)
{
	const struct o1_sampler_params *p = &s->p;
	bool rep = p->repetition_penalty > 0 && p->repetition_penalty != 1;

	for (uint32_t i = 0; i < s->vocab; i++) {
		if (rep && (s->in_prompt[i] || s->counts[i]))
			l[i] = l[i] > 0 ? l[i] / p->repetition_penalty
					: l[i] * p->repetition_penalty;
		if (s->counts[i]) {
			l[i] =
			    l[i] - p->frequency_penalty * (float)s->counts[i];
			l[i] = l[i] - p->presence_penalty;
		}
	}
}

static uint32_t argmax(const float *l, uint32_t n)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < n; i++)
		if (l[i] > l[best])
			best = i;
	return best;
}

/* Descending by value, then ascending id: a total order. */
static int by_value(const void *a, const void *b, void *keys)
{
	const float *l = keys;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (l[x] != l[y])
		return l[x] > l[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Puts the K best ids of L (k < vocab) in ORDER, sorted, by insertion. */
static void select_top(const float *l, uint32_t n, uint32_t *order, uint32_t k)
{
	uint32_t have = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t j;

		if (have == k && by_value(&i, &order[k - 1], (void *)l) > 0)
			continue;
		j = have < k ? have++ : k - 1;
		while (j > 0 && by_value(&i, &order[j - 1], (void *)l) < 0) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
}

/* The candidates in descending order (all tokens, or the top k);
 * returns how many. Without top-k, top-p or min-p any fixed order
 * samples the same distribution, so ids stay in index order. */
static uint32_t candidates(struct o1_sampler *s, const float *l)
{
	const struct o1_sampler_params *p = &s->p;
	uint32_t n = s->vocab;

	if (p->top_k && p->top_k < n && p->top_k <= 256) {
		select_top(l, n, s->order, p->top_k);
		return p->top_k;
	}
	for (uint32_t i = 0; i < n; i++)
		s->order[i] = i;
	if ((p->top_p > 0 && p->top_p < 1) || p->min_p > 0 || p->top_k)
		qsort_r(s->order, n, sizeof(*s->order), by_value, (void *)l);
	return p->top_k && p->top_k < n ? p->top_k : n;
}

/* Steps 3-6 of sampler.h over the processed logits L. */
static uint32_t draw(struct o1_sampler *s, const float *l)
{
	const struct o1_sampler_params *p = &s->p;
	uint32_t n = candidates(s, l), keep;
	double mass = 0, kept = 0, u, acc = 0, mx = l[s->order[0]];

	for (uint32_t i = 0; i < n; i++)
		mx = l[s->order[i]] > mx ? l[s->order[i]] : mx;
	for (uint32_t i = 0; i < n; i++)
		mass += exp(l[s->order[i]] - mx);
	for (keep = 0; keep < n; keep++) {
		double e = exp(l[s->order[keep]] - mx);

		if (keep && p->top_p > 0 && p->top_p < 1 &&
		    !(kept / mass < p->top_p))
			break;
		if (keep && e < p->min_p)
			break;
		kept += e;
	}
	u = next_uniform(s->rng) * kept;
	for (uint32_t i = 0; i < keep; i++) {
		acc += exp(l[s->order[i]] - mx);
		if (u < acc)
			return s->order[i];
	}
	return s->order[keep - 1];
}

/* Logprob of ID, entropy and the top-n of the raw logits L. */
static void describe(const struct o1_sampler *s, const float *l, uint32_t id,
		     struct o1_sample *out)
{
	uint32_t n = s->vocab, k = s->p.n_logprobs, have = 0;
	double mx = l[argmax(l, n)], z = 0, zl = 0, lse;

	for (uint32_t i = 0; i < n; i++) {
		double e = exp(l[i] - mx);

		z += e;
		if (e > 0) /* a -inf logit adds nothing, not NaN */
			zl += e * (l[i] - mx);
		if (!k || (have == k && l[i] <= out->top[k - 1].logprob))
			continue;
		uint32_t j = have < k ? have++ : k - 1;

		while (j > 0 && out->top[j - 1].logprob < l[i]) {
			out->top[j] = out->top[j - 1];
			j--;
		}
		out->top[j] = (struct o1_token_logprob){(int32_t)i, l[i]};
	}
	lse = mx + log(z);
	for (uint32_t j = 0; j < have; j++)
		out->top[j].logprob = (float)(out->top[j].logprob - lse);
	out->n_top = have;
	out->logprob = (float)(l[id] - lse);
	out->entropy = (float)(log(z) - zl / z);
}

static enum o1_finish finish_reason(const struct o1_sampler *s, int32_t id)
{
	if (!s->p.ignore_eos && s->p.eos_id >= 0 && id == s->p.eos_id)
		return O1_FINISH_EOS;
	for (uint32_t i = 0; i < s->p.n_stop_ids; i++)
		if (id == s->p.stop_ids[i])
			return O1_FINISH_STOP;
	if (s->p.max_tokens && s->n_generated >= s->p.max_tokens)
		return O1_FINISH_LENGTH;
	return O1_FINISH_NONE;
}

int o1_sampler_sample(struct o1_sampler *s, const float *logits,
		      struct o1_sample *out)
{
	const struct o1_sampler_params *p = &s->p;
	uint32_t id;

	memcpy(s->work, logits, s->vocab * sizeof(float));
	apply_penalties(s, s->work);
	if (p->temperature == 0 || p->top_k == 1) {
		id = argmax(s->work, s->vocab);
	} else {
		for (uint32_t i = 0; i < s->vocab; i++)
			s->work[i] = s->work[i] / p->temperature;
		id = draw(s, s->work);
	}
	describe(s, logits, id, out);
	out->id = (int32_t)id;
	s->counts[id]++;
	s->n_generated++;
	out->finish = finish_reason(s, out->id);
	return 0;
}

/* The sampler (see sampler.h for the exact processing order). State per
 * request: the PRNG, a generated-count and a prompt-seen flag per token,
 * the list of distinct tokens seen (penalties touch only those) and
 * scratch arrays, all allocated at create.
 *
 * Speed: every pass over the vocabulary is a flat loop over 16 lanes that
 * gcc vectorises (the hot ones are cloned for AVX-512 and AVX2). Sums keep
 * 16 float partial sums per block of BLOCK tokens, added to a double in a
 * fixed order, and the exponential is exp_neg() below, plain float
 * arithmetic compiled without FMA contraction: every instruction set
 * rounds the same way, so results do not depend on the machine. Top-k
 * keeps the k best in a sorted array (no sort of the vocabulary); top-p
 * and min-p sort only the tokens above a threshold that provably holds
 * the cut (top-p: found from a histogram of the probabilities by binary
 * exponent), with the whole vocabulary as the exact fallback.
 */
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

#define LANES	  16
#define BLOCK	  1024 /* tokens per float partial sum, a multiple of LANES */
#define TOP_K_MAX 256  /* top-k up to this keeps a sorted array */

#define HOT __attribute__((target_clones("avx512f", "avx2", "default")))

struct o1_sampler {
	struct o1_sampler_params p;
	uint32_t vocab;
	uint64_t rng[4];
	uint32_t n_generated;
	bool penalties;
	uint32_t *counts;   /* generated occurrences per token */
	uint8_t *in_prompt; /* 1 if the token is in the prompt */
	uint32_t *seen;	    /* distinct tokens of prompt and output */
	uint32_t n_seen;
	float *work;	 /* processed logits */
	float *prob;	 /* exp(work - max), top-p and min-p only */
	uint32_t *order; /* candidate ids */
	double *bsum;	 /* per block of BLOCK tokens, the draw's index */
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

/* e^x for x <= 0 within 2 ulp, 0 below -87 (and for -inf): x = n ln2 + r
 * with |r| <= ln2 / 2 (Cody-Waite), e^r by its degree-7 Taylor polynomial
 * (truncation 5e-9), times 2^n built in the exponent bits. */
static inline float exp_neg(float x)
{
	union {
		uint32_t u;
		float f;
	} s;
	float c = x < -87.0f ? -87.0f : x;
	float n = (c * 1.44269504f + 12582912.0f) - 12582912.0f;
	float r = (c - n * 0.693145751953125f) - n * 1.42860677e-06f;
	float q = 1.0f / 5040;

	q = q * r + 1.0f / 720;
	q = q * r + 1.0f / 120;
	q = q * r + 1.0f / 24;
	q = q * r + 1.0f / 6;
	q = q * r + 0.5f;
	q = q * r + 1.0f;
	q = q * r + 1.0f;
	s.u = (uint32_t)((int32_t)n + 127) << 23;
	return x < -87.0f ? 0.0f : q * s.f;
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

static bool is_greedy(const struct o1_sampler_params *p)
{
	return p->temperature == 0 || p->top_k == 1;
}

static bool small_top_k(const struct o1_sampler_params *p, uint32_t vocab)
{
	return p->top_k && p->top_k < vocab && p->top_k <= TOP_K_MAX;
}

static bool cuts(const struct o1_sampler_params *p)
{
	return (p->top_p > 0 && p->top_p < 1) || p->min_p > 0;
}

/* Scratch for the paths these parameters take, nothing more: ORDER holds
 * the whole vocabulary only for the sorts (top-p, min-p, top-k above
 * TOP_K_MAX), PROB only for top-p and min-p over the whole vocabulary. */
static int alloc_scratch(struct o1_sampler *s)
{
	const struct o1_sampler_params *p = &s->p;
	uint32_t v = s->vocab;
	bool greedy = is_greedy(p), small = small_top_k(p, v);
	bool big_k = !small && p->top_k && p->top_k < v;
	bool need_prob = !greedy && !small && !big_k && cuts(p);

	s->counts = calloc(v, sizeof(*s->counts));
	s->in_prompt = calloc(v, 1);
	s->work = malloc(v * sizeof(float));
	s->bsum = malloc((v / BLOCK + 2) * sizeof(double));
	if (s->penalties)
		s->seen = malloc(v * sizeof(*s->seen));
	s->order = malloc((greedy		? 1
			   : small		? p->top_k
			   : big_k || need_prob ? v
						: 1) *
			  sizeof(*s->order));
	if (need_prob)
		s->prob = malloc(v * sizeof(float));
	if (!s->counts || !s->in_prompt || !s->work || !s->bsum ||
	    (s->penalties && !s->seen) || !s->order || (need_prob && !s->prob))
		return -ENOMEM;
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
	s->penalties =
	    (p->repetition_penalty > 0 && p->repetition_penalty != 1) ||
	    p->frequency_penalty != 0 || p->presence_penalty != 0;
	for (int i = 0; i < 4; i++)
		s->rng[i] = splitmix64(&x);
	err = alloc_scratch(s);
	if (err) {
		o1_sampler_destroy(s);
		return err;
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
	free(s->seen);
	free(s->work);
	free(s->prob);
	free(s->order);
	free(s->bsum);
	free(s);
}

/* Records ID in the list of distinct tokens, before its flag is set. */
static void note_seen(struct o1_sampler *s, uint32_t id)
{
	if (s->penalties && !s->in_prompt[id] && !s->counts[id])
		s->seen[s->n_seen++] = id;
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
		note_seen(s, (uint32_t)ids[i]);
		s->in_prompt[ids[i]] = 1;
	}
	return 0;
}

uint32_t o1_sampler_generated(const struct o1_sampler *s)
{
	return s->n_generated;
}

/* Copies LOGITS to work with the penalties applied to the seen tokens. */
static const float *penalised(struct o1_sampler *s, const float *logits)
{
	const struct o1_sampler_params *p = &s->p;
	bool rep = p->repetition_penalty > 0 && p->repetition_penalty != 1;
	float *l = s->work;

	if (!s->penalties)
		return logits;
	memcpy(l, logits, s->vocab * sizeof(float));
	for (uint32_t j = 0; j < s->n_seen; j++) {
		uint32_t i = s->seen[j];

		if (rep)
			l[i] = l[i] > 0 ? l[i] / p->repetition_penalty
					: l[i] * p->repetition_penalty;
		if (s->counts[i]) {
			l[i] =
			    l[i] - p->frequency_penalty * (float)s->counts[i];
			l[i] = l[i] - p->presence_penalty;
		}
	}
	return l;
}

/* The hot loops work on groups of LANES floats through a group pointer
 * and a local array, or through GNU C vectors of LANES floats, so gcc
 * vectorises them without alias checks, even when they write where they
 * read (penalised logits scaled in place). */
typedef float vf __attribute__((vector_size(LANES * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(LANES * sizeof(float))));

#define INLINE static inline __attribute__((always_inline))

INLINE vf vload(const float *p)
{
	vf v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The greater of A and B per lane; B where A is NaN. */
INLINE vf vmax(vf a, vf b)
{
	vi gt = a > b;

	return (vf)(((vi)a & gt) | ((vi)b & ~gt));
}

INLINE float hmax(vf v, float mx)
{
	for (int j = 0; j < LANES; j++)
		mx = v[j] > mx ? v[j] : mx;
	return mx;
}

/* The highest of L[0, N) in *MAX and its lowest id (0 when no value
 * compares, all NaN): the first block of BLOCK tokens with the highest
 * maximum, then a scan of that block. */
HOT static uint32_t argmax(const float *l, uint32_t n, float *max)
{
	size_t full = n / LANES * LANES, i, start = 0, best_start = 0;
	float best = -INFINITY;

	for (i = 0; i < full; start = i) {
		size_t end = i + BLOCK < full ? i + BLOCK : full;
		vf m = vload(l + i);

		for (i += LANES; i < end; i += LANES)
			m = vmax(vload(l + i), m);
		if (hmax(m, -INFINITY) > best)
			best = hmax(m, -INFINITY), best_start = start;
	}
	for (; i < n; i++)
		if (l[i] > best)
			best = l[i], best_start = i;
	*max = best;
	for (i = best_start; i < n; i++)
		if (l[i] == best)
			return (uint32_t)i;
	return 0;
}

/* W = L / T (W may be L), returns the highest. */
HOT static float scale(float *w, const float *l, uint32_t n, float t)
{
	vf m, tv = {0}, y;
	float mx = -INFINITY;
	size_t i;

	for (int j = 0; j < LANES; j++)
		m[j] = -INFINITY, tv[j] = t;
	for (i = 0; i + LANES <= n; i += LANES) {
		y = vload(l + i) / tv;
		m = vmax(y, m);
		memcpy(w + i, &y, sizeof(y));
	}
	for (; i < n; i++) {
		w[i] = l[i] / t;
		mx = w[i] > mx ? w[i] : mx;
	}
	return hmax(m, mx);
}

/* E = exp(L - MX) (E may be L); per block sums in BSUM, returns the
 * total. */
HOT static double exp_store(float *e, const float *l, uint32_t n, float mx,
			    double *bsum)
{
	size_t full = n / LANES * LANES, b = 0, i;
	double total = 0;

	for (i = 0; i < full; b++) {
		size_t end = i + BLOCK < full ? i + BLOCK : full;
		float z[LANES] = {0}, y[LANES];

		for (; i < end; i += LANES) {
			const float *g = l + i;

			for (int j = 0; j < LANES; j++) {
				y[j] = exp_neg(g[j] - mx);
				z[j] += y[j];
			}
			memcpy(e + i, y, sizeof(y));
		}
		bsum[b] = 0;
		for (int j = 0; j < LANES; j++)
			bsum[b] += z[j];
		total += bsum[b];
	}
	bsum[b] = 0;
	for (; i < n; i++) {
		e[i] = exp_neg(l[i] - mx);
		bsum[b] += e[i];
	}
	return total + bsum[b];
}

/* Z = sum exp(L - MX) and ZL = sum exp(L - MX) (L - MX). */
HOT static void exp_sums(const float *l, uint32_t n, float mx, double *z,
			 double *zl)
{
	size_t full = n / LANES * LANES, i;

	*z = *zl = 0;
	for (i = 0; i < full;) {
		size_t end = i + BLOCK < full ? i + BLOCK : full;
		float a[LANES] = {0}, b[LANES] = {0};

		for (; i < end; i += LANES) {
			const float *g = l + i;

			for (int j = 0; j < LANES; j++) {
				float x = g[j] - mx;

				a[j] += exp_neg(x);
				b[j] += exp_neg(x) * (x < -87.0f ? 0.0f : x);
			}
		}
		for (int j = 0; j < LANES; j++)
			*z += a[j], *zl += b[j];
	}
	for (; i < n; i++) {
		float x = l[i] - mx;

		*z += exp_neg(x);
		*zl += exp_neg(x) * (x < -87.0f ? 0.0f : x); /* -inf: 0 */
	}
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

/* Puts the K best ids of L (k < n) in ORDER, sorted, by insertion; ids
 * come in ascending order, so a later equal value never displaces. */
static void select_top(const float *l, uint32_t n, uint32_t *order, uint32_t k)
{
	uint32_t have = 0;
	float floor = -INFINITY;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t j;

		if (have == k && !(l[i] > floor))
			continue;
		j = have < k ? have++ : k - 1;
		while (j > 0 && l[order[j - 1]] < l[i]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
		floor = have == k ? l[order[k - 1]] : -INFINITY;
	}
}

/* Steps 4-6 of sampler.h over N candidates in ORDER, sorted, of the
 * processed logits L: the reference arithmetic, in double. */
static uint32_t draw_sorted(struct o1_sampler *s, const float *l, uint32_t n)
{
	const struct o1_sampler_params *p = &s->p;
	uint32_t keep;
	double mass = 0, kept = 0, u, acc = 0, mx = l[s->order[0]];

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

/* Temperature only: every token in id order, E = exp(l - max) with the
 * block sums of exp_store(); finds the block, then the token. */
static uint32_t draw_all(struct o1_sampler *s, const float *e, double total)
{
	uint32_t n = s->vocab, b = 0, i, last = 0;
	double u = next_uniform(s->rng) * total, acc = 0;

	while ((b + 1) * BLOCK < n && !(u < acc + s->bsum[b]))
		acc += s->bsum[b++];
	for (i = b * BLOCK; i < n; i++) {
		if (e[i] > 0)
			last = i;
		acc += e[i];
		if (u < acc)
			return i;
	}
	return last;
}

/* Probabilities (relative to the best) at or above which the top-p cut
 * surely lies: the histogram of P by binary exponent, from the top,
 * until it holds TARGET of the mass, one exponent more for rounding. */
static float top_p_floor(const float *p, uint32_t n, double target)
{
	double mass[4][256] = {{0}}, acc = 0;
	union {
		uint32_t u;
		float f;
	} v;
	uint32_t i;

	for (i = 0; i + 4 <= n; i += 4)
		for (int j = 0; j < 4; j++) {
			v.f = p[i + j];
			mass[j][v.u >> 23 & 255] += p[i + j];
		}
	for (; i < n; i++) {
		v.f = p[i];
		mass[0][v.u >> 23 & 255] += p[i];
	}
	for (int x = 255; x > 1; x--) {
		acc += mass[0][x] + mass[1][x] + mass[2][x] + mass[3][x];
		if (acc >= target) {
			v.u = (uint32_t)(x - 1) << 23;
			return v.f;
		}
	}
	return 0;
}

/* Top-p and min-p without top-k: sorts the tokens with p >= FLOOR and
 * walks them; -1 when the walk ran past them without reaching the cut. */
static int64_t draw_cut(struct o1_sampler *s, const float *w, float floor,
			double mass)
{
	const struct o1_sampler_params *p = &s->p;
	const float *e = s->prob;
	uint32_t n = 0, keep;
	double kept = 0, u, acc = 0;

	for (uint32_t i = 0; i < s->vocab; i++) {
		s->order[n] = i;
		n += e[i] >= floor;
	}
	if (!n) /* NaN logits only: token 0, as argmax() answers */
		return floor > 0 ? -1 : 0;
	qsort_r(s->order, n, sizeof(*s->order), by_value, (void *)w);
	for (keep = 0; keep < n; keep++) {
		if (keep && p->top_p > 0 && p->top_p < 1 &&
		    !(kept / mass < p->top_p))
			break;
		if (keep && e[s->order[keep]] < p->min_p)
			break;
		kept += e[s->order[keep]];
	}
	if (keep == n && n < s->vocab && !(p->min_p > 0 && floor <= p->min_p) &&
	    !(p->top_p > 0 && p->top_p < 1 && !(kept / mass < p->top_p)))
		return -1;
	u = next_uniform(s->rng) * kept;
	for (uint32_t i = 0; i < keep; i++) {
		acc += e[s->order[i]];
		if (u < acc)
			return s->order[i];
	}
	return s->order[keep - 1];
}

static uint32_t draw_cuts(struct o1_sampler *s, const float *w, float mx)
{
	const struct o1_sampler_params *p = &s->p;
	double mass = exp_store(s->prob, w, s->vocab, mx, s->bsum);
	float floor = p->min_p;
	int64_t id;

	if (p->top_p > 0 && p->top_p < 1) {
		float f = top_p_floor(s->prob, s->vocab, p->top_p * mass);

		floor = f > floor ? f : floor;
	}
	id = draw_cut(s, w, floor, mass);
	if (id < 0)
		id = draw_cut(s, w, 0, mass);
	return (uint32_t)id;
}

/* Steps 2-6 of sampler.h over the penalised logits L. */
static uint32_t draw(struct o1_sampler *s, const float *l)
{
	const struct o1_sampler_params *p = &s->p;
	uint32_t n = s->vocab;
	float mx = scale(s->work, l, n, p->temperature);

	if (small_top_k(p, n)) {
		select_top(s->work, n, s->order, p->top_k);
		return draw_sorted(s, s->work, p->top_k);
	}
	if (p->top_k && p->top_k < n) {
		for (uint32_t i = 0; i < n; i++)
			s->order[i] = i;
		qsort_r(s->order, n, sizeof(*s->order), by_value, s->work);
		return draw_sorted(s, s->work, p->top_k);
	}
	if (cuts(p))
		return draw_cuts(s, s->work, mx);
	return draw_all(s, s->work,
			exp_store(s->work, s->work, n, mx, s->bsum));
}

/* Inserts token I of L into the sorted TOP (HAVE of K) if it ranks. */
static void top_insert(const float *l, uint32_t i, uint32_t k, uint32_t *have,
		       struct o1_token_logprob *top)
{
	uint32_t j;

	if (*have == k && l[i] <= top[k - 1].logprob)
		return;
	j = *have < k ? (*have)++ : k - 1;
	while (j > 0 && top[j - 1].logprob < l[i]) {
		top[j] = top[j - 1];
		j--;
	}
	top[j] = (struct o1_token_logprob){(int32_t)i, l[i]};
}

/* The K best of the raw logits L, values still logits; a group of LANES
 * tokens is looked at only when one of them beats the K-th. */
static uint32_t top_n(const float *l, uint32_t n, uint32_t k,
		      struct o1_token_logprob *top)
{
	uint32_t have = 0, i = 0;

	for (; i < n && have < k; i++)
		top_insert(l, i, k, &have, top);
	for (; i + LANES <= n; i += LANES) {
		float floor = top[k - 1].logprob;
		int any = 0;

		for (int j = 0; j < LANES; j++)
			any |= l[i + j] > floor;
		for (int j = 0; any && j < LANES; j++)
			top_insert(l, i + j, k, &have, top);
	}
	for (; i < n; i++)
		top_insert(l, i, k, &have, top);
	return have;
}

/* Logprob of ID, entropy and the top-n of the raw logits L, whose
 * highest is MX. */
static void describe(const struct o1_sampler *s, const float *l, float mx,
		     uint32_t id, struct o1_sample *out)
{
	double z, zl, lse;

	exp_sums(l, s->vocab, mx, &z, &zl);
	lse = mx + log(z);
	out->n_top =
	    s->p.n_logprobs ? top_n(l, s->vocab, s->p.n_logprobs, out->top) : 0;
	for (uint32_t j = 0; j < out->n_top; j++)
		out->top[j].logprob = (float)(out->top[j].logprob - lse);
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
	const float *l = penalised(s, logits);
	uint32_t id;
	float mx, raw_mx;

	if (is_greedy(&s->p))
		id = argmax(l, s->vocab, &mx);
	else
		id = draw(s, l);
	if (l != logits || !is_greedy(&s->p))
		argmax(logits, s->vocab, &raw_mx);
	else
		raw_mx = mx;
	describe(s, logits, raw_mx, id, out);
	out->id = (int32_t)id;
	note_seen(s, id);
	s->counts[id]++;
	s->n_generated++;
	out->finish = finish_reason(s, out->id);
	return 0;
}

/* o1_sample_rows: the CPU reference of sample.h, the arithmetic that was
 * daemon/sampler's, moved here so the sampler and the backends run one
 * copy of it (the sampler keeps the per-request state: PRNG, counts,
 * stops).
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
 * exponent), with the whole vocabulary as the exact fallback. Penalties
 * touch only the row's penalty list, on a copy of the logits.
 *
 * Masks (sample.h): a masked row is copied with its refused tokens at
 * -inf (the masked copy, the raw row from then on) and sampled as any
 * row; a refused answer (degenerate rows only) becomes the lowest allowed
 * id.
 *
 * Scratch: each row carves what its parameters use (processed logits,
 * block sums, candidate ids, probabilities, the masked copy) from the
 * front of SCRATCH, so
 * o1_sample_scratch_bytes() (every path) fits any row and
 * o1_sample_row_scratch_bytes() fits rows like the one it was given.
 */
#include "sample.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LANES	  16
#define BLOCK	  1024 /* tokens per float partial sum, a multiple of LANES */
#define TOP_K_MAX 256  /* top-k up to this keeps a sorted array */

/* clang checks the by-value vectors of the inlined helpers below against
 * each clone's ABI before inlining, and refuses them in the clones without
 * AVX-512: it builds the one default version (same results, fewer lanes). */
#ifdef __clang__
#define HOT
#else
#define HOT __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

/* One row being sampled: its parameters and its scratch arrays. */
struct row_ctx {
	const struct o1_sample_row *p;
	uint32_t vocab;
	float *work;	 /* processed logits */
	float *prob;	 /* exp(work - max), top-p and min-p only */
	uint32_t *order; /* candidate ids */
	double *bsum;	 /* per block of BLOCK tokens, the draw's index */
	float *masked;	 /* the raw row with refused tokens at -inf */
};

/* A top-n entry while the raw logits are scanned. */
struct top_ent {
	int32_t id;
	float v;
};

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

float o1_sample_exp_neg(float x)
{
	return exp_neg(x);
}

static bool is_greedy(const struct o1_sample_row *p)
{
	return p->temperature == 0 || p->top_k == 1;
}

static bool has_penalties(const struct o1_sample_row *p)
{
	return (p->repetition_penalty > 0 && p->repetition_penalty != 1) ||
	       p->frequency_penalty != 0 || p->presence_penalty != 0;
}

static bool small_top_k(const struct o1_sample_row *p, uint32_t vocab)
{
	return p->top_k && p->top_k < vocab && p->top_k <= TOP_K_MAX;
}

static bool cuts(const struct o1_sample_row *p)
{
	return (p->top_p > 0 && p->top_p < 1) || p->min_p > 0;
}

static size_t up64(size_t n)
{
	return (n + 63) / 64 * 64;
}

/* Bytes of work, bsum, order, prob and masked for rows like P (NULL: any
 * row): ORDER holds the whole vocabulary only for the sorts (top-p, min-p,
 * top-k above TOP_K_MAX), PROB only for top-p and min-p over the whole
 * vocabulary, MASKED only for masked rows; a greedy row without penalties
 * or mask needs nothing. */
static void layout(const struct o1_sample_row *p, uint32_t v, size_t sz[5])
{
	bool greedy = p && is_greedy(p), small = p && small_top_k(p, v);
	bool big_k = p && !small && p->top_k && p->top_k < v;
	bool need_prob = !p || (!greedy && !small && !big_k && cuts(p));

	sz[0] = !greedy || !p || has_penalties(p) ? v * sizeof(float) : 0;
	sz[1] = greedy ? 0 : ((size_t)v / BLOCK + 2) * sizeof(double);
	sz[2] = greedy		     ? 0
		: small		     ? p->top_k * sizeof(uint32_t)
		: big_k || need_prob ? v * sizeof(uint32_t)
				     : 0;
	sz[3] = need_prob ? v * sizeof(float) : 0;
	sz[4] = !p || p->mask ? v * sizeof(float) : 0;
}

static size_t total(const size_t sz[5])
{
	return up64(sz[0]) + up64(sz[1]) + up64(sz[2]) + up64(sz[3]) +
	       up64(sz[4]);
}

size_t o1_sample_scratch_bytes(uint32_t vocab)
{
	size_t sz[5];

	layout(NULL, vocab, sz);
	return total(sz);
}

size_t o1_sample_row_scratch_bytes(const struct o1_sample_row *row,
				   uint32_t vocab)
{
	size_t sz[5];

	layout(row, vocab, sz);
	return total(sz);
}

static void carve(struct row_ctx *s, const struct o1_sample_row *p,
		  uint32_t vocab, void *scratch)
{
	char *at = scratch;
	size_t sz[5];

	layout(p, vocab, sz);
	s->p = p;
	s->vocab = vocab;
	s->work = (float *)at;
	s->bsum = (double *)(at += up64(sz[0]));
	s->order = (uint32_t *)(at += up64(sz[1]));
	s->prob = (float *)(at += up64(sz[2]));
	s->masked = (float *)(at + up64(sz[3]));
}

static bool allowed(const uint32_t *mask, uint32_t id)
{
	return mask[id / 32] >> (id % 32) & 1;
}

/* LOGITS with the tokens MASK refuses at -inf, into s->masked; the lowest
 * allowed id, or vocab when none is. */
static uint32_t apply_mask(const struct row_ctx *s, const float *logits,
			   const uint32_t *mask)
{
	uint32_t first = s->vocab;

	for (uint32_t w = 0; w * 32 < s->vocab; w++) {
		uint32_t bits = mask[w], base = w * 32;
		uint32_t n = s->vocab - base < 32 ? s->vocab - base : 32;

		if (bits && first == s->vocab)
			first = base + (uint32_t)__builtin_ctz(bits);
		if (bits == UINT32_MAX && n == 32) {
			memcpy(s->masked + base, logits + base,
			       32 * sizeof(float));
			continue;
		}
		for (uint32_t i = 0; i < n; i++)
			s->masked[base + i] =
			    bits >> i & 1 ? logits[base + i] : -INFINITY;
	}
	return first < s->vocab ? first : s->vocab;
}

/* Copies LOGITS to work with the penalties applied to the N tokens of
 * PENS (distinct ids: the order does not matter). */
static const float *penalised(struct row_ctx *s, const float *logits,
			      const struct o1_sample_penalty *pens, uint32_t n)
{
	const struct o1_sample_row *p = s->p;
	bool rep = p->repetition_penalty > 0 && p->repetition_penalty != 1;
	float *l = s->work;

	if (!has_penalties(p) || !n)
		return logits;
	memcpy(l, logits, s->vocab * sizeof(float));
	for (uint32_t j = 0; j < n; j++) {
		uint32_t i = (uint32_t)pens[j].id;

		if (rep)
			l[i] = l[i] > 0 ? l[i] / p->repetition_penalty
					: l[i] * p->repetition_penalty;
		if (pens[j].count) {
			l[i] =
			    l[i] - p->frequency_penalty * (float)pens[j].count;
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
		vf m;

		/* from -inf, not the first group: vmax keeps its second operand
		 * against a NaN, so a NaN loaded first would stick in its lane
		 */
		for (int j = 0; j < LANES; j++)
			m[j] = -INFINITY;
		for (; i < end; i += LANES)
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

/* Steps 4-6 of sample.h over N candidates in ORDER, sorted, of the
 * processed logits L: the reference arithmetic, in double. */
static uint32_t draw_sorted(const struct row_ctx *s, const float *l, uint32_t n)
{
	const struct o1_sample_row *p = s->p;
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
	u = p->u * kept;
	for (uint32_t i = 0; i < keep; i++) {
		acc += exp(l[s->order[i]] - mx);
		if (u < acc)
			return s->order[i];
	}
	return s->order[keep - 1];
}

/* Temperature only: every token in id order, E = exp(l - max) with the
 * block sums of exp_store(); finds the block, then the token. */
static uint32_t draw_all(const struct row_ctx *s, const float *e, double total)
{
	uint32_t n = s->vocab, b = 0, i, last = 0;
	double u = s->p->u * total, acc = 0;

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
static int64_t draw_cut(const struct row_ctx *s, const float *w, float floor,
			double mass)
{
	const struct o1_sample_row *p = s->p;
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
	u = p->u * kept;
	for (uint32_t i = 0; i < keep; i++) {
		acc += e[s->order[i]];
		if (u < acc)
			return s->order[i];
	}
	return s->order[keep - 1];
}

static uint32_t draw_cuts(const struct row_ctx *s, const float *w, float mx)
{
	const struct o1_sample_row *p = s->p;
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

/* Steps 2-6 of sample.h over the penalised logits L. */
static uint32_t draw(const struct row_ctx *s, const float *l)
{
	const struct o1_sample_row *p = s->p;
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
		       struct top_ent *top)
{
	uint32_t j;

	if (*have == k && l[i] <= top[k - 1].v)
		return;
	j = *have < k ? (*have)++ : k - 1;
	while (j > 0 && top[j - 1].v < l[i]) {
		top[j] = top[j - 1];
		j--;
	}
	top[j] = (struct top_ent){(int32_t)i, l[i]};
}

/* The K best of the raw logits L, values still logits; a group of LANES
 * tokens is looked at only when one of them beats the K-th. */
static uint32_t top_n(const float *l, uint32_t n, uint32_t k,
		      struct top_ent *top)
{
	uint32_t have = 0, i = 0;

	for (; i < n && have < k; i++)
		top_insert(l, i, k, &have, top);
	for (; i + LANES <= n; i += LANES) {
		float floor = top[k - 1].v;
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
static void describe(const struct row_ctx *s, const float *l, float mx,
		     uint32_t id, struct o1_sample_result *out)
{
	struct top_ent top[O1_SAMPLE_MAX_TOP];
	double z, zl, lse;

	exp_sums(l, s->vocab, mx, &z, &zl);
	lse = mx + log(z);
	out->n_top =
	    s->p->n_logprobs ? top_n(l, s->vocab, s->p->n_logprobs, top) : 0;
	for (uint32_t j = 0; j < out->n_top; j++) {
		out->top_id[j] = top[j].id;
		out->top_logprob[j] = (float)(top[j].v - lse);
	}
	out->logprob = (float)(l[id] - lse);
	out->entropy = (float)(log(z) - zl / z);
}

/* Steps 1-6 and the description of one row; MASK the row's, or NULL. */
static void sample_row(struct o1_sample_result *out, const float *logits,
		       uint32_t vocab, const struct o1_sample_row *row,
		       const struct o1_sample_penalty *pens,
		       const uint32_t *mask, void *scratch)
{
	struct row_ctx s;
	const float *l;
	uint32_t id, first = 0;
	float mx, raw_mx;

	carve(&s, row, vocab, scratch);
	if (mask) {
		first = apply_mask(&s, logits, mask);
		if (first == vocab) {
			memset(out, 0, sizeof(*out));
			out->id = O1_SAMPLE_NO_TOKEN;
			out->logprob = -INFINITY;
			return;
		}
		logits = s.masked;
	}
	l = penalised(&s, logits, row->n_pen ? pens + row->pen_off : NULL,
		      row->n_pen);
	if (is_greedy(row))
		id = argmax(l, vocab, &mx);
	else
		id = draw(&s, l);
	if (l != logits || !is_greedy(row))
		argmax(logits, vocab, &raw_mx);
	else
		raw_mx = mx;
	if (mask && !allowed(mask, id))
		id = first;
	memset(out, 0, sizeof(*out));
	describe(&s, logits, raw_mx, id, out);
	out->id = (int32_t)id;
}

/* The parameters sampler.h refuses, and penalty ids outside the
 * vocabulary. */
static bool row_ok(const struct o1_sample_row *r,
		   const struct o1_sample_penalty *pens, uint32_t vocab)
{
	if (!(r->temperature >= 0) || !isfinite(r->temperature) ||
	    !(r->top_p >= 0 && r->top_p <= 1) ||
	    !(r->min_p >= 0 && r->min_p <= 1) ||
	    !(r->repetition_penalty >= 0) || !isfinite(r->presence_penalty) ||
	    !isfinite(r->frequency_penalty) ||
	    r->n_logprobs > O1_SAMPLE_MAX_TOP || (r->n_pen && !pens))
		return false;
	for (uint32_t j = 0; j < r->n_pen; j++) {
		int32_t id = pens[(size_t)r->pen_off + j].id;

		if (id < 0 || (uint32_t)id >= vocab)
			return false;
	}
	return true;
}

int o1_sample_rows_masked(struct o1_sample_result *out, const float *logits,
			  uint32_t n_rows, uint32_t vocab,
			  const struct o1_sample_row *rows,
			  const struct o1_sample_penalty *pens,
			  const uint32_t *masks, uint32_t n_masks,
			  void *scratch)
{
	size_t words = o1_sample_mask_words(vocab);

	if (!vocab || (n_masks && !masks))
		return -EINVAL;
	for (uint32_t r = 0; r < n_rows; r++)
		if (!row_ok(&rows[r], pens, vocab) || rows[r].mask > n_masks)
			return -EINVAL;
	for (uint32_t r = 0; r < n_rows; r++)
		sample_row(
		    &out[r], logits + (size_t)r * vocab, vocab, &rows[r], pens,
		    rows[r].mask ? masks + (rows[r].mask - 1) * words : NULL,
		    scratch);
	return 0;
}

int o1_sample_rows(struct o1_sample_result *out, const float *logits,
		   uint32_t n_rows, uint32_t vocab,
		   const struct o1_sample_row *rows,
		   const struct o1_sample_penalty *pens, void *scratch)
{
	return o1_sample_rows_masked(out, logits, n_rows, vocab, rows, pens,
				     NULL, 0, scratch);
}

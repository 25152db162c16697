/* o1_sample_rows_cuda (kernels/sample.cu) against the CPU reference
 * o1_sample_rows (kernels/sample.c) on fresh random rows (the seed is the
 * time unless O1_TEST_SEED is set, and is printed): vocabularies 1, 7,
 * 1000, 32000, 128256, 151936 and 256000 (slices in global scratch),
 * batches of 1 to 256 rows, each row its own mode (greedy with and
 * without logprobs, temperature, top-k below and above what the device
 * sorts in one buffer, top-p, min-p, their combinations, penalties, U at 0
 * and just below 1) and its own kind (peaked, flat, few tied values, all
 * +-0, partly -inf, a few NaN, all -inf, all NaN). Outputs are poisoned
 * (0xff) before each launch. Exit 77 without a CUDA device.
 *
 * Exact: greedy ids, n_top, top-n ids, the entries past n_top (0, as the
 * reference leaves them), sampled ids except as below. Rows with NaN: the
 * greedy id against sample.h's rule (the highest value, lowest id, NaN
 * never wins) rather than the reference, whose vectorised argmax skips a
 * lane of 16 for the rest of a 1024-token block after a NaN that starts
 * it; sampled ids only in range and not a NaN token (the reference's
 * order is undefined there); top-n ids not compared.
 *
 * Sampled ids may differ only where the reference's draw U x kept lies
 * within DELTA = 1e-8 of the kept mass from a boundary between two tokens,
 * or a top-p ratio or a min-p probability lies within DELTA (relative) of
 * its threshold: the device walks the same float e (temperature, cuts) or
 * double exp (top-k) in another order, in double (error <= n 2^-53, 2e-11
 * relative at 152k tokens) or, when more than 2048 candidates must be
 * walked, in fixed point of 2^-43 (<= n 2^-44 absolute over a kept mass of
 * at least 1, the best token's: <= 1e-8 at 152k). The test recomputes the
 * reference's walk on the host to find those; they must be fewer than 1%
 * of the draws.
 *
 * logprob, entropy and top logprobs: |gpu - cpu| <= 3e-5 + 2^-21 |cpu|,
 * NaN together. The reference sums exp_neg (2 ulp) in float partials of 64
 * terms, the device __expf (2 ulp plus |x| 2^-23, which matters only for
 * terms far below the maximum) in float partials of at most 38 terms,
 * both then in double: each z is within ~4e-6 of the exact sum, log z
 * within ~1e-5, plus two roundings of the float result (2^-24 each).
 *
 * Statistics: per mode, 10240 draws of one row with fresh U against the
 * kept probabilities the host computes: chi-square over groups of
 * consecutive kept tokens (in draw order) expecting >= 20 draws each, below
 * the 1 - 1e-6 quantile (Wilson-Hilferty). Graphs: a captured launch
 * replayed after the rows changed on the device samples the new rows.
 * Masks (o1_sample_rows_masked_cuda): batches where two rows in three
 * carry a token bitmask (half the tokens, five, only the row's lowest
 * logit, all, none, only the last token with the bits past the
 * vocabulary set) beside unmasked rows, every mode: against
 * o1_sample_rows_masked, and as above against the reference on the
 * masked copy (refused tokens at -inf, what the sampler's host path
 * draws from); a masked row never answers a refused token, a row whose
 * only allowed token has the lowest logit answers it in every mode, a row
 * allowing nothing answers -1 (no crash, the other rows as usual); a
 * captured launch replayed with new masks and flags follows them.
 * O1_TEST_QUICK=1 runs fewer and smaller batches and draws (for the CPU
 * emulation of tools/gpu/emu, where a row costs seconds);
 * O1_TEST_FILTER=NAME runs the tests NAME matches (cmocka's filter).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "common/prng.h"
#include "kernels/cuda_util.h"
#include "kernels/kernels_cuda.h"
#include "kernels/sample.h"

#define DELTA	    1e-8
#define MAX_ROWS    256
#define STAT_ROWS   256
#define STAT_ROUNDS 40

static uint64_t rng;
static bool quick;

static uint64_t next64(void)
{
	return o1_prng_splitmix64(&rng);
}

static double unif(void)
{
	return (next64() >> 11) * 0x1.0p-53;
}

static float gauss(void)
{
	double a = unif(), b = unif();

	return (float)(sqrt(-2 * log(a + 1e-300)) * cos(2 * M_PI * b));
}

enum kind {
	K_PEAK,
	K_FLAT,
	K_TIED,
	K_ZERO,
	K_NEGINF,
	K_NAN,
	K_ALL_NEGINF,
	K_ALL_NAN,
	N_KINDS,
};

static void fill_row(float *l, uint32_t v, int kind)
{
	for (uint32_t i = 0; i < v; i++) {
		float x = kind == K_FLAT   ? (float)(unif() * 8 - 4)
			  : kind == K_TIED ? (float)floor(unif() * 4) / 2 - 1
			  : kind == K_ZERO ? (next64() & 1 ? 0.0f : -0.0f)
					   : gauss() * 2.5f;

		l[i] = kind == K_ALL_NEGINF		       ? -INFINITY
		       : kind == K_ALL_NAN		       ? NAN
		       : kind == K_NEGINF && next64() % 10 < 4 ? -INFINITY
		       : kind == K_NAN && next64() % 100 == 0  ? NAN
							       : x;
	}
	if (kind == K_PEAK || kind == K_NEGINF || kind == K_NAN)
		for (int j = 0; j < 5; j++)
			l[next64() % v] = 8 + (float)unif() * 4;
	if (kind == K_NAN) /* a NaN at the start of a lane group of 16 */
		l[(next64() % v) / 16 * 16] = NAN;
}

/* Whether some (ALL: every) value of L is NaN. */
static bool nan_in(const float *l, uint32_t v, bool all)
{
	for (uint32_t i = 0; i < v; i++)
		if ((isnan(l[i]) != 0) != all)
			return !all;
	return all;
}

static bool has_nan(const float *l, uint32_t v)
{
	return nan_in(l, v, false);
}

struct mode {
	const char *name;
	float t, top_p, min_p, rep, pres, freq;
	uint32_t top_k, n_logprobs, n_pen;
};

static const struct mode modes[] = {
    {"greedy", 0, 1, 0, 1, 0, 0, 0, 0, 0},
    {"greedy+5", 0, 1, 0, 1, 0, 0, 0, 5, 0},
    {"greedy+20 penalties", 0, 1, 0, 1.3f, 0.5f, 0.2f, 0, 20, 64},
    {"top-k 1", 0.8f, 1, 0, 1, 0, 0, 1, 1, 0},
    {"temperature 0.7", 0.7f, 1, 0, 1, 0, 0, 0, 0, 0},
    {"temperature 1.3 +3", 1.3f, 0, 0, 1, 0, 0, 0, 3, 0},
    {"top-k 2", 1, 1, 0, 1, 0, 0, 2, 0, 0},
    {"top-k 50", 0.9f, 1, 0, 1, 0, 0, 50, 0, 0},
    {"top-k 300 top-p 0.8", 1, 0.8f, 0, 1, 0, 0, 300, 0, 0},
    {"top-k 3000", 1.2f, 1, 0, 1, 0, 0, 3000, 0, 0},
    {"top-k 5000 min-p 0.01", 1, 1, 0.01f, 1, 0, 0, 5000, 2, 0},
    {"top-p 0.9", 1, 0.9f, 0, 1, 0, 0, 0, 0, 0},
    {"top-p 0.5", 0.8f, 0.5f, 0, 1, 0, 0, 0, 0, 0},
    {"top-p 0.99", 1.5f, 0.99f, 0, 1, 0, 0, 0, 0, 0},
    {"min-p 0.05", 1, 1, 0.05f, 1, 0, 0, 0, 0, 0},
    {"min-p 0.001", 1, 1, 0.001f, 1, 0, 0, 0, 0, 0},
    {"top-p 0.95 min-p 0.02", 1, 0.95f, 0.02f, 1, 0, 0, 0, 4, 0},
    {"top-k 50 top-p 0.9 min-p 0.05", 0.7f, 0.9f, 0.05f, 1, 0, 0, 50, 0, 0},
    {"temperature penalties", 1, 1, 0, 1.2f, 0.3f, 0.1f, 0, 0, 2000},
    {"top-p 0.9 repetition 0.8", 1, 0.9f, 0, 0.8f, 0, 0, 0, 0, 300},
    {"top-k 40 penalties", 0.9f, 1, 0, 1.1f, -0.4f, 0.5f, 40, 1, 500},
    {"min-p 0.1 presence", 1, 1, 0.1f, 1, 1.5f, 0, 0, 0, 100},
};

#define N_MODES (sizeof(modes) / sizeof(modes[0]))

/* Row R's parameters from mode M; its penalty entries (distinct ids) go
 * to PENS from *NP on. */
static struct o1_sample_row make_row(const struct mode *m, uint32_t v,
				     struct o1_sample_penalty *pens,
				     uint32_t *np, uint8_t *seen)
{
	struct o1_sample_row r = {
	    .u = unif(),
	    .temperature = m->t,
	    .top_p = m->top_p,
	    .min_p = m->min_p,
	    .repetition_penalty = m->rep,
	    .presence_penalty = m->pres,
	    .frequency_penalty = m->freq,
	    .top_k = m->top_k,
	    .n_logprobs = m->n_logprobs,
	    .pen_off = *np,
	    .n_pen = m->n_pen < v ? m->n_pen : v,
	};
	uint64_t pick = next64() % 8;

	r.u = pick == 0 ? 0 : pick == 1 ? 1 - 0x1.0p-53 : r.u;
	memset(seen, 0, v);
	for (uint32_t j = 0; j < r.n_pen; j++) {
		uint32_t id = (uint32_t)(next64() % v);
		uint32_t count = (uint32_t)(next64() % 4);

		while (seen[id])
			id = (id + 1) % v;
		seen[id] = 1;
		pens[*np + j] = (struct o1_sample_penalty){
		    (int32_t)id, count, count ? (uint32_t)(next64() & 1) : 1};
	}
	*np += r.n_pen;
	return r;
}

/* ---- the reference's walk, recomputed to find draws near a boundary ---- */

/* The reference's exp_store total and block sums of E (1024-token blocks,
 * 16 float partial sums, the tail alone). */
static double ref_total(const float *e, uint32_t n, double *bsum)
{
	size_t full = n / 16 * 16, b = 0, i;
	double total = 0;

	for (i = 0; i < full; b++) {
		size_t end = i + 1024 < full ? i + 1024 : full;
		float z[16] = {0};

		for (; i < end; i += 16)
			for (int j = 0; j < 16; j++)
				z[j] += e[i + j];
		bsum[b] = 0;
		for (int j = 0; j < 16; j++)
			bsum[b] += z[j];
		total += bsum[b];
	}
	bsum[b] = 0;
	for (; i < n; i++)
		bsum[b] += e[i];
	return total + bsum[b];
}

struct walk {
	float *w, *ef;
	double *bsum, *e;
	uint32_t *order, n; /* kept tokens in draw order, their e */
	double kept;
	int32_t id;
	bool near;
};

static const float *sort_keys;

static int by_value(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (sort_keys[x] != sort_keys[y])
		return sort_keys[x] > sort_keys[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The draw over the N weights E of ORDER from START: the first running
 * sum above u x kept, else FALLBACK; flags a boundary between two tokens
 * within DELTA x SCALE of the draw (the ends are not ambiguous). */
static void walk_draw(struct walk *k, double u, double start, double scale,
		      int32_t fallback)
{
	double t = u * k->kept, acc = start, prev = start;
	uint32_t i;

	k->id = fallback;
	for (i = 0; i < k->n; i++) {
		prev = acc;
		acc += k->e[i];
		if (t < acc) {
			k->id = (int32_t)k->order[i];
			break;
		}
	}
	if ((i < k->n - 1 && fabs(t - acc) <= DELTA * scale) ||
	    ((i > 0 || start > 0) && i < k->n &&
	     fabs(t - prev) <= DELTA * scale))
		k->near = true;
}

/* sample.h step 1 on a copy of L in W. */
static void penalise_copy(float *w, const float *l, uint32_t v,
			  const struct o1_sample_row *p,
			  const struct o1_sample_penalty *pens)
{
	bool rep = p->repetition_penalty > 0 && p->repetition_penalty != 1;
	bool on = rep || p->frequency_penalty != 0 || p->presence_penalty != 0;

	memcpy(w, l, v * sizeof(float));
	for (uint32_t j = 0; on && j < p->n_pen; j++) {
		const struct o1_sample_penalty *q = &pens[p->pen_off + j];
		float x = w[q->id];

		if (rep)
			x = x > 0 ? x / p->repetition_penalty
				  : x * p->repetition_penalty;
		if (q->count) {
			x = x - p->frequency_penalty * (float)q->count;
			x = x - p->presence_penalty;
		}
		w[q->id] = x;
	}
}

/* Penalties and temperature as sample.h, into k->w; the maximum. */
static float processed(struct walk *k, const float *l, uint32_t v,
		       const struct o1_sample_row *p,
		       const struct o1_sample_penalty *pens)
{
	float mx = -INFINITY;

	penalise_copy(k->w, l, v, p, pens);
	for (uint32_t i = 0; i < v; i++) {
		k->w[i] = k->w[i] / p->temperature;
		mx = k->w[i] > mx ? k->w[i] : mx;
	}
	return mx;
}

/* Temperature only: the reference's draw_all, every token in id order. */
static void walk_all(struct walk *k, uint32_t v, float mx, double u)
{
	double total, acc = 0;
	uint32_t b = 0;
	int32_t last = 0;

	for (uint32_t i = 0; i < v; i++)
		k->ef[i] = o1_sample_exp_neg(k->w[i] - mx);
	total = ref_total(k->ef, v, k->bsum);
	while ((b + 1) * 1024 < v && !(u * total < acc + k->bsum[b]))
		acc += k->bsum[b++];
	k->n = v - b * 1024;
	for (uint32_t i = 0; i < k->n; i++)
		k->order[i] = b * 1024 + i, k->e[i] = k->ef[b * 1024 + i];
	k->kept = total;
	for (uint32_t i = b * 1024; i < v; i++)
		last = k->ef[i] > 0 ? (int32_t)i : last;
	walk_draw(k, u, acc, total, last);
}

/* Top-k, top-p, min-p: the reference's draw_sorted / draw_cut over the
 * whole order (its candidate floor only saves time). */
static void walk_sorted(struct walk *k, uint32_t v, float mx,
			const struct o1_sample_row *p)
{
	bool topk = p->top_k && p->top_k < v;
	bool topp = p->top_p > 0 && p->top_p < 1;
	uint32_t n = topk ? p->top_k : v, keep;
	double mass = 0, kept = 0;

	for (uint32_t i = 0; i < v; i++)
		k->order[i] = i, k->ef[i] = o1_sample_exp_neg(k->w[i] - mx);
	sort_keys = k->w;
	qsort(k->order, v, sizeof(uint32_t), by_value);
	for (uint32_t i = 0; i < n; i++)
		k->e[i] = topk ? exp((double)k->w[k->order[i]] -
				     (double)k->w[k->order[0]])
			       : k->ef[k->order[i]];
	if (topk)
		for (uint32_t i = 0; i < n; i++)
			mass += k->e[i];
	else
		mass = ref_total(k->ef, v, k->bsum);
	for (keep = 0; keep < n; keep++) {
		if (keep && topp && fabs(kept / mass - p->top_p) <= DELTA)
			k->near = true;
		if (keep && p->min_p > 0 &&
		    fabs(k->e[keep] - p->min_p) <= DELTA * p->min_p)
			k->near = true;
		if (keep && topp && !(kept / mass < p->top_p))
			break;
		if (keep && k->e[keep] < p->min_p)
			break;
		kept += k->e[keep];
	}
	k->n = keep;
	k->kept = kept;
	walk_draw(k, p->u, 0, kept, (int32_t)k->order[keep - 1]);
}

/* The reference's draw for a sampling row without NaN and with a finite
 * maximum, its kept tokens and whether it lies near a boundary. */
static void host_walk(struct walk *k, const float *l, uint32_t v,
		      const struct o1_sample_row *p,
		      const struct o1_sample_penalty *pens)
{
	float mx = processed(k, l, v, p, pens);

	k->near = false;
	if ((p->top_k && p->top_k < v) || (p->top_p > 0 && p->top_p < 1) ||
	    p->min_p > 0)
		walk_sorted(k, v, mx, p);
	else
		walk_all(k, v, mx, p->u);
}

static void walk_init(struct walk *k, uint32_t v)
{
	k->w = malloc(v * sizeof(float));
	k->ef = malloc(v * sizeof(float));
	k->bsum = malloc((v / 1024 + 2) * sizeof(double));
	k->e = malloc(v * sizeof(double));
	k->order = malloc(v * sizeof(uint32_t));
	assert_true(k->w && k->ef && k->bsum && k->e && k->order);
}

static void walk_fini(struct walk *k)
{
	free(k->w), free(k->ef), free(k->bsum), free(k->e), free(k->order);
}

/* ---- device plumbing ---- */

struct dev {
	float *logits;
	struct o1_sample_row *rows;
	struct o1_sample_penalty *pens;
	struct o1_sample_result *out;
	void *scratch;
	size_t scratch_bytes;
};

static void dev_init(struct dev *d, uint32_t rows, uint32_t v, uint32_t np)
{
	d->scratch_bytes = o1_sample_rows_cuda_scratch_bytes(rows, v);
	assert_int_equal(
	    cudaMalloc((void **)&d->logits, (size_t)rows * v * sizeof(float)),
	    cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&d->rows, rows * sizeof(*d->rows)),
			 cudaSuccess);
	assert_int_equal(
	    cudaMalloc((void **)&d->pens, (np ? np : 1) * sizeof(*d->pens)),
	    cudaSuccess);
	assert_int_equal(cudaMalloc((void **)&d->out, rows * sizeof(*d->out)),
			 cudaSuccess);
	d->scratch = NULL;
	if (d->scratch_bytes)
		assert_int_equal(cudaMalloc(&d->scratch, d->scratch_bytes),
				 cudaSuccess);
}

static void dev_fini(struct dev *d)
{
	cudaFree(d->logits), cudaFree(d->rows), cudaFree(d->pens);
	cudaFree(d->out), cudaFree(d->scratch);
}

/* Uploads, poisons the output, samples N rows, copies the results. */
static void run_device(struct dev *d, struct o1_sample_result *got,
		       const float *l, uint32_t n, uint32_t v,
		       const struct o1_sample_row *rows,
		       const struct o1_sample_penalty *pens, uint32_t np)
{
	assert_int_equal(cudaMemcpy(d->logits, l, (size_t)n * v * sizeof(float),
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	assert_int_equal(cudaMemcpy(d->rows, rows, n * sizeof(*rows),
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	if (np)
		assert_int_equal(cudaMemcpy(d->pens, pens, np * sizeof(*pens),
					    cudaMemcpyHostToDevice),
				 cudaSuccess);
	assert_int_equal(cudaMemset(d->out, 0xff, n * sizeof(*got)),
			 cudaSuccess);
	assert_int_equal(o1_sample_rows_cuda(d->out, d->logits, n, v, d->rows,
					     d->pens, d->scratch,
					     d->scratch_bytes, 0),
			 0);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(
	    cudaMemcpy(got, d->out, n * sizeof(*got), cudaMemcpyDeviceToHost),
	    cudaSuccess);
}

/* ---- comparison ---- */

struct tally {
	uint64_t draws, near, differ;
};

static bool close_to(float g, float c)
{
	if (g == c) /* infinities too */
		return true;
	if (isnan(c) || isnan(g))
		return isnan(c) && isnan(g);
	return fabs((double)g - c) <= 3e-5 + 0x1p-21 * fabs(c);
}

/* sample.h's greedy rule: the highest, lowest id, NaN never wins. */
static int32_t contract_argmax(const float *l, uint32_t v)
{
	int32_t best = -1;

	for (uint32_t i = 0; i < v; i++)
		if (!isnan(l[i]) && (best < 0 || l[i] > l[best]))
			best = (int32_t)i;
	return best < 0 ? 0 : best;
}

static void fail_row(const char *what, uint32_t v, uint32_t r, int kind,
		     const struct o1_sample_row *p,
		     const struct o1_sample_result *g,
		     const struct o1_sample_result *c)
{
	fprintf(stderr,
		"%s: vocab %u row %u kind %d: T %g top_k %u top_p %g min_p "
		"%g pen %u logprobs %u u %.17g: gpu id %d lp %g ent %g n_top "
		"%u, cpu id %d lp %g ent %g n_top %u\n",
		what, v, r, kind, p->temperature, p->top_k, p->top_p, p->min_p,
		p->n_pen, p->n_logprobs, p->u, g->id, g->logprob, g->entropy,
		g->n_top, c->id, c->logprob, c->entropy, c->n_top);
	fail();
}

static void check_describe(uint32_t v, uint32_t r, int kind, bool nan,
			   const struct o1_sample_row *p,
			   const struct o1_sample_result *g,
			   const struct o1_sample_result *c)
{
	if (g->n_top != c->n_top || !close_to(g->logprob, c->logprob) ||
	    !close_to(g->entropy, c->entropy))
		fail_row("describe", v, r, kind, p, g, c);
	for (uint32_t j = 0; j < O1_SAMPLE_MAX_TOP; j++) {
		bool in = j < c->n_top;

		if (in && ((!nan && g->top_id[j] != c->top_id[j]) ||
			   !close_to(g->top_logprob[j], c->top_logprob[j])))
			fail_row("top-n", v, r, kind, p, g, c);
		if (!in && (g->top_id[j] != 0 || g->top_logprob[j] != 0))
			fail_row("past n_top", v, r, kind, p, g, c);
	}
}

/* One sampled or greedy id against the reference (or the rules above). */
static void check_id(struct walk *k, struct tally *t, const float *l,
		     uint32_t v, uint32_t r, int kind,
		     const struct o1_sample_row *p,
		     const struct o1_sample_penalty *pens,
		     const struct o1_sample_result *g,
		     const struct o1_sample_result *c)
{
	bool greedy = p->temperature == 0 || p->top_k == 1;
	bool nan = has_nan(l, v);

	if (g->id < 0 || (uint32_t)g->id >= v)
		fail_row("id out of range", v, r, kind, p, g, c);
	if (greedy) {
		penalise_copy(k->w, l, v, p, pens);
		if (g->id != (nan ? contract_argmax(k->w, v) : c->id))
			fail_row("greedy", v, r, kind, p, g, c);
		return;
	}
	if (nan) {
		if (!nan_in(l, v, true) && isnan(l[g->id]))
			fail_row("drew a NaN token", v, r, kind, p, g, c);
		return;
	}
	t->draws++;
	if (kind == K_ALL_NEGINF) {
		if (g->id != c->id)
			fail_row("all -inf", v, r, kind, p, g, c);
		return;
	}
	host_walk(k, l, v, p, pens);
	if (k->id != c->id) /* the walk above is the reference's */
		fail_row("host walk", v, r, kind, p, g, c);
	t->near += k->near;
	if (g->id != c->id) {
		t->differ++;
		if (!k->near)
			fail_row("sampled id", v, r, kind, p, g, c);
	}
}

/* A batch of N rows of vocabulary V, modes and kinds spread over rows. */
static void check_batch(uint32_t v, uint32_t n, uint32_t shift, struct tally *t)
{
	float *l = malloc((size_t)n * v * sizeof(float));
	struct o1_sample_row *rows = malloc(n * sizeof(*rows));
	struct o1_sample_penalty *pens = malloc(n * 2000 * sizeof(*pens));
	struct o1_sample_result *got = malloc(n * sizeof(*got));
	struct o1_sample_result *ref = malloc(n * sizeof(*ref));
	void *scratch =
	    aligned_alloc(64, (o1_sample_scratch_bytes(v) + 63) / 64 * 64);
	uint8_t *seen = malloc(v);
	uint32_t np = 0;
	int kinds[MAX_ROWS];
	struct dev d;
	struct walk k;

	assert_true(l && rows && pens && got && ref && scratch && seen);
	for (uint32_t r = 0; r < n; r++) {
		kinds[r] = (int)((r / N_MODES + shift) % N_KINDS);
		fill_row(l + (size_t)r * v, v, kinds[r]);
		rows[r] =
		    make_row(&modes[(r + shift) % N_MODES], v, pens, &np, seen);
	}
	dev_init(&d, n, v, np);
	run_device(&d, got, l, n, v, rows, pens, np);
	assert_int_equal(o1_sample_rows(ref, l, n, v, rows, pens, scratch), 0);
	walk_init(&k, v);
	for (uint32_t r = 0; r < n; r++) {
		const float *lr = l + (size_t)r * v;

		check_describe(v, r, kinds[r], has_nan(lr, v), &rows[r],
			       &got[r], &ref[r]);
		check_id(&k, t, lr, v, r, kinds[r], &rows[r], pens, &got[r],
			 &ref[r]);
	}
	walk_fini(&k);
	dev_fini(&d);
	free(l), free(rows), free(pens), free(got), free(ref), free(scratch);
	free(seen);
}

static void test_rows(void **state)
{
	static const struct {
		uint32_t v, rows[4];
	} quick_shapes[] =
	    {
		{1, {1, 7, 0, 0}},	{7, {1, 7, 64, 0}},
		{1000, {9, 176, 0, 0}}, {32000, {176, 0, 0, 0}},
		{151936, {8, 0, 0, 0}}, {256000, {2, 0, 0, 0}},
	    },
	  shapes[] = {
	      {1, {1, 7, 64, 0}},      {7, {1, 7, 64, 256}},
	      {1000, {1, 9, 256, 0}},  {32000, {1, 64, 256, 0}},
	      {128256, {1, 64, 0, 0}}, {151936, {1, 8, 256, 0}},
	      {256000, {3, 64, 0, 0}},
	  };
	struct tally t = {0};

	(void)state;
	for (size_t s = 0; !quick && s < sizeof(shapes) / sizeof(shapes[0]);
	     s++)
		for (int j = 0; j < 4 && shapes[s].rows[j]; j++)
			check_batch(shapes[s].v, shapes[s].rows[j],
				    (uint32_t)(next64() % 64), &t);
	for (size_t s = 0;
	     quick && s < sizeof(quick_shapes) / sizeof(quick_shapes[0]); s++)
		for (int j = 0; j < 4 && quick_shapes[s].rows[j]; j++)
			check_batch(quick_shapes[s].v, quick_shapes[s].rows[j],
				    (uint32_t)(next64() % 64), &t);
	fprintf(stderr,
		"test_sample_cuda: %llu draws compared, %llu near a boundary, "
		"%llu of those differ\n",
		(unsigned long long)t.draws, (unsigned long long)t.near,
		(unsigned long long)t.differ);
	assert_true(t.differ * 100 < t.draws);
}

/* The 1 - 1e-6 quantile of chi-square with DF degrees (Wilson-Hilferty). */
static double chi2_limit(double df)
{
	double a = 2 / (9 * df), z = 4.7534;

	return df * pow(1 - a + z * sqrt(a), 3);
}

/* STAT_ROUNDS launches of STAT_ROWS copies of one row with fresh U: the
 * draws' counts against the kept probabilities. */
static void check_stats(uint32_t v, int kind, const struct mode *m)
{
	float *l = malloc((size_t)STAT_ROWS * v * sizeof(float));
	struct o1_sample_row rows[STAT_ROWS];
	uint32_t n_rows = quick ? STAT_ROWS / 8 : STAT_ROWS;
	int rounds = quick ? STAT_ROUNDS / 20 : STAT_ROUNDS;
	struct o1_sample_result *got = malloc(STAT_ROWS * sizeof(*got));
	uint32_t *count = calloc(v, sizeof(uint32_t)), np = 0, groups = 0;
	uint8_t *seen = malloc(v);
	double chi2 = 0, exp_g = 0, obs_g = 0;
	struct o1_sample_penalty pens[1];
	struct dev d;
	struct walk k;

	assert_true(l && got && count && seen);
	fill_row(l, v, kind);
	for (uint32_t r = 1; r < STAT_ROWS; r++)
		memcpy(l + (size_t)r * v, l, v * sizeof(float));
	rows[0] = make_row(m, v, pens, &np, seen);
	dev_init(&d, STAT_ROWS, v, 0);
	for (int round = 0; round < rounds; round++) {
		for (uint32_t r = 0; r < n_rows; r++)
			rows[r] = rows[0], rows[r].u = unif();
		run_device(&d, got, l, n_rows, v, rows, pens, 0);
		for (uint32_t r = 0; r < n_rows; r++) {
			assert_true(got[r].id >= 0 && (uint32_t)got[r].id < v);
			count[got[r].id]++;
		}
	}
	walk_init(&k, v);
	host_walk(&k, l, v, &rows[0], pens);
	for (uint32_t i = 0; i < k.n; i++) {
		exp_g += (double)n_rows * rounds * k.e[i] / k.kept;
		obs_g += count[k.order[i]];
		count[k.order[i]] = 0;
		if (exp_g >= 20 || i == k.n - 1) {
			chi2 += (obs_g - exp_g) * (obs_g - exp_g) /
				(exp_g > 0 ? exp_g : 1);
			groups++, exp_g = obs_g = 0;
		}
	}
	for (uint32_t i = 0; i < v; i++)
		assert_int_equal(count[i], 0); /* every draw was a kept token */
	fprintf(stderr,
		"stats %s vocab %u: %u kept, %u groups, chi2 %.1f "
		"(limit %.1f)\n",
		m->name, v, k.n, groups, chi2,
		groups > 1 ? chi2_limit(groups - 1) : 0.0);
	if (groups > 1)
		assert_true(chi2 < chi2_limit(groups - 1));
	walk_fini(&k);
	dev_fini(&d);
	free(l), free(got), free(count), free(seen);
}

static void test_stats(void **state)
{
	(void)state;
	check_stats(1000, K_PEAK, &modes[4]);	 /* temperature */
	check_stats(1000, K_PEAK, &modes[17]);	 /* top-k, top-p, min-p */
	check_stats(1000, K_TIED, &modes[14]);	 /* min-p over ties */
	check_stats(32000, K_FLAT, &modes[13]);	 /* top-p 0.99, large */
	check_stats(151936, K_PEAK, &modes[11]); /* top-p 0.9 */
}

/* A captured launch reads every per-row value on the device: replayed
 * after the rows changed, it samples the new ones. */
static void test_graph(void **state)
{
	const uint32_t v = 32000, n = 8;
	float *l = malloc((size_t)n * v * sizeof(float));
	struct o1_sample_row rows[8];
	struct o1_sample_penalty pens[8 * 2000];
	struct o1_sample_result got[8], ref[8];
	void *scratch =
	    aligned_alloc(64, (o1_sample_scratch_bytes(v) + 63) / 64 * 64);
	uint8_t *seen = malloc(v);
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;
	struct dev d;

	(void)state;
	assert_true(l && scratch && seen);
	for (uint32_t r = 0; r < n; r++)
		fill_row(l + (size_t)r * v, v, K_PEAK);
	dev_init(&d, n, v, n * 2000);
	assert_int_equal(cudaMemcpy(d.logits, l, (size_t)n * v * sizeof(float),
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
	assert_int_equal(
	    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
	    cudaSuccess);
	assert_int_equal(o1_sample_rows_cuda(d.out, d.logits, n, v, d.rows,
					     d.pens, d.scratch, d.scratch_bytes,
					     s),
			 0);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
	assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
	for (int round = 0; round < 3; round++) {
		uint32_t np = 0;

		for (uint32_t r = 0; r < n; r++)
			rows[r] =
			    make_row(&modes[(r * 5 + round * 3) % N_MODES], v,
				     pens, &np, seen);
		assert_int_equal(cudaMemcpy(d.rows, rows, sizeof(rows),
					    cudaMemcpyHostToDevice),
				 cudaSuccess);
		assert_int_equal(cudaMemcpy(d.pens, pens, np * sizeof(*pens),
					    cudaMemcpyHostToDevice),
				 cudaSuccess);
		assert_int_equal(cudaMemset(d.out, 0xff, sizeof(got)),
				 cudaSuccess);
		assert_int_equal(cudaGraphLaunch(x, s), cudaSuccess);
		assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
		assert_int_equal(
		    cudaMemcpy(got, d.out, sizeof(got), cudaMemcpyDeviceToHost),
		    cudaSuccess);
		assert_int_equal(
		    o1_sample_rows(ref, l, n, v, rows, pens, scratch), 0);
		for (uint32_t r = 0; r < n; r++) /* peaked rows: no ties */
			if (got[r].id != ref[r].id ||
			    got[r].n_top != ref[r].n_top)
				fail_row("graph replay", v, r, K_PEAK, &rows[r],
					 &got[r], &ref[r]);
	}
	cudaGraphExecDestroy(x), cudaGraphDestroy(g), cudaStreamDestroy(s);
	dev_fini(&d);
	free(l), free(scratch), free(seen);
}

/* ---- masks ---- */

enum mask_kind { M_HALF, M_FIVE, M_LOWEST, M_ALL, M_NONE, M_TAIL, N_MASKS };

/* Mask KIND for row L (V tokens) into M (words); *ONLY the one token it
 * must answer (M_LOWEST, M_TAIL), else -1. */
static void fill_mask(uint32_t *m, const float *l, uint32_t v, int kind,
		      int32_t *only)
{
	uint32_t words = o1_sample_mask_words(v), lo = 0;

	memset(m, 0, words * sizeof(*m));
	*only = -1;
	for (uint32_t i = 0; i < v; i++) {
		bool on = kind == M_ALL || (kind == M_HALF && next64() & 1);

		if (on)
			m[i / 32] |= 1u << (i % 32);
		if (!isnan(l[i]) && (isnan(l[lo]) || l[i] < l[lo]))
			lo = i;
	}
	if (kind == M_FIVE)
		for (int j = 0; j < 5; j++) {
			uint32_t i = (uint32_t)(next64() % v);

			m[i / 32] |= 1u << (i % 32);
		}
	if (kind == M_LOWEST) {
		m[lo / 32] |= 1u << (lo % 32);
		*only = (int32_t)lo;
	}
	if (kind == M_TAIL) {
		m[words - 1] = v % 32 ? ~0u << (v % 32 - 1) : 1u << 31;
		*only = (int32_t)v - 1;
	}
}

static bool mask_has(const uint32_t *m, int32_t id)
{
	return m[id / 32] >> (id % 32) & 1;
}

/* Whether mask M allows no token of V (M_NONE; a half of a small
 * vocabulary can be empty too: 1 row in 128 at 7 tokens). */
static bool mask_empty(const uint32_t *m, uint32_t v)
{
	for (uint32_t i = 0; i < v; i++)
		if (mask_has(m, (int32_t)i))
			return false;
	return true;
}

/* Whether mask M allows a token of L whose logit is above -inf. */
static bool live_allowed(const uint32_t *m, const float *l, uint32_t v)
{
	for (uint32_t i = 0; i < v; i++)
		if (mask_has(m, (int32_t)i) && l[i] > -INFINITY)
			return true;
	return false;
}

struct mbatch {
	uint32_t v, n, words, n_masks;
	float *l, *lm; /* raw rows; the masked copies (raw where unmasked) */
	struct o1_sample_row *rows;
	struct o1_sample_penalty *pens;
	uint32_t np, *masks;
	int kinds[MAX_ROWS], mk[MAX_ROWS]; /* mask kind, -1: unmasked */
	int32_t only[MAX_ROWS];
};

/* Rows of kinds without NaN (whose ids the reference leaves open), two
 * in three masked, each mask kind in turn. */
static void mbatch_fill(struct mbatch *b, uint32_t shift)
{
	static const int kinds[] = {K_PEAK, K_FLAT, K_TIED, K_NEGINF,
				    K_ALL_NEGINF};
	uint8_t *seen = malloc(b->v);

	assert_non_null(seen);
	b->np = b->n_masks = 0;
	for (uint32_t r = 0; r < b->n; r++) {
		float *l = b->l + (size_t)r * b->v,
		      *lm = b->lm + (size_t)r * b->v;
		uint32_t *m = b->masks + (size_t)b->n_masks * b->words;

		b->kinds[r] = kinds[(r / 3 + shift) % 5];
		fill_row(l, b->v, b->kinds[r]);
		b->rows[r] = make_row(&modes[(r * 7 + shift) % N_MODES], b->v,
				      b->pens, &b->np, seen);
		b->mk[r] = (r + shift) % 3 == 2
			       ? -1
			       : (int)((r / 3 * 2 + (r + shift) % 3 + shift) %
				       N_MASKS);
		b->only[r] = -1;
		memcpy(lm, l, b->v * sizeof(float));
		if (b->mk[r] < 0)
			continue;
		fill_mask(m, l, b->v, b->mk[r], &b->only[r]);
		b->rows[r].mask = ++b->n_masks;
		for (uint32_t i = 0; i < b->v; i++)
			lm[i] = mask_has(m, (int32_t)i) ? l[i] : -INFINITY;
	}
	free(seen);
}

/* Row R of a masked batch: the device's G against the masked reference C
 * and, through check_id and check_describe, against the reference's walk
 * over the masked copy. */
static void check_masked_row(struct mbatch *b, struct walk *k, struct tally *t,
			     uint32_t r, const struct o1_sample_result *g,
			     const struct o1_sample_result *c, void *scratch)
{
	const uint32_t *m =
	    b->mk[r] < 0 ? NULL
			 : b->masks + (size_t)(b->rows[r].mask - 1) * b->words;
	const float *lm = b->lm + (size_t)r * b->v;
	const struct o1_sample_row *p = &b->rows[r];
	struct o1_sample_row plain = *p;
	struct o1_sample_result h;

	if (m && mask_empty(m, b->v)) {
		if (g->id != O1_SAMPLE_NO_TOKEN ||
		    c->id != O1_SAMPLE_NO_TOKEN || g->logprob != -INFINITY ||
		    g->n_top || g->entropy != 0)
			fail_row("nothing allowed", b->v, r, b->kinds[r], p, g,
				 c);
		return;
	}
	if (g->id < 0 || (uint32_t)g->id >= b->v || (m && !mask_has(m, g->id)))
		fail_row("refused token", b->v, r, b->kinds[r], p, g, c);
	if (b->only[r] >= 0 && (g->id != b->only[r] || c->id != b->only[r]))
		fail_row("the only allowed token", b->v, r, b->kinds[r], p, g,
			 c);
	check_describe(b->v, r, b->kinds[r], false, p, g, c);
	/* the masked reference is the reference over the masked copy, but
	 * where it replaced a refused answer (degenerate rows) */
	plain.mask = 0;
	assert_int_equal(
	    o1_sample_rows(&h, lm, 1, b->v, &plain, b->pens, scratch), 0);
	if (m && (!live_allowed(m, b->l + (size_t)r * b->v, b->v) ||
		  h.id != c->id)) {
		if (!mask_has(m, c->id))
			fail_row("reference refused token", b->v, r,
				 b->kinds[r], p, g, c);
		if (g->id != c->id && (p->temperature == 0 || p->top_k == 1))
			fail_row("degenerate greedy", b->v, r, b->kinds[r], p,
				 g, c);
		return;
	}
	if (memcmp(&h, c, sizeof(h)))
		fail_row("masked reference", b->v, r, b->kinds[r], p, &h, c);
	check_id(k, t, lm, b->v, r, b->kinds[r], p, b->pens, g, c);
}

static void mbatch_alloc(struct mbatch *b, uint32_t v, uint32_t n)
{
	b->v = v, b->n = n, b->words = o1_sample_mask_words(v);
	b->l = malloc((size_t)n * v * sizeof(float));
	b->lm = malloc((size_t)n * v * sizeof(float));
	b->rows = calloc(n, sizeof(*b->rows));
	b->pens = malloc((size_t)n * 2000 * sizeof(*b->pens));
	b->masks = malloc((size_t)n * b->words * sizeof(uint32_t));
	assert_true(b->l && b->lm && b->rows && b->pens && b->masks);
}

static void mbatch_free(struct mbatch *b)
{
	free(b->l), free(b->lm), free(b->rows), free(b->pens), free(b->masks);
}

static void check_masked_batch(uint32_t v, uint32_t n, uint32_t shift,
			       struct tally *t)
{
	struct o1_sample_result *got = malloc(n * sizeof(*got));
	struct o1_sample_result *ref = malloc(n * sizeof(*ref));
	void *scratch =
	    aligned_alloc(64, (o1_sample_scratch_bytes(v) + 63) / 64 * 64);
	uint32_t *dm;
	struct mbatch b;
	struct dev d;
	struct walk k;

	assert_true(got && ref && scratch);
	mbatch_alloc(&b, v, n);
	mbatch_fill(&b, shift);
	dev_init(&d, n, v, b.np);
	assert_int_equal(
	    cudaMalloc((void **)&dm, (size_t)(b.n_masks + 1) * b.words * 4),
	    cudaSuccess);
	assert_int_equal(cudaMemcpy(dm, b.masks,
				    (size_t)b.n_masks * b.words * 4,
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	assert_int_equal(cudaMemcpy(d.logits, b.l, (size_t)n * v * 4,
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	assert_int_equal(cudaMemcpy(d.rows, b.rows, n * sizeof(*b.rows),
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	if (b.np)
		assert_int_equal(cudaMemcpy(d.pens, b.pens,
					    b.np * sizeof(*b.pens),
					    cudaMemcpyHostToDevice),
				 cudaSuccess);
	assert_int_equal(cudaMemset(d.out, 0xff, n * sizeof(*got)),
			 cudaSuccess);
	assert_int_equal(
	    o1_sample_rows_masked_cuda(d.out, d.logits, n, v, d.rows, d.pens,
				       dm, d.scratch, d.scratch_bytes, 0),
	    0);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	assert_int_equal(
	    cudaMemcpy(got, d.out, n * sizeof(*got), cudaMemcpyDeviceToHost),
	    cudaSuccess);
	assert_int_equal(o1_sample_rows_masked(ref, b.l, n, v, b.rows, b.pens,
					       b.masks, b.n_masks, scratch),
			 0);
	walk_init(&k, v);
	for (uint32_t r = 0; r < n; r++)
		check_masked_row(&b, &k, t, r, &got[r], &ref[r], scratch);
	walk_fini(&k);
	cudaFree(dm);
	dev_fini(&d);
	mbatch_free(&b);
	free(got), free(ref), free(scratch);
}

static void test_masked(void **state)
{
	static const struct {
		uint32_t v, n;
	} quick_shapes[] = {{7, 18}, {1000, 36}, {32000, 18}, {151936, 3}},
	  shapes[] = {{7, 64},	   {1000, 256},	 {32000, 128}, {128256, 64},
		      {151936, 1}, {151936, 96}, {256000, 12}};
	struct tally t = {0};

	(void)state;
	for (size_t s = 0; !quick && s < sizeof(shapes) / sizeof(shapes[0]);
	     s++)
		check_masked_batch(shapes[s].v, shapes[s].n,
				   (uint32_t)(next64() % 64), &t);
	for (size_t s = 0;
	     quick && s < sizeof(quick_shapes) / sizeof(quick_shapes[0]); s++)
		check_masked_batch(quick_shapes[s].v, quick_shapes[s].n,
				   (uint32_t)(next64() % 64), &t);
	fprintf(stderr,
		"test_sample_cuda: masked: %llu draws compared, %llu near a "
		"boundary, %llu of those differ\n",
		(unsigned long long)t.draws, (unsigned long long)t.near,
		(unsigned long long)t.differ);
	assert_true(t.differ * 100 <= t.draws);
}

/* A captured masked launch reads the masks and the rows' flags on the
 * device: replayed after both changed, it follows them (greedy rows with
 * a mask per round; some rounds leave a row unmasked). */
static void test_masked_graph(void **state)
{
	const uint32_t v = 32000, n = 6, words = o1_sample_mask_words(v);
	float *l = malloc((size_t)n * v * sizeof(float));
	uint32_t *masks = calloc((size_t)n * words, sizeof(uint32_t));
	struct o1_sample_row rows[6];
	struct o1_sample_result got[6], ref[6];
	void *scratch =
	    aligned_alloc(64, (o1_sample_scratch_bytes(v) + 63) / 64 * 64);
	uint32_t *dm;
	cudaStream_t s;
	cudaGraph_t g;
	cudaGraphExec_t x;
	struct dev d;

	(void)state;
	assert_true(l && masks && scratch);
	for (uint32_t r = 0; r < n; r++)
		fill_row(l + (size_t)r * v, v, K_PEAK);
	dev_init(&d, n, v, 1);
	assert_int_equal(cudaMalloc((void **)&dm, (size_t)n * words * 4),
			 cudaSuccess);
	assert_int_equal(cudaMemcpy(d.logits, l, (size_t)n * v * sizeof(float),
				    cudaMemcpyHostToDevice),
			 cudaSuccess);
	assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
	assert_int_equal(
	    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
	    cudaSuccess);
	assert_int_equal(
	    o1_sample_rows_masked_cuda(d.out, d.logits, n, v, d.rows, d.pens,
				       dm, d.scratch, d.scratch_bytes, s),
	    0);
	assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
	assert_int_equal(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
	for (int round = 0; round < 3; round++) {
		uint32_t nm = 0;

		for (uint32_t r = 0; r < n; r++) {
			int32_t only;

			rows[r] =
			    (struct o1_sample_row){.top_p = 1,
						   .repetition_penalty = 1,
						   .n_logprobs = 3};
			if ((r + (uint32_t)round) % 3 == 0)
				continue;
			fill_mask(
			    masks + (size_t)nm * words, l + (size_t)r * v, v,
			    (r + (uint32_t)round) % 2 ? M_HALF : M_FIVE, &only);
			rows[r].mask = ++nm;
		}
		assert_int_equal(cudaMemcpy(d.rows, rows, sizeof(rows),
					    cudaMemcpyHostToDevice),
				 cudaSuccess);
		assert_int_equal(cudaMemcpy(dm, masks, (size_t)nm * words * 4,
					    cudaMemcpyHostToDevice),
				 cudaSuccess);
		assert_int_equal(cudaGraphLaunch(x, s), cudaSuccess);
		assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
		assert_int_equal(
		    cudaMemcpy(got, d.out, sizeof(got), cudaMemcpyDeviceToHost),
		    cudaSuccess);
		assert_int_equal(o1_sample_rows_masked(ref, l, n, v, rows, NULL,
						       masks, nm, scratch),
				 0);
		for (uint32_t r = 0; r < n; r++)
			if (got[r].id != ref[r].id ||
			    got[r].n_top != ref[r].n_top ||
			    got[r].top_id[2] != ref[r].top_id[2])
				fail_row("masked graph replay", v, r, K_PEAK,
					 &rows[r], &got[r], &ref[r]);
	}
	cudaGraphExecDestroy(x), cudaGraphDestroy(g), cudaStreamDestroy(s);
	cudaFree(dm);
	dev_fini(&d);
	free(l), free(masks), free(scratch);
}

/* Bad operands are refused before anything is enqueued. */
static void test_errors(void **state)
{
	struct dev d;
	size_t big = o1_sample_rows_cuda_scratch_bytes(2, 256000);

	(void)state;
	dev_init(&d, 2, 1000, 0);
	assert_int_equal(o1_sample_rows_cuda_scratch_bytes(256, 151936), 0);
	assert_true(big > 0);
	assert_int_equal(o1_sample_rows_cuda(NULL, d.logits, 2, 1000, d.rows,
					     d.pens, NULL, 0, 0),
			 -EINVAL);
	assert_int_equal(o1_sample_rows_cuda(d.out, d.logits, 2, 0, d.rows,
					     d.pens, NULL, 0, 0),
			 -EINVAL);
	assert_int_equal(o1_sample_rows_cuda(d.out, d.logits, 2, 1u << 20,
					     d.rows, d.pens, NULL, 0, 0),
			 -EINVAL);
	assert_int_equal(o1_sample_rows_cuda(d.out, d.logits, 2, 256000, d.rows,
					     d.pens, d.logits, big - 1, 0),
			 -EINVAL);
	assert_int_equal(o1_sample_rows_cuda(d.out, d.logits, 0, 1000, d.rows,
					     d.pens, NULL, 0, 0),
			 0);
	assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
	dev_fini(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_errors), cmocka_unit_test(test_rows),
	    cmocka_unit_test(test_graph),  cmocka_unit_test(test_stats),
	    cmocka_unit_test(test_masked), cmocka_unit_test(test_masked_graph),
	};
	const char *seed = getenv("O1_TEST_SEED");
	const char *filter = getenv("O1_TEST_FILTER");

	if (o1_cuda_probe() != 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return 77;
	}
	rng = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL);
	quick = getenv("O1_TEST_QUICK") && atoi(getenv("O1_TEST_QUICK"));
	if (filter && *filter)
		cmocka_set_test_filter(filter);
	fprintf(stderr, "test_sample_cuda: seed %llu (O1_TEST_SEED)\n",
		(unsigned long long)rng);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

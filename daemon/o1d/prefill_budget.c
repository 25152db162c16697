/* The time-based prefill budget (see prefill_budget.h). Invariants: an
 * estimate is 0 (never measured) or positive; every bucket index stays in
 * range whatever the row count or position; the budget is within
 * [min(floor, cap), cap]. */
#include "prefill_budget.h"

#include <stdbool.h>
#include <string.h>

/* EWMA weights of a new sample, bad news (a budget too large: a decode
 * step faster, a prompt token dearer than thought) learnt faster than
 * good news, and good news taken at most GOOD_MAX x the estimate (a
 * decode step twice as slow, a token half as dear), so an outlier (a
 * step that captures a CUDA graph, a preempted thread) moves the budget
 * by a few percent at most, and the budget errs on the side of the
 * target. Decode steps are many and steady (their time drifts as contexts
 * grow); prompt costs move with the prompt's position and must catch up
 * within a burst of a few hundred steps. */
#define DECODE_DOWN 0.5
#define DECODE_UP 0.0625
#define TOKEN_UP 0.5
#define TOKEN_DOWN 0.25
#define GOOD_MAX 2.0
/* a prompt token costs at least this (ns): a mixed step measured faster
 * than its decode rows alone (noise) must not make the budget unbounded */
#define TOKEN_MIN_NS 1.0

void o1_prefill_budget_init(struct o1_prefill_budget *b, double ratio,
			    uint32_t floor)
{
	memset(b, 0, sizeof(*b));
	b->ratio = ratio > 0 ? ratio : 0;
	b->floor = floor;
}

static uint32_t log2u(uint32_t x)
{
	uint32_t k = 0;

	while (x >>= 1)
		k++;
	return k;
}

/* Rows 1..16 one bucket each, then four buckets an octave (decode time
 * grows slowly with rows; a bucket spans at most a quarter octave). */
static uint32_t row_bucket(uint32_t rows)
{
	uint32_t k, i;

	if (rows <= 16)
		return rows ? rows - 1 : 0;
	k = log2u(rows);
	i = 16 + (k - 4) * 4 + ((rows >> (k - 2)) & 3);
	return i < O1_PREFILL_ROW_BUCKETS ? i : O1_PREFILL_ROW_BUCKETS - 1;
}

/* Positions below 256 one bucket, then one an octave. */
static uint32_t ctx_bucket(uint32_t ctx)
{
	uint32_t i = ctx < 256 ? 0 : log2u(ctx / 256) + 1;

	return i < O1_PREFILL_CTX_BUCKETS ? i : O1_PREFILL_CTX_BUCKETS - 1;
}

/* Moves *V toward X by UP or DOWN of the gap; the first sample sets it. */
static void ewma(double *v, double x, double up, double down)
{
	if (*v > 0)
		*v += (x > *v ? up : down) * (x - *v);
	else
		*v = x;
}

static void learn_decode(double *v, double x)
{
	if (*v > 0 && x > GOOD_MAX * *v)
		x = GOOD_MAX * *v;
	ewma(v, x, DECODE_UP, DECODE_DOWN);
}

static void learn_token(double *v, double x)
{
	if (x < TOKEN_MIN_NS)
		x = TOKEN_MIN_NS;
	if (*v > 0 && x < *v / GOOD_MAX)
		x = *v / GOOD_MAX;
	ewma(v, x, TOKEN_UP, TOKEN_DOWN);
}

/* The estimate of bucket I, else of the nearest measured one on the
 * LOW_FIRST side (lower buckets, else higher ones), else of the nearest on
 * the other side; 0 when none is measured. */
static double nearest(const double *v, uint32_t n, uint32_t i, bool low_first)
{
	for (uint32_t side = 0; side < 2; side++) {
		bool down = (side == 0) == low_first;

		for (uint32_t j = i; j < n; j = down ? j - 1 : j + 1)
			if (v[j] > 0)
				return v[j];
	}
	return 0;
}

/* A decode step's time: toward fewer rows first (a shorter estimate gives
 * a smaller budget, the safe side). */
static double decode_ns(const struct o1_prefill_budget *b, uint32_t rows)
{
	return nearest(b->decode_ns, O1_PREFILL_ROW_BUCKETS, row_bucket(rows),
		       true);
}

/* A prompt token's cost: toward later positions first (they cost more:
 * the safe side). */
static double token_ns(const struct o1_prefill_budget *b, uint32_t ctx)
{
	return nearest(b->token_ns, O1_PREFILL_CTX_BUCKETS, ctx_bucket(ctx),
		       false);
}

void o1_prefill_budget_observe(struct o1_prefill_budget *b,
			       uint32_t decode_rows, uint32_t prefill_tokens,
			       uint32_t ctx, uint64_t ns)
{
	double base, t;

	if (!ns || (!decode_rows && !prefill_tokens))
		return;
	if (!prefill_tokens) {
		uint32_t i = row_bucket(decode_rows);

		/* a stale estimate takes a fresh measurement at once: the
		 * contexts grew meanwhile (o1_prefill_budget_stale) */
		if (o1_prefill_budget_stale(b, decode_rows))
			b->decode_ns[i] = (double)ns;
		else
			learn_decode(&b->decode_ns[i], (double)ns);
		b->decode_at[i] = ++b->steps;
		return;
	}
	b->steps++;
	if (!decode_rows && prefill_tokens < O1_PREFILL_LONE_MIN)
		return;
	/* a lone prompt step pays the weights' read a one-row step pays */
	base = decode_ns(b, decode_rows ? decode_rows : 1);
	if (decode_rows && !base)
		return;
	t = ((double)ns - base) / prefill_tokens;
	learn_token(&b->token_ns[ctx_bucket(ctx)], t);
}

bool o1_prefill_budget_stale(const struct o1_prefill_budget *b,
			     uint32_t decode_rows)
{
	uint32_t i = row_bucket(decode_rows);

	return b->ratio && b->decode_ns[i] > 0 &&
	       b->steps - b->decode_at[i] > O1_PREFILL_STALE_STEPS;
}

uint32_t o1_prefill_budget_tokens(const struct o1_prefill_budget *b,
				  uint32_t decode_rows, uint32_t ctx,
				  uint32_t cap)
{
	return o1_prefill_budget_tokens_at(b, b->ratio, decode_rows, ctx, cap);
}

uint32_t o1_prefill_budget_tokens_at(const struct o1_prefill_budget *b,
				     double ratio, uint32_t decode_rows,
				     uint32_t ctx, uint32_t cap)
{
	double dec, tok, n;
	uint32_t lo = b->floor < cap ? b->floor : cap;

	if (!b->ratio || !(ratio > 0) || !decode_rows)
		return cap;
	dec = decode_ns(b, decode_rows);
	tok = token_ns(b, ctx);
	if (!dec || !tok)
		return cap;
	n = ratio * dec / tok;
	if (n >= cap)
		return cap;
	return n > lo ? (uint32_t)n : lo;
}

/* The time-based prefill budget (see prefill_budget.h). Invariants: an
 * estimate is 0 (never measured) or positive; every bucket index stays in
 * range whatever the row count or position; the budget is within
 * [min(floor, cap), cap]. */
#include "prefill_budget.h"

#include <stdbool.h>
#include <string.h>

/* EWMA weights of a new decode sample, bad news (a budget too large: a
 * decode step faster than thought) learnt faster than good news, and good
 * news taken at most GOOD_MAX x the estimate (a decode step twice as
 * slow), so an outlier (a step that captures a CUDA graph, a preempted
 * thread) moves the budget by a few percent at most. Decode steps are
 * many and steady (their time drifts as contexts grow).
 *
 * A prompt token's cost is an EWMA weighted by tokens instead, up and
 * down alike: a step's sample (its time beyond its decode rows, per
 * prompt token) weighs its tokens over TOKEN_WINDOW. A sample's noise is
 * the step's jitter over its tokens: 16 tokens beside 64 rows of a 1.4 ms
 * step with 15% jitter put +-13 us on a 3 us token. An EWMA of bad news
 * faster than good (0.5 and 0.25 a step, whatever the tokens) settled at
 * a high quantile of such samples, several times the cost, which held the
 * budget at its floor, where the samples are noisiest (with the two rules
 * of decode_ns and o1_prefill_budget_stale, what made 256 cold streams
 * after a run of long prompts run at 11,524 tok/s on the H200 against
 * 67,958 with the budget off: docs/PERFORMANCE.md). Weighed by tokens the
 * floor's samples average out, and a large step's count at once (400 of
 * 1,024: 39%). A sample of at least CLIP_MIN tokens that looks cheaper
 * than 1 / GOOD_MAX of the estimate counts as that (a large step that
 * looks free is an outlier; a small one is noise, which the weights
 * average). */
#define DECODE_DOWN 0.5
#define DECODE_UP 0.0625
#define GOOD_MAX 2.0
#define TOKEN_WINDOW 1024.0
#define CLIP_MIN 64
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

/* *V learns X, a sample of TOKENS prompt tokens. */
static void learn_token(double *v, double x, uint32_t tokens)
{
	double w = tokens < TOKEN_WINDOW ? tokens / TOKEN_WINDOW : 1.0;

	if (x < TOKEN_MIN_NS)
		x = TOKEN_MIN_NS;
	if (*v > 0 && tokens >= CLIP_MIN && x < *v / GOOD_MAX)
		x = *v / GOOD_MAX;
	ewma(v, x, w, w);
}

/* The first measured bucket of V (N buckets) from FROM on, downwards (DIR
 * -1) or upwards (+1); -1 when none. */
static int measured(const double *v, int n, int from, int dir)
{
	for (int j = from; j >= 0 && j < n; j += dir)
		if (v[j] > 0)
			return j;
	return -1;
}

/* The time at ROWS on the line through row buckets A and C (their last
 * samples' row counts and estimates; the slope at least 0: more rows are
 * never faster). */
static double on_line(const struct o1_prefill_budget *b, int a, int c,
		      uint32_t rows)
{
	double ra = b->decode_rows[a], rc = b->decode_rows[c];
	double slope = rc != ra ? (b->decode_ns[c] - b->decode_ns[a]) /
				      (rc - ra)
				: 0;

	if (slope < 0)
		slope = 0;
	return b->decode_ns[a] + slope * ((double)rows - ra);
}

/* A decode step's time at ROWS: its bucket's estimate, else the line
 * through the measured buckets around it (or the two below it: a batch
 * filling up is measured at fewer rows only; from a few rows, up to
 * O1_PREFILL_REACH times the highest), else the one measured, else 0
 * (none).
 * Decode time is close to linear in rows (the weights' read, plus a
 * row's share). Another bucket's estimate as it is (before: the nearest
 * below) was off by the growth between them, which a mixed step's sample
 * then charged to its prompt tokens: on sched_sim's 4-layer cut, 1.53 ms
 * for 153 rows that took 1.95, 25 us a prompt token against its 3. */
static double decode_ns(const struct o1_prefill_budget *b, uint32_t rows)
{
	int i = (int)row_bucket(rows), lo, hi;

	if (b->decode_ns[i] > 0)
		return b->decode_ns[i];
	lo = measured(b->decode_ns, O1_PREFILL_ROW_BUCKETS, i - 1, -1);
	hi = measured(b->decode_ns, O1_PREFILL_ROW_BUCKETS, i + 1, +1);
	if (lo >= 0 && hi >= 0)
		return on_line(b, lo, hi, rows);
	if (lo >= 0) {
		int lo2;

		if (b->decode_rows[lo] <= O1_PREFILL_MEASURE_ROWS &&
		    rows > O1_PREFILL_REACH * (uint64_t)b->decode_rows[lo])
			return 0;
		lo2 = measured(b->decode_ns, O1_PREFILL_ROW_BUCKETS, lo - 1, -1);
		return lo2 >= 0 ? on_line(b, lo2, lo, rows) : b->decode_ns[lo];
	}
	return hi >= 0 ? b->decode_ns[hi] : 0;
}

/* A prompt token's cost: toward later positions first (they cost more:
 * the safe side). */
static double token_ns(const struct o1_prefill_budget *b, uint32_t ctx)
{
	int i = (int)ctx_bucket(ctx);
	int j = measured(b->token_ns, O1_PREFILL_CTX_BUCKETS, i, +1);

	if (j < 0)
		j = measured(b->token_ns, O1_PREFILL_CTX_BUCKETS, i - 1, -1);
	return j < 0 ? 0 : b->token_ns[j];
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
		b->decode_rows[i] = decode_rows;
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
	learn_token(&b->token_ns[ctx_bucket(ctx)], t, prefill_tokens);
}

bool o1_prefill_budget_stale(const struct o1_prefill_budget *b,
			     uint32_t decode_rows)
{
	uint32_t i = row_bucket(decode_rows);

	if (!b->ratio || !decode_rows)
		return false;
	if (!(b->decode_ns[i] > 0))
		return decode_rows > O1_PREFILL_MEASURE_ROWS;
	return b->steps - b->decode_at[i] > O1_PREFILL_STALE_STEPS;
}

uint32_t o1_prefill_budget_tokens(const struct o1_prefill_budget *b,
				  uint32_t decode_rows, uint32_t ctx,
				  uint32_t cap)
{
	return o1_prefill_budget_tokens_at(b, b->ratio, decode_rows,
					   decode_rows, ctx, cap);
}

uint32_t o1_prefill_budget_tokens_at(const struct o1_prefill_budget *b,
				     double ratio, uint32_t decode_rows,
				     uint32_t now_rows, uint32_t ctx,
				     uint32_t cap)
{
	double dec, tok, n, spare = 0;
	uint32_t lo = b->floor < cap ? b->floor : cap;

	if (!b->ratio || !(ratio > 0) || !decode_rows)
		return cap;
	dec = decode_ns(b, decode_rows);
	tok = token_ns(b, ctx);
	if (!dec || !tok)
		return cap;
	if (now_rows && now_rows < decode_rows) {
		double now = decode_ns(b, now_rows);

		if (now > 0 && now < dec)
			spare = dec - now;
	}
	n = (ratio * dec + spare) / tok;
	if (n >= cap)
		return cap;
	return n > lo ? (uint32_t)n : lo;
}

double o1_prefill_budget_predict_ns(const struct o1_prefill_budget *b,
				    uint32_t decode_rows,
				    uint32_t prefill_tokens, uint32_t ctx)
{
	double dec = decode_ns(b, decode_rows ? decode_rows : 1);
	double tok = prefill_tokens ? token_ns(b, ctx) : 0;

	if (!dec || (prefill_tokens && !tok))
		return 0;
	return dec + tok * prefill_tokens;
}

/* The prefill budget of a step, set by time (scheduler.prefill_time_ratio):
 * how many prompt tokens a step that carries decode rows may add so that
 * it takes at most (1 + ratio) x the time of the same step without them.
 *
 * A fixed token count cannot do that: a decode step of 64 rows and one of
 * 256 differ in time, and a prompt token's cost depends on the model, the
 * device and the prompt's position (attention over what precedes it). So
 * the estimator learns both from the steps the scheduler measures:
 * - the time of a pure decode step, per bucket of decode rows (EWMA);
 * - the marginal time of one prompt token, per range of the context where
 *   the step's chunks start (EWMA of (step time - decode time of its
 *   rows) / prompt tokens, weighted by the tokens, from steps that mixed
 *   both, and from large steps of prompt tokens alone).
 * The decode EWMA takes bad news (a shorter step) faster than good news,
 * and good news bounded: a one-off slow step cannot inflate the budget.
 * A row count whose bucket has no estimate gets the line through its
 * measured neighbours; above O1_PREFILL_MEASURE_ROWS rows it is measured
 * (o1_prefill_budget_stale).
 * The budget is ratio x decode time / token cost, clamped to [floor, cap]
 * (the floor keeps prompts moving when even a few tokens overshoot; the
 * cap is the token settings). While either estimate is missing it is the
 * cap, which measures one. The step time is a fixed point of this rule
 * (a too-large budget raises the measured cost per token, which lowers
 * the next budget), whatever fixed cost a mixed step has beyond its
 * tokens, as long as a budget above the floor fits the target at all.
 *
 * Pure arithmetic on the times it is given (no clock), so a test feeds it
 * synthetic step times; nothing is allocated. */
#ifndef O1_PREFILL_BUDGET_H
#define O1_PREFILL_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define O1_PREFILL_ROW_BUCKETS 52
#define O1_PREFILL_CTX_BUCKETS 12

struct o1_prefill_budget {
	double ratio;	/* 0: off, the budget is always the cap */
	uint32_t floor; /* tokens a step gets at least (when the cap allows) */
	/* ns; 0 = not measured yet */
	double decode_ns[O1_PREFILL_ROW_BUCKETS];
	double token_ns[O1_PREFILL_CTX_BUCKETS];
	/* steps observed, and the count when each decode bucket was last
	 * measured (o1_prefill_budget_stale) */
	uint64_t steps;
	uint64_t decode_at[O1_PREFILL_ROW_BUCKETS];
	/* the row count of each bucket's last decode sample (interpolation
	 * between buckets) */
	uint32_t decode_rows[O1_PREFILL_ROW_BUCKETS];
};

/* Steps after which a decode estimate is stale: the streams' contexts
 * grow (decode attention with them) while every step carries prompt
 * tokens, and the growth was then charged to the prompt tokens (on
 * sched_sim's whole llama3-8b, 8 prompts of 8k beside 64 streams ran at
 * the floor's page a step for 9 s). */
#define O1_PREFILL_STALE_STEPS 32

/* A prompt step alone (no decode rows) teaches the token cost only from
 * this many tokens on: a short one is mostly the weights' read, which a
 * mixed step pays for its decode rows already. */
#define O1_PREFILL_LONE_MIN 256

void o1_prefill_budget_init(struct o1_prefill_budget *b, double ratio,
			    uint32_t floor);
/* A step of DECODE_ROWS decode rows and PREFILL_TOKENS prompt tokens, its
 * largest chunk starting at context position CTX, took NS. */
void o1_prefill_budget_observe(struct o1_prefill_budget *b,
			       uint32_t decode_rows, uint32_t prefill_tokens,
			       uint32_t ctx, uint64_t ns);
/* Row counts up to this one get an unmeasured bucket's estimate from its
 * neighbours only: their buckets are a row each, close to each other, and
 * a batch of a few rows changes bucket every few steps (a step without
 * prompt tokens for each cost 256 cold streams 3% of their throughput in
 * sched_sim); above it a bucket spans a quarter octave, and a batch
 * filling up to 256 rows crosses 16 of them. */
#define O1_PREFILL_MEASURE_ROWS 16

/* While every measured row count is a few (at most
 * O1_PREFILL_MEASURE_ROWS), a count above this many times the highest has
 * no decode estimate (so the budget is the cap until a larger batch is
 * measured), not the line through them: at a few rows that line is flat
 * (the weights' read), and it priced a step of 256 rows as one of 4. A
 * fresh o1d's burst of 256 cold 510-token prompts then got a budget of
 * 0.6 x a 4-row step's time, which the small mixed steps' fixed cost
 * (products over a few rows on cuBLAS) charged to their tokens already:
 * the floor's 16 tokens a step, 4 streams decoding, 601 tok/s and TTFT
 * p50 52 s on the H200 (the same burst after other traffic: 3,650). */
#define O1_PREFILL_REACH 2

/* Whether the time of a decode step of DECODE_ROWS rows was measured,
 * but not within the last O1_PREFILL_STALE_STEPS steps, or never (above
 * O1_PREFILL_MEASURE_ROWS rows): the scheduler then runs one step without
 * prompt tokens, which measures it. While every step carries prompt
 * tokens a batch's buckets were never measured, and their estimates (the
 * nearest measured bucket's, or a line through two far away) were
 * charged to the prompt tokens: with the token cost's sampling noise,
 * what held 256 cold streams' prompts at the floor after a run of long
 * prompts (docs/PERFORMANCE.md). Never with the budget off. */
bool o1_prefill_budget_stale(const struct o1_prefill_budget *b,
			     uint32_t decode_rows);
/* Prompt tokens for a step of DECODE_ROWS (> 0) decode rows whose first
 * chunk (the oldest prompt's) starts at CTX, within [min(floor, cap),
 * cap]. */
uint32_t o1_prefill_budget_tokens(const struct o1_prefill_budget *b,
				  uint32_t decode_rows, uint32_t ctx,
				  uint32_t cap);
/* The same for another RATIO (> 0) on the same estimates (the budget of
 * prompts computed whole in the step: scheduler.prefill_whole_ratio),
 * for a step that has NOW_ROWS decode rows of the DECODE_ROWS its batch
 * grows to (requests waiting to join): its prompt tokens also get the
 * time those missing rows would take (the step then takes what one of
 * DECODE_ROWS rows would with RATIO's tokens, which the running streams
 * get anyway once the batch is full). Without it a fresh o1d's burst of
 * 256 cold 510-token prompts went in at 0.6 x a step of 17 rows' time
 * less the small mixed steps' fixed cost, 70 tokens a step
 * (tools/bench/sched_sim with o1d's warm-up). */
uint32_t o1_prefill_budget_tokens_at(const struct o1_prefill_budget *b,
				     double ratio, uint32_t decode_rows,
				     uint32_t now_rows, uint32_t ctx,
				     uint32_t cap);
/* The time (ns) the estimates give a step of DECODE_ROWS decode rows and
 * PREFILL_TOKENS prompt tokens whose largest chunk starts at CTX: what
 * the budget assumed, logged beside what the step took; 0 while an
 * estimate it needs is missing. */
double o1_prefill_budget_predict_ns(const struct o1_prefill_budget *b,
				    uint32_t decode_rows,
				    uint32_t prefill_tokens, uint32_t ctx);

#endif

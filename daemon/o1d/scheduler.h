/* The scheduler: iteration-level continuous batching over the paged KV
 * pool, run by the engine thread only.
 *
 * Each step has a token budget (max_batch_tokens), a sequence budget
 * (max_running) and a prefill budget. Prefill is chunked so that a prompt
 * never stalls the streams already generating:
 * - first every running sequence that decodes (one token left to
 *   compute) gets its decode row, oldest admitted first;
 * - then prefill chunks, within the prefill budget: when the step carries
 *   decode rows (or a parked stream comes back to decode in it), the
 *   larger of prefill_chunk_tokens and prefill_per_decode per decode row
 *   (a decode row costs at least a prefill token's products, so the
 *   step's slowdown stays bounded as the rows grow, and a running set
 *   that turns over stays full), and with prefill_time_ratio only as
 *   many of those as keep the step within (1 + ratio) x the measured
 *   time of a decode step of as many rows (prefill_budget.h: learnt from
 *   the steps' times, at least a page's worth) as will run once the
 *   requests waiting have joined (at most max_running: the streams' step
 *   grows to that anyway; a step of decode rows alone now and then
 *   measures their time again as the contexts grow), and a prompt
 *   admitted that fits prefill_whole_ratio's budget goes in whole beside
 *   the chunks (one slower step instead of a run of them), and while
 *   the requests waiting to start are at least a quarter of
 *   max_running (a burst) the chunks get prefill_burst_ratio's budget
 *   (by default prefill_whole_ratio's too); else the whole step
 *   (nobody waits on a next token: a lone prompt goes in the fewest,
 *   largest steps). Running sequences
 *   still prefilling come first, oldest first (a long prompt goes on
 *   where its last chunk ended, its KV pages taken chunk by chunk); then
 *   waiting requests are admitted while the budgets last and the pool
 *   (free pages plus pages only the prefix cache or parked sequences
 *   hold) can take their whole prompt, in the order of the shares below
 *   (their cached prefix is skipped, so it costs no budget). Once the
 *   prefill budget is spent, or a prompt cannot start, only sequences
 *   that decode (parked ones back with their pages) are still admitted.
 * A sequence's logits do not depend on how its prompt was chunked (the
 * backends' promise), so neither do its tokens.
 *
 * When a running sequence needs a page and none is free, the prefix cache
 * gives up its least recently used unreferenced page; failing that a
 * parked sequence (below) gives up its pages, then the newest running
 * sequence of the client holding the most pages is preempted (its pages
 * released, recomputed when it resumes: the logits do not depend on the
 * chunking, so the output is the same) and counted.
 *
 * Careless and hostile readers (a client can only hurt itself):
 * - Parking: a running sequence whose out ring lacks room for one token's
 *   events leaves the running set (it no longer takes a running slot) and
 *   keeps its KV pages only while nobody else needs them: admission and
 *   growth take them first (preemption by recompute). Once its reader
 *   made room it goes back in line with whatever pages it kept.
 * - Stall deadline: a parked sequence whose reader consumed nothing for
 *   stall_timeout_ms gets its FINAL (ERROR, -O1_E_STALLED); the FINAL has
 *   its reserved room, so it is always produced.
 * - Shares: a client runs at most max_running_per_client sequences (0: no
 *   cap). The fair share of running slots is ceil(max_running / clients
 *   holding work), of KV pages ceil(pages / clients holding work). The
 *   next request admitted is one of a client below its running share if
 *   any, then a resumed one, then the oldest of the least-served client;
 *   when it cannot start because the running set is full (or the pool is
 *   short and its client holds less than its page share), the client
 *   furthest above its share gives up its newest running sequences
 *   (preempted by recompute).
 * - No busy retry: a step that admits nothing changes no counter (prefix
 *   hits are counted when a request is admitted), and with nothing
 *   runnable the engine sleeps until a reader, a submission or a cancel
 *   wakes it, or the next stall deadline (o1_sched_wake_ns).
 *
 * Every sampled token goes to the sequence's output stream (seq_output.h:
 * TOKEN events with the detokenized text, held back while it may be the
 * start of a stop string, split only at UTF-8 character boundaries) in the
 * request's out ring; each request gets exactly one FINAL, after which the
 * slot is never touched again. A sequence whose out ring lacks room for
 * one token's events is not scheduled (backpressure). Nothing is allocated
 * per token: per-slot storage is made at create, the sampler once per
 * request (per round). Prompts become tokens in prompt.h.
 *
 * Sampling: on the host by default, each sequence by its own sampler from
 * its logits row, the step's sequences in parallel on sampler_threads. With
 * sample_in_backend the step samples where the logits are: before the step
 * each sequence's row (o1_sampler_row: the uniform drawn from its PRNG,
 * its penalty entries packed into one array of sample_pens entries, sized
 * at create) goes with the step, and its result is recorded after it
 * (o1_sampler_accept), so the tokens, logprobs and finishes are those of
 * host sampling. A sequence that computes without sampling (a prefill
 * chunk) gets a greedy row whose result is ignored. A sequence whose
 * penalty list does not fit the room left that step is sampled on the host
 * instead: the step then asks for the logits as well (both come back) and
 * only that step pays for the copy. A constrained sequence (a grammar) is
 * sampled in the backend too while the step has room for its token mask
 * (sample_masks, the backend's max_sample_masks): the masks are computed
 * before the step (on the sampler threads when several), sent with the
 * rows, and only those rows read one; one without room, or whose grammar
 * allows nothing (the host path then reports it), is sampled on the
 * host. No other feature needs a full logits
 * row on the host (confidence and refinement use the sampled logprob and
 * entropy, device logits go device to device through the step's devout
 * entries either way, and the scheduler never asks for all_logits).
 *
 * Confidence: every sampled token's logprob and entropy (raw
 * distribution, from the sampler's own passes) feed a per-round summary
 * (mean and minimum logprob, mean entropy) that the FINAL carries.
 *
 * Device logits (O1_SUBMIT_DEVICE_LOGITS, a request whose client holds a
 * device output area): each sampled token's logits row goes to the area
 * through the step's devout entries, at the area's next sequence number
 * (one counter per area, shared by the client's requests: the ring of
 * wire.h), and its TOKEN carries that number. A request naming no area
 * the backend has gets its FINAL -O1_E_NO_DEVOUT at once.
 *
 * Refinement (refine_steps > 0, chat text prompts): when a round ends,
 * its ROUND event is produced and refine.h judges whether the loop goes
 * on. If so the sequence is requeued (resume list) with the next round's
 * prompt: conversation + {assistant: answer} + {user: review}; its KV
 * pages were listed in the prefix cache, so the next round's shared
 * prefix is found there.
 */
#ifndef O1_SCHEDULER_H
#define O1_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "tokenizer/chat_template.h"
#include "backend/kv_pool.h"
#include "request.h"
#include "tokenizer/tokenizer.h"

struct o1_metrics;
struct o1_sched;

struct o1_sched_opts {
	struct o1_kv_pool *pool;	     /* borrowed */
	const struct o1_tokenizer *tok;	     /* NULL: id prompts only */
	const struct o1_chat_template *chat; /* NULL: chat refused */
	struct o1_metrics *metrics;	     /* NULL: not counted */
	/* the forward pass: o1_backend_step in o1d, a fake in tests */
	int (*step)(void *ctx, const struct o1_step *step);
	void *step_ctx;
	uint32_t vocab_size;
	uint32_t devout_areas; /* device output areas of the backend */
	uint32_t max_context;  /* tokens per sequence */
	uint32_t max_batch_tokens;
	uint32_t max_running;
	uint32_t prefill_chunk_tokens;
	uint32_t prefill_per_decode; /* prefill tokens per decode row */
	/* > 0: the prefill budget beside decode rows is set by time
	 * (prefill_budget.h), the token budget above its cap; 0: tokens */
	double prefill_time_ratio;
	/* with prefill_time_ratio: the ratio for prompts computed whole in
	 * the step, and for every chunk in a burst unless
	 * prefill_burst_ratio says otherwise (the larger of the two
	 * applies) */
	double prefill_whole_ratio;
	/* with prefill_time_ratio: the ratio for every chunk in a burst
	 * instead (the larger of it and prefill_time_ratio applies); <= 0:
	 * prefill_whole_ratio's */
	double prefill_burst_ratio;
	/* the clock timing steps for it (CLOCK_MONOTONIC ns); NULL: the real
	 * one (tests pass a fake; called with step_ctx) */
	uint64_t (*clock_ns)(void *ctx);
	uint32_t n_slots;	   /* struct o1_req index range */
	uint32_t max_prompt_bytes; /* chat rendering room */
	uint64_t salt_secret;	   /* prefix-cache salts */
	bool prefix_cache;
	int32_t bos_id; /* -1: none */
	int32_t eos_id; /* -1: none */
	/* refinement: 0 refuses refine_steps > 0 */
	uint32_t max_refine_steps;
	float refine_threshold;	   /* stop at a mean logprob >= this */
	const char *refine_review; /* the review instruction; copied */
	/* threads sampling a step's sequences (the engine thread is one);
	 * 0: min(online CPUs, 8). Each sequence has its own sampler, so the
	 * tokens do not depend on it. */
	uint32_t sampler_threads;
	/* Sampling in the backend: step gets a row per sequence and the
	 * penalty entries (at most sample_pens, the backend's
	 * max_sample_pens) and returns the samples; logits only when a
	 * sequence is sampled on the host (see above). */
	bool sample_in_backend;
	uint32_t sample_pens;
	uint32_t sample_masks; /* 0: constrained rows sample on the host */
	/* readers (see above): 0 = no per-client cap; 0 = never cancel */
	uint32_t max_running_per_client;
	uint32_t stall_timeout_ms;
};

struct o1_sched_stats {
	uint32_t running;
	uint32_t waiting; /* queued, including preempted ones */
	uint32_t parked;  /* waiting for their reader */
	uint32_t pages_total;
	uint32_t pages_free;
	uint32_t pages_cached; /* held by the prefix cache alone */
	uint64_t steps;
	uint64_t preemptions;
	uint64_t prefix_hits;
	uint64_t prefix_misses;
	uint64_t refine_rounds;	       /* refinement rounds after the first */
	uint64_t refine_cached_tokens; /* their prompt tokens served cached */
	uint64_t stalled; /* streams cancelled: their reader stalled */
};

int o1_sched_create(const struct o1_sched_opts *o, struct o1_sched **out);
/* Fails nothing: call after every request got its FINAL. */
void o1_sched_destroy(struct o1_sched *s);
/* Takes a request handed off by the front (tokenizes it); a request that
 * cannot run gets its FINAL at once. */
void o1_sched_add(struct o1_sched *s, struct o1_req *r);
/* Finishes requests whose cancel flag is set, then runs one step.
 * Returns the sequences stepped (0: nothing runnable) or a negative error
 * of the forward pass (the step's requests then failed). */
int o1_sched_step(struct o1_sched *s);
/* Finishes every request with ERROR -O1_E_DRAINING. */
void o1_sched_fail_all(struct o1_sched *s);
/* Requests the scheduler holds (running + waiting + parked). */
uint32_t o1_sched_active(const struct o1_sched *s);
/* After a step: the earliest stall deadline of a parked sequence
 * (CLOCK_MONOTONIC ns), when the engine must step again even if nothing
 * wakes it; 0: none. */
uint64_t o1_sched_wake_ns(const struct o1_sched *s);
void o1_sched_stats(const struct o1_sched *s, struct o1_sched_stats *out);
/* Counts into M from now on (NULL: nothing is counted); o1d's start-up
 * warm-up runs uncounted. */
void o1_sched_set_metrics(struct o1_sched *s, struct o1_metrics *m);
/* New knobs (SIGHUP); each clamped to the create-time value, which sized
 * the backend. */
void o1_sched_set_limits(struct o1_sched *s, uint32_t max_batch_tokens,
			 uint32_t max_running, uint32_t prefill_chunk_tokens);

#endif

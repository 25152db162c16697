/* Fault injection for tests of the fallback paths (config [faults]
 * enabled; o1d creates no o1_faults otherwise, and admin "inject" is then
 * refused). Each fault is switched on and off at run time (admin
 * "inject", `o1ctl inject`, admin uids only):
 * - latency PARAM: every engine step sleeps PARAM ms (default 50) first;
 * - step_fail PARAM: every PARAM-th engine step (default 1: each) fails
 *   with -EIO before the forward pass: its requests get an ERROR FINAL,
 *   the others go on;
 * - stall PARAM: o1d stops delivering events to client PARAM (0: every
 *   client), as if it stopped reading: out rings fill up and its
 *   sequences wait (backpressure) until the fault is off;
 * - kv_exhaust PARAM: the engine thread takes PARAM KV pages (0: as many
 *   as are free when it starts), each as soon as it is free, and holds
 *   them, so admissions wait and running sequences are preempted;
 *   released when the fault is off (pages the prefix cache keeps stay
 *   usable: the scheduler evicts them);
 * - graph_replay PARAM: every PARAM-th CUDA graph replay (default 1:
 *   each) fails as a failed cudaGraphLaunch does: the decode step runs
 *   eagerly (same tokens) and the backend counts a fallback
 *   (o1_backend_fail_replays). Only with a replay hook (the CUDA backend
 *   with graphs on and captured); refused (-O1_E_UNSUPPORTED) otherwise;
 * - null_forward PARAM: steps skip the forward pass: each sampled row
 *   gets token (a hash of the row's last token and position) % PARAM
 *   (default 256: byte tokens, never a special token in the project's
 *   vocabularies), and asked-for logits rows are -1e30 but at that token
 *   (0). The host's work per step (scheduler, sampling bookkeeping,
 *   detokenizing, stop strings, rings, wake-ups) then runs alone: the
 *   host_clock fault measures it (tools/bench/host_step.sh);
 * - host_clock: times the engine thread between steps (from one step's
 *   return to the next step's call: everything the host does serially
 *   with the forward pass), per batch size of the step before, in thread
 *   CPU time and in wall time, and the forward passes' wall time (steps
 *   with prompt tokens apart); when switched off, logs the decode batch
 *   sizes that ran most ("faults: host_clock: batch B: N steps, host cpu
 *   X us a step, wall Y us; forward Z us"), then the prefill steps.
 * Threads: o1_faults_set and the counters from any thread (atomics);
 * o1_faults_step and o1_faults_tick on the engine thread only (the held
 * pages and the replay hook are its own); o1_faults_stalled on the front
 * thread.
 */
#ifndef O1_FAULTS_H
#define O1_FAULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/kv_pool.h"

enum o1_fault {
	O1_FAULT_LATENCY,
	O1_FAULT_STEP_FAIL,
	O1_FAULT_STALL,
	O1_FAULT_KV_EXHAUST,
	O1_FAULT_GRAPH_REPLAY,
	O1_FAULT_NULL_FORWARD,
	O1_FAULT_HOST_CLOCK,
	O1_FAULT__COUNT,
};

struct o1_faults;

/* What each fault did so far, for admin status. */
struct o1_faults_stats {
	bool on[O1_FAULT__COUNT];
	uint64_t param[O1_FAULT__COUNT];
	uint64_t delayed_steps;
	uint64_t failed_steps;
	uint64_t stalled_polls; /* slot drains skipped */
	uint32_t kv_pages_held;
};

struct o1_faults_opts {
	/* The real forward pass, which o1_faults_step wraps. */
	int (*step)(void *ctx, const struct o1_step *step);
	void *step_ctx;
	struct o1_kv_pool *pool; /* borrowed: kv_exhaust's pages */
	/* graph_replay's hook: o1_backend_fail_replays of the backend STEP
	 * runs (EVERY 0: off), or NULL when that backend replays no graphs
	 * (graph_replay is then refused). Engine thread, before a step. */
	int (*fail_replays)(void *ctx, uint32_t every);
	void *replay_ctx;
	/* null_forward's logits rows (0: null_forward is refused). */
	uint32_t vocab;
};

/* O is copied; what it points to is borrowed until destroy. */
int o1_faults_create(const struct o1_faults_opts *o, struct o1_faults **out);
/* After the engine thread stopped; gives held pages back. NULL: no-op. */
void o1_faults_destroy(struct o1_faults *f);
/* The scheduler's step callback (ctx: the o1_faults). */
int o1_faults_step(void *ctx, const struct o1_step *step);
/* Engine thread, every loop turn: takes or gives back the held pages. */
void o1_faults_tick(struct o1_faults *f);
/* Front thread: whether CLIENT's events are held back now (counted). */
bool o1_faults_stalled(struct o1_faults *f, uint32_t client);
/* NAME: latency, step_fail, stall, kv_exhaust, graph_replay (refused
 * without a replay hook), null_forward, host_clock; PARAM 0: the fault's default. 0, or -EINVAL /
 * -O1_E_UNSUPPORTED with *why set. */
int o1_faults_set(struct o1_faults *f, const char *name, bool on,
		  uint64_t param, const char **why);
void o1_faults_stats(const struct o1_faults *f, struct o1_faults_stats *out);
const char *o1_faults_name(enum o1_fault fault);

#endif

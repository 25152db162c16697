/* The engine: the request slab, the engine thread that runs the scheduler,
 * and the ipc consumer (front-thread callbacks) that feeds it.
 *
 * Threads and hand-offs (see request.h for a slot's ownership):
 * - front thread (o1_ipc_server_run): every consumer callback. It owns the
 *   free list and each slot's front fields, queues new slots to the engine
 *   (queue under lock, then the condvar), sets cancel flags, drains the
 *   out rings into the clients' completion rings in ->poll, and frees a
 *   slot once its FINAL is consumed.
 * - engine thread: takes queued slots, runs o1_sched_step in a loop, and
 *   calls o1_ipc_server_kick after producing events; it sleeps on the
 *   condvar when nothing can run (until the front wakes it or the
 *   scheduler's next stall deadline: no periodic retry while sequences
 *   wait for a client to read: backpressure).
 * - several front threads (ipc.front_threads): each runs the callbacks
 *   of its own clients (ipc.h), and each slot belongs to the front that
 *   took it: only that front posts its events and frees it. engine.c's
 *   head says what they share and how.
 * - lock guards the queue, the stop/drain fields and the published stats.
 * Drain (SIGTERM): submissions are refused by the ipc layer, in-flight
 * requests run until the deadline, then get a CANCELLED FINAL; once every
 * slot is free (all FINALs posted) the front loop stops.
 */
#ifndef O1_ENGINE_H
#define O1_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ipc/ipc.h"
#include "scheduler.h"

struct o1_engine;
struct o1_metrics;
struct o1_faults;

/* What a reload did, for the log and the admin reply: comma-separated
 * names of what was applied and of what changed but needs a restart;
 * error is set (and nothing applied) when the configuration did not
 * load. */
struct o1_reload_report {
	char applied[256];
	char not_applied[256];
	char error[512];
};

struct o1_engine_opts {
	struct o1_sched_opts sched; /* n_slots and metrics used here too */
	uint32_t drain_timeout_ms;
	uint32_t log_requests; /* log.requests: a line for 1 of N finished */
	const char *model_name;	  /* copied */
	/* the model's weight bytes by type (model/weights.h's text; copied,
	 * NULL: none), for admin "status" */
	const char *weights;
	const char *backend_name; /* copied */
	/* SIGHUP and admin "reload": called on the front thread; NULL:
	 * ignored (admin "reload" is refused) */
	void (*reload)(void *ctx, struct o1_engine *e,
		       struct o1_reload_report *rep);
	/* admin "config": writes the effective configuration as INI text;
	 * NULL: refused */
	void (*dump_config)(void *ctx, FILE *f);
	void *reload_ctx; /* ctx of both */
	/* The backend's CUDA graph counters, read on the engine thread after
	 * each step and added to the metrics as deltas; NULL: none. */
	void (*graph_stats)(const void *ctx,
			    struct o1_backend_graph_stats *out);
	const void *graph_ctx;
	/* [faults] enabled: the injector (faults.h), whose step wraps
	 * sched.step; NULL: admin "inject" is refused. Borrowed. */
	struct o1_faults *faults;
	/* Structured output: the model's vocabulary as grammar tokens
	 * (borrowed; NULL: grammars refused) and the grammar cache's bounds
	 * and compile threads (grammar_cache.h; 0: its defaults). */
	const struct o1_grammar_vocab *grammar_vocab;
	uint32_t grammar_cache_entries;
	uint64_t grammar_cache_bytes;
	uint32_t grammar_threads;
	/* O1_GRAMMAR_TOOL_CALL's format (tokenizer/tool_call.h's
	 * o1_tool_format); O1_TOOL_NONE: such grammars are refused */
	uint8_t tool_format;
};

int o1_engine_create(const struct o1_engine_opts *o, struct o1_engine **out);
/* After o1_engine_stop. Accepts NULL. */
void o1_engine_destroy(struct o1_engine *e);
/* The callbacks to give o1_ipc_server_create. */
void o1_engine_consumer(struct o1_engine *e, struct o1_ipc_consumer *out);
/* Starts the engine thread; SRV is the server built with the consumer. */
int o1_engine_start(struct o1_engine *e, struct o1_ipc_server *srv);
/* Stops the grammar compile threads, then stops and joins the engine
 * thread; requests still held are failed. */
void o1_engine_stop(struct o1_engine *e);
/* Start-up warm-up (warmup.c): before o1_engine_start, runs one greedy
 * request of max_tokens through the scheduler on the calling thread; 0
 * when it produced them all (status then says warmup_ok), else -errno /
 * -O1_E_* (logged). took_ns: its duration either way. */
int o1_engine_warmup(struct o1_engine *e, uint32_t max_tokens,
		     uint64_t *took_ns);
/* Before o1_engine_start: how many graph buckets were configured and
 * captured, for the readiness in admin status. */
void o1_engine_set_graphs(struct o1_engine *e, uint32_t total,
			  uint32_t captured);
/* Scheduler knobs (SIGHUP reload); any thread. */
void o1_engine_set_limits(struct o1_engine *e, uint32_t max_batch_tokens,
			  uint32_t max_running, uint32_t prefill_chunk_tokens,
			  uint32_t drain_timeout_ms);

#endif

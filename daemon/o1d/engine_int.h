/* The engine's state, shared by engine.c (threads, slab, front callbacks)
 * and admin.c (admin requests, front thread). See engine.h for the
 * threading rules; fields are annotated with who may touch them. */
#ifndef O1_ENGINE_INT_H
#define O1_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine.h"
#include "request.h"

/* The backend's graph counters summed over its buckets, since it was
 * created (the warm-up's steps included), for admin status. */
struct o1_engine_graphs {
	uint64_t hits, misses, fallbacks; /* bucket steps */
	uint64_t oversize, prefill;	  /* eager, unpadded steps */
};

/* One front thread's requests (ipc.front_threads): those its clients
 * submitted, which only its ->poll posts. active and n_active change on
 * that thread only (under front_lock with several fronts); busy mirrors
 * n_active for the engine thread's kicks (several fronts only). */
struct o1_engine_front {
	uint32_t n_active;
	uint32_t *active; /* n_active slot indices, in no order: the front's
			   * passes visit these, never the whole slab */
	_Atomic uint32_t busy;
	uint64_t finished; /* FINALs it posted (log.requests samples them) */
};

struct o1_engine {
	struct o1_engine_opts o;
	char model_name[128];
	char weights[256];
	char backend_name[32];
	struct o1_sched *sched; /* engine thread (create/destroy: main) */
	struct o1_ipc_server *srv;
	struct o1_metrics *metrics;
	struct o1_gcache *grammars; /* NULL without a grammar vocabulary */
	uint64_t start_ns;
	struct o1_backend_graph_stats graph_last; /* engine thread: counts
						   * already in the metrics */

	/* slab */
	struct o1_req *slots;
	uint8_t *prompt_mem;
	uint32_t n_slots;
	uint32_t prompt_cap;

	/* front threads: with one, its own; with several, under front_lock
	 * (free list, n_held, the active lists' changes, a slot's dead flag
	 * and any walk of another front's list) */
	pthread_mutex_t front_lock;
	uint32_t n_fronts; /* set by o1_engine_start (ipc.front_threads) */
	struct o1_engine_front *fronts;
	uint32_t free_head; /* UINT32_MAX: none */
	uint32_t n_held;    /* slots not on the free list */

	/* the lead front thread only (admin, signals, metrics, exit) */
	uint64_t next_stats_ns;
	bool exiting;		/* SIGTERM seen: stop once idle (read by the
				 * others only with a fault plan: tests) */
	uint64_t idle_since_ns; /* exiting with nothing held since then */
	bool admin_drain;
	/* text prompts refused, no tokenizer: any front (rate of a log) */
	_Atomic uint64_t no_tokenizer_refusals;

	/* readiness, set by main before the engine thread starts */
	bool warmup_ok;		  /* o1_engine_warmup succeeded */
	uint64_t warmup_ns;	  /* its duration */
	uint32_t graphs_total;	  /* graph buckets configured */
	uint32_t graphs_captured; /* of those, captured */

	/* under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_started;
	bool stop;
	bool kicked; /* the front woke the engine since its last sleep */
	uint32_t *queue; /* n_slots entries, ring */
	uint32_t q_head, q_n;
	uint64_t drain_deadline_ns; /* 0: none */
	struct o1_sched_stats stats;
	struct o1_engine_graphs graphs;
	uint32_t lim_batch, lim_running, lim_chunk;
	bool lim_changed;
};

/* The admin handler (front thread): JSON request in, JSON reply out. */
int o1_engine_admin(void *ctx, struct o1_ipc_server *srv,
		    const struct o1_ipc_client_info *peer, const void *req,
		    size_t len, void *reply, size_t cap);
/* Front thread: sets the cancel flag of a live request; -ENOENT. */
int o1_engine_cancel_req(struct o1_engine *e, uint32_t client_id,
			 uint64_t req_id, int why);
/* Requests held (submitted, FINAL not yet posted), on every front. */
uint32_t o1_engine_held(struct o1_engine *e);
/* Front thread: starts refusing work; EXIT: stop once idle. */
void o1_engine_drain(struct o1_engine *e, bool on, bool exit);
uint64_t o1_engine_now_ns(void);

#endif

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

	/* front thread only */
	uint32_t free_head; /* UINT32_MAX: none */
	uint32_t n_active;
	uint32_t *active; /* n_active slot indices, in no order: the front's
			   * passes visit these, never the whole slab */
	uint64_t next_stats_ns;
	bool exiting;		/* SIGTERM seen: stop once idle */
	uint64_t idle_since_ns; /* exiting with nothing held since then */
	bool admin_drain;
	uint64_t no_tokenizer_refusals; /* text prompts refused: no tokenizer */
	uint64_t finished; /* FINALs posted (log.requests samples them) */

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
/* Front thread: starts refusing work; EXIT: stop once idle. */
void o1_engine_drain(struct o1_engine *e, bool on, bool exit);
uint64_t o1_engine_now_ns(void);

#endif

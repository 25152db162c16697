/* o1d metrics: the one layout shared by the daemon (writer) and every reader
 * (o1ctl, the HTTP sidecar, bpftool through BTF, exporters).
 *
 * Four regions, each the single value of a one-entry BPF array map (or a
 * 4096-aligned slice of the fallback file, in the same order):
 *   o1_info      struct o1_metrics_info      identity and geometry
 *   o1_counters  struct o1_metrics_counters  u64 counters and gauges
 *   o1_hist      struct o1_metrics_hists     log2 latency histograms (us)
 *   o1_graphs    struct o1_metrics_graphs    CUDA graph use per batch bucket
 *                                            and per context span
 *
 * Invariants: every field is a naturally aligned u32/u64, no pointers, no
 * implicit padding (checked below). Only the daemon writes, with relaxed
 * atomic adds/stores; readers load each u64 with a relaxed atomic load, so
 * a snapshot is per-field exact but not a consistent cut across fields (a
 * histogram's count may run ahead of its slots by in-flight observations).
 * info.magic is stored last with release by the writer of the fallback file
 * and loaded with acquire by readers; a reader that sees a different
 * version or geometry refuses the data. Adding or reordering a field bumps
 * O1_METRICS_VERSION and the pin directory (v3/). */
#ifndef O1_METRICS_H
#define O1_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define O1_METRICS_MAGIC	 0x544d314fu /* "O1MT" little-endian */
/* 2: struct o1_metrics_hist has max_us; 3: graph steps by context span */
#define O1_METRICS_VERSION	 3
#define O1_METRICS_HIST_SLOTS	 32   /* slot 31 holds >= 2^31 us */
#define O1_METRICS_GRAPH_BUCKETS 32   /* most batch buckets recorded */
#define O1_METRICS_GRAPH_SPANS	 8    /* most context spans recorded */
#define O1_METRICS_SHM_ALIGN	 4096 /* region alignment in the file */

/* Where the regions live; stored in info.backend. */
enum o1_metrics_backend {
	O1_METRICS_BACKEND_NONE = 0,
	O1_METRICS_BACKEND_BPF = 1,  /* pinned BPF array maps */
	O1_METRICS_BACKEND_SHM = 2,  /* shared-memory fallback file */
	O1_METRICS_BACKEND_ANON = 3, /* private memory, nobody reads */
};

/* o1_info: written once at open, read-only afterwards. */
struct o1_metrics_info {
	uint32_t magic;		/* O1_METRICS_MAGIC */
	uint32_t version;	/* O1_METRICS_VERSION */
	uint32_t backend;	/* enum o1_metrics_backend */
	uint32_t n_counters;	/* O1_METRICS_CTR__COUNT */
	uint32_t n_hists;	/* O1_METRICS_HIST__COUNT */
	uint32_t hist_slots;	/* O1_METRICS_HIST_SLOTS */
	uint32_t graph_buckets; /* O1_METRICS_GRAPH_BUCKETS */
	uint32_t graph_spans;	/* O1_METRICS_GRAPH_SPANS */
	uint64_t pid;		/* the writer's pid */
	uint64_t start_unix_ns; /* CLOCK_REALTIME at open */
};

/* X(name, btf_name): the BTF field table of struct o1_metrics_info. */
#define O1_METRICS_INFO_LIST(X)                                                \
	X(magic, u32)                                                          \
	X(version, u32)                                                        \
	X(backend, u32)                                                        \
	X(n_counters, u32)                                                     \
	X(n_hists, u32)                                                        \
	X(hist_slots, u32)                                                     \
	X(graph_buckets, u32)                                                  \
	X(graph_spans, u32)                                                    \
	X(pid, u64)                                                            \
	X(start_unix_ns, u64)

/* Why a request failed: requests_failed is counted per reason. */
enum o1_metrics_fail {
	O1_METRICS_FAIL_INVALID,   /* malformed or out-of-range request */
	O1_METRICS_FAIL_CONTEXT,   /* prompt + max_tokens over the context */
	O1_METRICS_FAIL_QUOTA,	   /* per-client quota exceeded */
	O1_METRICS_FAIL_TOKENIZER, /* text could not be tokenized */
	O1_METRICS_FAIL_DRAINING,  /* refused or cut off by a drain */
	O1_METRICS_FAIL_ENGINE,	   /* backend error while running it */
	O1_METRICS_FAIL_INTERNAL,  /* anything else */
	O1_METRICS_FAIL__COUNT,
};

/* The counter table: X(ID, field, type, prom_name, label, help).
 * type is COUNTER (only grows, o1_metrics_add) or GAUGE (o1_metrics_set).
 * prom_name is the Prometheus metric name after the o1_ prefix; label is a
 * label set for counters that share a metric name (failed by reason). The
 * order here is the order of struct o1_metrics_counters (checked). */
#define O1_METRICS_COUNTER_LIST(X)                                             \
	X(REQUESTS_SUBMITTED, requests_submitted, COUNTER,                     \
	  "requests_submitted_total", "", "Requests accepted from clients")    \
	X(REQUESTS_COMPLETED, requests_completed, COUNTER,                     \
	  "requests_completed_total", "", "Requests finished successfully")    \
	X(REQUESTS_CANCELLED, requests_cancelled, COUNTER,                     \
	  "requests_cancelled_total", "",                                      \
	  "Requests cancelled by their client, an admin or a client death")    \
	X(FAILED_INVALID, failed_invalid, COUNTER, "requests_failed_total",    \
	  "reason=\"invalid\"", "Requests failed, by reason")                  \
	X(FAILED_CONTEXT, failed_context, COUNTER, "requests_failed_total",    \
	  "reason=\"context\"", "Requests failed, by reason")                  \
	X(FAILED_QUOTA, failed_quota, COUNTER, "requests_failed_total",        \
	  "reason=\"quota\"", "Requests failed, by reason")                    \
	X(FAILED_TOKENIZER, failed_tokenizer, COUNTER,                         \
	  "requests_failed_total", "reason=\"tokenizer\"",                     \
	  "Requests failed, by reason")                                        \
	X(FAILED_DRAINING, failed_draining, COUNTER, "requests_failed_total",  \
	  "reason=\"draining\"", "Requests failed, by reason")                 \
	X(FAILED_ENGINE, failed_engine, COUNTER, "requests_failed_total",      \
	  "reason=\"engine\"", "Requests failed, by reason")                   \
	X(FAILED_INTERNAL, failed_internal, COUNTER, "requests_failed_total",  \
	  "reason=\"internal\"", "Requests failed, by reason")                 \
	X(REQUESTS_RUNNING, requests_running, GAUGE, "requests_running", "",   \
	  "Sequences in the running batch")                                    \
	X(REQUESTS_WAITING, requests_waiting, GAUGE, "requests_waiting", "",   \
	  "Requests queued for admission")                                     \
	X(TOKENS_PROMPT, tokens_prompt, COUNTER, "prompt_tokens_total", "",    \
	  "Prompt tokens accepted")                                            \
	X(TOKENS_GENERATED, tokens_generated, COUNTER,                         \
	  "generated_tokens_total", "", "Tokens sampled and streamed")         \
	X(PREFIX_HITS, prefix_hits, COUNTER, "prefix_cache_hits_total", "",    \
	  "Prompt KV pages reused from the prefix cache")                      \
	X(PREFIX_MISSES, prefix_misses, COUNTER, "prefix_cache_misses_total",  \
	  "", "Full prompt KV pages not found in the prefix cache")            \
	X(PREEMPTIONS, preemptions, COUNTER, "preemptions_total", "",          \
	  "Sequences preempted for lack of KV pages")                          \
	X(KV_PAGES_TOTAL, kv_pages_total, GAUGE, "kv_pages_capacity", "",      \
	  "KV pages in the pool")                                              \
	X(KV_PAGES_USED, kv_pages_used, GAUGE, "kv_pages_used", "",            \
	  "KV pages referenced by sequences")                                  \
	X(KV_PAGES_CACHED, kv_pages_cached, GAUGE, "kv_pages_cached", "",      \
	  "Unreferenced KV pages kept by the prefix cache")                    \
	X(CLIENTS_CONNECTED, clients_connected, GAUGE, "clients_connected",    \
	  "", "Clients connected now")                                         \
	X(CLIENT_CONNECTS, client_connects, COUNTER, "client_connects_total",  \
	  "", "Client connections accepted")                                   \
	X(CLIENT_DEATHS, client_deaths, COUNTER, "client_deaths_total", "",    \
	  "Clients that hung up with requests in flight")                      \
	X(PROTOCOL_VIOLATIONS, protocol_violations, COUNTER,                   \
	  "protocol_violations_total", "",                                     \
	  "Malformed ring entries or messages from clients")                   \
	X(WAKE_SPIN_HITS, wake_spin_hits, COUNTER, "wake_spin_hits_total", "", \
	  "Polls that found work while spinning")                              \
	X(WAKE_SLEEPS, wake_sleeps, COUNTER, "wake_sleeps_total", "",          \
	  "Times the front loop went to sleep waiting for work")               \
	X(STEPS, steps, COUNTER, "steps_total", "", "Engine steps run")

/* An X-macro expansion clang-format cannot indent. */
// clang-format off
enum o1_metrics_ctr {
#define O1_METRICS_X(id, field, type, prom, label, help) O1_METRICS_CTR_##id,
	O1_METRICS_COUNTER_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	O1_METRICS_CTR__COUNT,
};
// clang-format on

/* o1_counters: every member is a u64 indexed by enum o1_metrics_ctr. */
struct o1_metrics_counters {
	union {
		struct {
			uint64_t requests_submitted;
			uint64_t requests_completed;
			uint64_t requests_cancelled;
			uint64_t failed_invalid; /* o1_metrics_fail order */
			uint64_t failed_context;
			uint64_t failed_quota;
			uint64_t failed_tokenizer;
			uint64_t failed_draining;
			uint64_t failed_engine;
			uint64_t failed_internal;
			uint64_t requests_running; /* gauge */
			uint64_t requests_waiting; /* gauge */
			uint64_t tokens_prompt;
			uint64_t tokens_generated;
			uint64_t prefix_hits;	/* pages */
			uint64_t prefix_misses; /* pages */
			uint64_t preemptions;
			uint64_t kv_pages_total;    /* gauge */
			uint64_t kv_pages_used;	    /* gauge */
			uint64_t kv_pages_cached;   /* gauge */
			uint64_t clients_connected; /* gauge */
			uint64_t client_connects;
			uint64_t client_deaths;
			uint64_t protocol_violations;
			uint64_t wake_spin_hits;
			uint64_t wake_sleeps;
			uint64_t steps;
		};
		uint64_t v[O1_METRICS_CTR__COUNT];
	};
};

/* One log2 histogram in microseconds, as libbpf-tools lays them out:
 * slot 0 holds 0 and 1, slot i (i >= 1) holds [2^i, 2^(i+1)), the last
 * slot also holds everything above. max_us bounds what a quantile
 * estimate may say: never more than was observed. */
struct o1_metrics_hist {
	uint64_t count;	 /* observations */
	uint64_t sum_us; /* sum of the observed values */
	uint64_t max_us; /* the largest value observed, since start */
	uint64_t slots[O1_METRICS_HIST_SLOTS];
};

/* The histogram table: X(ID, field, prom_name, help). Same order as the
 * members of struct o1_metrics_hists (checked). */
#define O1_METRICS_HIST_LIST(X)                                                \
	X(QUEUE_WAIT, queue_wait, "queue_wait_seconds",                        \
	  "Time from submission to the first scheduled step")                  \
	X(TTFT, ttft, "time_to_first_token_seconds",                           \
	  "Time from submission to the first streamed token")                  \
	X(ITL, itl, "inter_token_latency_seconds",                             \
	  "Time between consecutive streamed tokens of a request")             \
	X(E2E, e2e, "request_duration_seconds",                                \
	  "Time from submission to the final event")                           \
	X(STEP, step, "step_duration_seconds", "Duration of one engine step")  \
	X(WAKEUP, wakeup, "ipc_wakeup_seconds",                                \
	  "Time from a client publishing a ping or submission to the front "   \
	  "loop copying it out")

/* An X-macro expansion clang-format cannot indent. */
// clang-format off
enum o1_metrics_hist_id {
#define O1_METRICS_X(id, field, prom, help) O1_METRICS_HIST_##id,
	O1_METRICS_HIST_LIST(O1_METRICS_X)
#undef O1_METRICS_X
	O1_METRICS_HIST__COUNT,
};
// clang-format on

/* o1_hist: one struct o1_metrics_hist per enum o1_metrics_hist_id. */
struct o1_metrics_hists {
	union {
		struct {
			struct o1_metrics_hist queue_wait;
			struct o1_metrics_hist ttft;
			struct o1_metrics_hist itl;
			struct o1_metrics_hist e2e;
			struct o1_metrics_hist step;
			struct o1_metrics_hist wakeup;
		};
		struct o1_metrics_hist h[O1_METRICS_HIST__COUNT];
	};
};

/* CUDA graph use of one decode batch bucket. */
struct o1_metrics_graph_bucket {
	uint64_t batch_size;	/* the bucket's captured batch, 0 = unused */
	uint64_t hits;		/* steps replayed from this bucket's graph */
	uint64_t misses;	/* steps for this bucket with no graph */
	uint64_t fallbacks;	/* replays that failed and ran eagerly */
	uint64_t padded_tokens; /* padding rows added to reach batch_size */
};

#define O1_METRICS_GRAPH_BUCKET_LIST(X)                                        \
	X(batch_size, u64)                                                     \
	X(hits, u64)                                                           \
	X(misses, u64)                                                         \
	X(fallbacks, u64)                                                      \
	X(padded_tokens, u64)

/* The decode steps of one context span: each batch bucket's graph is
 * captured once per span, and a step runs in the shortest span holding its
 * longest sequence (graphs.context_spans in o1d.ini). */
struct o1_metrics_graph_span {
	uint64_t context_len; /* the span's longest context, 0 = unused */
	uint64_t steps;	      /* bucket steps run in it (replayed or not) */
};

#define O1_METRICS_GRAPH_SPAN_LIST(X)                                          \
	X(context_len, u64)                                                    \
	X(steps, u64)

/* o1_graphs: bucket sizes and span lengths set once after capture, then
 * counted. */
struct o1_metrics_graphs {
	uint64_t n_buckets;  /* buckets in use, <= O1_METRICS_GRAPH_BUCKETS */
	uint64_t oversize;   /* steps above the largest bucket (eager) */
	uint64_t capture_us; /* time spent capturing every graph */
	uint64_t capture_bytes; /* device memory the graphs hold */
	struct o1_metrics_graph_bucket buckets[O1_METRICS_GRAPH_BUCKETS];
	uint64_t n_spans; /* spans in use, <= O1_METRICS_GRAPH_SPANS */
	struct o1_metrics_graph_span spans[O1_METRICS_GRAPH_SPANS];
};

#define O1_METRICS_GRAPHS_LIST(X)                                              \
	X(n_buckets, u64)                                                      \
	X(oversize, u64)                                                       \
	X(capture_us, u64)                                                     \
	X(capture_bytes, u64)                                                  \
	X(buckets, bucket_array)                                               \
	X(n_spans, u64)                                                        \
	X(spans, span_array)

/* Layout checks: every table entry is at the offset its index implies and
 * the tables cover their structs exactly (no holes, nothing missing). */
#define O1_METRICS_X(id, field, type, prom, label, help)                       \
	_Static_assert(offsetof(struct o1_metrics_counters, field) ==          \
			   O1_METRICS_CTR_##id * sizeof(uint64_t),             \
		       "counter table out of order: " #field);
O1_METRICS_COUNTER_LIST(O1_METRICS_X)
#undef O1_METRICS_X
_Static_assert(sizeof(struct o1_metrics_counters) ==
		   O1_METRICS_CTR__COUNT * sizeof(uint64_t),
	       "counter table misses a field");
_Static_assert(O1_METRICS_CTR_FAILED_INTERNAL - O1_METRICS_CTR_FAILED_INVALID +
		       1 ==
		   O1_METRICS_FAIL__COUNT,
	       "one failed_* counter per enum o1_metrics_fail");

#define O1_METRICS_X(id, field, prom, help)                                    \
	_Static_assert(offsetof(struct o1_metrics_hists, field) ==             \
			   O1_METRICS_HIST_##id *                              \
			       sizeof(struct o1_metrics_hist),                 \
		       "hist table out of order: " #field);
O1_METRICS_HIST_LIST(O1_METRICS_X)
#undef O1_METRICS_X
_Static_assert(sizeof(struct o1_metrics_hists) ==
		   O1_METRICS_HIST__COUNT * sizeof(struct o1_metrics_hist),
	       "hist table misses a field");
_Static_assert(sizeof(struct o1_metrics_hist) ==
		   (3 + O1_METRICS_HIST_SLOTS) * sizeof(uint64_t),
	       "struct o1_metrics_hist has padding");

#define O1_METRICS_SIZEOF_u32 4
#define O1_METRICS_SIZEOF_u64 8
#define O1_METRICS_SIZEOF_bucket_array                                         \
	(O1_METRICS_GRAPH_BUCKETS * sizeof(struct o1_metrics_graph_bucket))
#define O1_METRICS_SIZEOF_span_array                                           \
	(O1_METRICS_GRAPH_SPANS * sizeof(struct o1_metrics_graph_span))
#define O1_METRICS_X(field, t) +O1_METRICS_SIZEOF_##t
_Static_assert(0 O1_METRICS_INFO_LIST(O1_METRICS_X) ==
		   sizeof(struct o1_metrics_info),
	       "info table misses a field or the struct has padding");
_Static_assert(0 O1_METRICS_GRAPH_BUCKET_LIST(O1_METRICS_X) ==
		   sizeof(struct o1_metrics_graph_bucket),
	       "graph bucket table misses a field");
_Static_assert(0 O1_METRICS_GRAPH_SPAN_LIST(O1_METRICS_X) ==
		   sizeof(struct o1_metrics_graph_span),
	       "graph span table misses a field");
_Static_assert(0 O1_METRICS_GRAPHS_LIST(O1_METRICS_X) ==
		   sizeof(struct o1_metrics_graphs),
	       "graphs table misses a field or the struct has padding");
#undef O1_METRICS_X

/* The buckets and spans in use as a reader may index them (a file's counts
 * clamped to the tables). */
static inline unsigned
o1_metrics_graph_n_buckets(const struct o1_metrics_graphs *g)
{
	return g->n_buckets < O1_METRICS_GRAPH_BUCKETS
		   ? (unsigned)g->n_buckets
		   : O1_METRICS_GRAPH_BUCKETS;
}

static inline unsigned
o1_metrics_graph_n_spans(const struct o1_metrics_graphs *g)
{
	return g->n_spans < O1_METRICS_GRAPH_SPANS ? (unsigned)g->n_spans
						   : O1_METRICS_GRAPH_SPANS;
}

/* The slot of a value: floor(log2(v)), 0 for 0 and 1, clamped to the last
 * slot. */
static inline unsigned o1_metrics_hist_slot(uint64_t v)
{
	unsigned slot;

	if (v < 2)
		return 0;
	slot = 63u - (unsigned)__builtin_clzll(v);
	return slot < O1_METRICS_HIST_SLOTS ? slot : O1_METRICS_HIST_SLOTS - 1;
}

/* The smallest value slot i holds; its largest is 2 * low - 1 (1 for
 * slot 0), except the last slot, which is unbounded. */
static inline uint64_t o1_metrics_hist_slot_low(unsigned slot)
{
	return slot == 0 ? 0 : (uint64_t)1 << slot;
}

#endif

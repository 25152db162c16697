/* The backend interface: one model forward over a batch of sequences and
 * the paged KV cache, behind an ops table indexed by enum o1_backend_kind.
 *
 * A step runs N sequences together. Sequence s brings n_tokens >= 1 new
 * tokens (a prefill chunk, or one decode token) starting at position
 * start_pos; the KV of its positions [0, start_pos) is already in the
 * pages of its block table (written by earlier steps), and the table must
 * cover [0, start_pos + n_tokens): the step writes the new tokens' K/V
 * there (kv_pool.h gives the layout) and attends causally over the
 * sequence's own pages only. The pages a step writes (those holding its new
 * positions) must not be shared with another sequence: sharing is for
 * full, finished pages (copy-on-write is the scheduler's job). Pages and
 * block tables are the caller's (the scheduler owns a struct o1_kv_pool
 * made with o1_backend_kv_layout()); the backend owns the memory behind
 * them.
 *
 * Logits come back for the last new token of each sequence, or for every
 * new token of a sequence with all_logits, as rows of vocab floats in
 * sequence order.
 *
 * Device outputs (CUDA backend, cfg.devout_areas > 0): areas of device
 * memory made at create, each its own allocation so that it can be
 * exported alone through CUDA IPC (o1_backend_devout describes one). A
 * step's devout entries copy logits rows into them on the device, right
 * after the LM head (before anything else could touch the rows), see
 * struct o1_step_devout.
 *
 * Sampling in the backend (kernels/sample.h), for a backend whose ops say
 * it can sample and that was created with cfg.sampling: a step with
 * samples != NULL gives one o1_sample_row per logits row, in the order of
 * the logits rows, and the penalty entries they index; the backend
 * samples every row where the logits are and fills samples (one result
 * per row). Logits may then be NULL: only the results come back (with
 * logits too, both come back). o1_backend_step checks every row's
 * parameters, its uniform, its penalty range and every penalty id on the
 * host before the backend sees the step. Token masks (structured output):
 * a row whose mask field is k >= 1 draws only from bitmask k - 1 of the
 * step's masks (kernels/sample.h says how: logprobs over the allowed
 * tokens, id -1 when none is); the CUDA backend uploads them with the
 * rows, into buffers made at create, so bucket graphs replay unchanged
 * and rows without a mask read none.
 *
 * A backend runs one step at a time, called from one thread (the engine
 * loop); the CPU backend spreads each kernel over its own worker threads.
 * The tensor-parallel backend (tp_backend.h) is one backend to its caller
 * over N rank backends, each stepped on its own thread.
 *
 * Determinism (CPU backend): with the same thread count, a sequence's
 * logits are bitwise identical whatever the page size, the page ids, the
 * other sequences in the step and how its prompt was split into chunks
 * (every kernel computes each row, or each row and head, on its own with a
 * fixed operation order: see kernels/matmul.h and kernels/attention.h). In
 * fact they do not depend on the thread count either.
 */
#ifndef O1_BACKEND_H
#define O1_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "kv_pool.h"
#include "model/model.h"
#include "kernels/sample.h"

enum o1_backend_kind {
	O1_BACKEND_CPU,
	O1_BACKEND_CUDA,
	O1_BACKEND_COUNT,
};

#define O1_BACKEND_GRAPH_BUCKETS_MAX 32
#define O1_BACKEND_GRAPH_SPANS_MAX   4 /* context spans, the last included */
#define O1_BACKEND_DEVOUT_AREAS_MAX  64	   /* device output areas */
#define O1_BACKEND_DEVOUT_ROWS_MAX   65536 /* rows per area */

#define O1_BACKEND_DEVICES_MAX 8

/* A rank backend's link to its tensor-parallel group (tp_group.h builds
 * them). SUM adds BUF, N floats (host memory on the CPU backend, device
 * memory enqueued on STREAM, the backend's cudaStream_t, on CUDA), across
 * the ranks in place: every rank gets the same bits. WAIT (NULL: none
 * needed) waits until STREAM's work is done, returning -ECANCELED promptly
 * once any rank of the group failed instead of waiting on a collective
 * that will never complete. FAIL marks the group failed: every rank's
 * pending and later SUM and WAIT return -ECANCELED. A rank whose create or
 * step fails calls FAIL, then waits (through WAIT) for its own stream. */
struct o1_tp_link {
	int (*sum)(void *ctx, float *buf, uint64_t n, void *stream);
	int (*wait)(void *ctx, void *stream);
	void (*fail)(void *ctx);
	void *ctx;
};

/* o1_backend_config's cuda_att_q. */
enum o1_cuda_att_q { O1_CUDA_ATT_Q_AUTO, O1_CUDA_ATT_Q_OFF, O1_CUDA_ATT_Q_ON };

/* CUDA Graphs (CUDA backend only; ignored by the CPU backend). With
 * graphs_enabled, a decode step (every sequence brings one token) of n
 * sequences runs padded to the smallest bucket >= n: its decode step was
 * captured at create as a CUDA graph and is replayed. graph_buckets (1 to
 * O1_BACKEND_GRAPH_BUCKETS_MAX sizes, ascending) or, with n_graph_buckets
 * 0, the default 1,2,4,8,16,24,32,48,64,96,128,192,256 capped by max_seqs
 * (which becomes the largest bucket); buckets above max_seqs or 256 are
 * dropped. Steps with prefill tokens and decode steps above the largest
 * bucket run eagerly. graphs_eager runs the same padded bucket shapes
 * without capturing them: the graphs' bitwise reference in tests. */
struct o1_backend_config {
	uint32_t n_threads;	     /* CPU workers (per rank); 0 = online */
	uint32_t max_batch_tokens;   /* new tokens per step (sum) */
	uint32_t max_seqs;	     /* sequences per step */
	uint32_t max_context_tokens; /* per sequence; 0 = the model's */
	uint32_t n_pages;	     /* KV pool pages */
	uint32_t page_tokens;	     /* 0 = O1_KV_PAGE_TOKENS_DEFAULT */
	bool graphs_enabled;
	bool graphs_eager;
	/* Matrices in a GGUF block format (Q8_0, Q4_0, Q4_K, Q6_K): false
	 * = kept in it and multiplied block by block; true = dequantized at
	 * load to the backend's float type (CPU f32, CUDA bf16), as before
	 * block products existed (config model.dequantize = bf16). */
	bool dequantize;
	/* CUDA backend, steps of at most 4 tokens (decode), A/B switches
	 * for measurements (false in production; neither applies to a
	 * tensor-parallel rank): cuda_no_pdl launches without programmatic
	 * dependent launch (used on compute capability 9.0 and later);
	 * cuda_no_fusion runs RMSNorm, SwiGLU and the residual adds as
	 * kernels of their own instead of inside the products. Results are
	 * the same bits either way. */
	bool cuda_no_pdl;
	bool cuda_no_fusion;
	/* CUDA backend, decode steps on GGUF block weights, fused: true =
	 * the products before a small one (the QKV product before O, the
	 * down product before the next layer's QKV) prefetch its weights
	 * into L2 as their warps finish (o1_gemv_q_prefetch_next); false
	 * (the default) = no prefetch. Same bits. Off since 2026-12-05: it
	 * cost qwen2.5-0.5b and llama3.2-1b Q4_K_M 2-3% a token
	 * (bench_cuda_decode --prefetch, H100) and gained nothing on a
	 * llama3-8b cut (H200, 2026-12-01); kept for the whole 8B's A/B. */
	bool cuda_prefetch;
	/* CUDA backend, decode steps on GGUF block weights, fused: where the
	 * decode attention also writes its output quantized for the O
	 * product, which then copies it instead of quantizing it (same bits;
	 * cuda_forward.c's att_q): O1_CUDA_ATT_Q_AUTO (0, the default) where
	 * the output is at least 4,096 wide, _ON at every width, _OFF never
	 * (A/B for benchmarks and tests). */
	uint32_t cuda_att_q;
	/* CUDA backend (config cuda.faster_row_counts, inverted): false (the
	 * default) = a product of a row count above 256 that measured slower
	 * at load than a larger warmed count runs at that count (cuBLAS's
	 * pick at some counts is slower than at the next one up); true =
	 * every count runs rounded up as before (A/B). */
	bool cuda_keep_row_counts;
	/* CUDA backend, decode attention's launch shape, A/B for benchmarks
	 * (0: attention_decode.cu's defaults): warps a block, rounds a split
	 * takes at least, blocks a launch aims for, most query heads a
	 * block, the blocks whose splits cap a short row's at a few rows
	 * (o1_attn_decode_tune's few_blocks). Splits change the order of the
	 * softmax's sums, not the result beyond f32 rounding.
	 * cuda_no_attention (benchmarks only: the results are wrong) leaves
	 * the attention kernel out of every step: what it costs inside one. */
	uint32_t cuda_attn_warps, cuda_attn_split_rounds, cuda_attn_target,
	    cuda_attn_heads, cuda_attn_few;
	/* CUDA backend: whether decode rows go to the tensor-core kernel
	 * (enum o1_attn_tc: 0 auto, wide batches; A/B for benchmarks) */
	uint32_t cuda_attn_tc;
	/* CUDA backend (config cuda.attention_splits): the tensor-core decode
	 * attention's splits along the positions at most (0: its pick, a
	 * split per O1_ATTN_DECODE_TC_SPLIT_MIN positions of a row; 1: none) */
	uint32_t cuda_attn_tc_splits;
	bool cuda_no_attention;
	/* CUDA backend: products on bf16 weights over at most cuda_gemv_rows
	 * rows (1..O1_GEMV_MAX_ROWS) run gemv.cu's decode products, fused
	 * and with PDL; over more, cuBLAS's (0: by the model's width, as
	 * measured: 2 from 4,096 wide, else O1_GEMV_MAX_ROWS). Block weights
	 * always take gemv_q.cu's up to O1_GEMV_MAX_ROWS. */
	uint32_t cuda_gemv_rows;
	/* CUDA backend: the gate/up product where cuBLAS makes it (prefill
	 * and wide decode steps) writes bf16 for SwiGLU, half the bytes of
	 * f32 both ways (the rounding transformers' bf16 models make too);
	 * true keeps f32 there (A/B for benchmarks). */
	bool cuda_gu_f32;
	/* CUDA backend: the QKV product where cuBLAS makes it writes bf16
	 * rows for RoPE the same way (half the bytes both ways); true keeps
	 * f32 (A/B for benchmarks). */
	bool cuda_qkv_f32;
	/* CUDA backend, decode products on GGUF block weights (config
	 * cuda.quant_dot): false = int8 (the default: the input rows
	 * quantized to int8 per 32 elements, __dp4a on the blocks' integers,
	 * kernels/gemv_q8.h bounds the difference); true = f32 (each weight
	 * dequantized in registers and multiplied in f32, gemv_q.h). */
	bool cuda_quant_f32;
	/* CPU backend: products on GGUF block weights take the CUDA
	 * backend's int8 decode path bit for bit (kernels/gemv_q8.h: the input
	 * rows rounded to bf16, quantized to int8 per 32 elements, integer
	 * sums), at every row count: the measure of the scheme's own distance
	 * to the f32 products (tools/bench/int8_error, test_cpu_backend). Not
	 * a reference for the device's rows: inputs a bf16 rounding apart
	 * round to other int8 steps (docs/PERFORMANCE.md). Slow; not a
	 * serving mode. */
	bool cpu_quant_int8;
	/* CUDA backend, products of more rows on block weights: false = each
	 * matrix dequantized to bf16 tiles of cuda_quant_tile_bytes (0:
	 * QTILE_BYTES, the most) multiplied by cuBLAS (the default); true =
	 * gemm_q.cu's tensor-core kernel, 2.6-7x slower than the tiles on the
	 * H200 (docs/PERFORMANCE.md), kept as the start of an in-kernel
	 * product. */
	bool cuda_quant_mma;
	uint32_t cuda_quant_tile_bytes;
	/* CUDA backend: products of O1_GEMV_MAX_ROWS < M <= cuda_quant_qp_rows
	 * rows on block weights run gemm_qp.cu's pipelined tensor-core kernel
	 * (before cuda_quant_mma and the tiles; 0, the default: never). The
	 * same values as the tiles' summed in another order (its tests bound
	 * the difference). */
	uint32_t cuda_quant_qp_rows;
	/* CUDA backend (config cuda.quant_pass_rows, o1d's default 12):
	 * products of O1_GEMV_MAX_ROWS < M <= cuda_quant_pass_rows rows on
	 * block weights run the decode products (gemv_q.cu) in passes of
	 * O1_GEMV_MAX_ROWS rows, each reading the blocks once, instead of
	 * dequantizing every matrix to tiles (0 here: never). Other bits than
	 * the tiles' (the decode products' int8 inputs, kernels/gemv_q8.h). */
	uint32_t cuda_quant_pass_rows;
	/* CUDA backend (config cuda.quant_i8_rows): products of more rows
	 * than the passes take, up to cuda_quant_i8_rows, on block weights run
	 * gemm_qi8.cu's int8 tensor-core product (the decode products'
	 * arithmetic, kernels/gemv_q8.h: x quantized per 32 elements, the
	 * blocks read as they are) instead of the tiles (0: never), its
	 * quantized input in the tile scratch. */
	uint32_t cuda_quant_i8_rows;
	/* CUDA backend (config cuda.quant_wgmma_rows): products of more rows
	 * than the int8 product takes, up to cuda_quant_wg_rows, on block
	 * weights run gemm_qw.cu's wgmma product (the weights decoded in
	 * registers to bf16, no tiles written) instead of the tiles, where
	 * the build has it (sm_90a; 0: never). */
	uint32_t cuda_quant_wg_rows;
	/* CUDA backend, A/B only (bench_cuda_decode --quant-wg-splits; o1d
	 * keeps 0): the parts of K gemm_qw.cu's product takes where its
	 * tiles leave multiprocessors idle (0: its pick, 1: K whole, N: N). */
	uint32_t cuda_quant_wg_splits;
	/* CUDA backend with graphs (config cuda.autotune, off by default):
	 * times the decode products' launch setups and cuBLASLt algorithms
	 * per bucket at create, for at most cuda_autotune_ms of load time
	 * (0: 2000), and keeps the fastest (daemon/backend/cuda_tune.h).
	 * gemv setups give the same bits; a cuBLAS algorithm may round
	 * differently from the default one. */
	bool cuda_autotune;
	uint32_t cuda_autotune_ms;
	uint32_t n_graph_buckets; /* 0 = the default list */
	uint32_t graph_buckets[O1_BACKEND_GRAPH_BUCKETS_MAX];
	/* Context spans of the graphs: lengths (positions, ascending) below
	 * max_context_tokens, each with a graph per bucket, beside the span
	 * of max_context_tokens itself; a decode step replays the graphs of
	 * the shortest span that holds its longest sequence (cuda_graphs.h),
	 * and the decode attention shapes a launch by its span, graphs or
	 * not (by the K/V its rows read at the span's shortest context).
	 * 0 = 1,024, 4,096 and 16,384 (kernels_cuda.h's
	 * O1_ATTN_DECODE_SPAN_*); lengths >= max_context_tokens are dropped,
	 * so {UINT32_MAX} gives one span, its launches shaped as for short
	 * contexts. */
	uint32_t n_graph_spans;
	uint32_t graph_spans[O1_BACKEND_GRAPH_SPANS_MAX - 1];
	uint32_t device; /* CUDA ordinal of a one-device backend */
	/* Tensor parallelism (tp_backend.h): 0 = one backend on DEVICE; N
	 * >= 1 = the tensor-parallel backend over N ranks, rank r on
	 * devices[r] (1 is that path over one rank: a test of it). */
	uint32_t tensor_parallel;
	uint32_t devices[O1_BACKEND_DEVICES_MAX];
	/* Set by the tensor-parallel backend in its ranks' configs only. */
	uint32_t tp_rank, tp_size; /* this shard; tp_size 0 = not a rank */
	struct o1_tp_link tp_link;
	/* Device output areas (see above): count (0: none; a backend
	 * without them refuses others with -O1_E_UNSUPPORTED) and logits
	 * rows per area (a power of two, >= 1). */
	uint32_t devout_areas;
	uint32_t devout_rows;
	/* Sampling in the backend: buffers for it are made at create (the
	 * CPU backend: a scratch per worker and max_seqs logits rows; the
	 * CUDA backend: rows, penalties and results on the device). Needs
	 * a backend that can sample (-O1_E_UNSUPPORTED otherwise). */
	bool sampling;
	/* Penalty entries one step may pass; 0 = max_seqs x min(vocab,
	 * context), at most O1_BACKEND_SAMPLE_PENS_DEFAULT_MAX. */
	uint32_t max_sample_pens;
	/* Token bitmasks one step may pass; 0 = max_seqs. */
	uint32_t max_sample_masks;
};

/* One device output area (o1_backend_devout): CUDA IPC handles (opaque
 * cudaIpcMemHandle_t and cudaIpcEventHandle_t bytes), the device, and the
 * layout: rows x row_stride_bytes of f32 logits (row_floats = vocab), then
 * at stamps_off a uint32 stamp per row. The area lives until destroy. */
#define O1_BACKEND_IPC_HANDLE_BYTES 64

struct o1_backend_devout {
	uint8_t mem_handle[O1_BACKEND_IPC_HANDLE_BYTES];
	uint8_t event_handle[O1_BACKEND_IPC_HANDLE_BYTES];
	char pci_bus_id[16];
	uint32_t rows, row_floats, row_stride_bytes;
	uint64_t stamps_off, area_bytes;
};

/* The cap of the default max_sample_pens (12 MiB of entries). */
#define O1_BACKEND_SAMPLE_PENS_DEFAULT_MAX (1u << 20)

/* Graph use, per bucket and overall (o1_backend_graph_stats). */
struct o1_backend_graph_bucket {
	uint32_t batch;		/* the bucket's (padded) batch size */
	bool captured;		/* its graph exists */
	uint32_t kernels;	/* kernel nodes in its graph (kernels a step) */
	uint32_t pdl_edges;	/* of its edges, programmatic ones (PDL) */
	uint64_t hits;		/* steps replayed from its graph */
	uint64_t misses;	/* steps of this bucket run without a graph */
	uint64_t fallbacks;	/* replays that failed, then ran eagerly */
	uint64_t padded_tokens; /* padding rows added to reach batch */
};

/* A context span of the graphs: its longest context and its steps. */
struct o1_backend_graph_span {
	uint32_t len;
	uint64_t steps; /* bucket steps run in it (replayed or not) */
};

struct o1_backend_graph_stats {
	uint32_t n_buckets; /* buckets[i]: summed over the spans */
	uint32_t n_spans;
	uint64_t oversize;	/* decode steps above the largest bucket */
	uint64_t prefill;	/* steps with prefill tokens (eager) */
	uint64_t capture_us;	/* warm-up, capture, instantiate, upload */
	uint64_t capture_bytes; /* device memory the graphs took: free
				 * memory (cudaMemGetInfo) before - after */
	struct o1_backend_graph_bucket buckets[O1_BACKEND_GRAPH_BUCKETS_MAX];
	struct o1_backend_graph_span spans[O1_BACKEND_GRAPH_SPANS_MAX];
};

struct o1_step_seq {
	const int32_t *tokens; /* borrowed for the call: n_tokens ids */
	uint32_t n_tokens;     /* >= 1 */
	uint32_t start_pos;    /* position of tokens[0] */
	const uint32_t *pages; /* borrowed: block table, n_pages ids */
	uint32_t n_pages;
	bool all_logits; /* logits for every new token */
};

/* Logits row `row` of the step (the step's row order) goes to device
 * output area `area`, ring row seq % devout_rows (n_devout <= the step's
 * logits rows): the step writes stamp (seq % devout_rows) = seq, then the
 * row, then records the area's event, all on its stream and before it
 * returns. */
struct o1_step_devout {
	uint32_t row;
	uint32_t area;
	uint32_t seq;
};

struct o1_step {
	const struct o1_step_seq *seqs; /* borrowed for the call */
	uint32_t n_seqs;
	float *logits;	      /* out: logits_rows x vocab floats; may be
			       * NULL when samples is not */
	uint32_t logits_rows; /* capacity, in rows */
	const struct o1_step_devout *devout; /* borrowed; n_devout entries */
	uint32_t n_devout;
	/* Optional sampling (see above), all borrowed for the call: NULL
	 * samples = none. */
	const struct o1_sample_row *sample_rows; /* one per logits row */
	const struct o1_sample_penalty *pens;	 /* n_pens entries */
	uint32_t n_pens;			 /* <= cfg.max_sample_pens */
	struct o1_sample_result *samples;	 /* out: one per logits row */
	/* n_masks bitmasks of o1_sample_mask_words(vocab) words, which the
	 * rows' mask fields index (sample.h); n_masks <= cfg.max_sample_masks */
	const uint32_t *masks;
	uint32_t n_masks;
};

/* What a backend implements. STATE is the backend's own. */
struct o1_backend_ops {
	const char *name;
	/* MODEL is borrowed for the call only (weights are copied/converted).
	 * CFG is complete (defaults resolved) when this is called. */
	int (*create)(const struct o1_model *model,
		      const struct o1_backend_config *cfg, void **state);
	void (*destroy)(void *state);
	int (*step)(void *state, const struct o1_step *step);
	/* step() samples (fills step->samples, which o1_backend_step has
	 * checked) when created with cfg.sampling; false: such a step is
	 * refused before it reaches the backend. */
	bool can_sample;
	/* Optional: NULL = no graphs (all zero). */
	void (*graph_stats)(const void *state,
			    struct o1_backend_graph_stats *out);
	/* Optional: NULL = no graph replays to fail
	 * (o1_backend_fail_replays). */
	int (*fail_replays)(void *state, uint32_t every);
	/* A tensor-parallel rank's FFN and query columns must be multiples
	 * of this (tp_shard.h); 0 = the backend cannot be a rank. */
	uint32_t tp_align;
	/* Optional: NULL = no device outputs (cfg.devout_areas refused). */
	int (*devout)(const void *state, uint32_t area,
		      struct o1_backend_devout *out);
	/* Bytes of one K or V element of the backend's KV cache (a page is
	 * o1_kv_layout_page_elems of them); 0 for a wrapper of other
	 * backends (tensor-parallel). */
	uint32_t kv_elem_bytes;
};

extern const struct o1_backend_ops o1_cpu_backend_ops;

struct o1_backend;

/* "cpu" or "cuda"; -EINVAL otherwise. */
int o1_backend_parse(const char *name, enum o1_backend_kind *out);
const char *o1_backend_name(enum o1_backend_kind kind);
/* -O1_E_UNSUPPORTED (logged "CUDA backend not built/available") for a
 * backend this build lacks, or tensor parallelism it cannot do (a split
 * that does not divide, CUDA without NCCL); -O1_E_CONFIG for a bad CFG.
 * With CFG->tensor_parallel, the backend is tp_backend.h's. */
int o1_backend_create(enum o1_backend_kind kind, const struct o1_model *model,
		      const struct o1_backend_config *cfg,
		      struct o1_backend **out);
void o1_backend_destroy(struct o1_backend *b);
/* Returns 0; -O1_E_CONFIG / -O1_E_CONTEXT / -O1_E_BOUNDS (logged) for a
 * step that breaks the limits or refers to pages or ids out of range,
 * or asks for samples with bad rows (-O1_E_CONFIG: parameters sample.h
 * refuses, a uniform outside [0, 1), sampling not enabled; -O1_E_BOUNDS:
 * a penalty range or id outside its array or the vocabulary, too many
 * penalty entries); nothing is written to the KV cache then. */
int o1_backend_step(struct o1_backend *b, const struct o1_step *step);
/* The KV layout the backend allocated: create the page pool with it. */
const struct o1_kv_layout *o1_backend_kv_layout(const struct o1_backend *b);
const struct o1_backend_config *o1_backend_config(const struct o1_backend *b);
uint32_t o1_backend_vocab_size(const struct o1_backend *b);
/* Whether steps may ask for samples: the backend can sample and was
 * created with cfg.sampling. */
bool o1_backend_can_sample(const struct o1_backend *b);
/* Whether KIND is built and its ops can sample (cfg.sampling allowed). */
bool o1_backend_kind_can_sample(enum o1_backend_kind kind);
/* Bytes one page of layout L takes in a KIND backend's KV cache (each
 * backend says its element size); 0 for a kind this build lacks. */
uint64_t o1_backend_kind_kv_page_bytes(enum o1_backend_kind kind,
				       const struct o1_kv_layout *l);
/* Counters since create (all zero for a backend without graphs). */
void o1_backend_graph_stats(const struct o1_backend *b,
			    struct o1_backend_graph_stats *out);
/* Fault injection (the graph_replay fault of daemon/o1d/faults.h): from
 * the next step on, every EVERY-th graph replay fails as a failed
 * cudaGraphLaunch does: nothing is enqueued, the bucket step runs eagerly
 * over the same inputs (same logits) and counts a fallback. EVERY 0: none;
 * each call starts the count over. -O1_E_UNSUPPORTED (not logged) when the
 * backend replays no graphs: CPU, graphs off, graphs_eager, no bucket
 * captured. Called by the thread that steps, between steps. */
int o1_backend_fail_replays(struct o1_backend *b, uint32_t every);
/* Describes device output area AREA (< cfg.devout_areas). Returns 0,
 * -O1_E_BOUNDS, or -O1_E_UNSUPPORTED for a backend without them. */
int o1_backend_devout(const struct o1_backend *b, uint32_t area,
		      struct o1_backend_devout *out);

#endif

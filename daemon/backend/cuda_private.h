/* What the CUDA backend's files share (private to daemon/backend): the
 * backend's state and the functions each file offers the others.
 *   cuda_backend.c  lifecycle (create: state, streams, KV pool, activations,
 *                   step inputs, sampling buffers, graphs; destroy), the
 *                   step entry and the ops table;
 *   cuda_weights.c  the weight layout in the one device allocation and its
 *                   upload (bf16 matrices or GGUF blocks, f32 norms,
 *                   biases, RoPE tables);
 *   cuda_forward.c  a step on the device: inputs, layers, LM head, sampling,
 *                   eager or through the decode bucket graphs;
 *   cuda_devout.c   device output areas (CUDA IPC) and serving them.
 * The top of cuda_backend.c describes the whole; each file's top, its part.
 * Every function here runs on the thread that steps, bound to cfg.device.
 */
#ifndef O1_CUDA_PRIVATE_H
#define O1_CUDA_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_graphs.h"
#include "cuda_tune.h"
#include "kernels/kernels_cuda.h"
#include "kv_pool.h"
#include "model/model.h"
#include "step_trace.h"

#define ALIGN_BYTES    256
#define HEAD_ROWS_MAX  256 /* LM head rows per chunk */
#define ATT_SPLITS_MAX 32
#define BLAS_WS_BYTES  (32u << 20)
/* bf16 tiles of block-format matrices for products of more than
 * O1_GEMV_MAX_ROWS rows (cuda_forward.c's tile path) */
#define QTILE_BYTES (64u << 20)
/* Row counts the warm-up times for the row map (blas_rows): those above
 * CUDA_ROW_MAP_FROM (the decode buckets' products below it read their
 * weights more than they compute, and have the autotuner), the first
 * CUDA_WARM_ROWS_MAX of them (2,048 tokens a step need 20). */
#define CUDA_ROW_MAP_FROM  256
#define CUDA_WARM_ROWS_MAX 64

/* A matrix kept in GGUF block formats (cuda_weights.c): the output rows
 * [col0, col0 + rows) of a product come from part i, rows of whole blocks
 * of its type. A fused matrix (QKV, gate/up) whose tensors have different
 * types has one part per run of one type; n_parts 0: the matrix is bf16. */
#define CUDA_QPARTS_MAX 3

struct cuda_qpart {
	const void *w; /* in the weight allocation */
	enum o1_quant_type type;
	uint32_t rows, col0;
	uint64_t row_bytes;
};

struct cuda_qmat {
	struct cuda_qpart part[CUDA_QPARTS_MAX];
	uint32_t n_parts;
};

struct cuda_layer {
	float *attn_norm, *ffn_norm, *bqkv; /* f32; bqkv NULL without bias */
	uint16_t *wqkv, *wo, *wgu, *wdown;  /* bf16 [out, in]; NULL when in
					     * blocks (the qmat below) */
	struct cuda_qmat qqkv, qo, qgu, qdown;
};

/* A device output area: one allocation, rows then stamps (backend.h). */
struct cuda_devout {
	void *base; /* owned */
	cudaEvent_t ev;
	struct o1_backend_devout desc;
};

/* Step inputs, the same layout on the host (pinned) and the device. */
struct cuda_inputs {
	int32_t *ids, *pos;
	uint32_t *slots, *rows, *q_off, *start, *tables;
};

/* Sampling's buffers (cfg.sampling, rank 0 only): rows, penalties and
 * results on the device with pinned host mirrors of the same layout, and
 * the kernel's scratch (device only). */
struct cuda_sample_bufs {
	struct o1_sample_row *rows;
	struct o1_sample_penalty *pens;
	struct o1_sample_result *res;
	uint32_t *masks; /* cfg.max_sample_masks token bitmasks */
};

struct cuda_sampling {
	void *dev, *host; /* owned: one allocation each */
	struct cuda_sample_bufs d, h;
	void *scratch; /* in dev; NULL when the rows fit in shared memory */
	size_t scratch_bytes;
	uint32_t max_rows; /* logits rows a step may have */
};

struct cuda_state {
	struct o1_model_desc d;
	struct o1_backend_config cfg;
	struct o1_attn_decode_tune attn_tune; /* cfg.cuda_attn_*, once */
	struct o1_kv_layout kvl;
	cudaStream_t stream;
	cublasHandle_t blas;
	void *weights; /* owned: the one weight allocation */
	uint16_t *embd, *out_w; /* bf16; NULL when in blocks (qembd, qout) */
	struct cuda_qmat qembd, qout;
	uint32_t *qw_count; /* in weights: gemm_qw's split counters (zero) */
	uint16_t *qtile;	 /* in weights: QTILE_BYTES, when any block
				  * matrix; NULL otherwise */
	uint64_t weight_bytes;	 /* of the weights allocation */
	uint32_t n_block_mats; /* matrices kept in blocks */
	float *out_norm, *inv_freq;
	float rope_scale;
	struct cuda_layer *layers; /* host array, n_layers */
	uint16_t *kv;		   /* owned: the pool, bf16 */
	void *arena;		   /* owned: activations below */
	float *x, *o, *qkv, *q, *gu, *logits, *scratch;
	uint16_t *h, *att, *act;
	/* att quantized by the decode attention for the O product, up to
	 * O1_GEMV_MAX_ROWS rows (cuda_forward.c's att_q) */
	void *att_q;
	void *blas_ws;
	uint64_t scratch_floats;
	void *in_dev, *in_host; /* owned: inputs, device and pinned host */
	struct cuda_inputs dev, host;
	uint64_t in_bytes;
	uint32_t max_blocks, head_rows;
	uint32_t scratch_page;	       /* = cfg.n_pages: padding rows' KV */
	struct o1_cuda_graphs *graphs; /* NULL without bucketing */
	struct cuda_devout *devout;    /* cfg.devout_areas, owned */
	uint32_t *stamp_host; /* pinned: one slot per devout entry of a step */
	bool pdl,
	    fused;     /* decode steps: PDL, fused products (cuda_forward.c) */
	bool sampling; /* cfg.sampling on a rank that has the LM head */
	struct cuda_sampling smp;
	struct cuda_tune tune; /* cuda_tune.c's picks */
	/* o1_cuda_forward_warm's row counts above CUDA_ROW_MAP_FROM,
	 * ascending, and for each layer product kind the index of the count
	 * it runs at instead (itself, or a larger count measured faster:
	 * blas_rows) */
	uint32_t warm_rows[CUDA_WARM_ROWS_MAX];
	uint8_t warm_use[CUDA_KIND_HEAD][CUDA_WARM_ROWS_MAX];
	uint32_t n_warm;
	/* the step's phases, logged when slow (step_trace.h); trace_info:
	 * the paths cuda_forward.c took (bucket, products, attention) */
	struct o1_step_trace trace;
	struct o1_step_info trace_info;
};

/* A step flattened into the pinned inputs (cuda_forward.c): its token
 * rows, the rows that want logits, and the longest context. */
struct flat {
	uint32_t tokens, rows, max_len;
};

/* Next ALIGN_BYTES-aligned piece of BYTES at *OFF past BASE (BASE 0 just
 * measures: integer arithmetic, no pointer is formed). */
static inline void *cuda_carve(uintptr_t base, uint64_t *off, uint64_t bytes)
{
	uintptr_t p = base + *off;

	*off += (bytes + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES;
	return (void *)p;
}

static inline uint64_t cuda_qkv_rows(const struct o1_model_desc *d)
{
	return (uint64_t)(d->n_heads + 2 * d->n_kv_heads) * d->head_dim;
}

/* cuda_backend.c: counted allocations (logged on failure as WHAT), a
 * cuBLAS status as an error, and the wait for the stream (through the
 * tensor-parallel link when there is one: it gives up once another rank
 * failed). */
int o1_cuda_dev_alloc(void **p, uint64_t bytes, const char *what);
int o1_cuda_host_alloc(void **p, uint64_t bytes, const char *what);
int o1_cuda_blas_check(cublasStatus_t st, const char *what);
int o1_cuda_sync(struct cuda_state *s);

/* cuda_weights.c: lays out s->weights (one allocation) and uploads M's
 * tensors and the RoPE tables into it: matrices in GGUF block formats
 * as they are (cfg.dequantize: bf16), the others as bf16. -O1_E_SHAPE
 * (logged with the tensor) for a block matrix whose rows are not whole
 * blocks. */
int o1_cuda_weights_load(struct cuda_state *s, const struct o1_model *m);

/* cuda_forward.c: flattens ST into the pinned inputs and enqueues it (no
 * wait); *ROWS = the rows that want logits. The bucket body and input
 * preparation of cuda_graphs.h (CTX: the state). */
int o1_cuda_forward_step(struct cuda_state *s, const struct o1_step *st,
			 uint32_t *rows);
int o1_cuda_forward_bucket(void *ctx, uint32_t batch, uint32_t max_len);
int o1_cuda_forward_prepare(void *ctx, uint32_t batch);
/* cuda_forward.c, for the autotuner: enqueues product KIND of layer L
 * (the LM head: L ignored) over T rows as a step of T rows runs it, with
 * what goes with it on that path (unfused: the RMSNorm before, RoPE and
 * the KV write or SwiGLU after), over the inputs o1_cuda_forward_prepare
 * uploaded for T rows. */
int o1_cuda_forward_stage(struct cuda_state *s, enum cuda_kind kind,
			  uint32_t l, uint32_t t);
/* cuda_forward.c, at create: runs every product at every row count a step
 * can give cuBLAS, once (*SHAPES: how many counts), so that no step after
 * READY pays cuBLAS's first use of a shape. */
int o1_cuda_forward_warm(struct cuda_state *s, uint32_t *shapes);

/* cuda_devout.c: the areas of cfg.devout_areas (alloc at create, free
 * accepts a partly made set), serving a step's entries whose rows are [C,
 * C + N) of its logits rows, now in the device logits (marking their areas
 * in *TOUCHED), recording the touched areas' events, and an area's
 * description (the ops table's devout). */
int o1_cuda_devout_alloc(struct cuda_state *s);
void o1_cuda_devout_free(struct cuda_state *s);
int o1_cuda_devout_rows(struct cuda_state *s, const struct o1_step *st,
			uint32_t c, uint32_t n, uint64_t *touched);
int o1_cuda_devout_record(struct cuda_state *s, uint64_t touched);
int o1_cuda_devout_get(const void *state, uint32_t area,
		       struct o1_backend_devout *out);

#endif

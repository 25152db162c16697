/* The CUDA backend: the CPU backend's forward (cpu_backend.c) on the
 * device, bf16 weights and KV, f32 residual stream and accumulation.
 *
 * Create converts every weight once into one device allocation (see
 * cuda_backend.h), preallocates the KV pool, the activations and the
 * step's inputs, and counts each allocation. A step:
 *   1. flattens the batch on the host into a pinned buffer (ids, positions,
 *      KV slots, logits rows, q offsets, start positions, block tables),
 *      refusing out-of-range token ids before anything runs;
 *   2. uploads it with one async copy into fixed device buffers;
 *   3. runs the layers: RMSNorm (fused with the previous residual add),
 *      one fused QKV product, RoPE fused with the bias and the KV page
 *      write, paged attention (attention.cu: chunks of >= 16 new tokens on
 *      the tiled tensor-core kernel, other rows on the row kernel), O
 *      product, RMSNorm + residual, one fused gate/up product, SwiGLU,
 *      down product;
 *   4. final RMSNorm (with the last residual add) and LM head over the rows
 *      that want logits, in chunks of head_rows, each copied to the host
 *      (and sampled on the device first, when the step asks: below).
 * Everything is enqueued on one stream; the only host synchronization is
 * the logits copy at the end, and no step allocates. Products go through
 * cublasGemmEx with bf16 inputs, f32 compute and f32 outputs, with the
 * workspace set at create (so cuBLAS never allocates, in a capture too).
 *
 * CUDA Graphs (cuda_graphs.h, with graphs_enabled): a decode step of n
 * sequences runs as the bucket step of the smallest bucket B >= n: steps
 * 3-4 above over B rows, the last n - B being padding rows (token 0 at
 * position 0 of the reserved scratch page n_pages, which exists beyond the
 * pool the scheduler sees: padding never writes a real page), LM head over
 * the B rows into the device logits, then the n real rows are copied out.
 * The bucket step takes every per-step value from the uploaded inputs; its
 * attention is launched for max_len = max_context_tokens (the split count
 * is fixed per bucket, each sequence spreads its own length over the
 * splits on the device: attention.cu), so it replays as a graph. graphs_eager
 * runs the same bucket steps without graphs: the bitwise reference. A
 * replay whose launch fails (or is failed on purpose: fail_replays, the
 * graph_replay fault) runs the bucket step eagerly over the same inputs.
 * Limits: head_dim even and <= 256, Hq/Hkv <= 32 (attention.cu).
 *
 * Decode steps (at most O1_GEMV_MAX_ROWS tokens, the gemv path), on one
 * GPU (not a tensor-parallel rank), for models whose products all have K
 * a multiple of 8 (so all are gemv.cu's), eagerly and in the captured
 * graphs alike, bitwise as the plain path:
 * - our kernels are launched with programmatic dependent launch (PDL,
 *   kernels_cuda.h) on compute capability 9.0 and later unless
 *   cfg.cuda_no_pdl: each may start during the previous kernel (the
 *   products prefetch their weights into L2 meanwhile) and waits for it
 *   before touching activations;
 * - unless cfg.cuda_no_fusion, a layer is 6 or 7 kernels instead of 9 or
 *   10 (gemv.cu's fused products): QKV product over the RMSNorm of the
 *   residual stream x, RoPE + KV write, attention (and merge), x += O
 *   product, gate/up product over the RMSNorm of x with SwiGLU in its
 *   epilogue, x += down product; the last layer's down product goes to
 *   s->o as unfused, so the head is the same either way.
 * cuBLAS kernels and every kernel of larger steps launch as before.
 *
 * Device: create, step and destroy bind the calling thread to cfg.device
 * (cudaSetDevice), so the backend may be created on one thread and
 * stepped on another.
 *
 * As a tensor-parallel rank (cfg.tp_size, tp_shard.h, tp_group.h): the
 * model is the rank's shard; the O and down products (f32, in s->o) are
 * partial sums, all-reduced through cfg.tp_link on the stream (NCCL, so
 * the collectives are captured in the bucket graphs) before the next
 * RMSNorm adds them to the residual stream; only rank 0 holds the LM head
 * and copies logits. Every wait goes through the link (it returns once any
 * rank failed instead of waiting on a collective for ever), and the
 * collectives are done before the blocking copy of the logits. A graph
 * launch that fails is an error, not an eager fallback: every rank must
 * replay the same captured collectives.
 *
 * Sampling (cfg.sampling, kernels/sample.h, on rank 0 of a tensor-parallel
 * group, the rank with the LM head): create makes one device allocation
 * for max_batch_tokens sample rows, cfg.max_sample_pens penalty entries,
 * max_batch_tokens results and sample.cu's scratch for head_rows rows, and
 * pinned mirrors of the rows, penalties and results. A step with samples
 * uploads its rows and penalties after its inputs (two async copies),
 * samples each LM head chunk right after its head (and its device
 * outputs) with o1_sample_rows_cuda over the device logits, copies the
 * results (176 bytes a row) to the pinned mirror, and the logits only
 * when the step brings a logits buffer; after the step's one
 * synchronization the results are copied to step->samples. A bucket
 * graph of a backend that samples holds the sampling kernel after the
 * head, over the fixed row and penalty buffers, the padding rows greedy
 * ones (all zero: u 0, no penalties, no logprobs); a decode step without
 * samples on such a backend replays the same graph over greedy rows and
 * ignores the results (the daemon asks for samples on every step when
 * it samples in the backend).
 *
 * Device outputs (cfg.devout_areas): each area is its own cudaMalloc made
 * at create (a CUDA IPC handle maps a whole allocation, so a client sees
 * its area and nothing else) with an interprocess event. A step's devout
 * entries are served right after the LM head of the chunk holding their
 * row (after the graph launch for a bucket step: outside the graph): per
 * entry an async copy of the 4-byte stamp from a pinned staging slot,
 * then a device-to-device copy of the row; then each touched area's event
 * is recorded. All on the one stream, before the step's synchronization,
 * so the staging slots are not reused while a copy may read them.
 */
#include "cuda_backend.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_graphs.h"
#include "kernels/cuda_util.h"
#include "common/error.h"
#include "kernels/kernels_cuda.h"
#include "common/log.h"
#include "kernels/rope.h"

#define ALIGN_BYTES    256
#define HEAD_ROWS_MAX  256 /* LM head rows per chunk */
#define ATT_SPLITS_MAX 32
#define BLAS_WS_BYTES  (32u << 20)

static _Atomic uint64_t alloc_count;

struct cuda_layer {
	float *attn_norm, *ffn_norm, *bqkv; /* f32; bqkv NULL without bias */
	uint16_t *wqkv, *wo, *wgu, *wdown;  /* bf16 [out, in] */
};

/* A device output area: one allocation, rows then stamps (backend.h). */
struct cuda_devout {
	void *base; /* owned */
	cudaEvent_t ev;
	struct o1_backend_devout desc;
};

_Static_assert(sizeof(cudaIpcMemHandle_t) == O1_BACKEND_IPC_HANDLE_BYTES,
	       "IPC memory handle size");
_Static_assert(sizeof(cudaIpcEventHandle_t) == O1_BACKEND_IPC_HANDLE_BYTES,
	       "IPC event handle size");

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
	struct o1_kv_layout kvl;
	cudaStream_t stream;
	cublasHandle_t blas;
	void *weights; /* owned: the one weight allocation */
	uint16_t *embd, *out_w;
	float *out_norm, *inv_freq;
	float rope_scale;
	struct cuda_layer *layers; /* host array, n_layers */
	uint16_t *kv;		   /* owned: the pool, bf16 */
	void *arena;		   /* owned: activations below */
	float *x, *o, *qkv, *q, *gu, *logits, *scratch;
	uint16_t *h, *att, *act;
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
	bool pdl, fused;      /* decode steps: PDL, fused products (the top) */
	bool sampling;	      /* cfg.sampling on a rank that has the LM head */
	struct cuda_sampling smp;
};

uint64_t o1_cuda_backend_alloc_count(void)
{
	return atomic_load(&alloc_count);
}

static int dev_alloc(void **p, uint64_t bytes, const char *what)
{
	int err = O1_CUDA_CHECK(cudaMalloc(p, bytes ? bytes : 1));

	atomic_fetch_add(&alloc_count, 1);
	if (err)
		o1_err("cuda backend: cannot allocate %.1f MiB for %s",
		       bytes / 1048576.0, what);
	return err;
}

static int host_alloc(void **p, uint64_t bytes, const char *what)
{
	int err = O1_CUDA_CHECK(cudaMallocHost(p, bytes ? bytes : 1));

	atomic_fetch_add(&alloc_count, 1);
	if (err)
		o1_err("cuda backend: cannot pin %.1f MiB for %s",
		       bytes / 1048576.0, what);
	return err;
}

/* Next ALIGN_BYTES-aligned piece of BYTES at *OFF past BASE (BASE 0 just
 * measures: integer arithmetic, no pointer is formed). */
static void *carve(uintptr_t base, uint64_t *off, uint64_t bytes)
{
	uintptr_t p = base + *off;

	*off += (bytes + ALIGN_BYTES - 1) / ALIGN_BYTES * ALIGN_BYTES;
	return (void *)p;
}

static uint64_t qkv_rows(const struct o1_model_desc *d)
{
	return (uint64_t)(d->n_heads + 2 * d->n_kv_heads) * d->head_dim;
}

/* Assigns every weight pointer at BASE; returns the bytes needed. */
static uint64_t layout_weights(struct cuda_state *s, uintptr_t base)
{
	const struct o1_model_desc *d = &s->d;
	uint64_t off = 0, dim = d->dim, f = d->ffn_dim;
	uint64_t qd = (uint64_t)d->n_heads * d->head_dim;

	s->embd = carve(base, &off, d->vocab_size * dim * 2);
	s->out_norm = carve(base, &off, dim * 4);
	/* Only rank 0 of a tensor-parallel group runs the LM head. */
	s->out_w = d->tied_embeddings ? s->embd
		   : s->cfg.tp_rank
		       ? NULL
		       : carve(base, &off, d->vocab_size * dim * 2);
	s->inv_freq = carve(base, &off, d->rope.dim / 2 * 4);
	for (uint32_t l = 0; l < d->n_layers; l++) {
		struct cuda_layer *y = &s->layers[l];

		y->attn_norm = carve(base, &off, dim * 4);
		y->ffn_norm = carve(base, &off, dim * 4);
		y->bqkv =
		    d->qkv_bias ? carve(base, &off, qkv_rows(d) * 4) : NULL;
		y->wqkv = carve(base, &off, qkv_rows(d) * dim * 2);
		y->wo = carve(base, &off, dim * qd * 2);
		y->wgu = carve(base, &off, 2 * f * dim * 2);
		y->wdown = carve(base, &off, dim * f * 2);
	}
	return off;
}

/* Where a tensor goes: its device address and whether it becomes bf16. */
struct weight_dst {
	void *p;
	bool bf16;
};

static struct weight_dst layer_dst(const struct cuda_state *s,
				   enum o1_tensor_role r, uint32_t l)
{
	const struct cuda_layer *y = &s->layers[l];
	uint64_t dim = s->d.dim, hd = s->d.head_dim, f = s->d.ffn_dim;
	uint64_t q = s->d.n_heads * hd, kv = s->d.n_kv_heads * hd;

	switch (r) {
	case O1_T_ATTN_NORM:
		return (struct weight_dst){y->attn_norm, false};
	case O1_T_FFN_NORM:
		return (struct weight_dst){y->ffn_norm, false};
	case O1_T_WQ:
		return (struct weight_dst){y->wqkv, true};
	case O1_T_WK:
		return (struct weight_dst){y->wqkv + q * dim, true};
	case O1_T_WV:
		return (struct weight_dst){y->wqkv + (q + kv) * dim, true};
	case O1_T_BQ:
		return (struct weight_dst){y->bqkv, false};
	case O1_T_BK:
		return (struct weight_dst){y->bqkv ? y->bqkv + q : NULL, false};
	case O1_T_BV:
		return (struct weight_dst){y->bqkv ? y->bqkv + q + kv : NULL,
					   false};
	case O1_T_WO:
		return (struct weight_dst){y->wo, true};
	case O1_T_W_GATE:
		return (struct weight_dst){y->wgu, true};
	case O1_T_W_UP:
		return (struct weight_dst){y->wgu + f * dim, true};
	case O1_T_W_DOWN:
		return (struct weight_dst){y->wdown, true};
	default:
		return (struct weight_dst){NULL, false};
	}
}

static const enum o1_tensor_role layer_roles[] = {
    O1_T_ATTN_NORM, O1_T_WQ, O1_T_WK,	    O1_T_WV,	 O1_T_BQ,   O1_T_BK,
    O1_T_BV,	    O1_T_WO, O1_T_FFN_NORM, O1_T_W_GATE, O1_T_W_UP, O1_T_W_DOWN,
};

/* Host and device f32 staging for one tensor at a time. */
struct staging {
	float *host, *dev;
	uint64_t elems;
};

/* Copies through the backend's stream (a plain cudaMemcpy runs on the
 * legacy stream, which a non-blocking stream does not wait for) and waits,
 * so the host staging buffer can be refilled. */
static int upload(struct cuda_state *s, const struct o1_model *m,
		  const struct o1_tensor *t, struct weight_dst dst,
		  struct staging *st)
{
	uint64_t n = o1_tensor_elements(t);
	int err = o1_tensor_read_f32(m, t, st->host);

	if (err) {
		o1_err("cuda backend: reading %s (layer %d): %s",
		       o1_tensor_role_name(t->role), t->layer,
		       o1_strerror(err));
		return err;
	}
	err = O1_CUDA_CHECK(cudaMemcpyAsync(dst.bf16 ? st->dev : dst.p,
					    st->host, n * 4,
					    cudaMemcpyHostToDevice, s->stream));
	if (!err && dst.bf16)
		err =
		    o1_convert_bf16_from_f32_cuda(dst.p, st->dev, n, s->stream);
	return err ? err : O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

static int upload_role(struct cuda_state *s, const struct o1_model *m,
		       enum o1_tensor_role r, int layer, struct weight_dst dst,
		       struct staging *st)
{
	const struct o1_tensor *t = o1_model_tensor(m, r, layer);

	if (!t || !dst.p)
		return 0;
	if (o1_tensor_elements(t) > st->elems) {
		o1_err("cuda backend: %s (layer %d) has %llu elements, more "
		       "than its slot",
		       o1_tensor_role_name(r), layer,
		       (unsigned long long)o1_tensor_elements(t));
		return -O1_E_SHAPE;
	}
	return upload(s, m, t, dst, st);
}

static int upload_all(struct cuda_state *s, const struct o1_model *m,
		      struct staging *st)
{
	int err = upload_role(s, m, O1_T_TOKEN_EMBD, -1,
			      (struct weight_dst){s->embd, true}, st);

	if (!err)
		err = upload_role(s, m, O1_T_OUTPUT_NORM, -1,
				  (struct weight_dst){s->out_norm, false}, st);
	if (!err && !s->d.tied_embeddings && s->out_w)
		err = upload_role(s, m, O1_T_OUTPUT, -1,
				  (struct weight_dst){s->out_w, true}, st);
	for (uint32_t l = 0; !err && l < s->d.n_layers; l++)
		for (size_t i = 0;
		     !err && i < sizeof(layer_roles) / sizeof(*layer_roles);
		     i++)
			err = upload_role(s, m, layer_roles[i], (int)l,
					  layer_dst(s, layer_roles[i], l), st);
	return err;
}

static uint64_t largest_tensor(const struct o1_model *m)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < m->n_tensors; i++)
		if (o1_tensor_elements(&m->tensors[i]) > n)
			n = o1_tensor_elements(&m->tensors[i]);
	return n;
}

/* RoPE tables on the host (rope.h), then to the device. */
static int setup_rope(struct cuda_state *s, const struct o1_model *m,
		      float *host)
{
	const struct o1_tensor *t = o1_model_tensor(m, O1_T_ROPE_FREQS, -1);
	float *div = NULL, *inv = host;
	int err = 0;

	if (t) {
		div = host + s->d.rope.dim / 2;
		err = o1_tensor_read_f32(m, t, div);
	}
	if (!err)
		err = o1_rope_inv_freq(&s->d.rope, div, inv, &s->rope_scale);
	if (err)
		return err;
	err = O1_CUDA_CHECK(cudaMemcpyAsync(s->inv_freq, inv,
					    s->d.rope.dim / 2 * sizeof(float),
					    cudaMemcpyHostToDevice, s->stream));
	return err ? err : O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

static int load_weights(struct cuda_state *s, const struct o1_model *m)
{
	uint64_t bytes = layout_weights(s, 0);
	struct staging st = {NULL, NULL, largest_tensor(m)};
	int err;

	if (st.elems < s->d.rope.dim)
		st.elems = s->d.rope.dim;
	o1_info("cuda backend: %.1f MiB of weights (bf16 matrices, f32 "
		"norms and biases)",
		bytes / 1048576.0);
	err = dev_alloc(&s->weights, bytes, "weights");
	if (err)
		return err;
	layout_weights(s, (uintptr_t)s->weights);
	err = O1_CUDA_CHECK(cudaMemsetAsync(s->weights, 0, bytes, s->stream));
	st.host = malloc(st.elems * sizeof(float));
	if (!err && !st.host)
		err = -ENOMEM;
	if (!err)
		err = dev_alloc((void **)&st.dev, st.elems * 4, "staging");
	if (!err)
		err = upload_all(s, m, &st);
	if (!err)
		err = setup_rope(s, m, st.host);
	if (st.dev)
		cudaFree(st.dev);
	free(st.host);
	return err;
}

/* The pool plus one scratch page (padding rows of bucket steps). */
static int alloc_kv(struct cuda_state *s)
{
	struct o1_kv_layout l = s->kvl;
	uint64_t elems;
	int err;

	l.n_pages++;
	err = o1_kv_layout_check(&l, &elems);

	if (err)
		return err;
	err = dev_alloc((void **)&s->kv, elems * 2, "KV pool");
	return err ? err
		   : O1_CUDA_CHECK(
			 cudaMemsetAsync(s->kv, 0, elems * 2, s->stream));
}

/* Assigns every activation pointer at BASE; returns the bytes needed. */
static uint64_t layout_arena(struct cuda_state *s, uintptr_t base)
{
	const struct o1_model_desc *d = &s->d;
	uint64_t t = s->cfg.max_batch_tokens, off = 0, f = d->ffn_dim;
	uint64_t qd = (uint64_t)d->n_heads * d->head_dim;

	s->x = carve(base, &off, t * d->dim * 4);
	s->o = carve(base, &off, t * d->dim * 4);
	s->h = carve(base, &off, t * d->dim * 2);
	s->qkv = carve(base, &off, t * qkv_rows(d) * 4);
	s->q = carve(base, &off, t * qd * 4);
	s->att = carve(base, &off, t * qd * 2);
	s->gu = carve(base, &off, t * 2 * f * 4);
	s->act = carve(base, &off, t * f * 2);
	s->logits =
	    carve(base, &off, (uint64_t)s->head_rows * d->vocab_size * 4);
	s->scratch = carve(base, &off, s->scratch_floats * 4);
	s->blas_ws = carve(base, &off, BLAS_WS_BYTES);
	return off;
}

static uint64_t layout_inputs(struct cuda_state *s, uintptr_t base,
			      struct cuda_inputs *in)
{
	uint64_t t = s->cfg.max_batch_tokens, n = s->cfg.max_seqs, off = 0;

	in->ids = carve(base, &off, t * 4);
	in->pos = carve(base, &off, t * 4);
	in->slots = carve(base, &off, t * 4);
	in->rows = carve(base, &off, t * 4);
	in->q_off = carve(base, &off, (n + 1) * 4);
	in->start = carve(base, &off, n * 4);
	in->tables = carve(base, &off, n * s->max_blocks * 4);
	return off;
}

static int alloc_buffers(struct cuda_state *s)
{
	uint64_t bytes;
	int err;

	s->head_rows = s->cfg.max_batch_tokens < HEAD_ROWS_MAX
			   ? s->cfg.max_batch_tokens
			   : HEAD_ROWS_MAX;
	s->scratch_floats = o1_attention_cuda_scratch_floats(
	    s->cfg.max_seqs, s->d.n_heads, s->d.head_dim, ATT_SPLITS_MAX);
	bytes = layout_arena(s, 0);
	err = dev_alloc(&s->arena, bytes, "activations");
	if (err)
		return err;
	layout_arena(s, (uintptr_t)s->arena);
	s->in_bytes = layout_inputs(s, 0, &s->dev);
	err = dev_alloc(&s->in_dev, s->in_bytes, "step inputs");
	if (!err)
		err = host_alloc(&s->in_host, s->in_bytes, "step inputs");
	if (err)
		return err;
	layout_inputs(s, (uintptr_t)s->in_dev, &s->dev);
	layout_inputs(s, (uintptr_t)s->in_host, &s->host);
	return 0;
}

/* Assigns sampling's rows, penalties and results at BASE (device or
 * host: the same layout), and the scratch after them when SCRATCH; returns
 * the bytes needed. */
static uint64_t layout_sampling(struct cuda_state *s, uintptr_t base,
				struct cuda_sample_bufs *b, bool scratch)
{
	struct cuda_sampling *m = &s->smp;
	uint64_t off = 0;

	b->rows = carve(base, &off, (uint64_t)m->max_rows * sizeof(*b->rows));
	b->pens = carve(base, &off,
			(uint64_t)s->cfg.max_sample_pens * sizeof(*b->pens));
	b->res = carve(base, &off, (uint64_t)m->max_rows * sizeof(*b->res));
	if (scratch && m->scratch_bytes)
		m->scratch = carve(base, &off, m->scratch_bytes);
	return off;
}

/* Sampling's buffers, made once: a step has at most max_batch_tokens
 * logits rows (all_logits), sampled head_rows at a time (a bucket's rows
 * are at most head_rows too). A zero-row call checks that sample.cu takes
 * the vocabulary. */
static int alloc_sampling(struct cuda_state *s)
{
	struct cuda_sampling *m = &s->smp;
	uint64_t dev_bytes, host_bytes;
	int err;

	s->sampling = s->cfg.sampling && !s->cfg.tp_rank;
	if (!s->sampling)
		return 0;
	m->max_rows = s->cfg.max_batch_tokens;
	m->scratch_bytes =
	    o1_sample_rows_cuda_scratch_bytes(s->head_rows, s->d.vocab_size);
	dev_bytes = layout_sampling(s, 0, &m->d, true);
	host_bytes = layout_sampling(s, 0, &m->h, false);
	err = dev_alloc(&m->dev, dev_bytes, "sampling");
	err = err ? err : host_alloc(&m->host, host_bytes, "sampling");
	if (err)
		return err;
	layout_sampling(s, (uintptr_t)m->dev, &m->d, true);
	layout_sampling(s, (uintptr_t)m->host, &m->h, false);
	err = o1_sample_rows_cuda(m->d.res, s->logits, 0, s->d.vocab_size,
				  m->d.rows, m->d.pens, m->scratch,
				  m->scratch_bytes, s->stream);
	if (err) {
		o1_err("cuda backend: cannot sample rows of %u logits",
		       s->d.vocab_size);
		return -O1_E_UNSUPPORTED;
	}
	o1_info("cuda backend: sampling on the device (%.1f MiB, %u rows, %u "
		"penalty entries)",
		dev_bytes / 1048576.0, m->max_rows, s->cfg.max_sample_pens);
	return 0;
}

static int blas_check(cublasStatus_t st, const char *what)
{
	if (st == CUBLAS_STATUS_SUCCESS)
		return 0;
	o1_err("cublas: %s: %s", what, cublasGetStatusString(st));
	return -O1_E_CUDA;
}

static int setup_streams(struct cuda_state *s)
{
	int err = O1_CUDA_CHECK(
	    cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));

	if (!err)
		err = blas_check(cublasCreate(&s->blas), "create");
	if (!err)
		err = blas_check(cublasSetStream(s->blas, s->stream),
				 "set stream");
	return err;
}

/* Waits for the stream: through the tensor-parallel link when there is
 * one (it gives up once another rank failed). */
static int sync_stream(struct cuda_state *s)
{
	const struct o1_tp_link *k = &s->cfg.tp_link;

	if (k->wait)
		return k->wait(k->ctx, s->stream);
	return O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

/* A rank's collectives must be done before a copy to pageable memory,
 * which blocks the thread until the stream gets there. */
static int settle(struct cuda_state *s)
{
	return s->cfg.tp_link.wait ? sync_stream(s) : 0;
}

static void free_devout(struct cuda_state *s)
{
	for (uint32_t i = 0; s->devout && i < s->cfg.devout_areas; i++) {
		if (s->devout[i].ev)
			cudaEventDestroy(s->devout[i].ev);
		cudaFree(s->devout[i].base);
	}
	free(s->devout);
	cudaFreeHost(s->stamp_host);
}

static void cuda_destroy(void *state)
{
	struct cuda_state *s = state;

	if (!s)
		return;
	cudaSetDevice((int)s->cfg.device);
	cudaGetLastError();
	if (s->stream)
		sync_stream(s);
	free_devout(s);
	o1_cuda_graphs_destroy(s->graphs);
	if (s->blas)
		cublasDestroy(s->blas);
	if (s->stream)
		cudaStreamDestroy(s->stream);
	cudaFreeHost(s->smp.host);
	cudaFree(s->smp.dev);
	cudaFreeHost(s->in_host);
	cudaFree(s->in_dev);
	cudaFree(s->arena);
	cudaFree(s->kv);
	cudaFree(s->weights);
	free(s->layers);
	free(s);
}

/* What attention.cu and rope.cu support. */
static int check_model(const struct o1_model_desc *d)
{
	uint32_t rot = d->rope.dim ? d->rope.dim : d->head_dim;

	if (d->head_dim % 2 || d->head_dim > 256 || !d->n_kv_heads ||
	    d->n_heads % d->n_kv_heads || d->n_heads / d->n_kv_heads > 32 ||
	    rot > d->head_dim) {
		o1_err("cuda backend: unsupported shape: %u heads, %u kv "
		       "heads, head_dim %u, rope dim %u (head_dim must be even "
		       "and <= 256, at most 32 query heads per kv head)",
		       d->n_heads, d->n_kv_heads, d->head_dim, rot);
		return -O1_E_UNSUPPORTED;
	}
	return 0;
}

/* Binds the calling thread to the backend's device. */
static int use_device(const struct cuda_state *s)
{
	return O1_CUDA_CHECK(cudaSetDevice((int)s->cfg.device));
}

/* How decode steps run (see the top). Both need every product's K a
 * multiple of 8, so that a decode step's products are all gemv.cu's (the
 * PDL chain then holds our kernels only, no cuBLAS ones), and neither
 * applies to a tensor-parallel rank (its O and down products are partial
 * sums, summed by collectives between the kernels) or when configured
 * off. PDL: compute capability 9.0 and later. Fused products: the
 * normalized input within O1_GEMV_NORM_MAX_K. */
static int pick_decode(struct cuda_state *s)
{
	const struct o1_model_desc *d = &s->d;
	uint64_t qd = (uint64_t)d->n_heads * d->head_dim;
	bool ok = !s->cfg.tp_size && d->dim % 8 == 0 && qd % 8 == 0 &&
		  d->ffn_dim % 8 == 0;
	int major = 0;
	int err = O1_CUDA_CHECK(cudaDeviceGetAttribute(
	    &major, cudaDevAttrComputeCapabilityMajor, (int)s->cfg.device));

	s->pdl = !err && ok && major >= 9 && !s->cfg.cuda_no_pdl;
	s->fused = ok && !s->cfg.cuda_no_fusion && d->dim <= O1_GEMV_NORM_MAX_K;
	if (!err)
		o1_info("cuda backend: decode steps: PDL %s, fused products %s",
			s->pdl ? "on" : "off", s->fused ? "on" : "off");
	return err;
}

/* Whether a step of ROWS rows (or a head chunk of ROWS rows) launches
 * with PDL. */
static bool step_pdl(const struct cuda_state *s, uint32_t rows)
{
	return s->pdl && rows <= O1_GEMV_MAX_ROWS;
}

/* Whether a step of ROWS rows runs the fused products. */
static bool step_fused(const struct cuda_state *s, uint32_t rows)
{
	return s->fused && rows <= O1_GEMV_MAX_ROWS;
}

static int init_state(struct cuda_state *s, const struct o1_model *m,
		      const struct o1_backend_config *cfg)
{
	int err = o1_cuda_probe(), n = 0;

	if (err) {
		o1_err("cuda backend: no CUDA device available");
		return err;
	}
	s->cfg = *cfg;
	err = O1_CUDA_CHECK(cudaGetDeviceCount(&n));
	if (!err && cfg->device >= (uint32_t)n) {
		o1_err("cuda backend: no device cuda:%u (%d devices)",
		       cfg->device, n);
		return -O1_E_CONFIG;
	}
	if (!err && cfg->tp_size && !cfg->tp_link.sum) {
		o1_err("cuda backend: tensor-parallel rank %u without a link",
		       cfg->tp_rank);
		return -O1_E_CONFIG;
	}
	err = err ? err : use_device(s);
	if (err)
		return err;
	s->d = m->desc;
	if (!s->d.rope.dim)
		s->d.rope.dim = s->d.head_dim;
	err = pick_decode(s);
	if (err)
		return err;
	s->kvl = (struct o1_kv_layout){cfg->n_pages, m->desc.n_layers,
				       m->desc.n_kv_heads, cfg->page_tokens,
				       m->desc.head_dim};
	s->max_blocks =
	    (cfg->max_context_tokens + cfg->page_tokens - 1) / cfg->page_tokens;
	s->scratch_page = cfg->n_pages;
	s->layers = calloc(m->desc.n_layers, sizeof(*s->layers));
	return s->layers ? check_model(&s->d) : -ENOMEM;
}

/* Flattens the step into the pinned inputs; counts rows and tokens and
 * the longest context. -O1_E_BOUNDS (logged) for a token id outside the
 * vocabulary. */
struct flat {
	uint32_t tokens, rows, max_len;
};

static int flatten_seq(struct cuda_state *s, const struct o1_step_seq *q,
		       uint32_t i, struct flat *f)
{
	struct cuda_inputs *h = &s->host;
	uint32_t p = s->cfg.page_tokens;

	h->q_off[i] = f->tokens;
	h->start[i] = q->start_pos;
	if (q->n_pages)
		memcpy(h->tables + (size_t)i * s->max_blocks, q->pages,
		       q->n_pages * sizeof(uint32_t));
	for (uint32_t j = 0; j < q->n_tokens; j++, f->tokens++) {
		uint32_t pos = q->start_pos + j, t = f->tokens;

		if (q->tokens[j] < 0 ||
		    (uint32_t)q->tokens[j] >= s->d.vocab_size) {
			o1_err("cuda backend: sequence %u: token id %d at %u "
			       "outside the vocabulary of %u",
			       i, q->tokens[j], j, s->d.vocab_size);
			return -O1_E_BOUNDS;
		}
		h->ids[t] = q->tokens[j];
		h->pos[t] = (int32_t)pos;
		h->slots[t] = q->pages[pos / p] * p + pos % p;
		if (q->all_logits || j + 1 == q->n_tokens)
			h->rows[f->rows++] = t;
	}
	if (q->start_pos + q->n_tokens > f->max_len)
		f->max_len = q->start_pos + q->n_tokens;
	return 0;
}

static int flatten(struct cuda_state *s, const struct o1_step *st,
		   struct flat *f)
{
	int err = 0;

	*f = (struct flat){0, 0, 0};
	for (uint32_t i = 0; !err && i < st->n_seqs; i++)
		err = flatten_seq(s, &st->seqs[i], i, f);
	s->host.q_off[st->n_seqs] = f->tokens;
	return err;
}

/* y (m,n) f32 = x (m,k) bf16 . w (n,k)^T bf16, f32 compute: gemv.cu for
 * up to O1_GEMV_MAX_ROWS rows (decode: it streams the weights near the
 * memory bandwidth, cuBLAS does not at M = 1), cuBLAS above. */
static int gemm(struct cuda_state *s, float *y, const uint16_t *x,
		const uint16_t *w, uint32_t m, uint32_t n, uint32_t k)
{
	const float one = 1.0f, zero = 0.0f;

	if (m <= O1_GEMV_MAX_ROWS && k % 8 == 0)
		return o1_gemv_bf16_cuda(y, x, w, m, n, k, step_pdl(s, m),
					 s->stream);

	return blas_check(cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N,
				       (int)n, (int)m, (int)k, &one, w,
				       CUDA_R_16BF, (int)k, x, CUDA_R_16BF,
				       (int)k, &zero, y, CUDA_R_32F, (int)n,
				       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
			  "gemm");
}

static struct o1_attn_dims attn_dims(const struct cuda_state *s)
{
	return (struct o1_attn_dims){s->d.n_heads,
				     s->d.n_kv_heads,
				     s->d.head_dim,
				     s->kvl.page_tokens,
				     o1_kv_layout_page_elems(&s->kvl),
				     (float)(1.0 / sqrt(s->d.head_dim))};
}

/* A rank's partial O or down product in s->o (T rows): summed across the
 * ranks, on the stream. */
static int reduce(struct cuda_state *s, uint32_t t)
{
	const struct o1_tp_link *k = &s->cfg.tp_link;

	if (!k->sum)
		return 0;
	return k->sum(k->ctx, s->o, (uint64_t)t * s->d.dim, s->stream);
}

/* The attention input: RMSNorm of the residual stream (adding the
 * previous layer's down product, unfused) and the QKV product. */
static int qkv_in(struct cuda_state *s, uint32_t l, uint32_t t, bool fuse,
		  bool pdl)
{
	const struct o1_model_desc *d = &s->d;
	const struct cuda_layer *y = &s->layers[l];
	uint32_t n = (uint32_t)qkv_rows(d);
	int err;

	if (fuse)
		return o1_gemv_norm_bf16_cuda(s->qkv, s->x, y->attn_norm,
					      d->norm_eps, y->wqkv, t, n,
					      d->dim, pdl, s->stream);
	err = o1_rmsnorm_cuda(s->h, s->x, l ? s->o : NULL, y->attn_norm, NULL,
			      t, d->dim, d->norm_eps, pdl, s->stream);
	return err ? err : gemm(s, s->qkv, s->h, y->wqkv, t, n, d->dim);
}

/* The MLP input: RMSNorm (adding the O product, unfused), the gate/up
 * product and SwiGLU into s->act. */
static int mlp_in(struct cuda_state *s, uint32_t l, uint32_t t, bool fuse,
		  bool pdl)
{
	const struct o1_model_desc *d = &s->d;
	const struct cuda_layer *y = &s->layers[l];
	uint32_t f = d->ffn_dim;
	int err;

	if (fuse)
		return o1_gemv_norm_swiglu_bf16_cuda(s->act, s->x, y->ffn_norm,
						     d->norm_eps, y->wgu, t, f,
						     d->dim, pdl, s->stream);
	err = o1_rmsnorm_cuda(s->h, s->x, s->o, y->ffn_norm, NULL, t, d->dim,
			      d->norm_eps, pdl, s->stream);
	err = err ? err : gemm(s, s->gu, s->h, y->wgu, t, 2 * f, d->dim);
	return err ? err
		   : o1_swiglu_cuda(s->act, s->gu, s->gu + f, 2 * f, t, f, pdl,
				    s->stream);
}

/* An output product (O or down) of IN (K wide) by W: added to the
 * residual stream when ADD (fused), else into s->o, summed across the
 * ranks, for the next RMSNorm to add. */
static int out_product(struct cuda_state *s, const uint16_t *in,
		       const uint16_t *w, uint32_t t, uint32_t k, bool add,
		       bool pdl)
{
	int err;

	if (add)
		return o1_gemv_add_bf16_cuda(s->x, in, w, t, s->d.dim, k, pdl,
					     s->stream);
	err = gemm(s, s->o, in, w, t, s->d.dim, k);
	return err ? err : reduce(s, t);
}

static int attention_block(struct cuda_state *s, uint32_t l,
			   const struct flat *f, const struct o1_attn_batch *b)
{
	const struct o1_model_desc *d = &s->d;
	const struct cuda_layer *y = &s->layers[l];
	struct o1_attn_dims ad = attn_dims(s);
	uint16_t *kc = s->kv + o1_kv_layout_offset(&s->kvl, 0, l, 0);
	uint16_t *vc = s->kv + o1_kv_layout_offset(&s->kvl, 0, l, 1);
	struct o1_rope_kv_args ra = {s->q,	   kc,		vc,
				     s->qkv,	   y->bqkv,	s->dev.pos,
				     s->dev.slots, s->inv_freq, s->rope_scale,
				     f->tokens,	   d->rope.dim};
	uint32_t t = f->tokens, qd = d->n_heads * d->head_dim;
	bool pdl = step_pdl(s, t), fuse = step_fused(s, t);
	int err = qkv_in(s, l, t, fuse, pdl);

	err = err ? err : o1_rope_kv_write_cuda(&ra, &ad, pdl, s->stream);
	err = err ? err
		  : o1_attention_cuda(s->att, s->q, kc, vc, &ad, b, t,
				      f->max_len, s->scratch, s->scratch_floats,
				      pdl, s->stream);
	return err ? err : out_product(s, s->att, y->wo, t, qd, fuse, pdl);
}

/* Fused, the last layer's down product goes to s->o like an unfused one:
 * the head's RMSNorm adds it. */
static int mlp_block(struct cuda_state *s, uint32_t l, uint32_t t)
{
	bool pdl = step_pdl(s, t), fuse = step_fused(s, t);
	int err = mlp_in(s, l, t, fuse, pdl);

	return err ? err
		   : out_product(s, s->act, s->layers[l].wdown, t, s->d.ffn_dim,
				 fuse && l + 1 < s->d.n_layers, pdl);
}

/* Uploads the inputs of N_SEQS sequences; the tables come last: only the
 * rows in use are copied. */
static int upload_inputs(struct cuda_state *s, uint32_t n_seqs)
{
	size_t bytes = (size_t)((char *)s->host.tables - (char *)s->in_host) +
		       (size_t)n_seqs * s->max_blocks * sizeof(uint32_t);

	return O1_CUDA_CHECK(cudaMemcpyAsync(
	    s->in_dev, s->in_host, bytes, cudaMemcpyHostToDevice, s->stream));
}

/* Embedding and every layer over F's tokens of N_SEQS sequences. */
static int layers(struct cuda_state *s, uint32_t n_seqs, const struct flat *f)
{
	struct o1_attn_batch b = {n_seqs, s->dev.q_off, s->dev.start,
				  s->dev.tables, s->max_blocks};
	int err = o1_embedding_cuda(s->x, s->embd, s->dev.ids, f->tokens,
				    s->d.dim, s->d.vocab_size, s->stream);

	for (uint32_t l = 0; !err && l < s->d.n_layers; l++) {
		err = attention_block(s, l, f, &b);
		if (!err)
			err = mlp_block(s, l, f->tokens);
	}
	return err;
}

/* Final norm (adding the last MLP output) and LM head over rows [C, C +
 * N) of those that want logits, into the device logits. */
static int head_chunk(struct cuda_state *s, uint32_t c, uint32_t n)
{
	const struct o1_model_desc *d = &s->d;
	int err =
	    o1_rmsnorm_cuda(s->h, s->x, s->o, s->out_norm, s->dev.rows + c, n,
			    d->dim, d->norm_eps, step_pdl(s, n), s->stream);

	return err ? err
		   : gemm(s, s->logits, s->h, s->out_w, n, d->vocab_size,
			  d->dim);
}

/* Uploads N sample rows (ROWS; NULL: greedy ones), padded to BATCH
 * with greedy rows (u 0, no penalties, no logprobs: all zero), and
 * N_PENS penalty entries, through the pinned mirrors. */
static int upload_samples(struct cuda_state *s,
			  const struct o1_sample_row *rows, uint32_t n,
			  uint32_t batch, const struct o1_sample_penalty *pens,
			  uint32_t n_pens)
{
	struct cuda_sampling *m = &s->smp;
	uint32_t k = rows ? n : 0;
	int err;

	if (k)
		memcpy(m->h.rows, rows, k * sizeof(*rows));
	memset(m->h.rows + k, 0, (size_t)(batch - k) * sizeof(*rows));
	err = O1_CUDA_CHECK(cudaMemcpyAsync(m->d.rows, m->h.rows,
					    (size_t)batch * sizeof(*rows),
					    cudaMemcpyHostToDevice, s->stream));
	if (err || !pens || !n_pens)
		return err;
	memcpy(m->h.pens, pens, (size_t)n_pens * sizeof(*pens));
	return O1_CUDA_CHECK(cudaMemcpyAsync(
	    m->d.pens, m->h.pens, (size_t)n_pens * sizeof(*pens),
	    cudaMemcpyHostToDevice, s->stream));
}

/* Samples rows [C, C + N) of the step, whose logits are the device
 * logits' first N rows (not modified), into the device results. */
static int sample_chunk(struct cuda_state *s, uint32_t c, uint32_t n)
{
	struct cuda_sampling *m = &s->smp;

	return o1_sample_rows_cuda(m->d.res + c, s->logits, n, s->d.vocab_size,
				   m->d.rows + c, m->d.pens, m->scratch,
				   m->scratch_bytes, s->stream);
}

/* The first N results to the pinned mirror; cuda_step hands them over
 * after the step's synchronization. */
static int copy_samples(struct cuda_state *s, uint32_t n)
{
	struct cuda_sampling *m = &s->smp;

	return O1_CUDA_CHECK(
	    cudaMemcpyAsync(m->h.res, m->d.res, (size_t)n * sizeof(*m->h.res),
			    cudaMemcpyDeviceToHost, s->stream));
}

static int copy_logits(struct cuda_state *s, float *dst, uint32_t n)
{
	return O1_CUDA_CHECK(cudaMemcpyAsync(
	    dst, s->logits, (size_t)n * s->d.vocab_size * sizeof(float),
	    cudaMemcpyDeviceToHost, s->stream));
}

/* One devout entry whose row sits at LOCAL in the device logits: the
 * stamp (from staging slot I), then the row. */
static int devout_copy(struct cuda_state *s, const struct o1_step_devout *e,
		       uint32_t i, uint32_t local)
{
	const struct cuda_devout *a = &s->devout[e->area];
	uint32_t r = e->seq & (a->desc.rows - 1);
	uint8_t *base = a->base;
	int err;

	s->stamp_host[i] = e->seq;
	err = O1_CUDA_CHECK(cudaMemcpyAsync(
	    base + a->desc.stamps_off + (uint64_t)r * 4, &s->stamp_host[i], 4,
	    cudaMemcpyHostToDevice, s->stream));
	return err ? err
		   : O1_CUDA_CHECK(cudaMemcpyAsync(
			 base + (uint64_t)r * a->desc.row_stride_bytes,
			 s->logits + (size_t)local * s->d.vocab_size,
			 (size_t)s->d.vocab_size * sizeof(float),
			 cudaMemcpyDeviceToDevice, s->stream));
}

/* Serves the entries whose rows are [C, C + N) of the step's logits rows,
 * now in the device logits; marks their areas in *TOUCHED. Must run
 * before anything changes the device logits. */
static int devout_rows(struct cuda_state *s, const struct o1_step *st,
		       uint32_t c, uint32_t n, uint64_t *touched)
{
	int err = 0;

	for (uint32_t i = 0; !err && i < st->n_devout; i++) {
		const struct o1_step_devout *e = &st->devout[i];

		if (e->row < c || e->row - c >= n)
			continue;
		err = devout_copy(s, e, i, e->row - c);
		*touched |= 1ull << e->area;
	}
	return err;
}

/* Records the event of every area the step wrote. */
static int devout_record(struct cuda_state *s, uint64_t touched)
{
	int err = 0;

	for (uint32_t a = 0; !err && a < s->cfg.devout_areas; a++)
		if (touched & (1ull << a))
			err = O1_CUDA_CHECK(
			    cudaEventRecord(s->devout[a].ev, s->stream));
	return err;
}

/* The LM head over the R rows that want logits, HEAD_ROWS at a time, each
 * chunk served to the device outputs, then sampled (when asked), then
 * copied to the host (when asked); the results after the last chunk. */
static int head(struct cuda_state *s, const struct o1_step *st, uint32_t r)
{
	bool smp = s->sampling && st->samples;
	uint64_t touched = 0;
	int err = 0;

	for (uint32_t c = 0; !err && c < r; c += s->head_rows) {
		uint32_t n = r - c < s->head_rows ? r - c : s->head_rows;

		err = head_chunk(s, c, n);
		err = err ? err : devout_rows(s, st, c, n, &touched);
		if (!err && smp)
			err = sample_chunk(s, c, n);
		if (!err && st->logits)
			err = copy_logits(
			    s, st->logits + (size_t)c * s->d.vocab_size, n);
	}
	if (!err && smp)
		err = copy_samples(s, r);
	return err ? err : devout_record(s, touched);
}

/* Any step, eagerly. */
static int forward(struct cuda_state *s, const struct o1_step *st,
		   const struct flat *f)
{
	int err = upload_inputs(s, st->n_seqs);

	if (!err && s->sampling && st->samples)
		err = upload_samples(s, st->sample_rows, f->rows, f->rows,
				     st->pens, st->n_pens);
	err = err ? err : layers(s, st->n_seqs, f);
	err = err ? err : settle(s);
	if (err || s->cfg.tp_rank)
		return err;
	return head(s, st, f->rows);
}

/* The bucket step of BATCH one-token rows, logits left on the device,
 * sampled into the device results when the backend samples: what a graph
 * holds. Every host value here is fixed per bucket. */
static int bucket_body(void *ctx, uint32_t batch)
{
	struct cuda_state *s = ctx;
	struct flat f = {batch, batch, s->cfg.max_context_tokens};
	int err = layers(s, batch, &f);

	if (err || s->cfg.tp_rank)
		return err;
	err = head_chunk(s, 0, batch);
	return err || !s->sampling ? err : sample_chunk(s, 0, batch);
}

/* Padding rows [FROM, BATCH) of a decode batch, in the pinned inputs. */
static void pad_inputs(struct cuda_state *s, uint32_t from, uint32_t batch)
{
	struct cuda_inputs *h = &s->host;

	for (uint32_t i = from; i < batch; i++) {
		h->ids[i] = 0;
		h->pos[i] = 0;
		h->slots[i] = s->scratch_page * s->cfg.page_tokens;
		h->rows[i] = i;
		h->q_off[i] = i;
		h->start[i] = 0;
		h->tables[(size_t)i * s->max_blocks] = s->scratch_page;
	}
	h->q_off[batch] = batch;
}

static int bucket_sync(void *ctx)
{
	return sync_stream(ctx);
}

static int bucket_prepare(void *ctx, uint32_t batch)
{
	struct cuda_state *s = ctx;

	int err;

	pad_inputs(s, 0, batch);
	err = upload_inputs(s, batch);
	if (err || !s->sampling)
		return err;
	return upload_samples(s, NULL, 0, batch, NULL, 0);
}

static bool is_decode(const struct o1_step *st)
{
	for (uint32_t i = 0; i < st->n_seqs; i++)
		if (st->seqs[i].n_tokens != 1)
			return false;
	return true;
}

/* A decode step through its bucket; -ERANGE above the largest. On a
 * backend that samples the bucket's graph always samples: a step without
 * samples runs it over greedy rows and ignores the results. */
static int bucket_step(struct cuda_state *s, const struct o1_step *st)
{
	const struct o1_sample_row *rows = st->samples ? st->sample_rows : NULL;
	uint64_t touched = 0;
	uint32_t batch, n = st->n_seqs;
	int err = o1_cuda_graphs_bucket(s->graphs, n, &batch);

	if (err)
		return err;
	pad_inputs(s, n, batch);
	err = upload_inputs(s, batch);
	if (!err && s->sampling)
		err = upload_samples(s, rows, n, batch, rows ? st->pens : NULL,
				     rows ? st->n_pens : 0);
	err = err ? err : o1_cuda_graphs_run(s->graphs, n, batch);
	err = err ? err : settle(s);
	if (err || s->cfg.tp_rank)
		return err;
	err = devout_rows(s, st, 0, n, &touched);
	err = err ? err : devout_record(s, touched);
	if (!err && st->logits)
		err = copy_logits(s, st->logits, n);
	if (!err && s->sampling && st->samples)
		err = copy_samples(s, n);
	return err;
}

static int run_step(struct cuda_state *s, const struct o1_step *st,
		    const struct flat *f)
{
	int err;

	if (!s->graphs)
		return forward(s, st, f);
	if (!is_decode(st)) {
		o1_cuda_graphs_count_prefill(s->graphs);
		return forward(s, st, f);
	}
	err = bucket_step(s, st);
	return err == -ERANGE ? forward(s, st, f) : err;
}

static int cuda_step(void *state, const struct o1_step *st)
{
	struct cuda_state *s = state;
	struct flat f = {0, 0, 0};
	int err = use_device(s), e;

	err = err ? err : flatten(s, st, &f);
	if (!err)
		err = run_step(s, st, &f);
	if (err && s->cfg.tp_link.fail)
		s->cfg.tp_link.fail(s->cfg.tp_link.ctx);
	/* Even after a failed enqueue: the pinned inputs may be in flight. */
	e = sync_stream(s);
	err = err ? err : e;
	if (!err && s->sampling && st->samples)
		memcpy(st->samples, s->smp.h.res,
		       (size_t)f.rows * sizeof(*st->samples));
	return err;
}

static const uint32_t default_buckets[] = {1,  2,  4,  8,   16,	 24, 32,
					   48, 64, 96, 128, 192, 256};

/* The configured (or default) buckets up to LIMIT = min(max_seqs,
 * HEAD_ROWS_MAX) into OUT; with the default list LIMIT is the largest. */
static uint32_t pick_buckets(const struct o1_backend_config *c, uint32_t *out)
{
	bool dflt = !c->n_graph_buckets;
	const uint32_t *list = dflt ? default_buckets : c->graph_buckets;
	uint32_t n = dflt ? sizeof(default_buckets) / sizeof(*default_buckets)
			  : c->n_graph_buckets;
	uint32_t limit =
	    c->max_seqs < HEAD_ROWS_MAX ? c->max_seqs : HEAD_ROWS_MAX;
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++)
		if (list[i] <= limit)
			out[k++] = list[i];
		else if (!dflt)
			o1_warn("cuda graphs: bucket %u dropped: above %u "
				"(max_seqs %u, at most %u)",
				list[i], limit, c->max_seqs, HEAD_ROWS_MAX);
	if (dflt && (!k || out[k - 1] < limit))
		out[k++] = limit;
	return k;
}

static int setup_graphs(struct cuda_state *s)
{
	uint32_t b[O1_BACKEND_GRAPH_BUCKETS_MAX];
	struct o1_cuda_graphs_config gc = {
	    b,		 0,	      !s->cfg.graphs_eager,
	    s->stream,	 bucket_body, bucket_prepare,
	    bucket_sync, s,	      s->cfg.tp_size > 0};

	if (s->cfg.n_graph_buckets > O1_BACKEND_GRAPH_BUCKETS_MAX) {
		o1_err("cuda graphs: %u buckets configured, at most %u",
		       s->cfg.n_graph_buckets, O1_BACKEND_GRAPH_BUCKETS_MAX);
		return -O1_E_CONFIG;
	}
	gc.n_buckets = pick_buckets(&s->cfg, b);
	return o1_cuda_graphs_create(&gc, &s->graphs);
}

/* Area I: one allocation (rows, then stamps set to UINT32_MAX: never
 * written), its interprocess event and both IPC handles. */
static int alloc_area(struct cuda_state *s, uint32_t i, const char *bus)
{
	struct cuda_devout *a = &s->devout[i];
	struct o1_backend_devout *d = &a->desc;
	uint64_t rows = s->cfg.devout_rows;
	int err;

	d->rows = (uint32_t)rows;
	d->row_floats = s->d.vocab_size;
	d->row_stride_bytes =
	    (uint32_t)((s->d.vocab_size * 4ull + ALIGN_BYTES - 1) /
		       ALIGN_BYTES * ALIGN_BYTES);
	d->stamps_off = rows * d->row_stride_bytes;
	d->area_bytes = (d->stamps_off + rows * 4 + ALIGN_BYTES - 1) /
			ALIGN_BYTES * ALIGN_BYTES;
	memcpy(d->pci_bus_id, bus, sizeof(d->pci_bus_id));
	err = dev_alloc(&a->base, d->area_bytes, "a device output area");
	err = err ? err
		  : O1_CUDA_CHECK(
			cudaMemsetAsync(a->base, 0, d->stamps_off, s->stream));
	err = err ? err
		  : O1_CUDA_CHECK(
			cudaMemsetAsync((uint8_t *)a->base + d->stamps_off,
					0xff, rows * 4, s->stream));
	err =
	    err ? err
		: O1_CUDA_CHECK(cudaEventCreateWithFlags(
		      &a->ev, cudaEventInterprocess | cudaEventDisableTiming));
	err = err ? err
		  : O1_CUDA_CHECK(cudaIpcGetMemHandle(
			(cudaIpcMemHandle_t *)d->mem_handle, a->base));
	return err ? err
		   : O1_CUDA_CHECK(cudaIpcGetEventHandle(
			 (cudaIpcEventHandle_t *)d->event_handle, a->ev));
}

static int alloc_devout(struct cuda_state *s)
{
	char bus[16] = {0};
	int dev, err;

	if (!s->cfg.devout_areas)
		return 0;
	s->devout = calloc(s->cfg.devout_areas, sizeof(*s->devout));
	if (!s->devout)
		return -ENOMEM;
	err = host_alloc((void **)&s->stamp_host,
			 s->cfg.max_batch_tokens * sizeof(uint32_t),
			 "device output stamps");
	err = err ? err : O1_CUDA_CHECK(cudaGetDevice(&dev));
	err = err ? err
		  : O1_CUDA_CHECK(
			cudaDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev));
	for (uint32_t i = 0; !err && i < s->cfg.devout_areas; i++)
		err = alloc_area(s, i, bus);
	if (!err)
		o1_info("cuda backend: %u device output areas of %u rows "
			"(%.1f MiB each)",
			s->cfg.devout_areas, s->cfg.devout_rows,
			s->devout[0].desc.area_bytes / 1048576.0);
	return err ? err : O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

static int cuda_devout(const void *state, uint32_t area,
		       struct o1_backend_devout *out)
{
	const struct cuda_state *s = state;

	*out = s->devout[area].desc;
	return 0;
}

static int cuda_create(const struct o1_model *m,
		       const struct o1_backend_config *cfg, void **state)
{
	struct cuda_state *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	err = init_state(s, m, cfg);
	if (!err)
		err = setup_streams(s);
	if (!err)
		err = load_weights(s, m);
	if (!err)
		err = alloc_kv(s);
	if (!err)
		err = alloc_buffers(s);
	if (!err)
		err = alloc_sampling(s);
	if (!err)
		err = blas_check(
		    cublasSetWorkspace(s->blas, s->blas_ws, BLAS_WS_BYTES),
		    "set workspace");
	if (!err)
		err = alloc_devout(s);
	if (!err && cfg->graphs_enabled)
		err = setup_graphs(s);
	if (err) {
		if (cfg->tp_link.fail)
			cfg->tp_link.fail(cfg->tp_link.ctx);
		cuda_destroy(s);
		return err;
	}
	*state = s;
	return 0;
}

static void cuda_graph_stats(const void *state,
			     struct o1_backend_graph_stats *out)
{
	const struct cuda_state *s = state;

	if (s->graphs)
		o1_cuda_graphs_stats(s->graphs, out);
}

static int cuda_fail_replays(void *state, uint32_t every)
{
	struct cuda_state *s = state;

	return s->graphs ? o1_cuda_graphs_fail_replays(s->graphs, every)
			 : -O1_E_UNSUPPORTED;
}

const struct o1_backend_ops o1_cuda_backend_ops = {
    .name = "cuda",
    .create = cuda_create,
    .destroy = cuda_destroy,
    .step = cuda_step,
    .graph_stats = cuda_graph_stats,
    .fail_replays = cuda_fail_replays,
    .tp_align = 8, /* gemv.cu: K a multiple of 8 */
    .devout = cuda_devout,
    .can_sample = true,
    .kv_elem_bytes = 2, /* bf16 */
};

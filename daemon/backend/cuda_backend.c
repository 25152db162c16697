/* The CUDA backend: the CPU backend's forward (cpu_backend.c) on the
 * device, bf16 weights and KV, f32 residual stream and accumulation. This
 * file holds its lifecycle (create, destroy), the step's entry and the
 * ops table; the weights are cuda_weights.c's, the forward pass
 * cuda_forward.c's (which describes a step, the decode bucket graphs, the
 * decode paths, tensor parallelism and sampling), the device outputs
 * cuda_devout.c's; cuda_private.h is what they share.
 *
 * Create converts every weight once into one device allocation
 * (cuda_weights.c), preallocates the KV pool (plus one scratch page for
 * the padding rows of bucket steps), the activations, the step's inputs
 * and sampling's buffers, and counts each allocation; a step allocates
 * nothing. A step's only host synchronization is the wait at its end.
 *
 * Device: create, step and destroy bind the calling thread to cfg.device
 * (cudaSetDevice), so the backend may be created on one thread and
 * stepped on another.
 */
#include "cuda_backend.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "cuda_private.h"
#include "kernels/cuda_util.h"
#include "kernels/gemv_q8.h"

static _Atomic uint64_t alloc_count;

uint64_t o1_cuda_backend_alloc_count(void)
{
	return atomic_load(&alloc_count);
}

int o1_cuda_dev_alloc(void **p, uint64_t bytes, const char *what)
{
	int err = O1_CUDA_CHECK(cudaMalloc(p, bytes ? bytes : 1));

	atomic_fetch_add(&alloc_count, 1);
	if (err)
		o1_err("cuda backend: cannot allocate %.1f MiB for %s",
		       bytes / 1048576.0, what);
	return err;
}

int o1_cuda_host_alloc(void **p, uint64_t bytes, const char *what)
{
	int err = O1_CUDA_CHECK(cudaMallocHost(p, bytes ? bytes : 1));

	atomic_fetch_add(&alloc_count, 1);
	if (err)
		o1_err("cuda backend: cannot pin %.1f MiB for %s",
		       bytes / 1048576.0, what);
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
	err = o1_cuda_dev_alloc((void **)&s->kv, elems * 2, "KV pool");
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

	s->x = cuda_carve(base, &off, t * d->dim * 4);
	s->o = cuda_carve(base, &off, t * d->dim * 4);
	s->h = cuda_carve(base, &off, t * d->dim * 2);
	s->qkv = cuda_carve(base, &off, t * cuda_qkv_rows(d) * 4);
	s->q = cuda_carve(base, &off, t * qd * 4);
	s->att = cuda_carve(base, &off, t * qd * 2);
	s->att_q = cuda_carve(
	    base, &off, o1_q8_input_bytes(O1_GEMV_MAX_ROWS, (uint32_t)qd));
	s->gu = cuda_carve(base, &off, t * 2 * f * 4);
	s->act = cuda_carve(base, &off, t * f * 2);
	s->logits =
	    cuda_carve(base, &off, (uint64_t)s->head_rows * d->vocab_size * 4);
	s->scratch = cuda_carve(base, &off, s->scratch_floats * 4);
	s->blas_ws = cuda_carve(base, &off, BLAS_WS_BYTES);
	return off;
}

static uint64_t layout_inputs(struct cuda_state *s, uintptr_t base,
			      struct cuda_inputs *in)
{
	uint64_t t = s->cfg.max_batch_tokens, n = s->cfg.max_seqs, off = 0;

	in->ids = cuda_carve(base, &off, t * 4);
	in->pos = cuda_carve(base, &off, t * 4);
	in->slots = cuda_carve(base, &off, t * 4);
	in->rows = cuda_carve(base, &off, t * 4);
	in->q_off = cuda_carve(base, &off, (n + 1) * 4);
	in->start = cuda_carve(base, &off, n * 4);
	in->tables = cuda_carve(base, &off, n * s->max_blocks * 4);
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
	err = o1_cuda_dev_alloc(&s->arena, bytes, "activations");
	if (err)
		return err;
	layout_arena(s, (uintptr_t)s->arena);
	/* zeros, not stale bits, in the rows a padded product reads
	 * (cuda_forward.c's blas_rows) */
	err = O1_CUDA_CHECK(cudaMemsetAsync(s->arena, 0, bytes, s->stream));
	if (err)
		return err;
	s->in_bytes = layout_inputs(s, 0, &s->dev);
	err = o1_cuda_dev_alloc(&s->in_dev, s->in_bytes, "step inputs");
	if (!err)
		err =
		    o1_cuda_host_alloc(&s->in_host, s->in_bytes, "step inputs");
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

	b->rows =
	    cuda_carve(base, &off, (uint64_t)m->max_rows * sizeof(*b->rows));
	b->pens = cuda_carve(
	    base, &off, (uint64_t)s->cfg.max_sample_pens * sizeof(*b->pens));
	b->res =
	    cuda_carve(base, &off, (uint64_t)m->max_rows * sizeof(*b->res));
	b->masks = cuda_carve(base, &off,
			      (uint64_t)s->cfg.max_sample_masks *
				  o1_sample_mask_words(s->d.vocab_size) * 4);
	if (scratch && m->scratch_bytes)
		m->scratch = cuda_carve(base, &off, m->scratch_bytes);
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
	err = o1_cuda_dev_alloc(&m->dev, dev_bytes, "sampling");
	err = err ? err : o1_cuda_host_alloc(&m->host, host_bytes, "sampling");
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
		"penalty entries, %u token masks)",
		dev_bytes / 1048576.0, m->max_rows, s->cfg.max_sample_pens,
		s->cfg.max_sample_masks);
	return 0;
}

int o1_cuda_blas_check(cublasStatus_t st, const char *what)
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
		err = o1_cuda_blas_check(cublasCreate(&s->blas), "create");
	if (!err)
		err = o1_cuda_blas_check(cublasSetStream(s->blas, s->stream),
					 "set stream");
	return err;
}

/* Waits for the stream: through the tensor-parallel link when there is
 * one (it gives up once another rank failed). */
int o1_cuda_sync(struct cuda_state *s)
{
	const struct o1_tp_link *k = &s->cfg.tp_link;

	if (k->wait)
		return k->wait(k->ctx, s->stream);
	return O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

static void cuda_destroy(void *state)
{
	struct cuda_state *s = state;

	if (!s)
		return;
	cudaSetDevice((int)s->cfg.device);
	cudaGetLastError();
	if (s->stream)
		o1_cuda_sync(s);
	o1_cuda_devout_free(s);
	o1_cuda_graphs_destroy(s->graphs);
	o1_cuda_tune_free(&s->tune);
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

/* Whether the fused decode products take the model's block matrices:
 * only the int8 path has fused variants, and each needs its input's
 * quantized rows in shared memory (every block type, every product's K,
 * at the most rows a decode step has). */
static bool q_fusable(const struct cuda_state *s)
{
	static const enum o1_quant_type types[] = {
	    O1_QUANT_Q8_0, O1_QUANT_Q4_0, O1_QUANT_Q5_0, O1_QUANT_Q4_K,
	    O1_QUANT_Q6_K};
	const struct o1_model_desc *d = &s->d;
	uint32_t ks[] = {d->dim, d->n_heads * d->head_dim, d->ffn_dim};

	if (s->cfg.cuda_quant_f32)
		return false;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
			if (!o1_gemv_q8_fits(types[t], O1_GEMV_MAX_ROWS, ks[i]))
				return false;
	return true;
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
	s->attn_tune = (struct o1_attn_decode_tune){
	    .warps = cfg->cuda_attn_warps,
	    .split_rounds = cfg->cuda_attn_split_rounds,
	    .target_blocks = cfg->cuda_attn_target,
	    .heads = cfg->cuda_attn_heads,
	    .few_blocks = cfg->cuda_attn_few,
	    .tc = cfg->cuda_attn_tc,
	    .tc_splits = cfg->cuda_attn_tc_splits}; /* spans: set_attn_spans */
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
	/* asked once here, on this device, never first inside a graph
	 * capture (cudaMemcpyFromSymbol is not allowed there) */
	if (cfg->cuda_quant_wg_rows && !o1_gemm_qw_available())
		o1_info("cuda backend: no gemm_qw on this build or device "
			"(wgmma needs sm_90a): the tiles run for "
			"cuda.quant_wgmma_rows' steps");
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

/* The step's trace ends: its shape beside the paths cuda_forward.c
 * noted; logged when slow (step_trace.h). */
static void trace_end(struct cuda_state *s, const struct o1_step *st)
{
	struct o1_step_info in;

	if (!s->trace.on)
		return;
	o1_step_trace_shape(st, &in);
	in.bucket = s->trace_info.bucket;
	in.products = s->trace_info.products;
	in.attention = s->trace_info.attention;
	o1_step_trace_end(&s->trace, "cuda", &in);
}

static int cuda_step(void *state, const struct o1_step *st)
{
	struct cuda_state *s = state;
	uint32_t rows = 0;
	int err, e;

	o1_step_trace_begin(&s->trace);
	s->trace_info = (struct o1_step_info){0};
	err = use_device(s);
	err = err ? err : o1_cuda_forward_step(s, st, &rows);
	if (err && s->cfg.tp_link.fail)
		s->cfg.tp_link.fail(s->cfg.tp_link.ctx);
	/* Even after a failed enqueue: the pinned inputs may be in flight. */
	e = o1_cuda_sync(s);
	o1_step_trace_mark(&s->trace, O1_STEP_WAIT);
	err = err ? err : e;
	if (!err && s->sampling && st->samples)
		memcpy(st->samples, s->smp.h.res,
		       (size_t)rows * sizeof(*st->samples));
	o1_step_trace_mark(&s->trace, O1_STEP_OUT);
	if (!err)
		trace_end(s, st);
	return err;
}

static int bucket_sync(void *ctx)
{
	return o1_cuda_sync(ctx);
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

/* cuBLAS's first use of each product shape a step can give it, before
 * READY (cuda_forward.c's blas_rows says why). */
static int warm_products(struct cuda_state *s)
{
	struct timespec a, b;
	uint32_t shapes;
	int err;

	clock_gettime(CLOCK_MONOTONIC, &a);
	err = o1_cuda_forward_warm(s, &shapes);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (!err)
		o1_info("cuda backend: products warmed at %u row counts in "
			"%.0f ms",
			shapes,
			(double)(b.tv_sec - a.tv_sec) * 1e3 +
			    (double)(b.tv_nsec - a.tv_nsec) / 1e6);
	return err;
}

/* The configured (or default) context spans below max_context_tokens,
 * then max_context_tokens, into OUT. */
static uint32_t pick_spans(const struct o1_backend_config *c, uint32_t *out)
{
	static const uint32_t dflt[] = {O1_ATTN_DECODE_SPAN_SHORT,
					O1_ATTN_DECODE_SPAN_MID,
					O1_ATTN_DECODE_SPAN_LONG};
	const uint32_t *list = c->n_graph_spans ? c->graph_spans : dflt;
	uint32_t n = c->n_graph_spans ? c->n_graph_spans : 3, k = 0;

	for (uint32_t i = 0; i < n && i + 1 < O1_BACKEND_GRAPH_SPANS_MAX; i++)
		if (list[i] < c->max_context_tokens)
			out[k++] = list[i];
	out[k++] = c->max_context_tokens;
	return k;
}

/* The decode attention shapes a launch by its context span (kernels_cuda.h's
 * o1_attn_decode_tune): the spans' ends below the context limit, whether
 * graphs replay them or steps run eagerly, so both launch alike. */
static void set_attn_spans(struct cuda_state *s)
{
	uint32_t spans[O1_BACKEND_GRAPH_SPANS_MAX];
	uint32_t n = pick_spans(&s->cfg, spans) - 1; /* the limit: last */

	_Static_assert(O1_BACKEND_GRAPH_SPANS_MAX - 1 <=
			   O1_ATTN_DECODE_SPAN_ENDS_MAX,
		       "the attention takes every span below the limit");
	s->attn_tune.spans_set = true;
	s->attn_tune.n_span_ends = n;
	memcpy(s->attn_tune.span_ends, spans, n * sizeof(spans[0]));
}

static int setup_graphs(struct cuda_state *s)
{
	uint32_t b[O1_BACKEND_GRAPH_BUCKETS_MAX],
	    spans[O1_BACKEND_GRAPH_SPANS_MAX];
	struct o1_cuda_graphs_config gc = {b,
					   0,
					   spans,
					   0,
					   !s->cfg.graphs_eager,
					   s->stream,
					   o1_cuda_forward_bucket,
					   o1_cuda_forward_prepare,
					   bucket_sync,
					   s,
					   s->cfg.tp_size > 0};
	int err;

	if (s->cfg.n_graph_buckets > O1_BACKEND_GRAPH_BUCKETS_MAX) {
		o1_err("cuda graphs: %u buckets configured, at most %u",
		       s->cfg.n_graph_buckets, O1_BACKEND_GRAPH_BUCKETS_MAX);
		return -O1_E_CONFIG;
	}
	if (s->cfg.n_graph_spans >= O1_BACKEND_GRAPH_SPANS_MAX) {
		o1_err("cuda graphs: %u context spans configured, at most %u",
		       s->cfg.n_graph_spans, O1_BACKEND_GRAPH_SPANS_MAX - 1);
		return -O1_E_CONFIG;
	}
	gc.n_buckets = pick_buckets(&s->cfg, b);
	gc.n_spans = pick_spans(&s->cfg, spans);
	/* the picks first: the graphs capture the tuned launches */
	err = o1_cuda_tune_run(s, b, gc.n_buckets);
	return err ? err : o1_cuda_graphs_create(&gc, &s->graphs);
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
		err = o1_cuda_weights_load(s, m);
	if (!err && s->n_block_mats && s->fused && !q_fusable(s)) {
		s->fused = false; /* the block products are unfused ones */
		o1_info("cuda backend: fused products off: %u matrices in "
			"GGUF block formats (quant_dot f32, or rows too long)",
			s->n_block_mats);
	}
	if (!err)
		err = alloc_kv(s);
	if (!err)
		err = alloc_buffers(s);
	if (!err)
		err = alloc_sampling(s);
	if (!err)
		err = o1_cuda_blas_check(
		    cublasSetWorkspace(s->blas, s->blas_ws, BLAS_WS_BYTES),
		    "set workspace");
	if (!err)
		err = o1_cuda_devout_alloc(s);
	if (!err)
		set_attn_spans(s);
	if (!err)
		err = warm_products(s);
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
    .devout = o1_cuda_devout_get,
    .can_sample = true,
    .kv_elem_bytes = 2, /* bf16 */
};

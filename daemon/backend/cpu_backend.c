/* The CPU backend: the model forward in f32 over the paged KV cache.
 *
 * At create, every weight is converted to f32 (o1_tensor_read_f32, which
 * also undoes GGUF's Q/K permutation) into one allocation, except the
 * matrices in a GGUF block format (Q8_0, Q4_0, Q4_K, Q6_K): those are
 * copied as they are (Q/K rows un-permuted whole, a row being whole
 * blocks) and multiplied block by block (kernels/matmul_q.h, bitwise the
 * f32 product on their dequantization; the embedding dequantizes the rows
 * it gathers), unless cfg.dequantize asks for f32 at load. The KV pool
 * (kv_pool.h layout, f32) and every activation buffer are allocated for
 * the configured limits; a step allocates nothing. The forward is the
 * transformers Llama/Qwen2/Mistral decoder: RMSNorm, Q/K/V (+bias), NeoX
 * RoPE, KV write, paged causal GQA attention, O, residual, RMSNorm, SwiGLU
 * MLP, residual; final RMSNorm and the LM head (the token embedding when
 * tied) only on the rows whose logits were asked for. Every stage is a
 * kernels/ function whose result for a row does not depend on the other
 * rows, which is what backend.h's determinism promise rests on.
 * Sampling (cfg.sampling): after the LM head every logits row is sampled
 * with o1_sample_rows, one row per task on the worker threads, each worker
 * with its own scratch made at create; a step without a logits buffer of
 * its own gets its rows' logits in the backend's buffer of max_seqs rows,
 * max_seqs rows at a time. The rows' results are o1_sample_rows_masked's
 * (with the step's token masks) exactly, whatever the thread count.
 * Not implemented: sliding-window attention (Mistral v0.1's 4096-token
 * window); attention is full-causal, exact for contexts within the window.
 *
 * As a tensor-parallel rank (cfg.tp_size, tp_shard.h) the model is the
 * rank's shard: the O and down products are partial sums, added across the
 * ranks through cfg.tp_link before their residual add, and only rank 0
 * runs the LM head (and the sampling, whose buffers only it makes). It is
 * the CPU reference of the sharding (tp_group.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention.h"
#include "backend.h"
#include "kernels/embedding.h"
#include "common/error.h"
#include "common/log.h"
#include "kernels/matmul.h"
#include "kernels/gemv_q8.h"
#include "kernels/matmul_q.h"
#include "kernels/quant.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/sample.h"
#include "kernels/swiglu.h"
#include "kernels/threads.h"
#include "model/dtype.h"
#include "step_trace.h"

/* A matrix kept in its block format: rows of whole blocks of TYPE. */
struct cpu_blocks {
	const uint8_t *data; /* in cpu_state.qweights; NULL: held as f32 */
	enum o1_quant_type type;
};

struct cpu_layer {
	float *w[O1_T_ROLE_COUNT]; /* by role; NULL when absent or in blocks */
	struct cpu_blocks q[O1_T_ROLE_COUNT];
};

struct cpu_state {
	struct o1_model_desc d;
	struct o1_backend_config cfg;
	struct o1_kv_layout kvl;
	struct o1_threads *tp;
	float *weights;	   /* owned: every tensor not in blocks, f32 */
	uint8_t *qweights; /* owned: the matrices kept in blocks */
	float *global[O1_T_ROLE_COUNT];
	struct cpu_blocks gq[O1_T_ROLE_COUNT];
	struct cpu_layer *layers; /* n_layers */
	float *inv_freq;	  /* rope.dim / 2 */
	float rope_scale;
	float *kv;    /* owned: the pool */
	float *arena; /* owned: activations below */
	float *x, *h, *q, *k, *v, *att, *o, *gate, *up, *scratch;
	uint16_t *xbf; /* owned: cfg.cpu_quant_int8's bf16 inputs */
	int32_t *ids, *pos;
	uint32_t *slots, *q_off, *start, *tables, *rows;
	uint32_t max_blocks;
	/* sampling only (owned) */
	float *head_logits;  /* max_seqs rows, when the step brings none */
	char *sample_mem;    /* a scratch per worker */
	size_t sample_bytes; /* per worker */
	struct o1_step_trace trace; /* slow steps' phases (step_trace.h) */
};

static const enum o1_tensor_role layer_roles[] = {
    O1_T_ATTN_NORM, O1_T_WQ, O1_T_WK,	    O1_T_WV,	 O1_T_BQ,   O1_T_BK,
    O1_T_BV,	    O1_T_WO, O1_T_FFN_NORM, O1_T_W_GATE, O1_T_W_UP, O1_T_W_DOWN,
};
static const enum o1_tensor_role global_roles[] = {
    O1_T_TOKEN_EMBD,
    O1_T_OUTPUT_NORM,
    O1_T_OUTPUT,
    O1_T_ROPE_FREQS,
};

/* Where a tensor's copy goes: its f32 pointer, or its blocks. */
struct weight_dst {
	float **f;
	struct cpu_blocks *q;
};

typedef int (*weight_fn)(struct cpu_state *, const struct o1_model *,
			 const struct o1_tensor *, struct weight_dst, void *);

/* Calls fn for every tensor the forward uses, with where its copy goes. */
static int for_each_weight(struct cpu_state *s, const struct o1_model *m,
			   weight_fn fn, void *arg)
{
	const struct o1_tensor *t;
	int err = 0;

	for (size_t i = 0;
	     !err && i < sizeof(global_roles) / sizeof(*global_roles); i++) {
		t = o1_model_tensor(m, global_roles[i], -1);
		if (t)
			err = fn(s, m, t,
				 (struct weight_dst){&s->global[global_roles[i]],
						     &s->gq[global_roles[i]]},
				 arg);
	}
	for (uint32_t l = 0; !err && l < s->d.n_layers; l++)
		for (size_t i = 0;
		     !err && i < sizeof(layer_roles) / sizeof(*layer_roles);
		     i++) {
			t = o1_model_tensor(m, layer_roles[i], (int)l);
			if (t)
				err = fn(s, m, t,
					 (struct weight_dst){
					     &s->layers[l].w[layer_roles[i]],
					     &s->layers[l].q[layer_roles[i]]},
					 arg);
		}
	return err;
}

/* Matrices in a block format stay in it unless cfg.dequantize. */
static bool in_blocks(const struct cpu_state *s, const struct o1_tensor *t)
{
	return !s->cfg.dequantize && t->n_dims == 2 &&
	       o1_quant_is_block(t->dtype);
}

struct weight_count {
	uint64_t floats;
	uint64_t converted; /* elements not stored as f32 */
	uint64_t qbytes;    /* of matrices kept in blocks (64-byte aligned) */
	uint32_t qmats;
	enum o1_dtype dtype;
};

static int count_weight(struct cpu_state *s, const struct o1_model *m,
			const struct o1_tensor *t, struct weight_dst dst,
			void *arg)
{
	struct weight_count *c = arg;

	(void)m, (void)dst;
	if (in_blocks(s, t)) {
		c->qbytes += (t->n_bytes + 63) / 64 * 64;
		c->qmats++;
		return 0;
	}
	c->floats += o1_tensor_elements(t);
	if (t->dtype != O1_DTYPE_F32) {
		c->converted += o1_tensor_elements(t);
		c->dtype = t->dtype;
	}
	return 0;
}

/* Running offsets into the two allocations. */
struct weight_at {
	uint64_t floats, qbytes;
};

static int read_weight(struct cpu_state *s, const struct o1_model *m,
		       const struct o1_tensor *t, struct weight_dst dst,
		       void *arg)
{
	struct weight_at *at = arg;
	int err;

	if (in_blocks(s, t)) {
		uint8_t *p = s->qweights + at->qbytes;

		dst.q->data = p;
		dst.q->type = (enum o1_quant_type)t->dtype;
		at->qbytes += (t->n_bytes + 63) / 64 * 64;
		return o1_tensor_read_blocks(m, t, p);
	}
	*dst.f = s->weights + at->floats;
	at->floats += o1_tensor_elements(t);
	err = o1_tensor_read_f32(m, t, *dst.f);
	if (err)
		o1_err("cpu backend: reading %s (layer %d): %s",
		       o1_tensor_role_name(t->role), t->layer,
		       o1_strerror(err));
	return err;
}

static void log_weights(const struct weight_count *c)
{
	if (c->qmats)
		o1_info("cpu backend: %u matrices kept in their block format "
			"(%.1f MiB)",
			c->qmats, c->qbytes / 1048576.0);
	if (c->converted)
		o1_info("cpu backend: converting %llu weights from %s to f32 "
			"(%.1f MiB in all)",
			(unsigned long long)c->converted, o1_dtype_name(c->dtype),
			c->floats * 4.0 / (1 << 20));
}

static int load_weights(struct cpu_state *s, const struct o1_model *m)
{
	struct weight_count c = {0, 0, 0, 0, O1_DTYPE_F32};
	struct weight_at at = {0, 0};
	int err;

	for_each_weight(s, m, count_weight, &c);
	log_weights(&c);
	s->weights = malloc((c.floats ? c.floats : 1) * sizeof(float));
	s->qweights = aligned_alloc(64, c.qbytes ? c.qbytes : 64);
	if (!s->weights || !s->qweights) {
		o1_err("cpu backend: no memory for %.1f MiB of weights",
		       (c.floats * 4.0 + c.qbytes) / (1 << 20));
		return -ENOMEM;
	}
	err = for_each_weight(s, m, read_weight, &at);
	if (!err && s->d.tied_embeddings) {
		s->global[O1_T_OUTPUT] = s->global[O1_T_TOKEN_EMBD];
		s->gq[O1_T_OUTPUT] = s->gq[O1_T_TOKEN_EMBD];
	}
	return err;
}

static int setup_rope(struct cpu_state *s)
{
	const float *div = s->global[O1_T_ROPE_FREQS];
	uint32_t rot = s->d.rope.dim ? s->d.rope.dim : s->d.head_dim;
	struct o1_rope r = s->d.rope;

	r.dim = rot;
	s->d.rope.dim = rot;
	s->inv_freq = malloc(rot / 2 * sizeof(float));
	if (!s->inv_freq)
		return -ENOMEM;
	return o1_rope_inv_freq(&r, div, s->inv_freq, &s->rope_scale);
}

/* Carves the activation buffers out of one allocation. */
static int alloc_arena(struct cpu_state *s)
{
	const struct o1_model_desc *d = &s->d;
	uint64_t t = s->cfg.max_batch_tokens,
		 qd = (uint64_t)d->n_heads * d->head_dim;
	uint64_t kvd = (uint64_t)d->n_kv_heads * d->head_dim;
	uint64_t sizes[] = {
	    t * d->dim,
	    t * d->dim,
	    t * qd,
	    t * kvd,
	    t * kvd,
	    t * qd,
	    t * d->dim,
	    t * d->ffn_dim,
	    t * d->ffn_dim,
	    o1_attention_scratch_floats(s->cfg.n_threads,
					s->cfg.max_context_tokens),
	    t,
	    t,
	    t,
	    s->cfg.max_seqs + 1,
	    s->cfg.max_seqs,
	    (uint64_t)s->cfg.max_seqs * s->max_blocks,
	    t,
	};
	void **ptrs[] = {
	    (void **)&s->x,	  (void **)&s->h,     (void **)&s->q,
	    (void **)&s->k,	  (void **)&s->v,     (void **)&s->att,
	    (void **)&s->o,	  (void **)&s->gate,  (void **)&s->up,
	    (void **)&s->scratch, (void **)&s->ids,   (void **)&s->pos,
	    (void **)&s->slots,	  (void **)&s->q_off, (void **)&s->start,
	    (void **)&s->tables,  (void **)&s->rows,
	};
	_Static_assert(sizeof(sizes) / sizeof(sizes[0]) ==
			   sizeof(ptrs) / sizeof(ptrs[0]),
		       "one size per buffer");
	uint64_t total = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		total += (sizes[i] + 15) / 16 * 16; /* 64-byte aligned */
	s->arena = aligned_alloc(64, total * sizeof(float));
	if (!s->arena)
		return -ENOMEM;
	total = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		*ptrs[i] = s->arena + total;
		total += (sizes[i] + 15) / 16 * 16;
	}
	return 0;
}

static int alloc_kv(struct cpu_state *s)
{
	uint64_t elems;
	int err = o1_kv_layout_check(&s->kvl, &elems);

	if (err)
		return err;
	s->kv = calloc(elems, sizeof(float));
	if (!s->kv) {
		o1_err("cpu backend: no memory for a KV pool of %.1f MiB",
		       elems * 4.0 / (1 << 20));
		return -ENOMEM;
	}
	return 0;
}

/* Sampling's buffers: max_seqs logits rows and a scratch per worker. */
static int alloc_sampling(struct cpu_state *s)
{
	size_t rows = (size_t)s->cfg.max_seqs * s->d.vocab_size;

	s->sample_bytes = o1_sample_scratch_bytes(s->d.vocab_size);
	s->head_logits = malloc(rows * sizeof(float));
	s->sample_mem = aligned_alloc(64, s->sample_bytes * s->cfg.n_threads);
	if (!s->head_logits || !s->sample_mem) {
		o1_err("cpu backend: no memory for sampling (%.1f MiB)",
		       (rows * sizeof(float) +
			s->sample_bytes * s->cfg.n_threads) /
			   1048576.0);
		return -ENOMEM;
	}
	return 0;
}

/* cfg.cpu_quant_int8: a bf16 copy of the widest product input a step
 * has (max_batch_tokens rows). */
static int alloc_int8_inputs(struct cpu_state *s)
{
	const struct o1_model_desc *d = &s->d;
	uint32_t k = d->dim > d->ffn_dim ? d->dim : d->ffn_dim;

	k = k > d->n_heads * d->head_dim ? k : d->n_heads * d->head_dim;
	s->xbf = malloc((size_t)s->cfg.max_batch_tokens * k * sizeof(uint16_t));
	return s->xbf ? 0 : -ENOMEM;
}

static void cpu_destroy(void *state)
{
	struct cpu_state *s = state;

	if (!s)
		return;
	o1_threads_destroy(s->tp);
	free(s->head_logits);
	free(s->sample_mem);
	free(s->arena);
	free(s->xbf);
	free(s->kv);
	free(s->inv_freq);
	free(s->weights);
	free(s->qweights);
	free(s->layers);
	free(s);
}

static int cpu_create(const struct o1_model *m,
		      const struct o1_backend_config *cfg, void **state)
{
	struct cpu_state *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->d = m->desc;
	s->cfg = *cfg;
	s->kvl = (struct o1_kv_layout){cfg->n_pages, m->desc.n_layers,
				       m->desc.n_kv_heads, cfg->page_tokens,
				       m->desc.head_dim};
	s->max_blocks =
	    (cfg->max_context_tokens + cfg->page_tokens - 1) / cfg->page_tokens;
	s->layers = calloc(m->desc.n_layers, sizeof(*s->layers));
	err = s->layers ? 0 : -ENOMEM;
	if (!err)
		err = load_weights(s, m);
	if (!err)
		err = setup_rope(s);
	if (!err)
		err = alloc_kv(s);
	if (!err)
		err = alloc_arena(s);
	if (!err)
		err = o1_threads_create(cfg->n_threads, &s->tp);
	if (!err && cfg->sampling && !cfg->tp_rank)
		err = alloc_sampling(s);
	if (!err && cfg->cpu_quant_int8)
		err = alloc_int8_inputs(s);
	if (err) {
		cpu_destroy(s);
		return err;
	}
	*state = s;
	return 0;
}

/* Flattens the step into the kernels' arrays: ids, positions, KV slots,
 * q offsets, start positions, block tables and the rows wanting logits.
 * Returns the number of logits rows. */
static uint32_t prepare(struct cpu_state *s, const struct o1_step *st)
{
	uint32_t t = 0, r = 0, p = s->cfg.page_tokens;

	for (uint32_t i = 0; i < st->n_seqs; i++) {
		const struct o1_step_seq *q = &st->seqs[i];

		s->q_off[i] = t;
		s->start[i] = q->start_pos;
		memcpy(s->tables + (size_t)i * s->max_blocks, q->pages,
		       q->n_pages * sizeof(uint32_t));
		for (uint32_t j = 0; j < q->n_tokens; j++, t++) {
			uint32_t pos = q->start_pos + j;

			s->ids[t] = q->tokens[j];
			s->pos[t] = (int32_t)pos;
			s->slots[t] = q->pages[pos / p] * p + pos % p;
			if (q->all_logits || j + 1 == q->n_tokens)
				s->rows[r++] = t;
		}
	}
	s->q_off[st->n_seqs] = t;
	return r;
}

static struct o1_attn_dims attn_dims(const struct cpu_state *s)
{
	const struct o1_model_desc *d = &s->d;

	return (struct o1_attn_dims){d->n_heads,
				     d->n_kv_heads,
				     d->head_dim,
				     s->kvl.page_tokens,
				     o1_kv_layout_page_elems(&s->kvl),
				     (float)(1.0 / sqrt(d->head_dim))};
}

/* y (M,N) = x (M,K) . Q^T + BIAS on the CUDA backend's int8 path
 * (cfg.cpu_quant_int8): x rounded to bf16 as the device's activations
 * are, then o1_gemv_q8_cpu (its bits), the bias added after as the
 * device's epilogue does. */
static int int8_product(struct cpu_state *s, float *y, const float *x,
			const struct cpu_blocks *q, const float *bias,
			uint32_t m, uint32_t n, uint32_t k)
{
	int err;

	for (size_t i = 0; i < (size_t)m * k; i++)
		s->xbf[i] = o1_f32_to_bf16(x[i]);
	err = o1_gemv_q8_cpu(y, s->xbf, q->data, q->type, m, n, k, n);
	for (uint32_t r = 0; !err && bias && r < m; r++)
		for (uint32_t j = 0; j < n; j++)
			y[(size_t)r * n + j] += bias[j];
	return err;
}

/* y (M,N) = x (M,K) . W^T + BIAS for W held as f32 (F) or in blocks (Q). */
static int product(struct cpu_state *s, float *y, const float *x,
		   const float *f, const struct cpu_blocks *q,
		   const float *bias, uint32_t m, uint32_t n, uint32_t k)
{
	if (q->data && s->cfg.cpu_quant_int8)
		return int8_product(s, y, x, q, bias, m, n, k);
	if (q->data)
		return o1_matmul_q_cpu(s->tp, y, x, q->data, q->type, bias, m,
				       n, k);
	return o1_matmul_cpu(s->tp, y, x, f, bias, m, n, k);
}

/* The product with layer L's matrix ROLE. */
static int layer_product(struct cpu_state *s, uint32_t l,
			 enum o1_tensor_role role, float *y, const float *x,
			 const float *bias, uint32_t m, uint32_t n, uint32_t k)
{
	const struct cpu_layer *c = &s->layers[l];

	return product(s, y, x, c->w[role], &c->q[role], bias, m, n, k);
}

/* h = RMSNorm(x); q, k, v = h W^T + b; RoPE on q and k. */
static int qkv_block(struct cpu_state *s, uint32_t l, uint32_t t)
{
	const struct o1_model_desc *d = &s->d;
	float **w = s->layers[l].w;
	uint32_t qd = d->n_heads * d->head_dim;
	uint32_t kvd = d->n_kv_heads * d->head_dim;
	int err = o1_rmsnorm_cpu(s->tp, s->h, s->x, w[O1_T_ATTN_NORM], t,
				 d->dim, d->norm_eps);

	if (!err)
		err = layer_product(s, l, O1_T_WQ, s->q, s->h, w[O1_T_BQ], t,
				    qd, d->dim);
	if (!err)
		err = layer_product(s, l, O1_T_WK, s->k, s->h, w[O1_T_BK], t,
				    kvd, d->dim);
	if (!err)
		err = layer_product(s, l, O1_T_WV, s->v, s->h, w[O1_T_BV], t,
				    kvd, d->dim);
	if (!err)
		err =
		    o1_rope_cpu(s->tp, s->q, s->pos, t, d->n_heads, d->head_dim,
				d->rope.dim, s->inv_freq, s->rope_scale);
	if (!err)
		err = o1_rope_cpu(s->tp, s->k, s->pos, t, d->n_kv_heads,
				  d->head_dim, d->rope.dim, s->inv_freq,
				  s->rope_scale);
	return err;
}

/* A rank's partial O or down product in s->o: summed across the ranks. */
static int reduce(struct cpu_state *s, uint32_t t)
{
	const struct o1_tp_link *k = &s->cfg.tp_link;

	return k->sum ? k->sum(k->ctx, s->o, (uint64_t)t * s->d.dim, NULL) : 0;
}

/* K/V into the pages, paged attention, output projection, residual. */
static int attention_block(struct cpu_state *s, uint32_t l, uint32_t t,
			   const struct o1_attn_batch *b)
{
	const struct o1_model_desc *d = &s->d;
	struct o1_attn_dims ad = attn_dims(s);
	float *kc = s->kv + o1_kv_layout_offset(&s->kvl, 0, l, 0);
	float *vc = s->kv + o1_kv_layout_offset(&s->kvl, 0, l, 1);
	int err = qkv_block(s, l, t);

	if (!err)
		err = o1_kv_write_cpu(s->tp, kc, vc, s->k, s->v, s->slots, t,
				      &ad);
	if (!err)
		err = o1_attention_cpu(s->tp, s->att, s->q, kc, vc, &ad, b,
				       s->scratch, s->cfg.max_context_tokens);
	if (!err)
		err = layer_product(s, l, O1_T_WO, s->o, s->att, NULL, t,
				    d->dim, d->n_heads * d->head_dim);
	if (!err)
		err = reduce(s, t);
	if (!err)
		err = o1_residual_add_cpu(s->tp, s->x, s->o, t, d->dim);
	return err;
}

/* h = RMSNorm(x); x += W_down (silu(W_gate h) * W_up h). */
static int mlp_block(struct cpu_state *s, uint32_t l, uint32_t t)
{
	const struct o1_model_desc *d = &s->d;
	float **w = s->layers[l].w;
	int err = o1_rmsnorm_cpu(s->tp, s->h, s->x, w[O1_T_FFN_NORM], t, d->dim,
				 d->norm_eps);

	if (!err)
		err = layer_product(s, l, O1_T_W_GATE, s->gate, s->h, NULL, t,
				    d->ffn_dim, d->dim);
	if (!err)
		err = layer_product(s, l, O1_T_W_UP, s->up, s->h, NULL, t,
				    d->ffn_dim, d->dim);
	if (!err)
		err = o1_swiglu_cpu(s->tp, s->gate, s->gate, s->up, t,
				    d->ffn_dim);
	if (!err)
		err = layer_product(s, l, O1_T_W_DOWN, s->o, s->gate, NULL, t,
				    d->dim, d->ffn_dim);
	if (!err)
		err = reduce(s, t);
	if (!err)
		err = o1_residual_add_cpu(s->tp, s->x, s->o, t, d->dim);
	return err;
}

/* Final norm and LM head over the N rows from row R0 of those that want
 * logits. */
static int head(struct cpu_state *s, uint32_t r0, uint32_t n, float *logits)
{
	const struct o1_model_desc *d = &s->d;

	for (uint32_t i = 0; i < n; i++)
		memcpy(s->h + (size_t)i * d->dim,
		       s->x + (size_t)s->rows[r0 + i] * d->dim,
		       d->dim * sizeof(float));
	o1_rmsnorm_cpu(s->tp, s->h, s->h, s->global[O1_T_OUTPUT_NORM], n,
		       d->dim, d->norm_eps);
	return product(s, logits, s->h, s->global[O1_T_OUTPUT],
		       &s->gq[O1_T_OUTPUT], NULL, n, d->vocab_size, d->dim);
}

struct sample_args {
	struct cpu_state *s;
	const struct o1_step *st;
	const float *logits; /* row 0 is step row r0 */
	uint32_t r0;
	_Atomic int err;
};

/* Samples step row R0 + TASK with WORKER's scratch. */
static void sample_task(void *arg, uint32_t task, uint32_t worker)
{
	struct sample_args *a = arg;
	uint32_t v = a->s->d.vocab_size, r = a->r0 + task;
	int err = o1_sample_rows_masked(
	    &a->st->samples[r], a->logits + (size_t)task * v, 1, v,
	    &a->st->sample_rows[r], a->st->pens, a->st->masks, a->st->n_masks,
	    a->s->sample_mem + worker * a->s->sample_bytes);

	if (err)
		a->err = err;
}

static int sample_rows(struct cpu_state *s, const struct o1_step *st,
		       const float *logits, uint32_t r0, uint32_t n)
{
	struct sample_args a = {s, st, logits, r0, 0};

	o1_threads_run(s->tp, n, sample_task, &a);
	return a.err;
}

/* The LM head into the step's logits, or max_seqs rows at a time into
 * the backend's own when it brings none; then the samples, if asked. */
static int head_and_sample(struct cpu_state *s, const struct o1_step *st,
			   uint32_t r)
{
	uint32_t chunk = st->logits ? r : s->cfg.max_seqs;
	int err = 0;

	for (uint32_t r0 = 0; !err && r0 < r; r0 += chunk) {
		uint32_t n = r - r0 < chunk ? r - r0 : chunk;
		float *l = st->logits ? st->logits : s->head_logits;

		err = head(s, r0, n, l);
		if (!err && st->samples)
			err = sample_rows(s, st, l, r0, n);
	}
	return err;
}

/* The step's trace ends (its phases: prep, layers, head); a slow one
 * is logged. */
static void trace_end(struct cpu_state *s, const struct o1_step *st)
{
	struct o1_step_info in;

	if (!s->trace.on)
		return;
	o1_step_trace_shape(st, &in);
	in.products = "matmul";
	in.attention = "rows";
	o1_step_trace_end(&s->trace, "cpu", &in);
}

static int cpu_step(void *state, const struct o1_step *st)
{
	struct cpu_state *s = state;
	uint32_t r, t;
	struct o1_attn_batch b = {st->n_seqs, s->q_off, s->start, s->tables,
				  s->max_blocks};
	const struct cpu_blocks *eq = &s->gq[O1_T_TOKEN_EMBD];
	int err;

	o1_step_trace_begin(&s->trace);
	r = prepare(s, st);
	t = s->q_off[st->n_seqs];
	o1_step_trace_mark(&s->trace, O1_STEP_PREP);
	err = eq->data
		  ? o1_embedding_q_cpu(s->tp, s->x, eq->data, eq->type, s->ids,
				       t, s->d.dim, s->d.vocab_size)
		  : o1_embedding_cpu(s->tp, s->x, s->global[O1_T_TOKEN_EMBD],
				     s->ids, t, s->d.dim, s->d.vocab_size);
	for (uint32_t l = 0; !err && l < s->d.n_layers; l++) {
		err = attention_block(s, l, t, &b);
		if (!err)
			err = mlp_block(s, l, t);
	}
	o1_step_trace_mark(&s->trace, O1_STEP_LAYERS);
	if (!err && !s->cfg.tp_rank)
		err = head_and_sample(s, st, r);
	o1_step_trace_mark(&s->trace, O1_STEP_HEAD);
	if (err && s->cfg.tp_link.fail)
		s->cfg.tp_link.fail(s->cfg.tp_link.ctx);
	if (!err)
		trace_end(s, st);
	return err;
}

const struct o1_backend_ops o1_cpu_backend_ops = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .step = cpu_step,
    .tp_align = 1,
    .can_sample = true,
    .kv_elem_bytes = sizeof(float),
};

/* The CUDA backend's weights (cuda_private.h): the layout of every weight
 * in the one device allocation, and the upload at create. Matrices become
 * bf16 (Q/K/V fused into one [q | k | v] matrix, gate/up into one [gate |
 * up] matrix, so each is one product), norm weights, Q/K/V biases and the
 * RoPE inverse frequencies stay f32. Each tensor is read as f32 on the host
 * into one staging buffer (the largest tensor), copied to a device staging
 * buffer and converted there; both staging buffers are freed before
 * create returns. Only rank 0 of a tensor-parallel group holds the LM head.
 *
 * Matrices in a GGUF block format (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K) stay in it
 * unless cfg.dequantize: their bytes are copied as they are (GGUF's Q/K
 * rows un-permuted whole: a row is whole blocks) and the products read
 * them (cuda_forward.c). A fused group (QKV, gate/up) is kept in blocks
 * when every tensor of it is in a block format; its runs of one type are
 * the parts of a struct cuda_qmat, each stored contiguously (so a Q4_K_M
 * layer whose V is Q6_K has a [q | k] Q4_K part and a [v] Q6_K part). A
 * group mixing float and block tensors, rare in real files, becomes bf16
 * whole (logged). With any matrix in blocks, QTILE_BYTES of bf16 scratch
 * follow the weights for the tile path of larger products.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "cuda_private.h"
#include "kernels/cuda_util.h"
#include "kernels/rope.h"

static const enum o1_tensor_role qkv_roles[] = {O1_T_WQ, O1_T_WK, O1_T_WV};
static const enum o1_tensor_role o_roles[] = {O1_T_WO};
static const enum o1_tensor_role gu_roles[] = {O1_T_W_GATE, O1_T_W_UP};
static const enum o1_tensor_role down_roles[] = {O1_T_W_DOWN};

/* Whether the group ROLES (N) of LAYER stays in blocks: every tensor a
 * block-format matrix and cfg.dequantize off. A mixed group is logged
 * unless QUIET (the layout's measuring pass). */
static bool group_in_blocks(const struct cuda_state *s,
			    const struct o1_model *m,
			    const enum o1_tensor_role *roles, int n, int layer,
			    bool quiet)
{
	bool any = false, all = true;

	for (int i = 0; i < n; i++) {
		const struct o1_tensor *t = o1_model_tensor(m, roles[i], layer);
		bool b = t && t->n_dims == 2 && o1_quant_is_block(t->dtype);

		any |= b;
		all &= b;
	}
	if (any && !all && !s->cfg.dequantize && !quiet)
		o1_info("cuda backend: layer %d: %s mixes block and float "
			"types; dequantized to bf16",
			layer, o1_tensor_role_name(roles[0]));
	return all && !s->cfg.dequantize;
}

/* The parts of group ROLES (N) of LAYER: one per run of one type, their
 * rows carved at BASE. */
static void carve_blocks(const struct o1_model *m,
			 const enum o1_tensor_role *roles, int n, int layer,
			 uintptr_t base, uint64_t *off, struct cuda_qmat *q)
{
	uint32_t col = 0;

	q->n_parts = 0;
	for (int i = 0; i < n; i++) {
		const struct o1_tensor *t = o1_model_tensor(m, roles[i], layer);
		struct cuda_qpart *p =
		    q->n_parts ? &q->part[q->n_parts - 1] : NULL;

		if (!p || p->type != (enum o1_quant_type)t->dtype) {
			p = &q->part[q->n_parts++];
			*p = (struct cuda_qpart){
			    NULL, (enum o1_quant_type)t->dtype, 0, col, 0};
			o1_quant_row_bytes(t->dtype, t->shape[1],
					   &p->row_bytes);
		}
		p->rows += (uint32_t)t->shape[0];
		col += (uint32_t)t->shape[0];
	}
	for (uint32_t i = 0; i < q->n_parts; i++)
		q->part[i].w = cuda_carve(
		    base, off, q->part[i].rows * q->part[i].row_bytes);
}

/* A group at BASE: its parts when in blocks (*BF stays NULL), else a bf16
 * matrix of ROWS x COLS into *BF. Counts the block matrices. */
static void carve_group(struct cuda_state *s, const struct o1_model *m,
			const enum o1_tensor_role *roles, int n, int layer,
			uint64_t rows, uint64_t cols, uintptr_t base,
			uint64_t *off, uint16_t **bf, struct cuda_qmat *q)
{
	*bf = NULL;
	q->n_parts = 0;
	if (group_in_blocks(s, m, roles, n, layer, !base)) {
		carve_blocks(m, roles, n, layer, base, off, q);
		s->n_block_mats += (uint32_t)n;
	} else {
		*bf = cuda_carve(base, off, rows * cols * 2);
	}
}

/* The token embedding and the LM head (tied: the embedding). */
static void carve_globals(struct cuda_state *s, const struct o1_model *m,
			  uintptr_t base, uint64_t *off)
{
	const struct o1_model_desc *d = &s->d;
	static const enum o1_tensor_role embd[] = {O1_T_TOKEN_EMBD};
	static const enum o1_tensor_role out[] = {O1_T_OUTPUT};

	carve_group(s, m, embd, 1, -1, d->vocab_size, d->dim, base, off,
		    &s->embd, &s->qembd);
	s->out_norm = cuda_carve(base, off, (uint64_t)d->dim * 4);
	/* Only rank 0 of a tensor-parallel group runs the LM head. */
	if (d->tied_embeddings) {
		s->out_w = s->embd;
		s->qout = s->qembd;
	} else if (s->cfg.tp_rank) {
		s->out_w = NULL;
		s->qout.n_parts = 0;
	} else {
		carve_group(s, m, out, 1, -1, d->vocab_size, d->dim, base, off,
			    &s->out_w, &s->qout);
	}
}

/* Assigns every weight pointer at BASE; returns the bytes needed. */
static uint64_t layout_weights(struct cuda_state *s, const struct o1_model *m,
			       uintptr_t base)
{
	const struct o1_model_desc *d = &s->d;
	uint64_t off = 0, dim = d->dim, f = d->ffn_dim;
	uint64_t qd = (uint64_t)d->n_heads * d->head_dim;

	s->n_block_mats = 0;
	carve_globals(s, m, base, &off);
	s->inv_freq = cuda_carve(base, &off, d->rope.dim / 2 * 4);
	for (uint32_t l = 0; l < d->n_layers; l++) {
		struct cuda_layer *y = &s->layers[l];

		y->attn_norm = cuda_carve(base, &off, dim * 4);
		y->ffn_norm = cuda_carve(base, &off, dim * 4);
		y->bqkv = d->qkv_bias
			      ? cuda_carve(base, &off, cuda_qkv_rows(d) * 4)
			      : NULL;
		carve_group(s, m, qkv_roles, 3, (int)l, cuda_qkv_rows(d), dim,
			    base, &off, &y->wqkv, &y->qqkv);
		carve_group(s, m, o_roles, 1, (int)l, dim, qd, base, &off,
			    &y->wo, &y->qo);
		carve_group(s, m, gu_roles, 2, (int)l, 2 * f, dim, base, &off,
			    &y->wgu, &y->qgu);
		carve_group(s, m, down_roles, 1, (int)l, dim, f, base, &off,
			    &y->wdown, &y->qdown);
	}
	s->qtile = s->n_block_mats ? cuda_carve(base, &off, QTILE_BYTES) : NULL;
	/* zero as the weights' memset leaves them; each product too */
	s->qw_count = s->n_block_mats ? cuda_carve(base, &off,
						   O1_GEMM_QW_COUNTS * 4)
				      : NULL;
	return off;
}

/* Where a tensor goes: its device address and its form there. */
enum dst_form { DST_F32, DST_BF16, DST_BLOCKS };

struct weight_dst {
	void *p;
	enum dst_form form;
};

/* The rows of a group's output from COL on, in Q's parts (blocks) or at
 * row COL of the bf16 matrix BF of COLS columns. */
static struct weight_dst group_dst(uint16_t *bf, const struct cuda_qmat *q,
				   uint64_t col, uint64_t cols)
{
	for (uint32_t i = 0; i < q->n_parts; i++) {
		const struct cuda_qpart *p = &q->part[i];

		if (col >= p->col0 && col < p->col0 + p->rows)
			return (struct weight_dst){
			    (char *)p->w + (col - p->col0) * p->row_bytes,
			    DST_BLOCKS};
	}
	return (struct weight_dst){bf ? bf + col * cols : NULL, DST_BF16};
}

static struct weight_dst layer_dst(const struct cuda_state *s,
				   enum o1_tensor_role r, uint32_t l)
{
	const struct cuda_layer *y = &s->layers[l];
	uint64_t dim = s->d.dim, hd = s->d.head_dim, f = s->d.ffn_dim;
	uint64_t q = s->d.n_heads * hd, kv = s->d.n_kv_heads * hd;

	switch (r) {
	case O1_T_ATTN_NORM:
		return (struct weight_dst){y->attn_norm, DST_F32};
	case O1_T_FFN_NORM:
		return (struct weight_dst){y->ffn_norm, DST_F32};
	case O1_T_WQ:
		return group_dst(y->wqkv, &y->qqkv, 0, dim);
	case O1_T_WK:
		return group_dst(y->wqkv, &y->qqkv, q, dim);
	case O1_T_WV:
		return group_dst(y->wqkv, &y->qqkv, q + kv, dim);
	case O1_T_BQ:
		return (struct weight_dst){y->bqkv, DST_F32};
	case O1_T_BK:
		return (struct weight_dst){y->bqkv ? y->bqkv + q : NULL,
					   DST_F32};
	case O1_T_BV:
		return (struct weight_dst){y->bqkv ? y->bqkv + q + kv : NULL,
					   DST_F32};
	case O1_T_WO:
		return group_dst(y->wo, &y->qo, 0, q);
	case O1_T_W_GATE:
		return group_dst(y->wgu, &y->qgu, 0, dim);
	case O1_T_W_UP:
		return group_dst(y->wgu, &y->qgu, f, dim);
	case O1_T_W_DOWN:
		return group_dst(y->wdown, &y->qdown, 0, f);
	default:
		return (struct weight_dst){NULL, DST_F32};
	}
}

static const enum o1_tensor_role layer_roles[] = {
    O1_T_ATTN_NORM, O1_T_WQ, O1_T_WK,	    O1_T_WV,	 O1_T_BQ,   O1_T_BK,
    O1_T_BV,	    O1_T_WO, O1_T_FFN_NORM, O1_T_W_GATE, O1_T_W_UP, O1_T_W_DOWN,
};

/* Host and device f32 staging for one tensor at a time (a block tensor's
 * bytes, fewer than its f32, use the host buffer alone). */
struct staging {
	float *host, *dev;
	uint64_t elems;
};

/* T's blocks to the host staging, rows in canonical order (GGUF's Q/K
 * rows un-permuted), then to DST. */
static int upload_blocks(struct cuda_state *s, const struct o1_model *m,
			 const struct o1_tensor *t, void *dst,
			 struct staging *st)
{
	int err = o1_tensor_read_blocks(m, t, st->host);

	if (err)
		return err;
	return O1_CUDA_CHECK(cudaMemcpyAsync(
	    dst, st->host, t->n_bytes, cudaMemcpyHostToDevice, s->stream));
}

/* Copies through the backend's stream (a plain cudaMemcpy runs on the
 * legacy stream, which a non-blocking stream does not wait for) and waits,
 * so the host staging buffer can be refilled. */
static int upload(struct cuda_state *s, const struct o1_model *m,
		  const struct o1_tensor *t, struct weight_dst dst,
		  struct staging *st)
{
	uint64_t n = o1_tensor_elements(t);
	int err;

	if (dst.form == DST_BLOCKS) {
		err = upload_blocks(s, m, t, dst.p, st);
		return err ? err
			   : O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
	}
	err = o1_tensor_read_f32(m, t, st->host);
	if (err) {
		o1_err("cuda backend: reading %s (layer %d): %s",
		       o1_tensor_role_name(t->role), t->layer,
		       o1_strerror(err));
		return err;
	}
	err = O1_CUDA_CHECK(cudaMemcpyAsync(
	    dst.form == DST_BF16 ? (void *)st->dev : dst.p, st->host, n * 4,
	    cudaMemcpyHostToDevice, s->stream));
	if (!err && dst.form == DST_BF16)
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
			      group_dst(s->embd, &s->qembd, 0, s->d.dim), st);

	if (!err)
		err =
		    upload_role(s, m, O1_T_OUTPUT_NORM, -1,
				(struct weight_dst){s->out_norm, DST_F32}, st);
	if (!err && !s->d.tied_embeddings && (s->out_w || s->qout.n_parts))
		err =
		    upload_role(s, m, O1_T_OUTPUT, -1,
				group_dst(s->out_w, &s->qout, 0, s->d.dim), st);
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

static void log_weights(const struct cuda_state *s)
{
	if (s->n_block_mats)
		o1_info("cuda backend: %.1f MiB of weights: %u matrices in "
			"GGUF block formats, the others bf16, f32 norms and "
			"biases, %u MiB of bf16 tiles",
			s->weight_bytes / 1048576.0, s->n_block_mats,
			QTILE_BYTES >> 20);
	else
		o1_info("cuda backend: %.1f MiB of weights (bf16 matrices, "
			"f32 norms and biases)",
			s->weight_bytes / 1048576.0);
}

int o1_cuda_weights_load(struct cuda_state *s, const struct o1_model *m)
{
	struct staging st = {NULL, NULL, largest_tensor(m)};
	int err;

	s->weight_bytes = layout_weights(s, m, 0);
	if (st.elems < s->d.rope.dim)
		st.elems = s->d.rope.dim;
	log_weights(s);
	err = o1_cuda_dev_alloc(&s->weights, s->weight_bytes, "weights");
	if (err)
		return err;
	layout_weights(s, m, (uintptr_t)s->weights);
	err = O1_CUDA_CHECK(
	    cudaMemsetAsync(s->weights, 0, s->weight_bytes, s->stream));
	st.host = malloc(st.elems * sizeof(float));
	if (!err && !st.host)
		err = -ENOMEM;
	if (!err)
		err = o1_cuda_dev_alloc((void **)&st.dev, st.elems * 4,
					"staging");
	if (!err)
		err = upload_all(s, m, &st);
	if (!err)
		err = setup_rope(s, m, st.host);
	if (st.dev)
		cudaFree(st.dev);
	free(st.host);
	return err;
}

/* The CUDA backend's weights (cuda_private.h): the layout of every weight
 * in the one device allocation, and the upload at create. Matrices become
 * bf16 (Q/K/V fused into one [q | k | v] matrix, gate/up into one [gate |
 * up] matrix, so each is one product), norm weights, Q/K/V biases and the
 * RoPE inverse frequencies stay f32. Each tensor is read as f32 on the host
 * into one staging buffer (the largest tensor), copied to a device staging
 * buffer and converted there; both staging buffers are freed before
 * create returns. Only rank 0 of a tensor-parallel group holds the LM head.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/log.h"
#include "cuda_private.h"
#include "kernels/cuda_util.h"
#include "kernels/rope.h"

/* Assigns every weight pointer at BASE; returns the bytes needed. */
static uint64_t layout_weights(struct cuda_state *s, uintptr_t base)
{
	const struct o1_model_desc *d = &s->d;
	uint64_t off = 0, dim = d->dim, f = d->ffn_dim;
	uint64_t qd = (uint64_t)d->n_heads * d->head_dim;

	s->embd = cuda_carve(base, &off, d->vocab_size * dim * 2);
	s->out_norm = cuda_carve(base, &off, dim * 4);
	/* Only rank 0 of a tensor-parallel group runs the LM head. */
	s->out_w = d->tied_embeddings ? s->embd
		   : s->cfg.tp_rank
		       ? NULL
		       : cuda_carve(base, &off, d->vocab_size * dim * 2);
	s->inv_freq = cuda_carve(base, &off, d->rope.dim / 2 * 4);
	for (uint32_t l = 0; l < d->n_layers; l++) {
		struct cuda_layer *y = &s->layers[l];

		y->attn_norm = cuda_carve(base, &off, dim * 4);
		y->ffn_norm = cuda_carve(base, &off, dim * 4);
		y->bqkv = d->qkv_bias
			      ? cuda_carve(base, &off, cuda_qkv_rows(d) * 4)
			      : NULL;
		y->wqkv = cuda_carve(base, &off, cuda_qkv_rows(d) * dim * 2);
		y->wo = cuda_carve(base, &off, dim * qd * 2);
		y->wgu = cuda_carve(base, &off, 2 * f * dim * 2);
		y->wdown = cuda_carve(base, &off, dim * f * 2);
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

int o1_cuda_weights_load(struct cuda_state *s, const struct o1_model *m)
{
	uint64_t bytes = layout_weights(s, 0);
	struct staging st = {NULL, NULL, largest_tensor(m)};
	int err;

	if (st.elems < s->d.rope.dim)
		st.elems = s->d.rope.dim;
	o1_info("cuda backend: %.1f MiB of weights (bf16 matrices, f32 "
		"norms and biases)",
		bytes / 1048576.0);
	err = o1_cuda_dev_alloc(&s->weights, bytes, "weights");
	if (err)
		return err;
	layout_weights(s, (uintptr_t)s->weights);
	err = O1_CUDA_CHECK(cudaMemsetAsync(s->weights, 0, bytes, s->stream));
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

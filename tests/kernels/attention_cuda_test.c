/* Paged K/V and attention batches of the CUDA kernel tests
 * (attention_cuda_test.h). */
#include "attention_cuda_test.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "kernel_cuda_test.h"
#include "kernels/gemv_q8.h"
#include "kernels/kernels_cuda.h"

uint64_t kct_page_stride(const struct kct_kv_shape *k)
{
	/* another layer follows */
	return (uint64_t)k->hkv * k->p * k->d + (k->aligned ? 8 : 6);
}

struct o1_attn_dims kct_kv_dims(const struct kct_kv_shape *k)
{
	return (struct o1_attn_dims){
	    k->hq, k->hkv, k->d, k->p, kct_page_stride(k), 1.0f / sqrtf(k->d)};
}

void kct_att_fill(const struct kct_att_case *c, struct kct_att_host *h)
{
	uint32_t used = 0;

	h->max_blocks = 0, h->rows = 0, h->max_len = 0, h->tiled_splits = 0;
	h->tc_splits = 0, h->tiled_variant = 0;
	for (uint32_t s = 0; s < c->n_seqs; s++) {
		uint32_t nb = (c->len[s] + c->k.p - 1) / c->k.p;

		h->max_blocks = nb > h->max_blocks ? nb : h->max_blocks;
		h->max_len = c->len[s] > h->max_len ? c->len[s] : h->max_len;
		h->q_off[s] = h->rows;
		h->start[s] = c->len[s] - c->n_new[s];
		h->rows += c->n_new[s];
	}
	h->q_off[c->n_seqs] = h->rows;
	h->tables = calloc((size_t)c->n_seqs * h->max_blocks, 4);
	for (uint32_t s = 0; s < c->n_seqs; s++)
		for (uint32_t b = 0; b * c->k.p < c->len[s]; b++, used++)
			h->tables[s * h->max_blocks + b] =
			    (used * 7 + 1) % c->k.n_pages;
	assert_true(used <= c->k.n_pages && c->k.n_pages % 7 != 0);
	h->cache = (size_t)c->k.n_pages * kct_page_stride(&c->k);
	h->kc = kct_randv(h->cache, 2), h->vc = kct_randv(h->cache, 2);
	kct_round_bf16(h->kc, h->cache), kct_round_bf16(h->vc, h->cache);
	h->q = kct_randv((size_t)h->rows * c->k.hq * c->k.d, 2);
}

/* o1_attention_cuda over H's batch, asked for its output quantized too
 * (o1_attn_out_q): never written where the tiled kernel takes a share
 * (rows of sequences with O1_ATTN_TILED_MIN_NEW new tokens might exist),
 * and where written the bytes of gemv_q8.c's o1_q8_input_cpu over the
 * output (the pieces past a row's last unit aside: they are compared
 * zero, as both leave them where the buffer starts zeroed). */
static void dispatch_q(void *out, const float *q, const void *kc,
		       const void *vc, const struct o1_attn_dims *dm,
		       const struct o1_attn_batch *b,
		       const struct kct_att_host *h, uint32_t n_seqs, float *sc,
		       uint64_t scratch_floats, bool pdl)
{
	uint32_t k = dm->n_heads * dm->head_dim;
	size_t bytes = o1_q8_input_bytes(h->rows, k);
	struct o1_attn_out_q oq = {kct_dev(bytes), true};
	uint8_t *want = malloc(bytes), *got;
	uint16_t *o;

	assert_int_equal(cudaMemset(oq.q, 0, bytes), cudaSuccess);
	assert_int_equal(o1_attention_cuda(out, q, kc, vc, dm, b, h->rows,
					   h->max_len, sc, scratch_floats, NULL,
					   &oq, pdl, kct_stream(pdl)),
			 0);
	if (h->rows - n_seqs + 1 >= O1_ATTN_TILED_MIN_NEW &&
	    o1_attention_tiled_fits(dm, out, q, kc, vc))
		assert_false(oq.written);
	got = kct_host_copy(oq.q, bytes);
	if (oq.written && k % 32 == 0) {
		o = kct_host_copy(out, (size_t)h->rows * k * 2);
		assert_int_equal(o1_q8_input_cpu(want, o, h->rows, k), 0);
		assert_memory_equal(got, want, bytes);
		free(o);
	} else {
		memset(want, 0, bytes);
		assert_memory_equal(got, want, bytes);
	}
	free(want), free(got), cudaFree(oq.q);
}

float *kct_att_gpu(const struct kct_att_case *c, const struct kct_att_host *h,
		   uint64_t scratch_floats, enum att_path path,
		   uint32_t min_new, bool pdl)
{
	struct o1_attn_dims dm = kct_kv_dims(&c->k);
	size_t out_n = (size_t)h->rows * c->k.hq * c->k.d;
	struct o1_attn_batch b = {
	    c->n_seqs, kct_dev_copy(h->q_off, (c->n_seqs + 1) * 4),
	    kct_dev_copy(h->start, c->n_seqs * 4),
	    kct_dev_copy(h->tables, (size_t)c->n_seqs * h->max_blocks * 4),
	    h->max_blocks};
	void *kc = kct_dev_bf16(h->kc, h->cache),
	     *vc = kct_dev_bf16(h->vc, h->cache);
	float *q = kct_dev_copy(h->q, out_n * 4),
	      *sc = kct_dev(scratch_floats * 4);
	void *out = kct_dev(out_n * 2);
	float *got;

	if (path == ATT_TILED)
		assert_int_equal(o1_attention_tiled_variant_cuda(
				     out, q, kc, vc, &dm, &b, h->rows, min_new,
				     h->max_len, h->tiled_splits, sc,
				     scratch_floats, h->tiled_variant, 0),
				 0);
	else if (path == ATT_DECODE_TC || path == ATT_DECODE_TC2)
		assert_int_equal(
		    o1_attention_decode_tc_cuda(
			out, q, kc, vc, &dm, &b, h->rows, h->max_len,
			h->tc_splits, sc, scratch_floats,
			min_new ? min_new : UINT32_MAX,
			path == ATT_DECODE_TC2 ? 2 : 0, pdl, kct_stream(pdl)),
		    0);
	else if (path == ATT_ROWS)
		assert_int_equal(o1_attention_rows_cuda(out, q, kc, vc, &dm, &b,
							h->rows, h->max_len, sc,
							scratch_floats, pdl,
							kct_stream(pdl)),
				 0);
	else
		dispatch_q(out, q, kc, vc, &dm, &b, h, c->n_seqs, sc,
			   scratch_floats, pdl);
	got = kct_host_bf16(out, out_n);
	cudaFree((void *)b.q_offsets), cudaFree((void *)b.start_pos);
	cudaFree((void *)b.block_tables), cudaFree(kc), cudaFree(vc);
	cudaFree(q), cudaFree(sc), cudaFree(out);
	return got;
}

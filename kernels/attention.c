/* Paged causal attention over the KV pool, one task per (row, head), and
 * the KV write. See attention.h for the arithmetic each output follows. */
#include "attention.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

struct attn_args {
	float *out;
	const float *q, *k, *v;
	const struct o1_attn_dims *d;
	const struct o1_attn_batch *b;
	float *scratch;
	uint32_t max_context;
};

uint64_t o1_attention_scratch_floats(uint32_t n_workers, uint32_t max_context)
{
	return (uint64_t)n_workers * max_context;
}

static float dot8(const float *a, const float *b, uint32_t n)
{
	float lane[8] = {0}, r = 0;
	uint32_t n8 = n / 8 * 8;

	for (uint32_t i = 0; i < n8; i += 8)
		for (int l = 0; l < 8; l++)
			lane[l] = lane[l] + a[i + l] * b[i + l];
	for (int l = 0; l < 8; l++)
		r = r + lane[l];
	for (uint32_t i = n8; i < n; i++)
		r = r + a[i] * b[i];
	return r;
}

static uint32_t seq_of_row(const struct o1_attn_batch *b, uint32_t row)
{
	uint32_t lo = 0, hi = b->n_seqs;

	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;

		if (b->q_offsets[mid] <= row)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static const float *kv_row(const float *cache, const struct o1_attn_dims *d,
			   const uint32_t *table, uint32_t g, uint32_t pos)
{
	uint32_t page = table[pos / d->page_tokens];

	return cache + page * d->page_stride +
	       ((size_t)g * d->page_tokens + pos % d->page_tokens) *
		   d->head_dim;
}

static void attn_task(void *arg, uint32_t task, uint32_t worker)
{
	const struct attn_args *a = arg;
	const struct o1_attn_dims *d = a->d;
	uint32_t row = task / d->n_heads, h = task % d->n_heads;
	uint32_t s = seq_of_row(a->b, row);
	uint32_t pos = a->b->start_pos[s] + row - a->b->q_offsets[s];
	uint32_t g = h / (d->n_heads / d->n_kv_heads), dim = d->head_dim;
	const uint32_t *table =
	    a->b->block_tables + (size_t)s * a->b->max_blocks;
	const float *q = a->q + ((size_t)row * d->n_heads + h) * dim;
	float *out = a->out + ((size_t)row * d->n_heads + h) * dim;
	float *sc = a->scratch + (size_t)worker * a->max_context;
	float m = -INFINITY, z = 0;

	for (uint32_t j = 0; j <= pos; j++) {
		sc[j] = dot8(q, kv_row(a->k, d, table, g, j), dim) * d->scale;
		m = sc[j] > m ? sc[j] : m;
	}
	for (uint32_t j = 0; j <= pos; j++) {
		sc[j] = expf(sc[j] - m);
		z = z + sc[j];
	}
	memset(out, 0, dim * sizeof(float));
	for (uint32_t j = 0; j <= pos; j++) {
		const float *v = kv_row(a->v, d, table, g, j);
		float p = sc[j] / z;

		for (uint32_t i = 0; i < dim; i++)
			out[i] = out[i] + p * v[i];
	}
}

static int check_dims(const struct o1_attn_dims *d)
{
	if (!d->n_heads || !d->n_kv_heads || d->n_heads % d->n_kv_heads ||
	    !d->head_dim || !d->page_tokens ||
	    d->page_stride <
		(uint64_t)d->n_kv_heads * d->page_tokens * d->head_dim) {
		o1_err("attention: bad dims: heads %u kv_heads %u head_dim %u "
		       "page_tokens %u page_stride %llu",
		       d->n_heads, d->n_kv_heads, d->head_dim, d->page_tokens,
		       (unsigned long long)d->page_stride);
		return -EINVAL;
	}
	return 0;
}

static int check_batch(const struct o1_attn_batch *b, uint32_t page_tokens,
		       uint32_t max_context)
{
	for (uint32_t s = 0; s < b->n_seqs; s++) {
		uint32_t n = b->q_offsets[s + 1] - b->q_offsets[s];
		uint64_t end = (uint64_t)b->start_pos[s] + n;

		if (b->q_offsets[s + 1] <= b->q_offsets[s] ||
		    end > max_context ||
		    end > (uint64_t)b->max_blocks * page_tokens) {
			o1_err("attention: sequence %u: %u new tokens at "
			       "position %u exceed context %u or block table "
			       "of %u pages of %u",
			       s, n, b->start_pos[s], max_context,
			       b->max_blocks, page_tokens);
			return -O1_E_CONTEXT;
		}
	}
	return 0;
}

int o1_attention_cpu(struct o1_threads *tp, float *out, const float *q,
		     const float *k_cache, const float *v_cache,
		     const struct o1_attn_dims *dims,
		     const struct o1_attn_batch *batch, float *scratch,
		     uint32_t max_context)
{
	struct attn_args a = {out,  q,	   k_cache, v_cache,
			      dims, batch, scratch, max_context};
	int err = check_dims(dims);

	if (!err && batch->n_seqs == 0)
		return 0;
	if (!err)
		err = check_batch(batch, dims->page_tokens, max_context);
	if (err)
		return err;
	o1_threads_run(tp, batch->q_offsets[batch->n_seqs] * dims->n_heads,
		       attn_task, &a);
	return 0;
}

struct kv_write_args {
	float *kc, *vc;
	const float *k, *v;
	const uint32_t *slots;
	const struct o1_attn_dims *d;
};

static void kv_write_row(void *arg, uint32_t t, uint32_t worker)
{
	const struct kv_write_args *a = arg;
	const struct o1_attn_dims *d = a->d;
	uint32_t page = a->slots[t] / d->page_tokens;
	uint32_t slot = a->slots[t] % d->page_tokens;
	size_t row = (size_t)d->n_kv_heads * d->head_dim;

	(void)worker;
	for (uint32_t g = 0; g < d->n_kv_heads; g++) {
		size_t dst = page * d->page_stride +
			     ((size_t)g * d->page_tokens + slot) * d->head_dim;
		size_t src = t * row + (size_t)g * d->head_dim;

		memcpy(a->kc + dst, a->k + src, d->head_dim * sizeof(float));
		memcpy(a->vc + dst, a->v + src, d->head_dim * sizeof(float));
	}
}

int o1_kv_write_cpu(struct o1_threads *tp, float *k_cache, float *v_cache,
		    const float *k, const float *v, const uint32_t *slots,
		    uint32_t n_tokens, const struct o1_attn_dims *dims)
{
	struct kv_write_args a = {k_cache, v_cache, k, v, slots, dims};
	int err = check_dims(dims);

	if (err)
		return err;
	o1_threads_run(tp, n_tokens, kv_write_row, &a);
	return 0;
}

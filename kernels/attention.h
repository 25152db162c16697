/* Paged attention and the KV page write: the contract the CUDA twins keep.
 *
 * KV cache layout (see daemon/backend/kv_pool.h for the whole pool): for one
 * layer, K and V are each addressed as
 *   k_cache (pages, Hkv, P, D) with a stride of PAGE_STRIDE floats between
 *   pages: element (page, h, slot, d) at
 *   k_cache[page * page_stride + (h * P + slot) * D + d],
 * P = page_tokens. Token position p of a sequence lives in page
 * block_table[p / P] at slot p % P.
 *
 * Batch layout (flat arrays, so a device copy is one memcpy each):
 *   q_offsets (n_seqs + 1): sequence s owns rows [q_offsets[s],
 *       q_offsets[s+1]) of q/out (its new tokens, >= 1 of them);
 *   start_pos (n_seqs): position of the sequence's first new token; its
 *       K/V for positions < start_pos + n_new are already in the cache
 *       (o1_kv_write_cpu ran first);
 *   block_tables (n_seqs, max_blocks): page ids, row s for sequence s.
 *
 * Per row t of sequence s (position p = start_pos + t - q_offsets[s]) and
 * query head h (kv head g = h / (Hq / Hkv), GQA/MQA):
 *   score[j] = (q . k_j) * scale for j = 0..p (causal), dot in f32 with 8
 *   lanes (lane l sums d = l, l+8, ... in order; lanes added 0..7 in order,
 *   then the D % 8 tail);
 *   m = max score; e[j] = exp(score[j] - m); Z = sum e[j] in order j;
 *   out = sum_j (e[j] / Z) * v_j in order j (f32).
 * This is transformers' eager softmax(q k^T * scale) v with max
 * subtraction. Every (row, head) is computed on its own by the same code
 * whatever else is in the batch and whatever the page size or thread
 * count, so outputs are bitwise independent of batching and paging.
 */
#ifndef O1_ATTENTION_H
#define O1_ATTENTION_H

#include <stdint.h>

#include "threads.h"

struct o1_attn_dims {
	uint32_t n_heads;     /* Hq */
	uint32_t n_kv_heads;  /* Hkv, divides Hq */
	uint32_t head_dim;    /* D */
	uint32_t page_tokens; /* P */
	uint64_t page_stride; /* floats between consecutive pages */
	float scale;	      /* usually 1/sqrt(D) */
};

struct o1_attn_batch {
	uint32_t n_seqs;
	const uint32_t *q_offsets;    /* n_seqs + 1 */
	const uint32_t *start_pos;    /* n_seqs */
	const uint32_t *block_tables; /* n_seqs * max_blocks */
	uint32_t max_blocks;
};

/* Floats of scratch o1_attention_cpu needs: one row of MAX_CONTEXT
 * scores per worker. */
uint64_t o1_attention_scratch_floats(uint32_t n_workers, uint32_t max_context);

/* out, q (T,Hq,D); k_cache, v_cache as above. SCRATCH holds
 * o1_attention_scratch_floats(o1_threads_count(tp), MAX_CONTEXT) floats.
 * Returns 0, -EINVAL for inconsistent dims, or -O1_E_CONTEXT when a
 * sequence reaches past MAX_CONTEXT or past its block table (logged). */
int o1_attention_cpu(struct o1_threads *tp, float *out, const float *q,
		     const float *k_cache, const float *v_cache,
		     const struct o1_attn_dims *dims,
		     const struct o1_attn_batch *batch, float *scratch,
		     uint32_t max_context);

/* k, v (T,Hkv,D) -> the cache: row t goes to absolute slot slots[t]
 * (= page * P + slot in page) of every kv head. */
int o1_kv_write_cpu(struct o1_threads *tp, float *k_cache, float *v_cache,
		    const float *k, const float *v, const uint32_t *slots,
		    uint32_t n_tokens, const struct o1_attn_dims *dims);

#endif

/* Tensor-parallel sharding: what rank R of N holds of a Llama-family
 * decoder, and the rank's model (struct o1_model) cut from the whole one.
 *
 * Megatron-style split, contiguous blocks per rank:
 * - attention: query heads [q_head0, q_head0 + Hq/N) and kv heads
 *   [kv_head0, kv_head0 + Hkv/N). Because both are contiguous and divide
 *   evenly, query head h of the rank uses kv head h / (Hq/Hkv) of the same
 *   rank, exactly as GQA groups them in the whole model. Q/K/V rows and
 *   biases of those heads are the rank's (column-parallel); the O
 *   projection's input columns of its query heads are the rank's
 *   (row-parallel: the rank's product is a partial sum over its heads).
 * - MLP: FFN columns [ffn0, ffn0 + F/N): gate and up rows
 *   (column-parallel), the down projection's input columns (row-parallel:
 *   a partial sum).
 * - replicated: token embedding, every norm, the LM head, RoPE tables.
 * The partial sums of O and down are summed across the ranks (all-reduce)
 * before their residual add, so every rank holds the same residual stream.
 * Each rank's KV pool holds its own kv heads only (kv_pool.h's layout with
 * Hkv/N heads) under the same page ids: the scheduler's one page pool
 * maps onto every rank's KV.
 */
#ifndef O1_TP_SHARD_H
#define O1_TP_SHARD_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

#define O1_TP_MAX_RANKS 8

struct o1_tp_shard {
	uint32_t rank, size;
	uint32_t q_head0, n_q_heads;   /* query heads */
	uint32_t kv_head0, n_kv_heads; /* kv heads (and KV pool heads) */
	uint32_t ffn0, n_ffn;	       /* FFN columns */
};

/* Plans rank RANK of SIZE (1 .. O1_TP_MAX_RANKS) for D. ALIGN (>= 1): the
 * rank's FFN columns and query columns (n_q_heads x head_dim), which are
 * the inner dimension of its down and O products, must be multiples of it
 * (the CUDA decode gemv needs 8). Returns 0; -EINVAL for a bad RANK, SIZE
 * or ALIGN; -O1_E_UNSUPPORTED (logged, saying what cannot be split) when
 * the heads or FFN columns do not divide. */
int o1_tp_shard_plan(const struct o1_model_desc *d, uint32_t rank,
		     uint32_t size, uint32_t align, struct o1_tp_shard *out);

/* The part of a tensor a rank holds: rows [row0, row0 + n_rows) and
 * columns [col0, col0 + n_cols) of the whole [rows, cols] matrix; a vector
 * is one row of cols elements. SPLIT is false for a replicated tensor (the
 * whole of it). */
struct o1_tp_slice {
	uint64_t row0, n_rows, col0, n_cols;
	bool split;
};

/* The slice of T (one of the model D's tensors) for shard S. */
void o1_tp_shard_slice(const struct o1_tp_shard *s,
		       const struct o1_model_desc *d, const struct o1_tensor *t,
		       struct o1_tp_slice *out);

/* The rank's model: D with the shard's head and FFN counts, and one tensor
 * per tensor of M, cut to its slice. Row slices and replicated tensors
 * borrow M's data (so *OUT is valid only while M is open); column slices
 * (O, down) are gathered into memory *OUT owns, in M's dtype when the
 * slice is whole blocks of it, else converted to f32. No vocabulary. Free
 * with o1_model_close. Returns 0, -ENOMEM, or an error of
 * o1_tensor_read_f32. */
int o1_tp_shard_model(const struct o1_model *m, const struct o1_tp_shard *s,
		      struct o1_model **out);

/* Elements of M the shard holds (weights a rank uploads). */
uint64_t o1_tp_shard_elements(const struct o1_model *m,
			      const struct o1_tp_shard *s);

#endif

/* CUDA twins of the CPU reference kernels (kernels/<op>.h is the
 * specification of kernels/<op>.cu). Conventions:
 * - Every pointer is device memory unless said otherwise; sizes, dims and
 *   struct arguments are host values. Launchers check shapes, alignment
 *   and NULLs first (-EINVAL, logged with the values), enqueue on STREAM
 *   and never synchronize; a launch failure is -O1_E_CUDA with file:line.
 * - bf16 tensors are passed as uint16_t (raw bfloat16 bits) so C callers
 *   need no CUDA types; conversions round to nearest even.
 * - Activations that feed a matrix product are bf16; the residual stream,
 *   matrix-product outputs, RoPE and attention arithmetic are f32.
 * - Device code cannot return errors: bad ids or pages must be refused by
 *   the caller on the host first (the CUDA backend does); kernels still
 *   never read or write out of bounds for an out-of-range token id.
 * - PDL: the decode-path launchers take PDL, which launches the kernel as a
 *   programmatic dependent of the stream's previous kernel (Hopper; see
 *   cuda_launch.h): it may start before that kernel ends, and waits for it
 *   before it reads or writes activations, so the results are the same
 *   bits either way. Before its wait a kernel reads only operands no kernel
 *   writes: weights, and the step inputs named at each launcher. A kernel
 *   of the stream that is not launched with PDL runs as before (after the
 *   previous kernel ends).
 */
#ifndef O1_KERNELS_CUDA_H
#define O1_KERNELS_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "attention.h"
#include "quant.h"
#include "sample.h"

#ifdef __cplusplus
extern "C" {
#endif

/* convert.cu: dst (n) = bf16(src (n)) and back. */
int o1_convert_bf16_from_f32_cuda(uint16_t *dst, const float *src, uint64_t n,
				  cudaStream_t stream);
int o1_convert_f32_from_bf16_cuda(float *dst, const uint16_t *src, uint64_t n,
				  cudaStream_t stream);

/* embedding.cu: out (T,dim) f32 = table (vocab,dim) bf16 [ids (T)]; a row
 * whose id is outside [0, vocab) is written as zeros. */
int o1_embedding_cuda(float *out, const uint16_t *table, const int32_t *ids,
		      uint32_t n_tokens, uint32_t dim, uint32_t vocab,
		      cudaStream_t stream);

/* quant.cu: N elements (whole blocks of TYPE) at SRC (4-byte aligned for
 * Q4_K, 2 for the others) dequantized: to f32, quant.h's values bit for
 * bit; to bf16, those values rounded to nearest even. */
int o1_quant_dequantize_cuda(enum o1_quant_type type, const void *src,
			     float *dst, uint64_t n, cudaStream_t stream);
int o1_quant_dequantize_bf16_cuda(enum o1_quant_type type, const void *src,
				  uint16_t *dst, uint64_t n,
				  cudaStream_t stream);
/* quant.cu: out (T,dim) f32 = rows ids (T) of TABLE (vocab rows of dim
 * elements of TYPE, aligned as above), dequantized as quant.h does (the
 * twin of embedding.h's o1_embedding_q_cpu); an id outside [0, vocab)
 * gives a zero row. */
int o1_embedding_q_cuda(float *out, const void *table, enum o1_quant_type type,
			const int32_t *ids, uint32_t n_tokens, uint32_t dim,
			uint32_t vocab, cudaStream_t stream);

/* rmsnorm.cu: RMSNorm fused with the residual add. For output row i and
 * source row r = ROWS ? rows[i] : i: when RESIDUAL is not NULL, x[r] +=
 * residual[r] first (written back: X is the residual stream); then
 * out[i] = bf16(weight * (x[r] * 1/sqrt(mean(x[r]^2) + eps))).
 * x, residual (rows, dim) f32; weight (dim) f32; out (n_rows, dim) bf16.
 * The sum of squares is an f32 tree reduction (rmsnorm.h uses double). */
int o1_rmsnorm_cuda(uint16_t *out, float *x, const float *residual,
		    const float *weight, const uint32_t *rows, uint32_t n_rows,
		    uint32_t dim, float eps, bool pdl, cudaStream_t stream);

/* rope.cu: the rotation of rope.h in place, x (T,H,D) f32, pos (T),
 * inv_freq (rot_dim/2). */
int o1_rope_cuda(float *x, const int32_t *pos, uint32_t n_tokens,
		 uint32_t n_heads, uint32_t head_dim, uint32_t rot_dim,
		 const float *inv_freq, float scale, cudaStream_t stream);

/* rope.cu: the QKV epilogue fused with the KV page write. qkv (T, (Hq +
 * 2 Hkv) D) f32 is the fused projection's output [q | k | v] per row, bias
 * ((Hq + 2 Hkv) D) f32 or NULL. Writes q (T,Hq,D) f32 = rope(q + bq), and
 * rope(k + bk), v + bv as bf16 into the caches at slots[t] (= page * P +
 * slot) with the layout of attention.h (page_stride in elements). With
 * PDL, POS, SLOTS and INV_FREQ are read before the wait: no kernel of the
 * stream may write them. o1_rope_kv_write_bf16_cuda reads the rows from
 * QKV_BF16 (T,(Hq+2Hkv)D) bf16 instead (A->qkv is not read): the product
 * that makes them writes half the bytes, and RoPE reads half (the same
 * results as f32 rows holding those bf16 values). */
struct o1_rope_kv_args {
	float *q;
	uint16_t *k_cache, *v_cache;
	const float *qkv, *bias;
	const int32_t *pos;
	const uint32_t *slots;
	const float *inv_freq;
	float scale;
	uint32_t n_tokens, rot_dim;
};
int o1_rope_kv_write_cuda(const struct o1_rope_kv_args *a,
			  const struct o1_attn_dims *dims, bool pdl,
			  cudaStream_t stream);
int o1_rope_kv_write_bf16_cuda(const struct o1_rope_kv_args *a,
			       const uint16_t *qkv_bf16,
			       const struct o1_attn_dims *dims, bool pdl,
			       cudaStream_t stream);

/* attention.cu: paged causal GQA attention with the arithmetic of
 * attention.h up to rounding (online softmax, f32), out (T,Hq,D) bf16,
 * q (T,Hq,D) f32, caches bf16. BATCH's arrays are device pointers, its
 * n_seqs and max_blocks host values; N_ROWS = q_offsets[n_seqs]; MAX_LEN
 * >= every start_pos + n_new: with N_ROWS it sets the number of splits
 * along the sequence; where each sequence's splits fall depends only on
 * that number and the sequence's own length (read on the device), so a
 * launch with MAX_LEN = the longest context replays from a CUDA graph.
 * SCRATCH holds SCRATCH_FLOATS floats; o1_attention_cuda_scratch_floats
 * says how many a batch needs at least for one split.
 * Rows of sequences with at least O1_ATTN_TILED_MIN_NEW new tokens go to
 * the tiled kernel (o1_attention_tiled_cuda) when the shape fits it, the
 * others to the row kernel; a batch with one row per sequence (decode)
 * launches the row kernel alone, exactly as o1_attention_rows_cuda (TUNE:
 * the decode kernel's launch shape, NULL for its defaults). PDL
 * applies to the row kernel (the tiled kernel is launched without it),
 * which merges its splits itself, through ticket counters that every
 * launch of the device shares: launches on one device must not run at the
 * same time (the CUDA backend has one stream per device). */
#define O1_ATTN_TILED_MIN_NEW 16
struct o1_attn_decode_tune;
/* OUT_Q (NULL: none): where every row goes to attention_decode.cu's row
 * kernel (a decode step the tiled kernel takes no row of, and not one
 * the decode kernel sends to its tensor cores), that kernel also writes
 * OUT quantized as an int8 product's input, the bits o1_gemv_q8_add_cuda
 * would quantize from it (kernels/q8_input_dev.h), into Q: gemv_q8.h's
 * o1_q8_input_bytes(N_ROWS, n_heads x head_dim) bytes of device memory,
 * 16-byte aligned; WRITTEN says whether it did (the O product then takes
 * Q as its XQ). Decided on the host by the launch's shape, so a CUDA
 * graph replays the same choice. */
struct o1_attn_out_q {
	void *q;
	bool written;
};
int o1_attention_cuda(uint16_t *out, const float *q, const uint16_t *k_cache,
		      const uint16_t *v_cache, const struct o1_attn_dims *dims,
		      const struct o1_attn_batch *batch, uint32_t n_rows,
		      uint32_t max_len, float *scratch, uint64_t scratch_floats,
		      const struct o1_attn_decode_tune *tune,
		      struct o1_attn_out_q *out_q, bool pdl,
		      cudaStream_t stream);
/* The row kernels for every row (attention_decode.cu when the shape fits
 * it, else the old row kernel; f32 FMAs): o1_attention_cuda without the
 * tiled kernel. */
int o1_attention_rows_cuda(uint16_t *out, const float *q,
			   const uint16_t *k_cache, const uint16_t *v_cache,
			   const struct o1_attn_dims *dims,
			   const struct o1_attn_batch *batch, uint32_t n_rows,
			   uint32_t max_len, float *scratch,
			   uint64_t scratch_floats, bool pdl,
			   cudaStream_t stream);
/* The old row kernel (attention.cu: a block per row, kv head and split,
 * K/V tiles staged in shared memory), whatever the shape: what
 * o1_attention_rows_cuda ran before attention_decode.cu, kept for A/B
 * benchmarks (tools/gpu/bench_decode_attn) and as the fallback for shapes
 * the decode kernel does not take. Same operands. */
int o1_attention_rows_legacy_cuda(uint16_t *out, const float *q,
				  const uint16_t *k_cache,
				  const uint16_t *v_cache,
				  const struct o1_attn_dims *dims,
				  const struct o1_attn_batch *batch,
				  uint32_t n_rows, uint32_t max_len,
				  float *scratch, uint64_t scratch_floats,
				  bool pdl, cudaStream_t stream);
/* attention_decode.cu: the row kernel's rows when the shape fits
 * (o1_attention_decode_fits: head_dim 32, 64, 128 or 256, page_stride a
 * multiple of 8, q and the caches 16-byte aligned): K/V read straight from
 * global memory with 16-byte loads, D/8 lanes a position, and per row on
 * the device only as many of the launch's splits as its own length needs
 * (a graph's MAX_LEN costs short rows nothing). Same operands and scratch
 * as o1_attention_cuda; rows of sequences with at least SKIP_NEW new
 * tokens are left alone (UINT32_MAX: none). TUNE (NULL: the defaults)
 * sets the block's warps (1-8), the rounds (warps x 32/(D/8) x 4
 * positions) a split takes at least, the blocks a launch aims for before
 * it splits rows (named, it also lifts the default's cap on a few rows'
 * splits: attention_decode.cu's dec_few), the most query heads a block
 * serves (1, 2, 4 or 8;
 * wider groups read K/V once a chunk), and FLAT: blocks of 4 heads load
 * each round as it starts instead of a round ahead: the benchmark's
 * sweep. OUT_Q as o1_attention_cuda's, written where SKIP_NEW is
 * UINT32_MAX and the row kernel runs. Split launches merge through tickets of
 * their own, under the same rule as the row kernel's (launches on one device
 * never overlap). TC: whether launches of many rows go to the tensor-core
 * kernel (attention_decode_tc.cu, rounding as the tiled prefill kernel's): AUTO
 * from rows x kv heads of DEC_TC_BLOCKS, ON whenever the shape fits it,
 * OFF never; TC_STAGES its K/V tiles in flight (0: default), TC_SPLITS
 * its splits (0: its pick; o1_attention_decode_tc_cuda's SPLITS).
 * The launch is shaped for the context span its MAX_LEN falls in (SPAN_ENDS
 * where SPANS_SET, the CUDA backend's graph spans; else up to
 * O1_ATTN_DECODE_SPAN_SHORT positions, up to _MID, up to _LONG, beyond):
 * beyond the first, by the K/V its rows read at the span's shortest
 * context, a few rows take blocks of two heads, and more the tensor-core
 * kernel (attention_decode.cu's dec_floor). The CUDA backend captures its
 * graphs per span (cuda_graphs.h), by default of these lengths, so short
 * steps keep short launches. */
enum o1_attn_tc { O1_ATTN_TC_AUTO, O1_ATTN_TC_OFF, O1_ATTN_TC_ON };
#define O1_ATTN_DECODE_SPAN_SHORT    1024
#define O1_ATTN_DECODE_SPAN_MID	     4096
#define O1_ATTN_DECODE_SPAN_LONG     16384
#define O1_ATTN_DECODE_SPAN_ENDS_MAX 3 /* spans below the context limit */
struct o1_attn_decode_tune {
	uint32_t warps, split_rounds, target_blocks, heads; /* 0: default */
	/* at up to 8 rows without TARGET_BLOCKS: the blocks whose splits cap
	 * a short row's (attention_decode.cu's dec_few; 0: default) */
	uint32_t few_blocks;
	bool flat;
	uint32_t tc; /* enum o1_attn_tc */
	uint32_t tc_stages, tc_splits;
	/* the spans' ends below the last, ascending (none: one span from
	 * position 1); SPANS_SET false: the O1_ATTN_DECODE_SPAN_* lengths */
	bool spans_set;
	uint32_t n_span_ends;
	uint32_t span_ends[O1_ATTN_DECODE_SPAN_ENDS_MAX];
};
bool o1_attention_decode_fits(const struct o1_attn_dims *dims,
			      const uint16_t *out, const float *q,
			      const uint16_t *k_cache,
			      const uint16_t *v_cache);
int o1_attention_decode_cuda(uint16_t *out, const float *q,
			     const uint16_t *k_cache, const uint16_t *v_cache,
			     const struct o1_attn_dims *dims,
			     const struct o1_attn_batch *batch, uint32_t n_rows,
			     uint32_t max_len, float *scratch,
			     uint64_t scratch_floats, uint32_t skip_new,
			     const struct o1_attn_decode_tune *tune,
			     struct o1_attn_out_q *out_q, bool pdl,
			     cudaStream_t stream);
/* attention_decode_tc.cu: decode rows on tensor cores, a block per (row,
 * kv head, split) (o1_attention_decode_cuda picks it; the operands,
 * MAX_LEN, SCRATCH and SKIP_NEW as there; STAGES: K/V tiles in flight, 2
 * or 3, 0 for the default). SPLITS along the positions (0: picked from
 * the rows, MAX_LEN, the GPU and what SCRATCH holds; 1 never splits;
 * -EINVAL for more than 32 or than SCRATCH holds); each row uses a split
 * a started O1_ATTN_DECODE_TC_SPLIT_MIN positions of its own length, at
 * most SPLITS: rows up to that length write their output as unsplit (the
 * same bits), longer ones leave partials in SCRATCH, merged by a second
 * launch.
 * Whether it takes the shape: head_dim 64 or 128, at most 16 query heads
 * a kv head, page_stride % 8 == 0, q and the caches 16-byte aligned;
 * -EINVAL otherwise. */
#define O1_ATTN_DECODE_TC_SPLIT_MIN 1024 /* a multiple of 64 */
bool o1_attention_decode_tc_fits(const struct o1_attn_dims *dims,
				 const uint16_t *out, const float *q,
				 const uint16_t *k_cache,
				 const uint16_t *v_cache);
int o1_attention_decode_tc_cuda(
    uint16_t *out, const float *q, const uint16_t *k_cache,
    const uint16_t *v_cache, const struct o1_attn_dims *dims,
    const struct o1_attn_batch *batch, uint32_t n_rows, uint32_t max_len,
    uint32_t splits, float *scratch, uint64_t scratch_floats, uint32_t skip_new,
    uint32_t stages, bool pdl, cudaStream_t stream);
/* attention_prefill.cu: the tiled prefill kernel (bf16 tensor cores, see
 * the file for its rounding) for the rows of the sequences with at least
 * MIN_NEW new tokens; other rows of OUT are not written. Same operands as
 * o1_attention_cuda. A grid too small to fill the GPU is split along the
 * positions (MAX_LEN bounds every sequence's length) into SPLITS ranges
 * whose partials go to SCRATCH (SCRATCH_FLOATS floats: the split count is
 * lowered to what fits) and are merged by a second launch; SPLITS 0 picks
 * the count, 1 never splits; -EINVAL for more than 32 or more than SCRATCH
 * holds. -EINVAL unless o1_attention_tiled_fits. */
int o1_attention_tiled_cuda(uint16_t *out, const float *q,
			    const uint16_t *k_cache, const uint16_t *v_cache,
			    const struct o1_attn_dims *dims,
			    const struct o1_attn_batch *batch, uint32_t n_rows,
			    uint32_t min_new, uint32_t max_len, uint32_t splits,
			    float *scratch, uint64_t scratch_floats,
			    cudaStream_t stream);
/* The tiled kernel in one of its variants, for A/B timing
 * (tools/gpu/bench_prefill_attn --variant) and the tests: a bench-lab
 * knob; the daemon runs O1_ATTN_PF_DEFAULT (o1_attention_tiled_cuda).
 * Same results up to the file's rounding; -EINVAL for an unknown one. */
enum o1_attn_pf_variant {
	O1_ATTN_PF_DEFAULT, /* the pick: WIDE, at head dim 64 LEAN3 */
	O1_ATTN_PF_LEAN3,   /* 4 warps, 2 stages: 3 blocks a multiprocessor */
	O1_ATTN_PF_WIDE,    /* 8 warps, 3 stages: 128 pairs a block */
	O1_ATTN_PF_VARIANTS
};
int o1_attention_tiled_variant_cuda(
    uint16_t *out, const float *q, const uint16_t *k_cache,
    const uint16_t *v_cache, const struct o1_attn_dims *dims,
    const struct o1_attn_batch *batch, uint32_t n_rows, uint32_t min_new,
    uint32_t max_len, uint32_t splits, float *scratch, uint64_t scratch_floats,
    uint32_t variant, cudaStream_t stream);
/* Whether the tiled kernel takes this shape: head_dim 64 or 128, scale >
 * 0, page_stride % 8 == 0, caches 16-byte, q 8-byte, out 4-byte
 * aligned. */
bool o1_attention_tiled_fits(const struct o1_attn_dims *dims,
			     const uint16_t *out, const float *q,
			     const uint16_t *k_cache, const uint16_t *v_cache);
/* Floats of scratch for ROWS rows split in SPLITS along the sequence. */
uint64_t o1_attention_cuda_scratch_floats(uint32_t rows, uint32_t n_heads,
					  uint32_t head_dim, uint32_t splits);
/* 0 where a launch of SPLITS splits of ROWS rows (at most MOST) has what
 * it needs: beyond one, SCRATCH 8-byte aligned and holding their partials;
 * else -EINVAL, logged as KERNEL's. */
int o1_attention_cuda_check_splits(const char *kernel, uint32_t splits,
				   uint32_t most, uint32_t rows,
				   uint32_t n_heads, uint32_t head_dim,
				   const float *scratch,
				   uint64_t scratch_floats);

/* swiglu.cu: out (T,F) bf16 = silu(gate) * up, gate and up (T,F) f32 with
 * LD floats between rows (2F for a fused [gate | up] product). */
int o1_swiglu_cuda(uint16_t *out, const float *gate, const float *up,
		   uint32_t ld, uint32_t n_tokens, uint32_t ffn_dim, bool pdl,
		   cudaStream_t stream);
/* The same from bf16 gate and up (LD elements between rows). */
int o1_swiglu_bf16_cuda(uint16_t *out, const uint16_t *gate, const uint16_t *up,
			uint32_t ld, uint32_t n_tokens, uint32_t ffn_dim,
			bool pdl, cudaStream_t stream);

/* gemv.cu: y (M,N) f32 = x (M,K) bf16 . w (N,K)^T bf16 (matmul.h without
 * bias) for 1 <= M <= O1_GEMV_MAX_ROWS, K a multiple of 8, x and w 16-byte
 * aligned: the decode products. f32 accumulation in a fixed order per
 * element (bitwise reproducible; a row's result ignores the other rows).
 * With PDL each warp loads its first weights before it waits. */
#define O1_GEMV_MAX_ROWS 4
/* A launch setup of gemv.cu's products (cuda_tune.h picks one per
 * product at load): BPS blocks a multiprocessor at most (1 ..
 * O1_GEMV_BPS_MAX) and PIECES 16-byte loads a lane and weight row keeps
 * in flight (one of o1_gemv_pieces's); 0 = the default of each. A setup
 * changes the schedule only: a lane sums its pieces c = lane, lane + 32,
 * ... in that order whatever PIECES, and the grid only decides which warp
 * runs a column, so every setup gives the same bits. A setup outside
 * these is refused (-EINVAL). */
struct o1_gemv_setup {
	uint8_t bps, pieces;
};
#define O1_GEMV_BPS_MAX	    4
#define O1_GEMV_BPS_DEFAULT 2
#ifndef __cplusplus
#define O1_GEMV_DEFAULT ((struct o1_gemv_setup){0, 0})
#endif
enum o1_gemv_variant {
	O1_GEMV_PLAIN,	/* o1_gemv_bf16_cuda */
	O1_GEMV_ADD,	/* o1_gemv_add_bf16_cuda */
	O1_GEMV_NORM,	/* o1_gemv_norm(_rows)_bf16_cuda */
	O1_GEMV_SWIGLU, /* o1_gemv_norm_swiglu_bf16_cuda */
	O1_GEMV_ROPE,	/* o1_gemv_norm_rope_kv_cuda */
	O1_GEMV_VARIANTS
};
/* The PIECES values a setup of VARIANT over M rows may name (the default,
 * and half of it where that is at least 2), the default
 * first, into OUT; returns how many (0 for a bad M or VARIANT). */
uint32_t o1_gemv_pieces(enum o1_gemv_variant variant, uint32_t m,
			uint8_t out[3]);
int o1_gemv_bf16_cuda(float *y, const uint16_t *x, const uint16_t *w,
		      uint32_t m, uint32_t n, uint32_t k,
		      struct o1_gemv_setup setup, bool pdl,
		      cudaStream_t stream);

/* gemv.cu, fused decode variants: o1_gemv_bf16_cuda's product (same
 * limits on M, K and alignment, the same f32 arithmetic per element) with
 * the neighbouring element-wise kernel folded in, each equal bit for bit to
 * the unfused composition on the device (and so, within the tolerances
 * of its parts, to the CPU references'):
 * - o1_gemv_add_bf16_cuda: y (M,N) f32 += x (M,K) bf16 . w (N,K)^T, the
 *   residual add (residual.h) of the O and down products: y[m][n] = y[m][n]
 *   + (the product's element), each element read and written once.
 * - o1_gemv_norm_bf16_cuda: y (M,N) = bf16(rmsnorm(x)) . w (N,K)^T, x (M,K)
 *   f32 (not modified), NORM_W (K) f32: o1_rmsnorm_cuda(x, no residual,
 *   NORM_W, EPS) then o1_gemv_bf16_cuda, without the bf16 rows in between
 *   (each block normalizes the M rows itself: K <= O1_GEMV_NORM_MAX_K).
 * - o1_gemv_norm_rows_bf16_cuda: o1_gemv_norm_bf16_cuda over the rows
 *   ROWS[0 .. M) of x (ROWS NULL: 0 .. M), as o1_rmsnorm_cuda's ROWS
 *   (without a residual) then o1_gemv_bf16_cuda: the final RMSNorm and LM
 *   head of the rows that want logits.
 * - o1_gemv_norm_swiglu_bf16_cuda: act (M,F) bf16 = bf16(silu(g) * u), [g |
 *   u] (M,2F) = bf16(rmsnorm(x)) . w (2F,K)^T (gate rows, then up rows):
 *   o1_gemv_norm_bf16_cuda into f32 then o1_swiglu_cuda, without the f32
 *   gate/up rows in between.
 * - o1_gemv_norm_rope_kv_cuda: o1_gemv_norm_bf16_cuda into the fused QKV
 *   rows ((Hq + 2 Hkv) D of DIMS, from w ((Hq + 2 Hkv) D, K)) then
 *   o1_rope_kv_write_cuda(R, DIMS), without the f32 QKV rows in between
 *   (R->qkv is not used; R->n_tokens must be M): q, the K and V pages.
 * x and NORM_W 16-byte aligned. SETUP as o1_gemv_bf16_cuda's. */
#define O1_GEMV_NORM_MAX_K 16384
int o1_gemv_add_bf16_cuda(float *y, const uint16_t *x, const uint16_t *w,
			  uint32_t m, uint32_t n, uint32_t k,
			  struct o1_gemv_setup setup, bool pdl,
			  cudaStream_t stream);
int o1_gemv_norm_bf16_cuda(float *y, const float *x, const float *norm_w,
			   float eps, const uint16_t *w, uint32_t m, uint32_t n,
			   uint32_t k, struct o1_gemv_setup setup, bool pdl,
			   cudaStream_t stream);
int o1_gemv_norm_rows_bf16_cuda(float *y, const float *x, const uint32_t *rows,
				const float *norm_w, float eps,
				const uint16_t *w, uint32_t m, uint32_t n,
				uint32_t k, struct o1_gemv_setup setup,
				bool pdl, cudaStream_t stream);
int o1_gemv_norm_swiglu_bf16_cuda(uint16_t *act, const float *x,
				  const float *norm_w, float eps,
				  const uint16_t *w, uint32_t m, uint32_t f,
				  uint32_t k, struct o1_gemv_setup setup,
				  bool pdl, cudaStream_t stream);
int o1_gemv_norm_rope_kv_cuda(const struct o1_rope_kv_args *r,
			      const struct o1_attn_dims *dims, const float *x,
			      const float *norm_w, float eps, const uint16_t *w,
			      uint32_t m, uint32_t k,
			      struct o1_gemv_setup setup, bool pdl,
			      cudaStream_t stream);

/* gemv_q.cu: y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . dequant(w) (N,K)^T
 * for 1 <= M <= O1_GEMV_MAX_ROWS, w N rows of K elements of TYPE (K whole
 * blocks), x 16-byte aligned, w as quant.cu's SRC, LDY >= N; gemv_q.h is
 * the reference (and its tolerance). Launched with PDL when PDL is set
 * (reads nothing before its wait). */
int o1_gemv_q_cuda(float *y, const uint16_t *x, const void *w,
		   enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		   uint32_t ldy, bool pdl, cudaStream_t stream);

/* gemm_q.cu: o1_gemv_q_cuda's product for any number of rows M, on the
 * tensor cores: each weight dequantized as o1_quant_dequantize_bf16_cuda
 * does (bf16), times x, summed in f32 (in an order of its own: the tests
 * bound the difference to the exact sum). x 16-byte aligned, w as
 * quant.cu's SRC, LDY >= N; -EINVAL (logged) for a shape o1_gemm_q_fits
 * rejects (K not whole blocks, N of 2^22 rows or more). */
int o1_gemm_q_cuda(float *y, const uint16_t *x, const void *w,
		   enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		   uint32_t ldy, bool pdl, cudaStream_t stream);
bool o1_gemm_q_fits(enum o1_quant_type type, uint32_t n, uint32_t k);

/* gemm_qp.cu: o1_gemm_q_cuda's product (the same values, summed in an
 * order of its own: the tests bound the difference to the exact sum), on
 * a pipeline of asynchronous copies of the blocks and x, the blocks
 * decoded to bf16 in shared memory once per tile; K split in two halves
 * (y zeroed by a kernel first, each half added atomically: the same bits
 * every run) where the grid is small. x and w 16-byte aligned, LDY >= N;
 * -EINVAL (logged) for a shape o1_gemm_qp_fits rejects. */
int o1_gemm_qp_cuda(float *y, const uint16_t *x, const void *w,
		    enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		    uint32_t ldy, bool pdl, cudaStream_t stream);
bool o1_gemm_qp_fits(enum o1_quant_type type, uint32_t n, uint32_t k,
		     const void *w);

/* gemm_qw.cu: y[i * ldy + j] (M,N) f32 = x (M,K) bf16 . W (N,K)^T on
 * Hopper's wgmma, both operands brought by the tensor memory accelerator,
 * the weights decoded in registers by bf16x2 arithmetic from the units'
 * scales in bf16 (gemm_qw.cu's header: other bits than the tiles', their
 * error 1.1-1.7x the tiles' rounding). o1_gemm_qw_available:
 * whether this build's module for the device has it (sm_90a) and the
 * driver encodes tensor maps; o1_gemm_qw_fits: TYPE one of Q8_0, Q4_0,
 * Q5_0, Q4_K, Q6_K, K a multiple of 256, W's rows a multiple of 16
 * bytes long (Q6_K: K a multiple of 2,048), W 16-byte aligned. -EINVAL on a shape
 * o1_gemm_qw_fits rejects or x (or a split's PART) not 16-byte aligned,
 * -ENOTSUP where it is not available. */
bool o1_gemm_qw_available(void);
bool o1_gemm_qw_fits(enum o1_quant_type type, uint32_t n, uint32_t k,
		     const void *w);
int o1_gemm_qw_cuda(float *y, const uint16_t *x, const void *w,
		    enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		    uint32_t ldy, bool pdl, cudaStream_t stream);
/* o1_gemm_qw_cuda with K in parts where its tiles leave multiprocessors
 * idle (gemm_qw.cu's header: the same bits whichever part ends last).
 * SPLIT's scratch: PART (16-byte aligned, PART_BYTES; what it does not
 * hold for a shape splits that less) and O1_GEMM_QW_COUNTS counters at
 * COUNT, zero before the first product (each product leaves them at
 * zero); both used by one product at a time (one stream). SPLITS: 0 picks
 * by the device's multiprocessors, N asks for N parts (A/B, tests). NULL:
 * K whole (o1_gemm_qw_cuda). */
#define O1_GEMM_QW_COUNTS 1024
struct o1_gemm_qw_split {
	float *part;
	uint64_t part_bytes;
	uint32_t *count;
	uint32_t splits;
};
int o1_gemm_qw_split_cuda(float *y, const uint16_t *x, const void *w,
			  enum o1_quant_type type, uint32_t m, uint32_t n,
			  uint32_t k, uint32_t ldy,
			  const struct o1_gemm_qw_split *split, bool pdl,
			  cudaStream_t stream);
/* The gate/up product and SwiGLU in one: W's 2F rows gate's then up's,
 * act[i * ld + j] (M,F) bf16 = silu(g) u of g = x . W[j], u = x . W[F +
 * j]: the bits of o1_swiglu_cuda on o1_gemm_qw_cuda's f32 output (K
 * whole). -EINVAL as o1_gemm_qw_cuda's on 2F rows, or LD < F. */
int o1_gemm_qw_swiglu_cuda(uint16_t *act, const uint16_t *x, const void *w,
			   enum o1_quant_type type, uint32_t m, uint32_t f,
			   uint32_t k, uint32_t ld, bool pdl,
			   cudaStream_t stream);

/* gemm_qi8.cu: the decode products' int8 arithmetic (gemv_q8.h: x
 * quantized per 32 elements, the blocks' integers multiplied exactly, each
 * unit scaled in f32) on the tensor cores for any number of rows M, in two
 * launches: o1_gemm_qi8_quantize_cuda quantizes x (M,K) bf16 into SCRATCH
 * (o1_gemm_qi8_scratch_bytes(M, K), 16-byte aligned), then each
 * o1_gemm_qi8_cuda over that scratch (the same M and K) computes y[i *
 * ldy + j] (M,N) f32 = x . dequant(w)^T: o1_gemv_q8_cpu's result up to
 * f32 rounding (the order of the units' sum), within gemv_q8.h's bound of
 * the f32 product. K split in two (y zeroed first, each half added
 * atomically: the same bits every run) where the grid is small. TYPE
 * Q8_0, Q4_0, Q5_0, Q4_K or Q6_K, w 16-byte aligned, K a multiple
 * of 256, LDY >= N; -EINVAL (logged) for a shape o1_gemm_qi8_fits
 * rejects. */
uint64_t o1_gemm_qi8_scratch_bytes(uint32_t m, uint32_t k);
bool o1_gemm_qi8_fits(enum o1_quant_type type, uint32_t n, uint32_t k,
		      const void *w);
int o1_gemm_qi8_quantize_cuda(void *scratch, const uint16_t *x, uint32_t m,
			      uint32_t k, bool pdl, cudaStream_t stream);
int o1_gemm_qi8_cuda(float *y, const void *scratch, const void *w,
		     enum o1_quant_type type, uint32_t m, uint32_t n,
		     uint32_t k, uint32_t ldy, bool pdl, cudaStream_t stream);

/* gemv_q.cu: act (M,F) bf16 = swiglu of o1_gemv_q_cuda's (M, 2F) output
 * over w (2F rows: gate, then up; one TYPE), as o1_swiglu_cuda computes
 * it, bit for bit, in one kernel. Operands as o1_gemv_q_cuda's. */
int o1_gemv_q_swiglu_cuda(uint16_t *act, const uint16_t *x, const void *w,
			  enum o1_quant_type type, uint32_t m, uint32_t f,
			  uint32_t k, bool pdl, cudaStream_t stream);

/* gemv_q.cu, the int8 path (the backend's default: cfg.quant_dot): the
 * products of o1_gemv_q_cuda and o1_gemv_q_swiglu_cuda (same operands and
 * limits) with each block launch quantizing the input rows to int8 per
 * 32 elements first and multiplying the weights' integers with __dp4a;
 * gemv_q8.h specifies the arithmetic (its CPU reference gives the same
 * bits) and bounds its distance to the f32 product. Where the quantized
 * rows would not fit a block's shared memory (o1_gemv_q8_fits false:
 * M K above ~60 K elements: 4 rows of 14336 fit) the launch runs the f32
 * kernel instead. */
int o1_gemv_q8_cuda(float *y, const uint16_t *x, const void *w,
		    enum o1_quant_type type, uint32_t m, uint32_t n, uint32_t k,
		    uint32_t ldy, bool pdl, cudaStream_t stream);
int o1_gemv_q8_swiglu_cuda(uint16_t *act, const uint16_t *x, const void *w,
			   enum o1_quant_type type, uint32_t m, uint32_t f,
			   uint32_t k, bool pdl, cudaStream_t stream);
bool o1_gemv_q8_fits(enum o1_quant_type type, uint32_t m, uint32_t k);

/* gemv_q.cu, the int8 path's fused decode variants (the CUDA backend's
 * fused products on block weights); operands as o1_gemv_q8_cuda's, and
 * they refuse (-EINVAL, logged) a shape o1_gemv_q8_fits rejects:
 * - o1_gemv_q8_add_cuda: y[i * ldy + j] += the product (the residual
 *   add of the O and down products), bit for bit o1_gemv_q8_cuda into a
 *   buffer and the next o1_rmsnorm_cuda's residual add;
 * - o1_gemv_q8_norm_cuda: the product over rmsnorm(x) of the f32 rows
 *   ROWS[0 .. M) of x (ROWS NULL: 0 .. M), NORM_W (K) f32, each block
 *   normalizing the rows itself (QKV parts, the LM head). With the norm
 *   folded (o1_gemv_q8_norm_folded, the default): o1_gemv_q8_cuda's
 *   product over bf16(x NORM_W), each output times the row's inverse RMS
 *   (its squares summed in f32 in the kernel's order), so bit for bit
 *   o1_rmsnorm_cuda (no residual) then o1_gemv_q8_cuda where that is a
 *   power of two and the sum exact, within the int8 path's error of it
 *   otherwise; not folded (gemv_q.cu's GQ_NORM_FOLD 0): that composition
 *   bit for bit;
 * - o1_gemv_q8_norm_swiglu_cuda: the same input, SwiGLU epilogue, bit for
 *   bit o1_gemv_q8_norm_cuda over the 2F rows then o1_swiglu_cuda.
 * x and NORM_W 16-byte aligned, eps >= 0.
 *
 * o1_gemv_q8_add_cuda given XQ (NULL: none) takes x quantized already, by
 * the kernel that wrote it (o1_attention_cuda's OUT_Q): gemv_q8.h's
 * o1_q8_input_bytes(M, K) bytes of device memory, 16-byte aligned, laid
 * out as kernels/q8_input_dev.h says, K a multiple of 32; it copies them
 * instead of quantizing x (the same bits, where they are x's
 * quantization). */
int o1_gemv_q8_add_cuda(float *y, const uint16_t *x, const void *xq,
			const void *w, enum o1_quant_type type, uint32_t m,
			uint32_t n, uint32_t k, uint32_t ldy, bool pdl,
			cudaStream_t stream);
int o1_gemv_q8_norm_cuda(float *y, const float *x, const uint32_t *rows,
			 const float *norm_w, float eps, const void *w,
			 enum o1_quant_type type, uint32_t m, uint32_t n,
			 uint32_t k, uint32_t ldy, bool pdl,
			 cudaStream_t stream);
int o1_gemv_q8_norm_swiglu_cuda(uint16_t *act, const float *x,
				const float *norm_w, float eps, const void *w,
				enum o1_quant_type type, uint32_t m, uint32_t f,
				uint32_t k, bool pdl, cudaStream_t stream);
bool o1_gemv_q8_norm_folded(void);
/* gemv_q.cu: o1_gemv_q8_norm_cuda's product for rows [COL0, COL0 + ROWS)
 * of the fused QKV matrix (W: that part, in blocks of TYPE; COL0 and ROWS
 * multiples of DIMS' head_dim) over the R->n_tokens rows 0 .. of x, with
 * o1_rope_kv_write_cuda(R, DIMS)'s writes for those rows as its epilogue:
 * bitwise the two kernels, without the f32 QKV rows (R->qkv is not read)
 * and the second launch. A QKV matrix in several parts takes one call per
 * part. Same operands' rules as both. */
int o1_gemv_q8_norm_rope_kv_cuda(const struct o1_rope_kv_args *r,
				 const struct o1_attn_dims *dims,
				 const float *x, const float *norm_w, float eps,
				 const void *w, enum o1_quant_type type,
				 uint32_t col0, uint32_t rows, uint32_t k,
				 bool pdl, cudaStream_t stream);
/* gemv_q.cu: the calling thread's next int8 block product launch (any
 * o1_gemv_q8_* above whose pipelined kernel runs: the default) will, as
 * its warps finish their rows, prefetch [W0, W0 + BYTES0) and [W1, W1 +
 * BYTES1) into L2 (the weights of a later product, read from L2 then; a
 * region NULL or not 16-byte aligned is skipped, bytes past the last
 * whole 16 are not fetched). The hint is for that one launch; it changes
 * no result. */
void o1_gemv_q_prefetch_next(const void *w0, uint64_t bytes0, const void *w1,
			     uint64_t bytes1);
/* gemv_q.cu: whether one input row's o1_gemv_q8_add_cuda on Q4_K or Q6_K
 * (rows of whole 16-byte pieces) with an even N takes two outputs a step
 * (j and j + N / 2, the input read once for both; the default) or one;
 * the same bits either way. For A/B
 * (bench_cuda_decode --add-two-rows); set before the launches are
 * captured, it holds for every later launch of the process. */
void o1_gemv_q_add_two_rows(bool on);
/* o1_gemv_q8_norm_rope_kv_cuda over every part of the QKV matrix
 * (PARTS[0 .. N_PARTS), the rows of each whole heads): bitwise one call
 * per part, in one launch where the parts are Q4_K then Q6_K (Q4_K_M's
 * layers with a Q6_K v: gemv_q.cu's gemv_qp2) or Q5_0 then Q8_0 (those
 * layers where the width is not whole super-blocks), else one a part. */
struct o1_gemv_q_part {
	const void *w;
	enum o1_quant_type type;
	uint32_t col0, rows;
};
int o1_gemv_q8_norm_rope_kv_parts_cuda(const struct o1_rope_kv_args *r,
				       const struct o1_attn_dims *dims,
				       const float *x, const float *norm_w,
				       float eps,
				       const struct o1_gemv_q_part *parts,
				       uint32_t n_parts, uint32_t k, bool pdl,
				       cudaStream_t stream);

/* argmax.cu: ids (rows) = index of the largest of each logits row (rows,
 * vocab) f32, the lowest index on ties; NaN never wins. */
int o1_argmax_cuda(int32_t *ids, const float *logits, uint32_t rows,
		   uint32_t vocab, cudaStream_t stream);

/* sample.cu: o1_sample_rows (sample.h) on the device. OUT (n_rows), LOGITS
 * (n_rows, vocab) f32 (not modified), ROWS (n_rows) and PENS are device
 * arrays; the caller checked the rows' parameters and penalty ids on the
 * host. SCRATCH holds SCRATCH_BYTES >= o1_sample_rows_cuda_scratch_bytes
 * (n_rows, vocab). Every per-row value is read on the device, so a launch
 * with a fixed N_ROWS replays from a CUDA graph. N_ROWS 0 enqueues nothing
 * but opts the kernel in to the shared memory VOCAB needs on the current
 * device: call it so once before capturing launches into a graph. */
int o1_sample_rows_cuda(struct o1_sample_result *out, const float *logits,
			uint32_t n_rows, uint32_t vocab,
			const struct o1_sample_row *rows,
			const struct o1_sample_penalty *pens, void *scratch,
			size_t scratch_bytes, cudaStream_t stream);
size_t o1_sample_rows_cuda_scratch_bytes(uint32_t n_rows, uint32_t vocab);
/* o1_sample_rows_masked (sample.h) on the device: as o1_sample_rows_cuda,
 * MASKS a device array of the bitmasks the rows' mask fields index
 * (o1_sample_mask_words(vocab) words each; the caller checked every
 * row's mask against their count). With MASKS NULL every row is
 * unmasked, whatever its mask field (o1_sample_rows_cuda). */
int o1_sample_rows_masked_cuda(struct o1_sample_result *out,
			       const float *logits, uint32_t n_rows,
			       uint32_t vocab, const struct o1_sample_row *rows,
			       const struct o1_sample_penalty *pens,
			       const uint32_t *masks, void *scratch,
			       size_t scratch_bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif

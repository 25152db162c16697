/* The CUDA backend's forward pass (cuda_private.h): a step on the device.
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
 * the caller's, after the logits copy at the end, and no step allocates.
 * Products go through cublasGemmEx with bf16 inputs, f32 compute and f32
 * outputs, with the workspace set at create (so cuBLAS never allocates, in
 * a capture too), over more than 4 rows at a row count from a bounded set
 * that o1_cuda_forward_warm runs once at create (blas_rows: cuBLAS's first
 * use of a shape costs 1-65 ms).
 *
 * CUDA Graphs (cuda_graphs.h, with graphs_enabled): a decode step of n
 * sequences runs as the bucket step of the smallest bucket B >= n: steps
 * 3-4 above over B rows, the last n - B being padding rows (token 0 at
 * position 0 of the reserved scratch page n_pages, which exists beyond the
 * pool the scheduler sees: padding never writes a real page), LM head over
 * the B rows into the device logits, then the n real rows are copied out.
 * The bucket step takes every per-step value from the uploaded inputs; its
 * attention is launched for max_len = its context span's length (the
 * longest context the graph serves: graphs per bucket and span; the split
 * count and the kernel are fixed per graph, each sequence spreads its own
 * length over the splits on the device: attention_decode.cu), so it
 * replays as a graph. graphs_eager
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
 * - unless cfg.cuda_no_fusion, a layer is 5 kernels instead of 9
 *   (gemv.cu's fused products): the QKV product over the RMSNorm of the
 *   residual stream x with RoPE and the KV write in its epilogue,
 *   attention (merging its own splits), x += O product, the gate/up
 *   product over the RMSNorm of x with SwiGLU in its epilogue, x += down
 *   product; the head is the LM head over the RMSNorm of x, one kernel
 *   (2 unfused). The bits are those of the unfused kernels.
 * cuBLAS kernels and every kernel of larger steps launch as before.
 *
 * Matrices in GGUF block formats (cuda_weights.c, struct cuda_qmat): a
 * product over at most O1_GEMV_MAX_ROWS rows is gemv_q.cu's, one launch
 * per part (a fused output's parts in their column ranges): by default
 * its int8 path (the input quantized per 32 elements in the kernel,
 * __dp4a on the blocks' integers: kernels/gemv_q8.h), with
 * cfg.cuda_quant_f32 dequantizing in registers in f32; a larger one
 * dequantizes each part cfg.cuda_quant_tile_bytes (at most QTILE_BYTES) of
 * bf16 at a time into the tile scratch (quant.cu) and multiplies each tile
 * with cuBLAS into its columns, or up to cfg.cuda_quant_i8_rows rows is
 * gemm_qi8.cu's int8 tensor-core product (the decode products' int8
 * arithmetic; x quantized once a product into the tile scratch), or with
 * cfg.cuda_quant_mma gemm_q.cu's tensor-core product (weight tiles
 * dequantized to bf16 in shared memory; slower so far). The embedding
 * gathers from
 * the block table. With the int8 path the fused decode products take block
 * matrices too (gemv_q.cu's fused variants, the bits of the unfused kernels):
 * the QKV parts over the RMSNorm of x with RoPE and the KV write in their
 * epilogue (parts of whole heads, as GGUF's per-tensor types give: else RoPE
 * and the KV write are a kernel of their own), the gate/up product over the
 * RMSNorm of x with SwiGLU in its epilogue (several parts: the parts, then
 * swiglu.cu), x += the O and down products, the LM head over the final
 * RMSNorm; a layer is 5 kernels (QKV parts Q4_K then Q6_K, Q4_K_M's, or
 * Q5_0 then Q8_0, its fallback types where the width is not whole
 * super-blocks, share one launch; other mixes take one a part). With
 * cfg.cuda_quant_f32 (or a block matrix too wide for the fused variants' shared
 * memory: cuda_backend.c) fused products are off for such a model: the block
 * products take the unfused route (RMSNorm, product, SwiGLU, residual add in
 * the next RMSNorm), except that a decode step's gate/up product in one block
 * type has SwiGLU in its epilogue (o1_gemv_q_swiglu_cuda, the same bits) unless
 * cfg.cuda_no_fusion.
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
 * max_batch_tokens results, cfg.max_sample_masks token bitmasks and
 * sample.cu's scratch for head_rows rows, and pinned mirrors of the rows,
 * penalties, results and masks. A step with samples uploads its rows,
 * penalties and masks after its inputs (up to three async copies: a
 * step's masks are only those of its masked rows, which index them),
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
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "cuda_private.h"
#include "kernels/cuda_util.h"
#include "kernels/rope.h"
#include "tune_pick.h"

/* A rank's collectives must be done before a copy to pageable memory,
 * which blocks the thread until the stream gets there. */
static int settle(struct cuda_state *s)
{
	return s->cfg.tp_link.wait ? o1_cuda_sync(s) : 0;
}

/* Rows up to which products on bf16 weights take gemv.cu's path:
 * cfg.cuda_gemv_rows when set, else 2 for models 4,096 wide and up, else
 * O1_GEMV_MAX_ROWS. The H200 (2026-12-02, bench_cuda_decode --gemv-rows,
 * docs/PERFORMANCE.md): at 3 and 4 rows cuBLAS beat gemv.cu by 12% and
 * 24% on llama3-8b's layers, while on qwen2.5-0.5b and llama3.2-1b gemv.cu
 * was 9-11% faster at 3 rows and within 3% at 4. */
static uint32_t bf16_gemv_most(const struct cuda_state *s)
{
	if (s->cfg.cuda_gemv_rows)
		return s->cfg.cuda_gemv_rows < O1_GEMV_MAX_ROWS
			   ? s->cfg.cuda_gemv_rows
			   : O1_GEMV_MAX_ROWS;
	return s->d.dim >= 4096 ? 2 : O1_GEMV_MAX_ROWS;
}

/* Whether a step of ROWS rows takes the gemv path: at most
 * O1_GEMV_MAX_ROWS on block weights (gemv_q.cu), bf16_gemv_most on bf16
 * ones, unless the autotuner found cuBLAS faster for them. */
static bool gemv_rows(const struct cuda_state *s, uint32_t rows)
{
	uint32_t most = s->layers[0].qqkv.n_parts ? O1_GEMV_MAX_ROWS
						 : bf16_gemv_most(s);

	return rows <= most && !o1_cuda_tune_blas(&s->tune, rows);
}

/* Whether a step of ROWS rows (or a head chunk of ROWS rows) launches
 * with PDL. */
static bool step_pdl(const struct cuda_state *s, uint32_t rows)
{
	return s->pdl && gemv_rows(s, rows);
}

/* Whether a step of ROWS rows runs the fused products. */
static bool step_fused(const struct cuda_state *s, uint32_t rows)
{
	return s->fused && gemv_rows(s, rows);
}

/* The gemv setup of product KIND over ROWS rows (cuda_tune.h). */
static struct o1_gemv_setup setup(const struct cuda_state *s,
				  enum cuda_kind kind, uint32_t rows)
{
	return o1_cuda_tune_gemv(&s->tune, kind, rows);
}

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

/* Flattens the step into the pinned inputs; counts rows and tokens and
 * the longest context. -O1_E_BOUNDS (logged) for a token id outside the
 * vocabulary. */
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

/* y (m, n of LD) bf16 = x (m,k) bf16 . w (n,k)^T by cuBLAS, f32
 * accumulation, one rounding to bf16. */
static int blas_bf16(struct cuda_state *s, uint16_t *y, const uint16_t *x,
		     const uint16_t *w, uint32_t m, uint32_t n, uint32_t k,
		     uint32_t ld, const char *what)
{
	const float one = 1.0f, zero = 0.0f;
	uint64_t t0 = o1_step_trace_now(&s->trace);
	cublasStatus_t st = cublasGemmEx(
	    s->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, w,
	    CUDA_R_16BF, (int)k, x, CUDA_R_16BF, (int)k, &zero, y, CUDA_R_16BF,
	    (int)ld, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);

	if (t0)
		o1_step_trace_lib(&s->trace, o1_step_trace_now(&s->trace) - t0);
	return o1_cuda_blas_check(st, what);
}

/* y (m,n) f32 = x (m,k) bf16 . w (n,k)^T bf16, f32 compute: gemv.cu for
 * up to O1_GEMV_MAX_ROWS rows (decode: it streams the weights near the
 * memory bandwidth, cuBLAS does not at M = 1), cuBLAS above: the
 * cuBLASLt algorithm the autotuner picked for product KIND over M rows,
 * else cublasGemmEx's default. With BF16 (only where cuBLAS's default
 * multiplies: product_bf16) y is bf16. */
static int gemm(struct cuda_state *s, enum cuda_kind kind, void *out,
		bool bf16, const uint16_t *x, const uint16_t *w, uint32_t m,
		uint32_t n, uint32_t k)
{
	const float one = 1.0f, zero = 0.0f;
	const struct cuda_tune_lt *p = NULL;
	const cublasLtMatmulAlgo_t *algo;
	float *y = out;
	cublasStatus_t st;
	uint64_t t0;

	if (bf16) /* only where cuBLAS multiplies: blas_bf16 */
		return blas_bf16(s, out, x, w, m, n, k, n, "gemm (bf16 out)");
	if (gemv_rows(s, m) && k % 8 == 0)
		return o1_gemv_bf16_cuda(y, x, w, m, n, k, setup(s, kind, m),
					 step_pdl(s, m), s->stream);
	algo = o1_cuda_tune_lt(&s->tune, kind, m, &p);
	t0 = o1_step_trace_now(&s->trace);
	if (algo)
		st = cublasLtMatmul(s->tune.lt, p->op, &one, w, p->a, x, p->b,
				    &zero, y, p->c, y, p->c, algo, s->blas_ws,
				    BLAS_WS_BYTES, s->stream);
	else
		st = cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n,
				  (int)m, (int)k, &one, w, CUDA_R_16BF, (int)k,
				  x, CUDA_R_16BF, (int)k, &zero, y, CUDA_R_32F,
				  (int)n, CUBLAS_COMPUTE_32F,
				  CUBLAS_GEMM_DEFAULT);
	if (t0)
		o1_step_trace_lib(&s->trace, o1_step_trace_now(&s->trace) - t0);
	return o1_cuda_blas_check(st, algo ? "gemm (cuBLASLt)" : "gemm");
}

/* Part P of a block matrix over M > O1_GEMV_MAX_ROWS rows: its rows as
 * bf16 tiles of at most QTILE_BYTES, each multiplied by cuBLAS into its
 * columns of y (N wide; f32, or bf16 with BF16). */
static int tiles_q(struct cuda_state *s, void *y, bool bf16,
		   const uint16_t *x, const struct cuda_qpart *p, uint32_t m,
		   uint32_t n, uint32_t k)
{
	const float one = 1.0f, zero = 0.0f;
	uint32_t bytes = s->cfg.cuda_quant_tile_bytes &&
				 s->cfg.cuda_quant_tile_bytes < QTILE_BYTES
			     ? s->cfg.cuda_quant_tile_bytes
			     : QTILE_BYTES;
	uint32_t per = bytes / 2 / k ? bytes / 2 / k : 1;
	int err = 0;

	for (uint32_t r0 = 0; !err && r0 < p->rows; r0 += per) {
		uint32_t nr = p->rows - r0 < per ? p->rows - r0 : per;
		uint32_t col = p->col0 + r0;

		err = o1_quant_dequantize_bf16_cuda(
		    p->type, (const char *)p->w + r0 * p->row_bytes, s->qtile,
		    (uint64_t)nr * k, s->stream);
		if (!err && bf16) {
			err = blas_bf16(s, (uint16_t *)y + col, x, s->qtile, m,
					nr, k, n, "gemm_q (bf16 out)");
		} else if (!err) {
			uint64_t t0 = o1_step_trace_now(&s->trace);

			err = o1_cuda_blas_check(
			    cublasGemmEx(
				s->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nr,
				(int)m, (int)k, &one, s->qtile, CUDA_R_16BF,
				(int)k, x, CUDA_R_16BF, (int)k, &zero,
				(float *)y + col, CUDA_R_32F, (int)n,
				CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
			    "gemm_q");
			if (t0)
				o1_step_trace_lib(&s->trace,
						  o1_step_trace_now(&s->trace) -
						      t0);
		}
	}
	return err;
}

/* Part P of a block matrix over rows [R, R + MR) of x (MR <=
 * O1_GEMV_MAX_ROWS): gemv_q.cu, reading the blocks once. */
static int gemv_part(struct cuda_state *s, float *y, const uint16_t *x,
		     const struct cuda_qpart *p, uint32_t r, uint32_t mr,
		     uint32_t n, uint32_t k, bool pdl)
{
	return (s->cfg.cuda_quant_f32 ? o1_gemv_q_cuda : o1_gemv_q8_cuda)(
	    y + (size_t)r * n + p->col0, x + (size_t)r * k, p->w, p->type, mr,
	    p->rows, k, n, pdl, s->stream);
}

/* Which kernel multiplies part P of a block matrix over M rows: gemv_q.cu
 * for up to O1_GEMV_MAX_ROWS rows (and in passes of that many up to
 * cfg.cuda_quant_pass_rows), the tile path above that, or gemm_qp.cu up to
 * cfg.cuda_quant_qp_rows rows, gemm_qi8.cu up to cfg.cuda_quant_i8_rows
 * (its quantized input in the tile scratch), gemm_qw.cu (wgmma) up to
 * cfg.cuda_quant_wg_rows where the build has it, or gemm_q.cu with
 * cfg.cuda_quant_mma, where they take the shape. */
enum q_route { Q_PASSES, Q_QP, Q_I8, Q_WG, Q_MMA, Q_TILES };

static enum q_route q_route(const struct cuda_state *s,
			    const struct cuda_qpart *p, uint32_t m, uint32_t k)
{
	if (m <= O1_GEMV_MAX_ROWS || m <= s->cfg.cuda_quant_pass_rows)
		return Q_PASSES;
	if (m <= s->cfg.cuda_quant_qp_rows &&
	    o1_gemm_qp_fits(p->type, p->rows, k, p->w))
		return Q_QP;
	if (m <= s->cfg.cuda_quant_i8_rows &&
	    o1_gemm_qi8_fits(p->type, p->rows, k, p->w) &&
	    o1_gemm_qi8_scratch_bytes(m, k) <= QTILE_BYTES)
		return Q_I8;
	if (m <= s->cfg.cuda_quant_wg_rows && o1_gemm_qw_available() &&
	    o1_gemm_qw_fits(p->type, p->rows, k, p->w))
		return Q_WG;
	if (s->cfg.cuda_quant_mma && o1_gemm_q_fits(p->type, p->rows, k))
		return Q_MMA;
	return Q_TILES;
}

/* y (m,n) = x (m,k) bf16 . W^T for W in blocks (Q), each part by its
 * q_route; y is f32, or bf16 with BF16 (only where every part takes the
 * tiles: product_bf16). */
static int gemm_q(struct cuda_state *s, void *out, bool bf16,
		  const uint16_t *x, const struct cuda_qmat *q, uint32_t m,
		  uint32_t n, uint32_t k)
{
	float *y = out;
	bool quantized = false; /* x's int8 rows in the tile scratch */
	int err = 0;

	for (uint32_t i = 0; !err && i < q->n_parts; i++) {
		const struct cuda_qpart *p = &q->part[i];

		switch (q_route(s, p, m, k)) {
		case Q_PASSES:
			/* rows are independent: more than O1_GEMV_MAX_ROWS
			 * in passes of that many */
			for (uint32_t r = 0; !err && r < m;
			     r += O1_GEMV_MAX_ROWS)
				err = gemv_part(
				    s, y, x, p, r,
				    m - r < O1_GEMV_MAX_ROWS ? m - r
							     : O1_GEMV_MAX_ROWS,
				    n, k, step_pdl(s, m));
			break;
		case Q_QP:
			err = o1_gemm_qp_cuda(y + p->col0, x, p->w, p->type, m,
					      p->rows, k, n, step_pdl(s, m),
					      s->stream);
			break;
		case Q_I8:
			/* once for every part (a tile part between them
			 * overwrites the scratch) */
			if (!quantized)
				err = o1_gemm_qi8_quantize_cuda(
				    s->qtile, x, m, k, step_pdl(s, m),
				    s->stream);
			quantized = !err;
			if (!err)
				err = o1_gemm_qi8_cuda(y + p->col0, s->qtile,
						       p->w, p->type, m,
						       p->rows, k, n,
						       step_pdl(s, m),
						       s->stream);
			break;
		case Q_WG: {
			/* K in parts: their sums in the tile scratch (no
			 * other product of this call reads it meanwhile) */
			struct o1_gemm_qw_split sp = {
			    (float *)s->qtile, QTILE_BYTES, s->qw_count,
			    s->cfg.cuda_quant_wg_splits};

			err = o1_gemm_qw_split_cuda(y + p->col0, x, p->w,
						    p->type, m, p->rows, k, n,
						    &sp, step_pdl(s, m),
						    s->stream);
			quantized = false;
			break;
		}
		case Q_MMA:
			err = o1_gemm_q_cuda(y + p->col0, x, p->w, p->type, m,
					     p->rows, k, n, step_pdl(s, m),
					     s->stream);
			break;
		case Q_TILES:
			err = tiles_q(s, out, bf16, x, p, m, n, k);
			quantized = false;
			break;
		}
	}
	return err;
}

/* The row count product KIND runs at for a step of M rows. cuBLAS's first
 * product of a new row count costs ~1 ms of heuristics on the host and,
 * for one count in six, 10-65 ms loading kernels, whatever
 * CUDA_MODULE_LOADING says (bench_blas_first on the H200: 82 of the counts
 * 5-512 slow at first use): a mixed step of a count not seen before
 * stalled every stream for that long. So above O1_GEMV_MAX_ROWS rows an
 * untuned product runs at M rounded up to a multiple of 16 (of 64 above
 * 256 rows, of 128 above 1,024), at most the buffers' rows: a set small
 * enough that o1_cuda_forward_warm runs each once at create. Above
 * CUDA_ROW_MAP_FROM it runs at the count the warm-up's timings map that
 * one to (row_map: cuBLAS's default at some counts is slower than at a
 * larger one; on the H200 llama3-8b's steps of 385-448 tokens took 19-20
 * ms and those of 449-512 16). The rows added read whatever the
 * activation buffers hold and their results are never read: the rows of a
 * product are independent. */
static uint32_t blas_rows(const struct cuda_state *s, enum cuda_kind kind,
			  uint32_t m)
{
	const struct cuda_tune_lt *p = NULL;
	uint32_t cap = kind == CUDA_KIND_HEAD ? s->head_rows
					      : s->cfg.max_batch_tokens;
	uint32_t g = m <= 256 ? 16 : m <= 1024 ? 64 : 128, r, lo = 0, hi;

	if (m <= O1_GEMV_MAX_ROWS || o1_cuda_tune_lt(&s->tune, kind, m, &p))
		return m;
	r = (m + g - 1) / g * g;
	r = r < cap ? r : cap;
	if (kind == CUDA_KIND_HEAD || r <= CUDA_ROW_MAP_FROM)
		return r;
	for (hi = s->n_warm; lo < hi;) { /* the first warmed count >= r */
		uint32_t mid = (lo + hi) / 2;

		if (s->warm_rows[mid] < r)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->n_warm && s->warm_rows[lo] == r
		   ? s->warm_rows[s->warm_use[kind][lo]]
		   : r;
}

/* The row count a product of M rows on a matrix in blocks (Q) or bf16
 * runs at: passes over block products take the step's own rows (no
 * cuBLAS shape to keep to the warmed set). */
static uint32_t product_rows(const struct cuda_state *s, enum cuda_kind kind,
			     const struct cuda_qmat *q, uint32_t m)
{
	return !q->n_parts || m > s->cfg.cuda_quant_pass_rows
		   ? blas_rows(s, kind, m)
		   : m;
}

/* Whether product KIND over M rows (K wide) can write bf16: where
 * cuBLAS's default multiplies (the bf16 matrix past gemv.cu's rows and
 * untuned; every part of a block matrix on the tiles). The gate/up
 * product does (SwiGLU reads it back; cfg.cuda_gu_f32 for A/B), and the
 * QKV product (RoPE reads it back; cfg.cuda_qkv_f32). */
static bool product_bf16(const struct cuda_state *s, enum cuda_kind kind,
			 const struct cuda_qmat *q, uint32_t m, uint32_t k)
{
	const struct cuda_tune_lt *p = NULL;

	if (kind == CUDA_KIND_GU ? s->cfg.cuda_gu_f32
	    : kind == CUDA_KIND_QKV ? s->cfg.cuda_qkv_f32
				    : true)
		return false;
	m = product_rows(s, kind, q, m);
	if (!q->n_parts)
		return !gemv_rows(s, m) && !o1_cuda_tune_lt(&s->tune, kind, m, &p);
	for (uint32_t i = 0; i < q->n_parts; i++)
		if (q_route(s, &q->part[i], m, k) != Q_TILES)
			return false;
	return true;
}

/* The product KIND with a matrix held as bf16 (W) or in blocks (Q) into Y:
 * f32, or bf16 with BF16 (where product_bf16 allows it). */
static int product_to(struct cuda_state *s, enum cuda_kind kind, void *y,
		      bool bf16, const uint16_t *x, const uint16_t *w,
		      const struct cuda_qmat *q, uint32_t m, uint32_t n,
		      uint32_t k)
{
	m = product_rows(s, kind, q, m);
	return q->n_parts ? gemm_q(s, y, bf16, x, q, m, n, k)
			  : gemm(s, kind, y, bf16, x, w, m, n, k);
}

static int product(struct cuda_state *s, enum cuda_kind kind, float *y,
		   const uint16_t *x, const uint16_t *w,
		   const struct cuda_qmat *q, uint32_t m, uint32_t n,
		   uint32_t k)
{
	return product_to(s, kind, y, false, x, w, q, m, n, k);
}

/* Product KIND of layer 0 (or the LM head) over R rows, as a step runs
 * it. */
static int warm_one(struct cuda_state *s, enum cuda_kind kind, uint32_t r)
{
	const struct o1_model_desc *d = &s->d;
	const struct cuda_layer *y = &s->layers[0];

	switch (kind) {
	case CUDA_KIND_QKV:
		return product_to(s, kind, s->qkv,
				  product_bf16(s, kind, &y->qqkv, r, d->dim),
				  s->h, y->wqkv, &y->qqkv, r, cuda_qkv_rows(d),
				  d->dim);
	case CUDA_KIND_O:
		return product(s, kind, s->o, s->att, y->wo, &y->qo, r, d->dim,
			       d->n_heads * d->head_dim);
	case CUDA_KIND_GU:
		return product_to(s, kind, s->gu,
				  product_bf16(s, kind, &y->qgu, r, d->dim),
				  s->h, y->wgu, &y->qgu, r, 2 * d->ffn_dim,
				  d->dim);
	case CUDA_KIND_DOWN:
		return product(s, kind, s->o, s->act, y->wdown, &y->qdown, r,
			       d->dim, d->ffn_dim);
	default:
		return product(s, CUDA_KIND_HEAD, s->logits, s->h, s->out_w,
			       &s->qout, r, d->vocab_size, d->dim);
	}
}

/* The row map (blas_rows): each layer product at each warmed count above
 * CUDA_ROW_MAP_FROM timed (the fastest of 3, after the warm-up's first
 * use), then mapped to the larger count that beats it by
 * O1_TUNE_ROWS_MARGIN, if any (o1_tune_pick over the counts from it up).
 * The timings at debug, the counts mapped at info. */
static int row_map(struct cuda_state *s)
{
	double us[CUDA_KIND_HEAD][CUDA_WARM_ROWS_MAX];
	cudaEvent_t e0 = NULL, e1 = NULL;
	int err = O1_CUDA_CHECK(cudaEventCreate(&e0));

	err = err ? err : O1_CUDA_CHECK(cudaEventCreate(&e1));
	for (uint32_t i = 0; !err && i < s->n_warm; i++)
		for (uint32_t k = 0; !err && k < CUDA_KIND_HEAD; k++) {
			us[k][i] = 0;
			for (int rep = 0; !err && rep < 3; rep++) {
				float ms = 0;

				err = O1_CUDA_CHECK(
				    cudaEventRecord(e0, s->stream));
				err = err ? err
					  : warm_one(s, (enum cuda_kind)k,
						     s->warm_rows[i]);
				err = err ? err
					  : O1_CUDA_CHECK(
						cudaEventRecord(e1, s->stream));
				err = err ? err
					  : O1_CUDA_CHECK(
						cudaEventSynchronize(e1));
				err = err ? err
					  : O1_CUDA_CHECK(
						cudaEventElapsedTime(&ms, e0,
								     e1));
				if (!err && (!rep || ms * 1e3 < us[k][i]))
					us[k][i] = ms * 1e3;
			}
		}
	if (e0)
		cudaEventDestroy(e0);
	if (e1)
		cudaEventDestroy(e1);
	if (err)
		return err;
	for (uint32_t k = 0; k < CUDA_KIND_HEAD; k++) {
		char line[512];
		int n = 0;

		for (uint32_t i = 0; i < s->n_warm; i++) {
			uint32_t j = i + o1_tune_pick(&us[k][i], s->n_warm - i,
						      O1_TUNE_ROWS_MARGIN);

			s->warm_use[k][i] = (uint8_t)j;
			o1_debug("cuda backend: %s product at %u rows: %.1f us",
				 o1_cuda_kind_name(k), s->warm_rows[i], us[k][i]);
			if (j != i && n >= 0 && (size_t)n < sizeof(line))
				n += snprintf(line + n, sizeof(line) - (size_t)n,
					      " %u->%u (%.0f->%.0f us)",
					      s->warm_rows[i], s->warm_rows[j],
					      us[k][i], us[k][j]);
		}
		if (n > 0)
			o1_info("cuda backend: %s product, row counts run at "
				"larger faster ones:%s",
				o1_cuda_kind_name(k), line);
	}
	return 0;
}

/* Every product of layer 0 and the LM head at every row count blas_rows
 * gives, once, then a wait: after create no step meets a cuBLAS shape it
 * has not run (the other layers' matrices have the same shapes). Then,
 * unless cfg.cuda_keep_row_counts, the row map (row_map). */
int o1_cuda_forward_warm(struct cuda_state *s, uint32_t *shapes)
{
	uint32_t prev = 0, m = 1;
	int err = 0;

	*shapes = 0;
	s->n_warm = 0;
	for (; !err && m <= s->cfg.max_batch_tokens; m++) {
		uint32_t r = blas_rows(s, CUDA_KIND_QKV, m);

		if (r == prev)
			continue;
		prev = r;
		++*shapes;
		if (r > CUDA_ROW_MAP_FROM && s->n_warm < CUDA_WARM_ROWS_MAX) {
			for (uint32_t k = 0; k < CUDA_KIND_HEAD; k++)
				s->warm_use[k][s->n_warm] = (uint8_t)s->n_warm;
			s->warm_rows[s->n_warm++] = r;
		}
		for (uint32_t k = 0; !err && k < CUDA_KIND_HEAD; k++)
			err = warm_one(s, (enum cuda_kind)k, r);
		if (!err && r <= s->head_rows && (s->out_w || s->qout.n_parts))
			err = warm_one(s, CUDA_KIND_HEAD, r);
	}
	err = err ? err : O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
	if (!err && !s->cfg.cuda_keep_row_counts)
		err = row_map(s);
	return err;
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

/* The most weight bytes a product prefetches into L2 for a later one: the
 * QKV and O matrices of a 8B model fit (9-15 MB in Q4_K_M), next to what
 * the products between stream through L2. */
#define PREFETCH_MAX (24u << 20)

/* The next block product launch prefetches the weights of Q (a later
 * product: its first two parts) into L2 as its warps finish
 * (o1_gemv_q_prefetch_next) where cfg.cuda_prefetch asks for it and Q
 * is at most PREFETCH_MAX. */
static void prefetch_next(const struct cuda_state *s,
			  const struct cuda_qmat *q)
{
	const void *w[2] = {NULL, NULL};
	uint64_t n[2] = {0, 0};

	if (!s->cfg.cuda_prefetch)
		return;
	for (uint32_t i = 0; i < q->n_parts && i < 2; i++)
		w[i] = q->part[i].w,
		n[i] = (uint64_t)q->part[i].rows * q->part[i].row_bytes;
	if (n[0] && n[0] + n[1] <= PREFETCH_MAX)
		o1_gemv_q_prefetch_next(w[0], n[0], w[1], n[1]);
}

/* Whether every part of the block matrix Q is whole heads of HEAD_DIM
 * rows (each part's product can then take the RoPE and KV write as its
 * epilogue: a rotated pair never spans two parts). */
static bool qparts_whole_heads(const struct cuda_qmat *q, uint32_t head_dim)
{
	for (uint32_t i = 0; i < q->n_parts; i++)
		if (q->part[i].col0 % head_dim || q->part[i].rows % head_dim)
			return false;
	return true;
}

/* The attention input: RMSNorm of the residual stream (adding the
 * previous layer's down product), the QKV product, then RoPE with the bias
 * and the KV page write (RA); fused, one kernel does all three. */
static int qkv_in(struct cuda_state *s, uint32_t l,
		  const struct o1_rope_kv_args *ra,
		  const struct o1_attn_dims *ad, bool fuse, bool pdl)
{
	const struct o1_model_desc *d = &s->d;
	const struct cuda_layer *y = &s->layers[l];
	uint32_t n = (uint32_t)cuda_qkv_rows(d), t = ra->n_tokens;
	bool bf16;
	int err;

	if (fuse && y->qqkv.n_parts &&
	    qparts_whole_heads(&y->qqkv, d->head_dim)) {
		struct o1_gemv_q_part pt[CUDA_QPARTS_MAX];

		for (uint32_t i = 0; i < y->qqkv.n_parts; i++) {
			const struct cuda_qpart *p = &y->qqkv.part[i];

			pt[i] = (struct o1_gemv_q_part){p->w, p->type, p->col0,
							p->rows};
		}
		/* the O product's weights arrive during attention */
		prefetch_next(s, &y->qo);
		return o1_gemv_q8_norm_rope_kv_parts_cuda(
		    ra, ad, s->x, y->attn_norm, d->norm_eps, pt,
		    y->qqkv.n_parts, d->dim, pdl, s->stream);
	}
	if (fuse && y->qqkv.n_parts) {
		err = 0;
		for (uint32_t i = 0; !err && i < y->qqkv.n_parts; i++) {
			const struct cuda_qpart *p = &y->qqkv.part[i];

			err = o1_gemv_q8_norm_cuda(s->qkv + p->col0, s->x, NULL,
						   y->attn_norm, d->norm_eps,
						   p->w, p->type, t, p->rows,
						   d->dim, n, pdl, s->stream);
		}
		return err ? err
			   : o1_rope_kv_write_cuda(ra, ad, pdl, s->stream);
	}
	if (fuse)
		return o1_gemv_norm_rope_kv_cuda(
		    ra, ad, s->x, y->attn_norm, d->norm_eps, y->wqkv, t, d->dim,
		    setup(s, CUDA_KIND_QKV, t), pdl, s->stream);
	err = o1_rmsnorm_cuda(s->h, s->x, l ? s->o : NULL, y->attn_norm, NULL,
			      t, d->dim, d->norm_eps, pdl, s->stream);
	bf16 = product_bf16(s, CUDA_KIND_QKV, &y->qqkv, t, d->dim);
	err = err ? err
		  : product_to(s, CUDA_KIND_QKV, s->qkv, bf16, s->h, y->wqkv,
			       &y->qqkv, t, n, d->dim);
	if (err)
		return err;
	return bf16 ? o1_rope_kv_write_bf16_cuda(ra, (const uint16_t *)s->qkv,
						 ad, pdl, s->stream)
		    : o1_rope_kv_write_cuda(ra, ad, pdl, s->stream);
}

/* Whether the gate/up product Q over T rows takes gemv_q.cu's SwiGLU
 * epilogue: in blocks of one type (one part), a decode step, fusion not
 * turned off (its bits are the unfused kernels'). */
static bool q_swiglu(const struct cuda_state *s, const struct cuda_qmat *q,
		     uint32_t t)
{
	return q->n_parts == 1 && t <= O1_GEMV_MAX_ROWS &&
	       !s->cfg.cuda_no_fusion;
}

/* Whether the gate/up product over T rows runs on gemm_qw with SwiGLU in
 * its epilogue (o1_gemm_qw_swiglu_cuda: no f32 gate/up written and read
 * back): gate's and up's rows one part, on gemm_qw's route, fusion on. */
static bool qw_swiglu(const struct cuda_state *s, const struct cuda_qmat *q,
		      uint32_t t)
{
	return q->n_parts == 1 && !s->cfg.cuda_no_fusion &&
	       q->part[0].rows == 2 * s->d.ffn_dim &&
	       q_route(s, &q->part[0], product_rows(s, CUDA_KIND_GU, q, t),
		       s->d.dim) == Q_WG;
}

/* The MLP input: RMSNorm (adding the O product, unfused), the gate/up
 * product and SwiGLU into s->act. */
static int mlp_in(struct cuda_state *s, uint32_t l, uint32_t t, bool fuse,
		  bool pdl)
{
	const struct o1_model_desc *d = &s->d;
	const struct cuda_layer *y = &s->layers[l];
	uint32_t f = d->ffn_dim;
	bool bf16;
	int err;

	if (fuse && y->qgu.n_parts == 1)
		return o1_gemv_q8_norm_swiglu_cuda(
		    s->act, s->x, y->ffn_norm, d->norm_eps, y->qgu.part[0].w,
		    y->qgu.part[0].type, t, f, d->dim, pdl, s->stream);
	if (fuse && y->qgu.n_parts) {
		err = 0;
		for (uint32_t i = 0; !err && i < y->qgu.n_parts; i++) {
			const struct cuda_qpart *p = &y->qgu.part[i];

			err = o1_gemv_q8_norm_cuda(
			    s->gu + p->col0, s->x, NULL, y->ffn_norm,
			    d->norm_eps, p->w, p->type, t, p->rows, d->dim,
			    2 * f, pdl, s->stream);
		}
		return err ? err
			   : o1_swiglu_cuda(s->act, s->gu, s->gu + f, 2 * f, t,
					    f, pdl, s->stream);
	}
	if (fuse)
		return o1_gemv_norm_swiglu_bf16_cuda(
		    s->act, s->x, y->ffn_norm, d->norm_eps, y->wgu, t, f,
		    d->dim, setup(s, CUDA_KIND_GU, t), pdl, s->stream);
	err = o1_rmsnorm_cuda(s->h, s->x, s->o, y->ffn_norm, NULL, t, d->dim,
			      d->norm_eps, pdl, s->stream);
	if (!err && q_swiglu(s, &y->qgu, t))
		return (s->cfg.cuda_quant_f32 ? o1_gemv_q_swiglu_cuda
					      : o1_gemv_q8_swiglu_cuda)(
		    s->act, s->h, y->qgu.part[0].w, y->qgu.part[0].type, t, f,
		    d->dim, pdl, s->stream);
	if (!err && qw_swiglu(s, &y->qgu, t))
		return o1_gemm_qw_swiglu_cuda(s->act, s->h, y->qgu.part[0].w,
					      y->qgu.part[0].type, t, f,
					      d->dim, f, pdl, s->stream);
	bf16 = product_bf16(s, CUDA_KIND_GU, &y->qgu, t, d->dim);
	err = err ? err
		  : product_to(s, CUDA_KIND_GU, s->gu, bf16, s->h, y->wgu,
			       &y->qgu, t, 2 * f, d->dim);
	if (err || !bf16)
		return err ? err
			   : o1_swiglu_cuda(s->act, s->gu, s->gu + f, 2 * f,
					    t, f, pdl, s->stream);
	return o1_swiglu_bf16_cuda(s->act, (const uint16_t *)s->gu,
				   (const uint16_t *)s->gu + f, 2 * f, t, f,
				   pdl, s->stream);
}

/* An output product KIND (O or down) of IN (K wide) by W: added to the
 * residual stream when ADD (fused; IN_Q: IN quantized already, or NULL),
 * else into s->o, summed across the ranks, for the next RMSNorm to add. */
static int out_product(struct cuda_state *s, enum cuda_kind kind,
		       const uint16_t *in, const void *in_q, const uint16_t *w,
		       const struct cuda_qmat *q, uint32_t t, uint32_t k,
		       bool add, bool pdl)
{
	int err = 0;

	if (add && q->n_parts) {
		for (uint32_t i = 0; !err && i < q->n_parts; i++)
			err = o1_gemv_q8_add_cuda(
			    s->x + q->part[i].col0, in, in_q, q->part[i].w,
			    q->part[i].type, t, q->part[i].rows, k, s->d.dim,
			    pdl, s->stream);
		return err;
	}
	if (add)
		return o1_gemv_add_bf16_cuda(s->x, in, w, t, s->d.dim, k,
					     setup(s, kind, t), pdl, s->stream);
	err = product(s, kind, s->o, in, w, q, t, s->d.dim, k);
	return err ? err : reduce(s, t);
}

/* Layer L's RoPE and KV page write over T tokens (the step inputs). */
static struct o1_rope_kv_args rope_args(const struct cuda_state *s, uint32_t l,
					uint32_t t)
{
	return (struct o1_rope_kv_args){
	    s->q,
	    s->kv + o1_kv_layout_offset(&s->kvl, 0, l, 0),
	    s->kv + o1_kv_layout_offset(&s->kvl, 0, l, 1),
	    s->qkv,
	    s->layers[l].bqkv,
	    s->dev.pos,
	    s->dev.slots,
	    s->inv_freq,
	    s->rope_scale,
	    t,
	    s->d.rope.dim};
}

/* The width of att from which the decode attention also writes it
 * quantized for the O product by default (cfg.cuda_att_q: AUTO; the
 * product then copies it instead of quantizing att in each of its
 * blocks, kernels_cuda.h's o1_attn_out_q). On the H100 (2026-12-07,
 * object_ab.sh, prompts of 200, 128 steps, three rounds by turns;
 * docs/PERFORMANCE.md) llama3-8b Q4_K_M (att 4,096 wide) ran 410.9 tok/s
 * against 408.2 without (+0.7%, every round), llama3.2-1b Q4_K_M (2,048)
 * 1,479.6 against 1,493.3 (-0.9%, every round): the quantization the
 * product saves grows with the width (a round of its threads per 2,048),
 * while the epilogue delays each attention block's end whatever the
 * width. */
#define ATT_Q_MIN_WIDTH 4096

/* Where layer L's attention over T rows may leave att quantized for its
 * O product (s->att_q), or NULL: the fused int8 product (out_product's
 * first branch) over at most the rows s->att_q holds, as cfg.cuda_att_q
 * says. */
static void *att_q(const struct cuda_state *s, uint32_t l, uint32_t t)
{
	uint32_t mode = s->cfg.cuda_att_q;
	bool wide = s->d.n_heads * s->d.head_dim >= ATT_Q_MIN_WIDTH;

	return step_fused(s, t) && s->layers[l].qo.n_parts &&
		       t <= O1_GEMV_MAX_ROWS &&
		       (mode == O1_CUDA_ATT_Q_ON ||
			(mode == O1_CUDA_ATT_Q_AUTO && wide))
		   ? s->att_q
		   : NULL;
}

static int attention_block(struct cuda_state *s, uint32_t l,
			   const struct flat *f, const struct o1_attn_batch *b)
{
	const struct o1_model_desc *d = &s->d;
	const struct cuda_layer *y = &s->layers[l];
	struct o1_attn_dims ad = attn_dims(s);
	struct o1_rope_kv_args ra = rope_args(s, l, f->tokens);
	uint32_t t = f->tokens, qd = d->n_heads * d->head_dim;
	bool pdl = step_pdl(s, t), fuse = step_fused(s, t);
	struct o1_attn_out_q oq = {att_q(s, l, t), false};
	int err = qkv_in(s, l, &ra, &ad, fuse, pdl);

	err = err || s->cfg.cuda_no_attention
		  ? err
		  : o1_attention_cuda(s->att, s->q, ra.k_cache, ra.v_cache, &ad,
				      b, t, f->max_len, s->scratch,
				      s->scratch_floats, &s->attn_tune, &oq,
				      pdl, s->stream);
	return err ? err
		   : out_product(s, CUDA_KIND_O, s->att,
				 oq.written ? oq.q : NULL, y->wo, &y->qo, t, qd,
				 fuse, pdl);
}

/* Unfused, the down product goes to s->o for the next RMSNorm (the next
 * layer's or the head's) to add; fused, it is added to x at once. */
static int mlp_block(struct cuda_state *s, uint32_t l, uint32_t t)
{
	bool pdl = step_pdl(s, t), fuse = step_fused(s, t);
	int err = mlp_in(s, l, t, fuse, pdl);

	/* the down product's tail brings the next layer's QKV weights */
	if (fuse && s->layers[l].qdown.n_parts && l + 1 < s->d.n_layers)
		prefetch_next(s, &s->layers[l + 1].qqkv);
	return err ? err
		   : out_product(s, CUDA_KIND_DOWN, s->act, NULL,
				 s->layers[l].wdown, &s->layers[l].qdown, t,
				 s->d.ffn_dim, fuse, pdl);
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
	const struct cuda_qpart *e =
	    s->qembd.n_parts ? &s->qembd.part[0] : NULL;
	int err =
	    e ? o1_embedding_q_cuda(s->x, e->w, e->type, s->dev.ids, f->tokens,
				    s->d.dim, s->d.vocab_size, s->stream)
	      : o1_embedding_cuda(s->x, s->embd, s->dev.ids, f->tokens,
				  s->d.dim, s->d.vocab_size, s->stream);

	for (uint32_t l = 0; !err && l < s->d.n_layers; l++) {
		err = attention_block(s, l, f, &b);
		if (!err)
			err = mlp_block(s, l, f->tokens);
	}
	return err;
}

/* Final norm (adding the last MLP output unless FUSED layers added it
 * already) and LM head over rows [C, C + N) of those that want logits,
 * into the device logits; fused, one kernel. */
static int head_chunk(struct cuda_state *s, uint32_t c, uint32_t n, bool fused)
{
	const struct o1_model_desc *d = &s->d;
	bool pdl = step_pdl(s, n);
	int err = 0;

	if (fused && s->qout.n_parts) {
		for (uint32_t i = 0; !err && i < s->qout.n_parts; i++) {
			const struct cuda_qpart *p = &s->qout.part[i];

			err = o1_gemv_q8_norm_cuda(
			    s->logits + p->col0, s->x, s->dev.rows + c,
			    s->out_norm, d->norm_eps, p->w, p->type, n, p->rows,
			    d->dim, d->vocab_size, pdl, s->stream);
		}
		return err;
	}
	if (fused)
		return o1_gemv_norm_rows_bf16_cuda(
		    s->logits, s->x, s->dev.rows + c, s->out_norm, d->norm_eps,
		    s->out_w, n, d->vocab_size, d->dim,
		    setup(s, CUDA_KIND_HEAD, n), pdl, s->stream);
	err = o1_rmsnorm_cuda(s->h, s->x, s->o, s->out_norm, s->dev.rows + c, n,
			      d->dim, d->norm_eps, pdl, s->stream);
	return err ? err
		   : product(s, CUDA_KIND_HEAD, s->logits, s->h, s->out_w,
			     &s->qout, n, d->vocab_size, d->dim);
}

int o1_cuda_forward_stage(struct cuda_state *s, enum cuda_kind kind, uint32_t l,
			  uint32_t t)
{
	const struct o1_model_desc *d = &s->d;
	const struct cuda_layer *y = &s->layers[l];
	struct o1_attn_dims ad = attn_dims(s);
	struct o1_rope_kv_args ra = rope_args(s, l, t);
	bool pdl = step_pdl(s, t), fuse = step_fused(s, t);

	switch (kind) {
	case CUDA_KIND_QKV:
		return qkv_in(s, l, &ra, &ad, fuse, pdl);
	case CUDA_KIND_O:
		return out_product(s, kind, s->att, NULL, y->wo, &y->qo, t,
				   d->n_heads * d->head_dim, fuse, pdl);
	case CUDA_KIND_GU:
		return mlp_in(s, l, t, fuse, pdl);
	case CUDA_KIND_DOWN:
		return out_product(s, kind, s->act, NULL, y->wdown, &y->qdown,
				   t, d->ffn_dim, fuse, pdl);
	default:
		return head_chunk(s, 0, t, fuse);
	}
}

/* Uploads the N_MASKS token masks of ST (none without ST) through the
 * pinned mirror. */
static int upload_masks(struct cuda_state *s, const struct o1_step *st)
{
	struct cuda_sampling *m = &s->smp;
	size_t bytes = st && st->n_masks
			   ? (size_t)st->n_masks *
				 o1_sample_mask_words(s->d.vocab_size) * 4
			   : 0;

	if (!bytes)
		return 0;
	memcpy(m->h.masks, st->masks, bytes);
	return O1_CUDA_CHECK(cudaMemcpyAsync(
	    m->d.masks, m->h.masks, bytes, cudaMemcpyHostToDevice, s->stream));
}

/* Uploads N sample rows (ROWS; NULL: greedy ones), padded to BATCH
 * with greedy rows (u 0, no penalties, no logprobs, no mask: all zero),
 * N_PENS penalty entries and the masks of ST (NULL: none), through the
 * pinned mirrors. */
static int upload_samples(struct cuda_state *s,
			  const struct o1_sample_row *rows, uint32_t n,
			  uint32_t batch, const struct o1_sample_penalty *pens,
			  uint32_t n_pens, const struct o1_step *st)
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
	err = err ? err : upload_masks(s, rows ? st : NULL);
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

	return o1_sample_rows_masked_cuda(
	    m->d.res + c, s->logits, n, s->d.vocab_size, m->d.rows + c,
	    m->d.pens, m->d.masks, m->scratch, m->scratch_bytes, s->stream);
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

/* The LM head over the R rows that want logits, HEAD_ROWS at a time, each
 * chunk served to the device outputs, then sampled (when asked), then
 * copied to the host (when asked); the results after the last chunk. */
static int head(struct cuda_state *s, const struct o1_step *st,
		const struct flat *f)
{
	bool smp = s->sampling && st->samples, fused = step_fused(s, f->tokens);
	uint32_t r = f->rows;
	uint64_t touched = 0;
	int err = 0;

	for (uint32_t c = 0; !err && c < r; c += s->head_rows) {
		uint32_t n = r - c < s->head_rows ? r - c : s->head_rows;

		err = head_chunk(s, c, n, fused);
		err = err ? err : o1_cuda_devout_rows(s, st, c, n, &touched);
		if (!err && smp)
			err = sample_chunk(s, c, n);
		if (!err && st->logits)
			err = copy_logits(
			    s, st->logits + (size_t)c * s->d.vocab_size, n);
	}
	if (!err && smp)
		err = copy_samples(s, r);
	return err ? err : o1_cuda_devout_record(s, touched);
}

/* The paths a step of F's tokens over N_SEQS sequences takes, for its
 * trace: the products' (bf16 matrices; "blocks" when the QKV matrix is
 * in GGUF blocks) and attention's (as attention.cu's dispatch decides:
 * the tiled kernel can take a sequence only when the rows beyond one a
 * sequence reach O1_ATTN_TILED_MIN_NEW). */
static void trace_paths(struct cuda_state *s, uint32_t n_seqs,
			const struct flat *f)
{
	const struct cuda_tune_lt *p = NULL;
	uint32_t t = f->tokens;
	bool tiled = t >= n_seqs && t - n_seqs + 1 >= O1_ATTN_TILED_MIN_NEW;

	if (s->layers[0].qqkv.n_parts)
		s->trace_info.products =
		    t <= O1_GEMV_MAX_ROWS ? "blocks gemv_q" : "blocks tiles";
	else if (gemv_rows(s, t) && s->d.dim % 8 == 0)
		s->trace_info.products =
		    step_fused(s, t) ? "gemv fused" : "gemv";
	else if (o1_cuda_tune_lt(&s->tune, CUDA_KIND_QKV, t, &p))
		s->trace_info.products = "cublasLt (tuned)";
	else
		s->trace_info.products = "cublasGemmEx (default)";
	if (!tiled)
		s->trace_info.attention = "rows";
	else
		s->trace_info.attention =
		    n_seqs == 1 ? "tiled" : "rows + tiled";
}

/* Any step, eagerly. */
static int forward(struct cuda_state *s, const struct o1_step *st,
		   const struct flat *f)
{
	int err = upload_inputs(s, st->n_seqs);

	if (!err && s->sampling && st->samples)
		err = upload_samples(s, st->sample_rows, f->rows, f->rows,
				     st->pens, st->n_pens, st);
	o1_step_trace_mark(&s->trace, O1_STEP_UPLOAD);
	if (s->trace.on)
		trace_paths(s, st->n_seqs, f);
	err = err ? err : layers(s, st->n_seqs, f);
	err = err ? err : settle(s);
	o1_step_trace_mark(&s->trace, O1_STEP_LAYERS);
	if (err || s->cfg.tp_rank)
		return err;
	err = head(s, st, f);
	o1_step_trace_mark(&s->trace, O1_STEP_HEAD);
	return err;
}

/* The bucket step of BATCH one-token rows whose contexts are at most
 * MAX_LEN positions (the graph's span), logits left on the device,
 * sampled into the device results when the backend samples: what a graph
 * holds. Every host value here is fixed per bucket and span. */
int o1_cuda_forward_bucket(void *ctx, uint32_t batch, uint32_t max_len)
{
	struct cuda_state *s = ctx;
	struct flat f = {batch, batch, max_len};
	int err = layers(s, batch, &f);

	if (err || s->cfg.tp_rank)
		return err;
	err = head_chunk(s, 0, batch, step_fused(s, batch));
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

int o1_cuda_forward_prepare(void *ctx, uint32_t batch)
{
	struct cuda_state *s = ctx;

	int err;

	pad_inputs(s, 0, batch);
	err = upload_inputs(s, batch);
	if (err || !s->sampling)
		return err;
	return upload_samples(s, NULL, 0, batch, NULL, 0, NULL);
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
static int bucket_step(struct cuda_state *s, const struct o1_step *st,
		       const struct flat *f)
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
				     rows ? st->n_pens : 0, st);
	o1_step_trace_mark(&s->trace, O1_STEP_UPLOAD);
	s->trace_info.bucket = batch;
	err = err ? err : o1_cuda_graphs_run(s->graphs, n, batch, f->max_len);
	err = err ? err : settle(s);
	o1_step_trace_mark(&s->trace, O1_STEP_LAYERS);
	if (err || s->cfg.tp_rank)
		return err;
	err = o1_cuda_devout_rows(s, st, 0, n, &touched);
	err = err ? err : o1_cuda_devout_record(s, touched);
	if (!err && st->logits)
		err = copy_logits(s, st->logits, n);
	if (!err && s->sampling && st->samples)
		err = copy_samples(s, n);
	o1_step_trace_mark(&s->trace, O1_STEP_HEAD);
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
	err = bucket_step(s, st, f);
	return err == -ERANGE ? forward(s, st, f) : err;
}

int o1_cuda_forward_step(struct cuda_state *s, const struct o1_step *st,
			 uint32_t *rows)
{
	struct flat f = {0, 0, 0};
	int err = flatten(s, st, &f);

	o1_step_trace_mark(&s->trace, O1_STEP_PREP);
	*rows = f.rows;
	return err ? err : run_step(s, st, &f);
}

/* bench_cuda_decode: CUDA backend decode speed beside its floor.
 *
 *   bench_cuda_decode MODEL [--prompt N] [--tokens N] [--batch N]
 *                     [--graphs on|off|both] [--pdl on|off|both]
 *                     [--fusion on|off|both] [--tp N] [--reps N]
 *                     [--sample host|device] [--autotune on|off|both]
 *                     [--quant-dot int8|f32|both]
 *
 * --tp N (2 .. 8) runs the tensor-parallel backend over GPUs 0 .. N-1
 * (NCCL; NCCL_NVLS_ENABLE=0 is set before anything starts); the floor is
 * then rank 0's share of the weights (its shard and the replicated
 * tensors) over one GPU's bandwidth. Every result line ends with a
 * "RESULT tp=N batch=B graphs=on|off pdl=on|off fusion=on|off tok_s=X
 * ms_step=Y kernels=K" line for scripts (K: kernels a decode step, from
 * the bucket's graph; 0 with graphs off).
 *
 * --reps N (default 1) times the TOKENS decode steps N times in a row
 * (the context grows by TOKENS each time) and reports the median tok/s
 * with the slowest and fastest repetition (min=, max= in the RESULT
 * line). --sample device (default host) makes the backend sample on the
 * device (cfg.sampling, greedy rows) as o1d does: no logits come back,
 * batch 1 feeds back the sampled id; host copies every row's logits to a
 * pinned buffer and, at batch 1, takes their argmax on the host.
 *
 * --pdl and --fusion (default on, the backend's default) set
 * cfg.cuda_no_pdl and cfg.cuda_no_fusion: decode steps of at most 4
 * sequences with or without programmatic dependent launch, with the fused
 * products or RMSNorm, SwiGLU and the residual adds as kernels of their
 * own (backend.h); both: off, then on. They change nothing above 4
 * sequences, nor on a tensor-parallel rank.
 *
 * --autotune (default off, as o1d's cuda.autotune) sets cfg.cuda_autotune:
 * the backend times its products' launch setups per bucket at create and
 * keeps the fastest (cuda_tune.h; it logs its picks and the load time);
 * both: off, then on, innermost. It needs graphs on (the buckets).
 *
 * --quant-dot (default int8, the backend's default) sets
 * cfg.cuda_quant_f32: the decode products on GGUF block weights with int8
 * inputs and __dp4a (and the fused variants), or in f32, unfused
 * (backend.h); both: f32, then int8, within every other combination. It
 * changes nothing for a model without block weights. The RESULT line
 * ends with quant_dot=int8|f32.
 *
 * --quant-gemm (default tiles, the backend's default) sets
 * cfg.cuda_quant_mma and cfg.cuda_quant_qp_rows: the products of more
 * than O1_GEMV_MAX_ROWS rows on GGUF block weights (prefill, batched
 * decode) dequantized to bf16 tiles and multiplied by cuBLAS, or (mma) on
 * gemm_q.cu's tensor-core kernel, or (qp) on gemm_qp.cu's pipelined one;
 * --quant-qp-rows N: qp up to N rows only (the tiles above; implies qp);
 * --quant-tile-mb N sets the tiles' size (cfg.cuda_quant_tile_bytes, at
 * most 64). The RESULT line ends with quant_gemm=tiles|mma|qp,
 * quant_tile_mb=N (0: the default) and quant_qp_rows=N. --prefetch on
 * (default off, the backend's) sets cfg.cuda_prefetch: the fused block
 * products prefetch the next small product's weights into L2 (same
 * bits); RESULT has prefetch=on|off. --att-q auto|on|off sets
 * cfg.cuda_att_q: where the decode attention leaves its output quantized
 * for the O product (same bits); RESULT has att_q=auto|on|off.
 * At batch 1 a line gives a digest of the greedy ids fed back, to compare
 * settings that claim the same bits.
 *
 * --quant-pass-rows N sets cfg.cuda_quant_pass_rows: products of 5..N
 * rows on GGUF block weights in passes of the decode products (4 rows
 * each) instead of the tiles; default 12, o1d's (cuda.quant_pass_rows),
 * 0 for the tiles at every row count above 4. The RESULT line ends with
 * quant_pass_rows=N.
 *
 * --quant-i8-rows N sets cfg.cuda_quant_i8_rows: products of more rows
 * than the passes, up to N, on GGUF block weights on gemm_qi8.cu's int8
 * tensor cores instead of the tiles (default 64, o1d's cuda.quant_i8_rows
 * default; 0 for the tiles); the RESULT line ends with quant_i8_rows=N.
 *
 * --quant-wg-rows N sets cfg.cuda_quant_wg_rows: products of more rows
 * than the int8 product's, up to N, on gemm_qw.cu's wgmma (default 256,
 * o1d's cuda.quant_wgmma_rows; 0 for the tiles); the RESULT line ends with
 * quant_wg_rows=N. --quant-wg-splits N (cfg.cuda_quant_wg_splits): the
 * parts of K gemm_qw takes where its tiles leave multiprocessors idle (0,
 * the default: its pick; 1: K whole), quant_wg_splits=N on the line.
 *
 * --attn W,R,T,H[,F] sets the decode attention's launch shape
 * (cfg.cuda_attn_*: warps a block, rounds a split takes at least, blocks
 * a launch aims for, most heads a block, the blocks whose splits cap a
 * short row's at a few rows; 0 keeps a default); --attention
 * off (cfg.cuda_no_attention) leaves the attention kernel out of the
 * steps (wrong tokens: the step's cost without it); --attn-tc
 * auto|on|off (cfg.cuda_attn_tc) whether decode rows go to the
 * tensor-core kernel (attention_decode_tc.cu; auto: wide batches). The
 * RESULT line ends with attn=W,R,T,H,F, attn_tc= and attention=on|off.
 *
 * --graph-spans one|N[,N...] sets the graphs' context spans below the
 * context (cfg.graph_spans, at most 3; default: the backend's, 1,024,
 * 4,096 and 16,384), by which the decode attention also shapes its
 * launches; one: a single span, the context's (every decode graph's grid
 * sized for the longest context, its attention shaped as for short
 * contexts: one head a block, no tensor cores at a few rows). The
 * RESULT line ends with spans= (default, one or the list), and the graph
 * counters give each span's steps.
 *
 * --gemv-rows N sets cfg.cuda_gemv_rows: products on bf16 weights over at
 * most N rows (1..4) run gemv.cu's, over more cuBLAS's (default: the
 * backend's). The RESULT line ends with gemv_rows=N (0: the default).
 *
 * --gu-out bf16|f32 (default bf16, the backend's) sets cfg.cuda_gu_f32:
 * the gate/up product where cuBLAS makes it (prefill, wide steps) writes
 * bf16 or f32 for SwiGLU. The RESULT line ends with gu_out=bf16|f32.
 * --qkv-out bf16|f32 (default bf16) sets cfg.cuda_qkv_f32 the same way for
 * the QKV product that RoPE reads; RESULT has qkv_out=bf16|f32 (and, last,
 * prefill_ms: the timed prefill).
 * --add-two-rows on|off (default on, gemv_q.cu's) sets
 * o1_gemv_q_add_two_rows: one row's O and down products on Q4_K and Q6_K
 * take two outputs a step or one; RESULT has add_two_rows=on|off.
 * --profile decode|prefill (default decode): what runs between
 * cudaProfilerStart and Stop (below): one more decode step, or the timed
 * prefill (the second of the first sequence's, so that `ncu
 * --profile-from-start off` times a prefill without cuBLAS's first-use
 * costs).
 *
 * For each graphs setting (both: off, then on, one backend after the
 * other in the same process), and within it each fusion, then each PDL
 * setting: prefills N random prompt ids (seeded) per sequence, one
 * sequence a step, twice for the first (the second is timed:
 * the first pays cuBLAS's first-use costs; both write the same KV), runs 8
 * warm-up decode steps, then times TOKENS decode steps of all BATCH
 * sequences end to end through o1_backend_step and reports tokens/s (BATCH
 * x TOKENS / time). At batch 1 each step feeds back the host argmax of the
 * copied logits (greedy); above, the next ids are the seeded random ones
 * (a host argmax over BATCH rows would be timed too), and the logits of
 * every row still come back to the (pinned) host buffer. With graphs on
 * it prints the graph counters (hits, padding, capture time and memory,
 * the kernels and programmatic edges of the batch's bucket graph). In the
 * same run it measures device copy bandwidth (cudaMemcpy device to device of 1
 * GiB, best of 10, read + write bytes, CUDA events) and prints the floor: the
 * bf16 weight bytes one decode step reads (every matrix once, the LM head
 * included; the token embedding one row unless tied) divided by that bandwidth,
 * and the share reached. One more decode step runs between cudaProfilerStart
 * and Stop (unless --profile prefill), so `ncu --profile-from-start off` times
 * exactly the kernels of one step (tools/gpu/bench.sh sums them: the device's
 * share of a step).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "gpu_bench.h"

#include "backend/backend.h"
#include "backend/kv_pool.h"
#include "backend/tp_shard.h"
#include "common/error.h"
#include "kernels/kernels_cuda.h"
#include "kernels/quant.h"
#include "model/model.h"

#define BW_BYTES (1ull << 30)

#define MAX_BATCH 256

#define MAX_REPS 16

struct bench_args {
	const char *model;
	uint32_t prompt, tokens, batch, tp, reps;
	int graphs, pdl, fusion, autotune; /* 0 off, 1 on, 2 both */
	int quant_dot;			   /* 0 int8, 1 f32, 2 both */
	bool device_sample;
	bool quant_mma;	       /* --quant-gemm mma */
	uint32_t quant_qp_rows; /* --quant-gemm qp, --quant-qp-rows */
	uint32_t quant_tile_mb; /* --quant-tile-mb */
	uint32_t quant_pass_rows; /* --quant-pass-rows */
	uint32_t quant_i8_rows;	  /* --quant-i8-rows */
	uint32_t quant_wg_rows;	  /* --quant-wg-rows */
	uint32_t quant_wg_splits; /* --quant-wg-splits */
	bool prefetch;		  /* --prefetch on */
	uint32_t att_q;		  /* --att-q: enum o1_cuda_att_q */
	bool add_one_row;	  /* --add-two-rows off */
	uint32_t attn[5];	  /* --attn W,R,T,H[,F] */
	uint32_t attn_tc;	  /* --attn-tc: enum o1_attn_tc */
	uint32_t n_spans;	  /* --graph-spans: 0 default */
	uint32_t spans[O1_BACKEND_GRAPH_SPANS_MAX - 1];
	char spans_arg[64];
	bool no_attention;	  /* --attention off */
	uint32_t gemv_rows;	  /* --gemv-rows */
	bool gu_f32;		  /* --gu-out f32 */
	bool qkv_f32;		  /* --qkv-out f32 */
	bool profile_prefill;	  /* --profile prefill */
};

/* One run's switches. */
struct bench_mode {
	bool graphs, pdl, fusion, autotune, quant_f32;
};

struct bench_run {
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table table[MAX_BATCH];
	uint32_t *pages; /* batch rows of seq_pages page numbers */
	uint32_t seq_pages;
	struct o1_step_seq q[MAX_BATCH];
	int32_t *ids; /* batch rows of `total` ids */
	float *logits;
	struct o1_sample_row rows[MAX_BATCH];	/* greedy (all zero) */
	struct o1_sample_result res[MAX_BATCH]; /* --sample device */
	uint32_t vocab, total, batch;
	bool device_sample;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Device copy bandwidth, GB/s (1e9 bytes, read + write). */
static int copy_bandwidth(double *gbs)
{
	*gbs = gpu_bench_copy_gbs(BW_BYTES);
	return *gbs > 0 ? 0 : -O1_E_CUDA;
}

/* Bytes an element of T takes on the device: a block format's own (kept
 * in blocks: the backend's default), else bf16 (f32 for vectors). */
static double element_bytes(const struct o1_tensor *t)
{
	if (t->n_dims == 2 && o1_quant_is_block(t->dtype))
		return (double)o1_quant_block_bytes(t->dtype) /
		       o1_quant_block_elements(t->dtype);
	return t->n_dims == 1 ? 4.0 : 2.0;
}

/* Bytes of weights one decode step reads on rank 0 of TP ranks (1: the
 * whole model). */
static double weight_bytes(const struct o1_model *m, uint32_t tp)
{
	struct o1_tp_shard sh;
	struct o1_tp_slice sl;
	double n = 0;

	if (o1_tp_shard_plan(&m->desc, 0, tp, 1, &sh))
		return 0;
	for (uint32_t i = 0; i < m->n_tensors; i++) {
		const struct o1_tensor *t = &m->tensors[i];

		o1_tp_shard_slice(&sh, &m->desc, t, &sl);
		if (t->role == O1_T_TOKEN_EMBD && !m->desc.tied_embeddings)
			n += element_bytes(t) * m->desc.dim;
		else
			n += element_bytes(t) * sl.n_rows * sl.n_cols;
	}
	return n;
}

/* S as a whole decimal number in [LO, HI] into *OUT; -EINVAL else. */
static int parse_in(const char *s, unsigned long lo, unsigned long hi,
		    uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* 0 off, 1 on, 2 both; -1 for anything else. */
static int on_off_both(const char *s)
{
	return !strcmp(s, "off")    ? 0
	       : !strcmp(s, "on")   ? 1
	       : !strcmp(s, "both") ? 2
				    : -1;
}

/* auto, off, on as 0, 1, 2 (the values of enum o1_attn_tc and enum
 * o1_cuda_att_q, --attn-tc's and --att-q's); -1 for anything else. */
_Static_assert(O1_ATTN_TC_OFF == 1 && O1_ATTN_TC_ON == 2 &&
		   O1_CUDA_ATT_Q_OFF == 1 && O1_CUDA_ATT_Q_ON == 2,
	       "auto, off, on");
static int auto_on_off(const char *s)
{
	return !strcmp(s, "auto")  ? 0
	       : !strcmp(s, "off") ? 1
	       : !strcmp(s, "on")  ? 2
				   : -1;
}

static const char *auto_name(uint32_t v)
{
	return v == 1 ? "off" : v == 2 ? "on" : "auto";
}

/* --graph-spans: "one" (a single span: {UINT32_MAX}) or up to
 * O1_BACKEND_GRAPH_SPANS_MAX - 1 lengths. */
static int parse_spans(const char *s, struct bench_args *a)
{
	const char *p = s;
	char *end;

	snprintf(a->spans_arg, sizeof(a->spans_arg), "%s", s);
	if (!strcmp(s, "one")) {
		a->n_spans = 1, a->spans[0] = UINT32_MAX;
		return 0;
	}
	for (a->n_spans = 0; a->n_spans < O1_BACKEND_GRAPH_SPANS_MAX - 1;) {
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || !v || v > UINT32_MAX)
			return -EINVAL;
		a->spans[a->n_spans++] = (uint32_t)v;
		if (!*end)
			return 0;
		if (*end != ',')
			return -EINVAL;
		p = end + 1;
	}
	return -EINVAL;
}

static int parse(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
	    {"prompt", required_argument, NULL, 'p'},
	    {"tokens", required_argument, NULL, 'n'},
	    {"batch", required_argument, NULL, 'b'},
	    {"graphs", required_argument, NULL, 'g'},
	    {"pdl", required_argument, NULL, 'd'},
	    {"fusion", required_argument, NULL, 'f'},
	    {"tp", required_argument, NULL, 't'},
	    {"reps", required_argument, NULL, 'r'},
	    {"sample", required_argument, NULL, 's'},
	    {"autotune", required_argument, NULL, 'a'},
	    {"quant-dot", required_argument, NULL, 'q'},
	    {"quant-gemm", required_argument, NULL, 'Q'},
	    {"quant-qp-rows", required_argument, NULL, 'R'},
	    {"quant-tile-mb", required_argument, NULL, 'M'},
	    {"prefetch", required_argument, NULL, 'P'},
	    {"att-q", required_argument, NULL, 'U'},
	    {"quant-pass-rows", required_argument, NULL, 'K'},
	    {"quant-i8-rows", required_argument, NULL, 'I'},
	    {"quant-wg-rows", required_argument, NULL, 'J'},
	    {"quant-wg-splits", required_argument, NULL, 'Z'},
	    {"attn", required_argument, NULL, 'A'},
	    {"attn-tc", required_argument, NULL, 'T'},
	    {"attention", required_argument, NULL, 'N'},
	    {"gemv-rows", required_argument, NULL, 'G'},
	    {"gu-out", required_argument, NULL, 'U'},
	    {"qkv-out", required_argument, NULL, 'V'},
	    {"add-two-rows", required_argument, NULL, 'W'},
	    {"profile", required_argument, NULL, 'X'},
	    {"graph-spans", required_argument, NULL, 'S'},
	    {0},
	};
	int opt;

	a->prompt = 128, a->tokens = 256, a->batch = 1, a->graphs = 2;
	a->n_spans = 0;
	memset(a->spans, 0, sizeof(a->spans));
	a->pdl = a->fusion = 1;
	a->autotune = 0;
	a->tp = 1, a->reps = 1, a->device_sample = false, a->quant_dot = 0;
	a->quant_mma = false, a->quant_tile_mb = 0, a->quant_qp_rows = 0;
	a->quant_pass_rows = 12; /* o1d's cuda.quant_pass_rows */
	a->quant_i8_rows = 64;	 /* o1d's cuda.quant_i8_rows */
	a->quant_wg_rows = 256;	 /* o1d's cuda.quant_wgmma_rows */
	a->quant_wg_splits = 0; /* its pick, as o1d */
	a->prefetch = false, a->no_attention = false, a->gemv_rows = 0;
	a->add_one_row = false;
	a->gu_f32 = a->qkv_f32 = a->profile_prefill = false;
	memset(a->attn, 0, sizeof(a->attn));
	a->attn_tc = O1_ATTN_TC_AUTO;
	a->att_q = O1_CUDA_ATT_Q_AUTO;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		uint32_t v = (uint32_t)strtoul(optarg ? optarg : "0", NULL, 10);
		int *sw = opt == 'g'   ? &a->graphs
			  : opt == 'd' ? &a->pdl
			  : opt == 'f' ? &a->fusion
			  : opt == 'a' ? &a->autotune
				       : NULL;

		if (sw) {
			*sw = on_off_both(optarg);
			if (*sw < 0)
				return -EINVAL;
			continue;
		}
		if (opt == 'q') {
			a->quant_dot = !strcmp(optarg, "int8")	 ? 0
				       : !strcmp(optarg, "f32")	 ? 1
				       : !strcmp(optarg, "both") ? 2
								 : -1;
			if (a->quant_dot < 0)
				return -EINVAL;
			continue;
		}
		if (opt == 'P' || opt == 'N' || opt == 'W') {
			int on = on_off_both(optarg);

			if (on != 0 && on != 1)
				return -EINVAL;
			if (opt == 'P')
				a->prefetch = on;
			else
				*(opt == 'N' ? &a->no_attention
					     : &a->add_one_row) = !on;
			continue;
		}
		if (opt == 'X') {
			a->profile_prefill = !strcmp(optarg, "prefill");
			if (!a->profile_prefill && strcmp(optarg, "decode"))
				return -EINVAL;
			continue;
		}
		if (opt == 'U' || opt == 'T') {
			int v = auto_on_off(optarg);

			if (v < 0)
				return -EINVAL;
			*(opt == 'U' ? &a->att_q : &a->attn_tc) = (uint32_t)v;
			continue;
		}
		if (opt == 'S') {
			if (parse_spans(optarg, a))
				return -EINVAL;
			continue;
		}
		if (opt == 'A') {
			int used = -1;

			a->attn[4] = 0;
			if (sscanf(optarg, "%u,%u,%u,%u%n,%u%n", &a->attn[0],
				   &a->attn[1], &a->attn[2], &a->attn[3], &used,
				   &a->attn[4], &used) < 4 ||
			    optarg[used])
				return -EINVAL;
			continue;
		}
		if (opt == 'Q') {
			a->quant_mma = !strcmp(optarg, "mma");
			a->quant_qp_rows = !strcmp(optarg, "qp") ? UINT32_MAX
								 : 0;
			if (!a->quant_mma && !a->quant_qp_rows &&
			    strcmp(optarg, "tiles"))
				return -EINVAL;
			continue;
		}
		if (opt == 'G') {
			if (parse_in(optarg, 1, 4, &a->gemv_rows))
				return -EINVAL;
			continue;
		}
		if (opt == 'U' || opt == 'V') {
			bool *f32 = opt == 'U' ? &a->gu_f32 : &a->qkv_f32;

			*f32 = !strcmp(optarg, "f32");
			if (!*f32 && strcmp(optarg, "bf16"))
				return -EINVAL;
			continue;
		}
		if (opt == 'I') {
			if (parse_in(optarg, 0, 1u << 20, &a->quant_i8_rows))
				return -EINVAL;
			continue;
		}
		if (opt == 'J') {
			if (parse_in(optarg, 0, 1u << 20, &a->quant_wg_rows))
				return -EINVAL;
			continue;
		}
		if (opt == 'Z') {
			if (parse_in(optarg, 0, 64, &a->quant_wg_splits))
				return -EINVAL;
			continue;
		}
		if (opt == 'R' || opt == 'K' || opt == 'M') {
			/* --quant-pass-rows 0: the tiles above 4 rows */
			if (parse_in(optarg, opt == 'K' ? 0 : 1,
				     opt == 'R'	  ? UINT32_MAX
				     : opt == 'K' ? 256
						  : 64,
				     opt == 'R'	  ? &a->quant_qp_rows
				     : opt == 'K' ? &a->quant_pass_rows
						  : &a->quant_tile_mb))
				return -EINVAL;
			continue;
		}
		if (opt == 's') {
			a->device_sample = !strcmp(optarg, "device");
			if (!a->device_sample && strcmp(optarg, "host"))
				return -EINVAL;
			continue;
		}
		if (opt == '?' || v == 0)
			return -EINVAL;
		if (opt == 'p')
			a->prompt = v;
		else if (opt == 'b')
			a->batch = v;
		else if (opt == 't')
			a->tp = v;
		else if (opt == 'r')
			a->reps = v;
		else
			a->tokens = v;
	}
	if (a->batch > MAX_BATCH || a->tp > O1_BACKEND_DEVICES_MAX ||
	    a->reps > MAX_REPS)
		return -EINVAL;
	if (optind + 1 != argc)
		return -EINVAL;
	a->model = argv[optind];
	return 0;
}

static int open_run(const struct o1_model *m, const struct bench_args *a,
		    const struct bench_mode *md, struct bench_run *r)
{
	uint32_t ctx = a->prompt + a->reps * a->tokens + 9;
	uint32_t pages = (ctx + 15) / 16;
	struct o1_backend_config cfg = {
	    .max_batch_tokens = a->prompt > a->batch ? a->prompt : a->batch,
	    .max_seqs = a->batch,
	    .max_context_tokens = ctx,
	    .n_pages = pages * a->batch,
	    .page_tokens = 16,
	    .graphs_enabled = md->graphs,
	    .cuda_no_pdl = !md->pdl,
	    .cuda_no_fusion = !md->fusion,
	    .cuda_autotune = md->autotune,
	    .cuda_quant_f32 = md->quant_f32,
	    .cuda_quant_mma = a->quant_mma,
	    .cuda_quant_tile_bytes = a->quant_tile_mb << 20,
	    .cuda_quant_qp_rows = a->quant_qp_rows,
	    .cuda_quant_pass_rows = a->quant_pass_rows,
	    .cuda_quant_i8_rows = a->quant_i8_rows,
	    .cuda_quant_wg_rows = a->quant_wg_rows,
	    .cuda_quant_wg_splits = a->quant_wg_splits,
	    .cuda_prefetch = a->prefetch,
	    .cuda_att_q = a->att_q,
	    .cuda_attn_warps = a->attn[0],
	    .cuda_attn_split_rounds = a->attn[1],
	    .cuda_attn_target = a->attn[2],
	    .cuda_attn_heads = a->attn[3],
	    .cuda_attn_few = a->attn[4],
	    .cuda_attn_tc = a->attn_tc,
	    .cuda_no_attention = a->no_attention,
	    .cuda_gemv_rows = a->gemv_rows,
	    .cuda_gu_f32 = a->gu_f32,
	    .cuda_qkv_f32 = a->qkv_f32,
	    .sampling = a->device_sample,
	    .tensor_parallel = a->tp > 1 ? a->tp : 0,
	    .n_graph_spans = a->n_spans};
	uint64_t x = 12345;
	int err;

	for (uint32_t d = 0; d < a->tp; d++)
		cfg.devices[d] = d;
	memcpy(cfg.graph_spans, a->spans, sizeof(a->spans));
	r->vocab = m->desc.vocab_size;
	r->batch = a->batch;
	r->device_sample = a->device_sample;
	r->total = cfg.max_context_tokens;
	r->ids = malloc((size_t)a->batch * r->total * sizeof(int32_t));
	r->seq_pages = pages;
	r->pages = malloc((size_t)a->batch * pages * sizeof(uint32_t));
	/* a row a sequence: a prompt's last token, a decode step's rows */
	if (cudaMallocHost((void **)&r->logits,
			   (size_t)a->batch * r->vocab * sizeof(float)) !=
	    cudaSuccess)
		r->logits = NULL;
	if (!r->ids || !r->logits || !r->pages)
		return -ENOMEM;
	for (size_t i = 0; i < (size_t)a->batch * r->total; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		r->ids[i] = (int32_t)((x >> 33) % r->vocab);
	}
	err = o1_backend_create(O1_BACKEND_CUDA, m, &cfg, &r->b);
	if (!err)
		err = o1_kv_pool_create(o1_backend_kv_layout(r->b), &r->pool);
	for (uint32_t i = 0; !err && i < a->batch; i++)
		o1_kv_table_init(&r->table[i],
				 r->pages + (size_t)i * r->seq_pages,
				 r->seq_pages);
	return err;
}

static void close_run(struct bench_run *r)
{
	for (uint32_t i = 0; r->pool && i < r->batch; i++)
		o1_kv_table_fini(r->pool, &r->table[i]);
	o1_kv_pool_destroy(r->pool);
	o1_backend_destroy(r->b);
	free(r->ids);
	free(r->pages);
	cudaFreeHost(r->logits);
}

/* Sequences [first, first + k), N tokens each at POS. */
static int step(struct bench_run *r, uint32_t first, uint32_t k, uint32_t pos,
		uint32_t n)
{
	uint32_t best = 0;
	int err = 0;

	for (uint32_t i = 0; !err && i < k; i++) {
		struct o1_block_table *t = &r->table[first + i];

		err = o1_kv_table_reserve(r->pool, t, pos + n);
		r->q[i] = (struct o1_step_seq){
		    r->ids + (size_t)(first + i) * r->total + pos,
		    n,
		    pos,
		    t->pages,
		    t->n_pages,
		    false};
	}
	if (!err)
		err = o1_backend_step(
		    r->b, &(struct o1_step){
			      .seqs = r->q,
			      .n_seqs = k,
			      .logits = r->device_sample ? NULL : r->logits,
			      .logits_rows = k,
			      .sample_rows = r->device_sample ? r->rows : NULL,
			      .samples = r->device_sample ? r->res : NULL});
	if (err || k > 1)
		return err;
	if (r->device_sample) {
		best = (uint32_t)r->res[0].id;
	} else {
		for (uint32_t i = 1; i < r->vocab; i++)
			best = r->logits[i] > r->logits[best] ? i : best;
	}
	r->ids[(size_t)first * r->total + pos + n] = (int32_t)best;
	return 0;
}

static const char *on_off(bool v)
{
	return v ? "on" : "off";
}

/* Kernels a decode step of the batch runs: those of the smallest bucket
 * graph that holds it (0 without one); its programmatic edges in *PDL. */
static uint32_t step_kernels(const struct o1_backend_graph_stats *g,
			     uint32_t batch, uint32_t *pdl)
{
	for (uint32_t i = 0; i < g->n_buckets; i++)
		if (g->buckets[i].batch >= batch) {
			*pdl = g->buckets[i].pdl_edges;
			return g->buckets[i].kernels;
		}
	*pdl = 0;
	return 0;
}

static void print_graphs(const struct o1_backend_graph_stats *g, uint32_t batch)
{
	uint64_t hits = 0, miss = 0, pad = 0;
	uint32_t pdl, k = step_kernels(g, batch, &pdl);

	for (uint32_t i = 0; i < g->n_buckets; i++) {
		hits += g->buckets[i].hits, pad += g->buckets[i].padded_tokens;
		miss += g->buckets[i].misses + g->buckets[i].fallbacks;
	}
	printf("  graphs: %u buckets, %llu hits, %llu misses, %llu "
	       "oversize, %llu prefill steps, %llu padded tokens; capture "
	       "%.1f ms, %.1f MiB; %u kernels a step (%u programmatic "
	       "edges); steps by context span:",
	       g->n_buckets, (unsigned long long)hits, (unsigned long long)miss,
	       (unsigned long long)g->oversize, (unsigned long long)g->prefill,
	       (unsigned long long)pad, g->capture_us / 1e3,
	       g->capture_bytes / 1048576.0, k, pdl);
	for (uint32_t i = 0; i < g->n_spans; i++)
		printf(" %u: %llu", g->spans[i].len,
		       (unsigned long long)g->spans[i].steps);
	printf("\n");
}

/* At batch 1, a digest (FNV-1a) of the greedy ids fed back from FROM to
 * TO: two settings that give the same bits give the same digest. */
static void print_ids_digest(const struct bench_run *r, uint32_t from,
			     uint32_t to)
{
	uint64_t h = 1469598103934665603ULL;

	for (uint32_t i = from; i < to && i < r->total; i++) {
		h ^= (uint32_t)r->ids[i];
		h *= 1099511628211ULL;
	}
	printf("greedy ids %u..%u fnv1a %016llx\n", from, to,
	       (unsigned long long)h);
}

/* Times of one run: decode seconds for a->tokens steps (the median of
 * the repetitions, and the slowest and fastest), prefill seconds of one
 * prompt. */
struct bench_times {
	double decode_s, slow_s, fast_s, prefill_s;
	double rep_s[MAX_REPS];
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median, slowest and fastest of the N repetitions. */
static void rep_stats(struct bench_times *t, uint32_t n)
{
	double s[MAX_REPS];

	memcpy(s, t->rep_s, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	t->decode_s = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	t->fast_s = s[0], t->slow_s = s[n - 1];
}

static void report(const struct o1_model *m, const struct bench_args *a,
		   const struct bench_mode *md, const struct bench_times *t,
		   double bw, const struct o1_backend_graph_stats *g)
{
	double wb = weight_bytes(m, a->tp), dt = t->decode_s;
	double tps = (double)a->batch * a->tokens / dt;
	uint32_t pdl, k = md->graphs ? step_kernels(g, a->batch, &pdl) : 0;

	double lo = (double)a->batch * a->tokens / t->slow_s;
	double hi = (double)a->batch * a->tokens / t->fast_s;

	printf("%s: %u layers dim %u vocab %u, TP %u, batch %u, prompt %u, "
	       "%u steps x %u, graphs %s, PDL %s, fusion %s, autotune %s, "
	       "sampling on the "
	       "%s: %.1f tok/s (%.3f ms/step; repetitions %.1f .. %.1f); "
	       "weights %.3f GB/step per GPU, copy bandwidth %.0f GB/s, floor "
	       "%.0f steps/s, %.1f%% of it; prefill %.2f ms (%.0f tok/s)\n"
	       "RESULT tp=%u batch=%u graphs=%s pdl=%s fusion=%s sample=%s "
	       "tok_s=%.2f ms_step=%.4f kernels=%u min=%.2f max=%.2f "
	       "floor=%.1f autotune=%s quant_dot=%s quant_gemm=%s "
	       "quant_tile_mb=%u quant_qp_rows=%u attn=%u,%u,%u,%u,%u "
	       "attn_tc=%s attention=%s quant_pass_rows=%u gemv_rows=%u "
	       "gu_out=%s qkv_out=%s add_two_rows=%s prefill_ms=%.3f "
	       "quant_i8_rows=%u quant_wg_rows=%u quant_wg_splits=%u "
	       "prefetch=%s spans=%s att_q=%s\n",
	       m->desc.name, m->desc.n_layers, m->desc.dim, m->desc.vocab_size,
	       a->tp, a->batch, a->prompt, a->tokens, a->reps,
	       on_off(md->graphs), on_off(md->pdl), on_off(md->fusion),
	       on_off(md->autotune), a->device_sample ? "device" : "host", tps,
	       dt * 1e3 / a->tokens, lo, hi, wb / 1e9, bw, bw * 1e9 / wb,
	       100.0 * (a->tokens / dt) / (bw * 1e9 / wb), t->prefill_s * 1e3,
	       a->prompt / t->prefill_s, a->tp, a->batch, on_off(md->graphs),
	       on_off(md->pdl), on_off(md->fusion),
	       a->device_sample ? "device" : "host", tps, dt * 1e3 / a->tokens,
	       k, lo, hi, bw * 1e9 / wb, on_off(md->autotune),
	       md->quant_f32 ? "f32" : "int8",
	       a->quant_qp_rows ? "qp"
	       : a->quant_mma	? "mma"
				: "tiles",
	       a->quant_tile_mb, a->quant_qp_rows, a->attn[0], a->attn[1],
	       a->attn[2], a->attn[3], a->attn[4], auto_name(a->attn_tc),
	       on_off(!a->no_attention), a->quant_pass_rows, a->gemv_rows,
	       a->gu_f32 ? "f32" : "bf16", a->qkv_f32 ? "f32" : "bf16",
	       on_off(!a->add_one_row), t->prefill_s * 1e3, a->quant_i8_rows,
	       a->quant_wg_rows, a->quant_wg_splits, on_off(a->prefetch),
	       a->n_spans ? a->spans_arg : "default", auto_name(a->att_q));
	if (md->graphs)
		print_graphs(g, a->batch);
}

static int run(const struct o1_model *m, const struct bench_args *a,
	       const struct bench_mode *md, double bw)
{
	struct bench_run r = {0};
	struct bench_times t = {0};
	struct o1_backend_graph_stats g;
	double t0;
	uint32_t pos = a->prompt, b = a->batch;
	int err = open_run(m, a, md, &r);

	err = err ? err : step(&r, 0, 1, 0, a->prompt); /* first use */
	for (uint32_t i = 0; !err && i < b; i++) {
		if (!i && a->profile_prefill)
			cudaProfilerStart();
		t0 = now_s();
		err = step(&r, i, 1, 0, a->prompt); /* same ids, same KV */
		t.prefill_s = i ? t.prefill_s : now_s() - t0;
		if (!i && a->profile_prefill)
			cudaProfilerStop();
	}
	for (uint32_t i = 0; !err && i < 8; i++)
		err = step(&r, 0, b, pos++, 1);
	for (uint32_t rep = 0; !err && rep < a->reps; rep++) {
		t0 = now_s();
		for (uint32_t i = 0; !err && i < a->tokens; i++)
			err = step(&r, 0, b, pos++, 1);
		t.rep_s[rep] = now_s() - t0;
	}
	rep_stats(&t, a->reps);
	if (!a->profile_prefill)
		cudaProfilerStart();
	err = err ? err : step(&r, 0, b, pos++, 1);
	if (!a->profile_prefill)
		cudaProfilerStop();
	if (!err) {
		o1_backend_graph_stats(r.b, &g);
		report(m, a, md, &t, bw, &g);
		if (b == 1)
			print_ids_digest(&r, a->prompt, pos);
	}
	close_run(&r);
	return err;
}

/* The asked block-product paths (f32 first) of one combination of the
 * other switches, when it is asked. */
static int run_dots(const struct o1_model *m, const struct bench_args *a,
		    int gr, int fu, int pd, int at, double bw)
{
	int err = 0;

	if ((a->graphs != 2 && a->graphs != gr) ||
	    (a->fusion != 2 && a->fusion != fu) ||
	    (a->pdl != 2 && a->pdl != pd) ||
	    (a->autotune != 2 && a->autotune != at))
		return 0;
	for (int qf = 1; !err && qf >= 0; qf--) {
		struct bench_mode md = {gr, pd, fu, at, qf};

		if (a->quant_dot == 2 || a->quant_dot == qf)
			err = run(m, a, &md, bw);
	}
	return err;
}

/* Every asked combination: graphs, then fusion, then PDL, then autotune,
 * off first. */
static int run_all(const struct o1_model *m, const struct bench_args *a)
{
	double bw = 0;
	int err = copy_bandwidth(&bw);

	for (int gr = 0; !err && gr < 2; gr++)
		for (int fu = 0; !err && fu < 2; fu++)
			for (int pd = 0; !err && pd < 2; pd++)
				for (int at = 0; !err && at < 2; at++)
					err = run_dots(m, a, gr, fu, pd, at,
						       bw);
	return err;
}

int main(int argc, char **argv)
{
	struct bench_args a;
	struct o1_model *m;
	int err = parse(argc, argv, &a);

	if (err) {
		fprintf(stderr,
			"usage: bench_cuda_decode MODEL [--prompt N] "
			"[--tokens N] [--batch N (<= 256)] "
			"[--graphs on|off|both] [--pdl on|off|both] "
			"[--fusion on|off|both] [--tp N (<= 8)] "
			"[--reps N (<= 16)] [--sample host|device] "
			"[--autotune on|off|both] "
			"[--quant-dot int8|f32|both] "
			"[--quant-gemm tiles|mma|qp] [--quant-qp-rows N] "
			"[--quant-tile-mb N] [--prefetch on|off] "
			"[--att-q auto|on|off] "
			"[--quant-pass-rows N] [--quant-i8-rows N] "
			"[--quant-wg-rows N] [--quant-wg-splits N] "
			"[--attn W,R,T,H[,F]] [--graph-spans one|N,...] "
			"[--attn-tc auto|on|off] "
			"[--attention on|off] [--gemv-rows N (1..4)] "
			"[--gu-out bf16|f32] [--qkv-out bf16|f32] "
			"[--add-two-rows on|off] [--profile decode|prefill]\n");
		return 2;
	}
	/* NVLink multicast stays off (before NCCL's first call). */
	setenv("NCCL_NVLS_ENABLE", "0", 1);
	o1_gemv_q_add_two_rows(!a.add_one_row);
	err = o1_model_open(a.model, &m);
	if (!err) {
		err = run_all(m, &a);
		o1_model_close(m);
	}
	if (err)
		fprintf(stderr, "bench_cuda_decode: %s\n", o1_strerror(err));
	return err ? 1 : 0;
}

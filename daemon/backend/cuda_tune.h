/* Autotuning of the CUDA backend's products at load (cuda_tune.c), and
 * the choices the forward pass (cuda_forward.c) reads.
 *
 * For each decode bucket of the graphs (rows R), each product of a step
 * (kind: QKV, O, gate/up, down, LM head) gets a pick:
 * - R <= O1_GEMV_MAX_ROWS: a gemv.cu launch setup (blocks a
 *   multiprocessor, pieces a lane; every setup gives the same bits), and
 *   whether the bucket runs gemv.cu's fused products or the cuBLAS path
 *   (unfused, no PDL) instead, whichever the timing found faster;
 * - 2 <= R (cuBLAS path): cublasGemmEx's default algorithm (lt -1) or one
 *   of the algorithms cuBLASLt's heuristic offers for that (R, N, K)
 *   (lt >= 0: its index in the plan). A different algorithm may sum in a
 *   different order: those products differ from the untuned ones in the
 *   last bits (within the tests' bounds; the eager and graph runs of one
 *   backend still agree bit for bit, both read the same pick).
 * The picks are fixed at load; the graphs are captured with them. Steps
 * whose row count is not a bucket (eager prefill) use the defaults.
 * Not on a tensor-parallel rank (the ranks' collectives would have to be
 * timed in lockstep) nor for matrices in block formats (fused products
 * off): those keep the defaults.
 */
#ifndef O1_CUDA_TUNE_H
#define O1_CUDA_TUNE_H

#include <stdbool.h>
#include <stdint.h>

#include <cublasLt.h>

#include "backend.h"
#include "kernels/kernels_cuda.h"

enum cuda_kind {
	CUDA_KIND_QKV,
	CUDA_KIND_O,
	CUDA_KIND_GU,
	CUDA_KIND_DOWN,
	CUDA_KIND_HEAD,
	CUDA_KINDS
};

/* KIND's name in log lines ("qkv", "o", "gate/up", "down", "head"). */
const char *o1_cuda_kind_name(enum cuda_kind kind);

#define CUDA_TUNE_ALGOS	   8 /* cuBLASLt heuristic results asked for */
#define CUDA_TUNE_ROWS_MAX O1_BACKEND_GRAPH_BUCKETS_MAX

/* One product shape (R, N, K) for cuBLASLt, with the heuristic's
 * algorithms, best first. */
struct cuda_tune_lt {
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t a, b, c;
	cublasLtMatmulAlgo_t algo[CUDA_TUNE_ALGOS];
	uint32_t n_algos;
};

struct cuda_tune_pick {
	struct o1_gemv_setup g; /* gemv path */
	int8_t lt;		/* cuBLAS path: -1 cublasGemmEx */
};

struct cuda_tune {
	bool done; /* tuned: the picks below apply */
	cublasLtHandle_t lt;
	uint32_t n_rows, rows[CUDA_TUNE_ROWS_MAX]; /* the buckets tuned */
	struct cuda_tune_pick pick[CUDA_KINDS][CUDA_TUNE_ROWS_MAX];
	struct cuda_tune_lt *plan[CUDA_KINDS][CUDA_TUNE_ROWS_MAX]; /* owned */
	bool blas[O1_GEMV_MAX_ROWS + 1]; /* bucket of R rows: cuBLAS path */
	/* The candidate being timed (tuning only): it replaces the pick of
	 * (trial_kind, trial_rows), and trial_blas the bucket's path. */
	bool trial, trial_blas;
	enum cuda_kind trial_kind;
	uint32_t trial_rows;
	struct cuda_tune_pick trial_pick;
	double ms; /* load time the tuning took */
};

struct cuda_state;

/* Tunes S's products for the buckets ROWS[0 .. N) (ascending) when
 * cfg.cuda_autotune and the backend can (see the top; else logs why not
 * and keeps the defaults): within cfg.cuda_autotune_ms, logging
 * the picks. Call after the weights, activations and inputs exist and
 * before the graphs are captured. A tuning that fails keeps the
 * defaults (logged); only a device left unusable is an error. */
int o1_cuda_tune_run(struct cuda_state *s, const uint32_t *rows, uint32_t n);
void o1_cuda_tune_free(struct cuda_tune *t);

/* The picks for a product of KIND over ROWS rows (the defaults when not
 * tuned for ROWS). */
struct o1_gemv_setup o1_cuda_tune_gemv(const struct cuda_tune *t,
				       enum cuda_kind kind, uint32_t rows);
/* The cuBLASLt algorithm (and *PLAN) for KIND over ROWS rows, or NULL:
 * cublasGemmEx. */
const cublasLtMatmulAlgo_t *o1_cuda_tune_lt(const struct cuda_tune *t,
					    enum cuda_kind kind, uint32_t rows,
					    const struct cuda_tune_lt **plan);
/* Whether a step of ROWS <= O1_GEMV_MAX_ROWS rows takes the cuBLAS path. */
bool o1_cuda_tune_blas(const struct cuda_tune *t, uint32_t rows);

#endif

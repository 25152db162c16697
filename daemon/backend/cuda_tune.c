/* The CUDA backend's autotuner (cuda_tune.h): at load, times the launch
 * setups of each decode product on the model's own weights and keeps the
 * fastest.
 *
 * A candidate is timed as a CUDA graph of a sweep, replayed: the layer
 * sweep is the four layer products (QKV, O, gate/up, down, each with what
 * goes with it on its path: cuda_forward.c's o1_cuda_forward_stage) of
 * the first layers whose weights are at least L2_TIMES times the L2
 * cache (so every replay reads them from memory, as a step does, and
 * each product has its real neighbours for PDL to overlap), the head
 * sweep the LM head launched until the same bytes (at most HEAD_MAX
 * times). An eager run (modules load outside the capture), one warm-up
 * replay, then the median of REPS replays, each between two events. Candidates
 * of one product change only its launch, so the sweeps' differences are that
 * product's; the products are tuned one after the other, each with the picks
 * already made for the others.
 *
 * Jobs, in the order the budget cuts them: gemv setups of bucket 1; the
 * cuBLAS algorithms of the buckets above O1_GEMV_MAX_ROWS, largest first;
 * then buckets 2 .. O1_GEMV_MAX_ROWS: gemv setups, cuBLAS algorithms
 * (those steps unfused, without PDL), and the path whose whole sweep
 * (layer + head) is faster. Candidate 0 of each job is the pick in use
 * (tune_pick.h keeps it unless another wins by O1_TUNE_MARGIN).
 * Budget: cfg.cuda_autotune_ms (0: CUDA_TUNE_MS_DEFAULT) of wall time,
 * checked before each timing with the job's last measured cost: the
 * tuning stops there and the rest keeps its defaults (logged).
 * The inputs are a padding batch (o1_cuda_forward_prepare: its KV writes
 * go to the scratch page), x zeroed first; the activations the sweeps
 * leave are garbage that the first step overwrites.
 */
#include "cuda_tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "cuda_private.h"
#include "kernels/cuda_util.h"
#include "tune_pick.h"

#define REPS		     3	  /* timed replays a candidate */
#define L2_TIMES	     3	  /* bytes a sweep reads, in L2 sizes */
#define HEAD_MAX	     4	  /* head launches a sweep at most */
#define CANDS_MAX	     16	  /* >= 4 bps x 2 pieces, 1 + CUDA_TUNE_ALGOS */
#define CUDA_TUNE_MS_DEFAULT 2000 /* load time the tuning may take */

/* tune_gemv fills c[] with the pick in use and every (bps, pieces) but
 * the default (o1_gemv_pieces fills at most its 3 places), tune_blas with
 * gemmex and the heuristic's algorithms. */
_Static_assert(CANDS_MAX >= O1_GEMV_BPS_MAX * 3 &&
		   CANDS_MAX >= 1 + CUDA_TUNE_ALGOS,
	       "candidates fit c[CANDS_MAX]");

const char *o1_cuda_kind_name(enum cuda_kind kind)
{
	static const char *const name[CUDA_KINDS] = {"qkv", "o", "gate/up",
						     "down", "head"};
	return (unsigned)kind < CUDA_KINDS ? name[kind] : "?";
}

struct tuner {
	struct cuda_state *s;
	struct cuda_tune *t;
	struct o1_tune_budget b;
	cudaEvent_t e0, e1;
	uint32_t layers, heads; /* a layer sweep's layers, a head sweep's
				 * launches */
	uint64_t cost_ns[2];	/* a candidate's last cost: layer, head */
};

static int row_index(const struct cuda_tune *t, uint32_t rows)
{
	for (uint32_t i = 0; i < t->n_rows; i++)
		if (t->rows[i] == rows)
			return (int)i;
	return -1;
}

/* The pick of KIND over ROWS: the trial's while it is timed. */
static bool find_pick(const struct cuda_tune *t, enum cuda_kind kind,
		      uint32_t rows, struct cuda_tune_pick *p, int *idx)
{
	*idx = row_index(t, rows);
	if (t->trial && t->trial_kind == kind && t->trial_rows == rows)
		*p = t->trial_pick;
	else if (*idx >= 0)
		*p = t->pick[kind][*idx];
	return *idx >= 0;
}

struct o1_gemv_setup o1_cuda_tune_gemv(const struct cuda_tune *t,
				       enum cuda_kind kind, uint32_t rows)
{
	struct cuda_tune_pick p = {{0, 0}, -1};
	int idx;

	return find_pick(t, kind, rows, &p, &idx)
		   ? p.g
		   : (struct o1_gemv_setup){0, 0};
}

const cublasLtMatmulAlgo_t *o1_cuda_tune_lt(const struct cuda_tune *t,
					    enum cuda_kind kind, uint32_t rows,
					    const struct cuda_tune_lt **plan)
{
	struct cuda_tune_pick p = {{0, 0}, -1};
	const struct cuda_tune_lt *l;
	int idx;

	if (!find_pick(t, kind, rows, &p, &idx) || p.lt < 0)
		return NULL;
	l = t->plan[kind][idx];
	if (!l || (uint32_t)p.lt >= l->n_algos)
		return NULL;
	*plan = l;
	return &l->algo[p.lt];
}

bool o1_cuda_tune_blas(const struct cuda_tune *t, uint32_t rows)
{
	if (t->trial && t->trial_rows == rows)
		return t->trial_blas;
	return rows <= O1_GEMV_MAX_ROWS && t->blas[rows];
}

static void free_plan(struct cuda_tune_lt *p)
{
	if (!p)
		return;
	if (p->c)
		cublasLtMatrixLayoutDestroy(p->c);
	if (p->b)
		cublasLtMatrixLayoutDestroy(p->b);
	if (p->a)
		cublasLtMatrixLayoutDestroy(p->a);
	if (p->op)
		cublasLtMatmulDescDestroy(p->op);
	free(p);
}

void o1_cuda_tune_free(struct cuda_tune *t)
{
	for (int k = 0; k < CUDA_KINDS; k++)
		for (uint32_t i = 0; i < CUDA_TUNE_ROWS_MAX; i++) {
			free_plan(t->plan[k][i]);
			t->plan[k][i] = NULL;
		}
	if (t->lt)
		cublasLtDestroy(t->lt);
	t->lt = NULL;
}

/* Output columns and K of product KIND. */
static void kind_shape(const struct cuda_state *s, enum cuda_kind kind,
		       uint32_t *n, uint32_t *k)
{
	const struct o1_model_desc *d = &s->d;
	uint32_t qd = d->n_heads * d->head_dim;
	uint32_t nn[CUDA_KINDS] = {(uint32_t)cuda_qkv_rows(d), d->dim,
				   2 * d->ffn_dim, d->dim, d->vocab_size};
	uint32_t kk[CUDA_KINDS] = {d->dim, qd, d->dim, d->ffn_dim, d->dim};

	*n = nn[kind], *k = kk[kind];
}

static uint64_t kind_bytes(const struct cuda_state *s, enum cuda_kind kind)
{
	uint32_t n, k;

	kind_shape(s, kind, &n, &k);
	return (uint64_t)n * k * 2;
}

static int lt_status(cublasStatus_t st, bool *ok)
{
	*ok = *ok && st == CUBLAS_STATUS_SUCCESS;
	return 0;
}

/* The cuBLASLt plan of (M, N, K) as gemm (cuda_forward.c) multiplies:
 * y (M,N) f32 = x (M,K) bf16 . w (N,K)^T, column-major: D (N,M) = W^T
 * (K,N)^T . X (K,M); NULL when cuBLASLt offers no algorithm (not an
 * error: cublasGemmEx stays). Alignment is assumed 16 bytes only, so
 * every algorithm offered takes any of the backend's operands. */
static struct cuda_tune_lt *make_plan(struct tuner *u, uint32_t m, uint32_t n,
				      uint32_t k)
{
	struct cuda_tune_lt *p = calloc(1, sizeof(*p));
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res[CUDA_TUNE_ALGOS];
	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	uint64_t ws = BLAS_WS_BYTES;
	uint32_t align = 16;
	int got = 0;
	bool ok = p != NULL;

	if (!ok)
		return NULL;
	lt_status(
	    cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
	    &ok);
	if (ok)
		lt_status(
		    cublasLtMatmulDescSetAttribute(
			p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
		    &ok);
	if (ok)
		lt_status(
		    cublasLtMatmulDescSetAttribute(
			p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
		    &ok);
	if (ok)
		lt_status(
		    cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, k, n, k),
		    &ok);
	if (ok)
		lt_status(
		    cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, k, m, k),
		    &ok);
	if (ok)
		lt_status(
		    cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, n, m, n),
		    &ok);
	if (ok)
		lt_status(cublasLtMatmulPreferenceCreate(&pref), &ok);
	if (ok)
		lt_status(cublasLtMatmulPreferenceSetAttribute(
			      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
			      &ws, sizeof(ws)),
			  &ok);
	for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
	     ok && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
		lt_status(cublasLtMatmulPreferenceSetAttribute(
			      pref, (cublasLtMatmulPreferenceAttributes_t)a,
			      &align, sizeof(align)),
			  &ok);
	if (ok)
		lt_status(cublasLtMatmulAlgoGetHeuristic(
			      u->t->lt, p->op, p->a, p->b, p->c, p->c, pref,
			      CUDA_TUNE_ALGOS, res, &got),
			  &ok);
	for (int i = 0; ok && i < got; i++)
		if (res[i].state == CUBLAS_STATUS_SUCCESS &&
		    res[i].workspaceSize <= ws)
			p->algo[p->n_algos++] = res[i].algo;
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	if (!ok || !p->n_algos) {
		o1_debug("cuda autotune: no cuBLASLt algorithm for %u x %u x "
			 "%u",
			 m, n, k);
		free_plan(p);
		return NULL;
	}
	return p;
}

/* A sweep (see the top) over M rows. */
static int enqueue(struct tuner *u, bool head, uint32_t m)
{
	int err = 0;

	for (uint32_t i = 0; !err && head && i < u->heads; i++)
		err = o1_cuda_forward_stage(u->s, CUDA_KIND_HEAD, 0, m);
	for (uint32_t l = 0; !err && !head && l < u->layers; l++)
		for (int k = 0; !err && k < CUDA_KIND_HEAD; k++)
			err = o1_cuda_forward_stage(u->s, (enum cuda_kind)k, l,
						    m);
	return err;
}

/* Replays GE: one warm-up, then the median of REPS in *US. */
static int replay(struct tuner *u, cudaGraphExec_t ge, double *us)
{
	cudaStream_t st = u->s->stream;
	double v[REPS];
	int err = 0;

	for (int r = 0; !err && r <= REPS; r++) {
		float ms = 0;

		err = O1_CUDA_CHECK(cudaEventRecord(u->e0, st));
		err = err ? err : O1_CUDA_CHECK(cudaGraphLaunch(ge, st));
		err = err ? err : O1_CUDA_CHECK(cudaEventRecord(u->e1, st));
		err = err ? err : O1_CUDA_CHECK(cudaEventSynchronize(u->e1));
		err = err ? err
			  : O1_CUDA_CHECK(
				cudaEventElapsedTime(&ms, u->e0, u->e1));
		if (r)
			v[r - 1] = ms * 1e3;
	}
	if (!err)
		*us = o1_tune_median(v, REPS);
	return err;
}

/* Times the sweep as the picks (and trial) stand: *US, or -1 when the
 * sweep could not be captured (a candidate the library refuses: not an
 * error). */
static int time_sweep(struct tuner *u, bool head, uint32_t m, double *us)
{
	cudaStream_t st = u->s->stream;
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;
	int err, e;

	*us = -1;
	/* eagerly first: modules load and libraries set up outside the
	 * capture, and a candidate the library refuses fails here */
	e = enqueue(u, head, m);
	if (e) {
		(void)cudaGetLastError();
		o1_debug("cuda autotune: a candidate of %u rows refused", m);
		return O1_CUDA_CHECK(cudaStreamSynchronize(st));
	}
	err = O1_CUDA_CHECK(
	    cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
	if (err)
		return err;
	e = enqueue(u, head, m);
	err = O1_CUDA_CHECK(cudaStreamEndCapture(st, &g));
	if (!e && !err)
		err = O1_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
	if (g)
		cudaGraphDestroy(g);
	if (e || err) {
		(void)cudaGetLastError(); /* a refused candidate */
		o1_debug("cuda autotune: a candidate of %u rows refused", m);
		return 0;
	}
	err = replay(u, ge, us);
	cudaGraphExecDestroy(ge);
	return err;
}

/* Times KIND over M rows with pick P (cuBLAS path: BLAS), when the
 * budget allows: *US, or -1. */
static int time_pick(struct tuner *u, enum cuda_kind kind, uint32_t m,
		     struct cuda_tune_pick p, bool blas, double *us)
{
	bool head = kind == CUDA_KIND_HEAD;
	uint64_t t0 = o1_tune_now_ns();
	int err;

	*us = -1;
	if (!o1_tune_budget_take(&u->b, t0, u->cost_ns[head]))
		return 0;
	u->t->trial = true, u->t->trial_blas = blas;
	u->t->trial_kind = kind, u->t->trial_rows = m, u->t->trial_pick = p;
	err = time_sweep(u, head, m, us);
	u->t->trial = false;
	u->cost_ns[head] = o1_tune_now_ns() - t0;
	return err;
}

static enum o1_gemv_variant variant_of(enum cuda_kind kind)
{
	static const enum o1_gemv_variant v[CUDA_KINDS] = {
	    O1_GEMV_ROPE, O1_GEMV_ADD, O1_GEMV_SWIGLU, O1_GEMV_ADD,
	    O1_GEMV_NORM};

	return v[kind];
}

/* Times candidates C[0 .. N) of KIND over bucket I and keeps the pick. */
static int run_job(struct tuner *u, enum cuda_kind kind, uint32_t i,
		   const struct cuda_tune_pick *c, uint32_t n, bool blas,
		   double *before, double *after)
{
	double us[CANDS_MAX];
	uint32_t best;
	int err = 0;

	for (uint32_t j = 0; !err && j < n; j++)
		err = time_pick(u, kind, u->t->rows[i], c[j], blas, &us[j]);
	if (err)
		return err;
	best = o1_tune_pick(us, n, O1_TUNE_MARGIN);
	u->t->pick[kind][i] = c[best];
	if (before && *before <= 0)
		*before = us[0];
	if (after)
		*after = us[best];
	return 0;
}

/* The gemv setups of every product over bucket I. */
static int tune_gemv(struct tuner *u, uint32_t i, double (*t)[2])
{
	uint32_t m = u->t->rows[i];
	int err = 0;

	for (int k = 0; !err && k < CUDA_KINDS; k++) {
		struct cuda_tune_pick c[CANDS_MAX], now = u->t->pick[k][i];
		uint8_t p[3];
		uint32_t np = o1_gemv_pieces(variant_of(k), m, p), n = 0;

		c[n++] = now;
		for (uint32_t b = 1; b <= O1_GEMV_BPS_MAX; b++)
			for (uint32_t j = 0; j < np; j++)
				if (b != O1_GEMV_BPS_DEFAULT || j)
					c[n++] = (struct cuda_tune_pick){
					    {(uint8_t)b, p[j]}, now.lt};
		err = run_job(u, (enum cuda_kind)k, i, c, n, false,
			      &t[k == CUDA_KIND_HEAD][0],
			      &t[k == CUDA_KIND_HEAD][1]);
	}
	return err;
}

/* The cuBLAS algorithms of every product over bucket I. */
static int tune_blas(struct tuner *u, uint32_t i, double (*t)[2])
{
	uint32_t m = u->t->rows[i];
	int err = 0;

	for (int k = 0; !err && k < CUDA_KINDS && !u->b.spent; k++) {
		struct cuda_tune_pick c[CANDS_MAX], now = u->t->pick[k][i];
		struct cuda_tune_lt *p;
		uint32_t nn, kk, n = 0;

		kind_shape(u->s, (enum cuda_kind)k, &nn, &kk);
		p = make_plan(u, m, nn, kk);
		if (!p)
			continue;
		free_plan(u->t->plan[k][i]);
		u->t->plan[k][i] = p;
		c[n++] = (struct cuda_tune_pick){now.g, -1};
		for (uint32_t j = 0; j < p->n_algos; j++)
			c[n++] = (struct cuda_tune_pick){now.g, (int8_t)j};
		err = run_job(u, (enum cuda_kind)k, i, c, n,
			      m <= O1_GEMV_MAX_ROWS, &t[k == CUDA_KIND_HEAD][0],
			      &t[k == CUDA_KIND_HEAD][1]);
	}
	return err;
}

/* The whole sweep (layers and head) of bucket I on one path, as picked. */
static int time_path(struct tuner *u, uint32_t i, bool blas, double *us)
{
	double l = -1, h = -1;
	struct cuda_tune_pick p = u->t->pick[CUDA_KIND_QKV][i];
	int err = time_pick(u, CUDA_KIND_QKV, u->t->rows[i], p, blas, &l);

	p = u->t->pick[CUDA_KIND_HEAD][i];
	err = err ? err
		  : time_pick(u, CUDA_KIND_HEAD, u->t->rows[i], p, blas, &h);
	*us = l > 0 && h > 0 ? l + h : -1;
	return err;
}

/* One line a bucket: the picks (gemv: blocks a multiprocessor / pieces a
 * lane; cuBLAS: gemmex, the default, or lt#i, the heuristic's i-th), and
 * the sweeps before (all defaults) and after. */
static void log_bucket(const struct tuner *u, uint32_t i, bool blas,
		       double (*t)[2])
{
	char line[512];
	int at = 0;

	for (int k = 0; k < CUDA_KINDS && at < (int)sizeof(line); k++) {
		struct cuda_tune_pick p = u->t->pick[k][i];
		uint8_t d[3] = {0, 0, 0};

		o1_gemv_pieces(variant_of((enum cuda_kind)k), u->t->rows[i], d);
		if (!blas)
			at += snprintf(line + at, sizeof(line) - at,
				       "%s%s gemv %u/%u", k ? ", " : "",
				       o1_cuda_kind_name(k),
				       p.g.bps ? p.g.bps : O1_GEMV_BPS_DEFAULT,
				       p.g.pieces ? p.g.pieces : d[0]);
		else if (p.lt < 0)
			at += snprintf(line + at, sizeof(line) - at,
				       "%s%s gemmex", k ? ", " : "",
				       o1_cuda_kind_name(k));
		else
			at +=
			    snprintf(line + at, sizeof(line) - at, "%s%s lt#%d",
				     k ? ", " : "", o1_cuda_kind_name(k), p.lt);
	}
	o1_info("cuda autotune: rows %u (%s): %s; layer sweep %.1f -> %.1f "
		"us, head %.1f -> %.1f us",
		u->t->rows[i], blas ? "cuBLAS" : "gemv", line, t[0][0], t[0][1],
		t[1][0], t[1][1]);
}

/* Bucket I: gemv setups, or cuBLAS algorithms, or both and the faster
 * path. */
static int tune_bucket(struct tuner *u, uint32_t i, bool gemv, bool blas)
{
	double tg[2][2] = {{-1, -1}, {-1, -1}}, tb[2][2] = {{-1, -1}, {-1, -1}};
	double g = -1, b = -1;
	uint32_t m = u->t->rows[i];
	int err;

	if (u->b.spent)
		return 0;
	err = o1_cuda_forward_prepare(u->s, m);
	err = err ? err : o1_cuda_sync(u->s);
	if (!err && gemv)
		err = tune_gemv(u, i, tg);
	if (!err && blas)
		err = tune_blas(u, i, tb);
	if (!err && gemv && blas) {
		err = time_path(u, i, false, &g);
		err = err ? err : time_path(u, i, true, &b);
		u->t->blas[m] = g > 0 && b > 0 && b < g * (1 - O1_TUNE_MARGIN);
		o1_info("cuda autotune: rows %u: gemv %.1f us, cuBLAS %.1f us "
			"a sweep: %s",
			m, g, b, u->t->blas[m] ? "cuBLAS" : "gemv");
	}
	if (!err && gemv)
		log_bucket(u, i, false, tg);
	if (!err && blas)
		log_bucket(u, i, true, tb);
	return err;
}

/* Sweep sizes: at least L2_TIMES the L2 cache's bytes. */
static int size_sweeps(struct tuner *u)
{
	int l2 = 0;
	uint64_t lb = 0, want, hb = kind_bytes(u->s, CUDA_KIND_HEAD);
	int err = O1_CUDA_CHECK(cudaDeviceGetAttribute(
	    &l2, cudaDevAttrL2CacheSize, (int)u->s->cfg.device));

	for (int k = 0; k < CUDA_KIND_HEAD; k++)
		lb += kind_bytes(u->s, (enum cuda_kind)k);
	want = (uint64_t)L2_TIMES * (l2 > 0 ? (uint64_t)l2 : 0);
	u->layers = lb ? (uint32_t)((want + lb - 1) / lb) : 1;
	u->layers = u->layers < 1 ? 1 : u->layers;
	u->layers = u->layers > u->s->d.n_layers ? u->s->d.n_layers : u->layers;
	u->heads = hb ? (uint32_t)((want + hb - 1) / hb) : 1;
	u->heads = u->heads < 1 ? 1 : u->heads > HEAD_MAX ? HEAD_MAX : u->heads;
	return err;
}

/* Why S keeps its defaults, or NULL when it can be tuned. */
static const char *cannot(const struct cuda_state *s)
{
	if (!s->cfg.cuda_autotune)
		return "off (cuda.autotune)";
	if (s->cfg.tp_size)
		return "not on a tensor-parallel rank";
	if (s->n_block_mats)
		return "matrices in GGUF block formats (gemv_q.cu, not tuned)";
	if (!s->fused)
		return "fused products off (configured)";
	return NULL;
}

static int tune_all(struct tuner *u)
{
	struct cuda_tune *t = u->t;
	int err = size_sweeps(u);

	err = err ? err
		  : O1_CUDA_CHECK(cudaMemsetAsync(
			u->s->x, 0,
			(size_t)u->s->cfg.max_batch_tokens * u->s->d.dim * 4,
			u->s->stream));
	for (uint32_t i = 0; !err && i < t->n_rows; i++)
		if (t->rows[i] == 1)
			err = tune_bucket(u, i, true, false);
	for (uint32_t i = t->n_rows; !err && i-- > 0;)
		if (t->rows[i] > O1_GEMV_MAX_ROWS)
			err = tune_bucket(u, i, false, true);
	for (uint32_t i = 0; !err && i < t->n_rows; i++)
		if (t->rows[i] > 1 && t->rows[i] <= O1_GEMV_MAX_ROWS)
			err = tune_bucket(u, i, true, true);
	return err;
}

/* After a failed tuning: the defaults everywhere, and the backend goes
 * on unless the device is gone (a sticky error: the stream cannot finish
 * its work). */
static int give_up(struct cuda_state *s, int err)
{
	struct cuda_tune *t = &s->tune;

	o1_warn("cuda autotune: failed (%s) after %.0f ms; default launch "
		"setups",
		o1_strerror(err), t->ms);
	for (int k = 0; k < CUDA_KINDS; k++)
		for (uint32_t i = 0; i < CUDA_TUNE_ROWS_MAX; i++)
			t->pick[k][i] = (struct cuda_tune_pick){{0, 0}, -1};
	memset(t->blas, 0, sizeof(t->blas));
	(void)cudaGetLastError();
	return O1_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

/* The buckets a step can run (a bucket's rows fit the activations). */
static void set_rows(struct cuda_state *s, const uint32_t *rows, uint32_t n)
{
	struct cuda_tune *t = &s->tune;

	t->n_rows = 0;
	for (uint32_t i = 0; i < n && t->n_rows < CUDA_TUNE_ROWS_MAX; i++)
		if (rows[i] <= s->cfg.max_batch_tokens &&
		    rows[i] <= s->head_rows)
			t->rows[t->n_rows++] = rows[i];
	for (int k = 0; k < CUDA_KINDS; k++)
		for (uint32_t i = 0; i < CUDA_TUNE_ROWS_MAX; i++)
			t->pick[k][i] = (struct cuda_tune_pick){{0, 0}, -1};
}

int o1_cuda_tune_run(struct cuda_state *s, const uint32_t *rows, uint32_t n)
{
	struct tuner u = {s, &s->tune, {0}, NULL, NULL, 1, 1, {0, 0}};
	const char *why = cannot(s);
	uint32_t ms = s->cfg.cuda_autotune_ms ? s->cfg.cuda_autotune_ms
					      : CUDA_TUNE_MS_DEFAULT;
	int err;

	set_rows(s, rows, n);
	if (why) {
		o1_info("cuda autotune: %s; default launch setups", why);
		return 0;
	}
	o1_tune_budget_init(&u.b, o1_tune_now_ns(), ms);
	err = o1_cuda_blas_check(cublasLtCreate(&s->tune.lt), "cuBLASLt");
	err = err ? err : O1_CUDA_CHECK(cudaEventCreate(&u.e0));
	err = err ? err : O1_CUDA_CHECK(cudaEventCreate(&u.e1));
	err = err ? err : tune_all(&u);
	s->tune.trial = false;
	if (u.e0)
		cudaEventDestroy(u.e0);
	if (u.e1)
		cudaEventDestroy(u.e1);
	s->tune.ms = o1_tune_budget_ms(&u.b, o1_tune_now_ns());
	if (err)
		return give_up(s, err);
	s->tune.done = true;
	o1_info("cuda autotune: %u buckets, %u timings (sweeps of %u "
		"layers, %u heads) in %.0f ms, budget %u ms%s",
		s->tune.n_rows, u.b.timed, u.layers, u.heads, s->tune.ms, ms,
		u.b.spent ? ": spent, the rest keeps its defaults" : "");
	return err;
}

/* The tensor-parallel backend over the CPU backend (tp_backend.c,
 * tp_group_cpu.c), against one plain CPU backend on the same model.
 *
 * test_group_cpu: the in-process all-reduce, 2 to 4 rank threads, many
 * sums of varying length in a row: every rank gets exactly the rank-order
 * sum b0 + b1 + ... (bitwise); a failed rank releases a rank blocked in a
 * sum (-ECANCELED) and every later sum fails.
 * test_tp_*: three sequences, page size 4: A prefilled in chunks of 7 and
 * 13 with every row's logits; B shares A's first two pages (same 8 ids),
 * then prefills 9 of its own in one chunk; C prefills 5; then 6 decode
 * steps of all three, each fed the plain backend's greedy ids. The TP path
 * over one rank must equal the plain backend bitwise (the all-reduce of
 * one rank is the identity); over 2, 3 and 4 ranks every logit must be
 * within 1e-5 x max|logit| of it. Why that bound: every rank computes its
 * Q/K/V, attention, gate/up and SwiGLU values exactly as the whole model
 * does (each output row is computed alone, in a fixed order, by the same
 * kernels), so the only difference is the order of the additions inside
 * the O and down products (a sum of K/N products per rank, then the ranks'
 * partials in rank order, instead of one sum of K): a reassociated f32 sum
 * of K terms differs by at most about K x 2^-24 x sum|terms|, a few 1e-6
 * of the result for K <= 48 here, carried through two layers (RMSNorm
 * does not amplify it) into the logits. Observed values are printed.
 * test_tp_sampling: sampling in the backend over 2 ranks (rank 0 samples
 * after its LM head): the results are o1_sample_rows's over the logits the
 * step returned, bitwise, with or without a logits buffer.
 * test_tp_refused: splits that do not divide (kv heads 2 over 4, query
 * heads 6 over 4), too many ranks, a rank field set by the caller; a bad
 * token id is refused (-O1_E_BOUNDS) without stopping the group. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "backend/backend.h"
#include "common/error.h"
#include "backend/kv_pool.h"
#include "mem_model.h"
#include "backend/tp_group.h"

#define PAGE	  4
#define MAX_PAGES 16
#define N_DECODE  6
#define MAX_IDS	  (MAX_PAGES * PAGE)

enum { SEQ_A, SEQ_B, SEQ_C, N_SEQS };

struct side {
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table t[N_SEQS];
	uint32_t pages[N_SEQS][MAX_PAGES];
	uint32_t len[N_SEQS];
	float *logits; /* MAX_IDS rows */
};

struct world {
	const struct o1_model *m;
	uint32_t vocab;
	int32_t ids[N_SEQS][MAX_IDS];
};

/* ---- the CPU group on its own ---- */

struct sum_job {
	const struct o1_tp_group_ops *ops;
	void *group;
	uint32_t r, n;
	float *buf;
	int err;
};

static uint64_t rng_state = 1234;

static float frand(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng_state >> 40) / (double)(1 << 24)) * 2 - 1;
}

#define SUM_MAX 1000

/* Sums of every length in LENGTHS, one after the other. */
static const uint32_t lengths[] = {1, 7, 1000, 3, 64, 999, 2};

static void *sum_thread(void *arg)
{
	struct sum_job *j = arg;
	struct o1_tp_link k;
	uint64_t off = 0;

	j->ops->link(j->group, j->r, &k);
	for (size_t i = 0; !j->err && i < sizeof(lengths) / sizeof(*lengths);
	     i++) {
		j->err = k.sum(k.ctx, j->buf + off, lengths[i], NULL);
		off += lengths[i];
	}
	return NULL;
}

static void check_sums(uint32_t n)
{
	const struct o1_tp_group_ops *ops = &o1_tp_group_cpu_ops;
	uint64_t total = 0;
	struct sum_job j[O1_BACKEND_DEVICES_MAX];
	pthread_t th[O1_BACKEND_DEVICES_MAX];
	float *in[O1_BACKEND_DEVICES_MAX];
	void *g;

	for (size_t i = 0; i < sizeof(lengths) / sizeof(*lengths); i++)
		total += lengths[i];
	assert_int_equal(ops->create(n, NULL, SUM_MAX, &g), 0);
	for (uint32_t r = 0; r < n; r++) {
		in[r] = malloc(total * sizeof(float));
		j[r] = (struct sum_job){
		    ops, g, r, n, malloc(total * sizeof(float)), 0};
		for (uint64_t e = 0; e < total; e++)
			in[r][e] = j[r].buf[e] = frand() * (float)(r + 1);
	}
	for (uint32_t r = 0; r < n; r++)
		assert_int_equal(
		    pthread_create(&th[r], NULL, sum_thread, &j[r]), 0);
	for (uint32_t r = 0; r < n; r++)
		pthread_join(th[r], NULL);
	for (uint64_t e = 0; e < total; e++) {
		float s = in[0][e];

		for (uint32_t r = 1; r < n; r++)
			s += in[r][e];
		for (uint32_t r = 0; r < n; r++)
			assert_memory_equal(&j[r].buf[e], &s, sizeof(s));
	}
	assert_false(ops->failed(g));
	for (uint32_t r = 0; r < n; r++) {
		assert_int_equal(j[r].err, 0);
		free(in[r]);
		free(j[r].buf);
	}
	ops->destroy(g);
}

static void *blocked_sum(void *arg)
{
	struct sum_job *j = arg;
	struct o1_tp_link k;

	j->ops->link(j->group, j->r, &k);
	j->err = k.sum(k.ctx, j->buf, j->n, NULL);
	return NULL;
}

static void test_group_cpu(void **state)
{
	const struct o1_tp_group_ops *ops = &o1_tp_group_cpu_ops;
	float buf[4] = {1, 2, 3, 4};
	struct sum_job j;
	struct o1_tp_link k1;
	pthread_t th;
	void *g;

	(void)state;
	for (uint32_t n = 1; n <= 4; n++)
		check_sums(n);
	/* rank 0 waits in a sum; rank 1 fails instead of joining */
	assert_int_equal(ops->create(2, NULL, 4, &g), 0);
	j = (struct sum_job){ops, g, 0, 4, buf, 1};
	assert_int_equal(pthread_create(&th, NULL, blocked_sum, &j), 0);
	ops->link(g, 1, &k1);
	(*k1.fail)(k1.ctx);
	pthread_join(th, NULL);
	assert_int_equal(j.err, -ECANCELED);
	assert_true(ops->failed(g));
	assert_int_equal(k1.sum(k1.ctx, buf, 4, NULL), -ECANCELED);
	assert_int_equal(k1.sum(k1.ctx, buf, 5, NULL), -O1_E_BOUNDS);
	ops->destroy(g);
}

/* ---- the backend ---- */

static void side_open(struct side *sd, const struct o1_model *m, uint32_t tp)
{
	struct o1_backend_config cfg = {.n_threads = 1,
					.max_batch_tokens = 32,
					.max_seqs = N_SEQS,
					.max_context_tokens = MAX_IDS,
					.n_pages = 40,
					.page_tokens = PAGE,
					.tensor_parallel = tp};

	memset(sd, 0, sizeof(*sd));
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, m, &cfg, &sd->b), 0);
	assert_int_equal(
	    o1_kv_pool_create(o1_backend_kv_layout(sd->b), &sd->pool), 0);
	for (int s = 0; s < N_SEQS; s++)
		o1_kv_table_init(&sd->t[s], sd->pages[s], MAX_PAGES);
	sd->logits = malloc((size_t)MAX_IDS * m->desc.vocab_size * 4);
	assert_non_null(sd->logits);
}

static void side_close(struct side *sd)
{
	for (int s = 0; s < N_SEQS; s++)
		o1_kv_table_fini(sd->pool, &sd->t[s]);
	assert_int_equal(o1_kv_pool_free_pages(sd->pool),
			 o1_backend_kv_layout(sd->b)->n_pages);
	o1_kv_pool_destroy(sd->pool);
	o1_backend_destroy(sd->b);
	free(sd->logits);
}

/* One step: sequence SEQS[i] brings COUNT[i] ids (all logits when ALL);
 * returns the logits rows. */
static uint32_t side_step(struct side *sd, const struct world *w,
			  const int *seqs, const uint32_t *count, uint32_t n,
			  bool all)
{
	struct o1_step_seq q[N_SEQS];
	uint32_t rows = 0;

	for (uint32_t i = 0; i < n; i++) {
		int s = seqs[i];

		assert_int_equal(o1_kv_table_reserve(sd->pool, &sd->t[s],
						     sd->len[s] + count[i]),
				 0);
		q[i] = (struct o1_step_seq){
		    w->ids[s] + sd->len[s], count[i],	      sd->len[s],
		    sd->pages[s],	    sd->t[s].n_pages, all};
		rows += all ? count[i] : 1;
	}
	assert_int_equal(
	    o1_backend_step(sd->b, &(struct o1_step){.seqs = q,
						     .n_seqs = n,
						     .logits = sd->logits,
						     .logits_rows = rows}),
	    0);
	for (uint32_t i = 0; i < n; i++)
		sd->len[seqs[i]] += count[i];
	return rows;
}

/* B takes A's first two pages (A's ids 0..7 are B's too). */
static void share_prefix(struct side *sd)
{
	for (uint32_t p = 0; p < 2; p++)
		assert_int_equal(o1_kv_table_share(sd->pool, &sd->t[SEQ_B],
						   sd->pages[SEQ_A][p]),
				 0);
	sd->len[SEQ_B] = 2 * PAGE;
}

struct diff {
	double worst, max;
	uint64_t unequal;
};

static void compare(const struct side *a, const struct side *b, uint32_t rows,
		    uint32_t vocab, struct diff *d)
{
	for (uint64_t i = 0; i < (uint64_t)rows * vocab; i++) {
		d->max = fmax(d->max, fabs(a->logits[i]));
		d->worst = fmax(d->worst, fabs(a->logits[i] - b->logits[i]));
		d->unequal += memcmp(&a->logits[i], &b->logits[i], 4) != 0;
	}
}

static uint32_t argmax(const float *v, uint32_t n)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < n; i++)
		best = v[i] > v[best] ? i : best;
	return best;
}

/* The prefill and decode script on both sides; differences into D. */
static void run_script(struct world *w, struct side sd[2], struct diff *d)
{
	static const int a[] = {SEQ_A}, bc[] = {SEQ_B, SEQ_C},
			 all[] = {SEQ_A, SEQ_B, SEQ_C};
	static const uint32_t c7[] = {7}, c13[] = {13}, c95[] = {9, 5};
	uint32_t rows, one[N_SEQS] = {1, 1, 1};

	for (int s = 0; s < 2; s++)
		rows = side_step(&sd[s], w, a, c7, 1, true);
	compare(&sd[0], &sd[1], rows, w->vocab, d);
	for (int s = 0; s < 2; s++)
		rows = side_step(&sd[s], w, a, c13, 1, true);
	compare(&sd[0], &sd[1], rows, w->vocab, d);
	for (int s = 0; s < 2; s++) {
		share_prefix(&sd[s]);
		rows = side_step(&sd[s], w, bc, c95, 2, true);
	}
	compare(&sd[0], &sd[1], rows, w->vocab, d);
	for (int t = 0; t < N_DECODE; t++) {
		for (int s = 0; s < 2; s++)
			rows = side_step(&sd[s], w, all, one, N_SEQS, false);
		compare(&sd[0], &sd[1], rows, w->vocab, d);
		for (int q = 0; q < N_SEQS; q++)
			w->ids[q][sd[0].len[q]] = (int32_t)argmax(
			    sd[0].logits + (size_t)q * w->vocab, w->vocab);
	}
}

/* Plain backend against the TP path over TP ranks. */
static struct diff tp_against_plain(const struct o1_model *m, uint32_t tp)
{
	struct world w = {m, m->desc.vocab_size, {{0}}};
	struct side sd[2];
	struct diff d = {0, 0, 0};

	for (int s = 0; s < N_SEQS; s++)
		for (int i = 0; i < MAX_IDS; i++)
			w.ids[s][i] = (int32_t)((i * 7 + s * 11 + 3) % w.vocab);
	memcpy(w.ids[SEQ_B], w.ids[SEQ_A], 2 * PAGE * sizeof(int32_t));
	side_open(&sd[0], m, 0);
	side_open(&sd[1], m, tp);
	run_script(&w, sd, &d);
	side_close(&sd[0]);
	side_close(&sd[1]);
	print_message("tensor parallel %u: max |logit| %.3f, worst difference "
		      "%.3g (%.3g of it), %llu logits not bitwise equal\n",
		      tp, d.max, d.worst, d.worst / d.max,
		      (unsigned long long)d.unequal);
	return d;
}

static struct o1_model_desc gqa_desc(void)
{
	return (struct o1_model_desc){.arch = O1_ARCH_QWEN2,
				      .n_layers = 2,
				      .dim = 32,
				      .n_heads = 8,
				      .n_kv_heads = 4,
				      .head_dim = 8,
				      .ffn_dim = 48,
				      .vocab_size = 50,
				      .max_context_tokens = 256,
				      .norm_eps = 1e-5f,
				      .qkv_bias = true,
				      .rope = {.theta = 10000, .dim = 8},
				      .bos_id = -1,
				      .eos_id = -1};
}

static void test_tp_gqa(void **state)
{
	struct o1_model_desc dsc = gqa_desc();
	struct mem_model f;
	struct diff d;

	(void)state;
	mem_model_build(&f, &dsc, 21);
	d = tp_against_plain(&f.m, 1);
	assert_int_equal(d.unequal, 0);
	for (uint32_t n = 2; n <= 4; n *= 2) {
		d = tp_against_plain(&f.m, n);
		assert_true(d.worst <= 1e-5 * d.max);
	}
	mem_model_release(&f);
}

/* Six heads over three kv heads, tied head, llama: three ranks. */
static void test_tp_three(void **state)
{
	struct o1_model_desc dsc = gqa_desc();
	struct mem_model f;
	struct diff d;

	(void)state;
	dsc.arch = O1_ARCH_LLAMA, dsc.qkv_bias = false;
	dsc.tied_embeddings = true;
	dsc.n_heads = 6, dsc.n_kv_heads = 3, dsc.head_dim = 6;
	dsc.rope.dim = 6;
	mem_model_build(&f, &dsc, 22);
	d = tp_against_plain(&f.m, 3);
	assert_true(d.worst <= 1e-5 * d.max);
	assert_true(d.unequal > 0); /* the sums really were split */
	mem_model_release(&f);
}

/* One step of two prefills on a fresh 2-rank sampling backend; the
 * logits into LOGITS when it is not NULL. */
static void tp_sample_step(const struct o1_model *m, float *logits,
			   struct o1_sample_result *res)
{
	struct o1_backend_config cfg = {.n_threads = 1,
					.max_batch_tokens = 16,
					.max_seqs = 2,
					.n_pages = 8,
					.page_tokens = PAGE,
					.tensor_parallel = 2,
					.sampling = true};
	static const int32_t ids[2][5] = {{3, 9, 9, 4, 1}, {7, 7, 2}};
	uint32_t pages[2][2] = {{0, 1}, {2, 3}};
	struct o1_sample_penalty pens[3] = {{9, 1, 1}, {4, 0, 1}, {30, 2, 0}};
	struct o1_sample_row rows[2] = {
	    {.top_p = 1, .repetition_penalty = 1, .n_logprobs = 3},
	    {.u = 0.37,
	     .temperature = 0.8f,
	     .top_p = 0.9f,
	     .repetition_penalty = 1.3f,
	     .presence_penalty = 0.5f,
	     .n_logprobs = 5,
	     .n_pen = 3}};
	struct o1_step_seq q[2] = {{ids[0], 5, 0, pages[0], 2, false},
				   {ids[1], 3, 0, pages[1], 1, false}};
	struct o1_backend *b;

	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, m, &cfg, &b), 0);
	assert_true(o1_backend_can_sample(b));
	assert_int_equal(
	    o1_backend_step(b, &(struct o1_step){.seqs = q,
						 .n_seqs = 2,
						 .logits = logits,
						 .logits_rows = 2,
						 .sample_rows = rows,
						 .pens = pens,
						 .n_pens = 3,
						 .samples = res}),
	    0);
	o1_backend_destroy(b);
	if (logits) { /* the reference: the same rows over these logits */
		void *scratch = aligned_alloc(
		    64, o1_sample_scratch_bytes(m->desc.vocab_size));
		struct o1_sample_result want[2];

		assert_non_null(scratch);
		assert_int_equal(o1_sample_rows(want, logits, 2,
						m->desc.vocab_size, rows, pens,
						scratch),
				 0);
		assert_memory_equal(res, want, sizeof(want));
		free(scratch);
	}
}

static void test_tp_sampling(void **state)
{
	struct o1_model_desc dsc = gqa_desc();
	struct o1_sample_result a[2], b[2];
	float *logits = malloc(2 * 50 * sizeof(float));
	struct mem_model f;

	(void)state;
	assert_non_null(logits);
	mem_model_build(&f, &dsc, 25);
	tp_sample_step(&f.m, logits, a);
	tp_sample_step(&f.m, NULL, b);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(a[0].n_top, 3);
	assert_int_equal(a[1].n_top, 5);
	mem_model_release(&f);
	free(logits);
}

static void test_tp_refused(void **state)
{
	struct o1_model_desc dsc = gqa_desc();
	struct o1_backend_config cfg = {.n_threads = 1,
					.max_batch_tokens = 8,
					.max_seqs = 2,
					.n_pages = 8,
					.page_tokens = PAGE};
	struct o1_backend *b = NULL;
	struct mem_model f;
	uint32_t page = 0;
	int32_t bad = 50, good = 3;
	float *logits = malloc(50 * sizeof(float));

	(void)state;
	dsc.n_kv_heads = 2;
	mem_model_build(&f, &dsc, 23);
	cfg.tensor_parallel = 4; /* kv heads 2 over 4 */
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &cfg, &b),
			 -O1_E_UNSUPPORTED);
	cfg.tensor_parallel = 9;
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &cfg, &b),
			 -O1_E_CONFIG);
	cfg.tensor_parallel = 2, cfg.tp_size = 2;
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &cfg, &b),
			 -O1_E_CONFIG);
	cfg.tp_size = 0;
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &cfg, &b), 0);
	assert_int_equal(
	    o1_backend_step(
		b,
		&(struct o1_step){
		    .seqs = &(struct o1_step_seq){&bad, 1, 0, &page, 1, false},
		    .n_seqs = 1,
		    .logits = logits,
		    .logits_rows = 1}),
	    -O1_E_BOUNDS);
	assert_int_equal(
	    o1_backend_step(
		b,
		&(struct o1_step){
		    .seqs = &(struct o1_step_seq){&good, 1, 0, &page, 1, false},
		    .n_seqs = 1,
		    .logits = logits,
		    .logits_rows = 1}),
	    0);
	o1_backend_destroy(b);
	mem_model_release(&f);
	dsc = gqa_desc(), dsc.n_heads = 6, dsc.n_kv_heads = 6;
	mem_model_build(&f, &dsc, 24);
	cfg.tensor_parallel = 4; /* query heads 6 over 4 */
	assert_int_equal(o1_backend_create(O1_BACKEND_CPU, &f.m, &cfg, &b),
			 -O1_E_UNSUPPORTED);
	mem_model_release(&f);
	free(logits);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_group_cpu),
	    cmocka_unit_test(test_tp_gqa),
	    cmocka_unit_test(test_tp_three),
	    cmocka_unit_test(test_tp_sampling),
	    cmocka_unit_test(test_tp_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

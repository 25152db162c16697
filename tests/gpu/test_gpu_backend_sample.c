/* Sampling in the CUDA backend's step (cfg.sampling) against the CPU
 * reference o1_sample_rows run on the logits the same backend returns when
 * a step asks for both, on models made by the o1model binary given as
 * argv[1]: the tiny preset (GGUF f32), the tiny preset with a vocabulary
 * of 200000 (sample.cu's slices in global scratch) and a one-layer
 * qwen2.5-0.5b shape (vocabulary 151936, safetensors bf16).
 *
 * Three CUDA backends with sampling on step in lockstep over the same
 * inputs: graphs off (every step eager), graphs on (buckets 1, 2, 4) and
 * graphs_eager (the same bucket steps without graphs). Three sequences:
 * one prefill step with logits for every position (300 rows: two LM head
 * chunks of 256 and 44 rows, each sampled after its head), then decode
 * steps over 1, 2 or 3 of them (buckets 1, 2 and 4, one padding row),
 * with random next ids. Every row has its own mode (greedy with and
 * without logprobs, temperature, top-k, top-p, min-p, a combination,
 * penalties over the sequence's own tokens) and a fresh U. Per step kind
 * (cycling): both logits and samples; samples only; logits only (on the
 * backends that sample, a bucket step then replays the sampling graph
 * over greedy rows and ignores the results). Token masks (structured
 * output): one row in three carries a bitmask (half the tokens, five,
 * one, or none at all) in the step's masks, which the
 * backend uploads with the rows (graphs replay them).
 *
 * Checks where a step asked for both, per row, against
 * o1_sample_rows_masked on the returned logits and the step's masks:
 * a masked row never answers a refused token, one allowing nothing
 * answers -1; greedy ids, n_top and top-n ids exact; logprob,
 * entropy and top logprobs within 3e-5 + 2^-21 |cpu| (test_sample_cuda's
 * bound: the device sums in another order); sampled ids equal, except
 * where the draw lies within DELTA = 1e-8 of a boundary between two
 * tokens (test_sample_cuda's margin), found here by the reference itself:
 * the reference's draws at U - DELTA and U + DELTA differ and the
 * device's id is one of them. Such rows are counted and printed (a top-p
 * ratio within DELTA of top_p, which test_sample_cuda also allows, is not
 * expected on these rows). Graph replay against graphs_eager: samples and
 * logits bitwise on every step. No device or pinned allocation after
 * create (the backend's counter). Exit 77 without a CUDA device.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "backend/backend.h"
#include "backend/cuda_backend.h"
#include "kernels/cuda_util.h"
#include "common/error.h"
#include "common/prng.h"
#include "gpu_test.h"
#include "backend/kv_pool.h"
#include "model/model.h"
#include "kernels/sample.h"

#define N_SEQS	    3
#define N_SIDES	    3 /* graphs off, graphs on, graphs_eager */
#define PROMPT	    100
#define MAX_TOKENS  (N_SEQS * PROMPT)
#define N_DECODE    24
#define MAX_PAGES   32
#define MAX_PENS    8192 /* >= (MAX_TOKENS / 8 + 1) (PROMPT + N_DECODE) */
#define DELTA	    1e-8
#define SIDE_GRAPHS 1
#define SIDE_EAGER  2
#define MAX_MASKS   64

/* The step's token masks (MAX_MASKS of mask_words words). */
static uint32_t *masks, mask_words;

static uint64_t rng = 4321;

static uint64_t next64(void)
{
	return o1_prng_splitmix64(&rng);
}

static uint32_t urand(uint32_t n)
{
	return (uint32_t)(next64() % n);
}

static double unif(void)
{
	return (double)(next64() >> 11) * 0x1p-53;
}

struct side {
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table t[N_SEQS];
	uint32_t pages[N_SEQS][MAX_PAGES];
	float *logits;
	struct o1_sample_result *res;
};

/* A sequence's tokens so far (the prompt first). */
struct seq {
	int32_t tok[PROMPT + N_DECODE];
	uint32_t len;
};

static void side_open(struct side *sd, uint32_t kind, const struct o1_model *m)
{
	struct o1_backend_config cfg = {.max_batch_tokens = MAX_TOKENS,
					.max_seqs = N_SEQS + 1, /* bucket 4 */
					.max_context_tokens = 512,
					.n_pages = N_SEQS * MAX_PAGES,
					.page_tokens = 16,
					.sampling = true,
					.max_sample_pens = MAX_PENS,
					.max_sample_masks = MAX_MASKS,
					.n_graph_buckets = 3,
					.graph_buckets = {1, 2, 4}};

	memset(sd, 0, sizeof(*sd));
	cfg.graphs_enabled = kind != 0;
	cfg.graphs_eager = kind == SIDE_EAGER;
	assert_int_equal(o1_backend_create(O1_BACKEND_CUDA, m, &cfg, &sd->b),
			 0);
	assert_true(o1_backend_can_sample(sd->b));
	assert_int_equal(
	    o1_kv_pool_create(o1_backend_kv_layout(sd->b), &sd->pool), 0);
	for (int s = 0; s < N_SEQS; s++)
		o1_kv_table_init(&sd->t[s], sd->pages[s], MAX_PAGES);
	sd->logits = malloc((size_t)MAX_TOKENS * m->desc.vocab_size * 4);
	sd->res = malloc(MAX_TOKENS * sizeof(*sd->res));
	assert_true(sd->logits && sd->res);
}

static void side_close(struct side *sd)
{
	for (int s = 0; s < N_SEQS; s++)
		o1_kv_table_fini(sd->pool, &sd->t[s]);
	o1_kv_pool_destroy(sd->pool);
	o1_backend_destroy(sd->b);
	free(sd->logits);
	free(sd->res);
}

/* The step's parts that do not depend on the side. */
struct step_in {
	uint32_t n, seq[N_SEQS], n_tok[N_SEQS], pos[N_SEQS];
	const int32_t *ids[N_SEQS];
	bool all;
	bool want_logits, want_samples;
	struct o1_sample_row rows[MAX_TOKENS];
	struct o1_sample_penalty pens[MAX_PENS];
	uint32_t n_rows, n_pens, n_masks;
};

static void side_step(struct side *sd, const struct step_in *in)
{
	struct o1_step_seq q[N_SEQS];

	for (uint32_t i = 0; i < in->n; i++) {
		uint32_t s = in->seq[i];

		assert_int_equal(o1_kv_table_reserve(sd->pool, &sd->t[s],
						     in->pos[i] + in->n_tok[i]),
				 0);
		q[i] = (struct o1_step_seq){in->ids[i],	      in->n_tok[i],
					    in->pos[i],	      sd->t[s].pages,
					    sd->t[s].n_pages, in->all};
	}
	memset(sd->res, 0xff, in->n_rows * sizeof(*sd->res));
	assert_int_equal(
	    o1_backend_step(
		sd->b,
		&(struct o1_step){
		    .seqs = q,
		    .n_seqs = in->n,
		    .logits = in->want_logits ? sd->logits : NULL,
		    .logits_rows = MAX_TOKENS,
		    .sample_rows = in->want_samples ? in->rows : NULL,
		    .pens = in->want_samples && in->n_pens ? in->pens : NULL,
		    .n_pens = in->want_samples ? in->n_pens : 0,
		    .samples = in->want_samples ? sd->res : NULL,
		    .masks = in->want_samples && in->n_masks ? masks : NULL,
		    .n_masks = in->want_samples ? in->n_masks : 0}),
	    0);
}

/* The penalty entries of sequence Q (prompt: its first PROMPT tokens). */
static uint32_t add_pens(struct step_in *in, const struct seq *q)
{
	uint32_t first = in->n_pens;

	for (uint32_t i = 0; i < q->len; i++) {
		struct o1_sample_penalty *p = NULL;

		for (uint32_t j = first; j < in->n_pens; j++)
			if (in->pens[j].id == q->tok[i])
				p = &in->pens[j];
		if (!p) {
			p = &in->pens[in->n_pens++];
			*p = (struct o1_sample_penalty){q->tok[i], 0, 0};
		}
		if (i < PROMPT)
			p->in_prompt = 1;
		else
			p->count++;
	}
	return in->n_pens - first;
}

/* Row R's mode (cycling), for sequence Q. */
static struct o1_sample_row make_row(struct step_in *in, uint32_t r,
				     const struct seq *q)
{
	struct o1_sample_row w = {.u = unif(), .temperature = 0.8f};

	switch (r % 8) {
	case 0: /* greedy */
		w.temperature = 0;
		break;
	case 1: /* greedy with logprobs */
		w.temperature = 0;
		w.n_logprobs = 5;
		break;
	case 2: /* temperature only */
		w.n_logprobs = 2;
		break;
	case 3:
		w.top_k = 40;
		break;
	case 4:
		w.top_p = 0.9f;
		break;
	case 5:
		w.min_p = 0.05f;
		w.temperature = 1.2f;
		break;
	case 6:
		w.top_k = 50, w.top_p = 0.95f, w.min_p = 0.02f;
		w.n_logprobs = O1_SAMPLE_MAX_TOP;
		break;
	default: /* penalties over the sequence's tokens */
		w.repetition_penalty = 1.3f;
		w.presence_penalty = 0.5f;
		w.frequency_penalty = 0.25f;
		w.pen_off = in->n_pens;
		w.n_pen = add_pens(in, q);
		break;
	}
	return w;
}

/* Row R's mask, one row in three while there is room: half the tokens,
 * five, one, or none. */
static void add_mask(struct step_in *in, struct o1_sample_row *w, uint32_t r,
		     uint32_t v)
{
	uint32_t *m = masks + (size_t)in->n_masks * mask_words;
	uint32_t kind = r / 3 % 4;

	if (r % 3 != 1 || in->n_masks == MAX_MASKS)
		return;
	memset(m, 0, mask_words * sizeof(*m));
	for (uint32_t i = 0; kind == 0 && i < v; i++)
		m[i / 32] |= (uint32_t)(next64() & 1) << (i % 32);
	for (uint32_t j = 0; j < (kind == 1 ? 5u : kind == 2 ? 1u : 0u); j++) {
		uint32_t i = urand(v);

		m[i / 32] |= 1u << (i % 32);
	}
	w->mask = ++in->n_masks;
}

static bool close_to(float g, float c)
{
	if (isnan(c) || isnan(g))
		return isnan(c) && isnan(g);
	if (isinf(c) || isinf(g))
		return g == c;
	return fabsf(g - c) <= 3e-5f + 0x1p-21f * fabsf(c);
}

static int32_t ref_id(const float *l, uint32_t v, struct o1_sample_row w,
		      const struct o1_sample_penalty *pens, double u,
		      void *scratch)
{
	struct o1_sample_result r;

	w.u = u < 0 ? 0 : u >= 1 ? nextafter(1.0, 0.0) : u;
	assert_int_equal(o1_sample_rows_masked(&r, l, 1, v, &w, pens, masks,
					       MAX_MASKS, scratch),
			 0);
	return r.id;
}

struct tally {
	uint32_t rows, greedy, drawn, boundary, masked, none;
};

/* Row R of a side's results against the reference on its logits. */
static void check_row(const struct side *sd, const struct step_in *in,
		      uint32_t r, uint32_t v, void *scratch, struct tally *t)
{
	const float *l = sd->logits + (size_t)r * v;
	const struct o1_sample_row *w = &in->rows[r];
	const struct o1_sample_result *g = &sd->res[r];
	struct o1_sample_result c;
	bool greedy = w->temperature == 0 || w->top_k == 1;

	assert_int_equal(o1_sample_rows_masked(&c, l, 1, v, w, in->pens, masks,
					       in->n_masks, scratch),
			 0);
	t->rows++;
	if (w->mask) {
		const uint32_t *m = masks + (size_t)(w->mask - 1) * mask_words;

		t->masked++;
		if (c.id == O1_SAMPLE_NO_TOKEN) {
			t->none++;
			assert_int_equal(g->id, O1_SAMPLE_NO_TOKEN);
			assert_true(g->logprob == -INFINITY && !g->n_top);
			return;
		}
		assert_true(g->id >= 0 && (uint32_t)g->id < v);
		assert_true(m[g->id / 32] >> (g->id % 32) & 1);
	}
	assert_true(close_to(g->logprob, c.logprob));
	assert_true(close_to(g->entropy, c.entropy));
	assert_int_equal(g->n_top, c.n_top);
	for (uint32_t k = 0; k < c.n_top; k++) {
		assert_int_equal(g->top_id[k], c.top_id[k]);
		assert_true(close_to(g->top_logprob[k], c.top_logprob[k]));
	}
	if (greedy) {
		t->greedy++;
		assert_int_equal(g->id, c.id);
		return;
	}
	t->drawn++;
	if (g->id != c.id) {
		int32_t lo = ref_id(l, v, *w, in->pens, w->u - DELTA, scratch);
		int32_t hi = ref_id(l, v, *w, in->pens, w->u + DELTA, scratch);

		printf("row %u: device %d, reference %d (at u -+ %g: %d, %d)\n",
		       r, g->id, c.id, DELTA, lo, hi);
		assert_true(lo != hi && (g->id == lo || g->id == hi));
		t->boundary++;
	}
}

/* What the sides returned for one step: references where both came back,
 * graphs against graphs_eager bitwise. */
static void check_step(struct side *sd, const struct step_in *in, uint32_t v,
		       void *scratch, struct tally *t)
{
	const struct side *a = &sd[SIDE_GRAPHS], *b = &sd[SIDE_EAGER];

	if (in->want_logits)
		assert_memory_equal(a->logits, b->logits,
				    (size_t)in->n_rows * v * sizeof(float));
	if (in->want_samples)
		assert_memory_equal(a->res, b->res,
				    in->n_rows * sizeof(*a->res));
	if (!in->want_logits || !in->want_samples)
		return;
	for (int k = 0; k < N_SIDES; k += 2) /* graphs on = eager: bitwise */
		for (uint32_t r = 0; r < in->n_rows; r++)
			check_row(&sd[k], in, r, v, scratch, t);
}

static void run_step(struct side *sd, struct step_in *in, uint32_t v,
		     void *scratch, struct tally *t)
{
	for (int k = 0; k < N_SIDES; k++)
		side_step(&sd[k], in);
	check_step(sd, in, v, scratch, t);
}

static void prefill(struct side *sd, struct seq *sq, uint32_t v, void *scratch,
		    struct tally *t)
{
	static struct step_in in;

	memset(&in, 0, sizeof(in));
	in.n = N_SEQS, in.all = true;
	in.want_logits = in.want_samples = true;
	for (uint32_t s = 0; s < N_SEQS; s++) {
		sq[s].len = PROMPT;
		for (uint32_t i = 0; i < PROMPT; i++)
			sq[s].tok[i] = (int32_t)urand(v);
		in.seq[s] = s, in.n_tok[s] = PROMPT, in.ids[s] = sq[s].tok;
		for (uint32_t i = 0; i < PROMPT; i++, in.n_rows++) {
			in.rows[in.n_rows] = make_row(&in, in.n_rows, &sq[s]);
			add_mask(&in, &in.rows[in.n_rows], in.n_rows, v);
		}
	}
	run_step(sd, &in, v, scratch, t);
}

static void decode(struct side *sd, struct seq *sq, uint32_t v, void *scratch,
		   struct tally *t)
{
	static struct step_in in;

	for (uint32_t k = 0; k < N_DECODE; k++) {
		memset(&in, 0, sizeof(in));
		in.n = 1 + k % N_SEQS; /* buckets 1, 2, 4 */
		in.want_logits = k % 3 != 1;
		in.want_samples = k % 3 != 2;
		for (uint32_t i = 0; i < in.n; i++) {
			struct seq *q = &sq[(i + k) % N_SEQS];

			q->tok[q->len] = (int32_t)urand(v);
			in.seq[i] = (i + k) % N_SEQS;
			in.n_tok[i] = 1, in.pos[i] = q->len;
			in.ids[i] = &q->tok[q->len++];
			in.rows[i] = make_row(&in, i + k, q);
			add_mask(&in, &in.rows[i], i + k, v);
		}
		in.n_rows = in.n;
		run_step(sd, &in, v, scratch, t);
	}
}

static void check_model(const char *name, const char *path)
{
	struct o1_model *m;
	struct side sd[N_SIDES];
	struct seq sq[N_SEQS];
	struct tally t = {0};
	struct o1_backend_graph_stats g;
	uint64_t allocs;
	void *scratch;
	uint32_t v;

	assert_int_equal(o1_model_open(path, &m), 0);
	v = m->desc.vocab_size;
	mask_words = o1_sample_mask_words(v);
	masks = calloc((size_t)MAX_MASKS * mask_words, sizeof(*masks));
	assert_non_null(masks);
	scratch =
	    aligned_alloc(64, (o1_sample_scratch_bytes(v) + 63) / 64 * 64);
	assert_non_null(scratch);
	for (uint32_t k = 0; k < N_SIDES; k++)
		side_open(&sd[k], k, m);
	allocs = o1_cuda_backend_alloc_count();
	prefill(sd, sq, v, scratch, &t);
	decode(sd, sq, v, scratch, &t);
	o1_backend_graph_stats(sd[SIDE_GRAPHS].b, &g);
	printf("%s: %u rows checked (%u greedy, %u drawn, %u within %g of a "
	       "boundary; %u masked, %u of them allowing nothing), graph hits "
	       "%llu %llu %llu, allocations after create %llu\n",
	       name, t.rows, t.greedy, t.drawn, t.boundary, DELTA, t.masked,
	       t.none, (unsigned long long)g.buckets[0].hits,
	       (unsigned long long)g.buckets[1].hits,
	       (unsigned long long)g.buckets[2].hits,
	       (unsigned long long)(o1_cuda_backend_alloc_count() - allocs));
	assert_true(t.boundary * 100 <= t.drawn);
	assert_true(o1_cuda_backend_alloc_count() == allocs);
	for (uint32_t b = 0; b < 3; b++) {
		assert_true(g.buckets[b].captured);
		assert_true(g.buckets[b].hits == N_DECODE / 3);
	}
	for (uint32_t k = 0; k < N_SIDES; k++)
		side_close(&sd[k]);
	free(scratch);
	free(masks);
	o1_model_close(m);
}

/* Makes OUT with `o1model make ARGS`, then checks it. */
static void make_and_check(const char *args, const char *out, const char *name)
{
	char path[256];

	o1_gpu_make_model(args, out, path, sizeof(path));
	check_model(name, path);
}

static void test_tiny(void **state)
{
	(void)state;
	make_and_check("--preset tiny", "tiny.gguf", "tiny (gguf f32)");
}

static void test_large_vocab(void **state)
{
	(void)state;
	make_and_check("--preset tiny --vocab 200000", "tiny200k.gguf",
		       "tiny, vocabulary 200000 (global scratch)");
}

static void test_qwen_one_layer(void **state)
{
	(void)state;
	make_and_check("--preset qwen2.5-0.5b --layers 1 --format safetensors "
		       "--dtype bf16",
		       "qwen1", "qwen2.5-0.5b x1 layer (safetensors bf16)");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tiny),
	    cmocka_unit_test(test_large_vocab),
	    cmocka_unit_test(test_qwen_one_layer),
	};
	return o1_gpu_test_main(argc, argv, "gpu_backend_sample", tests,
				sizeof(tests) / sizeof(tests[0]));
}

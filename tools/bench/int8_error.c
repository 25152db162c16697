/* int8_error: how far the CUDA backend's int8 decode products (the input
 * rows quantized to int8 per 32 elements, kernels/gemv_q8.h) take a model's
 * logits from the f32 block products, measured on the CPU (no GPU):
 *
 *   int8_error MODEL [--prompt N] [--decode N] [--seed N] [--threads N]
 *
 * Two CPU backends over the same GGUF block weights, one with
 * cfg.cpu_quant_int8 (o1_gemv_q8_cpu, the device's bits): N random prompt
 * ids (seeded) prefilled with logits at every position, then N greedy
 * decode steps, each fed the f32 side's pick. Prints the relative L2
 * distance ||int8 - f32|| / ||f32|| of the prompt rows and of the decode
 * rows (largest and mean) and how many greedy picks agree: the scheme's own
 * error, which test_gpu_backend sees in the device's decode rows. Exit 0,
 * 2 on bad arguments, 1 when the model cannot be run.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/kv_pool.h"
#include "model/model.h"

#define MAX_PAGES 64
#define PAGE	  16

struct args {
	const char *model;
	uint32_t prompt, decode, threads;
	uint64_t seed;
};

struct side {
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table t;
	uint32_t pages[MAX_PAGES];
	float *logits;
};

static uint64_t rng;

static uint32_t urand(uint32_t n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)((rng >> 33) % n);
}

static int side_open(struct side *sd, const struct o1_model *m,
		     const struct args *a, bool int8)
{
	struct o1_backend_config cfg = {
	    .n_threads = a->threads,
	    .max_batch_tokens = a->prompt,
	    .max_seqs = 1,
	    .max_context_tokens = MAX_PAGES * PAGE,
	    .n_pages = MAX_PAGES,
	    .page_tokens = PAGE,
	    .cpu_quant_int8 = int8};
	int err = o1_backend_create(O1_BACKEND_CPU, m, &cfg, &sd->b);

	err = err ? err
		  : o1_kv_pool_create(o1_backend_kv_layout(sd->b), &sd->pool);
	if (err)
		return err;
	o1_kv_table_init(&sd->t, sd->pages, MAX_PAGES);
	sd->logits = malloc((size_t)a->prompt * m->desc.vocab_size * 4);
	return sd->logits ? 0 : -1;
}

static void side_close(struct side *sd)
{
	if (sd->pool) {
		o1_kv_table_fini(sd->pool, &sd->t);
		o1_kv_pool_destroy(sd->pool);
	}
	o1_backend_destroy(sd->b);
	free(sd->logits);
}

/* N ids at POS, logits for every one (ALL) or the last. */
static int step(struct side *sd, const int32_t *ids, uint32_t n, uint32_t pos,
		bool all)
{
	struct o1_step_seq q;
	int err = o1_kv_table_reserve(sd->pool, &sd->t, pos + n);

	q = (struct o1_step_seq){ids, n, pos, sd->t.pages, sd->t.n_pages, all};
	return err ? err
		   : o1_backend_step(sd->b,
				     &(struct o1_step){.seqs = &q,
						       .n_seqs = 1,
						       .logits = sd->logits,
						       .logits_rows = all ? n : 1});
}

static double rel_l2(const float *a, const float *ref, uint32_t n)
{
	double num = 0, den = 0;

	for (uint32_t i = 0; i < n; i++) {
		num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
		den += (double)ref[i] * ref[i];
	}
	return den > 0 ? sqrt(num / den) : INFINITY;
}

static uint32_t argmax(const float *v, uint32_t n)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return best;
}

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
	    {"prompt", required_argument, NULL, 'p'},
	    {"decode", required_argument, NULL, 'd'},
	    {"seed", required_argument, NULL, 's'},
	    {"threads", required_argument, NULL, 't'},
	    {0},
	};
	int opt;

	*a = (struct args){NULL, 40, 16, 2, 1234};
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;
		unsigned long long v = strtoull(optarg, &end, 10);

		if (opt == '?' || *end || end == optarg)
			return -1;
		if (opt == 's')
			a->seed = v;
		else if (v < 1 || v > 512)
			return -1;
		else if (opt == 'p')
			a->prompt = (uint32_t)v;
		else if (opt == 'd')
			a->decode = (uint32_t)v;
		else
			a->threads = (uint32_t)v;
	}
	if (optind != argc - 1 || a->prompt + a->decode > MAX_PAGES * PAGE)
		return -1;
	a->model = argv[optind];
	return 0;
}

/* Both sides through the prompt and the decode steps; the figures. */
static int run(const struct o1_model *m, const struct args *a,
	       struct side *f, struct side *q)
{
	uint32_t v = m->desc.vocab_size, pos = a->prompt, agree = 0;
	int32_t *ids = malloc((a->prompt + a->decode) * sizeof(int32_t));
	double prompt_most = 0, most = 0, sum = 0;
	int err = ids ? 0 : -1;

	for (uint32_t i = 0; ids && i < a->prompt; i++)
		ids[i] = (int32_t)urand(v);
	err = err ? err : step(f, ids, a->prompt, 0, true);
	err = err ? err : step(q, ids, a->prompt, 0, true);
	for (uint32_t r = 0; !err && r < a->prompt; r++)
		prompt_most = fmax(prompt_most,
				   rel_l2(q->logits + (size_t)r * v,
					  f->logits + (size_t)r * v, v));
	for (uint32_t i = 0; !err && i < a->decode; i++, pos++) {
		const float *fl = f->logits + (size_t)(a->prompt - 1) * v * !i;
		const float *ql = q->logits + (size_t)(a->prompt - 1) * v * !i;
		double e;

		ids[pos] = (int32_t)argmax(fl, v);
		agree += argmax(ql, v) == (uint32_t)ids[pos];
		err = step(f, ids + pos, 1, pos, false);
		err = err ? err : step(q, ids + pos, 1, pos, false);
		e = rel_l2(q->logits, f->logits, v);
		most = fmax(most, e), sum += e;
	}
	if (!err)
		printf("int8_error %s: prompt %u rows, largest rel L2 %.4f; "
		       "decode %u rows, largest %.4f, mean %.4f; greedy picks "
		       "agreeing %u/%u\n",
		       a->model, a->prompt, prompt_most, a->decode, most,
		       sum / a->decode, agree, a->decode);
	free(ids);
	return err;
}

int main(int argc, char **argv)
{
	struct side f = {0}, q = {0};
	struct o1_model *m = NULL;
	struct args a;
	int err;

	if (parse(argc, argv, &a)) {
		fprintf(stderr, "usage: int8_error MODEL [--prompt N] "
				"[--decode N] [--seed N] [--threads N] "
				"(N 1..512, prompt + decode <= %u)\n",
			MAX_PAGES * PAGE);
		return 2;
	}
	rng = a.seed;
	err = o1_model_open(a.model, &m);
	err = err ? err : side_open(&f, m, &a, false);
	err = err ? err : side_open(&q, m, &a, true);
	err = err ? err : run(m, &a, &f, &q);
	if (err)
		fprintf(stderr, "int8_error: %s: cannot run (%d)\n", a.model,
			err);
	side_close(&q);
	side_close(&f);
	if (m)
		o1_model_close(m);
	return err ? 1 : 0;
}

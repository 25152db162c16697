/* bench_sampler: nanoseconds per o1_sampler_sample call on seeded random
 * logits (roughly normal, sd 2.5, a few peaks) for the vocabularies of
 * Qwen2 (151,936) and Llama 3 (128,256), one row per sampling mode. The
 * "ids" column is a hash of the tokens drawn over the timed calls, so two
 * builds of the sampler can be checked for identical results.
 *
 * --batch B: then one step of the daemon's sampling, B greedy+confidence
 * sequences (vocab 151,936, a logits row each) sampled on pools of 1, 2,
 * 4 and 8 threads (o1_threads, as the scheduler does), ms per step.
 *
 *   bench_sampler [--calls N] [--batch B]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampler/sampler.h"
#include "kernels/threads.h"

#define N_ROWS 8

struct mode {
	const char *name;
	float temperature, top_p, min_p, rep, presence, frequency;
	uint32_t top_k, n_logprobs, history;
};

static const struct mode modes[] = {
    {"greedy+conf", 0, 1, 0, 1, 0, 0, 0, 0, 0},
    {"temp 0.8", 0.8f, 1, 0, 1, 0, 0, 0, 0, 0},
    {"top-k 40 top-p .95", 0.8f, 0.95f, 0, 1, 0, 0, 40, 0, 0},
    {"top-p .9", 0.8f, 0.9f, 0, 1, 0, 0, 0, 0, 0},
    {"min-p .05", 0.8f, 1, 0.05f, 1, 0, 0, 0, 0, 0},
    {"penalties h512", 0.8f, 1, 0, 1.1f, 0.5f, 0.2f, 0, 0, 512},
    {"logprobs 5", 0.8f, 1, 0, 1, 0, 0, 0, 5, 0},
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
	return *x >> 33;
}

static void fill(float *l, uint32_t vocab, uint64_t seed)
{
	for (uint32_t i = 0; i < vocab; i++) {
		float u = 0;

		for (int j = 0; j < 4; j++)
			u += (float)lcg(&seed) / (float)(1u << 31);
		l[i] = (u - 2.0f) * 4.33f; /* sd ~2.5 */
	}
	for (int j = 0; j < 6; j++)
		l[lcg(&seed) % vocab] += 8.0f + (float)j;
}

static int make(const struct mode *m, uint32_t vocab, struct o1_sampler **s)
{
	struct o1_sampler_params p;
	int32_t hist[512];
	uint64_t x = 99;
	int err;

	o1_sampler_params_init(&p);
	p.temperature = m->temperature;
	p.top_k = m->top_k;
	p.top_p = m->top_p;
	p.min_p = m->min_p;
	p.repetition_penalty = m->rep;
	p.presence_penalty = m->presence;
	p.frequency_penalty = m->frequency;
	p.n_logprobs = m->n_logprobs;
	p.seed = 42;
	err = o1_sampler_create(&p, vocab, s);
	if (err)
		return err;
	for (uint32_t i = 0; i < m->history; i++)
		hist[i] = (int32_t)(lcg(&x) % vocab);
	return o1_sampler_add_prompt(*s, hist, m->history);
}

static int run(const struct mode *m, uint32_t vocab, const float *rows,
	       int calls)
{
	struct o1_sampler *s;
	struct o1_sampler_out out;
	uint64_t hash = 1469598103934665603ULL;
	double best = 1e9, total = 0, t;
	int err = make(m, vocab, &s);

	if (err)
		return err;
	for (int i = 0; i < calls; i++) {
		t = now_s();
		o1_sampler_sample(s, rows + (size_t)(i % N_ROWS) * vocab, &out);
		t = now_s() - t;
		total += t;
		best = t < best ? t : best;
		hash = (hash ^ (uint32_t)out.id) * 1099511628211ULL;
	}
	printf("%-20s %7u %10.0f %10.0f   %016llx\n", m->name, vocab,
	       total / calls * 1e9, best * 1e9, (unsigned long long)hash);
	o1_sampler_destroy(s);
	return 0;
}

struct batch {
	struct o1_sampler **s;
	const float *rows;
	uint32_t vocab;
};

static void sample_task(void *arg, uint32_t task, uint32_t worker)
{
	struct batch *b = arg;
	struct o1_sampler_out out;

	(void)worker;
	o1_sampler_sample(b->s[task], b->rows + (size_t)task * b->vocab, &out);
}

/* Best-of-5 ms per step of B sequences on 1, 2, 4 and 8 threads. */
static int run_batch(uint32_t n)
{
	struct batch b = {calloc(n, sizeof(*b.s)), NULL, 151936};
	float *rows = malloc((size_t)n * b.vocab * sizeof(float));
	int err = b.s && rows ? 0 : -1;

	b.rows = rows;
	for (uint32_t i = 0; !err && i < n; i++) {
		fill(rows + (size_t)i * b.vocab, b.vocab, 7 + i);
		err = make(&modes[0], b.vocab, &b.s[i]);
	}
	for (uint32_t t = 1; !err && t <= 8; t *= 2) {
		struct o1_threads *tp = NULL;
		double best = 1e9;

		err = t > 1 ? o1_threads_create(t, &tp) : 0;
		for (int r = 0; !err && r < 5; r++) {
			double t0 = now_s();

			o1_threads_run(tp, n, sample_task, &b);
			t0 = now_s() - t0;
			best = t0 < best ? t0 : best;
		}
		if (!err)
			printf("batch %u threads %u: %.2f ms per step\n", n, t,
			       best * 1e3);
		o1_threads_destroy(tp);
	}
	for (uint32_t i = 0; b.s && i < n; i++)
		o1_sampler_destroy(b.s[i]);
	free(b.s);
	free(rows);
	return err;
}

int main(int argc, char **argv)
{
	static const uint32_t vocabs[] = {151936, 128256};
	int calls = 400, batch = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--calls"))
			calls = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--batch"))
			batch = atoi(argv[i + 1]);
		else
			calls = 0;
	}
	if (calls <= 0 || batch < 0 || batch > 4096 || argc % 2 == 0) {
		fprintf(stderr,
			"usage: bench_sampler [--calls N] [--batch B]\n");
		return 2;
	}
	if (batch)
		return run_batch((uint32_t)batch) ? 1 : 0;
	printf("%-20s %7s %10s %10s   %s\n", "mode", "vocab", "mean ns",
	       "best ns", "ids hash");
	for (int v = 0; v < 2; v++) {
		float *rows =
		    malloc((size_t)N_ROWS * vocabs[v] * sizeof(float));

		if (!rows)
			return 1;
		for (int r = 0; r < N_ROWS; r++)
			fill(rows + (size_t)r * vocabs[v], vocabs[v], 7 + r);
		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
			if (run(&modes[m], vocabs[v], rows, calls))
				return 1;
		free(rows);
	}
	return 0;
}

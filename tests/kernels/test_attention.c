/* Paged attention and KV write: against a naive dense causal attention in
 * double (GQA 6:2 and MQA 4:1, head_dim 10 and 16); outputs bitwise equal
 * for page sizes 1, 3, 16, for each sequence alone or batched, and for 1
 * or 3 threads; errors for a context past the block table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>

#include "kernels/attention.h"
#include "common/error.h"

#define MAXS 3

struct seq {
	uint32_t len;	/* context after the step */
	uint32_t n_new; /* new tokens (the last n_new positions) */
	float *k, *v;	/* (len, Hkv, D) */
	float *q;	/* (n_new, Hq, D) */
};

struct shape {
	uint32_t hq, hkv, d;
};

static uint64_t rng = 7;

static float frand(void)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static float *randv(size_t n)
{
	float *v = malloc(n * sizeof(float));

	for (size_t i = 0; i < n; i++)
		v[i] = frand() * 2;
	return v;
}

static void make_seq(struct seq *s, const struct shape *sh, uint32_t len,
		     uint32_t n_new)
{
	s->len = len, s->n_new = n_new;
	s->k = randv((size_t)len * sh->hkv * sh->d);
	s->v = randv((size_t)len * sh->hkv * sh->d);
	s->q = randv((size_t)n_new * sh->hq * sh->d);
}

static void free_seq(struct seq *s)
{
	free(s->k), free(s->v), free(s->q);
}

static uint32_t gcd(uint32_t a, uint32_t b)
{
	return b ? gcd(b, a % b) : a;
}

/* Runs the paged kernels over SEQS with page size P; OUT gets
 * (sum n_new, Hq, D). Pages are handed out in a scrambled order. */
static void run_paged(const struct shape *sh, struct seq *seqs, uint32_t n,
		      uint32_t p, uint32_t threads, float *out)
{
	uint32_t max_blocks = 64, q_off[MAXS + 1] = {0}, start[MAXS];
	uint32_t tables[MAXS * 64], n_pages = 0, row = 0, mul = 7;
	struct o1_attn_dims d = {sh->hq,
				 sh->hkv,
				 sh->d,
				 p,
				 (uint64_t)sh->hkv * p * sh->d + 5,
				 1.0f / sqrtf((float)sh->d)};
	struct o1_attn_batch b = {n, q_off, start, tables, max_blocks};
	size_t qrow = (size_t)sh->hq * sh->d, kvrow = (size_t)sh->hkv * sh->d;
	struct o1_threads *tp;
	float *kc, *vc, *q, *scratch;

	for (uint32_t s = 0; s < n; s++)
		n_pages += (seqs[s].len + p - 1) / p;
	while (gcd(mul, n_pages) != 1)
		mul += 2;
	kc = calloc((n_pages + 1) * d.page_stride, sizeof(float));
	vc = calloc((n_pages + 1) * d.page_stride, sizeof(float));
	q = malloc(64 * qrow * sizeof(float));
	assert_int_equal(o1_threads_create(threads, &tp), 0);
	scratch = malloc(o1_attention_scratch_floats(threads, 256) * 4);
	for (uint32_t s = 0, next = 0; s < n; s++) {
		for (uint32_t j = 0; j * p < seqs[s].len; j++, next++)
			tables[s * max_blocks + j] = (next * mul + 3) % n_pages;
		for (uint32_t pos = 0; pos < seqs[s].len; pos++) {
			uint32_t slot =
			    tables[s * max_blocks + pos / p] * p + pos % p;

			assert_int_equal(
			    o1_kv_write_cpu(tp, kc, vc, seqs[s].k + pos * kvrow,
					    seqs[s].v + pos * kvrow, &slot, 1,
					    &d),
			    0);
		}
		memcpy(q + row * qrow, seqs[s].q,
		       seqs[s].n_new * qrow * sizeof(float));
		row += seqs[s].n_new;
		q_off[s + 1] = row;
		start[s] = seqs[s].len - seqs[s].n_new;
	}
	assert_int_equal(
	    o1_attention_cpu(tp, out, q, kc, vc, &d, &b, scratch, 256), 0);
	o1_threads_destroy(tp);
	free(kc), free(vc), free(q), free(scratch);
}

/* Naive dense attention in double for row I of S, head H, dim E. */
static double naive(const struct shape *sh, const struct seq *s, uint32_t i,
		    uint32_t h, uint32_t e)
{
	uint32_t pos = s->len - s->n_new + i, g = h / (sh->hq / sh->hkv);
	const float *q = s->q + ((size_t)i * sh->hq + h) * sh->d;
	double sc[256], m = -INFINITY, z = 0, o = 0;

	for (uint32_t j = 0; j <= pos; j++) {
		const float *k = s->k + ((size_t)j * sh->hkv + g) * sh->d;

		sc[j] = 0;
		for (uint32_t c = 0; c < sh->d; c++)
			sc[j] += (double)q[c] * k[c];
		sc[j] /= sqrt(sh->d);
		m = fmax(m, sc[j]);
	}
	for (uint32_t j = 0; j <= pos; j++)
		z += exp(sc[j] - m);
	for (uint32_t j = 0; j <= pos; j++)
		o += exp(sc[j] - m) / z *
		     s->v[((size_t)j * sh->hkv + g) * sh->d + e];
	return o;
}

static void check_naive(const struct shape *sh, struct seq *seqs, uint32_t n,
			const float *out)
{
	size_t row = 0;

	for (uint32_t s = 0; s < n; s++)
		for (uint32_t i = 0; i < seqs[s].n_new; i++, row++)
			for (uint32_t h = 0; h < sh->hq; h++)
				for (uint32_t e = 0; e < sh->d; e++) {
					double want =
					    naive(sh, &seqs[s], i, h, e);
					float got =
					    out[(row * sh->hq + h) * sh->d + e];

					assert_true(fabs(got - want) < 2e-5);
				}
}

static void check_shape(const struct shape *sh)
{
	struct seq seqs[3];
	size_t qrow = (size_t)sh->hq * sh->d;
	float *ref = malloc(64 * qrow * 4), *out = malloc(64 * qrow * 4);
	static const uint32_t pages[3] = {1, 3, 16};

	make_seq(&seqs[0], sh, 17, 17); /* prefill from 0 */
	make_seq(&seqs[1], sh, 10, 1);	/* decode at position 9 */
	make_seq(&seqs[2], sh, 40, 6);	/* prefill chunk at 34 */
	run_paged(sh, seqs, 3, 16, 1, ref);
	check_naive(sh, seqs, 3, ref);
	for (int p = 0; p < 3; p++) {
		run_paged(sh, seqs, 3, 16, p + 1, out);
		assert_memory_equal(out, ref, 24 * qrow * 4);
		run_paged(sh, seqs, 3, pages[p], 1, out);
		assert_memory_equal(out, ref, 24 * qrow * 4);
		run_paged(sh, seqs, 3, pages[p], 3, out);
		assert_memory_equal(out, ref, 24 * qrow * 4);
		run_paged(sh, &seqs[1], 1, pages[p], 2, out);
		assert_memory_equal(out, ref + 17 * qrow, qrow * 4);
		run_paged(sh, &seqs[2], 1, pages[p], 1, out);
		assert_memory_equal(out, ref + 18 * qrow, 6 * qrow * 4);
	}
	for (int s = 0; s < 3; s++)
		free_seq(&seqs[s]);
	free(ref), free(out);
}

static void test_gqa(void **state)
{
	struct shape sh = {6, 2, 10};

	(void)state;
	check_shape(&sh);
}

static void test_mqa(void **state)
{
	struct shape sh = {4, 1, 16};

	(void)state;
	check_shape(&sh);
}

static void test_context_errors(void **state)
{
	uint32_t q_off[2] = {0, 2}, start[1] = {15}, table[1] = {0};
	struct o1_attn_dims d = {2, 1, 4, 16, 64, 0.5f};
	struct o1_attn_batch b = {1, q_off, start, table, 1};
	float buf[256] = {0}, scratch[64];

	(void)state;
	/* positions 15, 16 need two pages, the table has one */
	assert_int_equal(
	    o1_attention_cpu(NULL, buf, buf, buf, buf, &d, &b, scratch, 64),
	    -O1_E_CONTEXT);
	start[0] = 0, q_off[1] = 3;
	assert_int_equal(
	    o1_attention_cpu(NULL, buf, buf, buf, buf, &d, &b, scratch, 2),
	    -O1_E_CONTEXT);
	d.n_kv_heads = 3;
	assert_int_equal(
	    o1_attention_cpu(NULL, buf, buf, buf, buf, &d, &b, scratch, 64),
	    -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gqa),
	    cmocka_unit_test(test_mqa),
	    cmocka_unit_test(test_context_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

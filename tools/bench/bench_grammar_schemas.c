/* bench_grammar_schemas: issue 23's speed figures for a set of JSON
 * Schemas over one model vocabulary: what a new schema costs o1d, what a
 * repeated one costs, and how long each token's mask takes.
 *
 * usage: bench_grammar_schemas [--pad-to N] [--walks N] [--steps N]
 *                              [--seed S] VOCAB SCHEMAS.jsonl
 * VOCAB is a tokenizer.json or GGUF vocabulary; --pad-to N extends it to
 * N tokens (e.g. 151936, Qwen2's size, when no Qwen vocabulary is at
 * hand) with tokens made by joining two seeded random tokens of it, as a
 * BPE merge makes them (their byte statistics are the vocabulary's own).
 * SCHEMAS.jsonl holds one JSON Schema per line
 * (tools/bench/grammar/schemas.jsonl: test_grammar_o1d's 20). Per schema:
 *   - first use through o1d's own cache (daemon/o1d/grammar_cache.c, one
 *     compile thread): wall time from o1_gcache_get to the entry ready
 *     (schema to grammar text, compile, token classes over the
 *     vocabulary), and the same parts timed apart in this thread's CPU
 *     time (compile: schema to grammar and grammar compile; classes:
 *     o1_grammar_tokens_create on one thread);
 *   - a repeated use: o1_gcache_get of the same bytes, which finds the
 *     compiled entry (hash and compare under the cache's mutex);
 *   - the token masks (o1_grammar_matcher_fill_mask, this thread's CPU
 *     time, one core) at every step of seeded random walks through the
 *     masks: each step draws an allowed token, half the time among those
 *     with JSON punctuation (which moves through the structure), a walk
 *     ending at an end token or after --steps.
 * Prints a line per schema and the figures over all schemas (masks
 * pooled). A benchmark, not a test: it fails only when a schema does not
 * compile or a walk finds a mask with no token (exit 1); 77 when VOCAB is
 * missing, 2 on usage errors.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "common/prng.h"
#include "grammar/grammar.h"
#include "grammar/grammar_schema.h"
#include "grammar/grammar_tokenizer.h"
#include "o1d/grammar_cache.h"
#include "shm/wire.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gpt2.h"

#define MAX_SCHEMAS 256

struct opts {
	const char *vocab, *schemas;
	uint32_t pad_to;
	int walks, steps;
	uint64_t seed;
};

/* Samples in microseconds. */
struct samples {
	double *us;
	size_t n, cap;
};

struct bench {
	struct o1_grammar_vocab *v;
	uint32_t n_tok, n_words;
	uint32_t *mask, *punct; /* punct: tokens with JSON punctuation */
	struct samples all, one;
	uint64_t rng[4];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int ready;
};

static double now_us(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int add(struct samples *s, double us)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		double *p = realloc(s->us, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->us = p;
		s->cap = cap;
	}
	s->us[s->n++] = us;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorts S; its quantile Q (0..1). */
static double quantile(struct samples *s, double q)
{
	size_t i = (size_t)(q * (double)s->n);

	if (!s->n)
		return 0;
	qsort(s->us, s->n, sizeof(*s->us), cmp_double);
	return s->us[i < s->n ? i : s->n - 1];
}

/* The vocabulary at PATH, extended to PAD_TO tokens (see above). */
static int load_vocab(struct bench *b, const struct opts *o)
{
	struct o1_vocab *ov;
	struct o1_tokenizer *tok;
	struct o1_grammar_vocab *base;
	uint32_t n, total;
	const uint8_t **bytes = NULL;
	uint32_t *lens = NULL;
	uint8_t *kinds = NULL, *extra = NULL;
	size_t off = 0;
	int rc = o1_vocab_load_any(o->vocab, &ov);

	if (rc)
		return 77;
	rc = o1_tokenizer_create(ov, &tok);
	o1_vocab_destroy(ov);
	rc = rc ?: o1_grammar_vocab_from_tokenizer(tok, &base);
	o1_tokenizer_destroy(tok);
	if (rc)
		return rc;
	n = o1_grammar_vocab_size(base);
	if (o->pad_to <= n) {
		b->v = base;
		return 0;
	}
	total = o->pad_to;
	bytes = malloc(total * sizeof(*bytes));
	lens = malloc(total * sizeof(*lens));
	kinds = malloc(total);
	extra = malloc((size_t)(total - n) * 512);
	rc = bytes && lens && kinds && extra ? 0 : -ENOMEM;
	for (uint32_t i = 0; !rc && i < n; i++) {
		bytes[i] = o1_grammar_vocab_token(base, i, &lens[i]);
		kinds[i] = (uint8_t)o1_grammar_vocab_kind(base, i);
	}
	for (uint32_t i = n; !rc && i < total; i++) {
		uint32_t a, c, la = 0, lc = 0;
		const uint8_t *pa, *pc;

		do { /* two text tokens whose join fits */
			a = (uint32_t)(o1_prng_next(b->rng) % n);
			c = (uint32_t)(o1_prng_next(b->rng) % n);
			pa = o1_grammar_vocab_token(base, a, &la);
			pc = o1_grammar_vocab_token(base, c, &lc);
		} while (kinds[a] != O1_GRAMMAR_TOKEN_TEXT ||
			 kinds[c] != O1_GRAMMAR_TOKEN_TEXT || !la || !lc ||
			 la + lc > 512);
		memcpy(extra + off, pa, la);
		memcpy(extra + off + la, pc, lc);
		bytes[i] = extra + off;
		lens[i] = la + lc;
		kinds[i] = O1_GRAMMAR_TOKEN_TEXT;
		off += la + lc;
	}
	rc = rc ?: o1_grammar_vocab_create(total, bytes, lens, kinds, &b->v);
	o1_grammar_vocab_destroy(base);
	free(bytes), free(lens), free(kinds), free(extra);
	return rc;
}

static bool has_punct(const uint8_t *p, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i] && strchr("\"{}[],:0123456789", p[i]))
			return true;
	return false;
}

static int setup(struct bench *b, const struct opts *o)
{
	int rc;

	o1_prng_seed(b->rng, o->seed);
	rc = load_vocab(b, o);
	if (rc)
		return rc;
	b->n_tok = o1_grammar_vocab_size(b->v);
	b->n_words = o1_grammar_mask_words(b->v);
	b->mask = calloc(b->n_words, sizeof(uint32_t));
	b->punct = calloc(b->n_words, sizeof(uint32_t));
	if (!b->mask || !b->punct)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->n_tok; i++) {
		uint32_t len;
		const uint8_t *p = o1_grammar_vocab_token(b->v, i, &len);

		if (has_punct(p, len))
			b->punct[i / 32] |= 1u << (i % 32);
	}
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cv, NULL);
	return 0;
}

/* An allowed token (among those with punctuation when PUNCT and there
 * are some), uniformly: -1 when the mask is empty. */
static int32_t pick(struct bench *b, bool punct)
{
	uint32_t n = 0, k;

	for (int pass = punct ? 0 : 1; pass < 2; pass++) {
		for (uint32_t w = 0; w < b->n_words; w++)
			n += (uint32_t)__builtin_popcount(
			    b->mask[w] & (pass ? ~0u : b->punct[w]));
		if (!n)
			continue;
		k = (uint32_t)(o1_prng_next(b->rng) % n);
		for (uint32_t w = 0;; w++) {
			uint32_t m = b->mask[w] & (pass ? ~0u : b->punct[w]);
			uint32_t c = (uint32_t)__builtin_popcount(m);

			if (k >= c) {
				k -= c;
				continue;
			}
			while (k--)
				m &= m - 1;
			return (int32_t)(w * 32 + (uint32_t)__builtin_ctz(m));
		}
	}
	return -1;
}

/* The walks through G's masks, timed into b->one and b->all. */
static int walk(struct bench *b, const struct o1_grammar *g,
		const struct o1_grammar_tokens *t, const struct opts *o)
{
	struct o1_grammar_matcher *m;
	int rc = o1_grammar_matcher_create(g, t, NULL, &m);

	for (int w = 0; !rc && w < o->walks; w++) {
		o1_grammar_matcher_reset(m);
		for (int s = 0; !rc && s < o->steps; s++) {
			double t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
			int32_t id;

			rc = o1_grammar_matcher_fill_mask(m, b->mask,
							  b->n_words);
			if (rc == -O1_E_BOUNDS)
				rc = 0; /* the mask holds allowed tokens */
			rc = rc
				 ?: add(&b->one,
					now_us(CLOCK_THREAD_CPUTIME_ID) - t0);
			id = rc ? 0 : pick(b, o1_prng_next(b->rng) & 1);
			if (!rc && id < 0) {
				fprintf(stderr, "a mask with no token\n");
				rc = 1;
			}
			rc = rc ?: o1_grammar_matcher_accept_token(m, id);
			if (rc == 1) { /* an end token: the walk is done */
				rc = 0;
				break;
			}
		}
	}
	o1_grammar_matcher_destroy(m);
	for (size_t i = 0; !rc && i < b->one.n; i++)
		rc = add(&b->all, b->one.us[i]);
	return rc;
}

static void on_ready(void *ctx, struct o1_gcache_waiter *w, struct o1_gentry *e)
{
	struct bench *b = ctx;

	(void)w, (void)e;
	pthread_mutex_lock(&b->mu);
	b->ready = 1;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

/* First use and a repeated use of SCHEMA through a cache of o1d's: wall
 * times in *FIRST_MS and *HIT_US. */
static int through_cache(struct bench *b, struct o1_gcache *c,
			 const char *schema, size_t len, double *first_ms,
			 double *hit_us)
{
	struct o1_gcache_waiter w = {0};
	struct o1_gentry *e, *e2;
	double t0 = now_us(CLOCK_MONOTONIC);
	int rc;

	b->ready = 0;
	rc = o1_gcache_get(c, O1_GRAMMAR_JSON_SCHEMA, (const uint8_t *)schema,
			   (uint32_t)len, &w, &e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&b->mu);
	while (!rc && !b->ready)
		pthread_cond_wait(&b->cv, &b->mu);
	pthread_mutex_unlock(&b->mu);
	*first_ms = (now_us(CLOCK_MONOTONIC) - t0) / 1e3;
	rc = o1_gentry_error(e, NULL);
	t0 = now_us(CLOCK_MONOTONIC);
	if (!rc)
		rc = o1_gcache_get(c, O1_GRAMMAR_JSON_SCHEMA,
				   (const uint8_t *)schema, (uint32_t)len, &w,
				   &e2) == 1
			 ? 0
			 : -EPROTO;
	*hit_us = now_us(CLOCK_MONOTONIC) - t0;
	if (!rc)
		o1_gcache_put(c, e2);
	o1_gcache_put(c, e);
	return rc;
}

struct totals {
	struct samples first, compile, classes;
	double hit_max_us;
};

/* One schema: its figures on a line. */
static int run_schema(struct bench *b, struct o1_gcache *c, int idx,
		      const char *schema, size_t len, const struct opts *o,
		      struct totals *tot)
{
	struct o1_grammar_error err = {0};
	struct o1_grammar *g = NULL;
	struct o1_grammar_tokens *t = NULL;
	double first_ms, hit_us, t0, compile_ms, classes_ms;
	char *text = NULL;
	size_t tlen;
	int rc = through_cache(b, c, schema, len, &first_ms, &hit_us);

	t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
	rc =
	    rc ?: o1_grammar_from_schema(schema, len, NULL, &err, &text, &tlen);
	rc = rc ?: o1_grammar_compile(text, tlen, &err, &g);
	compile_ms = (now_us(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e3;
	t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
	rc = rc ?: o1_grammar_tokens_create(g, b->v, 1, &t);
	classes_ms = (now_us(CLOCK_THREAD_CPUTIME_ID) - t0) / 1e3;
	free(text);
	if (rc) {
		fprintf(stderr, "schema %d: %s (%s)\n", idx + 1,
			err.msg[0] ? err.msg : "", o1_strerror(rc));
		goto out;
	}
	b->one.n = 0;
	rc = walk(b, g, t, o);
	if (rc)
		goto out;
	printf("%2d %6u %8.2f %8.2f %9.2f %7.2f %7zu %7.1f %7.1f %8.1f\n",
	       idx + 1, o1_grammar_n_states(g), compile_ms, classes_ms,
	       first_ms, hit_us, b->one.n, quantile(&b->one, 0.5),
	       quantile(&b->one, 0.99), quantile(&b->one, 1.0));
	rc = add(&tot->first, first_ms * 1e3);
	rc = rc ?: add(&tot->compile, compile_ms * 1e3);
	rc = rc ?: add(&tot->classes, classes_ms * 1e3);
	tot->hit_max_us = hit_us > tot->hit_max_us ? hit_us : tot->hit_max_us;
out:
	o1_grammar_tokens_destroy(t);
	o1_grammar_destroy(g);
	return rc;
}

static int run(struct bench *b, const struct opts *o)
{
	struct o1_gcache_opts co = {
	    .vocab = b->v, .threads = 1, .ready = on_ready, .ctx = b};
	struct totals tot = {0};
	struct o1_gcache *c;
	FILE *f = fopen(o->schemas, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = f ? o1_gcache_create(&co, &c) : -errno, idx = 0;

	if (rc) {
		fprintf(stderr, "%s: %s\n", o->schemas, o1_strerror(rc));
		if (f)
			fclose(f);
		return 1;
	}
	printf("vocabulary %u tokens; %d walks of up to %d steps a schema\n",
	       b->n_tok, o->walks, o->steps);
	printf(" # states  compile  classes first-use  hit-us   masks     "
	       "p50     p99      max   (ms, ms, ms wall, us wall, mask us "
	       "CPU)\n");
	while (!rc && idx < MAX_SCHEMAS && (n = getline(&line, &cap, f)) > 0) {
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = 0;
		if (n)
			rc = run_schema(b, c, idx++, line, (size_t)n, o, &tot);
	}
	free(line);
	fclose(f);
	o1_gcache_destroy(c);
	if (rc)
		return 1;
	printf("all %d schemas: masks %zu, p50 %.1f us, p99 %.1f us, max "
	       "%.1f us; first use p50 %.2f ms, max %.2f ms (compile max "
	       "%.2f ms, classes max %.2f ms CPU); cache hit max %.2f us\n",
	       idx, b->all.n, quantile(&b->all, 0.5), quantile(&b->all, 0.99),
	       quantile(&b->all, 1.0), quantile(&tot.first, 0.5) / 1e3,
	       quantile(&tot.first, 1.0) / 1e3,
	       quantile(&tot.compile, 1.0) / 1e3,
	       quantile(&tot.classes, 1.0) / 1e3, tot.hit_max_us);
	free(tot.first.us), free(tot.compile.us), free(tot.classes.us);
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	int pos = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (a[0] != '-') {
			if (pos == 0)
				o->vocab = a;
			else if (pos == 1)
				o->schemas = a;
			else
				return -EINVAL;
			pos++;
			continue;
		}
		if (!v)
			return -EINVAL;
		i++;
		if (!strcmp(a, "--pad-to"))
			o->pad_to = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(a, "--walks"))
			o->walks = atoi(v);
		else if (!strcmp(a, "--steps"))
			o->steps = atoi(v);
		else if (!strcmp(a, "--seed"))
			o->seed = strtoull(v, NULL, 0);
		else
			return -EINVAL;
	}
	if (o->pad_to > (1u << 21) || o->walks < 1 || o->steps < 1)
		return -EINVAL;
	return o->vocab && o->schemas ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct opts o = {.walks = 30, .steps = 200, .seed = 1};
	struct bench b = {0};
	int rc;

	if (parse_args(argc, argv, &o)) {
		fprintf(stderr, "usage: bench_grammar_schemas [--pad-to N] "
				"[--walks N] [--steps N] [--seed S] VOCAB "
				"SCHEMAS.jsonl\n");
		return 2;
	}
	o1_log_set_level(O1_LOG_WARN);
	rc = setup(&b, &o);
	if (rc == 77)
		fprintf(stderr, "%s: no vocabulary: skipped\n", o.vocab);
	else if (rc)
		fprintf(stderr, "setup: %s\n", o1_strerror(rc));
	else
		rc = run(&b, &o);
	o1_grammar_vocab_destroy(b.v);
	free(b.mask), free(b.punct);
	free(b.all.us), free(b.one.us);
	return rc == 77 ? 77 : rc ? 1 : 0;
}

/* bench_grammar: how long a grammar's token mask takes per decoding step.
 *
 * usage: bench_grammar [--grammar FILE | --schema FILE | --json-object]
 *                      [--docs FILE | --gen N] [--walks N] [--steps N]
 *                      [--seed S] [--threads N] VOCAB
 * The grammar is grammar text, a JSON Schema (through grammar_schema.h)
 * or the any-JSON-object grammar (the default). Timed, on one core, in
 * this thread's CPU time:
 *   - compiling the grammar, and classifying the vocabulary's tokens
 *     (on N threads, wall time);
 *   - o1_grammar_matcher_fill_mask at every step of real token streams:
 *     documents (one per line of FILE, or N compact JSON objects made
 *     here from a seeded generator: nested objects and arrays, strings
 *     with escapes and non-ASCII text, numbers), each tokenized with the
 *     vocabulary and fed token by token. Every token must be in its mask,
 *     and the end token in the final one, or the run fails;
 *   - the same along seeded random walks through the masks (a random
 *     allowed token each step, half the time one with JSON punctuation),
 *     which reach positions documents rarely do.
 * Prints mean, p50, p90, p99 and max in microseconds. Exits 77 when VOCAB
 * is missing, 1 when a document is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "grammar/grammar.h"
#include "grammar/grammar_schema.h"
#include "grammar/grammar_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gpt2.h"

struct opts {
	const char *grammar, *schema, *docs, *vocab;
	int gen, walks, steps;
	unsigned seed, threads;
};

struct bench {
	struct o1_tokenizer *tok;
	struct o1_grammar_vocab *v;
	struct o1_grammar *g;
	struct o1_grammar_tokens *t;
	struct o1_grammar_matcher *m;
	uint32_t *mask, n_words;
	double *us;
	size_t n_us, cap_us;
};

static double wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
	    fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = 0;
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static unsigned rnd(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return *seed >> 8;
}

static const char *const words[] = {
	"id",	    "name",	"email",   "status",	"items",   "price",
	"quantity", "address",	"city",	   "country",	"tags",	   "created_at",
	"user",	    "order",	"active",  "score",	"notes",   "Zürich",
	"São Paulo", "東京",	"delivery", "the quick brown fox", "résumé",
	"line\\nbreak", "a \\\"quoted\\\" word", "path\\/to", "ok", "yes",
};

static size_t put_str(char *out, unsigned *seed)
{
	const char *w = words[rnd(seed) % (sizeof(words) / sizeof(words[0]))];

	return (size_t)sprintf(out, "\"%s\"", w);
}

/* One JSON value into OUT (room enough for depth 4, width 5). */
static size_t gen_value(char *out, unsigned *seed, int depth, bool object)
{
	unsigned kind = object ? 0 : rnd(seed) % (depth < 4 ? 8 : 6);
	size_t n = 0, count = 1 + rnd(seed) % 5;

	switch (kind) {
	case 0:
	case 6:
		out[n++] = '{';
		for (size_t i = 0; i < count; i++) {
			if (i)
				out[n++] = ',';
			n += put_str(out + n, seed);
			out[n++] = ':';
			n += gen_value(out + n, seed, depth + 1, false);
		}
		out[n++] = '}';
		return n;
	case 7:
		out[n++] = '[';
		for (size_t i = 0; i < count; i++) {
			if (i)
				out[n++] = ',';
			n += gen_value(out + n, seed, depth + 1, false);
		}
		out[n++] = ']';
		return n;
	case 1:
	case 2:
		return put_str(out, seed);
	case 3:
		return (size_t)sprintf(out, "%d", (int)(rnd(seed) % 200000) -
							  1000);
	case 4:
		return (size_t)sprintf(out, "%.2f",
				       (double)(rnd(seed) % 100000) / 100.0);
	default:
		return (size_t)sprintf(out, "%s",
				       rnd(seed) % 3 ? "true" : "null");
	}
}

static int record(struct bench *b, double us)
{
	if (b->n_us == b->cap_us) {
		size_t cap = b->cap_us ? b->cap_us * 2 : 4096;
		double *p = realloc(b->us, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		b->us = p;
		b->cap_us = cap;
	}
	b->us[b->n_us++] = us;
	return 0;
}

static int timed_mask(struct bench *b)
{
	double t0 = cpu_us();
	int rc = o1_grammar_matcher_fill_mask(b->m, b->mask, b->n_words);

	return rc ? rc : record(b, cpu_us() - t0);
}

static bool allowed(const struct bench *b, int32_t id)
{
	return b->mask[id / 32] >> (id % 32) & 1;
}

/* One document token by token: each must be in its mask. */
static int run_doc(struct bench *b, const char *doc, size_t len)
{
	int32_t ids[8192];
	int n = o1_tokenizer_encode(b->tok, doc, len, 0, ids, 8192), rc = 0;
	int32_t eos;

	if (n < 0 || n > 8192)
		return n < 0 ? n : -E2BIG;
	o1_grammar_matcher_reset(b->m);
	for (int i = 0; i < n && !rc; i++) {
		rc = timed_mask(b);
		if (!rc && !allowed(b, ids[i])) {
			fprintf(stderr, "token %d of '%.*s' not in its mask\n",
				i, (int)len, doc);
			return 1;
		}
		rc = rc ?: o1_grammar_matcher_accept_token(b->m, ids[i]);
	}
	rc = rc ?: timed_mask(b);
	eos = o1_tokenizer_eos(b->tok);
	if (!rc && (!o1_grammar_matcher_is_complete(b->m) ||
		    (eos >= 0 && !allowed(b, eos)))) {
		fprintf(stderr, "no end token after '%.*s'\n", (int)len, doc);
		return 1;
	}
	return rc;
}

static int run_docs(struct bench *b, const struct opts *o)
{
	size_t len = 0;
	char *text = NULL, *doc = malloc(1 << 20);
	unsigned seed = o->seed;
	int rc = doc ? 0 : -ENOMEM;

	if (o->docs && !(text = slurp(o->docs, &len))) {
		fprintf(stderr, "%s: cannot read\n", o->docs);
		rc = 1;
	}
	for (char *line = text, *nl; !rc && line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			nl = line + strlen(line) - 1;
		if (nl > line)
			rc = run_doc(b, line, (size_t)(nl + (*nl != '\n') -
						       line));
	}
	for (int i = 0; !rc && !o->docs && i < o->gen; i++)
		rc = run_doc(b, doc, gen_value(doc, &seed, 0, true));
	free(text);
	free(doc);
	return rc;
}

static bool punctuation(const struct bench *b, uint32_t id)
{
	uint32_t len;
	const uint8_t *p = o1_grammar_vocab_token(b->v, id, &len);

	for (uint32_t i = 0; i < len; i++)
		if (p[i] && strchr("\"{}[],:0123456789", p[i]))
			return true;
	return false;
}

static int run_walks(struct bench *b, const struct opts *o)
{
	uint32_t n_tok = o1_grammar_vocab_size(b->v);
	uint32_t *cand = malloc(n_tok * sizeof(*cand));
	unsigned seed = o->seed + 7;
	int rc = cand ? 0 : -ENOMEM;

	for (int w = 0; !rc && w < o->walks; w++) {
		o1_grammar_matcher_reset(b->m);
		for (int s = 0; !rc && s < o->steps; s++) {
			bool punct = rnd(&seed) % 2;
			uint32_t n = 0;

			rc = timed_mask(b);
			for (int pass = 0; !rc && pass < 2 && !n; pass++) {
				for (uint32_t id = 0; id < n_tok; id++)
					if (allowed(b, (int32_t)id) &&
					    (!punct || punctuation(b, id)))
						cand[n++] = id;
				punct = false;
			}
			if (rc || !n)
				break;
			rc = o1_grammar_matcher_accept_token(
				b->m, (int32_t)cand[rnd(&seed) % n]);
			rc = rc < 0 ? rc : 0; /* 1: an end token */
		}
	}
	free(cand);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(struct bench *b, const char *what)
{
	double sum = 0;
	size_t n = b->n_us;

	if (!n)
		return;
	qsort(b->us, n, sizeof(*b->us), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += b->us[i];
	printf("%-6s %7zu masks  mean %7.1f  p50 %7.1f  p90 %7.1f  "
	       "p99 %7.1f  max %8.1f us\n",
	       what, n, sum / (double)n, b->us[n / 2], b->us[n * 9 / 10],
	       b->us[n * 99 / 100], b->us[n - 1]);
	b->n_us = 0;
}

static int grammar_text(const struct opts *o, char **text, size_t *len)
{
	struct o1_grammar_error err = {0};
	char *schema;
	size_t n;
	int rc;

	if (o->grammar) {
		*text = slurp(o->grammar, len);
		return *text ? 0 : -errno;
	}
	if (!o->schema)
		return o1_grammar_json_object(NULL, text, len);
	schema = slurp(o->schema, &n);
	if (!schema)
		return -errno;
	rc = o1_grammar_from_schema(schema, n, NULL, &err, text, len);
	if (rc)
		fprintf(stderr, "%s: %s\n", o->schema, err.msg);
	free(schema);
	return rc;
}

static int setup(struct bench *b, const struct opts *o)
{
	struct o1_grammar_error err = {0};
	struct o1_vocab *ov;
	char *text;
	size_t len;
	double t0, w0;
	int rc = o1_vocab_load_any(o->vocab, &ov);

	if (rc)
		return 77;
	rc = o1_tokenizer_create(ov, &b->tok);
	o1_vocab_destroy(ov);
	rc = rc ?: o1_grammar_vocab_from_tokenizer(b->tok, &b->v);
	rc = rc ?: grammar_text(o, &text, &len);
	if (rc)
		return rc;
	t0 = cpu_us();
	rc = o1_grammar_compile(text, len, &err, &b->g);
	printf("compile   %8.2f ms  (%zu bytes of grammar text)\n",
	       (cpu_us() - t0) / 1e3, len);
	free(text);
	if (rc) {
		fprintf(stderr, "grammar %u:%u: %s\n", err.line, err.col,
			err.msg);
		return rc;
	}
	w0 = wall_us();
	rc = o1_grammar_tokens_create(b->g, b->v, o->threads, &b->t);
	printf("classify  %8.2f ms  (%u rules, %u states, %u tokens, %u "
	       "threads: wall time)\n",
	       (wall_us() - w0) / 1e3, o1_grammar_n_rules(b->g),
	       o1_grammar_n_states(b->g), o1_grammar_vocab_size(b->v),
	       o->threads ? o->threads : 1);
	rc = rc ?: o1_grammar_matcher_create(b->g, b->t, NULL, &b->m);
	b->n_words = o1_grammar_mask_words(b->v);
	b->mask = malloc(b->n_words * sizeof(*b->mask));
	return rc ? rc : b->mask ? 0 : -ENOMEM;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--json-object"))
			continue;
		if (a[0] != '-') {
			o->vocab = a;
			continue;
		}
		if (!v)
			return -EINVAL;
		i++;
		if (!strcmp(a, "--grammar"))
			o->grammar = v;
		else if (!strcmp(a, "--schema"))
			o->schema = v;
		else if (!strcmp(a, "--docs"))
			o->docs = v;
		else if (!strcmp(a, "--gen"))
			o->gen = atoi(v);
		else if (!strcmp(a, "--walks"))
			o->walks = atoi(v);
		else if (!strcmp(a, "--steps"))
			o->steps = atoi(v);
		else if (!strcmp(a, "--seed"))
			o->seed = (unsigned)atoi(v);
		else if (!strcmp(a, "--threads"))
			o->threads = (unsigned)atoi(v);
		else
			return -EINVAL;
	}
	return o->vocab ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct opts o = {.gen = 200, .walks = 20, .steps = 200, .seed = 1};
	struct bench b = {0};
	int rc;

	if (parse_args(argc, argv, &o)) {
		fprintf(stderr,
			"usage: bench_grammar [--grammar FILE | --schema FILE "
			"| --json-object] [--docs FILE | --gen N] [--walks N] "
			"[--steps N] [--seed S] [--threads N] VOCAB\n");
		return 2;
	}
	o1_log_set_level(O1_LOG_WARN);
	rc = setup(&b, &o);
	if (!rc)
		rc = run_docs(&b, &o);
	if (!rc)
		report(&b, "docs");
	if (!rc)
		rc = run_walks(&b, &o);
	if (!rc)
		report(&b, "walks");
	if (rc && rc != 1 && rc != 77)
		fprintf(stderr, "bench_grammar: %s\n", o1_strerror(rc));
	o1_grammar_matcher_destroy(b.m);
	o1_grammar_tokens_destroy(b.t);
	o1_grammar_destroy(b.g);
	o1_grammar_vocab_destroy(b.v);
	o1_tokenizer_destroy(b.tok);
	free(b.mask);
	free(b.us);
	return rc == 77 || rc == 1 ? rc : rc ? 1 : 0;
}

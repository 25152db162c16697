/* The sampler under a grammar (o1_sampler_constrain): every token drawn is
 * one the grammar allows, greedy picks the best allowed token, the
 * device path without room for a mask is refused, the backend path
 * (o1_sampler_row_masked, o1_sample_rows_masked, o1_sampler_accept) draws
 * what the host path draws, bit for bit, in every mode, with -1 (nothing
 * allowed) a grammar error, a refused token is not recorded, end tokens end
 * the request, an empty mask is an error, max_tokens still cuts, and
 * preparing the mask ahead draws the same tokens. Then, over Llama 3's
 * vocabulary (../shared; skipped without it), 120 generations from random
 * logits under a JSON Schema: each one that ends (not cut by max_tokens)
 * must parse as JSON, and Python's jsonschema (Draft 2020-12), when
 * installed, must find every one valid. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_schema.h"
#include "grammar/grammar_tokenizer.h"
#include "sampler/sampler.h"
#include "tokenizer/vocab_gpt2.h"

#define VOCAB_DIR O1_SHARED_DIR "/testdata/vocab"

/* 0..255 the bytes, then pieces, then two end tokens. */
static const char *const pieces[] = {"{\"a\":", "12", "}", "yes", "no",
				     "\"", "x"};
#define N_PIECES (sizeof(pieces) / sizeof(pieces[0]))
#define V	 (256 + N_PIECES + 2)
#define EOS	 (V - 2)
#define EOT	 (V - 1)

struct fixture {
	struct o1_grammar_vocab *v;
	struct o1_grammar *g;
	struct o1_grammar_tokens *t;
};

static void make(struct fixture *f, const char *grammar)
{
	static uint8_t all[256];
	const uint8_t *bytes[V];
	uint32_t lens[V];
	uint8_t kinds[V] = {0};

	for (int b = 0; b < 256; b++) {
		all[b] = (uint8_t)b;
		bytes[b] = &all[b];
		lens[b] = 1;
	}
	for (size_t i = 0; i < N_PIECES; i++) {
		bytes[256 + i] = (const uint8_t *)pieces[i];
		lens[256 + i] = (uint32_t)strlen(pieces[i]);
	}
	bytes[EOS] = (const uint8_t *)"</s>";
	bytes[EOT] = (const uint8_t *)"<eot>";
	lens[EOS] = 4;
	lens[EOT] = 5;
	kinds[EOS] = kinds[EOT] = O1_GRAMMAR_TOKEN_END;
	assert_int_equal(o1_grammar_vocab_create(V, bytes, lens, kinds, &f->v),
			 0);
	assert_int_equal(o1_grammar_compile(grammar, strlen(grammar), NULL,
					    &f->g),
			 0);
	assert_int_equal(o1_grammar_tokens_create(f->g, f->v, 1, &f->t), 0);
}

static void unmake(struct fixture *f)
{
	o1_grammar_tokens_destroy(f->t);
	o1_grammar_destroy(f->g);
	o1_grammar_vocab_destroy(f->v);
}

static struct o1_sampler *constrained(struct fixture *f,
				      const struct o1_sampler_params *p)
{
	struct o1_grammar_matcher *m;
	struct o1_sampler *s;

	assert_int_equal(o1_sampler_create(p, V, &s), 0);
	assert_int_equal(o1_grammar_matcher_create(f->g, f->t, NULL, &m), 0);
	assert_int_equal(o1_sampler_constrain(s, m), 0);
	return s;
}

static void random_logits(float *l, uint32_t n, unsigned *seed)
{
	uint32_t x = *seed;

	for (uint32_t i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		l[i] = (float)(x >> 22) / 100.0f;
	}
	*seed = x;
}

/* Tokens drawn from random logits: their bytes make a sentence. */
static void test_random_draws(void **state)
{
	struct fixture f;
	struct o1_sampler_params p;
	float l[V];
	unsigned seed = 7;

	(void)state;
	make(&f, "root ::= \"{\\\"a\\\":\" [0-9]{1,4} \"}\" | \"yes\" | \"no\"");
	o1_sampler_params_init(&p);
	p.temperature = 1;
	p.eos_id = EOS;
	for (int run = 0; run < 200; run++) {
		struct o1_sampler *s;
		struct o1_grammar_matcher *check;
		struct o1_sampler_out out = {.end = O1_SAMPLER_CONTINUE};
		int steps = 0;

		p.seed = (uint64_t)run;
		s = constrained(&f, &p);
		assert_int_equal(o1_grammar_matcher_create(f.g, f.t, NULL,
							   &check),
				 0);
		while (out.end == O1_SAMPLER_CONTINUE && steps++ < 50) {
			random_logits(l, V, &seed);
			assert_int_equal(o1_sampler_sample(s, l, &out), 0);
			assert_true(o1_grammar_matcher_accept_token(check,
								    out.id) >=
				    0);
		}
		assert_int_equal(out.end, O1_SAMPLER_END_EOS);
		assert_true(out.id == EOS || out.id == EOT);
		assert_true(o1_grammar_matcher_is_terminated(check));
		o1_grammar_matcher_destroy(check);
		o1_sampler_destroy(s);
	}
	unmake(&f);
}

static void test_greedy_and_refusals(void **state)
{
	struct fixture f;
	struct o1_sampler_params p;
	struct o1_sampler *s;
	struct o1_sampler_out out;
	struct o1_sample_row row;
	struct o1_sample_penalty pens[4];
	struct o1_sample_result bad = {.id = 'q'};
	float l[V] = {0};
	uint32_t n;

	(void)state;
	make(&f, "root ::= \"yes\" | \"no\"");
	o1_sampler_params_init(&p);
	p.eos_id = EOS;
	s = constrained(&f, &p);
	/* the best token overall is refused; the best allowed one wins */
	l['z'] = 9;
	l[256 + 4] = 3; /* "no" */
	l['y'] = 2;
	assert_int_equal(o1_sampler_row(s, &row, pens, 4, &n), -EOPNOTSUPP);
	assert_int_equal(o1_sampler_accept(s, &bad, &out), -O1_E_GRAMMAR);
	assert_int_equal(o1_sampler_generated(s), 0);
	assert_int_equal(o1_sampler_prepare(s), 0);
	assert_int_equal(o1_sampler_sample(s, l, &out), 0);
	assert_int_equal(out.id, 256 + 4);
	assert_int_equal(out.end, O1_SAMPLER_CONTINUE);
	/* complete, nothing can follow: only the end tokens */
	l[EOT] = 1;
	assert_int_equal(o1_sampler_sample(s, l, &out), 0);
	assert_int_equal(out.id, EOT);
	assert_int_equal(out.end, O1_SAMPLER_END_EOS);
	/* ended: nothing is allowed any more */
	assert_int_equal(o1_sampler_sample(s, l, &out), -O1_E_GRAMMAR);
	assert_int_equal(o1_sampler_generated(s), 2);
	o1_sampler_destroy(s);
	unmake(&f);
}

static void test_empty_mask_and_length(void **state)
{
	struct fixture f;
	struct o1_sampler_params p;
	struct o1_sampler *s;
	struct o1_sampler_out out;
	struct o1_grammar_matcher *m;
	float l[V] = {0};

	(void)state;
	/* max_tokens cuts a sentence short: LENGTH, not a "valid" end */
	make(&f, "root ::= \"x\"+ \"\\U0001F600\"");
	o1_sampler_params_init(&p);
	p.max_tokens = 3;
	s = constrained(&f, &p);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(o1_sampler_sample(s, l, &out), 0);
		assert_true(out.id == 'x' || out.id == 256 + 6 ||
			    out.id == 0xf0);
	}
	assert_int_equal(out.end, O1_SAMPLER_END_LENGTH);
	o1_sampler_destroy(s);
	/* constrain errors: the matcher is taken either way */
	assert_int_equal(o1_sampler_create(&p, V, &s), 0);
	assert_int_equal(o1_grammar_matcher_create(f.g, NULL, NULL, &m), 0);
	assert_int_equal(o1_sampler_constrain(s, m), -EINVAL);
	assert_int_equal(o1_grammar_matcher_create(f.g, f.t, NULL, &m), 0);
	assert_int_equal(o1_sampler_constrain(s, m), 0);
	assert_int_equal(o1_grammar_matcher_create(f.g, f.t, NULL, &m), 0);
	assert_int_equal(o1_sampler_constrain(s, m), -EBUSY);
	o1_sampler_destroy(s);
	unmake(&f);
	/* a grammar the vocabulary cannot spell at all */
	{
		const uint8_t *b[1] = {(const uint8_t *)"a"};
		uint32_t len = 1;
		struct o1_grammar_vocab *v;
		struct o1_grammar *g;
		struct o1_grammar_tokens *t;

		assert_int_equal(o1_grammar_vocab_create(1, b, &len, NULL, &v),
				 0);
		assert_int_equal(o1_grammar_compile("root ::= \"b\"", 12, NULL,
						    &g),
				 0);
		assert_int_equal(o1_grammar_tokens_create(g, v, 1, &t), 0);
		assert_int_equal(o1_sampler_create(&p, 1, &s), 0);
		assert_int_equal(o1_grammar_matcher_create(g, t, NULL, &m), 0);
		assert_int_equal(o1_sampler_constrain(s, m), 0);
		assert_int_equal(o1_sampler_sample(s, l, &out), -O1_E_GRAMMAR);
		o1_sampler_destroy(s);
		o1_grammar_tokens_destroy(t);
		o1_grammar_destroy(g);
		o1_grammar_vocab_destroy(v);
	}
}

/* Preparing the mask ahead of the logits changes nothing drawn. */
static void test_prepare_same_draws(void **state)
{
	struct fixture f;
	struct o1_sampler_params p;
	unsigned seed_a = 3, seed_b = 3;
	float l[V];

	(void)state;
	make(&f, "root ::= \"{\\\"a\\\":\" [0-9]{1,4} \"}\"");
	o1_sampler_params_init(&p);
	p.temperature = 0.8f;
	p.top_p = 0.9f;
	p.seed = 42;
	p.eos_id = EOS;
	{
		struct o1_sampler *a = constrained(&f, &p);
		struct o1_sampler *b = constrained(&f, &p);
		struct o1_sampler_out oa = {0}, ob = {0};

		for (int i = 0; i < 8 && oa.end == O1_SAMPLER_CONTINUE; i++) {
			random_logits(l, V, &seed_a);
			assert_int_equal(o1_sampler_prepare(a), 0);
			assert_int_equal(o1_sampler_prepare(a), 0);
			assert_int_equal(o1_sampler_sample(a, l, &oa), 0);
			random_logits(l, V, &seed_b);
			assert_int_equal(o1_sampler_sample(b, l, &ob), 0);
			assert_int_equal(oa.id, ob.id);
			assert_true(fabsf(oa.logprob - ob.logprob) < 1e-6f);
		}
		o1_sampler_destroy(a);
		o1_sampler_destroy(b);
	}
	unmake(&f);
}

/* The backend's path of a constrained sampler (its row and mask, the
 * row sampler run elsewhere, the result accepted) against the host's
 * o1_sampler_sample, over several modes: the same tokens and the same
 * bits of logprob, entropy and top-n, token after token. */
static void test_backend_path_same_draws(void **state)
{
	static const struct {
		float t, top_p, min_p, rep;
		uint32_t top_k, n_logprobs;
	} modes[] = {{0, 1, 0, 1, 0, 3},     {1, 1, 0, 1, 0, 0},
		     {0.8f, 0.9f, 0, 1, 0, 5}, {1, 1, 0.05f, 1, 0, 0},
		     {1.2f, 1, 0, 1, 3, 2},   {1, 1, 0, 1.3f, 0, 1}};
	struct fixture f;
	void *scratch = aligned_alloc(64, o1_sample_scratch_bytes(V));

	(void)state;
	assert_non_null(scratch);
	make(&f, "root ::= \"{\\\"a\\\":\" [0-9]{1,4} \"}\" | \"yes\" | \"no\"");
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		for (int run = 0; run < 20; run++) {
			struct o1_sampler_params p;
			struct o1_sampler *a, *b;
			struct o1_sampler_out oa = {0}, ob = {0};
			unsigned seed = (unsigned)(run * 31 + (int)m);
			float l[V];

			o1_sampler_params_init(&p);
			p.temperature = modes[m].t, p.top_p = modes[m].top_p;
			p.min_p = modes[m].min_p, p.top_k = modes[m].top_k;
			p.repetition_penalty = modes[m].rep;
			p.n_logprobs = modes[m].n_logprobs;
			p.seed = (uint64_t)run, p.eos_id = EOS;
			a = constrained(&f, &p);
			b = constrained(&f, &p);
			for (int i = 0; i < 12 && oa.end == O1_SAMPLER_CONTINUE;
			     i++) {
				struct o1_sample_row row;
				struct o1_sample_penalty pens[V];
				struct o1_sample_result r;
				uint32_t mask[(V + 31) / 32], n;

				random_logits(l, V, &seed);
				assert_int_equal(o1_sampler_sample(a, l, &oa),
						 0);
				assert_int_equal(o1_sampler_row_masked(
						     b, &row, pens, V, &n, mask),
						 0);
				assert_int_equal(row.mask, 1);
				assert_int_equal(
				    o1_sample_rows_masked(&r, l, 1, V, &row,
							  pens, mask, 1,
							  scratch),
				    0);
				assert_int_equal(o1_sampler_accept(b, &r, &ob),
						 0);
				assert_memory_equal(&oa, &ob, sizeof(oa));
			}
			assert_int_equal(oa.end, O1_SAMPLER_END_EOS);
			o1_sampler_destroy(a);
			o1_sampler_destroy(b);
		}
	/* nothing allowed: an error before the draw, and -1 from a backend
	 * is the grammar's error too */
	{
		struct o1_sampler_params p;
		struct o1_sampler *s;
		struct o1_sample_row row;
		struct o1_sample_result none = {.id = O1_SAMPLE_NO_TOKEN}, r_eos;
		struct o1_sampler_out out;
		uint32_t mask[(V + 31) / 32], n;
		float l[V] = {0};

		o1_sampler_params_init(&p);
		p.eos_id = EOS;
		s = constrained(&f, &p);
		assert_int_equal(o1_sampler_accept(s, &none, &out),
				 -O1_E_GRAMMAR);
		l[256 + 3] = 5;
		assert_int_equal(o1_sampler_sample(s, l, &out), 0);
		assert_int_equal(out.id, 256 + 3); /* "yes" */
		assert_int_equal(o1_sampler_row_masked(s, &row, NULL, 0, &n,
						       mask),
				 0);
		assert_true(mask[EOS / 32] >> (EOS % 32) & 1);
		assert_false(mask['y' / 32] >> ('y' % 32) & 1);
		assert_int_equal(o1_sampler_row(s, &row, NULL, 0, &n),
				 -EOPNOTSUPP);
		r_eos = (struct o1_sample_result){.id = EOS};
		assert_int_equal(o1_sampler_accept(s, &r_eos, &out), 0);
		assert_int_equal(out.end, O1_SAMPLER_END_EOS);
		assert_int_equal(o1_sampler_row_masked(s, &row, NULL, 0, &n,
						       mask),
				 -O1_E_GRAMMAR);
		assert_int_equal(o1_sampler_generated(s), 2);
		o1_sampler_destroy(s);
	}
	free(scratch);
	unmake(&f);
}

static const char schema[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"name\":{\"type\":\"string\",\"maxLength\":12},"
	"\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
	"\"kind\":{\"enum\":[\"cat\",\"dog\",null]},"
	"\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
	"\"pattern\":\"^[a-z]{1,5}$\"},\"maxItems\":3},"
	"\"score\":{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":2.25},"
	"\"next\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"boolean\"}]}},"
	"\"required\":[\"name\",\"age\",\"kind\"],"
	"\"additionalProperties\":false}";

/* Python's jsonschema over the outputs in PATH (a JSON list): the number
 * of invalid ones, or -1 when it is not installed. */
static int outside_check(const char *path)
{
	char cmd[1024];
	FILE *p;
	int bad = -1;

	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys\n"
		 "try:\n import jsonschema\nexcept ImportError:\n"
		 " print(-1); sys.exit()\n"
		 "s=json.loads(sys.argv[1]); v=jsonschema.Draft202012Validator(s)\n"
		 "print(sum(1 for d in json.load(open(sys.argv[2])) "
		 "if not v.is_valid(d)))' '%s' %s 2>/dev/null",
		 schema, path);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (fscanf(p, "%d", &bad) != 1)
		bad = -1;
	pclose(p);
	return bad;
}

/* One generation into TEXT; returns its end. */
static enum o1_sampler_end generate(struct o1_sampler *s, uint32_t n_vocab,
				    const struct o1_grammar_vocab *v,
				    float *l, unsigned *seed, char *text,
				    size_t cap)
{
	struct o1_sampler_out out = {.end = O1_SAMPLER_CONTINUE};
	size_t n = 0;

	while (out.end == O1_SAMPLER_CONTINUE) {
		uint32_t len;
		const uint8_t *b;

		random_logits(l, n_vocab, seed);
		assert_int_equal(o1_sampler_sample(s, l, &out), 0);
		b = o1_grammar_vocab_token(v, (uint32_t)out.id, &len);
		if (out.end == O1_SAMPLER_END_EOS)
			break;
		assert_true(n + len < cap);
		memcpy(text + n, b, len);
		n += len;
	}
	text[n] = 0;
	return out.end;
}

static void test_schema_generations(void **state)
{
	struct o1_vocab *ov;
	struct o1_tokenizer *tok;
	struct o1_grammar_vocab *v;
	struct o1_grammar *g;
	struct o1_grammar_tokens *t;
	struct o1_sampler_params p;
	uint32_t nv;
	float *l;
	unsigned seed = 11;
	int ended = 0, cut = 0;
	char path[] = "/tmp/o1-grammar-outXXXXXX", text[4096];
	int fd;
	FILE *f;

	(void)state;
	if (o1_vocab_load_any(VOCAB_DIR "/llama3.2/tokenizer.json", &ov))
		skip();
	assert_int_equal(o1_tokenizer_create(ov, &tok), 0);
	o1_vocab_destroy(ov);
	assert_int_equal(o1_grammar_vocab_from_tokenizer(tok, &v), 0);
	assert_int_equal(o1_grammar_compile_schema(schema, strlen(schema),
						   NULL, NULL, &g),
			 0);
	assert_int_equal(o1_grammar_tokens_create(g, v, 2, &t), 0);
	nv = o1_grammar_vocab_size(v);
	l = malloc(nv * sizeof(*l));
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("[", f);
	o1_sampler_params_init(&p);
	p.temperature = 1;
	p.max_tokens = 200;
	p.eos_id = o1_tokenizer_eos(tok);
	for (int run = 0; run < 120; run++) {
		struct o1_grammar_matcher *m;
		struct o1_sampler *s;
		cJSON *doc;

		p.seed = (uint64_t)run;
		assert_int_equal(o1_sampler_create(&p, nv, &s), 0);
		assert_int_equal(o1_grammar_matcher_create(g, t, NULL, &m), 0);
		assert_int_equal(o1_sampler_constrain(s, m), 0);
		if (generate(s, nv, v, l, &seed, text, sizeof(text)) !=
		    O1_SAMPLER_END_EOS) {
			cut++;
			o1_sampler_destroy(s);
			continue;
		}
		doc = cJSON_Parse(text);
		if (!doc)
			fail_msg("not JSON: %s", text);
		cJSON_Delete(doc);
		fprintf(f, "%s%s\n", ended++ ? "," : "", text);
		o1_sampler_destroy(s);
	}
	fputs("]", f);
	fclose(f);
	print_message("%d generations ended, %d cut by max_tokens\n", ended,
		      cut);
	assert_true(ended >= 90);
	{
		int bad = outside_check(path);

		if (bad < 0)
			print_message("python3 jsonschema not installed: "
				      "outside check skipped\n");
		else
			print_message("jsonschema: %d invalid\n", bad);
		assert_true(bad <= 0);
	}
	unlink(path);
	free(l);
	o1_grammar_tokens_destroy(t);
	o1_grammar_destroy(g);
	o1_grammar_vocab_destroy(v);
	o1_tokenizer_destroy(tok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_draws),
	    cmocka_unit_test(test_greedy_and_refusals),
	    cmocka_unit_test(test_empty_mask_and_length),
	    cmocka_unit_test(test_prepare_same_draws),
	    cmocka_unit_test(test_backend_path_same_draws),
	    cmocka_unit_test(test_schema_generations),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

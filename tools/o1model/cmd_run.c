/* o1model run: generates from a prompt with the engine, one sequence.
 * Prints the prompt-following ids on one line, then the decoded text
 * (unless --ids-only); --dump-logits writes the logits of every prompt
 * position as float32 little-endian [n_prompt, vocab]. The prompt is
 * prefilled in chunks of up to 512 tokens, then one token per step.
 * Exit 0 ok, 1 failure, 2 bad arguments. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "backend/backend.h"
#include "common/error.h"
#include "backend/kv_pool.h"
#include "model/model.h"
#include "o1model.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

#define RUN_CHUNK   512
#define RUN_MAX_IDS (1u << 20)

struct run_args {
	const char *model, *ids, *prompt, *dump;
	enum o1_backend_kind backend;
	struct o1_sampler_params sp;
	uint64_t max_tokens, page_tokens, threads;
	int ids_only;
};

struct run_state {
	struct o1_model *model;
	struct o1_tokenizer *tok;
	struct o1_backend *b;
	struct o1_kv_pool *pool;
	struct o1_block_table table;
	uint32_t *pages;
	int32_t *ids; /* prompt then generated */
	uint32_t n_prompt, n_ids, vocab;
	float *logits; /* RUN_CHUNK rows */
};

static void run_usage(FILE *f)
{
	fprintf(f,
		"usage: o1model run MODEL (--ids \"1 2 3\" | --prompt TEXT)\n"
		"  [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
		"  [--min-p P] [--seed S] [--dump-logits FILE]\n"
		"  [--backend cpu|cuda] [--ids-only] [--page-tokens N]\n"
		"  [--threads N]\n"
		"Greedy unless --temperature > 0; --max-tokens 0 runs the "
		"prompt only (default 16).\n");
}

static int parse_float(const char *opt, const char *s, float lo, float hi,
		       float *out)
{
	char *end;
	float x;

	errno = 0;
	x = strtof(s, &end);
	if (errno || end == s || *end || !(x >= lo && x <= hi)) {
		fprintf(stderr,
			"o1model run: %s '%s': expected a number "
			"%g..%g\n",
			opt, s, lo, hi);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

static int run_option(int opt, struct run_args *a)
{
	uint64_t v;
	int err = 0;

	switch (opt) {
	case 'i':
		a->ids = optarg;
		break;
	case 'p':
		a->prompt = optarg;
		break;
	case 'n':
		err = o1model_parse_u64("run", "--max-tokens", optarg, 0,
					RUN_MAX_IDS, &a->max_tokens);
		break;
	case 't':
		err = parse_float("--temperature", optarg, 0, 100,
				  &a->sp.temperature);
		break;
	case 'k':
		err = o1model_parse_u64("run", "--top-k", optarg, 0, 1u << 24,
					&v);
		a->sp.top_k = (uint32_t)v;
		break;
	case 'P':
		err = parse_float("--top-p", optarg, 0, 1, &a->sp.top_p);
		break;
	case 'm':
		err = parse_float("--min-p", optarg, 0, 1, &a->sp.min_p);
		break;
	case 's':
		err = o1model_parse_u64("run", "--seed", optarg, 0, UINT64_MAX,
					&a->sp.seed);
		break;
	case 'd':
		a->dump = optarg;
		break;
	case 'o':
		a->ids_only = 1;
		break;
	case 'g':
		err = o1model_parse_u64("run", "--page-tokens", optarg, 1,
					1u << 16, &a->page_tokens);
		break;
	case 'T':
		err = o1model_parse_u64("run", "--threads", optarg, 1, 256,
					&a->threads);
		break;
	case 'b':
		err = o1_backend_parse(optarg, &a->backend);
		if (err)
			fprintf(
			    stderr,
			    "o1model run: --backend '%s': expected cpu|cuda\n",
			    optarg);
		break;
	default:
		err = -EINVAL;
	}
	return err;
}

/* "1 2 3" or "1,2,3" -> ids (only counted and checked when IDS is
 * NULL). */
static int parse_ids(const char *s, int32_t *ids, uint32_t cap, uint32_t *n)
{
	char *end;

	*n = 0;
	for (;;) {
		long v;

		while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		errno = 0;
		v = strtol(s, &end, 10);
		if (end == s || errno || v < 0 || v > INT32_MAX || *n == cap) {
			fprintf(stderr,
				"o1model run: --ids: bad id at '%.20s'\n", s);
			return -EINVAL;
		}
		if (ids)
			ids[*n] = (int32_t)v;
		(*n)++;
		s = end;
	}
	if (!*n)
		fprintf(stderr, "o1model run: --ids: no ids\n");
	return *n ? 0 : -EINVAL;
}

static int run_parse(int argc, char **argv, struct run_args *a)
{
	static const struct option longopts[] = {
	    {"ids", required_argument, NULL, 'i'},
	    {"prompt", required_argument, NULL, 'p'},
	    {"max-tokens", required_argument, NULL, 'n'},
	    {"temperature", required_argument, NULL, 't'},
	    {"top-k", required_argument, NULL, 'k'},
	    {"top-p", required_argument, NULL, 'P'},
	    {"min-p", required_argument, NULL, 'm'},
	    {"seed", required_argument, NULL, 's'},
	    {"dump-logits", required_argument, NULL, 'd'},
	    {"ids-only", no_argument, NULL, 'o'},
	    {"page-tokens", required_argument, NULL, 'g'},
	    {"threads", required_argument, NULL, 'T'},
	    {"backend", required_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	uint32_t n;
	int opt;

	o1_sampler_params_init(&a->sp);
	a->max_tokens = 16;
	a->page_tokens = O1_KV_PAGE_TOKENS_DEFAULT;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			run_usage(stdout);
			exit(0);
		}
		if (opt == '?' || run_option(opt, a))
			return -EINVAL;
	}
	if (optind + 1 != argc || !a->ids == !a->prompt) {
		fprintf(stderr, "o1model run: need MODEL and exactly one of "
				"--ids or --prompt\n");
		run_usage(stderr);
		return -EINVAL;
	}
	a->model = argv[optind];
	return a->ids ? parse_ids(a->ids, NULL, RUN_MAX_IDS, &n) : 0;
}

static int encode_prompt(struct run_state *st, const char *text)
{
	int n;

	if (!st->tok) {
		fprintf(stderr,
			"o1model run: --prompt: %s has no vocabulary; "
			"use --ids\n",
			st->model->path);
		return -O1_E_MISSING;
	}
	n = o1_tokenizer_encode(st->tok, text, strlen(text),
				O1_ENCODE_ADD_SPECIAL, st->ids, RUN_MAX_IDS);
	if (n < 0 || n > (int)RUN_MAX_IDS || n == 0) {
		fprintf(stderr, "o1model run: --prompt: cannot encode (%s)\n",
			n < 0 ? o1_strerror(n) : "empty or too long");
		return n < 0 ? n : -EINVAL;
	}
	st->n_prompt = (uint32_t)n;
	return 0;
}

static int open_engine(struct run_state *st, const struct run_args *a,
		       uint32_t rows)
{
	uint32_t total = st->n_prompt + (uint32_t)a->max_tokens;
	struct o1_backend_config cfg = {
	    .n_threads = (uint32_t)a->threads,
	    .max_batch_tokens =
		st->n_prompt < RUN_CHUNK ? st->n_prompt : RUN_CHUNK,
	    .max_seqs = 1,
	    .max_context_tokens = total,
	    .page_tokens = (uint32_t)a->page_tokens,
	};
	int err;

	if (total > st->model->desc.max_context_tokens) {
		fprintf(stderr,
			"o1model run: %u prompt tokens + %llu new "
			"exceed the model's context of %u\n",
			st->n_prompt, (unsigned long long)a->max_tokens,
			st->model->desc.max_context_tokens);
		return -O1_E_CONTEXT;
	}
	cfg.n_pages = (total + cfg.page_tokens - 1) / cfg.page_tokens;
	err = o1_backend_create(a->backend, st->model, &cfg, &st->b);
	if (!err)
		err = o1_kv_pool_create(o1_backend_kv_layout(st->b), &st->pool);
	st->pages = calloc(cfg.n_pages, sizeof(uint32_t));
	st->logits = malloc((size_t)rows * st->vocab * sizeof(float));
	if (!err && (!st->pages || !st->logits))
		err = -ENOMEM;
	if (err)
		return err;
	o1_kv_table_init(&st->table, st->pages, cfg.n_pages);
	return o1_kv_table_reserve(st->pool, &st->table, total);
}

static int run_step(struct run_state *st, uint32_t start, uint32_t n, bool all)
{
	struct o1_step_seq seq = {st->ids + start,   n,	 start, st->pages,
				  st->table.n_pages, all};
	struct o1_step step = {.seqs = &seq,
			       .n_seqs = 1,
			       .logits = st->logits,
			       .logits_rows = all ? n : 1};

	return o1_backend_step(st->b, &step);
}

/* Prefills the prompt; returns the last position's logits row in *LAST. */
static int prefill(struct run_state *st, FILE *dump, const float **last)
{
	uint32_t n = 0;
	int err = 0;

	for (uint32_t at = 0; !err && at < st->n_prompt; at += n) {
		n = st->n_prompt - at < RUN_CHUNK ? st->n_prompt - at
						  : RUN_CHUNK;
		err = run_step(st, at, n, dump != NULL);
		if (!err && dump &&
		    fwrite(st->logits, sizeof(float) * st->vocab, n, dump) != n)
			err = -errno;
	}
	*last = st->logits + (dump ? (size_t)(n - 1) * st->vocab : 0);
	return err;
}

static int generate(struct run_state *st, const struct run_args *a,
		    const float *last)
{
	struct o1_sampler_params sp = a->sp;
	struct o1_sampler *s;
	struct o1_sampler_out out;
	int err;

	sp.max_tokens = (uint32_t)a->max_tokens;
	sp.eos_id =
	    st->tok ? o1_tokenizer_eos(st->tok) : st->model->desc.eos_id;
	err = o1_sampler_create(&sp, st->vocab, &s);
	if (!err)
		err = o1_sampler_add_prompt(s, st->ids, st->n_prompt);
	for (uint32_t i = 0; !err && i < a->max_tokens; i++) {
		err = o1_sampler_sample(s, last, &out);
		if (err)
			break;
		st->ids[st->n_ids++] = out.id;
		if (out.end != O1_SAMPLER_CONTINUE)
			break;
		err = run_step(st, st->n_ids - 1, 1, false);
		last = st->logits;
	}
	o1_sampler_destroy(s);
	return err;
}

static void print_result(const struct run_state *st, int ids_only)
{
	const int32_t *gen = st->ids + st->n_prompt;
	size_t n = st->n_ids - st->n_prompt;
	int len;
	char *text;

	for (size_t i = 0; i < n; i++)
		printf("%s%d", i ? " " : "", gen[i]);
	printf("\n");
	if (ids_only || !st->tok)
		return;
	len = o1_tokenizer_decode(st->tok, gen, n, O1_DECODE_SKIP_SPECIAL, NULL,
				  0);
	text = len >= 0 ? malloc((size_t)len + 1) : NULL;
	if (text && o1_tokenizer_decode(st->tok, gen, n, O1_DECODE_SKIP_SPECIAL,
					text, (size_t)len + 1) >= 0)
		printf("%s\n", text);
	free(text);
}

static int load(struct run_state *st, const struct run_args *a)
{
	int err = o1_model_open(a->model, &st->model);

	if (err)
		return err;
	st->vocab = st->model->desc.vocab_size;
	if (st->model->vocab &&
	    o1_tokenizer_create(st->model->vocab, &st->tok) && a->prompt)
		return -O1_E_TOKENIZER;
	st->ids = malloc((RUN_MAX_IDS + a->max_tokens) * sizeof(int32_t));
	if (!st->ids)
		return -ENOMEM;
	err = a->prompt
		  ? encode_prompt(st, a->prompt)
		  : parse_ids(a->ids, st->ids, RUN_MAX_IDS, &st->n_prompt);
	st->n_ids = st->n_prompt;
	return err;
}

static void unload(struct run_state *st)
{
	if (st->pool)
		o1_kv_table_fini(st->pool, &st->table);
	o1_kv_pool_destroy(st->pool);
	o1_backend_destroy(st->b);
	o1_tokenizer_destroy(st->tok);
	o1_model_close(st->model);
	free(st->pages);
	free(st->logits);
	free(st->ids);
}

static int run(struct run_state *st, const struct run_args *a)
{
	FILE *dump = NULL;
	const float *last;
	int err = load(st, a);

	if (!err)
		err = open_engine(
		    st, a,
		    a->dump
			? (st->n_prompt < RUN_CHUNK ? st->n_prompt : RUN_CHUNK)
			: 1);
	if (!err && a->dump && !(dump = fopen(a->dump, "wb"))) {
		err = -errno;
		fprintf(stderr, "o1model run: %s: %s\n", a->dump,
			strerror(errno));
	}
	if (!err)
		err = prefill(st, dump, &last);
	if (dump && fclose(dump) && !err)
		err = -errno;
	if (!err)
		err = generate(st, a, last);
	if (!err)
		print_result(st, a->ids_only);
	return err;
}

int o1model_cmd_run(int argc, char **argv)
{
	struct run_args a = {0};
	struct run_state st = {0};
	int err = run_parse(argc, argv, &a);

	if (err)
		return 2;
	err = run(&st, &a);
	if (err)
		fprintf(stderr, "o1model run: %s: %s\n", a.model,
			o1_strerror(err));
	unload(&st);
	return err ? 1 : 0;
}

/* o1bench run: load against a running o1d through libo1client.
 *
 *   o1bench run --socket PATH --requests N --concurrency C --max-tokens M
 *               [--connections K] [--cold]
 *               [--prompt-tokens P | --prompt TEXT] [--temperature T]
 *               [--seed S] [--chat] [--confidence] [--refine N] [--json]
 *               [--json-object | --json-schema FILE | --grammar FILE]
 *               [--long L [--long-tokens P] [--long-after-ms T]]
 *
 * C streams run a closed loop: take the next of the N requests, submit
 * it, stream it to its FINAL, repeat. By default each stream has its own
 * thread and connection, as C independent processes would (a client
 * handle is not thread-safe), so no demultiplexing delay pollutes TTFT or
 * inter-token times. --connections K < C shares K connections among the
 * streams, one thread each keeping its share in flight, as a
 * multi-threaded server does (and as ipc.max_clients may require).
 * --cold starts every prompt with its request's number, so no request
 * finds another's prefix in the cache. peak_inflight is the most requests
 * submitted and not yet finished at once, counted over all connections:
 * the concurrency that actually ran. prompt_tokens_per_request is the
 * prompt's tokens as the daemon counted them (the FINALs'), averaged over
 * the completed requests: the token count a word count P makes.
 *
 * Per request: TTFT = submit to the first TOKEN event; inter-token
 * latency = the gap between TOKEN events divided by the ids the later
 * event carries (one sample per id); end-to-end = submit to FINAL. A
 * FINAL with ERROR or CANCELLED counts as an error, and so does every
 * request a failed connection or transport left unfinished (completed =
 * requests that got their FINAL). Prints one key=value line per metric (or one
 * JSON object with
 * --json); exit 0, 1 when any request failed, 2 on bad arguments.
 * --confidence asks for per-token logprob and entropy; --refine N (with
 * --chat) asks for N refinement rounds and adds the prompt tokens, those
 * the prefix cache served and the rounds run, summed over the FINALs.
 * --json-object, --json-schema FILE and --grammar FILE constrain every
 * request (structured output, docs/GRAMMAR.md): the same load with a
 * grammar, to compare throughput with and without.
 * --long L: once every stream decodes, L cold prompts of P words (default
 * 8192) arrive at once (bench_long.h); the streams' inter-token samples
 * are also reported before they arrive (itl_before) and while they
 * prefill, until each has its first token (itl_during), with their TTFT
 * (long_ttft). Give the streams enough --max-tokens to outlast them.
 *
 * Invariants: each request index is taken by exactly one thread (atomic
 * counter); a thread writes only its own samples; the main thread reads
 * them after joining. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_long.h"
#include "common/error.h"
#include "common/file.h"
#include "o1/client.h"
#include "o1bench.h"

#define RUN_MAX_REQUESTS 1000000

struct run_args {
	const char *socket, *prompt;
	long requests, concurrency, connections, max_tokens, prompt_tokens;
	double temperature;
	unsigned long long seed;
	long refine;
	int chat, json, confidence, cold;
	uint32_t grammar_type; /* O1_GRAMMAR_TYPE_*, 0: none */
	const char *grammar_file;
	char *grammar; /* the file's bytes */
	size_t grammar_len;
	long long_n, long_words, long_after_ms; /* --long */
};

/* One stream's samples, in ns. */
struct samples {
	uint64_t *v;
	size_t n, cap;
};

/* One request in flight on a connection. */
struct stream {
	long idx; /* the request's number, -1 when the stream is idle */
	uint64_t t_submit, t_prev;
	uint32_t got;
	char *prompt; /* --cold: this request's own text */
};

/* One connection and its thread. */
struct worker {
	const struct run_args *a;
	const char *prompt;
	atomic_long *next;
	atomic_long *inflight, *peak; /* over every worker */
	atomic_long *first_tokens;    /* streams' first tokens, all workers */
	atomic_long *before_gaps;     /* --long: itl_before samples, all */
	const struct o1bench_long *lp; /* --long, else NULL */
	pthread_t thread;
	struct samples ttft, itl, e2e;
	struct samples itl_phase[2]; /* --long: before, during */
	uint64_t tokens, prompt_tokens, cached_tokens, rounds;
	long done, errors;
	char first_error[160];
	struct stream *s; /* n_streams */
	long n_streams;
	int failed;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int samples_add(struct samples *s, uint64_t x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		uint64_t *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	return 0;
}

static int samples_merge(struct samples *dst, const struct samples *src)
{
	int err = 0;

	for (size_t i = 0; i < src->n && !err; i++)
		err = samples_add(dst, src->v[i]);
	return err;
}

static void run_usage(FILE *f)
{
	fprintf(f,
		"usage: o1bench run --socket PATH --requests N --concurrency C "
		"--max-tokens M\n"
		"                   [--connections K] [--cold]\n"
		"                   [--prompt-tokens P | --prompt TEXT] "
		"[--temperature T] [--seed S]\n"
		"                   [--chat] [--confidence] [--refine N] "
		"[--json]\n"
		"C streams run the N requests in a closed loop, one thread "
		"and connection each,\nor over K shared connections "
		"(--connections); --cold gives every prompt its own\nstart, "
		"so none hits the prefix cache.\n--prompt-tokens P sends P words of text (about "
		"P tokens; default 16);\ngreedy unless --temperature > 0; "
		"--chat applies the chat template;\n--confidence asks for "
		"per-token logprob and entropy; --refine N (with --chat)\n"
		"asks for N self-refinement rounds and reports prompt, "
		"cached tokens and rounds.\n--long L: L cold prompts of "
		"--long-tokens P words (8192) arrive at once --long-after-ms "
		"T\n(1000) after every stream decodes (and once the streams "
		"have as many\ntoken intervals); adds the streams' "
		"itl_before/itl_during\nand the long prompts' long_ttft.\n"
		"--json-object, --json-schema FILE, --grammar FILE constrain "
		"every request.\n");
}

static int parse_long(const char *opt, const char *s, long lo, long hi,
		      long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	if (errno || end == s || *end || *out < lo || *out > hi) {
		fprintf(stderr, "o1bench run: %s '%s': expected %ld..%ld\n",
			opt, s, lo, hi);
		return -EINVAL;
	}
	return 0;
}

static int parse_value(struct run_args *a, const char *opt, const char *v)
{
	long x;
	char *end;

	if (!strcmp(opt, "--socket"))
		a->socket = v;
	else if (!strcmp(opt, "--json-schema") || !strcmp(opt, "--grammar")) {
		if (a->grammar_type) {
			fprintf(stderr, "o1bench run: one grammar option\n");
			return -EINVAL;
		}
		a->grammar_type = opt[2] == 'j' ? O1_GRAMMAR_TYPE_JSON_SCHEMA
						: O1_GRAMMAR_TYPE_TEXT;
		a->grammar_file = v;
	}
	else if (!strcmp(opt, "--prompt"))
		a->prompt = v;
	else if (!strcmp(opt, "--requests"))
		return parse_long(opt, v, 1, RUN_MAX_REQUESTS, &a->requests);
	else if (!strcmp(opt, "--concurrency"))
		return parse_long(opt, v, 1, 1024, &a->concurrency);
	else if (!strcmp(opt, "--connections"))
		return parse_long(opt, v, 1, 1024, &a->connections);
	else if (!strcmp(opt, "--max-tokens"))
		return parse_long(opt, v, 1, 1 << 20, &a->max_tokens);
	else if (!strcmp(opt, "--prompt-tokens"))
		return parse_long(opt, v, 1, 1 << 20, &a->prompt_tokens);
	else if (!strcmp(opt, "--refine"))
		return parse_long(opt, v, 0, 16, &a->refine);
	else if (!strcmp(opt, "--long"))
		return parse_long(opt, v, 1, 1024, &a->long_n);
	else if (!strcmp(opt, "--long-tokens"))
		return parse_long(opt, v, 1, 1 << 20, &a->long_words);
	else if (!strcmp(opt, "--long-after-ms"))
		return parse_long(opt, v, 0, 3600000, &a->long_after_ms);
	else if (!strcmp(opt, "--seed")) {
		if (parse_long(opt, v, 0, 1L << 62, &x))
			return -EINVAL;
		a->seed = (unsigned long long)x;
	} else if (!strcmp(opt, "--temperature")) {
		errno = 0;
		a->temperature = strtod(v, &end);
		if (errno || end == v || *end || !(a->temperature >= 0) ||
		    a->temperature > 100) {
			fprintf(stderr,
				"o1bench run: --temperature '%s': "
				"expected 0..100\n",
				v);
			return -EINVAL;
		}
	} else {
		fprintf(stderr, "o1bench run: unknown option %s\n", opt);
		return -EINVAL;
	}
	return 0;
}

static int run_parse(int argc, char **argv, struct run_args *a)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			a->json = 1;
		} else if (!strcmp(argv[i], "--chat")) {
			a->chat = 1;
		} else if (!strcmp(argv[i], "--confidence")) {
			a->confidence = 1;
		} else if (!strcmp(argv[i], "--cold")) {
			a->cold = 1;
		} else if (!strcmp(argv[i], "--json-object")) {
			if (a->grammar_type) {
				fprintf(stderr,
					"o1bench run: one grammar option\n");
				return -EINVAL;
			}
			a->grammar_type = O1_GRAMMAR_TYPE_JSON_OBJECT;
		} else if (!strcmp(argv[i], "-h") ||
			   !strcmp(argv[i], "--help")) {
			run_usage(stdout);
			exit(0);
		} else if (i + 1 == argc) {
			fprintf(stderr, "o1bench run: %s needs a value\n",
				argv[i]);
			return -EINVAL;
		} else if (parse_value(a, argv[i], argv[i + 1])) {
			return -EINVAL;
		} else {
			i++;
		}
	}
	if (!a->socket)
		a->socket = o1bench_socket;
	if (!a->socket || !a->requests || !a->concurrency || !a->max_tokens) {
		fprintf(stderr,
			"o1bench run: --socket, --requests, "
			"--concurrency and --max-tokens are required\n");
		return -EINVAL;
	}
	if (!a->connections)
		a->connections = a->concurrency;
	if (a->connections > a->concurrency) {
		fprintf(stderr, "o1bench run: --connections %ld above "
				"--concurrency %ld\n",
			a->connections, a->concurrency);
		return -EINVAL;
	}
	if (a->prompt && a->prompt_tokens) {
		fprintf(stderr, "o1bench run: --prompt and --prompt-tokens "
				"exclude each other\n");
		return -EINVAL;
	}
	if (a->refine && !a->chat) {
		fprintf(stderr, "o1bench run: --refine needs --chat\n");
		return -EINVAL;
	}
	if ((a->long_words || a->long_after_ms >= 0) && !a->long_n) {
		fprintf(stderr, "o1bench run: --long-tokens and "
				"--long-after-ms need --long\n");
		return -EINVAL;
	}
	if (!a->long_words)
		a->long_words = 8192;
	if (a->long_after_ms < 0)
		a->long_after_ms = 1000;
	return 0;
}

/* P words of plain English text. */
static char *make_prompt(long p)
{
	static const char *const words[] = {
	    "the",    "daemon", "keeps",  "one",   "model", "in",
	    "memory", "and",	"serves", "every", "local", "client"};
	char *s = malloc((size_t)p * 8 + 1);
	size_t at = 0;

	if (!s)
		return NULL;
	for (long i = 0; i < p; i++)
		at += (size_t)sprintf(s + at, "%s%s", i ? " " : "",
				      words[i % 12]);
	return s;
}

/* Keeps the first error's description; request errors are counted by
 * the caller, the requests never finished at the end. */
static void note_error(struct worker *w, const char *what, int err,
		       const char *detail)
{
	if (!w->first_error[0])
		snprintf(w->first_error, sizeof(w->first_error), "%s: %s%s%s",
			 what, o1_client_strerror(err), *detail ? ": " : "",
			 detail);
}

static void on_token(struct worker *w, struct stream *st,
		     const struct o1_event *ev)
{
	uint64_t t = now_ns();
	int phase = w->lp ? o1bench_long_phase(w->lp) : O1BENCH_LONG_AFTER;

	if (!st->got) {
		w->failed |= samples_add(&w->ttft, t - st->t_submit);
		atomic_fetch_add(w->first_tokens, 1);
	}
	for (uint32_t i = 0; st->got && i < ev->n_ids; i++) {
		uint64_t gap = (t - st->t_prev) / ev->n_ids;

		w->failed |= samples_add(&w->itl, gap);
		if (phase != O1BENCH_LONG_AFTER)
			w->failed |= samples_add(&w->itl_phase[phase], gap);
		if (phase == O1BENCH_LONG_BEFORE && w->lp)
			atomic_fetch_add(w->before_gaps, 1);
	}
	st->got += ev->n_ids;
	st->t_prev = t;
}

static void on_final(struct worker *w, struct stream *st,
		     const struct o1_event *fin)
{
	w->failed |= samples_add(&w->e2e, now_ns() - st->t_submit);
	w->tokens += fin->generated_tokens;
	w->prompt_tokens += fin->prompt_tokens;
	w->cached_tokens += fin->cached_tokens;
	w->rounds += fin->rounds;
	if (fin->finish == O1_FINISH_REASON_ERROR ||
	    fin->finish == O1_FINISH_REASON_CANCELLED) {
		w->errors++;
		note_error(w, "request", fin->error, fin->message);
	}
	w->done++;
	st->idx = -1;
	atomic_fetch_sub(w->inflight, 1);
}

/* Counts one more request in flight and raises the peak to match. */
static void count_inflight(struct worker *w)
{
	long now = atomic_fetch_add(w->inflight, 1) + 1;
	long peak = atomic_load(w->peak);

	while (now > peak && !atomic_compare_exchange_weak(w->peak, &peak, now))
		;
}

static const char *prompt_of(struct worker *w, struct stream *st, long idx)
{
	size_t n;

	if (!w->a->cold)
		return w->prompt;
	n = strlen(w->prompt) + 32;
	free(st->prompt);
	st->prompt = malloc(n);
	if (st->prompt)
		snprintf(st->prompt, n, "request %ld: %s", idx, w->prompt);
	return st->prompt;
}

static int submit_one(struct worker *w, struct o1_client *c,
		      struct stream *st, long idx)
{
	const struct run_args *a = w->a;
	struct o1_sampling sp = {.sz = sizeof(sp),
				 .temperature = (float)a->temperature,
				 .seed = a->seed + (uint64_t)idx};
	const char *text = prompt_of(w, st, idx);
	struct o1_submit_opts o = {
	    .sz = sizeof(o),
	    .req_id = (uint64_t)idx + 1,
	    .sampling = &sp,
	    .max_tokens = (uint32_t)a->max_tokens,
	    .flags = (a->chat ? O1_FLAG_CHAT : O1_FLAG_ADD_BOS) |
		     (a->confidence ? O1_FLAG_CONFIDENCE : 0),
	    .refine_steps = (uint32_t)a->refine,
	    .grammar_type = a->grammar_type,
	    .grammar = a->grammar,
	    .grammar_len = (uint32_t)a->grammar_len,
	};
	int err;

	if (!text)
		return -ENOMEM;
	o.text = text;
	o.text_len = strlen(text);
	st->idx = idx;
	st->got = 0;
	st->t_submit = now_ns();
	err = o1_client_submit(c, &o);
	if (err) {
		st->idx = -1;
		note_error(w, "transport", err, o1_last_error());
		return err;
	}
	count_inflight(w);
	return 0;
}

/* Gives every idle stream the next request; returns the streams busy. */
static long fill(struct worker *w, struct o1_client *c, int *err)
{
	long busy = 0, idx;

	for (long i = 0; i < w->n_streams && !*err; i++) {
		if (w->s[i].idx < 0 &&
		    (idx = atomic_fetch_add(w->next, 1)) < w->a->requests)
			*err = submit_one(w, c, &w->s[i], idx);
		busy += w->s[i].idx >= 0;
	}
	return busy;
}

static struct stream *stream_of(struct worker *w, uint64_t req_id)
{
	for (long i = 0; i < w->n_streams; i++)
		if (w->s[i].idx >= 0 && (uint64_t)w->s[i].idx + 1 == req_id)
			return &w->s[i];
	return NULL;
}

/* Keeps this connection's streams busy until the requests run out. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = w->a->socket, .name = "o1bench"};
	struct o1_client *c;
	struct o1_event ev;
	struct stream *st;
	int err = o1_client_connect(&co, &c);

	if (err) {
		note_error(w, "connect", err, o1_last_error());
		return NULL;
	}
	while (!err && fill(w, c, &err) > 0 && !err) {
		err = o1_client_wait(c, &ev, -1);
		if (err < 0) {
			note_error(w, "transport", err, o1_last_error());
			break;
		}
		err = 0;
		st = stream_of(w, ev.req_id);
		if (st && ev.type == O1_EVENT_TOKEN)
			on_token(w, st, &ev);
		else if (st && ev.type == O1_EVENT_FINAL)
			on_final(w, st, &ev);
	}
	o1_client_close(c);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void samples_sort(struct samples *s)
{
	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
}

/* Nearest-rank percentile Q of sorted S, in ms (0 when empty). */
static double pct_ms(const struct samples *s, int q)
{
	size_t rank;

	if (!s->n)
		return 0;
	rank = (s->n * (size_t)q + 99) / 100;
	return s->v[rank ? rank - 1 : 0] / 1e6;
}

struct totals {
	struct samples ttft, itl, e2e;
	struct samples itl_phase[2]; /* --long: before, during */
	struct samples long_ttft;
	uint64_t tokens, prompt_tokens, cached_tokens, rounds;
	long done, errors, peak_inflight;
	long long_done; /* --long prompts that got their FINAL */
	double wall_s;
	const char *first_error;
};

/* KEY=V with PREC decimals, or one member of the JSON object. */
static void print_metric(const struct run_args *a, const char *key, double v,
			 int prec, int *first)
{
	if (a->json)
		printf("%s\"%s\": %.*f", *first ? "{" : ", ", key, prec, v);
	else
		printf("%s=%.*f\n", key, prec, v);
	*first = 0;
}

static void print_dist(const struct run_args *a, const char *name,
		       const struct samples *s, int *first)
{
	static const int qs[] = {50, 90, 99};
	char key[64];

	for (size_t i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "%s_p%d", name, qs[i]);
		print_metric(a, key, pct_ms(s, qs[i]), 4, first);
	}
}

/* --long: the streams' token interval before the long prompts came and
 * while they prefilled (sample counts with them), their TTFT. */
static void print_long(const struct run_args *a, struct totals *t, int *first)
{
	static const char *const name[2] = {"itl_before", "itl_during"};
	char key[64];

	for (int k = 0; k < 2; k++) {
		samples_sort(&t->itl_phase[k]);
		snprintf(key, sizeof(key), "%s_n", name[k]);
		print_metric(a, key, (double)t->itl_phase[k].n, 0, first);
		snprintf(key, sizeof(key), "%s_ms", name[k]);
		print_dist(a, key, &t->itl_phase[k], first);
	}
	samples_sort(&t->long_ttft);
	print_metric(a, "long_requests", (double)a->long_n, 0, first);
	print_metric(a, "long_completed", (double)t->long_done, 0, first);
	print_dist(a, "long_ttft_ms", &t->long_ttft, first);
	print_metric(a, "long_ttft_max_ms",
		     t->long_ttft.n ? t->long_ttft.v[t->long_ttft.n - 1] / 1e6
				    : 0,
		     4, first);
}

/* A stream's tokens a second after its first: the token intervals'
 * count over their sum, so the prompt's time (TTFT) is left out, as
 * llama-bench's generation rate leaves it out. At one stream, batch 1's
 * decode rate; throughput_tok_s counts the prompts' time too. */
static double decode_rate(const struct samples *itl)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < itl->n; i++)
		sum += itl->v[i];
	return sum ? (double)itl->n * 1e9 / (double)sum : 0;
}

static void print_totals(const struct run_args *a, struct totals *t)
{
	int first = 1;

	samples_sort(&t->ttft);
	samples_sort(&t->itl);
	samples_sort(&t->e2e);
	print_metric(a, "requests", (double)a->requests, 0, &first);
	print_metric(a, "completed", (double)t->done, 0, &first);
	print_metric(a, "errors", (double)t->errors, 0, &first);
	print_metric(a, "tokens", (double)t->tokens, 0, &first);
	/* as the daemon counted them: what a --prompt-tokens word count
	 * makes with the model's tokenizer (issue 17 asks for TTFT at an
	 * exact token count) */
	print_metric(a, "prompt_tokens_per_request",
		     t->done ? (double)t->prompt_tokens / (double)t->done : 0,
		     1, &first);
	print_metric(a, "concurrency", (double)a->concurrency, 0, &first);
	print_metric(a, "connections", (double)a->connections, 0, &first);
	print_metric(a, "peak_inflight", (double)t->peak_inflight, 0, &first);
	print_metric(a, "wall_s", t->wall_s, 6, &first);
	print_metric(a, "throughput_tok_s",
		     t->wall_s > 0 ? t->tokens / t->wall_s : 0, 1, &first);
	print_dist(a, "ttft_ms", &t->ttft, &first);
	print_dist(a, "itl_ms", &t->itl, &first);
	print_metric(a, "stream_decode_tok_s", decode_rate(&t->itl), 1, &first);
	print_dist(a, "e2e_ms", &t->e2e, &first);
	if (a->long_n)
		print_long(a, t, &first);
	if (a->refine) {
		print_metric(a, "prompt_tokens", (double)t->prompt_tokens, 0,
			     &first);
		print_metric(a, "cached_tokens", (double)t->cached_tokens, 0,
			     &first);
		print_metric(a, "rounds", (double)t->rounds, 0, &first);
	}
	if (a->json)
		printf("}\n");
	if (t->first_error)
		fprintf(stderr, "o1bench run: %ld errors; first: %s\n",
			t->errors, t->first_error);
}

static int collect(struct worker *w, long n, struct totals *t)
{
	int err = 0;

	for (long i = 0; i < n; i++) {
		err |= samples_merge(&t->ttft, &w[i].ttft) |
		       samples_merge(&t->itl, &w[i].itl) |
		       samples_merge(&t->e2e, &w[i].e2e) |
		       samples_merge(&t->itl_phase[0], &w[i].itl_phase[0]) |
		       samples_merge(&t->itl_phase[1], &w[i].itl_phase[1]) |
		       w[i].failed;
		t->tokens += w[i].tokens;
		t->prompt_tokens += w[i].prompt_tokens;
		t->cached_tokens += w[i].cached_tokens;
		t->rounds += w[i].rounds;
		t->done += w[i].done;
		t->errors += w[i].errors;
		if (!t->first_error && w[i].first_error[0])
			t->first_error = w[i].first_error;
	}
	return err ? -ENOMEM : 0;
}

static void free_all(struct worker *w, long n, struct totals *t)
{
	for (long i = 0; i < n; i++) {
		for (long j = 0; w[i].s && j < w[i].n_streams; j++)
			free(w[i].s[j].prompt);
		free(w[i].s);
		free(w[i].ttft.v);
		free(w[i].itl.v);
		free(w[i].e2e.v);
		free(w[i].itl_phase[0].v);
		free(w[i].itl_phase[1].v);
	}
	free(t->ttft.v);
	free(t->itl.v);
	free(t->e2e.v);
	free(t->itl_phase[0].v);
	free(t->itl_phase[1].v);
	free(t->long_ttft.v);
	free(w);
}

/* Worker I's share of the streams: C / K, the first C % K one more. */
static int make_streams(struct worker *w, const struct run_args *a, long i)
{
	w->n_streams = a->concurrency / a->connections +
		       (i < a->concurrency % a->connections);
	w->s = calloc((size_t)w->n_streams, sizeof(*w->s));
	if (!w->s)
		return -ENOMEM;
	for (long j = 0; j < w->n_streams; j++)
		w->s[j].idx = -1;
	return 0;
}

/* --long's thread, waiting for every stream (or every request, when
 * fewer) to decode; FIRST counts the streams' first tokens, GAPS their
 * inter-token samples before the long prompts. */
static int start_long(const struct run_args *a, struct o1bench_long *l,
		      const atomic_long *first, const atomic_long *gaps)
{
	*l = (struct o1bench_long){
	    .socket = a->socket,
	    .n = a->long_n,
	    .words = a->long_words,
	    .after_ms = a->long_after_ms,
	    .first_tokens = first,
	    .before_gaps = gaps,
	    .streams =
		a->requests < a->concurrency ? a->requests : a->concurrency,
	};
	return a->long_n ? o1bench_long_start(l) : 0;
}

/* --long's results into T (after o1bench_long_join): its TTFT samples,
 * its failures counted as errors (and the first described when the
 * streams had none). */
static int finish_long(struct o1bench_long *l, struct totals *t)
{
	int err = 0;

	for (long i = 0; i < l->n_ttft && !err; i++)
		err = samples_add(&t->long_ttft, l->ttft[i]);
	t->long_done = l->done;
	t->errors += l->errors + (l->n - l->done);
	if (!t->first_error && l->first_error[0])
		t->first_error = l->first_error;
	return err;
}

static int run(const struct run_args *a, const char *prompt)
{
	struct worker *w = calloc((size_t)a->connections, sizeof(*w));
	struct totals t = {0};
	struct o1bench_long lp;
	atomic_long next = 0, inflight = 0, peak = 0, first = 0, gaps = 0;
	uint64_t t0 = now_ns();
	long started = 0;
	int err = w ? start_long(a, &lp, &first, &gaps) : -ENOMEM;

	for (long i = 0; i < a->connections && !err; i++)
		err = make_streams(&w[i], a, i);
	for (; started < a->connections && !err; started++) {
		w[started].a = a;
		w[started].prompt = prompt;
		w[started].next = &next;
		w[started].inflight = &inflight;
		w[started].peak = &peak;
		w[started].first_tokens = &first;
		w[started].before_gaps = &gaps;
		w[started].lp = a->long_n ? &lp : NULL;
		err = -pthread_create(&w[started].thread, NULL, worker_main,
				      &w[started]);
	}
	if (err && started)
		started--;
	for (long i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	if (a->long_n)
		o1bench_long_join(&lp);
	t.wall_s = (now_ns() - t0) / 1e9;
	t.peak_inflight = atomic_load(&peak);
	if (!err)
		err = collect(w, started, &t);
	if (!err && a->long_n)
		err = finish_long(&lp, &t);
	if (!err) {
		t.errors += a->requests - t.done;
		print_totals(a, &t);
		err = t.errors ? 1 : 0;
	}
	if (w)
		free_all(w, a->connections, &t);
	if (a->long_n)
		o1bench_long_fini(&lp);
	return err;
}

int o1bench_cmd_run(int argc, char **argv)
{
	struct run_args a = {.long_after_ms = -1};
	char *prompt;
	int err;

	if (run_parse(argc, argv, &a)) {
		run_usage(stderr);
		return 2;
	}
	prompt = a.prompt ? strdup(a.prompt)
			  : make_prompt(a.prompt_tokens ? a.prompt_tokens : 16);
	if (!prompt)
		return 1;
	/* a grammar or schema file: the daemon caps it far lower (its welcome's
	 * max_grammar_bytes); this only keeps a wrong path from eating memory */
	if (a.grammar_file && (err = o1_file_read(a.grammar_file, 16u << 20,
						  &a.grammar, &a.grammar_len))) {
		fprintf(stderr, "o1bench run: %s: %s\n", a.grammar_file,
			o1_strerror(err));
		free(prompt);
		return 2;
	}
	err = run(&a, prompt);
	free(prompt);
	free(a.grammar);
	if (err < 0)
		fprintf(stderr, "o1bench run: %s\n", strerror(-err));
	return err ? 1 : 0;
}

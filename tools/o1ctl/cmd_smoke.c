/* o1ctl smoke: a fixed set of real requests through libo1client, each
 * checked, one verdict line per check (or one JSON object with --json);
 * exit 0 when every check passed, 1 when one failed, 3/4/5 when o1d
 * cannot be asked.
 *
 * Checks (the limits come from admin "status"):
 * - greedy: the same greedy text request twice gives identical ids, all
 *   max_tokens of them (EOS ignored);
 * - sampled: a seeded sampled request twice gives identical ids;
 * - long: a token-id prompt near the context limit (chunked prefill; its
 *   ids vary per run so the prefix cache does not serve it) finishes with all
 * its prompt tokens counted and tokens generated;
 * - cancel: a long generation cancelled after its first token gets a
 *   CANCELLED FINAL within --cancel-bound-ms (default 1000 ms; a loaded
 *   machine may need more);
 * - stop: a stop string cut from the greedy text ends the request with
 *   STOP and the text exactly up to the string.
 * A model without a tokenizer (admin status "tokenizer": false) takes
 * token-id prompts only: the text checks (greedy, sampled, stop) are
 * skipped, saying so, and cancel sends ids.
 * Invariants: one connection for all checks, one request at a time; a
 * check never depends on another's output except stop, which uses the
 * text of its own first run.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "o1/client.h"
#include "o1ctl.h"
#include "o1ctl_admin.h"
#include "shm/wire.h"

#define RUN_IDS_MAX	    512
#define RUN_TEXT_MAX	    4096
#define GEN_TOKENS	    16
#define STOP_TOKENS	    24
#define CANCEL_BOUND_MS	    1000
#define CANCEL_BOUND_MAX_MS 600000
#define LONG_MARGIN	    8
#define LONG_DEFAULT_MAX    8192
#define SMOKE_PROMPT	    "Once upon a time"
#define N_CHECKS	    5

struct smoke {
	struct o1_client *c;
	uint32_t ctx_tokens, vocab, long_max;
	uint32_t cancel_bound_ms; /* cancel's FINAL is due within this */
	bool tokenizer;		  /* text prompts are served */
	uint64_t next_id;
};

struct run {
	uint32_t ids[RUN_IDS_MAX];
	uint32_t n;
	char text[RUN_TEXT_MAX];
	size_t len;
	int cancel_after; /* tokens before asking to cancel; 0: never */
	uint64_t cancel_ns;
	struct o1_event fin;
};

struct verdict {
	const char *name;
	bool ok, skipped;
	double ms;
	char detail[256];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int on_token(void *arg, const struct o1_event *ev)
{
	struct run *r = arg;

	for (uint32_t i = 0; i < ev->n_ids && r->n < RUN_IDS_MAX; i++)
		r->ids[r->n++] = ev->ids[i];
	if (r->len + ev->text_len < RUN_TEXT_MAX) {
		memcpy(r->text + r->len, ev->text, ev->text_len);
		r->len += ev->text_len;
		r->text[r->len] = 0;
	}
	if (r->cancel_after && r->n >= (uint32_t)r->cancel_after) {
		r->cancel_ns = now_ns();
		return 1;
	}
	return 0;
}

static int generate(struct smoke *s, struct o1_submit_opts *o, struct run *r)
{
	int err;

	o->sz = sizeof(*o);
	o->req_id = ++s->next_id;
	r->n = 0;
	r->len = 0;
	r->text[0] = 0;
	r->cancel_ns = 0;
	err = o1_client_generate(s->c, o, on_token, r, &r->fin);
	return err;
}

static bool final_ok(const struct run *r, struct verdict *v)
{
	if (r->fin.finish == O1_FINISH_REASON_ERROR ||
	    r->fin.finish == O1_FINISH_REASON_CANCELLED) {
		snprintf(v->detail, sizeof(v->detail),
			 "FINAL %s, error %d (%s)",
			 r->fin.finish == O1_FINISH_REASON_ERROR ? "error"
								 : "cancelled",
			 r->fin.error, o1_strerror(r->fin.error));
		return false;
	}
	return true;
}

static bool same_ids(const struct run *a, const struct run *b,
		     struct verdict *v, uint32_t want)
{
	uint32_t i = 0;

	if (a->n != want || b->n != want) {
		snprintf(v->detail, sizeof(v->detail),
			 "%u and %u tokens, wanted %u", a->n, b->n, want);
		return false;
	}
	while (i < a->n && a->ids[i] == b->ids[i])
		i++;
	if (i < a->n) {
		snprintf(v->detail, sizeof(v->detail),
			 "runs differ at token %u: %u vs %u", i, a->ids[i],
			 b->ids[i]);
		return false;
	}
	snprintf(v->detail, sizeof(v->detail), "%u tokens, identical twice",
		 want);
	return true;
}

static int twice(struct smoke *s, struct o1_submit_opts *o, struct run *a,
		 struct run *b, struct verdict *v)
{
	int err = generate(s, o, a);

	if (!err)
		err = generate(s, o, b);
	if (err)
		snprintf(v->detail, sizeof(v->detail), "transport: %s",
			 o1_client_strerror(err));
	return err;
}

static void check_greedy(struct smoke *s, struct run *a, struct run *b,
			 struct verdict *v)
{
	struct o1_submit_opts o = {
	    .text = SMOKE_PROMPT,
	    .text_len = strlen(SMOKE_PROMPT),
	    .max_tokens = GEN_TOKENS,
	    .flags = O1_FLAG_ADD_BOS | O1_FLAG_IGNORE_EOS,
	};

	if (twice(s, &o, a, b, v))
		return;
	v->ok =
	    final_ok(a, v) && final_ok(b, v) && same_ids(a, b, v, GEN_TOKENS);
}

static void check_sampled(struct smoke *s, struct run *a, struct run *b,
			  struct verdict *v)
{
	struct o1_sampling sp = {.sz = sizeof(sp),
				 .temperature = 0.9f,
				 .top_p = 0.95f,
				 .top_k = 40,
				 .seed = 20261129};
	struct o1_submit_opts o = {
	    .text = SMOKE_PROMPT,
	    .text_len = strlen(SMOKE_PROMPT),
	    .sampling = &sp,
	    .max_tokens = GEN_TOKENS,
	    .flags = O1_FLAG_ADD_BOS | O1_FLAG_IGNORE_EOS,
	};

	if (twice(s, &o, a, b, v))
		return;
	v->ok =
	    final_ok(a, v) && final_ok(b, v) && same_ids(a, b, v, GEN_TOKENS);
	if (v->ok)
		strcat(v->detail, " (seeded)");
}

static uint32_t long_len(const struct smoke *s)
{
	uint32_t n =
	    s->ctx_tokens > LONG_MARGIN * 2 ? s->ctx_tokens - LONG_MARGIN : 1;

	return n < s->long_max ? n : s->long_max;
}

static void check_long(struct smoke *s, struct run *r, struct verdict *v)
{
	uint32_t n = long_len(s), *ids = malloc(n * sizeof(uint32_t));
	struct o1_submit_opts o = {
	    .n_ids = n,
	    .max_tokens = 4,
	    .flags = O1_FLAG_IGNORE_EOS | O1_FLAG_NO_TEXT,
	};
	uint32_t salt;
	int err;

	if (!ids) {
		snprintf(v->detail, sizeof(v->detail), "out of memory");
		return;
	}
	salt = (uint32_t)(now_ns() / 1000);
	for (uint32_t i = 0; i < n; i++)
		ids[i] = (i * 7919u + salt) % s->vocab;
	o.ids = ids;
	err = generate(s, &o, r);
	free(ids);
	if (err) {
		snprintf(v->detail, sizeof(v->detail),
			 "%u-token prompt: transport: %s", n,
			 o1_client_strerror(err));
		return;
	}
	if (!final_ok(r, v))
		return;
	v->ok = r->fin.prompt_tokens == n && r->n == 4;
	snprintf(v->detail, sizeof(v->detail),
		 "%u-token prompt (context %u): %u prompt tokens counted "
		 "(%u cached), %u generated",
		 n, s->ctx_tokens, r->fin.prompt_tokens, r->fin.cached_tokens,
		 r->n);
}

static void check_cancel(struct smoke *s, struct run *r, struct verdict *v)
{
	struct o1_submit_opts o = {
	    .text = SMOKE_PROMPT,
	    .text_len = strlen(SMOKE_PROMPT),
	    .max_tokens = s->ctx_tokens > 4 * LONG_MARGIN
			      ? s->ctx_tokens - 4 * LONG_MARGIN
			      : 1,
	    .flags = O1_FLAG_ADD_BOS | O1_FLAG_IGNORE_EOS,
	};
	static const uint32_t ids[] = {1, 2, 3};
	double ms;
	int err;

	if (!s->tokenizer) {
		o.text = NULL;
		o.ids = ids;
		o.n_ids = 3;
	}
	r->cancel_after = 1;
	err = generate(s, &o, r);
	r->cancel_after = 0;
	if (err) {
		snprintf(v->detail, sizeof(v->detail), "transport: %s",
			 o1_client_strerror(err));
		return;
	}
	if (!r->cancel_ns) {
		v->ok = false;
		if (final_ok(r, v))
			snprintf(v->detail, sizeof(v->detail),
				 "finished (%s) before its first token",
				 o1_wire_finish_name(r->fin.finish));
		return;
	}
	ms = (double)(now_ns() - r->cancel_ns) / 1e6;
	v->ok = r->fin.finish == O1_FINISH_REASON_CANCELLED &&
		ms <= s->cancel_bound_ms;
	snprintf(v->detail, sizeof(v->detail),
		 "FINAL %s after %.1f ms (bound %u), %u tokens",
		 r->fin.finish == O1_FINISH_REASON_CANCELLED ? "cancelled"
							     : "not cancelled",
		 ms, s->cancel_bound_ms, r->fin.generated_tokens);
}

/* A stop string cut from TEXT at the latest position up to its middle
 * (and after its first byte): up to 4 bytes starting and ending on
 * character boundaries, whose first occurrence is where it was cut, so
 * some text must come before the stop; -1 when there is none. */
static int pick_stop(const char *text, size_t len, char *stop)
{
	for (size_t p = len / 2; p >= 1; p--) {
		size_t e = p + 4 < len ? p + 4 : len;

		if (((unsigned char)text[p] & 0xc0) == 0x80 || text[p] == ' ')
			continue;
		while (e < len && ((unsigned char)text[e] & 0xc0) == 0x80)
			e++;
		memcpy(stop, text + p, e - p);
		stop[e - p] = 0;
		if (strstr(text, stop) == text + p)
			return 0;
	}
	return -1;
}

static void check_stop(struct smoke *s, struct run *a, struct run *b,
		       struct verdict *v)
{
	struct o1_submit_opts o = {
	    .text = SMOKE_PROMPT,
	    .text_len = strlen(SMOKE_PROMPT),
	    .max_tokens = STOP_TOKENS,
	    .flags = O1_FLAG_ADD_BOS | O1_FLAG_IGNORE_EOS,
	};
	char stop[16];
	const char *list[1] = {stop};
	size_t want;
	int err = generate(s, &o, a);

	if (err)
		goto transport;
	if (!final_ok(a, v))
		return;
	if (pick_stop(a->text, a->len, stop)) {
		snprintf(v->detail, sizeof(v->detail),
			 "greedy text of %zu bytes is too short to cut",
			 a->len);
		return;
	}
	o.stop_strings = list;
	o.n_stop_strings = 1;
	err = generate(s, &o, b);
	if (err)
		goto transport;
	want = (size_t)(strstr(a->text, stop) - a->text);
	v->ok = b->fin.finish == O1_FINISH_REASON_STOP && b->len == want &&
		!memcmp(a->text, b->text, want);
	snprintf(v->detail, sizeof(v->detail),
		 "stop \"%s\": finish %s, %zu bytes of text, wanted %zu",
		 stop, o1_wire_finish_name(b->fin.finish), b->len, want);
	return;
transport:
	snprintf(v->detail, sizeof(v->detail), "transport: %s",
		 o1_client_strerror(err));
}

static void print_text(const struct verdict *v, int n)
{
	int failed = 0, skipped = 0;

	for (int i = 0; i < n; i++) {
		printf("%-8s %s  %7.1f ms  %s\n", v[i].name,
		       v[i].skipped ? "SKIP"
		       : v[i].ok    ? "PASS"
				    : "FAIL",
		       v[i].ms, v[i].detail);
		failed += !v[i].ok;
		skipped += v[i].skipped;
	}
	printf("smoke: %d of %d checks passed", n - failed - skipped, n);
	printf(skipped ? ", %d skipped\n" : "\n", skipped);
}

static void print_json(const struct verdict *v, int n, bool ok)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *list = cJSON_AddArrayToObject(o, "checks");

	cJSON_AddBoolToObject(o, "ok", ok);
	for (int i = 0; i < n; i++) {
		cJSON *c = cJSON_CreateObject();

		cJSON_AddStringToObject(c, "name", v[i].name);
		cJSON_AddBoolToObject(c, "ok", v[i].ok);
		cJSON_AddBoolToObject(c, "skipped", v[i].skipped);
		cJSON_AddNumberToObject(c, "ms", v[i].ms);
		cJSON_AddStringToObject(c, "detail", v[i].detail);
		cJSON_AddItemToArray(list, c);
	}
	o1ctl_admin_print_json(o);
	cJSON_Delete(o);
}

static void run_checks(struct smoke *s, struct verdict *v)
{
	struct run *a = calloc(2, sizeof(struct run)), *b = a ? a + 1 : NULL;
	uint64_t t;

	static const char *const names[N_CHECKS] = {"greedy", "sampled", "long",
						    "cancel", "stop"};
	for (int i = 0; i < N_CHECKS; i++) {
		v[i].name = names[i];
		if (!a) {
			snprintf(v[i].detail, sizeof(v[i].detail),
				 "out of memory");
			continue;
		}
		t = now_ns();
		if (!s->tokenizer && (i == 0 || i == 1 || i == 4)) {
			v[i].ok = v[i].skipped = true;
			snprintf(v[i].detail, sizeof(v[i].detail),
				 "a text check: %s",
				 o1_strerror(-O1_E_NO_TOKENIZER));
			continue;
		}
		if (i == 0)
			check_greedy(s, a, b, &v[i]);
		else if (i == 1)
			check_sampled(s, a, b, &v[i]);
		else if (i == 2)
			check_long(s, a, &v[i]);
		else if (i == 3)
			check_cancel(s, a, &v[i]);
		else
			check_stop(s, a, b, &v[i]);
		v[i].ms = (double)(now_ns() - t) / 1e6;
	}
	free(a);
}

static const char usage[] =
    "usage: o1ctl smoke [--socket PATH] [--json] [--long-max N]\n"
    "                   [--cancel-bound-ms MS]\n"
    "  runs greedy, sampled, long-prompt, cancel and stop-string requests\n"
    "  through libo1client and checks each; exit 0: all passed, 1: one\n"
    "  failed, 2: bad arguments, 3/4/5: o1d cannot be asked.\n"
    "  --long-max N           caps the long prompt (default 8192 tokens,\n"
    "                         else the context limit - 8)\n"
    "  --cancel-bound-ms MS   the cancelled request's FINAL must come\n"
    "                         within MS of the cancel (default 1000,\n"
    "                         at most 600000)\n";

/* ARG of the option WHAT, 1..MAX, into *OUT (o1ctl_parse_uint). */
static int parse_count(const char *what, const char *arg, uint32_t max,
		       uint32_t *out)
{
	uint64_t v;

	if (o1ctl_parse_uint("smoke", what, arg, 1, max, &v))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse(const struct o1ctl_ctx *ctx, int argc, char **argv,
		 const char **sock, int *json, struct smoke *s)
{
	*sock = ctx->socket;
	*json = ctx->json;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			*json = 1;
		} else if (!strcmp(argv[i], "--socket") && i + 1 < argc) {
			*sock = argv[++i];
		} else if (!strcmp(argv[i], "--long-max") && i + 1 < argc) {
			if (parse_count("--long-max", argv[++i], UINT32_MAX,
					&s->long_max))
				return -1;
		} else if (!strcmp(argv[i], "--cancel-bound-ms") &&
			   i + 1 < argc) {
			if (parse_count("--cancel-bound-ms", argv[++i],
					CANCEL_BOUND_MAX_MS,
					&s->cancel_bound_ms))
				return -1;
		} else if (!strcmp(argv[i], "-h") ||
			   !strcmp(argv[i], "--help")) {
			return 1;
		} else {
			return -1;
		}
	}
	return 0;
}

static int limits(const struct o1ctl_ctx *ctx, const char *sock,
		  struct smoke *s)
{
	char *av[] = {"smoke", "--socket", (char *)sock, NULL};
	const cJSON *c, *vs;
	cJSON *r = NULL;
	int json, ret = o1ctl_admin(ctx, 3, av, usage, "{\"op\":\"status\"}",
				    &r, &json);

	if (ret || !r)
		return ret ? ret : O1CTL_FAIL;
	c = cJSON_GetObjectItemCaseSensitive(r, "max_context_tokens");
	vs = cJSON_GetObjectItemCaseSensitive(r, "vocab_size");
	if (!cJSON_IsNumber(c) || !cJSON_IsNumber(vs) || vs->valuedouble < 1) {
		fprintf(stderr, "o1ctl: o1d's status lacks max_context_tokens "
				"and vocab_size: update o1d\n");
		ret = O1CTL_VERSION;
	} else {
		s->ctx_tokens = (uint32_t)c->valuedouble;
		s->vocab = (uint32_t)vs->valuedouble;
		/* an o1d without the field serves text prompts */
		s->tokenizer = !cJSON_IsFalse(
		    cJSON_GetObjectItemCaseSensitive(r, "tokenizer"));
	}
	cJSON_Delete(r);
	return ret;
}

int cmd_smoke(const struct o1ctl_ctx *ctx, int argc, char **argv)
{
	struct smoke s = {.long_max = LONG_DEFAULT_MAX,
			  .cancel_bound_ms = CANCEL_BOUND_MS};
	struct verdict v[N_CHECKS] = {0};
	struct o1_client_opts co = {.sz = sizeof(co), .name = "o1ctl-smoke"};
	const char *sock;
	bool ok = true;
	int json, ret = parse(ctx, argc, argv, &sock, &json, &s);

	if (ret) {
		fprintf(ret > 0 ? stdout : stderr, "%s", usage);
		return ret > 0 ? O1CTL_OK : O1CTL_USAGE;
	}
	ret = limits(ctx, sock, &s);
	if (ret)
		return ret;
	if (s.long_max > ctx->cfg.ipc.max_prompt_tokens)
		s.long_max = ctx->cfg.ipc.max_prompt_tokens;
	co.socket_path = sock;
	co.arena_bytes = long_len(&s) * 4 + 65536;
	ret = o1_client_connect(&co, &s.c);
	if (ret) {
		fprintf(stderr, "o1ctl: cannot connect a client to %s: %s\n",
			sock, o1_client_strerror(ret));
		return o1ctl_exit_code(ret);
	}
	run_checks(&s, v);
	o1_client_close(s.c);
	for (int i = 0; i < N_CHECKS; i++)
		ok &= v[i].ok;
	if (json)
		print_json(v, N_CHECKS, ok);
	else
		print_text(v, N_CHECKS);
	return ok ? O1CTL_OK : O1CTL_FAIL;
}

/* Structured output end to end (issue 23): o1d on the CPU backend with the
 * tiny random model, requests through libo1client.
 *
 * - 20 JSON Schemas (objects, enums, nested arrays, recursion through
 *   $ref, patterns, formats, bounds, anyOf, allOf, prefixItems) x N seeds
 *   sampled at temperature 1 (N = O1_GRAMMAR_PER_SCHEMA, 50 by default:
 *   issue 23's 1,000; the sanitizer build sets 10, tests/daemon's
 *   CMakeLists.txt; tools/grammar/generations.sh runs the 1,000 with
 *   Debian's python3-jsonschema), json_object requests, and
 *   unconstrained requests, in waves of up to 125 in flight at once (the
 *   unconstrained ones in the first): every constrained request ends with
 *   EOS (a whole document) or LENGTH (cut by max_tokens: one seed in ten
 *   gets max_tokens 4, which cuts most documents short); every whole
 *   document parses with Python's json module and validates with the
 *   jsonschema package (tests/daemon/validate_json.py; draft 2020-12,
 *   formats checked), 0 failures; a LENGTH one used all its max_tokens;
 *   the unconstrained requests stream exactly what they stream alone;
 *   each grammar was compiled once (the cache). The same run with
 *   sampling in the backend (constrained rows then sampled in the
 *   backend's step with their token masks, kernels/sample.h) streams the
 *   same events.
 * - Refused grammars (syntax, an unsupported keyword, text that is not
 *   JSON, a recursion without a base case): a FINAL with
 *   O1_CLIENT_E_GRAMMAR after an ERROR naming the problem, never a
 *   violation, each refusal compiled once; the connection serves on.
 * - A grammar that takes long to compile (token classes of thousands of
 *   counting states) while an unconstrained stream runs: the stream's
 *   tokens keep coming during the compile (the largest gap between two
 *   of its tokens is printed beside the compile time).
 * argv: o1d o1model validate_json.py */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "o1/client.h"

#define N_SCHEMAS	   20
#define PER_SCHEMA_DEFAULT 50
#define PER_SCHEMA_MAX	   100
#define N_OBJECT	   5
#define N_FREE		   20
#define N_HEAD		   (N_OBJECT + N_FREE) /* the first requests */
#define WAVE		   125
#define MAX_TOK		   320
#define CUT_TOK		   4 /* one seed in ten */
#define N_CLIENTS	   3
#define TEXT_CAP	   16384

static const char *o1d_bin, *o1model_bin, *validator;

static const char *const schemas[N_SCHEMAS] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
    "\"maxLength\":12},\"age\":{\"type\":\"integer\",\"minimum\":0,"
    "\"maximum\":120}},\"required\":[\"name\",\"age\"],"
    "\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\","
    "\"green\",\"blue\"]},\"ok\":{\"type\":\"boolean\"}},\"required\":"
    "[\"color\",\"ok\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-5,"
    "\"maximum\":5},\"minItems\":1,\"maxItems\":4}",
    "{\"type\":\"object\",\"properties\":{\"point\":{\"type\":\"object\","
    "\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":-10,"
    "\"maximum\":10},\"y\":{\"type\":\"number\",\"minimum\":-10,"
    "\"maximum\":10}},\"required\":[\"x\",\"y\"],"
    "\"additionalProperties\":false},\"tags\":{\"type\":\"array\","
    "\"items\":{\"type\":\"string\",\"maxLength\":5},\"maxItems\":3}},"
    "\"required\":[\"point\"],\"additionalProperties\":false}",
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":"
    "{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},\"kids\":{\"type\":"
    "\"array\",\"items\":{\"$ref\":\"#/$defs/node\"},\"maxItems\":2}},"
    "\"required\":[\"v\"],\"additionalProperties\":false}},"
    "\"$ref\":\"#/$defs/node\"}",
    "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\","
    "\"pattern\":\"^[A-Z]{2}-[0-9]{3}$\"}},\"required\":[\"code\"],"
    "\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\","
    "\"format\":\"uuid\"},\"day\":{\"type\":\"string\",\"format\":"
    "\"date\"}},\"required\":[\"id\",\"day\"],"
    "\"additionalProperties\":false}",
    "{\"anyOf\":[{\"type\":\"integer\",\"minimum\":0,\"maximum\":100},"
    "{\"type\":\"string\",\"maxLength\":4},{\"type\":\"null\"}]}",
    "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},"
    "\"r\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50}},"
    "\"required\":[\"kind\",\"r\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\","
    "\"maxLength\":3},{\"type\":\"boolean\"}],\"items\":false}",
    "{\"type\":\"string\",\"format\":\"email\"}",
    "{\"type\":\"string\",\"format\":\"date-time\"}",
    "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
    "\"integer\",\"minimum\":0,\"maximum\":3},\"b\":{\"type\":"
    "\"boolean\"}},\"required\":[\"a\"],\"additionalProperties\":false},"
    "{\"properties\":{\"b\":{\"type\":\"boolean\"}},\"required\":"
    "[\"b\"]}]}",
    "{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1}",
    "{\"type\":\"string\",\"minLength\":2,\"maxLength\":6}",
    "{\"type\":\"array\",\"items\":{\"enum\":[1,2,\"x\",null,true]},"
    "\"maxItems\":5}",
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\","
    "\"minimum\":1,\"maximum\":9}},\"required\":[\"id\"],"
    "\"additionalProperties\":{\"type\":\"boolean\"}}",
    "{\"type\":\"string\",\"format\":\"ipv4\"}",
    "{\"type\":\"string\",\"format\":\"time\"}",
    "{\"$defs\":{\"dir\":{\"enum\":[\"N\",\"E\",\"S\",\"W\"]}},\"type\":"
    "\"object\",\"properties\":{\"path\":{\"type\":\"array\",\"items\":"
    "{\"$ref\":\"#/$defs/dir\"},\"minItems\":1,\"maxItems\":6}},"
    "\"required\":[\"path\"],\"additionalProperties\":false}",
};

enum { FREE = -1, OBJECT = -2 };

struct gen {
	int kind; /* a schema index, FREE or OBJECT */
	char text[TEXT_CAP];
	size_t len;
	uint32_t ids[MAX_TOK + 1];
	uint32_t n_ids;
	int finals, finish, error;
	char message[100];
};

/* Requests: json_object ones, unconstrained ones, then per_schema of
 * each schema; n_gen in all. */
static unsigned per_schema, n_gen;
static struct gen *first, *second, *alone;

static int kind_of(unsigned i)
{
	if (i < N_HEAD)
		return i < N_OBJECT ? OBJECT : FREE;
	return (int)((i - N_HEAD) / per_schema);
}

/* Request I's max_tokens (constrained ones: one seed in ten is cut). */
static uint32_t max_tok_of(unsigned i)
{
	return i >= N_HEAD && (i - N_HEAD) % per_schema % 10 == 9 ? CUT_TOK
								  : MAX_TOK;
}

static void add_event(struct gen *g, const struct o1_event *ev)
{
	switch (ev->type) {
	case O1_EVENT_TOKEN:
		assert_true(g->len + ev->text_len < TEXT_CAP);
		memcpy(g->text + g->len, ev->text, ev->text_len);
		g->len += ev->text_len;
		for (uint32_t k = 0; k < ev->n_ids && g->n_ids <= MAX_TOK; k++)
			g->ids[g->n_ids++] = ev->ids[k];
		break;
	case O1_EVENT_ERROR:
		snprintf(g->message, sizeof(g->message), "%s", ev->message);
		break;
	case O1_EVENT_FINAL:
		g->finals++;
		g->finish = ev->finish;
		g->error = ev->error;
		break;
	default:
		break;
	}
}

/* Request I's options: unconstrained ones are token-id prompts (greedy
 * or seeded, as test_o1d's specs), constrained ones a text prompt at
 * temperature 1 with their own seed. */
static void fill(unsigned i, struct o1_submit_opts *so, struct o1_sampling *s,
		 uint32_t *ids)
{
	static const char prompt[] = "Answer in JSON, please: ";
	int kind = kind_of(i);

	*s = (struct o1_sampling){.sz = sizeof(*s), .seed = 7000 + i};
	*so = (struct o1_submit_opts){.sz = sizeof(*so),
				      .req_id = i,
				      .sampling = s,
				      .max_tokens = max_tok_of(i)};
	if (kind == FREE) {
		struct spec sp;

		spec_make(&sp, i);
		memcpy(ids, sp.ids, sp.n_ids * sizeof(*ids));
		so->ids = ids;
		so->n_ids = sp.n_ids;
		so->max_tokens = 40;
		s->temperature = sp.temperature;
		s->top_k = sp.top_k;
		s->top_p = sp.top_p;
		return;
	}
	s->temperature = 1.0f;
	so->text = prompt;
	so->text_len = sizeof(prompt) - 1;
	if (kind == OBJECT) {
		so->grammar_type = O1_GRAMMAR_TYPE_JSON_OBJECT;
		return;
	}
	so->grammar_type = O1_GRAMMAR_TYPE_JSON_SCHEMA;
	so->grammar = schemas[kind];
	so->grammar_len = strlen(schemas[kind]);
}

/* Submits requests [lo, hi) over N_CLIENTS connections at once and
 * collects their events into out[]. */
static void run(const char *socket, unsigned lo, unsigned hi, struct gen *out)
{
	static uint32_t ids[WAVE][SPEC_IDS_MAX];
	static struct o1_sampling smp[WAVE];
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = socket, .name = "grammar"};
	struct o1_client *c[N_CLIENTS];
	struct o1_event ev;
	unsigned done = 0;

	for (unsigned i = lo; i < hi; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].kind = kind_of(i);
	}
	for (int k = 0; k < N_CLIENTS; k++)
		assert_int_equal(o1_client_connect(&co, &c[k]), 0);
	for (unsigned i = lo; i < hi; i++) {
		struct o1_submit_opts so;
		int ret;

		fill(i, &so, &smp[i - lo], ids[i - lo]);
		ret = o1_client_submit(c[i % N_CLIENTS], &so);
		if (ret)
			fail_msg("submit %u: %d %s", i, ret, o1_last_error());
	}
	while (done < hi - lo) {
		int got = 0;

		for (int k = 0; k < N_CLIENTS; k++) {
			int ret = o1_client_poll(c[k], &ev);

			assert_true(ret >= 0);
			if (ret == 0)
				continue;
			got = 1;
			assert_true(ev.req_id >= lo && ev.req_id < hi);
			add_event(&out[ev.req_id], &ev);
			done += ev.type == O1_EVENT_FINAL;
		}
		if (!got)
			usleep(200);
	}
	for (int k = 0; k < N_CLIENTS; k++)
		o1_client_close(c[k]);
}

/* How many lines of the log contain WHAT. */
static int log_count(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	char line[2048];
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return n;
}

static bool same_gen(const struct gen *a, const struct gen *b)
{
	return a->finals == b->finals && a->finish == b->finish &&
	       a->error == b->error && a->n_ids == b->n_ids &&
	       !memcmp(a->ids, b->ids, a->n_ids * sizeof(a->ids[0])) &&
	       a->len == b->len && !memcmp(a->text, b->text, a->len);
}

/* Writes every whole document of G to DIR/docs.jsonl and runs the outside
 * validator on it. Returns the documents written. */
static int validate(const struct daemon_proc *d, const struct gen *g)
{
	char path[128], cmd[512];
	FILE *f;
	int n = 0, ret;

	snprintf(path, sizeof(path), "%s/docs.jsonl", d->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	for (unsigned i = 0; i < n_gen; i++) {
		cJSON *o, *schema;
		char *line, text[TEXT_CAP + 1];

		if (g[i].kind == FREE || g[i].finish != O1_FINISH_REASON_EOS)
			continue;
		memcpy(text, g[i].text, g[i].len);
		text[g[i].len] = 0;
		o = cJSON_CreateObject();
		schema = g[i].kind == OBJECT ? cJSON_CreateNull()
					     : cJSON_Parse(schemas[g[i].kind]);
		assert_non_null(schema);
		cJSON_AddItemToObject(o, "schema", schema);
		cJSON_AddStringToObject(o, "text", text);
		line = cJSON_PrintUnformatted(o);
		fprintf(f, "%s\n", line);
		free(line);
		cJSON_Delete(o);
		n++;
	}
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 %s %s", validator, path);
	ret = system(cmd);
	ret = WIFEXITED(ret) ? WEXITSTATUS(ret) : -1;
	if (ret == 3)
		print_message("jsonschema missing: documents only parsed\n");
	else
		assert_int_equal(ret, 0);
	return n;
}

/* Every request in waves of at most WAVE, the first holding the head. */
static void run_all(const char *socket, struct gen *out)
{
	for (unsigned lo = 0; lo < n_gen; lo += WAVE)
		run(socket, lo, lo + WAVE < n_gen ? lo + WAVE : n_gen, out);
}

static void test_structured_mixed(void **state)
{
	static const char *const in_backend[] = {"backend.sample_in_backend=on",
						 NULL};
	struct daemon_proc *d = *state;
	int eos = 0, length = 0, docs;

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	run(d->socket, N_OBJECT, N_HEAD, alone);
	run_all(d->socket, first);
	for (unsigned i = 0; i < n_gen; i++) {
		const struct gen *g = &first[i];

		if (g->finals != 1 || g->error)
			fail_msg("request %u: %d FINALs, error %d (%s)", i,
				 g->finals, g->error, g->message);
		if (g->kind == FREE) {
			if (!same_gen(g, &alone[i]))
				fail_msg("unconstrained request %u streamed "
					 "otherwise beside constrained ones",
					 i);
			continue;
		}
		assert_true(g->finish == O1_FINISH_REASON_EOS ||
			    g->finish == O1_FINISH_REASON_LENGTH);
		if (g->finish == O1_FINISH_REASON_LENGTH &&
		    g->n_ids != max_tok_of(i))
			fail_msg("request %u: LENGTH after %u of %u tokens", i,
				 g->n_ids, max_tok_of(i));
		eos += g->finish == O1_FINISH_REASON_EOS;
		length += g->finish == O1_FINISH_REASON_LENGTH;
	}
	docs = validate(d, first);
	print_message("%d constrained requests: %d whole documents "
		      "(validated), %d cut by max_tokens\n",
		      eos + length, eos, length);
	assert_int_equal(docs, eos);
	/* random weights, bounded schemas: most documents end */
	assert_true(eos >= (eos + length) * 2 / 3);
	assert_true(length > 0); /* the cut seeds */
	/* one compile per grammar: 20 schemas and json_object */
	assert_int_equal(log_count(d->log, " compiled: "), N_SCHEMAS + 1);
	assert_false(log_has(d->log, "violation"));
	assert_int_equal(daemon_stop(d), 0);

	assert_int_equal(daemon_start(d, o1d_bin, in_backend), 0);
	run_all(d->socket, second);
	for (unsigned i = 0; i < n_gen; i++)
		if (!same_gen(&first[i], &second[i]))
			fail_msg("request %u: sampling in the backend streamed "
				 "otherwise",
				 i);
	assert_int_equal(daemon_stop(d), 0);
}

struct bad {
	uint32_t type;
	const char *grammar;
	const char *says; /* in the ERROR's message */
};

static const struct bad bads[] = {
    {O1_GRAMMAR_TYPE_TEXT, "root ::= (\"x\"", "1:10"},
    {O1_GRAMMAR_TYPE_TEXT, "root ::= item\n", "item"},
    {O1_GRAMMAR_TYPE_JSON_SCHEMA, "{\"type\":\"object\",\"not\":{}}", "not"},
    {O1_GRAMMAR_TYPE_JSON_SCHEMA,
     "{\"type\":\"object\",\"patternProperties\":{}}", "patternProperties"},
    {O1_GRAMMAR_TYPE_JSON_SCHEMA, "{\"type\":", "JSON"},
    {O1_GRAMMAR_TYPE_JSON_SCHEMA,
     "{\"$defs\":{\"a\":{\"type\":\"array\",\"items\":{\"$ref\":"
     "\"#/$defs/a\"},\"minItems\":1}},\"$ref\":\"#/$defs/a\"}",
     "#"},
};
#define N_BAD (sizeof(bads) / sizeof(bads[0]))

static void test_refused(void **state)
{
	struct daemon_proc *d = *state;
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = d->socket, .name = "bad"};
	struct o1_submit_opts so = {
	    .sz = sizeof(so), .text = "Hello", .text_len = 5, .max_tokens = 4};
	struct o1_client *c;
	struct o1_event fin;
	struct gen g[2 * N_BAD];

	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	/* each twice, all in flight at once */
	for (unsigned i = 0; i < 2 * N_BAD; i++) {
		const struct bad *b = &bads[i % N_BAD];

		so.req_id = i;
		so.grammar_type = b->type;
		so.grammar = b->grammar;
		so.grammar_len = strlen(b->grammar);
		assert_int_equal(o1_client_submit(c, &so), 0);
		memset(&g[i], 0, sizeof(g[i]));
	}
	for (unsigned done = 0; done < 2 * N_BAD;) {
		struct o1_event ev;

		assert_int_equal(o1_client_wait(c, &ev, 60000000000ll), 1);
		assert_true(ev.req_id < 2 * N_BAD);
		add_event(&g[ev.req_id], &ev);
		done += ev.type == O1_EVENT_FINAL;
	}
	for (unsigned i = 0; i < 2 * N_BAD; i++) {
		assert_int_equal(g[i].finals, 1);
		assert_int_equal(g[i].finish, O1_FINISH_REASON_ERROR);
		assert_int_equal(g[i].error, O1_CLIENT_E_GRAMMAR);
		assert_int_equal(g[i].len, 0);
		if (!strstr(g[i].message, bads[i % N_BAD].says))
			fail_msg("grammar %u: message '%s' lacks '%s'", i,
				 g[i].message, bads[i % N_BAD].says);
	}
	/* o1_client_generate leaves the message in o1_last_error() */
	so.req_id = 99;
	so.grammar_type = O1_GRAMMAR_TYPE_JSON_SCHEMA;
	so.grammar = bads[2].grammar;
	so.grammar_len = strlen(bads[2].grammar);
	assert_int_equal(o1_client_generate(c, &so, NULL, NULL, &fin), 0);
	assert_int_equal(fin.error, O1_CLIENT_E_GRAMMAR);
	assert_non_null(strstr(o1_last_error(), "'not'"));
	/* the connection serves on, a good grammar included */
	so.grammar = "{\"enum\":[\"yes\",\"no\"]}";
	so.grammar_len = strlen(so.grammar);
	so.max_tokens = 16;
	assert_int_equal(o1_client_generate(c, &so, NULL, NULL, &fin), 0);
	assert_int_equal(fin.error, 0);
	assert_int_equal(fin.finish, O1_FINISH_REASON_EOS);
	o1_client_close(c);
	/* refusals are cached: each grammar compiled (and refused) once */
	assert_int_equal(log_count(d->log, " refused after "), (int)N_BAD);
	assert_false(log_has(d->log, "violation"));
	assert_int_equal(daemon_stop(d), 0);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A schema whose token classes take long (strings of up to N code points
 * make about N counting states each, every one a walk of the vocabulary):
 * an unconstrained stream submitted first keeps producing tokens while it
 * compiles. Measured, not timed: the test fails only if no token at all
 * came between the slow request's submission and its first event. */
static void test_slow_compile(void **state)
{
	static char schema[1024];
	struct daemon_proc *d = *state;
	struct o1_client_opts co = {
	    .sz = sizeof(co), .socket_path = d->socket, .name = "slow"};
	uint32_t ids[8] = {5, 6, 7, 8, 9, 10, 11, 12};
	struct o1_submit_opts stream = {.sz = sizeof(stream),
					.req_id = 1,
					.ids = ids,
					.n_ids = 8,
					.max_tokens = 1900,
					.flags = O1_FLAG_IGNORE_EOS};
	struct o1_submit_opts slow = {.sz = sizeof(slow),
				      .req_id = 2,
				      .text = "Hello",
				      .text_len = 5,
				      .max_tokens = 8,
				      .grammar_type =
					  O1_GRAMMAR_TYPE_JSON_SCHEMA};
	uint64_t t_sub = 0, t_first = 0, last = 0, gap = 0, base_gap = 0;
	struct o1_client *c;
	int during = 0, before = 0, finals = 0;

	snprintf(schema, sizeof(schema),
		 "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
		 "\"string\",\"maxLength\":1500},\"b\":{\"type\":\"string\","
		 "\"maxLength\":1501},\"c\":{\"type\":\"string\",\"maxLength\":"
		 "1502}},\"required\":[\"a\",\"b\",\"c\"],"
		 "\"additionalProperties\":false}");
	slow.grammar = schema;
	slow.grammar_len = strlen(schema);
	assert_int_equal(daemon_start(d, o1d_bin, NULL), 0);
	assert_int_equal(o1_client_connect(&co, &c), 0);
	assert_int_equal(o1_client_submit(c, &stream), 0);
	while (finals < 2) {
		struct o1_event ev;
		uint64_t now;

		assert_int_equal(o1_client_wait(c, &ev, 120000000000ll), 1);
		now = mono_ns();
		if (ev.req_id == 1 && ev.type == O1_EVENT_TOKEN) {
			if (last && t_sub && !t_first && now - last > gap)
				gap = now - last;
			if (last && !t_sub && now - last > base_gap)
				base_gap = now - last;
			last = now;
			during += t_sub && !t_first;
			if (!t_sub && ++before == 20) {
				assert_int_equal(o1_client_submit(c, &slow), 0);
				t_sub = mono_ns();
			}
		}
		if (ev.req_id == 2 && !t_first)
			t_first = now;
		finals += ev.type == O1_EVENT_FINAL;
	}
	print_message("slow schema: first event %.1f ms after submission; "
		      "%d tokens of the other stream meanwhile, largest gap "
		      "%.1f ms (%.1f ms before)\n",
		      (double)(t_first - t_sub) / 1e6, during,
		      (double)gap / 1e6, (double)base_gap / 1e6);
	assert_true(during > 0);
	o1_client_close(c);
	assert_int_equal(daemon_stop(d), 0);
}

static int setup(void **state)
{
	static struct daemon_proc d;

	if (harness_init(&d, o1model_bin))
		return -1;
	*state = &d;
	return 0;
}

static int teardown(void **state)
{
	harness_fini(*state);
	return 0;
}

/* After each test, also a failed one: no o1d left running. */
static int stop_daemon(void **state)
{
	struct daemon_proc *d = *state;

	if (d->pid > 0)
		daemon_stop(d);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_structured_mixed, stop_daemon),
	    cmocka_unit_test_teardown(test_refused, stop_daemon),
	    cmocka_unit_test_teardown(test_slow_compile, stop_daemon),
	};

	if (argc < 4)
		return 77;
	o1d_bin = argv[1];
	o1model_bin = argv[2];
	validator = argv[3];
	per_schema = getenv("O1_GRAMMAR_PER_SCHEMA")
			 ? (unsigned)atoi(getenv("O1_GRAMMAR_PER_SCHEMA"))
			 : PER_SCHEMA_DEFAULT;
	if (!per_schema || per_schema > PER_SCHEMA_MAX) {
		fprintf(stderr, "O1_GRAMMAR_PER_SCHEMA: 1 to %d\n",
			PER_SCHEMA_MAX);
		return 2;
	}
	n_gen = N_HEAD + N_SCHEMAS * per_schema;
	first = calloc(n_gen, sizeof(*first));
	second = calloc(n_gen, sizeof(*second));
	alone = calloc(n_gen, sizeof(*alone));
	if (!first || !second || !alone)
		return 1;
	fprintf(stderr,
		"test_grammar_o1d: %u generations under 20 schemas "
		"(O1_GRAMMAR_PER_SCHEMA=%u)\n",
		N_SCHEMAS * per_schema, per_schema);
	if (system("command -v python3 >/dev/null 2>&1")) {
		fprintf(stderr, "skipped: no python3 to validate with\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}

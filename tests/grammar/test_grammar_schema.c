/* JSON Schema -> grammar, checked against the JSON Schema Test Suite
 * (draft 2020-12, ../shared/testdata/jsonschema; skipped without it).
 *
 * For each case: the schema compiles, or is refused with -O1_E_UNSUPPORTED
 * naming a keyword. For each test of a compiled schema, the instance is
 * written as compact JSON in the grammar's canonical form (grammar_schema.h:
 * escapes as a JSON serializer writes them, numbers as the shortest decimal
 * that reads back, object members in the order the schema's `properties`
 * name them, first appearance in the document first, others after) and fed
 * to a matcher: it must be a whole sentence of the grammar exactly when the
 * suite says "valid". A schema that matches nothing (-O1_E_FORMAT "matches
 * nothing") passes when every test is invalid.
 *
 * The only mismatches allowed are the ones grammar_schema.h announces:
 * oneOf is written as anyOf, so an instance valid against several of its
 * alternatives is accepted (counted as "oneOf overlap" and must involve a
 * oneOf). The counts per file are printed (docs/GRAMMAR.md has them).
 * o1_grammar_schema_canonical must write every instance as this file's
 * own writer does. Unit tests of the compiler come first: refusals name
 * their keyword, bad schemas fail cleanly, and grammars checked by hand. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_schema.h"

#define SUITE_DIR O1_SHARED_DIR "/testdata/jsonschema"

struct text {
	char *p;
	size_t n, cap;
};

static void put(struct text *t, const char *s, size_t n)
{
	if (t->n + n + 1 > t->cap) {
		t->cap = (t->n + n + 1) * 2;
		t->p = realloc(t->p, t->cap);
		assert_non_null(t->p);
	}
	memcpy(t->p + t->n, s, n);
	t->n += n;
	t->p[t->n] = 0;
}

static void puts_(struct text *t, const char *s)
{
	put(t, s, strlen(s));
}

/* Property names in order of first appearance in the schema document. */
struct names {
	const char **v;
	size_t n, cap;
};

static void add_name(struct names *o, const char *name)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->v[i], name))
			return;
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 16;
		o->v = realloc(o->v, o->cap * sizeof(*o->v));
		assert_non_null(o->v);
	}
	o->v[o->n++] = name;
}

static void collect(const cJSON *s, struct names *o)
{
	const cJSON *p = cJSON_IsObject(s)
				 ? cJSON_GetObjectItemCaseSensitive(s,
								    "properties")
				 : NULL;
	const cJSON *r = cJSON_IsObject(s)
				 ? cJSON_GetObjectItemCaseSensitive(s, "required")
				 : NULL;

	for (const cJSON *x = cJSON_IsObject(p) ? p->child : NULL; x;
	     x = x->next)
		add_name(o, x->string);
	for (const cJSON *x = cJSON_IsArray(r) ? r->child : NULL; x;
	     x = x->next)
		if (cJSON_IsString(x))
			add_name(o, x->valuestring);
	for (const cJSON *x = s ? s->child : NULL; x; x = x->next)
		collect(x, o);
}

static size_t rank(const struct names *o, const char *name)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->v[i], name))
			return i;
	return o->n;
}

static void write_number(struct text *t, double x)
{
	char buf[40];

	if (x == floor(x) && fabs(x) < 1e17) {
		snprintf(buf, sizeof(buf), "%.0f", x == 0 ? 0.0 : x);
	} else {
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(buf, sizeof(buf), "%.*g", prec, x);
			if (strtod(buf, NULL) == x)
				break;
		}
	}
	puts_(t, buf);
}

static void write_string(struct text *t, const char *s)
{
	static const char named[] = "btn\0fr"; /* 0x08 .. 0x0d */

	puts_(t, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];

		if (*p == '"' || *p == '\\')
			snprintf(esc, sizeof(esc), "\\%c", *p);
		else if (*p >= 8 && *p <= 13 && named[*p - 8])
			snprintf(esc, sizeof(esc), "\\%c", named[*p - 8]);
		else if (*p < 0x20)
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
		else
			esc[0] = (char)*p, esc[1] = 0;
		puts_(t, esc);
	}
	puts_(t, "\"");
}

static void write_value(struct text *t, const cJSON *v,
			const struct names *o);

static int cmp_member(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string,
		      (*(const cJSON *const *)b)->string);
}

/* Members the schema names by their rank, then the others by key (the
 * order enum and const values are written in). */
static void write_object(struct text *t, const cJSON *v,
			 const struct names *o)
{
	const cJSON *m[256];
	size_t n = 0;

	for (const cJSON *x = v->child; x && n < 256; x = x->next)
		m[n++] = x;
	if (o) /* a schema itself is written in its own order */
		qsort(m, n, sizeof(*m), cmp_member);
	puts_(t, "{");
	for (size_t r = 0, k = 0; r <= (o ? o->n : 0); r++) {
		for (size_t i = 0; i < n; i++) {
			if (o && rank(o, m[i]->string) != r)
				continue;
			puts_(t, k++ ? "," : "");
			write_string(t, m[i]->string);
			puts_(t, ":");
			write_value(t, m[i], o);
		}
	}
	puts_(t, "}");
}

static void write_value(struct text *t, const cJSON *v, const struct names *o)
{
	if (cJSON_IsNull(v)) {
		puts_(t, "null");
	} else if (cJSON_IsBool(v)) {
		puts_(t, cJSON_IsTrue(v) ? "true" : "false");
	} else if (cJSON_IsNumber(v)) {
		write_number(t, v->valuedouble);
	} else if (cJSON_IsString(v)) {
		write_string(t, v->valuestring);
	} else if (cJSON_IsArray(v)) {
		puts_(t, "[");
		for (const cJSON *x = v->child; x; x = x->next) {
			if (x != v->child)
				puts_(t, ",");
			write_value(t, x, o);
		}
		puts_(t, "]");
	} else {
		write_object(t, v, o);
	}
}

struct tally {
	int cases, compiled, nothing, refused, tests, passed, overlap;
	int failed;
};

static bool uses_one_of(const cJSON *s)
{
	if (!s)
		return false;
	if (s->string && !strcmp(s->string, "oneOf"))
		return true;
	for (const cJSON *x = s->child; x; x = x->next)
		if (uses_one_of(x))
			return true;
	return false;
}

static bool accepts(struct o1_grammar *g, const char *text, size_t n)
{
	struct o1_grammar_matcher *m;
	bool ok;

	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	ok = !o1_grammar_matcher_accept_bytes(m, (const uint8_t *)text, n) &&
	     o1_grammar_matcher_is_complete(m);
	o1_grammar_matcher_destroy(m);
	return ok;
}

/* o1_grammar_schema_canonical (what o1model schema-check writes) agrees
 * with this file's own writer. */
static void same_canonical(const cJSON *schema, const cJSON *data,
			   const struct text *want)
{
	struct text s = {0}, d = {0};
	char *out;
	size_t n;

	write_value(&s, schema, NULL);
	write_value(&d, data, NULL);
	assert_int_equal(o1_grammar_schema_canonical(s.p, s.n, d.p, d.n, &out,
						     &n),
			 0);
	if (n != want->n || memcmp(out, want->p, n))
		fail_msg("canonical forms differ: %s / %s", out, want->p);
	free(out);
	free(s.p);
	free(d.p);
}

static void run_case(const char *file, const cJSON *c, struct tally *t)
{
	const cJSON *schema = cJSON_GetObjectItemCaseSensitive(c, "schema");
	const cJSON *tests = cJSON_GetObjectItemCaseSensitive(c, "tests");
	struct o1_grammar_schema_opts opts = {.sz = sizeof(opts),
					      .formats_as_annotations = true};
	struct text text = {0};
	struct o1_grammar_error err;
	struct o1_grammar *g = NULL;
	struct names order = {0};
	int rc;

	/* cJSON's printer rounds some doubles (9007199254740992): ours */
	write_value(&text, schema, NULL);
	t->cases++;
	rc = o1_grammar_compile_schema(text.p, text.n, &opts, &err, &g);
	free(text.p);
	if (rc == -O1_E_UNSUPPORTED) {
		t->refused++;
		if (!strstr(err.msg, "'") && !strstr(err.msg, "pattern"))
			fail_msg("%s: refusal names nothing: %s", file,
				 err.msg);
		if (getenv("SUITE_VERBOSE"))
			print_message("  refused %s: %s\n", file, err.msg);
		return;
	}
	if (rc && !strstr(err.msg, "matches nothing") &&
	    !strstr(err.msg, "can never be finished"))
		fail_msg("%s: '%s': %d %s", file,
			 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
				 c, "description")),
			 rc, err.msg);
	if (rc)
		t->nothing++;
	else
		t->compiled++;
	collect(schema, &order);
	for (const cJSON *x = tests->child; x; x = x->next) {
		struct text inst = {0};
		bool valid = cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(x, "valid"));
		bool got;

		write_value(&inst, cJSON_GetObjectItemCaseSensitive(x, "data"),
			    &order);
		same_canonical(schema, cJSON_GetObjectItemCaseSensitive(x, "data"),
			       &inst);
		got = g && accepts(g, inst.p, inst.n);
		t->tests++;
		if (got == valid)
			t->passed++;
		else if (got && uses_one_of(schema))
			t->overlap++;
		else {
			t->failed++;
			print_message("FAIL %s: %s / %s: %s (want %s)\n", file,
				      cJSON_GetStringValue(
					      cJSON_GetObjectItemCaseSensitive(
						      c, "description")),
				      cJSON_GetStringValue(
					      cJSON_GetObjectItemCaseSensitive(
						      x, "description")),
				      inst.p, valid ? "valid" : "invalid");
		}
		free(inst.p);
	}
	free(order.v);
	o1_grammar_destroy(g);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static void test_suite(void **state)
{
	DIR *d = opendir(SUITE_DIR);
	char *files[128];
	int n = 0;
	struct tally all = {0};

	(void)state;
	if (!d)
		skip();
	for (struct dirent *e; (e = readdir(d)) && n < 128;) {
		size_t len = strlen(e->d_name);

		if (len > 5 && !strcmp(e->d_name + len - 5, ".json"))
			files[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(files, (size_t)n, sizeof(*files), cmp_name);
	print_message("%-28s %5s %5s %5s %5s %6s %6s %6s\n", "file", "cases",
		      "comp", "none", "refus", "tests", "passed", "1of");
	for (int i = 0; i < n; i++) {
		char path[512];
		struct tally t = {0};
		cJSON *doc;
		char *text;

		snprintf(path, sizeof(path), "%s/%s", SUITE_DIR, files[i]);
		text = slurp(path);
		doc = cJSON_Parse(text);
		assert_non_null(doc);
		for (const cJSON *c = doc->child; c; c = c->next)
			run_case(files[i], c, &t);
		print_message("%-28s %5d %5d %5d %5d %6d %6d %6d\n", files[i],
			      t.cases, t.compiled, t.nothing, t.refused,
			      t.tests, t.passed, t.overlap);
		all.cases += t.cases;
		all.compiled += t.compiled;
		all.nothing += t.nothing;
		all.refused += t.refused;
		all.tests += t.tests;
		all.passed += t.passed;
		all.overlap += t.overlap;
		all.failed += t.failed;
		cJSON_Delete(doc);
		free(text);
		free(files[i]);
	}
	print_message("%-28s %5d %5d %5d %5d %6d %6d %6d\n", "total",
		      all.cases, all.compiled, all.nothing, all.refused,
		      all.tests, all.passed, all.overlap);
	assert_int_equal(all.failed, 0);
	assert_true(all.compiled >= 160);
}

/* SCHEMA compiled (OPTS may be NULL); YES must be whole sentences, NO
 * must not. */
static void check(const char *schema,
		  const struct o1_grammar_schema_opts *opts,
		  const char *const *yes, const char *const *no)
{
	struct o1_grammar_error err;
	struct o1_grammar *g;
	int rc = o1_grammar_compile_schema(schema, strlen(schema), opts, &err,
					   &g);

	if (rc)
		fail_msg("%s: %d %s", schema, rc, err.msg);
	for (; yes && *yes; yes++)
		if (!accepts(g, *yes, strlen(*yes)))
			fail_msg("%s: refused %s", schema, *yes);
	for (; no && *no; no++)
		if (accepts(g, *no, strlen(*no)))
			fail_msg("%s: accepted %s", schema, *no);
	o1_grammar_destroy(g);
}

static void test_objects(void **state)
{
	(void)state;
	/* optional members before and after the required one */
	check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
	      "\"b\":{\"type\":\"string\"},\"c\":{\"type\":\"null\"}},"
	      "\"required\":[\"b\"],\"additionalProperties\":false}",
	      NULL,
	      (const char *[]){"{\"b\":\"\"}", "{\"a\":1,\"b\":\"x\"}",
			       "{\"a\":1,\"b\":\"x\",\"c\":null}",
			       "{\"b\":\"x\",\"c\":null}", NULL},
	      (const char *[]){"{}", "{\"a\":1}", "{\"b\":\"x\",}",
			       "{\"b\":\"x\",\"d\":1}", "{,\"b\":\"x\"}",
			       "{\"b\":\"x\",\"a\":1}", NULL});
	/* all optional, extra members of a schema, keys that avoid the
	 * declared names (and their prefixes are fine) */
	check("{\"properties\":{\"ab\":{\"const\":1},\"é\":{\"const\":2}},"
	      "\"additionalProperties\":{\"type\":\"boolean\"},"
	      "\"type\":\"object\"}",
	      NULL,
	      (const char *[]){"{}", "{\"ab\":1}", "{\"é\":2}",
			       "{\"ab\":1,\"é\":2,\"x\":true}",
			       "{\"a\":false}", "{\"abc\":true,\"\":false}",
			       "{\"é\":2,\"éé\":true}", NULL},
	      (const char *[]){"{\"ab\":true}", "{\"x\":1}",
			       "{\"x\":true,\"ab\":1}", "{\"é\":true}", NULL});
	/* a required name properties does not list takes the extras' schema
	 * (here: none allowed, so nothing matches) */
	{
		struct o1_grammar_error err;
		struct o1_grammar *g;
		const char *s = "{\"type\":\"object\",\"required\":[\"x\"],"
				"\"additionalProperties\":false}";

		assert_int_equal(o1_grammar_compile_schema(s, strlen(s), NULL,
							   &err, &g),
				 -O1_E_FORMAT);
		assert_non_null(strstr(err.msg, "matches nothing"));
	}
}

static void test_arrays_and_strings(void **state)
{
	(void)state;
	check("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},"
	      "{\"type\":\"string\"}],\"items\":{\"type\":\"boolean\"},"
	      "\"minItems\":1,\"maxItems\":3}",
	      NULL,
	      (const char *[]){"[1]", "[1,\"a\"]", "[1,\"a\",true]", NULL},
	      (const char *[]){"[]", "[\"a\"]", "[1,2]", "[1,\"a\",true,false]",
			       "[1,\"a\",3]", NULL});
	check("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", NULL,
	      (const char *[]){"\"ab\"", "\"\xc3\xa9\xc3\xa9\xc3\xa9\"",
			       "\"a\\u00e9\"", "\"\\n\\t\"", NULL},
	      (const char *[]){"\"a\"", "\"abcd\"", "\"\\ud800\"", NULL});
	check("{\"type\":\"string\",\"pattern\":\"^[a-c]+(x|yz)?$\"}", NULL,
	      (const char *[]){"\"abc\"", "\"ax\"", "\"cyz\"", NULL},
	      (const char *[]){"\"\"", "\"ad\"", "\"x\"", "\"ayzx\"", NULL});
	check("{\"type\":\"string\",\"format\":\"date\"}", NULL,
	      (const char *[]){"\"2024-02-29\"", "\"2000-02-29\"",
			       "\"1999-12-31\"", NULL},
	      (const char *[]){"\"2023-02-29\"", "\"1900-02-29\"",
			       "\"1999-04-31\"", "\"1999-13-01\"",
			       "\"0000-01-01\"", "\"0000-02-29\"", NULL});
	/* years 0001-9999; a leap second only at 23:59:60 UTC */
	check("{\"type\":\"string\",\"format\":\"date-time\"}", NULL,
	      (const char *[]){"\"0001-01-01T00:00:00Z\"",
			       "\"0400-02-29t12:30:00.5+05:30\"",
			       "\"1998-12-31T23:59:60Z\"",
			       "\"1998-12-31T23:59:60.25-00:00\"", NULL},
	      (const char *[]){"\"0000-03-01T00:00:00Z\"",
			       "\"1998-12-31T12:59:60Z\"",
			       "\"1998-12-31T23:59:60+01:00\"",
			       "\"1998-12-31T24:00:00Z\"", NULL});
	check("{\"type\":\"string\",\"format\":\"time\"}", NULL,
	      (const char *[]){"\"21:25:40Z\"", "\"03:00:00-00:55\"",
			       "\"23:59:60z\"", NULL},
	      (const char *[]){"\"08:50:60+17:48\"", "\"21:25:40\"",
			       "\"21:60:00Z\"", NULL});
	/* fractions of a second: 1 to 9 digits (nanoseconds), the leap
	 * second's too */
	check("{\"type\":\"string\",\"format\":\"time\"}", NULL,
	      (const char *[]){"\"21:25:40.5Z\"", "\"21:25:40.123456789Z\"",
			       "\"23:59:60.123456789Z\"", NULL},
	      (const char *[]){"\"21:25:40.1234567890Z\"", "\"21:25:40.Z\"",
			       "\"23:59:60.0000000000Z\"", NULL});
	check("{\"type\":\"string\",\"format\":\"uuid\"}", NULL,
	      (const char *[]){"\"123e4567-e89b-12d3-a456-426614174000\"",
			       NULL},
	      (const char *[]){"\"123e4567e89b12d3a456426614174000\"", NULL});
}

static void test_numbers(void **state)
{
	(void)state;
	check("{\"type\":\"integer\",\"minimum\":-12,\"exclusiveMaximum\":100}",
	      NULL,
	      (const char *[]){"-12", "0", "99", "-1", "7", NULL},
	      (const char *[]){"-13", "100", "-0", "1.5", "007", NULL});
	check("{\"type\":\"number\",\"exclusiveMinimum\":-0.5,"
	      "\"maximum\":1e2}",
	      NULL,
	      (const char *[]){"-0.25", "0", "100", "99.999", "0.5000", NULL},
	      (const char *[]){"-0.5", "-1", "100.01", "1e1", "-0", NULL});
	check("{\"type\":\"number\",\"minimum\":3.14,\"maximum\":3.14}", NULL,
	      (const char *[]){"3.14", "3.140", NULL},
	      (const char *[]){"3.141", "3.139", "3", NULL});
}

/* Digit caps (grammar_schema_int.h): an unbounded integer part stops at
 * 16 digits, or at a one-sided bound's own count; fractions at 16, or
 * one more than a bound's fraction; exponents at 3. JSON's leading-zero
 * rule holds throughout. */
static void test_digit_caps(void **state)
{
	(void)state;
	check("{\"type\":\"integer\"}", NULL,
	      (const char *[]){"0", "9999999999999999", "-9999999999999999",
			       "1000000000000000", NULL},
	      (const char *[]){"10000000000000000", "-10000000000000000",
			       "12345678901234567", "01", "00", "1.0", NULL});
	check("{\"type\":\"integer\",\"minimum\":0}", NULL,
	      (const char *[]){"0", "7", "9999999999999999", NULL},
	      (const char *[]){"10000000000000000", "-1", "007", NULL});
	check("{\"type\":\"integer\",\"maximum\":-5}", NULL,
	      (const char *[]){"-5", "-9999999999999999", NULL},
	      (const char *[]){"-10000000000000000", "-4", "-05", NULL});
	/* a bound longer than the cap: its own digit count (bounds exact
	 * as doubles: 1e17) */
	check("{\"type\":\"integer\",\"minimum\":100000000000000000}", NULL,
	      (const char *[]){"100000000000000000", "999999999999999999",
			       NULL},
	      (const char *[]){"99999999999999999", "1000000000000000000",
			       NULL});
	check("{\"type\":\"integer\",\"minimum\":-100000000000000000}",
	      NULL,
	      (const char *[]){"-100000000000000000", "-1",
			       "9999999999999999", NULL},
	      (const char *[]){"-100000000000000001", "10000000000000000",
			       NULL});
	/* both bounds: the range itself */
	check("{\"type\":\"integer\",\"minimum\":-3,\"maximum\":250}", NULL,
	      (const char *[]){"-3", "250", "99", NULL},
	      (const char *[]){"251", "-4", "0250", "2500", NULL});
	check("{\"type\":\"number\"}", NULL,
	      (const char *[]){"1.0000000000000001", "-1.5e308", "1E-005",
			       "9999999999999999.9999999999999999", "0.0",
			       NULL},
	      (const char *[]){"1.00000000000000001", "1e1000",
			       "12345678901234567", "01.5", "1.", ".5", NULL});
	check("{\"type\":\"number\",\"minimum\":0}", NULL,
	      (const char *[]){"9999999999999999.9999999999999999", "0",
			       "0.5", NULL},
	      (const char *[]){"10000000000000000", "0.12345678901234567",
			       "1e5", NULL});
	check("{\"type\":\"number\",\"exclusiveMinimum\":0}", NULL,
	      (const char *[]){"0.0000000000000001", "0.5", "3", NULL},
	      (const char *[]){"0", "0.0", "0.00000000000000001",
			       "10000000000000000", NULL});
	check("{\"type\":\"number\",\"maximum\":0.5}", NULL,
	      (const char *[]){"0.5", "0.4999999999999999", "-0.5",
			       "-9999999999999999.9999999999999999", NULL},
	      (const char *[]){"0.50000000000000001", "0.49999999999999999",
			       "-10000000000000000", NULL});
	/* a bound's fraction longer than the cap: one digit more fits */
	check("{\"type\":\"number\",\"minimum\":1e-22}", NULL,
	      (const char *[]){"0.0000000000000000000001",
			       "0.00000000000000000000011", "2", NULL},
	      (const char *[]){"0.000000000000000000000111",
			       "0.00000000000000000000009", "0", NULL});
	check("{\"type\":\"number\",\"exclusiveMinimum\":1e-20,"
	      "\"exclusiveMaximum\":2e-20}",
	      NULL, (const char *[]){"0.000000000000000000015", NULL},
	      (const char *[]){"0.00000000000000000001",
			       "0.00000000000000000002",
			       "0.0000000000000000000155", NULL});
}

static void test_combinators(void **state)
{
	(void)state;
	/* allOf: types intersect, requirements add up, bounds tighten */
	check("{\"allOf\":[{\"type\":[\"integer\",\"string\"],\"minimum\":2},"
	      "{\"type\":\"number\",\"maximum\":4}]}",
	      NULL, (const char *[]){"2", "4", NULL},
	      (const char *[]){"1", "5", "\"a\"", "2.5", NULL});
	/* anyOf beside a keyword: distributed into each alternative */
	check("{\"type\":\"string\",\"anyOf\":[{\"maxLength\":1},"
	      "{\"pattern\":\"^z\"}]}",
	      NULL, (const char *[]){"\"a\"", "\"zzz\"", NULL},
	      (const char *[]){"\"ab\"", "1", NULL});
	/* recursion through $ref, and a chain of refs */
	check("{\"$defs\":{\"n\":{\"type\":\"array\",\"items\":"
	      "{\"$ref\":\"#/$defs/m\"}},\"m\":{\"$ref\":\"#/$defs/n\"}},"
	      "\"$ref\":\"#/$defs/n\"}",
	      NULL, (const char *[]){"[]", "[[],[[[]]]]", NULL},
	      (const char *[]){"[1]", "[[],]", NULL});
	/* enum values: object members sorted by key */
	check("{\"enum\":[{\"b\":1,\"a\":[true]},\"x\",null]}", NULL,
	      (const char *[]){"{\"a\":[true],\"b\":1}", "\"x\"", "null",
			       NULL},
	      (const char *[]){"{\"b\":1,\"a\":[true]}", NULL});
}

static void test_whitespace_and_object(void **state)
{
	struct o1_grammar_schema_opts ws = {.sz = sizeof(ws), .ws_max = 2};
	struct o1_grammar *g;
	char *text;
	size_t n;

	(void)state;
	check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
	      "\"array\"}}}",
	      &ws, (const char *[]){"{ \"a\" : [ 1 , 2 ] }", "{\n\"a\":[]}", NULL},
	      (const char *[]){"{   \"a\":[]}", NULL});
	check("{\"type\":\"object\"}", NULL, (const char *[]){"{}", NULL},
	      (const char *[]){"{ }", NULL});
	assert_int_equal(o1_grammar_json_object(NULL, &text, &n), 0);
	assert_int_equal(o1_grammar_compile(text, n, NULL, &g), 0);
	{
		const char *doc = "{\"a\":{\"b\":[1,-2.5e3,\"\\u00e9\"]}}";

		assert_true(accepts(g, doc, strlen(doc)));
		assert_false(accepts(g, "[]", 2));
	}
	o1_grammar_destroy(g);
	free(text);
}

static void test_refusals(void **state)
{
	static const struct {
		const char *schema;
		int code;
		const char *msg;
	} bads[] = {
	    {"{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{}}}}",
	     -O1_E_UNSUPPORTED, "keyword 'not' is not supported (at "
				"#/properties/a)"},
	    {"{\"minProperties\":1}", -O1_E_UNSUPPORTED, "'minProperties'"},
	    {"{\"uniqueItems\":true}", -O1_E_UNSUPPORTED, "'uniqueItems'"},
	    {"{\"$defs\":{\"a\":{\"$id\":\"x\"}},\"$ref\":\"#/$defs/a\"}",
	     -O1_E_UNSUPPORTED, "'$id' inside"},
	    {"{\"$ref\":\"other.json#/a\"}", -O1_E_UNSUPPORTED,
	     "only references within"},
	    {"{\"$ref\":\"#/$defs/none\"}", -O1_E_FORMAT, "points nowhere"},
	    {"{\"$schema\":\"http://example.com/meta\"}", -O1_E_UNSUPPORTED,
	     "'$schema'"},
	    {"{\"type\":\"string\",\"format\":\"hostname\"}",
	     -O1_E_UNSUPPORTED, "format 'hostname'"},
	    {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}",
	     -O1_E_UNSUPPORTED, "backreference"},
	    {"{\"type\":\"string\",\"pattern\":\"a(?=b)\"}", -O1_E_UNSUPPORTED,
	     "lookaround"},
	    {"{\"type\":\"string\",\"pattern\":\"a^b\"}", -O1_E_UNSUPPORTED,
	     "anchor"},
	    {"{\"type\":\"string\",\"pattern\":\"(ab\"}", -O1_E_FORMAT,
	     "unclosed"},
	    {"{\"type\":\"string\",\"pattern\":\"x\",\"maxLength\":3}",
	     -O1_E_UNSUPPORTED, "'pattern' beside"},
	    {"{\"allOf\":[{\"pattern\":\"a\"},{\"pattern\":\"b\"}]}",
	     -O1_E_UNSUPPORTED, "two different 'pattern'"},
	    /* a list for 'properties' inside allOf: its members have no
	     * names, so the merge once added them nowhere and leaked them
	     * (fuzz_grammar_schema; LeakSanitizer in the sanitizer build) */
	    {"{\"allOf\":[{\"properties\":[\"a\"]},{\"properties\":{\"b\":"
	     "{}},\"additionalProperties\":{\"type\":\"boolean\"}}]}",
	     -O1_E_FORMAT, "'properties' must be an object"},
	    {"{\"allOf\":[{\"type\":\"object\"},{\"properties\":7}]}",
	     -O1_E_FORMAT, "'properties' must be an object"},
	    {"{\"enum\":[1],\"minimum\":0}", -O1_E_UNSUPPORTED,
	     "'enum' beside"},
	    {"{\"type\":\"bogus\"}", -O1_E_FORMAT, "'type' must name"},
	    /* an object's refused member or keyword keeps its own message
	     * (gen_object once said "a property name is not UTF-8" for
	     * every format error below an object) */
	    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
	     "\"bogus\"}}}",
	     -O1_E_FORMAT, "'type' must name JSON types (at #/properties/a)"},
	    {"{\"type\":\"object\",\"properties\":5}", -O1_E_FORMAT,
	     "'properties' must be an object"},
	    {"{\"type\":\"object\",\"properties\":{\"a\xff\":{}}}",
	     -O1_E_FORMAT, "a property name is not UTF-8 (at #)"},
	    {"{\"properties\":{\"b\":{\"type\":\"object\",\"properties\":"
	     "{\"a\xff\":{}},\"additionalProperties\":false}}}",
	     -O1_E_FORMAT, "a property name is not UTF-8 (at #/properties/b)"},
	    {"{\"minLength\":-1}", -O1_E_FORMAT, "non-negative integer"},
	    {"{\"maxItems\":20000}", -O1_E_UNSUPPORTED, "over 10000"},
	    {"{\"anyOf\":[]}", -O1_E_FORMAT, "non-empty list"},
	    {"[1]", -O1_E_FORMAT, "an object or a boolean"},
	    {"{\"a\":", -O1_E_FORMAT, "not JSON"},
	    {"false", -O1_E_FORMAT, "matches nothing"},
	    {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}",
	     -O1_E_FORMAT, "matches nothing"},
	    {"{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#\"}},"
	     "\"required\":[\"n\"]}",
	     -O1_E_FORMAT, "the schema at # can never be finished"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		struct o1_grammar_error err;
		struct o1_grammar *g = NULL;
		int rc = o1_grammar_compile_schema(bads[i].schema,
						   strlen(bads[i].schema), NULL,
						   &err, &g);

		if (rc != bads[i].code || !strstr(err.msg, bads[i].msg))
			fail_msg("%s: %d '%s'", bads[i].schema, rc, err.msg);
		assert_null(g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_objects),
	    cmocka_unit_test(test_arrays_and_strings),
	    cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_digit_caps),
	    cmocka_unit_test(test_combinators),
	    cmocka_unit_test(test_whitespace_and_object),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_suite),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The matcher: JSON accepted and refused byte by byte, UTF-8 split across
 * steps, ambiguity (several stacks at once), deep recursion, rollback
 * (exact state back, ring limits, the end token), completion and
 * termination, and the limits: a step past max_frames or max_stacks fails
 * with -O1_E_BOUNDS and leaves the matcher as it was. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "grammar/grammar.h"

static const char json_gbnf[] =
	"root   ::= value\n"
	"value  ::= object | array | string | number | \"true\" | \"false\" "
	"| \"null\"\n"
	"object ::= \"{\" ( member ( \",\" member )* )? \"}\"\n"
	"member ::= string \":\" value\n"
	"array  ::= \"[\" ( value ( \",\" value )* )? \"]\"\n"
	"string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" "
	"[\"\\\\/bfnrt] | \"\\\\u\" [0-9a-fA-F]{4} )* \"\\\"\"\n"
	"number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? "
	"( [eE] [-+]? [0-9]+ )?\n";

static struct o1_grammar *compile(const char *text)
{
	struct o1_grammar_error err;
	struct o1_grammar *g;

	if (o1_grammar_compile(text, strlen(text), &err, &g))
		fail_msg("%u:%u %s", err.line, err.col, err.msg);
	return g;
}

static int feed(struct o1_grammar_matcher *m, const char *s)
{
	return o1_grammar_matcher_accept_bytes(m, (const uint8_t *)s,
					       strlen(s));
}

/* 0: refused, 1: a prefix, 2: a whole sentence. */
static int judge(struct o1_grammar_matcher *m, const char *s)
{
	o1_grammar_matcher_reset(m);
	if (feed(m, s))
		return 0;
	return o1_grammar_matcher_is_complete(m) ? 2 : 1;
}

static void test_json(void **state)
{
	static const struct {
		const char *text;
		int want;
	} cases[] = {
	    {"{\"a\":[1,2,{\"b\":null}],\"c\":\"x\\\"\xc3\xa9\"}", 2},
	    {"[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]", 2},
	    {"-0.5e+10", 2},
	    {"\"\\u00e9\\n\"", 2},
	    {"true", 2},
	    {"{\"a\":}", 0},
	    {"[1,]", 0},
	    {"01", 0},
	    {"\"\x01\"", 0},
	    {"\"\\x\"", 0},
	    {"[1,2", 1},
	    {"{\"a\"", 1},
	    {"-", 1},
	    {"nul", 1},
	    {"\"\xc3", 1},
	    {"\"\xc3\x28", 0},
	    {"{} ", 0},
	};
	struct o1_grammar *g = compile(json_gbnf);
	struct o1_grammar_matcher *m;

	(void)state;
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (judge(m, cases[i].text) != cases[i].want)
			fail_msg("'%s': %d, want %d", cases[i].text,
				 judge(m, cases[i].text), cases[i].want);
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
}

/* Byte by byte or all at once: the same verdicts. */
static void test_split_steps(void **state)
{
	static const char doc[] = "{\"k\xc3\xa9\":[\"\xf0\x9f\x98\x80\",-1.5]}";
	struct o1_grammar *g = compile(json_gbnf);
	struct o1_grammar_matcher *m;

	(void)state;
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	for (size_t i = 0; i + 1 < sizeof(doc); i++) {
		assert_int_equal(o1_grammar_matcher_accept_bytes(
					 m, (const uint8_t *)doc + i, 1),
				 0);
		assert_int_equal(o1_grammar_matcher_is_complete(m),
				 i + 2 == sizeof(doc));
	}
	assert_true(o1_grammar_matcher_is_terminated(m));
	assert_int_equal(feed(m, "x"), -O1_E_GRAMMAR);
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
}

static void test_ambiguity(void **state)
{
	/* both alternatives agree on "x" then split; a third stays open */
	struct o1_grammar *g = compile("root ::= a | b | c\n"
				       "a ::= \"x\" \"y\"* \"!\"\n"
				       "b ::= \"x\" \"z\"* \"!\"\n"
				       "c ::= \"x\" ( \"y\" | \"z\" )* \"?\"\n");
	struct o1_grammar_matcher *m;

	(void)state;
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	assert_int_equal(judge(m, "xyy!"), 2);
	assert_int_equal(judge(m, "xzz!"), 2);
	assert_int_equal(judge(m, "xyz?"), 2);
	assert_int_equal(judge(m, "xyz!"), 0);
	assert_int_equal(judge(m, "x"), 1);
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
}

/* Nested ?, * and + are one repetition: same language, and 40 nested
 * plus signs compile to what one does (each + used to copy its operand:
 * 2^depth states, seconds at 18). Counted repetitions stay as written. */
static void test_nested_quantifiers(void **state)
{
	static const struct {
		const char *text, *in;
		int want;
	} cases[] = {
	    {"root ::= (\"a\"?)+", "", 2},   {"root ::= (\"a\"?)+", "aaa", 2},
	    {"root ::= (\"a\"+)?", "", 2},   {"root ::= (\"a\"+)?", "aa", 2},
	    {"root ::= (\"a\"?)?", "a", 2},  {"root ::= (\"a\"?)?", "aa", 0},
	    {"root ::= (\"a\"*)+", "", 2},   {"root ::= (\"a\"+)+", "", 1},
	    {"root ::= (\"a\"{2}){2}", "aaa", 1},
	    {"root ::= (\"a\"{2}){2}", "aaaa", 2},
	    {"root ::= (\"a\"{2}){2}", "aaaaa", 0},
	};
	char deep[64] = "root ::= \"a\"";
	struct o1_grammar *one = compile("root ::= \"a\"+"), *g;
	struct o1_grammar_matcher *m;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		g = compile(cases[i].text);
		assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m),
				 0);
		if (judge(m, cases[i].in) != cases[i].want)
			fail_msg("%s on '%s': %d, not %d", cases[i].text,
				 cases[i].in, judge(m, cases[i].in),
				 cases[i].want);
		o1_grammar_matcher_destroy(m);
		o1_grammar_destroy(g);
	}
	memset(deep + strlen(deep), '+', 40);
	g = compile(deep);
	assert_int_equal(o1_grammar_n_states(g), o1_grammar_n_states(one));
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	assert_int_equal(judge(m, "aaaa"), 2);
	assert_int_equal(judge(m, ""), 1);
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
	o1_grammar_destroy(one);
}

static void test_recursion_limits(void **state)
{
	struct o1_grammar *g = compile("root ::= \"(\" root \")\" | \"x\"");
	struct o1_grammar *tail = compile("root ::= \"a\" root | \"b\"");
	struct o1_grammar_limits lim = {.max_frames = 8};
	struct o1_grammar_matcher *m;
	int rc = 0, depth = 0;

	(void)state;
	/* nesting needs a frame a level: the 9th level fails, cleanly */
	assert_int_equal(o1_grammar_matcher_create(g, NULL, &lim, &m), 0);
	while (!rc && depth < 100)
		if (!(rc = feed(m, "(")))
			depth++;
	assert_int_equal(rc, -O1_E_BOUNDS);
	assert_true(depth >= 7 && depth <= 9);
	assert_int_equal(feed(m, "x"), 0);
	for (int i = 0; i < depth; i++)
		assert_int_equal(feed(m, ")"), 0);
	assert_true(o1_grammar_matcher_is_complete(m));
	o1_grammar_matcher_destroy(m);
	/* right recursion is a tail call: no frames however long */
	assert_int_equal(o1_grammar_matcher_create(tail, NULL, &lim, &m), 0);
	for (int i = 0; i < 10000; i++)
		assert_int_equal(feed(m, "a"), 0);
	assert_int_equal(feed(m, "b"), 0);
	assert_true(o1_grammar_matcher_is_terminated(m));
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
	o1_grammar_destroy(tail);
}

static void test_stack_limit(void **state)
{
	/* 2^k stacks after k "x": p and q are both root, returning to
	 * different states */
	struct o1_grammar *g = compile("root ::= \"x\" p \"a\" | "
				       "\"x\" q \"b\" | \"y\"\n"
				       "p ::= root\nq ::= root");
	struct o1_grammar_limits lim = {.max_stacks = 16};
	struct o1_grammar_matcher *m;
	int rc = 0, n = 0;

	(void)state;
	assert_int_equal(o1_grammar_matcher_create(g, NULL, &lim, &m), 0);
	while (!rc && n < 64)
		if (!(rc = feed(m, "x")))
			n++;
	assert_int_equal(rc, -O1_E_BOUNDS);
	assert_true(n >= 3 && n <= 5);
	assert_int_equal(feed(m, "y"), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(feed(m, i % 2 ? "a" : "b"), 0);
	assert_true(o1_grammar_matcher_is_terminated(m));
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
}

static void test_rollback(void **state)
{
	static const char *steps[] = {"{\"a\"", ":", "[1", ",", "{\"b",
				      "\":", "2}", "]", "}"};
	struct o1_grammar *g = compile(json_gbnf);
	struct o1_grammar_limits lim = {.max_rollback = 4};
	struct o1_grammar_matcher *m;
	size_t n = sizeof(steps) / sizeof(steps[0]);

	(void)state;
	assert_int_equal(o1_grammar_matcher_create(g, NULL, &lim, &m), 0);
	assert_int_equal(o1_grammar_matcher_rollback(m, 1), -O1_E_BOUNDS);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(feed(m, steps[i]), 0);
	assert_true(o1_grammar_matcher_is_complete(m));
	/* the ring keeps 4 */
	assert_int_equal(o1_grammar_matcher_rollback(m, 5), -O1_E_BOUNDS);
	assert_int_equal(o1_grammar_matcher_rollback(m, 3), 0);
	assert_false(o1_grammar_matcher_is_complete(m));
	/* back at {"a":[1,{"b": a value is due; another one this time */
	assert_int_equal(feed(m, "]"), -O1_E_GRAMMAR);
	assert_int_equal(feed(m, "2,\"c\":3}"), 0);
	assert_int_equal(feed(m, "]}"), 0);
	assert_true(o1_grammar_matcher_is_terminated(m));
	/* never more than 4 at once; the 2 new steps and 2 older ones */
	assert_int_equal(o1_grammar_matcher_rollback(m, 5), -O1_E_BOUNDS);
	assert_int_equal(o1_grammar_matcher_rollback(m, 4), 0);
	assert_int_equal(feed(m, "{\"b\":2}]}"), 0);
	assert_true(o1_grammar_matcher_is_complete(m));
	/* trying steps (feed, roll back one) keeps the 4 */
	o1_grammar_matcher_reset(m);
	for (int i = 0; i < 6; i++)
		assert_int_equal(feed(m, i ? ",1" : "[1"), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(feed(m, "]"), 0);
		assert_int_equal(o1_grammar_matcher_rollback(m, 1), 0);
	}
	assert_int_equal(o1_grammar_matcher_rollback(m, 4), 0);
	assert_int_equal(feed(m, ",2]"), 0);
	assert_true(o1_grammar_matcher_is_complete(m));
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
}

/* Rolling back after frames were made and dropped leaves a matcher that
 * behaves exactly as one that never took the detour. */
static void test_rollback_frames(void **state)
{
	struct o1_grammar *g = compile(json_gbnf);
	struct o1_grammar_matcher *a, *b;
	static const char *probe[] = {"]", "}", ",", "1", "[", "{", "\"",
				      ":", "]]", "}]"};

	(void)state;
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &a), 0);
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &b), 0);
	assert_int_equal(feed(a, "[[{\"x\":[1"), 0);
	assert_int_equal(feed(b, "[[{\"x\":[1"), 0);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(feed(a, ",[{\"y\":[[{}]]}]"), 0);
		assert_int_equal(o1_grammar_matcher_rollback(a, 1), 0);
	}
	for (size_t i = 0; i < sizeof(probe) / sizeof(probe[0]); i++) {
		int ra = feed(a, probe[i]), rb = feed(b, probe[i]);

		assert_int_equal(ra, rb);
		if (!ra) {
			o1_grammar_matcher_rollback(a, 1);
			o1_grammar_matcher_rollback(b, 1);
		}
	}
	o1_grammar_matcher_destroy(a);
	o1_grammar_matcher_destroy(b);
	o1_grammar_destroy(g);
}

static void test_bad_use(void **state)
{
	struct o1_grammar *g = compile("root ::= \"a\"");
	struct o1_grammar_matcher *m;
	uint32_t mask[1];

	(void)state;
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	/* no vocabulary: no token calls, no masks */
	assert_int_equal(o1_grammar_matcher_accept_token(m, 0), -EINVAL);
	assert_int_equal(o1_grammar_matcher_fill_mask(m, mask, 1), -EINVAL);
	assert_int_equal(o1_grammar_matcher_accept_bytes(m, NULL, 0), 0);
	o1_grammar_matcher_destroy(m);
	o1_grammar_matcher_destroy(NULL);
	o1_grammar_destroy(g);
	o1_grammar_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_split_steps),
	    cmocka_unit_test(test_ambiguity),
	    cmocka_unit_test(test_nested_quantifiers),
	    cmocka_unit_test(test_recursion_limits),
	    cmocka_unit_test(test_stack_limit),
	    cmocka_unit_test(test_rollback),
	    cmocka_unit_test(test_rollback_frames),
	    cmocka_unit_test(test_bad_use),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Grammar text: every refusal grammar.h lists gives its error at the right
 * line and column (or names the rule), limits fail cleanly instead of
 * running away, and the accepted syntax compiles to what it says: literals
 * with every escape, classes with ranges and complements over code points,
 * groups, all repetition forms, comments and rules over several lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "grammar/grammar.h"

struct refusal {
	const char *text;
	int code;
	uint32_t line, col;
	const char *msg; /* a piece of the message */
};

static void check_refusal(const struct refusal *r)
{
	struct o1_grammar_error err;
	struct o1_grammar *g = (struct o1_grammar *)1;
	int rc = o1_grammar_compile(r->text, strlen(r->text), &err, &g);

	if (rc != r->code || err.line != r->line || err.col != r->col ||
	    !strstr(err.msg, r->msg))
		fail_msg("%s: got %d %u:%u '%s', want %d %u:%u '%s'", r->text,
			 rc, err.line, err.col, err.msg, r->code, r->line,
			 r->col, r->msg);
	assert_null(g);
}

static void test_syntax_errors(void **state)
{
	static const struct refusal cases[] = {
	    {"root ::= \"a", -O1_E_FORMAT, 1, 10, "unterminated string"},
	    {"root ::= \"a\nb\"", -O1_E_FORMAT, 1, 10, "unterminated string"},
	    {"root ::= [a-", -O1_E_FORMAT, 1, 10, "unterminated character"},
	    {"root ::= [z-a]", -O1_E_FORMAT, 1, 11, "reversed"},
	    {"root ::= []", -O1_E_FORMAT, 1, 10, "matches nothing"},
	    {"root ::= [^\\x00-\\U0010FFFF]", -O1_E_FORMAT, 1, 10,
	     "matches nothing"},
	    {"root ::= \"\\q\"", -O1_E_FORMAT, 1, 13, "unknown escape"},
	    {"root ::= \"\\", -O1_E_FORMAT, 1, 12, "unterminated escape"},
	    {"root ::= [\\", -O1_E_FORMAT, 1, 12, "unterminated escape"},
	    {"root ::= \"\\x4\"", -O1_E_FORMAT, 1, 14, "hex digit"},
	    {"root ::= \"\\uD800\"", -O1_E_FORMAT, 1, 11, "not a character"},
	    {"root ::= \"\\U00110000\"", -O1_E_FORMAT, 1, 11,
	     "not a character"},
	    {"root ::= \"\xc3\x28\"", -O1_E_FORMAT, 1, 11, "invalid UTF-8"},
	    {"root ::= \"\xed\xa0\x80\"", -O1_E_FORMAT, 1, 11, "invalid UTF-8"},
	    {"root ::= foo", -O1_E_FORMAT, 1, 10, "'foo' is used but not"},
	    {"root ::= \"a\"\n# again\nroot ::= \"b\"", -O1_E_FORMAT, 3, 1,
	     "defined twice (first at 1:1)"},
	    {"start ::= \"a\"", -O1_E_FORMAT, 0, 0, "no rule named root"},
	    {"", -O1_E_FORMAT, 0, 0, "no rule named root"},
	    {"root ::= ( \"a\"", -O1_E_FORMAT, 1, 10, "unclosed ("},
	    {"root ::= \"a\" )", -O1_E_FORMAT, 1, 14, "unmatched )"},
	    {"root ::= \"a\"{3,2}", -O1_E_FORMAT, 1, 13, "max below min"},
	    {"root ::= \"a\"{10001}", -O1_E_BOUNDS, 1, 18, "over 10000"},
	    {"root ::= \"a\"{2", -O1_E_FORMAT, 1, 15, "expected }"},
	    {"root ::= \"a\"{x}", -O1_E_FORMAT, 1, 14, "expected a number"},
	    {"root \"a\"", -O1_E_FORMAT, 1, 1, "expected ::="},
	    {"::= \"a\"", -O1_E_FORMAT, 1, 1, "expected a rule name"},
	    {"root ::= \"a\" %", -O1_E_FORMAT, 1, 14, "unexpected '%'"},
	    {"root ::= \"a\" @", -O1_E_FORMAT, 1, 15, "token's name in quotes"},
	    {"root ::= @x", -O1_E_FORMAT, 1, 11, "token's name in quotes"},
	    {"root ::= @\"\"", -O1_E_FORMAT, 1, 10, "name is empty"},
	    {"root ::= @\"[T", -O1_E_FORMAT, 1, 11, "unterminated string"},
	    {"root ::= \"a\" \x80", -O1_E_FORMAT, 1, 14, "unexpected byte"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_refusal(&cases[i]);
}

static void test_grammar_errors(void **state)
{
	static const struct refusal cases[] = {
	    {"root ::= root \"a\" | \"b\"", -O1_E_FORMAT, 1, 1,
	     "'root' is left recursive"},
	    {"root ::= a\na ::= b \"x\" | \"z\"\nb ::= \"y\"? a", -O1_E_FORMAT, 2, 1,
	     "left recursive"},
	    {"root ::= \"(\" root \")\"", -O1_E_FORMAT, 1, 1,
	     "'root' can never finish"},
	    {"root ::= \"x\" | a\na ::= \"[\" a \"]\"", -O1_E_FORMAT, 2, 1,
	     "'a' can never finish"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_refusal(&cases[i]);
}

static int compile_text(const char *text, struct o1_grammar_error *err,
			struct o1_grammar **g)
{
	return o1_grammar_compile(text, strlen(text), err, g);
}

static void test_limits(void **state)
{
	struct o1_grammar_error err;
	struct o1_grammar *g;
	char deep[700];
	int rc;

	(void)state;
	/* nesting past the limit */
	memset(deep, 0, sizeof(deep));
	strcpy(deep, "root ::= ");
	for (int i = 0; i < 300; i++)
		strcat(deep, "(");
	rc = o1_grammar_compile(deep, strlen(deep), &err, &g);
	assert_int_equal(rc, -O1_E_FORMAT);
	assert_non_null(strstr(err.msg, "nested too deeply"));
	/* repetitions that multiply past the NFA limit */
	rc = compile_text("root ::= (([a-z]{100}){100}){200}", &err, &g);
	assert_int_equal(rc, -O1_E_BOUNDS);
	assert_non_null(strstr(err.msg, "too large"));
	/* the classic exponential DFA: the 25th byte from the end is "a" */
	rc = compile_text("root ::= [ab]* \"a\" [ab]{24}", &err, &g);
	assert_int_equal(rc, -O1_E_BOUNDS);
	assert_non_null(strstr(err.msg, "too large"));
	/* a chain of 20000 rules compiles (no recursion over the chain) */
	{
		size_t cap = 20000 * 40, n = 0;
		char *text = malloc(cap);

		assert_non_null(text);
		n += (size_t)sprintf(text + n, "root ::= r0\n");
		for (int i = 0; i < 20000; i++)
			n += (size_t)sprintf(text + n, "r%d ::= \"x\" r%d\n", i,
					     i + 1);
		n += (size_t)sprintf(text + n, "r20000 ::= \"y\"\n");
		rc = o1_grammar_compile(text, n, &err, &g);
		assert_int_equal(rc, 0);
		o1_grammar_destroy(g);
		free(text);
	}
}

/* TEXT compiled; each of the NUL-separated strings in YES must be a whole
 * sentence, none in NO a prefix of one. */
static void check_language(const char *text, const char *const *yes,
			   const char *const *no)
{
	struct o1_grammar_error err;
	struct o1_grammar *g;
	struct o1_grammar_matcher *m;
	int rc = o1_grammar_compile(text, strlen(text), &err, &g);

	if (rc)
		fail_msg("%s: %u:%u %s", text, err.line, err.col, err.msg);
	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	for (; yes && *yes; yes++) {
		o1_grammar_matcher_reset(m);
		rc = o1_grammar_matcher_accept_bytes(
			m, (const uint8_t *)*yes, strlen(*yes));
		if (rc || !o1_grammar_matcher_is_complete(m))
			fail_msg("%s: '%s' refused (%d)", text, *yes, rc);
	}
	for (; no && *no; no++) {
		o1_grammar_matcher_reset(m);
		rc = o1_grammar_matcher_accept_bytes(m, (const uint8_t *)*no,
						     strlen(*no));
		if (rc != -O1_E_GRAMMAR)
			fail_msg("%s: '%s' accepted", text, *no);
	}
	o1_grammar_matcher_destroy(m);
	o1_grammar_destroy(g);
}

static void test_syntax_accepted(void **state)
{
	(void)state;
	check_language("root ::= \"a\\n\\t\\r\\\\\\\"\\x41\\u00e9\\U0001F600\"",
		       (const char *[]){"a\n\t\r\\\"A\xc3\xa9\xf0\x9f\x98\x80",
					NULL},
		       (const char *[]){"b", NULL});
	check_language("root ::= [a-c\\]\\-x]+",
		       (const char *[]){"abc", "]", "-", "x", NULL},
		       (const char *[]){"d", "\\", NULL});
	check_language("root ::= [^a-z]",
		       (const char *[]){"A", "\xc3\xa9", "\xf4\x8f\xbf\xbf",
					NULL},
		       (const char *[]){"a", "\xed\xa0\x80", "\xc0\x80", NULL});
	check_language("root ::= . .",
		       (const char *[]){"ab", "\xe2\x82\xac\xf0\x9f\x98\x80",
					NULL},
		       (const char *[]){"\xff", "\xf5\x80", NULL});
	check_language("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"? \"e\"*",
		       (const char *[]){"aab", "aabbbccdeee", "aabc", NULL},
		       (const char *[]){"ab", "aabccc", "aabdd", NULL});
	check_language("# comment\nroot ::=\n  x # trailing\n  | \"b\"\n"
		       "x ::= ( \"a\" | \"c\" ) ( ) \"\"",
		       (const char *[]){"a", "b", "c", NULL},
		       (const char *[]){"d", NULL});
	check_language("root ::= a-b_c9\na-b_c9 ::= \"k\"",
		       (const char *[]){"k", NULL}, NULL);
	/* a control token is 0xFF NAME 0xFF: never its text spelled out */
	check_language("root ::= @\"[TOOL_CALLS]\" \"x\" | \"y\"",
		       (const char *[]){"\xff[TOOL_CALLS]\xffx", "y", NULL},
		       (const char *[]){"[TOOL_CALLS]x", "\xff[TOOL_CALLS]x",
					"\xff[TOOL_CALLS]\xffy", NULL});
	/* a rule nobody calls is checked but not compiled */
	check_language("root ::= \"a\"\nunused ::= \"b\"",
		       (const char *[]){"a", NULL}, (const char *[]){"b", NULL});
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_syntax_errors),
	    cmocka_unit_test(test_grammar_errors),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_syntax_accepted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

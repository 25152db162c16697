/* Tool calls as grammars (grammar_tools.h): for each format, calls that
 * o1_tool_calls_parse reads back as the right call are accepted whole,
 * and calls of an unknown tool, without a required argument or with an
 * argument of the wrong type are refused; bad tools lists fail with
 * their place named. The parser is the outside judge here: whatever the
 * grammar lets through must read back as a call. On a vocabulary where
 * [TOOL_CALLS] is a control token (Mistral v3's shape), the grammar takes
 * that one token for the marker and never its text spelled out. */
#include <errno.h>
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
#include "grammar/grammar_tokenizer.h"
#include "grammar/grammar_tools.h"
#include "tests/tokenizer/tok_fixture_mistral.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tool_call.h"

static const char tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"Weather\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"enum\":"
    "[\"c\",\"f\"]},\"days\":{\"type\":\"integer\"}},\"required\":"
    "[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"tree\",\"parameters\":"
    "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"kids\":"
    "{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}}}},"
    "\"type\":\"object\",\"properties\":{\"root\":{\"$ref\":"
    "\"#/$defs/n\"}},\"required\":[\"root\"]}}}]";

static struct o1_grammar *compile(enum o1_tool_format f, const char *t)
{
	struct o1_grammar_error err;
	struct o1_grammar *g = NULL;
	int rc = o1_grammar_compile_tools(f, t, strlen(t), &err, &g);

	if (rc)
		fprintf(stderr, "compile: %d %s\n", rc, err.msg);
	assert_int_equal(rc, 0);
	return g;
}

static bool accepts(const struct o1_grammar *g, const char *s)
{
	struct o1_grammar_matcher *m;
	bool ok;

	assert_int_equal(o1_grammar_matcher_create(g, NULL, NULL, &m), 0);
	ok = o1_grammar_matcher_accept_bytes(m, (const uint8_t *)s,
					     strlen(s)) == 0 &&
	     o1_grammar_matcher_is_complete(m);
	o1_grammar_matcher_destroy(m);
	return ok;
}

/* S is accepted and reads back as the call NAME(ARGS), ARGS compact. */
static void call_ok(enum o1_tool_format f, const struct o1_grammar *g,
		    const char *s, const char *name, const char *args)
{
	struct o1_tool_calls tc = {0};
	cJSON *list = cJSON_Parse(tools);

	if (!accepts(g, s))
		fail_msg("refused: %s", s);
	assert_int_equal(o1_tool_calls_parse(f, s, strlen(s), list, &tc), 0);
	assert_int_equal(tc.n, 1);
	assert_string_equal(tc.calls[0].name, name);
	assert_string_equal(tc.calls[0].arguments, args);
	assert_string_equal(tc.content, "");
	o1_tool_calls_fini(&tc);
	cJSON_Delete(list);
}

static void refused(const struct o1_grammar *g, const char *s)
{
	if (accepts(g, s))
		fail_msg("accepted: %s", s);
}

static void test_hermes(void **state)
{
	struct o1_grammar *g = compile(O1_TOOL_HERMES, tools);

	(void)state;
	call_ok(O1_TOOL_HERMES, g,
		"<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
		"{\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>",
		"get_weather", "{\"city\":\"Paris\",\"unit\":\"c\"}");
	call_ok(O1_TOOL_HERMES, g,
		"<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n"
		"</tool_call>",
		"now", "{}");
	call_ok(O1_TOOL_HERMES, g,
		"<tool_call>\n{\"name\":\"tree\",\"arguments\":{\"root\":"
		"{\"kids\":[{\"kids\":[]}]}}}\n</tool_call>",
		"tree", "{\"root\":{\"kids\":[{\"kids\":[]}]}}");
	refused(g, "<tool_call>\n{\"name\":\"now\",\"arguments\":"
		   "{}}\n</tool_call>\n<tool_call>\n{\"name\":"
		   "\"now\",\"arguments\":{}}\n</tool_call>"); /* one call */
	refused(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
		   "{\"unit\":\"c\"}}\n</tool_call>"); /* city required */
	refused(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
		   "{\"city\":\"P\",\"unit\":\"k\"}}\n</tool_call>");
	refused(g, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":"
		   "{\"city\":\"P\",\"days\":1.5}}\n</tool_call>");
	refused(g, "<tool_call>\n{\"name\":\"rm\",\"arguments\":{}}\n"
		   "</tool_call>");
	refused(g, "{\"name\":\"now\",\"arguments\":{}}");
	refused(g, "");
	o1_grammar_destroy(g);
}

static void test_llama3(void **state)
{
	struct o1_grammar *g = compile(O1_TOOL_LLAMA3_JSON, tools);

	(void)state;
	call_ok(O1_TOOL_LLAMA3_JSON, g,
		"{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Oslo\","
		"\"days\":3}}",
		"get_weather", "{\"city\":\"Oslo\",\"days\":3}");
	refused(g, "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"O\"}}");
	refused(g, "{\"name\":\"now\",\"parameters\":{},\"x\":1}");
	o1_grammar_destroy(g);
}

static void test_mistral(void **state)
{
	struct o1_grammar *g = compile(O1_TOOL_MISTRAL, tools);

	(void)state;
	call_ok(O1_TOOL_MISTRAL, g,
		"[TOOL_CALLS][{\"name\":\"get_weather\",\"arguments\":"
		"{\"city\":\"Rome\"}}]",
		"get_weather", "{\"city\":\"Rome\"}");
	refused(g, "[TOOL_CALLS][{\"name\":\"now\",\"arguments\":"
		   "{}},{\"name\":\"now\",\"arguments\":{}}]");
	refused(g, "[TOOL_CALLS][]");
	refused(g, "[{\"name\":\"now\",\"arguments\":{}}]");
	o1_grammar_destroy(g);
}

static void test_xml(void **state)
{
	struct o1_grammar *g = compile(O1_TOOL_XML, tools);

	(void)state;
	call_ok(O1_TOOL_XML, g,
		"<tool_call>\n<function=get_weather>\n<parameter=city>\n"
		"New York\n</parameter>\n<parameter=unit>\nf\n</parameter>\n"
		"<parameter=days>\n-2\n</parameter>\n</function>\n"
		"</tool_call>",
		"get_weather", "{\"city\":\"New York\",\"unit\":\"f\",\"days\":-2}");
	call_ok(O1_TOOL_XML, g,
		"<tool_call>\n<function=now>\n</function>\n</tool_call>", "now",
		"{}");
	refused(g, "<tool_call>\n<function=get_weather>\n</function>\n"
		   "</tool_call>"); /* city required */
	refused(g, "<tool_call>\n<function=get_weather>\n<parameter=city>\n"
		   "x\n</parameter>\n<parameter=days>\nmany\n</parameter>\n"
		   "</function>\n</tool_call>");
	refused(g, "<tool_call>\n<function=rm>\n</function>\n</tool_call>");
	o1_grammar_destroy(g);
}

/* Bad lists fail with their place named; no format, no grammar. */
static void test_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "{}",
	    "[]",
	    "[1]",
	    "[{\"type\":\"function\"}]",
	    "[{\"type\":\"retrieval\",\"function\":{\"name\":\"x\"}}]",
	    "[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]",
	    "[{\"type\":\"function\",\"function\":{\"name\":7}}]",
	    "[{\"type\":\"function\",\"function\":{\"name\":\"x\","
	    "\"parameters\":[]}}]",
	    "[{\"function\":{\"name\":\"x\",\"parameters\":{\"type\":"
	    "\"object\",\"properties\":{\"a\":{\"not\":{}}}}}}]",
	};
	struct o1_grammar_error err;
	struct o1_grammar *g;
	char *text;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = o1_grammar_compile_tools(O1_TOOL_HERMES, bad[i],
						  strlen(bad[i]), &err, &g);

		if (rc != -O1_E_FORMAT && rc != -O1_E_UNSUPPORTED)
			fail_msg("%s: %d", bad[i], rc);
		assert_null(g);
		assert_true(err.msg[0] != 0);
	}
	assert_int_equal(o1_grammar_compile_tools(O1_TOOL_HERMES, bad[9],
						  strlen(bad[9]), &err, &g),
			 -O1_E_UNSUPPORTED);
	assert_non_null(strstr(err.msg, "not"));
	assert_int_equal(o1_grammar_from_tools(O1_TOOL_NONE, tools,
					       strlen(tools), &err, &text, &n),
			 -O1_E_UNSUPPORTED);
	assert_null(text);
}

/* The XML format reads properties and required itself (no schema
 * compiler on its path): a properties member that is not an object is
 * refused, not walked as if it had names. */
static void test_xml_bad(void **state)
{
	static const char *const bad[] = {
	    "[{\"function\":{\"name\":\"x\",\"parameters\":{"
	    "\"properties\":[{\"type\":\"string\"}]}}}]",
	    "[{\"function\":{\"name\":\"x\",\"parameters\":{"
	    "\"properties\":[{}],\"required\":[\"a\"]}}}]",
	    "[{\"function\":{\"name\":\"x\",\"parameters\":{"
	    "\"properties\":\"a\"}}}]",
	};
	struct o1_grammar_error err;
	struct o1_grammar *g;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(o1_grammar_compile_tools(O1_TOOL_XML, bad[i],
							  strlen(bad[i]), &err,
							  &g),
				 -O1_E_FORMAT);
		assert_null(g);
		assert_non_null(strstr(err.msg, "properties"));
	}
}

/* Tools whose calls are finite (enums, no extra members), so greedy
 * decoding under the grammar ends whatever the model prefers. */
static const char small_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"set_unit\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"unit\":{\"enum\":"
    "[\"celsius\",\"fahrenheit\"]}},\"required\":[\"unit\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"mode\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"on\":{\"type\":"
    "\"boolean\"}},\"required\":[\"on\"],\"additionalProperties\":false}}}]";

struct mistral {
	struct o1_vocab *v;
	struct o1_tokenizer *tok;
	struct o1_grammar_vocab *gv;
};

static void mistral_open(struct mistral *m)
{
	assert_int_equal(tok_fixture_mistral_v3(&m->v), 0);
	assert_int_equal(o1_tokenizer_create(m->v, &m->tok), 0);
	assert_int_equal(o1_grammar_vocab_from_tokenizer(m->tok, &m->gv), 0);
}

static void mistral_close(struct mistral *m)
{
	o1_grammar_vocab_destroy(m->gv);
	o1_tokenizer_destroy(m->tok);
	o1_vocab_destroy(m->v);
}

static bool allowed(const uint32_t *mask, int32_t id)
{
	return mask[id / 32] >> (id % 32) & 1u;
}

static uint32_t n_allowed(const uint32_t *mask, uint32_t words)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < words; i++)
		n += (uint32_t)__builtin_popcount(mask[i]);
	return n;
}

/* A random model's fixed preference for token ID (a hash of it). */
static uint32_t pref(int32_t id)
{
	uint32_t x = (uint32_t)id * 2654435761u + 0x9e3779b9u;

	x ^= x >> 15;
	x *= 2246822519u;
	return x ^ (x >> 13);
}

/* Greedy decoding under G on M's vocabulary: each step the allowed token
 * the model prefers, until an end token. Writes the ids (the end token
 * left out) to IDS and the first step's mask to FIRST; returns how many. */
static size_t generate(const struct mistral *m, const struct o1_grammar *g,
		       int32_t *ids, size_t cap, uint32_t *first)
{
	struct o1_grammar_tokens *t;
	struct o1_grammar_matcher *mt;
	uint32_t words = o1_grammar_mask_words(m->gv), n_tok;
	uint32_t *mask = calloc(words, sizeof(*mask));
	size_t n = 0;

	n_tok = o1_grammar_vocab_size(m->gv);
	assert_non_null(mask);
	assert_int_equal(o1_grammar_tokens_create(g, m->gv, 1, &t), 0);
	assert_int_equal(o1_grammar_matcher_create(g, t, NULL, &mt), 0);
	for (;;) {
		int32_t best = -1;
		int rc;

		assert_true(n < cap);
		assert_int_equal(o1_grammar_matcher_fill_mask(mt, mask, words),
				 0);
		if (!n)
			memcpy(first, mask, words * sizeof(*mask));
		for (uint32_t id = 0; id < n_tok; id++)
			if (allowed(mask, (int32_t)id) &&
			    (best < 0 || pref((int32_t)id) > pref(best)))
				best = (int32_t)id;
		assert_true(best >= 0);
		rc = o1_grammar_matcher_accept_token(mt, best);
		assert_true(rc == 0 || rc == 1);
		if (rc == 1)
			break;
		ids[n++] = best;
	}
	o1_grammar_matcher_destroy(mt);
	o1_grammar_tokens_destroy(t);
	free(mask);
	return n;
}

/* IDS decoded as the client gets them (markers kept) and read back: one
 * call of a tool of small_tools, no other text. */
static void reads_back(const struct mistral *m, const int32_t *ids, size_t n)
{
	struct o1_tool_calls tc = {0};
	cJSON *list = cJSON_Parse(small_tools);
	char text[1024];
	int len = o1_tokenizer_decode(m->tok, ids, n,
				      O1_DECODE_SKIP_SPECIAL |
					  O1_DECODE_KEEP_TOOL_MARKERS,
				      text, sizeof(text));

	assert_true(len > 0 && (size_t)len < sizeof(text));
	assert_int_equal(
	    o1_tool_calls_parse(O1_TOOL_MISTRAL, text, (size_t)len, list, &tc),
	    0);
	if (tc.n != 1)
		fail_msg("not one call: %s", text);
	assert_true(!strcmp(tc.calls[0].name, "set_unit") ||
		    !strcmp(tc.calls[0].name, "mode"));
	assert_string_equal(tc.content, "");
	o1_tool_calls_fini(&tc);
	cJSON_Delete(list);
}

/* The vocabulary: the markers are control tokens the grammar can name
 * (by their text), other control tokens ignored, </s> the end, and the
 * byte token 0xFF never allowed (it could spell a named token). */
static void test_mistral_vocab(void **state)
{
	struct mistral m;
	uint32_t len;
	const uint8_t *b;

	(void)state;
	mistral_open(&m);
	assert_int_equal(o1_grammar_vocab_kind(m.gv, TOK_MISTRAL_CALLS),
			 O1_GRAMMAR_TOKEN_CONTROL);
	assert_int_equal(o1_grammar_vocab_kind(m.gv, TOK_MISTRAL_ARGS),
			 O1_GRAMMAR_TOKEN_CONTROL);
	assert_int_equal(o1_grammar_vocab_kind(m.gv, 3 /* [INST] */),
			 O1_GRAMMAR_TOKEN_IGNORE);
	assert_int_equal(o1_grammar_vocab_kind(m.gv, TOK_MISTRAL_EOS),
			 O1_GRAMMAR_TOKEN_END);
	assert_int_equal(o1_grammar_vocab_kind(m.gv, TOK_MISTRAL_BYTE(0xff)),
			 O1_GRAMMAR_TOKEN_IGNORE);
	assert_int_equal(o1_grammar_vocab_kind(m.gv, TOK_MISTRAL_BYTE(0xfe)),
			 O1_GRAMMAR_TOKEN_TEXT);
	b = o1_grammar_vocab_token(m.gv, TOK_MISTRAL_CALLS, &len);
	assert_int_equal(len, 12);
	assert_memory_equal(b, "[TOOL_CALLS]", 12);
	assert_int_equal(o1_grammar_vocab_control(m.gv, "[TOOL_CALLS]", 12),
			 TOK_MISTRAL_CALLS);
	assert_int_equal(o1_grammar_vocab_control(m.gv, "[TOOL_CALLS", 11), -1);
	assert_int_equal(o1_grammar_vocab_control(m.gv, "[INST]", 6), -1);
	mistral_close(&m);
}

/* tool_choice required on Mistral v3's vocabulary: the first step allows
 * the control token [TOOL_CALLS] and nothing else (not the '[' that
 * would spell it), the generation reads back as a call, and it is 11
 * tokens shorter than under the grammar that spells the marker out (the
 * form for a vocabulary without the token: 12 byte tokens here). */
static void test_mistral_control_marker(void **state)
{
	struct mistral m;
	struct o1_grammar_error err;
	struct o1_grammar *gc, *gs;
	int32_t ctl[512], spelled[512];
	uint32_t words, *first;
	size_t n_ctl, n_spelled, len;
	char *text;

	(void)state;
	mistral_open(&m);
	words = o1_grammar_mask_words(m.gv);
	first = calloc(words, sizeof(*first));
	assert_non_null(first);
	assert_int_equal(o1_grammar_from_tools_for(O1_TOOL_MISTRAL, small_tools,
						   strlen(small_tools), m.gv,
						   &err, &text, &len),
			 0);
	assert_non_null(strstr(text, "root ::= @\"[TOOL_CALLS]\" "));
	free(text);
	assert_int_equal(
	    o1_grammar_compile_tools_for(O1_TOOL_MISTRAL, small_tools,
					 strlen(small_tools), m.gv, &err, &gc),
	    0);
	assert_int_equal(o1_grammar_compile_tools(O1_TOOL_MISTRAL, small_tools,
						  strlen(small_tools), &err,
						  &gs),
			 0);

	n_ctl = generate(&m, gc, ctl, 512, first);
	assert_true(allowed(first, TOK_MISTRAL_CALLS));
	assert_false(allowed(first, TOK_MISTRAL_BYTE('[')));
	assert_int_equal(n_allowed(first, words), 1);
	assert_int_equal(ctl[0], TOK_MISTRAL_CALLS);
	for (size_t i = 1; i < n_ctl; i++)
		assert_int_not_equal(ctl[i], TOK_MISTRAL_CALLS);
	reads_back(&m, ctl, n_ctl);

	n_spelled = generate(&m, gs, spelled, 512, first);
	assert_false(allowed(first, TOK_MISTRAL_CALLS));
	assert_true(allowed(first, TOK_MISTRAL_BYTE('[')));
	reads_back(&m, spelled, n_spelled);
	assert_int_equal(n_spelled - n_ctl, 11);
	assert_memory_equal(ctl + 1, spelled + 12, (n_ctl - 1) * sizeof(*ctl));

	/* a token the grammar does not name stays out: [ARGS] is never
	 * allowed, and the control token is refused as the second token */
	{
		struct o1_grammar_tokens *t;
		struct o1_grammar_matcher *mt;

		assert_int_equal(o1_grammar_tokens_create(gc, m.gv, 1, &t), 0);
		assert_int_equal(o1_grammar_matcher_create(gc, t, NULL, &mt),
				 0);
		assert_int_equal(
		    o1_grammar_matcher_accept_token(mt, TOK_MISTRAL_ARGS),
		    -O1_E_GRAMMAR);
		assert_int_equal(
		    o1_grammar_matcher_accept_token(mt, TOK_MISTRAL_BYTE('[')),
		    -O1_E_GRAMMAR);
		assert_int_equal(
		    o1_grammar_matcher_accept_token(mt, TOK_MISTRAL_CALLS), 0);
		assert_int_equal(
		    o1_grammar_matcher_accept_token(mt, TOK_MISTRAL_CALLS),
		    -O1_E_GRAMMAR);
		o1_grammar_matcher_destroy(mt);
		o1_grammar_tokens_destroy(t);
	}
	o1_grammar_destroy(gc);
	o1_grammar_destroy(gs);
	free(first);
	mistral_close(&m);
}

/* A grammar that does not name a control token never allows it, even
 * where its text would fit; a name the vocabulary lacks matches nothing. */
static void test_mistral_unnamed(void **state)
{
	static const char any[] = "root ::= [^x]{1,40}";
	static const char hermes[] = "root ::= @\"<tool_call>\" \"a\" | \"b\"";
	struct mistral m;
	struct o1_grammar *g;
	struct o1_grammar_tokens *t;
	struct o1_grammar_matcher *mt;
	uint32_t words, *mask;

	(void)state;
	mistral_open(&m);
	words = o1_grammar_mask_words(m.gv);
	mask = calloc(words, sizeof(*mask));
	assert_non_null(mask);
	assert_int_equal(o1_grammar_compile(any, strlen(any), NULL, &g), 0);
	assert_int_equal(o1_grammar_tokens_create(g, m.gv, 1, &t), 0);
	assert_int_equal(o1_grammar_matcher_create(g, t, NULL, &mt), 0);
	assert_int_equal(o1_grammar_matcher_fill_mask(mt, mask, words), 0);
	assert_true(allowed(mask, TOK_MISTRAL_BYTE('[')));
	for (int32_t id = 1; id < TOK_MISTRAL_N_CONTROLS; id++) /* <unk>
								 * is text */
		if (allowed(mask, id))
			fail_msg("control token %d allowed (kind %d)", id,
				 o1_grammar_vocab_kind(m.gv, (uint32_t)id));
	assert_int_equal(o1_grammar_matcher_accept_token(mt, TOK_MISTRAL_CALLS),
			 -O1_E_GRAMMAR);
	o1_grammar_matcher_destroy(mt);
	o1_grammar_tokens_destroy(t);
	o1_grammar_destroy(g);

	/* no <tool_call> control token here: only "b" can start */
	assert_int_equal(o1_grammar_compile(hermes, strlen(hermes), NULL, &g),
			 0);
	assert_int_equal(o1_grammar_tokens_create(g, m.gv, 1, &t), 0);
	assert_int_equal(o1_grammar_matcher_create(g, t, NULL, &mt), 0);
	assert_int_equal(o1_grammar_matcher_fill_mask(mt, mask, words), 0);
	assert_int_equal(n_allowed(mask, words), 1);
	assert_true(allowed(mask, TOK_MISTRAL_BYTE('b')));
	o1_grammar_matcher_destroy(mt);
	o1_grammar_tokens_destroy(t);
	o1_grammar_destroy(g);

	/* and the tools grammar spells a marker the vocabulary lacks */
	{
		struct o1_grammar_error err;
		char *text;
		size_t len;

		assert_int_equal(
		    o1_grammar_from_tools_for(O1_TOOL_HERMES, small_tools,
					      strlen(small_tools), m.gv, &err,
					      &text, &len),
		    0);
		assert_non_null(strstr(text, "root ::= \"<tool_call>\" "));
		assert_null(strchr(text, '@') ? strstr(text, "@\"") : NULL);
		free(text);
	}
	free(mask);
	mistral_close(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hermes),
	    cmocka_unit_test(test_llama3),
	    cmocka_unit_test(test_mistral),
	    cmocka_unit_test(test_xml),
	    cmocka_unit_test(test_bad),
	    cmocka_unit_test(test_xml_bad),
	    cmocka_unit_test(test_mistral_vocab),
	    cmocka_unit_test(test_mistral_control_marker),
	    cmocka_unit_test(test_mistral_unnamed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

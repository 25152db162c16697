/* Tool calls through the sequence output stream with a vocabulary whose
 * tool-call markers are control tokens (Mistral v3 and later: [TOOL_CALLS]
 * and [ARGS] are "special" in tokenizer.json). The tokenizer is loaded
 * from a small tokenizer.json written here in Mistral's shape
 * (SentencePiece, byte fallback, control tokens 0..9, the bytes after);
 * canned answers go in as token ids ([TOOL_CALLS], then the call's text
 * encoded, then </s>), and the text the stream sends is read back with
 * the Mistral reader, as the client does: a chat request in JSON (the
 * form tools come in) gets its calls, with the markers in the text; any
 * other request still gets no control token's text.
 */
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
#include <unistd.h>

#include "o1d/seq_output.h"
#include "tests/tokenizer/tok_fixture_mistral.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tool_call.h"

#define ANSWER_CAP 64

#define ID_EOS	   TOK_MISTRAL_EOS
#define ID_CALLS   TOK_MISTRAL_CALLS
#define ID_ARGS	   TOK_MISTRAL_ARGS
#define ID_SPACE   TOK_MISTRAL_SPACE
#define N_CONTROLS TOK_MISTRAL_N_CONTROLS

struct fix {
	struct o1_vocab *v;
	struct o1_tokenizer *tok;
	struct o1_req *r;
	struct o1_seq_output o;
	char answer[ANSWER_CAP + 1];
	uint32_t pos;
	char text[4096];
	uint32_t n_text;
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	if (!f || tok_fixture_mistral_v3(&f->v) ||
	    o1_tokenizer_create(f->v, &f->tok))
		return -1;
	f->r = calloc(1, sizeof(*f->r));
	if (!f->r)
		return -1;
	f->r->req_id = 22;
	o1_seq_output_init(&f->o, f->answer, ANSWER_CAP);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	o1_tokenizer_destroy(f->tok);
	o1_vocab_destroy(f->v);
	free(f->r);
	free(f);
	return 0;
}

static void drain(struct fix *f)
{
	struct o1_req *r = f->r;
	uint32_t head = atomic_load(&r->out_head);
	uint32_t tail = atomic_load(&r->out_tail);

	for (; tail != head; tail++) {
		const union o1_wire_entry *e =
		    &r->out[tail & (O1_REQ_OUT_ENTRIES - 1)];

		if (e->token.op != O1_EV_TOKEN)
			continue;
		assert_true(f->n_text + e->token.text_len <= sizeof(f->text));
		memcpy(f->text + f->n_text, e->token.text, e->token.text_len);
		f->n_text += e->token.text_len;
	}
	atomic_store(&r->out_tail, tail);
}

static enum o1_seq_verdict feed(struct fix *f, int32_t id,
				enum o1_sampler_end end)
{
	struct o1_sampler_out smp = {.id = id, .end = end};
	struct o1_seq_token t = {.smp = &smp, .pos = f->pos++};
	enum o1_finish_reason why;
	enum o1_seq_verdict v;

	assert_true(o1_seq_output_room(&f->o));
	v = o1_seq_output_token(&f->o, &t, &why);
	drain(f);
	return v;
}

/* Feeds S's tokens (encoded as text, specials not parsed: the markers
 * come as ids), less the dummy prefix space the encoder puts first: a
 * continuation has none. */
static void feed_text(struct fix *f, const char *s)
{
	int32_t ids[512];
	int n = o1_tokenizer_encode(f->tok, s, strlen(s), 0, ids, 512);

	assert_true(n > 1 && n <= 512);
	assert_int_equal(ids[0], ID_SPACE);
	for (int i = 1; i < n; i++) {
		assert_true(ids[i] >= N_CONTROLS);
		assert_int_equal(feed(f, ids[i], O1_SAMPLER_CONTINUE),
				 O1_SEQ_GO);
	}
}

static void start(struct fix *f, uint16_t flags)
{
	f->r->params.flags = flags;
	o1_seq_output_start(&f->o, f->r, f->tok, 0);
	o1_seq_output_prompt(&f->o, 5);
}

static void end(struct fix *f)
{
	assert_int_equal(feed(f, ID_EOS, O1_SAMPLER_END_EOS), O1_SEQ_ENDED);
}

static void assert_call(const struct fix *f, const char *name, const char *args,
			const char *content)
{
	struct o1_tool_calls tc = {0};

	assert_int_equal(
	    o1_tool_calls_parse(O1_TOOL_MISTRAL, f->text, f->n_text, NULL, &tc),
	    0);
	assert_int_equal(tc.n, 1);
	assert_string_equal(tc.calls[0].name, name);
	assert_string_equal(tc.calls[0].arguments, args);
	assert_string_equal(tc.content, content);
	o1_tool_calls_fini(&tc);
}

static void assert_text(const struct fix *f, const char *want)
{
	assert_int_equal(f->n_text, strlen(want));
	assert_memory_equal(f->text, want, f->n_text);
}

/* The vocabulary is as meant: the markers are control tokens, so encoding
 * the text does not make them and decoding skips them by default. */
static void test_vocab(void **state)
{
	struct fix *f = *state;
	int32_t ids[32];

	assert_int_equal(o1_tokenizer_find(f->tok, "[TOOL_CALLS]", 12),
			 ID_CALLS);
	assert_true(o1_tokenizer_is_special(f->tok, ID_CALLS));
	assert_true(o1_tokenizer_is_special(f->tok, ID_ARGS));
	assert_int_equal(
	    o1_tokenizer_encode(f->tok, "[TOOL_CALLS]", 12, 0, ids, 32),
	    13); /* U+2581 and the twelve bytes */
}

/* [TOOL_CALLS][{"name": ..., "arguments": {...}}] as ids: the chat
 * request in JSON reads one call back. */
static void test_calls_list(void **state)
{
	struct fix *f = *state;

	start(f, O1_SUBMIT_CHAT | O1_SUBMIT_CHAT_JSON);
	assert_int_equal(feed(f, ID_CALLS, O1_SAMPLER_CONTINUE), O1_SEQ_GO);
	feed_text(f, "[{\"name\": \"get_weather\", \"arguments\": "
		     "{\"city\": \"Paris\"}}]");
	end(f);
	assert_call(f, "get_weather", "{\"city\":\"Paris\"}", "");
}

/* v11's form, [TOOL_CALLS]NAME[ARGS]{...}, both markers control tokens,
 * after some text: the text is the content. */
static void test_calls_args(void **state)
{
	struct fix *f = *state;

	start(f, O1_SUBMIT_CHAT | O1_SUBMIT_CHAT_JSON);
	feed_text(f, "Let me look.");
	assert_int_equal(feed(f, ID_CALLS, O1_SAMPLER_CONTINUE), O1_SEQ_GO);
	feed_text(f, "get_weather");
	assert_int_equal(feed(f, ID_ARGS, O1_SAMPLER_CONTINUE), O1_SEQ_GO);
	feed_text(f, "{\"city\": \"Oslo\"}");
	end(f);
	assert_call(f, "get_weather", "{\"city\":\"Oslo\"}", "Let me look.");
}

/* Other control tokens stay silent in a request with tools (</s> ended
 * it above; [INST] in the middle here), and a request without tools
 * gets no marker text at all, as before. */
static void test_other_controls(void **state)
{
	struct fix *f = *state;

	start(f, O1_SUBMIT_CHAT | O1_SUBMIT_CHAT_JSON);
	feed_text(f, "a");
	assert_int_equal(feed(f, 3, O1_SAMPLER_CONTINUE), O1_SEQ_GO);
	feed_text(f, "b");
	end(f);
	assert_text(f, "ab");

	f->n_text = 0;
	start(f, O1_SUBMIT_CHAT);
	assert_int_equal(feed(f, ID_CALLS, O1_SAMPLER_CONTINUE), O1_SEQ_GO);
	feed_text(f, "[]");
	end(f);
	assert_text(f, "[]");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_vocab, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_calls_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_calls_args, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_controls, setup,
					    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

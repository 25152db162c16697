/* The sequence output stream, fed tokens directly (no scheduler, no
 * backend): a character split across tokens comes out whole; text is cut
 * into TOKEN events at character boundaries only; a stop string spanning
 * tokens ends the stream without its text, while text that only looked
 * like its start is released; the end of the stream releases what is
 * held; EOS and stop ids send no text of their own; max_tokens and a full
 * context end it (LENGTH); each event's fields (ids, logprobs, entropy,
 * device rows, alternatives, rounds, the FINAL's counts and confidence)
 * are those of the tokens fed. The tokenizer is the byte-level BPE
 * fixture: ids 0..255 are the bytes themselves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "o1d/refine.h"
#include "o1d/seq_output.h"
#include "tests/tokenizer/tok_fixture.h"
#include "tokenizer/tokenizer.h"

#define ANSWER_CAP 64
#define MAX_EVS	   O1_REQ_OUT_ENTRIES

struct fix {
	struct o1_vocab *v;
	struct o1_tokenizer *tok;
	struct o1_req *r;
	struct o1_seq_output o;
	char answer[ANSWER_CAP + 1];
	uint32_t pos; /* tokens fed */
	/* the events drained so far */
	union o1_wire_entry ev[MAX_EVS];
	uint32_t n_ev;
	char text[4096]; /* TOKEN text, concatenated */
	uint32_t n_text;
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	if (!f || tok_fixture_bpe("gpt2", false, &f->v) ||
	    o1_tokenizer_create(f->v, &f->tok))
		return -1;
	f->r = calloc(1, sizeof(*f->r));
	if (!f->r)
		return -1;
	f->r->req_id = 77;
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

/* Adds stop string S to the request (u8 length, bytes). */
static void add_stop(struct fix *f, const char *s)
{
	size_t n = strlen(s);

	f->r->stop_str[f->r->stop_str_bytes] = (uint8_t)n;
	memcpy(f->r->stop_str + f->r->stop_str_bytes + 1, s, n);
	f->r->stop_str_bytes += 1 + (uint32_t)n;
	f->r->n_stop_str++;
}

static void start(struct fix *f, uint16_t flags)
{
	f->r->params.flags = flags;
	o1_seq_output_start(&f->o, f->r, f->tok, 0);
	o1_seq_output_prompt(&f->o, 5);
}

/* Takes every event out of the ring, collecting TOKEN text. */
static void drain(struct fix *f)
{
	struct o1_req *r = f->r;
	uint32_t head = atomic_load(&r->out_head);
	uint32_t tail = atomic_load(&r->out_tail);

	for (; tail != head; tail++) {
		const union o1_wire_entry *e =
		    &r->out[tail & (O1_REQ_OUT_ENTRIES - 1)];

		assert_true(f->n_ev < MAX_EVS);
		f->ev[f->n_ev++] = *e;
		if (e->token.op != O1_EV_TOKEN)
			continue;
		assert_true(e->token.text_len <= O1_SEQ_TEXT_PER_EV);
		memcpy(f->text + f->n_text, e->token.text, e->token.text_len);
		f->n_text += e->token.text_len;
	}
	atomic_store(&r->out_tail, tail);
}

/* Feeds token ID with END (and FULL: the context is full); returns the
 * verdict, *reason when it ended. */
static enum o1_seq_verdict feed_full(struct fix *f, int32_t id,
				     enum o1_sampler_end end, bool full,
				     enum o1_finish_reason *reason)
{
	struct o1_sampler_out smp = {.id = id,
				     .logprob = -0.5f * (float)(f->pos + 1),
				     .entropy = 0.25f,
				     .end = end};
	struct o1_seq_token t = {.smp = &smp, .pos = f->pos++, .full = full};
	enum o1_seq_verdict v;

	assert_true(o1_seq_output_room(&f->o));
	v = o1_seq_output_token(&f->o, &t, reason);
	drain(f);
	return v;
}

static enum o1_seq_verdict feed(struct fix *f, int32_t id,
				enum o1_sampler_end end,
				enum o1_finish_reason *reason)
{
	return feed_full(f, id, end, false, reason);
}

/* Feeds the bytes of S, one token each, none ending the stream. */
static void feed_bytes(struct fix *f, const char *s)
{
	enum o1_finish_reason why;

	for (; *s; s++)
		assert_int_equal(
		    feed(f, (uint8_t)*s, O1_SAMPLER_CONTINUE, &why), O1_SEQ_GO);
}

static void assert_text(const struct fix *f, const char *want)
{
	assert_int_equal(f->n_text, strlen(want));
	assert_memory_equal(f->text, want, f->n_text);
}

/* 🚀 (F0 9F 9A 80) fed a byte at a time: the first three tokens' events
 * carry their ids and no text, the fourth the whole character. */
static void test_utf8_split(void **state)
{
	struct fix *f = *state;
	static const uint8_t rocket[] = {0xf0, 0x9f, 0x9a, 0x80};

	start(f, 0);
	feed_bytes(f, "a");
	for (int i = 0; i < 4; i++) {
		enum o1_finish_reason why;

		assert_int_equal(feed(f, rocket[i], O1_SAMPLER_CONTINUE, &why),
				 O1_SEQ_GO);
		assert_int_equal(f->ev[f->n_ev - 1].token.op, O1_EV_TOKEN);
		assert_int_equal(f->ev[f->n_ev - 1].token.ids[0], rocket[i]);
		assert_int_equal(f->ev[f->n_ev - 1].token.text_len,
				 i < 3 ? 0 : 4);
	}
	assert_int_equal(f->n_ev, 5);
	assert_text(f, "a\xf0\x9f\x9a\x80");
}

/* A release longer than one event is cut before a character, never in
 * it: "a" + 30 x "é" held as the start of a stop string, then released
 * by "?" in events of 43 (not 44: byte 44 continues an é) and 19 bytes;
 * only the first carries the token. */
static void test_cut_at_characters(void **state)
{
	struct fix *f = *state;
	char stop[80] = "a", text[80] = "a";

	for (int i = 0; i < 30; i++) {
		strcat(stop, "\xc3\xa9");
		strcat(text, "\xc3\xa9");
	}
	strcat(stop, "!");
	strcat(text, "?");
	add_stop(f, stop);
	start(f, 0);
	feed_bytes(f, text);
	assert_text(f, text);
	assert_int_equal(f->ev[f->n_ev - 2].token.text_len, 43);
	assert_int_equal(f->ev[f->n_ev - 2].token.n_ids, 1);
	assert_int_equal(f->ev[f->n_ev - 2].token.ids[0], '?');
	assert_int_equal(f->ev[f->n_ev - 1].token.text_len, 19);
	assert_int_equal(f->ev[f->n_ev - 1].token.n_ids, 0);
	for (uint32_t i = 0; i < f->n_ev - 2; i++)
		assert_int_equal(f->ev[i].token.text_len, 0);
}

/* "world" arrives over several tokens, after text that only started
 * like it ("won" goes out at "n"): the stream ends with STOP and sends
 * neither the stop string nor anything after it. The earliest match wins
 * over a stop string listed first ("ld" matches at the same token). */
static void test_stop_spanning_tokens(void **state)
{
	struct fix *f = *state;
	enum o1_finish_reason why = O1_FINISH_ERROR;

	add_stop(f, "ld");
	add_stop(f, "world");
	start(f, 0);
	feed_bytes(f, "Hi won wo");
	assert_text(f, "Hi won "); /* "wo" held */
	feed_bytes(f, "worl");
	assert_text(f, "Hi won wo"); /* "worl" held */
	assert_int_equal(feed(f, 'd', O1_SAMPLER_CONTINUE, &why), O1_SEQ_ENDED);
	assert_int_equal(why, O1_FINISH_STOP);
	assert_text(f, "Hi won wo");
}

/* Held text goes out when it stops looking like a stop string, and at
 * the end of the stream (max_tokens: the sampler's LENGTH). */
static void test_held_released(void **state)
{
	struct fix *f = *state;
	enum o1_finish_reason why = O1_FINISH_ERROR;

	add_stop(f, "STOP");
	start(f, 0);
	feed_bytes(f, "ST");
	assert_text(f, "");
	feed_bytes(f, "x");
	assert_text(f, "STx");
	feed_bytes(f, "STO");
	assert_text(f, "STx");
	assert_int_equal(feed(f, 'P', O1_SAMPLER_END_LENGTH, &why),
			 O1_SEQ_ENDED);
	/* the token completes the stop string: STOP wins over LENGTH */
	assert_int_equal(why, O1_FINISH_STOP);
	assert_text(f, "STx");
}

static void test_held_flushed_at_length(void **state)
{
	struct fix *f = *state;
	enum o1_finish_reason why = O1_FINISH_ERROR;

	add_stop(f, "STOP");
	start(f, 0);
	feed_bytes(f, "aS");
	assert_int_equal(feed(f, 'T', O1_SAMPLER_END_LENGTH, &why),
			 O1_SEQ_ENDED);
	assert_int_equal(why, O1_FINISH_LENGTH);
	assert_text(f, "aST");
}

/* EOS and stop ids end the stream without their own text, releasing
 * what was held and the detokenizer's pending bytes (as U+FFFD). */
static void test_eos_and_stop_id(void **state)
{
	struct fix *f = *state;
	enum o1_finish_reason why = O1_FINISH_ERROR;

	add_stop(f, "xyz!");
	start(f, 0);
	feed_bytes(f, "ok xy\xc3");
	assert_text(f, "ok ");
	assert_int_equal(feed(f, 'z', O1_SAMPLER_END_EOS, &why), O1_SEQ_ENDED);
	assert_int_equal(why, O1_FINISH_EOS);
	assert_text(f, "ok xy\xef\xbf\xbd");

	f->n_text = f->n_ev = 0;
	start(f, 0);
	feed_bytes(f, "b");
	assert_int_equal(feed(f, 'c', O1_SAMPLER_END_STOP_ID, &why),
			 O1_SEQ_ENDED);
	assert_int_equal(why, O1_FINISH_STOP);
	assert_text(f, "b");
	assert_int_equal(f->ev[f->n_ev - 1].token.ids[0], 'c');
}

/* A full context ends a token the sampler would go on from (LENGTH);
 * its text is sent. */
static void test_full_context(void **state)
{
	struct fix *f = *state;
	enum o1_finish_reason why = O1_FINISH_ERROR;

	start(f, 0);
	feed_bytes(f, "ab");
	assert_int_equal(feed_full(f, 'c', O1_SAMPLER_CONTINUE, true, &why),
			 O1_SEQ_ENDED);
	assert_int_equal(why, O1_FINISH_LENGTH);
	assert_text(f, "abc");
}

/* NO_TEXT: ids only. A token outside the vocabulary is still sent (the
 * stream does not judge ids) with no text. */
static void test_no_text_and_bad_id(void **state)
{
	struct fix *f = *state;
	enum o1_finish_reason why;

	start(f, O1_SUBMIT_NO_TEXT);
	feed_bytes(f, "abc");
	assert_int_equal(f->n_ev, 3);
	assert_text(f, "");

	f->n_text = f->n_ev = 0;
	start(f, 0);
	assert_int_equal(feed(f, 1 << 20, O1_SAMPLER_CONTINUE, &why),
			 O1_SEQ_GO);
	assert_int_equal(f->n_ev, 1);
	assert_int_equal(f->ev[0].token.ids[0], 1 << 20);
	assert_text(f, "");
}

/* TOKEN's confidence and device fields, LOGPROBS events for 20
 * alternatives (14 + 6, at the token's position). */
static void test_event_fields(void **state)
{
	struct fix *f = *state;
	struct o1_sampler_out smp = {
	    .id = 'q', .logprob = -1.5f, .entropy = 2.0f, .n_top = 20};
	struct o1_seq_token t = {
	    .smp = &smp, .pos = 9, .dev = true, .dev_seq = 33};
	enum o1_finish_reason why;

	for (int i = 0; i < 20; i++)
		smp.top[i] = (struct o1_sampler_logprob){i + 100, -0.1f * i};
	start(f, O1_SUBMIT_CONFIDENCE);
	assert_int_equal(o1_seq_output_token(&f->o, &t, &why), O1_SEQ_GO);
	drain(f);
	assert_int_equal(f->n_ev, 4); /* TOKEN, 2 LOGPROBS, TOP_TEXT */
	assert_int_equal(f->ev[3].top_text.op, O1_EV_TOP_TEXT);
	assert_int_equal(f->ev[0].token.req_id, 77);
	assert_int_equal(f->ev[0].token.has_logprobs,
			 O1_TOKEN_LOGPROB | O1_TOKEN_ENTROPY | O1_TOKEN_DEVICE);
	assert_true(f->ev[0].token.logprobs[0] == -1.5f);
	assert_true(f->ev[0].token.entropy == 2.0f);
	assert_int_equal(f->ev[0].token.dev_seq, 33);
	assert_int_equal(f->ev[1].logprobs.op, O1_EV_LOGPROBS);
	assert_int_equal(f->ev[1].logprobs.n, O1_WIRE_TOP_PER);
	assert_int_equal(f->ev[1].logprobs.position, 9);
	assert_int_equal(f->ev[2].logprobs.n, 20 - O1_WIRE_TOP_PER);
	assert_int_equal(f->ev[2].logprobs.ids[5], 119);
	assert_true(f->ev[2].logprobs.logprobs[5] == -0.1f * 19);

	f->n_ev = 0; /* without CONFIDENCE: no entropy */
	t.dev = false;
	smp.n_top = 0;
	start(f, 0);
	assert_int_equal(o1_seq_output_token(&f->o, &t, &why), O1_SEQ_GO);
	drain(f);
	assert_int_equal(f->n_ev, 1);
	assert_int_equal(f->ev[0].token.has_logprobs, 0);
	assert_true(f->ev[0].token.entropy == 0.0f);
	assert_int_equal(f->ev[0].token.dev_seq, 0);
}

/* TOP_TEXT after the LOGPROBS: each alternative's bytes in order, as
 * the wire decoder reads them back, packed into as few events as fit;
 * none for a stream without text. */
static void test_top_text(void **state)
{
	struct fix *f = *state;
	struct o1_sampler_out smp = {.id = 'q', .logprob = -1.0f, .n_top = 20};
	struct o1_seq_token t = {.smp = &smp, .pos = 4};
	enum o1_finish_reason why;
	uint32_t seen = 0;

	for (int i = 0; i < 20; i++)
		smp.top[i] = (struct o1_sampler_logprob){'a' + i, -0.1f * i};
	smp.top[7].id = 0xe9; /* half a character: its byte alone */
	start(f, 0);
	assert_int_equal(o1_seq_output_token(&f->o, &t, &why), O1_SEQ_GO);
	drain(f);
	for (uint32_t e = 0; e < f->n_ev; e++) {
		union o1_wire_entry d;
		const uint8_t *b;
		uint32_t at = 0, len;
		int cut;

		if (f->ev[e].op != O1_EV_TOP_TEXT)
			continue;
		assert_int_equal(o1_wire_decode_ev(&f->ev[e], &d, NULL), 0);
		assert_int_equal(d.top_text.position, 4);
		assert_int_equal(d.top_text.req_id, 77);
		assert_int_equal(d.top_text.first, seen);
		for (uint32_t i = 0; i < d.top_text.n; i++, seen++) {
			assert_int_equal(
			    o1_wire_top_text_next(&d.top_text, &at, &b, &len,
						  &cut),
			    0);
			assert_int_equal(len, 1);
			assert_int_equal(cut, 0);
			assert_int_equal(b[0], (uint8_t)smp.top[seen].id);
		}
	}
	assert_int_equal(seen, 20);
	assert_int_equal(f->n_ev, 4);

	f->n_ev = 0;
	start(f, O1_SUBMIT_NO_TEXT);
	assert_int_equal(o1_seq_output_token(&f->o, &t, &why), O1_SEQ_GO);
	drain(f);
	for (uint32_t e = 0; e < f->n_ev; e++)
		assert_int_not_equal(f->ev[e].op, O1_EV_TOP_TEXT);
}

/* The FINAL's counts and the confidence summary (mean and minimum
 * logprob, mean entropy) of the tokens fed; nothing after it. */
static void test_final(void **state)
{
	struct fix *f = *state;
	enum o1_finish_reason why;

	start(f, 0);
	f->o.cached_round = 4;
	feed_bytes(f, "ab"); /* logprobs -0.5, -1 */
	atomic_store(&f->r->generated, 2);
	assert_int_equal(feed(f, 'c', O1_SAMPLER_END_LENGTH, &why),
			 O1_SEQ_ENDED);
	atomic_store(&f->r->generated, 3);
	o1_seq_output_final(&f->o, why, 0);
	drain(f);
	assert_null(f->o.req);
	assert_int_equal(f->ev[f->n_ev - 1].final.op, O1_EV_FINAL);
	assert_int_equal(f->ev[f->n_ev - 1].final.reason, O1_FINISH_LENGTH);
	assert_int_equal(f->ev[f->n_ev - 1].final.prompt_tokens, 5);
	assert_int_equal(f->ev[f->n_ev - 1].final.generated_tokens, 3);
	assert_int_equal(f->ev[f->n_ev - 1].final.cached_tokens, 4);
	assert_int_equal(f->ev[f->n_ev - 1].final.conf_tokens, 3);
	assert_int_equal(f->ev[f->n_ev - 1].final.rounds, 0);
	assert_true(fabsf(f->ev[f->n_ev - 1].final.mean_logprob + 1.0f) <
		    1e-6f);
	assert_true(f->ev[f->n_ev - 1].final.min_logprob == -1.5f);
	assert_true(f->ev[f->n_ev - 1].final.mean_entropy == 0.25f);
}

/* A refining stream keeps its answer; a round's ROUND carries its counts;
 * the answer becomes refine's previous one and a repeat ends the loop. */
static void test_rounds(void **state)
{
	struct fix *f = *state;
	struct o1_refine rf;
	static char prev[ANSWER_CAP + 1];
	enum o1_refine_stop stop;
	enum o1_finish_reason why;
	union o1_wire_entry ev;

	o1_refine_init(&rf, prev);
	f->r->params.refine_steps = 3;
	start(f, 0);
	o1_refine_start(&rf, 3);
	feed_bytes(f, "4");
	assert_int_equal(feed(f, 0, O1_SAMPLER_END_EOS, &why), O1_SEQ_ENDED);
	o1_seq_output_round(&f->o, why, 1000, &ev);
	assert_int_equal(ev.round.round, 0);
	assert_int_equal(ev.round.text_bytes, 1);
	assert_int_equal(ev.round.generated_tokens, 2);
	assert_int_equal(ev.round.latency_ns, 1000);
	assert_int_equal(o1_refine_judge(&rf, &f->o, 0.0f, &stop),
			 O1_REFINE_ROUND_OVER);
	assert_string_equal(o1_refine_next(&rf, &f->o), "4");
	assert_int_equal(o1_seq_output_push_round(&f->o, &ev, stop), 0);
	o1_seq_output_next_round(&f->o, 9, 2000);

	feed_bytes(f, "4");
	assert_int_equal(feed(f, 0, O1_SAMPLER_END_EOS, &why), O1_SEQ_ENDED);
	assert_int_equal(f->ev[f->n_ev - 1].token.round, 1);
	assert_int_equal(o1_refine_judge(&rf, &f->o, 0.0f, &stop),
			 O1_REFINE_ENDED);
	assert_int_equal(stop, O1_REFINE_REPEAT);
	o1_seq_output_round(&f->o, why, 2500, &ev);
	o1_seq_output_push_round(&f->o, &ev, stop);
	o1_seq_output_final(&f->o, why, 0);
	drain(f);
	assert_int_equal(f->ev[f->n_ev - 2].round.op, O1_EV_ROUND);
	assert_int_equal(f->ev[f->n_ev - 2].round.stop, O1_REFINE_REPEAT);
	assert_int_equal(f->ev[f->n_ev - 2].round.prompt_tokens, 9);
	assert_int_equal(f->ev[f->n_ev - 1].final.rounds, 2);
	assert_int_equal(f->ev[f->n_ev - 1].final.refine_stop,
			 O1_REFINE_REPEAT);
	assert_int_equal(f->ev[f->n_ev - 1].final.prompt_tokens, 14);
	f->r->params.refine_steps = 0;
}

/* An answer over the buffer is cut (LIMIT); not refining keeps none. */
static void test_answer_cut(void **state)
{
	struct fix *f = *state;
	struct o1_refine rf;
	enum o1_refine_stop stop;

	o1_refine_init(&rf, NULL);
	f->r->params.refine_steps = 1;
	start(f, 0);
	o1_refine_start(&rf, 1);
	for (int i = 0; i < ANSWER_CAP + 1; i++)
		feed_bytes(f, "x");
	assert_true(f->o.answer_cut);
	assert_int_equal(f->o.n_answer, ANSWER_CAP);
	assert_int_equal(o1_refine_judge(&rf, &f->o, 1.0f, &stop),
			 O1_REFINE_ENDED);
	assert_int_equal(stop, O1_REFINE_LIMIT);

	f->r->params.refine_steps = 0;
	start(f, 0);
	feed_bytes(f, "x");
	assert_int_equal(f->o.n_answer, 0);
}

/* Backpressure: no room once the ring lacks one token's worth. */
static void test_room(void **state)
{
	struct fix *f = *state;

	start(f, 0);
	assert_true(o1_seq_output_room(&f->o));
	atomic_store(&f->r->out_head, atomic_load(&f->r->out_tail) +
					  O1_REQ_OUT_ENTRIES - O1_SEQ_OUT_NEED +
					  1);
	assert_false(o1_seq_output_room(&f->o));
	atomic_store(&f->r->out_tail, atomic_load(&f->r->out_head));
	assert_true(o1_seq_output_room(&f->o));
	/* with logprobs (and text) a token's TOP_TEXT events count too */
	f->r->params.n_logprobs = 3;
	start(f, 0);
	atomic_store(&f->r->out_head, atomic_load(&f->r->out_tail) +
					  O1_REQ_OUT_ENTRIES -
					  O1_SEQ_OUT_NEED_TOP_TEXT + 1);
	assert_false(o1_seq_output_room(&f->o));
	start(f, O1_SUBMIT_NO_TEXT); /* no TOP_TEXT without text */
	assert_true(o1_seq_output_room(&f->o));
	atomic_store(&f->r->out_tail, atomic_load(&f->r->out_head));
	f->r->params.n_logprobs = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_utf8_split, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cut_at_characters, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_stop_spanning_tokens, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_held_released, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_held_flushed_at_length, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_eos_and_stop_id, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_full_context, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_text_and_bad_id, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_event_fields, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_final, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_top_text, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rounds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_answer_cut, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_room, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

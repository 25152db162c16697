/* Entry decoder tests: a valid entry of each kind decodes; every malformed
 * field is rejected with its typed error and named; the decoder reads the
 * slot once (a copy), so later changes to the slot do not leak through. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "shm/wire.h"

static const struct o1_wire_limits lim = {
    .arena_bytes = 4096,
    .max_prompt_bytes = 2048,
    .max_prompt_tokens = 512,
    .max_tokens = 1000,
    .max_stop_ids = 8,
    .max_stop_bytes = 256,
    .vocab_size = 32000,
    .max_grammar_bytes = 512,
};

static union o1_wire_entry valid_submit(void)
{
	union o1_wire_entry e;

	memset(&e, 0, sizeof(e));
	e.submit = (struct o1_wire_submit){
	    .op = O1_OP_SUBMIT,
	    .prompt_kind = O1_PROMPT_TEXT,
	    .flags = O1_SUBMIT_ADD_BOS,
	    .max_tokens = 16,
	    .req_id = 42,
	    .prompt_off = 100,
	    .prompt_len = 50,
	    .stop_ids_off = 200,
	    .n_stop_ids = 2,
	    .stop_str_off = 300,
	    .stop_str_len = 10,
	    .temperature = 0.7f,
	    .top_p = 0.9f,
	    .min_p = 0.05f,
	    .repeat_penalty = 1.1f,
	    .presence_penalty = 0.5f,
	    .frequency_penalty = -0.5f,
	    .seed = 7,
	    .top_k = 40,
	    .n_logprobs = 3,
	};
	return e;
}

struct bad_case {
	const char *name;
	void (*mutate)(struct o1_wire_submit *s);
	int err;
	const char *field;
};

#define M(fn, stmt)                                                            \
	static void fn(struct o1_wire_submit *s)                               \
	{                                                                      \
		stmt;                                                          \
	}
M(m_op, s->op = 0x7f)
M(m_pad, s->pad[19] = 1)
M(m_pad1, s->pad1[2] = 1)
M(m_flags, s->flags = 0x100)
M(m_max0, s->max_tokens = 0)
M(m_maxbig, s->max_tokens = 1001)
M(m_topk, s->top_k = 32001)
M(m_kind, s->prompt_kind = 2)
M(m_len0, s->prompt_len = 0)
M(m_lenbig, s->prompt_len = 2049)
M(m_off, s->prompt_off = 4090)
M(m_offwrap, s->prompt_off = UINT32_MAX - 10)
M(m_ids_align, (s->prompt_kind = O1_PROMPT_IDS, s->prompt_off = 102))
M(m_ids_big, (s->prompt_kind = O1_PROMPT_IDS, s->prompt_len = 513))
M(m_ids_off,
  (s->prompt_kind = O1_PROMPT_IDS, s->prompt_off = 3000, s->prompt_len = 400))
M(m_nstop, s->n_stop_ids = 9)
M(m_stop_align, s->stop_ids_off = 201)
M(m_stop_off, s->stop_ids_off = 4092)
M(m_stopstr_len, s->stop_str_len = 257)
M(m_stopstr_off, s->stop_str_off = 4090)
M(m_temp_nan, s->temperature = NAN)
M(m_temp_neg, s->temperature = -0.1f)
M(m_temp_inf, s->temperature = INFINITY)
M(m_topp0, s->top_p = 0.0f)
M(m_topp_big, s->top_p = 1.5f)
M(m_minp1, s->min_p = 1.0f)
M(m_rep0, s->repeat_penalty = 0.0f)
M(m_rep_nan, s->repeat_penalty = NAN)
M(m_pres, s->presence_penalty = 2.5f)
M(m_freq, s->frequency_penalty = -INFINITY)
M(m_logprobs, s->n_logprobs = 21)
M(m_refine_big, (s->flags = O1_SUBMIT_CHAT, s->refine_steps = 17))
M(m_refine_nochat, s->refine_steps = 1)
M(m_refine_notext,
  (s->flags = O1_SUBMIT_CHAT | O1_SUBMIT_NO_TEXT, s->refine_steps = 1))
/* grammar fields: the base is a valid grammar request (see grammar()) */
static void grammar(struct o1_wire_submit *s, uint8_t kind, uint32_t off,
		    uint32_t len)
{
	s->flags |= O1_SUBMIT_GRAMMAR;
	s->grammar_kind = kind;
	s->grammar_off = off;
	s->grammar_len = len;
}
M(m_g_noflag, (s->grammar_kind = O1_GRAMMAR_GBNF))
M(m_g_noflag_len, (s->grammar_len = 3))
M(m_g_noflag_off, (s->grammar_off = 3))
M(m_g_kind0, grammar(s, O1_GRAMMAR_NONE, 400, 10))
M(m_g_kind_big, grammar(s, O1_GRAMMAR_KIND_COUNT, 400, 10))
M(m_g_len0, grammar(s, O1_GRAMMAR_GBNF, 400, 0))
M(m_g_len_big, grammar(s, O1_GRAMMAR_JSON_SCHEMA, 400, 513))
M(m_g_off, grammar(s, O1_GRAMMAR_GBNF, 4000, 100))
M(m_g_off_wrap, grammar(s, O1_GRAMMAR_GBNF, UINT32_MAX - 2, 10))
M(m_g_object_len, grammar(s, O1_GRAMMAR_JSON_OBJECT, 400, 2))
M(m_g_object_off, grammar(s, O1_GRAMMAR_JSON_OBJECT, 400, 0))

static const struct bad_case cases[] = {
    {"op", m_op, O1_E_PROTOCOL, "op"},
    {"pad", m_pad, O1_E_PROTOCOL, "pad"},
    {"pad1", m_pad1, O1_E_PROTOCOL, "pad"},
    {"flags", m_flags, O1_E_PROTOCOL, "flags"},
    {"max_tokens 0", m_max0, O1_E_BOUNDS, "max_tokens"},
    {"max_tokens big", m_maxbig, O1_E_CONTEXT, "max_tokens"},
    {"top_k", m_topk, O1_E_BOUNDS, "top_k"},
    {"prompt_kind", m_kind, O1_E_FORMAT, "prompt_kind"},
    {"prompt_len 0", m_len0, O1_E_BOUNDS, "prompt_len"},
    {"prompt_len over the limit", m_lenbig, O1_E_CONTEXT, "prompt_len"},
    {"prompt_off", m_off, O1_E_BOUNDS, "prompt_off"},
    {"prompt_off wrap", m_offwrap, O1_E_BOUNDS, "prompt_off"},
    {"ids align", m_ids_align, O1_E_BOUNDS, "prompt_off"},
    {"ids over the limit", m_ids_big, O1_E_CONTEXT, "prompt_len"},
    {"ids off", m_ids_off, O1_E_BOUNDS, "prompt_off"},
    {"n_stop_ids", m_nstop, O1_E_BOUNDS, "n_stop_ids"},
    {"stop ids align", m_stop_align, O1_E_BOUNDS, "stop_ids_off"},
    {"stop ids off", m_stop_off, O1_E_BOUNDS, "stop_ids_off"},
    {"stop str len", m_stopstr_len, O1_E_BOUNDS, "stop_str_len"},
    {"stop str off", m_stopstr_off, O1_E_BOUNDS, "stop_str_off"},
    {"temperature nan", m_temp_nan, O1_E_FORMAT, "temperature"},
    {"temperature neg", m_temp_neg, O1_E_FORMAT, "temperature"},
    {"temperature inf", m_temp_inf, O1_E_FORMAT, "temperature"},
    {"top_p 0", m_topp0, O1_E_FORMAT, "top_p"},
    {"top_p big", m_topp_big, O1_E_FORMAT, "top_p"},
    {"min_p 1", m_minp1, O1_E_FORMAT, "min_p"},
    {"repeat 0", m_rep0, O1_E_FORMAT, "repeat_penalty"},
    {"repeat nan", m_rep_nan, O1_E_FORMAT, "repeat_penalty"},
    {"presence", m_pres, O1_E_FORMAT, "presence_penalty"},
    {"frequency", m_freq, O1_E_FORMAT, "frequency_penalty"},
    {"n_logprobs", m_logprobs, O1_E_BOUNDS, "n_logprobs"},
    {"refine_steps big", m_refine_big, O1_E_BOUNDS, "refine_steps"},
    {"refine without chat", m_refine_nochat, O1_E_FORMAT, "refine_steps"},
    {"refine without text", m_refine_notext, O1_E_FORMAT, "refine_steps"},
    {"grammar kind without flag", m_g_noflag, O1_E_PROTOCOL, "grammar_kind"},
    {"grammar len without flag", m_g_noflag_len, O1_E_PROTOCOL,
     "grammar_kind"},
    {"grammar off without flag", m_g_noflag_off, O1_E_PROTOCOL,
     "grammar_kind"},
    {"grammar kind 0", m_g_kind0, O1_E_FORMAT, "grammar_kind"},
    {"grammar kind big", m_g_kind_big, O1_E_FORMAT, "grammar_kind"},
    {"grammar len 0", m_g_len0, O1_E_BOUNDS, "grammar_len"},
    {"grammar over the limit", m_g_len_big, O1_E_BOUNDS, "grammar_len"},
    {"grammar off", m_g_off, O1_E_BOUNDS, "grammar_off"},
    {"grammar off wrap", m_g_off_wrap, O1_E_BOUNDS, "grammar_off"},
    {"json_object with bytes", m_g_object_len, O1_E_BOUNDS, "grammar_len"},
    {"json_object with an offset", m_g_object_off, O1_E_PROTOCOL,
     "grammar_off"},
};

static void test_valid(void **state)
{
	union o1_wire_entry in = valid_submit(), out;
	const char *why = NULL;

	(void)state;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	assert_null(why);
	assert_memory_equal(&in, &out, sizeof(in));
	in.submit.prompt_kind = O1_PROMPT_IDS;
	in.submit.prompt_len = 512;
	in.submit.prompt_off = 2048;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	/* Exactly filling the arena is fine. */
	in = valid_submit();
	in.submit.prompt_off = 4096 - 50;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	memset(&in, 0, sizeof(in));
	in.ping.op = O1_OP_PING;
	in.ping.cookie = 9;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	assert_int_equal(out.ping.cookie, 9);
	memset(&in, 0, sizeof(in));
	in.cancel.op = O1_OP_CANCEL;
	in.cancel.req_id = 3;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
}

static void test_every_malformed(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		union o1_wire_entry in = valid_submit(), out;
		const char *why = NULL;
		int ret;

		cases[i].mutate(&in.submit);
		ret = o1_wire_decode_sub(&in, &lim, &out, &why);
		if (ret != -cases[i].err || !why || strcmp(why, cases[i].field))
			fail_msg("case %s: ret %d why %s", cases[i].name, ret,
				 why ? why : "(null)");
	}
}

/* Each grammar kind decodes; the bytes may end the arena; a daemon that
 * takes no grammars refuses them as unsupported, not as a violation. */
static void test_grammar(void **state)
{
	struct o1_wire_limits none = lim;
	union o1_wire_entry in = valid_submit(), out;
	const char *why = NULL;

	(void)state;
	grammar(&in.submit, O1_GRAMMAR_GBNF, 4096 - 512, 512);
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	assert_int_equal(out.submit.grammar_off, 4096 - 512);
	assert_int_equal(out.submit.grammar_len, 512);
	assert_int_equal(out.submit.grammar_kind, O1_GRAMMAR_GBNF);
	in = valid_submit();
	grammar(&in.submit, O1_GRAMMAR_JSON_SCHEMA, 1, 7);
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	in = valid_submit();
	grammar(&in.submit, O1_GRAMMAR_JSON_OBJECT, 0, 0);
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	none.max_grammar_bytes = 0;
	assert_int_equal(o1_wire_decode_sub(&in, &none, &out, &why),
			 -O1_E_UNSUPPORTED);
	assert_string_equal(why, "grammar");
	/* without the flag a daemon without grammars decodes as before */
	in = valid_submit();
	assert_int_equal(o1_wire_decode_sub(&in, &none, &out, &why), 0);
}

/* Protocol 6: chat requests as JSON need CHAT and a text prompt; a tool
 * call grammar takes its tools list as bytes. */
static void test_chat_json(void **state)
{
	union o1_wire_entry in = valid_submit(), out;
	const char *why = NULL;

	(void)state;
	in.submit.flags = O1_SUBMIT_CHAT | O1_SUBMIT_CHAT_JSON;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	in.submit.flags = O1_SUBMIT_CHAT_JSON;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_FORMAT);
	assert_string_equal(why, "chat_json");
	in.submit.flags = O1_SUBMIT_CHAT | O1_SUBMIT_CHAT_JSON;
	in.submit.prompt_kind = O1_PROMPT_IDS;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_FORMAT);
	in = valid_submit();
	grammar(&in.submit, O1_GRAMMAR_TOOL_CALL, 64, 100);
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	grammar(&in.submit, O1_GRAMMAR_TOOL_CALL, 0, 0);
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_BOUNDS);
	grammar(&in.submit, O1_GRAMMAR_KIND_COUNT, 64, 100);
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_FORMAT);
}

/* TOP_TEXT: N packed alternatives exactly, zeros after them; a cut one
 * is flagged; counts past 20 and overlong lengths are refused. */
static void test_top_text(void **state)
{
	union o1_wire_entry in, out;
	const uint8_t *b;
	uint32_t at = 0, len;
	int cut;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.top_text.op = O1_EV_TOP_TEXT;
	in.top_text.n = 2;
	in.top_text.first = 18;
	in.top_text.position = 5;
	memcpy(in.top_text.data, "\002hi\203abc", 7);
	assert_int_equal(o1_wire_decode_ev(&in, &out, NULL), 0);
	assert_int_equal(o1_wire_top_text_next(&out.top_text, &at, &b, &len,
					       &cut),
			 0);
	assert_int_equal(len, 2);
	assert_memory_equal(b, "hi", 2);
	assert_int_equal(cut, 0);
	assert_int_equal(o1_wire_top_text_next(&out.top_text, &at, &b, &len,
					       &cut),
			 0);
	assert_int_equal(len, 3);
	assert_int_equal(cut, 1);
	in.top_text.first = 19; /* 19 + 2 > 20 */
	assert_int_equal(o1_wire_decode_ev(&in, &out, NULL), -O1_E_BOUNDS);
	in.top_text.first = 0;
	in.top_text.n = 3; /* the third is a zero-length piece: fine */
	assert_int_equal(o1_wire_decode_ev(&in, &out, NULL), 0);
	in.top_text.n = 2;
	in.top_text.data[20] = 1; /* garbage after the last */
	assert_int_equal(o1_wire_decode_ev(&in, &out, NULL), -O1_E_PROTOCOL);
	in.top_text.data[20] = 0;
	in.top_text.data[0] = 120; /* past the end of data */
	assert_int_equal(o1_wire_decode_ev(&in, &out, NULL), -O1_E_BOUNDS);
	in.top_text.data[0] = 2;
	in.top_text.n = 0;
	assert_int_equal(o1_wire_decode_ev(&in, &out, NULL), -O1_E_BOUNDS);
	in.top_text.n = 1;
	in.top_text.pad0 = 1;
	assert_int_equal(o1_wire_decode_ev(&in, &out, NULL), -O1_E_PROTOCOL);
}

static void test_small_ops(void **state)
{
	union o1_wire_entry in, out;
	const char *why;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.ping.op = O1_OP_PING;
	in.ping.daemon_ns = 1; /* only the daemon fills it */
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_PROTOCOL);
	memset(&in, 0, sizeof(in));
	in.cancel.op = O1_OP_CANCEL;
	in.cancel.pad[5] = 1;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_PROTOCOL);
	memset(&in, 0, sizeof(in));
	in.op = O1_EV_TOKEN; /* an event on the submission ring */
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_PROTOCOL);
	assert_string_equal(why, "op");
}

static void test_events(void **state)
{
	union o1_wire_entry in, out;
	const char *why;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.token.op = O1_EV_TOKEN;
	in.token.n_ids = 7;
	in.token.text_len = 48;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), 0);
	in.token.n_ids = 8;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_BOUNDS);
	in.token.n_ids = 1;
	in.token.text_len = 49;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_BOUNDS);
	in.token.text_len = 1;
	in.token.has_logprobs = 1;
	in.token.logprobs[0] = NAN;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	in.token.logprobs[0] = -0.5f;
	in.token.has_logprobs = O1_TOKEN_LOGPROB | O1_TOKEN_ENTROPY;
	in.token.entropy = 1.25f;
	in.token.round = 3;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), 0);
	assert_int_equal(out.token.round, 3);
	assert_true(out.token.entropy == 1.25f);
	in.token.entropy = -0.1f;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	assert_string_equal(why, "entropy");
	in.token.entropy = 0.0f;
	in.token.has_logprobs = 8;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	in.token.has_logprobs = 0;
	in.token.round = O1_WIRE_REFINE_MAX + 1;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_BOUNDS);
	in.token.round = 0;
	in.token.dev_seq = 1;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_PROTOCOL);
	assert_string_equal(why, "dev_seq");
	memset(&in, 0, sizeof(in));
	in.final.op = O1_EV_FINAL;
	in.final.reason = O1_FINISH_COUNT;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	in.final.reason = O1_FINISH_ERROR;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	in.final.error = -O1_E_QUOTA;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), 0);
	in.final.refine_stop = O1_REFINE_STOP_COUNT;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	in.final.refine_stop = O1_REFINE_REPEAT;
	in.final.pad[79] = 1;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_PROTOCOL);
	memset(&in, 0, sizeof(in));
	in.round.op = O1_EV_ROUND;
	in.round.round = 2;
	in.round.stop = O1_REFINE_CONFIDENT;
	in.round.latency_ns = 12345;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), 0);
	assert_true(out.round.latency_ns == 12345);
	in.round.stop = O1_REFINE_STOP_COUNT;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	in.round.stop = 0;
	in.round.reason = O1_FINISH_COUNT;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	in.round.reason = 0;
	in.round.pad[0] = 1;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_PROTOCOL);
	memset(&in, 0, sizeof(in));
	in.error.op = O1_EV_ERROR;
	in.error.error = -O1_E_PROTOCOL;
	in.error.msg_len = 97;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_BOUNDS);
	in.op = O1_OP_SUBMIT;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_PROTOCOL);
	memset(&in, 0, sizeof(in));
	in.logprobs.op = O1_EV_LOGPROBS;
	in.logprobs.n = 14;
	in.logprobs.logprobs[13] = -1.0f;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), 0);
	in.logprobs.n = 0;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_BOUNDS);
	in.logprobs.n = 15;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_BOUNDS);
	in.logprobs.n = 2;
	in.logprobs.logprobs[1] = 0.5f;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	assert_string_equal(why, "logprobs");
}

/* Device logits: O1_TOKEN_DEVICE names one id's row; a submit may ask. */
static void test_device_token(void **state)
{
	union o1_wire_entry in, out;
	const char *why;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.token.op = O1_EV_TOKEN;
	in.token.n_ids = 1;
	in.token.has_logprobs = O1_TOKEN_DEVICE;
	in.token.dev_seq = UINT32_MAX;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), 0);
	assert_true(out.token.dev_seq == UINT32_MAX);
	in.token.has_logprobs |= O1_TOKEN_ENTROPY;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), 0);
	in.token.n_ids = 2;
	in.token.has_logprobs = O1_TOKEN_DEVICE;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	assert_string_equal(why, "dev_seq");
	in.token.n_ids = 0;
	assert_int_equal(o1_wire_decode_ev(&in, &out, &why), -O1_E_FORMAT);
	in = valid_submit();
	in.submit.flags |= O1_SUBMIT_DEVICE_LOGITS;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
	assert_int_equal(out.submit.flags & O1_SUBMIT_DEVICE_LOGITS,
			 O1_SUBMIT_DEVICE_LOGITS);
}

static struct o1_wire_devout good_devout(void)
{
	struct o1_wire_devout d;

	memset(&d, 0, sizeof(d));
	d.rows = 8;
	d.row_floats = 1000;
	d.row_stride_bytes = 4096;
	d.stamps_off = 8 * 4096;
	d.area_bytes = 8 * 4096 + 8 * 4;
	strcpy(d.pci_bus_id, "0000:19:00.0");
	return d;
}

/* The welcome's area description is checked field by field. */
static void test_devout(void **state)
{
	struct o1_wire_devout d = good_devout();

	(void)state;
	assert_int_equal(sizeof(struct o1_wire_welcome), 256);
	assert_int_equal(o1_wire_devout_check(&d, 1000), 0);
	assert_int_equal(o1_wire_devout_check(&d, 999), -O1_E_PROTOCOL);
#define BAD(stmt)                                                              \
	do {                                                                   \
		d = good_devout();                                             \
		stmt;                                                          \
		assert_int_equal(o1_wire_devout_check(&d, 1000),               \
				 -O1_E_PROTOCOL);                              \
	} while (0)
	BAD(d.rows = 6);
	BAD(d.status = -O1_E_NO_DEVOUT);
	BAD(d.row_stride_bytes = 3968);
	BAD(d.row_stride_bytes = 4000);
	BAD(d.stamps_off = 8 * 4096 - 1);
	BAD(d.area_bytes = 8 * 4096 + 31);
	BAD(d.area_bytes = 3);
	BAD(memset(d.pci_bus_id, 'a', sizeof(d.pci_bus_id)));
	BAD(d.pad0 = 1);
	BAD(d.pad[7] = 1);
	BAD(d.rows = 1u << 31; d.row_stride_bytes = 1u << 31; d.stamps_off = 0);
#undef BAD
	/* No area: a status <= 0 says why, nothing else may be set. */
	memset(&d, 0, sizeof(d));
	assert_int_equal(o1_wire_devout_check(&d, 1000), 0);
	d.status = -O1_E_NO_DEVOUT;
	assert_int_equal(o1_wire_devout_check(&d, 1000), 0);
	d.status = 1;
	assert_int_equal(o1_wire_devout_check(&d, 1000), -O1_E_PROTOCOL);
}

static void test_stop_strings(void **state)
{
	const uint8_t ok[] = {2, 'a', 'b', 1, 'c'};
	const uint8_t zero[] = {0, 'a'};
	const uint8_t over[] = {3, 'a', 'b'};

	(void)state;
	assert_int_equal(o1_wire_stop_strings_check(ok, sizeof(ok), 4), 2);
	assert_int_equal(o1_wire_stop_strings_check(ok, sizeof(ok), 1),
			 -O1_E_FORMAT);
	assert_int_equal(o1_wire_stop_strings_check(zero, 2, 4), -O1_E_FORMAT);
	assert_int_equal(o1_wire_stop_strings_check(over, 3, 4), -O1_E_FORMAT);
	assert_int_equal(o1_wire_stop_strings_check(ok, 0, 4), 0);
}

/* sent_ns is the client's word, carried through whatever it holds (the
 * daemon clamps it when it measures); the padding after it is checked. */
static void test_sent_ns(void **state)
{
	static const uint64_t vals[] = {0, 1, UINT64_MAX};
	union o1_wire_entry in, out;
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		in = valid_submit();
		in.submit.sent_ns = vals[i];
		assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
		assert_true(out.submit.sent_ns == vals[i]);
		memset(&in, 0, sizeof(in));
		in.ping.op = O1_OP_PING;
		in.ping.sent_ns = vals[i];
		assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why), 0);
		assert_true(out.ping.sent_ns == vals[i]);
	}
	in.raw[offsetof(struct o1_wire_ping, sent_ns) + 8] = 1;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_PROTOCOL);
	/* after sent_ns: the grammar (version 5), then padding */
	in = valid_submit();
	in.raw[offsetof(struct o1_wire_submit, sent_ns) + 8] = 1;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_PROTOCOL);
	assert_string_equal(why, "grammar_kind");
	in = valid_submit();
	in.raw[offsetof(struct o1_wire_submit, grammar_kind) + 1] = 1;
	assert_int_equal(o1_wire_decode_sub(&in, &lim, &out, &why),
			 -O1_E_PROTOCOL);
	assert_string_equal(why, "pad");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_every_malformed),
	    cmocka_unit_test(test_grammar),
	    cmocka_unit_test(test_small_ops),
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_stop_strings),
	    cmocka_unit_test(test_device_token),
	    cmocka_unit_test(test_devout),
	    cmocka_unit_test(test_sent_ns),
	    cmocka_unit_test(test_chat_json),
	    cmocka_unit_test(test_top_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

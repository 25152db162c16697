/* A sequence's output stream (see seq_output.h): the held text and stop
 * strings, TOKEN and LOGPROBS events per token, ROUND and FINAL events
 * with the counts behind them. The caller checked o1_seq_output_room
 * before a token, and a FINAL always finds its reserved entries. */
#include "seq_output.h"

#include <string.h>

#include "common/error.h"
#include "common/log.h"

_Static_assert(O1_SEQ_OUT_NEED_TOP_TEXT < O1_REQ_OUT_ENTRIES,
	       "out ring too small");
_Static_assert(O1_SEQ_TEXT_PER_EV <= O1_WIRE_TEXT_MAX, "TOKEN text room");

static bool is_cont(char c)
{
	return ((uint8_t)c & 0xc0) == 0x80;
}

void o1_seq_output_init(struct o1_seq_output *o, char *answer,
			uint32_t answer_cap)
{
	memset(o, 0, sizeof(*o));
	o->answer = answer;
	o->answer_cap = answer_cap;
}

static void conf_reset(struct o1_seq_output *o)
{
	o->sum_lp = o->sum_ent = 0.0;
	o->min_lp = 0.0f;
	o->n_conf = 0;
}

/* Control tokens give no text, but a chat request in JSON (the one that
 * carries tools) keeps the tool-call markers among them: the client reads
 * its calls back from the text, and Mistral's [TOOL_CALLS] is a control
 * token in its v3 and later vocabularies. */
static unsigned decode_flags(const struct o1_req *r)
{
	return O1_DECODE_SKIP_SPECIAL | (r->params.flags & O1_SUBMIT_CHAT_JSON
					     ? O1_DECODE_KEEP_TOOL_MARKERS
					     : 0u);
}

void o1_seq_output_start(struct o1_seq_output *o, struct o1_req *r,
			 const struct o1_tokenizer *tok, uint64_t start_ns)
{
	o->req = r;
	o->tok = r->params.flags & O1_SUBMIT_NO_TEXT ? NULL : tok;
	memset(&o->detok, 0, sizeof(o->detok));
	o1_tokenizer_decode_init(&o->detok, decode_flags(o->req));
	o->n_hold = 0;
	o->round = o->rounds_sent = 0;
	o->n_prompt = o->prompt_total = 0;
	o->cached_round = o->cached_total = 0;
	o->round_start_ns = start_ns;
	conf_reset(o);
	o->round_sent = false;
	o->n_answer = 0;
	o->answer_cut = false;
	o->keep_answer = r->params.refine_steps && o->answer;
	o->refine_stop = O1_REFINE_NONE;
}

void o1_seq_output_prompt(struct o1_seq_output *o, uint32_t n)
{
	o->n_prompt = o->prompt_total = n;
}

bool o1_seq_output_room(const struct o1_seq_output *o)
{
	bool top_text = o->tok && o->req->params.n_logprobs;

	return o1_req_out_free(o->req) >=
	       (top_text ? O1_SEQ_OUT_NEED_TOP_TEXT : O1_SEQ_OUT_NEED);
}

void o1_seq_output_conf(const struct o1_seq_output *o, float *mean_lp,
			float *min_lp, float *mean_ent)
{
	*mean_lp = o->n_conf ? (float)(o->sum_lp / o->n_conf) : 0.0f;
	*min_lp = o->n_conf ? o->min_lp : 0.0f;
	*mean_ent = o->n_conf ? (float)(o->sum_ent / o->n_conf) : 0.0f;
}

static void conf_add(struct o1_seq_output *o, const struct o1_sampler_out *smp)
{
	if (!o->n_conf || smp->logprob < o->min_lp)
		o->min_lp = smp->logprob;
	o->sum_lp += smp->logprob;
	o->sum_ent += smp->entropy;
	o->n_conf++;
}

/* ---- TOKEN and LOGPROBS events ---- */

/* The token fields of the first TOKEN event of T. */
static void token_fields(const struct o1_seq_output *o,
			 const struct o1_seq_token *t, struct o1_wire_token *w)
{
	const struct o1_sampler_out *smp = t->smp;
	bool conf = o->req->params.flags & O1_SUBMIT_CONFIDENCE;

	w->n_ids = 1;
	w->ids[0] = (uint32_t)smp->id;
	w->has_logprobs = (smp->n_top || conf ? O1_TOKEN_LOGPROB : 0) |
			  (conf ? O1_TOKEN_ENTROPY : 0) |
			  (t->dev ? O1_TOKEN_DEVICE : 0);
	w->logprobs[0] = smp->logprob;
	w->entropy = conf ? smp->entropy : 0.0f;
	w->dev_seq = t->dev ? t->dev_seq : 0;
}

/* An empty event to copy: `= {0}` compiles to rep stos, whose start-up
 * was half of this file's time per token in a profile of 256 streams
 * (issue 17); a copy is a few vector moves. */
static const union o1_wire_entry no_event;

/* TOKEN events for TEXT[0, LEN), cut at character boundaries; the first
 * carries T (at least one event, even without text). */
static void push_text(struct o1_seq_output *o, const struct o1_seq_token *t,
		      const char *text, uint32_t len)
{
	uint32_t off = 0;

	do {
		union o1_wire_entry ev = no_event;
		uint32_t cut = len - off < O1_SEQ_TEXT_PER_EV
				   ? len - off
				   : O1_SEQ_TEXT_PER_EV;

		while (off + cut < len && cut > 0 && is_cont(text[off + cut]))
			cut--;
		ev.token.op = O1_EV_TOKEN;
		ev.token.req_id = o->req->req_id;
		ev.token.round = (uint8_t)o->round;
		if (off == 0)
			token_fields(o, t, &ev.token);
		ev.token.text_len = (uint8_t)cut;
		memcpy(ev.token.text, text + off, cut);
		o1_req_out_push(o->req, &ev);
		off += cut;
	} while (off < len);
}

static void push_logprobs(struct o1_seq_output *o, const struct o1_seq_token *t)
{
	const struct o1_sampler_out *smp = t->smp;

	for (uint32_t at = 0; at < smp->n_top; at += O1_WIRE_TOP_PER) {
		union o1_wire_entry ev = {0};
		uint32_t n = smp->n_top - at < O1_WIRE_TOP_PER
				 ? smp->n_top - at
				 : O1_WIRE_TOP_PER;

		ev.logprobs.op = O1_EV_LOGPROBS;
		ev.logprobs.n = (uint8_t)n;
		ev.logprobs.position = t->pos;
		ev.logprobs.req_id = o->req->req_id;
		for (uint32_t i = 0; i < n; i++) {
			ev.logprobs.ids[i] = (uint32_t)smp->top[at + i].id;
			ev.logprobs.logprobs[i] = smp->top[at + i].logprob;
		}
		o1_req_out_push(o->req, &ev);
	}
}

/* TOP_TEXT events after T's LOGPROBS (when the stream has text): each
 * alternative's bytes, packed (u8 len, bytes) into as few events as they
 * fit, a piece longer than one event cut and marked. */
static void push_top_text(struct o1_seq_output *o, const struct o1_seq_token *t)
{
	const struct o1_sampler_out *smp = t->smp;
	union o1_wire_entry ev = {0};
	uint32_t at = 0;

	for (uint32_t i = 0; i < smp->n_top; i++) {
		size_t len = 0;
		const uint8_t *b =
		    o1_tokenizer_token_bytes(o->tok, smp->top[i].id, &len);
		uint8_t cut = 0;

		if (!b)
			len = 0;
		if (len > O1_WIRE_TOP_TEXT_MAX - 1) {
			len = O1_WIRE_TOP_TEXT_MAX - 1;
			cut = O1_TOP_TEXT_CUT;
		}
		if (ev.top_text.n && at + 1 + len > O1_WIRE_TOP_TEXT_MAX) {
			o1_req_out_push(o->req, &ev);
			memset(&ev, 0, sizeof(ev));
			at = 0;
		}
		if (!ev.top_text.n) {
			ev.top_text.op = O1_EV_TOP_TEXT;
			ev.top_text.first = (uint8_t)i;
			ev.top_text.position = t->pos;
			ev.top_text.req_id = o->req->req_id;
		}
		ev.top_text.data[at] = (uint8_t)(len | cut);
		if (len)
			memcpy(ev.top_text.data + at + 1, b, len);
		at += 1 + (uint32_t)len;
		ev.top_text.n++;
	}
	if (ev.top_text.n)
		o1_req_out_push(o->req, &ev);
}

/* ---- the held text and stop strings ---- */

/* Earliest match of any stop string in the held text, or -1. */
static int stop_match(const struct o1_seq_output *o)
{
	const struct o1_req *r = o->req;
	int best = -1;

	for (uint32_t off = 0; off < r->stop_str_bytes;) {
		uint32_t len = r->stop_str[off];
		const char *str = (const char *)r->stop_str + off + 1;

		for (uint32_t at = 0; at + len <= o->n_hold; at++)
			if (memcmp(o->hold + at, str, len) == 0) {
				if (best < 0 || (int)at < best)
					best = (int)at;
				break;
			}
		off += 1 + len;
	}
	return best;
}

/* Bytes at the end of the held text that start some stop string. */
static uint32_t stop_prefix(const struct o1_seq_output *o)
{
	const struct o1_req *r = o->req;
	uint32_t keep = 0;

	for (uint32_t off = 0; off < r->stop_str_bytes;) {
		uint32_t len = r->stop_str[off];
		const char *str = (const char *)r->stop_str + off + 1;

		for (uint32_t k = len - 1; k > keep; k--)
			if (k <= o->n_hold &&
			    memcmp(o->hold + o->n_hold - k, str, k) == 0) {
				keep = k;
				break;
			}
		off += 1 + len;
	}
	return keep;
}

/* How much of the held text may go out now; *stopped on a match. */
static uint32_t releasable(const struct o1_seq_output *o, bool *stopped)
{
	int at;
	uint32_t cut;

	*stopped = false;
	if (!o->req->n_stop_str)
		return o->n_hold;
	at = stop_match(o);
	if (at >= 0) {
		*stopped = true;
		return (uint32_t)at;
	}
	cut = o->n_hold - stop_prefix(o);
	while (cut > 0 && cut < o->n_hold && is_cont(o->hold[cut]))
		cut--;
	return cut;
}

/* Appends the text of ID (none for -1) and, at the END, the
 * detokenizer's leftovers to the held text. */
static void hold_append(struct o1_seq_output *o, int32_t id, bool end)
{
	int n = 0;

	if (!o->tok)
		return;
	if (id >= 0)
		n = o1_tokenizer_decode_step(o->tok, &o->detok, id,
					     o->hold + o->n_hold,
					     O1_SEQ_HOLD_BYTES - o->n_hold);
	if (n > 0)
		o->n_hold += (uint32_t)n;
	else if (n < 0)
		o1_warn("request %llu: token %d not decoded (%s)",
			(unsigned long long)o->req->req_id, id, o1_strerror(n));
	if (end) {
		n = o1_tokenizer_decode_flush(&o->detok, o->hold + o->n_hold,
					      O1_SEQ_HOLD_BYTES - o->n_hold);
		if (n > 0)
			o->n_hold += (uint32_t)n;
	}
}

/* Keeps the text sent in this round for refinement. */
static void answer_append(struct o1_seq_output *o, const char *text,
			  uint32_t len)
{
	if (!o->keep_answer)
		return;
	if (len > o->answer_cap - o->n_answer) {
		o->answer_cut = true;
		return;
	}
	memcpy(o->answer + o->n_answer, text, len);
	o->n_answer += len;
}

/* Sends what may go out of the held text (all of it at the END unless a
 * stop string matched), with T; returns whether a stop string matched. */
static bool release(struct o1_seq_output *o, const struct o1_seq_token *t,
		    bool end)
{
	bool stopped;
	uint32_t out = releasable(o, &stopped);

	if (end && !stopped)
		out = o->n_hold;
	push_text(o, t, o->hold, out);
	answer_append(o, o->hold, out);
	if (t->smp->n_top)
		push_logprobs(o, t);
	if (t->smp->n_top && o->tok)
		push_top_text(o, t);
	memmove(o->hold, o->hold + out, o->n_hold - out);
	o->n_hold -= out;
	return stopped;
}

/* The one mapping of the sampler's ends to the wire's finish reasons (a
 * switch without default: a new end is a compiler warning here). */
static enum o1_finish_reason finish_of(enum o1_sampler_end e)
{
	switch (e) {
	case O1_SAMPLER_END_EOS:
		return O1_FINISH_EOS;
	case O1_SAMPLER_END_STOP_ID:
		return O1_FINISH_STOP;
	case O1_SAMPLER_END_LENGTH:
	case O1_SAMPLER_CONTINUE: /* not asked: the stream goes on */
		break;
	}
	return O1_FINISH_LENGTH;
}

enum o1_seq_verdict o1_seq_output_token(struct o1_seq_output *o,
					const struct o1_seq_token *t,
					enum o1_finish_reason *reason)
{
	enum o1_sampler_end e = t->smp->end;
	bool stopped;

	if (e == O1_SAMPLER_CONTINUE && t->full)
		e = O1_SAMPLER_END_LENGTH;
	conf_add(o, t->smp);
	/* EOS and stop ids end the text: theirs is not sent */
	hold_append(o,
		    e == O1_SAMPLER_END_EOS || e == O1_SAMPLER_END_STOP_ID
			? -1
			: t->smp->id,
		    e != O1_SAMPLER_CONTINUE);
	stopped = release(o, t, e != O1_SAMPLER_CONTINUE);
	if (!stopped && e == O1_SAMPLER_CONTINUE)
		return O1_SEQ_GO;
	*reason = stopped ? O1_FINISH_STOP : finish_of(e);
	return O1_SEQ_ENDED;
}

/* ---- rounds and the FINAL ---- */

void o1_seq_output_round(const struct o1_seq_output *o,
			 enum o1_finish_reason reason, uint64_t now_ns,
			 union o1_wire_entry *ev)
{
	struct o1_wire_round *w = &ev->round;

	memset(ev, 0, sizeof(*ev));
	w->op = O1_EV_ROUND;
	w->round = (uint8_t)o->round;
	w->reason = (uint8_t)reason;
	w->prompt_tokens = o->n_prompt;
	w->req_id = o->req->req_id;
	w->generated_tokens = o->n_conf;
	w->cached_tokens = o->cached_round;
	o1_seq_output_conf(o, &w->mean_logprob, &w->min_logprob,
			   &w->mean_entropy);
	w->text_bytes = o->n_answer;
	w->latency_ns = now_ns - o->round_start_ns;
}

uint32_t o1_seq_output_push_round(struct o1_seq_output *o,
				  union o1_wire_entry *ev,
				  enum o1_refine_stop stop)
{
	ev->round.stop = (uint8_t)stop;
	if (stop != O1_REFINE_NONE)
		o->refine_stop = stop;
	o->cached_total += o->cached_round;
	o->round_sent = true;
	o->rounds_sent++;
	o1_req_out_push(o->req, ev);
	return ev->round.round ? o->cached_round : 0;
}

char *o1_seq_output_swap_answer(struct o1_seq_output *o, char *empty,
				uint32_t *n)
{
	char *answer = o->answer;

	answer[o->n_answer] = 0;
	*n = o->n_answer;
	o->answer = empty;
	o->n_answer = 0;
	return answer;
}

void o1_seq_output_next_round(struct o1_seq_output *o, uint32_t n,
			      uint64_t now_ns)
{
	memset(&o->detok, 0, sizeof(o->detok));
	o1_tokenizer_decode_init(&o->detok, decode_flags(o->req));
	o->n_hold = 0;
	o->round++;
	o->n_prompt = n;
	o->prompt_total += n;
	o->cached_round = 0;
	o->round_sent = false;
	o->round_start_ns = now_ns;
	conf_reset(o);
}

void o1_seq_output_error(struct o1_seq_output *o, int error, const char *msg)
{
	union o1_wire_entry ev = {0};
	size_t n = strlen(msg);

	if (!n)
		return;
	ev.error.op = O1_EV_ERROR;
	ev.error.error = error;
	ev.error.req_id = o->req->req_id;
	ev.error.msg_len = (uint8_t)(n < O1_WIRE_MSG_MAX ? n : O1_WIRE_MSG_MAX);
	memcpy(ev.error.msg, msg, ev.error.msg_len);
	o1_req_out_push(o->req, &ev);
}

void o1_seq_output_final(struct o1_seq_output *o, enum o1_finish_reason reason,
			 int error)
{
	union o1_wire_entry ev = {0};
	struct o1_wire_final *w = &ev.final;
	struct o1_req *r = o->req;

	w->op = O1_EV_FINAL;
	w->reason = (uint8_t)reason;
	w->error = error;
	w->req_id = r->req_id;
	w->prompt_tokens = o->prompt_total;
	w->generated_tokens =
	    atomic_load_explicit(&r->generated, memory_order_relaxed);
	o1_seq_output_conf(o, &w->mean_logprob, &w->min_logprob,
			   &w->mean_entropy);
	w->conf_tokens = o->n_conf;
	w->rounds = (uint8_t)o->rounds_sent;
	w->refine_stop = (uint8_t)o->refine_stop;
	w->cached_tokens =
	    o->cached_total + (o->round_sent ? 0 : o->cached_round);
	o->req = NULL;
	o1_req_out_push(r, &ev); /* the last touch of the slot */
}

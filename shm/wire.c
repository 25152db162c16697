/* Wire decoders. Every check runs on a private copy of the slot; each
 * failure names its field through *why so the caller can log it once. */
#include "wire.h"

#include <math.h>
#include <string.h>

#include "common/error.h"

/* Records the offending field and returns the negated code. */
static int fail(int code, const char *field, const char **why)
{
	if (why)
		*why = field;
	return -code;
}

/* Eight bytes at a time (memcpy: no alignment assumed), then the rest:
 * a PING's padding is checked on every round trip of the spin path, where
 * a byte loop was a tenth of the front loop's time (issue 19). */
static int all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t acc = 0, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, b + i, 8);
		acc |= w;
	}
	for (; i < n; i++)
		acc |= b[i];
	return acc == 0;
}

/* True when [off, off + len) lies inside an arena of arena_bytes. */
static int in_arena(uint64_t off, uint64_t len, uint32_t arena_bytes)
{
	return off <= arena_bytes && len <= arena_bytes - off;
}

static int check_range(float v, float lo, float hi)
{
	return isfinite(v) && v >= lo && v <= hi;
}

static int check_sampling(const struct o1_wire_submit *s, const char **why)
{
	if (!check_range(s->temperature, 0.0f, 100.0f))
		return fail(O1_E_FORMAT, "temperature", why);
	if (!check_range(s->top_p, 0.0f, 1.0f) || s->top_p == 0.0f)
		return fail(O1_E_FORMAT, "top_p", why);
	if (!check_range(s->min_p, 0.0f, 1.0f) || s->min_p == 1.0f)
		return fail(O1_E_FORMAT, "min_p", why);
	if (!check_range(s->repeat_penalty, 0.0f, 100.0f) ||
	    s->repeat_penalty == 0.0f)
		return fail(O1_E_FORMAT, "repeat_penalty", why);
	if (!check_range(s->presence_penalty, -2.0f, 2.0f))
		return fail(O1_E_FORMAT, "presence_penalty", why);
	if (!check_range(s->frequency_penalty, -2.0f, 2.0f))
		return fail(O1_E_FORMAT, "frequency_penalty", why);
	if (s->n_logprobs > O1_WIRE_LOGPROBS_MAX)
		return fail(O1_E_BOUNDS, "n_logprobs", why);
	return 0;
}

static int check_prompt(const struct o1_wire_submit *s,
			const struct o1_wire_limits *lim, const char **why)
{
	uint64_t bytes = s->prompt_len;

	if (s->prompt_kind == O1_PROMPT_IDS) {
		if (s->prompt_len > lim->max_prompt_tokens)
			return fail(O1_E_CONTEXT, "prompt_len", why);
		if (s->prompt_off % 4)
			return fail(O1_E_BOUNDS, "prompt_off", why);
		bytes *= 4;
	} else if (s->prompt_kind != O1_PROMPT_TEXT) {
		return fail(O1_E_FORMAT, "prompt_kind", why);
	} else if (s->prompt_len > lim->max_prompt_bytes) {
		return fail(O1_E_CONTEXT, "prompt_len", why);
	}
	if (s->prompt_len == 0)
		return fail(O1_E_BOUNDS, "prompt_len", why);
	if (!in_arena(s->prompt_off, bytes, lim->arena_bytes))
		return fail(O1_E_BOUNDS, "prompt_off", why);
	return 0;
}

static int check_stops(const struct o1_wire_submit *s,
		       const struct o1_wire_limits *lim, const char **why)
{
	if (s->n_stop_ids > lim->max_stop_ids)
		return fail(O1_E_BOUNDS, "n_stop_ids", why);
	if (s->n_stop_ids &&
	    (s->stop_ids_off % 4 ||
	     !in_arena(s->stop_ids_off, (uint64_t)s->n_stop_ids * 4,
		       lim->arena_bytes)))
		return fail(O1_E_BOUNDS, "stop_ids_off", why);
	if (s->stop_str_len > lim->max_stop_bytes)
		return fail(O1_E_BOUNDS, "stop_str_len", why);
	if (s->stop_str_len &&
	    !in_arena(s->stop_str_off, s->stop_str_len, lim->arena_bytes))
		return fail(O1_E_BOUNDS, "stop_str_off", why);
	return 0;
}

/* The grammar of an O1_SUBMIT_GRAMMAR request, or zeros without one. A
 * grammar this daemon cannot take, or one longer than it takes, is the
 * request's own mistake ("grammar", "grammar_len"); fields set without
 * the flag or a kind out of range break the protocol. */
static int check_grammar(const struct o1_wire_submit *s,
			 const struct o1_wire_limits *lim, const char **why)
{
	if (!(s->flags & O1_SUBMIT_GRAMMAR)) {
		if (s->grammar_off || s->grammar_len || s->grammar_kind)
			return fail(O1_E_PROTOCOL, "grammar_kind", why);
		return 0;
	}
	if (s->grammar_kind == O1_GRAMMAR_NONE ||
	    s->grammar_kind >= O1_GRAMMAR_KIND_COUNT)
		return fail(O1_E_FORMAT, "grammar_kind", why);
	if (!lim->max_grammar_bytes)
		return fail(O1_E_UNSUPPORTED, "grammar", why);
	if ((s->grammar_kind == O1_GRAMMAR_JSON_OBJECT) != (s->grammar_len == 0))
		return fail(O1_E_BOUNDS, "grammar_len", why);
	if (s->grammar_len > lim->max_grammar_bytes)
		return fail(O1_E_BOUNDS, "grammar_len", why);
	if (s->grammar_len &&
	    !in_arena(s->grammar_off, s->grammar_len, lim->arena_bytes))
		return fail(O1_E_BOUNDS, "grammar_off", why);
	if (!s->grammar_len && s->grammar_off)
		return fail(O1_E_PROTOCOL, "grammar_off", why);
	return 0;
}

static int decode_submit(const struct o1_wire_submit *s,
			 const struct o1_wire_limits *lim, const char **why)
{
	int ret;

	if (!all_zero(s->pad, sizeof(s->pad)) ||
	    !all_zero(s->pad1, sizeof(s->pad1)))
		return fail(O1_E_PROTOCOL, "pad", why);
	if (s->flags & ~O1_SUBMIT_FLAGS_ALL)
		return fail(O1_E_PROTOCOL, "flags", why);
	if (s->max_tokens == 0)
		return fail(O1_E_BOUNDS, "max_tokens", why);
	if (s->max_tokens > lim->max_tokens)
		return fail(O1_E_CONTEXT, "max_tokens", why);
	if (lim->vocab_size && s->top_k > lim->vocab_size)
		return fail(O1_E_BOUNDS, "top_k", why);
	if (s->refine_steps > O1_WIRE_REFINE_MAX)
		return fail(O1_E_BOUNDS, "refine_steps", why);
	if (s->refine_steps &&
	    (s->prompt_kind != O1_PROMPT_TEXT ||
	     (s->flags & (O1_SUBMIT_CHAT | O1_SUBMIT_NO_TEXT)) !=
		 O1_SUBMIT_CHAT))
		return fail(O1_E_FORMAT, "refine_steps", why);
	if ((s->flags & O1_SUBMIT_CHAT_JSON) &&
	    (s->prompt_kind != O1_PROMPT_TEXT || !(s->flags & O1_SUBMIT_CHAT)))
		return fail(O1_E_FORMAT, "chat_json", why);
	ret = check_prompt(s, lim, why);
	if (!ret)
		ret = check_stops(s, lim, why);
	if (!ret)
		ret = check_grammar(s, lim, why);
	if (!ret)
		ret = check_sampling(s, why);
	return ret;
}

int o1_wire_decode_sub(const void *slot, const struct o1_wire_limits *lim,
		       union o1_wire_entry *out, const char **why)
{
	memcpy(out, slot, sizeof(*out));
	switch (out->op) {
	case O1_OP_PING:
		if (!all_zero(out->ping.pad0, sizeof(out->ping.pad0)) ||
		    out->ping.daemon_ns ||
		    !all_zero(out->ping.pad, sizeof(out->ping.pad)))
			return fail(O1_E_PROTOCOL, "pad", why);
		return 0;
	case O1_OP_CANCEL:
		if (!all_zero(out->cancel.pad0, sizeof(out->cancel.pad0)) ||
		    !all_zero(out->cancel.pad, sizeof(out->cancel.pad)))
			return fail(O1_E_PROTOCOL, "pad", why);
		return 0;
	case O1_OP_SUBMIT:
		return decode_submit(&out->submit, lim, why);
	default:
		return fail(O1_E_PROTOCOL, "op", why);
	}
}

static int decode_token(const struct o1_wire_token *t, const char **why)
{
	if (t->n_ids > O1_WIRE_IDS_MAX)
		return fail(O1_E_BOUNDS, "n_ids", why);
	if (t->text_len > O1_WIRE_TEXT_MAX)
		return fail(O1_E_BOUNDS, "text_len", why);
	if (t->has_logprobs & ~O1_TOKEN_BITS_ALL)
		return fail(O1_E_FORMAT, "has_logprobs", why);
	if (!all_zero(t->pad0, sizeof(t->pad0)))
		return fail(O1_E_PROTOCOL, "pad", why);
	if (!(t->has_logprobs & O1_TOKEN_DEVICE) && t->dev_seq)
		return fail(O1_E_PROTOCOL, "dev_seq", why);
	if ((t->has_logprobs & O1_TOKEN_DEVICE) && t->n_ids != 1)
		return fail(O1_E_FORMAT, "dev_seq", why);
	if (t->round > O1_WIRE_REFINE_MAX)
		return fail(O1_E_BOUNDS, "round", why);
	for (unsigned i = 0;
	     (t->has_logprobs & O1_TOKEN_LOGPROB) && i < t->n_ids; i++)
		if (isnan(t->logprobs[i]) || t->logprobs[i] > 0.0f)
			return fail(O1_E_FORMAT, "logprobs", why);
	if ((t->has_logprobs & O1_TOKEN_ENTROPY) &&
	    (t->n_ids != 1 || !isfinite(t->entropy) || t->entropy < 0.0f))
		return fail(O1_E_FORMAT, "entropy", why);
	return 0;
}

static int decode_final(const struct o1_wire_final *f, const char **why)
{
	if (f->reason >= O1_FINISH_COUNT)
		return fail(O1_E_FORMAT, "reason", why);
	if ((f->reason == O1_FINISH_ERROR) != (f->error != 0))
		return fail(O1_E_FORMAT, "error", why);
	if (f->refine_stop >= O1_REFINE_STOP_COUNT ||
	    f->rounds > O1_WIRE_REFINE_MAX + 1)
		return fail(O1_E_FORMAT, "refine_stop", why);
	if (f->pad1 || !all_zero(f->pad, sizeof(f->pad)))
		return fail(O1_E_PROTOCOL, "pad", why);
	return 0;
}

static int decode_round(const struct o1_wire_round *r, const char **why)
{
	if (r->round > O1_WIRE_REFINE_MAX)
		return fail(O1_E_BOUNDS, "round", why);
	if (r->reason >= O1_FINISH_COUNT)
		return fail(O1_E_FORMAT, "reason", why);
	if (r->stop >= O1_REFINE_STOP_COUNT)
		return fail(O1_E_FORMAT, "stop", why);
	if (!all_zero(r->pad, sizeof(r->pad)))
		return fail(O1_E_PROTOCOL, "pad", why);
	return 0;
}

static int decode_logprobs(const struct o1_wire_logprobs *l, const char **why)
{
	if (l->n == 0 || l->n > O1_WIRE_TOP_PER)
		return fail(O1_E_BOUNDS, "n", why);
	if (l->pad0)
		return fail(O1_E_PROTOCOL, "pad", why);
	for (unsigned i = 0; i < l->n; i++)
		if (isnan(l->logprobs[i]) || l->logprobs[i] > 0.0f)
			return fail(O1_E_FORMAT, "logprobs", why);
	return 0;
}

int o1_wire_top_text_next(const struct o1_wire_top_text *t, uint32_t *at,
			  const uint8_t **bytes, uint32_t *len, int *cut)
{
	uint32_t l;

	if (*at >= O1_WIRE_TOP_TEXT_MAX)
		return -1;
	l = t->data[*at] & ~O1_TOP_TEXT_CUT;
	if (l > O1_WIRE_TOP_TEXT_MAX - 1 - *at)
		return -1;
	*cut = !!(t->data[*at] & O1_TOP_TEXT_CUT);
	*bytes = t->data + *at + 1;
	*len = l;
	*at += 1 + l;
	return 0;
}

/* N (u8 len, bytes) items exactly, zeros after them. */
static int decode_top_text(const struct o1_wire_top_text *t, const char **why)
{
	uint32_t at = 0, len;
	const uint8_t *b;
	int cut;

	if (t->n == 0 || t->n > O1_WIRE_LOGPROBS_MAX ||
	    t->first >= O1_WIRE_LOGPROBS_MAX ||
	    t->n > O1_WIRE_LOGPROBS_MAX - t->first)
		return fail(O1_E_BOUNDS, "n", why);
	if (t->pad0)
		return fail(O1_E_PROTOCOL, "pad", why);
	for (unsigned i = 0; i < t->n; i++)
		if (o1_wire_top_text_next(t, &at, &b, &len, &cut))
			return fail(O1_E_BOUNDS, "data", why);
	if (!all_zero(t->data + at, O1_WIRE_TOP_TEXT_MAX - at))
		return fail(O1_E_PROTOCOL, "data", why);
	return 0;
}

int o1_wire_decode_ev(const void *slot, union o1_wire_entry *out,
		      const char **why)
{
	memcpy(out, slot, sizeof(*out));
	switch (out->op) {
	case O1_EV_PONG:
		return 0;
	case O1_EV_TOKEN:
		return decode_token(&out->token, why);
	case O1_EV_FINAL:
		return decode_final(&out->final, why);
	case O1_EV_ROUND:
		return decode_round(&out->round, why);
	case O1_EV_LOGPROBS:
		return decode_logprobs(&out->logprobs, why);
	case O1_EV_TOP_TEXT:
		return decode_top_text(&out->top_text, why);
	case O1_EV_ERROR:
		if (out->error.msg_len > O1_WIRE_MSG_MAX)
			return fail(O1_E_BOUNDS, "msg_len", why);
		if (out->error.error >= 0)
			return fail(O1_E_FORMAT, "error", why);
		return 0;
	default:
		return fail(O1_E_PROTOCOL, "op", why);
	}
}

int o1_wire_stop_strings_check(const uint8_t *buf, uint32_t len,
			       uint32_t max_count)
{
	uint32_t pos = 0;
	int count = 0;

	while (pos < len) {
		if (buf[pos] == 0 || buf[pos] > len - pos - 1)
			return -O1_E_FORMAT;
		pos += 1 + buf[pos];
		if ((uint32_t)++count > max_count)
			return -O1_E_FORMAT;
	}
	return count;
}

const char *o1_wire_finish_name(unsigned reason)
{
	static const char *const names[O1_FINISH_COUNT] = {
	    [O1_FINISH_STOP] = "stop",
	    [O1_FINISH_LENGTH] = "length",
	    [O1_FINISH_EOS] = "eos",
	    [O1_FINISH_CANCELLED] = "cancelled",
	    [O1_FINISH_ERROR] = "error",
	};

	return reason < O1_FINISH_COUNT ? names[reason] : "?";
}

const char *o1_wire_op_name(unsigned op)
{
	switch (op) {
	case O1_OP_PING:
		return "PING";
	case O1_OP_SUBMIT:
		return "SUBMIT";
	case O1_OP_CANCEL:
		return "CANCEL";
	case O1_EV_PONG:
		return "PONG";
	case O1_EV_TOKEN:
		return "TOKEN";
	case O1_EV_FINAL:
		return "FINAL";
	case O1_EV_ERROR:
		return "ERROR";
	case O1_EV_LOGPROBS:
		return "LOGPROBS";
	case O1_EV_TOP_TEXT:
		return "TOP_TEXT";
	case O1_EV_ROUND:
		return "ROUND";
	default:
		return "unknown";
	}
}

int o1_wire_devout_check(const struct o1_wire_devout *d, uint32_t vocab_size)
{
	uint64_t rows_bytes = (uint64_t)d->rows * d->row_stride_bytes;

	if (d->pad0 || !all_zero(d->pad, sizeof(d->pad)))
		return -O1_E_PROTOCOL;
	if (d->rows == 0)
		return d->status <= 0 ? 0 : -O1_E_PROTOCOL;
	if (d->status || (d->rows & (d->rows - 1)) ||
	    d->row_floats != vocab_size || vocab_size == 0 ||
	    d->row_stride_bytes % 256 ||
	    d->row_stride_bytes < (uint64_t)d->row_floats * 4 ||
	    d->stamps_off < rows_bytes || d->area_bytes < d->stamps_off ||
	    d->area_bytes - d->stamps_off < (uint64_t)d->rows * 4 ||
	    !memchr(d->pci_bus_id, 0, sizeof(d->pci_bus_id)))
		return -O1_E_PROTOCOL;
	return 0;
}

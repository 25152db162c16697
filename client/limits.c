/* The limits a daemon gave at the handshake, and the check every request
 * passes before it is written to the rings: a request the daemon would
 * refuse for its own values (a prompt or max_tokens too long, a top_k or
 * token id outside the vocabulary) is refused here with a typed error and
 * a sentence naming the value and the limit, so a client's mistake never
 * travels to o1d, where it would count against the connection. */
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "conn.h"

_Static_assert(O1_CLIENT_E_CONTEXT == -O1_E_CONTEXT, "o1_client_check");
_Static_assert(O1_CLIENT_E_BOUNDS == -O1_E_BOUNDS, "o1_client_check");
_Static_assert(O1_CLIENT_E_NO_TOKENIZER == -O1_E_NO_TOKENIZER, "client.h");
_Static_assert(O1_CLIENT_E_GRAMMAR == -O1_E_GRAMMAR, "client.h");
_Static_assert((int)O1_GRAMMAR_TYPE_TEXT == (int)O1_GRAMMAR_GBNF &&
		   (int)O1_GRAMMAR_TYPE_JSON_SCHEMA ==
		       (int)O1_GRAMMAR_JSON_SCHEMA &&
		   (int)O1_GRAMMAR_TYPE_JSON_OBJECT ==
		       (int)O1_GRAMMAR_JSON_OBJECT,
	       "grammar types are the wire's kinds");

int o1_client_limits(const struct o1_client *c, struct o1_client_limits *out)
{
	struct o1_client_limits l = {.sz = sizeof(l)};

	if (!c || !out || out->sz < offsetof(struct o1_client_limits, vocab_size))
		return -EINVAL;
	if (!c->base)
		return -ECONNRESET;
	l.max_prompt_bytes = c->w.max_prompt_bytes;
	l.max_prompt_tokens = c->w.max_prompt_tokens;
	l.max_tokens = c->w.max_tokens;
	l.max_inflight = c->w.max_inflight;
	l.vocab_size = c->w.vocab_size;
	l.max_grammar_bytes = c->w.max_grammar_bytes;
	l.tool_format = c->w.tool_format;
	memcpy(out, &l, out->sz < sizeof(l) ? out->sz : sizeof(l));
	return 0;
}

static int refuse(struct o1_client_refusal *why, int err, const char *field,
		  uint64_t value, uint64_t limit)
{
	if (why) {
		why->field = field;
		why->value = value;
		why->limit = limit;
	}
	return err;
}

/* Prompt length, and each id against the vocabulary. */
static int check_prompt(const struct o1_client *c, const struct o1_submit_opts *o,
			struct o1_client_refusal *why)
{
	const struct o1_wire_welcome *w = &c->w;

	if (o->text && o->text_len > w->max_prompt_bytes)
		return refuse(why, O1_CLIENT_E_CONTEXT, "prompt", o->text_len,
			      w->max_prompt_bytes);
	if (o->text)
		return 0;
	if (o->n_ids > w->max_prompt_tokens)
		return refuse(why, O1_CLIENT_E_CONTEXT, "prompt", o->n_ids,
			      w->max_prompt_tokens);
	for (size_t i = 0; w->vocab_size && i < o->n_ids; i++)
		if (o->ids[i] >= w->vocab_size)
			return refuse(why, O1_CLIENT_E_BOUNDS, "prompt_ids",
				      o->ids[i], w->vocab_size - 1);
	return 0;
}

static int check_values(const struct o1_client *c,
			const struct o1_submit_opts *o,
			struct o1_client_refusal *why)
{
	const struct o1_wire_welcome *w = &c->w;
	uint32_t max_tokens = o->max_tokens ? o->max_tokens : 256;

	if (max_tokens > w->max_tokens)
		return refuse(why, O1_CLIENT_E_CONTEXT, "max_tokens",
			      max_tokens, w->max_tokens);
	if (o->sampling && o->sampling->sz > offsetof(struct o1_sampling,
						      top_k) &&
	    w->vocab_size && o->sampling->top_k > w->vocab_size)
		return refuse(why, O1_CLIENT_E_BOUNDS, "top_k",
			      o->sampling->top_k, w->vocab_size);
	for (size_t i = 0; w->vocab_size && i < o->n_stop_ids; i++)
		if (o->stop_ids[i] >= w->vocab_size)
			return refuse(why, O1_CLIENT_E_BOUNDS, "stop_ids",
				      o->stop_ids[i], w->vocab_size - 1);
	return 0;
}

/* The grammar of O (fields past o->sz read as 0, see o1_client_check):
 * its bytes against the daemon's limit. */
static int check_grammar(const struct o1_client *c,
			 const struct o1_submit_opts *o,
			 struct o1_client_refusal *why)
{
	uint32_t max = c->w.max_grammar_bytes;

	if (o->grammar_type == O1_GRAMMAR_TYPE_NONE)
		return 0;
	if (o->grammar_type > O1_GRAMMAR_TYPE_TOOL_CALL ||
	    (o->grammar_type == O1_GRAMMAR_TYPE_JSON_OBJECT) !=
		(!o->grammar && !o->grammar_len) ||
	    (o->grammar_len && !o->grammar))
		return o1_client_fail(O1_CLIENT_E_GRAMMAR,
				      "grammar_type %u with %zu bytes at %s",
				      o->grammar_type, o->grammar_len,
				      o->grammar ? "grammar" : "NULL");
	if (!max || o->grammar_len > max)
		return refuse(why, O1_CLIENT_E_BOUNDS, "grammar",
			      o->grammar_len, max);
	return 0;
}

static const char *unit(const char *field, const struct o1_submit_opts *o)
{
	if (!strcmp(field, "prompt"))
		return o->text ? "bytes" : "tokens";
	if (!strcmp(field, "max_tokens"))
		return "tokens (the context)";
	if (!strcmp(field, "top_k"))
		return "(the vocabulary size)";
	if (!strcmp(field, "grammar"))
		return "bytes (0: it takes no grammars)";
	return "(the largest token id)";
}

int o1_client_check(const struct o1_client *c, const struct o1_submit_opts *in,
		    struct o1_client_refusal *why)
{
	struct o1_client_refusal r = {.sz = sizeof(r)};
	struct o1_submit_opts full = {0}, *o = &full;
	int ret;

	if (!c || !in || in->sz < offsetof(struct o1_submit_opts, sampling))
		return o1_client_fail(-EINVAL, "bad submit options");
	if (!c->base)
		return o1_client_fail(-ECONNRESET, "not connected");
	/* a caller built against an older header has a shorter struct */
	memcpy(&full, in, in->sz < sizeof(full) ? in->sz : sizeof(full));
	ret = check_prompt(c, o, &r);
	if (!ret)
		ret = check_values(c, o, &r);
	if (!ret)
		ret = check_grammar(c, o, &r);
	if (ret == O1_CLIENT_E_GRAMMAR)
		return ret;
	if (!ret)
		return 0;
	if (why && why->sz >= sizeof(why->sz)) {
		r.sz = why->sz;
		memcpy(why, &r, why->sz < sizeof(r) ? why->sz : sizeof(r));
	}
	return o1_client_fail(ret, "%s %llu is over the daemon's limit of %llu "
				   "%s",
			      r.field, (unsigned long long)r.value,
			      (unsigned long long)r.limit, unit(r.field, o));
}

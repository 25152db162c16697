/* OpenAI response shapes (see the header), built with cJSON so every
 * string is escaped as JSON requires. Token text may split a UTF-8 code
 * point between events; the text is joined before it is rendered, and a
 * chunk only carries bytes up to the last whole code point. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "sidecar_input.h"
#include "sidecar_response.h"

void o1_sidecar_out_init(struct o1_sidecar_out *out,
			 const struct o1_sidecar_request *req,
			 const char *model)
{
	static _Atomic unsigned long long seq;
	struct timespec ts;

	memset(out, 0, sizeof(*out));
	clock_gettime(CLOCK_REALTIME, &ts);
	out->kind = req->kind;
	out->created = (long long)ts.tv_sec;
	out->model = model;
	out->logprobs = req->logprobs;
	out->n_top = req->top_logprobs;
	out->refine = req->refine_steps > 0;
	out->include_usage = req->include_usage;
	out->tools = req->tools;
	o1_trace_init(&out->trace);
	snprintf(out->id, sizeof(out->id), "%s-%llx%09lx%llx",
		 req->kind == O1_SIDECAR_CHAT ? "chatcmpl" : "cmpl",
		 (long long)ts.tv_sec, (long)ts.tv_nsec, ++seq);
}

static void token_free(struct o1_sidecar_token *t)
{
	free(t->text);
	for (uint32_t i = 0; i < O1_SIDECAR_MAX_TOP_LOGPROBS; i++)
		free(t->top_text[i]);
}

void o1_sidecar_out_fini(struct o1_sidecar_out *out)
{
	if (!out)
		return;
	for (size_t i = 0; i < out->n_tok; i++)
		token_free(&out->tok[i]);
	free(out->tok);
	o1_tool_calls_fini(&out->calls);
	free(out->text);
	o1_trace_free(&out->trace);
	memset(out, 0, sizeof(*out));
}

const char *o1_sidecar_finish_name(enum o1_finish f)
{
	return f == O1_FINISH_REASON_LENGTH || f == O1_FINISH_REASON_CANCELLED
		   ? "length"
		   : "stop";
}

const char *o1_sidecar_refine_stop_name(enum o1_refine_stop_reason r)
{
	static const char *const names[] = {
	    [O1_REFINE_STOP_NONE] = "none",
	    [O1_REFINE_STOP_STEPS] = "steps",
	    [O1_REFINE_STOP_CONFIDENT] = "confident",
	    [O1_REFINE_STOP_REPEAT] = "repeat",
	    [O1_REFINE_STOP_LIMIT] = "limit",
	    [O1_REFINE_STOP_CANCELLED] = "cancelled",
	    [O1_REFINE_STOP_ERROR] = "error",
	};

	return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r]
							      : "none";
}

static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	char *p;

	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap * 2 : 256;

		while (c < *len + n + 1)
			c *= 2;
		p = realloc(*buf, c);
		if (!p)
			return -ENOMEM;
		*buf = p;
		*cap = c;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = 0;
	return 0;
}

static size_t whole(const char *text, size_t from, size_t len);

/* Code points begun in the N bytes at S (UTF-8 lead bytes). */
static size_t lead_bytes(const char *s, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += ((unsigned char)s[i] & 0xc0) != 0x80;
	return k;
}

/* Whole code points in the first N bytes of the text, BEGUN of them
 * begun: a character cut at N counts for the token that finishes it. */
static size_t chars_before(const struct o1_sidecar_out *out, size_t n,
			   size_t begun)
{
	return begun - (n && whole(out->text, 0, n) != n);
}

static int add_token(struct o1_sidecar_out *out, const struct o1_event *ev,
		     uint32_t i, size_t text_offset)
{
	struct o1_sidecar_token *t;

	if (out->n_tok == out->cap_tok) {
		size_t c = out->cap_tok ? out->cap_tok * 2 : 64;

		t = realloc(out->tok, c * sizeof(*t));
		if (!t)
			return -ENOMEM;
		out->tok = t;
		out->cap_tok = c;
	}
	t = &out->tok[out->n_tok++];
	memset(t, 0, sizeof(*t));
	t->id = ev->ids[i];
	t->logprob = ev->has_logprobs ? ev->logprobs[i] : 0;
	t->text = strndup(i == 0 ? ev->text : "", i == 0 ? ev->text_len : 0);
	t->len = i == 0 ? ev->text_len : 0;
	t->text_offset = text_offset;
	return t->text ? 0 : -ENOMEM;
}

static int add_text(struct o1_sidecar_out *out, const struct o1_event *ev)
{
	size_t cap, before = out->len, begun = out->begun;
	int ret =
	    append(&out->text, &out->len, &out->cap, ev->text, ev->text_len);
	struct o1_sidecar_token *t;

	if (ret)
		return ret;
	out->begun += lead_bytes(ev->text, ev->text_len);
	if (!out->logprobs)
		return 0;
	if (ev->n_ids == 0 && out->n_tok > 0) {
		t = &out->tok[out->n_tok - 1];
		cap = t->len + 1;
		return append(&t->text, &t->len, &cap, ev->text, ev->text_len);
	}
	/* the event's text is its first token's; the others start after */
	for (uint32_t i = 0; i < ev->n_ids && i < 8 && !ret; i++)
		ret = add_token(out, ev, i,
				i ? chars_before(out, out->len, out->begun)
				  : chars_before(out, before, begun));
	return ret;
}

static void add_top(struct o1_sidecar_out *out, const struct o1_event *ev)
{
	struct o1_sidecar_token *t;

	if (ev->position < out->round_base ||
	    ev->position - out->round_base >= out->n_tok)
		return;
	t = &out->tok[ev->position - out->round_base];
	for (uint32_t i = 0; i < ev->n_top && i < 14 && t->n_top < out->n_top;
	     i++) {
		t->top_ids[t->n_top] = ev->top_ids[i];
		t->top_logprobs[t->n_top++] = ev->top_logprobs[i];
	}
}

/* The alternatives' bytes (o1d's TOP_TEXT) for the token at position. */
static int add_top_text(struct o1_sidecar_out *out, const struct o1_event *ev)
{
	struct o1_sidecar_token *t;

	if (ev->position < out->round_base ||
	    ev->position - out->round_base >= out->n_tok)
		return 0;
	t = &out->tok[ev->position - out->round_base];
	for (uint32_t i = 0; i < ev->n_top && i < 20; i++) {
		uint32_t k = ev->top_first + i;

		if (k >= O1_SIDECAR_MAX_TOP_LOGPROBS || t->top_text[k])
			continue;
		t->top_text[k] = malloc((size_t)ev->top_len[i] + 1);
		if (!t->top_text[k])
			return -ENOMEM;
		memcpy(t->top_text[k], ev->top_text + ev->top_off[i],
		       ev->top_len[i]);
		t->top_text[k][ev->top_len[i]] = 0;
		t->top_len[k] = ev->top_len[i];
	}
	return 0;
}

/* With tools: the answer read back as tool calls in the daemon's format;
 * any call makes the finish reason "tool_calls". */
static int read_calls(struct o1_sidecar_out *out)
{
	cJSON *tools;
	int ret;

	if (!out->tools || out->kind != O1_SIDECAR_CHAT)
		return 0;
	tools = cJSON_Parse(out->tools);
	ret = o1_tool_calls_parse((enum o1_tool_format)out->tool_format,
				  out->text ? out->text : "", out->len, tools,
				  &out->calls);
	cJSON_Delete(tools);
	if (!ret && out->calls.n)
		out->finish = "tool_calls";
	return ret;
}

/* A round that is not the last ended: what follows is the next answer. */
static void next_round(struct o1_sidecar_out *out)
{
	for (size_t i = 0; i < out->n_tok; i++)
		token_free(&out->tok[i]);
	out->n_tok = out->sent_tok = 0;
	out->len = out->sent_len = out->begun = 0;
	if (out->text)
		out->text[0] = 0;
}

static void add_final(struct o1_sidecar_out *out, const struct o1_event *ev)
{
	out->finish = o1_sidecar_finish_name(ev->finish);
	out->prompt_tokens = ev->prompt_tokens;
	out->completion_tokens = ev->generated_tokens;
	out->cached_tokens = ev->cached_tokens;
	out->conf_tokens = ev->conf_tokens;
	out->mean_logprob = ev->mean_logprob;
	out->min_logprob = ev->min_logprob;
	out->mean_entropy = ev->mean_entropy;
}

int o1_sidecar_out_add(struct o1_sidecar_out *out, const struct o1_event *ev)
{
	if (out->refine && o1_trace_add(&out->trace, ev))
		return ev->type == O1_EVENT_TOKEN ? -ENOMEM : -EPROTO;
	switch (ev->type) {
	case O1_EVENT_TOKEN:
		out->round = ev->round;
		return add_text(out, ev);
	case O1_EVENT_LOGPROBS:
		add_top(out, ev);
		return 0;
	case O1_EVENT_TOP_TEXT:
		return add_top_text(out, ev);
	case O1_EVENT_ROUND:
		if (!out->refine)
			return 0;
		out->round = ev->round;
		if (ev->refine_stop == O1_REFINE_STOP_NONE) {
			next_round(out);
			out->round_base += ev->generated_tokens;
			out->round++;
		}
		return 0;
	case O1_EVENT_FINAL:
		add_final(out, ev);
		return read_calls(out);
	default:
		return 0;
	}
}

static int print(cJSON *root, char **json)
{
	*json = root ? cJSON_PrintUnformatted(root) : NULL;
	cJSON_Delete(root);
	return *json ? 0 : -ENOMEM;
}

/* The message may quote the client (a model name, a path): made UTF-8
 * here, so the answer is valid JSON whatever it sent. */
int o1_sidecar_error_json(const char *message, const char *type,
			  const char *param, const char *code, char **json)
{
	cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
	char clean[1024];

	o1_sidecar_utf8_clean(message, clean, sizeof(clean));
	cJSON_AddItemToObject(root, "error", e);
	cJSON_AddStringToObject(e, "message", clean);
	cJSON_AddStringToObject(e, "type", type);
	if (param && *param)
		cJSON_AddStringToObject(e, "param", param);
	else
		cJSON_AddNullToObject(e, "param");
	if (code)
		cJSON_AddStringToObject(e, "code", code);
	else
		cJSON_AddNullToObject(e, "code");
	return print(root, json);
}

/* The name an alternative is shown under: its bytes as o1d sent them
 * (made UTF-8: a piece may be part of a character; "bytes" has them
 * raw), else the token's own text when it is the sampled one, else the
 * naming callback's (none in the sidecar now), else "<id>". */
static const char *top_name(const struct o1_sidecar_out *out,
			    const struct o1_sidecar_token *t, uint32_t i,
			    char *buf, size_t cap)
{
	if (t->top_text[i]) {
		o1_sidecar_utf8_clean(t->top_text[i], buf, cap);
		return buf;
	}
	if (t->top_ids[i] == t->id)
		return t->text;
	if (out->name && out->name(out->name_ctx, t->top_ids[i], buf, cap) >= 0)
		return buf;
	snprintf(buf, cap, "<%u>", t->top_ids[i]);
	return buf;
}

static cJSON *bytes_of(const char *s, size_t n)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(a,
				     cJSON_CreateNumber((unsigned char)s[i]));
	return a;
}

/* Chat: {"content":[{"token","logprob","bytes","top_logprobs":[...]}]} */
static cJSON *chat_logprobs(const struct o1_sidecar_out *out, size_t from,
			    size_t to)
{
	cJSON *lp = cJSON_CreateObject(), *content = cJSON_CreateArray();
	char buf[256];
	const char *name;

	cJSON_AddItemToObject(lp, "content", content);
	for (size_t k = from; k < to; k++) {
		const struct o1_sidecar_token *t = &out->tok[k];
		cJSON *e = cJSON_CreateObject(), *tops = cJSON_CreateArray();

		cJSON_AddStringToObject(e, "token", t->text);
		cJSON_AddNumberToObject(e, "logprob", t->logprob);
		cJSON_AddItemToObject(e, "bytes", bytes_of(t->text, t->len));
		for (uint32_t i = 0; i < t->n_top; i++) {
			cJSON *a = cJSON_CreateObject();

			name = top_name(out, t, i, buf, sizeof(buf));
			cJSON_AddStringToObject(a, "token", name);
			cJSON_AddNumberToObject(a, "logprob",
						t->top_logprobs[i]);
			cJSON_AddItemToObject(
			    a, "bytes",
			    t->top_text[i]
				? bytes_of(t->top_text[i], t->top_len[i])
				: bytes_of(name, strlen(name)));
			cJSON_AddItemToArray(tops, a);
		}
		cJSON_AddItemToObject(e, "top_logprobs", tops);
		cJSON_AddItemToArray(content, e);
	}
	return lp;
}

/* Completions: {"tokens","token_logprobs","top_logprobs","text_offset"},
 * text_offset in code points of the whole answer (not bytes: clients
 * index the decoded text with it) */
static cJSON *text_logprobs(const struct o1_sidecar_out *out, size_t from,
			    size_t to)
{
	cJSON *lp = cJSON_CreateObject();
	cJSON *toks = cJSON_AddArrayToObject(lp, "tokens");
	cJSON *lps = cJSON_AddArrayToObject(lp, "token_logprobs");
	cJSON *tops = cJSON_AddArrayToObject(lp, "top_logprobs");
	cJSON *offs = cJSON_AddArrayToObject(lp, "text_offset");
	char buf[256];
	const char *name;

	for (size_t k = from; k < to; k++) {
		const struct o1_sidecar_token *t = &out->tok[k];
		cJSON *top = cJSON_CreateObject();

		cJSON_AddItemToArray(toks, cJSON_CreateString(t->text));
		cJSON_AddItemToArray(lps, cJSON_CreateNumber(t->logprob));
		cJSON_AddItemToArray(
		    offs, cJSON_CreateNumber((double)t->text_offset));
		for (uint32_t i = 0; i < t->n_top; i++) {
			name = top_name(out, t, i, buf, sizeof(buf));
			cJSON_AddNumberToObject(top, name, t->top_logprobs[i]);
		}
		cJSON_AddItemToArray(tops, top);
	}
	return lp;
}

static cJSON *usage(const struct o1_sidecar_out *out)
{
	cJSON *u = cJSON_CreateObject(), *d;

	cJSON_AddNumberToObject(u, "prompt_tokens", out->prompt_tokens);
	cJSON_AddNumberToObject(u, "completion_tokens", out->completion_tokens);
	cJSON_AddNumberToObject(u, "total_tokens",
				(double)out->prompt_tokens +
				    out->completion_tokens);
	d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
	cJSON_AddNumberToObject(d, "cached_tokens", out->cached_tokens);
	return u;
}

static cJSON *confidence(float mean_lp, float min_lp, float mean_ent)
{
	cJSON *c = cJSON_CreateObject();

	cJSON_AddNumberToObject(c, "mean_logprob", mean_lp);
	cJSON_AddNumberToObject(c, "min_logprob", min_lp);
	cJSON_AddNumberToObject(c, "mean_entropy", mean_ent);
	return c;
}

/* The FINAL's summary of the answer: "o1_confidence" on the choice. */
static cJSON *final_confidence(const struct o1_sidecar_out *out)
{
	cJSON *c =
	    confidence(out->mean_logprob, out->min_logprob, out->mean_entropy);

	cJSON_AddNumberToObject(c, "tokens", out->conf_tokens);
	return c;
}

static const char *round_finish(enum o1_finish f)
{
	if (f == O1_FINISH_REASON_CANCELLED)
		return "cancelled";
	return f == O1_FINISH_REASON_ERROR ? "error"
					   : o1_sidecar_finish_name(f);
}

static cJSON *trace_round(const struct o1_trace_round *t)
{
	cJSON *r = cJSON_CreateObject(), *n;

	cJSON_AddNumberToObject(r, "index", t->round);
	cJSON_AddStringToObject(r, "text", t->text ? t->text : "");
	n = cJSON_AddObjectToObject(r, "tokens");
	cJSON_AddNumberToObject(n, "prompt", t->prompt_tokens);
	cJSON_AddNumberToObject(n, "cached", t->cached_tokens);
	cJSON_AddNumberToObject(n, "generated", t->generated_tokens);
	cJSON_AddItemToObject(
	    r, "confidence",
	    confidence(t->mean_logprob, t->min_logprob, t->mean_entropy));
	cJSON_AddNumberToObject(r, "latency_ms", (double)t->latency_ns / 1e6);
	cJSON_AddStringToObject(r, "finish_reason", round_finish(t->finish));
	return r;
}

/* "refinement_trace": [round...], "refinement_stop_reason" on ROOT. */
static void add_trace(const struct o1_sidecar_out *out, cJSON *root)
{
	cJSON *a = cJSON_AddArrayToObject(root, "refinement_trace");

	for (uint32_t i = 0; i < out->trace.n_rounds; i++)
		cJSON_AddItemToArray(a, trace_round(&out->trace.rounds[i]));
	cJSON_AddStringToObject(root, "refinement_stop_reason",
				o1_sidecar_refine_stop_name(out->trace.stop));
}

static cJSON *head(const struct o1_sidecar_out *out, bool chunk)
{
	cJSON *root = cJSON_CreateObject();

	cJSON_AddStringToObject(root, "id", out->id);
	cJSON_AddStringToObject(
	    root, "object",
	    out->kind == O1_SIDECAR_CHAT
		? (chunk ? "chat.completion.chunk" : "chat.completion")
		: "text_completion");
	cJSON_AddNumberToObject(root, "created", (double)out->created);
	cJSON_AddStringToObject(root, "model", out->model);
	cJSON_AddStringToObject(root, "system_fingerprint", "o1d");
	return root;
}

/* The calls read back, as message.tool_calls (a chunk's delta: with
 * their index, all of a call in one delta); the text before the first
 * call is the content (null when there is none, as OpenAI sends it). A
 * stream sent most of it as content deltas already: REST (may be "") is
 * what it had not, and goes with the calls. */
static void add_calls(const struct o1_sidecar_out *out, cJSON *msg, bool chunk,
		      const char *rest)
{
	cJSON *a;

	if (chunk) {
		if (rest && rest[0])
			cJSON_AddStringToObject(msg, "content", rest);
	} else if (out->calls.content && out->calls.content[0])
		cJSON_AddStringToObject(msg, "content", out->calls.content);
	else
		cJSON_AddNullToObject(msg, "content");
	a = cJSON_AddArrayToObject(msg, "tool_calls");
	for (size_t i = 0; i < out->calls.n; i++) {
		const struct o1_tool_call *tc = &out->calls.calls[i];
		cJSON *c = cJSON_CreateObject(), *f;
		char id[80];

		if (tc->id)
			snprintf(id, sizeof(id), "%.70s", tc->id);
		else
			snprintf(id, sizeof(id), "call_%.48s_%zu",
				 strchr(out->id, '-') ? strchr(out->id, '-') + 1
						      : out->id,
				 i);
		if (chunk)
			cJSON_AddNumberToObject(c, "index", (double)i);
		cJSON_AddStringToObject(c, "id", id);
		cJSON_AddStringToObject(c, "type", "function");
		f = cJSON_AddObjectToObject(c, "function");
		cJSON_AddStringToObject(f, "name", tc->name);
		cJSON_AddStringToObject(f, "arguments", tc->arguments);
		cJSON_AddItemToArray(a, c);
	}
}

/* One choice carrying TEXT (N bytes) and tokens [FROM, TO). */
static cJSON *choice(const struct o1_sidecar_out *out, const char *text,
		     size_t n, size_t from, size_t to, bool chunk, bool first)
{
	cJSON *c = cJSON_CreateObject(), *msg;
	char *s = strndup(text ? text : "", n);

	cJSON_AddNumberToObject(c, "index", 0);
	if (out->kind == O1_SIDECAR_CHAT) {
		msg = cJSON_AddObjectToObject(c, chunk ? "delta" : "message");
		if (!chunk || first)
			cJSON_AddStringToObject(msg, "role", "assistant");
		if (out->calls.n)
			add_calls(out, msg, chunk, s);
		else
			cJSON_AddStringToObject(msg, "content", s ? s : "");
	} else {
		cJSON_AddStringToObject(c, "text", s ? s : "");
	}
	free(s);
	if (!out->logprobs)
		cJSON_AddNullToObject(c, "logprobs");
	else if (out->kind == O1_SIDECAR_CHAT)
		cJSON_AddItemToObject(c, "logprobs",
				      chat_logprobs(out, from, to));
	else
		cJSON_AddItemToObject(c, "logprobs",
				      text_logprobs(out, from, to));
	if (out->finish && (!chunk || to == out->n_tok)) {
		cJSON_AddStringToObject(c, "finish_reason", out->finish);
		cJSON_AddItemToObject(c, "o1_confidence",
				      final_confidence(out));
	} else {
		cJSON_AddNullToObject(c, "finish_reason");
	}
	return c;
}

int o1_sidecar_full_json(const struct o1_sidecar_out *out, char **json)
{
	cJSON *root = head(out, false);
	cJSON *choices = cJSON_AddArrayToObject(root, "choices");

	cJSON_AddItemToArray(choices, choice(out, out->text, out->len, 0,
					     out->n_tok, false, true));
	cJSON_AddItemToObject(root, "usage", usage(out));
	if (out->refine)
		add_trace(out, root);
	return print(root, json);
}

/* Bytes of TEXT up to LEN that end on a whole UTF-8 code point. */
static size_t whole(const char *text, size_t from, size_t len)
{
	size_t end = len, back = 0;

	while (end > from && back < 4 &&
	       ((unsigned char)text[end - 1] & 0xc0) == 0x80) {
		end--;
		back++;
	}
	if (end > from && ((unsigned char)text[end - 1] & 0x80)) {
		unsigned char lead = (unsigned char)text[end - 1];
		size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;

		return back + 1 >= need ? len : end - 1;
	}
	return len;
}

static int sse(cJSON *root, char **out)
{
	char *json;
	int ret = print(root, &json);

	if (ret)
		return ret;
	if (asprintf(out, "data: %s\n\n", json) < 0)
		ret = -ENOMEM;
	free(json);
	return ret;
}

/* Bytes of S (N) before where a tool call starting with MARK may begin:
 * its first occurrence, else the longest end of S that starts it. */
static size_t before_mark(const char *s, size_t n, const char *mark)
{
	size_t m = strlen(mark);
	const char *at = memmem(s, n, mark, m);

	if (at)
		return (size_t)(at - s);
	for (size_t k = m - 1; k > 0; k--)
		if (k <= n && !memcmp(s + n - k, mark, k))
			return n - k;
	return n;
}

/* Where a tool call may start in the answer so far, in the model's
 * format (Llama 3's calls are the whole answer: one starting with '{' or
 * <|python_tag|> is held whole). */
static size_t call_start(const struct o1_sidecar_out *out)
{
	static const char tag[] = "<|python_tag|>";
	const char *s = out->text ? out->text : "";
	size_t n = out->len, lead = 0, a, b;

	switch (out->tool_format) {
	case O1_TOOLS_HERMES:
		return before_mark(s, n, "<tool_call>");
	case O1_TOOLS_XML:
		a = before_mark(s, n, "<tool_call>");
		b = before_mark(s, n, "<function=");
		return a < b ? a : b;
	case O1_TOOLS_MISTRAL:
		return before_mark(s, n, "[TOOL_CALLS]");
	case O1_TOOLS_LLAMA3_JSON:
		while (lead < n && (s[lead] == ' ' || s[lead] == '\t' ||
				    s[lead] == '\n' || s[lead] == '\r'))
			lead++;
		if (lead == n || s[lead] == '{' ||
		    !strncmp(s + lead, tag,
			     n - lead < sizeof(tag) - 1 ? n - lead
							: sizeof(tag) - 1))
			return 0;
		return n;
	default:
		return n;
	}
}

/* With tools, how much of the answer may stream as content before the
 * FINAL: the text before where a call may start, less its trailing
 * whitespace (the read-back's content drops it when a call follows, and
 * the stream must carry exactly that content). The rest waits for the
 * read-back. */
static size_t tool_safe(const struct o1_sidecar_out *out)
{
	size_t n = call_start(out);
	char c;

	while (n && ((c = out->text[n - 1]) == ' ' || c == '\t' || c == '\n' ||
		     c == '\r'))
		n--;
	return n;
}

/* With calls read back, the end of their content in the text (a prefix
 * of it, tool_call.h), never before what was sent. */
static size_t calls_content_end(const struct o1_sidecar_out *out)
{
	size_t n = strlen(out->calls.content ? out->calls.content : "");

	if (n > out->len || (n && memcmp(out->text, out->calls.content, n)))
		return out->sent_len; /* not a prefix: nothing more to add */
	return n > out->sent_len ? n : out->sent_len;
}

bool o1_sidecar_chunk_due(const struct o1_sidecar_out *out, bool first)
{
	return first || out->finish || !out->tools ||
	       tool_safe(out) > out->sent_len;
}

int o1_sidecar_chunk_sse(struct o1_sidecar_out *out, bool first, char **sse_out)
{
	size_t end =
	    out->finish ? out->len : whole(out->text, out->sent_len, out->len);

	if (out->tools && !out->finish) {
		size_t safe = tool_safe(out);

		end = safe < out->sent_len ? out->sent_len
		      : safe < end	   ? whole(out->text, out->sent_len, safe)
					   : end;
	}
	if (out->calls.n) /* the content not sent yet, then the calls */
		end = calls_content_end(out);
	cJSON *root = head(out, true);
	cJSON *choices = cJSON_AddArrayToObject(root, "choices");
	size_t to = out->n_tok;

	cJSON_AddItemToArray(
	    choices,
	    choice(out, out->text ? out->text + out->sent_len : NULL,
		   end - out->sent_len, out->sent_tok, to, true, first));
	cJSON_AddNullToObject(root, "usage");
	if (out->refine)
		cJSON_AddNumberToObject(root, "o1_round", out->round);
	if (out->refine && out->finish && !out->include_usage)
		add_trace(out, root);
	out->sent_len = end;
	out->sent_tok = to;
	return sse(root, sse_out);
}

int o1_sidecar_usage_sse(const struct o1_sidecar_out *out, char **sse_out)
{
	cJSON *root = head(out, true);

	cJSON_AddArrayToObject(root, "choices");
	cJSON_AddItemToObject(root, "usage", usage(out));
	if (out->refine)
		add_trace(out, root);
	return sse(root, sse_out);
}

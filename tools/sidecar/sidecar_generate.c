/* POST /v1/chat/completions and /v1/completions: parse, check the model
 * and the concurrency limit, submit through a pooled handle, then either
 * collect the whole answer or stream it as SSE chunks.
 *
 * The first event is awaited before any HTTP status is chosen, so a
 * refusal from the daemon (draining, quota, context) gets its own status
 * even when streaming. Streaming then runs inside libmicrohttpd's reader
 * callback on the connection's own thread; a hang-up is noticed there
 * (POLLRDHUP on the socket between token waits) and cancels the request
 * in the daemon. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "sidecar_backend.h"
#include "sidecar_http_int.h"
#include "sidecar_response.h"

#define SSE_BLOCK_BYTES 4096

struct status_map {
	unsigned status;
	const char *type, *code;
};

static struct status_map map_error(int err)
{
	switch (err) {
	case -O1_E_QUOTA:
	case -EAGAIN:
		return (struct status_map){429, "rate_limit_error",
					   "rate_limit_exceeded"};
	case -O1_E_DRAINING:
		return (struct status_map){503, "server_error", "draining"};
	case -ECONNREFUSED:
	case -ENOENT:
	case -ECONNRESET:
	case -EPIPE:
	case -ENOTCONN:
		return (struct status_map){503, "server_error",
					   "daemon_unavailable"};
	case -O1_E_CONTEXT:
		return (struct status_map){400, "invalid_request_error",
					   "context_length_exceeded"};
	case -O1_E_BOUNDS:
	case -O1_E_TOKENIZER:
	case -O1_E_NO_TOKENIZER:
	case -O1_E_FORMAT:
	case -O1_E_UNSUPPORTED:
	case -O1_E_GRAMMAR:
	case -O1_E_PROTOCOL:
	case -EINVAL:
	case -E2BIG:
		return (struct status_map){400, "invalid_request_error",
					   "invalid_value"};
	case -ETIMEDOUT:
		return (struct status_map){504, "server_error", "timeout"};
	default:
		return (struct status_map){500, "server_error", NULL};
	}
}

static enum MHD_Result fail_param(struct o1_sidecar_conn *c, int err,
				  const char *detail, const char *param)
{
	struct status_map m = map_error(err);
	char msg[256];

	if (err == -ECONNABORTED) { /* nobody to answer: close */
		c->log.aborted = true;
		c->log.status = 499;
		c->answered = true;
		return MHD_NO;
	}
	if (err == -O1_E_BOUNDS && !(detail && *detail))
		detail = "a value beyond the daemon's limits (max_tokens "
			 "beyond the context, top_k beyond the vocabulary, a "
			 "stop string or prompt too long)";
	snprintf(msg, sizeof(msg), "o1d: %s%s%s", o1_client_strerror(err),
		 detail && *detail ? ": " : "", detail ? detail : "");
	return o1_sidecar_reply_error(c, m.status, msg, m.type, param, m.code);
}

static enum MHD_Result fail(struct o1_sidecar_conn *c, int err,
			    const char *detail)
{
	return fail_param(c, err, detail, NULL);
}

/* One request in flight: owned by the handler (whole answers) or by the
 * streaming response (freed by its free callback). */
struct run {
	struct o1_sidecar_conn *c; /* a reference is held */
	struct o1_sidecar_request req;
	struct o1_sidecar_out out;
	struct o1_sidecar_gen gen;
	char model[128];
	char error[100]; /* text of an ERROR event */
	struct o1_event first;
	bool have_first, slot, first_chunk, done;
	char *pending;
	size_t pending_len, pending_off;
};

/* A refused FINAL: a refinement request out of the daemon's bounds is
 * most likely refine_steps above its refine.max_steps; a refused grammar
 * is response_format's, or the tools' when tool_choice forced a call
 * (the ERROR before the FINAL says why). */
static enum MHD_Result fail_final(struct run *r, const struct o1_event *ev)
{
	char detail[160];

	if (ev->error == -O1_E_GRAMMAR)
		return fail_param(r->c, ev->error, r->error,
				  r->req.grammar_type ==
					  O1_GRAMMAR_TYPE_TOOL_CALL
				      ? "tools"
				      : "response_format");
	if (ev->error != -O1_E_BOUNDS || !r->req.refine_steps)
		return fail(r->c, ev->error, r->error);
	snprintf(detail, sizeof(detail),
		 "refine_steps %u is above the daemon's refine.max_steps "
		 "(or another value is beyond its limits)",
		 r->req.refine_steps);
	return fail_param(r->c, ev->error, detail, "refine_steps");
}

static void run_free(struct run *r)
{
	o1_sidecar_gen_end(&r->gen);
	if (r->slot)
		atomic_fetch_sub(&r->c->h->running, 1);
	r->c->log.t_first_ns = r->gen.t_first_ns;
	r->c->log.prompt_tokens = r->gen.prompt_tokens;
	r->c->log.completion_tokens = r->gen.finished
					  ? r->gen.generated_tokens
					  : r->gen.streamed_tokens;
	if (r->out.finish)
		r->c->log.finish = r->out.finish;
	o1_sidecar_conn_put(r->c);
	o1_sidecar_out_fini(&r->out);
	o1_sidecar_request_fini(&r->req);
	free(r->pending);
	free(r);
}

/* Next event: the one read before answering, then the daemon's. */
static int next(struct run *r, struct o1_event *ev)
{
	int ret;

	if (r->have_first) {
		*ev = r->first;
		r->have_first = false;
		return 1;
	}
	ret = o1_sidecar_gen_next(&r->gen, ev);
	if (ret == 1 && ev->type == O1_EVENT_ERROR)
		snprintf(r->error, sizeof(r->error), "%s", ev->message);
	return ret;
}

static bool failed_final(const struct o1_event *ev)
{
	return ev->type == O1_EVENT_FINAL &&
	       ev->finish == O1_FINISH_REASON_ERROR;
}

static enum MHD_Result answer_whole(struct run *r)
{
	struct o1_event ev;
	char *json = NULL;
	int ret;

	do {
		ret = next(r, &ev);
		if (ret < 0)
			return fail(r->c, ret, NULL);
		if (failed_final(&ev))
			return fail_final(r, &ev);
		if (o1_sidecar_out_add(&r->out, &ev))
			return fail(r->c, -ENOMEM, NULL);
	} while (ev.type != O1_EVENT_FINAL);
	if (o1_sidecar_full_json(&r->out, &json))
		return fail(r->c, -ENOMEM, NULL);
	return o1_sidecar_reply_json(r->c, 200, json);
}

static int push(struct run *r, char *s)
{
	size_t n = strlen(s), left = r->pending_len - r->pending_off;
	char *p = malloc(left + n);

	if (!p) {
		free(s);
		return -ENOMEM;
	}
	if (left)
		memcpy(p, r->pending + r->pending_off, left);
	memcpy(p + left, s, n);
	free(s);
	free(r->pending);
	r->pending = p;
	r->pending_len = left + n;
	r->pending_off = 0;
	return 0;
}

/* The end of a stream: last chunk, usage, [DONE]; or an error event. */
static int finish_stream(struct run *r, int err)
{
	struct status_map m = map_error(err);
	char *s = NULL, *json = NULL, msg[200];
	int ret = 0;

	r->done = true;
	if (err) {
		snprintf(msg, sizeof(msg), "o1d: %s%s%s",
			 o1_client_strerror(err), r->error[0] ? ": " : "",
			 r->error);
		r->c->log.finish = m.code ? m.code : m.type;
		ret = o1_sidecar_error_json(msg, m.type, NULL, m.code, &json);
		if (!ret && asprintf(&s, "data: %s\n\n", json) < 0)
			ret = -ENOMEM;
		free(json);
	} else {
		ret = o1_sidecar_chunk_sse(&r->out, r->first_chunk, &s);
		if (!ret && r->req.include_usage) {
			ret = push(r, s);
			s = NULL;
			if (!ret)
				ret = o1_sidecar_usage_sse(&r->out, &s);
		}
	}
	if (!ret)
		ret = push(r, s);
	return ret ? ret : push(r, strdup("data: [DONE]\n\n"));
}

/* A chunk of what came since the last one, when it may go out (with
 * tools, text that may start a call is held to the FINAL). */
static int send_due(struct run *r)
{
	char *s = NULL;
	int ret;

	if (!o1_sidecar_chunk_due(&r->out, r->first_chunk))
		return 0;
	ret = o1_sidecar_chunk_sse(&r->out, r->first_chunk, &s);
	r->first_chunk = false;
	return ret ? ret : push(r, s);
}

/* Reads one event and turns it into pending SSE bytes. */
static int step(struct run *r)
{
	struct o1_event ev;
	int ret = next(r, &ev);

	if (ret < 0)
		return ret == -ECONNABORTED ? ret : finish_stream(r, ret);
	if (failed_final(&ev))
		return finish_stream(r, ev.error);
	/* a token's alternatives (LOGPROBS, TOP_TEXT) follow its TOKEN:
	 * with top_logprobs, the tokens so far go out when the next TOKEN
	 * (or ROUND) comes; the FINAL sends the rest */
	if (r->out.n_top && r->out.sent_tok < r->out.n_tok &&
	    (ev.type == O1_EVENT_TOKEN || ev.type == O1_EVENT_ROUND)) {
		ret = send_due(r);
		if (ret)
			return ret;
	}
	ret = o1_sidecar_out_add(&r->out, &ev);
	if (ret || ev.type == O1_EVENT_FINAL)
		return ret ? ret : finish_stream(r, 0);
	if (ev.type != O1_EVENT_TOKEN || r->out.n_top)
		return 0;
	return send_due(r);
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct run *r = cls;
	size_t n;

	(void)pos;
	while (r->pending_off == r->pending_len) {
		if (r->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (step(r) < 0) {
			r->c->log.aborted = !r->out.finish;
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	}
	n = r->pending_len - r->pending_off;
	n = n < max ? n : max;
	memcpy(buf, r->pending + r->pending_off, n);
	r->pending_off += n;
	return (ssize_t)n;
}

static void reader_free(void *cls)
{
	run_free(cls);
}

static enum MHD_Result answer_stream(struct run *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, SSE_BLOCK_BYTES, reader, r, reader_free);
	if (!resp) {
		ret = fail(r->c, -ENOMEM, NULL);
		run_free(r);
		return ret;
	}
	r->c->log.status = 200;
	r->c->answered = true;
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	o1_sidecar_closing(r->c, resp);
	ret = MHD_queue_response(r->c->mhd, 200, resp);
	MHD_destroy_response(resp); /* the reader owns r from here */
	return ret;
}

static enum MHD_Result refuse(struct o1_sidecar_conn *c,
			      const struct o1_sidecar_request *req,
			      const char *model)
{
	char msg[256];

	if (strcmp(req->model, model) && strcmp(req->model, "default")) {
		snprintf(msg, sizeof(msg),
			 "The model '%.60s' does not exist; this server has "
			 "'%.60s' (or 'default')",
			 req->model, model);
		return o1_sidecar_reply_error(c, 404, msg,
					      "invalid_request_error", "model",
					      "model_not_found");
	}
	snprintf(msg, sizeof(msg), "more than %u requests at once; retry later",
		 c->h->o.max_concurrent);
	return o1_sidecar_reply_error(c, 429, msg, "rate_limit_error", NULL,
				      "rate_limit_exceeded");
}

/* The OpenAI parameter a libo1client refusal is about. */
static const char *refused_param(const struct run *r)
{
	const char *f = r->gen.refusal.field;

	if (!f)
		return NULL;
	if (!strcmp(f, "prompt"))
		return r->req.kind == O1_SIDECAR_CHAT ? "messages" : "prompt";
	if (!strcmp(f, "prompt_ids"))
		return "prompt";
	if (!strcmp(f, "stop_ids"))
		return "stop";
	if (!strcmp(f, "grammar"))
		return r->req.grammar_type == O1_GRAMMAR_TYPE_TOOL_CALL
			   ? "tools"
			   : "response_format";
	return f; /* max_tokens, top_k */
}

/* A request over the daemon's limits, refused before it was sent: a 400
 * naming the parameter and the limit (OpenAI: context_length_exceeded or
 * invalid_value), never a daemon failure. */
static enum MHD_Result fail_refused(struct run *r, int err)
{
	char detail[200];

	snprintf(detail, sizeof(detail), "%s", o1_last_error());
	return fail_param(r->c, err, detail, refused_param(r));
}

/* How o1d's model writes tool calls (its welcome's, through the handle
 * the request runs on). */
static uint32_t tool_format(struct run *r)
{
	struct o1_client_limits l = {.sz = sizeof(l)};

	return r->gen.c && !o1_client_limits(r->gen.c, &l) ? l.tool_format
							    : O1_TOOLS_NONE;
}

/* Parses, checks and submits; on success R runs. Else answers itself. */
static int prepare(struct run *r, enum o1_sidecar_kind kind,
		   enum MHD_Result *res)
{
	struct o1_sidecar_conn *c = r->c;
	struct o1_sidecar_req_error e;
	int ret = o1_sidecar_request_parse(c->body ? c->body : "", c->len, kind,
					   &r->req, &e);

	if (ret) {
		*res = ret == -EINVAL
			   ? o1_sidecar_reply_error(c, 400, e.message,
						    "invalid_request_error",
						    e.param, "invalid_value")
			   : fail(c, ret, NULL);
		return -1;
	}
	c->log.stream = r->req.stream;
	if (o1_sidecar_model(c->h, r->model, sizeof(r->model))) {
		*res = fail(c, -ECONNREFUSED, "no o1d answers on its socket");
		return -1;
	}
	if (strcmp(r->req.model, r->model) && strcmp(r->req.model, "default"))
		goto refused;
	if (atomic_fetch_add(&c->h->running, 1) >= c->h->o.max_concurrent) {
		atomic_fetch_sub(&c->h->running, 1);
		goto refused;
	}
	r->slot = true;
	ret = o1_sidecar_gen_start(&r->gen, c->h->b, &r->req, c->fd,
				   c->h->o.request_timeout_ms);
	if (ret == O1_CLIENT_E_CONTEXT || ret == O1_CLIENT_E_BOUNDS) {
		*res = fail_refused(r, ret);
		return -1;
	}
	if (ret) {
		*res = fail(c, ret, NULL);
		return -1;
	}
	return 0;
refused:
	*res = refuse(c, &r->req, r->model);
	return -1;
}

enum MHD_Result o1_sidecar_generate(struct o1_sidecar_conn *c,
				    enum o1_sidecar_kind kind)
{
	struct run *r = calloc(1, sizeof(*r));
	enum MHD_Result res;
	int ret;

	if (!r)
		return MHD_NO;
	r->c = c;
	r->first_chunk = true;
	atomic_fetch_add(&c->refs, 1);
	if (prepare(r, kind, &res))
		goto out;
	o1_sidecar_out_init(&r->out, &r->req, r->model);
	r->out.tool_format = tool_format(r);
	ret = next(r, &r->first);
	if (ret == 1 && r->first.type == O1_EVENT_ERROR) /* why; the FINAL */
		ret = next(r, &r->first); /* that fails follows at once */
	r->have_first = ret == 1;
	if (ret < 0) {
		res = fail(c, ret, NULL);
	} else if (failed_final(&r->first)) {
		res = fail_final(r, &r->first);
	} else if (r->req.stream) {
		return answer_stream(r);
	} else {
		res = answer_whole(r);
	}
out:
	run_free(r);
	return res;
}

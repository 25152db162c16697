/* OpenAI request bodies -> struct o1_sidecar_request (see the header).
 *
 * Each field has one small reader that checks its JSON type and range and
 * names the parameter on failure; a field that is absent or null keeps its
 * default (OpenAI's: temperature 1, top_p 1). Strings are copied; the cJSON
 * tree is freed before returning. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sidecar_fields.h"
#include "sidecar_input.h"
#include "sidecar_request.h"
#include "sidecar_format.h"
#include "sidecar_tools.h"

#define MAX_TOKENS_LIMIT (1u << 24)
#define PROMPT_IDS_MAX	 (1u << 24)

/* A finite number in [lo, hi] into *out; absent keeps *out. */
static int get_num(const cJSON *obj, const char *name, double lo, double hi,
		   float *out, struct o1_sidecar_req_error *err)
{
	const cJSON *v = field(obj, name);

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return bad(err, name, "'%s' must be a number", name);
	if (v->valuedouble < lo || v->valuedouble > hi)
		return bad(err, name, "'%s' is %g; allowed: %g to %g", name,
			   v->valuedouble, lo, hi);
	*out = (float)v->valuedouble;
	return 0;
}

/* An integer in [lo, hi]; *given says whether it was there. */
static int get_int(const cJSON *obj, const char *name, double lo, double hi,
		   double *out, bool *given, struct o1_sidecar_req_error *err)
{
	const cJSON *v = field(obj, name);

	*given = v != NULL;
	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    floor(v->valuedouble) != v->valuedouble)
		return bad(err, name, "'%s' must be an integer", name);
	if (v->valuedouble < lo || v->valuedouble > hi)
		return bad(err, name, "'%s' is %.0f; allowed: %.0f to %.0f",
			   name, v->valuedouble, lo, hi);
	*out = v->valuedouble;
	return 0;
}

static int get_bool(const cJSON *obj, const char *name, bool *out,
		    struct o1_sidecar_req_error *err)
{
	const cJSON *v = field(obj, name);

	if (!v)
		return 0;
	if (!cJSON_IsBool(v))
		return bad(err, name, "'%s' must be a boolean", name);
	*out = cJSON_IsTrue(v);
	return 0;
}

/* Appends S (N bytes) and a NUL to the packed chat prompt. */
static int pack(struct o1_sidecar_request *r, const char *s, size_t n)
{
	char *p = realloc(r->prompt, r->prompt_len + n + 1);

	if (!p)
		return -ENOMEM;
	memcpy(p + r->prompt_len, s, n);
	p[r->prompt_len + n] = 0;
	r->prompt = p;
	r->prompt_len += n + 1;
	return 0;
}

/* Content: a string, or an array of {"type":"text","text":S} parts
 * (joined). */
static int pack_content(struct o1_sidecar_request *r, const cJSON *c,
			struct o1_sidecar_req_error *err)
{
	const cJSON *part;
	size_t start = r->prompt_len;
	int ret;

	if (cJSON_IsString(c))
		return pack(r, c->valuestring, strlen(c->valuestring));
	if (!cJSON_IsArray(c))
		return bad(err, "messages",
			   "a message's 'content' must be a string or an "
			   "array of text parts");
	cJSON_ArrayForEach(part, c)
	{
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
		const cJSON *ty =
		    cJSON_GetObjectItemCaseSensitive(part, "type");

		if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") ||
		    !cJSON_IsString(t))
			return bad(err, "messages",
				   "only content parts of type 'text' with a "
				   "string 'text' are supported");
		if (r->prompt_len > start)
			r->prompt_len--; /* join: drop the previous NUL */
		ret = pack(r, t->valuestring, strlen(t->valuestring));
		if (ret)
			return ret;
	}
	return r->prompt_len > start ? 0 : pack(r, "", 0);
}

static int parse_messages(const cJSON *root, struct o1_sidecar_request *r,
			  struct o1_sidecar_req_error *err)
{
	static const char *const roles[] = {"system", "developer", "user",
					    "assistant", "tool"};
	const cJSON *msgs = field(root, "messages"), *m;
	int n = 0, ret;

	if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
		return bad(err, "messages",
			   "'messages' must be a non-empty array");
	if (cJSON_GetArraySize(msgs) > O1_SIDECAR_MAX_MESSAGES)
		return bad(err, "messages", "%d messages; at most %d",
			   cJSON_GetArraySize(msgs), O1_SIDECAR_MAX_MESSAGES);
	cJSON_ArrayForEach(m, msgs)
	{
		const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
		size_t k = 0;

		while (k < 5 && cJSON_IsString(role) &&
		       strcmp(role->valuestring, roles[k]))
			k++;
		if (k == 5 || !cJSON_IsString(role))
			return bad(err, "messages",
				   "message %d: 'role' must be one of system, "
				   "developer, user, assistant, tool",
				   n);
		ret = pack(r, k == 1 ? "system" : roles[k],
			   strlen(k == 1 ? "system" : roles[k]));
		if (!ret)
			ret = cJSON_IsNull(c) || !c ? pack(r, "", 0)
						    : pack_content(r, c, err);
		if (ret)
			return ret;
		n++;
	}
	return 0;
}

static int parse_prompt_ids(const cJSON *p, struct o1_sidecar_request *r,
			    struct o1_sidecar_req_error *err)
{
	int n = cJSON_GetArraySize(p), i = 0;
	const cJSON *v;

	if ((unsigned)n > PROMPT_IDS_MAX)
		return bad(err, "prompt", "%d prompt tokens; at most %u", n,
			   PROMPT_IDS_MAX);
	r->ids = calloc((size_t)n, sizeof(*r->ids));
	if (!r->ids)
		return -ENOMEM;
	cJSON_ArrayForEach(v, p)
	{
		if (!cJSON_IsNumber(v) || v->valuedouble < 0 ||
		    v->valuedouble > UINT32_MAX - 1.0 ||
		    floor(v->valuedouble) != v->valuedouble)
			return bad(err, "prompt",
				   "a token-id prompt holds integers from 0; "
				   "item %d is not one",
				   i);
		r->ids[i++] = (uint32_t)v->valuedouble;
	}
	r->n_ids = (size_t)n;
	return 0;
}

/* A string, an array of one string, or an array of token ids. */
static int parse_prompt(const cJSON *root, struct o1_sidecar_request *r,
			struct o1_sidecar_req_error *err)
{
	const cJSON *p = field(root, "prompt"), *first;

	if (cJSON_IsArray(p)) {
		first = cJSON_GetArrayItem(p, 0);
		if (cJSON_IsNumber(first))
			return parse_prompt_ids(p, r, err);
		if (cJSON_GetArraySize(p) != 1 || !cJSON_IsString(first))
			return bad(err, "prompt",
				   "'prompt' as an array: one string or "
				   "token ids (batches are not supported)");
		p = first;
	}
	if (!cJSON_IsString(p) || !p->valuestring[0])
		return bad(err, "prompt",
			   "'prompt' must be a non-empty string, or token ids");
	r->prompt_len = strlen(p->valuestring);
	r->prompt = strdup(p->valuestring);
	return r->prompt ? 0 : -ENOMEM;
}

static int add_stop(struct o1_sidecar_request *r, const cJSON *s,
		    struct o1_sidecar_req_error *err)
{
	size_t n;

	if (!cJSON_IsString(s))
		return bad(err, "stop",
			   "'stop' must be a string or an array "
			   "of strings");
	n = strlen(s->valuestring);
	if (n == 0 || n > 255)
		return bad(err, "stop",
			   "a stop string of %zu bytes; allowed: "
			   "1 to 255",
			   n);
	r->stop[r->n_stop] = strdup(s->valuestring);
	return r->stop[r->n_stop++] ? 0 : -ENOMEM;
}

static int parse_stop(const cJSON *root, struct o1_sidecar_request *r,
		      struct o1_sidecar_req_error *err)
{
	const cJSON *s = field(root, "stop"), *v;
	int ret;

	if (!s)
		return 0;
	if (!cJSON_IsArray(s))
		return add_stop(r, s, err);
	if (cJSON_GetArraySize(s) > O1_SIDECAR_MAX_STOP)
		return bad(err, "stop", "%d stop sequences; at most %d",
			   cJSON_GetArraySize(s), O1_SIDECAR_MAX_STOP);
	cJSON_ArrayForEach(v, s)
	{
		ret = add_stop(r, v, err);
		if (ret)
			return ret;
	}
	return 0;
}

static int parse_max_tokens(const cJSON *root, struct o1_sidecar_request *r,
			    struct o1_sidecar_req_error *err)
{
	static const char *const names[] = {"max_completion_tokens",
					    "max_tokens"};
	double v;
	bool given;
	int ret;

	for (int i = 0; i < 2; i++) {
		ret = get_int(root, names[i], 1, MAX_TOKENS_LIMIT, &v, &given,
			      err);
		if (ret)
			return ret;
		if (given && !r->max_tokens)
			r->max_tokens = (uint32_t)v;
	}
	return 0;
}

static int parse_sampling(const cJSON *root, struct o1_sidecar_request *r,
			  struct o1_sidecar_req_error *err)
{
	struct o1_sampling *s = &r->sampling;
	float top_p = 1;
	double v;
	bool given;
	int ret;

	ret = get_num(root, "temperature", 0, 2, &s->temperature, err);
	if (!ret)
		ret = get_num(root, "top_p", 0, 1, &top_p, err);
	if (!ret)
		ret = get_num(root, "min_p", 0, 1, &s->min_p, err);
	if (!ret)
		ret = get_num(root, "presence_penalty", -2, 2,
			      &s->presence_penalty, err);
	if (!ret)
		ret = get_num(root, "frequency_penalty", -2, 2,
			      &s->frequency_penalty, err);
	if (!ret)
		ret = get_num(root, "repetition_penalty", 0.01, 10,
			      &s->repeat_penalty, err);
	if (!ret)
		ret = get_int(root, "top_k", 0, 1e6, &v, &given, err);
	if (ret)
		return ret;
	s->top_k = given ? (uint32_t)v : 0;
	ret = get_int(root, "seed", -9223372036854775808.0,
		      18446744073709549568.0, &v, &given, err);
	if (ret)
		return ret;
	if (given)
		s->seed = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
	s->top_p = top_p;
	if (top_p == 0) /* nothing but the most likely token */
		s->temperature = 0;
	return 0;
}

static int parse_logprobs(const cJSON *root, struct o1_sidecar_request *r,
			  struct o1_sidecar_req_error *err)
{
	const cJSON *lp = field(root, "logprobs");
	double v;
	bool given;
	int ret;

	if (r->kind == O1_SIDECAR_COMPLETION && lp && !cJSON_IsBool(lp)) {
		ret = get_int(root, "logprobs", 0, O1_SIDECAR_MAX_TOP_LOGPROBS,
			      &v, &given, err);
		r->logprobs = !ret;
		r->top_logprobs = ret ? 0 : (uint32_t)v;
		return ret;
	}
	ret = get_bool(root, "logprobs", &r->logprobs, err);
	if (!ret)
		ret = get_int(root, "top_logprobs", 0,
			      O1_SIDECAR_MAX_TOP_LOGPROBS, &v, &given, err);
	if (ret || !given)
		return ret;
	if (!r->logprobs && v > 0)
		return bad(err, "top_logprobs",
			   "'top_logprobs' needs 'logprobs': true");
	r->top_logprobs = (uint32_t)v;
	return 0;
}

static int parse_flags(const cJSON *root, struct o1_sidecar_request *r,
		       struct o1_sidecar_req_error *err)
{
	const cJSON *so = field(root, "stream_options");
	double n;
	bool given;
	int ret;

	ret = get_bool(root, "stream", &r->stream, err);
	if (!ret)
		ret = get_bool(root, "ignore_eos", &r->ignore_eos, err);
	if (!ret && so && !cJSON_IsObject(so))
		ret = bad(err, "stream_options",
			  "'stream_options' must be an object");
	if (!ret && so)
		ret = get_bool(so, "include_usage", &r->include_usage, err);
	if (!ret)
		ret = get_int(root, "n", 1, 1, &n, &given, err);
	if (!ret && field(root, "echo") && !cJSON_IsFalse(field(root, "echo")))
		ret = bad(err, "echo", "'echo' is not supported");
	if (!ret && field(root, "suffix"))
		ret = bad(err, "suffix", "'suffix' is not supported");
	return ret;
}

/* Refinement is a chat feature of o1d: the review turn needs a
 * conversation to render with the chat template. */
static int parse_refine(const cJSON *root, struct o1_sidecar_request *r,
			struct o1_sidecar_req_error *err)
{
	double v;
	bool given;
	int ret = get_int(root, "refine_steps", 0, O1_SIDECAR_MAX_REFINE, &v,
			  &given, err);

	if (ret || !given)
		return ret;
	if (r->kind != O1_SIDECAR_CHAT && v > 0)
		return bad(err, "refine_steps",
			   "'refine_steps' is %.0f; o1d refines chat "
			   "conversations only: use /v1/chat/completions",
			   v);
	r->refine_steps = (uint32_t)v;
	return 0;
}

/* OpenAI parameters o1d does not implement yet are refused by name, not
 * ignored: a client asking for tool calls would otherwise get plain text
 * and not know. response_format is read by sidecar_format.c (a JSON
 * format becomes grammar text that o1d enforces). */
static int parse_unsupported(const cJSON *root, struct o1_sidecar_req_error *err)
{
	static const char *const names[] = {"functions", "function_call"};
	const cJSON *bias = field(root, "logit_bias");

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (field(root, names[i]) &&
		    !cJSON_IsNull(field(root, names[i])))
			return bad(err, names[i],
				   "'%s' is deprecated and not supported: "
				   "use 'tools' and 'tool_choice'",
				   names[i]);
	if (field(root, "best_of") && !cJSON_IsNull(field(root, "best_of")) &&
	    !(cJSON_IsNumber(field(root, "best_of")) &&
	      field(root, "best_of")->valuedouble == 1))
		return bad(err, "best_of",
			   "'best_of' other than 1 is not supported");
	/* null or {} asks for nothing */
	if (bias && !cJSON_IsNull(bias) &&
	    !(cJSON_IsObject(bias) && !bias->child))
		return bad(err, "logit_bias",
			   "'logit_bias' is not supported (o1d has no "
			   "per-token bias)");
	return 0;
}

static int parse_root(const cJSON *root, struct o1_sidecar_request *r,
		      struct o1_sidecar_req_error *err)
{
	const cJSON *model = field(root, "model");
	int ret;

	if (!cJSON_IsObject(root))
		return bad(err, "", "the request body must be a JSON object");
	if (!cJSON_IsString(model))
		return bad(err, "model", "'model' must be a string");
	r->model = strdup(model->valuestring);
	if (!r->model)
		return -ENOMEM;
	ret = r->kind == O1_SIDECAR_CHAT ? parse_messages(root, r, err)
					 : parse_prompt(root, r, err);
	if (!ret)
		ret = parse_max_tokens(root, r, err);
	if (!ret)
		ret = parse_sampling(root, r, err);
	if (!ret)
		ret = parse_stop(root, r, err);
	if (!ret)
		ret = parse_logprobs(root, r, err);
	if (!ret)
		ret = parse_flags(root, r, err);
	if (!ret)
		ret = parse_refine(root, r, err);
	if (!ret)
		ret = parse_unsupported(root, err);
	if (!ret)
		ret = o1_sidecar_format_parse(root, r, err);
	if (!ret)
		ret = o1_sidecar_tools_parse(root, r, err);
	return ret;
}

int o1_sidecar_request_parse(const char *body, size_t len,
			     enum o1_sidecar_kind kind,
			     struct o1_sidecar_request *req,
			     struct o1_sidecar_req_error *err)
{
	cJSON *root;
	int ret;

	memset(req, 0, sizeof(*req));
	memset(err, 0, sizeof(*err));
	req->kind = kind;
	req->sampling.sz = sizeof(req->sampling);
	req->sampling.temperature = 1;
	if (o1_sidecar_body_check(body, len, err->message,
				  sizeof(err->message)))
		return -EINVAL;
	root = cJSON_ParseWithLength(body, len);
	if (!root)
		return bad(err, "", "the body (%zu bytes) is not valid JSON",
			   len);
	ret = parse_root(root, req, err);
	cJSON_Delete(root);
	return ret;
}

void o1_sidecar_request_fini(struct o1_sidecar_request *req)
{
	if (!req)
		return;
	free(req->model);
	free(req->prompt);
	free(req->ids);
	for (size_t i = 0; i < req->n_stop; i++)
		free(req->stop[i]);
	free(req->grammar);
	free(req->tools);
	memset(req, 0, sizeof(*req));
}

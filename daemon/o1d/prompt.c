/* Prompt rendering (see prompt.h). The chat buffer holds the request's
 * prompt copy (NUL-terminated, split in place into messages) followed by
 * the rendering, which then moves to the buffer's start for encoding:
 * twice max_prompt_bytes plus 4 KiB leaves the template and a refinement
 * round's answer and review room. */
#include "prompt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "common/log.h"
#include "tokenizer/chat_request.h"

/* The review instruction when none is configured (config/refine_review.txt
 * ships the same text). */
static const char default_review[] =
    "Review your previous answer carefully. If it is correct and complete, "
    "repeat it unchanged. Otherwise write only the corrected answer.";

struct o1_prompt {
	struct o1_prompt_opts o;
	char *chat_buf;
	size_t chat_cap;
	char *review;
	char why[160]; /* o1_prompt_why */
};

int o1_prompt_create(const struct o1_prompt_opts *o, struct o1_prompt **out)
{
	struct o1_prompt *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->o = *o;
	p->chat_cap = (size_t)o->max_prompt_bytes * 2 + 4096;
	p->chat_buf = malloc(p->chat_cap);
	p->review = strdup(o->review ? o->review : default_review);
	p->o.review = NULL; /* borrowed: the copy is p->review */
	if (!p->chat_buf || !p->review) {
		o1_prompt_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void o1_prompt_destroy(struct o1_prompt *p)
{
	if (!p)
		return;
	free(p->chat_buf);
	free(p->review);
	free(p);
}

/* Splits the CHAT prompt copied at BUF (N bytes, NUL at BUF[N]) into
 * messages: "role\0content\0role\0content..." (a final NUL is
 * optional); text without any NUL is one user message. */
static int chat_split(const struct o1_req *r, char *buf, size_t n,
		      struct o1_chat_message *msg, size_t *n_msg)
{
	char *p = buf, *end = buf + n;

	*n_msg = 0;
	if (!memchr(buf, 0, n)) {
		msg[(*n_msg)++] = (struct o1_chat_message){"user", buf};
		return 0;
	}
	while (p < end) {
		char *role = p, *nul = memchr(p, 0, (size_t)(end - p));

		if (!nul || *n_msg == O1_PROMPT_MAX_MESSAGES) {
			o1_warn("request %llu: chat prompt of %zu bytes: %s at "
				"byte %zu",
				(unsigned long long)r->req_id, n,
				nul ? "more than 64 messages"
				    : "a role without content",
				(size_t)(p - buf));
			return nul ? -O1_E_BOUNDS : -O1_E_FORMAT;
		}
		msg[*n_msg].role = role;
		msg[(*n_msg)++].content = nul + 1;
		nul = memchr(nul + 1, 0, (size_t)(end - nul - 1));
		p = nul ? nul + 1 : end + 1;
	}
	return 0;
}

/* Appends a refinement round's turns to VARS' messages: the previous
 * answer PREV and the review instruction. */
static int add_review(cJSON *vars, const char *prev, const char *review)
{
	cJSON *msgs = cJSON_GetObjectItemCaseSensitive(vars, "messages");
	const char *role[2] = {"assistant", "user"}, *text[2] = {prev, review};

	for (int i = 0; i < 2; i++) {
		cJSON *m = cJSON_CreateObject();

		if (!m || !cJSON_AddItemToArray(msgs, m) ||
		    !cJSON_AddStringToObject(m, "role", role[i]) ||
		    !cJSON_AddStringToObject(m, "content", text[i]))
			return -ENOMEM;
	}
	return 0;
}

/* R's prompt is a chat request as JSON (O1_SUBMIT_CHAT_JSON: messages
 * with tool calls and tool results, tools): checked, then rendered with
 * those variables into chat_buf; *len gets its length. */
static int render_json(struct o1_prompt *p, const struct o1_req *r,
		       const char *prev, size_t *len)
{
	struct o1_jinja_error err = {0};
	char msg[160], *text = NULL;
	cJSON *vars = NULL;
	size_t n = 0;
	int ret = o1_chat_request_parse((const char *)r->prompt,
					r->prompt_bytes, &vars, msg,
					sizeof(msg));

	if (ret) {
		o1_warn("request %llu: chat request refused: %s",
			(unsigned long long)r->req_id, msg);
		snprintf(p->why, sizeof(p->why), "%s", msg);
		return ret;
	}
	if (prev)
		ret = add_review(vars, prev, p->review);
	if (!ret && !cJSON_AddBoolToObject(vars, "add_generation_prompt", 1))
		ret = -ENOMEM;
	if (!ret)
		ret = o1_chat_template_render_vars(p->o.chat, vars, &text, &n,
						   &err);
	cJSON_Delete(vars);
	if (ret == -EINVAL || ret == -O1_E_BOUNDS) {
		o1_warn("request %llu: the chat template failed at %u:%u: %s",
			(unsigned long long)r->req_id, err.line, err.col,
			err.msg);
		snprintf(p->why, sizeof(p->why), "chat template: %.140s", err.msg);
	}
	if (!ret && n >= p->chat_cap) {
		o1_warn("request %llu: rendered chat prompt of %zu bytes "
			"exceeds %zu",
			(unsigned long long)r->req_id, n, p->chat_cap);
		ret = -O1_E_BOUNDS;
	}
	if (!ret) {
		memcpy(p->chat_buf, text, n);
		p->chat_buf[n] = 0;
		*len = n;
	}
	free(text);
	return ret;
}

/* Renders R's chat prompt into chat_buf (after PREV and the review
 * instruction for a refinement round); *len gets its length. */
static int render_chat(struct o1_prompt *p, const struct o1_req *r,
		       const char *prev, size_t *len)
{
	struct o1_chat_message msg[O1_PROMPT_MAX_MESSAGES + 2];
	size_t n = r->prompt_bytes, n_msg, cap;
	char *out = p->chat_buf + n + 1;
	struct o1_jinja_error err;
	int ret;

	if (!p->o.chat) {
		o1_warn("request %llu: chat asked, but there is no chat "
			"template: send a prompt (completions), or set "
			"model.chat_template",
			(unsigned long long)r->req_id);
		snprintf(p->why, sizeof(p->why),
			 "model has no chat template: send a prompt "
			 "(completions), or set model.chat_template");
		return -O1_E_UNSUPPORTED;
	}
	if (r->params.flags & O1_SUBMIT_CHAT_JSON)
		return render_json(p, r, prev, len);
	memcpy(p->chat_buf, r->prompt, n);
	p->chat_buf[n] = 0;
	ret = chat_split(r, p->chat_buf, n, msg, &n_msg);
	if (ret)
		return ret;
	if (prev) {
		msg[n_msg++] = (struct o1_chat_message){"assistant", prev};
		msg[n_msg++] = (struct o1_chat_message){"user", p->review};
	}
	cap = p->chat_cap - n - 1;
	ret = o1_chat_template_render(p->o.chat, msg, n_msg, true, out, cap,
				      &err);
	if (ret < 0) {
		o1_warn("request %llu: the chat template failed at %u:%u: %s",
			(unsigned long long)r->req_id, err.line, err.col,
			err.msg);
		snprintf(p->why, sizeof(p->why), "chat template: %.140s", err.msg);
	}
	if (ret >= 0 && (size_t)ret >= cap) {
		o1_warn("request %llu: rendered chat prompt of %d bytes "
			"exceeds %zu",
			(unsigned long long)r->req_id, ret, cap);
		ret = -O1_E_BOUNDS;
	}
	if (ret < 0)
		return ret;
	memmove(p->chat_buf, out, (size_t)ret + 1);
	*len = (size_t)ret;
	return 0;
}

/* An id prompt: BOS when asked (and the model has one), then the ids. */
static int copy_ids(const struct o1_prompt *p, const struct o1_req *r,
		    int32_t *tokens, uint32_t *n)
{
	uint32_t bos =
	    (r->params.flags & O1_SUBMIT_ADD_BOS) && p->o.bos_id >= 0;
	uint32_t np = r->prompt_bytes / 4;

	if (np + bos >= p->o.max_context)
		return -O1_E_CONTEXT;
	if (bos)
		tokens[0] = p->o.bos_id;
	memcpy(tokens + bos, r->prompt, (size_t)np * 4);
	for (uint32_t i = 0; i < np + bos; i++)
		if ((uint32_t)tokens[i] >= p->o.vocab_size)
			return -O1_E_BOUNDS;
	*n = np + bos;
	return 0;
}

/* A text prompt, rendered first when it is a chat. */
static int encode_text(struct o1_prompt *p, const struct o1_req *r,
		       const char *prev, int32_t *tokens, uint32_t *n_out)
{
	const char *text = (const char *)r->prompt;
	size_t len = r->prompt_bytes;
	unsigned flags = 0;
	int n, err;

	if (!p->o.tok)
		return -O1_E_UNSUPPORTED;
	if (r->params.flags & O1_SUBMIT_CHAT) {
		err = render_chat(p, r, prev, &len);
		if (err)
			return err;
		text = p->chat_buf;
		/* the template wrote BOS where the model wants one */
		flags = O1_ENCODE_PARSE_SPECIAL;
	} else if (r->params.flags & O1_SUBMIT_ADD_BOS) {
		flags = O1_ENCODE_ADD_SPECIAL;
	}
	n = o1_tokenizer_encode(p->o.tok, text, len, flags, tokens,
				p->o.max_context);
	if (n < 0)
		return n;
	if (n == 0)
		return -O1_E_TOKENIZER;
	if ((uint32_t)n >= p->o.max_context)
		return -O1_E_CONTEXT;
	*n_out = (uint32_t)n;
	return 0;
}

int o1_prompt_tokenize(struct o1_prompt *p, const struct o1_req *r,
		       const char *prev, int32_t *tokens, uint32_t *n)
{
	p->why[0] = 0;
	if (r->params.prompt_kind == O1_PROMPT_IDS)
		return copy_ids(p, r, tokens, n);
	return encode_text(p, r, prev, tokens, n);
}

const char *o1_prompt_why(const struct o1_prompt *p)
{
	return p->why;
}

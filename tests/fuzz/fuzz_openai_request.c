/* libFuzzer harness for the sidecar's OpenAI request parser: a first
 * byte 'c' picks chat (else completions), the rest is the body. Any body either
 * parses into a request that keeps the parser's promises (a prompt or
 * ids, stop strings of 1..255 bytes, at most 4, sampling values in range)
 * or fails with -EINVAL and a message. A parsed request's answer (its own
 * prompt text echoed as a token, then a FINAL) must render as JSON that
 * parses back, whole and as an SSE chunk. A refusal's message renders as
 * an error body that parses back, and the input made UTF-8 by
 * o1_sidecar_utf8_clean is UTF-8 (sidecar_input.h). Tools, tool_choice
 * and messages with tool calls go through sidecar_tools.c, and a request
 * with tools reads its echoed text back as calls. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/utf8.h"
#include "tools/sidecar/sidecar_input.h"
#include "tools/sidecar/sidecar_request.h"
#include "tools/sidecar/sidecar_response.h"

static void check(const struct o1_sidecar_request *r)
{
	const struct o1_sampling *s = &r->sampling;

	if (!r->model || (!r->prompt && !r->ids) || r->n_stop > 4 ||
	    r->top_logprobs > O1_SIDECAR_MAX_TOP_LOGPROBS)
		abort();
	for (size_t i = 0; i < r->n_stop; i++)
		if (!r->stop[i][0] || strlen(r->stop[i]) > 255)
			abort();
	if (!isfinite(s->temperature) || s->temperature < 0 ||
	    s->temperature > 2 || s->top_p < 0 || s->top_p > 1)
		abort();
}

static void parses_back(const char *json)
{
	cJSON *j = cJSON_Parse(json);

	if (!j)
		abort();
	cJSON_Delete(j);
}

static void render(const struct o1_sidecar_request *r)
{
	struct o1_sidecar_out out;
	struct o1_event tok = {.type = O1_EVENT_TOKEN, .n_ids = 1};
	struct o1_event fin = {.type = O1_EVENT_FINAL, .generated_tokens = 1};
	size_t n = r->prompt ? strnlen(r->prompt, 48) : 0;
	char *s;

	o1_sidecar_out_init(&out, r, r->model);
	out.tool_format = O1_TOOLS_HERMES; /* read back when tools are set */
	memcpy(tok.text, r->prompt ? r->prompt : "", n);
	tok.text_len = n;
	if (o1_sidecar_out_add(&out, &tok) || o1_sidecar_out_add(&out, &fin))
		abort();
	if (o1_sidecar_full_json(&out, &s))
		abort();
	parses_back(s);
	free(s);
	if (o1_sidecar_chunk_sse(&out, true, &s) || strncmp(s, "data: ", 6))
		abort();
	s[strlen(s) - 2] = 0;
	parses_back(s + 6);
	free(s);
	o1_sidecar_out_fini(&out);
}

/* A refusal's error body, and the input cleaned to UTF-8 (both may quote
 * whatever the client sent). */
static void refusal(const struct o1_sidecar_req_error *e, const uint8_t *data,
		    size_t size)
{
	char in[512], out[512], *json;
	size_t n = size < sizeof(in) - 1 ? size : sizeof(in) - 1;

	if (o1_sidecar_error_json(e->message, "invalid_request_error",
				  e->param, "invalid_value", &json))
		abort();
	parses_back(json);
	free(json);
	memcpy(in, data, n);
	in[n] = 0;
	o1_sidecar_utf8_clean(in, out, sizeof(out));
	if (!o1_utf8_valid(out, strlen(out), NULL))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct o1_sidecar_request r;
	struct o1_sidecar_req_error e;
	int ret;

	if (size < 1)
		return 0;
	ret = o1_sidecar_request_parse(
	    (const char *)data + 1, size - 1,
	    data[0] != 'c' ? O1_SIDECAR_COMPLETION : O1_SIDECAR_CHAT, &r, &e);
	if (ret == 0) {
		check(&r);
		render(&r);
	} else if (ret != -EINVAL && ret != -ENOMEM) {
		abort();
	} else if (ret == -EINVAL && !e.message[0]) {
		abort();
	} else if (ret == -EINVAL) {
		refusal(&e, data, size);
	}
	o1_sidecar_request_fini(&r);
	return 0;
}

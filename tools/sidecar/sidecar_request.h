/* Parsing and validation of OpenAI request bodies (POST /v1/chat/completions
 * and /v1/completions) into what libo1client submits.
 *
 * The parser trusts nothing: any body (not JSON, wrong types, values out of
 * range, NUL bytes inside strings) gives -EINVAL with an OpenAI-style
 * message and the offending parameter's name, never a crash. Unknown
 * fields are ignored, as OpenAI's own server mostly does. Tool calling is
 * read by sidecar_tools.c. */
#ifndef O1_SIDECAR_REQUEST_H
#define O1_SIDECAR_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <o1/client.h>

enum o1_sidecar_kind {
	O1_SIDECAR_CHAT = 0,	   /* /v1/chat/completions */
	O1_SIDECAR_COMPLETION = 1, /* /v1/completions */
};

#define O1_SIDECAR_MAX_STOP	    4
#define O1_SIDECAR_MAX_TOP_LOGPROBS 20
#define O1_SIDECAR_MAX_MESSAGES	    64
/* refine_steps above this is refused here; the daemon's own bound
 * (refine.max_steps, at most this) is applied by the daemon */
#define O1_SIDECAR_MAX_REFINE (O1_REFINE_MAX_ROUNDS - 1)

struct o1_sidecar_request {
	enum o1_sidecar_kind kind;
	char *model; /* owned */
	/* CHAT: "role\0content\0role\0content" (the daemon's chat form);
	 * COMPLETION: the prompt text. NULL when ids are given. Owned. */
	char *prompt;
	size_t prompt_len;
	uint32_t *ids; /* COMPLETION with a token-id prompt; owned */
	size_t n_ids;
	uint32_t max_tokens; /* 0: not given */
	struct o1_sampling sampling;
	char *stop[O1_SIDECAR_MAX_STOP]; /* owned, NUL-terminated */
	size_t n_stop;
	bool stream;
	bool include_usage; /* stream_options.include_usage */
	bool logprobs;	    /* per-token logprobs asked */
	uint32_t top_logprobs;
	bool ignore_eos;       /* extension: "ignore_eos": true */
	uint32_t refine_steps; /* extension: self-refinement rounds after
				* the first answer (chat only); 0: off */
	char *grammar; /* response_format as grammar text (sidecar_format.h),
			* NULL for none; owned; o1d enforces it */
	size_t grammar_len;
	/* enum o1_grammar_type of grammar: 0 is grammar text; a tool-call
	 * grammar's bytes are the tools it may call (sidecar_tools.h) */
	uint32_t grammar_type;
	/* tool calling (sidecar_tools.h): the prompt is the JSON chat
	 * request; tools (owned, compact JSON; NULL: none, or tool_choice
	 * "none") are what calls are read back against */
	bool chat_json;
	char *tools;
};

/* Error detail of a refused body: OpenAI's "message" and "param" (the
 * parameter's name, "" when none). */
struct o1_sidecar_req_error {
	char message[256];
	char param[64];
};

/* Parses LEN bytes of BODY as a request of KIND into *REQ (caller's
 * storage; release with o1_sidecar_request_fini, also after a failure).
 * Returns 0, -EINVAL (ERR says why) or -ENOMEM. */
int o1_sidecar_request_parse(const char *body, size_t len,
			     enum o1_sidecar_kind kind,
			     struct o1_sidecar_request *req,
			     struct o1_sidecar_req_error *err);
void o1_sidecar_request_fini(struct o1_sidecar_request *req);

#endif

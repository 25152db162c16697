/* libo1client: talk to a local o1d through shared-memory rings.
 *
 * Connect once (a Unix socket handshake hands over a shared region), then
 * submit requests and read their events without system calls on the hot
 * path: the library wakes the daemon, or sleeps itself, only when the
 * other side asked for it.
 *
 * Thread safety: a struct o1_client is not thread-safe; use one handle per
 * thread, or serialize every call on a handle with your own lock. Distinct
 * handles are independent. o1_last_error() is per thread.
 *
 * Errors: functions return 0 (or a count) on success and a negative value
 * on failure: -errno, or an o1d code (o1_client_strerror() names both);
 * o1_last_error() then holds a sentence with the details.
 *
 * The daemon gone: once the library has seen the daemon's end of the
 * connection close (it crashed, stopped, or cut this client off), every
 * call on the handle returns O1_CLIENT_E_DAEMON_GONE, except that
 * o1_client_poll and o1_client_wait first hand out the events the daemon
 * published before it went; o1_client_reconnect starts over. The library
 * looks at the socket when a call would wait or find nothing, at most
 * every 100 ms when it spins, so a request submitted in that window is
 * lost without an error of its own: the next poll or wait reports it.
 * An event loop can watch o1_client_fd().
 *
 * Options structs start with `size_t sz`, set it to sizeof(the struct):
 * fields added later at the end keep old binaries working. */
#ifndef O1_CLIENT_H
#define O1_CLIENT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct o1_client;

enum o1_connect_flag {
	/* ask for a device output area (CUDA IPC, see
	 * o1_client_device_output); the connection succeeds without one */
	O1_CONNECT_DEVICE_OUT = 1u << 0,
	/* since 0.5: o1_client_fd() becomes readable when events arrive
	 * (the daemon then also wakes this client through the socket: a
	 * system call per wake-up on each side, the price of an fd); a
	 * daemon older than this refuses the hello (-O1_E_PROTOCOL) */
	O1_CONNECT_POLLABLE = 1u << 1,
};

/* Every call's error once the daemon is gone (see above). Equal to
 * -ECONNRESET, which 0.1 to 0.4 returned from o1_client_wait, so callers
 * written for them keep working. Since 0.5. */
#define O1_CLIENT_E_DAEMON_GONE (-ECONNRESET)

struct o1_client_opts {
	size_t sz;
	const char *socket_path; /* NULL: $O1D_SOCKET, else /run/o1d/o1d.sock;
				  * copied */
	const char *name;	 /* shown in the daemon's logs; copied */
	uint32_t sq_entries;	 /* 0: the daemon's default (and maximum) */
	uint32_t cq_entries;
	uint32_t arena_bytes; /* room for prompts in flight */
	uint32_t spin_us;     /* busy-poll before sleeping in waits;
			       * 0: 20 us */
	/* since 0.3 */
	uint32_t flags; /* enum o1_connect_flag */
};

/* Sampling parameters; a NULL pointer in o1_submit_opts means greedy. */
struct o1_sampling {
	size_t sz;
	float temperature; /* 0: greedy */
	float top_p;	   /* 0 means 1 (off) */
	float min_p;
	float repeat_penalty; /* 0 means 1 (off) */
	float presence_penalty;
	float frequency_penalty;
	uint32_t top_k; /* 0: off */
	uint32_t repeat_last_n;
	uint32_t n_logprobs;
	uint64_t seed;
};

enum o1_submit_flag {
	O1_FLAG_ADD_BOS = 1u << 0,
	O1_FLAG_IGNORE_EOS = 1u << 1,
	O1_FLAG_NO_TEXT = 1u << 2,
	O1_FLAG_CHAT = 1u << 3,
	/* every TOKEN carries its logprob and entropy (has_logprobs bits
	 * O1_TOKEN_HAS_LOGPROB | O1_TOKEN_HAS_ENTROPY) */
	O1_FLAG_CONFIDENCE = 1u << 4,
	/* since 0.3: each generated token's logits row goes to the device
	 * output area (connect with O1_CONNECT_DEVICE_OUT); every TOKEN then
	 * carries one id, O1_TOKEN_HAS_DEVICE and dev_seq. Without an area
	 * the request gets one FINAL with error O1_CLIENT_E_NO_DEVOUT. */
	O1_FLAG_DEVICE_LOGITS = 1u << 5,
	/* since 0.6 (wire protocol 6): with O1_FLAG_CHAT, text is a chat
	 * request as JSON, {"messages": [...], "tools": [...]?,
	 * "tool_choice": ...?} as OpenAI's chat API takes them (assistant
	 * messages with tool_calls, role "tool" messages included); the
	 * model's template renders them with its tools. A request o1d
	 * refuses (malformed, over 64 messages or 128 tools) gets a FINAL
	 * with error -O1_E_FORMAT (-10001) or -O1_E_BOUNDS (-10004). */
	O1_FLAG_CHAT_JSON = 1u << 7,
};

/* The error a request or o1_client_device_output gets when the daemon has
 * no device output area for this connection: its backend has none (CPU),
 * they are off, or every one is held. */
#define O1_CLIENT_E_NO_DEVOUT (-10015)

/* Self-refinement (refine_steps > 0, a CHAT text prompt, not NO_TEXT):
 * after the first answer (round 0) the daemon runs up to refine_steps
 * more rounds, each prompted with the conversation, the previous answer
 * as the assistant's turn and the daemon's review instruction as the
 * user's, rendered with the model's chat template. The request holds one
 * slot and gets one FINAL; cancel, quotas and drain apply to the whole.
 *
 * Events of a refinement request, in order, for each round r:
 *   TOKEN (ev.round = r)...  then  ROUND (ev.round = r; usage, confidence,
 *   latency, text_bytes; refine_stop set on the last round)
 * and then one FINAL (the totals, the last round's confidence, rounds,
 * refine_stop). The wire carries each round's text only in its TOKENs:
 * o1_trace_add reassembles the per-round answers (the trace). max_tokens,
 * the sampling parameters and the stop lists apply to each round; the
 * FINAL's prompt_tokens and generated_tokens sum all rounds, and the
 * final answer is the last round's text. A round stops the loop when its
 * mean logprob reaches the daemon's refine.confidence_threshold (round 0
 * included), when its answer equals the previous one, after refine_steps
 * rounds, or when the next prompt would not fit the context. */
#define O1_REFINE_MAX_ROUNDS 17 /* rounds 0..16 */

enum o1_refine_stop_reason {
	O1_REFINE_STOP_NONE = 0,      /* not refining / loop not over */
	O1_REFINE_STOP_STEPS = 1,     /* every asked round ran */
	O1_REFINE_STOP_CONFIDENT = 2, /* mean logprob passed the threshold */
	O1_REFINE_STOP_REPEAT = 3,    /* an answer repeated the previous */
	O1_REFINE_STOP_LIMIT = 4,     /* the next round would not fit */
	O1_REFINE_STOP_CANCELLED = 5, /* cancel, drain or hang-up */
	O1_REFINE_STOP_ERROR = 6,     /* a round failed (see FINAL error) */
};

/* has_logprobs bits of a TOKEN event */
#define O1_TOKEN_HAS_LOGPROB 1 /* logprobs[i] valid for ids[i] */
#define O1_TOKEN_HAS_ENTROPY 2 /* entropy valid (the token's) */
#define O1_TOKEN_HAS_DEVICE  4 /* dev_seq valid (since 0.3) */

/* Structured output (since 0.5, wire protocol 5): what o1_submit_opts'
 * grammar holds. The daemon compiles it (JSON Schema through grammar
 * text: docs/GRAMMAR.md lists the grammar syntax and the schema keywords
 * it takes) and every generated token then keeps the output a prefix of
 * a text the grammar accepts; an end token is allowed once the text is
 * complete, and the request ends as EOS there (finish LENGTH still cuts a
 * document short). A grammar the daemon refuses (syntax, an unsupported
 * schema keyword, past its size limits) fails that request alone: an
 * ERROR event with the request's id and the compiler's message, then a
 * FINAL with error O1_CLIENT_E_GRAMMAR. Compiled grammars are cached by
 * the daemon, so a repeated grammar costs nothing to compile. */
enum o1_grammar_type {
	O1_GRAMMAR_TYPE_NONE = 0,
	O1_GRAMMAR_TYPE_TEXT = 1,	 /* grammar text (GBNF-like) */
	O1_GRAMMAR_TYPE_JSON_SCHEMA = 2, /* a JSON Schema, as JSON text */
	O1_GRAMMAR_TYPE_JSON_OBJECT = 3, /* any JSON object; no bytes */
	/* since 0.6: grammar is a JSON list of OpenAI tools; the output is
	 * a call of one of them in the model's tool-call format (see
	 * o1_client_limits' tool_format), its arguments valid for the
	 * tool's parameters schema: tool_choice "required" (all the
	 * tools) or a named function (that one alone) */
	O1_GRAMMAR_TYPE_TOOL_CALL = 4,
};

/* How the model writes tool calls (o1_client_limits' tool_format). */
enum o1_tool_format_type {
	O1_TOOLS_NONE = 0,	  /* its template knows no tools */
	O1_TOOLS_HERMES = 1,	  /* <tool_call>{"name", "arguments"}</tool_call> */
	O1_TOOLS_XML = 2,	  /* <function=NAME><parameter=P>...</function> */
	O1_TOOLS_LLAMA3_JSON = 3, /* {"name", "parameters"} */
	O1_TOOLS_MISTRAL = 4,	  /* [TOOL_CALLS][{"name", "arguments"}] */
};

/* A request's grammar was refused, or allowed no token of the model's
 * vocabulary (FINAL error; the ERROR event before it says why). Also
 * o1_client_check's error for a grammar type out of range. Since 0.5. */
#define O1_CLIENT_E_GRAMMAR (-10017)

/* Every pointer here is borrowed for the call only: o1_client_submit
 * copies what it needs into the shared arena before it returns. */
struct o1_submit_opts {
	size_t sz;
	uint64_t req_id;  /* yours; echoed in every event */
	const char *text; /* prompt text, or NULL to send ids */
	size_t text_len;
	const uint32_t *ids; /* prompt token ids when text is NULL */
	size_t n_ids;
	const struct o1_sampling *sampling; /* NULL: greedy */
	uint32_t max_tokens;		    /* 0: 256 */
	const uint32_t *stop_ids;
	size_t n_stop_ids;
	const char *const *stop_strings; /* NUL-terminated, 1..255 bytes */
	size_t n_stop_strings;
	uint32_t flags; /* enum o1_submit_flag */
	/* since 0.2 */
	uint32_t refine_steps; /* 0: off; at most the daemon's
				* refine.max_steps (else FINAL error) */
	/* since 0.5: the output's grammar (see enum o1_grammar_type): TEXT
	 * and JSON_SCHEMA take grammar_len (>= 1) bytes at grammar, at most
	 * o1_client_limits' max_grammar_bytes; JSON_OBJECT takes none */
	uint32_t grammar_type; /* enum o1_grammar_type; 0: none */
	const char *grammar;
	size_t grammar_len;
};

enum o1_event_type {
	O1_EVENT_TOKEN = 1,
	O1_EVENT_FINAL = 2,
	O1_EVENT_ERROR = 3,
	O1_EVENT_PONG = 4,
	O1_EVENT_LOGPROBS = 5, /* top alternatives of one generated token */
	O1_EVENT_ROUND = 6,    /* one refinement round ended (since 0.2) */
	/* the bytes of LOGPROBS alternatives (since 0.6): after a token's
	 * LOGPROBS events, when the request streams text */
	O1_EVENT_TOP_TEXT = 7,
};

enum o1_finish {
	O1_FINISH_REASON_STOP = 0,
	O1_FINISH_REASON_LENGTH = 1,
	O1_FINISH_REASON_EOS = 2,
	O1_FINISH_REASON_CANCELLED = 3,
	O1_FINISH_REASON_ERROR = 4,
};

/* One event, copied out of the completion ring (yours to keep). */
struct o1_event {
	enum o1_event_type type;
	uint64_t req_id;
	/* TOKEN */
	uint32_t n_ids;
	uint32_t ids[8];
	int has_logprobs;
	float logprobs[8];
	size_t text_len;
	char text[49]; /* NUL-terminated; o1d never ends a chunk inside a
			* UTF-8 character */
	/* FINAL */
	enum o1_finish finish;
	int error; /* FINAL with ERROR, or ERROR: negative */
	uint32_t prompt_tokens;
	uint32_t generated_tokens;
	/* ERROR: message; PONG: timestamps (CLOCK_MONOTONIC ns) */
	char message[97];
	uint64_t client_ns;
	uint64_t daemon_ns;
	/* LOGPROBS: n_top alternatives (of n_logprobs asked, split over
	 * events of up to 14) for the generated token at position */
	uint32_t position;
	uint32_t n_top;
	uint32_t top_ids[14];
	float top_logprobs[14];
	/* since 0.2. TOKEN, ROUND: the refinement round (0: first answer) */
	uint32_t round;
	float entropy; /* TOKEN with O1_TOKEN_HAS_ENTROPY: nats */
	/* FINAL: of the last round's tokens; ROUND: of the round's tokens
	 * (raw distribution: natural-log softmax of the model's logits) */
	float mean_logprob;
	float min_logprob;
	float mean_entropy;
	uint32_t conf_tokens;	/* FINAL: tokens the summary covers */
	uint32_t rounds;	/* FINAL: ROUND events sent (0: no refine) */
	uint32_t cached_tokens; /* FINAL, ROUND: prompt tokens served from
				 * the prefix cache */
	enum o1_refine_stop_reason refine_stop; /* FINAL, ROUND */
	uint32_t text_bytes;			/* ROUND: its answer bytes */
	uint64_t latency_ns; /* ROUND: admission to last token */
	/* since 0.3. TOKEN with O1_TOKEN_HAS_DEVICE: the sequence number of
	 * the row holding ids[0]'s logits in the device output area (row
	 * dev_seq % rows); libo1client-cuda turns it into a device pointer */
	uint32_t dev_seq;
	/* since 0.6. TOP_TEXT (at position): alternative top_first + i (of
	 * the LOGPROBS events' order), for i < n_top, is the token's piece
	 * top_len[i] bytes at top_text + top_off[i] (raw bytes: a piece may
	 * be part of a UTF-8 character), cut short when top_cut[i] */
	uint32_t top_first;
	uint8_t top_off[20];
	uint8_t top_len[20];
	uint8_t top_cut[20];
	char top_text[112];
};

/* Connects and maps the region; *out is yours until o1_client_close. */
int o1_client_connect(const struct o1_client_opts *opts,
		      struct o1_client **out);
/* Unmaps and closes; requests in flight are cancelled by the daemon when
 * it sees the hang-up. Accepts NULL. */
void o1_client_close(struct o1_client *c);
/* After the daemon went away (O1_CLIENT_E_DAEMON_GONE): drops the old
 * region and connects again with the same options, retrying for up to
 * timeout_ms. Requests in flight before are lost; resubmit them. */
int o1_client_reconnect(struct o1_client *c, int timeout_ms);

/* Queues a request. Returns 0, -EAGAIN (submission ring or arena full:
 * read events and retry), -E2BIG (larger than the arena), -EINVAL, or
 * what o1_client_check finds (then nothing is sent: the request was the
 * caller's mistake, not the daemon's failure). */
int o1_client_submit(struct o1_client *c, const struct o1_submit_opts *o);

/* The errors o1_client_check returns (o1d's O1_E_CONTEXT, O1_E_BOUNDS). */
#define O1_CLIENT_E_BOUNDS  (-10004)
#define O1_CLIENT_E_CONTEXT (-10010)
/* A FINAL's error for a text prompt when the daemon's model has no
 * tokenizer (token-id prompts only). Since 0.4. */
#define O1_CLIENT_E_NO_TOKENIZER (-10016)

/* The limits the daemon gave at the handshake. Since 0.4. */
struct o1_client_limits {
	size_t sz;
	uint32_t max_prompt_bytes;  /* a text prompt */
	uint32_t max_prompt_tokens; /* a token-id prompt */
	uint32_t max_tokens;	    /* per request: the context */
	uint32_t max_inflight;	    /* requests in flight at once */
	uint32_t vocab_size;	    /* ids below it, top_k at most; 0: none */
	/* since 0.5: grammar bytes per request; 0: the daemon takes no
	 * grammars (a model without a tokenizer, or switched off) */
	uint32_t max_grammar_bytes;
	/* since 0.6: how the model writes tool calls (enum
	 * o1_tool_format_type), for reading them back from answers */
	uint32_t tool_format;
};

/* Fills *out (set out->sz). Returns 0, -EINVAL or -ECONNRESET. */
int o1_client_limits(const struct o1_client *c, struct o1_client_limits *out);

/* What o1_client_check found: the field (static text: "prompt" for its
 * length in bytes (text) or tokens (ids), "prompt_ids", "max_tokens",
 * "top_k", "stop_ids", "grammar" for its length in bytes), the request's
 * value and the daemon's limit. */
struct o1_client_refusal {
	size_t sz;
	const char *field;
	uint64_t value;
	uint64_t limit;
};

/* Checks a request against those limits without sending anything.
 * Returns 0, O1_CLIENT_E_CONTEXT (the prompt or max_tokens is longer than
 * the daemon takes) or O1_CLIENT_E_BOUNDS (a top_k or token id outside
 * the vocabulary, a grammar longer than the daemon takes or a grammar to
 * a daemon that takes none), with *why (may be NULL; set why->sz) saying
 * which and o1_last_error() a sentence naming the value and the limit;
 * O1_CLIENT_E_GRAMMAR (a grammar_type out of range, or its bytes missing
 * or given where none belong), -EINVAL, -ECONNRESET. o1_client_submit
 * runs the same check first. Since 0.4. */
int o1_client_check(const struct o1_client *c, const struct o1_submit_opts *o,
		    struct o1_client_refusal *why);
/* Asks the daemon to stop a request; its FINAL (CANCELLED) still comes. */
int o1_client_cancel(struct o1_client *c, uint64_t req_id);
/* Takes one event if there is one: returns 1, or 0 when none is ready,
 * or O1_CLIENT_E_DAEMON_GONE once none is left and the daemon is gone.
 * With O1_CONNECT_POLLABLE, a 0 also arms o1_client_fd(). */
int o1_client_poll(struct o1_client *c, struct o1_event *ev);
/* The fd for an event loop (poll, epoll: wait for POLLIN) of a handle
 * connected with O1_CONNECT_POLLABLE: readable once an event is ready
 * after o1_client_poll returned 0, and when the daemon is gone (then
 * o1_client_poll says which). Level-triggered until o1_client_poll has
 * taken what there is; it stays the handle's until o1_client_close or
 * o1_client_reconnect (a new fd then). Never read or close it yourself.
 * Returns the fd, -EINVAL (connected without O1_CONNECT_POLLABLE) or
 * O1_CLIENT_E_DAEMON_GONE. Since 0.5. */
int o1_client_fd(struct o1_client *c);
/* Waits for one event: spins spin_us, then sleeps. timeout_ns < 0 waits
 * forever. Returns 1, -ETIMEDOUT, or O1_CLIENT_E_DAEMON_GONE. */
int o1_client_wait(struct o1_client *c, struct o1_event *ev,
		   int64_t timeout_ns);
/* Round trip of a PING through the rings, in nanoseconds. Only with no
 * request in flight (-EBUSY otherwise). */
int o1_client_ping(struct o1_client *c, uint64_t *rtt_ns);

/* Called for each TOKEN (and ROUND, for refinement requests) of
 * o1_client_generate; return non-zero to cancel the request (its FINAL is
 * still delivered). */
typedef int (*o1_token_fn)(void *arg, const struct o1_event *ev);
/* Submits and waits for the FINAL, calling fn for each token. Only with
 * no other request in flight (-EBUSY). *final gets the FINAL event.
 * Returns 0 (see final->finish and final->error; an ERROR event the
 * daemon sent for the request, such as a refused grammar's message, is
 * then in o1_last_error()) or a transport error. */
int o1_client_generate(struct o1_client *c, const struct o1_submit_opts *o,
		       o1_token_fn fn, void *arg, struct o1_event *final);

/* A refinement trace reassembled from one request's events. */
struct o1_trace_round {
	uint32_t round;
	uint32_t prompt_tokens, cached_tokens, generated_tokens;
	float mean_logprob, min_logprob, mean_entropy;
	uint64_t latency_ns;
	enum o1_finish finish;		 /* of the round's generation */
	enum o1_refine_stop_reason stop; /* set on the last round */
	char *text;			 /* NUL-terminated answer; malloc'd */
	size_t text_len;
	int complete; /* its ROUND event arrived */
};

struct o1_trace {
	uint32_t n_rounds; /* rounds seen (including one cut short) */
	struct o1_trace_round rounds[O1_REFINE_MAX_ROUNDS];
	enum o1_refine_stop_reason stop; /* from the FINAL */
	int done;			 /* the FINAL arrived */
};

/* Zeroes *t (no allocation). */
void o1_trace_init(struct o1_trace *t);
/* Feeds one event of ONE request (filter by req_id yourself): TOKEN text
 * is appended to its round's answer, ROUND fills the round's numbers,
 * FINAL sets stop and done; other events are ignored. Returns 0,
 * -ENOMEM, or -EINVAL (a round out of order or out of range). */
int o1_trace_add(struct o1_trace *t, const struct o1_event *ev);
/* Frees the answers; *t may be reused after o1_trace_init. */
void o1_trace_free(struct o1_trace *t);

/* The device output area the daemon gave this connection (connect with
 * O1_CONNECT_DEVICE_OUT): its geometry and the opaque CUDA IPC handles
 * that libo1client-cuda (<o1/client_cuda.h>) maps. Layout of the area:
 * rows of row_floats f32 logits, row_stride_bytes apart, then at
 * stamps_off one uint32 stamp per row (the daemon sets stamp r to the
 * sequence number s before it writes s's logits into row r = s % rows;
 * the ring does not wait for readers). */
struct o1_device_output {
	size_t sz;
	uint32_t area; /* the daemon's index, for logs */
	uint32_t rows; /* ring capacity, a power of two */
	uint32_t row_floats;
	uint32_t row_stride_bytes;
	uint64_t stamps_off;
	uint64_t area_bytes;
	char pci_bus_id[16];	  /* the daemon's device */
	uint8_t mem_handle[64];	  /* cudaIpcMemHandle_t */
	uint8_t event_handle[64]; /* cudaIpcEventHandle_t */
};

/* Fills *out (set out->sz) with this connection's area. Returns 0,
 * O1_CLIENT_E_NO_DEVOUT (the daemon has none for us), -EINVAL (not
 * asked for at connect, bad arguments) or -ECONNRESET. Since 0.3. */
int o1_client_device_output(const struct o1_client *c,
			    struct o1_device_output *out);

/* Requests accepted by o1_client_submit and not yet FINAL. */
unsigned o1_client_inflight(const struct o1_client *c);
/* Describes an error returned by this library. Never NULL. */
const char *o1_client_strerror(int err);
/* Details of the last error in this thread ("" if none). */
const char *o1_last_error(void);

#ifdef __cplusplus
}
#endif

#endif

/* Wire entries: the fixed 128-byte records carried by the submission ring
 * (client to daemon: PING, SUBMIT, CANCEL) and the completion ring (daemon
 * to client: PONG, TOKEN, LOGPROBS, ROUND, FINAL, ERROR), and the decoders that
 * turn a slot in shared memory into a validated private copy.
 *
 * Layout rules: fixed-width little-endian fields, explicit padding that a
 * sender must zero (so it can carry fields in a later version), no
 * pointers; variable data (prompts, stop lists) lives in the client arena
 * and is named by (offset, length) relative to the arena start. Streamed
 * text travels inline in TOKEN events (up to O1_WIRE_TEXT_MAX bytes each):
 * the daemon never writes into memory the client can also allocate from.
 *
 * The decoders copy the slot first and validate only the copy: the peer
 * may rewrite the slot at any time, and nothing is read from it twice.
 *
 * Version 2: TOKEN carries its refinement round and the entropy of the
 * token's distribution (7 ids per event instead of 8), SUBMIT carries
 * refine_steps, FINAL a confidence summary and the refinement outcome,
 * and ROUND events (one per refinement round) carry the trace.
 *
 * Version 3: SUBMIT and PING carry sent_ns, the client's CLOCK_MONOTONIC
 * just before it published the entry. The daemon uses it only to measure
 * its wake-up latency (publish to copy-out); it is untrusted, never
 * validated here, and values the daemon cannot use are counted, not
 * refused.
 *
 * Version 4: device outputs (CUDA IPC). The hello may ask for a device
 * output area (O1_HELLO_DEVICE_OUT); the welcome grew to 256 bytes and
 * carries the area's description (struct o1_wire_devout: the opaque CUDA
 * IPC memory and event handles, the ring geometry) or why there is none.
 * SUBMIT may set O1_SUBMIT_DEVICE_LOGITS; each TOKEN of such a request
 * carries one id and, with O1_TOKEN_DEVICE, dev_seq (was pad1): the ring
 * sequence number of the row holding that token's logits.
 *
 * Version 5: structured output. SUBMIT may set O1_SUBMIT_GRAMMAR and
 * name grammar_len bytes at grammar_off in the arena (taken from the
 * padding): grammar text (O1_GRAMMAR_GBNF), a JSON Schema
 * (O1_GRAMMAR_JSON_SCHEMA), or nothing for any JSON object
 * (O1_GRAMMAR_JSON_OBJECT), at most the welcome's max_grammar_bytes (0:
 * this daemon takes no grammars). The daemon copies the bytes out with
 * the prompt; a grammar that does not compile fails its request alone
 * with an ERROR event carrying the compiler's message (req_id set) and a
 * FINAL with -O1_E_GRAMMAR.
 *
 * Version 6: tools (issue 22) and the text of top logprobs (issue 20).
 * O1_SUBMIT_CHAT_JSON (with O1_SUBMIT_CHAT, a text prompt): the prompt is
 * a JSON object {"messages": [...], "tools": [...], "tool_choice": ...}
 * as OpenAI's chat API takes them, given to the chat template as its
 * variables messages and tools (messages with tool_calls and role "tool"
 * included; tool_choice is checked, not passed: tokenizer/chat_request.h).
 * O1_GRAMMAR_TOOL_CALL: the grammar bytes are a JSON list of tools, and
 * the output is constrained to a call of one of them, in the template's
 * tool-call format, its arguments valid for the tool's parameters schema.
 * The welcome's tool_format names that format (enum o1_wire_tool_format)
 * so clients read calls back. TOP_TEXT events follow a token's LOGPROBS
 * events with the bytes of each alternative. */
#ifndef O1_WIRE_H
#define O1_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define O1_WIRE_VERSION	     6
#define O1_WIRE_ENTRY_BYTES  128
#define O1_WIRE_IDS_MAX	     7	 /* token ids per TOKEN event */
#define O1_WIRE_TEXT_MAX     48	 /* inline text bytes per TOKEN event */
#define O1_WIRE_MSG_MAX	     96	 /* inline message bytes per ERROR event */
#define O1_WIRE_LOGPROBS_MAX 20	 /* n_logprobs upper bound */
#define O1_WIRE_TOP_PER	     14	 /* alternatives per LOGPROBS event */
#define O1_WIRE_STOP_STR_MAX 255 /* bytes per stop string */
#define O1_WIRE_REFINE_MAX   16	 /* refine_steps upper bound */
#define O1_WIRE_TOP_TEXT_MAX 112 /* packed text bytes per TOP_TEXT event */

enum o1_wire_op {
	O1_OP_NONE = 0,
	/* submission ring */
	O1_OP_PING = 1,
	O1_OP_SUBMIT = 2,
	O1_OP_CANCEL = 3,
	/* completion ring */
	O1_EV_PONG = 0x81,
	O1_EV_TOKEN = 0x82,
	O1_EV_FINAL = 0x83,
	O1_EV_ERROR = 0x84,
	O1_EV_LOGPROBS = 0x85,
	O1_EV_ROUND = 0x86,
	O1_EV_TOP_TEXT = 0x87, /* protocol 6 */
};

enum o1_prompt_kind {
	O1_PROMPT_TEXT = 0, /* UTF-8 bytes; prompt_len in bytes */
	O1_PROMPT_IDS = 1,  /* uint32 token ids; prompt_len in tokens */
};

enum o1_submit_flags {
	O1_SUBMIT_ADD_BOS = 1u << 0,	/* prepend the model's BOS token */
	O1_SUBMIT_IGNORE_EOS = 1u << 1, /* keep generating past EOS */
	O1_SUBMIT_NO_TEXT = 1u << 2,	/* stream ids only, no detokenizing */
	O1_SUBMIT_CHAT = 1u << 3,	/* apply the model's chat template */
	O1_SUBMIT_CONFIDENCE = 1u << 4, /* logprob + entropy in every TOKEN */
	/* each generated token's logits row into the client's device
	 * output area (one id per TOKEN, dev_seq names the row) */
	O1_SUBMIT_DEVICE_LOGITS = 1u << 5,
	/* the output follows the grammar at grammar_off (grammar_kind) */
	O1_SUBMIT_GRAMMAR = 1u << 6,
	/* (protocol 6) with CHAT and a text prompt: the prompt is a JSON
	 * object of messages, tools and tool_choice (see the top) */
	O1_SUBMIT_CHAT_JSON = 1u << 7,
	O1_SUBMIT_FLAGS_ALL = 0xff,
};

/* What the bytes of an O1_SUBMIT_GRAMMAR request are (0 without it). */
enum o1_grammar_kind {
	O1_GRAMMAR_NONE = 0,
	O1_GRAMMAR_GBNF = 1,	    /* grammar text (docs/GRAMMAR.md) */
	O1_GRAMMAR_JSON_SCHEMA = 2, /* a JSON Schema (draft 2020-12 subset) */
	O1_GRAMMAR_JSON_OBJECT = 3, /* any JSON object; grammar_len 0 */
	/* (protocol 6) a JSON list of OpenAI tools: the output is one call
	 * of one of them in the model's tool-call format */
	O1_GRAMMAR_TOOL_CALL = 4,
	O1_GRAMMAR_KIND_COUNT,
};

/* The format a model's chat template writes tool calls in (the welcome's
 * tool_format; the values of tokenizer/tool_call.h's o1_tool_format). */
enum o1_wire_tool_format {
	O1_WIRE_TOOLS_NONE = 0,	       /* the template knows no tools */
	O1_WIRE_TOOLS_HERMES = 1,      /* <tool_call>{json}</tool_call> */
	O1_WIRE_TOOLS_XML = 2,	       /* <function=NAME><parameter=...> */
	O1_WIRE_TOOLS_LLAMA3_JSON = 3, /* {"name", "parameters"} */
	O1_WIRE_TOOLS_MISTRAL = 4,     /* [TOOL_CALLS][{...}] */
	O1_WIRE_TOOLS_COUNT,
};

enum o1_finish_reason {
	O1_FINISH_STOP = 0,	 /* a stop id or string matched */
	O1_FINISH_LENGTH = 1,	 /* max_tokens or the context limit */
	O1_FINISH_EOS = 2,	 /* the model emitted end of sequence */
	O1_FINISH_CANCELLED = 3, /* CANCEL, client death or drain deadline */
	O1_FINISH_ERROR = 4,	 /* see error: a -errno or -O1_E_* */
	O1_FINISH_COUNT,
};

/* Why a refinement loop ended (NONE: no refinement, or not ended yet). */
enum o1_refine_stop {
	O1_REFINE_NONE = 0,
	O1_REFINE_STEPS = 1,	 /* refine_steps rounds ran */
	O1_REFINE_CONFIDENT = 2, /* mean logprob reached the threshold */
	O1_REFINE_REPEAT = 3,	 /* the answer repeated the previous one */
	O1_REFINE_LIMIT = 4,	 /* the next prompt would not fit */
	O1_REFINE_CANCELLED = 5, /* CANCEL, client death or drain */
	O1_REFINE_ERROR = 6,	 /* a round failed; see the FINAL */
	O1_REFINE_STOP_COUNT,
};

/* TOKEN has_logprobs bits. */
enum o1_token_conf {
	O1_TOKEN_LOGPROB = 1u << 0, /* logprobs[i] hold each id's logprob */
	O1_TOKEN_ENTROPY = 1u << 1, /* entropy holds ids[0]'s (n_ids 1) */
	O1_TOKEN_DEVICE = 1u << 2,  /* dev_seq names ids[0]'s device logits
				     * row (n_ids 1) */
	O1_TOKEN_BITS_ALL = 0x7,
};

/* Sent by the client. Arena offsets are bytes from the arena start. */
struct o1_wire_submit {
	uint8_t op;	       /* O1_OP_SUBMIT */
	uint8_t prompt_kind;   /* enum o1_prompt_kind */
	uint16_t flags;	       /* enum o1_submit_flags */
	uint32_t max_tokens;   /* >= 1 */
	uint64_t req_id;       /* chosen by the client, echoed in events */
	uint32_t prompt_off;   /* arena bytes; 4-aligned for ids */
	uint32_t prompt_len;   /* bytes (text) or tokens (ids), >= 1 */
	uint32_t stop_ids_off; /* arena bytes, 4-aligned */
	uint32_t n_stop_ids;
	uint32_t stop_str_off;	 /* arena bytes: repeated (u8 len, len bytes) */
	uint32_t stop_str_len;	 /* bytes */
	float temperature;	 /* >= 0; 0 = greedy */
	float top_p;		 /* (0, 1] */
	float min_p;		 /* [0, 1) */
	float repeat_penalty;	 /* > 0; 1 = off */
	float presence_penalty;	 /* [-2, 2] */
	float frequency_penalty; /* [-2, 2] */
	uint64_t seed;
	uint32_t top_k;		/* 0 = off */
	uint32_t n_logprobs;	/* 0..O1_WIRE_LOGPROBS_MAX */
	uint32_t repeat_last_n; /* tokens the penalties look back over */
	uint32_t refine_steps;	/* 0..O1_WIRE_REFINE_MAX; 0 = off. Needs a
				 * CHAT text prompt without NO_TEXT */
	uint64_t sent_ns;	/* client CLOCK_MONOTONIC at publishing */
	/* O1_SUBMIT_GRAMMAR: arena bytes (any alignment), <= the limit;
	 * all three 0 without the flag */
	uint32_t grammar_off;
	uint32_t grammar_len;
	uint8_t grammar_kind; /* enum o1_grammar_kind */
	uint8_t pad1[3];
	uint8_t pad[20];
};

struct o1_wire_cancel {
	uint8_t op; /* O1_OP_CANCEL */
	uint8_t pad0[7];
	uint64_t req_id;
	uint8_t pad[112];
};

struct o1_wire_ping {
	uint8_t op; /* O1_OP_PING or O1_EV_PONG */
	uint8_t pad0[7];
	uint64_t cookie;    /* echoed */
	uint64_t client_ns; /* echoed */
	uint64_t daemon_ns; /* PONG: daemon CLOCK_MONOTONIC at the reply */
	uint64_t sent_ns;   /* PING: client CLOCK_MONOTONIC at publishing */
	uint8_t pad[88];
};

struct o1_wire_token {
	uint8_t op;	      /* O1_EV_TOKEN */
	uint8_t n_ids;	      /* 0..O1_WIRE_IDS_MAX */
	uint8_t text_len;     /* 0..O1_WIRE_TEXT_MAX */
	uint8_t has_logprobs; /* enum o1_token_conf bits */
	uint8_t round;	      /* refinement round (0: the first answer) */
	uint8_t pad0[3];
	uint64_t req_id;
	uint32_t ids[O1_WIRE_IDS_MAX];
	float logprobs[O1_WIRE_IDS_MAX]; /* of each id, O1_TOKEN_LOGPROB */
	float entropy;			 /* nats, O1_TOKEN_ENTROPY */
	uint32_t dev_seq; /* O1_TOKEN_DEVICE: row dev_seq % rows of the area;
			   * 0 otherwise */
	char text[O1_WIRE_TEXT_MAX]; /* UTF-8, may split a code point */
};

struct o1_wire_final {
	uint8_t op;	/* O1_EV_FINAL */
	uint8_t reason; /* enum o1_finish_reason */
	uint16_t pad0;
	int32_t error; /* 0, or -errno / -O1_E_* when reason is ERROR */
	uint64_t req_id;
	uint32_t prompt_tokens;	   /* over all rounds */
	uint32_t generated_tokens; /* over all rounds */
	/* confidence of the last round's generated tokens (raw distribution,
	 * natural log); 0 when it generated none */
	float mean_logprob;
	float min_logprob;
	float mean_entropy;
	uint32_t conf_tokens; /* tokens the summary covers */
	uint8_t rounds;	      /* ROUND events sent (0: no refinement) */
	uint8_t refine_stop;  /* enum o1_refine_stop */
	uint16_t pad1;
	uint32_t cached_tokens; /* prompt tokens the prefix cache served */
	uint8_t pad[80];
};

/* One refinement round, sent after the round's last TOKEN (round 0 is the
 * first answer); the answer text is the concatenated text of the TOKEN
 * events marked with the same round. */
struct o1_wire_round {
	uint8_t op;	/* O1_EV_ROUND */
	uint8_t round;	/* 0..refine_steps */
	uint8_t reason; /* enum o1_finish_reason of the round's generation */
	uint8_t stop;	/* enum o1_refine_stop: NONE unless the last round */
	uint32_t prompt_tokens;
	uint64_t req_id;
	uint32_t generated_tokens;
	uint32_t cached_tokens; /* prompt tokens the prefix cache served */
	float mean_logprob;
	float min_logprob;
	float mean_entropy;
	uint32_t text_bytes; /* answer text streamed in this round */
	uint64_t latency_ns; /* round start (admission) to its last token */
	uint8_t pad[80];
};

/* A connection-level error (req_id 0) or a request refused before it ran. */
struct o1_wire_error {
	uint8_t op;	 /* O1_EV_ERROR */
	uint8_t msg_len; /* 0..O1_WIRE_MSG_MAX */
	uint16_t pad0;
	int32_t error;
	uint64_t req_id;
	uint8_t pad[16];
	char msg[O1_WIRE_MSG_MAX];
};

/* The n_logprobs most likely alternatives for one generated token, sent
 * right after the TOKEN that carries it, in as many entries as needed
 * (the daemon posts them all or none). */
struct o1_wire_logprobs {
	uint8_t op; /* O1_EV_LOGPROBS */
	uint8_t n;  /* pairs in this entry, 1..O1_WIRE_TOP_PER */
	uint16_t pad0;
	uint32_t position; /* index of the token among the generated ones */
	uint64_t req_id;
	uint32_t ids[O1_WIRE_TOP_PER];
	float logprobs[O1_WIRE_TOP_PER]; /* natural log, <= 0, descending */
};

/* (protocol 6) The bytes of the alternatives of one LOGPROBS set, in
 * order, sent right after the set's LOGPROBS entries (all or none, with
 * them): alternative FIRST + i is the i-th (u8 len, len bytes) in DATA,
 * N of them, the rest of DATA zero. A length byte's top bit
 * (O1_TOP_TEXT_CUT) marks bytes cut to fit one entry; each alternative's
 * bytes are its token's piece (possibly part of a UTF-8 character). */
#define O1_TOP_TEXT_CUT 0x80u

struct o1_wire_top_text {
	uint8_t op;    /* O1_EV_TOP_TEXT */
	uint8_t n;     /* alternatives in this entry, >= 1 */
	uint8_t first; /* index of the first one in the set */
	uint8_t pad0;
	uint32_t position; /* as in LOGPROBS */
	uint64_t req_id;
	uint8_t data[O1_WIRE_TOP_TEXT_MAX];
};

union o1_wire_entry {
	uint8_t op;
	struct o1_wire_submit submit;
	struct o1_wire_cancel cancel;
	struct o1_wire_ping ping;
	struct o1_wire_token token;
	struct o1_wire_final final;
	struct o1_wire_error error;
	struct o1_wire_logprobs logprobs;
	struct o1_wire_round round;
	struct o1_wire_top_text top_text;
	uint8_t raw[O1_WIRE_ENTRY_BYTES];
};

_Static_assert(sizeof(struct o1_wire_submit) == O1_WIRE_ENTRY_BYTES, "submit");
_Static_assert(offsetof(struct o1_wire_submit, req_id) == 8, "submit id");
_Static_assert(offsetof(struct o1_wire_submit, temperature) == 40, "temp");
_Static_assert(offsetof(struct o1_wire_submit, seed) == 64, "seed");
_Static_assert(offsetof(struct o1_wire_submit, refine_steps) == 84, "refine");
_Static_assert(offsetof(struct o1_wire_submit, sent_ns) == 88, "submit ns");
_Static_assert(offsetof(struct o1_wire_submit, grammar_off) == 96, "grammar");
_Static_assert(offsetof(struct o1_wire_submit, grammar_kind) == 104, "kind");
_Static_assert(offsetof(struct o1_wire_submit, pad) == 108, "submit pad");
_Static_assert(sizeof(struct o1_wire_cancel) == O1_WIRE_ENTRY_BYTES, "cancel");
_Static_assert(sizeof(struct o1_wire_ping) == O1_WIRE_ENTRY_BYTES, "ping");
_Static_assert(offsetof(struct o1_wire_ping, daemon_ns) == 24, "ping ns");
_Static_assert(offsetof(struct o1_wire_ping, sent_ns) == 32, "ping sent");
_Static_assert(sizeof(struct o1_wire_token) == O1_WIRE_ENTRY_BYTES, "token");
_Static_assert(offsetof(struct o1_wire_token, ids) == 16, "token ids");
_Static_assert(offsetof(struct o1_wire_token, entropy) == 72, "token ent");
_Static_assert(offsetof(struct o1_wire_token, dev_seq) == 76, "token seq");
_Static_assert(offsetof(struct o1_wire_token, text) == 80, "token text");
_Static_assert(sizeof(struct o1_wire_final) == O1_WIRE_ENTRY_BYTES, "final");
_Static_assert(offsetof(struct o1_wire_final, prompt_tokens) == 16, "usage");
_Static_assert(offsetof(struct o1_wire_final, rounds) == 40, "rounds");
_Static_assert(offsetof(struct o1_wire_final, pad) == 48, "final pad");
_Static_assert(sizeof(struct o1_wire_round) == O1_WIRE_ENTRY_BYTES, "round");
_Static_assert(offsetof(struct o1_wire_round, latency_ns) == 40, "round ns");
_Static_assert(sizeof(struct o1_wire_error) == O1_WIRE_ENTRY_BYTES, "error");
_Static_assert(offsetof(struct o1_wire_error, msg) == 32, "error msg");
_Static_assert(sizeof(struct o1_wire_logprobs) == O1_WIRE_ENTRY_BYTES, "lp");
_Static_assert(offsetof(struct o1_wire_logprobs, logprobs) == 72, "lp pairs");
_Static_assert(sizeof(struct o1_wire_top_text) == O1_WIRE_ENTRY_BYTES, "tt");
_Static_assert(offsetof(struct o1_wire_top_text, data) == 16, "tt data");
_Static_assert(sizeof(union o1_wire_entry) == O1_WIRE_ENTRY_BYTES, "entry");

/* Control-socket handshake (AF_UNIX SOCK_SEQPACKET, one message each way).
 * The client sends o1_wire_hello with no file descriptors; the daemon
 * answers o1_wire_welcome, carrying with SCM_RIGHTS the sealed region memfd
 * and, when the region has O1_REGION_EVENTFD, the daemon's doorbell eventfd
 * (n_fds says how many). A non-zero status comes with no fds and the
 * daemon then closes the connection.
 *
 * Admin connections (o1ctl) set O1_HELLO_ADMIN and get a welcome with no
 * fds; afterwards each message they send (at most O1_ADMIN_MSG_MAX bytes,
 * its content defined by the daemon's admin handler) gets exactly one
 * reply message. */
#define O1_HELLO_MAGIC	 0x4c48314fu /* "O1HL" */
#define O1_WELCOME_MAGIC 0x4c57314fu /* "O1WL" */
#define O1_NAME_MAX	 32
#define O1_ADMIN_MSG_MAX 65536

enum o1_hello_flags {
	O1_HELLO_ADMIN = 1u << 0,      /* admin connection: no region */
	O1_HELLO_DEVICE_OUT = 1u << 1, /* asks for a device output area */
	/* (protocol 5) each wake-up of the completion doorbell also sends
	 * one byte on the control socket, so the client can poll that fd
	 * in an event loop; the client reads and drops them (a daemon
	 * older than this flag refuses the hello: -O1_E_PROTOCOL) */
	O1_HELLO_WAKE_SOCKET = 1u << 2,
	O1_HELLO_FLAGS_ALL = 0x7,
};

struct o1_wire_hello {
	uint32_t magic;	      /* O1_HELLO_MAGIC */
	uint16_t version;     /* O1_WIRE_VERSION */
	uint16_t flags;	      /* enum o1_hello_flags */
	uint32_t sq_entries;  /* 0 = daemon default */
	uint32_t cq_entries;  /* 0 = daemon default */
	uint32_t arena_bytes; /* 0 = daemon default */
	uint32_t pad;
	char name[O1_NAME_MAX]; /* NUL-padded, for logs */
	uint8_t pad2[8];
};
_Static_assert(sizeof(struct o1_wire_hello) == 64, "hello");

/* A device output area (CUDA IPC), in the welcome of a client whose hello
 * set O1_HELLO_DEVICE_OUT. rows == 0: none, and status says why
 * (-O1_E_NO_DEVOUT: the backend has none, or every area is held; 0 when
 * not asked). Otherwise the area is the client's until it disconnects:
 *
 *   [ rows x row_stride_bytes: logits rows, row_floats f32 each ]
 *   [ at stamps_off: rows x uint32 stamps ]
 *
 * mem_handle is a cudaIpcMemHandle_t of the area's own allocation and
 * event_handle a cudaIpcEventHandle_t (interprocess, no timing) that the
 * daemon records after writing rows; both are opaque bytes here. A TOKEN
 * with O1_TOKEN_DEVICE and dev_seq s has its logits in row s % rows.
 * Before writing row r for sequence number s the daemon sets stamp r to s
 * (on the device, ordered before the row's copy): a reader that has
 * finished reading row r and then reads stamp r == s read row s intact;
 * anything else means the ring lapped it (the daemon does not wait for
 * readers: a client must use a row within rows tokens of its area). */
#define O1_DEVOUT_HANDLE_BYTES 64
#define O1_DEVOUT_BUS_ID_MAX   16

struct o1_wire_devout {
	int32_t status;		   /* see above */
	uint32_t area;		   /* the daemon's index, for logs */
	uint32_t rows;		   /* ring capacity, a power of two; 0: none */
	uint32_t row_floats;	   /* floats per row: the vocabulary */
	uint32_t row_stride_bytes; /* >= row_floats * 4, a multiple of 256 */
	uint32_t pad0;
	uint64_t stamps_off; /* bytes from the area start, >= rows x stride */
	uint64_t area_bytes; /* >= stamps_off + rows x 4 */
	char pci_bus_id[O1_DEVOUT_BUS_ID_MAX]; /* device, NUL-terminated */
	uint8_t mem_handle[O1_DEVOUT_HANDLE_BYTES];
	uint8_t event_handle[O1_DEVOUT_HANDLE_BYTES];
	uint8_t pad[8];
};
_Static_assert(sizeof(struct o1_wire_devout) == 192, "devout");
_Static_assert(offsetof(struct o1_wire_devout, stamps_off) == 24, "stamps");
_Static_assert(offsetof(struct o1_wire_devout, pci_bus_id) == 40, "bus");
_Static_assert(offsetof(struct o1_wire_devout, mem_handle) == 56, "mem");
_Static_assert(offsetof(struct o1_wire_devout, event_handle) == 120, "ev");

struct o1_wire_welcome {
	uint32_t magic;	  /* O1_WELCOME_MAGIC */
	uint16_t version; /* O1_WIRE_VERSION */
	uint16_t n_fds;	  /* 1 (memfd), 2 (memfd, eventfd), 0 (admin) */
	int32_t status;	  /* 0, or -errno / -O1_E_* and no fds */
	uint32_t client_id;
	uint32_t region_bytes;
	uint32_t max_inflight;	    /* requests in flight at once */
	uint32_t max_prompt_tokens; /* per request */
	uint32_t max_prompt_bytes;  /* per request (text) */
	uint32_t max_tokens;	    /* per request */
	uint32_t vocab_size;	    /* 0 when the daemon has no model */
	uint32_t max_grammar_bytes; /* per request; 0: no grammars */
	uint8_t tool_format;	    /* enum o1_wire_tool_format (6) */
	uint8_t pad1[3];
	uint8_t pad[16];
	struct o1_wire_devout devout; /* all zero unless the hello asked */
};
_Static_assert(sizeof(struct o1_wire_welcome) == 256, "welcome");
_Static_assert(offsetof(struct o1_wire_welcome, max_grammar_bytes) == 40,
	       "welcome grammar");
_Static_assert(offsetof(struct o1_wire_welcome, tool_format) == 44, "tools");
_Static_assert(offsetof(struct o1_wire_welcome, devout) == 64, "devout");

/* Limits the daemon enforces on submissions (its config and quotas). */
struct o1_wire_limits {
	uint32_t arena_bytes; /* size of the client arena */
	uint32_t max_prompt_bytes;
	uint32_t max_prompt_tokens;
	uint32_t max_tokens; /* per request */
	uint32_t max_stop_ids;
	uint32_t max_stop_bytes;
	uint32_t vocab_size; /* ids must be below it; 0 = unchecked */
	uint32_t max_grammar_bytes; /* 0: O1_SUBMIT_GRAMMAR refused */
};

/* Copies one submission-ring slot into *out and validates the copy against
 * lim. Returns 0, or -O1_E_PROTOCOL (unknown op, non-zero padding or
 * flags, grammar fields without O1_SUBMIT_GRAMMAR), -O1_E_CONTEXT (a
 * prompt longer than max_prompt_bytes or max_prompt_tokens, max_tokens
 * over lim's), -O1_E_BOUNDS (an offset, length or count out of range),
 * -O1_E_FORMAT (a bad enum or float) or -O1_E_UNSUPPORTED (a grammar when
 * max_grammar_bytes is 0); *why (if not NULL) then names the offending
 * field. Arena data is not read here. */
int o1_wire_decode_sub(const void *slot, const struct o1_wire_limits *lim,
		       union o1_wire_entry *out, const char **why);
/* The same for a completion-ring slot (client side). A TOP_TEXT entry's
 * packing is checked too (o1_wire_top_text_next walks it safely). */
int o1_wire_decode_ev(const void *slot, union o1_wire_entry *out,
		      const char **why);
/* Validates a stop-string list copied out of the arena: a sequence of
 * (u8 len >= 1, len bytes), exactly filling len bytes, at most max_count
 * strings. Returns the count or -O1_E_FORMAT. */
int o1_wire_stop_strings_check(const uint8_t *buf, uint32_t len,
			       uint32_t max_count);
/* The next alternative of a decoded TOP_TEXT entry: *AT (start at 0) is
 * the offset in data; sets *BYTES, *LEN and *CUT and advances *AT.
 * Returns 0, or -1 when the entry holds no more. */
int o1_wire_top_text_next(const struct o1_wire_top_text *t, uint32_t *at,
			  const uint8_t **bytes, uint32_t *len, int *cut);
const char *o1_wire_op_name(unsigned op);
/* "stop", "length", "eos", "cancelled", "error", or "?". */
const char *o1_wire_finish_name(unsigned reason);
/* Checks a device output description copied out of a welcome (client
 * side): rows == 0 with a status <= 0, or a consistent geometry whose
 * rows hold vocab_size floats. Returns 0 or -O1_E_PROTOCOL. */
int o1_wire_devout_check(const struct o1_wire_devout *d, uint32_t vocab_size);

#endif

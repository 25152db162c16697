/* o1d error codes.
 *
 * Functions that can fail return int: 0 (or a count) on success, -errno on
 * failure. Failures that no errno names live in one reserved negative range,
 * [-O1_E_LAST, -O1_E_BASE), and o1_strerror() describes both kinds. */
#ifndef O1_ERROR_H
#define O1_ERROR_H

enum o1_error {
	O1_E_BASE = 10000,
	O1_E_FORMAT,      /* malformed file or message */
	O1_E_VERSION,     /* unsupported format or protocol version */
	O1_E_UNSUPPORTED, /* valid, but a feature we do not implement */
	O1_E_BOUNDS,      /* an offset, index or size out of range */
	O1_E_MISSING,     /* a required item (key, tensor, field) is absent */
	O1_E_SHAPE,       /* a tensor or dimension has the wrong shape */
	O1_E_CONFIG,      /* invalid configuration */
	O1_E_CUDA,        /* a CUDA call failed */
	O1_E_QUOTA,       /* a per-client quota was exceeded */
	O1_E_CONTEXT,     /* a sequence exceeds the context limit */
	O1_E_DRAINING,    /* the daemon is draining and refuses new work */
	O1_E_CANCELLED,   /* the request was cancelled */
	O1_E_PROTOCOL,    /* a peer broke the wire protocol */
	O1_E_TOKENIZER,   /* text cannot be tokenized as asked */
	O1_E_NO_DEVOUT,   /* no device output area (CPU backend, off, taken) */
	O1_E_NO_TOKENIZER, /* a text prompt to a model without a tokenizer */
	O1_E_GRAMMAR,      /* a request's grammar refused, or it allows no token */
	O1_E_STALLED,     /* the client read nothing of a stream for too long */
	O1_E_LAST,
};

/* Returns a static description of err (a -errno or -O1_E_*), never NULL. */
const char *o1_strerror(int err);

#endif

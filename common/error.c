/* Descriptions for -errno and the reserved -O1_E_* range. */
#include "error.h"

#include <string.h>

static const char *const o1_error_text[] = {
	[O1_E_FORMAT - O1_E_BASE] = "malformed data",
	[O1_E_VERSION - O1_E_BASE] = "unsupported version",
	[O1_E_UNSUPPORTED - O1_E_BASE] = "unsupported feature",
	[O1_E_BOUNDS - O1_E_BASE] = "offset or size out of bounds",
	[O1_E_MISSING - O1_E_BASE] = "required item missing",
	[O1_E_SHAPE - O1_E_BASE] = "wrong shape",
	[O1_E_CONFIG - O1_E_BASE] = "invalid configuration",
	[O1_E_CUDA - O1_E_BASE] = "CUDA error",
	[O1_E_QUOTA - O1_E_BASE] = "quota exceeded",
	[O1_E_CONTEXT - O1_E_BASE] = "context length exceeded",
	[O1_E_DRAINING - O1_E_BASE] = "daemon is draining",
	[O1_E_CANCELLED - O1_E_BASE] = "cancelled",
	[O1_E_PROTOCOL - O1_E_BASE] = "protocol violation",
	[O1_E_TOKENIZER - O1_E_BASE] = "tokenizer error",
	[O1_E_NO_DEVOUT - O1_E_BASE] = "no device output area",
	[O1_E_NO_TOKENIZER - O1_E_BASE] =
	    "model has no tokenizer: send token ids",
	[O1_E_GRAMMAR - O1_E_BASE] =
	    "grammar refused, or the output is not allowed by it",
	[O1_E_STALLED - O1_E_BASE] =
	    "stream cancelled: the client read none of it for "
	    "scheduler.stall_timeout_ms",
};
_Static_assert(sizeof(o1_error_text) / sizeof(o1_error_text[0]) ==
		       O1_E_LAST - O1_E_BASE,
	       "every O1_E_* code needs a description");

const char *o1_strerror(int err)
{
	int code = err < 0 ? -err : err;

	if (code > O1_E_BASE && code < O1_E_LAST)
		return o1_error_text[code - O1_E_BASE];
	if (code == 0)
		return "success";
	if (code < O1_E_BASE)
		return strerror(code);
	return "unknown error";
}

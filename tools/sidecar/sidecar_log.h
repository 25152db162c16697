/* The access log: one line per HTTP request, written when the request
 * ends (also when the client went away), with its timings and tokens. */
#ifndef O1_SIDECAR_LOG_H
#define O1_SIDECAR_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct o1_sidecar_access {
	char client[96]; /* "host:port" or "unix" */
	char method[8];
	char path[96];
	int status; /* 0: none sent; 499: the client left first */
	bool stream;
	bool aborted;	    /* the client went away first */
	const char *finish; /* finish_reason or an error code; may be NULL */
	uint32_t prompt_tokens, completion_tokens;
	uint64_t bytes_in;
	uint64_t t_start_ns; /* request arrived */
	uint64_t t_first_ns; /* first token; 0 if none */
	uint64_t t_end_ns;   /* response done */
};

/* Writes one line to F (whole-line writes; stdio's lock orders threads):
 * "access client=.. method=.. path=.. status=.. stream=0|1 finish=..
 *  prompt_tokens=.. completion_tokens=.. ttft_ms=.. total_ms=..
 *  bytes_in=..". ttft_ms is -1 without tokens. */
void o1_sidecar_access_log(FILE *f, const struct o1_sidecar_access *a);

#endif

/* See sidecar_log.h. The line is formatted into a local buffer first so
 * it reaches F in one fputs. */
#include <stdio.h>

#include "sidecar_log.h"

static double ms(uint64_t from, uint64_t to)
{
	return from && to >= from ? (double)(to - from) / 1e6 : -1;
}

void o1_sidecar_access_log(FILE *f, const struct o1_sidecar_access *a)
{
	char line[512];

	snprintf(line, sizeof(line),
		 "access client=%s method=%s path=%s status=%d stream=%d "
		 "finish=%s prompt_tokens=%u completion_tokens=%u "
		 "ttft_ms=%.3f total_ms=%.3f bytes_in=%llu\n",
		 a->client[0] ? a->client : "-", a->method[0] ? a->method : "-",
		 a->path[0] ? a->path : "-", a->status, a->stream ? 1 : 0,
		 a->aborted  ? "client_abort"
		 : a->finish ? a->finish
			     : "-",
		 a->prompt_tokens, a->completion_tokens,
		 a->t_first_ns ? ms(a->t_start_ns, a->t_first_ns) : -1.0,
		 ms(a->t_start_ns, a->t_end_ns),
		 (unsigned long long)a->bytes_in);
	fputs(line, f);
	fflush(f);
}

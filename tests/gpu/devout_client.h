/* The records o1_gpu_devout_client writes for test_gpu_devout: fixed-size
 * binary records, in event order. */
#ifndef O1_DEVOUT_CLIENT_H
#define O1_DEVOUT_CLIENT_H

#include <stdint.h>

enum devout_rec_kind {
	REC_TOKEN = 1,	  /* a TOKEN, followed by row_floats floats */
	REC_LOGPROBS = 2, /* one LOGPROBS event */
	REC_FINAL = 3,
	REC_CHECK_FIRST = 4, /* o1_cuda_output_check of the first TOKEN, after
			      * the FINAL (the ring has lapped it) */
	REC_CHECK_LAST = 5,  /* the same for the last TOKEN */
};

struct devout_rec {
	uint32_t kind;
	uint32_t id;	  /* TOKEN */
	uint32_t dev_seq; /* TOKEN */
	float logprob;	  /* TOKEN */
	float entropy;	  /* TOKEN */
	uint32_t row_floats;
	int32_t code;	   /* TOKEN, CHECK_*: the stamp check; FINAL: error */
	uint32_t n;	   /* FINAL: generated; LOGPROBS: pairs */
	uint32_t position; /* LOGPROBS */
	uint32_t top_ids[14];
	float top_logprobs[14];
};

#endif

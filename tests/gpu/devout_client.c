/* o1_gpu_devout_client SOCKET OUT N_TOKENS ID...: a separate client
 * process for test_gpu_devout. Connects with a device output area, maps
 * it through libo1client-cuda, asks for N_TOKENS greedy tokens of the
 * prompt ids with device logits, confidence and 20 logprobs, and for each
 * TOKEN copies its row out of the mapped area on its own stream (after
 * waiting on the daemon's event) and checks the stamp (the result goes
 * into the record: -ESTALE when this process fell behind the ring). Writes
 * every event as a struct devout_rec (rows after their TOKEN) to OUT. Exit 0
 * when every step worked, 1 otherwise (the message on stderr). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devout_client.h"
#include "o1/client.h"
#include "o1/client_cuda.h"

#define MAX_IDS 256

struct run {
	struct o1_client *c;
	struct o1_cuda_output *o;
	cudaStream_t stream;
	float *row; /* pinned host copy */
	FILE *out;
	struct o1_event first, last;
	int n_tokens;
};

static int die(const char *what, int err)
{
	fprintf(stderr, "devout_client: %s: %d (%s / %s)\n", what, err,
		o1_last_error(), o1_cuda_last_error());
	return 1;
}

static int on_token(struct run *r, const struct o1_event *ev)
{
	uint32_t n = o1_cuda_output_row_floats(r->o);
	struct devout_rec rec = {.kind = REC_TOKEN,
				 .id = ev->ids[0],
				 .dev_seq = ev->dev_seq,
				 .logprob = ev->logprobs[0],
				 .entropy = ev->entropy,
				 .row_floats = n};
	const float *row;
	int ret = o1_cuda_output_row(r->o, ev, r->stream, &row);

	if (ret)
		return die("row", ret);
	if (cudaMemcpyAsync(r->row, row, n * sizeof(float),
			    cudaMemcpyDeviceToHost, r->stream))
		return die("copy", -1);
	/* -ESTALE: this process fell RING rows behind the daemon; recorded,
	 * the test decides which tokens must be intact */
	rec.code = o1_cuda_output_check(r->o, ev, r->stream);
	if (rec.code && rec.code != -ESTALE)
		return die("check", rec.code);
	if (!r->n_tokens++)
		r->first = *ev;
	r->last = *ev;
	fwrite(&rec, sizeof(rec), 1, r->out);
	fwrite(r->row, sizeof(float), n, r->out);
	return 0;
}

static void on_logprobs(struct run *r, const struct o1_event *ev)
{
	struct devout_rec rec = {
	    .kind = REC_LOGPROBS, .n = ev->n_top, .position = ev->position};

	memcpy(rec.top_ids, ev->top_ids, sizeof(rec.top_ids));
	memcpy(rec.top_logprobs, ev->top_logprobs, sizeof(rec.top_logprobs));
	fwrite(&rec, sizeof(rec), 1, r->out);
}

static int events(struct run *r)
{
	struct o1_event ev;
	int ret;

	for (;;) {
		ret = o1_client_wait(r->c, &ev, 60000000000ll);
		if (ret < 0)
			return die("wait", ret);
		if (ev.type == O1_EVENT_TOKEN && on_token(r, &ev))
			return 1;
		if (ev.type == O1_EVENT_LOGPROBS)
			on_logprobs(r, &ev);
		if (ev.type == O1_EVENT_FINAL) {
			struct devout_rec rec = {.kind = REC_FINAL,
						 .code = ev.error,
						 .n = ev.generated_tokens};

			fwrite(&rec, sizeof(rec), 1, r->out);
			return 0;
		}
	}
}

static void check_after(struct run *r, const struct o1_event *ev, uint32_t kind)
{
	struct devout_rec rec = {.kind = kind};

	rec.code = o1_cuda_output_check(r->o, ev, r->stream);
	fwrite(&rec, sizeof(rec), 1, r->out);
}

static int submit(struct run *r, int argc, char **argv)
{
	static uint32_t ids[MAX_IDS];
	struct o1_sampling sp = {.sz = sizeof(sp), .n_logprobs = 20};
	struct o1_submit_opts so = {
	    .sz = sizeof(so),
	    .req_id = 1,
	    .ids = ids,
	    .sampling = &sp,
	    .max_tokens = (uint32_t)atoi(argv[3]),
	    .flags = O1_FLAG_DEVICE_LOGITS | O1_FLAG_CONFIDENCE |
		     O1_FLAG_IGNORE_EOS | O1_FLAG_NO_TEXT};

	for (int i = 4; i < argc && so.n_ids < MAX_IDS; i++)
		ids[so.n_ids++] = (uint32_t)atoi(argv[i]);
	return o1_client_submit(r->c, &so);
}

int main(int argc, char **argv)
{
	struct o1_client_opts co = {
	    .sz = sizeof(co), .name = "devout", .flags = O1_CONNECT_DEVICE_OUT};
	struct run r = {0};
	int ret;

	if (argc < 5) {
		fprintf(stderr, "usage: %s SOCKET OUT N_TOKENS ID...\n",
			argv[0]);
		return 2;
	}
	co.socket_path = argv[1];
	r.out = fopen(argv[2], "wb");
	if (!r.out)
		return die("open OUT", -1);
	ret = o1_client_connect(&co, &r.c);
	if (ret)
		return die("connect", ret);
	ret = o1_cuda_output_open(r.c, NULL, &r.o);
	if (ret)
		return die("map", ret);
	if (cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking) ||
	    cudaMallocHost((void **)&r.row,
			   o1_cuda_output_row_floats(r.o) * sizeof(float)))
		return die("stream", -1);
	ret = submit(&r, argc, argv);
	if (ret)
		return die("submit", ret);
	if (events(&r))
		return 1;
	if (r.n_tokens) {
		check_after(&r, &r.first, REC_CHECK_FIRST);
		check_after(&r, &r.last, REC_CHECK_LAST);
	}
	fclose(r.out);
	o1_cuda_output_close(r.o);
	o1_client_close(r.c);
	return 0;
}

/* See sampling.h: parameter and result copies, nothing else. */
#include <stddef.h>

#include "sampler/sampler.h"
#include "sampling.h"

int o1_sampling_create(const struct o1_sampling_req *r, uint32_t vocab,
		       const int32_t *prompt, uint32_t n,
		       struct o1_sampler **out)
{
	struct o1_sampler_params p;
	int err;

	o1_sampler_params_init(&p);
	p.temperature = r->temperature;
	p.top_k = r->top_k;
	p.top_p = r->top_p;
	p.min_p = r->min_p;
	p.repetition_penalty = r->repeat_penalty;
	p.presence_penalty = r->presence_penalty;
	p.frequency_penalty = r->frequency_penalty;
	p.seed = r->seed;
	p.n_logprobs = r->n_logprobs;
	p.max_tokens = r->max_tokens;
	p.eos_id = r->eos_id;
	p.ignore_eos = r->ignore_eos;
	p.n_stop_ids = r->n_stop_ids < O1_SAMPLER_MAX_STOP_IDS
			   ? r->n_stop_ids
			   : O1_SAMPLER_MAX_STOP_IDS;
	for (uint32_t i = 0; i < p.n_stop_ids; i++)
		p.stop_ids[i] = (int32_t)r->stop_ids[i];
	err = o1_sampler_create(&p, vocab, out);
	if (!err) {
		err = o1_sampler_add_prompt(*out, prompt, n);
		if (err) {
			o1_sampler_destroy(*out);
			*out = NULL;
		}
	}
	return err;
}

/* The sampler's token in the scheduler's terms. */
static void copy_out(const struct o1_sample *smp, struct o1_sampling_out *out)
{
	out->id = smp->id;
	out->logprob = smp->logprob;
	out->entropy = smp->entropy;
	out->n_top =
	    smp->n_top < O1_SAMPLING_TOP_MAX ? smp->n_top : O1_SAMPLING_TOP_MAX;
	for (uint32_t i = 0; i < out->n_top; i++) {
		out->top_id[i] = smp->top[i].id;
		out->top_lp[i] = smp->top[i].logprob;
	}
	out->end = smp->finish == O1_FINISH_EOS	     ? O1_SAMPLING_EOS
		   : smp->finish == O1_FINISH_STOP   ? O1_SAMPLING_STOP_ID
		   : smp->finish == O1_FINISH_LENGTH ? O1_SAMPLING_LENGTH
						     : O1_SAMPLING_GO;
}

int o1_sampling_next(struct o1_sampler *s, const float *logits,
		     struct o1_sampling_out *out)
{
	struct o1_sample smp;
	int err = o1_sampler_sample(s, logits, &smp);

	if (!err)
		copy_out(&smp, out);
	return err;
}

int o1_sampling_row(struct o1_sampler *s, struct o1_sample_row *row,
		    struct o1_sample_penalty *pens, uint32_t cap, uint32_t *n)
{
	return o1_sampler_row(s, row, pens, cap, n);
}

int o1_sampling_accept(struct o1_sampler *s, const struct o1_sample_result *r,
		       struct o1_sampling_out *out)
{
	struct o1_sample smp;
	int err = o1_sampler_accept(s, r, &smp);

	if (!err)
		copy_out(&smp, out);
	return err;
}

void o1_sampling_destroy(struct o1_sampler *s)
{
	o1_sampler_destroy(s);
}

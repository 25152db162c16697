/* Refinement rounds (see refine.h): the verdict after a round, and the
 * answer handed from the stream to the next round's prompt. */
#include "refine.h"

#include <string.h>

#include "common/error.h"

void o1_refine_init(struct o1_refine *rf, char *prev)
{
	memset(rf, 0, sizeof(*rf));
	rf->prev = prev;
}

void o1_refine_start(struct o1_refine *rf, uint32_t steps)
{
	rf->steps = steps;
	rf->n_prev = 0;
}

/* The round's answer is the previous round's, byte for byte. */
static bool repeated(const struct o1_refine *rf,
		     const struct o1_seq_output *out)
{
	return out->round && out->n_answer == rf->n_prev &&
	       memcmp(out->answer, rf->prev, out->n_answer) == 0;
}

enum o1_refine_verdict o1_refine_judge(const struct o1_refine *rf,
				       const struct o1_seq_output *out,
				       float threshold,
				       enum o1_refine_stop *stop)
{
	float mean_lp, min_lp, mean_ent;

	o1_seq_output_conf(out, &mean_lp, &min_lp, &mean_ent);
	if (out->n_conf && mean_lp >= threshold)
		*stop = O1_REFINE_CONFIDENT;
	else if (repeated(rf, out))
		*stop = O1_REFINE_REPEAT;
	else if (out->round >= rf->steps)
		*stop = O1_REFINE_STEPS;
	else if (out->answer_cut)
		*stop = O1_REFINE_LIMIT;
	else
		*stop = O1_REFINE_NONE;
	return *stop == O1_REFINE_NONE ? O1_REFINE_ROUND_OVER : O1_REFINE_ENDED;
}

const char *o1_refine_next(struct o1_refine *rf, struct o1_seq_output *out)
{
	rf->prev = o1_seq_output_swap_answer(out, rf->prev, &rf->n_prev);
	return rf->prev;
}

enum o1_refine_stop o1_refine_stop_failed(int err)
{
	return err == -O1_E_BOUNDS || err == -O1_E_CONTEXT ? O1_REFINE_LIMIT
							   : O1_REFINE_ERROR;
}

enum o1_refine_stop o1_refine_stop_cut(enum o1_finish_reason reason)
{
	return reason == O1_FINISH_CANCELLED ? O1_REFINE_CANCELLED
					     : O1_REFINE_ERROR;
}

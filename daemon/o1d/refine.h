/* Refinement rounds (a request's refine_steps > 0, chat text prompts):
 * when a round ends, whether another one runs, and the answer the next
 * round's prompt quotes (conversation + {assistant: answer} + {user:
 * review}, rendered by prompt.c).
 *
 * The loop ends after a round when refine_steps rounds followed the first
 * answer (STEPS), the round's mean logprob reached the threshold
 * (CONFIDENT), the answer equals the previous one (REPEAT) or did not fit
 * the answer buffer (LIMIT); the caller ends it too when the next prompt
 * does not fit (LIMIT) or fails (ERROR), or the request is cut short
 * (CANCELLED, ERROR). The functions here return verdicts and stops; the
 * scheduler requeues or finishes. State is the caller's storage, one per
 * request slot; the answer buffers are the caller's (allocated at create)
 * and trade places each round: nothing is allocated or copied per round.
 */
#ifndef O1_REFINE_H
#define O1_REFINE_H

#include <stdint.h>

#include "seq_output.h"

struct o1_refine {
	uint32_t steps; /* rounds after the first; 0: not refining */
	char *prev;	/* the previous round's answer, NUL-terminated
			 * (answer_cap + 1 bytes, the caller's), or NULL */
	uint32_t n_prev;
};

enum o1_refine_verdict {
	O1_REFINE_ROUND_OVER, /* another round follows (o1_refine_next) */
	O1_REFINE_ENDED,      /* the loop is over: see the stop */
};

/* Once per slot: PREV, a buffer like the stream's answer (or NULL). */
void o1_refine_init(struct o1_refine *rf, char *prev);
/* A new request refining STEPS rounds (0: none). */
void o1_refine_start(struct o1_refine *rf, uint32_t steps);
/* The verdict on the round OUT just streamed: ROUND_OVER, or ENDED with
 * *STOP (STEPS, CONFIDENT at THRESHOLD, REPEAT, LIMIT). */
enum o1_refine_verdict o1_refine_judge(const struct o1_refine *rf,
				       const struct o1_seq_output *out,
				       float threshold,
				       enum o1_refine_stop *stop);
/* Takes OUT's answer as the previous one and gives OUT the old buffer;
 * returns the answer, which the next round's prompt quotes. */
const char *o1_refine_next(struct o1_refine *rf, struct o1_seq_output *out);
/* Why the loop ends when the next round's prompt failed with ERR. */
enum o1_refine_stop o1_refine_stop_failed(int err);
/* Why the loop ends when the request finishes with REASON mid-round. */
enum o1_refine_stop o1_refine_stop_cut(enum o1_finish_reason reason);

#endif

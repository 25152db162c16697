/* Cadence: when the consumer posts events at a steady pace (an engine
 * streaming tokens, one step apart), the front loop can wake shortly
 * before the next post is due and spin through it, so a token costs no
 * wake-up of the loop: the engine's kick then lands while it spins.
 *
 * The estimate: arrivals are passes that posted, a burst (posts less than
 * O1_CADENCE_BURST_NS apart) counting once; the gap between arrivals and
 * its mean deviation are running averages (1/8 weight). A gap over
 * O1_CADENCE_MAX_GAP_NS starts afresh. Once O1_CADENCE_MIN_N gaps are
 * known, the wake-up is due margin before the expected arrival and the
 * spin lasts until margin after it, margin = 2 deviations + 10 us. A pace
 * that needs a margin over O1_CADENCE_MARGIN_MAX_NS is not steady enough
 * to predict, and one shorter than 4 margins is left to the spin window:
 * the spin costs at most a quarter of the loop's time, 2 margins a gap
 * (a GPU step of a few ms: a few percent). A miss costs nothing but that
 * spin: the kick still wakes the loop. Measured on a loaded 2-vCPU box, a
 * wider margin (200 us) made the p99 worse: the scheduler wakes a thread
 * that spun past its share later. Pure arithmetic over the times passed
 * in. */
#ifndef O1_IPC_CADENCE_H
#define O1_IPC_CADENCE_H

#include <stdint.h>

#define O1_CADENCE_BURST_NS	 20000ull
#define O1_CADENCE_MAX_GAP_NS	 100000000ull
#define O1_CADENCE_MIN_N	 3
#define O1_CADENCE_MARGIN_MAX_NS 50000ull

struct o1_ipc_cadence {
	uint64_t
	    last_ns; /* the latest arrival (a burst's first post), 0: none */
	uint64_t gap_ns; /* mean gap between arrivals */
	uint64_t dev_ns; /* mean absolute deviation of the gap */
	uint32_t n;	 /* gaps in the estimate */
};

/* A pass at now_ns posted events. */
void o1_ipc_cadence_post(struct o1_ipc_cadence *k, uint64_t now_ns);
/* With the loop about to sleep at now_ns: 0 when no arrival is expected,
 * else the time to be awake by (<= now_ns: do not sleep) and, in *until,
 * the time to spin until. */
uint64_t o1_ipc_cadence_wake(const struct o1_ipc_cadence *k, uint64_t now_ns,
			     uint64_t *until);

#endif

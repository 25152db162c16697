/* Cadence: when the consumer posts events at a steady pace (an engine
 * streaming tokens, one step apart), the front loop can wake shortly
 * before the next post is due and spin through it, so a token costs no
 * wake-up of the loop: the engine's kick then lands while it spins.
 *
 * The estimate: arrivals are passes that posted, a burst (posts less than
 * O1_CADENCE_BURST_NS apart) counting once. An arrival's time is when the
 * consumer posted, not when the loop noticed: the consumer's kick stamp
 * when it is newer than the previous arrival (a loop woken by the kick
 * notices a wake-up latency later, 20-50 us on an idle host; dating the
 * arrival then put the next wake-up that much past the post, so a missed
 * post made the next one a miss too), else the pass's time (caught while
 * spinning, or a consumer that posts without kicking). The gap between
 * arrivals and its mean deviation are running averages (1/8 weight).
 *
 * Outliers: a gap more than O1_CADENCE_OUTLIER_NS off the mean (a step
 * of another kind, a preempted engine) is left out of the averages, so
 * one of them no longer stops the prediction for the dozen gaps the
 * deviation took to decay; the phase moves to it (the next step follows
 * it). Each outlier scores 3, each regular gap takes 1 off; at 4 (a
 * second outlier fewer than three gaps after the first) the pace changed:
 * the estimate starts afresh from the latest gap, so a pace of alternating
 * gaps never reaches O1_CADENCE_MIN_N. A gap over O1_CADENCE_MAX_GAP_NS
 * starts afresh too.
 *
 * The wake-up: once O1_CADENCE_MIN_N gaps are known, the spin lasts from
 * margin before the expected arrival until margin after it, margin = 2
 * deviations + 10 us. The timed sleep itself ends late (an idle core's
 * exit from its sleep state, the timer's own latency: 40-60 us on the
 * 2-vCPU dev box, whatever the timer slack), so the loop learns by how
 * much (the mean and mean deviation of what its timed wake-ups overshot,
 * 1/8 weight) and asks to be woken that much earlier (mean + 1 deviation,
 * at most O1_CADENCE_LATE_MAX_NS): the spin then starts about a margin
 * before the post and costs about a margin and a lateness deviation a
 * post (2 deviations caught no more posts in the model, for 20% more
 * spin). Without it (and with arrivals dated by the pass) the loop woke
 * after the post more often than not: 406 of 2,000 tokens caught on the
 * idle H200 host, 20% in tests/shm/test_cadence.c's model of it.
 *
 * What a prediction may cost: a margin over O1_CADENCE_MARGIN_MAX_NS, or
 * over 1/16 of the gap, is not steady enough to predict (the spin would
 * take over ~6% of the loop's time; a pace too quick for that is left to
 * the spin window). A 2 ms pace with +-30 us of jitter needs ~40-60 us (a
 * 50 us cap left one post in twenty unpredicted). A miss costs nothing
 * but the spin: the kick still wakes the loop. Pure arithmetic over the
 * times passed in.
 *
 * Two users, one estimate each: o1d's front loop (daemon/ipc/front.c,
 * the engine's posts, dated by its kick) and libo1client's wait
 * (client/pace.c, the front loop's posts of a stream's events, dated by
 * the take, or by the doorbell's wake-up less the learned lateness). */
#ifndef O1_SHM_CADENCE_H
#define O1_SHM_CADENCE_H

#include <stdint.h>

#define O1_CADENCE_BURST_NS	 20000ull
#define O1_CADENCE_MAX_GAP_NS	 100000000ull
#define O1_CADENCE_MIN_N	 3
#define O1_CADENCE_MARGIN_MAX_NS 100000ull
#define O1_CADENCE_OUTLIER_NS	 100000ull
#define O1_CADENCE_LATE_MAX_NS	 100000ull

struct o1_cadence {
	uint64_t last_ns; /* the latest arrival's post time, 0: none */
	uint64_t gap_ns;  /* mean gap between arrivals */
	uint64_t dev_ns;  /* mean absolute deviation of the gap */
	uint64_t late_ns; /* mean overshoot of a timed wake-up, 0: none yet */
	uint64_t late_dev_ns; /* its mean absolute deviation */
	uint32_t n;	      /* gaps in the estimate */
	uint32_t odd;	      /* outlier score (see above) */
};

/* A pass at now_ns posted events; kick_ns: the time of the consumer's
 * latest kick (0: none), taken as the post's when newer than the previous
 * arrival (by a burst) and not after now_ns. */
void o1_cadence_post(struct o1_cadence *k, uint64_t now_ns, uint64_t kick_ns);
/* With the loop about to sleep at now_ns: 0 when no arrival is expected,
 * else the time to be awake by (<= now_ns: do not sleep) and, in *until,
 * the time to spin until. */
uint64_t o1_cadence_wake(const struct o1_cadence *k, uint64_t now_ns,
			 uint64_t *until);
/* A sleep that asked to end at asked_ns ended at now_ns (>= asked_ns: by
 * its timeout, or by an event that came first after it, a lower bound of
 * the timeout's lateness either way). */
void o1_cadence_woke(struct o1_cadence *k, uint64_t asked_ns, uint64_t now_ns);

#endif

/* libo1client's wait on a steady stream: shm/cadence.h's predictor, fed
 * with the arrivals of a stream's events (TOKEN, ROUND), tells the wait to
 * sleep only until shortly before the next one is due and to spin through
 * it, so a token of a steady decode costs the client no wake-up (the
 * front loop's post lands while it spins), as the front loop does for the
 * engine's posts (daemon/ipc/front.c).
 *
 * Dating an arrival: by the take, whether the wait spun or a doorbell
 * woke it (no stamp of the post reaches the client). A doorbell's
 * wake-up dates it late by the wake-up latency L, so the next spin is
 * aimed L late: the post is still caught when L < the margin, and being
 * caught dates the next one exactly. The timed wake-up's learned lateness
 * is no estimate of L: the client's futex timeout includes the thread's
 * timer slack (50 us by default; measured 80-90 us late here against the
 * front loop's 40-60), and dating by take - lateness caught fewer posts
 * on the dev box (34-526 of 421-753 timed wakes, against 483-731).
 *
 * The spin yields the CPU each turn while the front loop last ran on our
 * CPU (the sq ring's cpu hint; or no hint): the event comes only after
 * the engine thread and the front loop ran, and on a host with fewer
 * free CPUs than those three threads the one it needs may be queued
 * behind the spin. On the 2-vCPU dev box (load 2.4-3.3, one run each) a
 * spin that never yielded caught 365-689 of 1,018-1,253 timed wakes
 * (p50 20-26 us); one that always yielded 1,395-1,655 of 1,421-1,667
 * (p50 5-16 us) but, at load 4-6, gave the CPU to unrelated work for a
 * time slice (p99 2-4 ms in half the runs); gated by the hint, p50 13-16
 * and p99 69-335 us in the same runs. With nothing else runnable (an
 * idle host) a yield is one system call, under a microsecond.
 *
 * Invariants: only the timing of o1_client_wait's sleep changes (shorter,
 * never longer than asked; the doorbell protocol and the spin windows are
 * untouched); no prediction with no request in flight or a pace too
 * irregular (o1_cadence_wake returns 0), so an irregular stream or an
 * idle client costs no spin; o1_client_poll and o1_client_fd do not use
 * it. Pure arithmetic over the times passed in (tests/client/test_pace.c
 * plays it over a seeded model). */
#ifndef O1_CLIENT_PACE_H
#define O1_CLIENT_PACE_H

#include <stdint.h>

#include "shm/cadence.h"

struct o1_client_pace {
	struct o1_cadence k;
	uint64_t asked_ns; /* the timed sleep's asked end, 0: none */
	uint64_t until_ns; /* spin through a due event until then, 0: none */
	uint64_t from_ns;  /* that spin's start */
	uint64_t next_ns;  /* the timed sleep's spin end, for _woke */
	uint64_t wakes;	   /* timed sleeps that ended for a due event */
	uint64_t caught;   /* events taken while spinning for them */
	uint64_t spin_ns;  /* time spun for them, caught or not */
};

/* An event of a stream was taken at now_ns; slept: right after a sleep
 * on the doorbell (not on the timer's spin, not on a re-check). */
void o1_client_pace_took(struct o1_client_pace *p, uint64_t now_ns, int slept);
/* Whether to spin on at now_ns for an event due by the pace. */
int o1_client_pace_spin(struct o1_client_pace *p, uint64_t now_ns);
/* About to sleep at now_ns for at most slice_ns: the sleep to ask for
 * instead (<= slice_ns), or 0: spin now (o1_client_pace_spin says until
 * when). */
int64_t o1_client_pace_sleep(struct o1_client_pace *p, uint64_t now_ns,
			     int64_t slice_ns);
/* That sleep ended at now_ns; timed_out: by its timeout. */
void o1_client_pace_woke(struct o1_client_pace *p, uint64_t now_ns,
			 int timed_out);

#endif

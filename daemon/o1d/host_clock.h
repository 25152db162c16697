/* The engine thread's host time between forward passes (the faults module's
 * host_clock, see faults.h): from one step's return to the next step's
 * call, the scheduler's bookkeeping, sampling, detokenizing, ring writes
 * and wake-ups run serially with the forward pass, so this is what o1d
 * adds to every step on top of the backend. Kept per batch size of the
 * step before (the one whose outputs that time mostly handles), in thread
 * CPU time (what the work costs) and wall time (what the step waited,
 * preemption included); beside it, the forward pass's own wall time per
 * batch size (the step itself), so that on a GPU the two add up to the
 * period a stream sees. Steps that carry prompt tokens (prefill chunks,
 * run eagerly on CUDA) are kept apart from decode steps, in one entry
 * whatever their batch, so a batch size's figures are decode alone.
 *
 * Invariants: one thread calls enter/leave/reset (the engine thread);
 * the entries are relaxed atomics, so that report may run on another
 * thread while steps go on (each field exact, not a cut across them);
 * a gap is recorded only between a leave and the next enter, so the first
 * step after a reset records nothing; batch sizes above the table's last
 * entry count in it.
 */
#ifndef O1_HOST_CLOCK_H
#define O1_HOST_CLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define O1_HOST_CLOCK_BATCH_MAX 1024 /* the last entry: this and above */

struct o1_host_clock_ent {
	_Atomic uint64_t steps, cpu_ns, wall_ns; /* gaps after this batch */
	_Atomic uint64_t fwd_steps, fwd_ns;	 /* forward passes of it */
};

/* The entry of steps with prompt tokens, after the batch sizes. */
#define O1_HOST_CLOCK_PREFILL (O1_HOST_CLOCK_BATCH_MAX + 1)

struct o1_host_clock {
	struct o1_host_clock_ent *t; /* O1_HOST_CLOCK_PREFILL + 1 */
	uint64_t last_cpu, last_wall, enter_wall;
	uint32_t last_batch;
	bool armed; /* a step returned since the reset */
};

int o1_host_clock_init(struct o1_host_clock *c);
void o1_host_clock_fini(struct o1_host_clock *c);
/* Forgets everything recorded (the next enter records nothing). */
void o1_host_clock_reset(struct o1_host_clock *c);
/* Before a step's forward pass: records the gap since the last leave. */
void o1_host_clock_enter(struct o1_host_clock *c);
/* After a step of BATCH sequences returned; PREFILL: some brought more
 * than one token. */
void o1_host_clock_leave(struct o1_host_clock *c, uint32_t batch, bool prefill);
/* Logs (info) the decode batch sizes with the most steps, at most
 * MAX_LINES of them, largest batch first, then the steps with prompt
 * tokens (any thread; recording goes on). */
void o1_host_clock_report(struct o1_host_clock *c, uint32_t max_lines);

#endif

/* The autotuner's choices, free of CUDA (cuda_tune.c times, this decides;
 * tested without a GPU): the median of repeated timings, the fastest of a
 * job's candidates against the one in use, and the load-time budget that
 * bounds the whole tuning.
 * Invariants: candidate 0 of a job is the setup in use (the default the
 * first time), timed first; a candidate replaces it only when measured
 * and faster by more than the margin (run-to-run noise must not flip a
 * choice); the budget is checked before every timing with that job's
 * measured cost, so the tuning ends within the budget plus one timing. */
#ifndef O1_TUNE_PICK_H
#define O1_TUNE_PICK_H

#include <stdbool.h>
#include <stdint.h>

/* Relative margin a candidate must win by (1%). */
#define O1_TUNE_MARGIN 0.01
/* ...and a larger row count, timed once at load without the graphs'
 * repetition, for a product to run at it (cuda_forward.c's row map). */
#define O1_TUNE_ROWS_MARGIN 0.05

/* The median of V[0 .. N) (sorts V in place); 0 for N 0. */
double o1_tune_median(double *v, uint32_t n);

/* The index of the candidate to keep among US[0 .. N) (microseconds;
 * <= 0: not measured, e.g. failed or cut by the budget): the fastest
 * measured one if it beats US[0] by more than MARGIN (relative), else 0.
 * When US[0] is not measured, the fastest measured one (0 if none, or
 * when N is 0: US is not read). */
uint32_t o1_tune_pick(const double *us, uint32_t n, double margin);

struct o1_tune_budget {
	uint64_t start_ns, limit_ns; /* limit 0: no time at all */
	uint32_t timed, refused;     /* timings done, and refused */
	bool spent;		     /* a timing was refused */
};

void o1_tune_budget_init(struct o1_tune_budget *b, uint64_t now_ns,
			 uint32_t budget_ms);
/* Whether a timing expected to cost COST_NS may start at NOW_NS: it must
 * end within the budget. Once one is refused, every later one is (the
 * tuning stops where it is, rather than picking cheap timings out of
 * order). Counts both. */
bool o1_tune_budget_take(struct o1_tune_budget *b, uint64_t now_ns,
			 uint64_t cost_ns);
/* Milliseconds since start. */
double o1_tune_budget_ms(const struct o1_tune_budget *b, uint64_t now_ns);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t o1_tune_now_ns(void);

#endif

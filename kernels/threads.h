/* A fixed pool of worker threads for the CPU kernels.
 *
 * o1_threads_run() runs TASKS independent tasks and returns when all are
 * done; the calling thread works too (as worker 0). Tasks are handed out in
 * any order to any worker, so a kernel is deterministic exactly when each
 * task's result depends only on its own index, never on the worker or on
 * the order: every kernel in kernels/ is written that way, which makes its
 * output independent of the thread count as well.
 *
 * One run at a time per pool (the engine calls it from one thread). The
 * pool allocates at create and never in run. A NULL pool runs every task
 * on the caller.
 *
 * Every kernel takes its pool as the first parameter; its CUDA twin takes
 * a cudaStream_t there and keeps every other parameter as it is.
 */
#ifndef O1_THREADS_H
#define O1_THREADS_H

#include <stdint.h>

struct o1_threads;

/* fn(arg, task, worker): worker is in [0, o1_threads_count()). */
typedef void (*o1_threads_fn)(void *arg, uint32_t task, uint32_t worker);

/* Starts N_THREADS - 1 workers (N_THREADS >= 1, at most 256). */
int o1_threads_create(uint32_t n_threads, struct o1_threads **out);
void o1_threads_destroy(struct o1_threads *tp);
/* Number of workers including the caller; 1 for a NULL pool. */
uint32_t o1_threads_count(const struct o1_threads *tp);
void o1_threads_run(struct o1_threads *tp, uint32_t n_tasks, o1_threads_fn fn,
		    void *arg);

#endif

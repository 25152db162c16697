/* o1bench run --long (bench_long.c): N long prompts submitted at once
 * while the run's streams decode; the phase sorts the streams'
 * inter-token samples, and each long prompt's TTFT is kept. */
#ifndef O1BENCH_LONG_H
#define O1BENCH_LONG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum o1bench_long_phase {
	O1BENCH_LONG_BEFORE, /* not submitted yet */
	O1BENCH_LONG_DURING, /* submitted, not all have a first token */
	O1BENCH_LONG_AFTER,
};

struct o1bench_long {
	/* set by the caller before start */
	const char *socket;		 /* borrowed */
	long n, words, after_ms;	 /* prompts, words each, wait */
	const atomic_long *first_tokens; /* streams that had a token */
	const atomic_long *before_gaps;	 /* inter-token samples taken so far */
	long streams;			 /* ... to wait for */
	/* results, the caller's after join */
	uint64_t *ttft; /* ns, n_ttft of n entries filled */
	long n_ttft, done, errors;
	char first_error[160];
	/* internal */
	_Atomic int phase;	  /* enum o1bench_long_phase */
	_Atomic int streams_done; /* set by join: stop waiting to submit */
	pthread_t thread;
	int started;
};

/* Starts the thread; 0 or -errno. */
int o1bench_long_start(struct o1bench_long *l);
/* The current phase (any thread). */
int o1bench_long_phase(const struct o1bench_long *l);
/* Call once the streams are done: waits for the thread, which by then
 * has every long prompt's FINAL, or failed, or (the streams ended before
 * it submitted) submitted nothing. */
void o1bench_long_join(struct o1bench_long *l);
void o1bench_long_fini(struct o1bench_long *l);

#endif

/* Worker pool: a generation counter under a mutex wakes the workers for
 * each run; tasks are claimed with an atomic counter; the caller waits until
 * every worker has finished the generation.
 *
 * Invariants: gen, fn, arg, n_tasks are written by the caller under lock
 * before the broadcast; a worker reads them under lock after seeing a new
 * gen. busy counts workers still inside the current generation; the caller
 * returns only when it is 0, so fn/arg outlive every use.
 */
#include "threads.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/log.h"

struct o1_threads {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* caller -> workers: new generation or stop */
	pthread_cond_t done; /* workers -> caller: busy reached 0 */
	uint64_t gen;
	uint32_t busy;
	int stop;
	o1_threads_fn fn;
	void *arg;
	uint32_t n_tasks;
	atomic_uint next; /* next unclaimed task */
	uint32_t n_threads;
	uint32_t n_started;
	pthread_t *workers;
};

struct worker_start {
	struct o1_threads *tp;
	uint32_t id;
};

static void claim_tasks(struct o1_threads *tp, uint32_t id)
{
	uint32_t t;

	while ((t = atomic_fetch_add(&tp->next, 1)) < tp->n_tasks)
		tp->fn(tp->arg, t, id);
}

static void *worker_main(void *p)
{
	struct o1_threads *tp = ((struct worker_start *)p)->tp;
	uint32_t id = ((struct worker_start *)p)->id;
	uint64_t seen = 0;

	free(p);
	pthread_mutex_lock(&tp->lock);
	for (;;) {
		while (!tp->stop && tp->gen == seen)
			pthread_cond_wait(&tp->wake, &tp->lock);
		if (tp->stop)
			break;
		seen = tp->gen;
		pthread_mutex_unlock(&tp->lock);
		claim_tasks(tp, id);
		pthread_mutex_lock(&tp->lock);
		if (--tp->busy == 0)
			pthread_cond_signal(&tp->done);
	}
	pthread_mutex_unlock(&tp->lock);
	return NULL;
}

static int start_worker(struct o1_threads *tp, uint32_t id)
{
	struct worker_start *ws = malloc(sizeof(*ws));
	int err;

	if (!ws)
		return -ENOMEM;
	ws->tp = tp;
	ws->id = id;
	err = pthread_create(&tp->workers[id - 1], NULL, worker_main, ws);
	if (err) {
		free(ws);
		o1_err("threads: pthread_create for worker %u: error %d", id,
		       err);
		return -err;
	}
	tp->n_started++;
	return 0;
}

int o1_threads_create(uint32_t n_threads, struct o1_threads **out)
{
	struct o1_threads *tp;
	int err = 0;

	if (n_threads < 1 || n_threads > 256) {
		o1_err("threads: %u threads asked, need 1..256", n_threads);
		return -EINVAL;
	}
	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return -ENOMEM;
	tp->n_threads = n_threads;
	tp->workers = calloc(n_threads, sizeof(*tp->workers));
	if (!tp->workers) {
		free(tp);
		return -ENOMEM;
	}
	pthread_mutex_init(&tp->lock, NULL);
	pthread_cond_init(&tp->wake, NULL);
	pthread_cond_init(&tp->done, NULL);
	for (uint32_t i = 1; i < n_threads && !err; i++)
		err = start_worker(tp, i);
	if (err) {
		o1_threads_destroy(tp);
		return err;
	}
	*out = tp;
	return 0;
}

void o1_threads_destroy(struct o1_threads *tp)
{
	if (!tp)
		return;
	pthread_mutex_lock(&tp->lock);
	tp->stop = 1;
	pthread_cond_broadcast(&tp->wake);
	pthread_mutex_unlock(&tp->lock);
	for (uint32_t i = 0; i < tp->n_started; i++)
		pthread_join(tp->workers[i], NULL);
	pthread_cond_destroy(&tp->done);
	pthread_cond_destroy(&tp->wake);
	pthread_mutex_destroy(&tp->lock);
	free(tp->workers);
	free(tp);
}

uint32_t o1_threads_count(const struct o1_threads *tp)
{
	return tp ? tp->n_threads : 1;
}

void o1_threads_run(struct o1_threads *tp, uint32_t n_tasks, o1_threads_fn fn,
		    void *arg)
{
	if (!tp || tp->n_threads == 1 || n_tasks <= 1) {
		for (uint32_t t = 0; t < n_tasks; t++)
			fn(arg, t, 0);
		return;
	}
	pthread_mutex_lock(&tp->lock);
	tp->fn = fn;
	tp->arg = arg;
	tp->n_tasks = n_tasks;
	atomic_store(&tp->next, 0);
	tp->busy = tp->n_threads - 1;
	tp->gen++;
	pthread_cond_broadcast(&tp->wake);
	pthread_mutex_unlock(&tp->lock);
	claim_tasks(tp, 0);
	pthread_mutex_lock(&tp->lock);
	while (tp->busy)
		pthread_cond_wait(&tp->done, &tp->lock);
	pthread_mutex_unlock(&tp->lock);
}

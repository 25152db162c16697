/* bench_metrics: nanoseconds per call of the metrics writer's hot-path
 * helpers (o1_metrics_add, o1_metrics_set, o1_metrics_observe_us), of
 * what the scheduler records per step (a batch of B decode tokens), of
 * clock_gettime (each latency observation needs a timestamp), and of
 * o1_metrics_add with two threads on the same counter (engine and front
 * thread). Writes into the shared-memory fallback file (a mapping like
 * the BPF maps' one), so the numbers are the daemon's.
 *
 *   bench_metrics [ITERATIONS] [BATCH]     (defaults 20000000, 8)
 *
 * Not a test: docs/PERFORMANCE.md "Metrics" quotes its output. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "metrics/metrics_writer.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void report(const char *what, uint64_t t0, uint64_t n)
{
	printf("%-34s %8.2f ns\n", what, (double)(now_ns() - t0) / (double)n);
}

/* The per-step calls of o1_sched_step for a decode batch of B tokens:
 * per token a generated count and an inter-token observation, per step a
 * step observation, the step count and five gauges. */
static void step_bundle(struct o1_metrics *m, unsigned b, uint64_t i)
{
	for (unsigned k = 0; k < b; k++) {
		o1_metrics_add(m, O1_METRICS_CTR_TOKENS_GENERATED, 1);
		o1_metrics_observe_us(m, O1_METRICS_HIST_ITL,
				      4000 + ((i + k) & 1023));
	}
	o1_metrics_observe_us(m, O1_METRICS_HIST_STEP, 3000 + (i & 2047));
	o1_metrics_add(m, O1_METRICS_CTR_STEPS, 1);
	o1_metrics_set(m, O1_METRICS_CTR_REQUESTS_RUNNING, b);
	o1_metrics_set(m, O1_METRICS_CTR_REQUESTS_WAITING, i & 3);
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_TOTAL, 4096);
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_USED, i & 4095);
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_CACHED, 7);
}

struct adder {
	struct o1_metrics *m;
	uint64_t n;
};

static void *add_loop(void *arg)
{
	struct adder *a = arg;

	for (uint64_t i = 0; i < a->n; i++)
		o1_metrics_add(a->m, O1_METRICS_CTR_STEPS, 1);
	return NULL;
}

static void contended(struct o1_metrics *m, uint64_t n)
{
	struct adder a = {m, n};
	pthread_t t;
	uint64_t t0 = now_ns();

	if (pthread_create(&t, NULL, add_loop, &a)) {
		printf("contended: no thread\n");
		return;
	}
	add_loop(&a);
	pthread_join(t, NULL);
	report("add, 2 threads, same counter", t0, n);
}

static void run(struct o1_metrics *m, uint64_t n, unsigned batch)
{
	uint64_t t0, sink = 0;

	t0 = now_ns();
	for (uint64_t i = 0; i < n; i++)
		o1_metrics_add(m, O1_METRICS_CTR_TOKENS_GENERATED, 1);
	report("o1_metrics_add", t0, n);
	t0 = now_ns();
	for (uint64_t i = 0; i < n; i++)
		o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_USED, i);
	report("o1_metrics_set", t0, n);
	t0 = now_ns();
	for (uint64_t i = 0; i < n; i++)
		o1_metrics_observe_us(m, O1_METRICS_HIST_ITL, i & 0xfffff);
	report("o1_metrics_observe_us", t0, n);
	t0 = now_ns();
	for (uint64_t i = 0; i < n; i++)
		sink += now_ns();
	report("clock_gettime(MONOTONIC)", t0, n);
	t0 = now_ns();
	for (uint64_t i = 0; i < n / batch; i++)
		step_bundle(m, batch, i);
	printf("%-34s %8.2f ns (batch %u)\n", "one step's metrics",
	       (double)(now_ns() - t0) / (double)(n / batch), batch);
	contended(m, n);
	if (sink == 1)
		printf("\n");
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000;
	unsigned batch = argc > 2 ? (unsigned)atoi(argv[2]) : 8;
	char path[64];
	struct o1_metrics_opts o = {.sz = sizeof(o),
				    .mode = O1_METRICS_MODE_SHM,
				    .shm_path = path,
				    .gid = -1,
				    .unpin_on_close = true};
	struct o1_metrics *m;

	if (!n || !batch || batch > n) {
		fprintf(stderr, "usage: %s [ITERATIONS] [BATCH]\n", argv[0]);
		return 2;
	}
	snprintf(path, sizeof(path), "/dev/shm/o1-bench-metrics-%d",
		 (int)getpid());
	if (o1_metrics_open(&o, &m))
		return 1;
	run(m, n, batch);
	o1_metrics_close(m);
	return 0;
}

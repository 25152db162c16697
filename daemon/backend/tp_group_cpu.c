/* The CPU tensor-parallel group (tp_group.h): an in-process, fixed-order
 * all-reduce.
 *
 * Invariants: mu guards arrived, generation and failed. A barrier ends
 * when the N-th rank arrives (generation advances) or the group fails.
 * bufs[r] is written by rank r before the first barrier of a sum and read
 * by every rank between the two barriers; sum[] is written between them
 * (each rank its own range) and read after the second; a rank cannot
 * overwrite sum[] for its next call before every rank has passed that
 * call's first barrier, i.e. finished copying the previous result. The
 * mutex of each barrier orders these plain accesses. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "tp_group.h"

struct cpu_group;

struct cpu_rank {
	struct cpu_group *g;
	uint32_t r;
};

struct cpu_group {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t n, arrived;
	uint64_t generation;
	bool failed;
	uint64_t max_floats;
	float *sum; /* owned: max_floats */
	float *bufs[O1_BACKEND_DEVICES_MAX];
	struct cpu_rank ranks[O1_BACKEND_DEVICES_MAX];
};

/* All N ranks meet; -ECANCELED once the group failed. */
static int barrier(struct cpu_group *g)
{
	uint64_t gen;
	int err = 0;

	pthread_mutex_lock(&g->mu);
	gen = g->generation;
	if (g->failed) {
		err = -ECANCELED;
	} else if (++g->arrived == g->n) {
		g->arrived = 0;
		g->generation++;
		pthread_cond_broadcast(&g->cv);
	} else {
		while (gen == g->generation && !g->failed)
			pthread_cond_wait(&g->cv, &g->mu);
		err = gen == g->generation ? -ECANCELED : 0;
	}
	pthread_mutex_unlock(&g->mu);
	return err;
}

/* Elements [lo, hi) of the sum, ranks added in order 0 .. N - 1. */
static void add_range(struct cpu_group *g, uint64_t lo, uint64_t hi)
{
	for (uint64_t i = lo; i < hi; i++) {
		float s = g->bufs[0][i];

		for (uint32_t k = 1; k < g->n; k++)
			s += g->bufs[k][i];
		g->sum[i] = s;
	}
}

static int cpu_sum(void *ctx, float *buf, uint64_t n, void *stream)
{
	struct cpu_rank *k = ctx;
	struct cpu_group *g = k->g;
	int err;

	(void)stream;
	if (n > g->max_floats) {
		o1_err("tensor parallel: a sum of %llu floats, room for %llu",
		       (unsigned long long)n,
		       (unsigned long long)g->max_floats);
		return -O1_E_BOUNDS;
	}
	g->bufs[k->r] = buf;
	err = barrier(g);
	if (err)
		return err;
	add_range(g, n * k->r / g->n, n * (k->r + 1) / g->n);
	err = barrier(g);
	if (!err)
		memcpy(buf, g->sum, n * sizeof(float));
	return err;
}

static void cpu_fail(void *ctx)
{
	struct cpu_group *g = ((struct cpu_rank *)ctx)->g;

	pthread_mutex_lock(&g->mu);
	g->failed = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static bool cpu_failed(const void *group)
{
	struct cpu_group *g = (struct cpu_group *)group;
	bool f;

	pthread_mutex_lock(&g->mu);
	f = g->failed;
	pthread_mutex_unlock(&g->mu);
	return f;
}

static void cpu_link(void *group, uint32_t r, struct o1_tp_link *out)
{
	struct cpu_group *g = group;

	*out = (struct o1_tp_link){cpu_sum, NULL, cpu_fail, &g->ranks[r]};
}

static void cpu_destroy(void *group)
{
	struct cpu_group *g = group;

	if (!g)
		return;
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
	free(g->sum);
	free(g);
}

static int cpu_create(uint32_t n, const uint32_t *devices, uint64_t max_floats,
		      void **group)
{
	struct cpu_group *g;

	(void)devices;
	if (!n || n > O1_BACKEND_DEVICES_MAX || !max_floats)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->sum = malloc(max_floats * sizeof(float));
	if (!g->sum) {
		free(g);
		return -ENOMEM;
	}
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->n = n;
	g->max_floats = max_floats;
	for (uint32_t r = 0; r < n; r++)
		g->ranks[r] = (struct cpu_rank){g, r};
	*group = g;
	return 0;
}

const struct o1_tp_group_ops o1_tp_group_cpu_ops = {
    .name = "cpu",
    .create = cpu_create,
    .link = cpu_link,
    .failed = cpu_failed,
    .destroy = cpu_destroy,
};

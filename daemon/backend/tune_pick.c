/* The autotuner's decisions (tune_pick.h): medians, picks, the budget. */
#include "tune_pick.h"

#include <stdlib.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double o1_tune_median(double *v, uint32_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

uint32_t o1_tune_pick(const double *us, uint32_t n, double margin)
{
	uint32_t best = 0;

	if (!n)
		return 0;
	for (uint32_t i = 1; i < n; i++)
		if (us[i] > 0 && (us[best] <= 0 || us[i] < us[best]))
			best = i;
	if (!best || us[0] <= 0)
		return us[best] > 0 ? best : 0;
	return us[best] < us[0] * (1.0 - margin) ? best : 0;
}

void o1_tune_budget_init(struct o1_tune_budget *b, uint64_t now_ns,
			 uint32_t budget_ms)
{
	*b = (struct o1_tune_budget){now_ns, (uint64_t)budget_ms * 1000000u, 0,
				     0, false};
}

bool o1_tune_budget_take(struct o1_tune_budget *b, uint64_t now_ns,
			 uint64_t cost_ns)
{
	uint64_t used = now_ns > b->start_ns ? now_ns - b->start_ns : 0;

	if (!b->spent && used + cost_ns <= b->limit_ns) {
		b->timed++;
		return true;
	}
	b->spent = true;
	b->refused++;
	return false;
}

double o1_tune_budget_ms(const struct o1_tune_budget *b, uint64_t now_ns)
{
	return now_ns > b->start_ns ? (now_ns - b->start_ns) / 1e6 : 0;
}

uint64_t o1_tune_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

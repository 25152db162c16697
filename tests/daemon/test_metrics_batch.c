/* A step's metrics batch (daemon/o1d/metrics_batch.c) against the direct
 * path: the same observations and counts, made one by one with
 * o1_metrics_observe_us / o1_metrics_add into one set of regions and
 * through a batch flushed now and then into another, leave the two sets
 * equal field for field (count, sum, max, every slot, every counter); a
 * flush empties the batch, and a flush to no metrics only empties it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <string.h>

#include "o1d/metrics_batch.h"

static struct o1_metrics *open_anon(void)
{
	struct o1_metrics_opts o = {
	    .sz = sizeof(o), .mode = O1_METRICS_MODE_ANON, .gid = -1};
	struct o1_metrics *m = NULL;

	assert_int_equal(o1_metrics_open(&o, &m), 0);
	return m;
}

static void test_same_as_direct(void **state)
{
	struct o1_metrics *direct = open_anon(), *batched = open_anon();
	struct o1_metrics_batch b;
	uint64_t x = 88172645463325252ull;

	(void)state;
	o1_metrics_batch_init(&b);
	for (uint32_t i = 0; i < 5000; i++) {
		enum o1_metrics_hist_id h =
		    i % 3 ? O1_METRICS_HIST_ITL : O1_METRICS_HIST_TTFT;
		uint64_t us;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		/* every slot, the last one's overflow and 0 among them */
		us = (x & 0xffff) == 0 ? 0 : (x >> 20) >> (x % 44);
		o1_metrics_observe_us(direct, h, us);
		o1_metrics_batch_observe_us(&b, h, us);
		o1_metrics_add(direct, O1_METRICS_CTR_TOKENS_GENERATED, 1);
		o1_metrics_batch_add(&b, O1_METRICS_CTR_TOKENS_GENERATED, 1);
		if (i % 7 == 0) {
			o1_metrics_add(direct, O1_METRICS_CTR_STEPS, i);
			o1_metrics_batch_add(&b, O1_METRICS_CTR_STEPS, i);
		}
		if (i % 256 == 255)
			o1_metrics_batch_flush(&b, batched);
	}
	o1_metrics_batch_flush(&b, batched);
	assert_true(direct->hist->ttft.count > 0 &&
		    direct->hist->itl.slots[31] > 0 &&
		    direct->hist->itl.slots[0] > 0);
	assert_memory_equal(direct->hist, batched->hist, sizeof(*direct->hist));
	assert_memory_equal(direct->ctr, batched->ctr, sizeof(*direct->ctr));
	/* empty after a flush: flushing again changes nothing */
	o1_metrics_batch_flush(&b, batched);
	assert_memory_equal(direct->hist, batched->hist, sizeof(*direct->hist));
	/* to no metrics: dropped, and the batch is empty afterwards */
	o1_metrics_batch_observe_us(&b, O1_METRICS_HIST_ITL, 5);
	o1_metrics_batch_add(&b, O1_METRICS_CTR_STEPS, 3);
	o1_metrics_batch_flush(&b, NULL);
	o1_metrics_batch_flush(&b, batched);
	assert_memory_equal(direct->ctr, batched->ctr, sizeof(*direct->ctr));
	assert_memory_equal(direct->hist, batched->hist, sizeof(*direct->hist));
	o1_metrics_close(direct);
	o1_metrics_close(batched);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_as_direct),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

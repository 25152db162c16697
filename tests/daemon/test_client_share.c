/* The per-client counts behind the scheduler's shares: random holds,
 * drops and runs over many colliding client ids checked against a plain
 * array, the fair share arithmetic, and broken counts refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first */
#include <cmocka.h>

#include <stdlib.h>

#include "o1d/client_share.h"

#define N_IDS 300

struct ref {
	uint32_t id, held, running;
};

static uint32_t rnd(uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*x >> 33);
}

static void check(const struct o1_client_share *c, const struct ref *r)
{
	uint32_t clients = 0;

	for (uint32_t i = 0; i < N_IDS; i++) {
		assert_int_equal(o1_client_share_running(c, r[i].id),
				 r[i].held ? r[i].running : 0);
		clients += r[i].held > 0;
	}
	assert_int_equal(o1_client_share_clients(c), clients);
}

/* One random operation on client I, mirrored in R. */
static void random_op(struct o1_client_share *c, struct ref *r, uint32_t i,
		      uint32_t op)
{
	if (op == 0 || !r[i].held) {
		o1_client_share_hold(c, r[i].id);
		r[i].held++;
	} else if (op == 1 && r[i].running < r[i].held) {
		o1_client_share_run(c, r[i].id, 1);
		r[i].running++;
	} else if (op == 2 && r[i].running) {
		o1_client_share_run(c, r[i].id, -1);
		r[i].running--;
	} else if (r[i].held > r[i].running) {
		o1_client_share_drop(c, r[i].id);
		r[i].held--;
	}
}

/* 200,000 random operations on 300 clients with ids shaped like o1d's
 * (slot | generation << 16), entries coming and going, so probe runs and
 * their backward-shift deletions are exercised. */
static void test_random_against_array(void **state)
{
	struct o1_client_share *c;
	struct ref r[N_IDS];
	uint64_t x = 42;

	(void)state;
	assert_int_equal(o1_client_share_create(N_IDS, &c), 0);
	for (uint32_t i = 0; i < N_IDS; i++)
		r[i] = (struct ref){.id = (i % 64) | (i / 64) << 16};
	for (int step = 0; step < 200000; step++) {
		uint32_t i = rnd(&x) % N_IDS;

		random_op(c, r, i, rnd(&x) % 4);
		if (step % 997 == 0)
			check(c, r);
	}
	check(c, r);
	/* everything dropped: no client left */
	for (uint32_t i = 0; i < N_IDS; i++) {
		while (r[i].running--)
			o1_client_share_run(c, r[i].id, -1);
		while (r[i].held--)
			o1_client_share_drop(c, r[i].id);
	}
	assert_int_equal(o1_client_share_clients(c), 0);
	o1_client_share_destroy(c);
}

static void test_fair_and_pages(void **state)
{
	struct o1_client_share *c;

	(void)state;
	assert_int_equal(o1_client_share_create(4, &c), 0);
	assert_int_equal(o1_client_share_fair(c, 256), 256); /* nobody */
	o1_client_share_hold(c, 7);
	assert_int_equal(o1_client_share_fair(c, 256), 256);
	o1_client_share_hold(c, 9);
	o1_client_share_hold(c, 9);
	o1_client_share_hold(c, 11);
	assert_int_equal(o1_client_share_clients(c), 3);
	assert_int_equal(o1_client_share_fair(c, 256), 86); /* ceil */
	assert_int_equal(o1_client_share_fair(c, 1), 1);
	o1_client_share_clear_pages(c);
	o1_client_share_add_pages(c, 9, 5);
	o1_client_share_add_pages(c, 9, 2);
	o1_client_share_add_pages(c, 13, 4); /* holds nothing: ignored */
	assert_int_equal(o1_client_share_pages(c, 9), 7);
	assert_int_equal(o1_client_share_pages(c, 7), 0);
	assert_int_equal(o1_client_share_pages(c, 13), 0);
	o1_client_share_clear_pages(c);
	assert_int_equal(o1_client_share_pages(c, 9), 0);
	/* broken counts are refused, the counts stay */
	o1_client_share_run(c, 7, -1);
	o1_client_share_run(c, 7, 1);
	o1_client_share_run(c, 7, 1); /* holds one */
	assert_int_equal(o1_client_share_running(c, 7), 1);
	o1_client_share_drop(c, 13);
	o1_client_share_hold(c, 20);
	o1_client_share_hold(c, 21); /* a fifth client: over max_clients */
	assert_int_equal(o1_client_share_clients(c), 4);
	o1_client_share_destroy(c);
	o1_client_share_destroy(NULL);
	assert_int_not_equal(o1_client_share_create(0, &c), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_random_against_array),
	    cmocka_unit_test(test_fair_and_pages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

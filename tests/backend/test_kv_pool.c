/* KV pool: layout offsets, alloc/get/put refcounts, block tables growing
 * all-or-nothing, sharing, truncation, and every page free at the end;
 * the count of kept pages held by their keeper alone against a walk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <errno.h>

#include "common/error.h"
#include "backend/kv_pool.h"

static void test_layout(void **state)
{
	struct o1_kv_layout l = {10, 3, 2, 16, 8};
	uint64_t elems;

	(void)state;
	assert_int_equal(o1_kv_layout_check(&l, &elems), 0);
	assert_int_equal(o1_kv_layout_slice_elems(&l), 2 * 16 * 8);
	assert_int_equal(o1_kv_layout_page_elems(&l), 3 * 2 * 256);
	assert_int_equal(elems, 10 * 1536);
	/* page 4, layer 2, V: 4*1536 + (2*2+1)*256 */
	assert_int_equal(o1_kv_layout_offset(&l, 4, 2, 1), 4 * 1536 + 5 * 256);
	l.page_tokens = 0;
	assert_int_equal(o1_kv_layout_check(&l, &elems), -O1_E_CONFIG);
	l.page_tokens = 1, l.n_pages = 1u << 31, l.head_dim = 4096;
	l.n_layers = 4096;
	assert_int_equal(o1_kv_layout_check(&l, &elems), -O1_E_CONFIG);
}

static void test_refcounts(void **state)
{
	struct o1_kv_layout l = {3, 1, 1, 4, 2};
	struct o1_kv_pool *p;
	uint32_t a, b, c, d;

	(void)state;
	assert_int_equal(o1_kv_pool_create(&l, &p), 0);
	assert_int_equal(o1_kv_pool_alloc(p, &a), 0);
	assert_int_equal(o1_kv_pool_alloc(p, &b), 0);
	assert_int_equal(o1_kv_pool_alloc(p, &c), 0);
	assert_true(a != b && b != c && a != c && a < 3 && b < 3 && c < 3);
	assert_int_equal(o1_kv_pool_alloc(p, &d), -ENOSPC);
	assert_int_equal(o1_kv_pool_get(p, b), 0);
	assert_int_equal(o1_kv_pool_refs(p, b), 2);
	assert_int_equal(o1_kv_pool_put(p, b), 0);
	assert_int_equal(o1_kv_pool_free_pages(p), 0);
	assert_int_equal(o1_kv_pool_put(p, b), 0);
	assert_int_equal(o1_kv_pool_free_pages(p), 1);
	assert_int_equal(o1_kv_pool_put(p, b), -O1_E_BOUNDS);
	assert_int_equal(o1_kv_pool_get(p, b), -O1_E_BOUNDS);
	assert_int_equal(o1_kv_pool_get(p, 3), -O1_E_BOUNDS);
	assert_int_equal(o1_kv_pool_alloc(p, &d), 0);
	assert_int_equal(d, b); /* LIFO reuse */
	o1_kv_pool_destroy(p);
	o1_kv_pool_destroy(NULL);
}

/* Kept pages whose refcount is 1, the slow way (what the prefix cache
 * walked before the pool counted them). */
static uint32_t kept_idle_walk(const struct o1_kv_pool *p, const bool *kept,
			       uint32_t n)
{
	uint32_t idle = 0;

	for (uint32_t i = 0; i < n; i++)
		idle += kept[i] && o1_kv_pool_refs(p, i) == 1;
	return idle;
}

static void test_kept(void **state)
{
	enum { N = 8 };
	struct o1_kv_layout l = {N, 1, 1, 4, 2};
	struct o1_kv_pool *p;
	bool kept[N] = {false};
	uint32_t pg, seed = 12345;

	(void)state;
	assert_int_equal(o1_kv_pool_create(&l, &p), 0);
	assert_int_equal(o1_kv_pool_keep(p, 0, true), -O1_E_BOUNDS); /* free */
	assert_int_equal(o1_kv_pool_keep(p, N, true), -O1_E_BOUNDS);
	/* random gets, puts, keeps and unkeeps: the count follows the walk */
	for (int i = 0; i < 20000; i++) {
		uint32_t page, op;

		seed = seed * 1103515245u + 12345u;
		page = (seed >> 8) % N, op = (seed >> 20) % 5;
		if (op == 0) {
			if (o1_kv_pool_alloc(p, &pg) == 0)
				assert_false(kept[pg]);
		} else if (op == 1) {
			o1_kv_pool_get(p, page);
		} else if (op == 2 && o1_kv_pool_refs(p, page) &&
			   (!kept[page] || o1_kv_pool_refs(p, page) > 1)) {
			assert_int_equal(o1_kv_pool_put(p, page), 0);
		} else if (op == 3 && o1_kv_pool_refs(p, page)) {
			assert_int_equal(o1_kv_pool_keep(p, page, true), 0);
			kept[page] = true;
		} else if (op == 4 && o1_kv_pool_refs(p, page)) {
			assert_int_equal(o1_kv_pool_keep(p, page, false), 0);
			kept[page] = false;
		}
		assert_int_equal(o1_kv_pool_kept_idle(p),
				 kept_idle_walk(p, kept, N));
	}
	/* a kept page's last reference going unkeeps it */
	for (uint32_t i = 0; i < N; i++)
		while (o1_kv_pool_refs(p, i))
			assert_int_equal(o1_kv_pool_put(p, i), 0);
	assert_int_equal(o1_kv_pool_kept_idle(p), 0);
	assert_int_equal(o1_kv_pool_free_pages(p), N);
	assert_int_equal(o1_kv_pool_alloc(p, &pg), 0);
	assert_int_equal(o1_kv_pool_kept_idle(p), 0);
	o1_kv_pool_destroy(p);
}

static void test_tables(void **state)
{
	struct o1_kv_layout l = {5, 2, 1, 4, 2};
	struct o1_kv_pool *p;
	struct o1_block_table t1, t2;
	uint32_t s1[3], s2[4];

	(void)state;
	assert_int_equal(o1_kv_pool_create(&l, &p), 0);
	o1_kv_table_init(&t1, s1, 3);
	o1_kv_table_init(&t2, s2, 4);
	assert_int_equal(o1_kv_table_reserve(p, &t1, 1), 0);
	assert_int_equal(t1.n_pages, 1);
	assert_int_equal(o1_kv_table_reserve(p, &t1, 4), 0);
	assert_int_equal(t1.n_pages, 1);
	assert_int_equal(o1_kv_table_reserve(p, &t1, 9), 0);
	assert_int_equal(t1.n_pages, 3);
	assert_int_equal(o1_kv_table_reserve(p, &t1, 13), -O1_E_CONTEXT);
	assert_int_equal(t1.n_pages, 3);
	/* t2 shares t1's first page, then needs 3 more: only 2 are free */
	assert_int_equal(o1_kv_table_share(p, &t2, s1[0]), 0);
	assert_int_equal(o1_kv_pool_refs(p, s1[0]), 2);
	assert_int_equal(o1_kv_table_reserve(p, &t2, 16), -ENOSPC);
	assert_int_equal(t2.n_pages, 1);
	assert_int_equal(o1_kv_pool_free_pages(p), 2);
	assert_int_equal(o1_kv_table_reserve(p, &t2, 12), 0);
	assert_int_equal(o1_kv_pool_free_pages(p), 0);
	o1_kv_table_truncate(p, &t1, 5);
	assert_int_equal(t1.n_pages, 2);
	assert_int_equal(o1_kv_pool_free_pages(p), 1);
	o1_kv_table_fini(p, &t1);
	assert_int_equal(o1_kv_pool_refs(p, s2[0]), 1);
	o1_kv_table_fini(p, &t2);
	assert_int_equal(o1_kv_pool_free_pages(p), 5);
	o1_kv_pool_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_layout),
	    cmocka_unit_test(test_refcounts),
	    cmocka_unit_test(test_kept),
	    cmocka_unit_test(test_tables),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

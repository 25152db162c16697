/* o1_kv_budget (daemon/o1d/kv_budget.c): each bound decides when it
 * applies and names itself (kv.pages, the memory fraction, max_running
 * contexts, one context, the page-id range); checked against a second
 * statement of the rule over a sweep of inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "o1d/kv_budget.h"

#define MIB (1024ull * 1024)

static struct o1_kv_budget_in base(void)
{
	return (struct o1_kv_budget_in){
	    .memory_fraction = 0.5,
	    .avail_bytes = 1024 * MIB,
	    .page_bytes = MIB,	   /* 512 pages from memory */
	    .context_tokens = 4097, /* 257 pages of 16 */
	    .page_tokens = 16,
	    .max_running = 256,
	};
}

static void test_pages_set(void **st)
{
	struct o1_kv_budget_in in = base();
	struct o1_kv_budget b;

	(void)st;
	in.pages = 7; /* below one context: kv.pages is taken as asked */
	b = o1_kv_budget(&in);
	assert_int_equal(b.pages, 7);
	assert_int_equal(b.bound, O1_KV_BOUND_PAGES);
	assert_string_equal(o1_kv_bound_name(b.bound), "kv.pages");
}

static void test_memory(void **st)
{
	struct o1_kv_budget_in in = base();
	struct o1_kv_budget b = o1_kv_budget(&in);

	(void)st;
	assert_int_equal(b.pages, 512);
	assert_int_equal(b.per_context, 257);
	assert_int_equal(b.bound, O1_KV_BOUND_MEMORY);
	assert_string_equal(o1_kv_bound_name(b.bound), "kv.memory_fraction");
}

static void test_max_running(void **st)
{
	struct o1_kv_budget_in in = base();
	struct o1_kv_budget b;

	(void)st;
	in.max_running = 1; /* 257 pages is all one sequence can use */
	b = o1_kv_budget(&in);
	assert_int_equal(b.pages, 257);
	assert_int_equal(b.bound, O1_KV_BOUND_MAX_RUNNING);
}

static void test_one_context(void **st)
{
	struct o1_kv_budget_in in = base();
	struct o1_kv_budget b;

	(void)st;
	in.avail_bytes = 10 * MIB; /* 5 pages: raised to one context */
	b = o1_kv_budget(&in);
	assert_int_equal(b.pages, 257);
	assert_int_equal(b.bound, O1_KV_BOUND_ONE_CONTEXT);
}

static void test_page_ids(void **st)
{
	struct o1_kv_budget_in in = base();
	struct o1_kv_budget b;

	(void)st;
	in.page_bytes = 1;
	in.avail_bytes = 1ull << 40;
	in.max_running = 1u << 20;
	b = o1_kv_budget(&in);
	assert_int_equal(b.pages, O1_KV_MAX_PAGES);
	assert_int_equal(b.bound, O1_KV_BOUND_PAGE_IDS);
}

/* The rule stated again: pages = clamp(fraction * avail / page_bytes,
 * one context, max_running contexts), then at most 2^24; the bound is
 * the last clamp that changed the value. */
static void test_sweep(void **st)
{
	static const uint64_t avail[] = {0, MIB, 100 * MIB, 1ull << 34,
					 1ull << 44};
	static const uint32_t running[] = {1, 3, 256, 1u << 16};
	static const uint64_t ctx[] = {1, 17, 4097, 131073};

	(void)st;
	for (size_t a = 0; a < 5; a++)
		for (size_t r = 0; r < 4; r++)
			for (size_t c = 0; c < 4; c++) {
				struct o1_kv_budget_in in = base();
				struct o1_kv_budget b;
				uint64_t n, per = (ctx[c] + 15) / 16;
				enum o1_kv_bound want = O1_KV_BOUND_MEMORY;

				in.avail_bytes = avail[a];
				in.max_running = running[r];
				in.context_tokens = ctx[c];
				n = avail[a] / 2 / MIB;
				if (n > per * running[r])
					n = per * running[r],
					want = O1_KV_BOUND_MAX_RUNNING;
				if (n < per)
					n = per, want = O1_KV_BOUND_ONE_CONTEXT;
				if (n > O1_KV_MAX_PAGES)
					n = O1_KV_MAX_PAGES,
					want = O1_KV_BOUND_PAGE_IDS;
				b = o1_kv_budget(&in);
				assert_int_equal(b.pages, n);
				assert_int_equal(b.bound, want);
				assert_int_equal(b.per_context, per);
			}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pages_set),
	    cmocka_unit_test(test_memory),
	    cmocka_unit_test(test_max_running),
	    cmocka_unit_test(test_one_context),
	    cmocka_unit_test(test_page_ids),
	    cmocka_unit_test(test_sweep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

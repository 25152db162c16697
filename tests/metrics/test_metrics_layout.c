/* Metrics layout: the BTF built from the field tables matches the C structs
 * member by member; histogram slotting edge cases; quantile estimates
 * against exact percentiles; the inline writer helpers (anonymous backend)
 * and snapshot deltas. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bpf/btf.h>

#include "common/error.h"
#include "metrics/metrics_reader.h"
#include "metrics/metrics_writer.h"

struct want_member {
	const char *name;
	size_t off, size;
};

/* Checks that BTF type id is a struct named name of size sz whose members
 * are exactly want[0..n), in order, with their offsets and sizes. */
static void check_struct(const struct btf *btf, uint32_t id, const char *name,
			 size_t sz, const struct want_member *want, unsigned n)
{
	const struct btf_type *t = btf__type_by_id(btf, id);
	const struct btf_member *m;

	assert_non_null(t);
	assert_true(btf_is_struct(t));
	assert_string_equal(btf__name_by_offset(btf, t->name_off), name);
	assert_int_equal(t->size, sz);
	assert_int_equal(btf_vlen(t), n);
	m = btf_members(t);
	for (unsigned i = 0; i < n; i++, m++) {
		assert_string_equal(btf__name_by_offset(btf, m->name_off),
				    want[i].name);
		assert_int_equal(btf_member_bit_offset(t, i), want[i].off * 8);
		assert_int_equal(btf__resolve_size(btf, m->type), want[i].size);
	}
}

#define MEMBER(s, f)                                                           \
	{                                                                      \
#f, offsetof(s, f), sizeof(((s *)0)->f)                        \
	}

static void test_btf_counters_info(void **state)
{
	static const struct want_member info[] = {
	    MEMBER(struct o1_metrics_info, magic),
	    MEMBER(struct o1_metrics_info, version),
	    MEMBER(struct o1_metrics_info, backend),
	    MEMBER(struct o1_metrics_info, n_counters),
	    MEMBER(struct o1_metrics_info, n_hists),
	    MEMBER(struct o1_metrics_info, hist_slots),
	    MEMBER(struct o1_metrics_info, graph_buckets),
	    MEMBER(struct o1_metrics_info, graph_spans),
	    MEMBER(struct o1_metrics_info, pid),
	    MEMBER(struct o1_metrics_info, start_unix_ns),
	};
	static const struct want_member ctr[] = {
	    MEMBER(struct o1_metrics_counters, requests_submitted),
	    MEMBER(struct o1_metrics_counters, requests_completed),
	    MEMBER(struct o1_metrics_counters, requests_cancelled),
	    MEMBER(struct o1_metrics_counters, failed_invalid),
	    MEMBER(struct o1_metrics_counters, failed_context),
	    MEMBER(struct o1_metrics_counters, failed_quota),
	    MEMBER(struct o1_metrics_counters, failed_tokenizer),
	    MEMBER(struct o1_metrics_counters, failed_draining),
	    MEMBER(struct o1_metrics_counters, failed_engine),
	    MEMBER(struct o1_metrics_counters, failed_internal),
	    MEMBER(struct o1_metrics_counters, requests_running),
	    MEMBER(struct o1_metrics_counters, requests_waiting),
	    MEMBER(struct o1_metrics_counters, tokens_prompt),
	    MEMBER(struct o1_metrics_counters, tokens_generated),
	    MEMBER(struct o1_metrics_counters, prefix_hits),
	    MEMBER(struct o1_metrics_counters, prefix_misses),
	    MEMBER(struct o1_metrics_counters, preemptions),
	    MEMBER(struct o1_metrics_counters, kv_pages_total),
	    MEMBER(struct o1_metrics_counters, kv_pages_used),
	    MEMBER(struct o1_metrics_counters, kv_pages_cached),
	    MEMBER(struct o1_metrics_counters, clients_connected),
	    MEMBER(struct o1_metrics_counters, client_connects),
	    MEMBER(struct o1_metrics_counters, client_deaths),
	    MEMBER(struct o1_metrics_counters, protocol_violations),
	    MEMBER(struct o1_metrics_counters, wake_spin_hits),
	    MEMBER(struct o1_metrics_counters, wake_sleeps),
	    MEMBER(struct o1_metrics_counters, steps),
	};
	uint32_t key, ids[O1_METRICS_R__COUNT];
	struct btf *btf;
	const struct btf_type *k;

	(void)state;
	assert_int_equal(o1_metrics_btf_build(&btf, &key, ids), 0);
	k = btf__type_by_id(btf, key);
	assert_true(btf_is_int(k));
	assert_int_equal(k->size, 4);
	check_struct(btf, ids[O1_METRICS_R_INFO], "o1_metrics_info",
		     sizeof(struct o1_metrics_info), info,
		     sizeof(info) / sizeof(info[0]));
	check_struct(btf, ids[O1_METRICS_R_COUNTERS], "o1_metrics_counters",
		     sizeof(struct o1_metrics_counters), ctr,
		     sizeof(ctr) / sizeof(ctr[0]));
	assert_int_equal(sizeof(ctr) / sizeof(ctr[0]), O1_METRICS_CTR__COUNT);
	btf__free(btf);
}

static void test_btf_hists_graphs(void **state)
{
	static const struct want_member hists[] = {
	    MEMBER(struct o1_metrics_hists, queue_wait),
	    MEMBER(struct o1_metrics_hists, ttft),
	    MEMBER(struct o1_metrics_hists, itl),
	    MEMBER(struct o1_metrics_hists, e2e),
	    MEMBER(struct o1_metrics_hists, step),
	    MEMBER(struct o1_metrics_hists, wakeup),
	};
	static const struct want_member hist[] = {
	    MEMBER(struct o1_metrics_hist, count),
	    MEMBER(struct o1_metrics_hist, sum_us),
	    MEMBER(struct o1_metrics_hist, max_us),
	    MEMBER(struct o1_metrics_hist, slots),
	};
	static const struct want_member graphs[] = {
	    MEMBER(struct o1_metrics_graphs, n_buckets),
	    MEMBER(struct o1_metrics_graphs, oversize),
	    MEMBER(struct o1_metrics_graphs, capture_us),
	    MEMBER(struct o1_metrics_graphs, capture_bytes),
	    MEMBER(struct o1_metrics_graphs, buckets),
	    MEMBER(struct o1_metrics_graphs, n_spans),
	    MEMBER(struct o1_metrics_graphs, spans),
	};
	static const struct want_member bucket[] = {
	    MEMBER(struct o1_metrics_graph_bucket, batch_size),
	    MEMBER(struct o1_metrics_graph_bucket, hits),
	    MEMBER(struct o1_metrics_graph_bucket, misses),
	    MEMBER(struct o1_metrics_graph_bucket, fallbacks),
	    MEMBER(struct o1_metrics_graph_bucket, padded_tokens),
	};
	static const struct want_member span[] = {
	    MEMBER(struct o1_metrics_graph_span, context_len),
	    MEMBER(struct o1_metrics_graph_span, steps),
	};
	uint32_t key, ids[O1_METRICS_R__COUNT];
	const struct btf_type *t, *arr;
	struct btf *btf;

	(void)state;
	assert_int_equal(o1_metrics_btf_build(&btf, &key, ids), 0);
	check_struct(btf, ids[O1_METRICS_R_HISTS], "o1_metrics_hists",
		     sizeof(struct o1_metrics_hists), hists, 6);
	assert_int_equal(O1_METRICS_HIST__COUNT, 6);
	t = btf__type_by_id(btf, ids[O1_METRICS_R_HISTS]);
	check_struct(btf, btf_members(t)[0].type, "o1_metrics_hist",
		     sizeof(struct o1_metrics_hist), hist, 4);
	check_struct(btf, ids[O1_METRICS_R_GRAPHS], "o1_metrics_graphs",
		     sizeof(struct o1_metrics_graphs), graphs, 7);
	/* the arrays' elements: members 4 (buckets) and 6 (spans) */
	t = btf__type_by_id(btf, ids[O1_METRICS_R_GRAPHS]);
	arr = btf__type_by_id(btf, btf_members(t)[4].type);
	assert_true(btf_is_array(arr));
	assert_int_equal(btf_array(arr)->nelems, O1_METRICS_GRAPH_BUCKETS);
	check_struct(btf, btf_array(arr)->type, "o1_metrics_graph_bucket",
		     sizeof(struct o1_metrics_graph_bucket), bucket, 5);
	arr = btf__type_by_id(btf, btf_members(t)[6].type);
	assert_true(btf_is_array(arr));
	assert_int_equal(btf_array(arr)->nelems, O1_METRICS_GRAPH_SPANS);
	check_struct(btf, btf_array(arr)->type, "o1_metrics_graph_span",
		     sizeof(struct o1_metrics_graph_span), span, 2);
	btf__free(btf);
}

static void test_region_geometry(void **state)
{
	(void)state;
	for (unsigned r = 0; r < O1_METRICS_R__COUNT; r++) {
		assert_true(strlen(o1_metrics_region_name(r)) <= 15);
		assert_int_equal(
		    o1_metrics_region_offset(r) % O1_METRICS_SHM_ALIGN, 0);
		assert_true(o1_metrics_region_offset(r) +
				o1_metrics_region_size(r) <=
			    o1_metrics_file_size());
	}
	assert_string_equal(o1_metrics_region_name(O1_METRICS_R_COUNTERS),
			    "o1_counters");
}

static void test_hist_slot(void **state)
{
	(void)state;
	assert_int_equal(o1_metrics_hist_slot(0), 0);
	assert_int_equal(o1_metrics_hist_slot(1), 0);
	assert_int_equal(o1_metrics_hist_slot(2), 1);
	assert_int_equal(o1_metrics_hist_slot(3), 1);
	assert_int_equal(o1_metrics_hist_slot(4), 2);
	for (unsigned k = 1; k < O1_METRICS_HIST_SLOTS; k++) {
		assert_int_equal(o1_metrics_hist_slot((uint64_t)1 << k), k);
		assert_int_equal(o1_metrics_hist_slot(((uint64_t)1 << k) - 1),
				 k - 1);
		assert_int_equal(o1_metrics_hist_slot_low(k), (uint64_t)1 << k);
	}
	assert_int_equal(o1_metrics_hist_slot((uint64_t)1 << 31), 31);
	assert_int_equal(o1_metrics_hist_slot((uint64_t)1 << 40), 31);
	assert_int_equal(o1_metrics_hist_slot(UINT64_MAX), 31);
	assert_int_equal(o1_metrics_hist_slot_low(0), 0);
}

static void test_quantile_exact(void **state)
{
	struct o1_metrics_hist h = {0};
	double v;

	(void)state;
	assert_int_equal(o1_metrics_hist_quantile_us(&h, 0.5, &v), -ENODATA);
	h.slots[0] = 1;
	h.slots[1] = 1;
	assert_int_equal(o1_metrics_hist_quantile_us(&h, 1.5, &v), -EINVAL);
	assert_int_equal(o1_metrics_hist_quantile_us(&h, -0.1, &v), -EINVAL);
	/* rank 1 ends slot 0 = [0, 2); rank 2 ends slot 1 = [2, 4) */
	assert_int_equal(o1_metrics_hist_quantile_us(&h, 0.5, &v), 0);
	assert_float_equal(v, 2.0, 1e-9);
	assert_int_equal(o1_metrics_hist_quantile_us(&h, 1.0, &v), 0);
	assert_float_equal(v, 4.0, 1e-9);
	assert_int_equal(o1_metrics_hist_quantile_us(&h, 0.0, &v), 0);
	assert_float_equal(v, 2.0, 1e-9);
	memset(&h, 0, sizeof(h));
	h.slots[9] = 4; /* four values in [512, 1024) */
	assert_int_equal(o1_metrics_hist_quantile_us(&h, 0.5, &v), 0);
	assert_float_equal(v, 768.0, 1e-9);
	h.slots[O1_METRICS_HIST_SLOTS - 1] = 4;
	assert_int_equal(o1_metrics_hist_quantile_us(&h, 1.0, &v), 0);
	assert_float_equal(v, 4294967296.0, 1e-3);
}

/* A quantile is never above the largest value observed: the quick
 * start's p99 TTFT of "2013 ms" when the slowest request took 1.5 s (a
 * loaded 2-CPU machine) is 1500 at most, and its range says so. */
static void test_quantile_max(void **state)
{
	struct o1_metrics_hist h = {0};
	struct o1_metrics_quantile e;
	double v;

	(void)state;
	h.slots[19] = 97;	/* [0.52 s, 1.05 s) */
	h.slots[20] = 3;	/* [1.05 s, 2.1 s): 1.1 to 1.5 s */
	h.max_us = 1500000;
	assert_int_equal(o1_metrics_hist_quantile(&h, 0.99, &e), 0);
	assert_true(e.value_us <= 1500000.0);
	assert_true(e.value_us >= 1048576.0);
	assert_true(e.clamped);
	assert_float_equal(e.lo_us, 1048576.0, 1e-9);
	assert_float_equal(e.hi_us, 1500000.0, 1e-9);
	assert_int_equal(o1_metrics_hist_quantile_us(&h, 1.0, &v), 0);
	assert_float_equal(v, 1500000.0, 1e-6);
	/* a max below the slot (another window's) bounds nothing */
	h.max_us = 1000;
	assert_int_equal(o1_metrics_hist_quantile(&h, 0.99, &e), 0);
	assert_false(e.clamped);
	assert_float_equal(e.hi_us, 2097152.0, 1e-9);
	/* no max recorded: the slot's bounds */
	h.max_us = 0;
	assert_int_equal(o1_metrics_hist_quantile(&h, 1.0, &e), 0);
	assert_float_equal(e.value_us, 2097152.0, 1e-9);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Log-uniform samples >= 2: each estimate lies within the slot of the exact
 * percentile, so within a factor of two of it. */
static void test_quantile_vs_exact(void **state)
{
	static const double qs[] = {0.01, 0.25, 0.5, 0.9, 0.99, 0.999};
	enum { N = 20000 };
	uint64_t *vals = malloc(N * sizeof(*vals));
	struct o1_metrics_hist h = {0};
	double prev = 0, v, exact, lo;

	(void)state;
	srand(12345);
	for (unsigned i = 0; i < N; i++) {
		vals[i] = (uint64_t)2 << (rand() % 23);
		vals[i] += (uint64_t)rand() % vals[i];
		h.slots[o1_metrics_hist_slot(vals[i])]++;
	}
	qsort(vals, N, sizeof(*vals), cmp_u64);
	for (unsigned i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		assert_int_equal(o1_metrics_hist_quantile_us(&h, qs[i], &v), 0);
		exact = (double)vals[(size_t)(qs[i] * N) - 1];
		assert_true(v >= exact / 2 && v <= exact * 2);
		lo = (double)o1_metrics_hist_slot_low(
		    o1_metrics_hist_slot((uint64_t)exact));
		assert_true(v >= lo && v <= 2 * lo);
		assert_true(v >= prev);
		prev = v;
	}
	free(vals);
}

static void test_writer_helpers(void **state)
{
	struct o1_metrics_opts opts = {.sz = sizeof(opts),
				       .mode = O1_METRICS_MODE_ANON};
	static const uint32_t sizes[] = {1, 2, 4, 8};
	static const uint32_t lens[] = {1024, 4096, 8192};
	uint32_t many[O1_METRICS_GRAPH_BUCKETS + 1] = {0};
	struct o1_metrics *m;

	(void)state;
	assert_int_equal(o1_metrics_open(&opts, &m), 0);
	assert_int_equal(m->info->magic, O1_METRICS_MAGIC);
	assert_int_equal(m->info->backend, O1_METRICS_BACKEND_ANON);
	o1_metrics_add(m, O1_METRICS_CTR_STEPS, 3);
	o1_metrics_add(m, O1_METRICS_CTR_STEPS, 4);
	assert_int_equal(m->ctr->steps, 7);
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_USED, 10);
	o1_metrics_set(m, O1_METRICS_CTR_KV_PAGES_USED, 6);
	assert_int_equal(m->ctr->kv_pages_used, 6);
	o1_metrics_fail(m, o1_metrics_fail_reason(-O1_E_CONTEXT));
	o1_metrics_fail(m, o1_metrics_fail_reason(-O1_E_QUOTA));
	o1_metrics_fail(m, o1_metrics_fail_reason(-EIO));
	o1_metrics_fail(m, (enum o1_metrics_fail)99);
	assert_int_equal(m->ctr->failed_context, 1);
	assert_int_equal(m->ctr->failed_quota, 1);
	assert_int_equal(m->ctr->failed_internal, 2);
	o1_metrics_observe_us(m, O1_METRICS_HIST_TTFT, 0);
	o1_metrics_observe_us(m, O1_METRICS_HIST_TTFT, 1500);
	assert_int_equal(m->hist->ttft.count, 2);
	assert_int_equal(m->hist->ttft.sum_us, 1500);
	assert_int_equal(m->hist->ttft.max_us, 1500);
	o1_metrics_observe_us(m, O1_METRICS_HIST_ITL, 700);
	o1_metrics_observe_us(m, O1_METRICS_HIST_ITL, 300);
	assert_int_equal(m->hist->itl.max_us, 700);
	assert_int_equal(m->hist->ttft.slots[0], 1);
	assert_int_equal(m->hist->ttft.slots[10], 1);
	assert_int_equal(m->hist->queue_wait.count, 0);
	assert_int_equal(
	    o1_metrics_graph_set_buckets(m, many, O1_METRICS_GRAPH_BUCKETS + 1),
	    -EINVAL);
	assert_int_equal(o1_metrics_graph_set_buckets(m, sizes, 4), 0);
	o1_metrics_graph_hit(m, 2, 1);
	o1_metrics_graph_hit(m, 2, 2);
	o1_metrics_graph_miss(m, 3);
	o1_metrics_graph_fallback(m, 0);
	o1_metrics_graph_hit(m, O1_METRICS_GRAPH_BUCKETS, 5);
	o1_metrics_graph_oversize(m);
	o1_metrics_graph_capture(m, 1000, 4096);
	assert_int_equal(m->graphs->n_buckets, 4);
	assert_int_equal(m->graphs->buckets[2].batch_size, 4);
	assert_int_equal(m->graphs->buckets[2].hits, 2);
	assert_int_equal(m->graphs->buckets[2].padded_tokens, 3);
	assert_int_equal(m->graphs->buckets[3].misses, 1);
	assert_int_equal(m->graphs->buckets[0].fallbacks, 1);
	assert_int_equal(m->graphs->oversize, 1);
	assert_int_equal(m->graphs->capture_bytes, 4096);
	/* context spans: set once, steps added by span, past the table
	 * ignored */
	assert_int_equal(
	    o1_metrics_graph_set_spans(m, many, O1_METRICS_GRAPH_SPANS + 1),
	    -EINVAL);
	assert_int_equal(m->graphs->n_spans, 0);
	assert_int_equal(o1_metrics_graph_set_spans(m, lens, 3), 0);
	o1_metrics_graph_add_span(m, 0, 5);
	o1_metrics_graph_add_span(m, 2, 7);
	o1_metrics_graph_add_span(m, 2, 1);
	o1_metrics_graph_add_span(m, O1_METRICS_GRAPH_SPANS, 9);
	assert_int_equal(m->graphs->n_spans, 3);
	assert_int_equal(m->graphs->spans[1].context_len, 4096);
	assert_int_equal(m->graphs->spans[3].context_len, 0);
	assert_int_equal(m->graphs->spans[0].steps, 5);
	assert_int_equal(m->graphs->spans[1].steps, 0);
	assert_int_equal(m->graphs->spans[2].steps, 8);
	o1_metrics_close(m);
	o1_metrics_close(NULL);
}

static void test_snapshot_delta(void **state)
{
	static struct o1_metrics_snapshot a, b, d;

	(void)state;
	a.ctr.steps = 10;
	b.ctr.steps = 25;
	a.ctr.kv_pages_used = 40;
	b.ctr.kv_pages_used = 30;
	a.ctr.tokens_generated = 500; /* daemon restarted: counts anew */
	b.ctr.tokens_generated = 20;
	a.hist.step.slots[3] = 2;
	b.hist.step.slots[3] = 7;
	b.graphs.buckets[1].batch_size = 2;
	a.graphs.buckets[1].hits = 1;
	b.graphs.buckets[1].hits = 4;
	b.graphs.spans[2].context_len = 8192;
	a.graphs.spans[2].steps = 6;
	b.graphs.spans[2].steps = 10;
	o1_metrics_snapshot_delta(&a, &b, &d);
	assert_int_equal(d.ctr.steps, 15);
	assert_int_equal(d.ctr.kv_pages_used, 30);
	assert_int_equal(d.ctr.tokens_generated, 20);
	assert_int_equal(d.hist.step.slots[3], 5);
	assert_int_equal(d.graphs.buckets[1].hits, 3);
	assert_int_equal(d.graphs.buckets[1].batch_size, 2);
	assert_int_equal(d.graphs.spans[2].steps, 4);
	assert_int_equal(d.graphs.spans[2].context_len, 8192);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_btf_counters_info),
	    cmocka_unit_test(test_btf_hists_graphs),
	    cmocka_unit_test(test_region_geometry),
	    cmocka_unit_test(test_hist_slot),
	    cmocka_unit_test(test_quantile_exact),
	    cmocka_unit_test(test_quantile_vs_exact),
	    cmocka_unit_test(test_quantile_max),
	    cmocka_unit_test(test_writer_helpers),
	    cmocka_unit_test(test_snapshot_delta),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The KV page budget (kv_budget.h): the first bound that applies wins, in
 * the order kv.pages, the page-id range, one full context, max_running
 * contexts, the memory fraction. */
#include "o1d/kv_budget.h"

struct o1_kv_budget o1_kv_budget(const struct o1_kv_budget_in *in)
{
	uint64_t P = in->page_tokens ? in->page_tokens : 1;
	uint64_t per_ctx = (in->context_tokens + P - 1) / P;
	uint64_t cap = per_ctx * in->max_running, n = 0;
	struct o1_kv_budget b = {0, O1_KV_BOUND_MEMORY, per_ctx};

	if (in->pages) {
		b.pages = in->pages;
		b.bound = O1_KV_BOUND_PAGES;
		return b;
	}
	if (in->page_bytes)
		n = (uint64_t)(in->memory_fraction * (double)in->avail_bytes) /
		    in->page_bytes;
	if (n > cap) {
		n = cap;
		b.bound = O1_KV_BOUND_MAX_RUNNING;
	}
	if (n < per_ctx) {
		n = per_ctx;
		b.bound = O1_KV_BOUND_ONE_CONTEXT;
	}
	if (n > O1_KV_MAX_PAGES) {
		n = O1_KV_MAX_PAGES;
		b.bound = O1_KV_BOUND_PAGE_IDS;
	}
	b.pages = (uint32_t)n;
	return b;
}

const char *o1_kv_bound_name(enum o1_kv_bound bound)
{
	switch (bound) {
	case O1_KV_BOUND_PAGES:
		return "kv.pages";
	case O1_KV_BOUND_MEMORY:
		return "kv.memory_fraction";
	case O1_KV_BOUND_MAX_RUNNING:
		return "scheduler.max_running";
	case O1_KV_BOUND_ONE_CONTEXT:
		return "one full context";
	case O1_KV_BOUND_PAGE_IDS:
		return "the page-id range (2^24)";
	}
	return "?";
}

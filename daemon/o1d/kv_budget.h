/* How many KV pages o1d asks its backend for, and which bound decided it:
 * kv.pages when set; else kv.memory_fraction of the memory left after
 * the weights, but no more than max_running full contexts need, no fewer
 * than one full context, and at most 2^24 pages (the page ids' range).
 * Pure arithmetic, so the start-up line can say the real cap and a test
 * can check every bound without memory of that size. */
#ifndef O1_KV_BUDGET_H
#define O1_KV_BUDGET_H

#include <stdint.h>

enum o1_kv_bound {
	O1_KV_BOUND_PAGES,	  /* kv.pages set */
	O1_KV_BOUND_MEMORY,	  /* kv.memory_fraction of what is left */
	O1_KV_BOUND_MAX_RUNNING,  /* max_running full contexts */
	O1_KV_BOUND_ONE_CONTEXT,  /* raised to one full context */
	O1_KV_BOUND_PAGE_IDS,	  /* 2^24 pages */
};

struct o1_kv_budget_in {
	uint32_t pages;		 /* kv.pages, 0 = derive */
	double memory_fraction;	 /* kv.memory_fraction */
	uint64_t avail_bytes;	 /* memory left after the weights */
	uint64_t page_bytes;	 /* one page across all layers, > 0 */
	uint64_t context_tokens; /* a full context, in tokens */
	uint32_t page_tokens;	 /* kv.page_tokens, > 0 */
	uint32_t max_running;	 /* sequences that can run at once */
};

struct o1_kv_budget {
	uint32_t pages;
	enum o1_kv_bound bound;
	uint64_t per_context; /* pages one full context needs */
};

#define O1_KV_MAX_PAGES (1u << 24)

struct o1_kv_budget o1_kv_budget(const struct o1_kv_budget_in *in);

/* "kv.memory_fraction", "scheduler.max_running", ...: the setting (or
 * limit) that BOUND names, for the start-up line. */
const char *o1_kv_bound_name(enum o1_kv_bound bound);

#endif

/* The paged KV cache: its memory layout (the contract every backend keeps)
 * and the page allocator with per-sequence block tables.
 *
 * Layout. One allocation of n_pages pages, each holding page_tokens token
 * positions for every layer, K then V:
 *   pool [page][layer][kv: 0 = K, 1 = V][kv_head][slot][head_dim]
 * so element (page, layer, kv, h, slot, d) is at
 *   page * page_elems + ((layer * 2 + kv) * Hkv + h) * P * D + slot * D + d
 * with P = page_tokens, D = head_dim and page_elems = n_layers * 2 * Hkv * P
 * * D (o1_kv_layout_offset gives the first two terms). A page is therefore
 * one contiguous block: copying, swapping or sharing a page moves one
 * range. For the kernels (kernels/attention.h) a layer's K is the pointer
 * pool + o1_kv_layout_offset(l, 0, layer, 0) with page_stride = page_elems.
 * The CPU backend stores f32; the CUDA backend keeps the same indices with
 * its own element type.
 *
 * Allocator. The pool hands out page ids in [0, n_pages) with a reference
 * count each (alloc gives 1; get/put for prefix sharing; the page is free
 * again when the count drops to 0). A block table maps a sequence's
 * logical page i (positions i*P .. i*P+P-1) to a page id; its storage
 * belongs to the caller (init/fini), so nothing here allocates after
 * create. The allocator is not thread-safe: one owner (the engine loop)
 * calls it. It never touches page contents.
 */
#ifndef O1_KV_POOL_H
#define O1_KV_POOL_H

#include <stdbool.h>
#include <stdint.h>

struct o1_kv_layout {
	uint32_t n_pages;
	uint32_t n_layers;
	uint32_t n_kv_heads;
	uint32_t page_tokens; /* P, >= 1 (default 16) */
	uint32_t head_dim;
};

#define O1_KV_PAGE_TOKENS_DEFAULT 16

/* Elements of one (layer, K or V) slice of a page: Hkv * P * D. */
static inline uint64_t o1_kv_layout_slice_elems(const struct o1_kv_layout *l)
{
	return (uint64_t)l->n_kv_heads * l->page_tokens * l->head_dim;
}

/* Elements of one page: n_layers * 2 slices. */
static inline uint64_t o1_kv_layout_page_elems(const struct o1_kv_layout *l)
{
	return (uint64_t)l->n_layers * 2 * o1_kv_layout_slice_elems(l);
}

/* Offset in elements of (PAGE, LAYER, KV) in the pool. */
static inline uint64_t o1_kv_layout_offset(const struct o1_kv_layout *l,
					   uint32_t page, uint32_t layer,
					   uint32_t kv)
{
	return page * o1_kv_layout_page_elems(l) +
	       ((uint64_t)layer * 2 + kv) * o1_kv_layout_slice_elems(l);
}

/* Checks every field is non-zero and the pool's size in elements fits in
 * 2^48; returns 0 or -O1_E_CONFIG (logged). *ELEMS gets the total. */
int o1_kv_layout_check(const struct o1_kv_layout *l, uint64_t *elems);

struct o1_kv_pool;

int o1_kv_pool_create(const struct o1_kv_layout *layout,
		      struct o1_kv_pool **out);
void o1_kv_pool_destroy(struct o1_kv_pool *pool);
const struct o1_kv_layout *o1_kv_pool_layout(const struct o1_kv_pool *pool);
uint32_t o1_kv_pool_free_pages(const struct o1_kv_pool *pool);
/* Takes a free page (refcount 1); -ENOSPC when none is left. */
int o1_kv_pool_alloc(struct o1_kv_pool *pool, uint32_t *page);
/* Adds a reference to an allocated page; -O1_E_BOUNDS for a free or
 * out-of-range page (logged). */
int o1_kv_pool_get(struct o1_kv_pool *pool, uint32_t page);
/* Drops a reference; the page is free at 0. -O1_E_BOUNDS as for get. */
int o1_kv_pool_put(struct o1_kv_pool *pool, uint32_t page);
/* Reference count of PAGE (0 = free or out of range). */
uint32_t o1_kv_pool_refs(const struct o1_kv_pool *pool, uint32_t page);
/* Marks a held PAGE as kept (KEEP true) by one holder, the prefix cache,
 * whose reference it is until unmarked (the holder unmarks before it
 * drops that reference), or unmarks it. -O1_E_BOUNDS as for get. */
int o1_kv_pool_keep(struct o1_kv_pool *pool, uint32_t page, bool keep);
/* Kept pages whose only reference is the keeper's (what the keeper could
 * free now), counted as references change: O(1), where walking the kept
 * pages costs a cache miss each. */
uint32_t o1_kv_pool_kept_idle(const struct o1_kv_pool *pool);

struct o1_block_table {
	uint32_t *pages;   /* borrowed from the caller, capacity entries */
	uint32_t n_pages;  /* pages in use, logical order */
	uint32_t capacity; /* max pages: max context / P rounded up */
};

void o1_kv_table_init(struct o1_block_table *t, uint32_t *storage,
		      uint32_t capacity);
/* Grows T until it covers positions [0, N_TOKENS). All or nothing:
 * -ENOSPC (pool exhausted) or -O1_E_CONTEXT (past capacity) leave T as it
 * was. */
int o1_kv_table_reserve(struct o1_kv_pool *pool, struct o1_block_table *t,
			uint32_t n_tokens);
/* Appends a page that another table holds (prefix sharing): takes a
 * reference. */
int o1_kv_table_share(struct o1_kv_pool *pool, struct o1_block_table *t,
		      uint32_t page);
/* Keeps only the pages covering [0, N_TOKENS), releasing the rest. */
void o1_kv_table_truncate(struct o1_kv_pool *pool, struct o1_block_table *t,
			  uint32_t n_tokens);
/* Releases every page; T is empty (and may be reused) afterwards. */
void o1_kv_table_fini(struct o1_kv_pool *pool, struct o1_block_table *t);

#endif

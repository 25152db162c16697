/* KV page allocator: a LIFO stack of free page ids and a refcount per page.
 * Invariant: a page is on the free stack exactly when its refcount is 0;
 * n_free counts the stack. Block tables only ever hold pages with a
 * refcount they own. A kept page (o1_kv_pool_keep) is held (refcount >=
 * 1); n_kept_idle counts the kept pages whose refcount is 1. */
#include "kv_pool.h"

#include <errno.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/log.h"

struct o1_kv_pool {
	struct o1_kv_layout layout;
	uint32_t n_free;
	uint32_t *free_stack; /* n_pages entries, top at n_free - 1 */
	uint32_t *refs;	      /* n_pages */
	bool *kept;	      /* n_pages */
	uint32_t n_kept_idle;
};

int o1_kv_layout_check(const struct o1_kv_layout *l, uint64_t *elems)
{
	uint64_t page;

	if (!l->n_pages || !l->n_layers || !l->n_kv_heads || !l->page_tokens ||
	    !l->head_dim || l->page_tokens > 1u << 16 || l->n_layers > 4096 ||
	    l->n_kv_heads > 4096 || l->head_dim > 4096)
		goto bad;
	page = o1_kv_layout_page_elems(l);
	if (page > (1ull << 48) / l->n_pages)
		goto bad;
	*elems = page * l->n_pages;
	return 0;
bad:
	o1_err("kv pool: bad layout: pages %u layers %u kv_heads %u "
	       "page_tokens %u head_dim %u",
	       l->n_pages, l->n_layers, l->n_kv_heads, l->page_tokens,
	       l->head_dim);
	return -O1_E_CONFIG;
}

int o1_kv_pool_create(const struct o1_kv_layout *layout,
		      struct o1_kv_pool **out)
{
	struct o1_kv_pool *p;
	uint64_t elems;
	int err = o1_kv_layout_check(layout, &elems);

	if (err)
		return err;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->layout = *layout;
	p->free_stack = malloc(layout->n_pages * sizeof(uint32_t));
	p->refs = calloc(layout->n_pages, sizeof(uint32_t));
	p->kept = calloc(layout->n_pages, sizeof(bool));
	if (!p->free_stack || !p->refs || !p->kept) {
		o1_kv_pool_destroy(p);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < layout->n_pages; i++)
		p->free_stack[i] = layout->n_pages - 1 - i;
	p->n_free = layout->n_pages;
	*out = p;
	return 0;
}

void o1_kv_pool_destroy(struct o1_kv_pool *p)
{
	if (!p)
		return;
	free(p->free_stack);
	free(p->refs);
	free(p->kept);
	free(p);
}

const struct o1_kv_layout *o1_kv_pool_layout(const struct o1_kv_pool *p)
{
	return &p->layout;
}

uint32_t o1_kv_pool_free_pages(const struct o1_kv_pool *p)
{
	return p->n_free;
}

int o1_kv_pool_alloc(struct o1_kv_pool *p, uint32_t *page)
{
	if (!p->n_free)
		return -ENOSPC;
	*page = p->free_stack[--p->n_free];
	p->refs[*page] = 1;
	return 0;
}

static int check_held(const struct o1_kv_pool *p, uint32_t page, const char *op)
{
	if (page < p->layout.n_pages && p->refs[page])
		return 0;
	o1_err("kv pool: %s of page %u, which is %s", op, page,
	       page < p->layout.n_pages ? "free" : "out of range");
	return -O1_E_BOUNDS;
}

int o1_kv_pool_get(struct o1_kv_pool *p, uint32_t page)
{
	int err = check_held(p, page, "get");

	if (err)
		return err;
	if (p->kept[page] && p->refs[page] == 1)
		p->n_kept_idle--;
	p->refs[page]++;
	return 0;
}

int o1_kv_pool_put(struct o1_kv_pool *p, uint32_t page)
{
	int err = check_held(p, page, "put");

	if (err)
		return err;
	if (p->kept[page] && p->refs[page] <= 2)
		p->n_kept_idle += p->refs[page] == 2 ? 1u : -1u;
	if (--p->refs[page] == 0) {
		p->kept[page] = false; /* the keeper's reference went */
		p->free_stack[p->n_free++] = page;
	}
	return 0;
}

uint32_t o1_kv_pool_refs(const struct o1_kv_pool *p, uint32_t page)
{
	return page < p->layout.n_pages ? p->refs[page] : 0;
}

int o1_kv_pool_keep(struct o1_kv_pool *p, uint32_t page, bool keep)
{
	int err = check_held(p, page, keep ? "keep" : "unkeep");

	if (err || p->kept[page] == keep)
		return err;
	p->kept[page] = keep;
	if (p->refs[page] == 1)
		p->n_kept_idle += keep ? 1u : -1u;
	return 0;
}

uint32_t o1_kv_pool_kept_idle(const struct o1_kv_pool *p)
{
	return p->n_kept_idle;
}

void o1_kv_table_init(struct o1_block_table *t, uint32_t *storage,
		      uint32_t capacity)
{
	t->pages = storage;
	t->n_pages = 0;
	t->capacity = capacity;
}

int o1_kv_table_reserve(struct o1_kv_pool *p, struct o1_block_table *t,
			uint32_t n_tokens)
{
	uint32_t need =
	    (uint32_t)(((uint64_t)n_tokens + p->layout.page_tokens - 1) /
		       p->layout.page_tokens);
	uint32_t had = t->n_pages;

	if (need <= had)
		return 0;
	if (need > t->capacity) {
		o1_err("kv pool: %u tokens need %u pages, the block table "
		       "holds %u",
		       n_tokens, need, t->capacity);
		return -O1_E_CONTEXT;
	}
	if (need - had > p->n_free)
		return -ENOSPC;
	while (t->n_pages < need)
		o1_kv_pool_alloc(p, &t->pages[t->n_pages++]);
	return 0;
}

int o1_kv_table_share(struct o1_kv_pool *p, struct o1_block_table *t,
		      uint32_t page)
{
	int err;

	if (t->n_pages >= t->capacity) {
		o1_err("kv pool: block table full (%u pages)", t->capacity);
		return -O1_E_CONTEXT;
	}
	err = o1_kv_pool_get(p, page);
	if (!err)
		t->pages[t->n_pages++] = page;
	return err;
}

void o1_kv_table_truncate(struct o1_kv_pool *p, struct o1_block_table *t,
			  uint32_t n_tokens)
{
	uint32_t keep =
	    (uint32_t)(((uint64_t)n_tokens + p->layout.page_tokens - 1) /
		       p->layout.page_tokens);

	while (t->n_pages > keep)
		o1_kv_pool_put(p, t->pages[--t->n_pages]);
}

void o1_kv_table_fini(struct o1_kv_pool *p, struct o1_block_table *t)
{
	o1_kv_table_truncate(p, t, 0);
}

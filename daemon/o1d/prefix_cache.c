/* The prefix cache (see prefix_cache.h). Entries are indexed by page id:
 * ent[page] is listed when .listed; buckets chain entries with the same
 * key bits; an intrusive doubly linked list keeps LRU order (head = least
 * recent). NONE ends every chain. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "prefix_cache.h"

#define NONE UINT32_MAX

struct entry {
	uint64_t key;
	uint64_t parent;
	uint32_t next; /* bucket chain */
	uint32_t prev_lru;
	uint32_t next_lru;
	bool listed;
};

struct o1_prefix_cache {
	struct o1_kv_pool *pool;
	uint32_t n_pages;
	uint32_t page_tokens;
	uint32_t n_buckets; /* power of two */
	uint32_t *buckets;
	struct entry *ent;
	int32_t *tokens; /* n_pages x page_tokens */
	uint32_t lru_head, lru_tail;
	uint32_t size;
};

static uint64_t mix(uint64_t h)
{
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return h;
}

uint64_t o1_prefix_cache_key(uint64_t parent, const int32_t *tokens, uint32_t n)
{
	uint64_t h = mix(parent + 0x9e3779b97f4a7c15ull);

	for (uint32_t i = 0; i < n; i++)
		h = mix(h ^ (uint32_t)tokens[i]) + i;
	return h;
}

uint64_t o1_prefix_cache_salt(uint64_t secret, uint32_t uid)
{
	return mix(mix(secret) ^ ((uint64_t)uid << 1 | 1));
}

int o1_prefix_cache_create(struct o1_kv_pool *pool,
			   struct o1_prefix_cache **out)
{
	const struct o1_kv_layout *l = o1_kv_pool_layout(pool);
	struct o1_prefix_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->pool = pool;
	c->n_pages = l->n_pages;
	c->page_tokens = l->page_tokens;
	c->n_buckets = 1;
	while (c->n_buckets < c->n_pages)
		c->n_buckets <<= 1;
	c->buckets = malloc(c->n_buckets * sizeof(uint32_t));
	c->ent = calloc(c->n_pages, sizeof(struct entry));
	c->tokens =
	    malloc((size_t)c->n_pages * c->page_tokens * sizeof(int32_t));
	if (!c->buckets || !c->ent || !c->tokens) {
		o1_prefix_cache_destroy(c);
		return -ENOMEM;
	}
	memset(c->buckets, 0xff, c->n_buckets * sizeof(uint32_t));
	c->lru_head = c->lru_tail = NONE;
	*out = c;
	return 0;
}

static void lru_unlink(struct o1_prefix_cache *c, uint32_t p)
{
	struct entry *e = &c->ent[p];

	if (e->prev_lru != NONE)
		c->ent[e->prev_lru].next_lru = e->next_lru;
	else
		c->lru_head = e->next_lru;
	if (e->next_lru != NONE)
		c->ent[e->next_lru].prev_lru = e->prev_lru;
	else
		c->lru_tail = e->prev_lru;
}

static void lru_push(struct o1_prefix_cache *c, uint32_t p)
{
	struct entry *e = &c->ent[p];

	e->prev_lru = c->lru_tail;
	e->next_lru = NONE;
	if (c->lru_tail != NONE)
		c->ent[c->lru_tail].next_lru = p;
	else
		c->lru_head = p;
	c->lru_tail = p;
}

static uint32_t *bucket(struct o1_prefix_cache *c, uint64_t key)
{
	return &c->buckets[key & (c->n_buckets - 1)];
}

static uint32_t find(struct o1_prefix_cache *c, uint64_t key)
{
	uint32_t p = *bucket(c, key);

	while (p != NONE && c->ent[p].key != key)
		p = c->ent[p].next;
	return p;
}

int o1_prefix_cache_lookup(struct o1_prefix_cache *c, uint64_t key,
			   uint64_t parent, const int32_t *tokens,
			   uint32_t *page)
{
	uint32_t p = find(c, key);

	if (p == NONE || c->ent[p].parent != parent ||
	    memcmp(c->tokens + (size_t)p * c->page_tokens, tokens,
		   c->page_tokens * sizeof(int32_t)))
		return -ENOENT;
	lru_unlink(c, p);
	lru_push(c, p);
	*page = p;
	return 0;
}

int o1_prefix_cache_insert(struct o1_prefix_cache *c, uint64_t key,
			   uint64_t parent, const int32_t *tokens,
			   uint32_t page)
{
	struct entry *e;
	int err;

	if (page >= c->n_pages) {
		o1_err("prefix cache: page %u out of range (%u pages)", page,
		       c->n_pages);
		return -O1_E_BOUNDS;
	}
	e = &c->ent[page];
	if (e->listed || find(c, key) != NONE)
		return -EEXIST;
	err = o1_kv_pool_get(c->pool, page);
	if (err)
		return err;
	o1_kv_pool_keep(c->pool, page, true);
	e->key = key;
	e->parent = parent;
	e->listed = true;
	memcpy(c->tokens + (size_t)page * c->page_tokens, tokens,
	       c->page_tokens * sizeof(int32_t));
	e->next = *bucket(c, key);
	*bucket(c, key) = page;
	lru_push(c, page);
	c->size++;
	return 0;
}

static void drop(struct o1_prefix_cache *c, uint32_t p)
{
	uint32_t *link = bucket(c, c->ent[p].key);

	while (*link != p)
		link = &c->ent[*link].next;
	*link = c->ent[p].next;
	lru_unlink(c, p);
	c->ent[p].listed = false;
	c->size--;
	o1_kv_pool_keep(c->pool, p, false);
	o1_kv_pool_put(c->pool, p);
}

uint32_t o1_prefix_cache_evict(struct o1_prefix_cache *c, uint32_t n)
{
	uint32_t freed = 0, p = c->lru_head;

	while (p != NONE && freed < n) {
		uint32_t next = c->ent[p].next_lru;

		if (o1_kv_pool_refs(c->pool, p) == 1) {
			drop(c, p);
			freed++;
		}
		p = next;
	}
	return freed;
}

void o1_prefix_cache_clear(struct o1_prefix_cache *c)
{
	o1_prefix_cache_evict(c, UINT32_MAX);
}

uint32_t o1_prefix_cache_size(const struct o1_prefix_cache *c)
{
	return c->size;
}

/* The pool counts them as references change: the scheduler asks every
 * step, and a walk of the LRU list cost a cache miss per cached page
 * (tens of thousands of pages on a GPU: issue 17). */
uint32_t o1_prefix_cache_evictable(const struct o1_prefix_cache *c)
{
	return o1_kv_pool_kept_idle(c->pool);
}

void o1_prefix_cache_destroy(struct o1_prefix_cache *c)
{
	if (!c)
		return;
	if (c->ent && c->buckets)
		while (c->lru_head != NONE)
			drop(c, c->lru_head);
	free(c->buckets);
	free(c->ent);
	free(c->tokens);
	free(c);
}

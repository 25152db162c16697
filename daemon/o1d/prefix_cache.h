/* The prefix cache: full KV pages found again by the tokens they hold.
 *
 * A page is keyed by a chained hash: key(page i) = hash(key(page i-1),
 * tokens of page i), with key(page -1) = a salt the daemon derives from the
 * peer's credentials, so two tenants never share (or time) each other's
 * pages. The entry also keeps its parent key and its tokens, and a lookup
 * compares both: a hash collision can never hand out the wrong KV.
 *
 * Invariants:
 * - At most one entry per page id and one per key; the cache holds one
 *   pool reference on every page it lists (taken at insert).
 * - A page with pool refcount 1 is held by the cache alone: it is
 *   "cached" (evictable); evict releases those in least-recently-used
 *   order (lookups and inserts make an entry most recent).
 * - Everything is allocated at create (n_pages entries, page_tokens
 *   tokens each); one thread (the engine loop) uses it.
 */
#ifndef O1_PREFIX_CACHE_H
#define O1_PREFIX_CACHE_H

#include <stdint.h>

#include "backend/kv_pool.h"

struct o1_prefix_cache;

int o1_prefix_cache_create(struct o1_kv_pool *pool,
			   struct o1_prefix_cache **out);
/* Releases every reference the cache holds, then frees. Accepts NULL. */
void o1_prefix_cache_destroy(struct o1_prefix_cache *c);

/* The key of a page holding TOKENS (page_tokens of them) after a page
 * keyed PARENT (or the salt for the first page). */
uint64_t o1_prefix_cache_key(uint64_t parent, const int32_t *tokens,
			     uint32_t n);
/* The salt of a tenant: SECRET is the daemon's random secret. */
uint64_t o1_prefix_cache_salt(uint64_t secret, uint32_t uid);

/* Finds the page keyed KEY after PARENT holding TOKENS: 0 and *page, or
 * -ENOENT. A hit becomes the most recently used entry. */
int o1_prefix_cache_lookup(struct o1_prefix_cache *c, uint64_t key,
			   uint64_t parent, const int32_t *tokens,
			   uint32_t *page);
/* Lists PAGE (full, never written again) under KEY and takes a pool
 * reference. -EEXIST when the key or the page is listed already. */
int o1_prefix_cache_insert(struct o1_prefix_cache *c, uint64_t key,
			   uint64_t parent, const int32_t *tokens,
			   uint32_t page);
/* Releases up to N pages only the cache holds, least recently used
 * first; returns how many were freed. */
uint32_t o1_prefix_cache_evict(struct o1_prefix_cache *c, uint32_t n);
/* Pages listed, and those of them only the cache holds. */
uint32_t o1_prefix_cache_size(const struct o1_prefix_cache *c);
uint32_t o1_prefix_cache_evictable(const struct o1_prefix_cache *c);
/* Releases every page only the cache holds. */
void o1_prefix_cache_clear(struct o1_prefix_cache *c);

#endif

/* Per-client counts behind the scheduler's shares (engine thread only).
 *
 * For every client with a request held by the scheduler: how many of its
 * sequences are held (in any list) and how many run, plus a page count the
 * scheduler fills on demand when it must choose whom to cut back. The fair
 * share of a resource of N units is ceil(N / clients holding work), at
 * least 1, so a client alone may use everything and k clients at most
 * about 1/k each when they compete.
 *
 * An open-addressed table (linear probing, backward-shift deletion), sized
 * at create for the most clients that can hold work at once (one per
 * request slot): nothing is allocated per request.
 *
 * Invariants: a client has an entry iff held > 0; running <= held;
 * n_clients is the number of entries; the table is never more than half
 * full.
 */
#ifndef O1_CLIENT_SHARE_H
#define O1_CLIENT_SHARE_H

#include <stdint.h>

struct o1_client_share;

/* MAX_CLIENTS: the most clients with work at once (> 0). */
int o1_client_share_create(uint32_t max_clients, struct o1_client_share **out);
/* Accepts NULL. */
void o1_client_share_destroy(struct o1_client_share *c);
/* CLIENT holds one more sequence (its entry is made at the first). */
void o1_client_share_hold(struct o1_client_share *c, uint32_t client);
/* CLIENT holds one less (its entry goes with the last); a client without
 * an entry is a broken invariant, logged and ignored. */
void o1_client_share_drop(struct o1_client_share *c, uint32_t client);
/* One more (DELTA 1) or one less (-1) of CLIENT's sequences runs. */
void o1_client_share_run(struct o1_client_share *c, uint32_t client,
			 int delta);
uint32_t o1_client_share_running(const struct o1_client_share *c,
				 uint32_t client);
/* Clients holding work. */
uint32_t o1_client_share_clients(const struct o1_client_share *c);
/* ceil(N / clients holding work), at least 1 (N when there are none). */
uint32_t o1_client_share_fair(const struct o1_client_share *c, uint32_t n);
/* The page scratch: zeroes every client's count, then adds PAGES to
 * CLIENT's (a client without an entry is ignored). */
void o1_client_share_clear_pages(struct o1_client_share *c);
void o1_client_share_add_pages(struct o1_client_share *c, uint32_t client,
			       uint32_t pages);
uint32_t o1_client_share_pages(const struct o1_client_share *c,
			       uint32_t client);

#endif
